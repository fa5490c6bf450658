/*
 * Tests of data-centric parallel training: the batch traces (Open-Sora latent
 * shapes, the Zipf video mix, 1D generators, the CSV reader's file/line/field
 * errors, bucketing), the training cost model (a micro-batch never costs
 * less than the sum of its sequences' lower bounds; memory is linear in the
 * micro-batch), PAC's knapsack and the accumulation search against brute
 * force on small cases, and every planner on seeded random traces: each
 * sequence is planned exactly once, every micro-batch fits the memory cap,
 * groups never share a GPU, `bound` is never above any strategy's time, and
 * the same seed gives the same plan.  Scenario and command errors name the
 * file, line and key.  Each test runs in its own process with a fresh
 * temporary directory.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

#include "common/util.h"
#include "sim/cmd.h"
#include "sim/dcp_setup.h"
#include "tests/helpers.h"

static char tmpdir[256];
static hw_desc h200;
static llm_desc stdit, llama;

static void setup(void)
{
    tmpdir_create(tmpdir, sizeof tmpdir, "dcp");
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h200", &h200, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("opensora-stdit3", &stdit, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("llama-3.1-8b", &llama, &e), 0, "%s", e.msg);
}

static void teardown(void)
{
    tmpdir_remove(tmpdir);
}

TestSuite(dcp, .init = setup, .fini = teardown);

static void tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* ------------------------------------------------------------ traces */

Test(dcp, latent_shapes_follow_open_sora)
{
    int32_t t, s;
    bt_latent(51, 720, 1280, &t, &s);
    cr_expect_eq(t, 15);
    cr_expect_eq(s, 3600);
    bt_latent(408, 720, 1280, &t, &s);
    cr_expect_eq(t, 120);
    bt_latent(1, 144, 256, &t, &s);
    cr_expect_eq(t, 1);
    cr_expect_eq(s, 144);
    bt_latent(102, 360, 640, &t, &s); /* 360 / 8 = 45 -> 23 patches */
    cr_expect_eq(t, 30);
    cr_expect_eq(s, 23 * 40);
    bt_latent(17, 240, 426, &t, &s);
    cr_expect_eq(t, 5);
    cr_expect_eq(s, 15 * 27);
}

Test(dcp, video_mix_counts_and_seeds)
{
    ts_err e = {{0}};
    bt_video_mix m = {2000, 2.0, 3.0, 5.0, 7};
    btrace *a = bt_gen_video_mix(&m, &e), *b = bt_gen_video_mix(&m, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_not_null(b, "%s", e.msg);
    cr_expect_eq(a->n, 6000u);
    size_t images = 0, smallest = 0;
    for (size_t i = 0; i < a->n; i++) {
        images += a->seq[i].frames == 1;
        smallest += a->seq[i].frames == 51 && a->seq[i].height == 144;
        cr_expect_eq(memcmp(&a->seq[i], &b->seq[i], sizeof a->seq[i]), 0);
    }
    cr_expect_eq(images, 4000u);
    /* rank 1 of 20 with offset 5, alpha 3: weight 6^-3 of the sum, plus the rounding rest */
    double w = 0;
    for (int r = 1; r <= 20; r++)
        w += pow(r + 5, -3.0);
    cr_expect(fabs((double)smallest - 2000 * pow(6, -3.0) / w) < 10, "%zu", smallest);
    m.seed = 8;
    btrace *c = bt_gen_video_mix(&m, &e);
    int same = 1;
    for (size_t i = 0; i < c->n && same; i++)
        same = !memcmp(&a->seq[i], &c->seq[i], sizeof a->seq[i]);
    cr_expect(!same, "a different seed should reorder the data");
    cr_assert_eq(bt_bucketize(a, &e), 0, "%s", e.msg);
    cr_expect_eq(a->n_buckets, 25);
    for (int32_t k = 1; k < a->n_buckets; k++)
        cr_expect_leq((int64_t)a->buckets[k - 1].t * a->buckets[k - 1].s,
                      (int64_t)a->buckets[k].t * a->buckets[k].s);
    btrace_free(a);
    btrace_free(b);
    btrace_free(c);
}

Test(dcp, one_d_generators_are_seeded_and_capped)
{
    ts_err e = {{0}};
    const char *dists[] = {"sft", "pretrain", "lognormal:2000:1.0", "fixed:777"};
    for (size_t k = 0; k < 4; k++) {
        btrace *a = bt_gen_1d(dists[k], 3000, 20000, 3, &e);
        btrace *b = bt_gen_1d(dists[k], 3000, 20000, 3, &e);
        cr_assert_not_null(a, "%s: %s", dists[k], e.msg);
        cr_assert_not_null(b);
        for (size_t i = 0; i < a->n; i++) {
            cr_assert_eq(a->seq[i].s, b->seq[i].s);
            cr_assert(a->seq[i].s >= 1 && a->seq[i].s <= 20000);
        }
        cr_assert_eq(bt_bucketize(a, &e), 0);
        for (size_t i = 0; i < a->n; i++) {
            const bt_bucket *u = &a->buckets[a->seq[i].bucket];
            cr_assert(a->seq[i].s >= u->lo && a->seq[i].s <= u->hi);
            cr_assert(u->hi <= 1.2 * u->lo + 64, "bucket %d-%d too wide", u->lo, u->hi);
        }
        btrace_free(a);
        btrace_free(b);
    }
    cr_expect_null(bt_gen_1d("zipf", 10, 100, 1, &e));
    cr_expect_neq(e.msg[0], 0);
}

typedef struct bad_case {
    const char *text, *want1, *want2;
} bad_case;

Test(dcp, reader_names_file_line_and_field)
{
    static const bad_case cases[] = {
        {"tokens\n100\nabc\n", ":3:", "field 'tokens'"},
        {"tokens\n100\n0\n", ":3:", "field 'tokens'"},
        {"frames,height,width\n51,720,1280\n51,x,1280\n", ":3:", "field 'height'"},
        {"frames,height,width\n51,720\n", ":2:", "expected 3 fields"},
        {"frames,height,width\n51,720,1280,9\n", ":2:", "more than"},
        {"len\n5\n", ":1:", "header"},
        {"# only a comment\n", "", "empty"},
        {"tokens\n", "", "no sequences"},
        {"frames,height,width\n1,99999,10\n", ":2:", "field 'height'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[512];
        tmp_path(p, sizeof p, "bad.csv");
        write_file(p, cases[i].text);
        btrace *b = (btrace *)0x1;
        ts_err e = {{0}};
        cr_expect_eq(btrace_load(p, &b, &e), -1, "case %zu loaded", i);
        cr_expect_eq(b, (btrace *)0x1, "case %zu touched *out", i);
        cr_expect(strstr(e.msg, p) != NULL, "case %zu: no file in '%s'", i, e.msg);
        cr_expect(strstr(e.msg, cases[i].want1) != NULL, "case %zu: '%s'", i, e.msg);
        cr_expect(strstr(e.msg, cases[i].want2) != NULL, "case %zu: '%s'", i, e.msg);
    }
}

Test(dcp, csv_round_trip)
{
    ts_err e = {{0}};
    char p[512];
    tmp_path(p, sizeof p, "mix.csv");
    bt_video_mix m = {200, 1.0, 3.0, 5.0, 1};
    btrace *a = bt_gen_video_mix(&m, &e), *b = NULL;
    cr_assert_eq(btrace_write_csv(a, p, &e), 0, "%s", e.msg);
    cr_assert_eq(btrace_load(p, &b, &e), 0, "%s", e.msg);
    cr_assert_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++)
        cr_assert_eq(memcmp(&a->seq[i], &b->seq[i], sizeof a->seq[i]), 0);
    btrace_free(a);
    btrace_free(b);
}

/* -------------------------------------------------------- cost model */

Test(dcp, microbatch_never_below_its_sequences_bounds)
{
    ts_err e = {{0}};
    tc_model tv, tl;
    cr_assert_eq(tc_model_init(&tv, &stdit, 300, 34, &e), 0, "%s", e.msg);
    cr_assert_eq(tc_model_init(&tl, &llama, 0, 34, &e), 0, "%s", e.msg);
    tv.a2a_eff = 0.5;
    gsl_rng *r = ts_rng_new(11, 0);
    for (int it = 0; it < 300; it++) {
        int video = it % 2;
        tv.frame_split = it % 4 == 1; /* VideoSys' frame split on half the video cases */
        const tc_model *tm = video ? &tv : &tl;
        int sp = 1 << gsl_rng_uniform_int(r, 4);
        int ring = !video && gsl_rng_uniform_int(r, 3) == 0;
        int n = 1 + (int)gsl_rng_uniform_int(r, 6);
        tc_work w = {0};
        double lb = 0;
        for (int i = 0; i < n; i++) {
            int32_t t = video ? 1 + (int32_t)gsl_rng_uniform_int(r, 60) : 1;
            int32_t s = video ? 100 + (int32_t)gsl_rng_uniform_int(r, 3000)
                              : 16 + (int32_t)gsl_rng_uniform_int(r, 20000);
            tc_work_add(&w, t, s, 1);
            double l = tc_seq_lower_bound(&h200, tm, sp, ring, t, s, 1e15);
            cr_assert_geq(l, 0);
            lb += l;
        }
        tc_par p = {sp, ring, (int)gsl_rng_uniform_int(r, tm->n_a + 1),
                    (int)gsl_rng_uniform_int(r, tm->n_b + 1)};
        double t = tc_microbatch_time(&h200, tm, &p, &w, NULL);
        cr_assert_geq(t, lb, "case %d: %g < %g", it, t, lb);
    }
    gsl_rng_free(r);
}

/* Frame split (VideoSys): a video's spatial blocks need no exchange and each
 * temporal attention two all-to-alls of the activation, where Ulysses has four
 * of the same size (STDiT3: q, k, v widths equal the hidden size) in every
 * block: a quarter of the calls.  An image runs Ulysses in its spatial blocks
 * only: half.  Compute is unchanged. */
Test(dcp, frame_split_communicates_a_quarter_for_videos_half_for_images)
{
    ts_err e = {{0}};
    tc_model u, f;
    cr_assert_eq(tc_model_init(&u, &stdit, 300, 34, &e), 0, "%s", e.msg);
    f = u;
    f.frame_split = 1;
    cr_assert_eq(stdit.heads * stdit.head_dim, stdit.hidden);
    const int32_t shapes[3][2] = {{15, 3600}, {1, 144}, {30, 990}};
    for (int k = 0; k < 3; k++)
        for (int sp = 1; sp <= 8; sp *= 2) {
            tc_work w = {0};
            tc_work_add(&w, shapes[k][0], shapes[k][1], 3);
            tc_par p = {sp, 0, 28, 28};
            tc_breakdown bu, bf;
            double tu = tc_microbatch_time(&h200, &u, &p, &w, &bu);
            double tf = tc_microbatch_time(&h200, &f, &p, &w, &bf);
            double share = shapes[k][0] > 1 ? 0.25 : 0.5;
            if (sp == 1) {
                cr_assert_eq(bu.comm_s, 0);
                cr_assert_eq(bf.comm_s, 0);
                cr_assert_eq(tu, tf);
                continue;
            }
            cr_assert_gt(bu.comm_s, 0);
            cr_assert_float_eq(bf.comm_s, share * bu.comm_s, 1e-9 * bu.comm_s,
                               "shape %d sp %d: %g vs %g", k, sp, bf.comm_s, bu.comm_s);
            cr_assert_float_eq(tu - bu.comm_s, tf - bf.comm_s, 1e-9 * tu, "compute changed");
        }
}

Test(dcp, memory_is_linear_and_split_by_sp)
{
    ts_err e = {{0}};
    tc_model tv;
    cr_assert_eq(tc_model_init(&tv, &stdit, 300, 60, &e), 0);
    tc_par p = {1, 0, tv.n_a, tv.n_b};
    double m[4];
    for (int k = 1; k <= 3; k++) {
        tc_work w = {0};
        tc_work_add(&w, 15, 3600, k);
        m[k] = tc_act_bytes(&tv, &p, &w);
    }
    cr_expect(fabs((m[3] - m[2]) - (m[2] - m[1])) < 1e-6 * m[3]);
    tc_work w = {0};
    tc_work_add(&w, 120, 3600, 1);
    double one = tc_act_bytes(&tv, &p, &w);
    p.sp = 8;
    cr_expect_lt(tc_act_bytes(&tv, &p, &w), one / 4);
    p.sp = 1;
    p.ckpt_a = p.ckpt_b = 0;
    cr_expect_gt(tc_act_bytes(&tv, &p, &w), one);
    /* recomputation costs time, SP communication costs time */
    tc_par a = {1, 0, 0, 0}, b = {1, 0, tv.n_a, tv.n_b};
    cr_expect_gt(tc_microbatch_time(&h200, &tv, &b, &w, NULL),
                 tc_microbatch_time(&h200, &tv, &a, &w, NULL));
    tc_breakdown bd;
    tc_par c = {8, 0, 0, 0};
    tc_microbatch_time(&h200, &tv, &c, &w, &bd);
    cr_expect_gt(bd.comm_s, 0);
    cr_expect_eq(tc_sp_ok(&tv, 32, 0), 0); /* 16 heads */
    cr_expect_eq(tc_sp_ok(&tv, 32, 1), 1);
}

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
        bt_video_mix m = {60 + (int)(seed % 50), (double)(seed % 3), 3.0, 5.0, seed};
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

/* Every invariant of a plan. */
static void check_plan(const fixture *f, const dcp_plan *p)
{
    const dcp_ctx *c = &f->c;
    size_t n = f->bt->n;
    if (p->strat.kind == DCP_BOUND) {
        cr_assert_gt(p->bound_s, 0);
        return;
    }
    cr_assert_eq(p->n_seq, n, "%s: %zu of %zu sequences planned", p->strat.name, p->n_seq, n);
    unsigned char *seen = calloc(n, 1);
    cr_assert_not_null(seen);
    size_t covered = 0;
    double cap = c->cfg.mem_cap * c->hw->hbm_bytes;
    for (size_t s = 0; s < p->n_step; s++) {
        const dcp_step *st = &p->step[s];
        cr_assert_gt(st->n_g, 0);
        int32_t gpu = 0;
        for (int32_t g = 0; g < st->n_g; g++) {
            const dcp_group *x = &p->grp[st->g0 + g];
            cr_assert_eq(x->gpu0, gpu, "%s: groups overlap or leave holes", p->strat.name);
            gpu += x->sp;
            cr_assert_gt(x->n_mb, 0);
            for (int32_t m = 0; m < x->n_mb; m++) {
                const dcp_mb *mb = &p->mb[x->mb0 + m];
                cr_assert_gt(mb->n, 0);
                cr_assert_eq((size_t)mb->first, covered, "micro-batches out of order");
                covered += (size_t)mb->n;
                tc_work w = {0};
                for (int32_t i = 0; i < mb->n; i++) {
                    int32_t q = p->seq[mb->first + i];
                    cr_assert(q >= 0 && (size_t)q < n);
                    cr_assert_eq(seen[q], 0, "%s: sequence %d planned twice", p->strat.name, q);
                    seen[q] = 1;
                    tc_work_add(&w, f->bt->seq[q].t, f->bt->seq[q].s, 1);
                }
                tc_par par = {x->sp, c->cfg.ring, mb->ckpt_a, mb->ckpt_b};
                double mem = c->states_bytes + c->cfg.reserve_bytes + tc_act_bytes(c->tm, &par, &w);
                cr_assert_leq(mem, cap * (1 + 1e-9), "%s: step %zu group %d over the cap (%g GB)",
                              p->strat.name, s, g, mem / 1e9);
            }
        }
        cr_assert_leq(gpu, c->cfg.gpus, "%s: step %zu uses %d GPUs", p->strat.name, s, gpu);
    }
    cr_assert_eq(covered, n);
    free(seen);
}

Test(dcp, every_plan_is_complete_feasible_and_above_the_bound, .timeout = 120)
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
Test(dcp, fill_uses_the_slack_without_lengthening_a_step, .timeout = 120)
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

/* imbalance_plan recomputed from the plan by hand: only steps whose groups
 * hold every GPU, each group its micro-batch count x the profiled time of
 * its largest micro-batch (part-filled ones count as full). */
Test(dcp, plan_imbalance_is_the_samplers_estimate)
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
                    const dcp_mb *m0 = &p.mb[g->mb0];
                    int32_t bs = 0;
                    for (int32_t m = 0; m < g->n_mb; m++)
                        bs = p.mb[g->mb0 + m].n > bs ? p.mb[g->mb0 + m].n : bs;
                    int32_t b = f.bt->seq[p.seq[m0->first]].bucket;
                    double t = g->n_mb * dcp_est_mb_time(&f.c, b, g->sp, bs, m0->ckpt_a,
                                                         m0->ckpt_b);
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

Test(dcp, same_seed_same_plan)
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

Test(dcp, accumulation_search_equals_brute_force)
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

Test(dcp, pac_knapsack_equals_brute_force)
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

Test(dcp, shipped_scenarios_load_and_plan, .timeout = 120)
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

/* dcp.ahead: on the STDiT3 mix the long-video buckets (one micro-batch a
 * large part of a step) drawn to finish a step early leave the fine-grained
 * buckets for the epoch's last steps, which the accumulation counts and the
 * fill then balance: the epoch is shorter and less imbalanced than with every
 * bucket drawn in proportion (dcp.ahead = 0). */
Test(dcp, coarse_buckets_ahead_balance_the_last_steps, .timeout = 120)
{
    scenario s;
    dcp_setup d;
    dcp_ctx c;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load("dcp-stdit3-32xh200-mix1", &s, &e), 0, "%s", e.msg);
    cr_assert_eq(dcp_setup_load(&s, NULL, &d, &e), 0, "%s", e.msg);
    cr_assert_eq(d.cfg.ahead, 1.0, "the default");
    dcp_result r[2];
    for (int on = 0; on < 2; on++) {
        d.cfg.ahead = on ? 1.0 : 0.0;
        cr_assert_eq(dcp_ctx_init(&c, &d.hw, &d.tm, d.bt, &d.cfg, &e), 0, "%s", e.msg);
        dcp_strategy st = {DCP_INTER, 1, "dcp-inter+pac"};
        cr_assert_eq(dcp_run(&c, &st, 0, &r[on], NULL, 0, 0, NULL, 0, &e), 0, "%s", e.msg);
        cr_assert_eq(r[on].seqs, (int64_t)d.bt->n);
        cr_assert(r[on].feasible);
        dcp_ctx_free(&c);
    }
    cr_assert_lt(r[1].time_s, r[0].time_s, "%g s ahead vs %g s in proportion", r[1].time_s,
                 r[0].time_s);
    cr_assert_lt(r[1].imbalance, r[0].imbalance, "%g vs %g", r[1].imbalance, r[0].imbalance);
    dcp_setup_free(&d);
}

Test(dcp, scenario_errors_name_file_line_and_key)
{
    static const bad_case cases[] = {
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\nnope = 1\n",
         ":7:", "dcp.nope"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\nmem_cap = 2\n",
         ":7:", "dcp.mem_cap"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\n"
         "dist = video-mix\nzero_stage = 9\n",
         ":8:", "dcp.zero_stage"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[512];
        tmp_path(p, sizeof p, "bad.ini");
        write_file(p, cases[i].text);
        scenario s;
        ts_err e = {{0}};
        cr_expect_eq(scenario_load(p, &s, &e), -1, "case %zu", i);
        cr_expect(strstr(e.msg, p) && strstr(e.msg, cases[i].want1) &&
                      strstr(e.msg, cases[i].want2),
                  "case %zu: '%s'", i, e.msg);
    }
    /* cross-field: setup-level errors name the file and the key */
    static const bad_case setups[] = {
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\n"
         "dist = video-mix\nsp_sizes = 1,3\n",
         "", "dcp.sp_sizes"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\n"
         "dist = video-mix\nbucket_sp = 16\n",
         "", "dcp.bucket_sp"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\ndist = sft\n",
         "", "1D batch trace needs a decoder"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = llama-3.1-8b\n[dcp]\n"
         "dist = mixture:1/5/nope\n",
         "", "dcp.dist"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = llama-3.1-8b\n[dcp]\n"
         "strategies = bucket,fast\n",
         "", "dcp.strategies"},
    };
    for (size_t i = 0; i < sizeof setups / sizeof setups[0]; i++) {
        char p[512];
        tmp_path(p, sizeof p, "cross.ini");
        write_file(p, setups[i].text);
        scenario s;
        dcp_setup d;
        ts_err e = {{0}};
        cr_assert_eq(scenario_load(p, &s, &e), 0, "case %zu: %s", i, e.msg);
        cr_expect_eq(dcp_setup_load(&s, NULL, &d, &e), -1, "case %zu", i);
        cr_expect(strstr(e.msg, p) && strstr(e.msg, setups[i].want2), "case %zu: '%s'", i, e.msg);
    }
}

Test(dcp, bad_trace_file_through_the_scenario)
{
    char t[512], p[512], ini[1400];
    tmp_path(t, sizeof t, "videos.csv");
    write_file(t, "frames,height,width\n51,720,1280\n408,720,-3\n");
    tmp_path(p, sizeof p, "file.ini");
    snprintf(ini, sizeof ini,
             "[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\nfile = %s\n",
             t);
    write_file(p, ini);
    scenario s;
    dcp_setup d;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(p, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(dcp_setup_load(&s, NULL, &d, &e), -1);
    cr_expect(strstr(e.msg, t) && strstr(e.msg, ":3:") && strstr(e.msg, "field 'width'"), "%s",
              e.msg);
}

Test(dcp, command_exit_statuses, .init = cr_redirect_stderr)
{
    setup();
    char *ok[] = {"dcp", "dcp-llama8b-32xh200", "--strategies", "bucket,dcp-inter,bound",
                  "--json", "--no-wall", "--scale", "--steps", "3", NULL};
    cr_redirect_stdout();
    cr_expect_eq(cmd_dcp(9, ok), 0);
    char *none[] = {"dcp", NULL};
    cr_expect_eq(cmd_dcp(1, none), 2);
    char *bad[] = {"dcp", "dcp-llama8b-32xh200", "--strategies", "fastest", NULL};
    cr_expect_eq(cmd_dcp(4, bad), 1);
    char *steps[] = {"dcp", "dcp-llama8b-32xh200", "--steps", "0", NULL};
    cr_expect_eq(cmd_dcp(4, steps), 2);
    char *set[] = {"dcp", "dcp-llama8b-32xh200", "--set", "dcp.sp_sizes=1,5", NULL};
    cr_expect_eq(cmd_dcp(4, set), 1);
    teardown();
}
