/*
 * A Qwen2.5-style decoder layer and a stack of them, with random bf16
 * weights, a KV cache over ragged sequences, decode and chunk (prefill or
 * verify) steps, the final norm and the LM head: the model that the
 * simulator prices as "one decode step" or "one prefill chunk", run for real
 * with TP-local shapes (heads / tp etc.; no all-reduce) so that a 7B or 32B
 * layer fits one GPU.  kref_layer_forward / kref_model_forward specify it.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest --only layer
 *
 * A layer is composed of the existing ops, one launch each:
 *   kt_rmsnorm -> kt_gemm (QKV) -> qkv_split (bias, q out, v into the cache)
 *   -> kt_rope (q) -> kt_rope (k) -> copy_rows (k into the cache)
 *   -> kt_decode_attn / kt_chunk_attn (v2 tensor-core split-K, over the
 *   cache rows of each sequence) -> kt_gemm (O) -> add (residual)
 *   -> kt_rmsnorm -> kt_gemm (gate_up) -> kt_swiglu -> kt_gemm (down) -> add.
 * The attention plan is kt_attn_plan's, pointed at each sequence's rows of
 * the cache arena instead of a packed cache (kv_off overridden).
 *
 * Versions:
 *   1  the composition above: 14-15 launches per layer, no CUDA graph, so
 *      small decode batches include launch gaps (a few us each), as an
 *      eager-mode server would.  Bias+RoPE+append fused into one kernel
 *      and the residual add fused into the next RMSNorm (vLLM style) would
 *      save 4 launches per layer: the next version if calibrate shows gaps.
 *
 * Roofline: a decode step reads every weight once (layer_bytes: 466 MB for
 * 7B at TP 1) plus the KV cache (4 kv_heads * hd * ctx_sum bytes), so it is
 * bandwidth-bound below ~200 tokens per step on an H200; prefill chunks are
 * matrix-bound (2 * params * T FLOPs).  Expected: the sum of its parts'
 * times (gemm_lt.cu, decode_attn.cu, rmsnorm.cu, ...) plus < 10% for the
 * small kernels and launch gaps.  NOT YET MEASURED: no GPU was lent to the
 * session that wrote this; calibrate's layer_decode / layer_chunk rows
 * record it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/layer.cuh"
#include "kernels/ref/kref.h"

/* ---- C reference --------------------------------------------------------- */

int kl_download_layer(const kt_model *m, const kl_layer *L, float **buf, float *ptrs[7])
{
    const kt_model_shape *s = &m->s;
    const size_t D = (size_t)s->hidden, F = (size_t)s->ffn;
    const size_t n[7] = {D, (size_t)m->nqkv * D, L->bqkv ? (size_t)m->nqkv : 0,
                         D * s->heads * s->head_dim, D, 2 * F * D, D * F};
    const kt_bf16 *src[7] = {L->ln1, L->wqkv, L->bqkv, L->wo, L->ln2, L->wgu, L->wdown};
    size_t total = 0;
    for (int i = 0; i < 7; i++)
        total += n[i];
    *buf = (float *)malloc(total * sizeof(float));
    KT_REQUIRE(*buf, "out of host memory for %zu weights", total);
    float *p = *buf;
    for (int i = 0; i < 7; i++) {
        ptrs[i] = n[i] ? p : NULL;
        if (n[i] && kt_download_bf16(p, src[i], n[i]))
            return -1;
        p += n[i];
    }
    return 0;
}

static kref_shape ref_shape(const kt_model_shape *s)
{
    kref_shape r = {s->hidden, s->heads, s->kv_heads, s->head_dim, s->ffn, s->vocab,
                    s->rms_eps, s->rope_theta};
    return r;
}

/* Host mirror of a model and its cache (float copies of the bf16 values). */
struct host_copy {
    float **lbuf, *embed, *fnorm, *head, *cache;
    kref_layer_w *w;
    kref_kv *kv;
    int layers;
};

static void host_drop(host_copy *h)
{
    for (int l = 0; h->lbuf && l < h->layers; l++)
        free(h->lbuf[l]);
    free(h->lbuf); free(h->embed); free(h->fnorm); free(h->head); free(h->cache);
    free(h->w); free(h->kv);
    memset(h, 0, sizeof *h);
}

static int host_get(const kt_model *m, const kt_kv *kv, host_copy *h)
{
    const kt_model_shape *s = &m->s;
    const size_t D = (size_t)s->hidden, V = (size_t)s->vocab, nc = 2 * kv->rows * kv->kvw;
    h->layers = s->layers;
    h->lbuf = (float **)calloc(s->layers, sizeof(float *));
    h->w = (kref_layer_w *)calloc(s->layers, sizeof(kref_layer_w));
    h->kv = (kref_kv *)calloc(s->layers, sizeof(kref_kv));
    h->cache = (float *)malloc(nc * s->layers * sizeof(float));
    KT_REQUIRE(h->lbuf && h->w && h->kv && h->cache, "out of host memory");
    for (int l = 0; l < s->layers; l++) {
        float *p[7];
        if (kl_download_layer(m, &m->layer[l], &h->lbuf[l], p))
            return -1;
        kref_layer_w w = {p[0], p[1], p[2], p[3], p[4], p[5], p[6]};
        h->w[l] = w;
        h->kv[l].k = h->cache + l * nc;
        h->kv[l].v = h->kv[l].k + nc / 2;
        h->kv[l].off = kv->off;
    }
    if (kt_download_bf16(h->cache, kv->buf, nc * s->layers))
        return -1;
    if (V) {
        h->embed = (float *)malloc(V * D * sizeof(float));
        h->head = (float *)malloc(V * D * sizeof(float));
        h->fnorm = (float *)malloc(D * sizeof(float));
        KT_REQUIRE(h->embed && h->head && h->fnorm, "out of host memory");
        if (kt_download_bf16(h->embed, m->embed, V * D) ||
            kt_download_bf16(h->head, m->lm_head, V * D) ||
            kt_download_bf16(h->fnorm, m->final_norm, D))
            return -1;
    }
    return 0;
}

/* Compares GPU bf16 data with a float reference: abs = kt_tol(rms(ref),
 * stages, k). */
static int compare_dev(FILE *log, const char *what, const float *ref, const kt_bf16 *d,
                       size_t n, int stages, double k, size_t *bad)
{
    float *got = (float *)malloc(n * sizeof(float));
    KT_REQUIRE(got, "out of host memory");
    int rc = kt_download_bf16(got, d, n);
    if (rc == 0)
        *bad += kt_compare(log, what, ref, got, n, kt_tol(kt_rms(ref, n), stages, k),
                           KREF_BF16_EPS);
    free(got);
    return rc;
}

/* Each GPU argmax must be a maximum of the reference row within tolerance. */
static size_t check_argmax(FILE *log, const float *ref, const int *got, int rows, int vocab,
                           double tol)
{
    size_t bad = 0;
    for (int r = 0; r < rows; r++) {
        const float *x = ref + (size_t)r * vocab;
        float mx = x[0];
        for (int i = 1; i < vocab; i++)
            mx = x[i] > mx ? x[i] : mx;
        if (got[r] < 0 || got[r] >= vocab || !(x[got[r]] >= mx - tol - KREF_BF16_EPS * fabsf(mx))) {
            if (bad++ < 5)
                fprintf(log, "  argmax row %d: got %d (ref logit %g), ref max %g\n", r, got[r],
                        got[r] >= 0 && got[r] < vocab ? x[got[r]] : NAN, mx);
        }
    }
    fprintf(log, "  argmax: %d rows, %zu not a reference maximum\n", rows, bad);
    return bad;
}

/* Stack: a chunk step (prefill from empty, a 5-token verify, one token)
 * with logits for every token, then a decode step on a reordered subset. */
static int selftest_stack(kt_rng *rng, FILE *log, size_t *bad)
{
    const kt_model_shape s = {2, 256, 4, 2, 128, 512, 1024, 1, 1e-6f, 1e6};
    const int cap[3] = {64, 128, 160}, len[3] = {0, 37, 100}, q1[3] = {20, 5, 1};
    const int seqs[3] = {0, 1, 2}, seqs2[2] = {2, 0}, lens2[2] = {101, 20}, one[2] = {1, 1};
    int tok[26], *d_tok = NULL, *d_arg = NULL, arg[26];
    kt_model *m = kt_model_new(&s, kt_rng_next(rng));
    kt_kv *kv = m ? kt_kv_new(m, 3, cap) : NULL;
    kt_step *st = NULL;
    host_copy h;
    memset(&h, 0, sizeof h);
    const kref_shape rs = ref_shape(&s);
    float *hid = (float *)malloc(26 * 256 * sizeof(float));
    float *lg = (float *)malloc(26 * 1024 * sizeof(float));
    int rc = -1;
    if (!m || !kv || !hid || !lg)
        goto cleanup;
    for (int i = 0; i < 26; i++)
        tok[i] = kt_rng_int(rng, 0, s.vocab - 1);
    d_tok = (int *)kt_malloc(sizeof tok);
    d_arg = (int *)kt_malloc(sizeof arg);
    for (int i = 0; i < 3; i++)
        if (kt_kv_set_len(kv, i, len[i]))
            goto cleanup;
    st = kt_step_plan(m, kv, seqs, q1, 3, 1);
    if (!d_tok || !d_arg || !st || kt_upload(d_tok, tok, sizeof tok) || host_get(m, kv, &h) ||
        kt_step_forward(st, d_tok, NULL, d_arg) || kt_sync() ||
        kt_download(arg, d_arg, sizeof arg))
        goto cleanup;
    {
        kref_model rm = {rs, s.layers, h.embed, h.w, h.fnorm, h.head};
        kref_batch bt = {3, len, q1, NULL};
        if (kref_model_forward(&rm, &bt, h.kv, tok, 1, hid, lg, 1)) {
            kt_seterr(__FILE__, __LINE__, "kref_model_forward rejected the case");
            goto cleanup;
        }
        const size_t nc = 2 * kv->rows * kv->kvw * s.layers;
        const int hs = KL_LAYER_STAGES * s.layers - 1, ls = hs + 2; /* hidden, logits */
        const int ks = KL_LAYER_STAGES * (s.layers - 1) + KL_K_STAGES; /* the last layer's K */
        const double k = 1024; /* the longest fp32 sum: ffn, vocab head (hidden 256) */
        if (compare_dev(log, "stack chunk: hidden", hid, kt_step_hidden(st), 26 * 256, hs, k,
                        bad) ||
            compare_dev(log, "stack chunk: logits", lg, m->w.logits, 26 * 1024, ls, k, bad) ||
            compare_dev(log, "stack chunk: kv cache", h.cache, kv->buf, nc, ks, k, bad))
            goto cleanup;
        *bad += check_argmax(log, lg, arg, 26, 1024, kt_tol(kt_rms(lg, 26 * 1024), ls, k));
        /* decode on the reference's own cache: GPU and reference caches now
         * differ by rounding flips, which the tolerance absorbs */
        if (kt_step_commit(st))
            goto cleanup;
        kt_step_free(st);
        st = kt_step_plan(m, kv, seqs2, NULL, 2, 0);
        if (!st || kt_step_forward(st, d_tok, NULL, d_arg) || kt_sync() ||
            kt_download(arg, d_arg, 2 * sizeof(int)))
            goto cleanup;
        long long off2[2] = {kv->off[2], kv->off[0]};
        for (int l = 0; l < s.layers; l++)
            h.kv[l].off = off2;
        kref_batch b2 = {2, lens2, one, NULL};
        if (kref_model_forward(&rm, &b2, h.kv, tok, 0, NULL, lg, 1))
            goto cleanup;
        /* the decode rows' own path plus what the caches they attend to carry */
        if (compare_dev(log, "stack decode: logits", lg, m->w.logits, 2 * 1024, ls + ks, k, bad))
            goto cleanup;
        *bad += check_argmax(log, lg, arg, 2, 1024, kt_tol(kt_rms(lg, 2 * 1024), ls + ks, k));
    }
    rc = 0;
cleanup:
    host_drop(&h);
    kt_step_free(st);
    kt_kv_free(kv);
    kt_model_free(m);
    kt_free(d_tok); kt_free(d_arg);
    free(hid); free(lg);
    return rc;
}

/* One layer at Qwen2.5-7B's TP-4 width (G = 7), decode over ragged
 * contexts, against kref_layer_forward. */
static int selftest_wide_layer(kt_rng *rng, FILE *log, size_t *bad)
{
    const kt_model_shape s = {1, 3584, 7, 1, 128, 4736, 0, 1, 1e-6f, 1e6};
    const int sm = kt_selftest_small(); /* --small: shorter contexts */
    const int cap[3] = {8, sm ? 120 : 400, sm ? 320 : 1100};
    const int len[3] = {0, sm ? 100 : 300, sm ? 300 : 1000}, seqs[3] = {0, 1, 2};
    const int one[3] = {1, 1, 1};
    kt_model *m = kt_model_new(&s, kt_rng_next(rng));
    kt_kv *kv = m ? kt_kv_new(m, 3, cap) : NULL;
    kt_step *st = NULL;
    host_copy h;
    memset(&h, 0, sizeof h);
    float *x = (float *)malloc(3 * 3584 * sizeof(float));
    int rc = -1;
    if (!m || !kv || !x)
        goto cleanup;
    for (int i = 0; i < 3; i++)
        if (kt_kv_set_len(kv, i, len[i]))
            goto cleanup;
    st = kt_step_plan(m, kv, seqs, NULL, 3, 0);
    if (!st || kt_fill_bf16(kt_step_hidden(st), 3 * 3584, kt_rng_next(rng), 2.0f) ||
        kt_download_bf16(x, kt_step_hidden(st), 3 * 3584) || host_get(m, kv, &h) ||
        kt_step_layer(st, 0) || kt_sync())
        goto cleanup;
    {
        const kref_shape rs = ref_shape(&s);
        kref_batch bt = {3, len, one, NULL};
        if (kref_layer_forward(&rs, &h.w[0], &bt, &h.kv[0], x, 1)) {
            kt_seterr(__FILE__, __LINE__, "kref_layer_forward rejected the case");
            goto cleanup;
        }
        const double k = 4736; /* ffn: the longest fp32 sum */
        if (compare_dev(log, "layer 7B/TP4 decode: residual", x, kt_step_hidden(st), 3 * 3584,
                        KL_LAYER_STAGES - 1, k, bad) ||
            compare_dev(log, "layer 7B/TP4 decode: kv cache", h.cache, kv->buf,
                        2 * kv->rows * kv->kvw, KL_K_STAGES, k, bad))
            goto cleanup;
    }
    rc = 0;
cleanup:
    host_drop(&h);
    kt_step_free(st);
    kt_kv_free(kv);
    kt_model_free(m);
    free(x);
    return rc;
}

/* Tolerances: kt_tol over the bf16 roundings on each compared value's path
 * (KL_LAYER_STAGES per layer, KL_K_STAGES before the cache), the derivation
 * in docs/validation.md "Selftest tolerances"; checked over 50 seeds in the
 * CPU emulator (make kernels-emu); NOT YET MEASURED against a GPU. */
extern "C" int kt_layer_selftest(uint64_t seed, FILE *log)
{
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    size_t bad = 0;
    if (selftest_stack(&rng, log, &bad) || selftest_wide_layer(&rng, log, &bad))
        return -1;
    return bad ? 1 : 0;
}

/* ---- kernels ------------------------------------------------------------- */

__global__ void qkv_split_kernel(const uint4 *qkv, const uint4 *bias, int T, int nv, int qv,
                                 int kv8, uint4 *q, uint4 *k, const int *krows, uint4 *v,
                                 const int *vrows)
{
    const size_t n = (size_t)T * nv, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int t = (int)(i / nv), c = (int)(i % nv);
        uint4 val = qkv[i];
        if (bias) {
            float a[8], b[8];
            kt_unpack8(val, a);
            kt_unpack8(bias[c], b);
#pragma unroll
            for (int e = 0; e < 8; e++)
                a[e] += b[e];
            val = kt_pack8(a);
        }
        if (c < qv) {
            q[(size_t)t * qv + c] = val;
        } else if (c < qv + kv8) {
            const size_t row = krows ? (size_t)krows[t] : (size_t)t;
            k[row * kv8 + (c - qv)] = val;
        } else {
            const size_t row = vrows ? (size_t)vrows[t] : (size_t)t;
            v[row * kv8 + (c - qv - kv8)] = val;
        }
    }
}

__global__ void copy_rows_kernel(const uint4 *src, const int *srows, uint4 *dst,
                                 const int *drows, int w8)
{
    const int r = blockIdx.x;
    const size_t sr = srows ? (size_t)srows[r] : (size_t)r;
    const size_t dr = drows ? (size_t)drows[r] : (size_t)r;
    for (int c = threadIdx.x; c < w8; c += blockDim.x)
        dst[dr * w8 + c] = src[sr * w8 + c];
}

__global__ void add_kernel(uint4 *out, const uint4 *a, const uint4 *b, size_t n8)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
        float x[8], y[8];
        kt_unpack8(a[i], x);
        kt_unpack8(b[i], y);
#pragma unroll
        for (int e = 0; e < 8; e++)
            x[e] += y[e];
        out[i] = kt_pack8(x);
    }
}

/* ---- launchers ----------------------------------------------------------- */

static unsigned grid_for(size_t n)
{
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 132 * 16 ? 132 * 16 : g);
}

int kl_qkv_split(const kt_bf16 *qkv, const kt_bf16 *bias, int T, int heads, int kv_heads,
                 int hd, kt_bf16 *q, kt_bf16 *k_dst, const int *k_rows, kt_bf16 *v_dst,
                 const int *v_rows)
{
    KT_REQUIRE(T >= 0 && hd % 8 == 0, "kl_qkv_split: T %d hd %d", T, hd);
    if (T == 0)
        return 0;
    const int qv = heads * hd / 8, kv8 = kv_heads * hd / 8, nv = qv + 2 * kv8;
    qkv_split_kernel<<<grid_for((size_t)T * nv), 256>>>(
        (const uint4 *)qkv, (const uint4 *)bias, T, nv, qv, kv8, (uint4 *)q, (uint4 *)k_dst,
        k_rows, (uint4 *)v_dst, v_rows);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

int kl_copy_rows(const kt_bf16 *src, const int *src_rows, kt_bf16 *dst, const int *dst_rows,
                 int n, int w)
{
    KT_REQUIRE(n >= 0 && w > 0 && w % 8 == 0, "kl_copy_rows: n %d w %d", n, w);
    if (n == 0)
        return 0;
    copy_rows_kernel<<<n, 128>>>((const uint4 *)src, src_rows, (uint4 *)dst, dst_rows, w / 8);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

int kl_add(kt_bf16 *out, const kt_bf16 *a, const kt_bf16 *b, size_t n)
{
    KT_REQUIRE(n % 8 == 0, "kl_add: n %zu not a multiple of 8", n);
    if (n == 0)
        return 0;
    add_kernel<<<grid_for(n / 8), 256>>>((uint4 *)out, (const uint4 *)a, (const uint4 *)b,
                                         n / 8);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

/* -- model -- */

extern "C" void kt_model_free(kt_model *m)
{
    if (!m)
        return;
    kt_gemm_free(m->g_qkv); kt_gemm_free(m->g_o); kt_gemm_free(m->g_gu);
    kt_gemm_free(m->g_down); kt_gemm_free(m->g_head);
    kt_free(m->wbuf);
    kt_free(m->w.buf);
    free(m->layer);
    free(m);
}

static int model_init(kt_model *m, uint64_t seed)
{
    const kt_model_shape *s = &m->s;
    const size_t D = (size_t)s->hidden, F = (size_t)s->ffn, V = (size_t)s->vocab;
    const size_t qw = (size_t)s->heads * s->head_dim;
    const size_t n[7] = {D, (size_t)m->nqkv * D, s->qkv_bias ? (size_t)m->nqkv : 0, D * qw, D,
                         2 * F * D, D * F};
    const float sc[7] = {1.0f, sqrtf(3.0f / D), 0.5f, sqrtf(3.0f / qw), 1.0f, sqrtf(3.0f / D),
                         sqrtf(3.0f / F)};
    for (int i = 0; i < 7; i++)
        m->layer_bytes += kl_align(n[i] * 2);
    m->wbytes = m->layer_bytes * s->layers + (V ? 2 * kl_align(V * D * 2) + kl_align(D * 2) : 0);
    m->layer = (kl_layer *)calloc(s->layers, sizeof(kl_layer));
    KT_REQUIRE(m->layer, "kt_model_new: out of host memory");
    m->wbuf = kt_malloc(m->wbytes);
    if (!m->wbuf)
        return -1;
    char *p = (char *)m->wbuf;
    uint64_t id = 0;
    for (int l = 0; l < s->layers; l++) {
        kt_bf16 **dst[7] = {&m->layer[l].ln1, &m->layer[l].wqkv, &m->layer[l].bqkv,
                            &m->layer[l].wo, &m->layer[l].ln2, &m->layer[l].wgu,
                            &m->layer[l].wdown};
        for (int i = 0; i < 7; i++) {
            *dst[i] = n[i] ? (kt_bf16 *)p : NULL;
            if (n[i] && kt_fill_bf16(*dst[i], n[i], seed * 1000003u + id++, sc[i]))
                return -1;
            p += kl_align(n[i] * 2);
        }
    }
    if (V) {
        m->embed = (kt_bf16 *)p;
        m->lm_head = (kt_bf16 *)(p + kl_align(V * D * 2));
        m->final_norm = (kt_bf16 *)(p + 2 * kl_align(V * D * 2));
        if (kt_fill_bf16(m->embed, V * D, seed * 1000003u + id++, 1.0f) ||
            kt_fill_bf16(m->lm_head, V * D, seed * 1000003u + id++, sqrtf(3.0f / D)) ||
            kt_fill_bf16(m->final_norm, D, seed * 1000003u + id++, 1.0f))
            return -1;
        if (!(m->g_head = kt_gemm_new()))
            return -1;
    }
    if (!(m->g_qkv = kt_gemm_new()) || !(m->g_o = kt_gemm_new()) ||
        !(m->g_gu = kt_gemm_new()) || !(m->g_down = kt_gemm_new()))
        return -1;
    return 0;
}

extern "C" kt_model *kt_model_new(const kt_model_shape *s, uint64_t seed)
{
    if (!s || s->layers < 1 || s->hidden < 8 || s->hidden % 8 || s->heads < 1 ||
        s->kv_heads < 1 || s->heads % s->kv_heads || s->heads / s->kv_heads > 16 ||
        s->head_dim < 16 || s->head_dim % 16 || s->head_dim > 256 || s->ffn < 8 ||
        s->ffn % 8 || s->vocab < 0 || s->vocab % 8 || !(s->rope_theta > 1.0) ||
        !(s->rms_eps > 0.0f)) {
        kt_seterr(__FILE__, __LINE__, "kt_model_new: bad shape (see kernels.h)");
        return NULL;
    }
    kt_model *m = (kt_model *)calloc(1, sizeof *m);
    if (!m) {
        kt_seterr(__FILE__, __LINE__, "kt_model_new: out of host memory");
        return NULL;
    }
    m->s = *s;
    m->nqkv = (s->heads + 2 * s->kv_heads) * s->head_dim;
    if (model_init(m, seed)) {
        kt_model_free(m);
        return NULL;
    }
    return m;
}

extern "C" size_t kt_model_weight_bytes(const kt_model *m) { return m->wbytes; }
extern "C" size_t kt_model_layer_bytes(const kt_model *m) { return m->layer_bytes; }
extern "C" size_t kt_model_work_bytes(const kt_model *m) { return m->w.bytes; }

int kl_reserve(kt_model *m, size_t T, size_t R)
{
    kl_work *w = &m->w;
    if (T <= w->T && R <= w->R && w->buf)
        return 0;
    T = T > w->T ? T : w->T;
    R = R > w->R ? R : w->R;
    const kt_model_shape *s = &m->s;
    const size_t D = s->hidden, qw = (size_t)s->heads * s->head_dim;
    const size_t kw = (size_t)s->kv_heads * s->head_dim, F = s->ffn;
    const size_t n[12] = {T * D, T * D, T * m->nqkv, T * qw, T * kw, T * qw, T * D,
                          T * 2 * F, T * F, R * D, R * D, R * (size_t)s->vocab};
    kt_bf16 **dst[12] = {&w->x, &w->h, &w->qkv, &w->q, &w->kn, &w->ao, &w->t, &w->gu,
                         &w->act, &w->sel, &w->hn, &w->logits};
    size_t bytes = 0;
    for (int i = 0; i < 12; i++)
        bytes += kl_align(n[i] * 2 + 16);
    kt_free(w->buf);
    w->buf = NULL;
    w->T = w->R = w->bytes = 0;
    char *p = (char *)kt_malloc(bytes);
    if (!p)
        return -1;
    w->buf = p;
    w->bytes = bytes;
    w->T = T;
    w->R = R;
    for (int i = 0; i < 12; i++) {
        *dst[i] = (kt_bf16 *)p;
        p += kl_align(n[i] * 2 + 16);
    }
    return 0;
}

extern "C" int kt_model_reserve(kt_model *m, int tokens, int logit_rows)
{
    KT_REQUIRE(m && tokens >= 0 && logit_rows >= 0,
               "kt_model_reserve: no model, or %d tokens / %d logit rows", tokens, logit_rows);
    if (m->s.vocab == 0) /* a bare stack: no LM head, no logit rows */
        logit_rows = 0;
    return kl_reserve(m, (size_t)tokens, (size_t)logit_rows);
}

/* -- KV cache -- */

extern "C" void kt_kv_free(kt_kv *kv)
{
    if (!kv)
        return;
    kt_free(kv->buf);
    free(kv->cap); free(kv->len); free(kv->off);
    free(kv);
}

extern "C" kt_kv *kt_kv_new(const kt_model *m, int b, const int *cap)
{
    kt_kv *kv = (kt_kv *)calloc(1, sizeof *kv);
    if (!kv || !m || b < 1 || !cap) {
        kt_seterr(__FILE__, __LINE__, "kt_kv_new: bad arguments (b %d) or out of memory", b);
        free(kv);
        return NULL;
    }
    kv->layers = m->s.layers;
    kv->b = b;
    kv->kvw = m->s.kv_heads * m->s.head_dim;
    kv->cap = (int *)calloc(b, sizeof(int));
    kv->len = (int *)calloc(b, sizeof(int));
    kv->off = (long long *)calloc(b, sizeof(long long));
    int ok = kv->cap && kv->len && kv->off;
    for (int i = 0; ok && i < b; i++) {
        ok = cap[i] >= 1;
        kv->cap[i] = cap[i];
        kv->off[i] = (long long)kv->rows;
        kv->rows += (size_t)cap[i];
    }
    if (!ok) {
        kt_seterr(__FILE__, __LINE__, "kt_kv_new: a capacity < 1 or out of memory");
    } else {
        const size_t n = (size_t)kv->layers * 2 * kv->rows * kv->kvw;
        kv->buf = (kt_bf16 *)kt_malloc(n * 2);
        if (kv->buf && kt_fill_bf16(kv->buf, n, 0x6b76ull + kv->rows, 1.0f) == 0)
            return kv;
    }
    kt_kv_free(kv);
    return NULL;
}

extern "C" size_t kt_kv_bytes(const kt_kv *kv)
{
    return (size_t)kv->layers * 2 * kv->rows * kv->kvw * 2;
}

extern "C" int kt_kv_len(const kt_kv *kv, int seq)
{
    return seq >= 0 && seq < kv->b ? kv->len[seq] : -1;
}

extern "C" int kt_kv_set_len(kt_kv *kv, int seq, int len)
{
    KT_REQUIRE(seq >= 0 && seq < kv->b && len >= 0 && len <= kv->cap[seq],
               "kt_kv_set_len: sequence %d length %d (capacity %d)", seq, len,
               seq >= 0 && seq < kv->b ? kv->cap[seq] : -1);
    kv->len[seq] = len;
    return 0;
}
