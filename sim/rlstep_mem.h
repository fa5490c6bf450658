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

/* Plans the memory of an actor update on `gpus` GPUs whose largest
 * micro-batch puts `tokens` tokens on a GPU.  Returns 0, or -1 with a message
 * naming the scenario's keys when the update does not fit in train.mem_cap of
 * HBM, or the offloaded states do not fit in a node's host memory. */
int train_mem_plan(const scenario *s, const hw_desc *hw, const llm_desc *m, int gpus,
                   double tokens, train_mem *tm, ts_err *e);

#endif
