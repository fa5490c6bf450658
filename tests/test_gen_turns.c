/*
 * The multi-turn trace generator (traces/gen_turns.c, issue 20): a large
 * seeded trace's statistics match its parameters within sampling error, the
 * structure of every trajectory is what the model says (one call after every
 * turn but the last, contexts that add up), the JSONL it writes reads back
 * bit for bit, and a scenario's trace.turns keys reach the generator.
 *
 * The statistical bounds come from the sampling distribution, not from the
 * draw: the count of n draws below a quantile x_p of the model is
 * Binomial(n, p), so it lies within Z = 5 standard deviations sqrt(n p (1-p))
 * of n p except with probability ~6e-7.  Turn-count frequencies are tested
 * that way; each lognormal is tested at three quantiles (the median and
 * median * exp(+-sigma), p = Phi(-1), 1/2, Phi(1)), which pins its median and
 * sigma.  Token counts are rounded draws: round(x) <= L exactly when
 * x < L + 1/2, so the count of draws whose rounded value is at most q - 1/2
 * is at most the count below q, and the count of those below q + 1/2 at
 * least it: the binomial bound holds exactly for the rounded counts.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "common/util.h"
#include "sim/scenario.h"
#include "traces/gen.h"
#include "traces/trace.h"

#define Z 5.0

TestSuite(gen_turns);

static trace *big_trace(uint64_t seed)
{
    gen_params p;
    gen_params_default(&p);
    p.turns.on = 1;
    p.prompts = 4096;
    p.group = 8;
    p.cap = 1 << 20;
    p.prompt_median = 318;
    p.seed = seed;
    ts_err e = {{0}};
    trace *t = gen_trace(&p, &e);
    cr_assert_not_null(t, "gen_trace: %s", e.msg);
    return t;
}

/* Checks that values v[0..n) (rounded when slack = 0.5, continuous when 0)
 * have a fraction p below q within the binomial bound. */
static void check_quantile(const char *what, const double *v, size_t n, double q, double p,
                           double slack)
{
    size_t lo = 0, hi = 0; /* draws surely below q; draws possibly below q */
    for (size_t i = 0; i < n; i++) {
        lo += v[i] + slack <= q;
        hi += v[i] - slack < q;
    }
    double mean = (double)n * p, sd = sqrt((double)n * p * (1 - p));
    cr_expect((double)lo <= mean + Z * sd && (double)hi >= mean - Z * sd,
              "%s: %zu..%zu of %zu below %g, expected %.1f +- %.1f", what, lo, hi, n, q, mean,
              Z * sd);
}

static void check_lognormal(const char *what, const double *v, size_t n, double med, double sig,
                            double slack)
{
    cr_assert_gt(n, 1000, "%s: only %zu draws", what, n);
    check_quantile(what, v, n, med * exp(-sig), gsl_cdf_ugaussian_P(-1), slack);
    check_quantile(what, v, n, med, 0.5, slack);
    check_quantile(what, v, n, med * exp(sig), gsl_cdf_ugaussian_P(1), slack);
}

Test(gen_turns, statistics_match_the_parameters)
{
    trace *t = big_trace(7);
    gen_turns g;
    gen_turns_default(&g);
    size_t ntraj = trace_n_responses(t), nturns = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        nturns += (size_t)t->prompts[i].turn0[t->prompts[i].n_resp];
    double *tool = malloc(nturns * sizeof *tool), *app = malloc(nturns * sizeof *app);
    double *g0 = malloc(ntraj * sizeof *g0), *gk = malloc(nturns * sizeof *gk);
    size_t count[GEN_MAX_TURNS + 1] = {0}, ntool = 0, nk = 0, n0 = 0;
    cr_assert(tool && app && g0 && gk);
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[i];
        for (int32_t j = 0; j < p->n_resp; j++) {
            int32_t n = p->turn0[j + 1] - p->turn0[j];
            cr_assert(n >= 1 && n <= g.n_probs, "%d turns", n);
            count[n]++;
            const trace_turn *tt = p->turns + p->turn0[j];
            int64_t ctx = p->prompt_tokens;
            for (int32_t k = 0; k < n; k++) {
                cr_assert_eq(tt[k].context, ctx, "turn %d's context", k);
                cr_assert_eq(tt[k].cached, 0);
                cr_assert_eq(tt[k].tools, k < n - 1, "one call after every turn but the last");
                if (k == 0)
                    g0[n0++] = tt[k].gen;
                else
                    gk[nk++] = tt[k].gen;
                if (tt[k].tools) {
                    tool[ntool] = tt[k].tool_s;
                    app[ntool++] = tt[k].append;
                } else {
                    cr_assert_eq(tt[k].append, 0);
                }
                ctx += tt[k].gen + tt[k].append;
            }
            cr_assert_eq(p->resp[j], ctx - p->prompt_tokens, "the response is the turns' span");
        }
    }
    for (int k = 1; k <= g.n_probs; k++) {
        double pk = g.probs[k - 1], sd = sqrt((double)ntraj * pk * (1 - pk));
        cr_expect(fabs((double)count[k] - (double)ntraj * pk) <= Z * sd,
                  "%d turns: %zu of %zu, expected %.1f +- %.1f", k, count[k], ntraj,
                  (double)ntraj * pk, Z * sd);
    }
    check_lognormal("tool latency", tool, ntool, g.tool_median, g.tool_sigma, 0);
    check_lognormal("append", app, ntool, g.append_median, g.append_sigma, 0.5);
    check_lognormal("turn-0 generation", g0, n0, g.gen0_median, g.gen0_sigma, 0.5);
    check_lognormal("later generation", gk, nk, g.gen_median, g.gen_sigma, 0.5);
    free(tool);
    free(app);
    free(g0);
    free(gk);
    trace_free(t);
}

Test(gen_turns, a_wrong_parameter_fails_the_check)
{
    /* the bounds are tight enough to see a 5% shift of a median or a 0.02
     * shift of a turn frequency at this n: the check above is not vacuous */
    trace *t = big_trace(7);
    size_t n = 0, two = 0, ntraj = trace_n_responses(t);
    double *v = malloc(ntraj * sizeof *v);
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++) {
            v[n++] = t->prompts[i].turns[t->prompts[i].turn0[j]].gen;
            two += t->prompts[i].turn0[j + 1] - t->prompts[i].turn0[j] == 2;
        }
    size_t below = 0;
    for (size_t i = 0; i < n; i++)
        below += v[i] + 0.5 <= 42 * 1.05;
    double sd = sqrt((double)n * 0.25);
    cr_expect((double)below > (double)n * 0.5 + Z * sd, "a 5%% higher median passes");
    double p = 0.41, sd2 = sqrt((double)ntraj * p * (1 - p));
    cr_expect(fabs((double)two - (double)ntraj * p) > Z * sd2, "2 turns at 0.41 passes");
    free(v);
    trace_free(t);
}

Test(gen_turns, seeded_and_written_jsonl_reads_back)
{
    trace *a = big_trace(3), *b = big_trace(3);
    cr_assert_eq(a->n_prompts, b->n_prompts);
    for (size_t i = 0; i < a->n_prompts; i++) {
        const trace_prompt *p = &a->prompts[i], *q = &b->prompts[i];
        cr_assert_eq(memcmp(p->resp, q->resp, (size_t)p->n_resp * sizeof *p->resp), 0);
        cr_assert_eq(memcmp(p->turns, q->turns, (size_t)p->turn0[p->n_resp] * sizeof *p->turns),
                     0);
    }
    trace_free(b);
    char path[] = "build/test_gen_turns_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    ts_err e = {{0}};
    cr_assert_eq(trace_write_turns_jsonl(a, path, &e), 0, "%s", e.msg);
    trace *r = NULL;
    cr_assert_eq(trace_load(path, &r, &e), 0, "%s", e.msg);
    remove(path);
    cr_assert_eq(r->n_prompts, a->n_prompts);
    for (size_t i = 0; i < a->n_prompts; i++) {
        const trace_prompt *p = &a->prompts[i], *q = &r->prompts[i];
        cr_assert_eq(q->prompt_tokens, p->prompt_tokens);
        cr_assert_eq(q->n_resp, p->n_resp);
        cr_assert_eq(memcmp(p->resp, q->resp, (size_t)p->n_resp * sizeof *p->resp), 0);
        cr_assert_eq(memcmp(p->turn0, q->turn0, (size_t)(p->n_resp + 1) * sizeof *p->turn0), 0);
        for (int32_t k = 0; k < p->turn0[p->n_resp]; k++) {
            const trace_turn *x = &p->turns[k], *y = &q->turns[k];
            cr_assert(x->context == y->context && x->gen == y->gen && x->tools == y->tools &&
                      x->append == y->append && x->tool_s == y->tool_s &&
                      y->engine_s == -1, "prompt %zu turn %d differs after the round trip", i, k);
        }
    }
    trace_free(r);
    trace_free(a);
}

Test(gen_turns, scenario_keys_reach_the_generator)
{
    scenario s;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load("search-r1-7b-polytrace", &s, &e), 0, "%s", e.msg);
    const char *sets[] = {"trace.file=", "trace.turns=search-r1", "trace.turn_probs=0,1",
                          "trace.tool_median=2.5", "trace.gen_sigma=0"};
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++)
        cr_assert_eq(scenario_set(&s, sets[k], &e), 0, "%s: %s", sets[k], e.msg);
    gen_params p;
    cr_assert_eq(scenario_gen_params(&s, &p, &e), 0, "%s", e.msg);
    cr_assert(p.turns.on);
    cr_assert_eq(p.turns.n_probs, 2);
    cr_assert_eq(p.turns.tool_median, 2.5);
    trace *t = gen_trace(&p, &e);
    cr_assert_not_null(t, "%s", e.msg);
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++) {
            const trace_turn *tt = t->prompts[i].turns + t->prompts[i].turn0[j];
            cr_assert_eq(t->prompts[i].turn0[j + 1] - t->prompts[i].turn0[j], 2);
            cr_assert_eq(tt[1].gen, 71, "sigma 0: the median");
        }
    trace_free(t);
}
