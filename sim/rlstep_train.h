/*
 * The training phases of the RL step (old log-prob, reference, actor update)
 * planned by a DCP strategy (scenario key train.strategy): the step's
 * responses, each with its prompt, become a 1D batch trace, the chosen
 * planner (sim/dcp/dcp.h) lays them out over the RL cluster's GPUs with the
 * [dcp] section's configuration and the model's training cost and memory
 * (models/train_cost.h), and each phase replays that plan: the update with
 * forward + backward + recomputation, the plan's steps as barriers and one
 * gradient sync per epoch (the RL algorithm's optimizer steps do not depend
 * on the strategy), the forward-only passes with forward time only.  With train.strategy = none, sim/rlstep.c keeps its own plain
 * data-parallel phases and nothing here runs.
 */
#ifndef TS_RLSTEP_TRAIN_H
#define TS_RLSTEP_TRAIN_H

#include "common/err.h"
#include "models/hw.h"
#include "sim/dcp/dcp.h"
#include "results/result.h"
#include "sim/scenario.h"
#include "traces/trace.h"

typedef struct rlstep_train {
    dcp_strategy strat;  /* parsed train.strategy */
    tc_model tm;         /* the model's training cost description */
    btrace *bt;          /* owned: prompt + response tokens of every response, bucketized */
    dcp_ctx ctx;         /* the planner context (points into this struct: do not move it) */
    dcp_plan plan;       /* the strategy's plan of one pass over the responses */
    double bound_s;      /* DCP's bound on one pass (compute perfectly balanced + one sync), s:
                          * never above one update epoch of any strategy */
} rlstep_train;

/* Plans the training sequences of trace t (responses capped at
 * rollout.max_response, as the rollout caps them) with s->train_strategy on
 * s->gpus GPUs of hw.  *rt must stay where it is until rlstep_train_free().
 * Returns 0, or -1 with a message naming the scenario: strategy "none" or
 * unknown, bad [dcp] keys, a response that fits at no SP size, allocation
 * failure (nothing is left to free then). */
int rlstep_train_init(rlstep_train *rt, const scenario *s, const hw_desc *hw, const llm_desc *m,
                      const trace *t, ts_err *e);

/* Frees what rlstep_train_init() allocated; NULL and zeroed structs are no-ops. */
void rlstep_train_free(rlstep_train *rt);

typedef struct rlstep_train_phase {
    double len_s;       /* phase length, s (all passes) */
    double imbalance;   /* DCP's: sum over steps of (slowest group - each GPU's compute), over
                         * gpus x sum of the slowest groups' times */
    int64_t plan_steps; /* plan steps replayed (barriers; all passes) */
} rlstep_train_phase;

/* Replays the plan `passes` times from time t0: update != 0 prices every
 * micro-batch's forward + backward (+ recomputation) and ends each pass with
 * one gradient sync; update == 0 prices forward only, no sync.  Every plan
 * step waits for its slowest group (groups re-form between steps).  When rec
 * is not NULL, each GPU gets busy / idle intervals in `phase` (the sync
 * counts as busy).  Returns 0, or -1 on allocation failure. */
int rlstep_train_run(const rlstep_train *rt, int update, int passes, int phase, double t0,
                     run_record *rec, rlstep_train_phase *out, ts_err *e);

#endif
