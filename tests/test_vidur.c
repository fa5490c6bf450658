/*
 * Tests of the Vidur operator profiles against the cost model (models/vidur.c,
 * `tailsim calib vidur`): the CSV reader and its errors, the calib command's
 * exit codes and --rows / --bands listings, and the acceptance check on the
 * measured H100 operator times (skipped when $TAILSIM_SHARED/profiles is
 * absent).  Split from test_models.c.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "models/cost.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "models/vidur.h"
#include "cli/cmd.h"

static hw_desc h100;

static void setup(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &h100, &e), 0, "%s", e.msg);
}

TestSuite(models, .init = setup);

/* Writes `text` to a fresh temporary file; its path goes to buf. */
static void write_tmp(const char *text, char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/tailsim-test-XXXXXX");
    int fd = mkstemp(buf);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- Vidur CSVs -------------------------------------------------------------- */

static const char *shared_dir(void)
{
    const char *s = getenv("TAILSIM_SHARED");
    return s && *s ? s : "../shared";
}

static void vidur_acceptance(const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/profiles/vidur-h100/%s", shared_dir(), file);
    if (access(path, R_OK))
        cr_skip_test("%s not found (set TAILSIM_SHARED)", path);
    vidur_table t;
    ts_err e = {{0}};
    cr_assert_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    cr_expect_gt(t.n, 1000);
    vidur_report r;
    vidur_evaluate(&t, &h100, &r);
    for (int o = 0; o < VOP_COUNT; o++) {
        if (!vidur_op_is_gemm(o))
            continue;
        cr_expect_eq(r.ops[o].n, (int)t.n, "%s", vidur_op_names[o]);
        cr_expect_leq(r.ops[o].mape, 12.0, "%s %s: MAPE %.2f%%", file, vidur_op_names[o],
                      r.ops[o].mape);
    }
    cr_expect_leq(r.gemm_mape, 12.0);
    cr_expect_leq(r.overall_mape, 25.0);
    /* issue 18: decode-sized GEMMs (1-32 tokens) within 15% on average per op
     * (the model before it: up to 50% slow), no GEMM band beyond 15%, and the
     * layer sum within 10% in every band */
    for (int o = 0; o < VOP_COUNT; o++) {
        if (!vidur_op_is_gemm(o))
            continue;
        for (int b = 0; b < VIDUR_BANDS; b++)
            cr_expect_leq(r.bands[o][b].mape, 15.0, "%s %s band %d: MAPE %.2f%%", file,
                          vidur_op_names[o], b, r.bands[o][b].mape);
        cr_expect_leq(fabs(r.bands[o][0].bias), 15.0, "%s %s 1-32 bias %.2f%%", file,
                      vidur_op_names[o], r.bands[o][0].bias);
    }
    for (int b = 0; b < VIDUR_BANDS; b++)
        cr_expect_leq(r.bands[VOP_COUNT][b].mape, 10.0, "%s layer band %d: %.2f%%", file, b,
                      r.bands[VOP_COUNT][b].mape);
    /* issue 18: the elementwise kernels (waves of rows, L2, per-row costs;
     * models/cost.c ew_kernels) within 9% per op (8.5-13.3% before), the norms
     * within 8% in every band, and at 1-32 tokens the norms within 3%, RoPE
     * within 10%, SiLU-and-mul within 17%: the profiles' 1-us resolution
     * limits what small kernels can show (docs/model.md) */
    static const int ew_ops[] = {VOP_INPUT_LN, VOP_POST_LN, VOP_ROPE, VOP_ACT, VOP_ADD};
    for (size_t i = 0; i < sizeof ew_ops / sizeof ew_ops[0]; i++)
        cr_expect_leq(r.ops[ew_ops[i]].mape, 9.0, "%s %s: MAPE %.2f%%", file,
                      vidur_op_names[ew_ops[i]], r.ops[ew_ops[i]].mape);
    for (int b = 0; b < VIDUR_BANDS; b++) {
        cr_expect_leq(r.bands[VOP_INPUT_LN][b].mape, 8.0, "%s input norm band %d", file, b);
        cr_expect_leq(r.bands[VOP_POST_LN][b].mape, 8.0, "%s post norm band %d", file, b);
    }
    static const struct { int op; double max; } ew[] = {
        {VOP_INPUT_LN, 3.0}, {VOP_POST_LN, 3.0}, {VOP_ROPE, 10.0}, {VOP_ACT, 17.0},
    };
    for (size_t i = 0; i < sizeof ew / sizeof ew[0]; i++)
        cr_expect_leq(r.bands[ew[i].op][0].mape, ew[i].max, "%s %s 1-32: MAPE %.2f%%", file,
                      vidur_op_names[ew[i].op], r.bands[ew[i].op][0].mape);
    cr_expect_leq(r.bands[VOP_COUNT][0].mape, 5.0, "%s layer 1-32: %.2f%%", file,
                  r.bands[VOP_COUNT][0].mape);
    /* a layer's ops summed, as the simulator adds them: the project's 10% */
    cr_expect_eq(r.layer.n, (int)t.n);
    cr_expect_leq(r.layer.mape, 10.0, "%s: layer MAPE %.2f%%", file, r.layer.mape);
    /* the sums recomputed from the per-op predictions */
    double sum = 0, bias = 0;
    for (size_t i = 0; i < t.n; i++) {
        double m = 0, p = 0;
        for (int o = VOP_EMB + 1; o < VOP_ALL_REDUCE; o++) {
            m += t.rows[i].ms[o];
            p += vidur_predict(&t.rows[i], o, &h100) * 1e3;
        }
        sum += fabs(p - m) / m * 100.0;
        bias += (p - m) / m * 100.0;
    }
    cr_expect_float_eq(r.layer.mape, sum / t.n, 1e-9);
    cr_expect_float_eq(r.layer_bias, bias / t.n, 1e-9);
    cr_expect_leq(r.layer.worst, 100.0);
    vidur_free(&t);
}

Test(models, vidur_llama2_7b_gemm_mape)
{
    vidur_acceptance("llama-2-7b-mlp.csv");
}

Test(models, vidur_codellama_34b_gemm_mape)
{
    vidur_acceptance("codellama-34b-mlp.csv");
}

Test(models, vidur_csv_errors_name_line_and_column)
{
    static const char header[] =
        "time_stats.attn_pre_proj.median,n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,"
        "use_gated_mlp,num_tokens,num_tensor_parallel_workers\n";
    char text[1024], path[64];
    vidur_table t;
    ts_err e = {{0}};

    snprintf(text, sizeof text, "%s0.05,32,32,4096,11008,32000,True,16,1\n", header);
    write_tmp(text, path, sizeof path);
    cr_expect_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    cr_expect_eq(t.n, 1);
    cr_expect_eq(t.rows[0].arch.head_dim, 128);
    vidur_free(&t);
    vidur_free(NULL);
    unlink(path);

    snprintf(text, sizeof text, "%s0.05,32,32,4096,11008,32000,True,16,1\nfast,32,32,4096,11008,32000,True,16,1\n",
             header);
    write_tmp(text, path, sizeof path);
    cr_expect_eq(vidur_load(path, "median", &t, &e), -1);
    cr_expect(strstr(e.msg, path) && strstr(e.msg, ":3:") &&
              strstr(e.msg, "time_stats.attn_pre_proj.median"), "%s", e.msg);
    unlink(path);

    snprintf(text, sizeof text, "%s0.05,32,32,4096,11008,32000,maybe,16,1\n", header);
    write_tmp(text, path, sizeof path);
    cr_expect_eq(vidur_load(path, "median", &t, &e), -1);
    cr_expect(strstr(e.msg, ":2:") && strstr(e.msg, "use_gated_mlp"), "%s", e.msg);
    unlink(path);

    snprintf(text, sizeof text, "%s0.05,32,32,4096\n", header);
    write_tmp(text, path, sizeof path);
    cr_expect_eq(vidur_load(path, "median", &t, &e), -1);
    cr_expect(strstr(e.msg, ":2:") && strstr(e.msg, "fields"), "%s", e.msg);
    unlink(path);

    write_tmp("time_stats.attn_pre_proj.median,n_head\n0.1,32\n", path, sizeof path);
    cr_expect_eq(vidur_load(path, "median", &t, &e), -1);
    cr_expect(strstr(e.msg, ":1:") && strstr(e.msg, "n_kv_head"), "%s", e.msg);
    unlink(path);
}

Test(models, calib_command_exit_codes)
{
    cr_redirect_stderr();
    char a0[] = "calib", a1[] = "vidur", a2[] = "--hw", a3[] = "h100", bad[] = "--bogus",
         none[] = "/nonexistent/file.csv", help[] = "--help";
    char *usage_err[] = {a0, a1, bad, NULL};
    cr_expect_eq(cmd_calib(3, usage_err), 2);
    char *no_file[] = {a0, a1, a2, a3, NULL};
    cr_expect_eq(cmd_calib(4, no_file), 2);
    char *missing[] = {a0, a1, none, NULL};
    cr_expect_eq(cmd_calib(3, missing), 1);
    char *h[] = {a0, help, NULL};
    cr_redirect_stdout();
    cr_expect_eq(cmd_calib(2, h), 0);
}

/* --rows prints one CSV line per prediction, whose error is its own columns'
 * (predicted - measured) / measured; --rows excludes --json. */
Test(models, calib_rows_lists_every_prediction)
{
    char path[64];
    write_tmp("time_stats.attn_pre_proj.median,time_stats.add.median,n_head,n_kv_head,n_embd,"
              "n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,num_tensor_parallel_workers\n"
              "0.05,0.002,32,32,4096,11008,32000,True,16,1\n"
              "0.30,0.010,32,32,4096,11008,32000,True,2048,2\n",
              path, sizeof path);
    char a0[] = "calib", a1[] = "vidur", rows[] = "--rows", json[] = "--json";
    char *both[] = {a0, a1, path, rows, json, NULL};
    cr_redirect_stderr();
    cr_expect_eq(cmd_calib(5, both), 2);
    char *argv[] = {a0, a1, path, rows, NULL};
    FILE *out = tmpfile();
    cr_assert_not_null(out);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    cr_assert_geq(saved, 0);
    dup2(fileno(out), STDOUT_FILENO);
    int rc = cmd_calib(4, argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    cr_assert_eq(rc, 0);
    rewind(out);
    char line[512];
    cr_assert_not_null(fgets(line, sizeof line, out));
    cr_expect_str_eq(line, "line,op,tp,tokens,size,workers,measured_ms,predicted_ms,error_pct\n");
    int n = 0;
    while (fgets(line, sizeof line, out)) {
        int ln, tp, tok, workers;
        char op[64];
        double size, meas, pred, err;
        cr_assert_eq(sscanf(line, "%d,%63[^,],%d,%d,%lf,%d,%lf,%lf,%lf", &ln, op, &tp, &tok, &size,
                            &workers, &meas, &pred, &err),
                     9, "%s", line);
        cr_expect_eq(ln, 2 + n / 2);
        cr_expect_str_eq(op, n % 2 ? "add" : "attn_pre_proj");
        cr_expect_eq(tp, n < 2 ? 1 : 2);
        cr_expect_eq(tok, n < 2 ? 16 : 2048);
        cr_expect_float_eq(err, (pred - meas) / meas * 100.0, 1e-3 + 1e-5 * fabs(err), "%s", line);
        n++;
    }
    cr_expect_eq(n, 4);
    fclose(out);
    unlink(path);
}

/* --bands: each token band's MAPE and signed bias are those of the
 * predictions whose token count falls in it, recomputed here from
 * vidur_predict(); the band edges are 32, 256, 1024. */
Test(models, vidur_bands_split_by_tokens)
{
    cr_expect_eq(vidur_band_of(1), 0);
    cr_expect_eq(vidur_band_of(32), 0);
    cr_expect_eq(vidur_band_of(33), 1);
    cr_expect_eq(vidur_band_of(256), 1);
    cr_expect_eq(vidur_band_of(257), 2);
    cr_expect_eq(vidur_band_of(1024), 2);
    cr_expect_eq(vidur_band_of(1025), 3);
    cr_expect_eq(vidur_band_of(4096), 3);
    char path[64];
    write_tmp("time_stats.attn_pre_proj.median,n_head,n_kv_head,n_embd,"
              "n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,num_tensor_parallel_workers\n"
              "0.020,32,32,4096,11008,32000,True,8,1\n"
              "0.030,32,32,4096,11008,32000,True,32,1\n"
              "0.300,32,32,4096,11008,32000,True,512,1\n"
              "0.900,32,32,4096,11008,32000,True,2048,1\n",
              path, sizeof path);
    vidur_table t;
    ts_err e = {{0}};
    cr_assert_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    vidur_report r;
    vidur_evaluate(&t, &h100, &r);
    double err[4];
    for (int i = 0; i < 4; i++)
        err[i] = (vidur_predict(&t.rows[i], VOP_PRE_PROJ, &h100) * 1e3 - t.rows[i].ms[VOP_PRE_PROJ]) /
                 t.rows[i].ms[VOP_PRE_PROJ] * 100.0;
    const vidur_band_stat *b = r.bands[VOP_PRE_PROJ];
    cr_expect_eq(b[0].n, 2);
    cr_expect_eq(b[1].n, 0);
    cr_expect_eq(b[2].n, 1);
    cr_expect_eq(b[3].n, 1);
    cr_expect_float_eq(b[0].bias, (err[0] + err[1]) / 2, 1e-9);
    cr_expect_float_eq(b[0].mape, (fabs(err[0]) + fabs(err[1])) / 2, 1e-9);
    cr_expect_float_eq(b[2].bias, err[2], 1e-9);
    cr_expect_float_eq(b[3].mape, fabs(err[3]), 1e-9);
    /* the layer sum of a one-op file is that op */
    cr_expect_float_eq(r.bands[VOP_COUNT][0].bias, b[0].bias, 1e-9);
    cr_expect_eq(r.bands[VOP_UP_PROJ][0].n, 0);
    vidur_free(&t);
    char a0[] = "calib", a1[] = "vidur", bands[] = "--bands", rows[] = "--rows";
    char *both[] = {a0, a1, path, bands, rows, NULL};
    cr_redirect_stderr();
    cr_expect_eq(cmd_calib(5, both), 2);
    unlink(path);
}
