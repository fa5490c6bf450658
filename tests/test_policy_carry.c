/*
 * Tests of the policies that change which samples train (partial,
 * tailbatch, async) and of sorted: the rollout's stop after K complete
 * groups aborts the rest with their progress; partial's carried tokens plus
 * the new ones add up to the trace lengths of every trained response (token
 * conservation across steps); tailbatch trains every prompt at most once
 * and keeps the rest deferred; async never trains a sample staler than its
 * bound; sorted is lossless with a noisy predictor too; the BASE+tlt
 * combinations run their base's driver with TLT's keys and carry the
 * drafter; every policy is deterministic for a seed; steps load from a trace directory in name order;
 * the same hold on the real PolyTrace DAPO steps (skipped when ../shared is
 * absent).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>
#include <jansson.h>

#include "sim/policy/policy.h"
#include "sim/rlstep.h"
#include "tests/helpers.h"

static scenario scn;
static hw_desc hw;
static llm_desc m7;

/* 8 GPUs as 4 replicas of TP 2, 32 prompts x 8, long tail. */
static void setup(void)
{
    gsl_set_error_handler_off();
    const char *path = "build/test-policy-carry.ini";
    write_aside(path, POLICY_SCENARIO_INI);
    load_scenario_hw_llm(path, &scn, &hw, &m7);
}

TestSuite(policy_carry, .init = setup);

#define MAXS 8

static void load(int n, trace **tr)
{
    ts_err e = {{0}};
    cr_assert_leq(n, MAXS);
    cr_assert_eq(policy_load_steps(&scn, NULL, n, tr, &e), 0, "%s", e.msg);
}

static void unload(int n, trace **tr)
{
    for (int k = 0; k < n; k++)
        trace_free(tr[k]);
}

static int64_t generated(const multistep_result *r)
{
    int64_t s = 0;
    for (int k = 0; k < r->steps; k++)
        s += r->step[k].ro.decode_tokens;
    return s;
}

Test(policy_carry, rollout_stops_after_k_groups)
{
    ts_err e = {{0}};
    trace *tr[1];
    load(1, tr);
    rollout_cfg cfg;
    cr_assert_eq(rlstep_rollout_cfg(&scn, &hw, &m7, &cfg, &e), 0, "%s", e.msg);
    rollout_result full, half;
    cr_assert_eq(rollout_run(&cfg, tr[0], &full, &e), 0, "%s", e.msg);
    cfg.stop_groups = 16;
    cr_assert_eq(rollout_run(&cfg, tr[0], &half, &e), 0, "%s", e.msg);
    cr_assert(half.stopped && half.groups_done >= 16 && half.groups_done < 32);
    cr_assert_lt(half.makespan_s, full.makespan_s);
    cr_assert_eq(full.stopped, 0);
    size_t q = 0, unfinished = 0;
    int64_t tokens = 0;
    for (size_t i = 0; i < tr[0]->n_prompts; i++)
        for (int32_t j = 0; j < tr[0]->prompts[i].n_resp; j++, q++) {
            int32_t len = tr[0]->prompts[i].resp[j];
            len = len > scn.max_response ? scn.max_response : len;
            cr_assert_eq(full.gen[q], len);
            if (half.finish_s[q] < 0) {
                unfinished++;
                cr_assert(half.gen[q] >= 0 && half.gen[q] < len);
            } else {
                cr_assert_eq(half.gen[q], len);
            }
            tokens += half.gen[q];
        }
    cr_assert_gt(unfinished, 0);
    cr_assert_eq(tokens, half.decode_tokens, "progress out = tokens generated");
    rollout_result_free(&full);
    rollout_result_free(&half);
    unload(1, tr);
}

/* With nothing over-provisioned, partial and tailbatch launch exactly the
 * step's prompts and wait for all of them: the synchronous step, to the bit
 * (the carried machinery assembles sync, rollout and training as rlstep). */
Test(policy_carry, without_over_provisioning_partial_and_tailbatch_are_verl, .timeout = 120)
{
    ts_err e = {{0}};
    trace *tr[2];
    load(2, tr);
    scenario s = scn;
    s.overprov = 1.0;
    s.tail_overprov = 1.0;
    multistep_result v;
    cr_assert_eq(policy_run(&s, policy_find("verl"), &hw, &m7, tr, 2, 1, &v, NULL, &e), 0, "%s",
                 e.msg);
    static const char *names[] = {"partial", "tailbatch"};
    for (int i = 0; i < 2; i++) {
        multistep_result r;
        cr_assert_eq(policy_run(&s, policy_find(names[i]), &hw, &m7, tr, 2, 1, &r, NULL, &e), 0,
                     "%s", e.msg);
        for (int k = 0; k < 2; k++) {
            /* the same phases, summed in another order */
            cr_assert_lt(fabs(r.step[k].step_s - v.step[k].step_s), 1e-9 * v.step[k].step_s,
                         "%s step %d: %.17g vs %.17g", names[i], k, r.step[k].step_s,
                         v.step[k].step_s);
            cr_assert_eq(r.step[k].ro.makespan_s, v.step[k].ro.makespan_s);
            cr_assert_eq(r.step[k].ro.decode_tokens, v.step[k].ro.decode_tokens);
            for (int ph = 0; ph < PH_COUNT; ph++)
                cr_assert_eq(r.step[k].phase_s[ph], v.step[k].phase_s[ph]);
        }
        cr_assert_eq(r.trained_tokens, v.trained_tokens);
        cr_assert_eq(r.pending_groups, 0);
        cr_assert_eq(r.off_policy_fraction, 0.0);
        multistep_result_free(&r);
    }
    multistep_result_free(&v);
    unload(2, tr);
}

Test(policy_carry, partial_carried_plus_new_tokens_are_the_trace_lengths, .timeout = 120)
{
    ts_err e = {{0}};
    trace *tr[4];
    load(4, tr);
    multistep_result r;
    cr_assert_eq(policy_run(&scn, policy_find("partial"), &hw, &m7, tr, 4, 1, &r, NULL, &e), 0,
                 "%s", e.msg);
    /* every token generated once: trained (at its trace length) or still carried */
    cr_assert_eq(generated(&r), r.trained_tokens + r.pending_tokens);
    cr_assert_eq(r.wasted_tokens, 0);
    cr_assert_geq(r.trained_groups, 4 * 32);
    cr_assert_eq(r.launched_groups, r.trained_groups + r.pending_groups);
    cr_assert_gt(r.pending_groups, 0, "over-provisioned prompts are carried");
    cr_assert(r.off_policy_fraction > 0 && r.off_policy_fraction < 1);
    cr_assert(r.off_policy_token_fraction > 0 && r.off_policy_token_fraction < 1);
    cr_assert(r.mean_staleness > 0 && r.max_staleness >= 1);
    multistep_result_free(&r);
    unload(4, tr);
}

Test(policy_carry, tailbatch_trains_every_prompt_once, .timeout = 120)
{
    ts_err e = {{0}};
    trace *tr[6];
    load(6, tr);
    multistep_result r;
    cr_assert_eq(policy_run(&scn, policy_find("tailbatch"), &hw, &m7, tr, 6, 1, &r, NULL, &e), 0,
                 "%s", e.msg);
    cr_assert_eq(r.launched_groups, r.trained_groups + r.pending_groups);
    cr_assert_eq(r.trained_groups, 6 * 32, "each step trains a full batch");
    cr_assert_eq(r.pending_tokens, 0, "deferred prompts start over");
    cr_assert_gt(r.wasted_tokens, 0);
    cr_assert_eq(generated(&r), r.trained_tokens + r.wasted_tokens);
    cr_assert_eq(r.off_policy_fraction, 0.0);
    cr_assert_eq(r.off_policy_token_fraction, 0.0);
    /* 4 short rounds of 40 keep 32 each and defer 8: step 4 is the long round */
    cr_assert_eq(r.launched_groups, 5 * 40);
    cr_assert_gt(r.step[4].ro.makespan_s, r.step[0].ro.makespan_s);
    multistep_result_free(&r);
    unload(6, tr);
}

Test(policy_carry, async_staleness_never_exceeds_its_bound, .timeout = 120)
{
    ts_err e = {{0}};
    trace *tr[5];
    load(5, tr);
    for (int eta = 1; eta <= 4; eta *= 2) {
        scenario s = scn;
        s.max_staleness = eta;
        multistep_result r;
        cr_assert_eq(policy_run(&s, policy_find("async"), &hw, &m7, tr, 5, 1, &r, NULL, &e), 0,
                     "%s", e.msg);
        cr_assert_leq(r.max_staleness, eta, "eta %d: staleness %d", eta, r.max_staleness);
        cr_assert_geq(r.max_staleness, 1, "rollout runs a version behind");
        /* every token after step 0's comes from an older version */
        cr_assert(r.off_policy_token_fraction > 0.5 && r.off_policy_token_fraction <= 1);
        cr_assert_eq(generated(&r), r.trained_tokens + r.pending_tokens);
        /* a pipeline: steps overlap, but the run is at least as long as
         * either pool's work, and a step at least as long as its update */
        double total = 0, ro = 0, tr = 0;
        for (int k = 0; k < 5; k++) {
            const rlstep_result *st = &r.step[k];
            double train = st->phase_s[PH_REWARD] + st->phase_s[PH_OLD_LOGP] +
                           st->phase_s[PH_REF] + st->phase_s[PH_UPDATE] + st->phase_s[PH_SYNC];
            cr_assert_geq(st->step_s, train - 1e-9);
            total += st->step_s;
            ro += st->ro.makespan_s;
            tr += train;
        }
        cr_assert_geq(total, ro - 1e-6);
        cr_assert_geq(total, tr - 1e-6);
        cr_assert_lt(total, ro + tr, "rollout and training overlap");
        multistep_result_free(&r);
    }
    unload(5, tr);
}

Test(policy_carry, sorted_is_lossless_with_a_noisy_predictor, .timeout = 60)
{
    ts_err e = {{0}};
    trace *tr[2];
    load(2, tr);
    scenario s = scn;
    s.sort_noise = 1.0;
    multistep_result r, v;
    cr_assert_eq(policy_run(&s, policy_find("sorted"), &hw, &m7, tr, 2, 1, &r, NULL, &e), 0,
                 "%s", e.msg);
    cr_assert_eq(policy_run(&scn, policy_find("verl"), &hw, &m7, tr, 2, 1, &v, NULL, &e), 0,
                 "%s", e.msg);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(r.step[k].ro.decode_tokens, v.step[k].ro.decode_tokens);
        cr_assert_eq(r.step[k].ro.responses, v.step[k].ro.responses);
        for (int64_t q = 0; q < r.step[k].ro.responses; q++)
            cr_assert_gt(r.step[k].ro.finish_s[q], 0);
        /* the training half sees the same batch */
        cr_assert_eq(r.step[k].phase_s[PH_UPDATE], v.step[k].phase_s[PH_UPDATE]);
    }
    cr_assert(policy_find("sorted")->lossless);
    multistep_result_free(&r);
    multistep_result_free(&v);
    unload(2, tr);
}

Test(policy_carry, same_seed_same_result, .timeout = 120)
{
    static const char *names[] = {"sorted",      "partial",     "tailbatch",     "async",
                                  "sorted+tlt",  "partial+tlt", "tailbatch+tlt", "async+tlt"};
    ts_err e = {{0}};
    trace *tr[3];
    load(3, tr);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const policy *p = policy_find(names[i]);
        cr_assert_not_null(p);
        multistep_result a, b;
        cr_assert_eq(policy_run(&scn, p, &hw, &m7, tr, 3, 1, &a, NULL, &e), 0, "%s", e.msg);
        cr_assert_eq(policy_run(&scn, p, &hw, &m7, tr, 3, 1, &b, NULL, &e), 0, "%s", e.msg);
        for (int k = 0; k < 3; k++)
            cr_assert_eq(a.step[k].step_s, b.step[k].step_s, "%s step %d", names[i], k);
        cr_assert_eq(a.mean_staleness, b.mean_staleness);
        cr_assert_eq(a.trained_tokens, b.trained_tokens);
        multistep_result_free(&a);
        multistep_result_free(&b);
    }
    unload(3, tr);
}

/* BASE+tlt: the base's driver and sample accounting, TLT's keys in its
 * rollouts, the drafter carried across its steps as policy_run carries it. */
Test(policy_carry, tlt_combinations_carry_the_drafter, .timeout = 120)
{
    static const char *bases[] = {"sorted", "partial", "tailbatch", "async"};
    ts_err e = {{0}};
    trace *tr[3];
    load(3, tr);
    size_t nc, nr;
    const policy *const *co = policy_combos(&nc), *const *reg = policy_all(&nr);
    cr_assert_eq(nc, 4);
    for (size_t i = 0; i < nr; i++)
        cr_assert_null(strchr(reg[i]->name, '+'), "combinations stay out of the default list");
    cr_assert_null(policy_find("verl+tlt"));
    cr_assert_null(policy_find("tlt+tlt"));
    cr_assert_null(policy_find("partial+"));
    for (size_t i = 0; i < nc; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s+tlt", bases[i]);
        const policy *b = policy_find(bases[i]), *c = policy_find(name);
        cr_assert_not_null(c, "%s", name);
        cr_assert_eq(c, co[i]);
        cr_assert_eq(c->run, b->run, "%s runs %s's driver", name, bases[i]);
        cr_assert_eq(c->lossless, b->lossless);
        scenario x = scn, y = scn;
        c->apply(&x);
        b->apply(&y);
        cr_assert_str_eq(x.spec_mode, "adaptive");
        cr_assert(x.spot && x.sp.ngram);
        cr_assert_str_eq(y.spec_mode, "off");

        multistep_result r, p;
        cr_assert_eq(policy_run(&scn, c, &hw, &m7, tr, 3, 1, &r, NULL, &e), 0, "%s: %s", name,
                     e.msg);
        cr_assert_eq(policy_run(&scn, b, &hw, &m7, tr, 3, 1, &p, NULL, &e), 0, "%s", e.msg);
        cr_assert_eq(r.quality[0], scn.sp.quality, "%s", name);
        int64_t spec = 0, drafter = 0;
        for (int k = 0; k < 3; k++) {
            spec += r.step[k].ro.spec_iterations;
            drafter += r.step[k].ro.drafter_gpu_steps;
            cr_assert_eq(p.quality[k], 0.0, "%s decodes plainly", bases[i]);
            cr_assert_eq(p.step[k].ro.spec_iterations, 0);
            if (k > 0)
                cr_assert_eq(r.quality[k],
                             drafter_next_quality(&scn.dp, r.quality[k - 1],
                                                  (double)r.step[k - 1].ro.drafter_gpu_steps),
                             "%s step %d", name, k);
        }
        cr_assert_gt(spec, 0, "%s speculates in its tail", name);
        /* a replica out of work trains the drafter; partial and async keep
         * theirs busy (over-provisioned), so only a full tail is sure to */
        if (c->lossless)
            cr_assert_gt(drafter, 0, "%s's spot trainer trains", name);
        /* the same sample accounting: what was generated was trained, is
         * pending or was thrown away, and the same prompts train */
        cr_assert_eq(generated(&r), r.trained_tokens + r.pending_tokens + r.wasted_tokens, "%s",
                     name);
        /* partial tops up to a fixed number in flight, async to its staleness
         * bound, sorted launches the step's prompts: the same launches
         * whatever the speed (tailbatch's long rounds come when enough
         * prompts are deferred, which speed changes) */
        if (strcmp(bases[i], "tailbatch"))
            cr_assert_eq(r.launched_groups, p.launched_groups, "%s", name);
        if (c->lossless)
            cr_assert_eq(r.trained_tokens, p.trained_tokens);
        multistep_result_free(&r);
        multistep_result_free(&p);
    }
    unload(3, tr);
}

/* One step misstates the policies that carry work: compare and plan say so
 * on stderr, naming them, and stay quiet with enough steps or none of them. */
Test(policy_carry, one_step_of_a_carrying_policy_gets_a_note, .timeout = 120)
{
    char *a = run_capture("build/tailsim compare build/test-policy-carry.ini --policies "
                          "verl,sorted,partial,async+tlt 2>&1 >/dev/null");
    cr_assert(strstr(a, "note: partial, async+tlt carry work across steps, so 1 step misstates "
                        "them") && strstr(a, "--steps 5 or more"), "%s", a);
    char *b = run_capture("build/tailsim compare build/test-policy-carry.ini --policies "
                          "verl,partial --steps 5 2>&1 >/dev/null");
    cr_assert_str_eq(b, "");
    char *c = run_capture("build/tailsim compare build/test-policy-carry.ini --policies "
                          "verl,tlt,sorted+tlt 2>&1 >/dev/null");
    cr_assert_str_eq(c, "");
    char *d = run_capture("build/tailsim plan build/test-policy-carry.ini --gpus 8 --tp 2 "
                          "--policies verl,tailbatch --steps 2 2>&1 >/dev/null");
    cr_assert(strstr(d, "tailsim plan: note: tailbatch carries work across steps, so 2 steps "
                        "misstate it"), "%s", d);
    free(a);
    free(b);
    free(c);
    free(d);
}

Test(policy_carry, compare_prints_the_off_policy_cost, .timeout = 120)
{
    char *a = run_capture("build/tailsim compare build/test-policy-carry.ini --policies "
                          "verl,sorted,partial,tailbatch,async --steps 3 --json");
    cr_assert(strstr(a, "\"policy\": \"async\"") && strstr(a, "\"policy\": \"partial\""), "%s", a);
    json_error_t je;
    json_t *o = json_loads(a, 0, &je);
    cr_assert_not_null(o, "%s", je.text);
    json_t *ps = json_object_get(o, "policies");
    cr_assert_eq(json_array_size(ps), 5);
    for (size_t i = 0; i < 5; i++) {
        json_t *p = json_array_get(ps, i);
        const char *name = json_string_value(json_object_get(p, "policy"));
        json_t *offj = json_object_get(p, "off_policy_fraction");
        cr_assert(name && json_is_number(offj), "row %zu lacks policy or off_policy_fraction", i);
        double off = json_number_value(offj);
        if (!strcmp(name, "partial") || !strcmp(name, "async"))
            cr_assert_gt(off, 0.0, "%s", name);
        else
            cr_assert_eq(off, 0.0, "%s", name);
        /* each step's figures, whose mean is the row's */
        json_t *st = json_object_get(json_object_get(p, "per_step"), "step_s");
        cr_assert_eq(json_array_size(st), 3, "%s: per_step.step_s", name);
        double sum = 0;
        for (size_t k = 0; k < 3; k++)
            sum += json_number_value(json_array_get(st, k));
        double mean = json_number_value(json_object_get(p, "step_s"));
        cr_assert_lt(fabs(sum / 3 - mean), 1e-9 * mean, "%s", name);
    }
    json_decref(o);
    free(a);
}

/* compare --per-step: a row per policy with its step time in each RL step,
 * whose mean is the table's step_s. */
Test(policy_carry, compare_per_step_table, .timeout = 120)
{
    char *a = run_capture("build/tailsim compare build/test-policy-carry.ini --policies "
                          "verl,tailbatch+tlt --steps 3 --per-step 2>/dev/null");
    const char *t = strstr(a, "\nstep_s per RL step\n");
    cr_assert_not_null(t, "%s", a);
    static const char *names[] = {"verl", "tailbatch+tlt"};
    for (int i = 0; i < 2; i++) {
        char key[64];
        snprintf(key, sizeof key, "\n%s ", names[i]);
        const char *mean_row = strstr(a, key), *row = strstr(t, key);
        cr_assert(mean_row && row && mean_row < t, "%s", a);
        double mean, x[3];
        cr_assert_eq(sscanf(mean_row + strlen(key), "%lf", &mean), 1);
        cr_assert_eq(sscanf(row + strlen(key), "%lf %lf %lf", &x[0], &x[1], &x[2]), 3, "%s", row);
        cr_assert_lt(fabs((x[0] + x[1] + x[2]) / 3 - mean), 0.01, "%s: %s", names[i], a);
    }
    free(a);
}

Test(policy_carry, steps_from_a_trace_directory_in_name_order)
{
    const char *dir = "build/test-policy-carry-dir";
    char p[256];
    mkdir(dir, 0755);
    /* step_10 must come after step_2: shorter names first */
    const int ids[] = {10, 2, 1};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/step_%d.csv", dir, ids[i]);
        FILE *f = fopen(p, "w");
        cr_assert_not_null(f);
        fprintf(f, "step,prompt_id,prompt_tokens,response_tokens\n%d,0,10,%d\n", ids[i],
                100 + ids[i]);
        fclose(f);
    }
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("not a trace\n", f);
    fclose(f);
    scenario s = scn;
    ts_err e = {{0}};
    trace *tr[4]; /* room for the 4-step request that must fail */
    cr_assert_eq(policy_load_steps(&s, dir, 3, tr, &e), 0, "%s", e.msg);
    cr_assert_eq(tr[0]->prompts[0].step, 1);
    cr_assert_eq(tr[1]->prompts[0].step, 2);
    cr_assert_eq(tr[2]->prompts[0].step, 10);
    cr_assert_eq(tr[2]->prompts[0].resp[0], 110);
    unload(3, tr);
    cr_assert_eq(policy_load_steps(&s, dir, 4, tr, &e), -1);
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/step_%d.csv", dir, ids[i]);
        remove(p);
    }
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    remove(p);
    cr_assert_eq(policy_load_steps(&s, dir, 1, tr, &e), -1);
    cr_assert(strstr(e.msg, "no .jsonl or .csv"), "%s", e.msg);
    rmdir(dir);
}

/* The real PolyTrace DAPO steps (../shared): over 5 steps tailbatch runs 4
 * short rounds and 1 long round and so trains exactly the prompts of the 5
 * steps; partial conserves tokens; async stays within its bound. */
Test(policy_carry, polytrace_dapo_five_steps, .timeout = 120)
{
    char path[1024];
    shared_path(path, sizeof path, "traces/polytrace-dapo-32b/step_4.jsonl");
    scenario s;
    hw_desc h;
    llm_desc m;
    ts_err e = {{0}};
    load_scenario_hw_llm("dapo-32b-polytrace", &s, &h, &m);
    trace *tr[5];
    cr_assert_eq(policy_load_steps(&s, NULL, 5, tr, &e), 0, "%s", e.msg);
    int64_t tokens = 0;
    for (int k = 0; k < 5; k++) {
        cr_assert_eq(tr[k]->prompts[0].step, k);
        for (size_t i = 0; i < tr[k]->n_prompts; i++)
            for (int32_t j = 0; j < tr[k]->prompts[i].n_resp; j++)
                tokens += tr[k]->prompts[i].resp[j] < s.max_response ? tr[k]->prompts[i].resp[j]
                                                                      : s.max_response;
    }
    multistep_result r;
    cr_assert_eq(policy_run(&s, policy_find("tailbatch"), &h, &m, tr, 5, 1, &r, NULL, &e), 0,
                 "%s", e.msg);
    cr_assert_eq(r.launched_groups, 5 * 96);
    cr_assert_eq(r.trained_groups, 5 * 96);
    cr_assert_eq(r.trained_tokens, tokens);
    multistep_result_free(&r);
    cr_assert_eq(policy_run(&s, policy_find("partial"), &h, &m, tr, 5, 1, &r, NULL, &e), 0,
                 "%s", e.msg);
    cr_assert_eq(generated(&r), r.trained_tokens + r.pending_tokens);
    cr_assert_gt(r.off_policy_fraction, 0);
    multistep_result_free(&r);
    cr_assert_eq(policy_run(&s, policy_find("async"), &h, &m, tr, 5, 1, &r, NULL, &e), 0,
                 "%s", e.msg);
    cr_assert_leq(r.max_staleness, s.max_staleness);
    cr_assert_eq(generated(&r), r.trained_tokens + r.pending_tokens);
    multistep_result_free(&r);
    unload(5, tr);
}

Test(policy_carry, async_needs_a_rollout_group_and_a_trainer_gpu)
{
    ts_err e = {{0}};
    trace *tr[1];
    load(1, tr);
    scenario s = scn;
    s.gpus = 2; /* one TP-2 group: nothing left to train on */
    multistep_result r;
    cr_assert_eq(policy_run(&s, policy_find("async"), &hw, &m7, tr, 1, 1, &r, NULL, &e), -1);
    cr_assert(strstr(e.msg, "rollout_pool") && strstr(e.msg, "test-policy-carry.ini"), "%s",
              e.msg);
    cr_assert_null(r.step);
    cr_assert_eq(scenario_set(&s, "policy.rollout_pool=1.5", &e), -1);
    cr_assert(strstr(e.msg, "policy.rollout_pool"), "%s", e.msg);
    unload(1, tr);
}

/* Search-R1's multi-turn steps (issue 20): partial (APRIL) and async
 * (AReaL) carry trajectories at a turn boundary.  Every token generated is
 * trained, pending, or was in a turn a cut stopped part-way (discarded: the
 * trajectory resumes at that turn's start); a carried partial turn would
 * count twice and break the sum.  Async's staleness stays within its bound,
 * and every trained trajectory is trained whole (the carry checks each
 * one's turn count).  Skipped without ../shared. */
Test(policy_carry, search_r1_turns_partial_and_async, .timeout = 120)
{
    char path[1024];
    shared_path(path, sizeof path, "traces/polytrace-search-r1-7b/step_3.jsonl");
    scenario s;
    hw_desc h;
    llm_desc m;
    ts_err e = {{0}};
    load_scenario_hw_llm("search-r1-7b-polytrace", &s, &h, &m);
    trace *tr[4];
    cr_assert_eq(policy_load_steps(&s, NULL, 4, tr, &e), 0, "%s", e.msg);
    const char *pol[] = {"partial", "async", "partial+tlt"};
    for (int x = 0; x < 3; x++) {
        multistep_result r;
        cr_assert_eq(policy_run(&s, policy_find(pol[x]), &h, &m, tr, 4, 1, &r, NULL, &e), 0,
                     "%s: %s", pol[x], e.msg);
        int64_t cut = 0;
        for (int k = 0; k < 4; k++)
            cut += r.step[k].ro.cut_tokens;
        cr_assert_eq(r.wasted_tokens, cut, "%s", pol[x]);
        cr_assert_eq(generated(&r), r.trained_tokens + r.pending_tokens + r.wasted_tokens,
                     "%s", pol[x]);
        cr_assert_gt(r.pending_groups, 0, "%s: something is carried at the end", pol[x]);
        cr_assert_eq(r.trained_groups, 4 * 256, "%s", pol[x]);
        if (x == 1) {
            cr_assert_leq(r.max_staleness, s.max_staleness);
            cr_assert_geq(r.max_staleness, 1, "rollout runs a version behind");
        }
        multistep_result_free(&r);
    }
    unload(4, tr);
}
