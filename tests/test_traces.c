/*
 * Trace tests: the real PolyTrace and Vidur files (skipped when
 * $TAILSIM_SHARED/traces is absent), a table of bad inputs (every reader must
 * name file, line and field and leave *out untouched), CSV write/read round
 * trips, statistics on hand-made traces with known percentiles, the
 * generators' determinism and moments, the `tailsim trace` command's exit
 * statuses, and the -qwenlens scenarios' lognormal against the DAPO trace.
 * Each test runs in its own process with a fresh temporary directory (suite
 * init/fini).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_cdf.h>

#include "common/util.h"
#include "cli/cmd.h"
#include "sim/scenario.h"
#include "tests/helpers.h"
#include "traces/gen.h"
#include "traces/trace.h"

static char tmpdir[256];

static void setup(void)
{
    tmpdir_create(tmpdir, sizeof tmpdir, "traces");
}

static void teardown(void)
{
    tmpdir_remove(tmpdir);
}

TestSuite(traces, .init = setup, .fini = teardown);

/* ------------------------------------------------------------- helpers */

static void tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const char *content, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    cr_assert_eq(fwrite(content, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

/* Path of a shared trace, or skips the test when it is absent. */
static void shared_trace(char *buf, size_t n, const char *rel)
{
    char sub[512];
    snprintf(sub, sizeof sub, "traces/%s", rel);
    shared_path(buf, n, sub);
}

/* All six PolyTrace DAPO steps concatenated (free with trace_free), or
 * skips the test when they are absent. */
static trace *load_dapo_all(void)
{
    char path[1024];
    trace *all = trace_new(), *one = NULL;
    ts_err e = {{0}};
    cr_assert_not_null(all);
    for (int s = 0; s < 6; s++) {
        char rel[64];
        snprintf(rel, sizeof rel, "polytrace-dapo-32b/step_%d.jsonl", s);
        shared_trace(path, sizeof path, rel);
        cr_assert_eq(trace_load_jsonl(path, &one, &e), 0, "%s", e.msg);
        cr_assert_eq(trace_append(all, one, &e), 0, "%s", e.msg);
        trace_free(one);
        one = NULL;
    }
    return all;
}

static void assert_same_trace(const trace *a, const trace *b)
{
    cr_assert_eq(a->n_prompts, b->n_prompts, "prompts %zu vs %zu", a->n_prompts, b->n_prompts);
    for (size_t i = 0; i < a->n_prompts; i++) {
        const trace_prompt *p = &a->prompts[i], *q = &b->prompts[i];
        cr_assert(p->step == q->step && p->prompt_id == q->prompt_id &&
                      p->dp_rank == q->dp_rank && p->prompt_tokens == q->prompt_tokens &&
                      p->n_resp == q->n_resp,
                  "prompt %zu differs", i);
        cr_assert_arr_eq(p->resp, q->resp, (size_t)p->n_resp * sizeof *p->resp,
                         "responses of prompt %zu differ", i);
    }
}

static trace *must_gen(const gen_params *p)
{
    ts_err e = {{0}};
    trace *t = gen_trace(p, &e);
    cr_assert_not_null(t, "gen_trace: %s", e.msg);
    return t;
}

/* ------------------------------------------------------------ real data */

Test(traces, dapo_step0_matches_readme)
{
    char path[1024];
    shared_trace(path, sizeof path, "polytrace-dapo-32b/step_0.jsonl");
    trace *t = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    trace_stats s;
    cr_assert_eq(trace_stats_compute(t, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(s.steps, 1);
    cr_assert_eq(s.prompts, 96);
    cr_assert_eq(s.responses, 768);
    cr_assert(fabs(s.mean - 608) < 1, "mean %g", s.mean);
    cr_assert_eq(s.max, 8948);
    cr_assert(fabs(s.p50 - 485) < 1e-9, "p50 %g", s.p50);
    cr_assert(fabs(s.p90 - 1129.4) < 1e-6, "p90 %g", s.p90);
    cr_assert(fabs(s.p99 - 2793.73) < 1e-6, "p99 %g", s.p99);
    cr_assert(fabs(s.prompt_mean - 162.885) < 0.01, "prompt mean %g", s.prompt_mean);
    /* dp_rank kept (two ranks, 48 prompts each); ids 0..95 in file order */
    int per_rank[2] = {0, 0};
    for (size_t i = 0; i < t->n_prompts; i++) {
        cr_assert(t->prompts[i].dp_rank == 0 || t->prompts[i].dp_rank == 1);
        per_rank[t->prompts[i].dp_rank]++;
        cr_assert_eq(t->prompts[i].prompt_id, (int32_t)i);
        cr_assert_eq(t->prompts[i].step, 0);
        cr_assert_eq(t->prompts[i].n_resp, 8);
    }
    cr_assert(per_rank[0] == 48 && per_rank[1] == 48, "%d/%d", per_rank[0], per_rank[1]);
    /* first record: input 112, output [450, 453, 396, 274, 26, 393, 1842, 681] */
    int32_t first[8] = {450, 453, 396, 274, 26, 393, 1842, 681};
    cr_assert_eq(t->prompts[0].prompt_tokens, 112);
    cr_assert_arr_eq(t->prompts[0].resp, first, sizeof first);
    trace_free(t);
}

Test(traces, dapo_all_steps_concatenate_and_select)
{
    trace *all = load_dapo_all();
    ts_err e = {{0}};
    trace_stats st;
    cr_assert_eq(trace_stats_compute(all, &st, &e), 0);
    cr_assert_eq(st.steps, 6);
    cr_assert_eq(st.prompts, 576);
    cr_assert_eq(st.max, 10112); /* step 2 */
    trace *s3 = trace_select_step(all, 3, &e);
    cr_assert_not_null(s3, "%s", e.msg);
    cr_assert_eq(s3->n_prompts, 96);
    for (size_t i = 0; i < s3->n_prompts; i++)
        cr_assert_eq(s3->prompts[i].step, 3);
    trace *first = trace_select_step(all, -1, &e);
    cr_assert_not_null(first);
    cr_assert_eq(first->prompts[0].step, 0);
    cr_assert_null(trace_select_step(all, 6, &e));
    cr_assert(strstr(e.msg, "step 6") != NULL, "%s", e.msg);
    trace_free(s3);
    trace_free(first);
    trace_free(all);
}

Test(traces, vidur_files_load_with_row_counts)
{
    static const struct {
        const char *name;
        size_t rows;
        int32_t first_prefill, first_decode;
    } files[] = {
        {"vidur/splitwise_conv.csv", 19366, 374, 44},
        {"vidur/splitwise_code.csv", 8819, 4808, 10},
        {"vidur/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv", 28257, 3772, 54},
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024];
        shared_trace(path, sizeof path, files[f].name);
        trace *t = NULL;
        ts_err e = {{0}};
        cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
        cr_assert_eq(t->n_prompts, files[f].rows, "%s: %zu rows", files[f].name, t->n_prompts);
        cr_assert_eq(trace_n_responses(t), files[f].rows);
        cr_assert_eq(t->prompts[0].prompt_tokens, files[f].first_prefill);
        cr_assert_eq(t->prompts[0].resp[0], files[f].first_decode);
        cr_assert_eq(t->prompts[t->n_prompts - 1].prompt_id, (int32_t)files[f].rows - 1);
        cr_assert_eq(t->prompts[0].dp_rank, -1);
        trace_free(t);
    }
}

Test(traces, dapo_csv_round_trip)
{
    char path[1024], out[512];
    shared_trace(path, sizeof path, "polytrace-dapo-32b/step_1.jsonl");
    tmp_path(out, sizeof out, "dapo1.csv");
    trace *t = NULL, *u = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(trace_write_csv(t, out, &e), 0, "%s", e.msg);
    cr_assert_eq(trace_load(out, &u, &e), 0, "%s", e.msg);
    assert_same_trace(t, u);
    trace_free(t);
    trace_free(u);
}

/* ------------------------------------------------------------ bad input */

typedef struct bad_case {
    char file[32];     /* name in the temporary directory */
    char content[200]; /* file content */
    char loader;       /* 'a' trace_load, 'j' jsonl, 'c' csv, 'v' vidur */
    int line;          /* expected line in "file:line:" */
    char field[40];    /* expected substring naming the field */
} bad_case;

#define J_OK "{\"step\":0,\"input\":5,\"output\":[1,2]}\n"
#define CSV_H "step,prompt_id,prompt_tokens,response_tokens\n"

ParameterizedTestParameters(traces, bad_input)
{
    static bad_case cases[] = {
        {"zero.jsonl", "{\"step\":0,\"input\":5,\"output\":[1,0]}\n", 'a', 1, "field 'output'"},
        {"neg.jsonl", J_OK "{\"step\":0,\"input\":5,\"output\":[-3]}\n", 'j', 2, "field 'output'"},
        {"float.jsonl", J_OK J_OK "{\"step\":0,\"input\":5,\"output\":[1.5]}", 'a', 3,
         "field 'output'"},
        {"big.jsonl", "{\"step\":0,\"input\":5,\"output\":[9223372036854775808]}\n", 'j', 1,
         "field 'output'"},
        {"nan.jsonl", "\n" J_OK "{\"step\":0,\"input\":5,\"output\":[NaN]}\n", 'a', 3,
         "field 'output'"},
        {"huge.jsonl", "{\"step\":0,\"input\":5,\"output\":[16777217]}\n", 'a', 1,
         "field 'output'"},
        {"empty_out.jsonl", "{\"step\":0,\"input\":5,\"output\":[]}\n", 'a', 1, "field 'output'"},
        {"str_out.jsonl", "{\"step\":0,\"input\":5,\"output\":\"12\"}\n", 'a', 1,
         "field 'output'"},
        {"bool_out.jsonl", "{\"step\":0,\"input\":5,\"output\":[true]}\n", 'a', 1,
         "field 'output'"},
        {"no_out.jsonl", J_OK "{\"step\":0,\"input\":5}\n", 'a', 2, "field 'output'"},
        {"no_step.jsonl", "{\"input\":5,\"output\":[3]}\n", 'a', 1, "field 'step'"},
        {"str_step.jsonl", "{\"step\":\"0\",\"input\":5,\"output\":[3]}\n", 'a', 1,
         "field 'step'"},
        {"neg_input.jsonl", "{\"step\":0,\"input\":-1,\"output\":[3]}\n", 'a', 1,
         "field 'input'"},
        {"dp.jsonl", "{\"step\":0,\"dp_rank\":\"a\",\"input\":1,\"output\":[3]}\n", 'a', 1,
         "field 'dp_rank'"},
        {"array.jsonl", J_OK "[1,2]\n", 'j', 2, "JSON object"},
        {"junk.jsonl", J_OK "\x01\x02\xff garbage\n", 'a', 2, "invalid JSON"},
        {"empty.jsonl", "", 'j', 1, "no records"},
        {"blank.jsonl", "\n  \n", 'j', 2, "no records"},
        {"hdr.csv", "step,prompt,prompt_tokens,response_tokens\n0,0,1,1\n", 'c', 1,
         "field 'header'"},
        {"abc.csv", CSV_H "0,0,5,3\n0,0,5,abc\n", 'a', 3, "field 'response_tokens'"},
        {"zero.csv", CSV_H "0,0,5,0\n", 'a', 2, "field 'response_tokens'"},
        {"short.csv", CSV_H "0,0,5\n", 'a', 2, "field 'response_tokens'"},
        {"negstep.csv", CSV_H "-1,0,5,3\n", 'a', 2, "field 'step'"},
        {"dup.csv", CSV_H "0,0,5,3\n0,1,5,3\n0,0,5,4\n", 'a', 4, "field 'prompt_id'"},
        {"ptok.csv", CSV_H "0,0,5,3\n0,0,6,3\n", 'a', 3, "field 'prompt_tokens'"},
        {"cols6.csv", "step,prompt_id,prompt_tokens,response_tokens,dp_rank,x\n0,0,1,1,0,0\n",
         'c', 1, "field 'header'"},
        {"extra.csv", CSV_H "0,0,5,3,1\n", 'a', 2, "field #5"},
        {"only_header.csv", CSV_H, 'a', 1, "no records"},
        {"v_zero.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,10,5\n1.0,10,0\n",
         'a', 3, "field 'num_decode_tokens'"},
        {"v_frac.csv", "num_prefill_tokens,num_decode_tokens\n10.5,4\n", 'a', 2,
         "field 'num_prefill_tokens'"},
        {"v_missing.csv", "num_prefill_tokens,x\n10,4\n", 'v', 1, "field 'num_decode_tokens'"},
        {"unknown.txt", "hello,world\n1,2\n", 'a', 1, "unknown trace format"},
        {"binary.bin", "\x89PNG\r\n\x1a\n\0\0\0", 'a', 1, "field 'header'"},
    };
    return cr_make_param_array(bad_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_case *c, traces, bad_input)
{
    char path[512], where[600];
    tmp_path(path, sizeof path, c->file);
    size_t len = strlen(c->content);
    if (!strcmp(c->file, "binary.bin"))
        len = 11; /* keep the NUL bytes */
    write_file(path, c->content, len);
    static trace sentinel;
    trace *out = &sentinel;
    ts_err e = {{0}};
    int rc = c->loader == 'j' ? trace_load_jsonl(path, &out, &e)
           : c->loader == 'c' ? trace_load_csv(path, &out, &e)
           : c->loader == 'v' ? trace_load_vidur(path, &out, &e)
                              : trace_load(path, &out, &e);
    cr_assert_eq(rc, -1, "%s: loaded", c->file);
    cr_assert_eq(out, &sentinel, "%s: *out was changed", c->file);
    snprintf(where, sizeof where, "%s:%d:", path, c->line);
    cr_assert(strstr(e.msg, where) != NULL, "%s: '%s' lacks '%s'", c->file, e.msg, where);
    cr_assert(strstr(e.msg, c->field) != NULL, "%s: '%s' lacks '%s'", c->file, e.msg, c->field);
}

Test(traces, missing_file_is_an_error)
{
    trace *out = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load("/nonexistent/x.jsonl", &out, &e), -1);
    cr_assert_null(out);
    cr_assert(strstr(e.msg, "/nonexistent/x.jsonl") != NULL, "%s", e.msg);
}

/* ------------------------------------------------------- good input forms */

Test(traces, jsonl_variants_and_ids)
{
    char path[512];
    tmp_path(path, sizeof path, "ok.jsonl");
    const char *txt =
        "{\"step\":1,\"input\":7,\"output\":[3,4]}\r\n"
        "\n"
        "{\"step\":0,\"dp_rank\":2,\"local_index\":9,\"input\":0,\"output\":[16777216],"
        "\"validate\":false}\n"
        "  {\"step\":1,\"dp_rank\":null,\"input\":8,\"output\":[5]}"; /* no final newline */
    write_file(path, txt, strlen(txt));
    trace *t = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t->n_prompts, 3);
    cr_assert_eq(t->prompts[0].prompt_id, 0);
    cr_assert_eq(t->prompts[1].prompt_id, 0); /* first of step 0 */
    cr_assert_eq(t->prompts[2].prompt_id, 1); /* second of step 1 */
    cr_assert_eq(t->prompts[0].dp_rank, -1);
    cr_assert_eq(t->prompts[1].dp_rank, 2);
    cr_assert_eq(t->prompts[2].dp_rank, -1);
    cr_assert_eq(t->prompts[1].resp[0], TRACE_MAX_TOKENS);
    cr_assert_eq(trace_n_tokens(t), 3 + 4 + TRACE_MAX_TOKENS + 5);
    trace_free(t);
}

Test(traces, csv_groups_and_vidur_floats)
{
    char path[512];
    tmp_path(path, sizeof path, "g.csv");
    const char *txt = CSV_H "0,0,5,3\n0,0,5,4\n0,1,6,9\n1,0,7,2\n";
    write_file(path, txt, strlen(txt));
    trace *t = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t->n_prompts, 3);
    cr_assert_eq(t->prompts[0].n_resp, 2);
    cr_assert_eq(t->prompts[0].resp[1], 4);
    cr_assert_eq(t->prompts[2].step, 1);
    trace_free(t);
    t = NULL;
    tmp_path(path, sizeof path, "v.csv");
    txt = "num_decode_tokens,x,num_prefill_tokens\n54.0,a,10\n7,b,0\n";
    write_file(path, txt, strlen(txt));
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t->n_prompts, 2);
    cr_assert_eq(t->prompts[0].resp[0], 54);
    cr_assert_eq(t->prompts[0].prompt_tokens, 10);
    cr_assert_eq(t->prompts[1].prompt_id, 1);
    trace_free(t);
}

/* ------------------------------------------------------------ round trip */

Test(traces, csv_round_trip_with_and_without_ranks)
{
    for (int with_dp = 0; with_dp < 2; with_dp++) {
        trace *t = trace_new(), *u = NULL;
        ts_err e = {{0}};
        int32_t a[3] = {1, 16777216, 7}, b[1] = {42}, c[2] = {5, 5};
        cr_assert_eq(trace_add(t, 0, 0, with_dp ? 1 : -1, 100, a, 3, &e), 0, "%s", e.msg);
        cr_assert_eq(trace_add(t, 0, 5, -1, 0, b, 1, &e), 0);
        cr_assert_eq(trace_add(t, 3, 0, with_dp ? 0 : -1, 12, c, 2, &e), 0);
        cr_assert_eq(trace_add(t, 2, 0, -1, 12, c, 2, &e), 0);
        char path[512];
        tmp_path(path, sizeof path, with_dp ? "rt_dp.csv" : "rt.csv");
        cr_assert_eq(trace_write_csv(t, path, &e), 0, "%s", e.msg);
        cr_assert_eq(trace_load_csv(path, &u, &e), 0, "%s", e.msg);
        assert_same_trace(t, u);
        FILE *f = fopen(path, "r");
        char hdr[128] = "";
        cr_assert(fgets(hdr, sizeof hdr, f) != NULL);
        fclose(f);
        cr_assert_eq(strstr(hdr, "dp_rank") != NULL, with_dp, "header '%s'", hdr);
        trace_free(t);
        trace_free(u);
    }
}

Test(traces, write_refuses_duplicate_ids_and_bad_adds)
{
    trace *t = trace_new();
    ts_err e = {{0}};
    int32_t a[2] = {1, 2}, zero[1] = {0};
    cr_assert_eq(trace_add(t, 0, 1, -1, 3, a, 2, &e), 0);
    cr_assert_eq(trace_add(t, 0, 1, -1, 3, a, 1, &e), 0);
    cr_assert_eq(trace_add(t, 0, 2, -1, 3, zero, 1, &e), -1);
    cr_assert_eq(trace_add(t, 0, 2, -1, 3, a, 0, &e), -1);
    cr_assert_eq(trace_add(t, 0, 2, -2, 3, a, 1, &e), -1);
    cr_assert_eq(t->n_prompts, 2);
    char path[512];
    tmp_path(path, sizeof path, "dup.csv");
    cr_assert_eq(trace_write_csv(t, path, &e), -1);
    cr_assert(strstr(e.msg, "prompt_id 1 twice") != NULL, "%s", e.msg);
    cr_assert_neq(access(path, F_OK), 0, "a file was written");
    trace_free(t);
    trace_free(NULL);
}

/* ------------------------------------------------------------ statistics */

Test(traces, stats_hand_made)
{
    trace *t = trace_new();
    ts_err e = {{0}};
    int32_t a[5] = {10, 1, 3, 2, 4}, b[5] = {9, 8, 7, 6, 5};
    cr_assert_eq(trace_add(t, 4, 0, -1, 10, a, 5, &e), 0);
    cr_assert_eq(trace_add(t, 7, 0, -1, 30, b, 5, &e), 0);
    trace_stats s;
    cr_assert_eq(trace_stats_compute(t, &s, &e), 0);
    cr_assert_eq(s.steps, 2);
    cr_assert_eq(s.prompts, 2);
    cr_assert_eq(s.responses, 10);
    cr_assert_eq(s.tokens, 55);
    cr_assert_float_eq(s.mean, 5.5, 1e-12);
    cr_assert_float_eq(s.p50, 5.5, 1e-12);  /* numpy.percentile(1..10, 50) */
    cr_assert_float_eq(s.p90, 9.1, 1e-12);
    cr_assert_float_eq(s.p99, 9.91, 1e-12);
    cr_assert_eq(s.max, 10);
    cr_assert_float_eq(s.max_over_p50, 10 / 5.5, 1e-12);
    cr_assert_float_eq(s.prompt_mean, 20, 1e-12);
    /* one response: every percentile is that value */
    trace *one = trace_new();
    int32_t x[1] = {77};
    cr_assert_eq(trace_add(one, 0, 0, -1, 1, x, 1, &e), 0);
    cr_assert_eq(trace_stats_compute(one, &s, &e), 0);
    cr_assert(s.p50 == 77 && s.p99 == 77 && s.max == 77);
    trace *empty = trace_new();
    cr_assert_eq(trace_stats_compute(empty, &s, &e), -1);
    trace_free(t);
    trace_free(one);
    trace_free(empty);
}

/* ------------------------------------------------------------ generators */

Test(traces, gen_parse_dist)
{
    gen_params p;
    ts_err e = {{0}};
    gen_params_default(&p);
    cr_assert_eq(p.dist, GEN_MIXTURE);
    cr_assert_eq(p.n_comp, 4);
    cr_assert_eq(gen_parse_dist("lognormal:500:0.5", &p, &e), 0, "%s", e.msg);
    cr_assert_eq(p.dist, GEN_LOGNORMAL);
    cr_assert_float_eq(exp(p.ln_mu), 500, 1e-9);
    cr_assert_float_eq(p.ln_sigma, 0.5, 1e-12);
    cr_assert_eq(gen_parse_dist("mixture:1/100/10,3/200/20", &p, &e), 0, "%s", e.msg);
    cr_assert_eq(p.n_comp, 2);
    cr_assert_float_eq(p.mean[1], 200, 1e-12);
    cr_assert_eq(gen_parse_dist("fixed:77", &p, &e), 0);
    cr_assert_eq(p.fixed_len, 77);
    static const char *bad[] = {"fixed:0", "fixed:x", "lognormal:5", "lognormal:-1:1",
                                "mixture:1/2", "mixture:0/100/10", "mixture:1/100/0",
                                "mixture:", "gamma", ("mixture:1/1/1,1/1/1,1/1/1,1/1/1,1/1/1,"
                                 "1/1/1,1/1/1,1/1/1,1/1/1")};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gen_params q;
        memcpy(&q, &p, sizeof q);
        e.msg[0] = 0;
        cr_assert_eq(gen_parse_dist(bad[i], &q, &e), -1, "'%s' accepted", bad[i]);
        cr_assert(strstr(e.msg, "--dist") != NULL, "'%s': %s", bad[i], e.msg);
        cr_assert_eq(memcmp(&q, &p, sizeof p), 0, "'%s' changed the params", bad[i]);
    }
}

Test(traces, gen_deterministic_per_seed)
{
    gen_params p;
    gen_params_default(&p);
    p.steps = 3;
    p.prompt_sigma = 0.4;
    p.n_ranks = 3;
    trace *a = must_gen(&p), *b = must_gen(&p);
    assert_same_trace(a, b);
    cr_assert_eq(a->n_prompts, 3 * 64);
    cr_assert_eq(a->prompts[64 + 4].step, 1);
    cr_assert_eq(a->prompts[64 + 4].prompt_id, 4);
    cr_assert_eq(a->prompts[64 + 4].dp_rank, 1);
    p.seed = 2;
    trace *c = must_gen(&p);
    int differ = 0;
    for (size_t i = 0; i < a->n_prompts; i++)
        differ |= memcmp(a->prompts[i].resp, c->prompts[i].resp, 8 * sizeof(int32_t)) != 0;
    cr_assert(differ, "seeds 1 and 2 gave the same trace");
    /* more steps do not perturb the earlier ones */
    p.seed = 1;
    p.steps = 4;
    trace *d = must_gen(&p);
    for (size_t i = 0; i < a->n_prompts; i++)
        cr_assert_arr_eq(a->prompts[i].resp, d->prompts[i].resp, 8 * sizeof(int32_t));
    trace_free(a);
    trace_free(b);
    trace_free(c);
    trace_free(d);
}

Test(traces, gen_fixed_and_cap)
{
    gen_params p;
    ts_err e = {{0}};
    gen_params_default(&p);
    cr_assert_eq(gen_parse_dist("fixed:300", &p, &e), 0);
    p.prompt_median = 17;
    trace *t = must_gen(&p);
    for (size_t i = 0; i < t->n_prompts; i++) {
        cr_assert_eq(t->prompts[i].prompt_tokens, 17);
        for (int j = 0; j < t->prompts[i].n_resp; j++)
            cr_assert_eq(t->prompts[i].resp[j], 300);
    }
    trace_free(t);
    p.cap = 200;
    t = must_gen(&p);
    cr_assert_eq(t->prompts[5].resp[3], 200);
    trace_free(t);
    /* mixture with a low cap: nothing above it, a lot exactly at it, nothing < 1 */
    cr_assert_eq(gen_parse_dist("mixture", &p, &e), 0);
    p.cap = 4096;
    p.prompts = 500;
    t = must_gen(&p);
    trace_stats s;
    cr_assert_eq(trace_stats_compute(t, &s, &e), 0);
    cr_assert_eq(s.max, 4096);
    cr_assert(s.p50 == 4096, "p50 %g: most of the Intern-S1 mass is above 4096", s.p50);
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int j = 0; j < t->prompts[i].n_resp; j++)
            cr_assert(t->prompts[i].resp[j] >= 1);
    trace_free(t);
    /* zero-mean mixture: the negative half goes to 1 */
    cr_assert_eq(gen_parse_dist("mixture:1/0/100", &p, &e), 0);
    p.corr = 0;
    t = must_gen(&p);
    size_t ones = 0, n = trace_n_responses(t);
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int j = 0; j < t->prompts[i].n_resp; j++)
            ones += t->prompts[i].resp[j] == 1;
    cr_assert(fabs((double)ones / (double)n - 0.506) < 0.03, "%zu of %zu at 1", ones, n);
    trace_free(t);
}

Test(traces, gen_lognormal_median)
{
    gen_params p;
    ts_err e = {{0}};
    gen_params_default(&p);
    cr_assert_eq(gen_parse_dist("lognormal", &p, &e), 0);
    p.prompts = 5000;
    p.corr = 0;
    p.cap = TRACE_MAX_TOKENS;
    trace *t = must_gen(&p);
    trace_stats s;
    cr_assert_eq(trace_stats_compute(t, &s, &e), 0);
    cr_assert(fabs(s.p50 / 1024 - 1) < 0.03, "median %g", s.p50);
    /* mean of a lognormal: median * exp(sigma^2 / 2) = 1688 */
    cr_assert(fabs(s.mean / 1688.3 - 1) < 0.05, "mean %g", s.mean);
    trace_free(t);
}

Test(traces, gen_mixture_mean)
{
    gen_params p;
    gen_params_default(&p);
    ts_err e = {{0}};
    p.prompts = 5000;
    p.corr = 0;
    p.cap = 1 << 20;
    trace *t = must_gen(&p);
    trace_stats s;
    cr_assert_eq(trace_stats_compute(t, &s, &e), 0);
    /* sum w*m = 9568; clipping the negative mass of component 1 adds ~10 */
    cr_assert(fabs(s.mean - 9580) < 150, "mean %g", s.mean);
    cr_assert(s.max < 50000, "max %lld", (long long)s.max);
    trace_free(t);
}

/* Pearson correlation of log lengths of responses 0 and 1 over prompts. */
static double first_pair_log_corr(const trace *t)
{
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, n = (double)t->n_prompts;
    for (size_t i = 0; i < t->n_prompts; i++) {
        double x = log(t->prompts[i].resp[0]), y = log(t->prompts[i].resp[1]);
        sx += x;
        sy += y;
        sxx += x * x;
        syy += y * y;
        sxy += x * y;
    }
    double cov = sxy / n - sx / n * sy / n;
    return cov / sqrt((sxx / n - sx / n * sx / n) * (syy / n - sy / n * sy / n));
}

Test(traces, gen_group_correlation)
{
    gen_params p;
    ts_err e = {{0}};
    gen_params_default(&p);
    p.prompts = 4000;
    p.cap = TRACE_MAX_TOKENS;
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(gen_parse_dist(d ? "mixture" : "lognormal:800:0.7", &p, &e), 0);
        p.corr = 1;
        trace *t = must_gen(&p);
        for (size_t i = 0; i < t->n_prompts; i++)
            for (int j = 1; j < t->prompts[i].n_resp; j++)
                cr_assert_eq(t->prompts[i].resp[j], t->prompts[i].resp[0], "rho=1, prompt %zu", i);
        trace_free(t);
        p.corr = 0;
        t = must_gen(&p);
        double r0 = first_pair_log_corr(t);
        cr_assert(fabs(r0) < 0.06, "rho=0 gave correlation %g", r0);
        trace_free(t);
        if (d == 0) { /* lognormal: the log lengths carry the copula's rho exactly */
            p.corr = 0.5;
            t = must_gen(&p);
            double r5 = first_pair_log_corr(t);
            cr_assert(fabs(r5 - 0.5) < 0.05, "rho=0.5 gave correlation %g", r5);
            trace_free(t);
        }
    }
}

Test(traces, gen_rejects_bad_params)
{
    gen_params p;
    ts_err e = {{0}};
    gen_params_default(&p);
    p.group = 0;
    cr_assert_null(gen_trace(&p, &e));
    gen_params_default(&p);
    p.corr = 1.5;
    cr_assert_null(gen_trace(&p, &e));
    cr_assert(strstr(e.msg, "correlation") != NULL, "%s", e.msg);
    gen_params_default(&p);
    p.cap = 0;
    cr_assert_null(gen_trace(&p, &e));
}

/* ------------------------------------------------------------ the command */

static int run_cmd(const char *const *args)
{
    char *argv[32];
    int argc = 0;
    while (args[argc]) {
        argv[argc] = (char *)args[argc];
        argc++;
    }
    argv[argc] = NULL;
    fflush(stdout);
    return cmd_trace(argc, argv);
}

static void quiet(void)
{
    cr_redirect_stdout();
    cr_redirect_stderr();
}

Test(traces, command_exit_statuses, .init = quiet)
{
    char out[512], bad[512];
    tmp_path(out, sizeof out, "g.csv");
    tmp_path(bad, sizeof bad, "bad.jsonl");
    write_file(bad, "{\"step\":0}\n", 11);
    const char *gen[] = {"trace", "gen", "--dist", "lognormal:100:0.5", "--prompts", "4",
                         "--group", "2", "--steps=2", "--ranks", "2", "--seed", "3", "-o",
                         out, NULL};
    cr_assert_eq(run_cmd(gen), 0);
    trace *t = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(out, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t->n_prompts, 8);
    cr_assert_eq(t->prompts[7].dp_rank, 1);
    trace_free(t);
    const char *stats[] = {"trace", "stats", out, "--json", "--step", "1", NULL};
    cr_assert_eq(run_cmd(stats), 0);
    const char *help[] = {"trace", "gen", "--help", NULL};
    cr_assert_eq(run_cmd(help), 0);
    const char *no_seed[] = {"trace", "gen", "--dist", "fixed:3", "--prompts", "1", "--group",
                             "1", "-o", out, NULL};
    cr_assert_eq(run_cmd(no_seed), 2);
    const char *bad_num[] = {"trace", "gen", "--dist", "fixed:3", "--prompts", "1x", NULL};
    cr_assert_eq(run_cmd(bad_num), 2);
    const char *bad_dist[] = {"trace", "gen", "--dist", "weird", NULL};
    cr_assert_eq(run_cmd(bad_dist), 2);
    const char *no_file[] = {"trace", "stats", "--json", NULL};
    cr_assert_eq(run_cmd(no_file), 2);
    const char *bad_opt[] = {"trace", "stats", out, "--bogus", NULL};
    cr_assert_eq(run_cmd(bad_opt), 2);
    const char *bad_in[] = {"trace", "stats", bad, NULL};
    cr_assert_eq(run_cmd(bad_in), 1);
    const char *no_step[] = {"trace", "stats", out, "--step", "9", NULL};
    cr_assert_eq(run_cmd(no_step), 1);
    const char *bad_sub[] = {"trace", "frob", NULL};
    cr_assert_eq(run_cmd(bad_sub), 2);
}

/* The -qwenlens scenarios' lengths are the lognormal their comments derive:
 * matched to the median and p99 of all PolyTrace DAPO steps (Qwen2.5-32B),
 * sigma = ln(p99 / p50) / z_0.99, capped at 32768. */
Test(traces, qwenlens_scenarios_match_the_dapo_fit)
{
    trace *all = load_dapo_all();
    ts_err e = {{0}};
    trace_stats st;
    cr_assert_eq(trace_stats_compute(all, &st, &e), 0);
    double sigma = log(st.p99 / st.p50) / gsl_cdf_ugaussian_Pinv(0.99);
    const char *names[] = {"qwen7b-64gpu-qwenlens", "qwen32b-64gpu-qwenlens"};
    for (int i = 0; i < 2; i++) {
        scenario s;
        cr_assert_eq(scenario_load(names[i], &s, &e), 0, "%s", e.msg);
        gen_params g;
        gen_params_default(&g);
        cr_assert_eq(gen_parse_dist(s.dist, &g, &e), 0, "%s", e.msg);
        cr_assert_eq(g.dist, GEN_LOGNORMAL, "%s: %s", names[i], s.dist);
        cr_assert_lt(fabs(exp(g.ln_mu) - st.p50) / st.p50, 0.005,
                     "%s: median %.1f vs the trace's %.1f", names[i], exp(g.ln_mu), st.p50);
        cr_assert_lt(fabs(g.ln_sigma - sigma) / sigma, 0.005, "%s: sigma %.4f vs the fit %.4f",
                     names[i], g.ln_sigma, sigma);
        cr_assert_eq(s.cap, 32768);
    }
    trace_free(all);
}
