/*
 * Internals of the training forward/backward (train.cu) implemented in
 * train_ops.cu: the backward kernels.  The backward's matrix products go
 * through blas.cuh's kb_matmul (transposes, strided batches, fp32 output
 * and accumulation, a plan cache), included here for train.cu.  Not part of
 * the C interface (kernels.h).
 */
#ifndef TS_TRAIN_CUH
#define TS_TRAIN_CUH

#include "kernels/blas.cuh"
#include "kernels/cuda_common.cuh"

/* dx = rmsnorm_bwd(x, w, dy) + g_in (g_in NULL: 0), bf16; dw += (fp32);
 * dim a multiple of 8, <= 8192. */
int kx_rmsnorm_bwd(const kt_bf16 *x, const kt_bf16 *w, const kt_bf16 *dy, const kt_bf16 *g_in,
                   kt_bf16 *dx, float *dw, int rows, int dim, float eps);
/* dgu [rows, 2 ffn] from gu [rows, 2 ffn] and ds [rows, ffn]. */
int kx_swiglu_bwd(const kt_bf16 *gu, const kt_bf16 *ds, kt_bf16 *dgu, int rows, int ffn);
/* Causal softmax of nmat score matrices [L, L] (fp32, row stride ld,
 * matrix stride st): P[i][j] = softmax over j <= i, 0 for j > i (bf16, same
 * layout in elements). */
int kx_softmax_causal(const float *S, kt_bf16 *P, int nmat, int L, int ld, long long st);
/* In place P -> dS = P (dP - Dv[i]) for j <= i, 0 above; Dv of matrix h,
 * row i at Dv[i * dstride + h]. */
int kx_dsoftmax(kt_bf16 *P, const float *dP, const float *Dv, int nmat, int L, int ld,
                long long st, int dstride);
/* Dv[r] = sum_e dO[r][e] O[r][e] over rows of hd (r < rows). */
int kx_rowdot(const kt_bf16 *dO, const kt_bf16 *O, float *Dv, int rows, int hd);
/* kexp [T, heads, hd] = k [T, kv_heads, hd] repeated G = heads / kv_heads times. */
int kx_expand_kv(const kt_bf16 *k, kt_bf16 *kexp, int T, int heads, int kv_heads, int hd);
/* d [T, kv_heads, hd] = sum over each KV head's G query heads of dexp. */
int kx_reduce_kv(const kt_bf16 *dexp, kt_bf16 *d, int T, int heads, int kv_heads, int hd);
/* dqkv [T, (heads + 2 kv_heads) hd] = [dq | dk | dv] row by row. */
int kx_qkv_merge(const kt_bf16 *dq, const kt_bf16 *dk, const kt_bf16 *dv, kt_bf16 *dqkv,
                 int T, int heads, int kv_heads, int hd);
/* out[c] += sum over rows of x[r][c] (fp32 out). */
int kx_colsum(const kt_bf16 *x, float *out, int rows, int cols);

/* Selftest tolerances (kt_tol): the bf16 roundings of one layer's backward
 * pass, as kref_train_layer_bwd does them: ds, dgu, dh, dx2, d(attention
 * out), P and dS (GPU only), dq/dk/dv, RoPE backward, dqkv, dh, dx.  A
 * gradient's path is bounded by every forward and backward rounding of the
 * stack (KL_LAYER_STAGES + KTR_BWD_STAGES per layer). */
#define KTR_BWD_STAGES 12

#endif
