/*
 * Reference decoder layer, stack and EAGLE drafter step: the specification
 * of kernels/layer.cu and kernels/drafter.cu.  Everything is composed from
 * the single-op references (kref_rmsnorm, kref_gemm_nt, kref_rope,
 * kref_chunk_attn, kref_swiglu, kref_embed), so the composites add only the
 * wiring: where tensors are split, appended to the KV cache, added to the
 * residual stream and rounded to bf16.
 *
 * With round != 0 every tensor the CUDA code stores in bf16 is rounded here
 * at the same point, in the same order (GEMM output, then bias, then RoPE;
 * residual sums), so GPU and reference differ only by accumulation order and
 * the rounding flips that follows from it.  Cost: the GEMMs dominate,
 * O(T * hidden * (qkv + o + 3 ffn)) per layer, plus attention
 * O(T * heads * hd * ctx): meant for test and selftest shapes.
 *
 * Scratch is malloc'ed and freed inside each call; nothing is kept.  See
 * kref.h for layouts.
 *
 * Build: part of build/libtailsim.a (make); tested by
 *        build/tests/test_kernels_layer (make check), no CUDA needed.
 * Not timed: references have no roofline; they are the specification.
 */
#include "kernels/ref/kref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void maybe_round(float *x, size_t n, int round)
{
    if (round)
        kref_round_bf16(x, n);
}

static int shape_ok(const kref_shape *s)
{
    return s->hidden > 0 && s->heads > 0 && s->kv_heads > 0 && s->hd > 1 &&
           s->hd % 2 == 0 && s->heads % s->kv_heads == 0 && s->ffn > 0;
}

/* ---- one layer ----------------------------------------------------------- */

int kref_layer_forward(const kref_shape *s, const kref_layer_w *w,
                       const kref_batch *bt, kref_kv *kv, float *x, int round)
{
    if (!shape_ok(s) || bt->b < 1)
        return -1;
    const int H = s->heads, K = s->kv_heads, hd = s->hd, D = s->hidden, F = s->ffn;
    const int nqkv = (H + 2 * K) * hd;
    size_t T = 0;
    for (int i = 0; i < bt->b; i++) {
        if (bt->q_len[i] < 0 || bt->len[i] < 0)
            return -1;
        T += (size_t)bt->q_len[i];
    }
    if (T == 0)
        return 0;
    float *h = malloc(T * D * sizeof *h), *qkv = malloc(T * nqkv * sizeof *qkv);
    float *q = malloc(T * H * hd * sizeof *q), *kn = malloc(T * K * hd * sizeof *kn);
    float *o = malloc(T * H * hd * sizeof *o), *t = malloc(T * D * sizeof *t);
    float *gu = malloc(T * 2 * F * sizeof *gu), *a = malloc(T * F * sizeof *a);
    int *pos = malloc(T * sizeof *pos);
    int rc = -1;
    if (!h || !qkv || !q || !kn || !o || !t || !gu || !a || !pos)
        goto cleanup;
    size_t r = 0;
    for (int i = 0; i < bt->b; i++)
        for (int j = 0; j < bt->q_len[i]; j++, r++)
            pos[r] = bt->pos ? bt->pos[r] : bt->len[i] + j;

    kref_rmsnorm(x, w->ln1, h, (int)T, D, s->eps);
    maybe_round(h, T * D, round);
    kref_gemm_nt(h, w->wqkv, qkv, (int)T, nqkv, D);
    maybe_round(qkv, T * nqkv, round);
    for (r = 0; r < T; r++) {
        float *row = qkv + r * nqkv;
        if (w->bqkv)
            for (int c = 0; c < nqkv; c++)
                row[c] += w->bqkv[c];
        memcpy(q + r * H * hd, row, (size_t)H * hd * sizeof *q);
        memcpy(kn + r * K * hd, row + (size_t)H * hd, (size_t)K * hd * sizeof *kn);
    }
    maybe_round(qkv, T * nqkv, round); /* v keeps this rounding */
    maybe_round(q, T * H * hd, round);
    maybe_round(kn, T * K * hd, round);
    kref_rope(q, pos, (int)T, H, hd, s->theta);
    kref_rope(kn, pos, (int)T, K, hd, s->theta);
    maybe_round(q, T * H * hd, round);
    maybe_round(kn, T * K * hd, round);

    /* append, then attend sequence by sequence */
    const size_t kvw = (size_t)K * hd;
    r = 0;
    for (int i = 0; i < bt->b; i++) {
        int qn = bt->q_len[i];
        for (int j = 0; j < qn; j++) {
            size_t row = (size_t)(kv->off[i] + bt->len[i] + j);
            memcpy(kv->k + row * kvw, kn + (r + j) * kvw, kvw * sizeof(float));
            memcpy(kv->v + row * kvw, qkv + (r + j) * nqkv + (size_t)(H + K) * hd,
                   kvw * sizeof(float));
        }
        if (qn > 0) {
            int ctx = bt->len[i] + qn;
            const size_t base = (size_t)kv->off[i] * kvw;
            if (kref_chunk_attn(q + r * H * hd, kv->k + base, kv->v + base, &ctx, &qn, 1,
                                H, K, hd, o + r * H * hd))
                goto cleanup;
        }
        r += (size_t)qn;
    }
    maybe_round(o, T * H * hd, round);

    kref_gemm_nt(o, w->wo, t, (int)T, D, H * hd);
    maybe_round(t, T * D, round);
    for (size_t e = 0; e < T * D; e++)
        x[e] += t[e];
    maybe_round(x, T * D, round);

    kref_rmsnorm(x, w->ln2, h, (int)T, D, s->eps);
    maybe_round(h, T * D, round);
    kref_gemm_nt(h, w->wgu, gu, (int)T, 2 * F, D);
    maybe_round(gu, T * 2 * F, round);
    kref_swiglu(gu, a, (int)T, F);
    maybe_round(a, T * F, round);
    kref_gemm_nt(a, w->wdown, t, (int)T, D, F);
    maybe_round(t, T * D, round);
    for (size_t e = 0; e < T * D; e++)
        x[e] += t[e];
    maybe_round(x, T * D, round);
    rc = 0;
cleanup:
    free(h); free(qkv); free(q); free(kn); free(o); free(t); free(gu); free(a); free(pos);
    return rc;
}

/* ---- the stack ----------------------------------------------------------- */

int kref_logit_rows(const kref_batch *bt, int all_logits)
{
    int rows = 0;
    for (int i = 0; i < bt->b; i++)
        rows += all_logits ? bt->q_len[i] : bt->q_len[i] > 0;
    return rows;
}

/* Final norm and LM head over the chosen rows of x [T, hidden]. */
static int head(const kref_shape *s, const float *norm, const float *lm_head,
                const kref_batch *bt, const float *x, int all_logits, float *logits,
                int round)
{
    const int D = s->hidden;
    int R = kref_logit_rows(bt, all_logits);
    if (R == 0)
        return 0;
    float *sel = malloc((size_t)R * D * sizeof *sel), *h = malloc((size_t)R * D * sizeof *h);
    if (!sel || !h) {
        free(sel);
        free(h);
        return -1;
    }
    size_t r = 0, out = 0;
    for (int i = 0; i < bt->b; i++) {
        for (int j = 0; j < bt->q_len[i]; j++, r++)
            if (all_logits || j == bt->q_len[i] - 1)
                memcpy(sel + out++ * D, x + r * D, (size_t)D * sizeof *sel);
    }
    kref_rmsnorm(sel, norm, h, R, D, s->eps);
    maybe_round(h, (size_t)R * D, round);
    kref_gemm_nt(h, lm_head, logits, R, s->vocab, D);
    maybe_round(logits, (size_t)R * s->vocab, round);
    free(sel);
    free(h);
    return 0;
}

static size_t batch_tokens(const kref_batch *bt)
{
    size_t T = 0;
    for (int i = 0; i < bt->b; i++)
        T += bt->q_len[i] > 0 ? (size_t)bt->q_len[i] : 0;
    return T;
}

int kref_model_forward(const kref_model *m, const kref_batch *bt, kref_kv *kv,
                       const int *tokens, int all_logits, float *hidden,
                       float *logits, int round)
{
    const int D = m->s.hidden;
    size_t T = batch_tokens(bt);
    if (!shape_ok(&m->s) || m->layers < 1 || m->s.vocab < 1)
        return -1;
    float *x = malloc((T ? T : 1) * D * sizeof *x);
    int rc = -1;
    if (!x || kref_embed(m->embed, m->s.vocab, D, tokens, (int)T, x))
        goto cleanup;
    for (int l = 0; l < m->layers; l++)
        if (kref_layer_forward(&m->s, &m->layer[l], bt, &kv[l], x, round))
            goto cleanup;
    if (hidden)
        memcpy(hidden, x, T * D * sizeof *x);
    rc = head(&m->s, m->final_norm, m->lm_head, bt, x, all_logits, logits, round);
cleanup:
    free(x);
    return rc;
}

/* ---- the drafter --------------------------------------------------------- */

int kref_draft_forward(const kref_drafter *d, const kref_batch *bt, kref_kv *kv,
                       const int *tokens, const float *feat, float *hout,
                       float *logits, int round)
{
    const int D = d->s.hidden;
    size_t T = batch_tokens(bt);
    if (!shape_ok(&d->s) || d->s.vocab < 1)
        return -1;
    float *cat = malloc((T ? T : 1) * 2 * D * sizeof *cat);
    int rc = -1;
    if (!cat)
        return -1;
    for (size_t r = 0; r < T; r++) {
        if (tokens[r] < 0 || tokens[r] >= d->s.vocab)
            goto cleanup;
        memcpy(cat + r * 2 * D, d->embed + (size_t)tokens[r] * D, (size_t)D * sizeof *cat);
        memcpy(cat + r * 2 * D + D, feat + r * D, (size_t)D * sizeof *cat);
    }
    kref_gemm_nt(cat, d->fc, hout, (int)T, D, 2 * D);
    maybe_round(hout, T * D, round);
    if (kref_layer_forward(&d->s, &d->layer, bt, kv, hout, round))
        goto cleanup;
    rc = head(&d->s, d->norm, d->lm_head, bt, hout, 1, logits, round);
cleanup:
    free(cat);
    return rc;
}

/* a before b: larger value, then smaller index */
static int better(float va, int ia, float vb, int ib)
{
    return va > vb || (va == vb && ia < ib);
}

void kref_topk(const float *logits, int rows, int vocab, int k, int *idx,
               float *val, float *lse)
{
    for (int r = 0; r < rows; r++) {
        const float *x = logits + (size_t)r * vocab;
        int *ri = idx + (size_t)r * k;
        float *rv = val + (size_t)r * k;
        int n = 0; /* insertion into a sorted list of at most k */
        double mx = -INFINITY, sum = 0.0;
        for (int i = 0; i < vocab; i++) {
            if (isnan(x[i]))
                continue;
            if (x[i] > mx) {
                sum = sum * exp(mx - x[i]) + 1.0; /* exp(-inf) = 0 at first */
                mx = x[i];
            } else if (x[i] > -INFINITY) {
                sum += exp(x[i] - mx);
            }
            if (n == k && !better(x[i], i, rv[k - 1], ri[k - 1]))
                continue;
            int p = n < k ? n++ : k - 1;
            while (p > 0 && better(x[i], i, rv[p - 1], ri[p - 1])) {
                rv[p] = rv[p - 1];
                ri[p] = ri[p - 1];
                p--;
            }
            rv[p] = x[i];
            ri[p] = i;
        }
        for (; n < k; n++) { /* rows with fewer than k numbers */
            rv[n] = -INFINITY;
            ri[n] = 0;
        }
        lse[r] = (float)(mx + log(sum));
    }
}

void kref_draft_select(int b, int n_prev, int k, const float *score,
                       const int *idx, const float *val, const float *lse,
                       int *tok, int *parent, float *new_score)
{
    const int nc = n_prev * k; /* candidates per sequence, (r, j) in order */
    for (int i = 0; i < b; i++) {
        unsigned long long used[64] = {0}; /* bit set over candidates, nc <= 4096 */
        for (int s = 0; s < k; s++) {
            int best = -1;
            float best_v = 0.0f;
            for (int c = 0; c < nc && c < 4096; c++) {
                if (used[c >> 6] >> (c & 63) & 1)
                    continue;
                const int row = i * n_prev + c / k;
                const float v = score[row] + (val[(size_t)row * k + c % k] - lse[row]);
                if (best < 0 || v > best_v) { /* ties: first (smaller r, rank) */
                    best = c;
                    best_v = v;
                }
            }
            if (best < 0) /* nc < k cannot happen: nc = n_prev * k >= k */
                best = 0;
            used[best >> 6] |= 1ull << (best & 63);
            const int row = i * n_prev + best / k;
            tok[i * k + s] = idx[(size_t)row * k + best % k];
            parent[i * k + s] = best / k;
            new_score[i * k + s] = best_v;
        }
    }
}
