/*
 * The rollout engine's attention kernel (rollout.attn, sim/rollout_attn.c;
 * issue 18 item 3): the names, the hardware's attn_fa3 key, a prefill-only
 * rollout against the cost model's arithmetic on a hardware copy with each
 * kernel (fa3 faster than fa2 on long prompts, flat at attn_eff, hw the
 * INI's own bit for bit), the trainer keeping the hardware's attention, and
 * the GPUs that cannot run a kernel refusing it with the key named.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/cost.h"
#include "models/cost_spec.h"
#include "models/hw_calib.h"
#include "sim/rlstep.h"
#include "sim/rollout.h"
#include "sim/scenario.h"
#include "tests/helpers.h"
#include "traces/trace.h"

static hw_desc h100, a100;
static llm_desc m7;

static void setup(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &h100, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load("a100", &a100, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("qwen2.5-7b", &m7, &e), 0, "%s", e.msg);
}

TestSuite(rollout_attn, .init = setup);

Test(rollout_attn, names_parse_and_nothing_else)
{
    static const char *const ok[] = {"hw", "flat", "fa2", "fa3"};
    for (int i = 0; i < 4; i++) {
        rollout_attn a = (rollout_attn)-1;
        cr_expect_eq(rollout_attn_parse(ok[i], &a), 0, "%s", ok[i]);
        cr_expect_eq((int)a, i, "%s", ok[i]);
        cr_expect_str_eq(rollout_attn_name(a), ok[i]);
    }
    static const char *const bad[] = {"", "FA3", "fa4", "fa", "hw ", "flash", "2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rollout_attn a;
        cr_expect_eq(rollout_attn_parse(bad[i], &a), -1, "'%s' parsed", bad[i]);
    }
}

Test(rollout_attn, hardware_says_where_flashattention_3_runs)
{
    ts_err e = {{0}};
    hw_desc h200;
    cr_assert_eq(hw_load("h200", &h200, &e), 0, "%s", e.msg);
    cr_expect_eq(h100.attn_fa3, 1);
    cr_expect_eq(h200.attn_fa3, 1);
    cr_expect_eq(a100.attn_fa3, 0);
    /* absent, the key follows attn_fa_version: an INI pricing prefill with
     * FlashAttention-3 runs it, one with FlashAttention-2 or none does not */
    char dir[256], path[512];
    tmpdir_create(dir, sizeof dir, "rollout-attn");
    static const char head[] =
        "[gpu]\npeak_flops = 989e12\nhbm_bw = 3.35e12\nhbm_bytes = 85e9\nsms = 132\n"
        "[interconnect]\nnvlink_bw = 450e9\nnvlink_lat = 0.75e-6\nnic_bw = 50e9\n"
        "nic_lat = 5e-6\ngpus_per_node = 8\n[efficiency]\n";
    static const char *const tail[] = {"attn_fa_version = 3\n", "attn_fa_version = 2\n", ""};
    static const int want[] = {1, 0, 0};
    for (int i = 0; i < 3; i++) {
        char text[1024];
        snprintf(path, sizeof path, "%s/g%d.ini", dir, i);
        snprintf(text, sizeof text, "%s%s", head, tail[i]);
        write_aside(path, text);
        hw_desc h;
        cr_assert_eq(hw_load_ini(path, &h, &e), 0, "%s", e.msg);
        cr_expect_eq(h.attn_fa3, want[i], "case %d", i);
    }
    /* set to 0 beside version 3: a contradiction, named with file and lines */
    snprintf(path, sizeof path, "%s/bad.ini", dir);
    char text[1024];
    snprintf(text, sizeof text, "%sattn_fa_version = 3\nattn_fa3 = 0\n", head);
    write_aside(path, text);
    hw_desc h;
    cr_expect_eq(hw_load_ini(path, &h, &e), -1);
    cr_expect(strstr(e.msg, "bad.ini:14: key 'attn_fa3'") && strstr(e.msg, "line 13"), "%s",
              e.msg);
    tmpdir_remove(dir);
}

Test(rollout_attn, apply_sets_the_version_and_nothing_else)
{
    static const int want[] = {2, 0, 2, 3}; /* hw: H100's INI says FlashAttention-2 */
    for (int a = 0; a < 4; a++) {
        hw_desc h, ref = h100;
        rollout_attn_apply(&h100, (rollout_attn)a, &h);
        cr_expect_eq(h.attn_fa_version, want[a], "%s", rollout_attn_name((rollout_attn)a));
        ref.attn_fa_version = want[a];
        cr_expect(!memcmp(&h, &ref, sizeof h), "%s changed more than the version",
                  rollout_attn_name((rollout_attn)a));
    }
    hw_desc in_place = h100;
    rollout_attn_apply(&in_place, ROLLOUT_ATTN_FA3, &in_place);
    cr_expect_eq(in_place.attn_fa_version, 3);
}

/* n prompts of `plen` tokens, one 1-token response each: one prefill
 * iteration per chunk and nothing else. */
static trace *prefill_trace(int n, int32_t plen)
{
    trace *t = trace_new();
    int32_t one = 1;
    for (int i = 0; i < n; i++)
        cr_assert_eq(trace_add(t, 0, i, -1, plen, &one, 1, NULL), 0);
    return t;
}

static rollout_cfg cfg_on(const hw_desc *hw, rollout_attn a)
{
    rollout_cfg c = {.hw = hw, .llm = &m7, .tp = 1, .replicas = 1, .max_running = 256,
                     .chunk_tokens = 8192, .kv_tokens = 400000, .tail_threshold = 32,
                     .attn = a};
    return c;
}

static double makespan(const rollout_cfg *c, const trace *t)
{
    rollout_result r;
    ts_err e = {{0}};
    cr_assert_eq(rollout_run(c, t, &r, &e), 0, "%s", e.msg);
    double s = r.makespan_s;
    rollout_result_free(&r);
    return s;
}

/* One request of p prompt tokens and a 1-token response, on hw with
 * attn_fa_version = v: its prefill iteration and the sampling of its token,
 * the arithmetic the rollout must reproduce. */
static double one_prefill(int v, int p)
{
    hw_desc h = h100;
    h.attn_fa_version = v;
    cost_batch b = {0};
    b.n_prefill_seqs = 1;
    b.prefill_tokens = p;
    b.prefill_attn = (double)p * (p + 1) / 2.0;
    b.prefill_kv_sum = p;
    return cost_iter(&h, &m7, 1, &b) + cost_sample(&h, &m7, 1);
}

Test(rollout_attn, a_prefill_is_priced_on_the_engines_kernel)
{
    const int p = 8000; /* one chunk (chunk_tokens 8192) */
    trace *t = prefill_trace(1, p);
    rollout_cfg hw = cfg_on(&h100, ROLLOUT_ATTN_HW), fa2 = cfg_on(&h100, ROLLOUT_ATTN_FA2),
                fa3 = cfg_on(&h100, ROLLOUT_ATTN_FA3), flat = cfg_on(&h100, ROLLOUT_ATTN_FLAT);
    double t_hw = makespan(&hw, t), t2 = makespan(&fa2, t), t3 = makespan(&fa3, t),
           tf = makespan(&flat, t);
    /* exactly the cost model on a copy of the hardware with the engine's kernel:
     * hw is H100's INI (FlashAttention-2), flat attn_eff at every length */
    cr_expect_eq(t_hw, one_prefill(h100.attn_fa_version, p), "hw %.9g", t_hw);
    cr_expect_eq(t2, one_prefill(2, p), "fa2 %.9g", t2);
    cr_expect_eq(t3, one_prefill(3, p), "fa3 %.9g", t3);
    cr_expect_eq(tf, one_prefill(0, p), "flat %.9g", tf);
    cr_expect_eq(t_hw, t2);
    /* FlashAttention-3 is faster at 8k (published 579-602 vs 319-333 TFLOP/s)
     * and the attention is a visible share of the iteration */
    cr_expect_lt(t3, t2 * 0.97, "fa3 %.6g s vs fa2 %.6g s", t3, t2);
    /* the cfg's hardware is left as it was */
    cr_expect_eq(h100.attn_fa_version, 2);
    trace_free(t);
}

Test(rollout_attn, a_prefill_heavy_rollout_is_faster_on_fa3)
{
    /* 64 prompts of 16k tokens, 16-token responses, 2 replicas of TP 1: the
     * prefill is most of the work (chunked at 8192 tokens) */
    trace *t = trace_new();
    int32_t len = 16;
    for (int i = 0; i < 64; i++)
        cr_assert_eq(trace_add(t, 0, i, -1, 16000, &len, 1, NULL), 0);
    rollout_cfg c2 = cfg_on(&h100, ROLLOUT_ATTN_FA2), c3 = cfg_on(&h100, ROLLOUT_ATTN_FA3),
                ch = cfg_on(&h100, ROLLOUT_ATTN_HW);
    c2.replicas = c3.replicas = ch.replicas = 2;
    double t2 = makespan(&c2, t), t3 = makespan(&c3, t), th = makespan(&ch, t);
    cr_expect_lt(t3, t2 * 0.9, "fa3 %.4g s vs fa2 %.4g s", t3, t2);
    cr_expect_eq(th, t2, "hw %.9g vs fa2 %.9g", th, t2);
    trace_free(t);
}

/* A scenario on `hw_name` with rollout.attn = attn (8 GPUs, TP 2, a
 * prefill-heavy generated batch). */
static void attn_scenario(scenario *s, const char *hw_name, const char *attn)
{
    ts_err e = {{0}};
    scenario_defaults(s);
    snprintf(s->path, sizeof s->path, "attn-test.ini");
    snprintf(s->model, sizeof s->model, "qwen2.5-7b");
    s->gpus = 8;
    s->tp = 2;
    s->prompts = 16;
    s->group = 4;
    s->cap = 256;
    s->prompt_median = 8000;
    char set[64];
    snprintf(set, sizeof set, "cluster.hw=%s", hw_name);
    cr_assert_eq(scenario_set(s, set, &e), 0, "%s", e.msg);
    snprintf(set, sizeof set, "rollout.attn=%s", attn);
    cr_assert_eq(scenario_set(s, set, &e), 0, "%s", e.msg);
}

Test(rollout_attn, the_trainer_keeps_the_hardwares_attention)
{
    rlstep_result r[2];
    static const char *const k[2] = {"hw", "fa3"};
    for (int i = 0; i < 2; i++) {
        scenario s;
        attn_scenario(&s, "h100", k[i]);
        gen_params gp;
        ts_err e = {{0}};
        cr_assert_eq(scenario_gen_params(&s, &gp, &e), 0, "%s", e.msg);
        trace *t = gen_trace(&gp, &e);
        cr_assert_not_null(t, "%s", e.msg);
        cr_assert_eq(rlstep_run(&s, &h100, &m7, t, &r[i], NULL, &e), 0, "%s", e.msg);
        trace_free(t);
    }
    cr_expect_lt(r[1].phase_s[PH_ROLLOUT], r[0].phase_s[PH_ROLLOUT], "fa3 %.6g vs hw %.6g",
                 r[1].phase_s[PH_ROLLOUT], r[0].phase_s[PH_ROLLOUT]);
    for (int ph = PH_OLD_LOGP; ph <= PH_UPDATE; ph++)
        cr_expect_eq(r[1].phase_s[ph], r[0].phase_s[ph], "%s: %.9g vs %.9g", tl_phase_name[ph],
                     r[1].phase_s[ph], r[0].phase_s[ph]);
    rlstep_result_free(&r[0]);
    rlstep_result_free(&r[1]);
}

Test(rollout_attn, a_gpu_refuses_a_kernel_it_cannot_run)
{
    ts_err e = {{0}};
    /* A100: no FlashAttention-3 (attn_fa3 = 0), and no published table */
    cr_expect_eq(rollout_attn_check(&a100, ROLLOUT_ATTN_FA3, &e), -1);
    cr_expect(strstr(e.msg, "fa3") && strstr(e.msg, "attn_fa3") && strstr(e.msg, "a100"), "%s",
              e.msg);
    cr_expect_eq(rollout_attn_check(&a100, ROLLOUT_ATTN_FA2, &e), -1);
    cr_expect(strstr(e.msg, "fa2") && strstr(e.msg, "attn_fa_version"), "%s", e.msg);
    cr_expect_eq(rollout_attn_check(&a100, ROLLOUT_ATTN_HW, &e), 0);
    cr_expect_eq(rollout_attn_check(&a100, ROLLOUT_ATTN_FLAT, &e), 0);
    for (int a = 0; a < 4; a++)
        cr_expect_eq(rollout_attn_check(&h100, (rollout_attn)a, &e), 0, "%s", e.msg);
    /* through a scenario: its path and the key */
    scenario s;
    attn_scenario(&s, "a100", "fa3");
    rollout_cfg cfg;
    cr_expect_eq(rlstep_rollout_cfg(&s, &a100, &m7, &cfg, &e), -1);
    cr_expect(strstr(e.msg, "attn-test.ini: key 'rollout.attn': fa3") && strstr(e.msg, "attn_fa3"),
              "%s", e.msg);
    /* and a configuration built by hand: the rollout refuses it */
    trace *t = prefill_trace(2, 1000);
    rollout_cfg c = cfg_on(&a100, ROLLOUT_ATTN_FA3);
    rollout_result r;
    cr_expect_eq(rollout_run(&c, t, &r, &e), -1);
    cr_expect(strstr(e.msg, "rollout.attn = fa3") && strstr(e.msg, "attn_fa3"), "%s", e.msg);
    trace_free(t);
}
