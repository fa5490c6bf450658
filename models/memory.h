/*
 * Memory model: bytes of weights, KV cache and optimizer states per GPU.
 */
#ifndef TS_MEMORY_H
#define TS_MEMORY_H

#include "models/hw.h"

/* bf16 weights per GPU under tensor parallelism tp, bytes. */
double mem_weights(const llm_desc *m, int tp);
/* KV cache bytes per token per GPU (K and V, all layers, bf16, heads split by tp;
 * KV heads are replicated when tp > kv_heads). */
double mem_kv_per_token(const llm_desc *m, int tp);
/* KV capacity in tokens of one GPU: (hbm * util - weights - reserve) / per-token.
 * Returns <= 0 when the model does not fit. */
double mem_kv_capacity(const hw_desc *hw, const llm_desc *m, int tp, double util,
                       double reserve_bytes);
/* Model states per GPU for mixed-precision Adam under ZeRO stage (0..3) over
 * dp GPUs: 2 (bf16 weights) + 2 (grads) + 12 (fp32 master, m, v) bytes/param. */
double mem_model_states(const llm_desc *m, int zero_stage, int dp);
/* Training activations kept per token per GPU (no TP/SP split), bytes: 34 *
 * hidden per layer with flash attention (Korthikanti et al. 2022), or 2 *
 * hidden per layer (the layer input) with full recomputation (added). */
double mem_act_per_token(const llm_desc *m, int recompute);

/* Training activations of one layer per token per GPU (no TP/SP split),
 * bytes: act_factor * hidden when the layer keeps its activations (34 for a
 * decoder with flash attention, Korthikanti et al. 2022), 2 * hidden (its
 * bf16 input) when it is checkpointed.  Cannot fail. */
double mem_act_layer_per_token(const llm_desc *m, double act_factor, int checkpointed);
/* Model states per GPU of `params` parameters under ZeRO stage (0..3) over
 * dp GPUs, with the accounting of mem_model_states(), bytes. */
double mem_model_states_params(double params, int zero_stage, int dp);

/* Peak memory per GPU of an FSDP actor update (VeRL's FSDP workers), bytes:
 * what mem_train_fsdp() counts, term by term. */
typedef struct mem_train {
    double states;   /* fp32 parameters, gradients, Adam m and v, sharded over the
                      * trainer's GPUs (16 B/param / gpus); 0 when offloaded */
    double gathered; /* two FSDP units' bf16 weights, all-gathered (the one
                      * computing and the one prefetched) */
    double kept;     /* activations kept for the backward: each layer's bf16
                      * input when checkpointed, else every layer's act_factor */
    double layer;    /* one checkpointed layer's activations while it is
                      * recomputed and back-propagated */
    double logits;   /* the LM head's bf16 logits and one tensor of their size
                      * (their gradient), tokens x vocab x 4 B */
    double total;    /* their sum, per GPU */
    double host;     /* offloaded model states held by one node's host memory */
} mem_train;

/* Fills *out for an actor of `params` parameters (m's shapes) whose states
 * are sharded over `gpus` GPUs, `node_gpus` of the trainer's GPUs on one node
 * (each holding one shard), each GPU holding `tokens` tokens of its largest
 * micro-batch (its share of the sequences under sequence parallelism), with
 * full activation checkpointing (recompute 1) or none, act_factor bytes per
 * token per hidden unit for a kept layer, and the model states on the GPU
 * (offload 0) or on the host (1, FSDP2's CPUOffloadPolicy).  Cannot fail. */
void mem_train_fsdp(const llm_desc *m, int gpus, int node_gpus, double tokens, int recompute,
                    double act_factor, int offload, mem_train *out);

#endif
