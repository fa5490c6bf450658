/*
 * The EAGLE drafter step of TLT's tail speculative decoding: fc (2h -> h)
 * over [embedding(token) ; feature], one decoder layer (layer.cu's code,
 * the drafter's own weights and one-layer KV cache), the drafter's final
 * norm and the target's LM head, then top-k per row and the beam choice of
 * the next frontier.  kref_draft_forward, kref_topk and kref_draft_select
 * specify it.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest --only drafter
 *
 * The tree (a beam tree; topk = 1 is a chain): step 0 runs one row per
 * sequence (the last accepted token with the target's hidden state) and
 * keeps its top-k tokens as the frontier; step t >= 1 runs the k frontier
 * rows of every sequence (feature: the parent's layer output), takes each
 * row's top-k and keeps the k best of the k*k paths by cumulative
 * log-probability.  Output: tokens, parents, scores [b, depth, k] (SGLang's
 * EAGLE with topk > 1 keeps the same frontier; choosing the V nodes to
 * verify from the tree is left to the caller).  Draft rows are appended to
 * the drafter's cache after the prefix in creation order (root, then k rows
 * per depth) with RoPE position len + depth, and attend with the causal mask
 * of that order: a node sees the prefix, the root, every node of earlier
 * depths and the nodes before it at its own depth, not only its ancestors.
 * The cost equals a true tree mask's to within depth*k keys per query; the
 * values differ, which random weights make immaterial (the C reference uses
 * the same mask, so the selftest is exact about it).
 *
 * Versions:
 *   1  fc through cuBLASLt on a gathered [embedding ; feature] matrix
 *      (concat_kernel), layer.cu's layer, LM head through cuBLASLt,
 *      topk_kernel (one block per row, per-thread top-8 lists merged in
 *      shared memory, online log-sum-exp), select_kernel (a thread per
 *      sequence over <= 64 candidates).
 *
 * Roofline: one step reads the drafter layer's weights once, the LM head
 * (hidden * vocab * 2 bytes: 1.09 GB for Qwen2.5-7B at TP 1, ~230 us at
 * 4.7 TB/s) and the logits twice (head writes, top-k reads); for b*k <= 256
 * rows that is bandwidth-bound, so a step should take the LM head's time
 * plus the layer's plus ~10 launches.  Expected >= 70% of copy bandwidth at
 * b*k >= 32.  NOT YET MEASURED: no GPU was lent to the session that wrote
 * this; calibrate's drafter_step rows record it.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/layer.cuh"
#include "kernels/ref/kref.h"

#define TOPK_MAX 8
#define TOPK_THREADS 256

struct kt_drafter {
    kt_model *target, *dm; /* dm: the drafter's layer (vocab 0) and workspace */
    kt_bf16 *fc, *norm;    /* [hidden, 2 hidden], [hidden] */
    kt_gemm *g_fc, *g_head;
};

struct kt_draft {
    kt_drafter *d;
    kt_kv *kv;
    int b, depth, k, rows; /* rows = b * k, the most rows of a step */
    kt_step **steps;       /* [depth] */
    void *buf;
    kt_bf16 *root, *hout[2], *cat, *sel, *hn, *logits;
    int *tok_in, *feat_row; /* [depth][rows] */
    int *tk_idx;            /* [rows][k] */
    float *tk_val, *lse;    /* [rows][k], [rows] */
    float *score;           /* [depth][rows] cumulative frontier scores */
    int *tree_tok, *tree_par;
    float *tree_score;      /* [b][depth][k] */
};

/* ---- C reference --------------------------------------------------------- */

static int draft_ref_weights(const kt_drafter *d, float **buf, kref_drafter *r)
{
    const kt_model_shape *s = &d->target->s;
    const size_t D = s->hidden, V = s->vocab;
    float *p[7];
    if (kl_download_layer(d->dm, &d->dm->layer[0], &buf[0], p))
        return -1;
    kref_layer_w w = {p[0], p[1], p[2], p[3], p[4], p[5], p[6]};
    buf[1] = (float *)malloc((2 * D * D + D + 2 * V * D) * sizeof(float));
    KT_REQUIRE(buf[1], "out of host memory");
    kref_shape rs = {s->hidden, s->heads, s->kv_heads, s->head_dim, s->ffn, s->vocab,
                     s->rms_eps, s->rope_theta};
    kref_drafter dr = {rs, buf[1], w, buf[1] + 2 * D * D, buf[1] + 2 * D * D + D,
                       buf[1] + 2 * D * D + D + V * D};
    *r = dr;
    return kt_download_bf16(buf[1], d->fc, 2 * D * D) ||
                   kt_download_bf16(buf[1] + 2 * D * D, d->norm, D) ||
                   kt_download_bf16((float *)r->embed, d->target->embed, V * D) ||
                   kt_download_bf16((float *)r->lm_head, d->target->lm_head, V * D)
               ? -1 : 0;
}

/* Host buffers of one reference draft step: R = b * n rows (n = 1 at step
 * 0, else k), width D, vocabulary V. */
typedef struct draft_ref_buf {
    int *lenx, *qn, *pos;   /* [b], [b], [R]: the reference batch */
    int *tok, *frow;        /* [R]: the GPU's input tokens and feature rows */
    float *feat;            /* [R, D]: input features, then the GPU's outputs */
    float *hh, *lg, *gl;    /* [R, D] reference outputs; [R, V] reference, GPU logits */
    int *r_idx;             /* [R, k]: the reference's top-k */
    float *r_val, *r_lse;   /* [R, k], [R]; r_val ends as the next scores [b, k] */
    int *g_tok, *g_par;     /* [b, k]: the GPU's choice */
    float *g_score;         /* [b, k] */
    int *ti, *tp;           /* [k]: the reference's choice for one sequence */
    float *ts;              /* [k] */
} draft_ref_buf;

static void draft_ref_free(draft_ref_buf *w)
{
    free(w->lenx); free(w->qn); free(w->pos); free(w->tok); free(w->frow); free(w->g_tok);
    free(w->g_par); free(w->r_idx); free(w->feat); free(w->lg); free(w->hh); free(w->r_val);
    free(w->r_lse); free(w->g_score); free(w->gl); free(w->ti); free(w->tp); free(w->ts);
}

/* Allocates w for b sequences of n rows, top-k, width D, vocabulary V; 0,
 * or -1 (kt_seterr) when host memory runs out.  Free with draft_ref_free()
 * either way. */
static int draft_ref_alloc(draft_ref_buf *w, int b, int n, int k, int D, int V)
{
    const int R = b * n;
    memset(w, 0, sizeof *w);
    w->lenx = (int *)malloc(b * sizeof(int));
    w->qn = (int *)malloc(b * sizeof(int));
    w->pos = (int *)malloc(R * sizeof(int));
    w->tok = (int *)malloc(R * sizeof(int));
    w->frow = (int *)malloc(R * sizeof(int));
    w->g_tok = (int *)malloc(b * k * sizeof(int));
    w->g_par = (int *)malloc(b * k * sizeof(int));
    w->r_idx = (int *)malloc(R * k * sizeof(int));
    w->feat = (float *)malloc((size_t)R * D * sizeof(float));
    w->r_val = (float *)malloc(R * k * sizeof(float));
    w->r_lse = (float *)malloc(R * sizeof(float));
    w->g_score = (float *)malloc(b * k * sizeof(float));
    w->gl = (float *)malloc((size_t)R * V * sizeof(float));
    w->ti = (int *)malloc(k * sizeof(int));
    w->tp = (int *)malloc(k * sizeof(int));
    w->ts = (float *)malloc(k * sizeof(float));
    w->lg = (float *)malloc((size_t)R * V * sizeof(float));
    w->hh = (float *)malloc((size_t)R * D * sizeof(float));
    if (!w->lenx || !w->qn || !w->pos || !w->tok || !w->frow || !w->g_tok || !w->g_par ||
        !w->r_idx || !w->feat || !w->lg || !w->hh || !w->r_val || !w->r_lse || !w->g_score ||
        !w->gl || !w->ti || !w->tp || !w->ts) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
        return -1;
    }
    return 0;
}

/* Step t's inputs as the GPU chose them: its tokens and feature rows, the
 * batch (n rows per sequence at position len + t after the cached prefix
 * and earlier draft rows), and the features (the root hidden states at step
 * 0, counting a root token that is not root_tok in *bad; else the
 * reference's outputs ref_h of the parent rows).  0, or -1 on a CUDA error. */
static int draft_ref_inputs(const kt_draft *p, int t, int n, int D, const int *len,
                            const int *root_tok, const float *root_h, const float *ref_h,
                            draft_ref_buf *w, size_t *bad)
{
    const int b = p->b, k = p->k, R = b * n;
    if (kt_download(w->tok, p->tok_in + (size_t)t * p->rows, R * sizeof(int)) ||
        (t && kt_download(w->frow, p->feat_row + (size_t)t * p->rows, R * sizeof(int))))
        return -1;
    for (int i = 0; i < b; i++) {
        w->lenx[i] = len[i] + (t ? 1 + (t - 1) * k : 0);
        w->qn[i] = n;
        for (int j = 0; j < n; j++)
            w->pos[i * n + j] = len[i] + t;
    }
    for (int r = 0; r < R; r++) { /* features: root hidden, or the parent's output */
        if (t == 0 && w->tok[r] != root_tok[r])
            *bad += 1;
        memcpy(w->feat + (size_t)r * D, t ? ref_h + (size_t)w->frow[r] * D : root_h + (size_t)r * D,
               D * sizeof(float));
    }
    return 0;
}

/* Runs the reference forward of step t and compares the GPU's features and
 * logits with it; ref_h becomes the reference's features and *tol the
 * logits' absolute tolerance.  0, or -1 on a CUDA error or a case the
 * reference rejects. */
static int draft_ref_forward(const kt_draft *p, const kref_drafter *dr, kref_kv *kv, int t, int n,
                             draft_ref_buf *w, float *ref_h, double *tol, FILE *log, size_t *bad)
{
    const int R = p->b * n, D = dr->s.hidden, V = dr->s.vocab;
    float *got = w->feat;
    char what[64];
    kref_batch bt = {p->b, w->lenx, w->qn, w->pos};
    if (kref_draft_forward(dr, &bt, kv, w->tok, w->feat, w->hh, w->lg, 1)) {
        kt_seterr(__FILE__, __LINE__, "kref_draft_forward rejected the case");
        return -1;
    }
    snprintf(what, sizeof what, "draft step %d: features", t);
    if (kt_download_bf16(got, p->hout[t % 2], (size_t)R * D))
        return -1;
    /* step t's features went through t + 1 fc GEMMs and layers (each step
     * starts from the previous step's own features), the logits two more */
    const int fs = (KL_LAYER_STAGES + 1) * (t + 1) - 1;
    const double k = 2 * D > V ? 2 * D : V; /* the fc GEMM's or the head's sum */
    *bad += kt_compare(log, what, w->hh, got, (size_t)R * D,
                       kt_tol(kt_rms(w->hh, (size_t)R * D), fs, k), KREF_BF16_EPS);
    memcpy(ref_h, w->hh, (size_t)R * D * sizeof(float));
    snprintf(what, sizeof what, "draft step %d: logits", t);
    *tol = kt_tol(kt_rms(w->lg, (size_t)R * V), fs + 2, k);
    if (kt_download_bf16(w->gl, p->logits, (size_t)R * V))
        return -1;
    *bad += kt_compare(log, what, w->lg, w->gl, (size_t)R * V, *tol, KREF_BF16_EPS);
    return 0;
}

/* Downloads the GPU's tree nodes of step t (token, parent, score; k per
 * sequence) into w->g_tok, g_par, g_score; 0, or -1 on a CUDA error. */
static int draft_ref_gpu_choice(const kt_draft *p, int t, draft_ref_buf *w)
{
    const int b = p->b, k = p->k;
    size_t o = 0;
    for (int i = 0; i < b; i++)
        for (int s = 0; s < k; s++, o++) {
            const size_t at = ((size_t)i * p->depth + t) * k + s;
            if (kt_download(&w->g_tok[o], p->tree_tok + at, sizeof(int)) ||
                kt_download(&w->g_par[o], p->tree_par + at, sizeof(int)) ||
                kt_download(&w->g_score[o], p->tree_score + at, sizeof(float)))
                return -1;
        }
    return 0;
}

/* Judges the GPU's selection at step t: each chosen node must be among the
 * reference's best k paths within the logits' tolerance tol (twice: value
 * and log-sum-exp), with the reference's path score; then ref_score becomes
 * the reference's scores of the GPU's frontier.  0, or -1 on a CUDA error. */
static int draft_ref_select(const kt_draft *p, int t, int n, int V, double tol, draft_ref_buf *w,
                            float *ref_score, FILE *log, size_t *bad)
{
    const int b = p->b, k = p->k, R = b * n;
    const float *lg = w->lg, *r_lse = w->r_lse, *g_score = w->g_score;
    const int *g_tok = w->g_tok, *g_par = w->g_par;
    kref_topk(lg, R, V, k, w->r_idx, w->r_val, w->r_lse);
    if (draft_ref_gpu_choice(p, t, w))
        return -1;
    for (int i = 0; i < b; i++) {
        kref_draft_select(1, n, k, ref_score + i * n, w->r_idx + (size_t)i * n * k,
                          w->r_val + (size_t)i * n * k, w->r_lse + i * n, w->ti, w->tp, w->ts);
        const float kth = w->ts[k - 1]; /* the reference's k-th best path score */
        for (int s = 0; s < k; s++) {
            const int par = g_par[i * k + s], tk = g_tok[i * k + s];
            if (par < 0 || par >= n || tk < 0 || tk >= V) {
                if ((*bad)++ < 5)
                    fprintf(log, "  draft step %d seq %d: bad choice %d/%d\n", t, i, tk, par);
                continue;
            }
            const int row = i * n + par;
            const float sc = ref_score[row] + (lg[(size_t)row * V + tk] - r_lse[row]);
            if (!(sc >= kth - 2 * tol - 1e-3f) || !(fabsf(g_score[i * k + s] - sc) <=
                                                    2 * tol * (t + 1) + 1e-3f)) {
                if ((*bad)++ < 5)
                    fprintf(log, "  draft step %d seq %d: chose %d (ref path score %g, "
                            "GPU %g), reference k-th best %g\n", t, i, tk, sc,
                            g_score[i * k + s], kth);
            }
        }
    }
    for (int o2 = 0; o2 < b * k; o2++) { /* next step: the GPU's frontier, ref scores */
        const int ok = g_par[o2] >= 0 && g_par[o2] < n && g_tok[o2] >= 0 && g_tok[o2] < V;
        const int row = (o2 / k) * n + (ok ? g_par[o2] : 0);
        w->r_val[o2] = ref_score[row] + (lg[(size_t)row * V + (ok ? g_tok[o2] : 0)] - r_lse[row]);
    }
    memcpy(ref_score, w->r_val, b * k * sizeof(float));
    fprintf(log, "  draft step %d: %d rows, selection checked\n", t, R);
    return 0;
}

/* Step t of a draft, reference side, teacher-forced by the GPU's choices:
 * the reference runs the rows the GPU chose (tokens; features from the
 * reference's own previous outputs) and judges the GPU's outputs and its
 * selection.  ref_h / ref_score carry the reference state between steps. */
static int draft_ref_step(kt_draft *p, const kref_drafter *dr, kref_kv *kv, int t,
                          const int *len, const int *root_tok, const float *root_h,
                          float *ref_h, float *ref_score, FILE *log, size_t *bad)
{
    const int n = t ? p->k : 1;
    draft_ref_buf w;
    double tol = 0.0;
    int rc = draft_ref_alloc(&w, p->b, n, p->k, dr->s.hidden, dr->s.vocab);
    if (rc == 0 &&
        (draft_ref_inputs(p, t, n, dr->s.hidden, len, root_tok, root_h, ref_h, &w, bad) ||
         draft_ref_forward(p, dr, kv, t, n, &w, ref_h, &tol, log, bad) ||
         draft_ref_select(p, t, n, dr->s.vocab, tol, &w, ref_score, log, bad)))
        rc = -1;
    draft_ref_free(&w);
    return rc;
}

extern "C" int kt_drafter_selftest(uint64_t seed, FILE *log)
{
    const kt_model_shape s = {1, 256, 4, 2, 128, 512, 1024, 1, 1e-6f, 1e6};
    const int b = 3, depth = 3, k = 4, cap[3] = {40, 80, 200}, len[3] = {5, 50, 150};
    const int seqs[3] = {0, 1, 2};
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    kt_model *m = kt_model_new(&s, kt_rng_next(&rng));
    kt_drafter *d = m ? kt_drafter_new(m, kt_rng_next(&rng)) : NULL;
    kt_kv *kv = d ? kt_drafter_kv_new(d, b, cap) : NULL;
    kt_draft *p = NULL;
    float *wbuf[2] = {NULL, NULL}, *cache = NULL, *root_h = NULL, *ref_h = NULL;
    float ref_score[12] = {0};
    int root_tok[3], *d_tok = NULL, rc = -1;
    kt_bf16 *d_h = NULL;
    size_t bad = 0;
    kref_drafter dr;
    if (!kv)
        goto cleanup;
    for (int i = 0; i < b; i++) {
        root_tok[i] = kt_rng_int(&rng, 0, s.vocab - 1);
        if (kt_kv_set_len(kv, i, len[i]))
            goto cleanup;
    }
    p = kt_draft_plan(d, kv, seqs, b, depth, k);
    d_tok = (int *)kt_malloc(sizeof root_tok);
    d_h = (kt_bf16 *)kt_malloc((size_t)b * s.hidden * 2);
    cache = (float *)malloc(2 * kv->rows * kv->kvw * sizeof(float));
    root_h = (float *)malloc((size_t)b * s.hidden * sizeof(float));
    ref_h = (float *)malloc((size_t)b * k * s.hidden * sizeof(float));
    if (!p || !d_tok || !d_h || !cache || !root_h || !ref_h ||
        kt_upload(d_tok, root_tok, sizeof root_tok) ||
        kt_fill_bf16(d_h, (size_t)b * s.hidden, kt_rng_next(&rng), 2.0f) ||
        kt_download_bf16(root_h, d_h, (size_t)b * s.hidden) ||
        kt_download_bf16(cache, kv->buf, 2 * kv->rows * kv->kvw) ||
        draft_ref_weights(d, wbuf, &dr) || kt_draft_input(p, d_tok, d_h))
        goto cleanup;
    {
        kref_kv rkv = {cache, cache + kv->rows * kv->kvw, kv->off};
        for (int t = 0; t < depth; t++)
            if (kt_draft_step(p, t) || kt_sync() ||
                draft_ref_step(p, &dr, &rkv, t, len, root_tok, root_h, ref_h, ref_score, log,
                               &bad))
                goto cleanup;
    }
    rc = bad ? 1 : 0;
cleanup:
    kt_draft_free(p);
    kt_kv_free(kv);
    kt_drafter_free(d);
    kt_model_free(m);
    kt_free(d_tok); kt_free(d_h);
    free(wbuf[0]); free(wbuf[1]); free(cache); free(root_h); free(ref_h);
    return rc;
}

/* ---- kernels ------------------------------------------------------------- */

/* cat[r] = [table[tok[r]] ; feat[frow[r]]] (frow NULL: row r), 2D wide. */
__global__ void concat_kernel(const uint4 *table, int vocab, const int *tok, const uint4 *feat,
                              const int *frow, uint4 *cat, int d8)
{
    const int r = blockIdx.x, id = tok[r];
    const size_t fr = frow ? (size_t)frow[r] : (size_t)r;
    for (int c = threadIdx.x; c < 2 * d8; c += blockDim.x) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (c >= d8)
            v = feat[fr * d8 + (c - d8)];
        else if (id >= 0 && id < vocab)
            v = table[(size_t)id * d8 + c];
        cat[(size_t)r * 2 * d8 + c] = v;
    }
}

__device__ __forceinline__ bool tk_better(float va, int ia, float vb, int ib)
{
    return va > vb || (va == vb && ia < ib);
}

__device__ __forceinline__ void lse_merge(float &m, float &s, float m2, float s2)
{
    const float M = fmaxf(m, m2);
    if (M == -INFINITY)
        return;
    s = s * __expf(m - M) + s2 * __expf(m2 - M);
    m = M;
}

/* One block per row: lse[row] and the row's top k (idx, val, best first).
 * Each thread scans its columns keeping an online log-sum-exp and a sorted
 * top-TOPK_MAX list in registers; the block merges the log-sum-exps, then
 * takes k rounds over the lists' heads in shared memory.  One function on
 * purpose: the three stages share the register lists, the shared arrays and
 * the barriers between them (a round's winner advances its own head), so
 * helpers would take a dozen arrays by reference and hide __syncthreads();
 * and inline helpers are not free here: tried, they change this kernel's
 * generated code (same arithmetic, other predication and scheduling). */
__global__ void __launch_bounds__(TOPK_THREADS)
topk_kernel(const uint4 *logits, int nv, int k, int *idx, float *val, float *lse)
{
    __shared__ float sv[TOPK_THREADS * TOPK_MAX];
    __shared__ int si[TOPK_THREADS * TOPK_MAX];
    __shared__ float wm[TOPK_THREADS / 32], ws[TOPK_THREADS / 32];
    __shared__ float rv[TOPK_THREADS / 32];
    __shared__ int ri[TOPK_THREADS / 32], rt[TOPK_THREADS / 32], s_win;
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const uint4 *x = logits + (size_t)row * nv;
    float tv[TOPK_MAX], m = -INFINITY, s = 0.0f;
    int ti[TOPK_MAX];
#pragma unroll
    for (int j = 0; j < TOPK_MAX; j++) {
        tv[j] = -INFINITY;
        ti[j] = INT_MAX;
    }
    for (int c = tid; c < nv; c += TOPK_THREADS) {
        float f[8];
        kt_unpack8(x[c], f);
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float v = f[e];
            const int i = 8 * c + e;
            if (v != v)
                continue; /* NaN */
            if (v > m) {
                s = s * __expf(m - v) + 1.0f;
                m = v;
            } else if (v > -INFINITY) {
                s += __expf(v - m);
            }
            if (tk_better(v, i, tv[TOPK_MAX - 1], ti[TOPK_MAX - 1])) {
                tv[TOPK_MAX - 1] = v;
                ti[TOPK_MAX - 1] = i;
#pragma unroll
                for (int j = TOPK_MAX - 1; j > 0; j--)
                    if (tk_better(tv[j], ti[j], tv[j - 1], ti[j - 1])) {
                        const float a = tv[j];
                        const int b = ti[j];
                        tv[j] = tv[j - 1];
                        ti[j] = ti[j - 1];
                        tv[j - 1] = a;
                        ti[j - 1] = b;
                    }
            }
        }
    }
    /* log-sum-exp over the block */
    for (int o = 16; o > 0; o >>= 1)
        lse_merge(m, s, __shfl_xor_sync(KT_FULL_MASK, m, o), __shfl_xor_sync(KT_FULL_MASK, s, o));
    if (lane == 0) {
        wm[warp] = m;
        ws[warp] = s;
    }
#pragma unroll
    for (int j = 0; j < TOPK_MAX; j++) {
        sv[tid * TOPK_MAX + j] = tv[j];
        si[tid * TOPK_MAX + j] = ti[j];
    }
    __syncthreads();
    if (tid == 0) {
        float M = wm[0], S = ws[0];
        for (int w = 1; w < TOPK_THREADS / 32; w++)
            lse_merge(M, S, wm[w], ws[w]);
        lse[row] = M + logf(S);
    }
    /* k rounds: each thread offers the head of its sorted list; the block
     * winner's owner advances its head.  Vocabulary indices are unique to
     * one thread, so only empty entries tie; those go to the lower thread. */
    int head = 0;
    for (int r = 0; r < k; r++) {
        float bv = head < TOPK_MAX ? sv[tid * TOPK_MAX + head] : -INFINITY;
        int bi = head < TOPK_MAX ? si[tid * TOPK_MAX + head] : INT_MAX, bt = tid;
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(KT_FULL_MASK, bv, o);
            const int oi = __shfl_xor_sync(KT_FULL_MASK, bi, o);
            const int ot = __shfl_xor_sync(KT_FULL_MASK, bt, o);
            if (tk_better(ov, oi, bv, bi) || (ov == bv && oi == bi && ot < bt)) {
                bv = ov;
                bi = oi;
                bt = ot;
            }
        }
        if (lane == 0) {
            rv[warp] = bv;
            ri[warp] = bi;
            rt[warp] = bt;
        }
        __syncthreads();
        if (tid == 0) {
            int w0 = 0;
            for (int w = 1; w < TOPK_THREADS / 32; w++)
                if (tk_better(rv[w], ri[w], rv[w0], ri[w0]) ||
                    (rv[w] == rv[w0] && ri[w] == ri[w0] && rt[w] < rt[w0]))
                    w0 = w;
            idx[(size_t)row * k + r] = ri[w0] == INT_MAX ? 0 : ri[w0];
            val[(size_t)row * k + r] = rv[w0];
            s_win = rt[w0];
        }
        __syncthreads();
        if (tid == s_win)
            head++;
    }
}

/* One thread per sequence: the k best of n_prev * k candidates. */
__global__ void select_kernel(int b, int n_prev, int k, int depth, int t, const float *score,
                              const int *idx, const float *val, const float *lse, int *tok_next,
                              int *frow_next, float *score_out, int *tree_tok, int *tree_par,
                              float *tree_score)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= b)
        return;
    unsigned long long used = 0;
    const int nc = n_prev * k;
    for (int s = 0; s < k; s++) {
        int best = -1;
        float bv = 0.0f;
        for (int c = 0; c < nc; c++) {
            if (used >> c & 1)
                continue;
            const int row = i * n_prev + c / k;
            const float v = (score ? score[row] : 0.0f) + (val[row * k + c % k] - lse[row]);
            if (best < 0 || v > bv) {
                best = c;
                bv = v;
            }
        }
        used |= 1ull << best;
        const int row = i * n_prev + best / k, o = i * k + s;
        const int tk = idx[row * k + best % k];
        const size_t at = ((size_t)i * depth + t) * k + s;
        tree_tok[at] = tk;
        tree_par[at] = best / k;
        tree_score[at] = bv;
        score_out[o] = bv;
        if (tok_next) {
            tok_next[o] = tk;
            frow_next[o] = row;
        }
    }
}

/* ---- launchers ----------------------------------------------------------- */

extern "C" void kt_drafter_free(kt_drafter *d)
{
    if (!d)
        return;
    kt_gemm_free(d->g_fc);
    kt_gemm_free(d->g_head);
    kt_free(d->fc); /* norm lives in the same allocation */
    kt_model_free(d->dm);
    free(d);
}

extern "C" kt_drafter *kt_drafter_new(kt_model *target, uint64_t seed)
{
    if (!target || !target->lm_head) {
        kt_seterr(__FILE__, __LINE__, "kt_drafter_new: the target needs an LM head");
        return NULL;
    }
    kt_drafter *d = (kt_drafter *)calloc(1, sizeof *d);
    if (!d) {
        kt_seterr(__FILE__, __LINE__, "kt_drafter_new: out of host memory");
        return NULL;
    }
    kt_model_shape s = target->s;
    s.layers = 1;
    s.vocab = 0;
    const size_t D = s.hidden;
    d->target = target;
    d->dm = kt_model_new(&s, seed);
    d->fc = d->dm ? (kt_bf16 *)kt_malloc(kl_align(2 * D * D * 2) + D * 2) : NULL;
    if (d->fc) {
        d->norm = (kt_bf16 *)((char *)d->fc + kl_align(2 * D * D * 2));
        d->g_fc = kt_gemm_new();
        d->g_head = d->g_fc ? kt_gemm_new() : NULL;
    }
    if (!d->g_head || kt_fill_bf16(d->fc, 2 * D * D, seed * 7919u + 1, sqrtf(1.5f / D)) ||
        kt_fill_bf16(d->norm, D, seed * 7919u + 2, 1.0f)) {
        kt_drafter_free(d);
        return NULL;
    }
    return d;
}

extern "C" kt_kv *kt_drafter_kv_new(kt_drafter *d, int b, const int *cap)
{
    return kt_kv_new(d->dm, b, cap);
}

extern "C" int kt_drafter_reserve(kt_drafter *d, int b, int topk)
{
    KT_REQUIRE(d && b >= 0 && topk >= 1 && topk <= TOPK_MAX,
               "kt_drafter_reserve: no drafter, or b %d topk %d", b, topk);
    return kt_model_reserve(d->dm, b * topk, 0); /* step 0's b rows are fewer */
}

extern "C" void kt_draft_free(kt_draft *p)
{
    if (!p)
        return;
    for (int t = 0; p->steps && t < p->depth; t++)
        kt_step_free(p->steps[t]);
    free(p->steps);
    kt_scratch_put(p->buf);
    free(p);
}

/* Plans step t's layer: n rows per sequence after 1 + (t-1) k draft rows. */
static kt_step *plan_depth(kt_draft *p, const int *seqs, int t)
{
    const int b = p->b, n = t ? p->k : 1;
    int *q = (int *)malloc(b * sizeof(int)), *extra = (int *)malloc(b * sizeof(int));
    int *pos = (int *)malloc((size_t)b * n * sizeof(int));
    kt_step *st = NULL;
    if (q && extra && pos) {
        for (int i = 0; i < b; i++) {
            q[i] = n;
            extra[i] = t ? 1 + (t - 1) * p->k : 0;
            for (int j = 0; j < n; j++)
                pos[i * n + j] = p->kv->len[seqs[i]] + t;
        }
        st = kl_step_plan(p->d->dm, p->kv, seqs, q, b, extra, pos, 0, NULL);
    } else {
        kt_seterr(__FILE__, __LINE__, "draft plan: out of host memory");
    }
    free(q); free(extra); free(pos);
    return st;
}

static int draft_carve(kt_draft *p)
{
    const kt_model_shape *s = &p->d->target->s;
    const size_t D = s->hidden, R = p->rows, k = p->k, dp = p->depth, b = p->b;
    const size_t n[14] = {b * D * 2, R * D * 2, R * D * 2, R * 2 * D * 2, R * D * 2,
                          R * D * 2, R * (size_t)s->vocab * 2, dp * R * 4, dp * R * 4,
                          R * k * 4, R * k * 4, R * 4, dp * R * 4, 3 * b * dp * k * 4};
    size_t total = 0;
    for (int i = 0; i < 14; i++)
        total += kl_align(n[i]);
    char *q = (char *)kt_scratch_get(total); /* cached: no allocation once seen */
    if (!q)
        return -1;
    p->buf = q;
    void **dst[14] = {(void **)&p->root, (void **)&p->hout[0], (void **)&p->hout[1],
                      (void **)&p->cat, (void **)&p->sel, (void **)&p->hn, (void **)&p->logits,
                      (void **)&p->tok_in, (void **)&p->feat_row, (void **)&p->tk_idx,
                      (void **)&p->tk_val, (void **)&p->lse, (void **)&p->score,
                      (void **)&p->tree_tok};
    for (int i = 0; i < 14; i++) {
        *dst[i] = q;
        q += kl_align(n[i]);
    }
    p->tree_par = p->tree_tok + b * dp * k;
    p->tree_score = (float *)(p->tree_par + b * dp * k);
    return 0;
}

extern "C" kt_draft *kt_draft_plan(kt_drafter *d, kt_kv *kv, const int *seqs, int b, int depth,
                                   int topk)
{
    if (!d || !kv || !seqs || b < 1 || depth < 1 || topk < 1 || topk > TOPK_MAX ||
        (depth > 1 && topk * topk > 64)) {
        kt_seterr(__FILE__, __LINE__, "kt_draft_plan: b %d depth %d topk %d (1..%d)", b, depth,
                  topk, TOPK_MAX);
        return NULL;
    }
    kt_draft *p = (kt_draft *)calloc(1, sizeof *p);
    if (!p) {
        kt_seterr(__FILE__, __LINE__, "kt_draft_plan: out of host memory");
        return NULL;
    }
    p->d = d;
    p->kv = kv;
    p->b = b;
    p->depth = depth;
    p->k = topk;
    p->rows = b * topk;
    p->steps = (kt_step **)calloc(depth, sizeof(kt_step *));
    int ok = p->steps != NULL && draft_carve(p) == 0;
    for (int t = 0; ok && t < depth; t++)
        ok = (p->steps[t] = plan_depth(p, seqs, t)) != NULL;
    /* the fc and LM head shapes of every step (b rows, then b * topk): a
     * timed draft then queries no cuBLASLt heuristic */
    const int D = d->target->s.hidden, V = d->target->s.vocab;
    for (int t = 0; ok && !kt_test_skip_preplan() && t < (depth > 1 ? 2 : 1); t++) {
        const int R = t ? p->rows : b;
        ok = kt_gemm_plan(d->g_fc, R, D, 2 * D) == 0 && kt_gemm_plan(d->g_head, R, V, D) == 0;
    }
    if (!ok) {
        if (!p->steps)
            kt_seterr(__FILE__, __LINE__, "kt_draft_plan: out of host memory");
        kt_draft_free(p);
        return NULL;
    }
    return p;
}

extern "C" int kt_draft_input(kt_draft *p, const int *d_tokens, const kt_bf16 *d_hidden)
{
    KT_REQUIRE(p && d_tokens && d_hidden, "kt_draft_input: NULL argument");
    if (kt_copy(p->tok_in, d_tokens, p->b * sizeof(int)) ||
        kt_copy(p->root, d_hidden, (size_t)p->b * p->d->target->s.hidden * 2))
        return -1;
    return 0;
}

extern "C" int kt_draft_step(kt_draft *p, int t)
{
    KT_REQUIRE(p && t >= 0 && t < p->depth, "kt_draft_step: step %d of %d", t,
               p ? p->depth : 0);
    kt_drafter *d = p->d;
    const kt_model *tg = d->target;
    const int D = tg->s.hidden, V = tg->s.vocab, k = p->k, n = t ? k : 1, R = p->b * n;
    kt_bf16 *x = p->hout[t % 2];
    concat_kernel<<<R, 128>>>((const uint4 *)tg->embed, V, p->tok_in + (size_t)t * p->rows,
                              (const uint4 *)(t ? p->hout[(t - 1) % 2] : p->root),
                              t ? p->feat_row + (size_t)t * p->rows : NULL, (uint4 *)p->cat,
                              D / 8);
    CUDA_CHECK(cudaGetLastError());
    if (kt_gemm_plan(d->g_fc, R, D, 2 * D) || kt_gemm_run(d->g_fc, p->cat, d->fc, x) ||
        kl_layer_run(d->dm, 0, p->steps[t], 0, x) ||
        kl_head(&tg->s, x, NULL, R, d->norm, tg->lm_head, d->g_head, p->sel, p->hn, p->logits))
        return -1;
    topk_kernel<<<R, TOPK_THREADS>>>((const uint4 *)p->logits, V / 8, k, p->tk_idx, p->tk_val,
                                     p->lse);
    CUDA_CHECK(cudaGetLastError());
    const int last = t + 1 == p->depth;
    select_kernel<<<kt_ceil_div(p->b, 128), 128>>>(
        p->b, n, k, p->depth, t, t ? p->score + (size_t)(t - 1) * p->rows : NULL, p->tk_idx,
        p->tk_val, p->lse, last ? NULL : p->tok_in + (size_t)(t + 1) * p->rows,
        last ? NULL : p->feat_row + (size_t)(t + 1) * p->rows, p->score + (size_t)t * p->rows,
        p->tree_tok, p->tree_par, p->tree_score);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int kt_draft_run(kt_draft *p, int *d_tokens, int *d_parents, float *d_scores)
{
    for (int t = 0; p && t < p->depth; t++)
        if (kt_draft_step(p, t))
            return -1;
    KT_REQUIRE(p, "kt_draft_run: no draft");
    const size_t n = (size_t)p->b * p->depth * p->k;
    if ((d_tokens && kt_copy(d_tokens, p->tree_tok, n * sizeof(int))) ||
        (d_parents && kt_copy(d_parents, p->tree_par, n * sizeof(int))) ||
        (d_scores && kt_copy(d_scores, p->tree_score, n * sizeof(float))))
        return -1;
    return 0;
}
