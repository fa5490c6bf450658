/*
 * emu/emu_cublaslt.cc: the cuBLASLt stand-in of the CPU emulator (see
 * emu/include/cublasLt.h).  Descriptors are small host structs; the
 * heuristic offers one algorithm (a fake configuration: id -1, see
 * cublasLt.h) and counts its calls; cublasLtMatmul is a
 * column-major GEMM on the host: operands converted to float once per batch
 * entry, each output a dot product in fp32 (eight partial sums, then their
 * sum: cuBLASLt's order of summation is unspecified too), then
 * D = alpha dot + beta C (C not read when beta is 0, as in cuBLAS).
 */
#include <atomic>
#include <stdlib.h>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>

#include "emu/emu_impl.h"

struct emu_lt_handle {
    int unused;
};
struct emu_lt_pref {
    size_t ws;
};

static std::atomic<long long> g_queries{0};

extern "C" long long emu_lt_heuristic_queries(void)
{
    return g_queries.load();
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = (emu_lt_handle *)calloc(1, sizeof(emu_lt_handle));
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c,
                                        cudaDataType scale)
{
    if (c != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    *d = (emu_lt_desc *)calloc(1, sizeof(emu_lt_desc));
    return *d ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t a,
                                              const void *buf, size_t n)
{
    if (n != sizeof(cublasOperation_t) || (a != CUBLASLT_MATMUL_DESC_TRANSA &&
                                           a != CUBLASLT_MATMUL_DESC_TRANSB))
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(a == CUBLASLT_MATMUL_DESC_TRANSA ? &d->ta : &d->tb, buf, n);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if ((t != CUDA_R_16BF && t != CUDA_R_32F) || ld < (int64_t)rows)
        return CUBLAS_STATUS_INVALID_VALUE;
    *l = (emu_lt_layout *)calloc(1, sizeof(emu_lt_layout));
    if (!*l)
        return CUBLAS_STATUS_ALLOC_FAILED;
    **l = {t, (long long)rows, (long long)cols, (long long)ld, 0, 1};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t a,
                                                const void *buf, size_t n)
{
    if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && n == sizeof(int32_t)) {
        int32_t v;
        memcpy(&v, buf, n);
        l->batch = v;
        return v >= 1 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
    }
    if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && n == sizeof(int64_t)) {
        int64_t v;
        memcpy(&v, buf, n);
        l->stride = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = (emu_lt_pref *)calloc(1, sizeof(emu_lt_pref));
    return *p ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t n)
{
    if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && n == sizeof(uint64_t)) {
        memcpy(&p->ws, buf, n);
        return CUBLAS_STATUS_SUCCESS;
    }
    return n == sizeof(uint32_t) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

/* the shape of op(A) op(B) = D from the layouts; 0 when they disagree */
static int lt_shape(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                    cublasLtMatrixLayout_t dd, long long *m, long long *n, long long *k)
{
    *m = dd->rows;
    *n = dd->cols;
    *k = d->ta == CUBLAS_OP_N ? a->cols : a->rows;
    const long long am = d->ta == CUBLAS_OP_N ? a->rows : a->cols;
    const long long bk = d->tb == CUBLAS_OP_N ? b->rows : b->cols;
    const long long bn = d->tb == CUBLAS_OP_N ? b->cols : b->rows;
    return am == *m && bk == *k && bn == *n && a->type == CUDA_R_16BF && b->type == CUDA_R_16BF &&
           a->batch == dd->batch && b->batch == dd->batch;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                              cublasLtMatmulPreference_t p, int want,
                                              cublasLtMatmulHeuristicResult_t *res, int *found)
{
    g_queries++;
    long long m, n, k;
    if (!h || !p || want < 1 || !lt_shape(d, a, b, dd, &m, &n, &k) || c->type != dd->type)
        return CUBLAS_STATUS_INVALID_VALUE;
    memset(res, 0, sizeof *res);
    res->wavesCount = 1.0f;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    void *buf, size_t size, size_t *written)
{
    int64_t v;
    size_t n;
    switch (attr) {
    case CUBLASLT_ALGO_CONFIG_ID: v = -1; n = 4; break;
    case CUBLASLT_ALGO_CONFIG_SPLITK_NUM: v = 1; n = 4; break;
    case CUBLASLT_ALGO_CONFIG_TILE_ID:
    case CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME:
    case CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING:
    case CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION:
    case CUBLASLT_ALGO_CONFIG_STAGES_ID: v = 0; n = 4; break;
    case CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID:
    case CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID: v = 0; n = 2; break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (!algo || (size == 0 && !written) || (size != 0 && (!buf || size != n)))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (written)
        *written = n;
    if (size == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (n == 2) {
        const uint16_t x = (uint16_t)v;
        memcpy(buf, &x, n);
    } else {
        const int32_t x = (int32_t)v;
        memcpy(buf, &x, n);
    }
    return CUBLAS_STATUS_SUCCESS;
}

static float bf(const void *p, long long i)
{
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t la, const void *B,
                              cublasLtMatrixLayout_t lb, const void *beta, const void *C,
                              cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t *algo, void *, size_t, cudaStream_t)
{
    long long m, n, k;
    if (!h || !algo || !lt_shape(d, la, lb, ld, &m, &n, &k) || lc->type != ld->type)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (emu_sticky_error() != cudaSuccess)
        return CUBLAS_STATUS_SUCCESS; /* like a launch on a faulted context */
    const float al = *(const float *)alpha, be = *(const float *)beta;
    const int f32 = ld->type == CUDA_R_32F;
    std::vector<float> at((size_t)(m * k)), bt((size_t)(n * k)); /* op(A) rows, op(B) columns */
    for (int z = 0; z < ld->batch; z++) {
        const long long oa = z * la->stride, ob = z * lb->stride, od = z * ld->stride;
        const long long oc = z * lc->stride;
        for (long long i = 0; i < m; i++)
            for (long long p = 0; p < k; p++)
                at[i * k + p] = bf(A, oa + (d->ta == CUBLAS_OP_N ? i + p * la->ld : p + i * la->ld));
        for (long long j = 0; j < n; j++)
            for (long long p = 0; p < k; p++)
                bt[j * k + p] = bf(B, ob + (d->tb == CUBLAS_OP_N ? p + j * lb->ld : j + p * lb->ld));
        for (long long j = 0; j < n; j++)
            for (long long i = 0; i < m; i++) {
                const float *x = &at[i * k], *y = &bt[j * k];
                float s8[8] = {0};
                long long p = 0;
                for (; p + 8 <= k; p += 8)
                    for (int q = 0; q < 8; q++)
                        s8[q] += x[p + q] * y[p + q];
                for (; p < k; p++)
                    s8[p & 7] += x[p] * y[p];
                float s = ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
                float v = al * s;
                const long long ic = oc + i + j * lc->ld, id = od + i + j * ld->ld;
                if (be != 0.0f)
                    v += be * (f32 ? ((const float *)C)[ic] : bf(C, ic));
                if (f32)
                    ((float *)D)[id] = v;
                else
                    ((__nv_bfloat16 *)D)[id] = __float2bfloat16_rn(v);
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}
