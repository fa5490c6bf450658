/*
 * RMSNorm of bf16 rows: out = x / sqrt(mean(x^2) + eps) * w, statistics in
 * fp32, output bf16 (kref_rmsnorm).  Two per decoder layer (before
 * attention and before the MLP) plus the final norm.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest
 *
 * Versions:
 *   1  rmsnorm_twopass_kernel: block per row, reads the row twice (second
 *      read mostly from L1/L2); any dim that is a multiple of 8.
 *   2  rmsnorm_reg_kernel: block of 128 threads per row, the row held in
 *      registers (up to 8 x 16 bytes per thread, dim <= 8192): one read, one
 *      write.  Used whenever dim fits (Qwen2.5: 3584, 5120).
 *
 * Roofline: bytes = 4 * rows * dim (+ the weight once), ~3 FLOP per element:
 * memory-bound.  Target for version 2: >= 80% of measured copy bandwidth at
 * >= 1024 rows; a few microseconds (launch-bound) below ~64 rows.
 * NOT YET MEASURED: no GPU was lent to the session that wrote this.
 */
#include <stdlib.h>

#include "kernels/cuda_common.cuh"
#include "kernels/ref/kref.h"

/* ---- C reference --------------------------------------------------------- */

static int check_shape(kt_rng *rng, FILE *log, int rows, int dim)
{
    size_t n = (size_t)rows * dim;
    float *x = (float *)malloc(n * sizeof(float)), *w = (float *)malloc(dim * sizeof(float));
    float *ref = (float *)malloc(n * sizeof(float)), *got = (float *)malloc(n * sizeof(float));
    kt_bf16 *dx = (kt_bf16 *)kt_malloc(n * 2), *dw = (kt_bf16 *)kt_malloc((size_t)dim * 2);
    kt_bf16 *dout = (kt_bf16 *)kt_malloc(n * 2);
    int rc = -1;
    if (!x || !w || !ref || !got) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
    } else if (dx && dw && dout) {
        kt_rand_bf16(rng, x, n, 3.0f);
        kt_rand_bf16(rng, w, (size_t)dim, 1.0f);
        kref_rmsnorm(x, w, ref, rows, dim, 1e-6f);
        if (!kt_upload_bf16(dx, x, n) && !kt_upload_bf16(dw, w, (size_t)dim) &&
            !kt_fill_bf16(dout, n, 3, 1e30f) && !kt_rmsnorm(dx, dw, dout, rows, dim, 1e-6f) &&
            !kt_sync() && !kt_download_bf16(got, dout, n)) {
            char what[64];
            snprintf(what, sizeof what, "rmsnorm rows=%d dim=%d", rows, dim);
            rc = kt_compare(log, what, ref, got, n, kt_tol(kt_rms(ref, n), 0, dim), /* sum over dim */
                            KREF_BF16_EPS) ? 1 : 0;
        }
    }
    kt_free(dx); kt_free(dw); kt_free(dout);
    free(x); free(w); free(ref); free(got);
    return rc;
}

extern "C" int kt_rmsnorm_selftest(uint64_t seed, FILE *log)
{
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    static const int shapes[][2] = {{5, 3584}, {33, 5120}, {3, 16384}, {2, 8}};
    int worst = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int rc = check_shape(&rng, log, shapes[i][0], shapes[i][1]);
        if (rc < 0)
            return -1;
        worst = rc > worst ? rc : worst;
    }
    return worst;
}

/* ---- kernels ------------------------------------------------------------- */

#define RMS_THREADS 128
#define RMS_MAXV 8

/* Sum over the block of v; every thread gets the result. */
static __device__ float block_sum(float v)
{
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(KT_FULL_MASK, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads(); /* part[] may still be read from a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    float s = 0.0f;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++)
        s += part[i];
    return s;
}

__global__ void __launch_bounds__(RMS_THREADS)
rmsnorm_reg_kernel(const uint4 *x, const uint4 *w, uint4 *out, int nvec, float eps)
{
    const size_t row = blockIdx.x;
    const uint4 *xr = x + row * nvec;
    float v[RMS_MAXV][8];
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < RMS_MAXV; i++) {
        const int c = threadIdx.x + i * RMS_THREADS;
        if (c < nvec) {
            kt_unpack8(xr[c], v[i]);
#pragma unroll
            for (int e = 0; e < 8; e++)
                ss += v[i][e] * v[i][e];
        }
    }
    const float inv = rsqrtf(block_sum(ss) / (nvec * 8) + eps);
#pragma unroll
    for (int i = 0; i < RMS_MAXV; i++) {
        const int c = threadIdx.x + i * RMS_THREADS;
        if (c < nvec) {
            float wf[8];
            kt_unpack8(w[c], wf);
#pragma unroll
            for (int e = 0; e < 8; e++)
                v[i][e] = v[i][e] * inv * wf[e];
            out[row * nvec + c] = kt_pack8(v[i]);
        }
    }
}

__global__ void __launch_bounds__(RMS_THREADS)
rmsnorm_twopass_kernel(const uint4 *x, const uint4 *w, uint4 *out, int nvec, float eps)
{
    const size_t row = blockIdx.x;
    const uint4 *xr = x + row * nvec;
    float ss = 0.0f, f[8];
    for (int c = threadIdx.x; c < nvec; c += RMS_THREADS) {
        kt_unpack8(xr[c], f);
        for (int e = 0; e < 8; e++)
            ss += f[e] * f[e];
    }
    const float inv = rsqrtf(block_sum(ss) / (nvec * 8) + eps);
    for (int c = threadIdx.x; c < nvec; c += RMS_THREADS) {
        float wf[8];
        kt_unpack8(xr[c], f);
        kt_unpack8(w[c], wf);
        for (int e = 0; e < 8; e++)
            f[e] = f[e] * inv * wf[e];
        out[row * nvec + c] = kt_pack8(f);
    }
}

/* ---- launchers ----------------------------------------------------------- */

extern "C" int kt_rmsnorm(const kt_bf16 *d_x, const kt_bf16 *d_w, kt_bf16 *d_out,
                          int rows, int dim, float eps)
{
    KT_REQUIRE(rows >= 0 && dim > 0 && dim % 8 == 0,
               "kt_rmsnorm: rows %d, dim %d (need a multiple of 8)", rows, dim);
    if (rows == 0)
        return 0;
    const int nvec = dim / 8;
    if (nvec <= RMS_THREADS * RMS_MAXV)
        rmsnorm_reg_kernel<<<rows, RMS_THREADS>>>((const uint4 *)d_x, (const uint4 *)d_w,
                                                  (uint4 *)d_out, nvec, eps);
    else
        rmsnorm_twopass_kernel<<<rows, RMS_THREADS>>>((const uint4 *)d_x, (const uint4 *)d_w,
                                                      (uint4 *)d_out, nvec, eps);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
