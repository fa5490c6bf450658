/*
 * Tests of the calibration path: models/calib.c (strict CSV reader, per-row
 * predictions that add up to cost_iter), models/fit.c (GSL fit, hold-out
 * check, determinism, rendering, INI output); hw_load()'s use of
 * models/calib/<gpu>.csv and `tailsim calib check` are in
 * tests/test_calib_load.c, the shared synthetic data in tests/calib_synth.h.
 *
 * The fit is checked against synthetic data with a known answer: a CSV
 * generated from the cost model itself with parameters unlike the h200
 * INI's (gemm_eff 0.74, gemm_lat_s 4.0 us, launch_s 1.7 us, mem_eff 0.86,
 * attn_eff 0.47, gemm_half_flops 0), over the shapes `calibrate --quick`
 * sweeps (Qwen2.5-7B at TP 1 and -32B at TP 4: the five GEMMs for 1..4096
 * tokens, decode attention batch x context with long-tail mixes, verify and
 * prefill chunks, the row-wise kernels, the copy ceiling), times 1 + 2%
 * Gaussian noise from a seeded RNG, plus rows of ops the model does not
 * price.  The fit must recover every parameter within 3% and predict the
 * held-out half to about the noise level.
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


TestSuite(calib, .init = calib_tmp_setup, .fini = calib_tmp_teardown);

/* ---- per-op predictions --------------------------------------------------- */

/* One decoder layer's price is the sum of the calibrated ops' prices. */
Test(calib, per_op_predictions_add_up_to_cost_iter)
{
    hw_desc hw = truth_hw();
    llm_desc m = {.name = "one-layer", .layers = 1, .hidden = 3584, .heads = 28,
                  .kv_heads = 4, .head_dim = 128, .ffn = 18944, .vocab = 0, .gated = 1};
    const double B = 48, ctx = 48 * 3000.0;
    synth s = {.n = 0};
    add(&s, "rmsnorm", B, 3584, 0, 0, 0, 0, 0);
    add(&s, "gemm", B, (28 + 8) * 128, 3584, 0, 0, 0, 0);
    add(&s, "rope", B, 28 + 4, 128, 0, 0, 0, 0);
    add(&s, "decode_attn", 28, 4, 128, B, ctx, 3000, 1);
    add(&s, "gemm", B, 3584, 28 * 128, 0, 0, 0, 0);
    add(&s, "add", B, 3584, 0, 0, 0, 0, 0);
    add(&s, "rmsnorm", B, 3584, 0, 0, 0, 0, 0);
    add(&s, "gemm", B, 2 * 18944, 3584, 0, 0, 0, 0);
    add(&s, "swiglu", B, 18944, 0, 0, 0, 0, 0);
    add(&s, "gemm", B, 3584, 18944, 0, 0, 0, 0);
    add(&s, "add", B, 3584, 0, 0, 0, 0, 0);
    double sum = 0;
    for (size_t i = 0; i < s.n; i++)
        sum += cost_calib_op(&hw, &s.rows[i]);
    double want = cost_decode_iter(&hw, &m, 1, (int)B, ctx);
    cr_expect(fabs(sum - want) <= 1e-12 * want, "ops %.9g s, cost_iter %.9g s", sum, want);

    /* a prefill chunk of 512 tokens after 1000 */
    s.n = 0;
    add(&s, "chunk_attn", 28, 4, 128, 1, 1512, 1512, 512);
    double attn = cost_calib_op(&hw, &s.rows[0]);
    double direct = cost_attn_chunk(&hw, 28, 4, 128, 512, 512 * (1000 + 513 / 2.0), 1512);
    cr_expect(fabs(attn - direct) <= 1e-12 * direct, "%g vs %g", attn, direct);
    cr_expect_gt(attn, cost_attn_decode(&hw, 28, 4, 128, 1, 1512));

    add(&s, "verify_accept", 33, 152064, 0, 1, 0, 0, 32);
    cr_expect_eq(cost_calib_op(&hw, &s.rows[1]), -1.0);
    cr_expect_eq(calib_op_kind("layer_decode"), -1);
    cr_expect_eq(calib_op_kind("gemm_peak"), CALIB_OP_GEMM);
    cr_expect_eq(cost_kernel(&hw, COST_K_NORM, 0, 1), 0.0);
    cr_expect_gt(cost_kernel(&hw, COST_K_GATHER, 1e6, 1000), cost_kernel(&hw, COST_K_ADD, 1e6, 1000));
}

/* ---- the reader ------------------------------------------------------------ */

Test(calib, reader_round_trips_the_calibrate_format)
{
    hw_desc hw = truth_hw();
    static synth s;
    synth_rows(&s, &hw, 0.02, 7);
    s.rows[s.n - 1].peak_bytes = 4.5e9; /* as a train_* row would have */
    for (int v1 = 0; v1 < 2; v1++) { /* with peak_bytes, and the first format */
        char path[512];
        write_csv_fmt(&s, "rt.csv", path, sizeof path, v1);
        calib_row *rows;
        size_t n;
        load(path, &rows, &n);
        cr_assert_eq(n, s.n);
        cr_expect_eq(rows[n - 1].peak_bytes, v1 ? 0.0 : 4.5e9);
        for (size_t i = 0; i < n; i++) {
            cr_expect_str_eq(rows[i].device, "Synthetic H200, \"seeded\"");
            cr_expect_str_eq(rows[i].op, s.rows[i].op);
            cr_expect_eq(rows[i].line, (int)i + 2);
            cr_expect_eq(rows[i].m, s.rows[i].m);
            cr_expect_eq(rows[i].ctx_sum, s.rows[i].ctx_sum);
            cr_expect_eq(rows[i].sm_mhz, 1980);
            cr_expect(fabs(rows[i].median_us - s.rows[i].median_us) <= 5e-4, "line %zu", i + 2);
        }
        free(rows);
    }
}

/* Replaces data line `line` (2 = first row) of a good CSV, or the header
 * (line 1), loads it and expects an error naming the file, ":line:" and
 * `want` (the column). */
static void expect_csv_error(int line, const char *text, const char *want)
{
    hw_desc hw = truth_hw();
    static synth s;
    synth_rows(&s, &hw, 0.0, 3);
    char good[512], bad[600];
    write_csv(&s, "good.csv", good, sizeof good);
    snprintf(bad, sizeof bad, "%s/bad.csv", tmpdir);
    FILE *in = fopen(good, "r"), *out = fopen(bad, "w");
    cr_assert(in && out);
    char buf[4096];
    for (int l = 1; fgets(buf, sizeof buf, in); l++) {
        if (l == line) {
            if (text)
                fprintf(out, "%s\n", text);
        } else {
            fputs(buf, out);
        }
    }
    fclose(in);
    fclose(out);
    calib_row *rows = (calib_row *)&s; /* must be reset to NULL */
    size_t n = 99;
    ts_err e = {{0}};
    cr_assert_eq(calib_csv_load(bad, &rows, &n, &e), -1, "no error for line %d: %s", line,
                 text ? text : "(deleted)");
    cr_expect_null(rows);
    cr_expect_eq(n, 0);
    char at[32];
    snprintf(at, sizeof at, ":%d:", line);
    cr_expect(strstr(e.msg, bad) && strstr(e.msg, at) && strstr(e.msg, want),
              "expected '%s' at line %d, got: %s", want, line, e.msg);
}

Test(calib, reader_errors_name_file_line_and_column)
{
    const char *h = "\"NVIDIA H200\",1980,3201";
    char t[512];
    snprintf(t, sizeof t, "%s,gemm,12x,4608,3584,0,0,0,0,10.5,10,11,1,1,0", h);
    expect_csv_error(5, t, "column 5 'm': '12x' is not a number");
    snprintf(t, sizeof t, "%s,gemm,1,4608,3584,0,0,0", h);
    expect_csv_error(4, t, "column 11 'q_len': missing (the line has 10 fields, the header 17)");
    snprintf(t, sizeof t, "%s,gemm,1,4608,3584,0,0,0,0,10.5,10,11,1,1", h);
    expect_csv_error(11, t, "column 17 'peak_bytes': missing");
    snprintf(t, sizeof t, "%s,gemm,1,4608,3584,0,0,0,0,10.5,10,11,1,1,0,7", h);
    expect_csv_error(3, t, "column 18: more fields");
    snprintf(t, sizeof t, "%s,gemm,1,4608,3584,0,0,0,0,0,10,11,1,1,0", h);
    expect_csv_error(6, t, "column 12 'median_us'");
    snprintf(t, sizeof t, "%s,gemm,1,4608,3584,0,-2,0,0,1,1,1,1,1,0", h);
    expect_csv_error(2, t, "column 9 'ctx_sum'");
    snprintf(t, sizeof t, "%s,ge mm,1,4608,3584,0,0,0,0,1,1,1,1,1,0", h);
    expect_csv_error(7, t, "column 4 'op'");
    snprintf(t, sizeof t, "\"NVIDIA H200,1980,3201,gemm,1,4608,3584,0,0,0,0,1,1,1,1,1,0");
    expect_csv_error(8, t, "column 1 'device': malformed quotes");
    snprintf(t, sizeof t, "%s,gemm,1,4608,3584,0,0,0,0,1,1,1,1,1,0", "\"H200\",fast,3201");
    expect_csv_error(9, t, "column 2 'sm_clock_mhz'");
    snprintf(t, sizeof t, "%s,train_fwd,4096,0,0,0,0,0,0,1,1,1,1,1,many", h);
    expect_csv_error(12, t, "column 17 'peak_bytes': 'many'");
    expect_csv_error(10, "", "empty line");
    expect_csv_error(1, "device,sm_clock_mhz,mem_clock_mhz,op,m,n,k,batch,ctx_sum,ctx_max,"
                        "q_len,median,p10_us,p90_us,flops,bytes",
                     "column 12: expected 'median_us', found 'median'");
    expect_csv_error(1, "device,sm_clock_mhz,mem_clock_mhz,op,m,n,k", "column 8: expected 'batch'");
    expect_csv_error(1, CALIB_CSV_HEADER ",extra", "column 18: unexpected column 'extra'");
    expect_csv_error(1, CALIB_CSV_HEADER_V1 ",extra", "column 17: expected 'peak_bytes'");

    char path[512];
    snprintf(path, sizeof path, "%s/empty.csv", tmpdir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s\n", CALIB_CSV_HEADER);
    fclose(f);
    calib_row *rows;
    size_t n;
    ts_err e = {{0}};
    cr_expect_eq(calib_csv_load(path, &rows, &n, &e), -1);
    cr_expect(strstr(e.msg, ":2:") && strstr(e.msg, "no data rows"), "%s", e.msg);
    cr_expect_eq(calib_csv_load("/nonexistent/calib.csv", &rows, &n, &e), -1);
    cr_expect(strstr(e.msg, "/nonexistent/calib.csv"), "%s", e.msg);
}

/* ---- the fit --------------------------------------------------------------- */

static void expect_recovered(const fit_result *f, const hw_desc *t, double rel)
{
    expect_rel(f->hw.gemm_eff, t->gemm_eff, rel, "gemm_eff");
    expect_rel(f->hw.gemm_lat_s, t->gemm_lat_s, rel, "gemm_lat_s");
    expect_rel(f->hw.launch_s, t->launch_s, rel, "launch_s");
    expect_rel(f->hw.mem_eff, t->mem_eff, rel, "mem_eff");
    expect_rel(f->hw.attn_eff, t->attn_eff, rel, "attn_eff");
    for (int j = 0; j < FIT_NPARAM; j++)
        if (j != FIT_GEMM_HALF)
            cr_expect_eq(f->state[j], FIT_FITTED, "%s: %s", fit_param_names[j],
                         fit_state_names[f->state[j]]);
}

Test(calib, fit_recovers_known_parameters_from_noisy_data)
{
    hw_desc t = truth_hw(), start;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini("h200", &start, &e), 0, "%s", e.msg);
    cr_assert_neq(start.gemm_eff, t.gemm_eff);
    static synth s;
    synth_rows(&s, &t, 0.02, 42);
    fit_result f;
    cr_assert_eq(fit_hw(&start, s.rows, s.n, NULL, &f, &e), 0, "%s", e.msg);
    expect_recovered(&f, &t, 0.03);
    cr_expect_eq(f.skipped, 3);
    cr_expect_eq(f.rows, s.n - 3);
    cr_expect_eq(f.hw.gemm_half_flops, 0.0);
    cr_expect_eq(f.state[FIT_GEMM_HALF], FIT_DEGENERATE);
    cr_expect_gt(f.rms_before, 0.10, "the INI should be far from the truth");
    cr_expect(f.rms_after > 0.015 && f.rms_after < 0.025, "RMS %.4f for 2%% noise", f.rms_after);
    cr_expect_eq(f.hw.tile_m, start.tile_m);
    cr_expect_eq(f.hw.sms, start.sms);
    cr_expect_eq(f.hw.ar_eff, start.ar_eff);

    /* no noise: exact */
    synth_rows(&s, &t, 0.0, 1);
    cr_assert_eq(fit_hw(&start, s.rows, s.n, NULL, &f, &e), 0, "%s", e.msg);
    expect_recovered(&f, &t, 1e-4);
    cr_expect_lt(f.rms_after, 1e-6);
}

Test(calib, fit_frees_gemm_half_flops_only_when_the_data_need_it)
{
    hw_desc t = truth_hw(), start;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini("h200", &start, &e), 0, "%s", e.msg);
    t.gemm_half_flops = 2e10; /* +27 us on compute-bound GEMMs only */
    static synth s;
    synth_rows(&s, &t, 0.01, 5);
    fit_result f;
    cr_assert_eq(fit_hw(&start, s.rows, s.n, NULL, &f, &e), 0, "%s", e.msg);
    cr_expect_eq(f.state[FIT_GEMM_HALF], FIT_FITTED, "gain %.3f", f.half_gain);
    /* half and gemm_lat_s both add to a GEMM's compute side (models/cost.c
     * gemm_time); only the kernels' different efficiencies (half is paid at
     * the kernel's rate) tell them apart, so the data fix their sum on the
     * large-tile kernel closely and the split loosely */
    double want = t.gemm_lat_s + t.gemm_half_flops / (t.peak_flops * t.gemm_eff);
    double got = f.hw.gemm_lat_s + f.hw.gemm_half_flops / (f.hw.peak_flops * f.hw.gemm_eff);
    expect_rel(got, want, 0.05, "gemm_lat_s + gemm_half_flops at gemm_eff");
    expect_rel(f.hw.gemm_half_flops, t.gemm_half_flops, 0.6, "gemm_half_flops");
    expect_rel(f.hw.gemm_eff, t.gemm_eff, 0.03, "gemm_eff");
}

Test(calib, fit_keeps_what_the_rows_cannot_tell)
{
    hw_desc t = truth_hw(), start;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini("h200", &start, &e), 0, "%s", e.msg);
    static synth s, g;
    synth_rows(&s, &t, 0.01, 9);
    g.n = 0;
    for (size_t i = 0; i < s.n; i++)
        if (!strcmp(s.rows[i].op, "gemm"))
            g.rows[g.n++] = s.rows[i];
    fit_result f;
    cr_assert_eq(fit_hw(&start, g.rows, g.n, NULL, &f, &e), 0, "%s", e.msg);
    cr_expect_eq(f.state[FIT_ATTN_EFF], FIT_UNUSED);
    cr_expect_eq(f.hw.attn_eff, start.attn_eff);
    cr_expect_eq(f.state[FIT_LAUNCH], FIT_DEGENERATE);
    cr_expect_eq(f.hw.launch_s, start.launch_s);
    cr_expect_eq(f.state[FIT_GEMM_EFF], FIT_FITTED);
    expect_rel(f.hw.gemm_eff, t.gemm_eff, 0.03, "gemm_eff");
    /* launch + lat is what GEMMs see */
    expect_rel(f.hw.gemm_lat_s + f.hw.launch_s, t.gemm_lat_s + t.launch_s, 0.05, "launch+lat");

    /* nothing modelled: an error, not a silent no-op */
    g.n = 0;
    for (size_t i = 0; i < s.n; i++)
        if (calib_op_kind(s.rows[i].op) < 0)
            g.rows[g.n++] = s.rows[i];
    cr_assert_eq(g.n, 3);
    cr_expect_eq(fit_hw(&start, g.rows, g.n, NULL, &f, &e), -1);
    cr_expect(strstr(e.msg, "no rows of a modelled op"), "%s", e.msg);
}

Test(calib, fit_of_thousands_of_rows_recovers_parameters)
{
    hw_desc t = truth_hw(), start;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini("h200", &start, &e), 0, "%s", e.msg);
    static synth s;
    size_t cap = 4000, n = 0;
    calib_row *rows = malloc(cap * sizeof *rows);
    cr_assert_not_null(rows);
    for (uint64_t seed = 1; n + s.n <= cap; seed++) {
        synth_rows(&s, &t, 0.02, seed);
        memcpy(rows + n, s.rows, s.n * sizeof *rows);
        n += s.n;
    }
    cr_assert_gt(n, 3000);
    fit_result f;
    /* how long it takes is bench material, not a test assertion */
    cr_assert_eq(fit_hw(&start, rows, n, NULL, &f, &e), 0, "%s", e.msg);
    expect_recovered(&f, &t, 0.02);
    free(rows);
}

/* ---- the hold-out check ---------------------------------------------------- */

Test(calib, check_predicts_held_out_shapes_at_the_noise_level)
{
    hw_desc t = truth_hw(), start;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini("h200", &start, &e), 0, "%s", e.msg);
    static synth s;
    synth_rows(&s, &t, 0.02, 11);
    calib_check c;
    cr_assert_eq(calib_check_run(&start, s.rows, s.n, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.rows, s.n);
    cr_expect_eq(c.rows_skipped, 3);
    cr_expect_eq(c.rows_fit + c.rows_held + c.rows_skipped, s.n);
    cr_expect_geq(c.rows_held, (s.n - 3) / 2 - 6);
    cr_expect_eq(c.fit.rows, c.rows_fit);
    expect_recovered(&c.fit, &t, 0.04);
    /* 2% Gaussian noise: mean absolute error 1.6% */
    cr_expect(c.overall_mape > 1.0 && c.overall_mape < 2.4, "overall %.2f%%", c.overall_mape);
    cr_expect_lt(c.median_op_mape, 2.5);
    cr_expect_lt(c.worst_op_mape, 4.0, "worst op %s", c.worst_op);
    cr_expect(c.median_ok && c.worst_ok);
    int seen_skip = 0, seen_gemm = 0;
    for (size_t o = 0; o < c.n_ops; o++) {
        const calib_op_report *op = &c.ops[o];
        if (!strcmp(op->op, "verify_accept")) {
            seen_skip = 1;
            cr_expect_eq(op->modelled, 0);
            cr_expect_eq(op->rows, 2);
            cr_expect_eq(op->n_fit + op->n_held, 0);
        }
        if (!strcmp(op->op, "gemm")) {
            seen_gemm = 1;
            cr_expect_eq(op->n_fit, 65);
            cr_expect_eq(op->n_held, 65);
            cr_expect_geq(op->worst, op->median);
            cr_expect_geq(op->worst, op->mape);
        }
        if (!strcmp(op->op, "copy"))
            cr_expect(op->n_fit == 1 && op->n_held == 0);
    }
    cr_expect(seen_skip && seen_gemm);

    char *table = calib_check_table(&c, s.rows, "synthetic.csv", &start);
    cr_assert_not_null(table);
    cr_expect(strstr(table, "verify_accept") && strstr(table, "not modelled: 2 rows skipped"),
              "%s", table);
    cr_expect(strstr(table, "median per-op MAPE") && strstr(table, "met"), "%s", table);
    cr_expect(strstr(table, "gemm_half_flops") && strstr(table, "degenerate, kept 0"), "%s", table);
    free(table);
    char *js = calib_check_json(&c, s.rows, "synthetic.csv", &start);
    cr_assert_not_null(js);
    json_error_t je;
    json_t *root = json_loads(js, 0, &je);
    cr_assert_not_null(root, "%s", je.text);
    cr_expect(json_is_true(json_object_get(json_object_get(root, "targets"), "met")));
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(root, "not_modelled"),
                                                    "layer_decode")), 1);
    json_t *g = json_object_get(json_object_get(root, "ops"), "gemm");
    cr_expect_eq(json_integer_value(json_object_get(g, "n")), 65);
    cr_expect(json_is_string(json_object_get(g, "worst_shape")));
    json_t *p = json_object_get(json_object_get(json_object_get(root, "fit"), "params"),
                                "gemm_eff");
    cr_expect_eq(json_real_value(json_object_get(p, "before")), start.gemm_eff);
    cr_expect_str_eq(json_string_value(json_object_get(p, "state")), "fitted");
    cr_expect(json_is_null(json_object_get(json_object_get(json_object_get(root, "ops"), "copy"),
                                           "mape")));
    json_decref(root);
    free(js);
    calib_check_free(&c);
}

Test(calib, check_reports_a_model_that_does_not_fit)
{
    hw_desc t = truth_hw(), start;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini("h200", &start, &e), 0, "%s", e.msg);
    static synth s;
    synth_rows(&s, &t, 0.01, 13);
    for (size_t i = 0; i < s.n; i++) /* attention 1.6x slower at long contexts only */
        if (strstr(s.rows[i].op, "attn") && s.rows[i].ctx_max >= 16384)
            s.rows[i].median_us *= 1.6;
    calib_check c;
    cr_assert_eq(calib_check_run(&start, s.rows, s.n, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c.worst_ok, 0, "worst %s %.2f%%", c.worst_op, c.worst_op_mape);
    cr_expect(strstr(c.worst_op, "attn"), "%s", c.worst_op);
    char *table = calib_check_table(&c, s.rows, "x.csv", &start);
    cr_assert_not_null(table);
    cr_expect(strstr(table, "MISSED"), "%s", table);
    free(table);
    calib_check_free(&c);
}

Test(calib, same_csv_same_fit_bit_for_bit)
{
    hw_desc t = truth_hw(), start;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini("h200", &start, &e), 0, "%s", e.msg);
    static synth s;
    synth_rows(&s, &t, 0.03, 17);
    char path[512];
    write_csv(&s, "det.csv", path, sizeof path);
    char *js[2];
    fit_result all[2];
    for (int k = 0; k < 2; k++) {
        calib_row *rows;
        size_t n;
        load(path, &rows, &n);
        calib_check c;
        cr_assert_eq(calib_check_run(&start, rows, n, &c, &e), 0, "%s", e.msg);
        cr_assert_eq(fit_hw(&start, rows, n, NULL, &all[k], &e), 0, "%s", e.msg);
        js[k] = calib_check_json(&c, rows, path, &start);
        cr_assert_not_null(js[k]);
        calib_check_free(&c);
        free(rows);
    }
    cr_expect_str_eq(js[0], js[1]);
    cr_expect_eq(memcmp(all[0].after, all[1].after, sizeof all[0].after), 0);
    cr_expect_eq(memcmp(&all[0].hw.gemm_eff, &all[1].hw.gemm_eff, sizeof(double)), 0);
    free(js[0]);
    free(js[1]);
}
