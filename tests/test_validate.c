/*
 * The validation program's commands that must work without a GPU: confirm
 * prints tailsim's predictions for its mini rollout and exits 77 (skipped)
 * when no device is present; with a device it must exit 0 or 1 (targets met
 * or not), never 2.  The CSV that calibrate writes must load in the strict
 * reader, and validate/gpu.sh must run its steps after calibrate on the CPU
 * (a dry run with GPU_SH_CSV) leaving at most 8 files in $OUT.  Skips when
 * nvcc was not found (no tailsim-validate).
 *
 * validate/calib_store.c is plain C (no CUDA): compiled into this test, it
 * writes the CSV and the database exactly as `tailsim-validate calibrate`
 * does.  models/calib.h is not included here (its calib_row is the reader's,
 * a different struct of the same name): the reader runs as
 * `tailsim-validate check`, in a child process.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers.h"
#include "validate/calib_store.c"

Test(validate, confirm_predicts_without_a_gpu, .timeout = 600)
{
    if (access("build/tailsim-validate", X_OK) != 0)
        cr_skip_test("build/tailsim-validate not built (no nvcc)");
    FILE *p = popen("build/tailsim-validate confirm --responses 48 --max-len 2048 2>&1", "r");
    cr_assert_not_null(p);
    char buf[8192] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    int st = pclose(p);
    cr_assert(WIFEXITED(st));
    int rc = WEXITSTATUS(st);
    cr_assert(rc == 77 || rc == 0 || rc == 1, "exit %d: %s", rc, buf);
    cr_assert(strstr(buf, "predicted: baseline"), "%s", buf);
    cr_assert(strstr(buf, "speedup"), "%s", buf);
    if (rc == 77)
        cr_assert(strstr(buf, "no CUDA device"), "%s", buf);
}

Test(validate, confirm_rejects_bad_flags)
{
    if (access("build/tailsim-validate", X_OK) != 0)
        cr_skip_test("build/tailsim-validate not built (no nvcc)");
    int st = system("build/tailsim-validate confirm --responses 0 >/dev/null 2>&1");
    cr_assert(WIFEXITED(st));
    cr_assert_eq(WEXITSTATUS(st), 2);
    st = system("build/tailsim-validate confirm --trace build/no-such-trace.jsonl >/dev/null 2>&1");
    cr_assert_eq(WEXITSTATUS(st), 2);
}

/* ---- the calibration CSV as calibrate writes it, and gpu.sh on the CPU ------ */

static ts_err oom; /* calib_add fails only without memory */

static calib_row row(const char *op)
{
    calib_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.op, sizeof r.op, "%s", op);
    return r;
}

/* A synthetic set (device "Synthetic H200 not measured"): the ops
 * calibrate times, priced by a plain roofline (700 TFLOP/s, 4 TB/s, 4 us of
 * latency), plus rows the cost model does not price. */
static void synth_set(calib_set *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->device, sizeof s->device, "Synthetic H200 not measured");
    static const double gm[] = {1, 8, 32, 128, 512, 2048, 4096};
    static const double gnk[][2] = {{4608, 3584}, {3584, 3584}, {37888, 3584}, {3584, 18944}};
    for (size_t i = 0; i < sizeof gm / sizeof gm[0]; i++)
        for (size_t j = 0; j < sizeof gnk / sizeof gnk[0]; j++) {
            calib_row r = row("gemm");
            r.m = gm[i], r.n = gnk[j][0], r.k = gnk[j][1];
            r.flops = 2 * r.m * r.n * r.k;
            r.bytes = 2 * (r.m * r.k + r.n * r.k + r.m * r.n);
            calib_add(s, &r, &oom);
        }
    calib_row r = row("gemm_peak");
    r.m = r.n = r.k = 8192;
    r.flops = 2 * 8192.0 * 8192 * 8192;
    r.bytes = 6 * 8192.0 * 8192;
    calib_add(s, &r, &oom);
    r = row("copy");
    r.m = 1 << 30;
    r.bytes = 2.0 * r.m;
    calib_add(s, &r, &oom);
    for (int b = 1; b <= 256; b *= 4)
        for (int ctx = 1024; ctx <= 32768; ctx *= 4) {
            r = row("decode_attn");
            r.m = 28, r.n = 4, r.k = 128, r.batch = b, r.ctx_sum = (double)b * ctx;
            r.ctx_max = ctx, r.q_len = 1;
            r.flops = 4.0 * 28 * 128 * r.ctx_sum;
            r.bytes = 4.0 * 4 * 128 * r.ctx_sum + 4.0 * b * 28 * 128;
            calib_add(s, &r, &oom);
            snprintf(r.op, sizeof r.op, "chunk_attn");
            r.q_len = 16;
            r.flops *= 16;
            calib_add(s, &r, &oom);
        }
    static const char *rowops[] = {"rmsnorm", "rope", "swiglu", "embed"};
    for (int o = 0; o < 4; o++)
        for (int m = 1; m <= 4096; m *= 8) {
            r = row(rowops[o]);
            r.m = m, r.n = o == 1 ? 32 : 3584, r.k = o == 1 ? 128 : 0;
            r.bytes = 4.0 * m * r.n * (o == 1 ? 128 : 1);
            calib_add(s, &r, &oom);
        }
    r = row("train_fwd_bwd");
    r.m = 4096, r.n = 3584, r.k = 1, r.batch = 2, r.ctx_sum = 4096, r.ctx_max = 2048, r.q_len = 2;
    r.flops = 1e13, r.bytes = 1e10, r.peak_bytes = 4.5e9;
    calib_add(s, &r, &oom);
    for (size_t i = 0; i < s->n; i++) {
        calib_row *x = &s->rows[i];
        double t = x->flops / 7e14 > x->bytes / 4e12 ? x->flops / 7e14 : x->bytes / 4e12;
        float us[7];
        for (int k = 0; k < 7; k++) /* a little spread around the roofline */
            us[k] = (float)((t + 4e-6) * 1e6 * (1.0 + 0.01 * (k - 3)));
        calib_stats(us, 7, &x->p10_us, &x->median_us, &x->p90_us);
        x->sm_mhz = 1980, x->mem_mhz = 3201;
    }
}

static int run_status(const char *cmd)
{
    int st = system(cmd);
    cr_assert(WIFEXITED(st), "%s: no exit status", cmd);
    return WEXITSTATUS(st);
}

/* What calibrate writes, the strict reader accepts: every row, the fit runs. */
/* calib_write_algos(): the header and one row per record, the device
 * quoted; a file it cannot write is an error naming it, nothing left. */
Test(validate, gemm_algos_csv_written_whole_or_not_at_all)
{
    char dir[256], path[320];
    tmpdir_create(dir, sizeof dir, "algos");
    snprintf(path, sizeof path, "%s/gemm_algos.csv", dir);
    const kt_blas_algo a[2] = {
        {17, 4608, 3584, 1, 0, 1, 31, 17, "64x128", 3, 1, 0, 1, 2},
        {64, 128, 64, 28, 1, 0, 6, 23, "128x256", 5, 4, 2, 0, 0},
    };
    ts_err e = {{0}};
    cr_assert_eq(calib_write_algos("NVIDIA H200", a, 2, path, &e), 0, "%s", e.msg);
    char *got = slurp_file(path);
    cr_assert_not_null(got);
    cr_expect_str_eq(got, CALIB_ALGOS_HEADER "\n"
                          "\"NVIDIA H200\",17,4608,3584,1,0,1,31,64x128,17,3,1,0,1,2\n"
                          "\"NVIDIA H200\",64,128,64,28,1,0,6,128x256,23,5,4,2,0,0\n");
    free(got);
    snprintf(path, sizeof path, "%s/no-such-dir/gemm_algos.csv", dir);
    cr_expect_eq(calib_write_algos("NVIDIA H200", a, 2, path, &e), -1);
    cr_expect(strstr(e.msg, "no-such-dir/gemm_algos.csv"), "%s", e.msg);
    tmpdir_remove(dir);
}

Test(validate, calibrate_csv_round_trips_through_the_reader)
{
    if (access("build/tailsim-validate", X_OK) != 0)
        cr_skip_test("build/tailsim-validate not built (no nvcc)");
    char dir[256], csv[320], db[320], cmd[1024];
    tmpdir_create(dir, sizeof dir, "calibrt");
    calib_set s;
    synth_set(&s);
    ts_err e = {{0}};
    snprintf(csv, sizeof csv, "%s/calib.csv", dir);
    snprintf(db, sizeof db, "%s/calib.db", dir);
    cr_assert_eq(calib_write_csv(&s, csv, &e), 0, "%s", e.msg);
    cr_assert_eq(calib_write_db(&s, db, &e), 0, "%s", e.msg);
    snprintf(cmd, sizeof cmd, "build/tailsim-validate check %s --json >%s/check.json 2>/dev/null", csv,
             dir);
    int rc = run_status(cmd);
    char path[320];
    snprintf(path, sizeof path, "%s/check.json", dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    cr_assert(rc == 0 || rc == 1, "check exit %d (see %s)", rc, path);
    cr_assert_not_null(j, "%s: %s", path, je.text);
    json_t *rows = json_object_get(j, "rows");
    cr_assert(json_is_integer(rows), "no integer 'rows' in %s", path);
    cr_expect_eq((size_t)json_integer_value(rows), s.n);
    json_decref(j);
    calib_free(&s);
    tmpdir_remove(dir);
}

/* gpu.sh on a machine without a GPU, GPU_SH_CSV standing in for the
 * calibration: every step runs, selftest and calibrate say "no GPU" (77),
 * check reads the CSV, confirm predicts with models/hw/h200.ini fitted to it
 * and skips the replay (77); $OUT gets at most 8 files and no folder,
 * summary.txt ends with check's report, and the working tree's
 * models/calib/ is left alone. */
Test(validate, gpu_sh_dry_run_without_a_gpu, .timeout = 300)
{
    if (access("build/tailsim-validate", X_OK) != 0)
        cr_skip_test("build/tailsim-validate not built (no nvcc)");
    if (run_status("nvidia-smi -L >/dev/null 2>&1") == 0)
        cr_skip_test("a GPU is present: run validate/gpu.sh itself");
    struct stat sb;
    int had_calib = stat("models/calib/h200.csv", &sb) == 0;
    char dir[256], csv[320], cmd[2048];
    tmpdir_create(dir, sizeof dir, "gpush");
    calib_set s;
    synth_set(&s);
    ts_err e = {{0}};
    snprintf(csv, sizeof csv, "%s/synth.csv", dir);
    cr_assert_eq(calib_write_csv(&s, csv, &e), 0, "%s", e.msg);
    snprintf(cmd, sizeof cmd,
             "OUT=%s/out GPU_SH_WORK=%s/work GPU_SH_CSV=%s sh validate/gpu.sh >%s/log 2>&1", dir,
             dir, csv, dir);
    int rc = run_status(cmd);
    cr_expect_eq(rc, 1, "gpu.sh exit %d: selftest cannot pass without a GPU", rc);

    char path[320], buf[65536] = {0};
    snprintf(path, sizeof path, "%s/out/summary.txt", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no %s", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    cr_expect(strstr(buf, "selftest exit 77, calibrate exit 77"), "%s", buf);
    cr_expect(strstr(buf, "check exit 0") || strstr(buf, "check exit 1"), "%s", buf);
    cr_expect(strstr(buf, "confirm exit 77"), "%s", buf);
    cr_expect(strstr(buf, "models/hw/h200.ini fitted to calib.csv"), "%s", buf);
    char want[64];
    snprintf(want, sizeof want, "calib.csv: %zu rows", s.n);
    cr_expect(strstr(buf, want), "no '%s' in %s", want, buf);
    cr_expect(strstr(buf, "gemm_peak"), "%s", buf);
    /* the dry run prints the first run's plan, which fits the window */
    const char *pt = strstr(buf, "plan total: ");
    cr_assert_not_null(pt, "no plan in %s", buf);
    int total = -1;
    cr_assert_eq(sscanf(pt, "plan total: %d s", &total), 1, "%s", pt);
    cr_expect(total > 0 && total <= 300, "the first run's plan takes %d s (> 300)", total);
    cr_expect(strstr(buf, "plan  calibrate") && strstr(buf, "calibrate --tail"), "%s", buf);

    /* at most 8 plain files, no folder: what the device tool returns */
    snprintf(cmd, sizeof cmd, "test $(find %s/out -mindepth 1 | wc -l) -le 8 && "
                              "test -z \"$(find %s/out -mindepth 1 ! -type f)\"", dir, dir);
    cr_expect_eq(run_status(cmd), 0, "more than 8 entries, or a folder, under %s/out", dir);
    /* check's report: in GPU_SH_WORK, and whole at the end of summary.txt
     * (its slot in $OUT went to gemm_algos.csv, which a dry run lacks) */
    snprintf(path, sizeof path, "%s/work/check.txt", dir);
    cr_expect_eq(access(path, R_OK), 0, "no %s", path);
    cr_expect(strstr(buf, "== check's report (check.txt)"), "%s", buf);
    cr_expect(strstr(buf, "gemm_algos.csv: none"), "%s", buf);
    if (!had_calib)
        cr_expect_neq(stat("models/calib/h200.csv", &sb), 0,
                      "gpu.sh wrote models/calib/h200.csv into the working tree");
    calib_free(&s);
    tmpdir_remove(dir);
}

/* calib_write_db() changes nothing in a file that is not its own or whose
 * schema version it does not write: another program's SQLite database
 * (whose own `calib` table must not be emptied), a negative or newer
 * version.  Bytes and side files are checked, so this holds as root too. */
Test(validate, calib_db_leaves_foreign_files_untouched)
{
    char dir[256], path[320], cmd[1024];
    tmpdir_create(dir, sizeof dir, "calibdb");
    static const char *const setups[] = {
        "CREATE TABLE calib(x); INSERT INTO calib VALUES (42);", /* another program's */
        "CREATE TABLE t(x); PRAGMA user_version = -1;",
        "PRAGMA user_version = -1000000;",
        "PRAGMA user_version = 99;",
    };
    calib_set s;
    synth_set(&s);
    for (size_t i = 0; i < sizeof setups / sizeof setups[0]; i++) {
        snprintf(path, sizeof path, "%s/f%zu.db", dir, i);
        sqlite3 *db = NULL;
        cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
        cr_assert_eq(sqlite3_exec(db, setups[i], NULL, NULL, NULL), SQLITE_OK, "%s", setups[i]);
        sqlite3_close(db);
        snprintf(cmd, sizeof cmd, "cp %s %s.orig", path, path);
        cr_assert_eq(system(cmd), 0);
        ts_err e = {{0}};
        cr_expect_eq(calib_write_db(&s, path, &e), -1, "case %zu written", i);
        cr_expect(strstr(e.msg, "left untouched"), "case %zu: %s", i, e.msg);
        snprintf(cmd, sizeof cmd, "cmp -s %s %s.orig", path, path);
        cr_expect_eq(system(cmd), 0, "case %zu: file changed", i);
        char side[400];
        snprintf(side, sizeof side, "%s-wal", path);
        cr_expect_neq(access(side, F_OK), 0, "case %zu: -wal left", i);
    }
    /* a new file and one of ours are written */
    snprintf(path, sizeof path, "%s/ours.db", dir);
    ts_err e = {{0}};
    cr_assert_eq(calib_write_db(&s, path, &e), 0, "%s", e.msg);
    cr_assert_eq(calib_write_db(&s, path, &e), 0, "%s", e.msg);
    calib_free(&s);
    tmpdir_remove(dir);
}

/* The plan's total of `gpu.sh ARGS --plan` (-1 when none is printed), and
 * its exit status in *rc. */
static int plan_total(const char *args, int *rc)
{
    char cmd[256], out[4096] = {0};
    snprintf(cmd, sizeof cmd, "sh validate/gpu.sh %s --plan 2>&1", args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    const char *t = strstr(out, "plan total: ");
    int total = -1;
    if (!t || sscanf(t, "plan total: %d s", &total) != 1)
        cr_log_error("no plan total in: %s", out);
    /* every step has a line with its seconds, and they add up */
    int sum = 0, secs;
    char name[32];
    for (const char *l = strstr(out, "plan  "); l; l = strstr(l + 1, "\nplan  "))
        if (sscanf(l[0] == '\n' ? l + 1 : l, "plan %31s %d s", name, &secs) == 2)
            sum += secs;
    cr_expect_eq(sum, total, "the steps add up to %d s, the total says %d s", sum, total);
    return total;
}

/* A 15-minute device window: machine start (1-2 min) + the first run (at
 * most 300 s of device time, build included) + the follow-up. */
Test(validate, gpu_sh_plans_fit_the_device_window)
{
    int rc, first = plan_total("", &rc);
    cr_expect_eq(rc, 0, "gpu.sh --plan exit %d", rc);
    cr_expect(first > 0 && first <= 300, "the first run's plan takes %d s", first);
    int more = plan_total("--more", &rc);
    cr_expect_eq(rc, 0, "gpu.sh --more --plan exit %d", rc);
    cr_expect(more > 0 && first + more <= 900 - 120, "first %d s + --more %d s leave no room "
              "for two machine starts in 900 s", first, more);
    cr_expect_eq(run_status("sh validate/gpu.sh --bogus >/dev/null 2>&1"), 2);
}

/* gpu.sh's libcublasLt fallback takes the exact soname the binary links,
 * not another major version lying beside it. */
Test(validate, gpu_sh_finds_the_cublas_soname_the_binary_links)
{
    if (access("build/tailsim-validate", X_OK) != 0)
        cr_skip_test("build/tailsim-validate not built (no nvcc)");
    char *need = run_capture(". validate/gpu-lib.sh && gpu_cublas_soname build/tailsim-validate");
    need[strcspn(need, "\n")] = 0;
    cr_assert(strncmp(need, "libcublasLt.so.", 15) == 0, "soname '%s'", need);
    char dir[256], cmd[2048];
    tmpdir_create(dir, sizeof dir, "cublas");
    /* a wrong major version first in the search order, the right one later */
    snprintf(cmd, sizeof cmd, "mkdir -p %s/a/wrong %s/b/right && touch %s/a/wrong/libcublasLt.so.1 "
             "%s/a/wrong/%s.99 %s/a/wrong/libcublasLt.so.99 %s/b/right/%s", dir, dir, dir, dir,
             need, dir, dir, need);
    cr_assert_eq(run_status(cmd), 0);
    snprintf(cmd, sizeof cmd, "GPU_SH_LIBROOTS='%s/a %s/b' sh -c '. validate/gpu-lib.sh && "
             "gpu_cublas_dir build/tailsim-validate' 2>/dev/null", dir, dir);
    char *got = run_capture(cmd);
    got[strcspn(got, "\n")] = 0;
    char want[320];
    snprintf(want, sizeof want, "%s/b/right", dir);
    cr_expect_str_eq(got, want);
    free(got);
    /* none of the right name: nothing, and the reason names the soname */
    snprintf(cmd, sizeof cmd, "GPU_SH_LIBROOTS='%s/a' sh -c '. validate/gpu-lib.sh && "
             "gpu_cublas_dir build/tailsim-validate' 2>&1 >/dev/null; true", dir);
    char *why = run_capture(cmd);
    cr_expect(strstr(why, need) && strstr(why, "no file of that name"), "%s", why);
    free(why);
    free(need);
    tmpdir_remove(dir);
}
