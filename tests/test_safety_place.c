/*
 * Placement of a user's trace (issue 17, item 1): the dp_rank a rollout log
 * recorded must not pin its prompts to the recording's ranks on a larger
 * cluster.  A two-rank trace on a 32-GPU scenario at TP 2 (16 replicas):
 * under the default placement (balanced) every replica gets work, in the
 * run's responses and in every GPU's busy time on the timeline; round-robin
 * too; `rollout.placement = trace` refuses (non-zero exit, the message naming
 * the trace, its 2 ranks, the 16 replicas and `balanced`) and, on 2
 * replicas, pins every prompt to its recorded rank.  The policies that place
 * rollout segments of their own (partial, async's pool) follow the same
 * rule; sorted's own placement overrides the scenario's.  Each test has a
 * fresh temporary directory.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sim/policy/policy.h"
#include "sim/policy/policy_carry.h"
#include "sim/rlstep.h"
#include "tests/helpers.h"
#include "traces/trace.h"

static char tmpdir[256];

static void setup(void)
{
    tmpdir_create(tmpdir, sizeof tmpdir, "safety-place");
}

static void teardown(void)
{
    tmpdir_remove(tmpdir);
}

TestSuite(safety_place, .init = setup, .fini = teardown, .timeout = 240);

#define PROMPTS 64
#define GROUP 4

/* A two-rank rollout log as PolyTrace records it: prompts 0..31 served by
 * dp_rank 0, 32..63 by dp_rank 1, GROUP responses each; written as CSV into
 * tmpdir/two-rank.csv (path into buf). */
static void two_rank_trace(char *buf, size_t n)
{
    snprintf(buf, n, "%s/two-rank.csv", tmpdir);
    FILE *f = fopen(buf, "w");
    cr_assert_not_null(f);
    fprintf(f, "step,prompt_id,prompt_tokens,response_tokens,dp_rank\n");
    for (int i = 0; i < PROMPTS; i++)
        for (int j = 0; j < GROUP; j++)
            fprintf(f, "0,%d,%d,%d,%d\n", i, 100 + i % 7, 300 + (i * 37 + j * 101) % 900,
                    i < PROMPTS / 2 ? 0 : 1);
    cr_assert_eq(fclose(f), 0);
}

/* A scenario of `gpus` H100s at TP 2, placement pl ("" for the default),
 * written into tmpdir/NAME.ini (path into buf). */
static void scenario_file(char *buf, size_t n, const char *name, int gpus, const char *pl)
{
    snprintf(buf, n, "%s/%s.ini", tmpdir, name);
    char text[1024];
    snprintf(text, sizeof text,
             "[cluster]\ngpus = %d\nhw = h100\n[model]\nname = qwen2.5-7b\n[rollout]\ntp = 2\n"
             "mem_util = 0.85\n%s%s%s[train]\nmicro_batch_tokens = 32768\n",
             gpus, pl[0] ? "placement = " : "", pl, pl[0] ? "\n" : "");
    write_aside(buf, text);
}

/* Runs cmd through sh, stderr into *err (free it).  Returns the exit status. */
static int sh_err(const char *cmd, char **err)
{
    char e[512], full[4096];
    snprintf(e, sizeof e, "%s/cmd.err", tmpdir);
    snprintf(full, sizeof full, "( %s ) </dev/null >/dev/null 2>%s", cmd, e);
    int st = system(full);
    FILE *f = fopen(e, "r");
    cr_assert_not_null(f);
    char *b = calloc(1, 8192);
    cr_assert_not_null(b);
    size_t k = fread(b, 1, 8191, f);
    b[k] = 0;
    fclose(f);
    *err = b;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Simulates the rollout of the two-rank trace on scenario scn under policy
 * p (NULL: the scenario's keys) and checks that all `replicas` replicas got
 * responses and every GPU was busy; returns the run's result (free it). */
static void run_lib(const char *scn, const policy *p, int steps, multistep_result *mr,
                    run_record **rec)
{
    char tp[512];
    two_rank_trace(tp, sizeof tp);
    scenario s;
    hw_desc hw;
    llm_desc m;
    load_scenario_hw_llm(scn, &s, &hw, &m);
    trace *t[8];
    ts_err e = {{0}};
    cr_assert_eq(policy_load_steps(&s, tp, 1, t, &e), 0, "%s", e.msg);
    for (int k = 1; k < steps; k++)
        t[k] = t[0];
    *rec = run_record_new();
    cr_assert_not_null(*rec);
    cr_assert_eq(policy_run(&s, p, &hw, &m, t, steps, 0, mr, *rec, &e), 0, "%s", e.msg);
    trace_free(t[0]);
}

/* The acceptance test: 16 replicas, the default placement, every replica and
 * GPU has work (before the fix only the two recorded ranks' replicas did). */
Test(safety_place, default_placement_uses_every_replica)
{
    char scn[512];
    scenario_file(scn, sizeof scn, "c32", 32, "");
    multistep_result mr;
    run_record *rec;
    run_lib(scn, NULL, 1, &mr, &rec);
    const rollout_result *ro = &mr.step[0].ro;
    cr_assert_eq(ro->replicas, 16);
    for (int r = 0; r < 16; r++)
        cr_expect_eq(ro->rep[r].responses, PROMPTS / 16 * GROUP, "replica %d: %d responses", r,
                     ro->rep[r].responses);
    /* every GPU is busy in the rollout on the timeline */
    double busy[32] = {0};
    for (size_t i = 0; i < rec->n_tl; i++)
        if (rec->tl[i].state == TL_BUSY && rec->tl[i].phase == PH_ROLLOUT)
            busy[rec->tl[i].gpu] += rec->tl[i].t1 - rec->tl[i].t0;
    for (int g = 0; g < 32; g++)
        cr_expect_gt(busy[g], 0, "GPU %d idle through the rollout", g);
    /* balanced: equal contiguous chunks, prompt i on replica i * 16 / 64 */
    for (size_t k = 0; k < rec->n_resp; k++)
        cr_expect_eq(rec->resp[k].replica, (int)(k / GROUP) / 4, "response %zu", k);
    multistep_result_free(&mr);
    run_record_free(rec);
}

/* round-robin too spreads the two ranks' prompts over all 16 replicas. */
Test(safety_place, round_robin_uses_every_replica)
{
    char scn[512];
    scenario_file(scn, sizeof scn, "rr32", 32, "round-robin");
    multistep_result mr;
    run_record *rec;
    run_lib(scn, NULL, 1, &mr, &rec);
    for (size_t k = 0; k < rec->n_resp; k++)
        cr_expect_eq(rec->resp[k].replica, (int)(k / GROUP) % 16, "response %zu", k);
    multistep_result_free(&mr);
    run_record_free(rec);
}

/* placement = trace with 2 recorded ranks on 16 replicas: the CLI refuses
 * with exit 1, naming the trace, both counts and the way out; nothing on
 * stdout and no --db written. */
Test(safety_place, trace_placement_mismatch_refused)
{
    char tp[512], scn[512], cmd[2048], db[600];
    two_rank_trace(tp, sizeof tp);
    scenario_file(scn, sizeof scn, "t32", 32, "trace");
    snprintf(db, sizeof db, "%s/runs.db", tmpdir);
    const char *cmds[] = {"rollout", "rlstep", "compare"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "build/tailsim %s '%s' --trace '%s'%s", cmds[i], scn, tp,
                 i < 2 ? " --db " : " --policies verl,partial,async");
        if (i < 2)
            strncat(cmd, db, sizeof cmd - strlen(cmd) - 1);
        char *err;
        cr_assert_eq(sh_err(cmd, &err), 1, "%s: %s", cmd, err);
        cr_expect(strstr(err, tp), "the trace's path is not named: %s", err);
        cr_expect(strstr(err, "2 rollout ranks") && strstr(err, "16 replicas") &&
                      strstr(err, "rollout.placement = balanced"),
                  "%s", err);
        free(err);
    }
    cr_expect_neq(access(db, F_OK), 0, "a refused run wrote %s", db);
    /* the library refuses the same way, whoever calls it */
    scenario s;
    hw_desc hw;
    llm_desc m;
    load_scenario_hw_llm(scn, &s, &hw, &m);
    trace *t;
    ts_err e = {{0}};
    cr_assert_eq(policy_load_steps(&s, tp, 1, &t, &e), 0, "%s", e.msg);
    rlstep_result r;
    cr_assert_eq(rlstep_rollout(&s, &hw, &m, t, &r, NULL, &e), -1);
    cr_expect(strstr(e.msg, "2 rollout ranks"), "%s", e.msg);
    /* a trace without ranks cannot be pinned either */
    for (size_t i = 0; i < t->n_prompts; i++)
        t->prompts[i].dp_rank = -1;
    cr_assert_eq(rlstep_rollout(&s, &hw, &m, t, &r, NULL, &e), -1);
    cr_expect(strstr(e.msg, "no dp_rank"), "%s", e.msg);
    trace_free(t);
}

/* placement = trace with 2 ranks on 2 replicas (4 GPUs at TP 2): every
 * prompt on its recorded rank. */
Test(safety_place, trace_placement_pins_when_counts_match)
{
    char scn[512];
    scenario_file(scn, sizeof scn, "t4", 4, "trace");
    multistep_result mr;
    run_record *rec;
    run_lib(scn, NULL, 1, &mr, &rec);
    cr_assert_eq(rec->n_resp, PROMPTS * GROUP);
    for (size_t k = 0; k < rec->n_resp; k++)
        cr_expect_eq(rec->resp[k].replica, (int)(k / GROUP) < PROMPTS / 2 ? 0 : 1,
                     "response %zu", k);
    multistep_result_free(&mr);
    run_record_free(rec);
}

/* The policies that place rollout segments themselves: partial's segments
 * (a subset of the prompts, maybe of one rank only) place as the whole trace
 * under `trace` on 2 replicas; async's rollout pool of 1 replica is refused
 * under `trace`, naming the pool; sorted's LPT placement overrides `trace`
 * (16 replicas, no refusal, every replica used). */
Test(safety_place, policies_follow_the_rule)
{
    char scn[512];
    multistep_result mr;
    run_record *rec;
    scenario_file(scn, sizeof scn, "p4", 4, "trace");
    run_lib(scn, policy_find("partial"), 3, &mr, &rec);
    multistep_result_free(&mr);
    run_record_free(rec);

    char tp[512], cmd[2048];
    two_rank_trace(tp, sizeof tp);
    snprintf(cmd, sizeof cmd, "build/tailsim rollout '%s' --trace '%s' --policy async", scn, tp);
    char *err;
    cr_assert_eq(sh_err(cmd, &err), 1, "%s", err);
    cr_expect(strstr(err, "rollout pool of 2 GPUs") && strstr(err, "1 replica"), "%s", err);
    free(err);

    scenario_file(scn, sizeof scn, "s32", 32, "trace");
    run_lib(scn, policy_find("sorted"), 1, &mr, &rec);
    for (int r = 0; r < 16; r++)
        cr_expect_gt(mr.step[0].ro.rep[r].responses, 0, "replica %d", r);
    multistep_result_free(&mr);
    run_record_free(rec);
}

/* A carrying policy's rollout segment that holds only rank 0's groups (rank
 * 1's are complete) is placed as the whole two-rank trace on 2 replicas, not
 * refused as a one-rank trace. */
Test(safety_place, carry_segment_places_as_the_whole)
{
    char tp[512], scn[512];
    two_rank_trace(tp, sizeof tp);
    scenario_file(scn, sizeof scn, "c4", 4, "trace");
    scenario s;
    hw_desc hw;
    llm_desc m;
    load_scenario_hw_llm(scn, &s, &hw, &m);
    trace *t;
    ts_err e = {{0}};
    cr_assert_eq(policy_load_steps(&s, tp, 1, &t, &e), 0, "%s", e.msg);
    multistep_result mr;
    cr_assert_eq(policy_result_alloc(&mr, 1, &e), 0);
    carry_state cs;
    carry_init(&cs, &t, 1, s.max_response, 0, &mr);
    cr_assert_eq(carry_launch(&cs, 0, PROMPTS, &e), 0, "%s", e.msg);
    for (size_t i = 0; i < cs.ng; i++)
        if (cs.g[i].p->dp_rank == 1)
            for (int32_t j = 0; j < cs.g[i].p->n_resp; j++)
                cs.g[i].gen[j] = cs.g[i].p->resp[j];
    rlstep_result r;
    cr_assert_eq(carry_rollout(&cs, &s, &hw, &m, 0, 0, &r, NULL, &e), 0, "%s", e.msg);
    cr_expect_eq(r.ro.rep[0].responses, PROMPTS / 2 * GROUP);
    cr_expect_eq(r.ro.rep[1].responses, 0);
    rlstep_result_free(&r);
    carry_finish(&cs);
    multistep_result_free(&mr);
    trace_free(t);
}
