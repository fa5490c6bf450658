/*
 * bf16 GEMM through cuBLASLt, fp32 accumulation, bf16 output: the linear
 * layers of a decoder (QKV, O, gate_up, down) and the LM head.  Row-major
 * C[m, n] = A[m, k] · W[n, k]^T, A the activations (m = tokens), W a weight
 * stored as torch.nn.Linear does ([out, in]), as kref_gemm_nt specifies.
 * In cuBLAS's column-major terms that is C^T (n x m, ld n) = op_T(W) (n x k)
 * · op_N(A^T) (k x m): transa = T on W, transb = N on A.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90, linked with -lcublasLt);
 *        run: build/tailsim-validate selftest
 *
 * A kt_gemm is a thin layer over blas.cu's general wrapper: its own kb_blas
 * (cuBLASLt handle, 32 MiB workspace, plan cache) and the planned shape; a
 * run is one kb_matmul {ta 0, tb 1, A, B = W, D = C, batch 1, alpha 1,
 * beta 0}.
 *
 * Versions:
 *   1  cuBLASLt's first heuristic for the shape, 32 MiB workspace (NVIDIA's
 *      recommendation for Hopper), chosen once per shape by kt_gemm_plan()
 *      (for 256-byte aligned operands, cuBLASLt's default; a less aligned
 *      one gets its own plan at its first run) so that timed runs contain
 *      only cublasLtMatmul.  Shapes planned before stay cached (blas.cu),
 *      so alternating shapes do not query the heuristic again.
 *
 * Roofline: FLOPs 2mnk, bytes 2(mk + nk + mn).  Decode-sized m (<= 64) is
 * weight-bandwidth bound: target >= 75% of measured copy bandwidth.  Large m
 * (>= 1024) is matrix bound: target >= 70% of the measured dense bf16 rate
 * (~790 TFLOP/s on the H200 here).  NOT YET MEASURED: no GPU was lent to the
 * session that wrote this; calibrate records the achieved rates.
 */
#include <stdlib.h>

#include "kernels/blas.cuh"
#include "kernels/ref/kref.h"

struct kt_gemm {
    kb_blas *b;                     /* handle, KB_WS_BYTES workspace, plan cache */
    int m, n, k;                    /* planned shape; m = 0 before the first plan */
};

/* ---- C reference --------------------------------------------------------- */

static int check_shape(kt_gemm *g, kt_rng *rng, FILE *log, int m, int n, int k)
{
    size_t na = (size_t)m * k, nw = (size_t)n * k, nc = (size_t)m * n;
    float *A = (float *)malloc(na * sizeof(float)), *W = (float *)malloc(nw * sizeof(float));
    float *ref = (float *)malloc(nc * sizeof(float)), *got = (float *)malloc(nc * sizeof(float));
    kt_bf16 *dA = (kt_bf16 *)kt_malloc(na * 2), *dW = (kt_bf16 *)kt_malloc(nw * 2);
    kt_bf16 *dC = (kt_bf16 *)kt_malloc(nc * 2);
    int rc = -1;
    if (!A || !W || !ref || !got) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
    } else if (dA && dW && dC) {
        kt_rand_bf16(rng, A, na, 1.0f);
        kt_rand_bf16(rng, W, nw, 1.0f);
        kref_gemm_nt(A, W, ref, m, n, k);
        if (!kt_upload_bf16(dA, A, na) && !kt_upload_bf16(dW, W, nw) &&
            !kt_fill_bf16(dC, nc, 5, 1e30f) && !kt_gemm_plan(g, m, n, k) &&
            !kt_gemm_run(g, dA, dW, dC) && !kt_sync() && !kt_download_bf16(got, dC, nc)) {
            char what[96];
            snprintf(what, sizeof what, "gemm m=%d n=%d k=%d", m, n, k);
            /* no intermediate rounding; fp32 sums of k terms */
            rc = kt_compare(log, what, ref, got, nc, kt_tol(kt_rms(ref, nc), 0, k),
                            KREF_BF16_EPS) ? 1 : 0;
        }
    }
    kt_free(dA); kt_free(dW); kt_free(dC);
    free(A); free(W); free(ref); free(got);
    return rc;
}

/* Prints the record kt_blas_algos() holds for the plan of m x n x k (the
 * heuristic's choice, decoded); 0, or 1 when there is none. */
static int check_record(FILE *log, int m, int n, int k)
{
    kt_blas_algo rec[256];
    size_t nrec = kt_blas_algos(rec, sizeof rec / sizeof rec[0]);
    for (size_t i = 0; i < nrec && i < sizeof rec / sizeof rec[0]; i++) {
        const kt_blas_algo *a = &rec[i];
        if (a->m == m && a->n == n && a->k == k && a->batch == 1 && !a->ta && a->tb) {
            fprintf(log, "  gemm m=%d n=%d k=%d: cuBLASLt algo %d tile %s (id %d) stages %d "
                         "split-K %d reduction %d swizzle %d cluster %d\n",
                    m, n, k, a->algo_id, a->tile, a->tile_id, a->stages_id, a->splitk,
                    a->reduction, a->swizzle, a->cluster);
            return a->tile[0] ? 0 : 1;
        }
    }
    fprintf(log, "  gemm m=%d n=%d k=%d: no record of cuBLASLt's choice (kt_blas_algos: %zu)\n",
            m, n, k, nrec);
    return 1;
}

extern "C" int kt_gemm_selftest(uint64_t seed, FILE *log)
{
    static const int shapes[][3] = {
        {17, 4608, 3584}, /* Qwen2.5-7B QKV projection, 17 tokens */
        {64, 512, 1024}, {1, 1000, 256}, {300, 136, 72},
    };
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    kt_gemm *g = kt_gemm_new();
    if (!g)
        return -1;
    int worst = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int rc = check_shape(g, &rng, log, shapes[i][0], shapes[i][1], shapes[i][2]);
        if (rc < 0) {
            worst = -1;
            break;
        }
        worst = rc > worst ? rc : worst;
        rc = check_record(log, shapes[i][0], shapes[i][1], shapes[i][2]);
        worst = rc > worst ? rc : worst;
    }
    kt_gemm_free(g);
    return worst;
}

/* ---- kernels ------------------------------------------------------------- */
/* cuBLASLt's (wgmma-based on sm_90): none of our own. */

/* ---- launchers ----------------------------------------------------------- */

extern "C" void kt_gemm_free(kt_gemm *g)
{
    if (!g)
        return;
    kb_blas_free(g->b);
    free(g);
}

extern "C" kt_gemm *kt_gemm_new(void)
{
    kt_gemm *g = (kt_gemm *)calloc(1, sizeof *g);
    if (!g) {
        kt_seterr(__FILE__, __LINE__, "kt_gemm_new: out of host memory");
        return NULL;
    }
    if (!(g->b = kb_blas_new())) {
        kt_gemm_free(g);
        return NULL;
    }
    return g;
}

/* C[m, n] = A[m, k] W[n, k]^T as a kb_mm; NULL pointers when planning. */
static kb_mm gemm_mm(const kt_gemm *g, const kt_bf16 *A, const kt_bf16 *W, kt_bf16 *C)
{
    const kb_mm mm = {0, 1, g->m, g->n, g->k, A, g->k, 0, W, g->k, 0, C, g->n, 0, 1, 0,
                      1.0f, 0.0f};
    return mm;
}

extern "C" int kt_gemm_plan(kt_gemm *g, int m, int n, int k)
{
    KT_REQUIRE(g && m > 0 && n > 0 && k > 0, "kt_gemm_plan: bad shape %d x %d x %d", m, n, k);
    g->m = m;
    g->n = n;
    g->k = k;
    const kb_mm mm = gemm_mm(g, NULL, NULL, NULL);
    if (kb_prepare(g->b, &mm)) {
        g->m = g->n = g->k = 0;
        return -1;
    }
    return 0;
}

extern "C" int kt_gemm_run(kt_gemm *g, const kt_bf16 *d_A, const kt_bf16 *d_W, kt_bf16 *d_C)
{
    KT_REQUIRE(g && g->m > 0, "kt_gemm_run: no shape planned");
    const kb_mm mm = gemm_mm(g, d_A, d_W, d_C);
    return kb_matmul(g->b, &mm);
}
