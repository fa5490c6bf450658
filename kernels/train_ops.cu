/*
 * Backward operators of a decoder layer for train.cu: RMSNorm, SwiGLU and
 * causal-softmax backward kernels, and the GQA expand/reduce and QKV merge
 * helpers.  The backward's matrix products (the weight-gradient dW = dY^T X
 * and input-gradient dX = dY W products, and the strided per-head products
 * of the attention backward) run through blas.cu's kb_matmul.  kref_train.c
 * specifies each op (kref_rmsnorm_bwd, kref_swiglu_bwd, kref_chunk_attn_bwd,
 * kref_gemm_tn / kref_gemm_nn); train.cu's selftest checks them through a
 * whole layer.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest --only train
 *
 * Versions:
 *   1  rmsnorm_bwd_kernel: 256 threads own a row's columns, 32 rows per
 *      block, dw partials in registers, one atomicAdd per column per block.
 *      softmax/dsoftmax: one block per score row, fp32 scores in, bf16 out.
 *
 * Roofline: the GEMMs are matrix-bound (target >= 70% of gemm_peak for
 * T >= 2048 tokens); the attention backward materialises [heads, L, L]
 * score matrices (5 GEMMs of 2 L^2 hd FLOPs each per head, the full square
 * although causal: 2x waste) and streams them 4 times through memory, so it
 * is bandwidth-bound on the score traffic for L <= ~2k and costs ~2-3x a
 * flash-attention backward.  Elementwise kernels: >= 70% of copy bandwidth.
 * NOT YET MEASURED: no GPU was lent to the session that wrote this.
 */
#include <math.h>

#include "kernels/train.cuh"

/* ---- C reference --------------------------------------------------------- */
/* kref_train.c; checked through a layer in train.cu's kt_train_selftest. */

/* ---- kernels ------------------------------------------------------------- */

#define RB_THREADS 256
#define RB_MAXV 4   /* 16-byte chunks per thread: dim <= 8192 */
#define RB_ROWS 32  /* rows per block */

static __device__ float2 block_sum2(float2 v, float2 *part)
{
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_xor_sync(KT_FULL_MASK, v.x, o);
        v.y += __shfl_xor_sync(KT_FULL_MASK, v.y, o);
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads(); /* part[] may still be read from the previous row */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    float2 s = make_float2(0.0f, 0.0f);
    for (int i = 0; i < RB_THREADS / 32; i++) {
        s.x += part[i].x;
        s.y += part[i].y;
    }
    return s;
}

__global__ void __launch_bounds__(RB_THREADS)
rmsnorm_bwd_kernel(const uint4 *x, const uint4 *w, const uint4 *dy, const uint4 *g_in, uint4 *dx,
                   float *dw, int rows, int nvec, float eps)
{
    __shared__ float2 part[RB_THREADS / 32];
    float acc[RB_MAXV][8];
#pragma unroll
    for (int i = 0; i < RB_MAXV; i++)
#pragma unroll
        for (int e = 0; e < 8; e++)
            acc[i][e] = 0.0f;
    const int r0 = blockIdx.x * RB_ROWS, r1 = min(rows, r0 + RB_ROWS);
    for (int r = r0; r < r1; r++) {
        float xv[RB_MAXV][8], gv[RB_MAXV][8];
        float2 sd = make_float2(0.0f, 0.0f); /* sum x^2, sum w dy x */
#pragma unroll
        for (int i = 0; i < RB_MAXV; i++) {
            const int c = threadIdx.x + i * RB_THREADS;
            if (c < nvec) {
                float wf[8];
                kt_unpack8(x[(size_t)r * nvec + c], xv[i]);
                kt_unpack8(dy[(size_t)r * nvec + c], gv[i]);
                kt_unpack8(w[c], wf);
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    sd.x += xv[i][e] * xv[i][e];
                    sd.y += wf[e] * gv[i][e] * xv[i][e];
                }
            }
        }
        sd = block_sum2(sd, part);
        const float rs = rsqrtf(sd.x / (nvec * 8) + eps);
        const float c3 = rs * rs * rs * sd.y / (nvec * 8);
#pragma unroll
        for (int i = 0; i < RB_MAXV; i++) {
            const int c = threadIdx.x + i * RB_THREADS;
            if (c < nvec) {
                float wf[8], gi[8], o[8];
                kt_unpack8(w[c], wf);
                if (g_in)
                    kt_unpack8(g_in[(size_t)r * nvec + c], gi);
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    o[e] = rs * wf[e] * gv[i][e] - xv[i][e] * c3 + (g_in ? gi[e] : 0.0f);
                    acc[i][e] += gv[i][e] * xv[i][e] * rs;
                }
                dx[(size_t)r * nvec + c] = kt_pack8(o);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < RB_MAXV; i++) {
        const int c = threadIdx.x + i * RB_THREADS;
        if (c < nvec)
#pragma unroll
            for (int e = 0; e < 8; e++)
                atomicAdd(&dw[8 * c + e], acc[i][e]);
    }
}

__global__ void swiglu_bwd_kernel(const uint4 *gu, const uint4 *ds, uint4 *dgu, int rows, int fv)
{
    const size_t n = (size_t)rows * fv, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const size_t r = i / fv, c = i % fv;
        float g[8], u[8], d[8], dg[8], du[8];
        kt_unpack8(gu[r * 2 * fv + c], g);
        kt_unpack8(gu[r * 2 * fv + fv + c], u);
        kt_unpack8(ds[i], d);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float sg = 1.0f / (1.0f + expf(-g[e]));
            du[e] = d[e] * g[e] * sg;
            dg[e] = d[e] * u[e] * sg * (1.0f + g[e] * (1.0f - sg));
        }
        dgu[r * 2 * fv + c] = kt_pack8(dg);
        dgu[r * 2 * fv + fv + c] = kt_pack8(du);
    }
}

static __device__ float block_reduce(float v, float *part, bool is_max)
{
    for (int o = 16; o > 0; o >>= 1) {
        const float t = __shfl_xor_sync(KT_FULL_MASK, v, o);
        v = is_max ? fmaxf(v, t) : v + t;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    float s = part[0];
    for (int i = 1; i < (int)(blockDim.x >> 5); i++)
        s = is_max ? fmaxf(s, part[i]) : s + part[i];
    return s;
}

/* grid (L, nmat), block 256: row i of matrix h */
__global__ void softmax_causal_kernel(const float *S, bf16 *P, int L, int ld, long long st)
{
    __shared__ float part[8];
    const int i = blockIdx.x;
    const float *s = S + (size_t)blockIdx.y * st + (size_t)i * ld;
    bf16 *p = P + (size_t)blockIdx.y * st + (size_t)i * ld;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        mx = fmaxf(mx, s[j]);
    mx = block_reduce(mx, part, true);
    float sum = 0.0f;
    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        sum += __expf(s[j] - mx);
    const float inv = 1.0f / block_reduce(sum, part, false);
    for (int j = threadIdx.x; j < L; j += blockDim.x)
        p[j] = __float2bfloat16_rn(j <= i ? __expf(s[j] - mx) * inv : 0.0f);
}

__global__ void dsoftmax_kernel(bf16 *P, const float *dP, const float *Dv, int L, int ld,
                                long long st, int dstride)
{
    const int i = blockIdx.x, h = blockIdx.y;
    bf16 *p = P + (size_t)h * st + (size_t)i * ld;
    const float *dp = dP + (size_t)h * st + (size_t)i * ld;
    const float D = Dv[(size_t)i * dstride + h];
    for (int j = threadIdx.x; j < L; j += blockDim.x)
        p[j] = __float2bfloat16_rn(j <= i ? __bfloat162float(p[j]) * (dp[j] - D) : 0.0f);
}

/* one warp per row */
__global__ void rowdot_kernel(const uint4 *a, const uint4 *b, float *out, int rows, int hv)
{
    const int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= rows)
        return;
    float s = 0.0f;
    for (int c = lane; c < hv; c += 32) {
        float x[8], y[8];
        kt_unpack8(a[(size_t)r * hv + c], x);
        kt_unpack8(b[(size_t)r * hv + c], y);
#pragma unroll
        for (int e = 0; e < 8; e++)
            s += x[e] * y[e];
    }
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(KT_FULL_MASK, s, o);
    if (lane == 0)
        out[r] = s;
}

/* expand (dir 0): big[t, h] = small[t, h / G]; reduce (dir 1): small[t, kh]
 * = sum_g big[t, kh G + g].  Vectors of 8 over hd. */
__global__ void gqa_kernel(const uint4 *src, uint4 *dst, int T, int H, int K, int hv, int dir)
{
    const int G = H / K;
    const size_t n = (size_t)T * (dir ? K : H) * hv, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const size_t c = i % hv, th = i / hv;
        const size_t t = th / (dir ? K : H), h = th % (dir ? K : H);
        if (dir == 0) {
            dst[i] = src[(t * K + h / G) * hv + c];
        } else {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, f[8];
            for (int g = 0; g < G; g++) {
                kt_unpack8(src[(t * H + h * G + g) * hv + c], f);
#pragma unroll
                for (int e = 0; e < 8; e++)
                    acc[e] += f[e];
            }
            dst[i] = kt_pack8(acc);
        }
    }
}

__global__ void qkv_merge_kernel(const uint4 *dq, const uint4 *dk, const uint4 *dv, uint4 *out,
                                 int T, int qv, int kv8)
{
    const int nv = qv + 2 * kv8;
    const size_t n = (size_t)T * nv, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const size_t t = i / nv;
        const int c = (int)(i % nv);
        out[i] = c < qv ? dq[t * qv + c]
                 : c < qv + kv8 ? dk[t * kv8 + (c - qv)] : dv[t * kv8 + (c - qv - kv8)];
    }
}

#define CS_ROWS 64

__global__ void colsum_kernel(const bf16 *x, float *out, int rows, int cols)
{
    const int r0 = blockIdx.x * CS_ROWS, r1 = min(rows, r0 + CS_ROWS);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float s = 0.0f;
        for (int r = r0; r < r1; r++)
            s += __bfloat162float(x[(size_t)r * cols + c]);
        atomicAdd(&out[c], s);
    }
}

/* ---- launchers ----------------------------------------------------------- */

static unsigned grid_for(size_t n)
{
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 132 * 16 ? 132 * 16 : g);
}

int kx_rmsnorm_bwd(const kt_bf16 *x, const kt_bf16 *w, const kt_bf16 *dy, const kt_bf16 *g_in,
                   kt_bf16 *dx, float *dw, int rows, int dim, float eps)
{
    KT_REQUIRE(rows >= 0 && dim % 8 == 0 && dim / 8 <= RB_THREADS * RB_MAXV,
               "kx_rmsnorm_bwd: dim %d (a multiple of 8, <= %d)", dim, 8 * RB_THREADS * RB_MAXV);
    if (rows == 0)
        return 0;
    rmsnorm_bwd_kernel<<<kt_ceil_div(rows, RB_ROWS), RB_THREADS>>>(
        (const uint4 *)x, (const uint4 *)w, (const uint4 *)dy, (const uint4 *)g_in, (uint4 *)dx,
        dw, rows, dim / 8, eps);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

int kx_swiglu_bwd(const kt_bf16 *gu, const kt_bf16 *ds, kt_bf16 *dgu, int rows, int ffn)
{
    KT_REQUIRE(ffn % 8 == 0, "kx_swiglu_bwd: ffn %d", ffn);
    if (rows == 0)
        return 0;
    swiglu_bwd_kernel<<<grid_for((size_t)rows * ffn / 8), 256>>>(
        (const uint4 *)gu, (const uint4 *)ds, (uint4 *)dgu, rows, ffn / 8);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

int kx_softmax_causal(const float *S, kt_bf16 *P, int nmat, int L, int ld, long long st)
{
    KT_REQUIRE(nmat >= 1 && nmat <= 65535 && L >= 1 && ld >= L, "kx_softmax_causal: %d x %d",
               nmat, L);
    softmax_causal_kernel<<<dim3(L, nmat), 256>>>(S, (bf16 *)P, L, ld, st);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

int kx_dsoftmax(kt_bf16 *P, const float *dP, const float *Dv, int nmat, int L, int ld,
                long long st, int dstride)
{
    KT_REQUIRE(nmat >= 1 && nmat <= 65535 && L >= 1 && ld >= L, "kx_dsoftmax: %d x %d", nmat, L);
    dsoftmax_kernel<<<dim3(L, nmat), 256>>>((bf16 *)P, dP, Dv, L, ld, st, dstride);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

int kx_rowdot(const kt_bf16 *dO, const kt_bf16 *O, float *Dv, int rows, int hd)
{
    KT_REQUIRE(hd % 8 == 0, "kx_rowdot: hd %d", hd);
    if (rows == 0)
        return 0;
    rowdot_kernel<<<kt_ceil_div(rows, 8), 256>>>((const uint4 *)dO, (const uint4 *)O, Dv, rows,
                                                 hd / 8);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

static int gqa(const kt_bf16 *src, kt_bf16 *dst, int T, int H, int K, int hd, int dir)
{
    KT_REQUIRE(hd % 8 == 0 && K >= 1 && H % K == 0, "gqa: heads %d/%d hd %d", H, K, hd);
    if (T == 0)
        return 0;
    gqa_kernel<<<grid_for((size_t)T * (dir ? K : H) * hd / 8), 256>>>(
        (const uint4 *)src, (uint4 *)dst, T, H, K, hd / 8, dir);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

int kx_expand_kv(const kt_bf16 *k, kt_bf16 *kexp, int T, int heads, int kv_heads, int hd)
{
    return gqa(k, kexp, T, heads, kv_heads, hd, 0);
}

int kx_reduce_kv(const kt_bf16 *dexp, kt_bf16 *d, int T, int heads, int kv_heads, int hd)
{
    return gqa(dexp, d, T, heads, kv_heads, hd, 1);
}

int kx_qkv_merge(const kt_bf16 *dq, const kt_bf16 *dk, const kt_bf16 *dv, kt_bf16 *dqkv,
                 int T, int heads, int kv_heads, int hd)
{
    KT_REQUIRE(hd % 8 == 0, "kx_qkv_merge: hd %d", hd);
    if (T == 0)
        return 0;
    const int qv = heads * hd / 8, kv8 = kv_heads * hd / 8;
    qkv_merge_kernel<<<grid_for((size_t)T * (qv + 2 * kv8)), 256>>>(
        (const uint4 *)dq, (const uint4 *)dk, (const uint4 *)dv, (uint4 *)dqkv, T, qv, kv8);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

int kx_colsum(const kt_bf16 *x, float *out, int rows, int cols)
{
    if (rows == 0 || cols == 0)
        return 0;
    colsum_kernel<<<kt_ceil_div(rows, CS_ROWS), 256>>>((const bf16 *)x, out, rows, cols);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
