/*
 * Cost model: seconds for the operations the simulator prices, from FLOPs and
 * bytes with the efficiency parameters of hw_desc.  Pure functions: shapes in,
 * seconds out; no state, cannot fail (callers pass validated descriptions).
 *
 * Attention is priced from per-sequence contexts: callers pass sums over the
 * sequences of a batch (sum of context lengths, sum of q*ctx products), never
 * a batch mean, because the tail lives in those sums.
 */
#ifndef TS_COST_H
#define TS_COST_H

#include "models/hw.h"

/* One GEMM of (m x k) by (k x n) in bf16 on one GPU, s.  Includes launch
 * overhead, tile/wave quantization and the memory-bound regime. */
double cost_gemm(const hw_desc *hw, double m, double n, double k);

/* A streaming elementwise kernel moving `bytes` bytes, s. */
double cost_stream(const hw_desc *hw, double bytes);

/* ---- per-op predictors (what `tailsim calib check` fits and checks) ------
 * cost_iter() below is the sum of these over one layer, with the same
 * arithmetic, so a prediction for one measured op is the simulator's price
 * for it.  All pure; they cannot fail and return 0 for empty work. */

/* The elementwise kernels serving engines run between the GEMMs. */
typedef enum cost_kernel_kind {
    COST_K_ADD,             /* residual add */
    COST_K_ACT,             /* SiLU(gate) * up */
    COST_K_ROPE,            /* rotary embedding of q and k */
    COST_K_NORM,            /* RMSNorm */
    COST_K_GATHER,          /* embedding gather */
    COST_K_COUNT
} cost_kernel_kind;

/* One elementwise kernel of `kind` moving `bytes` bytes (the cost model's
 * count: each input read once, each output written once), s: launch_s plus
 * bytes at the kind's fraction of the streaming bandwidth. */
double cost_kernel(const hw_desc *hw, cost_kernel_kind kind, double bytes);

/* Decode attention of `batch` sequences, one query token each, over
 * contexts summing to ctx_sum tokens, with `heads` query heads and
 * `kv_heads` KV heads of head_dim (TP-local), s. */
double cost_attn_decode(const hw_desc *hw, double heads, double kv_heads, double head_dim,
                        double batch, double ctx_sum);

/* Causal attention of chunks (prefill chunks, or V verified tokens per
 * sequence): q_tokens query tokens in all, attn_sum (query, key) pairs
 * (per chunk q*(ctx_before + (q+1)/2)), kv_sum KV tokens read (per chunk
 * ctx_before + q), s. */
double cost_attn_chunk(const hw_desc *hw, double heads, double kv_heads, double head_dim,
                       double q_tokens, double attn_sum, double kv_sum);

/* A batch of work for one forward pass of the model on one TP group. */
typedef struct cost_batch {
    int n_decode;           /* sequences producing one token each */
    double decode_ctx_sum;  /* sum over decode sequences of context length, tokens */
    int n_prefill_seqs;     /* sequences with a prefill chunk in this pass */
    int prefill_tokens;     /* sum of chunk lengths, tokens */
    double prefill_attn;    /* sum over chunks of q*(ctx_before + (q+1)/2), token^2 */
    double prefill_kv_sum;  /* sum over chunks of (ctx_before + q): KV read, tokens */
} cost_batch;

/* Time of one forward iteration (all layers, LM head, TP all-reduces) of the
 * batch on a TP group of `tp` GPUs, s.  An empty batch costs 0. */
double cost_iter(const hw_desc *hw, const llm_desc *m, int tp, const cost_batch *b);

/* Convenience wrappers around cost_iter(). */
double cost_decode_iter(const hw_desc *hw, const llm_desc *m, int tp,
                        int batch, double ctx_sum);
double cost_prefill_chunk(const hw_desc *hw, const llm_desc *m, int tp,
                          int tokens, double ctx_before);

/* Training: forward (1x) and backward (2x) of `tokens` tokens in sequences
 * whose squared lengths sum to `sq_sum`, on one GPU of a data-parallel group
 * (no TP), s.  `recompute` adds one forward. */
double cost_train_fwd(const hw_desc *hw, const llm_desc *m, double tokens, double sq_sum);
double cost_train_fwd_bwd(const hw_desc *hw, const llm_desc *m, double tokens,
                          double sq_sum, int recompute);

/* Per-operator prediction for one layer, as Vidur profiles them (ms are the
 * caller's business; this returns s).  `tokens` rows on a TP group of `tp`;
 * returns -1.0 for an unknown op name. */
double cost_vidur_op(const hw_desc *hw, const llm_desc *m, int tp,
                     const char *op, int tokens);

#endif
