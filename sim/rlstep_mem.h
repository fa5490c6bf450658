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
    int group;          /* GPUs the states are sharded over (train_fsdp_group()) */
} train_mem;

/* The GPUs the actor's states are sharded over when the trainer has `gpus`:
 * train.fsdp_size (HSDP: shard inside the group, replicate across groups),
 * or all of them when it is 0 or not smaller.  Returns it, or -1 with a
 * message naming train.fsdp_size when it does not divide gpus. */
int train_fsdp_group(const scenario *s, int gpus, ts_err *e);

/* HSDP (a shard group f smaller than the trainer's gpus): after the
 * reduce-scatter inside its group, each GPU all-reduces its 1/f of the
 * gradients (`bytes` in all) with the gpus/f replicas of its shard, one per
 * group, spread over the nodes; seconds, 0 when f >= gpus.  Cannot fail. */
double train_hsdp_allreduce(const scenario *s, const hw_desc *hw, double bytes, int gpus, int f);

/* Tokens one GPU holds of its largest micro-batch when the longest
 * sequence (prompt + response) has `longest` tokens: the token budget
 * (train.micro_batch_tokens) or that sequence, and under VeRL's trainer
 * (train.mini_batch_prompts > 0) the GPU's 1/train.sp of either.  Cannot
 * fail. */
double train_mem_tokens(const scenario *s, double longest);

/* Fills *tm for an actor update on `gpus` GPUs that puts `tokens` tokens on
 * a GPU: the peak's terms and, with train.offload, the offload's costs, the
 * states sharded over train_fsdp_group() GPUs (a train.fsdp_size that does
 * not divide gpus counts as all of them here; the trainers check it first).
 * Cannot fail. */
void train_mem_eval(const scenario *s, const hw_desc *hw, const llm_desc *m, int gpus,
                    double tokens, train_mem *tm);

/* What to change when an update of `tokens` tokens per GPU does not fit,
 * as a phrase ("use more GPUs, a smaller train.micro_batch_tokens, or
 * train.offload = true"; a larger train.sp instead of the budget when one
 * sequence longer than it sets the tokens).  Cannot fail (truncates). */
void train_mem_hint(const scenario *s, double tokens, char *buf, size_t n);

/* train_fsdp_group()'s check, train_mem_eval(), then the memory check:
 * returns 0, or -1 with a message naming the scenario's keys when
 * train.fsdp_size does not divide gpus, the update does not fit in
 * train.mem_cap of HBM, or the offloaded states do not fit in a node's host
 * memory. */
int train_mem_plan(const scenario *s, const hw_desc *hw, const llm_desc *m, int gpus,
                   double tokens, train_mem *tm, ts_err *e);

#endif
