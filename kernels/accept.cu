/*
 * Greedy verification of a speculative step: the target's argmax over the
 * vocabulary at each of the V+1 verified positions of every sequence, then
 * the chain acceptance rule (longest prefix of draft tokens equal to the
 * target's choices, plus the bonus token), as kref_argmax and
 * kref_greedy_accept specify.  Ties go to the smallest index; NaN never
 * wins.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest
 *
 * Versions:
 *   1  argmax_kernel: one block of 512 threads per row, 16-byte loads,
 *      (value, index) reduced with warp shuffles; accept_kernel: one thread
 *      per sequence.
 *
 * Roofline: bytes = 2 * rows * vocab (bf16 logits), one compare per value:
 * memory-bound.  Target: >= 70% of measured copy bandwidth for >= 32 rows of
 * Qwen2.5's 152064-entry vocabulary; the accept kernel is launch-bound.
 * NOT YET MEASURED: no GPU was lent to the session that wrote this.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/cuda_common.cuh"
#include "kernels/ref/kref.h"

/* ---- C reference --------------------------------------------------------- */

static int check_argmax(kt_rng *rng, FILE *log)
{
    const int rows = 6, vocab = 152064;
    size_t n = (size_t)rows * vocab;
    float *x = (float *)malloc(n * sizeof(float));
    int want[6], got[6];
    kt_bf16 *dx = (kt_bf16 *)kt_malloc(n * 2);
    int *dout = (int *)kt_malloc(sizeof got);
    int rc = -1;
    if (!x) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
    } else if (dx && dout) {
        /* bf16 uniform values tie at the top: the first index must win */
        kt_rand_bf16(rng, x, n, 1.0f);
        x[(size_t)1 * vocab + 7] = NAN;
        x[(size_t)2 * vocab + 151000] = 3.0f;
        x[(size_t)2 * vocab + 151001] = 3.0f;
        for (int i = 0; i < vocab; i++)
            x[(size_t)3 * vocab + i] = -INFINITY;
        x[(size_t)3 * vocab + vocab - 1] = -1.0f;
        kref_argmax(x, rows, vocab, want);
        if (!kt_upload_bf16(dx, x, n) && !kt_argmax(dx, rows, vocab, dout) && !kt_sync() &&
            !kt_download(got, dout, sizeof got)) {
            rc = 0;
            for (int r = 0; r < rows; r++)
                if (got[r] != want[r]) {
                    fprintf(log, "  argmax: row %d: ref %d got %d\n", r, want[r], got[r]);
                    rc = 1;
                }
            fprintf(log, "  argmax rows=%d vocab=%d: %s\n", rows, vocab, rc ? "MISMATCH" : "ok");
        }
    }
    kt_free(dx); kt_free(dout);
    free(x);
    return rc;
}

static int check_accept(kt_rng *rng, FILE *log)
{
    const int b = 64, V = 16;
    int draft[64 * 16], target[64 * 17], want_n[64], want_o[64 * 17], got_n[64], got_o[64 * 17];
    for (int i = 0; i < b; i++) {
        int agree = kt_rng_int(rng, 0, V); /* planted accepted length */
        for (int j = 0; j <= V; j++)
            target[i * (V + 1) + j] = kt_rng_int(rng, 0, 151999);
        for (int j = 0; j < V; j++)
            draft[i * V + j] = j < agree ? target[i * (V + 1) + j] : target[i * (V + 1) + j] + 1;
    }
    kref_greedy_accept(draft, target, b, V, want_n, want_o);
    int *dd = (int *)kt_malloc(sizeof draft), *dt = (int *)kt_malloc(sizeof target);
    int *dn = (int *)kt_malloc(sizeof got_n), *dout = (int *)kt_malloc(sizeof got_o);
    int rc = -1;
    if (dd && dt && dn && dout && !kt_upload(dd, draft, sizeof draft) &&
        !kt_upload(dt, target, sizeof target) &&
        !kt_greedy_accept(dd, dt, b, V, dn, dout) && !kt_sync() &&
        !kt_download(got_n, dn, sizeof got_n) && !kt_download(got_o, dout, sizeof got_o)) {
        rc = 0;
        for (int i = 0; i < b && rc == 0; i++)
            for (int j = 0; j <= V; j++)
                if (got_n[i] != want_n[i] || got_o[i * (V + 1) + j] != want_o[i * (V + 1) + j]) {
                    fprintf(log, "  accept: seq %d: ref n=%d tok[%d]=%d, got n=%d tok=%d\n", i,
                            want_n[i], j, want_o[i * (V + 1) + j], got_n[i],
                            got_o[i * (V + 1) + j]);
                    rc = 1;
                    break;
                }
        fprintf(log, "  greedy accept b=%d V=%d: %s\n", b, V, rc ? "MISMATCH" : "ok");
    }
    kt_free(dd); kt_free(dt); kt_free(dn); kt_free(dout);
    return rc;
}

extern "C" int kt_accept_selftest(uint64_t seed, FILE *log)
{
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    int rc1 = check_argmax(&rng, log);
    if (rc1 < 0)
        return -1;
    int rc2 = check_accept(&rng, log);
    if (rc2 < 0)
        return -1;
    return rc1 || rc2;
}

/* ---- kernels ------------------------------------------------------------- */

#define ARGMAX_THREADS 512

/* (v, i) beats (bv, bi): larger value, or equal value and smaller index. */
__device__ __forceinline__ bool beats(float v, int i, float bv, int bi)
{
    return v > bv || (v == bv && i < bi);
}

__global__ void __launch_bounds__(ARGMAX_THREADS)
argmax_kernel(const uint4 *logits, int vvec, int *out)
{
    __shared__ float sv[ARGMAX_THREADS / 32];
    __shared__ int si[ARGMAX_THREADS / 32];
    const uint4 *row = logits + (size_t)blockIdx.x * vvec;
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int c = threadIdx.x; c < vvec; c += ARGMAX_THREADS) {
        float f[8];
        kt_unpack8(row[c], f);
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (!isnan(f[e]) && beats(f[e], 8 * c + e, bv, bi)) {
                bv = f[e];
                bi = 8 * c + e;
            }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(KT_FULL_MASK, bv, o);
        const int oi = __shfl_xor_sync(KT_FULL_MASK, bi, o);
        if (beats(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) {
        sv[warp] = bv;
        si[warp] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < ARGMAX_THREADS / 32; w++)
            if (beats(sv[w], si[w], bv, bi)) {
                bv = sv[w];
                bi = si[w];
            }
        out[blockIdx.x] = bi == INT_MAX ? 0 : bi;
    }
}

__global__ void accept_kernel(const int *draft, const int *target, int b, int V,
                              int *n_accept, int *out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= b)
        return;
    const int *d = draft + (size_t)i * V, *t = target + (size_t)i * (V + 1);
    int a = 0;
    while (a < V && d[a] == t[a])
        a++;
    n_accept[i] = a;
    for (int j = 0; j <= V; j++)
        out[(size_t)i * (V + 1) + j] = j <= a ? t[j] : -1;
}

/* ---- launchers ----------------------------------------------------------- */

extern "C" int kt_argmax(const kt_bf16 *d_logits, int rows, int vocab, int *d_argmax)
{
    KT_REQUIRE(rows >= 0 && vocab > 0 && vocab % 8 == 0,
               "kt_argmax: rows %d, vocab %d (need a multiple of 8)", rows, vocab);
    if (rows == 0)
        return 0;
    argmax_kernel<<<rows, ARGMAX_THREADS>>>((const uint4 *)d_logits, vocab / 8, d_argmax);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int kt_greedy_accept(const int *d_draft, const int *d_target, int b, int V,
                                int *d_n_accept, int *d_out)
{
    KT_REQUIRE(b >= 0 && V >= 0, "kt_greedy_accept: b %d, V %d", b, V);
    if (b == 0)
        return 0;
    accept_kernel<<<kt_ceil_div((size_t)b, 128), 128>>>(d_draft, d_target, b, V,
                                                         d_n_accept, d_out);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
