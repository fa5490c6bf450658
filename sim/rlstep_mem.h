/*
 * Memory of the RL trainers' FSDP actor (the plain trainer of sim/rlstep.c
 * and VeRL's of sim/rlstep_verl.c): the update's peak per GPU against the
 * scenario's cap, and, with train.offload, the host copies and the CPU
 * optimizer step that keeping the model states in host memory costs.
 */
#ifndef TS_RLSTEP_MEM_H
#define TS_RLSTEP_MEM_H

#include "common/err.h"
#include "models/memory.h"
#include "sim/scenario.h"

typedef struct train_mem {
    mem_train need;     /* the update's peak per GPU, term by term */
    double fwd_s;       /* offload: host-to-GPU copy of the actor's fp32 shard, one
                         * forward micro-batch, s (0 without offload) */
    double ref_s;       /* the same for the reference model's bf16 shard, s */
    double bwd_s;       /* a forward+backward micro-batch: the shard copied in twice
                         * (forward, backward) while the gradients go out, s */
    double opt_s;       /* one optimizer step on the host CPUs, s */
} train_mem;

/* Tokens one GPU holds of its largest micro-batch when the longest
 * sequence (prompt + response) has `longest` tokens: the token budget
 * (train.micro_batch_tokens) or that sequence, and under VeRL's trainer
 * (train.mini_batch_prompts > 0) the GPU's 1/train.sp of either.  Cannot
 * fail. */
double train_mem_tokens(const scenario *s, double longest);

/* Fills *tm for an actor update on `gpus` GPUs that puts `tokens` tokens on
 * a GPU: the peak's terms and, with train.offload, the offload's costs.
 * Cannot fail. */
void train_mem_eval(const scenario *s, const hw_desc *hw, const llm_desc *m, int gpus,
                    double tokens, train_mem *tm);

/* What to change when an update of `tokens` tokens per GPU does not fit,
 * as a phrase ("use more GPUs, a smaller train.micro_batch_tokens, or
 * train.offload = true"; a larger train.sp instead of the budget when one
 * sequence longer than it sets the tokens).  Cannot fail (truncates). */
void train_mem_hint(const scenario *s, double tokens, char *buf, size_t n);

/* train_mem_eval(), then the check: returns 0, or -1 with a message naming
 * the scenario's keys when the update does not fit in train.mem_cap of HBM,
 * or the offloaded states do not fit in a node's host memory. */
int train_mem_plan(const scenario *s, const hw_desc *hw, const llm_desc *m, int gpus,
                   double tokens, train_mem *tm, ts_err *e);

#endif
