/*
 * One synchronous RL step, VeRL-style colocated: weight sync -> rollout ->
 * reward -> old log-prob -> reference -> actor update, every phase on all
 * GPUs, each phase waiting for the slowest GPU of the one before.  The
 * reward phase is the batch trace's recorded reward time when it has one
 * (trace.reward: the slowest rank's), else the scenario's reward model.
 */
#ifndef TS_RLSTEP_H
#define TS_RLSTEP_H

#include "common/err.h"
#include "models/hw.h"
#include "results/result.h"
#include "sim/rollout.h"
#include "sim/scenario.h"
#include "traces/reward.h"
#include "traces/trace.h"

typedef struct rlstep_result {
    rollout_result ro;        /* the rollout phase */
    double phase_s[PH_COUNT]; /* s per phase */
    double phase_t0[PH_COUNT];/* s, start of each phase within the step */
    double step_s;            /* s */
    double train_imbalance;   /* update phase: mean over GPUs of (max - t_g) / max; with a
                               * train.strategy, DCP's (sim/rlstep_train.h) */
    double train_mem_gb;      /* the actor update's peak per GPU, GB (sim/rlstep_mem.h;
                               * 0 under a train.strategy, whose plan has its own) */
    int train_dcp;            /* 1: the training phases were planned by train.strategy */
    double update_plan_steps; /* train_dcp: the plan's steps (barriers) in the update, all epochs */
    double update_bound_s;    /* train_dcp: DCP's lower bound on the update, s */
    int64_t truncated_responses; /* responses of the step's trace longer than
                               * rollout.max_response, which ends them at the cap
                               * (policy_run() fills it) */
    int64_t truncated_tokens; /* their tokens beyond the cap, dropped */
    reward_summary reward;    /* the batch's recorded reward times over ranks (traces/reward.h);
                               * ranks > 0: the reward phase is their max, else ranks 0 and the
                               * scenario's train.reward_* keys priced it */
    double kv_tokens;         /* KV capacity per replica, tokens */
    int gpus, replicas, tp;
} rlstep_result;

/* The longest sequence (prompt + response capped by rollout.max_response)
 * of batch t, tokens; 0 for an empty batch.  Cannot fail. */
double rlstep_longest(const scenario *s, const trace *t);

/* Builds the rollout configuration of a scenario (KV capacity from the memory
 * model, the engine's attention kernel from rollout.attn).  Returns 0, or -1
 * when the model does not fit on a TP group or hw cannot run rollout.attn's
 * kernel (scenario_rollout_attn). */
int rlstep_rollout_cfg(const scenario *s, const hw_desc *hw, const llm_desc *m,
                       rollout_cfg *cfg, ts_err *e);

/* Simulates only the rollout phase; fills res->ro and the rollout timeline
 * into rec (when rec is not NULL). */
int rlstep_rollout(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                   rlstep_result *res, run_record *rec, ts_err *e);

/* Simulates the whole step.  Returns 0 (free with rlstep_result_free) or -1. */
int rlstep_run(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
               rlstep_result *res, run_record *rec, ts_err *e);

/* What a policy may change in a step (sim/policy/policy_*.c); all zero/NULL: the
 * plain synchronous step.  They go to rollout_cfg (see there). */
typedef struct rlstep_opts {
    const int32_t *place;       /* per prompt of t: replica */
    const int32_t *order;       /* admission order of t's responses */
    const int32_t *start_gen;   /* per response of t: tokens from an earlier step */
    int stop_groups;            /* stop the rollout once this many groups are complete */
    const uint8_t *must_finish; /* per prompt of t: the stop waits for it */
    int ranks;                  /* rollout.placement = trace: the rank count of the trace
                                 * t was drawn from (0: t's own) */
} rlstep_opts;

/* rlstep_run and rlstep_rollout with a policy's options (o may be NULL).
 * Only finished responses go on the record. */
int rlstep_run_opts(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                    const rlstep_opts *o, rlstep_result *res, run_record *rec, ts_err *e);
int rlstep_rollout_opts(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                        const rlstep_opts *o, rlstep_result *res, run_record *rec, ts_err *e);

/* The training half of a step alone (reward, old log-prob, reference,
 * update of batch t on s->gpus GPUs, from time 0): fills phase_s/phase_t0 of
 * those phases, train_imbalance and step_s (their sum); res->ro stays empty.
 * Used by policies whose trainer has GPUs of its own.  Returns 0 or -1. */
int rlstep_train_half(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                 rlstep_result *res, run_record *rec, ts_err *e);
void rlstep_result_free(rlstep_result *res);

#endif
