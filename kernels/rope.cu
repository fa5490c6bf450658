/*
 * Rotary position embedding, rotate-half convention (Llama, Qwen2), in
 * place on bf16 q or k [tokens, heads, hd] with one position per token
 * (kref_rope).  Angles pos * theta^(-2i/hd) are formed and reduced modulo
 * 2*pi in double, so that positions up to 10^5 and beyond keep full float
 * accuracy in sincosf; the inverse frequencies sit in constant memory.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest
 *
 * Versions:
 *   1  rope_kernel: one thread per (token, head, 8-wide chunk of the first
 *      half): two 16-byte loads (dims i..i+7 and i+hd/2..), two stores.
 *
 * Roofline: bytes = 4 * tokens * heads * hd, a handful of FLOPs per element
 * plus one sincosf per pair: memory-bound.  Target: >= 75% of measured copy
 * bandwidth at >= 1024 tokens (q and k of Qwen2.5-7B: 32 heads of 128).
 * NOT YET MEASURED: no GPU was lent to the session that wrote this.
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/cuda_common.cuh"
#include "kernels/ref/kref.h"

/* ---- C reference --------------------------------------------------------- */

static int check_shape(kt_rng *rng, FILE *log, int tokens, int heads, int hd, int max_pos)
{
    size_t n = (size_t)tokens * heads * hd;
    float *x = (float *)malloc(n * sizeof(float)), *got = (float *)malloc(n * sizeof(float));
    int *pos = (int *)malloc(tokens * sizeof(int));
    kt_bf16 *dx = (kt_bf16 *)kt_malloc(n * 2);
    int *dpos = (int *)kt_malloc(tokens * sizeof(int));
    int rc = -1;
    if (!x || !got || !pos) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
    } else if (dx && dpos) {
        kt_rand_bf16(rng, x, n, 2.0f);
        for (int t = 0; t < tokens; t++)
            pos[t] = t == 0 ? 0 : kt_rng_int(rng, 1, max_pos);
        if (!kt_upload_bf16(dx, x, n) && !kt_upload(dpos, pos, tokens * sizeof(int)) &&
            !kt_rope(dx, dpos, tokens, heads, hd, KREF_QWEN25_ROPE_THETA) && !kt_sync() &&
            !kt_download_bf16(got, dx, n)) {
            char what[80];
            kref_rope(x, pos, tokens, heads, hd, KREF_QWEN25_ROPE_THETA); /* x := ref */
            snprintf(what, sizeof what, "rope tokens=%d heads=%d hd=%d", tokens, heads, hd);
            /* the angle (up to max_pos radians) is rounded to fp32 */
            rc = kt_compare(log, what, x, got, n, kt_tol(kt_rms(x, n), 0, max_pos),
                            KREF_BF16_EPS) ? 1 : 0;
        }
    }
    kt_free(dx); kt_free(dpos);
    free(x); free(got); free(pos);
    return rc;
}

extern "C" int kt_rope_selftest(uint64_t seed, FILE *log)
{
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    int rc1 = check_shape(&rng, log, 9, 28, 128, 131072);
    if (rc1 < 0)
        return -1;
    int rc2 = check_shape(&rng, log, 5, 4, 64, 4096);
    if (rc2 < 0)
        return -1;
    return rc1 || rc2;
}

/* ---- kernels ------------------------------------------------------------- */

__constant__ double c_inv_freq[128]; /* theta^(-2i/hd), i < hd/2 */

__global__ void rope_kernel(uint4 *x, const int *pos, int tokens, int heads, int hd)
{
    const int chunks = hd / 16; /* 8-wide chunks in the first half */
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)tokens * heads * chunks)
        return;
    const int c = (int)(idx % chunks);
    const size_t th = idx / chunks; /* token * heads + head */
    const int tok = (int)(th / heads);
    uint4 *row = x + th * (hd / 8);
    float a[8], b[8];
    kt_unpack8(row[c], a);
    kt_unpack8(row[c + chunks], b);
    const double p = (double)pos[tok];
#pragma unroll
    for (int e = 0; e < 8; e++) {
        double ang = p * c_inv_freq[8 * c + e];
        ang -= 6.283185307179586 * rint(ang * 0.15915494309189535);
        float sn, cs;
        sincosf((float)ang, &sn, &cs);
        const float x1 = a[e], x2 = b[e];
        a[e] = x1 * cs - x2 * sn;
        b[e] = x2 * cs + x1 * sn;
    }
    row[c] = kt_pack8(a);
    row[c + chunks] = kt_pack8(b);
}

/* ---- launchers ----------------------------------------------------------- */

static int loaded_hd;
static double loaded_theta;

extern "C" int kt_rope(kt_bf16 *d_x, const int *d_pos, int tokens, int heads, int hd,
                       double theta)
{
    KT_REQUIRE(tokens >= 0 && heads > 0 && hd > 0 && hd % 16 == 0 && hd <= 256 && theta > 1.0,
               "kt_rope: tokens %d heads %d hd %d theta %g (hd a multiple of 16, <= 256)",
               tokens, heads, hd, theta);
    if (hd != loaded_hd || theta != loaded_theta) { /* host work: first call only */
        double inv[128];
        for (int i = 0; i < hd / 2; i++)
            inv[i] = pow(theta, -2.0 * i / hd);
        CUDA_CHECK(cudaMemcpyToSymbol(c_inv_freq, inv, (hd / 2) * sizeof(double)));
        loaded_hd = hd;
        loaded_theta = theta;
    }
    if (tokens == 0)
        return 0;
    const size_t threads = (size_t)tokens * heads * (hd / 16);
    rope_kernel<<<kt_ceil_div(threads, 256), 256>>>((uint4 *)d_x, d_pos, tokens, heads, hd);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
