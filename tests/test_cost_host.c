/*
 * Host time of an engine step (models/cost_host.c): eager launches only above
 * the CUDA-graph limit or with prefill in the step, scheduling hidden by the
 * overlap scheduler and exposed without it, and the engine settings a
 * scenario gives the plain and the speculative engine (fastrl's); the
 * collectives of a graph engine's eager steps (its custom all-reduce, not
 * NCCL), in the pure functions and in a rollout.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "models/comm.h"
#include "models/cost.h"
#include "models/cost_host.h"
#include "models/cost_spec.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "sim/rollout.h"
#include "sim/scenario.h"
#include "traces/trace.h"

static hw_desc hw;
static llm_desc m;

static void load(void)
{
    ts_err e = {0};
    cr_assert_eq(hw_load("h100", &hw, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("qwen2.5-7b", &m, &e), 0, "%s", e.msg);
    cr_assert_gt(hw.eager_launch_s, 0);
    cr_assert_gt(hw.sched_s, 0);
}

TestSuite(cost_host, .init = load);

Test(cost_host, eager_launches_only_above_the_graph_limit)
{
    host_mode mode = {.on = 1, .graph_max_bs = 32, .overlap = 1};
    double k = cost_iter_kernels(&m, 4), gpu = 1e-6;
    cr_assert_gt(k, m.layers * 11.0, "at least the per-layer ops: %g", k);
    double sched32 = hw.sched_s + 32 * hw.sched_req_s, sched33 = hw.sched_s + 33 * hw.sched_req_s;
    double t32 = cost_host_step(&hw, &mode, 32, 1, k, gpu);
    double t33 = cost_host_step(&hw, &mode, 33, 1, k, gpu);
    cr_assert_float_eq(t32, fmax(gpu, sched32), 1e-12, "graphed: %g", t32);
    cr_assert_float_eq(t33, fmax(k * hw.eager_launch_s, sched33), 1e-12, "eager: %g", t33);
    cr_assert_gt(t33, t32);
    /* a step with prefill chunks is never graphed */
    double t8 = cost_host_step(&hw, &mode, 8, 0, k, gpu);
    cr_assert_geq(t8, k * hw.eager_launch_s);
    /* the GPU slower than the host launches: eager costs nothing more */
    double slow = 10.0 * k * hw.eager_launch_s;
    cr_assert_float_eq(cost_host_step(&hw, &mode, 64, 1, k, slow), slow, 1e-12);
    /* a speculative step launches more kernels than a plain one */
    cr_assert_gt(cost_spec_kernels(&m, 4, 8), 1.5 * k);
}

Test(cost_host, overlap_hides_scheduling_and_its_absence_exposes_it)
{
    host_mode on = {.on = 1, .graph_max_bs = 512, .overlap = 1}, off = {.on = 1, .graph_max_bs = 512, .overlap = 0};
    double k = cost_iter_kernels(&m, 4), gpu = 20e-3;
    for (int b = 1; b <= 512; b *= 4) {
        double sched = hw.sched_s + b * hw.sched_req_s;
        cr_assert_float_eq(cost_host_step(&hw, &on, b, 1, k, gpu), fmax(gpu, sched), 1e-12);
        cr_assert_float_eq(cost_host_step(&hw, &off, b, 1, k, gpu), gpu + sched, 1e-12);
    }
    cr_assert_float_eq(cost_host_step(&hw, &off, 0, 1, k, gpu), gpu, 1e-12, "empty step");
    host_mode none = {0};
    cr_assert_float_eq(cost_host_step(&hw, &none, 600, 0, k, 1e-6), 1e-6, 1e-15, "host time off");
}

Test(cost_host, scenario_gives_fastrl_settings_to_the_speculative_engine)
{
    scenario s;
    ts_err e = {0};
    cr_assert_eq(scenario_load("qwen7b-64gpu", &s, &e), 0, "%s", e.msg);
    host_mode plain = scenario_host_mode(&s, 0), spec = scenario_host_mode(&s, 1);
    cr_assert_eq(plain.graph_max_bs, 512, "SGLang's default at TP 4 on an 80 GB GPU");
    cr_assert_eq(plain.overlap, 1);
    cr_assert_eq(spec.graph_max_bs, 32, "fastrl: cuda_graph_max_bs 32");
    cr_assert_eq(spec.overlap, 0, "fastrl: disable_overlap_schedule");
    cr_assert_eq(scenario_set(&s, "rollout.tp=2", &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_host_mode(&s, 0).graph_max_bs, 256, "below TP 4");
    cr_assert_eq(scenario_set(&s, "rollout.graph_max_bs=64", &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_host_mode(&s, 0).graph_max_bs, 64);
}

/* Review of issue 18: SGLang and vLLM take their custom all-reduce for small
 * messages outside CUDA graphs too (after a copy into the registered buffer),
 * so a graph engine's eager step pays that, not NCCL's 20 us call; only an
 * eager engine (rollout.engine = eager) keeps NCCL for everything. */
Test(cost_host, graph_engine_eager_steps_take_the_custom_all_reduce)
{
    host_mode graph = {.on = 1, .graph_max_bs = 32, .graph = 1}, eager = {.on = 1};
    cr_expect_eq(cost_host_coll(&graph, 32, 1), COST_COLL_GRAPH);
    cr_expect_eq(cost_host_coll(&graph, 33, 1), COST_COLL_EAGER_CAR, "above the graph limit");
    cr_expect_eq(cost_host_coll(&graph, 8, 0), COST_COLL_EAGER_CAR, "prefill in the step");
    cr_expect_eq(cost_host_coll(&eager, 8, 1), COST_COLL_EAGER);
    cr_expect_eq(cost_host_coll(&(host_mode){0}, 8, 1), COST_COLL_EAGER, "no host model");
    /* a small all-reduce: copy + custom all-reduce, far below NCCL's call */
    double act = 64 * 2.0 * m.hidden, bw = 2.0 * 7 / 8 * act / (hw.nvlink_bw * hw.ar_eff);
    double copy = hw.launch_s + 2.0 * act / (hw.hbm_bw * hw.mem_eff);
    cr_expect_float_eq(comm_allreduce_eager_car(&hw, act, 8), copy + hw.car_lat_s + bw, 1e-15);
    cr_expect_lt(comm_allreduce_eager_car(&hw, act, 8), 0.5 * comm_allreduce(&hw, act, 8));
    cr_expect_gt(comm_allreduce_eager_car(&hw, act, 8), comm_allreduce_graph(&hw, act, 8));
    /* above car_max_bytes, and without the car keys, it is NCCL's */
    double big = 2.0 * hw.car_max_bytes;
    cr_expect_eq(comm_allreduce_eager_car(&hw, big, 8), comm_allreduce(&hw, big, 8));
    hw_desc old = hw;
    old.car_max_bytes = 0;
    cr_expect_eq(comm_allreduce_eager_car(&old, act, 8), comm_allreduce(&old, act, 8));
    /* a step: between the graphed and the NCCL figure; the cache agrees */
    cost_batch b = {.n_decode = 64, .decode_ctx_sum = 64 * 2000.0};
    double te = cost_iter_mode(&hw, &m, 8, &b, COST_COLL_EAGER);
    double tc = cost_iter_mode(&hw, &m, 8, &b, COST_COLL_EAGER_CAR);
    double tg = cost_iter_mode(&hw, &m, 8, &b, COST_COLL_GRAPH);
    cr_expect_lt(tc, te);
    cr_expect_gt(tc, tg);
    double want = m.layers * 2.0 * comm_allreduce_eager_car(&hw, act, 8) +
                  comm_allreduce_eager_car(&hw, act, 8) + comm_allgather(&hw, 64 * 2.0 * m.vocab, 8);
    cr_expect_float_eq(cost_iter_comm(&hw, &m, 8, &b, COST_COLL_EAGER_CAR), want, 1e-15);
    cost_cache *c = cost_cache_new(&hw, &m, 8);
    cr_assert_not_null(c);
    cost_cache_set_graph(c, COST_COLL_EAGER_CAR);
    cr_expect_eq(cost_iter_cached(c, &b), tc);
    cost_cache_free(c);
}

/* The rollout prices a graph engine's eager decode steps with the custom
 * all-reduce: 8 equal requests at TP 8 on one replica, a graph limit of 4
 * (every decode step eager), host launches and scheduling free, against the
 * sum of the steps by hand; the eager engine's sum is NCCL's. */
Test(cost_host, rollout_prices_eager_steps_of_a_graph_engine)
{
    hw_desc h = hw;
    h.eager_launch_s = 0;
    h.sched_s = 0;
    h.sched_req_s = 0;
    const int n = 8, p = 100, len = 50;
    trace *t = trace_new();
    for (int i = 0; i < n; i++) {
        int32_t l = len;
        cr_assert_eq(trace_add(t, 0, i, -1, p, &l, 1, NULL), 0);
    }
    for (int mode = 0; mode < 2; mode++) {
        rollout_cfg c = {.hw = &h, .llm = &m, .tp = 8, .replicas = 1, .max_running = 256,
                         .chunk_tokens = 8192, .kv_tokens = 400000, .tail_threshold = 32};
        c.host = (host_mode){.on = 1, .graph_max_bs = 4, .overlap = 1, .graph = mode};
        int coll = mode ? COST_COLL_EAGER_CAR : COST_COLL_EAGER;
        cost_batch b = {.n_prefill_seqs = n, .prefill_tokens = n * p,
                        .prefill_attn = (double)n * p * (p + 1) / 2.0,
                        .prefill_kv_sum = (double)n * p};
        double want = cost_iter_mode(&h, &m, 8, &b, coll) + cost_sample(&h, &m, n);
        for (int j = 1; j < len; j++) {
            cost_batch d = {.n_decode = n, .decode_ctx_sum = (double)n * (p + j)};
            want += cost_iter_mode(&h, &m, 8, &d, coll) + cost_sample(&h, &m, n);
        }
        rollout_result r;
        ts_err e = {{0}};
        cr_assert_eq(rollout_run(&c, t, &r, &e), 0, "%s", e.msg);
        cr_expect_lt(fabs(r.makespan_s - want) / want, 1e-9, "engine %s: %g vs %g",
                     mode ? "graph" : "eager", r.makespan_s, want);
        rollout_result_free(&r);
    }
    trace_free(t);
}

/* Issue 18 item 6: every speculative step waits for the verify's
 * device-to-host sync and then launches its bookkeeping one kernel at a
 * time, graphed or eager, with or without the overlap scheduler. */
Test(cost_host, spec_step_pays_the_verify_sync_graphed_or_eager)
{
    host_mode mode = {.on = 1, .graph_max_bs = 32, .overlap = 0, .graph = 1};
    double k = cost_spec_kernels(&m, 4, 8), gpu = 5e-3, sync = 24.0 * hw.eager_launch_s;
    for (int b = 1; b <= 64; b *= 4) {
        double plain = cost_host_step(&hw, &mode, b, 1, k, gpu);
        cr_assert_float_eq(cost_host_spec_step(&hw, &mode, b, 1, k, gpu), plain + sync, 1e-12,
                           "batch %d", b);
    }
    /* no host model: GPU time only */
    host_mode off = {0};
    cr_assert_float_eq(cost_host_spec_step(&hw, &off, 8, 1, k, gpu), gpu, 1e-15);
}

/* Issue 18 item 6: the verify under the tree's custom mask computes every
 * (draft token, key) pair, V x (ctx + V), where a causal chunk of V tokens
 * computes V x ctx + V (V + 1) / 2, and pays the mask: a V x (ctx + V) bool
 * tensor filled and bit-packed once per step, its bits read by every layer. */
Test(cost_host, tree_verify_prices_the_dense_mask_and_its_traffic)
{
    const int V = 48, tp = 1;
    const double ctx = 8192;
    cost_batch causal = {.n_prefill_seqs = 1, .prefill_tokens = V,
                         .prefill_attn = V * ctx + V * (V + 1) / 2.0,
                         .prefill_kv_sum = ctx + V};
    double old = cost_iter(&hw, &m, tp, &causal) + cost_lm_head(&hw, &m, tp, V) -
                 cost_lm_head(&hw, &m, tp, 1) + cost_sample(&hw, &m, V);
    double now = cost_verify(&hw, &m, tp, 1, V, ctx, NULL);
    double elems = V * (ctx + V);
    double mask = cost_stream(&hw, elems) + cost_stream(&hw, 1.125 * elems) +
                  m.layers * (m.kv_heads / (double)tp) * elems / 8.0 / (hw.hbm_bw * hw.mem_eff);
    cr_assert_gt(now, old + mask * 0.999, "verify %g, causal chunk %g, mask %g", now, old, mask);
    /* and the extra is the mask plus attention pairs only: a few percent */
    cr_assert_lt(now, old * 1.10, "verify %g vs causal %g", now, old);
}
