/*
 * Simulator tests: the rollout replica against hand arithmetic with the cost
 * model (equal lengths give no bubble; one response 20x longer gives exactly
 * the idle time the iteration sums say), losslessness under preemption,
 * placement, scenario parsing errors, the RL step's phase accounting, the
 * real DAPO trace, and byte-identical CLI output for a seed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/hw_calib.h"
#include "tests/helpers.h"
#include "models/cost.h"
#include "models/cost_spec.h"
#include "sim/rlstep.h"
#include "sim/scenario.h"
#include "traces/trace.h"

static hw_desc hw;
static llm_desc m7;

static void setup(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &hw, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("qwen2.5-7b", &m7, &e), 0, "%s", e.msg);
}

TestSuite(sim, .init = setup);

/* n prompts of one response each, all `len` long, prompt `plen`. */
static trace *uniform_trace(int n, int32_t len, int32_t plen)
{
    trace *t = trace_new();
    for (int i = 0; i < n; i++)
        cr_assert_eq(trace_add(t, 0, i, -1, plen, &len, 1, NULL), 0);
    return t;
}

static rollout_cfg base_cfg(int replicas)
{
    rollout_cfg c = {.hw = &hw, .llm = &m7, .tp = 1, .replicas = replicas, .max_running = 256,
                     .chunk_tokens = 8192, .kv_tokens = 400000, .tail_threshold = 32};
    return c;
}

/* Time a replica needs for n requests of prompt p and lengths len (all equal)
 * plus, optionally, one extra request of length long_len, all admitted in one
 * prefill iteration: the arithmetic the simulator must reproduce. */
static double expected_end(int n, int p, int len, int long_len)
{
    int nreq = n + (long_len > 0);
    cost_batch b = {0};
    b.n_prefill_seqs = nreq;
    b.prefill_tokens = nreq * p;
    b.prefill_attn = (double)nreq * p * (p + 1) / 2.0;
    b.prefill_kv_sum = (double)nreq * p;
    /* every iteration also samples one logits row per sequence (cost_sample) */
    double t = cost_iter(&hw, &m7, 1, &b) + cost_sample(&hw, &m7, nreq); /* token 1 of each */
    for (int j = 1; j < len; j++)          /* tokens 2..len of all */
        t += cost_decode_iter(&hw, &m7, 1, nreq, (double)nreq * (p + j)) + cost_sample(&hw, &m7, nreq);
    for (int j = len; j < long_len; j++)   /* the long one alone */
        t += cost_decode_iter(&hw, &m7, 1, 1, (double)(p + j)) + cost_sample(&hw, &m7, 1);
    return t;
}

Test(sim, equal_lengths_have_no_bubble)
{
    trace *t = uniform_trace(256, 1000, 100);
    rollout_cfg c = base_cfg(4);
    rollout_result r;
    ts_err e = {{0}};
    cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
    cr_assert_lt(r.bubble_fraction, 1e-9, "bubble %g", r.bubble_fraction);
    double want = expected_end(64, 100, 1000, 0);
    cr_assert_lt(fabs(r.makespan_s - want) / want, 1e-9, "makespan %g vs %g", r.makespan_s, want);
    cr_assert_eq(r.decode_tokens, 256 * 1000);
    cr_assert_eq(r.preemptions, 0);
    rollout_result_free(&r);
    trace_free(t);
}

Test(sim, one_long_response_raises_bubble_as_arithmetic_says)
{
    trace *t = uniform_trace(256, 1000, 100);
    int32_t long_len = 20000;
    cr_assert_eq(trace_add(t, 0, 256, -1, 100, &long_len, 1, NULL), 0);
    rollout_cfg c = base_cfg(4);
    /* round-robin: the long one joins 64 short ones on replica 0, the other
     * replicas have 64 each (balanced would give replica 0 65 short ones and
     * replica 3 63 + the long one: the same bubble, other arithmetic) */
    c.placement = PLACE_ROUND_ROBIN;
    rollout_result r;
    ts_err e = {{0}};
    cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
    double t0 = expected_end(64, 100, 1000, 20000);
    double tb = expected_end(64, 100, 1000, 0);
    double want = 3.0 * (t0 - tb) / (4.0 * t0);
    cr_assert_lt(fabs(r.makespan_s - t0) / t0, 1e-9, "makespan %g vs %g", r.makespan_s, t0);
    cr_assert_lt(fabs(r.bubble_fraction - want), 1e-9, "bubble %g vs %g", r.bubble_fraction, want);
    /* and it is large: about 3/4 of the 19/20 tail */
    cr_assert_gt(r.bubble_fraction, 0.6);
    cr_assert_gt(r.tail_fraction, 0.2);
    cr_assert_eq(r.decode_tokens, 256 * 1000 + 20000);
    rollout_result_free(&r);
    trace_free(t);
}

Test(sim, preemption_is_lossless)
{
    trace *t = uniform_trace(64, 3000, 200);
    rollout_cfg c = base_cfg(1);
    c.kv_tokens = 20000; /* room for ~6 full requests out of 64 */
    rollout_result r;
    ts_err e = {{0}};
    cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
    cr_assert_gt(r.preemptions, 0);
    cr_assert_eq(r.decode_tokens, 64 * 3000);
    cr_assert_gt(r.prefill_tokens, 64 * 200, "recompute must re-prefill");
    for (int i = 0; i < 64; i++)
        cr_assert(r.finish_s[i] > 0 && r.finish_s[i] <= r.makespan_s);
    cr_assert_leq(r.rep[0].peak_running, 256);
    rollout_result_free(&r);
    trace_free(t);
}

Test(sim, max_running_limits_the_batch)
{
    trace *t = uniform_trace(100, 50, 10);
    rollout_cfg c = base_cfg(1);
    c.max_running = 8;
    rollout_result r;
    cr_assert_eq(rollout_run(&c, t, &r, NULL), 0);
    cr_assert_eq(r.rep[0].peak_running, 8);
    cr_assert_eq(r.decode_tokens, 100 * 50);
    rollout_result_free(&r);
    trace_free(t);
}

Test(sim, request_larger_than_kv_is_an_error)
{
    trace *t = uniform_trace(2, 5000, 100);
    rollout_cfg c = base_cfg(1);
    c.kv_tokens = 4000;
    rollout_result r;
    ts_err e = {{0}};
    cr_assert_eq(rollout_run(&c, t, &r, &e), -1);
    cr_assert(strstr(e.msg, "KV cache capacity"), "%s", e.msg);
    trace_free(t);
}

/* The three placement rules on 7 prompts over 3 replicas, against their
 * definitions: balanced = floor(i * R / n) (VeRL's equal contiguous chunks),
 * round-robin = i % R, trace = the recorded dp_rank, refused unless the trace
 * records exactly R ranks. */
Test(sim, placement_rules)
{
    trace *t = trace_new();
    int32_t len = 10;
    const int32_t rank[7] = {2, 2, 0, 1, 1, 0, 2};
    for (int i = 0; i < 7; i++)
        cr_assert_eq(trace_add(t, 0, i, rank[i], 5, &len, 1, NULL), 0);
    int32_t out[7];
    ts_err e = {{0}};
    const int32_t balanced[7] = {0, 0, 0, 1, 1, 2, 2};
    cr_assert_eq(rollout_place(t, 3, PLACE_BALANCED, 0, out, &e), 0, "%s", e.msg);
    for (int i = 0; i < 7; i++)
        cr_expect_eq(out[i], balanced[i], "balanced: prompt %d on %d", i, out[i]);
    cr_assert_eq(rollout_place(t, 3, PLACE_ROUND_ROBIN, 0, out, &e), 0, "%s", e.msg);
    for (int i = 0; i < 7; i++)
        cr_expect_eq(out[i], i % 3);
    cr_assert_eq(rollout_trace_ranks(t, NULL), 3);
    cr_assert_eq(rollout_place(t, 3, PLACE_TRACE, 0, out, &e), 0, "%s", e.msg);
    for (int i = 0; i < 7; i++)
        cr_expect_eq(out[i], rank[i]);
    /* 3 recorded ranks on 6 replicas, or on 2: refused, naming both counts */
    cr_assert_eq(rollout_place(t, 6, PLACE_TRACE, 0, out, &e), -1);
    cr_expect(strstr(e.msg, "3 rollout ranks") && strstr(e.msg, "6 replicas") &&
                  strstr(e.msg, "balanced"), "%s", e.msg);
    cr_assert_eq(rollout_place(t, 2, PLACE_TRACE, 0, out, &e), -1);
    /* a segment holding only ranks 0 and 1 of a 3-rank trace places as the whole */
    cr_assert_eq(rollout_place(t, 3, PLACE_TRACE, 3, out, &e), 0, "%s", e.msg);
    /* as many replicas as prompts: one each */
    cr_assert_eq(rollout_place(t, 7, PLACE_BALANCED, 0, out, &e), 0);
    for (int i = 0; i < 7; i++)
        cr_expect_eq(out[i], i);
    /* one prompt without a rank: trace refuses, the others do not care */
    t->prompts[4].dp_rank = -1;
    size_t bad = 0;
    cr_assert_eq(rollout_trace_ranks(t, &bad), -1);
    cr_assert_eq(bad, 4);
    cr_assert_eq(rollout_place(t, 3, PLACE_TRACE, 0, out, &e), -1);
    cr_expect(strstr(e.msg, "prompt 4"), "%s", e.msg);
    cr_assert_eq(rollout_place(t, 3, PLACE_BALANCED, 0, out, &e), 0);
    rollout_placement pl;
    cr_assert_eq(rollout_placement_parse("round-robin", &pl), 0);
    cr_assert_eq(pl, PLACE_ROUND_ROBIN);
    cr_assert_eq(rollout_placement_parse("dp_rank", &pl), -1);
    trace_free(t);
}

/* Balanced is equal contiguous chunks for every n and R: sizes differ by at
 * most one, replicas in order, each prompt once (a brute-force check). */
Test(sim, placement_balanced_chunks)
{
    int32_t len = 3;
    for (int n = 1; n <= 40; n++) {
        trace *t = trace_new();
        for (int i = 0; i < n; i++)
            cr_assert_eq(trace_add(t, 0, i, -1, 1, &len, 1, NULL), 0);
        int32_t out[40];
        for (int R = 1; R <= 12; R++) {
            ts_err e = {{0}};
            cr_assert_eq(rollout_place(t, R, PLACE_BALANCED, 0, out, &e), 0);
            int cnt[12] = {0};
            for (int i = 0; i < n; i++) {
                cr_assert(out[i] >= 0 && out[i] < R);
                cr_assert(i == 0 || out[i] >= out[i - 1], "n %d R %d: not contiguous", n, R);
                cnt[out[i]]++;
            }
            for (int r = 0; r < R; r++)
                cr_assert(cnt[r] == n / R || cnt[r] == n / R + 1, "n %d R %d: replica %d has %d",
                          n, R, r, cnt[r]);
        }
        trace_free(t);
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(sim, scenario_errors_name_file_line_and_key)
{
    const char *p = "build/test-scn.ini";
    scenario s;
    ts_err e = {{0}};
    write_file(p, "[cluster]\ngpus = 8\n[model]\nname = qwen2.5-7b\n[rollout]\nbogus = 3\n");
    cr_assert_eq(scenario_load(p, &s, &e), -1);
    cr_assert(strstr(e.msg, "test-scn.ini:6") && strstr(e.msg, "rollout.bogus"), "%s", e.msg);
    write_file(p, "[cluster]\ngpus = -8\n[model]\nname = qwen2.5-7b\n");
    cr_assert_eq(scenario_load(p, &s, &e), -1);
    cr_assert(strstr(e.msg, ":2") && strstr(e.msg, "cluster.gpus"), "%s", e.msg);
    write_file(p, "[cluster]\ngpus = 8\n[model]\nname = qwen2.5-7b\n[rollout]\nmem_util = nan\n");
    cr_assert_eq(scenario_load(p, &s, &e), -1);
    cr_assert(strstr(e.msg, "rollout.mem_util"), "%s", e.msg);
    write_file(p, "[cluster]\ngpus = 8\n[model]\nname = qwen2.5-7b\n[rollout]\ntp = 3\n");
    cr_assert_eq(scenario_load(p, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_validate(&s, &e), -1);
    cr_assert(strstr(e.msg, "does not divide"), "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "rollout.tp=4", &e), 0, "%s", e.msg);
    cr_assert_eq(s.tp, 4);
    cr_assert_eq(scenario_validate(&s, &e), 0);
    cr_assert_eq(scenario_set(&s, "rollout.tp", &e), -1);
    cr_assert_eq(scenario_set(&s, "train.nope=1", &e), -1);
    cr_assert(strstr(e.msg, "train.nope"), "%s", e.msg);
    write_file(p, "[cluster]\ngpus = 8\n");
    cr_assert_eq(scenario_load(p, &s, &e), -1);
    cr_assert(strstr(e.msg, "model.name"), "%s", e.msg);
    remove(p);
}

Test(sim, shipped_scenarios_load)
{
    const char *names[] = {"qwen7b-64gpu",         "qwen32b-64gpu",
                           "qwen7b-64gpu-qwenlens", "qwen32b-64gpu-qwenlens",
                           "dapo-32b-polytrace",    "bench-32b-128gpu"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        scenario s;
        hw_desc h;
        llm_desc m;
        ts_err e = {{0}};
        cr_assert_eq(scenario_load(names[i], &s, &e), 0, "%s", e.msg);
        cr_assert_eq(scenario_validate(&s, &e), 0, "%s", e.msg);
        cr_assert_eq(hw_load(s.hw, &h, &e), 0, "%s", e.msg);
        cr_assert_eq(llm_load(s.model, &m, &e), 0, "%s", e.msg);
        rollout_cfg c;
        cr_assert_eq(rlstep_rollout_cfg(&s, &h, &m, &c, &e), 0, "%s: %s", names[i], e.msg);
    }
}

Test(sim, rlstep_phases_add_up)
{
    scenario s;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load("qwen7b-64gpu", &s, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "trace.prompts=64", &e), 0);
    /* the plain training model (tests/test_rlstep_verl.c covers VeRL's) */
    cr_assert_eq(scenario_set(&s, "train.mini_batch_prompts=0", &e), 0);
    trace *t = uniform_trace(512, 2000, 200);
    rlstep_result r;
    run_record *rec = run_record_new();
    cr_assert_eq(rlstep_run(&s, &hw, &m7, t, &r, rec, &e), 0, "%s", e.msg);
    double sum = 0;
    for (int p = 0; p < PH_COUNT; p++) {
        cr_assert_geq(r.phase_s[p], 0);
        sum += r.phase_s[p];
    }
    cr_assert_lt(fabs(sum - r.step_s) / r.step_s, 1e-12);
    cr_assert_gt(r.phase_s[PH_UPDATE], r.phase_s[PH_OLD_LOGP], "update must cost more than a forward");
    /* every GPU's timeline covers the step without gaps */
    for (int g = 0; g < s.gpus; g++) {
        double covered = 0;
        for (size_t i = 0; i < rec->n_tl; i++)
            if (rec->tl[i].gpu == g)
                covered += rec->tl[i].t1 - rec->tl[i].t0;
        cr_assert_lt(fabs(covered - r.step_s) / r.step_s, 1e-9, "gpu %d covers %g of %g", g, covered, r.step_s);
    }
    cr_assert_eq(rec->n_resp, 512);
    rlstep_result_free(&r);
    run_record_free(rec);
    trace_free(t);
}

Test(sim, dapo_trace_replay)
{
    char path[1024];
    shared_path(path, sizeof path, "traces/polytrace-dapo-32b/step_0.jsonl");
    scenario s;
    hw_desc h;
    llm_desc m;
    ts_err e = {{0}};
    load_scenario_hw_llm("dapo-32b-polytrace", &s, &h, &m);
    trace *t = NULL;
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    rlstep_result r;
    cr_assert_eq(rlstep_run(&s, &h, &m, t, &r, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(r.replicas, 2);
    cr_assert_eq(r.ro.responses, 768);
    /* a long-tail trace: the max is ~15x the median, so replicas idle and
     * run a short batch for much of the rollout */
    cr_assert(r.ro.bubble_fraction > 0.0 && r.ro.bubble_fraction < 0.5, "bubble %g", r.ro.bubble_fraction);
    cr_assert(r.ro.tail_fraction > 0.3, "tail %g", r.ro.tail_fraction);
    cr_assert(r.ro.utilization > 0.0 && r.ro.utilization < 0.8, "util %g", r.ro.utilization);
    double share = r.ro.makespan_s / r.step_s;
    cr_assert(share > 0.3 && share < 0.99, "rollout share %g", share);
    rlstep_result_free(&r);
    trace_free(t);
}

Test(sim, same_seed_same_json_byte_for_byte, .timeout = 120)
{
    const char *cmd = "build/tailsim rlstep qwen7b-64gpu --set trace.prompts=128 --json --no-wall";
    char *a = run_capture(cmd), *b = run_capture(cmd);
    cr_assert_str_eq(a, b);
    cr_assert(strstr(a, "\"bubble_fraction\""));
    char *c = run_capture("build/tailsim rlstep qwen7b-64gpu --set trace.prompts=128 --seed 2 --json --no-wall");
    cr_assert_str_neq(a, c, "a different seed must give a different trace");
    free(a);
    free(b);
    free(c);
}

typedef struct iter_acc {
    int64_t iters, dec_tokens, chunk_tokens;
    double busy;
    int bad_ctx;
} iter_acc;

static void count_iter(void *ctx, const rollout_iter *it)
{
    iter_acc *a = ctx;
    a->iters++;
    a->busy += it->dt;
    for (int k = 0; k < it->n_dec; k++) {
        a->dec_tokens += it->dec_acc ? it->dec_acc[k] : 1;
        if (it->dec_ctx[k] < 100) /* every context includes its 100-token prompt */
            a->bad_ctx++;
    }
    for (int k = 0; k < it->n_chunks; k++)
        a->chunk_tokens += it->chunk_len[k];
}

Test(sim, iteration_callback_describes_every_iteration)
{
    trace *t = uniform_trace(40, 700, 100);
    int32_t long_len = 9000;
    trace_add(t, 0, 40, -1, 100, &long_len, 1, NULL);
    for (int mode = 0; mode < 2; mode++) {
        rollout_cfg c = base_cfg(2);
        c.spec = mode ? SPEC_ADAPTIVE : SPEC_OFF;
        c.spec_patience = 10;
        spec_params_default(&c.sp);
        iter_acc a = {0};
        c.on_iter = count_iter;
        c.on_iter_ctx = &a;
        rollout_result r;
        cr_assert_eq(rollout_run(&c, t, &r, NULL), 0);
        int64_t iters = r.rep[0].iterations + r.rep[1].iterations;
        cr_assert_eq(a.iters, iters);
        cr_assert_lt(fabs(a.busy - (r.rep[0].busy_s + r.rep[1].busy_s)), 1e-9 * a.busy);
        cr_assert_eq(a.chunk_tokens, r.prefill_tokens);
        /* each completed prefill yields one token outside the decode counts:
         * 41 first prefills, plus (adaptive) the re-prefills after the switch */
        if (mode == 0)
            cr_assert_eq(a.dec_tokens + 41, r.decode_tokens);
        else
            cr_assert(a.dec_tokens + 41 < r.decode_tokens && r.decode_tokens <= a.dec_tokens + 41 + 2 * 64,
                      "decode %lld, from iterations %lld", (long long)r.decode_tokens, (long long)a.dec_tokens);
        cr_assert_eq(a.bad_ctx, 0);
        rollout_result_free(&r);
    }
    trace_free(t);
}
