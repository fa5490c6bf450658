/*
 * The third GPU generation (models/hw/a100.ini, issue 18 item 7): the
 * datasheet numbers load as written, and the cost model prices A100 against
 * H100 by first principles: a memory-bound decode step slower by about the
 * HBM bandwidth ratio (3.35 / 2.039 = 1.64), a large compute-bound GEMM by
 * about the peak ratio (989 / 312 = 3.17), collectives by the NVLink ratio;
 * and a shipped scenario runs on it (`--set cluster.hw=a100`), its TP-4
 * rollout slower than on H100 by less than the HBM ratio (the same fixed
 * launch and all-reduce latencies on both).
 */
#include <criterion/criterion.h>
#include <math.h>

#include "models/comm.h"
#include "models/cost.h"
#include "models/hw_calib.h"
#include "sim/policy/policy.h"
#include "sim/rlstep.h"
#include "tests/helpers.h"

static hw_desc a100, h100;
static llm_desc m7;

static void load(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("a100", &a100, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load("h100", &h100, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("qwen2.5-7b", &m7, &e), 0, "%s", e.msg);
}

TestSuite(hw_a100, .init = load);

Test(hw_a100, datasheet_numbers_load)
{
    cr_expect_float_eq(a100.peak_flops, 312e12, 1.0);
    cr_expect_float_eq(a100.hbm_bw, 2.039e12, 1.0);
    cr_expect_eq(a100.sms, 108);
    cr_expect_float_eq(a100.nvlink_bw, 300e9, 1.0);
    cr_expect_float_eq(a100.nic_bw, 25e9, 1.0);
    cr_expect_gt(a100.train_eff, 0, "its own published-MFU train_eff");
    cr_expect_eq(a100.attn_fa_version, 0, "H100's FlashAttention table does not apply");
}

Test(hw_a100, memory_bound_decode_slower_by_the_hbm_ratio)
{
    double bw = h100.hbm_bw / a100.hbm_bw; /* 1.64 */
    /* TP 1: the weights' bytes dominate; fixed latencies (launches) pull it
     * below the ratio, the GEMMs' partly hidden compute side (gemm_mix of
     * padded tiles at 3.2x less peak) above it */
    double ta = cost_decode_iter(&a100, &m7, 1, 1, 2048.0);
    double th = cost_decode_iter(&h100, &m7, 1, 1, 2048.0);
    cr_expect(ta / th > 0.9 * bw && ta / th < 1.06 * bw, "tp 1: a100/h100 %g, HBM ratio %g",
              ta / th, bw);
    /* TP 4: a quarter of the bytes each, the same launches and all-reduce
     * latencies: slower, by less than the ratio */
    double t4a = cost_decode_iter(&a100, &m7, 4, 1, 2048.0);
    double t4h = cost_decode_iter(&h100, &m7, 4, 1, 2048.0);
    cr_expect(t4a / t4h > 1.1 && t4a / t4h < ta / th, "tp 4: a100/h100 %g", t4a / t4h);
    /* the weights' GEMMs alone: within 10% of the ratio */
    double ga = cost_gemm(&a100, 1, 3 * m7.ffn, m7.hidden), gh = cost_gemm(&h100, 1, 3 * m7.ffn, m7.hidden);
    cr_expect(fabs(ga / gh / bw - 1) < 0.10, "skinny GEMM a100/h100 %g, HBM ratio %g", ga / gh, bw);
}

Test(hw_a100, compute_bound_gemm_slower_by_the_peak_ratio)
{
    double peak = h100.peak_flops / a100.peak_flops; /* 3.17 */
    double ta = cost_gemm(&a100, 8192, 8192, 8192), th = cost_gemm(&h100, 8192, 8192, 8192);
    /* 108 vs 132 SMs quantise the waves differently: within 10% */
    cr_expect(fabs(ta / th / peak - 1) < 0.10, "a100/h100 %g, peak ratio %g", ta / th, peak);
    double bytes = 64e6, nv = h100.nvlink_bw / a100.nvlink_bw;
    double ca = comm_allreduce(&a100, bytes, 8), ch = comm_allreduce(&h100, bytes, 8);
    cr_expect(fabs(ca / ch / nv - 1) < 0.05, "large all-reduce a100/h100 %g, NVLink %g", ca / ch, nv);
}

/* One scenario's rollout on each GPU. */
static double rollout_on(const char *hw_name)
{
    ts_err e = {{0}};
    scenario s;
    hw_desc hw;
    llm_desc m;
    trace *t = NULL;
    char set[64];
    cr_assert_eq(scenario_load("qwen7b-64gpu", &s, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "trace.prompts=16", &e), 0, "%s", e.msg);
    snprintf(set, sizeof set, "cluster.hw=%s", hw_name);
    cr_assert_eq(scenario_set(&s, set, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_validate(&s, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load(s.hw, &hw, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load(s.model, &m, &e), 0, "%s", e.msg);
    hw.gpus_per_node = s.gpus_per_node;
    cr_assert_eq(policy_load_steps(&s, NULL, 1, &t, &e), 0, "%s", e.msg);
    rlstep_result r;
    run_record *rec = run_record_new();
    cr_assert_eq(rlstep_run(&s, &hw, &m, t, &r, rec, &e), 0, "%s: %s", hw_name, e.msg);
    double ro = r.ro.makespan_s;
    cr_assert_gt(r.step_s, ro);
    rlstep_result_free(&r);
    run_record_free(rec);
    trace_free(t);
    return ro;
}

Test(hw_a100, scenario_runs_on_a100_slower_by_less_than_the_hbm_ratio)
{
    double ra = rollout_on("a100"), rh = rollout_on("h100");
    double bw = h100.hbm_bw / a100.hbm_bw, peak = h100.peak_flops / a100.peak_flops;
    /* decode at TP 4 and small batches: bound by HBM and fixed latencies,
     * far from the compute ratio */
    cr_expect(ra / rh > 1.2 && ra / rh < 1.05 * bw && bw < peak,
              "rollout a100 %g s, h100 %g s (x%g)", ra, rh, ra / rh);
}
