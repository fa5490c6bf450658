/*
 * Speculative decoding: the acceptance model (tree expectation vs two
 * independent samplers, tree shape, budget table) and the rollout's
 * speculative modes (lossless, speedup as the cost arithmetic says, the
 * adaptive switch happening only in the tail).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "common/util.h"
#include "models/cost_spec.h"
#include "sim/rollout.h"
#include "sim/specdec.h"

TestSuite(specdec);

Test(specdec, expected_and_sampled_agree)
{
    spec_params p;
    spec_params_default(&p);
    const double qs[] = {0.3, 0.6, 0.82, 0.95};
    const int budgets[] = {1, 8, 16, 32, 48};
    gsl_rng *r = ts_rng_new(11, 0);
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 5; j++) {
            spec_tree t;
            spec_tree_build(&p, qs[i], budgets[j], &t);
            const int n = 40000;
            double s1 = 0, s2 = 0, ss = 0;
            for (int k = 0; k < n; k++) {
                int a = spec_sample(&p, &t, r), b = spec_sample_walk(&p, qs[i], &t, r);
                cr_assert(a >= 1 && a <= p.depth + 1);
                cr_assert(b >= 1 && b <= p.depth + 1);
                s1 += a;
                s2 += b;
                ss += (double)b * b;
            }
            double m2 = s2 / n, sd = sqrt(ss / n - m2 * m2) / sqrt(n);
            cr_assert_lt(fabs(s1 / n - t.expected), 4 * sd + 1e-3, "q %g V %d: reach-sampled %g vs E %g",
                         qs[i], budgets[j], s1 / n, t.expected);
            cr_assert_lt(fabs(m2 - t.expected), 4 * sd + 1e-3, "q %g V %d: walk-sampled %g vs E %g",
                         qs[i], budgets[j], m2, t.expected);
        }
    gsl_rng_free(r);
}

Test(specdec, tree_is_prefix_closed_and_sized)
{
    spec_params p;
    spec_params_default(&p);
    spec_tree t;
    spec_tree_build(&p, 0.7, 48, &t);
    cr_assert_eq(t.n, 48);
    for (int i = 0; i < t.n; i++) {
        uint64_t path = t.node[i];
        int depth = 0;
        while (depth < 16 && ((path >> (4 * depth)) & 0xf))
            depth++;
        if (depth > 1) { /* the parent must be in the tree */
            uint64_t parent = path & ~((uint64_t)0xf << (4 * (depth - 1)));
            int found = 0;
            for (int k = 0; k < t.n; k++)
                found |= t.node[k] == parent;
            cr_assert(found, "node %llx has no parent", (unsigned long long)path);
        }
    }
    /* budget 1 is the chain's first token: E = 1 + q */
    spec_tree_build(&p, 0.7, 1, &t);
    cr_assert_float_eq(t.expected, 1.7, 1e-12);
    /* more budget, better drafter: never fewer tokens */
    double prev = 0;
    for (int v = 1; v <= 64; v *= 2) {
        spec_tree_build(&p, 0.7, v, &t);
        cr_assert_geq(t.expected, prev);
        prev = t.expected;
    }
    spec_tree a, b;
    spec_tree_build(&p, 0.5, 16, &a);
    spec_tree_build(&p, 0.9, 16, &b);
    cr_assert_gt(b.expected, a.expected);
}

Test(specdec, tlt_budget_table)
{
    cr_assert_eq(spec_budget_for_batch(1), 48);
    cr_assert_eq(spec_budget_for_batch(2), 32);
    cr_assert_eq(spec_budget_for_batch(4), 32);
    cr_assert_eq(spec_budget_for_batch(5), 16);
    cr_assert_eq(spec_budget_for_batch(20), 16);
    cr_assert_eq(spec_budget_for_batch(21), 8);
    cr_assert_eq(spec_budget_for_batch(256), 8);
}

Test(specdec, default_accept_length_matches_tlt)
{
    /* TLT reports an average accepted length of 6.53 (budget 48, depth 8) */
    spec_params p;
    spec_params_default(&p);
    gsl_rng *r = ts_rng_new(3, 0);
    double s = 0;
    const int n = 4000;
    for (int k = 0; k < n; k++) {
        spec_tree t;
        spec_tree_build(&p, spec_draw_quality(&p, r), 48, &t);
        s += t.expected;
    }
    cr_assert_lt(fabs(s / n - 6.53), 0.15, "mean accepted length %g", s / n);
    gsl_rng_free(r);
}

static hw_desc hw;
static llm_desc m7;

static void load(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &hw, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("qwen2.5-7b", &m7, &e), 0, "%s", e.msg);
}

static trace *lengths_trace(const int32_t *len, int n)
{
    trace *t = trace_new();
    for (int i = 0; i < n; i++)
        cr_assert_eq(trace_add(t, 0, i, -1, 100, &len[i], 1, NULL), 0);
    return t;
}

static rollout_cfg cfg1(spec_mode mode)
{
    rollout_cfg c = {.hw = &hw, .llm = &m7, .tp = 1, .replicas = 1, .max_running = 256,
                     .chunk_tokens = 8192, .kv_tokens = 500000, .tail_threshold = 32,
                     .spec = mode, .spec_patience = 10, .seed = 5};
    spec_params_default(&c.sp);
    return c;
}

Test(specdec, single_sequence_speedup_follows_cost_arithmetic, .init = load)
{
    int32_t len = 20000;
    trace *t = lengths_trace(&len, 1);
    rollout_cfg off = cfg1(SPEC_OFF), on = cfg1(SPEC_ALWAYS);
    on.sp.kappa = 0; /* one known quality */
    rollout_result a, b;
    cr_assert_eq(rollout_run(&off, t, &a, NULL), 0);
    cr_assert_eq(rollout_run(&on, t, &b, NULL), 0);
    cr_assert_eq(b.decode_tokens, 20000, "speculation must be lossless");
    spec_tree tree;
    spec_tree_build(&on.sp, on.sp.quality, 48, &tree);
    /* at mid-length context: tokens per second, speculative over plain */
    double ctx = 100 + 10000;
    double t_dec = cost_decode_iter(&hw, &m7, 1, 1, ctx);
    double t_spec = spec_iter_cost(&on.sp, &hw, &m7, 1, 1, 48, ctx, NULL);
    cr_assert_gt(t_spec, cost_draft(&hw, &m7, 1, 1, 8, 4, ctx) + cost_verify(&hw, &m7, 1, 1, 48, ctx, NULL),
                 "the draft extend costs something");
    double want = tree.expected * t_dec / t_spec;
    double got = a.makespan_s / b.makespan_s;
    cr_assert_lt(fabs(got - want) / want, 0.05, "speedup %g, arithmetic says %g", got, want);
    cr_assert_gt(got, 2.0);
    cr_assert_lt(fabs(b.accept_len - tree.expected) / tree.expected, 0.03, "accept %g vs %g",
                 b.accept_len, tree.expected);
    rollout_result_free(&a);
    rollout_result_free(&b);
    trace_free(t);
}

Test(specdec, adaptive_switch_only_in_the_tail, .init = load)
{
    /* 64 equal responses: the batch never drops to 32, no switch */
    int32_t len[80];
    for (int i = 0; i < 64; i++)
        len[i] = 2000;
    trace *t = lengths_trace(len, 64);
    rollout_cfg c = cfg1(SPEC_ADAPTIVE);
    rollout_result r;
    cr_assert_eq(rollout_run(&c, t, &r, NULL), 0);
    cr_assert_lt(r.rep[0].spec_on_s, 0);
    cr_assert_eq(r.spec_iterations, 0);
    rollout_result_free(&r);
    trace_free(t);
    /* 60 short and 4 long: the switch comes after 10 tail iterations, the
     * long ones finish faster than without speculation, and every token is
     * produced exactly once */
    for (int i = 0; i < 64; i++)
        len[i] = i < 60 ? 1000 : 12000;
    t = lengths_trace(len, 64);
    rollout_result off, on;
    rollout_cfg co = cfg1(SPEC_OFF);
    cr_assert_eq(rollout_run(&co, t, &off, NULL), 0);
    cr_assert_eq(rollout_run(&c, t, &on, NULL), 0);
    cr_assert_gt(on.rep[0].spec_on_s, 0);
    cr_assert_gt(on.spec_iterations, 0);
    cr_assert_eq(on.decode_tokens, 60 * 1000 + 4 * 12000);
    cr_assert_lt(on.makespan_s, 0.6 * off.makespan_s, "adaptive %g vs off %g", on.makespan_s, off.makespan_s);
    /* the re-prefill after the flush recomputes the 4 survivors' contexts */
    cr_assert_geq(on.prefill_tokens, off.prefill_tokens + 4 * 1000);
    rollout_result_free(&off);
    rollout_result_free(&on);
    trace_free(t);
}

Test(specdec, deterministic_for_a_seed, .init = load)
{
    int32_t len[40];
    for (int i = 0; i < 40; i++)
        len[i] = 500 + 300 * i;
    trace *t = lengths_trace(len, 40);
    rollout_cfg c = cfg1(SPEC_ADAPTIVE);
    rollout_result a, b, d;
    cr_assert_eq(rollout_run(&c, t, &a, NULL), 0);
    cr_assert_eq(rollout_run(&c, t, &b, NULL), 0);
    c.seed = 6;
    cr_assert_eq(rollout_run(&c, t, &d, NULL), 0);
    cr_assert_eq(a.makespan_s, b.makespan_s);
    cr_assert_eq(a.spec_iterations, b.spec_iterations);
    cr_assert_neq(a.makespan_s, d.makespan_s);
    rollout_result_free(&a);
    rollout_result_free(&b);
    rollout_result_free(&d);
    trace_free(t);
}
