/*
 * Tests of the Vidur operator profiles against the cost model (models/vidur.c,
 * `tailsim calib vidur`): the CSV reader and its errors, the calib command's
 * exit codes and --rows / --bands listings, the timing resolution found from
 * the .min/.max columns and the MAPE beyond it (--resolution), and the
 * acceptance check on the measured H100 operator times (skipped when
 * $TAILSIM_SHARED/profiles is absent).  Split from test_models.c.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <criterion/redirect.h>
#include <jansson.h>
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
#include "tests/helpers.h"
#include "cli/cmd.h"

static hw_desc h100;

static void setup(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &h100, &e), 0, "%s", e.msg);
}

TestSuite(models, .init = setup);

/* ---- Vidur CSVs -------------------------------------------------------------- */

static void vidur_acceptance(const char *file)
{
    char path[4096], rel[256];
    snprintf(rel, sizeof rel, "profiles/vidur-h100/%s", file);
    shared_path(path, sizeof path, rel);
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
     * models/cost.c ew_kernels) within 8% per op (8.5-13.3% before) and 10%
     * in the bands above 256 tokens, the norms within 8% in every band, and
     * at 1-32 tokens the norms within 3%, RoPE within 8%, SiLU-and-mul within
     * 17%: the profiles' 1-us resolution limits what small kernels can show
     * (docs/model.md) */
    static const int ew_ops[] = {VOP_INPUT_LN, VOP_POST_LN, VOP_ROPE, VOP_ACT, VOP_ADD};
    for (size_t i = 0; i < sizeof ew_ops / sizeof ew_ops[0]; i++) {
        cr_expect_leq(r.ops[ew_ops[i]].mape, 8.0, "%s %s: MAPE %.2f%%", file,
                      vidur_op_names[ew_ops[i]], r.ops[ew_ops[i]].mape);
        for (int b = 2; b < VIDUR_BANDS; b++)
            cr_expect_leq(r.bands[ew_ops[i]][b].mape, 10.0, "%s %s band %d: %.2f%%", file,
                          vidur_op_names[ew_ops[i]], b, r.bands[ew_ops[i]][b].mape);
    }
    for (int b = 0; b < VIDUR_BANDS; b++) {
        cr_expect_leq(r.bands[VOP_INPUT_LN][b].mape, 8.0, "%s input norm band %d", file, b);
        cr_expect_leq(r.bands[VOP_POST_LN][b].mape, 8.0, "%s post norm band %d", file, b);
    }
    static const struct { int op; double max; } ew[] = {
        {VOP_INPUT_LN, 3.0}, {VOP_POST_LN, 3.0}, {VOP_ROPE, 8.0}, {VOP_ACT, 17.0},
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
    /* the files record whole microseconds; beyond one of them, every op but
     * the embedding is within the acceptance's 10% at 1-32 tokens (the raw
     * MAPE: up to 43%, the residual add), and no figure exceeds its MAPE */
    cr_expect_eq(t.res_ms, 1e-3, "%s: resolution %g ms", file, t.res_ms);
    cr_expect_eq(r.res_ms, t.res_ms);
    for (int o = 0; o <= VOP_COUNT; o++) {
        if (o == VOP_ALL_REDUCE)
            continue;
        for (int b = 0; b < VIDUR_BANDS; b++)
            cr_expect_leq(r.bands[o][b].mape_res, r.bands[o][b].mape + 1e-9);
        if (o != VOP_EMB)
            cr_expect_leq(r.bands[o][0].mape_res, 10.0, "%s %s 1-32 beyond 1 us: %.2f%%", file,
                          o < VOP_COUNT ? vidur_op_names[o] : "layer", r.bands[o][0].mape_res);
    }
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

/* ---- timing resolution ----------------------------------------------------- */

#define RES_KEYS "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens," \
                 "num_tensor_parallel_workers\n"
#define RES_ROW_KEYS "32,32,4096,11008,32000,True,%d,1\n"

/* One case of the resolution detection: the add op's min, max and median
 * of a one-row MLP profile, and the step vidur_load() must find (ms). */
typedef struct res_case {
    char min[24], max[24], median[24];
    double want_ms;
} res_case;

ParameterizedTestParameters(models, vidur_resolution_detected)
{
    static res_case cases[] = {
        {"0.001", "0.003", "0.0025", 1e-3},   /* whole us; a half-us median does not count */
        {"0.018000000000000002", "0.036000000000000004", "0.02", 1e-3}, /* parse noise */
        {"0.0005", "0.003", "0.002", 1e-4},   /* a 0.5 us value: 0.1 us */
        {"0.00125", "0.002", "0.0015", 1e-5}, /* 1.25 us: 10 ns */
        {"0.000001", "0.002", "0.001", 1e-6}, /* 1 ns */
        {"0.0000005", "0.002", "0.001", 0.0}, /* 0.5 ns: no step fits */
        {"2", "5", "3", 1.0},                 /* whole ms */
        {"0.2", "1.5", "0.3", 1e-1},
        {"0.01", "0.05", "0.02", 1e-2},       /* 10 us */
        {"0", "0.003", "0.001", 1e-3},        /* a zero is a multiple of every step */
        {"0", "0", "0", 0.0},                 /* nothing to tell */
    };
    return cr_make_param_array(res_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(res_case *c, models, vidur_resolution_detected)
{
    char text[1024], path[64];
    snprintf(text, sizeof text,
             "time_stats.add.min,time_stats.add.max,time_stats.add.median," RES_KEYS
             "%s,%s,%s," RES_ROW_KEYS, c->min, c->max, c->median, 16);
    write_tmp(text, path, sizeof path);
    vidur_table t;
    ts_err e = {{0}};
    for (int i = 0; i < 2; i++) { /* the chosen statistic does not matter */
        cr_assert_eq(vidur_load(path, i ? "min" : "median", &t, &e), 0, "%s", e.msg);
        cr_expect_eq(t.res_ms, c->want_ms, "min %s max %s: %g ms, want %g", c->min, c->max,
                     t.res_ms, c->want_ms);
        vidur_free(&t);
    }
    unlink(path);
}

/* The .min/.max columns of every known op count, the all-reduce's too; a
 * file without them has no resolution; a bad value in one is an error
 * naming it. */
Test(models, vidur_resolution_columns)
{
    char path[64];
    vidur_table t;
    ts_err e = {{0}};
    /* the add is in whole us, the norm's 0.5 us value decides */
    write_tmp("time_stats.add.min,time_stats.add.median,time_stats.input_layernorm.max,"
              "time_stats.input_layernorm.median," RES_KEYS
              "0.002,0.002,0.0045,0.004,32,32,4096,11008,32000,True,1,1\n",
              path, sizeof path);
    cr_assert_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    cr_expect_eq(t.res_ms, 1e-4);
    vidur_free(&t);
    unlink(path);

    write_tmp("time_stats.all_reduce.min,time_stats.all_reduce.max,time_stats.all_reduce.median,"
              "size,num_workers\n0.015,0.038,0.037,2048,8\n0.018000000000000002,0.036,0.023,"
              "10240,8\n", path, sizeof path);
    cr_assert_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    cr_expect_eq(t.res_ms, 1e-3);
    vidur_free(&t);
    unlink(path);

    write_tmp("time_stats.add.median," RES_KEYS "0.002,32,32,4096,11008,32000,True,1,1\n", path,
              sizeof path);
    cr_assert_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    cr_expect_eq(t.res_ms, 0.0);
    vidur_free(&t);
    unlink(path);

    write_tmp("time_stats.add.min,time_stats.add.median," RES_KEYS
              "0.002,0.002,32,32,4096,11008,32000,True,1,1\n"
              "-0.001,0.002,32,32,4096,11008,32000,True,2,1\n", path, sizeof path);
    cr_expect_eq(vidur_load(path, "median", &t, &e), -1);
    cr_expect(strstr(e.msg, ":3:") && strstr(e.msg, "time_stats.add.min"), "%s", e.msg);
    unlink(path);
}

/* vidur_err_beyond: the error less the allowance, never below 0. */
Test(models, vidur_err_beyond_hand_computed)
{
    cr_expect_float_eq(vidur_err_beyond(3.0, 1.0, 1.0), 100.0, 1e-12); /* 2 - 1 of 1 */
    cr_expect_float_eq(vidur_err_beyond(0.5, 2.0, 1.0), 25.0, 1e-12);  /* 1.5 - 1 of 2 */
    cr_expect_eq(vidur_err_beyond(1.5, 1.0, 1.0), 0.0);                /* inside the step */
    cr_expect_eq(vidur_err_beyond(0.4, 1.0, 1.0), 0.0);
    cr_expect_float_eq(vidur_err_beyond(0.004, 0.002, 0.0), 100.0, 1e-9); /* no allowance */
}

/* vidur_evaluate_at on measured times set at known offsets from the model's
 * own predictions: the add op (1 and 16 tokens) 2.5 us slower than
 * predicted and 0.5 us faster, the norm 4 us faster at 1 token only.  With a
 * 1 us step the 1-32 band's MAPE beyond it is the mean of 1.5 us / meas and
 * 0, and the layer (two ops) allows 2 us: 2.5 - 2 us at 1 token. */
Test(models, vidur_mape_beyond_resolution)
{
    char path[64], text[2048];
    vidur_table t;
    ts_err e = {{0}};
    write_tmp("time_stats.add.median,time_stats.input_layernorm.median," RES_KEYS
              "1,1,32,32,4096,11008,32000,True,1,1\n1,1,32,32,4096,11008,32000,True,16,1\n",
              path, sizeof path);
    cr_assert_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    double add[2], norm[2];
    for (int i = 0; i < 2; i++) {
        add[i] = vidur_predict(&t.rows[i], VOP_ADD, &h100) * 1e3;
        norm[i] = vidur_predict(&t.rows[i], VOP_INPUT_LN, &h100) * 1e3;
        cr_assert_gt(add[i], 0.0005);
        cr_assert_gt(norm[i], 0.0);
    }
    vidur_free(&t);
    unlink(path);
    double ma0 = add[0] + 0.0025, ma1 = add[1] - 0.0005, mn0 = norm[0] + 0.004, mn1 = norm[1];
    snprintf(text, sizeof text,
             "time_stats.add.median,time_stats.input_layernorm.median," RES_KEYS
             "%.17g,%.17g," RES_ROW_KEYS "%.17g,%.17g," RES_ROW_KEYS,
             ma0, mn0, 1, ma1, mn1, 16);
    write_tmp(text, path, sizeof path);
    cr_assert_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    cr_expect_eq(t.res_ms, 0.0); /* no .min/.max columns */
    vidur_report r;
    vidur_evaluate_at(&t, &h100, 1e-3, &r);
    cr_expect_eq(r.res_ms, 1e-3);
    cr_expect_eq(r.layer_ops, 2);
    const vidur_band_stat *b = &r.bands[VOP_ADD][0];
    cr_expect_eq(b->n, 2);
    cr_expect_float_eq(b->mape, (0.0025 / ma0 + 0.0005 / ma1) / 2 * 100, 1e-6);
    cr_expect_float_eq(b->mape_res, 0.0015 / ma0 / 2 * 100, 1e-6, "%g", b->mape_res);
    b = &r.bands[VOP_INPUT_LN][0];
    cr_expect_float_eq(b->mape_res, 0.003 / mn0 / 2 * 100, 1e-6);
    cr_expect_float_eq(r.ops[VOP_INPUT_LN].mape_res, b->mape_res, 1e-12);
    /* the layer: 6.5 us off at 1 token less 2 us; 0.5 us at 16 tokens */
    b = &r.bands[VOP_COUNT][0];
    cr_expect_float_eq(b->mape_res, 0.0045 / (ma0 + mn0) / 2 * 100, 1e-6, "%g", b->mape_res);
    cr_expect_float_eq(r.layer.mape_res, b->mape_res, 1e-12);
    /* no allowance: the MAPE itself; a step larger than every error: 0 */
    vidur_evaluate_at(&t, &h100, 0, &r);
    cr_expect_eq(r.res_ms, 0.0);
    cr_expect_float_eq(r.bands[VOP_ADD][0].mape_res, r.bands[VOP_ADD][0].mape, 1e-12);
    vidur_evaluate_at(&t, &h100, 1.0, &r);
    cr_expect_eq(r.bands[VOP_ADD][0].mape_res, 0.0);
    cr_expect_eq(r.layer.mape_res, 0.0);
    vidur_free(&t);
    unlink(path);
}

/* Runs cmd_calib(argv) with stdout and stderr into out and err (NUL-ended,
 * cut to n bytes); returns its exit status. */
static int calib_capture(int argc, char **argv, char *out, char *err, size_t n)
{
    FILE *fo = tmpfile(), *fe = tmpfile();
    cr_assert(fo && fe);
    fflush(stdout);
    fflush(stderr);
    int so = dup(STDOUT_FILENO), se = dup(STDERR_FILENO);
    cr_assert(so >= 0 && se >= 0);
    dup2(fileno(fo), STDOUT_FILENO);
    dup2(fileno(fe), STDERR_FILENO);
    int rc = cmd_calib(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, STDOUT_FILENO);
    dup2(se, STDERR_FILENO);
    close(so);
    close(se);
    FILE *f[2] = {fo, fe};
    char *buf[2] = {out, err};
    for (int i = 0; i < 2; i++) {
        rewind(f[i]);
        size_t got = fread(buf[i], 1, n - 1, f[i]);
        buf[i][got] = 0;
        fclose(f[i]);
    }
    return rc;
}

/* --bands names the detected step and prints the second table;
 * --resolution overrides it (0: off) and refuses bad values by name;
 * --json carries resolution_us and mape_beyond_res. */
Test(models, calib_bands_resolution_option)
{
    char path[64], bare[64];
    write_tmp("time_stats.add.min,time_stats.add.max,time_stats.add.median," RES_KEYS
              "0.001,0.003,0.002,32,32,4096,11008,32000,True,1,1\n"
              "0.004,0.009,0.006,32,32,4096,11008,32000,True,512,1\n",
              path, sizeof path);
    write_tmp("time_stats.add.median," RES_KEYS "0.002,32,32,4096,11008,32000,True,1,1\n", bare,
              sizeof bare);
    static char out[16384], err[4096];
    char a0[] = "calib", a1[] = "vidur", bands[] = "--bands", res[] = "--resolution",
         json[] = "--json", zero[] = "0", two[] = "2", eq[] = "--resolution=0.5";
    char *plain[] = {a0, a1, path, bands, NULL};
    cr_assert_eq(calib_capture(4, plain, out, err, sizeof out), 0, "%s", err);
    cr_expect(strstr(out, "timings recorded in whole microseconds: MAPE % beyond +-1 us"), "%s",
              out);
    cr_expect(strstr(out, "one step an op, +-1 us"), "%s", out);
    char *off[] = {a0, a1, path, bands, res, zero, NULL};
    cr_assert_eq(calib_capture(6, off, out, err, sizeof out), 0, "%s", err);
    cr_expect(strstr(out, "1-32") && !strstr(out, "beyond") && !strstr(out, "resolution"), "%s",
              out);
    char *over[] = {a0, a1, path, bands, res, two, NULL};
    cr_assert_eq(calib_capture(6, over, out, err, sizeof out), 0, "%s", err);
    cr_expect(strstr(out, "resolution 2 us (--resolution; the file's: whole microseconds): "
                          "MAPE % beyond +-2 us"), "%s", out);
    char *eqf[] = {a0, a1, path, bands, eq, NULL};
    cr_assert_eq(calib_capture(5, eqf, out, err, sizeof out), 0, "%s", err);
    cr_expect(strstr(out, "beyond +-0.5 us"), "%s", out);
    char *unknown[] = {a0, a1, bare, bands, NULL};
    cr_assert_eq(calib_capture(4, unknown, out, err, sizeof out), 0, "%s", err);
    cr_expect(strstr(out, "timing resolution unknown"), "%s", out);

    /* JSON: the figures are vidur_evaluate's */
    char *js[] = {a0, a1, path, bands, json, NULL};
    cr_assert_eq(calib_capture(5, js, out, err, sizeof out), 0, "%s", err);
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    cr_assert_not_null(root, "%s", je.text);
    vidur_table t;
    ts_err e = {{0}};
    cr_assert_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    vidur_report r;
    vidur_evaluate(&t, &h100, &r);
    cr_expect_float_eq(json_real_value(json_object_get(root, "resolution_us")), 1.0, 1e-12);
    cr_expect_float_eq(json_real_value(json_object_get(root, "resolution_detected_us")), 1.0,
                       1e-12);
    json_t *cell = json_object_get(json_object_get(json_object_get(root, "bands"), "add"), "1-32");
    cr_expect_float_eq(json_real_value(json_object_get(cell, "mape_beyond_res")),
                       r.bands[VOP_ADD][0].mape_res, 1e-4 + 1e-5 * r.bands[VOP_ADD][0].mape_res);
    json_t *op = json_object_get(json_object_get(root, "ops"), "add");
    cr_expect_float_eq(json_real_value(json_object_get(op, "mape_beyond_res")),
                       r.ops[VOP_ADD].mape_res, 1e-4 + 1e-5 * r.ops[VOP_ADD].mape_res);
    json_decref(root);
    vidur_free(&t);
    /* --resolution 0 in JSON: null figures, the file's step kept */
    char *js0[] = {a0, a1, path, bands, json, res, zero, NULL};
    cr_assert_eq(calib_capture(7, js0, out, err, sizeof out), 0, "%s", err);
    root = json_loads(out, 0, &je);
    cr_assert_not_null(root, "%s", je.text);
    cr_expect(json_is_null(json_object_get(root, "resolution_us")));
    cr_expect(json_is_real(json_object_get(root, "resolution_detected_us")));
    cell = json_object_get(json_object_get(json_object_get(root, "bands"), "add"), "1-32");
    cr_expect(json_is_null(json_object_get(cell, "mape_beyond_res")));
    json_decref(root);
    /* without --bands, the JSON has none of it */
    char *nob[] = {a0, a1, path, json, NULL};
    cr_assert_eq(calib_capture(4, nob, out, err, sizeof out), 0, "%s", err);
    cr_expect(!strstr(out, "resolution") && !strstr(out, "beyond"), "%s", out);

    /* bad values: exit 2, the message names the option */
    static const char *const bad[] = {"-1", "abc", "", "nan", "inf", "1e7", "1us"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char v[16];
        snprintf(v, sizeof v, "%s", bad[i]);
        char *argv[] = {a0, a1, path, bands, res, v, NULL};
        cr_expect_eq(calib_capture(6, argv, out, err, sizeof out), 2, "'%s'", bad[i]);
        cr_expect(strstr(err, "--resolution") && !out[0], "'%s': %s", bad[i], err);
    }
    char *novalue[] = {a0, a1, path, bands, res, NULL};
    cr_expect_eq(calib_capture(5, novalue, out, err, sizeof out), 2);
    cr_expect(strstr(err, "--resolution needs a value"), "%s", err);
    char *nobands[] = {a0, a1, path, res, two, NULL};
    cr_expect_eq(calib_capture(5, nobands, out, err, sizeof out), 2);
    cr_expect(strstr(err, "--resolution applies to --bands only"), "%s", err);
    unlink(path);
    unlink(bare);
}
