/*
 * Host time of an engine step (models/cost_host.c): eager launches only above
 * the CUDA-graph limit or with prefill in the step, scheduling hidden by the
 * overlap scheduler and exposed without it, and the engine settings a
 * scenario gives the plain and the speculative engine (fastrl's).
 */
#include <criterion/criterion.h>
#include <math.h>

#include "models/cost_host.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "sim/scenario.h"

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
