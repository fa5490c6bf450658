/*
 * The one cuBLASLt wrapper (blas.cu), shared by gemm_lt.cu's kt_gemm (the
 * forward C = A W^T of every linear layer) and train.cu's backward (weight
 * and input gradients, the strided per-head products of the attention).  A
 * kb_blas owns a cuBLASLt handle, a KB_WS_BYTES device workspace and a plan
 * cache; a plan (matmul descriptor, three layouts, the heuristic's first
 * algorithm) is made once per key and reused.  Not part of the C interface
 * (kernels.h).
 */
#ifndef TS_BLAS_CUH
#define TS_BLAS_CUH

#include "kernels/cuda_common.cuh"

/* cuBLASLt workspace of each kb_blas, bytes: 32 MiB, NVIDIA's recommendation
 * for Hopper.  The heuristic only offers algorithms that fit in it. */
#define KB_WS_BYTES ((size_t)32 << 20)

/* Row-major D[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta D, batched:
 * A is [m, k] (ta 0) or [k, m] (ta 1) with row stride lda elements, B is
 * [k, n] (tb 0) or [n, k] (tb 1); matrix b of a batch starts sA, sB, sD
 * elements after matrix b-1.  A and B bf16; D bf16 or fp32 (d_f32), fp32
 * accumulation.  beta != 0 reads D (C = D in cuBLASLt's terms).
 * kt_gemm's C = A W^T is {ta 0, tb 1, lda k, B = W, ldb k, ldd n}. */
struct kb_mm {
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

/* Handle, workspace and an empty plan cache; NULL on failure (kt_error()
 * says why).  Free with kb_blas_free(), which accepts NULL. */
struct kb_blas;
kb_blas *kb_blas_new(void);
void kb_blas_free(kb_blas *b);
size_t kb_blas_bytes(const kb_blas *b); /* device workspace, bytes; 0 for NULL */

/* Finds or makes the plan for mm without running it: host work (the
 * heuristic query), for callers that plan outside timed regions.  The key
 * is the whole shape (transposes, m n k, leading dimensions, batch and
 * strides, output type, beta != 0) and the alignment of A, B and D (the
 * largest power of two <= 256 dividing the address and the batch stride);
 * a NULL pointer counts as 256-byte aligned, cuBLASLt's default.  0 or -1. */
int kb_prepare(kb_blas *b, const kb_mm *mm);
/* kb_prepare, then cublasLtMatmul on the default stream.  A plan seen
 * before costs a key comparison (the last plan used is tried first).  0 or
 * -1 (bad shape, cuBLASLt has no algorithm, a CUDA or cuBLAS error). */
int kb_matmul(kb_blas *b, const kb_mm *mm);

#endif
