/*
 * The training phases as VeRL runs them (sim/rlstep_verl.c): mini-batches
 * are barriers that each pay at least one FSDP weight gather-and-scatter
 * round, the phases never beat the cluster's compute, smaller mini-batches
 * are never faster, and bad settings are errors naming the key.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/comm.h"
#include "models/hw_calib.h"
#include "models/memory.h"
#include "sim/policy/policy.h"
#include "sim/rlstep.h"
#include "sim/rlstep_mem.h"
#include "tests/helpers.h"

static hw_desc hw;
static llm_desc m;
static scenario s;
static trace *tr;

static void load(void)
{
    ts_err e = {{0}};
    cr_assert_eq(scenario_load("scenarios/qwen7b-64gpu.ini", &s, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "trace.prompts=64", &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load(s.hw, &hw, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load(s.model, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(policy_load_steps(&s, NULL, 1, &tr, &e), 0, "%s", e.msg);
}

static void fini(void)
{
    trace_free(tr);
}

TestSuite(rlstep_verl, .init = load, .fini = fini, .timeout = 120);

static rlstep_result run_mini(int mini)
{
    ts_err e = {{0}};
    char set[64];
    snprintf(set, sizeof set, "train.mini_batch_prompts=%d", mini);
    cr_assert_eq(scenario_set(&s, set, &e), 0, "%s", e.msg);
    rlstep_result r;
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &r, NULL, &e), 0, "%s", e.msg);
    return r;
}

Test(rlstep_verl, every_mini_batch_pays_an_fsdp_round)
{
    cr_assert_eq(s.train_sp, 4, "fastrl's grpo_7B.sh: Ulysses SP 4");
    cr_assert_eq(s.mini_batch_prompts, 4, "fastrl's grpo_7B.sh: ppo_mini_batch_size 4");
    rlstep_result r = run_mini(4);
    double W = mem_weights(&m, 1);
    double round = 2 * comm_allgather(&hw, W, s.gpus) + comm_reduce_scatter(&hw, 2 * W, s.gpus);
    int minibatches = (int)tr->n_prompts / 4;
    cr_assert_geq(r.phase_s[PH_UPDATE], minibatches * round * (1 - 1e-9),
                  "update %g s < %d mini-batches x %g s of FSDP traffic", r.phase_s[PH_UPDATE],
                  minibatches, round);
    cr_assert_gt(r.phase_s[PH_OLD_LOGP], 0);
    cr_assert_float_eq(r.phase_s[PH_REF], r.phase_s[PH_OLD_LOGP], 1e-9, "same forward passes");
    cr_assert_float_eq(r.step_s, r.phase_t0[PH_UPDATE] + r.phase_s[PH_UPDATE], 1e-9);
    rlstep_result_free(&r);
    /* every GPU's timeline covers the step without gaps */
    ts_err e = {{0}};
    run_record *rec = run_record_new();
    cr_assert_not_null(rec);
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &r, rec, &e), 0, "%s", e.msg);
    for (int g = 0; g < s.gpus; g++) {
        double covered = 0;
        for (size_t i = 0; i < rec->n_tl; i++)
            if (rec->tl[i].gpu == g)
                covered += rec->tl[i].t1 - rec->tl[i].t0;
        cr_assert_lt(fabs(covered - r.step_s) / r.step_s, 1e-9, "gpu %d covers %g of %g", g, covered,
                     r.step_s);
    }
    rlstep_result_free(&r);
    run_record_free(rec);
}

Test(rlstep_verl, smaller_mini_batches_are_never_faster)
{
    double prev = 0;
    const int minis[] = {64, 16, 4};
    for (int i = 0; i < 3; i++) {
        rlstep_result r = run_mini(minis[i]);
        cr_assert_geq(r.phase_s[PH_UPDATE], prev * (1 - 1e-9), "mini %d: %g s after %g s",
                      minis[i], r.phase_s[PH_UPDATE], prev);
        prev = r.phase_s[PH_UPDATE];
        rlstep_result_free(&r);
    }
}

/* The trainer prices Ulysses all-to-alls with the scenario's dcp.a2a_eff, as
 * the DCP trainer does: a slower all-to-all makes every phase slower. */
Test(rlstep_verl, ulysses_all_to_all_uses_the_scenarios_efficiency)
{
    ts_err e = {{0}};
    rlstep_result a = run_mini(4);
    cr_assert_eq(scenario_set(&s, "dcp.a2a_eff=0.25", &e), 0, "%s", e.msg);
    rlstep_result b = run_mini(4);
    cr_assert_gt(b.phase_s[PH_OLD_LOGP], a.phase_s[PH_OLD_LOGP] * 1.01, "%g vs %g s",
                 b.phase_s[PH_OLD_LOGP], a.phase_s[PH_OLD_LOGP]);
    cr_assert_gt(b.phase_s[PH_UPDATE], a.phase_s[PH_UPDATE], "%g vs %g s", b.phase_s[PH_UPDATE],
                 a.phase_s[PH_UPDATE]);
    cr_assert_eq(scenario_set(&s, "dcp.a2a_eff=1", &e), 0, "%s", e.msg);
    rlstep_result_free(&a);
    rlstep_result_free(&b);
}

Test(rlstep_verl, bad_settings_are_errors)
{
    ts_err e = {{0}};
    rlstep_result r;
    cr_assert_eq(scenario_set(&s, "train.mini_batch_prompts=1", &e), 0, "%s", e.msg);
    /* 1 prompt x 8 responses over 16 ranks: less than one response each */
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &r, NULL, &e), -1);
    cr_assert(strstr(e.msg, "mini_batch_prompts") != NULL, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.mini_batch_prompts=4", &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.sp=3", &e), 0, "%s", e.msg);
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &r, NULL, &e), -1);
    cr_assert(strstr(e.msg, "train.sp") != NULL, "%s", e.msg);
}

/* train.offload (sim/rlstep_mem.c): the states leave the GPU, and every
 * mini-batch pays a CPU optimizer step and micro-batches no shorter than
 * their host copies; in the plain trainer (mini_batch_prompts 0) too. */
Test(rlstep_verl, offload_trades_gpu_memory_for_host_copies_and_a_cpu_step)
{
    ts_err e = {{0}};
    double P = llm_params(&m), shard = P / s.gpus;
    double opt = 28 * shard * 8 / hw.host_mem_bw, bwd = 8 * shard / hw.pcie_bw;
    int minibatches = (int)tr->n_prompts / 4;
    for (int mini = 4; mini >= 0; mini -= 4) {
        rlstep_result a = run_mini(mini);
        cr_assert_eq(scenario_set(&s, "train.offload=true", &e), 0, "%s", e.msg);
        rlstep_result b = run_mini(mini);
        cr_assert_eq(scenario_set(&s, "train.offload=false", &e), 0, "%s", e.msg);
        cr_assert_gt(a.train_mem_gb, 1.0);
        cr_assert_float_eq(a.train_mem_gb - b.train_mem_gb, 16 * shard / 1e9, 1e-9,
                           "mini %d: %g -> %g GB", mini, a.train_mem_gb, b.train_mem_gb);
        int steps = mini ? minibatches : 1;
        cr_assert_geq(b.phase_s[PH_UPDATE], a.phase_s[PH_UPDATE] + steps * opt * (1 - 1e-9),
                      "mini %d: update %g -> %g s, %d optimizer steps of %g s", mini,
                      a.phase_s[PH_UPDATE], b.phase_s[PH_UPDATE], steps, opt);
        cr_assert_geq(b.phase_s[PH_UPDATE], steps * (bwd + opt) * (1 - 1e-9));
        cr_assert_geq(b.phase_s[PH_OLD_LOGP], a.phase_s[PH_OLD_LOGP]);
        rlstep_result_free(&a);
        rlstep_result_free(&b);
    }
    cr_assert_eq(scenario_set(&s, "train.mini_batch_prompts=4", &e), 0, "%s", e.msg);
}

/* An update over the memory cap is an error naming the keys that fix it and
 * the same figure the run that fits reports. */
Test(rlstep_verl, an_update_over_the_cap_is_an_error)
{
    ts_err e = {{0}};
    rlstep_result a = run_mini(4), r;
    char want[64];
    snprintf(want, sizeof want, "needs %.1f GB per GPU", a.train_mem_gb);
    char cap[64];
    snprintf(cap, sizeof cap, "train.mem_cap=%g", 0.99 * a.train_mem_gb * 1e9 / hw.hbm_bytes);
    cr_assert_eq(scenario_set(&s, cap, &e), 0, "%s", e.msg);
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &r, NULL, &e), -1);
    cr_assert(strstr(e.msg, want) && strstr(e.msg, "train.mem_cap") &&
                  strstr(e.msg, "a smaller train.micro_batch_tokens") &&
                  strstr(e.msg, "train.offload = true"),
              "%s", e.msg);
    /* a budget under the longest sequence's share: SP, not the budget, helps */
    cr_assert_eq(scenario_set(&s, "train.micro_batch_tokens=1024", &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.mem_cap=0.05", &e), 0, "%s", e.msg);
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &r, NULL, &e), -1);
    cr_assert(strstr(e.msg, "a larger train.sp") && !strstr(e.msg, "micro_batch_tokens,"), "%s",
              e.msg);
    cr_assert_eq(scenario_set(&s, "train.micro_batch_tokens=33792", &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, cap, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.offload=true", &e), 0, "%s", e.msg);
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &r, NULL, &e), 0, "offload frees the states: %s", e.msg);
    rlstep_result_free(&r);
    rlstep_result_free(&a);
    cr_assert_eq(scenario_set(&s, "train.offload=false", &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.mem_cap=0.9", &e), 0, "%s", e.msg);
}

/* `tailsim memory` reports the figure the trainer checks, for a
 * configuration that fits and for one that does not (exit 0 both: a report);
 * under a DCP strategy the plan's largest micro-batch. */
Test(rlstep_verl, the_memory_command_reports_what_the_trainer_checks)
{
    char *a = run_capture("build/tailsim rlstep qwen7b-64gpu --set trace.prompts=8 --json");
    char *b = run_capture("build/tailsim memory qwen7b-64gpu --set trace.prompts=8 --json");
    const char *p = strstr(a, "\"train_mem_gb\": "), *q = strstr(b, "\"total_gb\": ");
    cr_assert(p && q, "%s\n%s", a, b);
    double x = strtod(p + 16, NULL), y = strtod(q + 12, NULL);
    cr_assert_float_eq(x, y, 1e-4 * x, "rlstep %g GB, memory %g GB", x, y);
    cr_assert(strstr(b, "\"trainer\": \"verl\"") && strstr(b, "\"fits\": true"), "%s", b);
    free(a);
    free(b);
    a = run_capture("build/tailsim memory qwen32b-64gpu --set cluster.gpus=8 "
                    "--set trace.prompts=8; echo rc=$?");
    cr_assert(strstr(a, "does NOT fit") && strstr(a, "train.offload = true") &&
                  strstr(a, "rc=0"),
              "%s", a);
    free(a);
    a = run_capture("build/tailsim memory qwen32b-64gpu --set cluster.gpus=8 --set "
                    "trace.prompts=8 --set train.offload=true --json");
    cr_assert(strstr(a, "\"states_gb\": 0.0") && strstr(a, "\"fits\": true"), "%s", a);
    free(a);
    /* --gpus: the same update at each count; a count TP does not divide is said */
    a = run_capture("build/tailsim memory qwen32b-64gpu --set trace.prompts=8 --gpus 8,12,32");
    const char *tab = strstr(a, "actor update by GPU count");
    cr_assert(tab, "%s", a);
    cr_assert(strstr(tab, "no\n") && strstr(tab, "cannot run: rollout.tp = 8 does not divide") &&
                  strstr(tab, "yes\n"),
              "%s", a);
    free(a);
    a = run_capture("build/tailsim memory qwen32b-64gpu --set trace.prompts=8 --gpus 64 --json");
    const char *by = strstr(a, "\"by_gpus\"");
    q = strstr(a, "\"total_gb\": ");
    cr_assert(by && q, "%s", a);
    char want[64];
    snprintf(want, sizeof want, "\"total_gb\": %.6g", strtod(q + 12, NULL));
    cr_assert(strstr(by, want), "64 GPUs in the table as in the report: %s", a);
    free(a);
    a = run_capture("build/tailsim memory joint-qwen7b-64gpu");
    cr_assert(strstr(a, "KV cache") && strstr(a, "planned by train.strategy dcp-inter") &&
                  strstr(a, "largest micro-batch") && strstr(a, "fits") && !strstr(a, "logits"),
              "%s", a);
    free(a);
}

/* HSDP (train.fsdp_size): the states shard over 8 GPUs instead of 64 (more
 * memory), the gathers stay on a node, the gradient shards are all-reduced
 * across the 8 groups; fsdp_size = the GPUs is the default bit for bit, and
 * one that does not divide them is an error naming the key. */
Test(rlstep_verl, hsdp_shards_over_the_group)
{
    ts_err e = {{0}};
    rlstep_result a = run_mini(4), b, c, r;
    cr_assert_eq(scenario_set(&s, "train.fsdp_size=8", &e), 0, "%s", e.msg);
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &b, NULL, &e), 0, "%s", e.msg);
    double P = llm_params(&m);
    cr_assert_float_eq(b.train_mem_gb - a.train_mem_gb, 16 * P * (1.0 / 8 - 1.0 / 64) / 1e9, 1e-9,
                       "%g -> %g GB", a.train_mem_gb, b.train_mem_gb);
    cr_assert_neq(b.phase_s[PH_UPDATE], a.phase_s[PH_UPDATE]);
    double W = mem_weights(&m, 1);
    cr_assert_geq(b.phase_s[PH_UPDATE],
                  (tr->n_prompts / 4) * comm_allreduce_spread(&hw, 2 * W / 8, 8, 8) * (1 - 1e-9),
                  "every mini-batch all-reduces its gradient shard across the groups");
    /* offloaded, a node's host memory holds one shard of 1/4 per GPU: 8 of them */
    cr_assert_eq(scenario_set(&s, "train.fsdp_size=4", &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.offload=true", &e), 0, "%s", e.msg);
    train_mem tm;
    train_mem_eval(&s, &hw, &m, s.gpus, 16384, &tm);
    cr_assert_eq(tm.group, 4);
    cr_assert_float_eq(tm.need.host, 8 * 16 * P / 4, 1e-6 * P, "%g", tm.need.host);
    cr_assert_eq(scenario_set(&s, "train.offload=false", &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.fsdp_size=64", &e), 0, "%s", e.msg);
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &c, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(c.step_s, a.step_s);
    cr_assert_eq(c.train_mem_gb, a.train_mem_gb);
    cr_assert_eq(scenario_set(&s, "train.fsdp_size=6", &e), 0, "%s", e.msg);
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &r, NULL, &e), -1);
    cr_assert(strstr(e.msg, "train.fsdp_size = 6 does not divide"), "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.mini_batch_prompts=0", &e), 0, "%s", e.msg);
    cr_assert_eq(rlstep_run(&s, &hw, &m, tr, &r, NULL, &e), -1, "the plain trainer checks too");
    cr_assert_eq(scenario_set(&s, "train.fsdp_size=0", &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.mini_batch_prompts=4", &e), 0, "%s", e.msg);
    rlstep_result_free(&a);
    rlstep_result_free(&b);
    rlstep_result_free(&c);
}
