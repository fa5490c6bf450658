/*
 * Decode attention over a ragged batch: one query token per sequence, each
 * sequence with its own context length, grouped-query heads (G = heads /
 * kv_heads query heads share a KV head), bf16 Q/K/V, fp32 softmax and
 * accumulation, output bf16.  This is the op that dominates long-tail
 * rollouts: its time is the bytes of the KV cache over memory bandwidth.
 * Also home of the attention plan (kt_attn_plan) shared with chunk_attn.cu.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest
 *
 * Versions (kernels in attn.cuh):
 *   1  attn_naive_kernel: block per (sequence, head), scalar, reads each KV
 *      head once per query head (G times).  Correctness baseline only.
 *   2  split-K flash-decoding on tensor cores: warps own (sequence, KV split,
 *      KV head), all G query heads of a KV head share one pass over its K/V,
 *      partial results merged by a combine kernel.  The plan picks the split
 *      length so that ~16 warps per SM have work even at batch 1.
 *
 * Roofline: bytes = 2 * 2 * ctx_sum * kv_heads * hd (K and V, bf16) plus the
 * queries and outputs; FLOPs = 4 * heads * hd * ctx_sum, i.e. G FLOP per
 * byte, far below the ridge (~200 FLOP/byte on an H200), so memory-bound.
 * Design target for version 2: >= 70% of the measured device-to-device copy
 * bandwidth (~4.3 TB/s on the H200 here, so >= 3.0 TB/s) for ctx_sum >= 1M
 * tokens, and within 2x of launch overhead for tiny batches.
 * NOT YET MEASURED: no GPU was lent to the session that wrote this; run
 * validate/gpu.sh and record the achieved fraction here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attn.cuh"
#include "kernels/ref/kref.h"

/* ---- C reference --------------------------------------------------------- */

/* Runs one decode case on random data and compares with kref_decode_attn.
 * Tolerance: 2 eps(bf16) rms(ref) + eps(bf16) |ref|; version 2 rounds the
 * softmax weights to bf16 for the tensor cores (relative error 2^-9 each),
 * which on short contexts reaches ~0.9 eps rms (seen in a host emulation of
 * the kernel's fragment maps).  Returns 0 pass, 1 mismatch, -1 error. */
static int check_case(kt_rng *rng, FILE *log, const int *ctx, int b, int heads,
                      int kv_heads, int split_len, int version)
{
    const int hd = 128;
    size_t kv_rows = 0;
    for (int i = 0; i < b; i++)
        kv_rows += (size_t)ctx[i];
    size_t nq = (size_t)b * heads * hd, nkv = kv_rows * kv_heads * hd;
    float *q = (float *)malloc(nq * sizeof(float));
    float *k = (float *)malloc(nkv * sizeof(float));
    float *v = (float *)malloc(nkv * sizeof(float));
    float *ref = (float *)malloc(nq * sizeof(float));
    float *got = (float *)malloc(nq * sizeof(float));
    kt_bf16 *d_q = NULL, *d_k = NULL, *d_v = NULL, *d_o = NULL;
    kt_attn *plan = NULL;
    int rc = -1;
    char what[160];
    if (!q || !k || !v || !ref || !got) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
        goto cleanup;
    }
    kt_rand_bf16(rng, q, nq, 4.0f);
    kt_rand_bf16(rng, k, nkv, 1.0f);
    kt_rand_bf16(rng, v, nkv, 1.0f);
    if (kref_decode_attn(q, k, v, ctx, b, heads, kv_heads, hd, ref)) {
        kt_seterr(__FILE__, __LINE__, "kref_decode_attn rejected the case");
        goto cleanup;
    }
    d_q = (kt_bf16 *)kt_malloc(nq * 2);
    d_k = (kt_bf16 *)kt_malloc(nkv * 2);
    d_v = (kt_bf16 *)kt_malloc(nkv * 2);
    d_o = (kt_bf16 *)kt_malloc(nq * 2);
    plan = kt_attn_plan(ctx, NULL, b, heads, kv_heads, hd, split_len);
    if (!d_q || !d_k || !d_v || !d_o || !plan)
        goto cleanup;
    /* poison the output so that unwritten values show */
    if (kt_upload_bf16(d_q, q, nq) || kt_upload_bf16(d_k, k, nkv) ||
        kt_upload_bf16(d_v, v, nkv) || kt_fill_bf16(d_o, nq, 99, 1e30f) ||
        kt_decode_attn(plan, d_q, d_k, d_v, d_o, version) || kt_sync() ||
        kt_download_bf16(got, d_o, nq))
        goto cleanup;
    snprintf(what, sizeof what, "decode_attn v%d b=%d heads=%d/%d split=%d", version,
             b, heads, kv_heads, plan->split_len);
    rc = kt_compare(log, what, ref, got, nq, attn_tol(kt_rms(ref, nq), ctx, b),
                    KREF_BF16_EPS) ? 1 : 0;
cleanup:
    kt_attn_free(plan);
    kt_free(d_q); kt_free(d_k); kt_free(d_v); kt_free(d_o);
    free(q); free(k); free(v); free(ref); free(got);
    return rc;
}

extern "C" int kt_decode_attn_selftest(uint64_t seed, FILE *log)
{
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    /* --small: shorter long contexts, the same paths (one split at 4096) */
    static const int ctx_af[] = {1, 15, 16, 17, 300, 2500}, ctx_as[] = {1, 15, 16, 17, 300, 700};
    static const int ctx_bf[] = {129, 1000, 4097}, ctx_bs[] = {129, 500, 1100};
    const int *ctx_a = kt_selftest_small() ? ctx_as : ctx_af;
    const int *ctx_b = kt_selftest_small() ? ctx_bs : ctx_bf;
    static const int ctx_c[] = {33, 700};
    struct { const int *ctx; int b, heads, kv_heads, split; } cases[] = {
        {ctx_a, 6, 28, 4, 0},  {ctx_a, 6, 28, 4, 64},  /* Qwen2.5-7B, G = 7 */
        {ctx_b, 3, 40, 8, 0},  {ctx_b, 3, 40, 8, 4096}, /* 32B, G = 5, 1 split */
        {ctx_c, 2, 32, 2, 48}, {ctx_c, 2, 8, 8, 0},    /* G = 16 and G = 1 */
    };
    int worst = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int version = 1; version <= 2; version++) {
            int rc = check_case(&rng, log, cases[c].ctx, cases[c].b, cases[c].heads,
                                cases[c].kv_heads, cases[c].split, version);
            if (rc < 0)
                return -1;
            worst = rc > worst ? rc : worst;
        }
    return worst;
}

/* ---- kernels ------------------------------------------------------------- */
/* attn_naive_kernel, attn_mma_kernel<NT>, attn_combine_kernel: attn.cuh. */

/* ---- launchers ----------------------------------------------------------- */

extern "C" void kt_attn_free(kt_attn *p)
{
    if (!p)
        return;
    kt_scratch_put(p->block); /* every device array lives in it */
    free(p);
}

/* Host side of the plan: fills the scalar fields and the host arrays. */
struct plan_host {
    int *q_len, *tok_seq, *item_off, *n_splits, *n_rb;
    long long *kv_off, *q_off;
    int4 *items;
};

static int plan_build(kt_attn *p, const int *ctx, const int *q_len, plan_host *h,
                      int split_len)
{
    const int b = p->b;
    double work = 0.0; /* KV positions times row blocks */
    for (int i = 0; i < b; i++) {
        int qn = q_len ? q_len[i] : 1;
        KT_REQUIRE(ctx[i] >= 1 && qn >= 0 && qn <= ctx[i],
                   "attention plan: sequence %d has ctx %d, q_len %d", i, ctx[i], qn);
        h->q_len[i] = qn;
        h->n_rb[i] = (qn + p->tpw - 1) / p->tpw;
        h->kv_off[i] = (long long)p->kv_rows;
        h->q_off[i] = (long long)p->q_rows;
        p->kv_rows += (size_t)ctx[i];
        p->q_rows += (size_t)qn;
        p->pairs += (double)qn * (ctx[i] - qn) + 0.5 * (double)qn * (qn + 1);
        work += (double)ctx[i] * h->n_rb[i];
    }
    KT_REQUIRE(p->q_rows < (1u << 30), "attention plan: %zu query rows", p->q_rows);
    if (split_len <= 0) {
        int dev = 0, sms = 132;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        double want = work * p->kv_heads / (16.0 * sms); /* ~16 warps per SM */
        split_len = (int)fmin(4096.0, fmax(128.0, ceil(want / 16.0) * 16.0));
    }
    KT_REQUIRE(split_len % 16 == 0, "attention plan: split_len %d not a multiple of 16",
               split_len);
    p->split_len = split_len;
    size_t n_items = 0;
    for (int i = 0; i < b; i++) {
        h->n_splits[i] = (ctx[i] + split_len - 1) / split_len;
        if (h->n_splits[i] > 1 && h->n_rb[i] > 0)
            p->multi_split = 1;
        n_items += (size_t)h->n_splits[i] * h->n_rb[i];
    }
    KT_REQUIRE(n_items < (1u << 30), "attention plan: %zu work items", n_items);
    h->items = (int4 *)malloc((n_items ? n_items : 1) * sizeof(int4));
    h->tok_seq = (int *)malloc((p->q_rows ? p->q_rows : 1) * sizeof(int));
    KT_REQUIRE(h->items && h->tok_seq, "attention plan: out of host memory");
    size_t n = 0, tq = 0;
    for (int i = 0; i < b; i++) {
        h->item_off[i] = (int)n;
        for (int sp = 0; sp < h->n_splits[i]; sp++)
            for (int rb = 0; rb < h->n_rb[i]; rb++) /* split-major */
                h->items[n++] = make_int4(i, rb, sp * split_len,
                                          min(ctx[i], (sp + 1) * split_len));
        for (int j = 0; j < h->q_len[i]; j++)
            h->tok_seq[tq++] = i;
    }
    p->n_items = (int)n;
    return 0;
}

/* Places every device array of the plan in one block of the cache
 * (kt_scratch_get: no allocation once a plan this large was made before) and
 * uploads the host arrays with one copy. */
static int plan_upload(kt_attn *p, const int *ctx, const plan_host *h)
{
    const size_t b = (size_t)p->b, nq = p->q_rows ? p->q_rows : 1;
    const size_t ni = p->n_items ? (size_t)p->n_items : 1;
    const size_t rows = p->multi_split ? (size_t)p->n_items * p->kv_heads * 16 : 0;
    /* the uploaded arrays first, then the partial buffers (not uploaded) */
    const void *src[9] = {ctx, h->q_len, h->item_off, h->n_splits, h->n_rb, h->tok_seq,
                          h->kv_off, h->q_off, h->items};
    const size_t n[11] = {b * 4, b * 4, b * 4, b * 4, b * 4, nq * 4, b * 8, b * 8, ni * 16,
                          rows * p->hd * 4, rows * 4};
    size_t off[11], total = 0;
    for (int i = 0; i < 11; i++) {
        off[i] = total;
        total += (n[i] + 255) / 256 * 256;
    }
    const size_t up = off[9]; /* bytes uploaded */
    char *stage = (char *)malloc(up);
    KT_REQUIRE(stage, "attention plan: out of host memory");
    for (int i = 0; i < 9; i++)
        memcpy(stage + off[i], src[i], n[i]);
    char *d = (char *)kt_scratch_get(total);
    int rc = d && kt_upload(d, stage, up) == 0 ? 0 : -1;
    free(stage);
    if (!d)
        return -1;
    p->block = d;
    p->d_ctx = (int *)(d + off[0]);
    p->d_q_len = (int *)(d + off[1]);
    p->d_item_off = (int *)(d + off[2]);
    p->d_n_splits = (int *)(d + off[3]);
    p->d_n_rb = (int *)(d + off[4]);
    p->d_tok_seq = (int *)(d + off[5]);
    p->d_kv_off = (long long *)(d + off[6]);
    p->d_q_off = (long long *)(d + off[7]);
    p->d_items = (int4 *)(d + off[8]);
    p->d_o_part = rows ? (float *)(d + off[9]) : NULL;
    p->d_lse_part = rows ? (float *)(d + off[10]) : NULL;
    return rc;
}

extern "C" kt_attn *kt_attn_plan(const int *ctx, const int *q_len, int b, int heads,
                                 int kv_heads, int hd, int split_len)
{
    if (!ctx || b < 1 || heads < 1 || kv_heads < 1 || heads % kv_heads ||
        heads / kv_heads > 16 || hd < 2 || hd > 256 || hd % 8) {
        kt_seterr(__FILE__, __LINE__,
                  "attention plan: bad shape b=%d heads=%d kv_heads=%d hd=%d "
                  "(need heads a multiple of kv_heads, G <= 16, hd 8..256 by 8)",
                  b, heads, kv_heads, hd);
        return NULL;
    }
    kt_attn *p = (kt_attn *)calloc(1, sizeof *p);
    plan_host h;
    memset(&h, 0, sizeof h);
    int ok = 0;
    if (!p) {
        kt_seterr(__FILE__, __LINE__, "attention plan: out of host memory");
        return NULL;
    }
    p->b = b;
    p->heads = heads;
    p->kv_heads = kv_heads;
    p->hd = hd;
    p->G = heads / kv_heads;
    p->decode = q_len == NULL;
    p->tpw = p->decode ? 1 : (16 / p->G > 0 ? 16 / p->G : 1);
    h.q_len = (int *)malloc(b * sizeof(int));
    h.item_off = (int *)malloc(b * sizeof(int));
    h.n_splits = (int *)malloc(b * sizeof(int));
    h.n_rb = (int *)malloc(b * sizeof(int));
    h.kv_off = (long long *)malloc(b * sizeof(long long));
    h.q_off = (long long *)malloc(b * sizeof(long long));
    if (!h.q_len || !h.item_off || !h.n_splits || !h.n_rb || !h.kv_off || !h.q_off)
        kt_seterr(__FILE__, __LINE__, "attention plan: out of host memory");
    else if (plan_build(p, ctx, q_len, &h, split_len) == 0 && plan_upload(p, ctx, &h) == 0)
        ok = 1;
    free(h.q_len); free(h.tok_seq); free(h.item_off); free(h.n_splits);
    free(h.n_rb); free(h.kv_off); free(h.q_off); free(h.items);
    if (!ok) {
        kt_attn_free(p);
        return NULL;
    }
    return p;
}

extern "C" size_t kt_attn_q_rows(const kt_attn *p) { return p->q_rows; }
extern "C" size_t kt_attn_kv_rows(const kt_attn *p) { return p->kv_rows; }
extern "C" double kt_attn_pairs(const kt_attn *p) { return p->pairs; }

extern "C" int kt_decode_attn(const kt_attn *p, const kt_bf16 *d_q, const kt_bf16 *d_k,
                              const kt_bf16 *d_v, kt_bf16 *d_out, int version)
{
    KT_REQUIRE(p && p->decode, "kt_decode_attn: plan was not made for decode");
    return attn_run(p, d_q, d_k, d_v, d_out, version);
}
