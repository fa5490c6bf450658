/*
 * Policy `async`: AReaL's asynchronous RL (Fu et al., "AReaL: A Large-Scale
 * Asynchronous Reinforcement Learning System for Language Reasoning",
 * arXiv 2505.24298; github.com/inclusionAI/AReaL).  The GPUs split into a
 * rollout pool (policy.rollout_pool of them, whole TP groups) and a trainer
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
 * behind.  Defaults: eta 2 (AReaL's `max_head_offpolicyness` is 0,
 * synchronous, in its code and 2 to 4 in its examples; eta 0 here would be
 * verl, so the key starts at 1), rollout_pool 0.5 (an even split, assumed:
 * AReaL sizes its pools per job).  The two pools form a pipeline: segment k starts when the
 * rollout pool is free and version k - 1 exists (the update of batch k - 2
 * is done); the update of batch k starts when segment k is done and the
 * trainer is free, and ends with the weight sync.  A step's time is the time
 * between two updates, so the mean over the steps is the throughput-limited
 * period, pipeline fill included (step 0 has nothing to overlap).  The
 * rollout metrics (bubble, tail, utilization) cover the rollout pool's
 * segments; waiting for weights or for the trainer is on the timeline.
 */
#include <math.h>

#include "models/comm.h"
#include "models/memory.h"
#include "sim/policy/policy_carry.h"

/* Interval of gpus [g0, g1) from t0 to t1.  Returns 0 or -1. */
static int span(run_record *rec, int g0, int g1, int ph, int state, double t0, double t1)
{
    for (int g = g0; rec && g < g1 && t0 < t1; g++)
        if (run_add_interval(rec, g, ph, state, t0, t1))
            return -1;
    return 0;
}

/* The pipeline clock: when each pool is free (s, from the start of the run). */
typedef struct pipe_clock {
    double r_end;       /* rollout pool: end of the last segment */
    double t_end;       /* trainer: end of the last update (sync included) */
    double t_end_prev;  /* the update before that: segment k needs version k - 1,
                         * i.e. the update of batch k - 2 */
} pipe_clock;

/* Step k: segment k of the rollout pool, then the update of its batch on the
 * trainer pool, placed on the pipeline clock.  Fills res (step_s = time
 * between the updates of batches k - 1 and k) and the timeline of both
 * pools, on absolute times, into rec. */
static int async_step(carry_state *cs, const scenario *sr, const scenario *st, const hw_desc *hw,
                      const llm_desc *m, int k, int P, int full, pipe_clock *clk,
                      rlstep_result *res, run_record *rec, ts_err *e)
{
    int eta = sr->max_staleness;
    for (size_t i = 0; i < cs->ng; i++) {
        int v = cs->g[i].launched - 1 > 0 ? cs->g[i].launched - 1 : 0;
        cs->g[i].must = k + 1 - v > eta;
    }
    int gr = sr->gpus, gall = sr->gpus + st->gpus;
    double r0 = fmax(clk->r_end, clk->t_end_prev);
    size_t first = rec ? rec->n_tl : 0;
    if (carry_rollout(cs, sr, hw, m, k, P, res, rec, e))
        return -1;
    policy_shift_record(rec, first, r0, 0);
    double r1 = r0 + res->ro.makespan_s;
    trace *batch = NULL;
    if (carry_take_done(cs, k, P, &batch, e))
        goto fail;
    if (!full) {
        trace_free(batch);
        res->step_s = r1 - clk->r_end;
        clk->r_end = r1;
        return 0;
    }
    rlstep_result tr;
    first = rec ? rec->n_tl : 0;
    /* the batch's reward phase: step k's recorded reward times, if any */
    int rc = reward_copy(batch, cs->steps[k % cs->n_steps], e) ||
             rlstep_train_half(st, hw, m, batch, &tr, rec, e);
    trace_free(batch);
    if (rc)
        goto fail;
    double t0 = fmax(r1, clk->t_end);
    policy_shift_record(rec, first, t0, gr);
    double sync = comm_allgather(hw, mem_weights(m, sr->tp), gall);
    double t1 = t0 + tr.step_s + sync;
    if (span(rec, 0, gr, PH_ROLLOUT, TL_IDLE, clk->r_end, r0) ||
        span(rec, gr, gall, PH_UPDATE, TL_IDLE, clk->t_end, t0) ||
        span(rec, gr, gall, PH_SYNC, TL_BUSY, t0 + tr.step_s, t1)) {
        ts_errf(e, "out of memory for the timeline");
        goto fail;
    }
    /* phases relative to the step's start, the previous update's end */
    double s0 = clk->t_end;
    for (int ph = PH_REWARD; ph < PH_COUNT; ph++) {
        res->phase_s[ph] = tr.phase_s[ph];
        res->phase_t0[ph] = t0 - s0 + tr.phase_t0[ph];
    }
    res->phase_t0[PH_ROLLOUT] = r0 - s0;
    res->phase_s[PH_SYNC] = sync;
    res->phase_t0[PH_SYNC] = t1 - sync - s0;
    res->train_imbalance = tr.train_imbalance;
    res->train_mem_gb = tr.train_mem_gb;
    res->reward = tr.reward;
    res->gpus = gall;
    res->step_s = t1 - s0;
    clk->r_end = r1;
    clk->t_end_prev = clk->t_end;
    clk->t_end = t1;
    return 0;
fail:
    rlstep_result_free(res);
    return -1;
}

int policy_async_pool(const scenario *s)
{
    int gr = (int)floor(s->gpus * s->rollout_pool / s->tp) * s->tp;
    if (gr >= s->gpus)
        gr = (s->gpus - 1) / s->tp * s->tp;
    return gr;
}

static int async_run(const scenario *s, const hw_desc *hw, const llm_desc *m, trace *const *steps,
                     int n, int full, multistep_result *res, run_record *rec, ts_err *e)
{
    int gr = policy_async_pool(s);
    if (gr < s->tp)
        return ts_errf(e, "%s: policy async: %d GPUs at rollout_pool %.2f leave no whole TP "
                          "group of %d for rollout and at least one GPU for training",
                       s->path, s->gpus, s->rollout_pool, s->tp);
    scenario sr = *s, st = *s;
    sr.gpus = gr;
    st.gpus = s->gpus - gr;
    carry_state cs;
    carry_init(&cs, steps, n, s->max_response, 1, res);
    pipe_clock clk = {0, 0, 0};
    double q = s->sp.quality;
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        int P = (int)steps[k]->n_prompts;
        /* AReaL's launch bound: (version + eta + 1) x batch prompts in all */
        int64_t v = k - 1 > 0 ? k - 1 : 0;
        int64_t cap = (v + s->max_staleness + 1) * (int64_t)P;
        int64_t more = cap - res->launched_groups;
        sr.seed = s->seed + (uint64_t)k;
        policy_drafter_use(&sr, res, k, q);
        res->t0[k] = full ? clk.t_end : clk.r_end;
        rc = carry_launch(&cs, k, more > 0 ? (int)more : 0, e);
        if (!rc)
            rc = async_step(&cs, &sr, &st, hw, m, k, P, full, &clk, &res->step[k], rec, e);
        if (rc)
            ts_err_prefix(e, "step %d: ", k);
        else
            q = policy_drafter_next(&sr, &res->step[k], q);
    }
    /* the rollout pool idles from its last segment to the last update */
    if (!rc && full && span(rec, 0, gr, PH_ROLLOUT, TL_IDLE, clk.r_end, clk.t_end))
        rc = ts_errf(e, "out of memory for the timeline");
    carry_summarize(&cs);
    carry_finish(&cs);
    return rc;
}

const policy policy_async = {
    "async", "AReaL: disjoint rollout/trainer pools, interruptible rollout, bounded staleness",
    "AReaL (arXiv 2505.24298), github.com/inclusionAI/AReaL", policy_apply_plain, 0, async_run, 1};

const policy policy_async_tlt = {
    "async+tlt", "async's rollout pool with TLT's adaptive speculation and spot trainer",
    "AReaL (arXiv 2505.24298) + TLT (arXiv 2511.16665); the combination is tailsim's",
    policy_apply_plain_tlt, 0, async_run, 1};
