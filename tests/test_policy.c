/*
 * Policy tests: every policy is lossless (each response ends at exactly its
 * trace length, token sums agree across policies), runs are deterministic
 * for a seed, the spot trainer turns bubble into drafter-training time on
 * the timeline without changing the rollout, the drafter dynamics have the
 * documented fixed points, multi-step runs repeat their prefix, trace steps
 * are read from a file in order, `tailsim compare` runs end to end, and a
 * heavier-tailed trace of the same mean gives tlt a larger rollout speedup.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "models/hw_calib.h"
#include "tests/helpers.h"
#include "sim/policy/policy.h"
#include "traces/gen.h"

static scenario scn;
static hw_desc hw;
static llm_desc m7;
static const char *scn_path = "build/test-policy.ini";

/* A small scenario: 8 GPUs as 4 replicas of TP 2, 32 prompts x 8, long tail. */
static void setup(void)
{
    gsl_set_error_handler_off();
    write_aside(scn_path, POLICY_SCENARIO_INI);
    load_scenario_hw_llm(scn_path, &scn, &hw, &m7);
}

TestSuite(policy, .init = setup);

static int64_t trace_tokens_capped(const trace *t, int cap)
{
    int64_t s = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++)
            s += t->prompts[i].resp[j] < cap ? t->prompts[i].resp[j] : cap;
    return s;
}

Test(policy, registry_has_the_documented_policies)
{
    cr_assert_not_null(policy_find("verl"));
    cr_assert_not_null(policy_find("tlt-base"));
    cr_assert_not_null(policy_find("tlt"));
    cr_assert_null(policy_find("nope"));
    size_t n;
    const policy *const *all = policy_all(&n);
    cr_assert_geq(n, 3);
    cr_assert_str_eq(all[0]->name, "verl");
}

Test(policy, every_policy_is_lossless, .timeout = 120)
{
    ts_err e = {{0}};
    trace *tr[2];
    cr_assert_eq(policy_load_steps(&scn, NULL, 2, tr, &e), 0, "%s", e.msg);
    /* the registered policies, then the BASE+tlt combinations */
    size_t nr, nc;
    const policy *const *reg = policy_all(&nr), *const *co = policy_combos(&nc);
    const policy *all[32];
    size_t n = 0;
    for (size_t i = 0; i < nr + nc && n < 32; i++)
        all[n++] = i < nr ? reg[i] : co[i - nr];
    cr_assert_eq(n, nr + nc);
    for (size_t i = 0; i < n; i++) {
        if (!all[i]->lossless)
            continue; /* they train other samples: tests/test_policy_carry.c */
        multistep_result r;
        run_record *rec = run_record_new();
        cr_assert_eq(policy_run(&scn, all[i], &hw, &m7, tr, 2, 1, &r, rec, &e), 0, "%s", e.msg);
        for (int k = 0; k < 2; k++) {
            int64_t want = trace_tokens_capped(tr[k], scn.max_response);
            cr_expect_eq(r.step[k].ro.decode_tokens, want, "%s step %d: %lld tokens, trace %lld",
                         all[i]->name, k, (long long)r.step[k].ro.decode_tokens, (long long)want);
            for (int64_t q = 0; q < r.step[k].ro.responses; q++)
                cr_assert(r.step[k].ro.finish_s[q] > 0 &&
                          r.step[k].ro.finish_s[q] <= r.step[k].ro.makespan_s);
        }
        /* every response of every step is on the record with its trace length */
        cr_assert_eq(rec->n_resp, trace_n_responses(tr[0]) + trace_n_responses(tr[1]));
        int64_t sum = 0;
        for (size_t q = 0; q < rec->n_resp; q++)
            sum += rec->resp[q].length;
        cr_expect_eq(sum, trace_tokens_capped(tr[0], scn.max_response) +
                              trace_tokens_capped(tr[1], scn.max_response));
        cr_assert_eq(r.off_policy_fraction, 0.0);
        multistep_result_free(&r);
        run_record_free(rec);
    }
    trace_free(tr[0]);
    trace_free(tr[1]);
}

/* A run of several steps puts their starts on the record (the report's
 * step lines); one step puts none. */
Test(policy, record_has_the_steps_starts, .timeout = 60)
{
    ts_err e = {{0}};
    trace *tr[3];
    cr_assert_eq(policy_load_steps(&scn, NULL, 3, tr, &e), 0, "%s", e.msg);
    static const char *names[] = {"verl", "partial+tlt", "async"};
    for (size_t i = 0; i < 3; i++) {
        multistep_result r;
        run_record *rec = run_record_new();
        cr_assert_eq(policy_run(&scn, policy_find(names[i]), &hw, &m7, tr, 3, 1, &r, rec, &e), 0,
                     "%s", e.msg);
        cr_assert_eq(rec->n_steps, 3, "%s", names[i]);
        for (int k = 0; k < 3; k++)
            cr_assert_eq(rec->step_t0[k], r.t0[k], "%s step %d", names[i], k);
        cr_assert(rec->step_t0[1] > rec->step_t0[0] && rec->step_t0[2] > rec->step_t0[1]);
        multistep_result_free(&r);
        run_record_free(rec);
        rec = run_record_new();
        cr_assert_eq(policy_run(&scn, policy_find(names[i]), &hw, &m7, tr, 1, 1, &r, rec, &e), 0,
                     "%s", e.msg);
        cr_assert_eq(rec->n_steps, 0);
        multistep_result_free(&r);
        run_record_free(rec);
    }
    for (int k = 0; k < 3; k++)
        trace_free(tr[k]);
}

Test(policy, same_seed_same_result, .timeout = 60)
{
    ts_err e = {{0}};
    trace *tr[2];
    cr_assert_eq(policy_load_steps(&scn, NULL, 2, tr, &e), 0, "%s", e.msg);
    multistep_result a, b;
    const policy *p = policy_find("tlt");
    cr_assert_eq(policy_run(&scn, p, &hw, &m7, tr, 2, 1, &a, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(policy_run(&scn, p, &hw, &m7, tr, 2, 1, &b, NULL, &e), 0, "%s", e.msg);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(a.step[k].step_s, b.step[k].step_s);
        cr_assert_eq(a.step[k].ro.spec_iterations, b.step[k].ro.spec_iterations);
        cr_assert_eq(a.quality[k], b.quality[k]);
    }
    /* a longer run repeats the shorter one's steps exactly */
    multistep_result c;
    cr_assert_eq(policy_run(&scn, p, &hw, &m7, tr, 1, 1, &c, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(c.step[0].step_s, a.step[0].step_s);
    multistep_result_free(&a);
    multistep_result_free(&b);
    multistep_result_free(&c);
    trace_free(tr[0]);
    trace_free(tr[1]);
}

Test(policy, spot_trainer_turns_bubble_into_training, .timeout = 60)
{
    ts_err e = {{0}};
    trace *tr[1];
    cr_assert_eq(policy_load_steps(&scn, NULL, 1, tr, &e), 0, "%s", e.msg);
    scenario off = scn, on = scn;
    snprintf(off.spec_mode, sizeof off.spec_mode, "adaptive");
    on = off;
    on.spot = 1;
    multistep_result a, b;
    run_record *ra = run_record_new(), *rb = run_record_new();
    cr_assert_eq(policy_run(&off, NULL, &hw, &m7, tr, 1, 1, &a, ra, &e), 0, "%s", e.msg);
    cr_assert_eq(policy_run(&on, NULL, &hw, &m7, tr, 1, 1, &b, rb, &e), 0, "%s", e.msg);
    const rollout_result *x = &a.step[0].ro, *y = &b.step[0].ro;
    /* the rollout itself is unchanged; idle time is split into idle + training */
    cr_assert_eq(x->makespan_s, y->makespan_s);
    cr_assert_eq(x->train_fraction, 0.0);
    cr_assert_gt(y->train_fraction, 0.0);
    cr_assert_gt(y->drafter_gpu_steps, 0);
    cr_assert_float_eq(x->bubble_fraction, y->bubble_fraction + y->train_fraction, 1e-9);
    /* the timeline shows training in its own state, only in the rollout, only with spot */
    double train_a = 0, train_b = 0, idle_b = 0;
    for (size_t i = 0; i < ra->n_tl; i++)
        if (ra->tl[i].state == TL_TRAIN)
            train_a += ra->tl[i].t1 - ra->tl[i].t0;
    for (size_t i = 0; i < rb->n_tl; i++) {
        const tl_interval *v = &rb->tl[i];
        if (v->state == TL_TRAIN) {
            cr_assert_eq(v->phase, PH_ROLLOUT);
            train_b += v->t1 - v->t0;
        } else if (v->state == TL_IDLE && v->phase == PH_ROLLOUT) {
            idle_b += v->t1 - v->t0;
        }
    }
    double span = y->makespan_s * b.step[0].gpus;
    cr_assert_eq(train_a, 0.0);
    cr_assert_float_eq(train_b / span, y->train_fraction, 1e-9);
    cr_assert_float_eq(idle_b / span, y->bubble_fraction, 1e-9);
    /* a step's worth of spot training keeps the drafter at its trained level */
    cr_assert_gt(drafter_next_quality(&on.dp, on.sp.quality, (double)y->drafter_gpu_steps),
                 drafter_next_quality(&on.dp, on.sp.quality, 0));
    multistep_result_free(&a);
    multistep_result_free(&b);
    run_record_free(ra);
    run_record_free(rb);
    trace_free(tr[0]);
}

Test(policy, drafter_dynamics_fixed_points)
{
    drafter_params p;
    drafter_params_default(&p);
    ts_err e = {{0}};
    cr_assert_eq(drafter_params_check(&p, &e), 0, "%s", e.msg);
    /* saturating training every step: q_floor + (q_max - q_floor)(1 - drift) = 0.82 */
    double q = 0.6;
    for (int k = 0; k < 50; k++)
        q = drafter_next_quality(&p, q, 1e9);
    cr_assert_float_eq(q, p.q_floor + (p.q_max - p.q_floor) * (1 - p.drift), 1e-12);
    cr_assert_float_eq(q, 0.82, 2e-3);
    /* no training: geometric decay toward q_floor, monotone */
    double prev = 0.82;
    for (int k = 0; k < 200; k++) {
        double nq = drafter_next_quality(&p, prev, 0);
        cr_assert_lt(nq, prev);
        cr_assert_gt(nq, p.q_floor);
        prev = nq;
    }
    cr_assert_float_eq(prev, p.q_floor + (0.82 - p.q_floor) * pow(1 - p.drift, 200), 1e-9);
    /* more training never hurts */
    cr_assert_lt(drafter_next_quality(&p, 0.7, 100), drafter_next_quality(&p, 0.7, 1000));
    p.q_floor = 0.9;
    cr_assert_eq(drafter_params_check(&p, &e), -1);
}

Test(policy, frozen_drafter_decays_across_steps, .timeout = 60)
{
    ts_err e = {{0}};
    trace *tr[3];
    cr_assert_eq(policy_load_steps(&scn, NULL, 3, tr, &e), 0, "%s", e.msg);
    /* generated steps differ (one seed per step) */
    cr_assert_neq(trace_n_tokens(tr[0]), trace_n_tokens(tr[1]));
    multistep_result r;
    cr_assert_eq(policy_run(&scn, policy_find("tlt-base"), &hw, &m7, tr, 3, 0, &r, NULL, &e), 0,
                 "%s", e.msg);
    cr_assert_float_eq(r.quality[0], scn.sp.quality, 1e-12);
    cr_assert_lt(r.quality[1], r.quality[0]);
    cr_assert_lt(r.quality[2], r.quality[1]);
    cr_assert_gt(r.step[0].ro.accept_len, 1.0);
    multistep_result_free(&r);
    for (int k = 0; k < 3; k++)
        trace_free(tr[k]);
}

Test(policy, steps_from_a_file_in_order)
{
    const char *p = "build/test-policy-steps.csv";
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("step,prompt_id,prompt_tokens,response_tokens\n"
          "5,0,100,200\n5,0,100,300\n7,0,100,400\n9,0,100,500\n9,1,100,600\n", f);
    fclose(f);
    ts_err e = {{0}};
    trace *tr[3];
    scenario s = scn;
    cr_assert_eq(policy_load_steps(&s, p, 3, tr, &e), 0, "%s", e.msg);
    cr_assert_eq(trace_n_tokens(tr[0]), 500);
    cr_assert_eq(trace_n_tokens(tr[1]), 400);
    cr_assert_eq(trace_n_tokens(tr[2]), 1100);
    for (int k = 0; k < 3; k++)
        trace_free(tr[k]);
    s.trace_step = 7;
    cr_assert_eq(policy_load_steps(&s, p, 2, tr, &e), 0, "%s", e.msg);
    cr_assert_eq(trace_n_tokens(tr[0]), 400);
    trace_free(tr[0]);
    trace_free(tr[1]);
    cr_assert_eq(policy_load_steps(&s, p, 3, tr, &e), -1);
    cr_assert(strstr(e.msg, "3 RL steps"), "%s", e.msg);
    remove(p);
}

Test(policy, compare_and_multistep_cli, .timeout = 120)
{
    char *a = run_capture("build/tailsim compare build/test-policy.ini --policies verl,tlt-base,tlt "
                          "--steps 2 --json");
    char *b = run_capture("build/tailsim compare build/test-policy.ini --policies verl,tlt-base,tlt "
                          "--steps 2 --json");
    cr_assert_str_eq(a, b);
    cr_assert(strstr(a, "\"policy\": \"tlt\"") && strstr(a, "\"speedup\"") &&
              strstr(a, "\"off_policy_fraction\""), "%s", a);
    char *c = run_capture("build/tailsim rlstep build/test-policy.ini --policy tlt --steps 2 "
                          "--json --no-wall");
    cr_assert(strstr(c, "\"per_step\"") && strstr(c, "\"drafter_quality\"") &&
              strstr(c, "\"steps\": 2"), "%s", c);
    free(a);
    free(b);
    free(c);
}

/* The length distribution decides TLT's gain (docs/paper-tlt.md, "TLT speedup and the
 * length distribution"): on the TLT 7B setup, two generated traces with the
 * same mean (2000 tokens) and a lognormal sigma of 0.3 and 0.8.  The heavier
 * tail keeps each replica longer at <= 32 running requests (verl's
 * tail_fraction), and tlt's rollout speedup over verl is larger. */
static void tlt_rollout_gain(const char *dist, double *mean, double *tail, double *gain)
{
    scenario s;
    hw_desc h;
    llm_desc m;
    ts_err e = {{0}};
    char set[64];
    cr_assert_eq(scenario_load("qwen7b-64gpu", &s, &e), 0, "%s", e.msg);
    snprintf(set, sizeof set, "trace.dist=%s", dist);
    cr_assert_eq(scenario_set(&s, set, &e), 0, "%s", e.msg);
    /* 256 responses per replica, so a replica has a bulk before its tail (at
     * the scenario's own 32 per replica the whole rollout is at <= 32) */
    cr_assert_eq(scenario_set(&s, "trace.prompts=512", &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load(s.hw, &h, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load(s.model, &m, &e), 0, "%s", e.msg);
    trace *tr[1];
    cr_assert_eq(policy_load_steps(&s, NULL, 1, tr, &e), 0, "%s", e.msg);
    trace_stats st;
    cr_assert_eq(trace_stats_compute(tr[0], &st, &e), 0, "%s", e.msg);
    *mean = st.mean;
    multistep_result a, b;
    cr_assert_eq(policy_run(&s, policy_find("verl"), &h, &m, tr, 1, 0, &a, NULL, &e), 0, "%s",
                 e.msg);
    cr_assert_eq(policy_run(&s, policy_find("tlt"), &h, &m, tr, 1, 0, &b, NULL, &e), 0, "%s",
                 e.msg);
    *tail = a.step[0].ro.tail_fraction;
    *gain = a.step[0].ro.makespan_s / b.step[0].ro.makespan_s;
    multistep_result_free(&a);
    multistep_result_free(&b);
    trace_free(tr[0]);
}

Test(policy, heavier_tail_same_mean_larger_tlt_rollout_speedup, .timeout = 120)
{
    /* medians 2000 / exp(sigma^2 / 2): the same mean before the 32k cap */
    double m_lo, t_lo, g_lo, m_hi, t_hi, g_hi;
    tlt_rollout_gain("lognormal:1912:0.3", &m_lo, &t_lo, &g_lo);
    tlt_rollout_gain("lognormal:1452:0.8", &m_hi, &t_hi, &g_hi);
    cr_assert_lt(fabs(m_hi - m_lo) / m_lo, 0.03, "means %.0f and %.0f should agree", m_lo, m_hi);
    cr_assert_gt(t_hi, t_lo + 0.1, "tail_fraction %.3f (sigma 0.8) vs %.3f (0.3)", t_hi, t_lo);
    cr_assert_gt(g_hi, 1.2 * g_lo, "tlt rollout speedup %.3f (sigma 0.8) vs %.3f (0.3)", g_hi,
                 g_lo);
}
