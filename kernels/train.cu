/*
 * Training forward and backward of a stack of decoder layers (layer.cu's
 * layer, without a KV cache: causal attention within each packed sequence),
 * with and without activation checkpointing, reporting time (calibrate) and
 * memory (every device allocation tracked, plus cudaMemGetInfo).  This is
 * what DCP's and TLT's trainers run per micro-batch; the simulator prices
 * it per token and per sequence length.  kref_train_layer_fwd / _bwd
 * specify it.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest --only train
 *
 * Forward per layer (bf16 activations): kt_rmsnorm, kt_gemm (QKV),
 * kl_qkv_split (bias), kt_rope x2, kt_chunk_attn (ctx = q_len = the sequence
 * lengths), kt_gemm (O), add, kt_rmsnorm, kt_gemm (gate_up), kt_swiglu,
 * kt_gemm (down), add.  Saved: the layer input x, h1, q, k, v, o, x2, h2,
 * gate_up and swiglu output.  With recompute only x is kept per layer; the
 * backward reruns the layer's forward into one shared activation set.
 * Backward (train_ops.cu, blas.cu): dX = dY W and dW += dY^T X through
 * kb_matmul (fp32 gradients accumulated by the GEMM epilogue), kx_swiglu_bwd,
 * kx_rmsnorm_bwd (with the residual gradient added), RoPE backward as
 * kt_rope at negated positions, and the attention backward with the
 * softmax materialised per head group: S = scale Q K^T, P = softmax, dV =
 * P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ = scale dS K, dK =
 * scale dS^T Q, as strided batched GEMMs over the heads of a group, GQA K/V
 * expanded to all heads and the gradients summed back.
 *
 * Limits: sequences up to KT_TRAIN_MAX_LEN (8192) tokens; the score scratch
 * is [heads per group, L, L] in fp32 + bf16 within ATTN_SCRATCH bytes
 * (1.5 GiB: 10 heads at L = 4096, 2 at 8192).  Gradients are fp32.
 *
 * Versions:
 *   1  as above.  A flash-attention backward (recomputing P tile by tile)
 *      would remove the L^2 scratch and the 2x causal waste: version 2.
 *
 * Roofline: 6 * params * T FLOPs for the GEMMs of forward + backward (8 with
 * recompute) plus the attention (forward: 4 H hd pairs; backward: 10 H hd
 * L^2 per sequence for the five full-square GEMMs).  Expected: GEMM-bound,
 * >= 60% of gemm_peak at T >= 4096 for L <= 2048, less at L = 8192 where the
 * materialised scores dominate.  NOT YET MEASURED: no GPU was lent to the
 * session that wrote this; calibrate's train_* rows record it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/layer.cuh"
#include "kernels/ref/kref.h"
#include "kernels/train.cuh"

#define ATTN_SCRATCH ((size_t)3 << 29) /* 1.5 GiB for S (fp32) + P (bf16) */

struct tr_acts {
    kt_bf16 *h1, *q, *k, *v, *o, *x2, *h2, *gu, *s;
};

struct tr_grads {
    float *ln1, *wqkv, *bqkv, *wo, *ln2, *wgu, *wdown;
};

struct kt_train {
    kt_model *m;
    int n, T, Lmax, recompute, hg, ldS, fwd_done;
    int *lens, *offs;               /* host [n] */
    kt_attn *attn;
    kt_gemm *g_qkv, *g_o, *g_gu, *g_down;
    kb_blas *blas;
    void *gbuf, *abuf, *sbuf;       /* gradients, activations, scratch */
    size_t gbytes, abytes, sbytes, dev_used;
    kt_bf16 **xs;                   /* [layers + 1] layer inputs */
    tr_acts *acts;                  /* [layers], or [1] with recompute */
    tr_grads *grads;                /* [layers] */
    int *d_pos;                     /* [2T]: positions, then negated */
    kt_bf16 *qkv, *tmp, *g0, *g1, *dx2, *ds, *dgu, *dh, *dO, *dq, *kexp, *vexp, *dkexp,
        *dvexp, *dk, *dv, *dqkv;
    float *Dv, *S;
    kt_bf16 *P;
};

/* ---- C reference --------------------------------------------------------- */

static int download_f32(float *dst, const float *d_src, size_t n)
{
    return kt_download(dst, d_src, n * sizeof(float));
}

/* the longest fp32 sum of the selftest's shapes: ffn (512) and the
 * weight gradients' sums over T = 128 tokens stay below it */
#define TR_TOL_K 1024

/* Reference forward + backward of the trainer's stack on x and dy (host),
 * then comparisons of y, dx and every gradient.  Returns 0 or -1. */
static int train_check(kt_train *t, const float *x, const float *dy, const kt_bf16 *d_y,
                       const kt_bf16 *d_dx, FILE *log, size_t *bad)
{
    const kt_model_shape *s = &t->m->s;
    const kref_shape rs = {s->hidden, s->heads, s->kv_heads, s->head_dim, s->ffn, 0,
                           s->rms_eps, s->rope_theta};
    const int Ls = s->layers, D = s->hidden, T = t->T;
    const int gs = (KL_LAYER_STAGES + KTR_BWD_STAGES) * Ls - 1; /* any gradient's path */
    const size_t nx = (size_t)T * D, na = kref_acts_floats(&rs, T);
    const size_t nw[7] = {(size_t)D, (size_t)t->m->nqkv * D, s->qkv_bias ? (size_t)t->m->nqkv : 0,
                          (size_t)D * s->heads * s->head_dim, (size_t)D, (size_t)2 * s->ffn * D,
                          (size_t)D * s->ffn};
    size_t ng = 0;
    for (int i = 0; i < 7; i++)
        ng += nw[i];
    float **wb = (float **)calloc(Ls, sizeof(float *));
    float *acts = (float *)malloc(na * Ls * sizeof(float));
    float *xa = (float *)malloc(nx * sizeof(float)), *xb = (float *)malloc(nx * sizeof(float));
    float *gref = (float *)calloc(ng, sizeof(float)), *ggot = (float *)malloc(ng * sizeof(float));
    kref_layer_w *w = (kref_layer_w *)calloc(Ls, sizeof(kref_layer_w));
    kref_acts *a = (kref_acts *)calloc(Ls, sizeof(kref_acts));
    static const char *names[7] = {"ln1", "wqkv", "bqkv", "wo", "ln2", "wgu", "wdown"};
    int rc = -1;
    if (!wb || !acts || !xa || !xb || !gref || !ggot || !w || !a) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
        goto cleanup;
    }
    memcpy(xa, x, nx * sizeof(float));
    for (int l = 0; l < Ls; l++) {
        float *p[7];
        if (kl_download_layer(t->m, &t->m->layer[l], &wb[l], p))
            goto cleanup;
        kref_layer_w lw = {p[0], p[1], p[2], p[3], p[4], p[5], p[6]};
        w[l] = lw;
        kref_acts_carve(&rs, T, acts + na * l, &a[l]);
        if (kref_train_layer_fwd(&rs, &w[l], t->lens, t->n, xa, &a[l], xb, 1))
            goto cleanup;
        memcpy(xa, xb, nx * sizeof(float));
    }
    {
        float *got = xb;
        if (kt_download_bf16(got, d_y, nx))
            goto cleanup;
        *bad += kt_compare(log, "train forward: y", xa, got, nx,
                           kt_tol(kt_rms(xa, nx), KL_LAYER_STAGES * Ls - 1, TR_TOL_K),
                           KREF_BF16_EPS);
    }
    memcpy(xa, dy, nx * sizeof(float));
    for (int l = Ls - 1; l >= 0; l--) {
        float *p = gref;
        kref_layer_g g;
        float **gf[7] = {&g.ln1, &g.wqkv, &g.bqkv, &g.wo, &g.ln2, &g.wgu, &g.wdown};
        memset(gref, 0, ng * sizeof(float));
        for (int i = 0; i < 7; i++) {
            *gf[i] = nw[i] ? p : NULL;
            p += nw[i];
        }
        if (kref_train_layer_bwd(&rs, &w[l], t->lens, t->n, &a[l], xa, xb, &g, 1))
            goto cleanup;
        memcpy(xa, xb, nx * sizeof(float));
        const tr_grads *tg = &t->grads[l];
        const float *src[7] = {tg->ln1, tg->wqkv, tg->bqkv, tg->wo, tg->ln2, tg->wgu, tg->wdown};
        size_t o = 0;
        for (int i = 0; i < 7; i++) {
            char what[64];
            snprintf(what, sizeof what, "train backward: layer %d d%s", l, names[i]);
            if (nw[i] && download_f32(ggot + o, src[i], nw[i]))
                goto cleanup;
            if (nw[i])
                *bad += kt_compare(log, what, gref + o, ggot + o, nw[i],
                                   kt_tol(kt_rms(gref + o, nw[i]), gs, TR_TOL_K), KREF_BF16_EPS);
            o += nw[i];
        }
    }
    if (kt_download_bf16(xb, d_dx, nx))
        goto cleanup;
    *bad += kt_compare(log, "train backward: dx", xa, xb, nx, kt_tol(kt_rms(xa, nx), gs, TR_TOL_K),
                       KREF_BF16_EPS);
    rc = 0;
cleanup:
    for (int l = 0; wb && l < Ls; l++)
        free(wb[l]);
    free(wb); free(acts); free(xa); free(xb); free(gref); free(ggot); free(w); free(a);
    return rc;
}

/* Two layers at 256 wide (4 heads of 128 over 2 KV heads), sequences of 48
 * and 80 tokens, both modes.  Tolerances: kt_tol over every bf16 rounding
 * of the forward (y) or of the forward and backward (gradients, dx) passes;
 * the GPU also rounds P and dS in the attention backward, which the
 * reference does not (KTR_BWD_STAGES counts them).  NOT YET MEASURED
 * against a GPU. */
extern "C" int kt_train_selftest(uint64_t seed, FILE *log)
{
    const kt_model_shape s = {2, 256, 4, 2, 128, 512, 0, 1, 1e-6f, 1e6};
    const int lens[2] = {48, 80}, T = 128;
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    kt_model *m = kt_model_new(&s, kt_rng_next(&rng));
    kt_bf16 *d_x = (kt_bf16 *)kt_malloc((size_t)T * 256 * 2);
    kt_bf16 *d_y = (kt_bf16 *)kt_malloc((size_t)T * 256 * 2);
    kt_bf16 *d_dy = (kt_bf16 *)kt_malloc((size_t)T * 256 * 2);
    kt_bf16 *d_dx = (kt_bf16 *)kt_malloc((size_t)T * 256 * 2);
    float *x = (float *)malloc((size_t)T * 256 * sizeof(float));
    float *dy = (float *)malloc((size_t)T * 256 * sizeof(float));
    size_t bad = 0;
    int rc = -1;
    if (!m || !d_x || !d_y || !d_dy || !d_dx || !x || !dy)
        goto cleanup;
    kt_rand_bf16(&rng, x, (size_t)T * 256, 2.0f);
    kt_rand_bf16(&rng, dy, (size_t)T * 256, 1.0f);
    if (kt_upload_bf16(d_x, x, (size_t)T * 256) || kt_upload_bf16(d_dy, dy, (size_t)T * 256))
        goto cleanup;
    for (int rec = 0; rec <= 1; rec++) {
        kt_train *t = kt_train_new(m, lens, 2, rec);
        fprintf(log, "  train, recompute %d:\n", rec);
        int e = !t || kt_train_forward(t, d_x, d_y) || kt_train_backward(t, d_dy, d_dx) ||
                kt_sync() || train_check(t, x, dy, d_y, d_dx, log, &bad);
        kt_train_free(t);
        if (e)
            goto cleanup;
    }
    rc = bad ? 1 : 0;
cleanup:
    kt_model_free(m);
    kt_free(d_x); kt_free(d_y); kt_free(d_dy); kt_free(d_dx);
    free(x); free(dy);
    return rc;
}

/* ---- kernels ------------------------------------------------------------- */
/* In train_ops.cu (backward) and the forward ops' own files. */

/* ---- launchers ----------------------------------------------------------- */

extern "C" void kt_train_free(kt_train *t)
{
    if (!t)
        return;
    kt_attn_free(t->attn);
    kt_gemm_free(t->g_qkv); kt_gemm_free(t->g_o); kt_gemm_free(t->g_gu);
    kt_gemm_free(t->g_down);
    kb_blas_free(t->blas);
    kt_free(t->gbuf); kt_free(t->abuf); kt_free(t->sbuf); kt_free(t->d_pos);
    free(t->lens); free(t->offs); free(t->xs); free(t->acts); free(t->grads);
    free(t);
}

/* Carves n[i] bytes per pointer out of one tracked allocation. */
static void *carve(size_t *total, const size_t *n, void **dst[], int count)
{
    *total = 0;
    for (int i = 0; i < count; i++)
        *total += kl_align(n[i]);
    char *p = (char *)kt_malloc(*total ? *total : 256);
    for (int i = 0; p && i < count; i++) {
        *dst[i] = n[i] ? (void *)p : NULL;
        p += kl_align(n[i]);
    }
    return p ? (char *)p - *total : NULL;
}

static void sample_device(kt_train *t)
{
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && tot - fr > t->dev_used)
        t->dev_used = tot - fr;
}

static int train_alloc(kt_train *t)
{
    const kt_model_shape *s = &t->m->s;
    const size_t T = t->T, D = s->hidden, F = s->ffn, qw = (size_t)s->heads * s->head_dim;
    const size_t kw = (size_t)s->kv_heads * s->head_dim, nq = t->m->nqkv;
    const int Ls = s->layers, na = t->recompute ? 1 : Ls;
    /* gradients: per layer the 7 weight shapes, fp32 */
    size_t gn[7 * 64] = {0};
    void **gd[7 * 64] = {0};
    for (int l = 0; l < Ls; l++) {
        tr_grads *g = &t->grads[l];
        const size_t n[7] = {D * 4, nq * D * 4, s->qkv_bias ? nq * 4 : 0, D * qw * 4, D * 4,
                             2 * F * D * 4, D * F * 4};
        float **p[7] = {&g->ln1, &g->wqkv, &g->bqkv, &g->wo, &g->ln2, &g->wgu, &g->wdown};
        for (int i = 0; i < 7; i++) {
            gn[7 * l + i] = n[i];
            gd[7 * l + i] = (void **)p[i];
        }
    }
    if (!(t->gbuf = carve(&t->gbytes, gn, gd, 7 * Ls)))
        return -1;
    /* activations: layer inputs, then the saved sets */
    size_t an[65 + 9 * 64] = {0};
    void **ad[65 + 9 * 64] = {0};
    int c = 0;
    for (int l = 0; l <= Ls; l++) {
        an[c] = T * D * 2;
        ad[c++] = (void **)&t->xs[l];
    }
    for (int l = 0; l < na; l++) {
        tr_acts *a = &t->acts[l];
        const size_t n[9] = {T * D, T * qw, T * kw, T * kw, T * qw, T * D, T * D, T * 2 * F,
                             T * F};
        kt_bf16 **p[9] = {&a->h1, &a->q, &a->k, &a->v, &a->o, &a->x2, &a->h2, &a->gu, &a->s};
        for (int i = 0; i < 9; i++) {
            an[c] = n[i] * 2;
            ad[c++] = (void **)p[i];
        }
    }
    if (!(t->abuf = carve(&t->abytes, an, ad, c)))
        return -1;
    /* scratch */
    const size_t ss = (size_t)t->hg * t->Lmax * t->ldS;
    const size_t sn[20] = {T * nq * 2, T * D * 2, T * D * 2, T * D * 2, T * D * 2, T * F * 2,
                           T * 2 * F * 2, T * D * 2, T * qw * 2, T * qw * 2, T * qw * 2,
                           T * qw * 2, T * qw * 2, T * qw * 2, T * kw * 2, T * kw * 2,
                           T * nq * 2, T * s->heads * 4, ss * 4, ss * 2};
    void **sd[20] = {(void **)&t->qkv, (void **)&t->tmp, (void **)&t->g0, (void **)&t->g1,
                     (void **)&t->dx2, (void **)&t->ds, (void **)&t->dgu, (void **)&t->dh,
                     (void **)&t->dO, (void **)&t->dq, (void **)&t->kexp, (void **)&t->vexp,
                     (void **)&t->dkexp, (void **)&t->dvexp, (void **)&t->dk, (void **)&t->dv,
                     (void **)&t->dqkv, (void **)&t->Dv, (void **)&t->S, (void **)&t->P};
    if (!(t->sbuf = carve(&t->sbytes, sn, sd, 20)))
        return -1;
    return kt_train_zero_grads(t);
}

extern "C" kt_train *kt_train_new(kt_model *m, const int *lens, int n, int recompute)
{
    kt_train *t = (kt_train *)calloc(1, sizeof *t);
    if (!t || !m || !lens || n < 1 || m->s.layers > 64) {
        kt_seterr(__FILE__, __LINE__, "kt_train_new: bad arguments (n %d, layers <= 64)", n);
        free(t);
        return NULL;
    }
    const kt_model_shape *s = &m->s;
    t->m = m;
    t->n = n;
    t->recompute = recompute != 0;
    t->lens = (int *)malloc(n * sizeof(int));
    t->offs = (int *)malloc(n * sizeof(int));
    t->xs = (kt_bf16 **)calloc(s->layers + 1, sizeof(kt_bf16 *));
    t->acts = (tr_acts *)calloc(s->layers, sizeof(tr_acts));
    t->grads = (tr_grads *)calloc(s->layers, sizeof(tr_grads));
    int *pos = NULL, ok = t->lens && t->offs && t->xs && t->acts && t->grads;
    for (int i = 0; ok && i < n; i++) {
        ok = lens[i] >= 1 && lens[i] <= KT_TRAIN_MAX_LEN && t->T < (1 << 30) - lens[i];
        t->lens[i] = lens[i];
        t->offs[i] = t->T;
        t->T += lens[i];
        t->Lmax = lens[i] > t->Lmax ? lens[i] : t->Lmax;
    }
    if (!ok) {
        kt_seterr(__FILE__, __LINE__, "kt_train_new: a length outside 1..%d, or out of memory",
                  KT_TRAIN_MAX_LEN);
        kt_train_free(t);
        return NULL;
    }
    t->ldS = (t->Lmax + 127) / 128 * 128;
    const size_t per_head = (size_t)t->Lmax * t->ldS * 6;
    t->hg = (int)(ATTN_SCRATCH / per_head);
    t->hg = t->hg < 1 ? 1 : t->hg > s->heads ? s->heads : t->hg;
    pos = (int *)malloc(2 * (size_t)t->T * sizeof(int));
    if (pos) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < lens[i]; j++) {
                pos[t->offs[i] + j] = j;
                pos[t->T + t->offs[i] + j] = -j;
            }
        t->d_pos = (int *)kt_malloc(2 * (size_t)t->T * sizeof(int));
    } else {
        kt_seterr(__FILE__, __LINE__, "kt_train_new: out of host memory");
    }
    ok = pos && t->d_pos && !kt_upload(t->d_pos, pos, 2 * (size_t)t->T * sizeof(int)) &&
         (t->attn = kt_attn_plan(t->lens, t->lens, n, s->heads, s->kv_heads, s->head_dim, 0)) &&
         (t->g_qkv = kt_gemm_new()) && (t->g_o = kt_gemm_new()) && (t->g_gu = kt_gemm_new()) &&
         (t->g_down = kt_gemm_new()) && (t->blas = kb_blas_new()) && !train_alloc(t);
    free(pos);
    if (!ok) {
        kt_train_free(t);
        return NULL;
    }
    sample_device(t);
    return t;
}

extern "C" int kt_train_tokens(const kt_train *t) { return t->T; }

extern "C" int kt_train_zero_grads(kt_train *t)
{
    CUDA_CHECK(cudaMemsetAsync(t->gbuf, 0, t->gbytes, 0));
    return 0;
}

/* Layer l's forward from xs[l] into a, output xs[l + 1]. */
static int layer_fwd(kt_train *t, int l, tr_acts *a)
{
    const kt_model *m = t->m;
    const kt_model_shape *s = &m->s;
    const kl_layer *L = &m->layer[l];
    const int T = t->T, D = s->hidden, H = s->heads, K = s->kv_heads, hd = s->head_dim;
    const kt_bf16 *x = t->xs[l];
    if (kt_rmsnorm(x, L->ln1, a->h1, T, D, s->rms_eps) ||
        kt_gemm_plan(t->g_qkv, T, m->nqkv, D) || kt_gemm_run(t->g_qkv, a->h1, L->wqkv, t->qkv) ||
        kl_qkv_split(t->qkv, L->bqkv, T, H, K, hd, a->q, a->k, NULL, a->v, NULL) ||
        kt_rope(a->q, t->d_pos, T, H, hd, s->rope_theta) ||
        kt_rope(a->k, t->d_pos, T, K, hd, s->rope_theta) ||
        kt_chunk_attn(t->attn, a->q, a->k, a->v, a->o, 0) ||
        kt_gemm_plan(t->g_o, T, D, H * hd) || kt_gemm_run(t->g_o, a->o, L->wo, t->tmp) ||
        kl_add(a->x2, x, t->tmp, (size_t)T * D) ||
        kt_rmsnorm(a->x2, L->ln2, a->h2, T, D, s->rms_eps) ||
        kt_gemm_plan(t->g_gu, T, 2 * s->ffn, D) || kt_gemm_run(t->g_gu, a->h2, L->wgu, a->gu) ||
        kt_swiglu(a->gu, a->s, T, s->ffn) ||
        kt_gemm_plan(t->g_down, T, D, s->ffn) || kt_gemm_run(t->g_down, a->s, L->wdown, t->tmp) ||
        kl_add(t->xs[l + 1], a->x2, t->tmp, (size_t)T * D))
        return -1;
    return 0;
}

/* D[m, n] (=|+=) op(A) op(B): the two shapes every linear layer needs. */
static int mm(kt_train *t, int ta, int tb, int m, int n, int k, const kt_bf16 *A, int lda,
              const kt_bf16 *B, int ldb, void *D, int ldd, int f32_acc)
{
    kb_mm p = {ta, tb, m, n, k, A, lda, 0, B, ldb, 0, D, ldd, 0, 1, f32_acc, 1.0f,
               f32_acc ? 1.0f : 0.0f};
    return kb_matmul(t->blas, &p);
}

/* Attention backward of the packed batch: dO -> dq (t->dq), dk, dv. */
static int attn_bwd(kt_train *t, const tr_acts *a)
{
    const kt_model_shape *s = &t->m->s;
    const int T = t->T, H = s->heads, K = s->kv_heads, hd = s->head_dim, qw = H * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    if (kx_expand_kv(a->k, t->kexp, T, H, K, hd) || kx_expand_kv(a->v, t->vexp, T, H, K, hd) ||
        kx_rowdot(t->dO, a->o, t->Dv, T * H, hd))
        return -1;
    for (int i = 0; i < t->n; i++) {
        const int L = t->lens[i];
        const long long st = (long long)L * t->ldS, o0 = (long long)t->offs[i] * qw;
        for (int h0 = 0; h0 < H; h0 += t->hg) {
            const int nh = H - h0 < t->hg ? H - h0 : t->hg;
            const long long o = o0 + (long long)h0 * hd;
            const kb_mm S = {0, 1, L, L, hd, a->q + o, qw, hd, t->kexp + o, qw, hd, t->S,
                             t->ldS, st, nh, 1, scale, 0.0f};
            const kb_mm dV = {1, 0, L, hd, L, t->P, t->ldS, st, t->dO + o, qw, hd,
                              t->dvexp + o, qw, hd, nh, 0, 1.0f, 0.0f};
            const kb_mm dP = {0, 1, L, L, hd, t->dO + o, qw, hd, t->vexp + o, qw, hd, t->S,
                              t->ldS, st, nh, 1, 1.0f, 0.0f};
            const kb_mm dQ = {0, 0, L, hd, L, t->P, t->ldS, st, t->kexp + o, qw, hd, t->dq + o,
                              qw, hd, nh, 0, scale, 0.0f};
            const kb_mm dK = {1, 0, L, hd, L, t->P, t->ldS, st, a->q + o, qw, hd, t->dkexp + o,
                              qw, hd, nh, 0, scale, 0.0f};
            if (kb_matmul(t->blas, &S) || kx_softmax_causal(t->S, t->P, nh, L, t->ldS, st) ||
                kb_matmul(t->blas, &dV) || kb_matmul(t->blas, &dP) ||
                kx_dsoftmax(t->P, t->S, t->Dv + (size_t)t->offs[i] * H + h0, nh, L, t->ldS, st,
                            H) ||
                kb_matmul(t->blas, &dQ) || kb_matmul(t->blas, &dK))
                return -1;
        }
    }
    return kx_reduce_kv(t->dkexp, t->dk, T, H, K, hd) || kx_reduce_kv(t->dvexp, t->dv, T, H, K, hd)
               ? -1 : 0;
}

/* Layer l's backward: g_in = dL/d xs[l + 1] -> g_out = dL/d xs[l]. */
static int layer_bwd(kt_train *t, int l, const tr_acts *a, const kt_bf16 *g_in, kt_bf16 *g_out)
{
    const kt_model *m = t->m;
    const kt_model_shape *s = &m->s;
    const kl_layer *L = &m->layer[l];
    const tr_grads *g = &t->grads[l];
    const int T = t->T, D = s->hidden, F = s->ffn, H = s->heads, K = s->kv_heads;
    const int hd = s->head_dim, qw = H * hd, nq = m->nqkv;
    const int *negpos = t->d_pos + T;
    /* MLP */
    if (mm(t, 0, 0, T, F, D, g_in, D, L->wdown, F, t->ds, F, 0) ||
        mm(t, 1, 0, D, F, T, g_in, D, a->s, F, g->wdown, F, 1) ||
        kx_swiglu_bwd(a->gu, t->ds, t->dgu, T, F) ||
        mm(t, 1, 0, 2 * F, D, T, t->dgu, 2 * F, a->h2, D, g->wgu, D, 1) ||
        mm(t, 0, 0, T, D, 2 * F, t->dgu, 2 * F, L->wgu, D, t->dh, D, 0) ||
        kx_rmsnorm_bwd(a->x2, L->ln2, t->dh, g_in, t->dx2, g->ln2, T, D, s->rms_eps))
        return -1;
    /* attention */
    if (mm(t, 0, 0, T, qw, D, t->dx2, D, L->wo, qw, t->dO, qw, 0) ||
        mm(t, 1, 0, D, qw, T, t->dx2, D, a->o, qw, g->wo, qw, 1) || attn_bwd(t, a) ||
        kt_rope(t->dq, negpos, T, H, hd, s->rope_theta) ||
        kt_rope(t->dk, negpos, T, K, hd, s->rope_theta) ||
        kx_qkv_merge(t->dq, t->dk, t->dv, t->dqkv, T, H, K, hd) ||
        (g->bqkv && kx_colsum(t->dqkv, g->bqkv, T, nq)) ||
        mm(t, 1, 0, nq, D, T, t->dqkv, nq, a->h1, D, g->wqkv, D, 1) ||
        mm(t, 0, 0, T, D, nq, t->dqkv, nq, L->wqkv, D, t->dh, D, 0) ||
        kx_rmsnorm_bwd(t->xs[l], L->ln1, t->dh, t->dx2, g_out, g->ln1, T, D, s->rms_eps))
        return -1;
    return 0;
}

extern "C" int kt_train_forward(kt_train *t, const kt_bf16 *d_x, kt_bf16 *d_y)
{
    KT_REQUIRE(t && d_x, "kt_train_forward: NULL argument");
    const int Ls = t->m->s.layers;
    const size_t bytes = (size_t)t->T * t->m->s.hidden * 2;
    if (kt_copy(t->xs[0], d_x, bytes))
        return -1;
    for (int l = 0; l < Ls; l++)
        if (layer_fwd(t, l, &t->acts[t->recompute ? 0 : l]))
            return -1;
    if (d_y && kt_copy(d_y, t->xs[Ls], bytes))
        return -1;
    t->fwd_done = 1;
    return 0;
}

extern "C" int kt_train_backward(kt_train *t, const kt_bf16 *d_dy, kt_bf16 *d_dx)
{
    KT_REQUIRE(t && d_dy && t->fwd_done, "kt_train_backward: no forward, or no gradient");
    const kt_bf16 *g_in = d_dy;
    for (int l = t->m->s.layers - 1; l >= 0; l--) {
        tr_acts *a = &t->acts[t->recompute ? 0 : l];
        kt_bf16 *g_out = l == 0 && d_dx ? d_dx : g_in == t->g0 ? t->g1 : t->g0;
        if ((t->recompute && layer_fwd(t, l, a)) || layer_bwd(t, l, a, g_in, g_out))
            return -1;
        g_in = g_out;
    }
    return 0;
}

extern "C" void kt_train_memory(const kt_train *t, kt_train_mem *mem)
{
    memset(mem, 0, sizeof *mem);
    size_t fr = 0, tot = 0;
    mem->weights = t->m->layer_bytes * t->m->s.layers;
    mem->grads = t->gbytes;
    mem->activations = t->abytes;
    mem->scratch = t->sbytes + kb_blas_bytes(t->blas) + 4 * KB_WS_BYTES; /* + kt_gemm ws */
    mem->total = mem->weights + mem->grads + mem->activations + mem->scratch;
    mem->device_used = t->dev_used;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && tot - fr > mem->device_used)
        mem->device_used = tot - fr;
}

extern "C" double kt_train_flops(const kt_train *t, int backward)
{
    const kt_model_shape *s = &t->m->s;
    const double D = s->hidden, F = s->ffn, qw = (double)s->heads * s->head_dim;
    const double gemm = 2.0 * t->T * (D * t->m->nqkv + qw * D + 3.0 * F * D);
    double pairs = 0.0, sq = 0.0;
    for (int i = 0; i < t->n; i++) {
        pairs += 0.5 * t->lens[i] * (t->lens[i] + 1.0);
        sq += (double)t->lens[i] * t->lens[i];
    }
    const double fwd = gemm + 4.0 * qw * pairs;
    const double bwd = 2.0 * gemm + 10.0 * qw * sq;
    return s->layers * (backward ? fwd * (t->recompute ? 2 : 1) + bwd : fwd);
}
