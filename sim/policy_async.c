/*
 * Policy `async`: AReaL's asynchronous RL (Fu et al., "AReaL: A Large-Scale
 * Asynchronous Reinforcement Learning System for Language Reasoning",
 * arXiv 2505.24298; github.com/inclusionAI/AReaL).  The GPUs split into a
 * rollout pool (policy.rollout_share of them, whole TP groups) and a trainer
 * pool.  The rollout never waits for a step: step k's segment runs until
 * the step's prompt count of groups is complete, the unfinished ones keep
 * their tokens and continue in the next segment after the weight update
 * (AReaL's interruptible generation: re-prefill prompt + tokens with the new
 * weights), and the trainer trains the complete groups while the next
 * segment generates.  Rollout runs one policy version behind the trainer
 * (lag 1), so even a fresh sample is one version stale.  Staleness is
 * bounded by policy.max_staleness (eta) as AReaL does: at most
 * (version + eta + 1) x batch prompts are ever launched, and a segment also
 * waits for every group that would otherwise train more than eta versions
 * behind.  Step time is the pipeline's period, max(rollout segment,
 * training + weight sync): throughput-limited.  The bubble metrics cover
 * the rollout pool; the trainer pool's idle time is step_s minus its phases.
 */
#include <math.h>
#include <stdio.h>

#include "models/comm.h"
#include "models/memory.h"
#include "sim/policy_carry.h"

static void async_apply(scenario *s)
{
    snprintf(s->spec_mode, sizeof s->spec_mode, "off");
    s->spot = 0;
}

/* Idle interval of gpus [g0, g1) from t0 to t1 in phase ph.  Returns 0 or -1. */
static int idle(run_record *rec, int g0, int g1, int ph, double t0, double t1)
{
    for (int g = g0; rec && g < g1 && t0 < t1; g++)
        if (run_add_interval(rec, g, ph, TL_IDLE, t0, t1))
            return -1;
    return 0;
}

static int async_step(carry_state *cs, const scenario *sr, const scenario *st, const hw_desc *hw,
                      const llm_desc *m, int k, int P, int full, rlstep_result *res,
                      run_record *rec, ts_err *e)
{
    int eta = sr->max_staleness;
    for (size_t i = 0; i < cs->ng; i++) {
        int v = cs->g[i].launched - 1 > 0 ? cs->g[i].launched - 1 : 0;
        cs->g[i].must = k + 1 - v > eta;
    }
    if (carry_rollout(cs, sr, hw, m, k, P, res, rec, e))
        return -1;
    trace *batch = NULL;
    if (carry_take_done(cs, k, P, &batch, e)) {
        rlstep_result_free(res);
        return -1;
    }
    res->step_s = res->ro.makespan_s;
    if (!full) {
        trace_free(batch);
        return 0;
    }
    rlstep_result tr;
    size_t first = rec ? rec->n_tl : 0;
    int rc = rlstep_train(st, hw, m, batch, &tr, rec, e);
    trace_free(batch);
    if (rc) {
        rlstep_result_free(res);
        return -1;
    }
    int gr = sr->gpus, gall = sr->gpus + st->gpus;
    policy_shift_record(rec, first, 0.0, gr);
    double sync = comm_allgather(hw, mem_weights(m, sr->tp), gall);
    double T = tr.step_s, R = res->ro.makespan_s;
    res->step_s = fmax(R, T + sync);
    for (int ph = PH_REWARD; ph < PH_COUNT; ph++) {
        res->phase_s[ph] = tr.phase_s[ph];
        res->phase_t0[ph] = tr.phase_t0[ph];
    }
    res->phase_s[PH_SYNC] = sync;
    res->phase_t0[PH_SYNC] = T;
    res->train_imbalance = tr.train_imbalance;
    res->gpus = gall;
    for (int g = gr; rec && g < gall; g++)
        if (run_add_interval(rec, g, PH_SYNC, TL_BUSY, T, T + sync))
            goto oom;
    if (idle(rec, 0, gr, PH_ROLLOUT, R, res->step_s) ||
        idle(rec, gr, gall, PH_SYNC, T + sync, res->step_s))
        goto oom;
    return 0;
oom:
    rlstep_result_free(res);
    return ts_errf(e, "out of memory for the timeline");
}

static int async_run(const scenario *s, const hw_desc *hw, const llm_desc *m, trace *const *steps,
                     int n, int full, multistep_result *res, run_record *rec, ts_err *e)
{
    int gr = (int)floor(s->gpus * s->rollout_share / s->tp) * s->tp;
    if (gr >= s->gpus)
        gr = (s->gpus - 1) / s->tp * s->tp;
    if (gr < s->tp)
        return ts_errf(e, "%s: policy async: %d GPUs at rollout_share %.2f leave no whole TP "
                          "group of %d for rollout and at least one GPU for training",
                       s->path, s->gpus, s->rollout_share, s->tp);
    scenario sr = *s, st = *s;
    sr.gpus = gr;
    st.gpus = s->gpus - gr;
    carry_state cs;
    carry_init(&cs, steps, n, s->max_response, 1, res);
    double t0 = 0;
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        int P = (int)steps[k]->n_prompts;
        /* AReaL's launch bound: (version + eta + 1) x batch prompts in all */
        int64_t v = k - 1 > 0 ? k - 1 : 0;
        int64_t cap = (v + s->max_staleness + 1) * (int64_t)P;
        int64_t more = cap - res->launched_groups;
        sr.seed = s->seed + (uint64_t)k;
        size_t first = rec ? rec->n_tl : 0;
        rc = carry_launch(&cs, k, more > 0 ? (int)more : 0, e);
        if (!rc)
            rc = async_step(&cs, &sr, &st, hw, m, k, P, full, &res->step[k], rec, e);
        if (rc) {
            ts_err_prefix(e, "step %d: ", k);
            break;
        }
        policy_shift_record(rec, first, t0, 0);
        res->t0[k] = t0;
        t0 += res->step[k].step_s;
    }
    carry_summarize(&cs);
    carry_finish(&cs);
    return rc;
}

const policy policy_async = {
    "async", "AReaL: disjoint rollout/trainer pools, interruptible rollout, bounded staleness",
    "AReaL (arXiv 2505.24298), github.com/inclusionAI/AReaL", async_apply, 0};
const policy_driver policy_async_driver = {&policy_async, async_run};
