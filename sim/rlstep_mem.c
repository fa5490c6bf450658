/*
 * Memory of the RL trainers' FSDP actor.
 *
 * The peak is the actor update's (models/memory.c, mem_train_fsdp): the
 * forward-only phases (old log-prob, reference) make no gradients and keep
 * no activations for a backward, so they fit when the update does.  The
 * rollout's KV capacity (rollout.mem_util) assumes the trainer's states are
 * not on the GPU while it runs, as VeRL's param_offload / optimizer_offload
 * or its sleep mode arrange.
 *
 * train.offload keeps the model states in host memory for the whole update
 * (FSDP2's CPUOffloadPolicy): every micro-batch copies the GPU's fp32 shard
 * in for its forward and again for its backward (the parameters are
 * resharded after the forward) and copies the fp32 gradient shard out;
 * prefetching overlaps the copies with compute as it does the all-gathers,
 * so the trainers take the larger of the two.  The optimizer step runs on
 * the host CPUs: Adam reads parameters, gradients and both moments and
 * writes back three of them, 28 bytes per parameter, over a node's memory
 * bandwidth for the shards of its GPUs.
 */
#include "sim/rlstep_mem.h"

#include <math.h>
#include <stdio.h>

#include "models/comm.h"
#include "models/hw.h"

double train_mem_tokens(const scenario *s, double longest)
{
    double budget = s->micro_batch_tokens;
    if (s->mini_batch_prompts > 0) /* sim/rlstep_verl.c: a rank's budget is sp times it */
        return fmax(budget, longest / (s->train_sp > 0 ? s->train_sp : 1));
    return fmax(budget, longest);
}

/* GPUs to a node, the scenario's or the hardware's. */
static int node_size(const scenario *s, const hw_desc *hw)
{
    return s->gpus_per_node > 0 ? s->gpus_per_node : hw->gpus_per_node;
}

/* The trainer's GPUs on one node. */
static int node_gpus(const scenario *s, const hw_desc *hw, int gpus)
{
    int gpn = node_size(s, hw);
    return gpn < gpus ? gpn : gpus;
}

/* The shard group: train.fsdp_size when it divides gpus and is smaller,
 * else all of them (train_fsdp_group() says when it does not divide). */
static int shard_group(const scenario *s, int gpus)
{
    int f = s->train_fsdp_size;
    return f > 0 && f < gpus && gpus % f == 0 ? f : gpus;
}

double train_hsdp_allreduce(const scenario *s, const hw_desc *hw, double bytes, int gpus, int f)
{
    if (f <= 0 || f >= gpus)
        return 0.0;
    int gpn = node_size(s, hw);
    int nodes = (gpus + gpn - 1) / gpn, reps = gpus / f;
    return comm_allreduce_spread(hw, bytes / f, reps, nodes < reps ? nodes : reps);
}

int train_fsdp_group(const scenario *s, int gpus, ts_err *e)
{
    int f = s->train_fsdp_size;
    if (f > 0 && f < gpus && gpus % f)
        return ts_errf(e, "%s: train.fsdp_size = %d does not divide the trainer's %d GPUs",
                       s->path, f, gpus);
    return shard_group(s, gpus);
}

void train_mem_eval(const scenario *s, const hw_desc *hw, const llm_desc *m, int gpus,
                    double tokens, train_mem *tm)
{
    int local = node_gpus(s, hw, gpus), f = shard_group(s, gpus);
    mem_train_fsdp(m, f, local, tokens, s->recompute, s->dcp.act_factor, s->train_offload,
                   &tm->need);
    tm->group = f;
    tm->fwd_s = tm->ref_s = tm->bwd_s = tm->opt_s = 0;
    if (s->train_offload) {
        double shard = llm_params(m) / f;
        tm->fwd_s = 4.0 * shard / hw->pcie_bw;
        tm->ref_s = 2.0 * shard / hw->pcie_bw;
        tm->bwd_s = 8.0 * shard / hw->pcie_bw;
        tm->opt_s = 28.0 * shard * local / hw->host_mem_bw;
    }
}

void train_mem_hint(const scenario *s, double tokens, char *buf, size_t n)
{
    const char *more = s->train_fsdp_size > 0 ? "use a larger train.fsdp_size (or none)"
                                              : "use more GPUs";
    if (tokens <= s->micro_batch_tokens)
        snprintf(buf, n, "%s, a smaller train.micro_batch_tokens, or train.offload = true", more);
    else if (s->mini_batch_prompts > 0)
        snprintf(buf, n, "%s, a larger train.sp (the longest sequence sets the tokens), or "
                         "train.offload = true", more);
    else
        snprintf(buf, n, "%s, sequence parallelism (VeRL's trainer: train.mini_batch_prompts "
                         "and train.sp; the longest sequence sets the tokens), or "
                         "train.offload = true", more);
}

int train_mem_plan(const scenario *s, const hw_desc *hw, const llm_desc *m, int gpus,
                   double tokens, train_mem *tm, ts_err *e)
{
    if (train_fsdp_group(s, gpus, e) < 0)
        return -1;
    char hint[192];
    train_mem_hint(s, tokens, hint, sizeof hint);
    train_mem_eval(s, hw, m, gpus, tokens, tm);
    int f = tm->group;
    const mem_train *n = &tm->need;
    double cap = s->train_mem_cap * hw->hbm_bytes;
    char fsdp_note[64];
    snprintf(fsdp_note, sizeof fsdp_note, " (states sharded over %d, train.fsdp_size)", f);
    if (n->total > cap)
        return ts_errf(e, "%s: train: the actor update of %s on %d GPUs%s needs %.1f GB per GPU "
                          "(model states %.1f, gathered weights %.1f, kept activations %.1f, "
                          "one layer %.1f, logits %.1f; %.0f tokens per GPU), over "
                          "train.mem_cap %.2f x %.1f GB of %s = %.1f GB; %s",
                       s->path, m->name, gpus, f < gpus ? fsdp_note : "", n->total / 1e9,
                       n->states / 1e9,
                       n->gathered / 1e9, n->kept / 1e9, n->layer / 1e9, n->logits / 1e9,
                       tokens, s->train_mem_cap, hw->hbm_bytes / 1e9, hw->name, cap / 1e9, hint);
    if (n->host > hw->host_bytes)
        return ts_errf(e, "%s: train.offload: the model states of %s on %d GPUs take %.0f GB of "
                          "host memory per node (%d GPUs' shards), over the %.0f GB of a %s "
                          "node; use %s",
                       s->path, m->name, gpus, n->host / 1e9, node_gpus(s, hw, gpus),
                       hw->host_bytes / 1e9, hw->name,
                       f < gpus ? "a larger train.fsdp_size (or none)" : "more GPUs");
    return 0;
}
