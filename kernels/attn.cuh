/*
 * Attention kernels shared by decode_attn.cu and chunk_attn.cu: decode is
 * the chunk of one query per sequence, so both ops run the same kernels on
 * different plans.  Included by those two files only (kernels are static, so
 * each file carries its own instances).
 *
 * A plan (struct kt_attn, built by kt_attn_plan() in decode_attn.cu) cuts a
 * ragged batch into work items.  An item is (sequence, row block, KV split):
 * a row block is up to 16 "rows" = (query token, query head) pairs of one KV
 * head (tpw query tokens x G = heads/kv_heads heads), and a split is a range
 * of split_len KV positions.  Items are ordered split-major within a sequence
 * so that the warps of one block read the same KV range (L1 reuse).
 *
 * Version 1, attn_naive_kernel: one block per (query token, head), scores
 *   per 128-key tile in shared memory, online softmax, one thread per output
 *   dimension.  Slow and simple: the GPU-side stand-in for the reference.
 * Version 2, attn_mma_kernel<NT>: one warp per (item, KV head), all in
 *   registers, tensor cores (mma.sync m16n8k16 bf16, fp32 accumulate).
 *   S = Q K^T takes Q rows as the A operand and K rows directly from global
 *   memory as the B operand (the head dimension is permuted consistently in
 *   both, so each lane loads whole 16-byte chunks); O^T = V^T P^T takes the
 *   softmax probabilities straight from the S accumulators as the B operand
 *   and V^T built from 16-byte V loads with byte permutes.  Per 16 keys a
 *   warp loads 8 KB (K and V of one KV head), coalesced in 64-128 byte runs,
 *   and issues 16 + 8*NT mma: the kernel is designed to be bound by HBM
 *   bandwidth, with 8 KB in flight per warp and ~4 warps per SM partition.
 *   Items with several splits write fp32 partial outputs and their
 *   log2-sum-exp; attn_combine_kernel merges them.  Single-split sequences
 *   are written directly.  Requires hd == 128 and G <= 16.
 */
#ifndef TS_ATTN_CUH
#define TS_ATTN_CUH

#include <limits.h>
#include <math.h>

#include "kernels/cuda_common.cuh"

struct kt_attn {
    int b, heads, kv_heads, hd, G;
    int tpw;              /* query tokens per row block (rows = tpw * G <= 16) */
    int split_len;        /* KV positions per split, tokens */
    int n_items;          /* (sequence, row block, split) work items */
    int decode;           /* planned with q_len == NULL */
    int multi_split;      /* some sequence has more than one split */
    size_t q_rows;        /* sum of q_len, tokens */
    size_t kv_rows;       /* sum of ctx, tokens */
    double pairs;         /* (query, key) pairs attended */
    int *d_ctx, *d_q_len, *d_tok_seq, *d_item_off, *d_n_splits, *d_n_rb;
    long long *d_kv_off, *d_q_off; /* first KV row / query row of each sequence */
    int4 *d_items;        /* {sequence, row block, first key, end key} */
    float *d_o_part;      /* [n_items, kv_heads, 16, hd] normalised partial outputs */
    float *d_lse_part;    /* [n_items, kv_heads, 16] log2-sum-exp of each row */
    void *block;          /* kt_scratch_get block holding every d_ array above */
};

struct AttnArgs {
    const bf16 *q, *k, *v;
    bf16 *out;
    const int *ctx, *q_len, *tok_seq, *item_off, *n_splits, *n_rb;
    const long long *kv_off, *q_off;
    const int4 *items;
    float *o_part, *lse_part;
    int n_items, heads, kv_heads, hd, G, tpw, total_q;
    float scale_log2; /* log2(e) / sqrt(hd): scores in base-2 units */
};

/* ---- version 1 ----------------------------------------------------------- */

static __global__ void __launch_bounds__(128) attn_naive_kernel(AttnArgs a)
{
    __shared__ float qs[256];
    __shared__ float sc[128];
    const int tok = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
    const int seq = a.tok_seq[tok];
    const int ctx = a.ctx[seq], qn = a.q_len[seq];
    const int j = tok - (int)a.q_off[seq];
    const int visible = ctx - qn + j + 1;
    const int hd = a.hd;
    const size_t stride = (size_t)a.kv_heads * hd;
    const bf16 *kb = a.k + (size_t)a.kv_off[seq] * stride + (size_t)(h / a.G) * hd;
    const bf16 *vb = a.v + (size_t)a.kv_off[seq] * stride + (size_t)(h / a.G) * hd;
    const bf16 *qp = a.q + ((size_t)tok * a.heads + h) * hd;
    for (int d = tid; d < hd; d += 128)
        qs[d] = __bfloat162float(qp[d]);
    __syncthreads();
    float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    for (int p0 = 0; p0 < visible; p0 += 128) {
        float s = -INFINITY;
        if (p0 + tid < visible) {
            const bf16 *kr = kb + (size_t)(p0 + tid) * stride;
            float dot = 0.0f;
            for (int d = 0; d < hd; d++)
                dot += qs[d] * __bfloat162float(kr[d]);
            s = dot * a.scale_log2;
        }
        sc[tid] = s;
        __syncthreads();
        const int n = min(128, visible - p0);
        float mx = m;
        for (int i = 0; i < n; i++)
            mx = fmaxf(mx, sc[i]);
        const float alpha = exp2f(m - mx); /* 0 on the first tile */
        l *= alpha;
        acc0 *= alpha;
        acc1 *= alpha;
        for (int i = 0; i < n; i++) {
            const float p = exp2f(sc[i] - mx);
            const bf16 *vr = vb + (size_t)(p0 + i) * stride;
            l += p;
            if (tid < hd)
                acc0 += p * __bfloat162float(vr[tid]);
            if (tid + 128 < hd)
                acc1 += p * __bfloat162float(vr[tid + 128]);
        }
        m = mx;
        __syncthreads();
    }
    bf16 *op = a.out + ((size_t)tok * a.heads + h) * hd;
    if (tid < hd)
        op[tid] = __float2bfloat16_rn(acc0 / l);
    if (tid + 128 < hd)
        op[tid + 128] = __float2bfloat16_rn(acc1 / l);
}

/* ---- version 2 ----------------------------------------------------------- */

__device__ __forceinline__ uint32_t u4_word(const uint4 &u, int i)
{
    return i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w;
}

/* NT = number of 8-row halves in use: 1 when rows <= 8 (decode with G <= 8),
 * else 2. */
template <int NT>
static __global__ void __launch_bounds__(128) attn_mma_kernel(AttnArgs a)
{
    const int lane = threadIdx.x & 31;
    const int w = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (w >= a.n_items)
        return;
    const int kvh = blockIdx.y;
    const int g = lane >> 2, t = lane & 3;
    const int4 it = a.items[w];
    const int seq = it.x, rb = it.y, t0 = it.z, t1 = it.w;
    const int ctx = a.ctx[seq], qn = a.q_len[seq];
    const int G = a.G, tpw = a.tpw;
    const int j_end = min(qn, (rb + 1) * tpw);    /* past the block's last query */
    const int rows = (j_end - rb * tpw) * G;       /* valid rows of the block */
    const int t_end = min(t1, ctx - qn + j_end);   /* keys past it are masked */
    const size_t stride = (size_t)a.kv_heads * 128;
    const bf16 *kb = a.k + (size_t)a.kv_off[seq] * stride + (size_t)kvh * 128;
    const bf16 *vb = a.v + (size_t)a.kv_off[seq] * stride + (size_t)kvh * 128;

    /* Q as A fragments of 8 k-steps.  Lane (g, t) holds rows g and g+8 and,
     * for k-step ks, the head dims of 16-byte chunk t + 4*(ks/2), words
     * 2*(ks%2) (k-lo) and 2*(ks%2)+1 (k-hi).  K uses the same map. */
    uint32_t qf[8][4];
    int lim[2];
#pragma unroll
    for (int hi = 0; hi < 2; hi++) {
        const int r = g + 8 * hi;
        uint4 qc[4];
#pragma unroll
        for (int c = 0; c < 4; c++)
            qc[c] = make_uint4(0, 0, 0, 0);
        lim[hi] = INT_MAX;
        if ((hi == 0 || NT == 2) && r < rows) {
            const int jq = rb * tpw + r / G, h = kvh * G + r % G;
            const uint4 *qp = reinterpret_cast<const uint4 *>(
                a.q + ((size_t)(a.q_off[seq] + jq) * a.heads + h) * 128);
#pragma unroll
            for (int c = 0; c < 4; c++)
                qc[c] = qp[t + 4 * c];
            lim[hi] = ctx - qn + jq;
        }
#pragma unroll
        for (int c = 0; c < 4; c++) {
            qf[2 * c][hi] = qc[c].x;
            qf[2 * c][2 + hi] = qc[c].y;
            qf[2 * c + 1][hi] = qc[c].z;
            qf[2 * c + 1][2 + hi] = qc[c].w;
        }
    }

    float acc[8][NT][4];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][n][e] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int base = t0; base < t_end; base += 16) {
        /* K rows base+g and base+8+g (chunks t+4c); V rows base+2t, +2t+1,
         * +2t+8, +2t+9 (chunks g and g+8).  Rows past the end are clamped
         * to a valid row and masked below. */
        uint4 kc[2][4], vc[4][2];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
            const int p = min(base + 8 * nt + g, ctx - 1);
            const uint4 *kp = reinterpret_cast<const uint4 *>(kb + (size_t)p * stride);
#pragma unroll
            for (int c = 0; c < 4; c++)
                kc[nt][c] = kp[t + 4 * c];
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int p = min(base + 2 * t + (i & 1) + 8 * (i >> 1), ctx - 1);
            const uint4 *vp = reinterpret_cast<const uint4 *>(vb + (size_t)p * stride);
            vc[i][0] = vp[g];
            vc[i][1] = vp[g + 8];
        }

        /* S = Q K^T: s[nt] covers keys base+8nt .. +7 */
        float s[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[nt][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < 8; ks++) {
                const uint4 kk = kc[nt][ks >> 1];
                kt_mma_16816(s[nt], qf[ks], (ks & 1) ? kk.z : kk.x,
                             (ks & 1) ? kk.w : kk.y);
            }
        }

        /* mask, then online softmax per row (rows g: e 0,1; g+8: e 2,3) */
        float alpha[2];
#pragma unroll
        for (int hi = 0; hi < 2; hi++) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int e = 2 * hi; e < 2 * hi + 2; e++) {
                    const int key = base + 8 * nt + 2 * t + (e & 1);
                    const float x = s[nt][e] * a.scale_log2;
                    s[nt][e] = (key < t_end && key <= lim[hi]) ? x : -INFINITY;
                    mx = fmaxf(mx, s[nt][e]);
                }
            mx = fmaxf(mx, __shfl_xor_sync(KT_FULL_MASK, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(KT_FULL_MASK, mx, 2));
            const float mn = fmaxf(m[hi], mx);
            const float mu = mn == -INFINITY ? 0.0f : mn;
            alpha[hi] = exp2f(m[hi] - mu);
            m[hi] = mn;
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int e = 2 * hi; e < 2 * hi + 2; e++) {
                    /* round as the mma will see it, so l matches exactly */
                    const float p = __bfloat162float(__float2bfloat16_rn(exp2f(s[nt][e] - mu)));
                    s[nt][e] = p;
                    sum += p;
                }
            l[hi] = l[hi] * alpha[hi] + sum;
        }

        /* P^T as B fragments (k = key, n = row), straight from s */
        uint32_t pb[NT][2];
#pragma unroll
        for (int n = 0; n < NT; n++) {
            pb[n][0] = kt_pack2(s[0][2 * n], s[0][2 * n + 1]);
            pb[n][1] = kt_pack2(s[1][2 * n], s[1][2 * n + 1]);
            /* acc columns are rows 8n+2t and 8n+2t+1: fetch their alphas */
            const float a0 = __shfl_sync(KT_FULL_MASK, alpha[n], 8 * t);
            const float a1 = __shfl_sync(KT_FULL_MASK, alpha[n], 8 * t + 4);
#pragma unroll
            for (int i = 0; i < 8; i++) {
                acc[i][n][0] *= a0;
                acc[i][n][1] *= a1;
                acc[i][n][2] *= a0;
                acc[i][n][3] *= a1;
            }
        }

        /* O^T += V^T P^T.  m-tile i: A row g is head dim
         * 8g + 64(i/4) + 2(i%4), row g+8 the dim after it; k = keys. */
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int ch = i >> 2, wd = i & 3;
            const uint32_t x0 = u4_word(vc[0][ch], wd), y0 = u4_word(vc[1][ch], wd);
            const uint32_t x1 = u4_word(vc[2][ch], wd), y1 = u4_word(vc[3][ch], wd);
            const uint32_t af[4] = {__byte_perm(x0, y0, 0x5410), __byte_perm(x0, y0, 0x7632),
                                    __byte_perm(x1, y1, 0x5410), __byte_perm(x1, y1, 0x7632)};
#pragma unroll
            for (int n = 0; n < NT; n++)
                kt_mma_16816(acc[i][n], af, pb[n][0], pb[n][1]);
        }
    }

#pragma unroll
    for (int hi = 0; hi < 2; hi++) {
        l[hi] += __shfl_xor_sync(KT_FULL_MASK, l[hi], 1);
        l[hi] += __shfl_xor_sync(KT_FULL_MASK, l[hi], 2);
    }
    const bool direct = a.n_splits[seq] == 1;
    const size_t pbase = ((size_t)w * a.kv_heads + kvh) * 16;
#pragma unroll
    for (int n = 0; n < NT; n++) {
        const float l0 = __shfl_sync(KT_FULL_MASK, l[n], 8 * t);
        const float l1 = __shfl_sync(KT_FULL_MASK, l[n], 8 * t + 4);
        const float inv[2] = {l0 > 0.0f ? 1.0f / l0 : 0.0f, l1 > 0.0f ? 1.0f / l1 : 0.0f};
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            const int r = 8 * n + 2 * t + rr;
            if (r >= rows)
                continue;
            const size_t orow =
                (size_t)(a.q_off[seq] + rb * tpw + r / G) * a.heads + kvh * G + r % G;
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const int d = 8 * g + 64 * (i >> 2) + 2 * (i & 3);
                const float lo = acc[i][n][rr] * inv[rr], hi = acc[i][n][2 + rr] * inv[rr];
                if (direct)
                    *reinterpret_cast<bf162 *>(a.out + orow * 128 + d) =
                        __floats2bfloat162_rn(lo, hi);
                else
                    *reinterpret_cast<float2 *>(a.o_part + (pbase + r) * 128 + d) =
                        make_float2(lo, hi);
            }
        }
    }
    if (!direct && t == 0) {
#pragma unroll
        for (int hi = 0; hi < NT; hi++) {
            const int r = g + 8 * hi;
            if (r < rows)
                a.lse_part[pbase + r] = l[hi] > 0.0f ? m[hi] + log2f(l[hi]) : -INFINITY;
        }
    }
}

/* Merges the splits of every (query token, head): one warp each, 4 dims per
 * lane.  Sequences with one split were written by the main kernel. */
static __global__ void __launch_bounds__(128) attn_combine_kernel(AttnArgs a)
{
    const int lane = threadIdx.x & 31;
    const int idx = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (idx >= a.total_q * a.heads)
        return;
    const int tok = idx / a.heads, h = idx % a.heads;
    const int seq = a.tok_seq[tok];
    const int ns = a.n_splits[seq];
    if (ns == 1)
        return;
    const int j = tok - (int)a.q_off[seq];
    const int rb = j / a.tpw, r = (j % a.tpw) * a.G + h % a.G, kvh = h / a.G;
    const size_t first = (size_t)a.item_off[seq] + rb, step = (size_t)a.n_rb[seq];
    float M = -INFINITY;
    for (int sp = 0; sp < ns; sp++)
        M = fmaxf(M, a.lse_part[((first + sp * step) * a.kv_heads + kvh) * 16 + r]);
    float den = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sp = 0; sp < ns; sp++) {
        const size_t row = ((first + sp * step) * a.kv_heads + kvh) * 16 + r;
        const float L = a.lse_part[row];
        const float wgt = L == -INFINITY ? 0.0f : exp2f(L - M);
        const float4 o = reinterpret_cast<const float4 *>(a.o_part + row * 128)[lane];
        den += wgt;
        acc.x += wgt * o.x;
        acc.y += wgt * o.y;
        acc.z += wgt * o.z;
        acc.w += wgt * o.w;
    }
    const float inv = den > 0.0f ? 1.0f / den : 0.0f;
    bf162 *op = reinterpret_cast<bf162 *>(a.out + ((size_t)tok * a.heads + h) * 128 + 4 * lane);
    op[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    op[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
}

/* ---- launcher shared by both ops ----------------------------------------- */

static int attn_run(const kt_attn *p, const kt_bf16 *q, const kt_bf16 *k,
                    const kt_bf16 *v, kt_bf16 *out, int version)
{
    KT_REQUIRE(p && q && k && v && out, "attention: NULL plan or tensor");
    if (p->q_rows == 0)
        return 0;
    AttnArgs a;
    a.q = (const bf16 *)q;
    a.k = (const bf16 *)k;
    a.v = (const bf16 *)v;
    a.out = (bf16 *)out;
    a.ctx = p->d_ctx;
    a.q_len = p->d_q_len;
    a.tok_seq = p->d_tok_seq;
    a.item_off = p->d_item_off;
    a.n_splits = p->d_n_splits;
    a.n_rb = p->d_n_rb;
    a.kv_off = p->d_kv_off;
    a.q_off = p->d_q_off;
    a.items = p->d_items;
    a.o_part = p->d_o_part;
    a.lse_part = p->d_lse_part;
    a.n_items = p->n_items;
    a.heads = p->heads;
    a.kv_heads = p->kv_heads;
    a.hd = p->hd;
    a.G = p->G;
    a.tpw = p->tpw;
    a.total_q = (int)p->q_rows;
    a.scale_log2 = (float)(1.4426950408889634 / sqrt((double)p->hd));
    if (version == 0)
        version = p->hd == 128 ? 2 : 1;
    if (version == 1) {
        KT_REQUIRE(p->hd <= 256, "attention v1: hd %d > 256", p->hd);
        attn_naive_kernel<<<dim3((unsigned)p->q_rows, (unsigned)p->heads), 128>>>(a);
        CUDA_CHECK(cudaGetLastError());
        return 0;
    }
    KT_REQUIRE(version == 2, "attention: unknown version %d", version);
    KT_REQUIRE(p->hd == 128, "attention v2: needs hd 128, got %d", p->hd);
    dim3 grid(kt_ceil_div((size_t)p->n_items, 4), (unsigned)p->kv_heads);
    if (p->tpw * p->G <= 8)
        attn_mma_kernel<1><<<grid, 128>>>(a);
    else
        attn_mma_kernel<2><<<grid, 128>>>(a);
    CUDA_CHECK(cudaGetLastError());
    if (p->multi_split) {
        attn_combine_kernel<<<kt_ceil_div(p->q_rows * p->heads, 4), 128>>>(a);
        CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}

/* The selftests' absolute tolerance (kt_tol) for attention over contexts
 * ctx[0..b-1]: one rounding stage (version 2 rounds the softmax weights to
 * bf16 for the tensor cores, which the reference does not; version 1 has
 * the GPU's __expf, whose error, ~2^-21 relative, is far below one), and
 * fp32 sums over the longest context. */
static inline double attn_tol(double rms, const int *ctx, int b)
{
    int k = 1;
    for (int i = 0; i < b; i++)
        k = ctx[i] > k ? ctx[i] : k;
    return kt_tol(rms, 1, k);
}

#endif
