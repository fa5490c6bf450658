/*
 * Tests of the DCP planners: PAC's knapsack and the accumulation search
 * against brute force on small cases, and every planner on seeded random
 * traces: each sequence is planned exactly once, every micro-batch fits the
 * memory cap, groups never share a GPU, `bound` is never above any
 * strategy's time, the same seed gives the same plan, dcp-inter's slack
 * fill, coarse buckets drawn ahead, last step (dcp.endgame), cross-bucket
 * fill (dcp.xfill) and drawing by work (dcp.draw) do what they say, and the per-step figures add up to the
 * run.  The shipped DCP scenarios load and plan.  (tests/test_dcp.c: traces,
 * cost model, scenario and command errors.)
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common/util.h"
#include "models/hw_calib.h"
#include "sim/dcp/dcp_setup.h"
#include "tests/helpers.h"

static hw_desc h200;
static llm_desc stdit, llama;

static void setup(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h200", &h200, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("opensora-stdit3", &stdit, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("llama-3.1-8b", &llama, &e), 0, "%s", e.msg);
}

TestSuite(dcp_plan, .init = setup);

/* ------------------------------------------------ context helpers */

typedef struct fixture {
    tc_model tm;
    btrace *bt;
    dcp_cfg cfg;
    dcp_ctx c;
} fixture;

/* A small random trace: 2D video mix or 1D SFT lengths. */
static void fixture_init_cfg(fixture *f, int video, int gpus, uint64_t seed, double mem_cap,
                             int zero, int ring);

static void fixture_init(fixture *f, int video, int gpus, uint64_t seed, double mem_cap)
{
    fixture_init_cfg(f, video, gpus, seed, mem_cap, 1, 0);
}

static void fixture_init_cfg(fixture *f, int video, int gpus, uint64_t seed, double mem_cap,
                             int zero, int ring)
{
    ts_err e = {{0}};
    memset(f, 0, sizeof *f);
    cr_assert_eq(tc_model_init(&f->tm, video ? &stdit : &llama, video ? 300 : 0, 34, &e), 0);
    if (video) {
        bt_video_mix m = {60 + (int)(seed % 50), (double)(seed % 3), 3.0, 5.0, seed, 0, 0, 0, 0};
        f->bt = bt_gen_video_mix(&m, &e);
    } else {
        f->bt = bt_gen_1d("sft", 200 + (int)(seed % 300), 32768, seed, &e);
    }
    cr_assert_not_null(f->bt, "%s", e.msg);
    cr_assert_eq(bt_bucketize(f->bt, &e), 0);
    dcp_cfg_default(&f->cfg);
    f->cfg.gpus = gpus;
    f->cfg.mem_cap = mem_cap;
    f->cfg.seed = seed;
    f->cfg.zero_stage = zero;
    f->cfg.ring = ring;
    if (ring) { /* ring attention takes SP sizes Ulysses cannot */
        int sp[] = {1, 2, 4, 8, 16};
        memcpy(f->cfg.sp, sp, sizeof sp);
        f->cfg.n_sp = 5;
    }
    cr_assert_eq(dcp_ctx_init(&f->c, &h200, &f->tm, f->bt, &f->cfg, &e), 0, "%s", e.msg);
}

static void fixture_free(fixture *f)
{
    dcp_ctx_free(&f->c);
    btrace_free(f->bt);
}

static const char *const all_strategies =
    "bucket,packed,dcp-intra,dcp-inter,dcp-inter+pac,dcp-intra+pac,bucket+pac,bound";

/* Every invariant of a plan (dcp_plan_check). */
static void check_plan(const fixture *f, const dcp_plan *p)
{
    char why[256];
    cr_assert_eq(dcp_plan_check(&f->c, p, why, sizeof why), 0, "%s", why);
}

Test(dcp_plan, every_plan_is_complete_feasible_and_above_the_bound, .timeout = 120)
{
    dcp_strategy st[DCP_MAX_STRATEGIES];
    int ns;
    ts_err e = {{0}};
    cr_assert_eq(dcp_parse_strategies(all_strategies, st, DCP_MAX_STRATEGIES, &ns, &e), 0, "%s",
                 e.msg);
    static const int gpus[] = {8, 16, 32, 64};
    for (int video = 0; video < 2; video++)
        for (int gi = 0; gi < 4; gi++)
            for (uint64_t seed = 1; seed <= 4; seed++) {
                fixture f;
                /* vary the memory pressure, the ZeRO stage and (1D) ring attention */
                double cap = video ? 0.45 + 0.08 * (double)seed : 0.40 + 0.1 * (double)seed;
                fixture_init_cfg(&f, video, gpus[gi], seed + 10 * gi, cap,
                                 video ? (int)(seed % 4) : 1 + (int)(seed % 3),
                                 !video && seed == 3);
                f.cfg.fill = (int)(seed % 2); /* dcp-inter with and without dcp.fill */
                f.c.cfg.fill = f.cfg.fill;
                f.c.cfg.endgame = (int)((seed + gi) % 4); /* off, 1, 2 or 3 last steps packed */
                f.c.cfg.xfill = (int)((seed / 2 + gi) % 2); /* with and without dcp.xfill */
                f.c.cfg.draw_work = (int)((seed + gi / 2) % 2); /* dcp.draw share or work */
                double bound = -1, best = INFINITY;
                for (int i = 0; i < ns; i++) {
                    dcp_plan p;
                    dcp_result r;
                    cr_assert_eq(dcp_plan_run(&f.c, &st[i], &p, &e), 0, "%s", e.msg);
                    check_plan(&f, &p);
                    cr_assert_eq(dcp_simulate(&f.c, &p, 0, &r, NULL, 0, 0, &e), 0);
                    cr_assert(r.feasible, "%s not feasible", st[i].name);
                    if (st[i].kind == DCP_BOUND) {
                        bound = r.time_s;
                    } else {
                        cr_assert_eq(r.seqs, (int64_t)f.bt->n);
                        cr_assert(r.imbalance >= 0 && r.imbalance < 1);
                        cr_assert(r.imbalance_plan >= 0 && r.imbalance_plan < 1);
                        cr_assert_leq(r.full_steps, r.steps);
                        cr_assert_leq(r.peak_mem_bytes, cap * h200.hbm_bytes * (1 + 1e-9));
                        best = fmin(best, r.time_s);
                        /* --steps: a prefix of the same plan */
                        dcp_result q;
                        cr_assert_eq(dcp_simulate(&f.c, &p, 1, &q, NULL, 0, 0, &e), 0);
                        cr_assert_eq(q.steps, 1);
                        cr_assert_leq(q.time_s, r.time_s);
                    }
                    dcp_plan_free(&p);
                }
                cr_assert_gt(bound, 0);
                cr_assert_leq(bound, best * (1 + 1e-12), "bound %g above %g (video %d, %d GPUs)",
                              bound, best, video, gpus[gi]);
                fixture_free(&f);
            }
}

/* Planner time of the group g of plan p: its micro-batches at the profiled
 * time of their sizes. */
static double group_prof_time(const fixture *f, const dcp_plan *p, const dcp_group *g)
{
    int j = 0;
    while (f->c.cfg.sp[j] != g->sp)
        j++;
    double t = 0;
    for (int32_t m = 0; m < g->n_mb; m++) {
        const dcp_mb *mb = &p->mb[g->mb0 + m];
        t += dcp_prof_time(&f->c, f->bt->seq[p->seq[mb->first]].bucket, j, mb->n);
    }
    return t;
}

/* dcp.fill only uses the slack before a step's longest group: on the first
 * step (the same groups and search either way) the longest group's planner
 * time is unchanged, no group ends after it, and the step trains at least as
 * many sequences; over the whole plan (of these traces) the simulated time
 * does not grow. */
Test(dcp_plan, fill_uses_the_slack_without_lengthening_a_step, .timeout = 120)
{
    dcp_strategy st;
    int ns;
    ts_err e = {{0}};
    cr_assert_eq(dcp_parse_strategies("dcp-inter", &st, 1, &ns, &e), 0, "%s", e.msg);
    int gained = 0;
    for (int video = 0; video < 2; video++)
        for (uint64_t seed = 1; seed <= 4; seed++) {
            fixture f;
            fixture_init(&f, video, 16 << (seed % 2), seed, video ? 0.6 : 0.7);
            double tmax[2] = {0}, seqs[2] = {0}, total[2] = {0};
            for (int fill = 0; fill < 2; fill++) {
                f.c.cfg.fill = fill;
                dcp_plan p;
                dcp_result r;
                cr_assert_eq(dcp_plan_run(&f.c, &st, &p, &e), 0, "%s", e.msg);
                check_plan(&f, &p);
                const dcp_step *s0 = &p.step[0];
                for (int32_t k = 0; k < s0->n_g; k++) {
                    const dcp_group *g = &p.grp[s0->g0 + k];
                    tmax[fill] = fmax(tmax[fill], group_prof_time(&f, &p, g));
                    for (int32_t m = 0; m < g->n_mb; m++)
                        seqs[fill] += p.mb[g->mb0 + m].n;
                }
                cr_assert_eq(dcp_simulate(&f.c, &p, 0, &r, NULL, 0, 0, &e), 0);
                total[fill] = r.time_s;
                dcp_plan_free(&p);
            }
            cr_assert_float_eq(tmax[1], tmax[0], 1e-9 * tmax[0], "video %d seed %d: %g vs %g s",
                               video, (int)seed, tmax[1], tmax[0]);
            cr_assert_geq(seqs[1], seqs[0]);
            cr_assert_leq(total[1], total[0] * (1 + 1e-12), "video %d seed %d: %g s with fill, %g without",
                          video, (int)seed, total[1], total[0]);
            gained += seqs[1] > seqs[0];
            fixture_free(&f);
        }
    cr_assert_gt(gained, 0, "fill never added a sequence to a first step");
}

/* A group's time as VideoSys' sampler estimates it, by hand: per bucket
 * among its micro-batches (several only in dcp-inter's last step), their
 * count x the profiled time of the largest, at that bucket's first
 * micro-batch's checkpointing. */
static double group_est_time(const fixture *f, const dcp_plan *p, const dcp_group *g)
{
    int32_t nb = f->c.nb, *cnt = calloc((size_t)nb, sizeof *cnt), *bs = calloc((size_t)nb, sizeof *bs);
    int32_t *m0 = malloc((size_t)nb * sizeof *m0);
    cr_assert(cnt && bs && m0);
    for (int32_t m = g->mb0 + g->n_mb - 1; m >= g->mb0; m--) {
        int32_t b = f->bt->seq[p->seq[p->mb[m].first]].bucket;
        cnt[b]++;
        bs[b] = p->mb[m].n > bs[b] ? p->mb[m].n : bs[b];
        m0[b] = m; /* ends at the bucket's first micro-batch */
    }
    double t = 0;
    for (int32_t b = 0; b < nb; b++)
        if (cnt[b])
            t += cnt[b] * dcp_est_mb_time(&f->c, b, g->sp, bs[b], p->mb[m0[b]].ckpt_a,
                                          p->mb[m0[b]].ckpt_b);
    free(cnt);
    free(bs);
    free(m0);
    return t;
}

/* imbalance_plan recomputed from the plan by hand: only steps whose groups
 * hold every GPU, each group its micro-batch count x the profiled time of
 * its largest micro-batch (part-filled ones count as full), per bucket. */
Test(dcp_plan, plan_imbalance_is_the_samplers_estimate)
{
    dcp_strategy st[DCP_MAX_STRATEGIES];
    int ns;
    ts_err e = {{0}};
    cr_assert_eq(dcp_parse_strategies("bucket,dcp-intra,dcp-inter,dcp-inter+pac", st,
                                      DCP_MAX_STRATEGIES, &ns, &e), 0, "%s", e.msg);
    for (int video = 0; video < 2; video++) {
        fixture f;
        fixture_init(&f, video, 16, 7, 0.7);
        int64_t any_full = 0; /* so the comparison is not between two zeros */
        for (int i = 0; i < ns; i++) {
            dcp_plan p;
            dcp_result r;
            cr_assert_eq(dcp_plan_run(&f.c, &st[i], &p, &e), 0, "%s", e.msg);
            cr_assert_eq(dcp_simulate(&f.c, &p, 0, &r, NULL, 0, 0, &e), 0);
            double idle = 0, maxsum = 0;
            int64_t full = 0;
            for (size_t s = 0; s < p.n_step; s++) {
                const dcp_step *sp = &p.step[s];
                double tmax = 0, busy = 0;
                int used = 0;
                for (int32_t k = 0; k < sp->n_g; k++) {
                    const dcp_group *g = &p.grp[sp->g0 + k];
                    double t = group_est_time(&f, &p, g);
                    tmax = fmax(tmax, t);
                    busy += g->sp * t;
                    used += g->sp;
                }
                if (used == f.cfg.gpus) {
                    idle += f.cfg.gpus * tmax - busy;
                    maxsum += f.cfg.gpus * tmax;
                    full++;
                }
            }
            cr_assert_eq(r.full_steps, full, "%s", st[i].name);
            cr_assert_float_eq(r.imbalance_plan, maxsum > 0 ? idle / maxsum : 0, 1e-9, "%s: %g",
                               st[i].name, r.imbalance_plan);
            any_full += full;
            dcp_plan_free(&p);
        }
        cr_assert_gt(any_full, 0, "no plan filled every GPU in any step (video %d)", video);
        fixture_free(&f);
    }
}

Test(dcp_plan, same_seed_same_plan)
{
    dcp_strategy st[DCP_MAX_STRATEGIES];
    int ns;
    ts_err e = {{0}};
    cr_assert_eq(dcp_parse_strategies(all_strategies, st, DCP_MAX_STRATEGIES, &ns, &e), 0);
    fixture a, b;
    fixture_init(&a, 1, 16, 5, 0.7);
    fixture_init(&b, 1, 16, 5, 0.7);
    for (int i = 0; i < ns; i++) {
        dcp_plan p, q;
        dcp_result r, s;
        cr_assert_eq(dcp_plan_run(&a.c, &st[i], &p, &e), 0);
        cr_assert_eq(dcp_plan_run(&b.c, &st[i], &q, &e), 0);
        cr_assert_eq(p.n_seq, q.n_seq);
        cr_assert_eq(p.n_step, q.n_step);
        cr_assert_eq(p.n_mb, q.n_mb);
        if (p.n_seq)
            cr_assert_eq(memcmp(p.seq, q.seq, p.n_seq * sizeof *p.seq), 0, "%s", st[i].name);
        if (p.n_mb)
            cr_assert_eq(memcmp(p.mb, q.mb, p.n_mb * sizeof *p.mb), 0);
        dcp_simulate(&a.c, &p, 0, &r, NULL, 0, 0, &e);
        dcp_simulate(&b.c, &q, 0, &s, NULL, 0, 0, &e);
        cr_assert_eq(r.time_s, s.time_s);
        cr_assert_eq(r.imbalance, s.imbalance);
        dcp_plan_free(&p);
        dcp_plan_free(&q);
    }
    fixture_free(&a);
    fixture_free(&b);
}

/* --------------------------------------------- searches vs brute force */

static double pen(double x, double over)
{
    return x > 0 ? x * over : -x;
}

/* min over T in (0, Tmax] of sum pen(e g - T) / T for fixed counts. */
static double phi(const double *e, const int *g, int k, double Tmax, double over)
{
    double best = INFINITY;
    for (int j = 0; j <= k; j++) {
        double T = j < k ? e[j] * g[j] : Tmax, s = 0;
        if (T > Tmax * (1 + 1e-12))
            continue;
        for (int i = 0; i < k; i++)
            s += pen(e[i] * g[i] - T, over);
        best = fmin(best, s / T);
    }
    return best;
}

Test(dcp_plan, accumulation_search_equals_brute_force)
{
    gsl_rng *r = ts_rng_new(3, 0);
    for (int it = 0; it < 400; it++) {
        int k = 1 + (int)gsl_rng_uniform_int(r, 4);
        int max_gas = 1 + (int)gsl_rng_uniform_int(r, 5);
        double over = 1.0 + gsl_rng_uniform(r);
        double e[4], emax = 0;
        int cap[4], lim[4], gas[4], g[4];
        for (int i = 0; i < k; i++) {
            /* some equal times, so that grouping is exercised */
            e[i] = i && gsl_rng_uniform_int(r, 3) == 0 ? e[i - 1] : 0.2 + 2.0 * gsl_rng_uniform(r);
            emax = fmax(emax, e[i]);
            cap[i] = 1 + (int)gsl_rng_uniform_int(r, 12);
        }
        int use_cap = it % 2;
        for (int i = 0; i < k; i++) {
            lim[i] = dcp_gas_limit(e[i], emax, max_gas);
            if (use_cap && cap[i] < lim[i])
                lim[i] = cap[i];
        }
        double got = dcp_gas_search(e, use_cap ? cap : NULL, k, max_gas, over, gas);
        double Tmax = max_gas * emax;
        /* brute force over every count vector */
        double want = INFINITY;
        for (int i = 0; i < k; i++)
            g[i] = 1;
        for (;;) {
            want = fmin(want, phi(e, g, k, Tmax, over));
            int i = 0;
            while (i < k && g[i] == lim[i])
                g[i++] = 1;
            if (i == k)
                break;
            g[i]++;
        }
        cr_assert(fabs(got - want) <= 1e-9 * (1 + want), "case %d: search %g, brute force %g", it,
                  got, want);
        for (int i = 0; i < k; i++)
            cr_assert(gas[i] >= 1 && gas[i] <= lim[i]);
        cr_assert_leq(phi(e, gas, k, Tmax, over), got + 1e-9, "case %d: counts miss the optimum",
                      it);
    }
    gsl_rng_free(r);
}

/* VideoSys bounds a group's count by max_gas x the longest micro-batch over
 * its own and by nothing else (DCP_GAS_HARD is a guard above what plans
 * need): +pac's 0.29 s image micro-batches next to 9.4 s videos may take
 * 164, and the search balances two video groups of two each against image
 * groups of 65 rather than stopping at a 64 cap. */
Test(dcp_plan, accumulation_bound_is_videosys)
{
    cr_expect_eq(dcp_gas_limit(0.285, 9.362, 5), 164);
    cr_expect_eq(dcp_gas_limit(9.362, 9.362, 5), 5);
    cr_expect_eq(dcp_gas_limit(1e-6, 10.0, 5), DCP_GAS_HARD);
    cr_expect_geq(DCP_GAS_HARD, 256);
    /* a target of two videos: 18.72 s = 65.7 x 0.285 s */
    double e[4] = {9.362, 9.362, 0.285, 0.285};
    int gas[4];
    double f = dcp_gas_search(e, NULL, 4, 5, 1.2, gas);
    cr_expect_eq(gas[0], gas[1]);
    cr_expect_gt(gas[2], 64, "image groups %d", gas[2]);
    double T = gas[0] * e[0];
    cr_expect_leq(fabs(gas[2] * e[2] - T) / T, e[2] / T, "images end within a micro-batch");
    cr_expect_lt(f, 0.02, "objective %g", f);
}

Test(dcp_plan, pac_knapsack_equals_brute_force)
{
    fixture f;
    fixture_init(&f, 1, 8, 2, 0.7);
    const tc_model *tm = f.c.tm;
    for (int32_t b = 0; b < f.c.nb; b += 3) {
        for (int sp = 1; sp <= 8; sp *= 2)
            for (int32_t bs = 1; bs <= 64; bs *= 4) {
                dcp_choice ch = {sp, bs, 0, 0, 0};
                if (dcp_pac(&f.c, b, &ch))
                    continue;
                const bt_bucket *u = &f.bt->buckets[b];
                tc_work w = {0};
                tc_work_add(&w, u->t, u->s, bs);
                double best = INFINITY;
                for (int ca = 0; ca <= tm->n_a; ca++)
                    for (int cb = 0; cb <= tm->n_b; cb++) {
                        tc_par p = {sp, 0, ca, cb};
                        if (tc_act_bytes(tm, &p, &w) > f.c.budget_bytes)
                            continue;
                        best = fmin(best, tc_microbatch_time(&h200, tm, &p, &w, NULL));
                    }
                cr_assert(fabs(ch.time_s - best) <= 1e-9 * best,
                          "bucket %d sp %d bs %d: pac %g, brute %g", b, sp, bs, ch.time_s, best);
            }
    }
    fixture_free(&f);
}

/* --------------------------------------------------- scenarios, command */

Test(dcp_plan, shipped_scenarios_load_and_plan, .timeout = 120)
{
    const char *names[] = {"dcp-stdit3-32xh200-mix1", "dcp-stdit3-32xh200-mix2",
                           "dcp-stdit3-32xh200-mix5", "dcp-llama8b-32xh200"};
    for (size_t i = 0; i < 4; i++) {
        scenario s;
        dcp_setup d;
        dcp_ctx c;
        ts_err e = {{0}};
        cr_assert_eq(scenario_load(names[i], &s, &e), 0, "%s", e.msg);
        cr_assert_eq(scenario_validate(&s, &e), 0, "%s", e.msg);
        cr_assert_eq(dcp_setup_load(&s, NULL, &d, &e), 0, "%s: %s", names[i], e.msg);
        cr_assert_eq(d.cfg.gpus, 32);
        cr_assert_eq(dcp_ctx_init(&c, &d.hw, &d.tm, d.bt, &d.cfg, &e), 0, "%s", e.msg);
        dcp_strategy st = {DCP_INTER, 0, "dcp-inter"};
        dcp_plan p;
        cr_assert_eq(dcp_plan_run(&c, &st, &p, &e), 0, "%s", e.msg);
        cr_assert_eq(p.n_seq, d.bt->n);
        dcp_plan_free(&p);
        dcp_ctx_free(&c);
        dcp_setup_free(&d);
    }
}

/* Loads a shipped DCP scenario's setup. */
static void setup_load(const char *name, dcp_setup *d)
{
    scenario s;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(name, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(dcp_setup_load(&s, NULL, d, &e), 0, "%s", e.msg);
}

/* Plans dcp-inter (pac: +pac) on d's setup as configured now and simulates
 * it: the plan in *p (free it, then *c) and its result in *r, checked
 * complete and feasible. */
static void inter_run(const dcp_setup *d, int pac, dcp_ctx *c, dcp_plan *p, dcp_result *r)
{
    ts_err e = {{0}};
    cr_assert_eq(dcp_ctx_init(c, &d->hw, &d->tm, d->bt, &d->cfg, &e), 0, "%s", e.msg);
    dcp_strategy st = {DCP_INTER, pac, "dcp-inter"};
    cr_assert_eq(dcp_plan_run(c, &st, p, &e), 0, "%s", e.msg);
    cr_assert_eq(dcp_simulate(c, p, 0, r, NULL, 0, 0, &e), 0, "%s", e.msg);
    cr_assert_eq(r->seqs, (int64_t)d->bt->n);
    cr_assert(r->feasible);
}

/* dcp.ahead: on the STDiT3 mix the long-video buckets (one micro-batch a
 * large part of a step) drawn to finish a step early leave the fine-grained
 * buckets for the epoch's last steps, which the accumulation counts and the
 * fill then balance: the epoch is shorter and less imbalanced than with every
 * bucket drawn in proportion (dcp.ahead = 0). */
Test(dcp_plan, coarse_buckets_ahead_balance_the_last_steps, .timeout = 120)
{
    dcp_setup d;
    dcp_ctx c;
    dcp_plan p;
    setup_load("dcp-stdit3-32xh200-mix1", &d);
    cr_assert_eq(d.cfg.ahead, 1.0, "the default");
    dcp_result r[2];
    for (int on = 0; on < 2; on++) {
        d.cfg.ahead = on ? 1.0 : 0.0;
        inter_run(&d, 1, &c, &p, &r[on]);
        dcp_plan_free(&p);
        dcp_ctx_free(&c);
    }
    cr_assert_lt(r[1].time_s, r[0].time_s, "%g s ahead vs %g s in proportion", r[1].time_s,
                 r[0].time_s);
    cr_assert_lt(r[1].imbalance, r[0].imbalance, "%g vs %g", r[1].imbalance, r[0].imbalance);
    dcp_setup_free(&d);
}

/* The last step of plan p (dcp-inter, ch its choices): for each SP size,
 * the least and most loaded group (planner time, s) and the longest
 * micro-batch; *mixed set when some group holds micro-batches of several
 * buckets. */
typedef struct eg_span {
    double lo, hi, longest; /* s */
    int n;                  /* groups of this SP size */
} eg_span;

static void last_step_spans(const dcp_setup *d, const dcp_ctx *c, const dcp_choice *ch,
                            const dcp_plan *p, eg_span sp[DCP_MAX_SP], int *mixed)
{
    const dcp_step *last = &p->step[p->n_step - 1];
    *mixed = 0;
    for (int j = 0; j < DCP_MAX_SP; j++)
        sp[j] = (eg_span){INFINITY, 0, 0, 0};
    for (int32_t k = 0; k < last->n_g; k++) {
        const dcp_group *g = &p->grp[last->g0 + k];
        int j = 0;
        while (j < c->cfg.n_sp && c->cfg.sp[j] != g->sp)
            j++;
        cr_assert_lt(j, c->cfg.n_sp, "group of SP %d, not one of the sizes", g->sp);
        double t = 0;
        int32_t b0 = d->bt->seq[p->seq[p->mb[g->mb0].first]].bucket;
        for (int32_t m = g->mb0; m < g->mb0 + g->n_mb; m++) {
            int32_t b = d->bt->seq[p->seq[p->mb[m].first]].bucket;
            cr_assert_eq(ch[b].sp, g->sp, "bucket %d keeps its SP size %d", b, ch[b].sp);
            double x = dcp_choice_time(c, b, &ch[b], p->mb[m].n);
            t += x;
            sp[j].longest = fmax(sp[j].longest, x);
            *mixed |= b != b0;
        }
        sp[j].lo = fmin(sp[j].lo, t);
        sp[j].hi = fmax(sp[j].hi, t);
        sp[j].n++;
    }
}

/* dcp.endgame: once what is left fits one step at the last target, it is
 * one step, its micro-batches placed longest first on the least-loaded
 * group of their SP size, so in that step two groups of one SP size differ
 * by at most its longest micro-batch (list scheduling), and some group
 * mixes buckets.  Pinned on a load with one SP size by construction (the
 * STDiT3 mix 1 with dcp.sp_sizes = 1 and dcp.bucket_sp = 0, so the property covers every group of
 * the step): the epoch is shorter, less imbalanced and has no more steps
 * than planned step by step to the end. */
Test(dcp_plan, endgame_packs_the_last_step, .timeout = 120)
{
    dcp_setup d;
    dcp_ctx c;
    setup_load("dcp-stdit3-32xh200-mix1", &d);
    cr_assert_eq(d.cfg.endgame, 1, "the default");
    d.cfg.sp[0] = 1;
    d.cfg.n_sp = 1;
    d.cfg.bucket_sp = 0;
    for (int pac = 0; pac < 2; pac++) {
        dcp_result r[2];
        for (int on = 0; on < 2; on++) {
            d.cfg.endgame = on;
            dcp_plan p;
            inter_run(&d, pac, &c, &p, &r[on]);
            if (on) {
                eg_span sp[DCP_MAX_SP];
                int mixed;
                last_step_spans(&d, &c, pac ? c.best_pac : c.best, &p, sp, &mixed);
                const dcp_step *last = &p.step[p.n_step - 1];
                cr_assert_eq(sp[0].n, last->n_g, "pac %d: one SP size", pac);
                cr_assert_geq(sp[0].n, 2, "pac %d: %d groups", pac, sp[0].n);
                cr_assert_leq(sp[0].hi - sp[0].lo, sp[0].longest * (1 + 1e-9),
                              "pac %d: groups %g..%g s, longest %g s", pac, sp[0].lo, sp[0].hi,
                              sp[0].longest);
                cr_assert(mixed, "pac %d: no group of the last step mixes buckets", pac);
            }
            dcp_plan_free(&p);
            dcp_ctx_free(&c);
        }
        cr_assert_lt(r[1].time_s, r[0].time_s, "pac %d: %g s vs %g s", pac, r[1].time_s, r[0].time_s);
        cr_assert_lt(r[1].imbalance, r[0].imbalance, "pac %d: %g vs %g", pac, r[1].imbalance,
                     r[0].imbalance);
        cr_assert_leq(r[1].steps, r[0].steps);
    }
    dcp_setup_free(&d);
}

/* dcp.endgame on the shipped STDiT3 mix 1 (SP sizes 1, 2, 4, 8), whose
 * last step may hold several SP sizes (with PAC, the longest buckets run
 * uncheckpointed at SP 4 or 8 when that beats recomputing at SP 1): every
 * micro-batch keeps its bucket's SP size, and within each SP size the
 * groups differ by at most its longest micro-batch.  Groups of different
 * SP sizes are not balanced against each other (a size in use takes at
 * least one group, however little work it has). */
Test(dcp_plan, endgame_balances_each_sp_size, .timeout = 120)
{
    dcp_setup d;
    dcp_ctx c;
    setup_load("dcp-stdit3-32xh200-mix1", &d);
    for (int pac = 0; pac < 2; pac++) {
        dcp_result r;
        dcp_plan p;
        inter_run(&d, pac, &c, &p, &r);
        eg_span sp[DCP_MAX_SP];
        int mixed;
        last_step_spans(&d, &c, pac ? c.best_pac : c.best, &p, sp, &mixed);
        for (int j = 0; j < c.cfg.n_sp; j++)
            if (sp[j].n)
                cr_assert_leq(sp[j].hi - sp[j].lo, sp[j].longest * (1 + 1e-9),
                              "pac %d SP %d: groups %g..%g s, longest %g s", pac, c.cfg.sp[j],
                              sp[j].lo, sp[j].hi, sp[j].longest);
        cr_assert(mixed, "pac %d: the last step is the endgame's", pac);
        dcp_plan_free(&p);
        dcp_ctx_free(&c);
    }
    dcp_setup_free(&d);
}

/* dcp.xfill: a group's slack left after the fill takes micro-batches of
 * other buckets.  On the first step (the same groups and search either
 * way) the longest group's planner time does not move, some group mixes
 * buckets and the step trains more sequences; on the STDiT3 mix 5 the
 * epoch is shorter and less imbalanced, with and without PAC. */
Test(dcp_plan, xfill_uses_other_buckets_in_the_slack, .timeout = 120)
{
    dcp_setup d;
    dcp_ctx c;
    setup_load("dcp-stdit3-32xh200-mix5", &d);
    cr_assert_eq(d.cfg.xfill, 0, "off by default");
    for (int pac = 0; pac < 2; pac++) {
        dcp_result r[2];
        double tmax[2] = {0}, seqs[2] = {0};
        int mixed = 0;
        for (int on = 0; on < 2; on++) {
            d.cfg.xfill = on;
            dcp_plan p;
            inter_run(&d, pac, &c, &p, &r[on]);
            const dcp_choice *ch = pac ? c.best_pac : c.best;
            const dcp_step *s0 = &p.step[0];
            for (int32_t k = 0; k < s0->n_g; k++) {
                const dcp_group *g = &p.grp[s0->g0 + k];
                int32_t b0 = d.bt->seq[p.seq[p.mb[g->mb0].first]].bucket;
                double t = 0;
                for (int32_t m = g->mb0; m < g->mb0 + g->n_mb; m++) {
                    int32_t b = d.bt->seq[p.seq[p.mb[m].first]].bucket;
                    t += dcp_choice_time(&c, b, &ch[b], p.mb[m].n);
                    seqs[on] += p.mb[m].n;
                    mixed |= on && b != b0;
                }
                tmax[on] = fmax(tmax[on], t);
            }
            dcp_plan_free(&p);
            dcp_ctx_free(&c);
        }
        cr_assert_leq(tmax[1], tmax[0] * (1 + 1e-9), "pac %d: first step %g s with xfill, %g without",
                      pac, tmax[1], tmax[0]);
        cr_assert_gt(seqs[1], seqs[0], "pac %d", pac);
        cr_assert(mixed, "pac %d: no group of the first step mixes buckets", pac);
        cr_assert_lt(r[1].time_s, r[0].time_s, "pac %d: %g s vs %g s", pac, r[1].time_s, r[0].time_s);
        cr_assert_lt(r[1].imbalance, r[0].imbalance, "pac %d: %g vs %g", pac, r[1].imbalance,
                     r[0].imbalance);
    }
    dcp_setup_free(&d);
}

/* dcp_run_steps: its steps add up to the run: compute plus one sync each is
 * the time, the idle GPU-seconds over gpus x compute are the imbalance, the
 * groups hold at most every GPU; --steps gives the first steps; bound has
 * none. */
Test(dcp_plan, per_step_figures_add_up_to_the_run, .timeout = 120)
{
    dcp_strategy st[DCP_MAX_STRATEGIES];
    int ns;
    ts_err e = {{0}};
    cr_assert_eq(dcp_parse_strategies(all_strategies, st, DCP_MAX_STRATEGIES, &ns, &e), 0);
    for (int video = 0; video < 2; video++) {
        fixture f;
        fixture_init(&f, video, 16, 3, 0.7);
        for (int i = 0; i < ns; i++) {
            dcp_result r, q;
            dcp_step_stat *ps = NULL, *pq = NULL;
            cr_assert_eq(dcp_run_steps(&f.c, &st[i], 0, &r, &ps, &e), 0, "%s", e.msg);
            if (st[i].kind == DCP_BOUND) {
                cr_assert_null(ps);
                continue;
            }
            cr_assert_not_null(ps);
            double t = 0, idle = 0, maxsum = 0;
            for (int64_t k = 0; k < r.steps; k++) {
                cr_assert_leq(ps[k].gpus_used, f.cfg.gpus);
                cr_assert_geq(ps[k].mbs, ps[k].groups);
                cr_assert_leq(ps[k].mixed, ps[k].groups);
                cr_assert_float_eq(ps[k].imbalance * f.cfg.gpus * ps[k].compute_s, ps[k].idle_gs,
                                   1e-9 * (1 + ps[k].idle_gs));
                t += ps[k].compute_s + f.c.sync_s;
                idle += ps[k].idle_gs;
                maxsum += f.cfg.gpus * ps[k].compute_s;
            }
            cr_assert_float_eq(t, r.time_s, 1e-9 * r.time_s, "%s", st[i].name);
            cr_assert_float_eq(idle / maxsum, r.imbalance, 1e-9, "%s", st[i].name);
            cr_assert_eq(dcp_run_steps(&f.c, &st[i], 2, &q, &pq, &e), 0, "%s", e.msg);
            cr_assert_eq(q.steps, r.steps < 2 ? r.steps : 2);
            for (int64_t k = 0; k < q.steps; k++)
                cr_assert_eq(pq[k].compute_s, ps[k].compute_s);
            free(ps);
            free(pq);
        }
        fixture_free(&f);
    }
}

/* dcp.draw = work: on the 1D SFT mix the short-length buckets, each less
 * than a group's share of a step, are no longer drawn first: the first
 * step gives some bucket several groups, and the epoch is shorter and less
 * imbalanced than with groups drawn by share. */
Test(dcp_plan, draw_by_work_spreads_groups_over_the_heavy_buckets, .timeout = 120)
{
    dcp_setup d;
    dcp_ctx c;
    setup_load("dcp-llama8b-32xh200", &d);
    cr_assert_eq(d.cfg.draw_work, 0, "share by default");
    dcp_result r[2];
    for (int work = 0; work < 2; work++) {
        d.cfg.draw_work = work;
        dcp_plan p;
        inter_run(&d, 0, &c, &p, &r[work]);
        if (work) {
            const dcp_step *s0 = &p.step[0];
            int32_t *n = calloc((size_t)c.nb, sizeof *n), most = 0;
            cr_assert_not_null(n);
            for (int32_t k = 0; k < s0->n_g; k++) {
                const dcp_group *g = &p.grp[s0->g0 + k];
                int32_t b = d.bt->seq[p.seq[p.mb[g->mb0].first]].bucket;
                most = ++n[b] > most ? n[b] : most;
            }
            free(n);
            cr_assert_geq(most, 2, "no bucket got two groups in the first step");
        }
        dcp_plan_free(&p);
        dcp_ctx_free(&c);
    }
    cr_assert_lt(r[1].time_s, r[0].time_s, "%g s by work vs %g s by share", r[1].time_s, r[0].time_s);
    cr_assert_lt(r[1].imbalance, r[0].imbalance, "%g vs %g", r[1].imbalance, r[0].imbalance);
    dcp_setup_free(&d);
}
