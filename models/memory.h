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

#endif
