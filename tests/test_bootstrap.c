/*
 * Bootstrap tests: a resample keeps the prompt count and draws whole groups
 * from the trace; boot_summary's median lies in its 5-95% range and matches a
 * brute-force order statistic; boot_compare is deterministic for a seed,
 * its range collapses to a point when every prompt is the same, and its
 * median lies within the range; `tailsim compare --bootstrap` prints it.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "sim/bootstrap.h"
#include "tests/helpers.h"
#include "traces/gen.h"

static scenario scn;
static hw_desc hw;
static llm_desc m7;
static const char *scn_path = "build/test-bootstrap.ini";
static const char *const keys[] = {"step_s", "rollout_s", "bubble_fraction"};

/* 8 GPUs as 4 replicas of TP 2, 16 prompts x 4, a long-tail generated trace. */
static void setup(void)
{
    gsl_set_error_handler_off();
    write_aside(scn_path,
                "[cluster]\ngpus = 8\nhw = h100\n[model]\nname = qwen2.5-7b\n[rollout]\ntp = 2\n"
                "mem_util = 0.85\nmax_response = 8192\n[train]\nmicro_batch_tokens = 32768\n"
                "[trace]\ndist = lognormal:800:1.0\nprompts = 16\ngroup = 4\ncap = 8192\nseed = 5\n");
    load_scenario_hw_llm(scn_path, &scn, &hw, &m7);
}

TestSuite(bootstrap, .init = setup);

static trace *load_step(void)
{
    trace *t[1];
    ts_err e = {{0}};
    cr_assert_eq(policy_load_steps(&scn, NULL, 1, t, &e), 0, "%s", e.msg);
    return t[0];
}

static const policy *pols[2];

static int run(trace *t, int n, boot_result *b)
{
    ts_err e = {{0}};
    pols[0] = policy_find("verl");
    pols[1] = policy_find("tlt");
    cr_assert(pols[0] && pols[1]);
    int rc = boot_compare(&scn, pols, 2, &hw, &m7, &t, 1, n, keys, 3, NULL, NULL, b, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
    return rc;
}

Test(bootstrap, resample_draws_whole_groups)
{
    trace *t = load_step();
    gsl_rng *r = ts_rng_new(7, BOOT_STREAM);
    ts_err e = {{0}};
    trace *o = boot_resample(t, r, &e);
    cr_assert_not_null(o, "%s", e.msg);
    cr_assert_eq(o->n_prompts, t->n_prompts);
    for (size_t i = 0; i < o->n_prompts; i++) {
        int found = 0;
        for (size_t j = 0; j < t->n_prompts && !found; j++)
            found = o->prompts[i].n_resp == t->prompts[j].n_resp &&
                    o->prompts[i].prompt_tokens == t->prompts[j].prompt_tokens &&
                    !memcmp(o->prompts[i].resp, t->prompts[j].resp,
                            sizeof(int32_t) * (size_t)t->prompts[j].n_resp);
        cr_assert(found, "resampled prompt %zu is not a group of the trace", i);
    }
    trace_free(o);
    trace_free(t);
    gsl_rng_free(r);
}

Test(bootstrap, summary_against_brute_force)
{
    gsl_rng *r = ts_rng_new(11, 1);
    for (int trial = 0; trial < 50; trial++) {
        int n = 1 + (int)gsl_rng_uniform_int(r, 200);
        double *x = malloc(sizeof *x * (size_t)n), med, lo, hi;
        for (int i = 0; i < n; i++)
            x[i] = gsl_rng_uniform(r) * 100;
        boot_summary(x, n, &med, &lo, &hi);
        cr_assert(lo <= med && med <= hi, "n %d: %g %g %g", n, lo, med, hi);
        /* x is sorted now: the median by hand */
        double ref = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
        cr_assert_float_eq(med, ref, 1e-12);
        cr_assert(lo >= x[0] && hi <= x[n - 1]);
        /* the 5% and 95% points by hand: linear between the order statistics
         * around (n - 1) f */
        for (int q = 0; q < 2; q++) {
            double f = q ? 0.95 : 0.05, pos = (n - 1) * f;
            int i = (int)pos;
            double want = i + 1 < n ? x[i] + (pos - i) * (x[i + 1] - x[i]) : x[i];
            cr_assert_float_eq(q ? hi : lo, want, 1e-9, "n %d, %g%%", n, 100 * f);
        }
        free(x);
    }
    gsl_rng_free(r);
}

Test(bootstrap, deterministic_for_a_seed_and_median_in_range, .timeout = 120)
{
    trace *t = load_step();
    boot_result a, b;
    run(t, 6, &a);
    run(t, 6, &b);
    cr_assert_eq(a.nk, 5);
    cr_assert_eq(memcmp(a.stat, b.stat, sizeof *a.stat * (size_t)(a.np * a.nk)), 0,
                 "two runs with one seed differ");
    for (int i = 0; i < a.np; i++)
        for (int k = 0; k < a.nk; k++) {
            const boot_stat *s = &a.stat[i * a.nk + k];
            cr_assert(s->p5 <= s->median && s->median <= s->p95, "%s: %g %g %g", a.keys[k],
                      s->p5, s->median, s->p95);
        }
    /* resamples of a long-tail trace do differ */
    const boot_stat *st = boot_get(&a, 0, "step_s");
    cr_assert(st && st->p95 > st->p5);
    cr_assert_float_eq(boot_get(&a, 0, "speedup")->median, 1.0, 1e-12);
    boot_result_free(&a);
    boot_result_free(&b);
    trace_free(t);
}

Test(bootstrap, identical_prompts_collapse_the_range, .timeout = 120)
{
    trace *src = load_step(), *t = trace_new();
    ts_err e = {{0}};
    const trace_prompt *p = &src->prompts[0];
    for (int i = 0; i < 16; i++)
        cr_assert_eq(trace_add(t, p->step, i, p->dp_rank, p->prompt_tokens, p->resp, p->n_resp, &e), 0);
    boot_result b;
    run(t, 5, &b);
    for (int i = 0; i < b.np; i++)
        for (int k = 0; k < b.nk; k++) {
            const boot_stat *s = &b.stat[i * b.nk + k];
            double tol = 1e-12 * (fabs(s->median) + 1); /* interpolation rounding only */
            cr_assert(fabs(s->p95 - s->p5) <= tol, "%s: range %.17g..%.17g", b.keys[k], s->p5,
                      s->p95);
            cr_assert(fabs(s->median - s->p5) <= tol);
        }
    boot_result_free(&b);
    trace_free(t);
    trace_free(src);
}

Test(bootstrap, compare_cli_prints_the_range, .timeout = 120)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "build/tailsim compare %s --policies verl,tlt --bootstrap 4 --json",
             scn_path);
    char *out = run_capture(cmd);
    cr_assert(strstr(out, "\"bootstrap\": 4"), "%s", out);
    cr_assert(strstr(out, "\"p95\""), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "build/tailsim compare %s --policies verl,tlt --bootstrap 4", scn_path);
    out = run_capture(cmd);
    cr_assert(strstr(out, "bootstrap: 4 resamples"), "%s", out);
    free(out);
}
