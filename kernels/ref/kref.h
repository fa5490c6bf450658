/*
 * Plain C references for the operations the CUDA kernels (the .cu files in
 * kernels/) implement.  These functions are the specification: each kernel
 * is correct when it agrees with its reference on random inputs within
 * abs + |ref| * eps(bf16).  They are written for clarity, not speed
 * (double accumulation, no blocking) and never touch CUDA, so they build and
 * are tested on any machine (tests/test_kernels_ref.c).
 *
 * Data is float.  bf16 storage on the GPU is emulated by rounding inputs with
 * kref_round_bf16() before handing the same values to both sides; outputs are
 * left in float (the GPU rounds its outputs to bf16, which the tolerance
 * absorbs).
 *
 * Layouts (row-major, the innermost index last):
 *   GEMM      A [m, k]; B [n, k] for kref_gemm_nt (C = A·B^T, the layout of a
 *             torch.nn.Linear weight) or B [k, n] for kref_gemm_nn (C = A·B);
 *             C [m, n].
 *   attention q [total_q, heads, hd]; K and V [total_kv, kv_heads, hd], the
 *             sequences packed one after another (sequence i owns ctx[i] rows
 *             starting at the sum of the previous ctx); out like q.  Query head
 *             h reads KV head h / (heads / kv_heads) (GQA).  Scores are scaled
 *             by 1/sqrt(hd).
 *   rows      RMSNorm, SwiGLU and the embedding work on [rows, dim] matrices.
 *
 * Functions returning int return 0 on success and -1 when a shape or index is
 * invalid (nothing is written then); the others cannot fail.  Nothing here
 * allocates memory that the caller must free.
 */
#ifndef TS_KREF_H
#define TS_KREF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- bf16 ---------------------------------------------------------------- */

/* float -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN. */
uint16_t kref_f2bf(float x);
/* bf16 bits -> float (exact). */
float kref_bf2f(uint16_t h);
/* x rounded to the nearest bf16 value, as float. */
float kref_bf16_round(float x);
/* Rounds n floats in place to bf16 values. */
void kref_round_bf16(float *x, size_t n);
/* Machine epsilon of bf16 (2^-7): the spacing of bf16 values in [1, 2). */
#define KREF_BF16_EPS 0.0078125

/* ---- GEMM ---------------------------------------------------------------- */

/* C[i][j] = sum_l A[i][l] * B[j][l]   (A [m,k], B [n,k], C [m,n]). */
void kref_gemm_nt(const float *A, const float *B, float *C, int m, int n, int k);
/* C[i][j] = sum_l A[i][l] * B[l][j]   (A [m,k], B [k,n], C [m,n]). */
void kref_gemm_nn(const float *A, const float *B, float *C, int m, int n, int k);

/* ---- attention ----------------------------------------------------------- */

/* Decode attention: one query token per sequence, attending to all ctx[i]
 * cached tokens of its sequence.  q and out are [b, heads, hd].  Fails when
 * heads is not a multiple of kv_heads, a ctx[i] < 1 or a size is < 1. */
int kref_decode_attn(const float *q, const float *k, const float *v,
                     const int *ctx, int b, int heads, int kv_heads, int hd,
                     float *out);

/* Causal chunk attention: sequence i has ctx[i] cached tokens of which the
 * last q_len[i] are its chunk (prefill chunk or the V tokens being verified;
 * their K/V are already in the cache).  Query j of sequence i sits at
 * position ctx[i] - q_len[i] + j and attends to positions 0..that position.
 * q and out are [sum q_len, heads, hd].  Fails on bad shapes or when
 * q_len[i] > ctx[i] or q_len[i] < 0. */
int kref_chunk_attn(const float *q, const float *k, const float *v,
                    const int *ctx, const int *q_len, int b, int heads,
                    int kv_heads, int hd, float *out);

/* ---- row-wise ops -------------------------------------------------------- */

/* out[r][i] = x[r][i] / sqrt(mean_i(x[r][i]^2) + eps) * w[i]. */
void kref_rmsnorm(const float *x, const float *w, float *out, int rows, int dim,
                  float eps);

/* Rotary embedding, rotate-half convention (Llama, Qwen2): for each token t,
 * head and i < hd/2, with a = pos[t] * theta^(-2i/hd):
 *   x'[i]        = x[i] cos a - x[i + hd/2] sin a
 *   x'[i + hd/2] = x[i + hd/2] cos a + x[i] sin a
 * in place on x [tokens, heads, hd] (hd even).  Qwen2.5 uses theta = 1e6. */
void kref_rope(float *x, const int *pos, int tokens, int heads, int hd,
               double theta);
#define KREF_QWEN25_ROPE_THETA 1000000.0

/* out[r][i] = silu(gate_up[r][i]) * gate_up[r][ffn + i], silu(g) = g/(1+e^-g);
 * gate_up [rows, 2*ffn] (gate half first, as the fused projection writes it),
 * out [rows, ffn]. */
void kref_swiglu(const float *gate_up, float *out, int rows, int ffn);

/* out[t] = table[ids[t]] (rows of dim floats).  Fails, writing nothing, when
 * an id is outside [0, vocab). */
int kref_embed(const float *table, int vocab, int dim, const int *ids, int n,
               float *out);

/* ---- greedy verification ------------------------------------------------- */

/* out[r] = the smallest index of the largest non-NaN value of row r of
 * logits [rows, vocab]; 0 when the whole row is NaN. */
void kref_argmax(const float *logits, int rows, int vocab, int *out);

/* Greedy chain verification.  draft [b, V] are the drafter's tokens, target
 * [b, V+1] the target model's argmax after each prefix (target[j] is its
 * choice for position j given draft[0..j-1]).  n_accept[i] = the length of
 * the longest prefix with draft[j] == target[j] (0..V); the sequence then
 * emits n_accept[i] + 1 tokens, written to out_tokens [b, V+1] as
 * target[0..n_accept] followed by -1 padding. */
void kref_greedy_accept(const int *draft, const int *target, int b, int V,
                        int *n_accept, int *out_tokens);

#ifdef __cplusplus
}
#endif

#endif
