/*
 * Host time of an engine step, as SGLang runs it (the engine TLT's fastrl
 * vendors).  Two mechanisms, both on the CPU side of the GPU work the rest
 * of the cost model prices:
 *
 * Eager execution.  SGLang replays a captured CUDA graph for decode batches
 * up to cuda_graph_max_bs (server_args: 512 on an 80 GB H100 at TP >= 4, 256
 * below TP 4); a larger batch runs eagerly, one host launch per kernel
 * (Python, the PyTorch dispatcher, cudaLaunchKernel: ~5-20 us each).  The
 * launches run ahead of the GPU, so the step takes max(GPU time, kernels x
 * eager_launch_s).  fastrl sets cuda_graph_max_bs = 32 for its whole engine
 * whenever speculation is enabled (verl/workers/rollout/sglang_rollout/
 * sglang_rollout.py), so in `tlt` and `tlt-base` every step above 32
 * running requests, plain or speculative, runs eagerly.
 *
 * Scheduling.  Each step the scheduler picks the batch, prepares its
 * metadata and, after the step, processes every request's new tokens (stop
 * checks, output) in Python: sched_s + sched_req_s per running request.
 * SGLang's overlap scheduler (v0.4, "zero-overhead batch scheduler": 1.1x
 * throughput) runs this one batch ahead, behind the GPU; fastrl disables it
 * when speculation is enabled (disable_overlap_schedule = True), so there
 * it adds to every step.
 *
 * Kernel counts follow the ops cost_iter() and cost_spec.c price, one
 * kernel per op; the EAGLE tree bookkeeping per draft step (top-k
 * selection, score products, gathers, concatenation) and the verify's
 * tree mask and accept kernels are counted as SPEC_TREE_KERNELS each.
 *
 * Speculative steps' host sync.  Between the verify's forward (a CUDA graph
 * up to the capture size) and the draft extend, SGLang's
 * EagleVerifyInput.verify (speculative/eagle_utils.py) samples the tree,
 * frees the rejected tokens' KV slots (token_to_kv_pool_allocator.free on a
 * boolean mask), runs assign_req_to_token_pool and copies the accept lengths
 * to the host (accept_length.tolist(), then seq_lens.sum().item()): the
 * host waits for the GPU, and the ~24 small kernels it then launches
 * (indexing, masks, cumsum, the Triton assignment, the draft-extend
 * inputs) run one launch at a time with the GPU idle between them.  So
 * every speculative step pays SPEC_SYNC_KERNELS x eager_launch_s of
 * serial host time on top of cost_host_step(), graphed or eager (counted
 * from the code, not fitted; 0.24 ms at 10 us a launch).
 */
#include "models/cost_host.h"

#include "models/cost.h"

#define SAMPLE_KERNELS 3.0     /* fp32 cast, softmax, top-k or sampling */
#define SPEC_TREE_KERNELS 8.0  /* per draft step, and for the verify's tree and accept */
#define SPEC_SYNC_KERNELS 24.0 /* launched after the verify's host sync, graphs or not */

static double layer_kernels(int tp)
{
    /* norm, QKV, RoPE, attention, O, add, norm, up, act, down, add */
    return 11.0 + (tp > 1 ? 2.0 : 0.0);
}

static double head_kernels(const llm_desc *m, int tp)
{
    if (m->vocab <= 0)
        return 0.0;
    /* embedding (+ all-reduce), final norm, LM head (+ logits all-gather), sampler */
    return 1.0 + 2.0 + SAMPLE_KERNELS + (tp > 1 ? 2.0 : 0.0);
}

double cost_iter_kernels(const llm_desc *m, int tp)
{
    return m->layers * layer_kernels(tp) + head_kernels(m, tp);
}

double cost_spec_kernels(const llm_desc *m, int tp, int depth)
{
    double drafter = 1.0 + layer_kernels(tp) + head_kernels(m, tp); /* fc + one layer + head */
    double draft = (depth > 1 ? depth - 1 : 0) * (drafter + SPEC_TREE_KERNELS);
    double verify = cost_iter_kernels(m, tp) + SPEC_TREE_KERNELS;
    return draft + verify + drafter;
}

double cost_host_spec_step(const hw_desc *hw, const host_mode *mode, int batch,
                           int decode_only, double kernels, double gpu_s)
{
    double t = cost_host_step(hw, mode, batch, decode_only, kernels, gpu_s);
    if (batch > 0 && mode->on)
        t += SPEC_SYNC_KERNELS * hw->eager_launch_s;
    return t;
}

int cost_host_graphed(const host_mode *mode, int batch, int decode_only)
{
    return mode->on && mode->graph && decode_only && batch > 0 && batch <= mode->graph_max_bs;
}

int cost_host_coll(const host_mode *mode, int batch, int decode_only)
{
    if (cost_host_graphed(mode, batch, decode_only))
        return COST_COLL_GRAPH;
    return mode->on && mode->graph ? COST_COLL_EAGER_CAR : COST_COLL_EAGER;
}

double cost_host_step(const hw_desc *hw, const host_mode *mode, int batch, int decode_only,
                      double kernels, double gpu_s)
{
    if (batch <= 0 || !mode->on)
        return gpu_s;
    double t = gpu_s;
    if ((!decode_only || batch > mode->graph_max_bs) && kernels * hw->eager_launch_s > t)
        t = kernels * hw->eager_launch_s;
    double sched = hw->sched_s + hw->sched_req_s * batch;
    if (mode->overlap)
        return t > sched ? t : sched;
    return t + sched;
}
