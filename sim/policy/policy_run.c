/*
 * The policy registry and the multi-step driver (see policy.h).
 *
 * policy_run() replays N RL steps one after another under one policy.  What
 * crosses a step boundary is the drafter: step k speculates with quality q_k
 * (spec.quality for k = 0), and q_{k+1} = drafter_next_quality(q_k, n_k),
 * where n_k is the spot trainer's drafter GPU-steps in step k (0 for
 * policies without one).  Every step is otherwise independent and seeded
 * from (seed, step), so a run of N steps repeats its first N - 1 steps'
 * results exactly when N grows.  The synchronous policies train exactly the
 * samples they generate: off-policy fraction and staleness are 0.
 *
 * A policy with a driver (policy.run: sorted, partial, tailbatch, async)
 * runs its N steps itself, carrying the drafter the same way
 * (policy_drafter_use/next; it matters in their BASE+tlt combinations);
 * those that carry prompts (sim/policy/policy_carry.c) carry the partial-rollout
 * buffer or the async queue across steps, so their steps are not
 * independent.  Each step is still seeded from (seed, step), and the run is
 * deterministic for a seed.
 */
#include "sim/policy/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/gen.h"
#include "traces/reward.h"

extern const policy policy_verl, policy_tlt_base, policy_tlt, policy_sorted, policy_partial,
    policy_tailbatch, policy_async, policy_sorted_tlt, policy_partial_tlt, policy_tailbatch_tlt,
    policy_async_tlt;

static const policy *const registry[] = {&policy_verl,    &policy_tlt_base, &policy_tlt,
                                         &policy_sorted,  &policy_partial,  &policy_tailbatch,
                                         &policy_async};
#define N_POLICIES (sizeof registry / sizeof registry[0])

static const policy *const combos[] = {&policy_sorted_tlt, &policy_partial_tlt,
                                       &policy_tailbatch_tlt, &policy_async_tlt};
#define N_COMBOS (sizeof combos / sizeof combos[0])

const policy *policy_find(const char *name)
{
    for (size_t i = 0; i < N_POLICIES; i++)
        if (!strcmp(registry[i]->name, name))
            return registry[i];
    for (size_t i = 0; i < N_COMBOS; i++)
        if (!strcmp(combos[i]->name, name))
            return combos[i];
    return NULL;
}

const policy *const *policy_all(size_t *n)
{
    *n = N_POLICIES;
    return registry;
}

const policy *const *policy_combos(size_t *n)
{
    *n = N_COMBOS;
    return combos;
}

void policy_drafter_use(scenario *s, multistep_result *res, int k, double q)
{
    s->sp.quality = q;
    res->quality[k] = strcmp(s->spec_mode, "off") ? q : 0.0;
}

double policy_drafter_next(const scenario *s, const rlstep_result *st, double q)
{
    return drafter_next_quality(&s->dp, q, (double)st->ro.drafter_gpu_steps);
}

/* Adds the recorded reward times of trace.reward_file (when set) to all.
 * Returns 0 or -1. */
static int load_reward_key(const scenario *s, trace *all, ts_err *e)
{
    if (!s->trace_reward_file[0])
        return 0;
    char path[1024];
    scenario_resolve_path(s, s->trace_reward_file, path, sizeof path);
    const char *base = strrchr(path, '/');
    int32_t ns;
    if (!reward_name_step(base ? base + 1 : path, &ns))
        ns = -1;
    trace *rw = trace_new();
    size_t n0 = all->n_reward, j;
    int rc = -1;
    if (!rw) {
        ts_errf(e, "%s: out of memory", path);
        goto done;
    }
    if (reward_load(path, ns, rw, e))
        goto done;
    if (trace_append(all, rw, e)) {
        ts_err_prefix(e, "%s: ", path);
        goto done;
    }
    int orphan = reward_orphan(all, n0, &j);
    if (orphan < 0) {
        ts_errf(e, "%s: out of memory", path);
        goto done;
    }
    if (orphan) {
        ts_errf(e, "%s:%ld: field 'step': step %d has a reward time but no prompts in the "
                   "trace", path, all->reward[j].line, all->reward[j].step);
        goto done;
    }
    rc = 0;
done:
    trace_free(rw);
    if (rc)
        all->n_reward = n0;
    return rc;
}

int policy_load_steps(const scenario *s, const char *override, int n, trace **out, ts_err *e)
{
    for (int k = 0; k < n; k++)
        out[k] = NULL;
    char path[1024];
    const char *file = override;
    if (!file && scenario_trace_path(s, path, sizeof path) == 0)
        file = path;
    if (!file) {
        if (s->trace_reward_file[0])
            return ts_errf(e, "%s: trace.reward_file needs a trace to go with it (trace.file or "
                              "--trace), not a generated one", s->path);
        for (int k = 0; k < n; k++) {
            gen_params p;
            if (scenario_gen_params(s, &p, e))
                goto fail;
            p.seed = s->seed + (uint64_t)k;
            if (!(out[k] = gen_trace(&p, e)))
                goto fail;
        }
        return 0;
    }
    trace *all = NULL;
    if (trace_load_path(file, &all, e))
        return -1;
    if (load_reward_key(s, all, e)) {
        trace_free(all);
        return -1;
    }
    /* distinct steps in file order, from trace.step on */
    int32_t *ids = malloc((all->n_prompts + 1) * sizeof *ids);
    int found = 0, started = s->trace_step < 0;
    if (!ids) {
        trace_free(all);
        return ts_errf(e, "out of memory");
    }
    for (size_t i = 0; i < all->n_prompts && found < n; i++) {
        int32_t st = all->prompts[i].step;
        if (!started && st == s->trace_step)
            started = 1;
        if (!started)
            continue;
        int seen = 0;
        for (int j = 0; j < found; j++)
            seen |= ids[j] == st;
        if (!seen)
            ids[found++] = st;
    }
    int rc = 0;
    if (found < n) {
        rc = ts_errf(e, "%s: %d RL steps asked for, the trace has %d from step %d on", file, n,
                     found, s->trace_step);
    } else {
        for (int k = 0; k < n && !rc; k++)
            if (!(out[k] = trace_select_step(all, ids[k], e)))
                rc = -1;
        /* recorded reward: for every step replayed, or for none */
        for (int k = 0; k < n && !rc && all->n_reward; k++)
            if (out[k]->n_reward == 0)
                rc = ts_errf(e, "%s: step %d has no recorded reward time, though the trace "
                                "records it for step %d (every step replayed needs its "
                                "reward_timings_step_%d.jsonl records, or no step any)",
                             file, ids[k], all->reward[0].step, ids[k]);
    }
    free(ids);
    trace_free(all);
    if (rc)
        goto fail;
    return 0;
fail:
    for (int k = 0; k < n; k++) {
        trace_free(out[k]);
        out[k] = NULL;
    }
    return -1;
}

void multistep_result_free(multistep_result *res)
{
    if (!res)
        return;
    if (res->step)
        for (int k = 0; k < res->steps; k++)
            rlstep_result_free(&res->step[k]);
    free(res->step);
    free(res->quality);
    free(res->t0);
    memset(res, 0, sizeof *res);
}

int policy_result_alloc(multistep_result *res, int n, ts_err *e)
{
    memset(res, 0, sizeof *res);
    res->step = calloc((size_t)n, sizeof *res->step);
    res->quality = calloc((size_t)n, sizeof *res->quality);
    res->t0 = calloc((size_t)n, sizeof *res->t0);
    if (!res->step || !res->quality || !res->t0) {
        multistep_result_free(res);
        return ts_errf(e, "out of memory");
    }
    res->steps = n;
    return 0;
}

void policy_apply_plain(scenario *s)
{
    snprintf(s->spec_mode, sizeof s->spec_mode, "off");
    s->spot = 0;
}

void policy_apply_plain_tlt(scenario *s)
{
    policy_apply_plain(s);
    policy_apply_tlt(s);
}

void policy_shift_record(run_record *rec, size_t first, double dt, int gpus)
{
    if (!rec)
        return;
    for (size_t i = first; i < rec->n_tl; i++) {
        rec->tl[i].t0 += dt;
        rec->tl[i].t1 += dt;
        rec->tl[i].gpu += gpus;
    }
}

void policy_count_sync_step(multistep_result *res, const trace *t, const rlstep_result *st)
{
    res->launched_groups += (int64_t)t->n_prompts;
    res->trained_groups += (int64_t)t->n_prompts;
    res->trained_tokens += st->ro.decode_tokens; /* lossless: the capped trace lengths */
}

/* What rollout.max_response cut from each step's trace, into its result
 * (every driver's steps alike).  Cannot fail. */
static void count_truncation(const scenario *s, trace *const *steps, multistep_result *res)
{
    for (int k = 0; k < res->steps; k++)
        trace_truncation(steps[k], s->max_response, &res->step[k].truncated_responses,
                         &res->step[k].truncated_tokens);
}

/* The steps' starts on rec's timeline, when there are several. */
static int record_steps(run_record *rec, multistep_result *res, ts_err *e)
{
    for (int k = 0; rec && res->steps > 1 && k < res->steps; k++)
        if (run_add_step(rec, res->t0[k])) {
            multistep_result_free(res);
            return ts_errf(e, "out of memory for the timeline");
        }
    return 0;
}

int policy_check_placement(const scenario *s, const policy *p, const char *name,
                           trace *const *steps, int n, ts_err *e)
{
    rollout_placement rule;
    if (rollout_placement_parse(s->placement, &rule))
        return ts_errf(e, "%s: key 'rollout.placement': not balanced, trace or round-robin",
                       s->path);
    if (rule != PLACE_TRACE || (p && p->run == policy_sorted.run))
        return 0; /* balanced and round-robin place anything; sorted places itself */
    int gpus = p && p->run == policy_async.run ? policy_async_pool(s) : s->gpus;
    int replicas = gpus / s->tp, ranks = 0;
    if (replicas < 1)
        return 0; /* the policy's own error */
    for (int k = 0; k < n; k++) {
        int r = rollout_trace_ranks(steps[k], NULL);
        if (r > ranks)
            ranks = r;
    }
    for (int k = 0; k < n; k++) {
        int32_t *out = malloc((steps[k]->n_prompts + 1) * sizeof *out);
        if (!out)
            return ts_errf(e, "out of memory");
        int rc = rollout_place(steps[k], replicas, rule, ranks, out, e);
        free(out);
        if (rc) {
            if (gpus != s->gpus)
                ts_err_prefix(e, "policy async (a rollout pool of %d GPUs): ", gpus);
            if (n > 1)
                ts_err_prefix(e, "step %d: ", k);
            if (name)
                ts_err_prefix(e, "%s: ", name);
            return -1;
        }
    }
    return 0;
}

int policy_run(const scenario *s0, const policy *p, const hw_desc *hw, const llm_desc *m,
               trace *const *steps, int n, int full, multistep_result *res, run_record *rec,
               ts_err *e)
{
    return policy_run_progress(s0, p, hw, m, steps, n, full, res, rec, NULL, NULL, e);
}

int policy_run_progress(const scenario *s0, const policy *p, const hw_desc *hw,
                        const llm_desc *m, trace *const *steps, int n, int full,
                        multistep_result *res, run_record *rec, policy_progress_fn progress,
                        void *pctx, ts_err *e)
{
    memset(res, 0, sizeof *res);
    if (n < 1)
        return ts_errf(e, "need at least one RL step");
    if (p && p->run && !p->turns)
        for (int k = 0; k < n; k++)
            if (trace_has_turns(steps[k]))
                return ts_errf(e, "policy '%s' does not support multi-turn traces yet: its "
                                  "driver reorders or carries responses across steps and would "
                                  "ignore their turns (step %d of the trace has turns); use "
                                  "verl, tlt, partial or async", p->name, k);
    if (policy_check_placement(s0, p, NULL, steps, n, e))
        return -1;
    scenario s = *s0;
    if (p)
        p->apply(&s);
    if (policy_result_alloc(res, n, e))
        return -1;
    if (p && p->run) {
        if (p->run(&s, hw, m, steps, n, full, res, rec, e)) {
            multistep_result_free(res);
            return -1;
        }
        if (progress)
            progress(pctx, n, n);
        count_truncation(&s, steps, res);
        return record_steps(rec, res, e);
    }
    double q = s.sp.quality, t0 = 0;
    for (int k = 0; k < n; k++) {
        policy_drafter_use(&s, res, k, q);
        s.seed = s0->seed + (uint64_t)k;
        res->t0[k] = t0;
        size_t first = rec ? rec->n_tl : 0;
        int rc = full ? rlstep_run(&s, hw, m, steps[k], &res->step[k], rec, e)
                      : rlstep_rollout(&s, hw, m, steps[k], &res->step[k], rec, e);
        if (rc) {
            ts_err_prefix(e, "step %d: ", k);
            multistep_result_free(res);
            return -1;
        }
        policy_shift_record(rec, first, t0, 0);
        t0 += res->step[k].step_s;
        q = policy_drafter_next(&s, &res->step[k], q);
        policy_count_sync_step(res, steps[k], &res->step[k]);
        if (progress)
            progress(pctx, k + 1, n);
    }
    count_truncation(&s, steps, res);
    return record_steps(rec, res, e);
}
