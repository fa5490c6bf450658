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


/* ---- decoder layer, stack and EAGLE drafter (kref_layer.c) --------------- */

/* TP-local shapes of a Qwen2.5-style decoder: heads, kv_heads, ffn and vocab
 * are the per-GPU slices (the model's value / tp); hidden is whole. */
typedef struct kref_shape {
    int hidden, heads, kv_heads, hd, ffn, vocab;
    float eps;    /* RMSNorm epsilon (1e-6 for Qwen2.5) */
    double theta; /* RoPE base (KREF_QWEN25_ROPE_THETA) */
} kref_shape;

/* One decoder layer's weights, torch.nn.Linear layout [out, in]. */
typedef struct kref_layer_w {
    const float *ln1;   /* [hidden] */
    const float *wqkv;  /* [(heads + 2 kv_heads) hd, hidden]: q rows, k rows, v rows */
    const float *bqkv;  /* [(heads + 2 kv_heads) hd], or NULL for no bias */
    const float *wo;    /* [hidden, heads hd] */
    const float *ln2;   /* [hidden] */
    const float *wgu;   /* [2 ffn, hidden]: gate rows, then up rows */
    const float *wdown; /* [hidden, ffn] */
} kref_layer_w;

/* One layer's KV cache: k and v [rows, kv_heads, hd]; position p of
 * sequence i lives at row off[i] + p (sequences own disjoint row ranges). */
typedef struct kref_kv {
    float *k, *v;
    const long long *off;
} kref_kv;

/* A forward step over b sequences: sequence i has len[i] cached tokens and
 * brings q_len[i] >= 0 new ones; the T = sum q_len new tokens are the rows
 * of the activations, sequence by sequence.  Their K/V are written to cache
 * positions len[i] .. len[i] + q_len[i] - 1 and new token j attends to
 * positions 0 .. len[i] + j (kref_chunk_attn's causal rule).  pos [T] are
 * the RoPE positions, or NULL for len[i] + j. */
typedef struct kref_batch {
    int b;
    const int *len, *q_len, *pos;
} kref_batch;

/* One pre-norm decoder layer, in place on the residual stream x [T, hidden]:
 *   h = rmsnorm(x, ln1); qkv = h wqkv^T + bqkv; q, k = rope(q, k);
 *   append k, v; o = attention; x += o wo^T;
 *   h = rmsnorm(x, ln2); x += swiglu(h wgu^T) wdown^T.
 * round != 0 rounds every stored intermediate to bf16 where the CUDA layer
 * (kernels/layer.cu) stores bf16 (including qkv before the bias is added),
 * so that the two agree to rounding flips.  Returns 0, or -1 on a bad shape
 * or when out of memory. */
int kref_layer_forward(const kref_shape *s, const kref_layer_w *w,
                       const kref_batch *bt, kref_kv *kv, float *x, int round);

/* A stack: embedding, layers, final RMSNorm, LM head (not tied). */
typedef struct kref_model {
    kref_shape s;
    int layers;
    const float *embed;        /* [vocab, hidden] */
    const kref_layer_w *layer; /* [layers] */
    const float *final_norm;   /* [hidden] */
    const float *lm_head;      /* [vocab, hidden] */
} kref_model;

/* Number of logit rows of a step: T when all_logits, else the number of
 * sequences with q_len > 0 (the last new token of each, in order). */
int kref_logit_rows(const kref_batch *bt, int all_logits);

/* Full forward of the new tokens [T] (ids in [0, vocab)) through the stack,
 * kv[layers] one cache per layer.  hidden [T, hidden] (may be NULL) gets the
 * residual stream after the last layer, before the final norm (what EAGLE
 * feeds its drafter); logits [kref_logit_rows, vocab].  Returns 0 or -1. */
int kref_model_forward(const kref_model *m, const kref_batch *bt, kref_kv *kv,
                       const int *tokens, int all_logits, float *hidden,
                       float *logits, int round);

/* The EAGLE drafter: fc (2 hidden -> hidden, no bias) over [embedding of the
 * token ; feature], one decoder layer of the target's shape with its own KV
 * cache, its own final norm, and the target's embedding and LM head. */
typedef struct kref_drafter {
    kref_shape s;
    const float *fc;      /* [hidden, 2 hidden] */
    kref_layer_w layer;
    const float *norm;    /* [hidden] */
    const float *embed;   /* target's [vocab, hidden] */
    const float *lm_head; /* target's [vocab, hidden] */
} kref_drafter;

/* One draft step over the step's rows (bt as for a layer, q_len[i] rows of
 * sequence i): x = fc([embed(tokens) ; feat]); layer; hout = x (the next
 * step's features); logits = lm_head(rmsnorm(x, norm)).  feat, hout
 * [T, hidden], logits [T, vocab].  Returns 0 or -1. */
int kref_draft_forward(const kref_drafter *d, const kref_batch *bt, kref_kv *kv,
                       const int *tokens, const float *feat, float *hout,
                       float *logits, int round);

/* The k largest values of each row of logits [rows, vocab] in descending
 * order (ties: smaller index first; NaN never chosen), their indices, and
 * the row's log-sum-exp.  1 <= k <= vocab. */
void kref_topk(const float *logits, int rows, int vocab, int k, int *idx,
               float *val, float *lse);

/* Beam expansion of a draft tree (see kernels/drafter.cu): sequence i has
 * n_prev frontier rows r (rows i*n_prev + r) with cumulative log-probability
 * score[row]; each row's top-k (idx, val, lse from kref_topk) gives n_prev*k
 * candidates scored score[row] + val - lse.  The k best (ties: smaller
 * (r, rank) first) become the next frontier: tok [b*k], parent r [b*k],
 * new cumulative score [b*k].  n_prev * k <= 4096. */
void kref_draft_select(int b, int n_prev, int k, const float *score,
                       const int *idx, const float *val, const float *lse,
                       int *tok, int *parent, float *new_score);


/* ---- training: backward of each op and of a layer (kref_train.c) -------- */

/* C[i][j] = sum_l A[l][i] * B[l][j]   (A [k, m], B [k, n], C [m, n]): the
 * weight gradient dW = dY^T X of a linear layer. */
void kref_gemm_tn(const float *A, const float *B, float *C, int m, int n, int k);

/* Backward of kref_rmsnorm: with r = 1/sqrt(mean(x^2) + eps),
 *   dx[i] = r w[i] dy[i] - x[i] r^3 mean_j(w[j] dy[j] x[j])   (written),
 *   dw[i] += sum over rows of dy[i] x[i] r                  (accumulated). */
void kref_rmsnorm_bwd(const float *x, const float *w, const float *dy, int rows,
                      int dim, float eps, float *dx, float *dw);

/* Backward of kref_swiglu: dgate_up [rows, 2 ffn] (written) from dout
 * [rows, ffn]: d gate = dout * up * silu'(gate), d up = dout * silu(gate). */
void kref_swiglu_bwd(const float *gate_up, const float *dout, int rows, int ffn,
                     float *dgate_up);

/* Backward of kref_rope, in place: the transposed rotation, which is RoPE at
 * the negated positions. */
void kref_rope_bwd(float *dx, const int *pos, int tokens, int heads, int hd,
                   double theta);

/* Backward of kref_chunk_attn (same arguments and layouts): dq like q
 * (written), dk and dv like k and v (written; GQA heads summed).  The
 * softmax is recomputed in double.  Returns 0 or -1 as kref_chunk_attn. */
int kref_chunk_attn_bwd(const float *q, const float *k, const float *v,
                        const float *dout, const int *ctx, const int *q_len, int b,
                        int heads, int kv_heads, int hd, float *dq, float *dk,
                        float *dv);

/* Training activations of one layer over T packed tokens (sequences of
 * lens[0..n-1], causal within each, positions 0..len-1): what the backward
 * needs.  x is the layer input; x2 the residual after attention. */
typedef struct kref_acts {
    float *x, *h1, *q, *k, *v, *o, *x2, *h2, *gu, *s;
} kref_acts;

/* Floats needed by kref_acts_carve for T tokens. */
size_t kref_acts_floats(const kref_shape *s, int T);
/* Points the fields of a into buf (kref_acts_floats(s, T) floats). */
void kref_acts_carve(const kref_shape *s, int T, float *buf, kref_acts *a);

/* Weight gradients of one layer, shaped like kref_layer_w (bqkv may be
 * NULL when the layer has no bias); kref_train_layer_bwd adds to them. */
typedef struct kref_layer_g {
    float *ln1, *wqkv, *bqkv, *wo, *ln2, *wgu, *wdown;
} kref_layer_g;

/* Training forward of one layer (kref_layer_forward's math without a cache:
 * K/V of the packed batch itself): x_in [T, hidden] -> x_out, saving a.
 * round as for kref_layer_forward.  Returns 0 or -1. */
int kref_train_layer_fwd(const kref_shape *s, const kref_layer_w *w, const int *lens,
                         int n, const float *x_in, kref_acts *a, float *x_out, int round);

/* Backward of kref_train_layer_fwd from dy = dL/dx_out: dx = dL/dx_in
 * (written), weight gradients added to g.  round != 0 rounds the activation
 * gradients where kernels/train.cu stores them in bf16 (weight gradients
 * stay fp32).  Returns 0 or -1. */
int kref_train_layer_bwd(const kref_shape *s, const kref_layer_w *w, const int *lens,
                         int n, const kref_acts *a, const float *dy, float *dx,
                         kref_layer_g *g, int round);

#ifdef __cplusplus
}
#endif

#endif
