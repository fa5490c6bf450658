/*
 * Memory model: bytes per GPU of weights, KV cache, model states and
 * activations, from the LLM description alone.
 *
 * Weights are bf16.  Under tensor parallelism tp the attention and MLP
 * matrices and the (vocab-parallel) embedding and LM head are split tp ways;
 * norms are replicated; when tp exceeds the KV head count the K/V projections
 * and the KV cache are replicated so every GPU holds at least one KV head
 * (vLLM/SGLang behaviour).  Model states follow the ZeRO paper's accounting
 * for mixed-precision Adam: 2 (bf16 weights) + 2 (bf16 grads) + 12 (fp32
 * master weights, momentum, variance) bytes per parameter, with stage 1
 * partitioning the 12, stage 2 also the grads, stage 3 everything over dp.
 * Activations follow Korthikanti et al. (2022) with flash attention (no
 * s^2 term): 34 * hidden bytes per token per layer, or 2 * hidden (the layer
 * input) with full recomputation.  Pure functions, bytes; they cannot fail.
 * Used by the rollout replica (KV capacity), by DCP (memory feasibility) and
 * by the RL trainers (mem_train_fsdp: the actor update's peak).
 */
#include "models/memory.h"

#include <math.h>

/* KV heads held by one GPU. */
static double kv_heads_per_gpu(const llm_desc *m, int tp)
{
    if (tp < 1)
        tp = 1;
    double kvh = (double)m->kv_heads / tp;
    if (kvh < 1.0)
        kvh = 1.0;
    return kvh;
}

double mem_weights(const llm_desc *m, int tp)
{
    if (tp < 1)
        tp = 1;
    double h = m->hidden, hd = m->head_dim;
    double q = (double)m->heads * hd;
    double kv = kv_heads_per_gpu(m, tp) * hd; /* per GPU */
    double attn = (h * q + q * h) / tp + 2.0 * h * kv;
    if (m->qkv_bias)
        attn += q / tp + 2.0 * kv;
    double mlp = (m->gated ? 3.0 : 2.0) * h * m->ffn / tp;
    double per_layer = attn + mlp + 2.0 * h;
    double emb = (double)m->vocab * h;
    double vocab_mats = (m->tied ? emb : 2.0 * emb) / tp;
    return 2.0 * (m->layers * per_layer + vocab_mats + h);
}

double mem_kv_per_token(const llm_desc *m, int tp)
{
    return (double)m->layers * 2.0 * kv_heads_per_gpu(m, tp) * m->head_dim * 2.0;
}

double mem_kv_capacity(const hw_desc *hw, const llm_desc *m, int tp, double util,
                       double reserve_bytes)
{
    double free_bytes = hw->hbm_bytes * util - mem_weights(m, tp) - reserve_bytes;
    return free_bytes / mem_kv_per_token(m, tp);
}

double mem_model_states(const llm_desc *m, int zero_stage, int dp)
{
    return mem_model_states_params(llm_params(m), zero_stage, dp);
}

double mem_act_per_token(const llm_desc *m, int recompute)
{
    return m->layers * mem_act_layer_per_token(m, 34.0, recompute);
}

double mem_act_layer_per_token(const llm_desc *m, double act_factor, int checkpointed)
{
    return (checkpointed ? 2.0 : act_factor) * m->hidden;
}

double mem_model_states_params(double params, int zero_stage, int dp)
{
    double p = params;
    double n = dp < 1 ? 1.0 : (double)dp;
    switch (zero_stage) {
    case 0:
        return 16.0 * p;
    case 1:
        return 4.0 * p + 12.0 * p / n;
    case 2:
        return 2.0 * p + 14.0 * p / n;
    default:
        return 16.0 * p / n;
    }
}

void mem_train_fsdp(const llm_desc *m, int gpus, int node_gpus, double tokens, int recompute,
                    double act_factor, int offload, mem_train *out)
{
    double n = gpus < 1 ? 1.0 : (double)gpus;
    int local = node_gpus < 1 ? 1 : node_gpus;
    double P = llm_params(m), h = m->hidden;
    /* VeRL keeps the actor in fp32 (model_dtype) with bf16 compute: fp32
     * parameters and gradients and Adam's two fp32 moments, all sharded */
    double states = 16.0 * P / n;
    /* the largest FSDP unit: a decoder layer, or the embedding / LM head */
    double vocab_mats = (m->tied ? 1.0 : 2.0) * m->vocab * h;
    double layer_p = (P - vocab_mats - h) / (m->layers > 0 ? m->layers : 1);
    double unit = fmax(layer_p, (double)m->vocab * h);
    out->states = offload ? 0.0 : states;
    out->host = offload ? states * local : 0.0;
    out->gathered = 2.0 * 2.0 * unit;
    out->kept = m->layers * mem_act_layer_per_token(m, act_factor, recompute) * tokens;
    out->layer = recompute ? act_factor * h * tokens : 0.0;
    out->logits = 4.0 * (double)m->vocab * tokens;
    out->total = out->states + out->gathered + out->kept + out->layer + out->logits;
}
