/*
 * The synchronous RL step (VeRL hybrid engine: every phase on every GPU).
 *
 *   sync      FSDP shards -> inference weights: each TP group all-gathers its
 *             shard (weights/tp bytes) from all GPUs.
 *   rollout   sim/rollout.c on gpus/tp replicas, the prompts dealt to them by
 *             rollout.placement (balanced by default); a replica's GPUs are busy
 *             until its last response ends, then idle until the slowest one,
 *             or, with TLT's spot trainer, training the drafter (TL_TRAIN)
 *             from train_start_s after their end until the slowest one.
 *   reward    on the CPU: the GPUs are idle.  When the batch trace carries
 *             recorded reward times (PolyTrace's reward_timings_step_N.jsonl,
 *             traces/reward.h: one measured time per rollout rank), the phase
 *             is the slowest rank's time, since the step waits for every
 *             rank's rewards (what PolyTrace's own replay adds to a step);
 *             the min/median/max over ranks go into the result.  The times
 *             are used as measured, not rescaled to this cluster.  Without
 *             them: reward_step_s + reward_per_response_s * responses / gpus.
 *   old_logp  a forward pass over every (prompt + response) sequence;
 *   ref       the same with the reference policy (when train.ref_model);
 *   update    forward + backward (+ recomputation) per epoch, then one
 *             gradient reduce-scatter and parameter all-gather.
 *
 * With train.strategy = none (the default), training phases use plain data
 * parallelism over all GPUs, as VeRL splits a batch: responses in trace
 * order, equal counts per GPU, each GPU packing its sequences greedily into
 * micro-batches of at most micro_batch_tokens (a longer sequence is a
 * micro-batch of its own).  A GPU is busy for its own
 * micro-batches and idle until the slowest GPU finishes: the imbalance of
 * variable lengths in training shows up here, as in DCP's motivation.  The
 * update must fit in memory, a GPU holding its largest micro-batch, and
 * train.offload moves the model states to the host (sim/rlstep_mem.c).  Any
 * other train.strategy plans the three training phases with that DCP
 * strategy instead (sim/rlstep_train.c): per-group SP sizes, micro-batches
 * and accumulation counts, still one gradient sync per epoch.
 */
#include "sim/rlstep.h"
#include "sim/rlstep_verl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/comm.h"
#include "models/cost.h"
#include "models/memory.h"
#include "sim/rlstep_mem.h"
#include "sim/rlstep_train.h"

int rlstep_rollout_cfg(const scenario *s, const hw_desc *hw, const llm_desc *m,
                       rollout_cfg *cfg, ts_err *e)
{
    memset(cfg, 0, sizeof *cfg);
    if (scenario_check_fit(s, hw, m, e))
        return -1;
    double kv = mem_kv_capacity(hw, m, s->tp, s->mem_util, s->reserve_gb * 1e9);
    cfg->hw = hw;
    cfg->llm = m;
    cfg->tp = s->tp;
    cfg->replicas = s->gpus / s->tp;
    cfg->max_running = s->max_running;
    cfg->chunk_tokens = s->chunk_tokens;
    /* mem_kv_per_token is per GPU of the group, so per-GPU capacity in tokens
     * is the replica's capacity */
    cfg->kv_tokens = floor(kv);
    cfg->tail_threshold = s->tail_threshold;
    cfg->max_response = s->max_response;
    cfg->keep_kv_during_tool = s->keep_kv_during_tool;
    cfg->tool_concurrency = s->tool_concurrency;
    if (scenario_rollout_attn(s, hw, &cfg->attn, e))
        return -1;
    if (rollout_placement_parse(s->placement, &cfg->placement))
        return ts_errf(e, "%s: key 'rollout.placement': not balanced, trace or round-robin",
                       s->path);
    int mode;
    if (scenario_spec_mode(s, &mode, e))
        return -1;
    cfg->spec = (spec_mode)mode;
    cfg->host = scenario_host_mode(s, mode != 0);
    cfg->spec_patience = s->spec_patience;
    cfg->sp = s->sp;
    cfg->seed = s->seed;
    cfg->spot = s->spot;
    cfg->dp = s->dp;
    return 0;
}

void rlstep_result_free(rlstep_result *res)
{
    if (res)
        rollout_result_free(&res->ro);
}

static int rollout_phase(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                         const rlstep_opts *o, double t0, rlstep_result *res, run_record *rec,
                         ts_err *e)
{
    rollout_cfg cfg;
    if (rlstep_rollout_cfg(s, hw, m, &cfg, e))
        return -1;
    if (o) {
        cfg.place = o->place;
        cfg.order = o->order;
        cfg.start_gen = o->start_gen;
        cfg.stop_groups = o->stop_groups;
        cfg.must_finish = o->must_finish;
        cfg.ranks = o->ranks;
    }
    if (rollout_run(&cfg, t, &res->ro, e))
        return -1;
    res->kv_tokens = cfg.kv_tokens;
    res->gpus = s->gpus;
    res->tp = s->tp;
    res->replicas = cfg.replicas;
    res->phase_t0[PH_ROLLOUT] = t0;
    res->phase_s[PH_ROLLOUT] = res->ro.makespan_s;
    if (!rec)
        return 0;
    for (int g = 0; g < s->gpus; g++) {
        const replica_stats *st = &res->ro.rep[g / s->tp];
        double end = st->end_s, T = res->ro.makespan_s;
        double train0 = st->train_s > 0 ? T - st->train_s : T; /* spot trainer from here */
        if (run_add_interval(rec, g, PH_ROLLOUT, TL_BUSY, t0, t0 + end) ||
            (end < train0 && run_add_interval(rec, g, PH_ROLLOUT, TL_IDLE, t0 + end, t0 + train0)) ||
            (train0 < T && run_add_interval(rec, g, PH_ROLLOUT, TL_TRAIN, t0 + train0, t0 + T)))
            return ts_errf(e, "out of memory for the timeline");
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++, k++) {
            int32_t len = scenario_cap_response(s, t->prompts[i].resp[j]);
            if (res->ro.finish_s[k] < 0)
                continue; /* aborted by the policy's stop */
            if (run_add_response(rec, res->ro.resp_replica[k], t->prompts[i].prompt_tokens, len,
                                 res->ro.finish_s[k]))
                return ts_errf(e, "out of memory for responses");
        }
    for (size_t i = 0; i < res->ro.n_tj; i++) { /* multi-turn: the last trajectories */
        traj_interval iv = res->ro.tj[i];
        iv.t0 += t0;
        iv.t1 += t0;
        if (run_add_traj(rec, &iv))
            return ts_errf(e, "out of memory for the trajectories' timeline");
    }
    return 0;
}

int rlstep_rollout_opts(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                        const rlstep_opts *o, rlstep_result *res, run_record *rec, ts_err *e)
{
    memset(res, 0, sizeof *res);
    if (rollout_phase(s, hw, m, t, o, 0.0, res, rec, e))
        return -1;
    res->step_s = res->ro.makespan_s;
    return 0;
}

int rlstep_rollout(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                   rlstep_result *res, run_record *rec, ts_err *e)
{
    return rlstep_rollout_opts(s, hw, m, t, NULL, res, rec, e);
}

double rlstep_longest(const scenario *s, const trace *t)
{
    double most = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++)
            most = fmax(most, (double)t->prompts[i].prompt_tokens +
                                  scenario_cap_response(s, t->prompts[i].resp[j]));
    return most;
}

/* Time of one micro-batch: forward only (kind 0) or forward + backward,
 * and no shorter than its host copies under train.offload (host_s). */
static double micro_batch(const scenario *s, const hw_desc *hw, const llm_desc *m, int kind,
                          double tokens, double sq, double host_s)
{
    return fmax(host_s, kind ? cost_train_fwd_bwd(hw, m, tokens, sq, s->recompute)
                             : cost_train_fwd(hw, m, tokens, sq));
}

/* Per-GPU time of a training phase.  `kind` 0: forward only; 1: forward +
 * backward (+ recomputation); host_s: a micro-batch's host copies under
 * train.offload (0 without).  Response k of n goes to GPU k*gpus/n (equal
 * contiguous slices, trace order).  Writes gpus entries into per_gpu. */
static void train_phase(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                        int kind, double host_s, double *per_gpu)
{
    size_t n = trace_n_responses(t), k = 0;
    for (int g = 0; g < s->gpus; g++)
        per_gpu[g] = 0;
    int g = 0;
    double mb_tok = 0, mb_sq = 0;
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[i];
        for (int32_t j = 0; j < p->n_resp; j++, k++) {
            int gk = (int)((k * (size_t)s->gpus) / n);
            int32_t len = scenario_cap_response(s, p->resp[j]);
            double seq = (double)p->prompt_tokens + len;
            if (mb_tok > 0 && (gk != g || mb_tok + seq > s->micro_batch_tokens)) {
                per_gpu[g] += micro_batch(s, hw, m, kind, mb_tok, mb_sq, host_s);
                mb_tok = mb_sq = 0;
            }
            g = gk;
            mb_tok += seq;
            mb_sq += seq * seq;
        }
    }
    if (mb_tok > 0)
        per_gpu[g] += micro_batch(s, hw, m, kind, mb_tok, mb_sq, host_s);
}

/* Adds a phase where GPU g is busy for busy[g] (NULL: all busy, or all idle
 * when state is TL_IDLE) and idle until the phase ends.  Returns the phase
 * length, or -1 on allocation failure. */
static double add_phase(run_record *rec, int gpus, int phase, double t0, const double *busy,
                        double len, int state)
{
    if (!rec)
        return len;
    for (int g = 0; g < gpus; g++) {
        double b = busy ? busy[g] : (state == TL_IDLE ? 0 : len);
        if (b > 0 && run_add_interval(rec, g, phase, TL_BUSY, t0, t0 + b))
            return -1;
        if (b < len && run_add_interval(rec, g, phase, TL_IDLE, t0 + b, t0 + len))
            return -1;
    }
    return len;
}

/* The training phases planned by train.strategy, from time `now`; sets
 * res->step_s.  Returns 0 or -1. */
static int dcp_phases(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                      double now, rlstep_result *res, run_record *rec, ts_err *e)
{
    rlstep_train rt;
    if (rlstep_train_init(&rt, s, hw, m, t, e))
        return -1;
    int rc = -1;
    rlstep_train_phase ph;
    for (int p = PH_OLD_LOGP; p <= PH_REF; p++) {
        res->phase_t0[p] = now;
        if (p == PH_REF && !s->ref_model)
            continue;
        if (rlstep_train_run(&rt, 0, 1, p, now, rec, &ph, e))
            goto done;
        res->phase_s[p] = ph.len_s;
        now += ph.len_s;
    }
    if (rlstep_train_run(&rt, 1, s->update_epochs, PH_UPDATE, now, rec, &ph, e))
        goto done;
    res->phase_t0[PH_UPDATE] = now;
    res->phase_s[PH_UPDATE] = ph.len_s;
    res->train_imbalance = ph.imbalance;
    res->train_dcp = 1;
    res->update_plan_steps = (double)ph.plan_steps;
    res->update_bound_s = rt.bound_s * s->update_epochs;
    res->step_s = now + ph.len_s;
    rc = 0;
done:
    rlstep_train_free(&rt);
    return rc;
}

/* Reward, old log-prob, reference and update of batch t from time now on
 * all s->gpus GPUs; per_gpu is scratch of s->gpus entries.  Returns the time
 * the update ends, or -1 with e set. */
static double train_phases(const scenario *s, const hw_desc *hw, const llm_desc *m,
                           const trace *t, double now, double *per_gpu, rlstep_result *res,
                           run_record *rec, ts_err *e)
{
    int gpus = s->gpus;
    /* reward, on the CPU: recorded (the slowest rank's), else modelled */
    if (reward_summarize(t, &res->reward, e) < 0)
        return -1;
    double reward = res->reward.ranks > 0
                        ? res->reward.max_s
                        : s->reward_step_s +
                              s->reward_per_response_s * (double)trace_n_responses(t) / gpus;
    res->phase_t0[PH_REWARD] = now;
    res->phase_s[PH_REWARD] = reward;
    if (reward > 0 && add_phase(rec, gpus, PH_REWARD, now, NULL, reward, TL_IDLE) < 0)
        return ts_errf(e, "out of memory for the timeline");
    now += reward;
    if (strcmp(s->train_strategy, "none")) {
        if (s->train_offload)
            return ts_errf(e, "%s: train.offload is not modelled under train.strategy %s (its "
                              "planners keep the model states on the GPU)",
                           s->path, s->train_strategy);
        return dcp_phases(s, hw, m, t, now, res, rec, e) ? -1 : res->step_s;
    }
    if (s->mini_batch_prompts > 0) /* as VeRL's FSDP workers run it (sim/rlstep_verl.c) */
        return rlstep_verl_phases(s, hw, m, t, now, res, rec, e) ? -1 : res->step_s;
    /* memory: a GPU holds a micro-batch, the budget or one longer sequence */
    train_mem tm;
    if (train_mem_plan(s, hw, m, gpus, train_mem_tokens(s, rlstep_longest(s, t)), &tm, e))
        return -1;
    int f = tm.group;
    res->train_mem_gb = tm.need.total / 1e9;
    /* old log-prob and reference forward passes */
    for (int ph = PH_OLD_LOGP; ph <= PH_REF; ph++) {
        res->phase_t0[ph] = now;
        if (ph == PH_REF && !s->ref_model)
            continue;
        train_phase(s, hw, m, t, 0, ph == PH_REF ? tm.ref_s : tm.fwd_s, per_gpu);
        double len = 0;
        for (int g = 0; g < gpus; g++)
            len = fmax(len, per_gpu[g]);
        res->phase_s[ph] = len;
        if (add_phase(rec, gpus, ph, now, per_gpu, len, TL_BUSY) < 0)
            return ts_errf(e, "out of memory for the timeline");
        now += len;
    }
    /* actor update: epochs of forward+backward, one gradient sync each */
    train_phase(s, hw, m, t, 1, tm.bwd_s, per_gpu);
    double W = mem_weights(m, 1);
    double grad = comm_reduce_scatter(hw, W, f) + train_hsdp_allreduce(s, hw, W, gpus, f) +
                  comm_allgather(hw, W, f) + tm.opt_s;
    double len = 0, sum = 0;
    for (int g = 0; g < gpus; g++) {
        per_gpu[g] = per_gpu[g] * s->update_epochs;
        len = fmax(len, per_gpu[g]);
        sum += per_gpu[g];
    }
    res->train_imbalance = len > 0 ? (len - sum / gpus) / len : 0;
    for (int g = 0; g < gpus; g++)
        per_gpu[g] += grad * s->update_epochs;
    len += grad * s->update_epochs;
    res->phase_t0[PH_UPDATE] = now;
    res->phase_s[PH_UPDATE] = len;
    if (add_phase(rec, gpus, PH_UPDATE, now, per_gpu, len, TL_BUSY) < 0)
        return ts_errf(e, "out of memory for the timeline");
    return now + len;
}

int rlstep_train_half(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                 rlstep_result *res, run_record *rec, ts_err *e)
{
    memset(res, 0, sizeof *res);
    double *per_gpu = calloc((size_t)s->gpus, sizeof *per_gpu);
    if (!per_gpu)
        return ts_errf(e, "out of memory");
    double end = train_phases(s, hw, m, t, 0.0, per_gpu, res, rec, e);
    free(per_gpu);
    if (end < 0)
        return -1;
    res->step_s = end;
    res->gpus = s->gpus;
    res->tp = s->tp;
    return 0;
}

int rlstep_run(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
               rlstep_result *res, run_record *rec, ts_err *e)
{
    return rlstep_run_opts(s, hw, m, t, NULL, res, rec, e);
}

int rlstep_run_opts(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                    const rlstep_opts *o, rlstep_result *res, run_record *rec, ts_err *e)
{
    memset(res, 0, sizeof *res);
    int gpus = s->gpus;
    double *per_gpu = calloc((size_t)gpus, sizeof *per_gpu);
    if (!per_gpu)
        return ts_errf(e, "out of memory");
    int rc = -1;
    double now = 0;
    /* weight sync */
    double sync = comm_allgather(hw, mem_weights(m, s->tp), gpus);
    res->phase_t0[PH_SYNC] = now;
    res->phase_s[PH_SYNC] = sync;
    if (add_phase(rec, gpus, PH_SYNC, now, NULL, sync, TL_BUSY) < 0)
        goto oom;
    now += sync;
    /* rollout */
    if (rollout_phase(s, hw, m, t, o, now, res, rec, e))
        goto cleanup;
    now += res->ro.makespan_s;
    now = train_phases(s, hw, m, t, now, per_gpu, res, rec, e);
    if (now < 0)
        goto cleanup;
    res->step_s = now;
    rc = 0;
    goto cleanup;
oom:
    ts_errf(e, "out of memory for the timeline");
cleanup:
    free(per_gpu);
    if (rc)
        rlstep_result_free(res);
    return rc;
}
