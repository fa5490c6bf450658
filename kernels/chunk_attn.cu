/*
 * Causal chunk attention over a ragged batch: sequence i brings q_len[i]
 * new query tokens whose K/V are already appended to its cache of ctx[i]
 * tokens; query j attends to positions 0 .. ctx[i] - q_len[i] + j.  Used for
 * prefill chunks (q_len in the hundreds or thousands) and for verifying the
 * V draft tokens of speculative decoding (q_len = V, 1..48), with
 * grouped-query heads, bf16 in and out, fp32 softmax and accumulation.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest
 *
 * Versions (kernels in attn.cuh, plan in decode_attn.cu):
 *   1  attn_naive_kernel: block per (query token, head); baseline only.
 *   2  the tensor-core split-K kernel of decode, with row blocks of
 *      tpw = 16/G query tokens x G heads (16 rows for G = 8, 14 for G = 7,
 *      15 for G = 5), a causal mask per row, and keys past the block's last
 *      visible position skipped.  Warps of a block take consecutive row
 *      blocks of the same KV split, so K/V tiles are shared through L1.
 *
 * Roofline: FLOPs = 4 * heads * hd * pairs (pairs = sum over queries of the
 * visible keys); bytes >= 2 * 2 * kv_rows * kv_heads * hd plus Q and O.
 * Design targets for version 2 (NOT YET MEASURED, no GPU was lent to the
 * session that wrote this): verification chunks (q_len <= 48) are
 * bandwidth-bound like decode, target >= 60% of measured copy bandwidth at
 * ctx_sum >= 1M tokens; prefill chunks re-read each K/V tile once per row
 * block from L2/L1, target >= 25% of the dense bf16 matrix rate measured for
 * cuBLASLt (~790 TFLOP/s here).  A version 3 sharing K/V tiles through shared
 * memory across 64-row blocks (FlashAttention-2 style) is the next step if
 * the prefill target is missed.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/attn.cuh"
#include "kernels/ref/kref.h"

/* ---- C reference --------------------------------------------------------- */

/* Runs one chunk case with both versions against kref_chunk_attn, with the
 * tolerance of decode_attn.cu (bf16 softmax weights in version 2).  Returns
 * 0 pass, 1 mismatch, -1 error. */
static int check_case(kt_rng *rng, FILE *log, const int *ctx, const int *q_len,
                      int b, int heads, int kv_heads, int split_len)
{
    const int hd = 128;
    size_t kv_rows = 0, q_rows = 0;
    for (int i = 0; i < b; i++) {
        kv_rows += (size_t)ctx[i];
        q_rows += (size_t)q_len[i];
    }
    size_t nq = q_rows * heads * hd, nkv = kv_rows * kv_heads * hd;
    float *q = (float *)malloc(nq * sizeof(float));
    float *k = (float *)malloc(nkv * sizeof(float));
    float *v = (float *)malloc(nkv * sizeof(float));
    float *ref = (float *)malloc(nq * sizeof(float));
    float *got = (float *)malloc(nq * sizeof(float));
    kt_bf16 *d_q = NULL, *d_k = NULL, *d_v = NULL, *d_o = NULL;
    kt_attn *plan = NULL;
    int rc = -1, bad = 0;
    if (!q || !k || !v || !ref || !got) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
        goto cleanup;
    }
    kt_rand_bf16(rng, q, nq, 4.0f);
    kt_rand_bf16(rng, k, nkv, 1.0f);
    kt_rand_bf16(rng, v, nkv, 1.0f);
    if (kref_chunk_attn(q, k, v, ctx, q_len, b, heads, kv_heads, hd, ref)) {
        kt_seterr(__FILE__, __LINE__, "kref_chunk_attn rejected the case");
        goto cleanup;
    }
    d_q = (kt_bf16 *)kt_malloc(nq * 2);
    d_k = (kt_bf16 *)kt_malloc(nkv * 2);
    d_v = (kt_bf16 *)kt_malloc(nkv * 2);
    d_o = (kt_bf16 *)kt_malloc(nq * 2);
    plan = kt_attn_plan(ctx, q_len, b, heads, kv_heads, hd, split_len);
    if (!d_q || !d_k || !d_v || !d_o || !plan)
        goto cleanup;
    if (kt_upload_bf16(d_q, q, nq) || kt_upload_bf16(d_k, k, nkv) ||
        kt_upload_bf16(d_v, v, nkv))
        goto cleanup;
    for (int version = 1; version <= 2; version++) {
        char what[160];
        if (kt_fill_bf16(d_o, nq, 77, 1e30f) || /* poison */
            kt_chunk_attn(plan, d_q, d_k, d_v, d_o, version) || kt_sync() ||
            kt_download_bf16(got, d_o, nq))
            goto cleanup;
        snprintf(what, sizeof what, "chunk_attn v%d b=%d heads=%d/%d tpw=%d split=%d",
                 version, b, heads, kv_heads, plan->tpw, plan->split_len);
        if (kt_compare(log, what, ref, got, nq, attn_tol(kt_rms(ref, nq), ctx, b),
                       KREF_BF16_EPS))
            bad = 1;
    }
    rc = bad;
cleanup:
    kt_attn_free(plan);
    kt_free(d_q); kt_free(d_k); kt_free(d_v); kt_free(d_o);
    free(q); free(k); free(v); free(ref); free(got);
    return rc;
}

extern "C" int kt_chunk_attn_selftest(uint64_t seed, FILE *log)
{
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    /* verify chunks of V = 1, 8, 48, 33, a 400-token prefill from empty
     * (--small: shorter contexts, a 120-token prefill; the same paths) */
    static const int ctx_af[] = {1000, 2000, 300, 400, 3000}, q_af[] = {1, 8, 48, 400, 33};
    static const int ctx_as[] = {250, 500, 100, 120, 700}, q_as[] = {1, 8, 48, 120, 33};
    static const int ctx_bf[] = {17, 600}, ctx_bs[] = {17, 150}, q_b[] = {17, 16};
    const int sm = kt_selftest_small();
    const int *ctx_a = sm ? ctx_as : ctx_af, *q_a = sm ? q_as : q_af, *ctx_b = sm ? ctx_bs : ctx_bf;
    static const int ctx_c[] = {50, 260}, q_c[] = {50, 20};
    static const int ctx_d[] = {100, 200}, q_d[] = {0, 5};
    struct { const int *ctx, *q; int b, heads, kv_heads, split; } cases[] = {
        {ctx_a, q_a, 5, 28, 4, 0}, {ctx_a, q_a, 5, 28, 4, 64},  /* G = 7 */
        {ctx_b, q_b, 2, 40, 8, 0}, {ctx_b, q_b, 2, 40, 8, 128}, /* G = 5 */
        {ctx_c, q_c, 2, 8, 8, 32},                              /* G = 1 */
        {ctx_d, q_d, 2, 32, 2, 0},                              /* G = 16 */
    };
    int worst = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int rc = check_case(&rng, log, cases[c].ctx, cases[c].q, cases[c].b,
                            cases[c].heads, cases[c].kv_heads, cases[c].split);
        if (rc < 0)
            return -1;
        worst = rc > worst ? rc : worst;
    }
    return worst;
}

/* ---- kernels ------------------------------------------------------------- */
/* attn_naive_kernel, attn_mma_kernel<NT>, attn_combine_kernel: attn.cuh. */

/* ---- launchers ----------------------------------------------------------- */

extern "C" int kt_chunk_attn(const kt_attn *p, const kt_bf16 *d_q, const kt_bf16 *d_k,
                             const kt_bf16 *d_v, kt_bf16 *d_out, int version)
{
    KT_REQUIRE(p && !p->decode, "kt_chunk_attn: plan was made for decode (q_len NULL)");
    return attn_run(p, d_q, d_k, d_v, d_out, version);
}
