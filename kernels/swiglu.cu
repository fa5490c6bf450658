/*
 * SwiGLU activation of the fused gate/up projection: out[r][i] =
 * silu(gate_up[r][i]) * gate_up[r][ffn + i], bf16 in and out, fp32 math
 * (kref_swiglu).  One per decoder layer, between the gate_up and down GEMMs.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest
 *
 * Versions:
 *   1  swiglu_kernel: one thread per 8 outputs (16-byte loads of gate and up,
 *      one 16-byte store), grid-stride over rows * ffn / 8.
 *
 * Roofline: bytes = 6 * rows * ffn (read 2, write 1, bf16); ~6 FLOPs and one
 * exp per output: memory-bound.  Target: >= 80% of measured copy bandwidth
 * at >= 256 rows of Qwen2.5-7B (ffn 18944).
 * NOT YET MEASURED: no GPU was lent to the session that wrote this.
 */
#include <stdlib.h>

#include "kernels/cuda_common.cuh"
#include "kernels/ref/kref.h"

/* ---- C reference --------------------------------------------------------- */

static int check_shape(kt_rng *rng, FILE *log, int rows, int ffn)
{
    size_t nin = (size_t)rows * 2 * ffn, nout = (size_t)rows * ffn;
    float *gu = (float *)malloc(nin * sizeof(float));
    float *ref = (float *)malloc(nout * sizeof(float));
    float *got = (float *)malloc(nout * sizeof(float));
    kt_bf16 *dgu = (kt_bf16 *)kt_malloc(nin * 2), *dout = (kt_bf16 *)kt_malloc(nout * 2);
    int rc = -1;
    if (!gu || !ref || !got) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
    } else if (dgu && dout) {
        kt_rand_bf16(rng, gu, nin, 6.0f);
        kref_swiglu(gu, ref, rows, ffn);
        if (!kt_upload_bf16(dgu, gu, nin) && !kt_fill_bf16(dout, nout, 4, 1e30f) &&
            !kt_swiglu(dgu, dout, rows, ffn) && !kt_sync() && !kt_download_bf16(got, dout, nout)) {
            char what[64];
            snprintf(what, sizeof what, "swiglu rows=%d ffn=%d", rows, ffn);
            /* elementwise in fp32: only the output's own rounding */
            rc = kt_compare(log, what, ref, got, nout, kt_tol(kt_rms(ref, nout), 0, 1),
                            KREF_BF16_EPS) ? 1 : 0;
        }
    }
    kt_free(dgu); kt_free(dout);
    free(gu); free(ref); free(got);
    return rc;
}

extern "C" int kt_swiglu_selftest(uint64_t seed, FILE *log)
{
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    int rc1 = check_shape(&rng, log, 7, 4736); /* Qwen2.5-7B at TP 4 */
    if (rc1 < 0)
        return -1;
    int rc2 = check_shape(&rng, log, 1, 8);
    if (rc2 < 0)
        return -1;
    return rc1 || rc2;
}

/* ---- kernels ------------------------------------------------------------- */

__global__ void swiglu_kernel(const uint4 *gu, uint4 *out, int rows, int fvec)
{
    const size_t n = (size_t)rows * fvec;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const size_t r = i / fvec, c = i % fvec;
        float g[8], u[8];
        kt_unpack8(gu[r * 2 * fvec + c], g);
        kt_unpack8(gu[r * 2 * fvec + fvec + c], u);
#pragma unroll
        for (int e = 0; e < 8; e++)
            g[e] = g[e] / (1.0f + expf(-g[e])) * u[e];
        out[i] = kt_pack8(g);
    }
}

/* ---- launchers ----------------------------------------------------------- */

extern "C" int kt_swiglu(const kt_bf16 *d_gate_up, kt_bf16 *d_out, int rows, int ffn)
{
    KT_REQUIRE(rows >= 0 && ffn > 0 && ffn % 8 == 0,
               "kt_swiglu: rows %d, ffn %d (need a multiple of 8)", rows, ffn);
    if (rows == 0)
        return 0;
    size_t n = (size_t)rows * (ffn / 8);
    unsigned blocks = kt_ceil_div(n, 256);
    if (blocks > 132 * 32)
        blocks = 132 * 32;
    swiglu_kernel<<<blocks, 256>>>((const uint4 *)d_gate_up, (uint4 *)d_out, rows, ffn / 8);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
