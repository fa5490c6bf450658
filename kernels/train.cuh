/*
 * Internals of the training forward/backward (train.cu) implemented in
 * train_ops.cu: a general cuBLASLt matmul (transposes, strided batches,
 * fp32 output and accumulation, a plan cache) and the backward kernels.
 * Not part of the C interface (kernels.h).
 */
#ifndef TS_TRAIN_CUH
#define TS_TRAIN_CUH

#include "kernels/cuda_common.cuh"

/* Row-major D[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta D, batched:
 * A is [m, k] (ta 0) or [k, m] (ta 1) with row stride lda elements, B is
 * [k, n] (tb 0) or [n, k] (tb 1); matrix b of a batch starts sA, sB, sD
 * elements after matrix b-1.  A and B bf16; D bf16 or fp32 (d_f32), fp32
 * accumulation.  beta != 0 reads D (C = D in cuBLASLt's terms). */
struct kx_mm {
    int ta, tb, m, n, k;
    const kt_bf16 *A;
    long long lda, sA;
    const kt_bf16 *B;
    long long ldb, sB;
    void *D;
    long long ldd, sD;
    int batch, d_f32;
    float alpha, beta;
};

struct kx_blas;
kx_blas *kx_blas_new(void);
void kx_blas_free(kx_blas *b);
size_t kx_blas_bytes(const kx_blas *b); /* device workspace */
int kx_matmul(kx_blas *b, const kx_mm *mm);

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

#endif
