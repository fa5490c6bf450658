/*
 * Host (CPU) time of an inference-engine step: kernel launches when a batch
 * runs eagerly (above the largest CUDA graph captured) and the scheduler's
 * per-step work, exposed when the overlap scheduler is off.  Pure functions.
 */
#ifndef TS_COST_HOST_H
#define TS_COST_HOST_H

#include "models/hw.h"

/* How an engine runs its steps on the host. */
typedef struct host_mode {
    int on;                 /* 0 (the zero value): no host time, GPU time only */
    int graph_max_bs;       /* largest batch replayed from a CUDA graph (0: none) */
    int overlap;            /* 1: the overlap scheduler hides scheduling behind the GPU */
    int graph;              /* 1: an engine with CUDA graphs and a custom all-reduce (SGLang,
                             * vLLM): graphed steps' collectives replay from the graph, eager
                             * steps' small all-reduces take the custom all-reduce
                             * (cost_host_coll); 0: every collective an eager NCCL call */
} host_mode;

/* 1 when a step of `batch` running requests replays a CUDA graph under mode:
 * mode->graph set, a pure decode step (decode_only) and batch <=
 * mode->graph_max_bs.  Cannot fail. */
int cost_host_graphed(const host_mode *mode, int batch, int decode_only);

/* How the collectives of that step run, an enum cost_coll_mode
 * (models/cost.h): COST_COLL_GRAPH when cost_host_graphed(), else
 * COST_COLL_EAGER_CAR when mode->on and mode->graph (an eager step of an
 * engine that has its custom all-reduce), else COST_COLL_EAGER.  Cannot
 * fail. */
int cost_host_coll(const host_mode *mode, int batch, int decode_only);

/* Kernels one forward of cost_iter() launches (its per-layer ops, the TP
 * all-reduces, the embedding, final norm, LM head and logits all-gather, and
 * the sampler's cast, softmax and top-k).  Cannot fail. */
double cost_iter_kernels(const llm_desc *m, int tp);

/* Kernels one EAGLE speculative step launches: depth - 1 drafter forwards
 * (fc, one layer, LM head, sampler, tree bookkeeping), the target's verify
 * (a forward plus tree-mask and accept kernels) and the draft extend. */
double cost_spec_kernels(const llm_desc *m, int tp, int depth);

/* Wall time of one engine step of `batch` running requests whose GPU work
 * takes gpu_s and launches `kernels` kernels: a step that is not a pure
 * decode step (`decode_only` 0: it carries prefill chunks, which SGLang
 * never graphs) or whose batch exceeds mode->graph_max_bs launches every
 * kernel from the host (eager_launch_s each; the GPU runs no faster than
 * the host launches), and the scheduler's sched_s + sched_req_s x batch is
 * added unless mode->overlap hides it behind the GPU.  Returns gpu_s
 * unchanged for batch <= 0 or mode->on 0.  Cannot fail. */
double cost_host_step(const hw_desc *hw, const host_mode *mode, int batch, int decode_only,
                      double kernels, double gpu_s);

/* cost_host_step() for one speculative step (EAGLE or n-gram: both verify
 * through SGLang's EagleVerifyInput.verify), plus the serial host time after
 * the verify's device-to-host sync: SPEC_SYNC_KERNELS (24, models/
 * cost_host.c) x eager_launch_s whenever mode->on, graphed or not.  Returns
 * gpu_s unchanged for batch <= 0 or mode->on 0.  Cannot fail. */
double cost_host_spec_step(const hw_desc *hw, const host_mode *mode, int batch,
                           int decode_only, double kernels, double gpu_s);

#endif
