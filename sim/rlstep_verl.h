/*
 * The training phases of a synchronous RL step (old log-prob, reference,
 * actor update) as VeRL's FSDP workers run them with fastrl's settings:
 * Ulysses sequence parallelism, dynamic micro-batches by token budget, and
 * the actor update in PPO mini-batches, one optimizer step (a barrier across
 * data-parallel ranks) each.  Selected by train.mini_batch_prompts > 0.
 */
#ifndef TS_RLSTEP_VERL_H
#define TS_RLSTEP_VERL_H

#include "sim/rlstep.h"

/* Simulates old log-prob, reference (when s->ref_model) and the update from
 * time `now`, fills res->phase_t0/phase_s of those phases,
 * res->train_imbalance and res->step_s, and adds the per-GPU busy/idle
 * intervals to rec (when not NULL).  Returns 0, or -1 with a message (a
 * train.sp that does not divide the GPUs or the model's heads, a mini-batch
 * smaller than the data-parallel ranks, or out of memory). */
int rlstep_verl_phases(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                       double now, rlstep_result *res, run_record *rec, ts_err *e);

#endif
