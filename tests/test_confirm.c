/*
 * tailsim-validate confirm's plain-C parts, without a GPU:
 *   - the batch each recorded iteration replays (validate/confirm_batch.c)
 *     is what the cost model prices: decode steps planned for the decode
 *     kernel, logit rows one per plain sequence and per chunk, V per
 *     verified sequence, the draft extend's padded CONF_DEPTH + 1 tokens;
 *     checked on every iteration of a simulated rollout, plain and with
 *     tail speculation, against counts recomputed from the record;
 *   - the report (validate/confirm_report.c) keeps what completed: with a
 *     simulated failure of one part, the table and confirm.json carry the
 *     finished part, the failed one's status and message, and every
 *     measured iteration; the exit status is non-zero; a part that queried
 *     cuBLASLt inside a timed interval is invalid; an unwritable output
 *     folder is an error and leaves nothing.
 * Both files are compiled into this test, as tests/test_validate.c does with
 * validate/calib_store.c.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers.h"
#include "models/hw.h"
#include "traces/gen.h"
#include "validate/confirm_batch.c"
#include "validate/confirm_report.c"

TestSuite(confirm);

/* The recorded plan of a small rollout of mode on Qwen2.5-7B (h200). */
static void record(spec_mode mode, it_log *log)
{
    hw_desc hw;
    llm_desc m;
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h200", &hw, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("qwen2.5-7b", &m, &e), 0, "%s", e.msg);
    gen_params p;
    gen_params_default(&p);
    cr_assert_eq(gen_parse_dist("lognormal:200:1.1", &p, &e), 0, "%s", e.msg);
    p.prompts = 6;
    p.group = 8;
    p.cap = 2048;
    p.seed = 7;
    p.prompt_median = 128;
    trace *t = gen_trace(&p, &e);
    cr_assert_not_null(t, "%s", e.msg);
    rollout_cfg c;
    memset(&c, 0, sizeof c);
    c.hw = &hw;
    c.llm = &m;
    c.tp = 1;
    c.replicas = 1;
    c.max_running = 256;
    c.chunk_tokens = 512; /* small chunks: mixed iterations */
    c.kv_tokens = 1e9;
    c.tail_threshold = 32;
    c.spec = mode;
    c.spec_patience = 10;
    spec_params_default(&c.sp);
    c.seed = 7;
    c.on_iter = conf_record_iter;
    c.on_iter_ctx = log;
    memset(log, 0, sizeof *log);
    rollout_result r;
    cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(log->oom, 0);
    rollout_result_free(&r);
    trace_free(t);
}

/* Every record's batch against counts recomputed from the record; returns
 * how many records of each kind were seen (decode, mixed, speculative). */
static void check_batches(const it_log *log, int seen[3])
{
    conf_batch bt = {0};
    ts_err e = {{0}};
    for (size_t i = 0; i < log->n; i++) {
        const it_rec *r = &log->it[i];
        const int32_t *clen = log->pool + r->off + 3 * r->n_dec + r->n_chunks;
        cr_assert_eq(conf_batch_build(log, r, &bt, &e), 0, "%s", e.msg);
        long long chunk_tok = 0, chunk_rows = 0;
        for (int k = 0; k < r->n_chunks; k++) {
            chunk_tok += clen[k];
            chunk_rows += clen[k] > 0;
        }
        const int per = r->V > 0 ? r->V : 1;
        cr_assert_eq(bt.b, r->n_dec + r->n_chunks, "iteration %zu", i);
        cr_assert_eq(bt.T, (long long)r->n_dec * per + chunk_tok, "iteration %zu", i);
        /* cost_iter: one row per decoding sequence and chunk; cost_verify: V
         * per verified sequence; never one per prefill token */
        cr_assert_eq(bt.R, (long long)r->n_dec * per + chunk_rows, "iteration %zu: %lld rows",
                     i, bt.R);
        cr_assert_eq(bt.decode, r->V == 0 && r->n_chunks == 0, "iteration %zu", i);
        cr_assert_eq(bt.spec, r->V > 0 && r->n_dec > 0, "iteration %zu", i);
        for (int k = 0; k < bt.b; k++)
            cr_assert(bt.nlog[k] >= 0 && bt.nlog[k] <= bt.qlen[k], "iteration %zu entry %d", i, k);
        for (int k = 0; bt.spec && k < bt.n_dec; k++)
            cr_assert_eq(bt.ext_q[k], CONF_DEPTH + 1, "iteration %zu", i);
        seen[conf_iter_kind(r)]++;
    }
    conf_batch_free(&bt);
}

Test(confirm, replayed_batches_are_what_the_model_prices, .timeout = 120)
{
    int seen[3] = {0, 0, 0};
    it_log plain, spec;
    record(SPEC_OFF, &plain);
    check_batches(&plain, seen);
    cr_assert_eq(seen[2], 0, "a plain rollout with speculative iterations");
    record(SPEC_ADAPTIVE, &spec);
    check_batches(&spec, seen);
    cr_assert(seen[0] > 0 && seen[1] > 0 && seen[2] > 0,
              "not every kind was exercised: decode %d, mixed %d, speculative %d", seen[0],
              seen[1], seen[2]);
    conf_log_free(&plain);
    conf_log_free(&spec);
}

/* ---- the report, driven with simulated outcomes --------------------------- */

typedef struct fake_run {
    it_rec it[6];
    run_pred base, spec;
    double base_s[3], spec_s[3];
    replay_stats rb, rs;
    conf_result res;
} fake_run;

/* Baseline: 3 iterations of 10 ms predicted, all replayed at 11 ms (ok);
 * speculative: 3 of 5 ms predicted, the first replayed at 5.5 ms, then the
 * status given. */
static void fake(fake_run *f, part_status spec_status, const char *msg)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < 6; i++)
        f->it[i] = (it_rec){i < 3 ? 0.010 : 0.005, 4, i < 3 ? 0 : 6, 0, 0};
    f->base.makespan = 0.030;
    f->base.log.it = f->it;
    f->base.log.n = 3;
    f->spec.makespan = 0.015;
    f->spec.log.it = f->it + 3;
    f->spec.log.n = 3;
    f->rb = (replay_stats){.status = PART_OK, .measured = 0.033, .predicted = 0.030,
                           .host_s = 0.002, .done = 3, .iter_s = f->base_s};
    f->rb.n[0] = 3;
    f->rb.err_abs[0] = 0.3;
    f->base_s[0] = f->base_s[1] = f->base_s[2] = 0.011;
    f->rs = (replay_stats){.status = spec_status, .measured = 0.0055, .predicted = 0.005,
                           .done = 1, .iter_s = f->spec_s};
    f->spec_s[0] = 0.0055;
    snprintf(f->rs.msg, sizeof f->rs.msg, "%s", msg);
    f->res = (conf_result){"Simulated H200", "none", 24, 28, 1, 0, &f->base, &f->spec, &f->rb,
                           &f->rs};
}

static char *print_to_string(const conf_result *r, const conf_verdict *v)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_not_null(f);
    conf_print(f, r, v);
    fclose(f);
    return buf;
}

static json_t *load_json(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/confirm.json", dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    cr_assert_not_null(j, "%s: %s", path, je.text);
    return j;
}

static const char *part_str(json_t *j, const char *part, const char *key)
{
    return json_string_value(json_object_get(json_object_get(j, part), key));
}

static size_t part_len(json_t *j, const char *part, const char *key)
{
    return json_array_size(json_object_get(json_object_get(j, part), key));
}

Test(confirm, a_failed_part_keeps_what_completed)
{
    fake_run f;
    fake(&f, PART_ERROR, "iteration 1: simulated CUDA failure");
    conf_verdict v;
    conf_judge(&f.res, &v);
    cr_expect_eq(v.complete, 0);
    cr_expect_eq(conf_exit_status(&f.res, &v), 2);
    char *t = print_to_string(&f.res, &v);
    cr_expect(strstr(t, "baseline makespan") && strstr(t, "3/3 iterations, ok"), "%s", t);
    cr_expect(strstr(t, "1/3 iterations, error: iteration 1: simulated CUDA failure"), "%s", t);
    cr_expect(strstr(t, "+10.0%"), "the baseline's error is not in the table:\n%s", t);
    free(t);

    char dir[256];
    tmpdir_create(dir, sizeof dir, "confirm");
    ts_err e = {{0}};
    cr_assert_eq(conf_write_json(dir, &f.res, &v, &e), 0, "%s", e.msg);
    json_t *j = load_json(dir);
    cr_expect_str_eq(part_str(j, "baseline", "status"), "ok");
    cr_expect_str_eq(part_str(j, "speculative", "status"), "error");
    cr_expect_str_eq(part_str(j, "speculative", "message"), "iteration 1: simulated CUDA failure");
    cr_expect_eq(part_len(j, "baseline", "iter_measured_s"), 3);
    cr_expect_eq(part_len(j, "baseline", "iter_predicted_s"), 3);
    cr_expect_eq(part_len(j, "speculative", "iter_measured_s"), 1);
    cr_expect(json_is_false(json_object_get(j, "complete")));
    json_decref(j);
    tmpdir_remove(dir);
}

Test(confirm, parts_not_run_or_out_of_time_exit_3)
{
    fake_run f;
    fake(&f, PART_NOT_RUN, "out of time (--budget 40 s)");
    f.rs.done = 0;
    f.rs.measured = f.rs.predicted = 0;
    conf_verdict v;
    conf_judge(&f.res, &v);
    cr_expect_eq(conf_exit_status(&f.res, &v), 3);
    char *t = print_to_string(&f.res, &v);
    cr_expect(strstr(t, "0/3 iterations, not run: out of time"), "%s", t);
    cr_expect(strstr(t, "targets: not evaluated"), "%s", t);
    free(t);
    fake(&f, PART_OUT_OF_TIME, "");
    conf_judge(&f.res, &v);
    cr_expect_eq(conf_exit_status(&f.res, &v), 3);
    fake(&f, PART_OK, "");
    f.rs.done = 3;
    f.rb.measured = 0.0315; /* +5% */
    f.rs.measured = 0.01575; /* +5% */
    f.rs.predicted = 0.015;
    conf_judge(&f.res, &v);
    cr_expect_eq(v.complete, 1);
    cr_expect_eq(conf_exit_status(&f.res, &v), 0, "both within 10%%, speedup exact");
}

Test(confirm, timed_plan_queries_invalidate_the_measurement)
{
    fake_run f;
    fake(&f, PART_OK, "");
    f.rs.done = 3;
    f.rb.queries_timed = 22;
    conf_verdict v;
    conf_judge(&f.res, &v);
    cr_expect_eq(v.valid, 0);
    cr_expect_eq(v.ok, 0);
    cr_expect_eq(conf_exit_status(&f.res, &v), 2);
    char *t = print_to_string(&f.res, &v);
    cr_expect(strstr(t, "22 cuBLASLt heuristic queries inside timed intervals"), "%s", t);
    cr_expect(strstr(t, "INVALID"), "%s", t);
    free(t);
}

Test(confirm, unwritable_output_is_an_error_and_leaves_nothing)
{
    fake_run f;
    fake(&f, PART_OK, "");
    conf_verdict v;
    conf_judge(&f.res, &v);
    char dir[256], file[320], sub[400];
    tmpdir_create(dir, sizeof dir, "confirmbad");
    snprintf(file, sizeof file, "%s/plain-file", dir);
    write_aside(file, "x");
    snprintf(sub, sizeof sub, "%s/out", file); /* a folder under a regular file */
    ts_err e = {{0}};
    cr_expect_eq(conf_write_json(sub, &f.res, &v, &e), -1);
    cr_expect(strstr(e.msg, "plain-file/out"), "%s", e.msg);
    tmpdir_remove(dir);
}
