/*
 * emu/include/cublasLt.h: the part of cuBLASLt that kernels/blas.cu uses,
 * for the CPU emulator.  cublasLtMatmul is a plain column-major GEMM
 * (emu/emu_cublaslt.cc): D = alpha op(A) op(B) + beta C with bf16 A and B,
 * fp32 accumulation in k order, bf16 (rounded to nearest even) or fp32 D,
 * strided batches.  The heuristic always offers one algorithm; every call to
 * it is counted (emu_lt_heuristic_queries), so that a test can assert that a
 * timed interval contains none.  That algorithm's configuration
 * (cublasLtMatmulAlgoConfigGetAttribute) is a plausible, clearly fake one:
 * algorithm id -1 (no cuBLASLt id is negative), tile and stages undefined
 * (0), unsplit (split-K 1), no reduction, no swizzle, cluster 0 (auto).
 */
#ifndef EMU_CUBLASLT_H
#define EMU_CUBLASLT_H

#include <stdint.h>

#include "cuda_runtime.h"

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
} cublasLtMatmulDescAttributes_t;
typedef enum {
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
} cublasLtMatrixLayoutAttribute_t;
typedef enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

typedef enum {
    CUBLASLT_ALGO_CONFIG_ID = 0,                /* int32_t */
    CUBLASLT_ALGO_CONFIG_TILE_ID = 1,           /* uint32_t */
    CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2,        /* int32_t */
    CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME = 3,  /* uint32_t */
    CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING = 4,     /* uint32_t */
    CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION = 5,     /* uint32_t */
    CUBLASLT_ALGO_CONFIG_STAGES_ID = 6,         /* uint32_t */
    CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID = 7,    /* uint16_t */
    CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID = 8,  /* uint16_t */
} cublasLtMatmulAlgoConfigAttributes_t;

typedef struct emu_lt_handle *cublasLtHandle_t;
typedef struct emu_lt_desc {
    cublasOperation_t ta, tb;
} *cublasLtMatmulDesc_t;
typedef struct emu_lt_layout {
    cudaDataType type;
    long long rows, cols, ld, stride;
    int batch;
} *cublasLtMatrixLayout_t;
typedef struct emu_lt_pref *cublasLtMatmulPreference_t;
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h);
const char *cublasLtGetStatusString(cublasStatus_t s);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c,
                                        cudaDataType scale);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t a,
                                              const void *buf, size_t n);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t a,
                                                const void *buf, size_t n);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t n);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                              cublasLtMatmulPreference_t p, int want,
                                              cublasLtMatmulHeuristicResult_t *res, int *found);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t la, const void *B,
                              cublasLtMatrixLayout_t lb, const void *beta, const void *C,
                              cublasLtMatrixLayout_t lc, void *D, cublasLtMatrixLayout_t ld,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
                              cudaStream_t s);

/* As cuBLASLt's: sizeInBytes 0 asks for the size (into *sizeWritten);
 * otherwise it must be the attribute's size. */
cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr,
                                                    void *buf, size_t sizeInBytes,
                                                    size_t *sizeWritten);

/* How many times cublasLtMatmulAlgoGetHeuristic ran in this process (the
 * emulator's own counter, for tests; no cuBLASLt has it). */
extern "C" long long emu_lt_heuristic_queries(void);

#endif
