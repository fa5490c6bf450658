/*
 * hw_load()'s use of a calibration next to a hardware INI
 * (models/calib/<gpu>.csv, models/hw_calib.c) and the `tailsim calib check`
 * command, on the synthetic calibration data of tests/calib_synth.h (the
 * fit itself: tests/test_calib.c).
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/util.h"
#include "models/calib.h"
#include "models/cost.h"
#include "models/fit.h"
#include "models/hw.h"
#include "cli/cmd.h"
#include "models/hw_calib.h"
#include "tests/calib_synth.h"


TestSuite(calib_load, .init = calib_tmp_setup, .fini = calib_tmp_teardown);

/* ---- hw_load and models/calib ---------------------------------------------- */

/* Makes <root>/models/hw/h200.ini (a copy of real_ini, or of the shipped
 * one when NULL) and, when s is not NULL, <root>/models/calib/h200.csv. */
static void make_root(const char *root, const char *real_ini, const synth *s, char *ini,
                      size_t n)
{
    char real[4096], dir[600], csv[700];
    ts_err e = {{0}};
    if (real_ini)
        snprintf(real, sizeof real, "%s", real_ini);
    else
        cr_assert_eq(ts_find_data("models/hw", "h200", ".ini", real, sizeof real, &e), 0,
                     "%s", e.msg);
    snprintf(dir, sizeof dir, "%s/models", root);
    mkdir(dir, 0777);
    snprintf(dir, sizeof dir, "%s/models/hw", root);
    mkdir(dir, 0777);
    snprintf(dir, sizeof dir, "%s/models/calib", root);
    mkdir(dir, 0777);
    snprintf(ini, n, "%s/models/hw/h200.ini", root);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", real, ini);
    cr_assert_eq(system(cmd), 0);
    if (s) {
        char path[700];
        snprintf(path, sizeof path, "%s/models/calib/h200.csv", root);
        write_csv(s, path, csv, sizeof csv);
    }
}

Test(calib_load, hw_load_fits_models_calib_next_to_the_ini)
{
    hw_desc t = truth_hw(), ini_hw, hw;
    ts_err e = {{0}};
    static synth s;
    synth_rows(&s, &t, 0.02, 23);
    char ini[700];
    make_root(tmpdir, NULL, &s, ini, sizeof ini);
    cr_assert_eq(hw_load_ini(ini, &ini_hw, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load(ini, &hw, &e), 0, "%s", e.msg);
    expect_rel(hw.gemm_eff, t.gemm_eff, 0.03, "gemm_eff");
    expect_rel(hw.mem_eff, t.mem_eff, 0.03, "mem_eff");
    expect_rel(hw.attn_eff, t.attn_eff, 0.03, "attn_eff");
    expect_rel(hw.launch_s, t.launch_s, 0.03, "launch_s");
    cr_expect_eq(hw.peak_flops, ini_hw.peak_flops);
    char want[64];
    snprintf(want, sizeof want, "/%zu rows fitted at load", s.n);
    cr_expect(!strncmp(hw.calibration, "models/calib/h200.csv (", 23) &&
                  strstr(hw.calibration, want) && strstr(hw.calibration, "Synthetic H200"),
              "%s", hw.calibration);
    cr_expect_str_neq(hw.calibration, ini_hw.calibration);

    setenv("TAILSIM_NO_CALIB", "1", 1);
    cr_assert_eq(hw_load(ini, &hw, &e), 0, "%s", e.msg);
    cr_expect_eq(hw.gemm_eff, ini_hw.gemm_eff);
    cr_expect_str_eq(hw.calibration, ini_hw.calibration);
    setenv("TAILSIM_NO_CALIB", "0", 1);
    cr_assert_eq(hw_load(ini, &hw, &e), 0, "%s", e.msg);
    cr_expect_neq(hw.gemm_eff, ini_hw.gemm_eff);
    unsetenv("TAILSIM_NO_CALIB");

    /* a broken calibration is an error naming the CSV, not a silent fallback */
    char csv[800];
    snprintf(csv, sizeof csv, "%s/models/calib/h200.csv", tmpdir);
    FILE *f = fopen(csv, "a");
    cr_assert_not_null(f);
    fprintf(f, "\"NVIDIA H200\",1980,3201,gemm,1,2,3,0,0,0,0,abc,1,1,1,1,0\n");
    fclose(f);
    cr_expect_eq(hw_load(ini, &hw, &e), -1);
    char at[32];
    snprintf(at, sizeof at, ":%zu: column 12 'median_us'", s.n + 2);
    cr_expect(strstr(e.msg, "h200.csv") && strstr(e.msg, at), "%s", e.msg);
}

Test(calib_load, hw_load_by_name_uses_the_data_root)
{
    /* the shipped INI, found from the executable as ts_data_root() would,
     * without fixing this process's data root before TAILSIM_DATA is set */
    char exe[4096], real[4300] = "";
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert_gt(len, 0);
    exe[len] = 0;
    for (int up = 0; up < 4 && !real[0]; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash)
            break;
        *slash = 0;
        snprintf(real, sizeof real, "%s/models/hw/h200.ini", exe);
        if (access(real, R_OK))
            real[0] = 0;
    }
    cr_assert(real[0], "cannot find models/hw/h200.ini above the test binary");
    setenv("TAILSIM_DATA", tmpdir, 1);
    if (strcmp(ts_data_root(), tmpdir))
        cr_skip_test("the data root was fixed earlier in this process (run forked)");
    char ini[700];
    make_root(tmpdir, real, NULL, ini, sizeof ini);
    hw_desc before, hw;
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h200", &before, &e), 0, "%s", e.msg);
    cr_expect(strstr(before.calibration, "models/calib") == NULL, "%s", before.calibration);
    hw_desc t = truth_hw(); /* from the temporary root's copy of h200.ini */
    static synth s;
    synth_rows(&s, &t, 0.02, 29);
    make_root(tmpdir, real, &s, ini, sizeof ini);
    cr_assert_eq(hw_load("h200", &hw, &e), 0, "%s", e.msg);
    expect_rel(hw.gemm_eff, t.gemm_eff, 0.03, "gemm_eff");
    cr_expect(!strncmp(hw.calibration, "models/calib/h200.csv (", 23), "%s", hw.calibration);
    cr_expect_neq(before.gemm_eff, hw.gemm_eff);
}

/* ---- the command ------------------------------------------------------------ */

Test(calib_load, calib_check_command)
{
    hw_desc t = truth_hw();
    static synth s;
    synth_rows(&s, &t, 0.02, 31);
    char path[512], ini[600];
    write_csv(&s, "cmd.csv", path, sizeof path);
    snprintf(ini, sizeof ini, "%s/fitted.ini", tmpdir);
    char a0[] = "calib", a1[] = "check", js[] = "--json", o[] = "-o", hw[] = "--hw",
         h200[] = "h200", bogus[] = "--bogus", none[] = "/nonexistent.csv";
    cr_redirect_stdout();
    cr_redirect_stderr();
    char *ok[] = {a0, a1, path, hw, h200, js, o, ini, NULL};
    cr_expect_eq(cmd_calib(8, ok), 0);
    char *bad_opt[] = {a0, a1, path, bogus, NULL};
    cr_expect_eq(cmd_calib(4, bad_opt), 2);
    char *no_csv[] = {a0, a1, NULL};
    cr_expect_eq(cmd_calib(2, no_csv), 2);
    char *missing[] = {a0, a1, none, NULL};
    cr_expect_eq(cmd_calib(3, missing), 1);
    hw_desc fitted;
    ts_err e = {{0}};
    cr_assert_eq(hw_load(ini, &fitted, &e), 0, "%s", e.msg);
    expect_rel(fitted.gemm_eff, t.gemm_eff, 0.03, "gemm_eff from the written INI");
    expect_rel(fitted.gemm_lat_s, t.gemm_lat_s, 0.03, "gemm_lat_s from the written INI");
    cr_expect_eq(fitted.sms, t.sms);
    cr_expect(strstr(fitted.calibration, "cmd.csv (") != NULL, "%s", fitted.calibration);
}

/* Pinned host copies in the CSV (the validation program's host group) set
 * pcie_bw: the slower direction of the largest copies; the fitted INI that
 * `calib check -o` writes keeps it and every [host] key. */
Test(calib_load, host_copies_set_the_host_link)
{
    hw_desc t = truth_hw(), ini_hw, hw;
    ts_err e = {{0}};
    static synth s;
    synth_rows(&s, &t, 0.02, 29);
    char ini[700], csv[800];
    make_root(tmpdir, NULL, &s, ini, sizeof ini);
    cr_assert_eq(hw_load_ini(ini, &ini_hw, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load(ini, &hw, &e), 0, "%s", e.msg);
    cr_expect_eq(hw.pcie_bw, ini_hw.pcie_bw, "no host rows: the INI's");
    snprintf(csv, sizeof csv, "%s/models/calib/h200.csv", tmpdir);
    FILE *f = fopen(csv, "a");
    cr_assert_not_null(f);
    double small = 67108864.0, big = 1073741824.0;
    fprintf(f, "\"Synthetic H200\",1980,3201,h2d,%.0f,0,0,0,0,0,0,%.3f,1,1,0,%.0f,0\n", small,
            small / 30e9 * 1e6, small);
    fprintf(f, "\"Synthetic H200\",1980,3201,d2h,%.0f,0,0,0,0,0,0,%.3f,1,1,0,%.0f,0\n", small,
            small / 30e9 * 1e6, small);
    fprintf(f, "\"Synthetic H200\",1980,3201,h2d,%.0f,0,0,0,0,0,0,%.3f,1,1,0,%.0f,0\n", big,
            big / 52e9 * 1e6, big);
    fprintf(f, "\"Synthetic H200\",1980,3201,d2h,%.0f,0,0,0,0,0,0,%.3f,1,1,0,%.0f,0\n", big,
            big / 48e9 * 1e6, big);
    fclose(f);
    cr_assert_eq(hw_load(ini, &hw, &e), 0, "%s", e.msg);
    expect_rel(hw.pcie_bw, 48e9, 1e-6, "pcie_bw");
    expect_rel(hw.gemm_eff, t.gemm_eff, 0.03, "the host rows stay out of the fit");

    calib_row *rows;
    size_t n;
    load(csv, &rows, &n);
    double bw = 0;
    cr_expect_eq(calib_host_bw(rows, n - 4, &bw), -1, "no host rows");
    cr_expect_eq(calib_host_bw(rows, n - 1, &bw), 0);
    expect_rel(bw, 30e9, 1e-6, "the largest d2h left is the 64 MiB one");
    char out[800];
    snprintf(out, sizeof out, "%s/fitted.ini", tmpdir);
    fit_result all;
    cr_assert_eq(fit_write_calibrated_ini(&ini_hw, rows, n, csv, "tailsim calib check", out,
                                          &all, &e),
                 0, "%s", e.msg);
    free(rows);
    hw_desc back;
    cr_assert_eq(hw_load_ini(out, &back, &e), 0, "%s", e.msg);
    expect_rel(back.pcie_bw, 48e9, 1e-6, "written pcie_bw");
    cr_expect_eq(back.sched_s, ini_hw.sched_s);
    cr_expect_eq(back.host_mem_bw, ini_hw.host_mem_bw);
    cr_expect_eq(back.host_bytes, ini_hw.host_bytes);
}
