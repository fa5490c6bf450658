/*
 * The one cuBLASLt wrapper: bf16 matrix products with fp32 accumulation,
 * any transposes, strided batches, bf16 or fp32 output, alpha and beta (fp32
 * gradient accumulation in the GEMM's epilogue, as Megatron's
 * gradient-accumulation fusion does).  gemm_lt.cu's kt_gemm (the forward
 * C = A W^T) and train.cu's backward both run through it; blas.cuh has the
 * interface.  This is the only file that calls cuBLASLt.
 *
 * Row-major D = op(A) op(B) is, in cuBLAS's column-major terms, D^T =
 * op(B)^T op(A)^T: B is passed as cuBLASLt's first operand (transa = tb),
 * A as the second (transb = ta), and D^T is n x m with leading dimension
 * ldd.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90, linked with -lcublasLt);
 *        run: build/tailsim-validate selftest --only gemm (and --only train)
 *
 * Versions:
 *   1  cuBLASLt's first heuristic for the key, KB_WS_BYTES (32 MiB)
 *      workspace per kb_blas.  Plans (descriptor, layouts, algorithm) are
 *      cached by the full key (shape, transposes, leading dimensions,
 *      batch strides, output type, beta != 0, alignment of A, B and D), up
 *      to KB_PLANS per kb_blas, the oldest evicted first; a key seen before
 *      never queries the heuristic again, so repeated layers and timed runs
 *      contain only cublasLtMatmul.
 *   2  The heuristic's choice is recorded when a plan is made: its
 *      configuration (cublasLtMatmulAlgoConfigGetAttribute: algorithm id,
 *      tile, stages, split-K, reduction scheme, CTA swizzling and, where the
 *      headers have it, the cluster shape) is kept in the plan and, the
 *      first time a shape (m, n, k, batch, transposes) is planned, in a
 *      process-wide log that kt_blas_algos() returns (calibrate writes it
 *      as gemm_algos.csv).  Only a miss records; a hit does nothing more.
 *
 * Cost: a cache hit is one key comparison (the last plan used) or a scan of
 * at most KB_PLANS keys; a miss is host work (descriptors and the heuristic
 * query).  Rooflines of the products are those of their callers (gemm_lt.cu,
 * train.cu).
 */
#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/blas.cuh"
#include "kernels/blas_tiles.cuh"

/* CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID came with cuBLAS 12 (Hopper's thread
 * block clusters); the emulator's header (no CUBLAS_VER_MAJOR) has it too. */
#if defined(CUBLAS_VER_MAJOR) && CUBLAS_VER_MAJOR < 12
#define KB_HAVE_CLUSTER 0
#else
#define KB_HAVE_CLUSTER 1
#endif

#define CUBLAS_CHECK(call)                                                    \
    do {                                                                      \
        cublasStatus_t kt_s_ = (call);                                        \
        if (kt_s_ != CUBLAS_STATUS_SUCCESS)                                   \
            return kt_seterr(__FILE__, __LINE__, "%s: %s", #call,             \
                             cublasLtGetStatusString(kt_s_));                 \
    } while (0)

/* ---- C reference --------------------------------------------------------- */
/* kref_gemm_nt (kref_math.c) and kref_gemm_tn / kref_gemm_nn (kref_train.c);
 * checked through gemm_lt.cu's kt_gemm_selftest and, with transposes,
 * batches and beta, through a whole layer in train.cu's kt_train_selftest. */

/* ---- kernels ------------------------------------------------------------- */
/* cuBLASLt's (wgmma-based on sm_90): none of our own. */

/* ---- launchers ----------------------------------------------------------- */

struct kb_key {
    long long v[17];
};

struct kb_plan {
    kb_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l1, l2, ld; /* first operand (B), second (A), D = C */
    cublasLtMatmulAlgo_t algo;
    kt_blas_algo cfg;           /* what the heuristic chose, decoded (algo_record) */
};

#define KB_PLANS 64

struct kb_blas {
    cublasLtHandle_t lt;
    void *ws;                   /* workspace, ws_bytes */
    size_t ws_bytes;
    kb_plan plans[KB_PLANS];
    int n, next, last;          /* plans in use; the next to evict when full; the last used */
};

static void plan_drop(kb_plan *p)
{
    if (p->l1) cublasLtMatrixLayoutDestroy(p->l1);
    if (p->l2) cublasLtMatrixLayoutDestroy(p->l2);
    if (p->ld) cublasLtMatrixLayoutDestroy(p->ld);
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

void kb_blas_free(kb_blas *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->n; i++)
        plan_drop(&b->plans[i]);
    kt_free(b->ws);
    if (b->lt)
        cublasLtDestroy(b->lt);
    free(b);
}

static int blas_init(kb_blas *b)
{
    CUBLAS_CHECK(cublasLtCreate(&b->lt));
    b->ws_bytes = KB_WS_BYTES;
    b->ws = kt_malloc(b->ws_bytes);
    return b->ws ? 0 : -1;
}

kb_blas *kb_blas_new(void)
{
    kb_blas *b = (kb_blas *)calloc(1, sizeof *b);
    if (!b) {
        kt_seterr(__FILE__, __LINE__, "kb_blas_new: out of host memory");
        return NULL;
    }
    if (blas_init(b)) {
        kb_blas_free(b);
        return NULL;
    }
    return b;
}

size_t kb_blas_bytes(const kb_blas *b)
{
    return b ? b->ws_bytes : 0;
}

/* The largest power of two (<= 256) dividing the address and, in a batch,
 * the byte stride between matrices: cuBLASLt's alignment requirement.  NULL
 * gives 256. */
static unsigned align_of(const void *p, long long stride_bytes, int batch)
{
    unsigned long long a = (unsigned long long)(uintptr_t)p | 256u;
    if (batch > 1)
        a |= (unsigned long long)stride_bytes;
    return (unsigned)(a & (~a + 1));
}

static int layout(cublasLtMatrixLayout_t *l, cudaDataType t, long long rows, long long cols,
                  long long ld, int batch, long long stride)
{
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, t, rows, cols, ld));
    if (batch > 1) {
        int32_t bc = batch;
        int64_t so = stride;
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &bc, sizeof bc));
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
            *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &so, sizeof so));
    }
    return 0;
}

/* ---- the record of cuBLASLt's choices (kt_blas_algos) ------------------ */

/* Distinct shapes planned so far, in the order first planned: host memory
 * kept for the program's life (grown by doubling on a plan-cache miss). */
static kt_blas_algo *algo_log;
static size_t algo_n, algo_cap;

/* One configuration attribute of algo, as a signed integer, into *v (its
 * size, 2, 4 or 8 bytes, is asked first: the attributes' types differ and
 * have changed between versions).  0, or -1 with *v = -1 when cuBLASLt
 * does not answer. */
static int algo_attr(const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t a,
                     long long *v)
{
    *v = -1;
    size_t need = 0, wrote = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, a, NULL, 0, &need) != CUBLAS_STATUS_SUCCESS)
        return -1;
    union {
        uint16_t u16;
        int32_t i32;
        int64_t i64;
        unsigned char b[8];
    } u;
    memset(&u, 0, sizeof u);
    if ((need != 2 && need != 4 && need != 8) ||
        cublasLtMatmulAlgoConfigGetAttribute(algo, a, u.b, need, &wrote) != CUBLAS_STATUS_SUCCESS)
        return -1;
    *v = need == 2 ? (long long)u.u16 : need == 4 ? (long long)u.i32 : (long long)u.i64;
    return 0;
}

/* The tile's name: "ROWSxCOLS" from blas_tiles.cuh, "undefined" for id 0,
 * "id:N" for an id the table lacks, "?" when unreadable. */
static void tile_name(long long id, char *buf, size_t n)
{
    if (id < 0) {
        snprintf(buf, n, "?");
        return;
    }
    if (id == 0) {
        snprintf(buf, n, "undefined");
        return;
    }
    for (size_t i = 0; i < sizeof KB_TILES / sizeof KB_TILES[0]; i++)
        if ((long long)KB_TILES[i].id == id) {
            snprintf(buf, n, "%s", KB_TILES[i].name);
            return;
        }
    snprintf(buf, n, "id:%lld", id);
}

/* Decodes p->algo into p->cfg for the product mm. */
static void algo_decode(kb_plan *p, const kb_mm *mm)
{
    kt_blas_algo *c = &p->cfg;
    memset(c, 0, sizeof *c);
    c->m = mm->m;
    c->n = mm->n;
    c->k = mm->k;
    c->batch = mm->batch;
    c->ta = mm->ta ? 1 : 0;
    c->tb = mm->tb ? 1 : 0;
    const cublasLtMatmulAlgo_t *a = &p->algo;
    long long v[7];
    const int id_ok = algo_attr(a, CUBLASLT_ALGO_CONFIG_ID, &v[0]) == 0;
    algo_attr(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &v[1]);
    algo_attr(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &v[2]);
    algo_attr(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &v[3]);
    algo_attr(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &v[4]);
    algo_attr(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &v[5]);
#if KB_HAVE_CLUSTER
    algo_attr(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &v[6]);
#else
    v[6] = -1;
#endif
    c->algo_id = (int)v[0];
    c->tile_id = (int)v[1];
    c->stages_id = (int)v[2];
    c->splitk = (int)v[3];
    c->reduction = (int)v[4];
    c->swizzle = (int)v[5];
    c->cluster = (int)v[6];
    /* a negative id that cuBLASLt gave (its ids index cublasLtMatmulAlgoGetIds,
     * so none is negative): the CPU emulator's stand-in, no kernel of its own */
    if (id_ok && v[0] < 0)
        snprintf(c->tile, sizeof c->tile, "emu");
    else
        tile_name(v[1], c->tile, sizeof c->tile);
}

/* Adds p's configuration to the log unless its shape is there; 0, or -1
 * (kt_error set) out of host memory. */
static int algo_log_add(const kb_plan *p)
{
    const kt_blas_algo *c = &p->cfg;
    for (size_t i = 0; i < algo_n; i++) {
        const kt_blas_algo *o = &algo_log[i];
        if (o->m == c->m && o->n == c->n && o->k == c->k && o->batch == c->batch &&
            o->ta == c->ta && o->tb == c->tb)
            return 0;
    }
    if (algo_n == algo_cap) {
        size_t cap = algo_cap ? 2 * algo_cap : 64;
        kt_blas_algo *log = (kt_blas_algo *)realloc(algo_log, cap * sizeof *log);
        if (!log)
            return kt_seterr(__FILE__, __LINE__, "recording cuBLASLt's choice: out of host memory");
        algo_log = log;
        algo_cap = cap;
    }
    algo_log[algo_n++] = *c;
    return 0;
}

extern "C" size_t kt_blas_algos(kt_blas_algo *out, size_t max)
{
    for (size_t i = 0; out && i < max && i < algo_n; i++)
        out[i] = algo_log[i];
    return algo_n;
}

/* Descriptor, layouts and the heuristic's first algorithm for mm, whose
 * operands have alignments al (B, A, D). */
static int plan_make(kb_blas *b, kb_plan *p, const kb_mm *mm, const unsigned al[3])
{
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t t1 = mm->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t t2 = mm->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &t1, sizeof t1));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &t2, sizeof t2));
    /* column-major view of the row-major product: D^T = op(B)^T op(A)^T */
    if (layout(&p->l1, CUDA_R_16BF, mm->tb ? mm->k : mm->n, mm->tb ? mm->n : mm->k, mm->ldb,
               mm->batch, mm->sB) ||
        layout(&p->l2, CUDA_R_16BF, mm->ta ? mm->m : mm->k, mm->ta ? mm->k : mm->m, mm->lda,
               mm->batch, mm->sA) ||
        layout(&p->ld, mm->d_f32 ? CUDA_R_32F : CUDA_R_16BF, mm->n, mm->m, mm->ldd, mm->batch,
               mm->sD))
        return -1;
    cublasLtMatmulPreference_t pref = NULL;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &b->ws_bytes, sizeof b->ws_bytes);
    const cublasLtMatmulPreferenceAttributes_t at[3] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 3 && s == CUBLAS_STATUS_SUCCESS; i++) {
        uint32_t v = al[i];
        s = cublasLtMatmulPreferenceSetAttribute(pref, at[i], &v, sizeof v);
    }
    if (s == CUBLAS_STATUS_SUCCESS && mm->beta != 0.0f) {
        uint32_t v = al[2];
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                 &v, sizeof v);
    }
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(b->lt, p->op, p->l1, p->l2, p->ld, p->ld, pref, 1,
                                           &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(s);
    KT_REQUIRE(found > 0, "cuBLASLt has no algorithm for %d x %d x %d (batch %d)", mm->m, mm->n,
               mm->k, mm->batch);
    p->algo = res.algo;
    algo_decode(p, mm);
    return algo_log_add(p);
}

/* The cached plan for mm, made on a miss (evicting the oldest when the
 * cache is full); NULL on failure. */
static kb_plan *plan_get(kb_blas *b, const kb_mm *mm)
{
    if (!b || mm->m <= 0 || mm->n <= 0 || mm->k <= 0 || mm->batch < 1) {
        kt_seterr(__FILE__, __LINE__, "kb_matmul: bad shape %d x %d x %d (batch %d)", mm->m,
                  mm->n, mm->k, mm->batch);
        return NULL;
    }
    const unsigned al[3] = {align_of(mm->B, mm->sB * 2, mm->batch),
                            align_of(mm->A, mm->sA * 2, mm->batch),
                            align_of(mm->D, mm->sD * (mm->d_f32 ? 4 : 2), mm->batch)};
    const kb_key key = {{mm->ta, mm->tb, mm->m, mm->n, mm->k, mm->lda, mm->ldb, mm->ldd,
                         mm->sA, mm->sB, mm->sD, mm->batch, mm->d_f32, mm->beta != 0.0f, al[0],
                         al[1], al[2]}};
    if (b->last < b->n && !memcmp(&b->plans[b->last].key, &key, sizeof key))
        return &b->plans[b->last];
    for (int i = 0; i < b->n; i++)
        if (!memcmp(&b->plans[i].key, &key, sizeof key)) {
            b->last = i;
            return &b->plans[i];
        }
    kb_plan *p;
    if (b->n < KB_PLANS) {
        p = &b->plans[b->n++];
    } else {
        p = &b->plans[b->next];
        b->next = (b->next + 1) % KB_PLANS;
        plan_drop(p);
    }
    kt_note_plan_query(); /* a miss: host work, counted (kt_plan_queries_timed) */
    if (plan_make(b, p, mm, al)) {
        plan_drop(p);
        /* keep the table dense: move the last plan into the hole */
        kb_plan *last = &b->plans[b->n - 1];
        if (p != last)
            *p = *last;
        memset(last, 0, sizeof *last);
        b->n--;
        return NULL;
    }
    p->key = key;
    b->last = (int)(p - b->plans);
    return p;
}

int kb_prepare(kb_blas *b, const kb_mm *mm)
{
    return plan_get(b, mm) ? 0 : -1;
}

int kb_matmul(kb_blas *b, const kb_mm *mm)
{
    const kb_plan *p = plan_get(b, mm);
    if (!p)
        return -1;
    CUBLAS_CHECK(cublasLtMatmul(b->lt, p->op, &mm->alpha, mm->B, p->l1, mm->A, p->l2, &mm->beta,
                                mm->D, p->ld, mm->D, p->ld, &p->algo, b->ws, b->ws_bytes, 0));
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
