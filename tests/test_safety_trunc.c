/*
 * Truncation made visible (issue 17, item 3).  A trace cut at a generation
 * cap has many responses exactly at its maximum and a max/p50 that reads as
 * no long tail: `trace stats` counts the responses at the maximum (text and
 * JSON) and warns on stderr when the trace looks capped (at least
 * TRACE_CAPPED_MIN responses and TRACE_CAPPED_FRACTION of them), checked on
 * a trace generated with a cap and at the thresholds' edges; a trace with a
 * natural maximum gets no warning.  rollout.max_response cutting responses
 * says how many responses and tokens it dropped: metrics
 * truncated_responses / truncated_tokens (equal to a brute-force count, per
 * step, under every kind of driver) and a note on stderr.  Each test has a
 * fresh temporary directory.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sim/policy/policy.h"
#include "tests/helpers.h"
#include "traces/trace.h"

static char tmpdir[256];

static void setup(void)
{
    tmpdir_create(tmpdir, sizeof tmpdir, "safety-trunc");
}

static void teardown(void)
{
    tmpdir_remove(tmpdir);
}

TestSuite(safety_trunc, .init = setup, .fini = teardown, .timeout = 240);

/* Runs cmd through sh, stdout and stderr into *out and *err (free them).
 * Returns the exit status. */
static int sh_run(const char *cmd, char **out, char **err)
{
    char o[512], e[512], full[4096];
    snprintf(o, sizeof o, "%s/cmd.out", tmpdir);
    snprintf(e, sizeof e, "%s/cmd.err", tmpdir);
    snprintf(full, sizeof full, "( %s ) </dev/null >%s 2>%s", cmd, o, e);
    int st = system(full);
    *out = slurp_file(o);
    *err = slurp_file(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A generated trace capped at 4000 tokens (lognormal, median 1500, sigma 1:
 * about a fifth of the draws lie beyond the cap): path into buf. */
static void capped_trace(char *buf, size_t n)
{
    snprintf(buf, n, "%s/capped.csv", tmpdir);
    char cmd[1024], *out, *err;
    snprintf(cmd, sizeof cmd,
             "build/tailsim trace gen --dist lognormal:1500:1.0 --prompts 64 --group 8 "
             "--cap 4000 --seed 1 -o '%s'", buf);
    cr_assert_eq(sh_run(cmd, &out, &err), 0, "%s", err);
    cr_expect(strstr(err, "end at --cap 4000 tokens"), "trace gen: %s", err);
    free(out);
    free(err);
}

/* The brute-force count of a trace's responses at its maximum. */
static int64_t count_at_max(const trace *t, int32_t *max)
{
    int64_t n = 0;
    *max = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++)
            if (t->prompts[i].resp[j] > *max)
                *max = t->prompts[i].resp[j];
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++)
            n += t->prompts[i].resp[j] == *max;
    return n;
}

Test(safety_trunc, stats_report_and_warn_on_a_capped_trace)
{
    char tp[512], cmd[1024], *out, *err;
    capped_trace(tp, sizeof tp);
    trace *t;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(tp, &t, &e), 0, "%s", e.msg);
    int32_t max;
    int64_t want = count_at_max(t, &max);
    cr_assert_eq(max, 4000);
    cr_assert_gt(want, 50, "the generator should have capped many: %lld", (long long)want);
    trace_stats s;
    cr_assert_eq(trace_stats_compute(t, &s, &e), 0, "%s", e.msg);
    cr_expect_eq(s.at_max, want);
    cr_expect_float_eq(s.at_max_fraction, (double)want / 512, 1e-12);
    cr_expect_eq(s.capped, 1);
    trace_free(t);

    char line[256];
    snprintf(cmd, sizeof cmd, "build/tailsim trace stats '%s' --json", tp);
    cr_assert_eq(sh_run(cmd, &out, &err), 0, "%s", err);
    snprintf(line, sizeof line, "\"at_max\": %lld,", (long long)want);
    cr_expect(strstr(out, line), "%s", out);
    cr_expect(strstr(out, "\"capped\": true"), "%s", out);
    snprintf(line, sizeof line, "warning: %lld responses (%.1f%%) end at the maximum length 4000: "
             "the trace looks truncated at 4000 tokens", (long long)want, 100.0 * want / 512);
    cr_expect(strstr(err, line), "stderr: %s\nwant: %s", err, line);
    cr_expect_null(strstr(out, "warning"), "the warning went to stdout");
    free(out);
    free(err);

    snprintf(cmd, sizeof cmd, "build/tailsim trace stats '%s'", tp);
    cr_assert_eq(sh_run(cmd, &out, &err), 0, "%s", err);
    snprintf(line, sizeof line, "%lld  responses (%.2f%%), at the cap", (long long)want,
             100.0 * want / 512);
    cr_expect(strstr(out, line), "%s", out);
    cr_expect(strstr(err, "looks truncated"), "%s", err);
    free(out);
    free(err);
}

/* A trace with a natural maximum (one response there): counted, no warning. */
Test(safety_trunc, natural_maximum_no_warning)
{
    char tp[512], cmd[1024], *out, *err;
    snprintf(tp, sizeof tp, "%s/natural.csv", tmpdir);
    FILE *f = fopen(tp, "w");
    cr_assert_not_null(f);
    fprintf(f, "step,prompt_id,prompt_tokens,response_tokens\n");
    for (int i = 0; i < 200; i++)
        fprintf(f, "0,%d,10,%d\n", i / 4, 100 + i * 7);
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "build/tailsim trace stats '%s' --json", tp);
    cr_assert_eq(sh_run(cmd, &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "\"at_max\": 1,") && strstr(out, "\"capped\": false"), "%s", out);
    cr_expect_eq(err[0], 0, "stderr: %s", err);
    free(out);
    free(err);
}

/* The thresholds' edges: 4 of 100 at the maximum is not capped (fewer than
 * TRACE_CAPPED_MIN), 5 of 100 is; 5 of 1000 (0.5%) is not. */
Test(safety_trunc, capped_thresholds)
{
    const struct { int n, at_max, capped; } c[] = {{100, 4, 0}, {100, 5, 1}, {1000, 5, 0},
                                                   {1000, 10, 1}};
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        trace *t = trace_new();
        for (int i = 0; i < c[k].n; i++) {
            int32_t len = i < c[k].at_max ? 5000 : 1 + i % 4000;
            cr_assert_eq(trace_add(t, 0, i, -1, 1, &len, 1, NULL), 0);
        }
        trace_stats s;
        ts_err e = {{0}};
        cr_assert_eq(trace_stats_compute(t, &s, &e), 0);
        cr_expect_eq(s.at_max, c[k].at_max);
        cr_expect_eq(s.capped, c[k].capped, "%d of %d", c[k].at_max, c[k].n);
        trace_free(t);
    }
}

/* rollout.max_response = 2500 on the capped trace: the metrics equal the
 * brute-force count, per step, for the synchronous loop and a driver of its
 * own (partial); the CLI notes it on stderr; without a cut both are 0 and
 * there is no note. */
Test(safety_trunc, max_response_says_what_it_cut)
{
    char tp[512], cmd[1024], *out, *err;
    capped_trace(tp, sizeof tp);
    trace *t;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(tp, &t, &e), 0, "%s", e.msg);
    int64_t resp = 0, tok = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++)
            if (t->prompts[i].resp[j] > 2500) {
                resp++;
                tok += t->prompts[i].resp[j] - 2500;
            }
    cr_assert_gt(resp, 0);

    scenario s;
    hw_desc hw;
    llm_desc m;
    load_scenario_hw_llm("qwen7b-64gpu", &s, &hw, &m);
    cr_assert_eq(scenario_set(&s, "rollout.max_response=2500", &e), 0, "%s", e.msg);
    const char *pols[] = {NULL, "partial"};
    for (int i = 0; i < 2; i++) {
        trace *steps[2] = {t, t};
        multistep_result r;
        cr_assert_eq(policy_run(&s, pols[i] ? policy_find(pols[i]) : NULL, &hw, &m, steps, 2, 0,
                                &r, NULL, &e), 0, "%s", e.msg);
        for (int k = 0; k < 2; k++) {
            cr_expect_eq(r.step[k].truncated_responses, resp, "%s step %d",
                         pols[i] ? pols[i] : "plain", k);
            cr_expect_eq(r.step[k].truncated_tokens, tok);
        }
        multistep_result_free(&r);
    }
    trace_free(t);

    snprintf(cmd, sizeof cmd,
             "build/tailsim rlstep qwen7b-64gpu --trace '%s' --set rollout.max_response=2500 "
             "--json --no-wall", tp);
    cr_assert_eq(sh_run(cmd, &out, &err), 0, "%s", err);
    char line[256];
    snprintf(line, sizeof line, "\"truncated_responses\": %lld,", (long long)resp);
    cr_expect(strstr(out, line), "%s", out);
    snprintf(line, sizeof line, "\"truncated_tokens\": %lld,", (long long)tok);
    cr_expect(strstr(out, line), "%s", out);
    snprintf(line, sizeof line, "rollout.max_response = 2500 cuts %lld of the trace's 512 "
             "responses", (long long)resp);
    cr_expect(strstr(err, line), "stderr: %s", err);
    snprintf(line, sizeof line, "dropping %lld of its", (long long)tok);
    cr_expect(strstr(err, line), "stderr: %s", err);
    free(out);
    free(err);

    snprintf(cmd, sizeof cmd, "build/tailsim rollout qwen7b-64gpu --trace '%s' --json --no-wall",
             tp);
    cr_assert_eq(sh_run(cmd, &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "\"truncated_responses\": 0,") && strstr(out, "\"truncated_tokens\": 0,"),
              "%s", out);
    cr_expect_null(strstr(err, "max_response"), "%s", err);
    free(out);
    free(err);
}
