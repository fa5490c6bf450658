/*
 * Multi-turn (agentic) trajectories (issue 20): the reader on the real
 * Search-R1 PolyTrace steps (skipped when $TAILSIM_SHARED/traces is absent)
 * against counts made independently here by scanning the raw text, a small
 * hand-written file read field by field, and a single-turn trace that stays
 * single-turn; the rollout of hand-built multi-turn trajectories against step
 * times and bubbles computed here from the cost model's iteration prices.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/cost.h"
#include "models/cost_spec.h"
#include "models/hw.h"
#include "sim/rollout.h"
#include "tests/helpers.h"
#include "traces/trace.h"

/* Occurrences of needle in the file at path; lines into *lines. */
static long count_in_file(const char *path, const char *needle, long *lines)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    static char buf[1 << 20];
    long n = 0;
    *lines = 0;
    while (fgets(buf, sizeof buf, f)) {
        cr_assert(strchr(buf, '\n'), "line longer than the test's buffer");
        (*lines)++;
        for (const char *p = buf; (p = strstr(p, needle)); p += strlen(needle))
            n++;
    }
    fclose(f);
    return n;
}

Test(turns, real_steps_match_an_independent_count)
{
    for (int step = 0; step < 4; step++) {
        char path[512], rel[128];
        snprintf(rel, sizeof rel, "traces/polytrace-search-r1-7b/step_%d.jsonl", step);
        shared_path(path, sizeof path, rel);
        long lines, lines2;
        long calls = count_in_file(path, "\"tool_name\"", &lines);
        long turns = count_in_file(path, "\"completion_tokens\"", &lines2);
        trace *t = NULL;
        ts_err e = {{0}};
        cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
        trace_turn_stats s;
        cr_assert_eq(trace_turn_stats_compute(t, &s, &e), 0);
        cr_assert_eq(s.trajectories, lines);
        cr_assert_eq((long)trace_n_responses(t), lines);
        cr_assert_eq(s.tool_calls, calls, "step %d: %lld calls, counted %ld", step,
                     (long long)s.tool_calls, calls);
        cr_assert_eq(s.turns, turns);
        cr_assert_eq(t->n_prompts, 256u); /* 256 prompts x 8 samples */
        cr_assert(s.max_turns <= 5 && s.max_turns >= 2);
        cr_assert(s.cached_tokens > 0 && s.cached_tokens < s.prompt_tokens);
        if (step == 0) { /* the figures the data's README states */
            cr_assert_eq(lines, 2048);
            cr_assert_eq(calls, 3469);
        }
        trace_free(t);
    }
}

Test(turns, hand_written_record_read_field_by_field)
{
    char dir[] = "/tmp/tailsim-turns-XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    /* two samples of one prompt, then a second prompt; sample 0 calls two tools
     * after turn 0 (their latencies and appends add up) */
    fputs("{\"step\":3,\"prompt_len\":100,\"prompt_group_id\":7,\"turn_count\":2,\"turns\":["
          "{\"turn\":0,\"prompt_tokens\":100,\"cached_tokens\":0,\"completion_tokens\":20,"
          "\"engine_latency_s\":1.5},{\"turn\":1,\"prompt_tokens\":180,\"cached_tokens\":119,"
          "\"completion_tokens\":30}],\"tool_calls\":[{\"turn\":0,\"latency_s\":0.25,"
          "\"append_len\":40},{\"turn\":0,\"latency_s\":0.5,\"append_len\":20}]}\n", f);
    fputs("{\"step\":3,\"prompt_len\":100,\"prompt_group_id\":7,\"turns\":[{\"prompt_tokens\":"
          "100,\"completion_tokens\":9}],\"final_response_len\":9}\n", f);
    fputs("{\"step\":3,\"prompt_len\":50,\"prompt_group_id\":8,\"turns\":[{\"prompt_tokens\":"
          "50,\"completion_tokens\":5}],\"tool_calls\":[{\"turn\":0,\"latency_s\":2,"
          "\"append_len\":11}]}\n", f);
    fclose(f);
    trace *t = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t->n_prompts, 2u);
    const trace_prompt *p = &t->prompts[0];
    cr_assert_eq(p->step, 3);
    cr_assert_eq(p->prompt_id, 0);
    cr_assert_eq(p->prompt_tokens, 100);
    cr_assert_eq(p->n_resp, 2);
    cr_assert_eq(p->turn0[1], 2);
    cr_assert_eq(p->turn0[2], 3);
    const trace_turn *u = &p->turns[0];
    cr_assert_eq(u->context, 100);
    cr_assert_eq(u->gen, 20);
    cr_assert_eq(u->tools, 2);
    cr_assert_eq(u->append, 60);
    cr_assert_float_eq(u->tool_s, 0.75, 1e-12);
    cr_assert_float_eq(u->engine_s, 1.5, 1e-12);
    cr_assert_eq(p->turns[1].cached, 119);
    cr_assert_eq(p->turns[1].tools, 0);
    cr_assert_float_eq(p->turns[1].engine_s, -1, 0);
    cr_assert_eq(p->resp[0], 180 + 30 - 100); /* what the turns span */
    cr_assert_eq(p->resp[1], 9);              /* final_response_len */
    cr_assert_eq(t->prompts[1].resp[0], 5 + 11); /* a trailing tool result counts */
    cr_assert_eq(t->prompts[1].prompt_id, 1);
    trace_turn_stats s;
    cr_assert_eq(trace_turn_stats_compute(t, &s, &e), 0);
    cr_assert_eq(s.trajectories, 3);
    cr_assert_eq(s.turns, 4);
    cr_assert_eq(s.tool_calls, 3);
    cr_assert_eq(s.tool_turns, 2);
    cr_assert_float_eq(s.tool_s, 2.75, 1e-12);
    cr_assert_eq(s.cached_tokens, 119);
    cr_assert_eq(s.prompt_tokens, 100 + 180 + 100 + 50);
    /* a selected step and a copy keep the turns */
    trace *one = trace_select_step(t, 3, &e);
    cr_assert_not_null(one, "%s", e.msg);
    cr_assert(trace_has_turns(one));
    cr_assert_eq(one->prompts[0].turns[1].cached, 119);
    trace_free(one);
    trace_free(t);
    unlink(path);
    rmdir(dir);
}

Test(turns, single_turn_trace_has_no_turns)
{
    char dir[] = "/tmp/tailsim-turns-XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{\"step\":0,\"input\":10,\"output\":[5,7]}\n", f);
    fclose(f);
    trace *t = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    cr_assert(!trace_has_turns(t));
    cr_assert_null(t->prompts[0].turn0);
    trace_turn_stats s;
    cr_assert_eq(trace_turn_stats_compute(t, &s, &e), 0);
    cr_assert_eq(s.trajectories, 0);
    trace_free(t);
    unlink(path);
    rmdir(dir);
}

/* ---- the rollout of turns: hand-built cases ------------------------------ */

static hw_desc hw;
static llm_desc m7;

static void load_models(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &hw, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("qwen2.5-7b", &m7, &e), 0, "%s", e.msg);
}

/* One iteration's price as the replica computes it (GPU time only: host mode
 * off): prefill chunks of c tokens after d cached ones, plus n_dec decodes of
 * context sum dsum. */
static double iter_s(int n_pre, double c, double d, int n_dec, double dsum)
{
    cost_batch b = {0};
    b.n_decode = n_dec;
    b.decode_ctx_sum = dsum;
    if (n_pre) {
        b.n_prefill_seqs = 1;
        b.prefill_tokens = (int)c;
        b.prefill_attn = c * (d + (c + 1) / 2);
        b.prefill_kv_sum = d + c;
    }
    return cost_iter(&hw, &m7, 1, &b) + cost_sample(&hw, &m7, n_dec + n_pre);
}

/* Trajectory A: turn 0 (context 500, 1 token), a 10 s tool appending 300
 * tokens, turn 1 (context 810, 2 tokens).  B: one turn (context 500, 1
 * token), no tool. */
static trace *two_trajectories(void)
{
    trace *t = trace_new();
    trace_turn a[2] = {{500, 0, 1, 1, 300, 10.0, -1}, {810, 500, 2, 0, 0, 0, -1}};
    trace_turn b[1] = {{500, 0, 1, 0, 0, 0, -1}};
    int32_t na = 2, nb = 1, ra = 312, rb = 1;
    ts_err e = {{0}};
    cr_assert_eq(trace_add_turns(t, 0, 0, -1, 500, &ra, 1, &na, a, &e), 0, "%s", e.msg);
    cr_assert_eq(trace_add_turns(t, 0, 1, -1, 500, &rb, 1, &nb, b, &e), 0, "%s", e.msg);
    return t;
}

static rollout_cfg two_cfg(int keep)
{
    rollout_cfg c = {.hw = &hw, .llm = &m7, .tp = 1, .replicas = 2, .max_running = 256,
                     .chunk_tokens = 8192, .kv_tokens = 400000, .tail_threshold = 32,
                     .keep_kv_during_tool = keep};
    return c;
}

Test(turns, two_trajectories_one_waits_on_a_10s_tool, .init = load_models)
{
    for (int keep = 0; keep < 2; keep++) {
        trace *t = two_trajectories();
        rollout_cfg c = two_cfg(keep);
        rollout_result r;
        ts_err e = {{0}};
        cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
        /* A on replica 0: prefill 500 -> token 1 (turn 0 done, 500 tokens stay in KV);
         * 10 s tool; prefill the 310 new tokens after 500 cached -> token 1; one
         * decode at context 811 -> token 2.  B on replica 1: prefill 500 -> done. */
        double c0 = iter_s(1, 500, 0, 0, 0);
        double c1 = iter_s(1, 310, 500, 0, 0);
        double d1 = iter_s(0, 0, 0, 1, 811);
        double T = c0 + 10.0 + c1 + d1;
        cr_assert_float_eq(r.makespan_s, T, 1e-9, "keep %d: %.9f vs %.9f", keep, r.makespan_s, T);
        cr_assert_float_eq(r.finish_s[0], T, 1e-9);
        cr_assert_float_eq(r.finish_s[1], c0, 1e-12);
        /* tool wait: replica 0 idle 10 s; tail bubble: replica 1 idle after c0 */
        cr_assert_float_eq(r.tool_wait_fraction, 10.0 / (2 * T), 1e-9);
        cr_assert_float_eq(r.bubble_fraction, (T - c0) / (2 * T), 1e-9);
        cr_assert_eq(r.turns, 1);
        cr_assert_eq(r.tool_calls, 1);
        cr_assert_float_eq(r.tool_s, 10.0, 1e-12);
        cr_assert_eq(r.cached_tokens, 500);
        cr_assert_eq(r.prefill_tokens, 500 + 310 + 500);
        cr_assert_eq(r.decode_tokens, 1 + 2 + 1);
        cr_assert_eq(r.crit_resp, 0);
        cr_assert_eq(r.crit_turns, 2);
        cr_assert_float_eq(r.crit_tool_s, 10.0, 1e-9);
        cr_assert_eq(r.gen[0], 312); /* a finished trajectory: its trace length */
        rollout_result_free(&r);
        trace_free(t);
    }
}

/* One tool slot: two trajectories (one a replica) call 10 s tools at the same
 * moment; the second waits 10 s for the slot. */
Test(turns, tool_concurrency_queues_calls, .init = load_models)
{
    trace *t = trace_new();
    trace_turn a[2] = {{500, 0, 1, 1, 300, 10.0, -1}, {810, 500, 2, 0, 0, 0, -1}};
    int32_t na = 2, ra = 312;
    ts_err e = {{0}};
    cr_assert_eq(trace_add_turns(t, 0, 0, -1, 500, &ra, 1, &na, a, &e), 0);
    cr_assert_eq(trace_add_turns(t, 0, 1, -1, 500, &ra, 1, &na, a, &e), 0);
    rollout_cfg c = two_cfg(1);
    c.tool_concurrency = 1;
    rollout_result r;
    cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
    double c0 = iter_s(1, 500, 0, 0, 0), c1 = iter_s(1, 310, 500, 0, 0);
    double d1 = iter_s(0, 0, 0, 1, 811);
    double T = c0 + 20.0 + c1 + d1;
    cr_assert_float_eq(r.makespan_s, T, 1e-9);
    cr_assert_float_eq(r.tool_queue_s, 10.0, 1e-9);
    cr_assert_float_eq(r.tool_wait_fraction, (10.0 + 20.0) / (2 * T), 1e-9);
    cr_assert_float_eq(r.crit_tool_s, 20.0, 1e-9);
    rollout_result_free(&r);
    c.tool_concurrency = 0; /* unlimited: both finish together */
    cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
    cr_assert_float_eq(r.makespan_s, c0 + 10.0 + c1 + d1, 1e-9);
    rollout_result_free(&r);
    trace_free(t);
}

/* The per-trajectory timeline of the one-slot case, by hand: B (response 1,
 * replica 1) finishes last, so it is rank 0; both generate turn 0 over
 * [0, c0]; A takes the slot first (replica 0's iteration ends first at the
 * same time), its tool runs [c0, c0 + 10], turn 1 is admitted at once (its
 * replica is idle: no queue interval) and generates for c1 + d1; B waits
 * for the slot [c0, c0 + 10], then its tool runs 10 s.  Each trajectory's
 * intervals are consecutive; the report gets them through rlstep's record. */
Test(turns, trajectory_timeline_by_hand, .init = load_models)
{
    trace *t = trace_new();
    trace_turn a[2] = {{500, 0, 1, 1, 300, 10.0, -1}, {810, 500, 2, 0, 0, 0, -1}};
    int32_t na = 2, ra = 312;
    ts_err e = {{0}};
    cr_assert_eq(trace_add_turns(t, 0, 0, -1, 500, &ra, 1, &na, a, &e), 0);
    cr_assert_eq(trace_add_turns(t, 0, 1, -1, 500, &ra, 1, &na, a, &e), 0);
    rollout_cfg c = two_cfg(1);
    c.tool_concurrency = 1;
    rollout_result r;
    cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
    double c0 = iter_s(1, 500, 0, 0, 0), c1 = iter_s(1, 310, 500, 0, 0);
    double d1 = iter_s(0, 0, 0, 1, 811);
    const traj_interval want[] = {
        {0, 1, 0, TJ_GEN, 0, c0},
        {0, 1, 0, TJ_TOOL_QUEUE, c0, c0 + 10},
        {0, 1, 0, TJ_TOOL, c0 + 10, c0 + 20},
        {0, 1, 1, TJ_GEN, c0 + 20, c0 + 20 + c1 + d1},
        {1, 0, 0, TJ_GEN, 0, c0},
        {1, 0, 0, TJ_TOOL, c0, c0 + 10},
        {1, 0, 1, TJ_GEN, c0 + 10, c0 + 10 + c1 + d1},
    };
    size_t nw = sizeof want / sizeof *want;
    cr_assert_eq(r.n_tj, nw, "%zu intervals", r.n_tj);
    for (size_t i = 0; i < nw; i++) {
        const traj_interval *x = &r.tj[i], *y = &want[i];
        cr_assert(x->rank == y->rank && x->resp == y->resp && x->turn == y->turn &&
                      x->kind == y->kind,
                  "interval %zu: rank %d resp %d turn %d kind %d", i, x->rank, x->resp, x->turn,
                  x->kind);
        cr_assert_float_eq(x->t0, y->t0, 1e-9, "interval %zu", i);
        cr_assert_float_eq(x->t1, y->t1, 1e-9, "interval %zu", i);
    }
    cr_assert_float_eq(r.tj[3].t1, r.makespan_s, 1e-12); /* rank 0 is the critical path */
    rollout_result_free(&r);
    trace_free(t);
}

/* TLT's speculation on turns (policy tlt) acts on generation only: with the
 * drafter always on, trajectory A's tool call still takes exactly its 10 s
 * (tool_s, its tool interval), its replica is idle for exactly those 10 s
 * (the tool-wait bubble 10 / (2 T)), and its finish is its generation
 * intervals plus the 10 s; the verify steps ran (spec_iterations > 0). */
Test(turns, speculation_acts_on_generation_only, .init = load_models)
{
    trace *t = trace_new();
    trace_turn a[2] = {{500, 0, 300, 1, 300, 10.0, -1}, {1100, 800, 200, 0, 0, 0, -1}};
    trace_turn b[1] = {{500, 0, 100, 0, 0, 0, -1}};
    int32_t na = 2, nb = 1, ra = 800, rb = 100;
    ts_err e = {{0}};
    cr_assert_eq(trace_add_turns(t, 0, 0, -1, 500, &ra, 1, &na, a, &e), 0, "%s", e.msg);
    cr_assert_eq(trace_add_turns(t, 0, 1, -1, 500, &rb, 1, &nb, b, &e), 0, "%s", e.msg);
    for (int spec = 0; spec < 2; spec++) {
        rollout_cfg c = two_cfg(1);
        c.spec = spec ? SPEC_ALWAYS : SPEC_OFF;
        spec_params_default(&c.sp);
        rollout_result r;
        cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "spec %d: %s", spec, e.msg);
        cr_assert_eq(r.spec_iterations > 0, spec, "spec %d: %lld verify steps", spec,
                     (long long)r.spec_iterations);
        cr_assert_float_eq(r.tool_s, 10.0, 1e-12);
        cr_assert_eq(r.crit_resp, 0);
        double T = r.makespan_s, gen = 0, tool = 0;
        for (size_t i = 0; i < r.n_tj; i++) {
            const traj_interval *x = &r.tj[i];
            if (x->rank != 0)
                continue;
            if (x->kind == TJ_TOOL)
                tool += x->t1 - x->t0;
            else
                gen += x->t1 - x->t0;
        }
        cr_assert_float_eq(tool, 10.0, 1e-9, "spec %d: tool %.9f s", spec, tool);
        cr_assert_float_eq(gen + tool, T, 1e-9, "spec %d", spec);
        cr_assert_float_eq(r.tool_wait_fraction, 10.0 / (2 * T), 1e-9, "spec %d", spec);
        cr_assert_eq(r.gen[0], 800);
        rollout_result_free(&r);
    }
    trace_free(t);
}

/* Under KV pressure the prefix cache of a trajectory out on its tool is
 * evicted (keep_kv_during_tool = false) and its whole context prefilled
 * again; kept KV (true) survives the same load, which instead waits. */
Test(turns, eviction_recomputes_the_context, .init = load_models)
{
    trace *t = trace_new();
    trace_turn a[2] = {{500, 0, 1, 1, 300, 1.0, -1}, {810, 500, 2, 0, 0, 0, -1}};
    trace_turn b[1] = {{900, 0, 400, 0, 0, 0, -1}};
    int32_t na = 2, nb = 1, ra = 312, rb = 400;
    ts_err e = {{0}};
    cr_assert_eq(trace_add_turns(t, 0, 0, -1, 500, &ra, 1, &na, a, &e), 0);
    cr_assert_eq(trace_add_turns(t, 0, 1, -1, 900, &rb, 1, &nb, b, &e), 0);
    rollout_cfg c = two_cfg(0);
    c.replicas = 1;
    c.kv_tokens = 1500; /* A's 500 held + B's 900..1300 do not fit together */
    rollout_result r;
    cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r.evictions, 1);
    cr_assert_eq(r.cached_tokens, 0);
    cr_assert_eq(r.prefill_tokens, 500 + 900 + 810);
    rollout_result_free(&r);
    c.kv_tokens = 400000; /* no pressure: the cache survives */
    cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r.evictions, 0);
    cr_assert_eq(r.cached_tokens, 500);
    cr_assert_eq(r.prefill_tokens, 500 + 900 + 310);
    rollout_result_free(&r);
    trace_free(t);
}

/* ---- single-turn outputs unchanged -------------------------------------- */

/* `rlstep SCENARIO --json --no-wall` byte for byte as the build before
 * multi-turn support printed it (tests/golden/, taken from that build):
 * a generated trace and the real PolyTrace DAPO step.  A deliberate change
 * of the model (not of the multi-turn path) regenerates them, saying so in
 * its commit: build/tailsim rlstep S --json --no-wall >tests/golden/rlstep-S.json
 * (last: issue 18's elementwise kernels (waves, L2, per-row costs, launch_s
 * 1.5 -> 1.0 us with the GEMM latencies compensated, RoPE's refit, the
 * add's L2 footprint) merged with its GEMM kernel model (the fastest of
 * gemm_tiles' kernels): the 7B verl step 129.8 -> 128.9 s, DAPO 166.0 ->
 * 164.4 s; before it, training GEMMs at train_eff 0.45, issue 18 item 5: the
 * 7B verl step 119.2 -> 125.3 s, DAPO 133.1 -> 161.4 s; before that, item 4's
 * attention table, +0.001 s, and the review's custom all-reduce in eager
 * steps: the DAPO verl rollout 86.35 -> 86.15 s). */
static void same_as_golden(const char *scn)
{
    char cmd[512], golden[256];
    snprintf(golden, sizeof golden, "tests/golden/rlstep-%s.json", scn);
    snprintf(cmd, sizeof cmd, "build/tailsim rlstep %s --json --no-wall 2>/dev/null", scn);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    static char out[1 << 20];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    cr_assert_eq(pclose(p), 0, "%s failed", cmd);
    char *want = slurp_file(golden);
    cr_assert_not_null(want, "%s", golden);
    cr_assert_str_eq(out, want, "%s differs from %s", cmd, golden);
    free(want);
}

Test(turns, single_turn_outputs_unchanged_generated)
{
    same_as_golden("qwen7b-64gpu");
}

Test(turns, single_turn_outputs_unchanged_polytrace)
{
    char path[512];
    shared_path(path, sizeof path, "traces/polytrace-dapo-32b");
    same_as_golden("dapo-32b-polytrace");
}

/* A stop cuts at a turn boundary (APRIL's partial rollout, AReaL's
 * interruptible generation on turns): one replica, three one-trajectory
 * groups prefilled in the same iteration; A (one 1-token turn) completes its
 * group and stops the run.  B has ended turn 0 and is out on its tool: one
 * turn done.  C (one 100-token turn) has 1 token of it: no turn done, the
 * token discarded (cut_tokens), never a partial turn carried. */
Test(turns, a_stop_cuts_at_a_turn_boundary, .init = load_models)
{
    trace *t = trace_new();
    trace_turn a[1] = {{500, 0, 1, 0, 0, 0, -1}};
    trace_turn b[2] = {{500, 0, 1, 1, 300, 10.0, -1}, {810, 500, 2, 0, 0, 0, -1}};
    trace_turn c[1] = {{500, 0, 100, 0, 0, 0, -1}};
    int32_t n1 = 1, n2 = 2, ra = 1, rb = 312, rc = 100;
    ts_err e = {{0}};
    cr_assert_eq(trace_add_turns(t, 0, 0, -1, 500, &ra, 1, &n1, a, &e), 0);
    cr_assert_eq(trace_add_turns(t, 0, 1, -1, 500, &rb, 1, &n2, b, &e), 0);
    cr_assert_eq(trace_add_turns(t, 0, 2, -1, 500, &rc, 1, &n1, c, &e), 0);
    rollout_cfg cfg = two_cfg(0);
    cfg.replicas = 1;
    cfg.stop_groups = 1;
    rollout_result r;
    cr_assert_eq(rollout_run(&cfg, t, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r.stopped, 1);
    cr_assert_eq(r.groups_done, 1);
    /* one iteration: the three 500-token prefills, each sampling its first token */
    cost_batch cb = {.n_prefill_seqs = 3, .prefill_tokens = 1500,
                    .prefill_attn = 3 * 500 * (501 / 2.0), .prefill_kv_sum = 1500};
    double T = cost_iter(&hw, &m7, 1, &cb) + cost_sample(&hw, &m7, 3);
    cr_assert_float_eq(r.makespan_s, T, 1e-9, "%.9f vs %.9f", r.makespan_s, T);
    cr_assert_eq(r.turns_done[0], 1);
    cr_assert_eq(r.turns_done[1], 1, "out on its tool: turn 0 done");
    cr_assert_eq(r.turns_done[2], 0, "cut inside turn 0: it starts over");
    cr_assert_eq(r.cut_tokens, 1);
    cr_assert_eq(r.decode_tokens, 3);
    cr_assert(r.finish_s[1] < 0 && r.finish_s[2] < 0);
    rollout_result_free(&r);
    /* the same without a stop: no cut, every trajectory ends */
    cfg.stop_groups = 0;
    cr_assert_eq(rollout_run(&cfg, t, &r, &e), 0, "%s", e.msg);
    cr_assert(r.turns_done[0] == 1 && r.turns_done[1] == 2 && r.turns_done[2] == 1);
    cr_assert_eq(r.cut_tokens, 0);
    rollout_result_free(&r);
    trace_free(t);
}

/* TLT's adaptive switch on turns (one replica, contexts kept during tools,
 * spec_patience 10): A's turn 0 ends with a 1 ms tool, B decodes 400
 * tokens, C's turn 0 ends with a 10 s tool.  A's turn 1 is admitted with its
 * 500-token context still in KV (a cache hit) and runs with B; after 10
 * decode iterations in the tail the switch flushes the KV: A's turn 1 and B
 * prefill again from scratch, so A's hit saved nothing, and C's kept context
 * is evicted (its turn 1 prefills all 810 tokens).  Without speculation both
 * hits count: 500 + 500 cached tokens, no eviction. */
Test(turns, adaptive_switch_evicts_kept_contexts, .init = load_models)
{
    trace *t = trace_new();
    trace_turn a[2] = {{500, 0, 1, 1, 300, 0.001, -1}, {810, 500, 200, 0, 0, 0, -1}};
    trace_turn b[1] = {{500, 0, 400, 0, 0, 0, -1}};
    trace_turn c[2] = {{500, 0, 1, 1, 300, 10.0, -1}, {810, 500, 2, 0, 0, 0, -1}};
    int32_t n1 = 1, n2 = 2, ra = 501, rb = 400, rc = 303;
    ts_err e = {{0}};
    cr_assert_eq(trace_add_turns(t, 0, 0, -1, 500, &ra, 1, &n2, a, &e), 0);
    cr_assert_eq(trace_add_turns(t, 0, 1, -1, 500, &rb, 1, &n1, b, &e), 0);
    cr_assert_eq(trace_add_turns(t, 0, 2, -1, 500, &rc, 1, &n2, c, &e), 0);
    for (int spec = 0; spec < 2; spec++) {
        rollout_cfg cfg = two_cfg(1);
        cfg.replicas = 1;
        cfg.spec = spec ? SPEC_ADAPTIVE : SPEC_OFF;
        cfg.spec_patience = 10;
        spec_params_default(&cfg.sp);
        rollout_result r;
        cr_assert_eq(rollout_run(&cfg, t, &r, &e), 0, "spec %d: %s", spec, e.msg);
        if (!spec) {
            cr_assert_eq(r.cached_tokens, 1000);
            cr_assert_eq(r.evictions, 0);
            cr_assert_eq(r.prefill_tokens, 1500 + 310 + 310);
        } else {
            double on = r.rep[0].spec_on_s;
            cr_assert(on > 0 && on < 10.0, "switched at %.3f s, C still on its tool", on);
            cr_assert_eq(r.evictions, 1, "C's kept context");
            cr_assert_eq(r.cached_tokens, 0, "A's hit was recomputed by the flush");
            cr_assert_float_eq(r.tool_s, 10.001, 1e-9);
        }
        cr_assert_eq(r.gen[0], 501);
        cr_assert_eq(r.gen[2], 303);
        rollout_result_free(&r);
    }
    trace_free(t);
}
