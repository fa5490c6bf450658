/*
 * Forward steps of the decoder model of layer.cu (split from it for size):
 * planning a step over ragged sequences of the KV-cache arena, one layer,
 * the final norm + LM head, the full forward, commit.  Specified by
 * kref_layer_forward / kref_model_forward; checked by layer.cu's selftest.
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90).
 *
 * Versions: 1 (see layer.cu).  Planning is host work: the attention plan
 * (kt_attn_plan: one block of kt_scratch_get's cache, one upload), one
 * upload of the positions / cache rows / logit rows (another cached block:
 * once the largest shapes have been planned, planning allocates no device
 * memory and frees none), growing the model's workspace, and
 * the cuBLASLt plans of every GEMM shape the step runs (T token rows, R
 * logit rows), so that the forward pass finds them all cached and a timed
 * step queries no heuristic (kt_plan_queries_timed).
 * Roofline and measurements: layer.cu.
 */
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
/* for struct kt_attn, whose kv_off is pointed into the arena; the header's
 * static kernels are compiled here a second time (unused, ~1 s of build) */
#include "kernels/attn.cuh"
#pragma GCC diagnostic pop
#include "kernels/layer.cuh"

/* ---- C reference --------------------------------------------------------- */
/* kref_layer_forward, kref_model_forward (kernels/ref/kref_layer.c); the
 * selftest is kt_layer_selftest in layer.cu. */

/* ---- kernels ------------------------------------------------------------- */
/* None of its own: layer.cu's row kernels and the existing ops. */

/* ---- launchers ----------------------------------------------------------- */

extern "C" void kt_step_free(kt_step *st)
{
    if (!st)
        return;
    kt_attn_free(st->attn);
    kt_scratch_put(st->d_pos); /* d_krow and d_lrow live in the same block */
    free(st->seqs);
    free(st->q_len);
    free(st);
}

/* Host arrays of a plan; ctx and koff [b], pos and krow [T], lrow [R].
 * Logit rows: n_logits[i] last tokens of sequence i when n_logits is given,
 * else by logits (0 none, 1 last token, 2 all tokens). */
static int plan_arrays(kt_step *st, const int *extra, const int *pos_in, int logits,
                       const int *n_logits, int *ctx, long long *koff, int *host)
{
    const kt_kv *kv = st->kv;
    int *pos = host, *krow = host + st->T, *lrow = host + 2 * st->T;
    int t = 0, r = 0;
    for (int i = 0; i < st->b; i++) {
        const int s = st->seqs[i], qn = st->q_len[i];
        const int base = kv->len[s] + (extra ? extra[i] : 0);
        KT_REQUIRE(qn >= 0 && base >= 0 && base + qn <= kv->cap[s],
                   "step: sequence %d: %d cached + %d new tokens exceed its capacity %d", s,
                   base, qn, kv->cap[s]);
        const int nl = n_logits ? n_logits[i] : logits == 2 ? qn : logits == 1 ? 1 : 0;
        KT_REQUIRE(!n_logits || (nl >= 0 && nl <= qn),
                   "step: entry %d: %d logit rows of %d new tokens", i, nl, qn);
        ctx[i] = base + qn > 0 ? base + qn : 1; /* no queries: nothing is read */
        koff[i] = kv->off[s];
        st->ctx_sum += base + qn;
        for (int j = 0; j < qn; j++, t++) {
            pos[t] = pos_in ? pos_in[t] : base + j;
            krow[t] = (int)(kv->off[s] + base + j);
            if (j >= qn - nl)
                lrow[r++] = t;
        }
    }
    st->R = r;
    return 0;
}

/* Plans every GEMM of a step of T tokens and R logit rows on m (host work:
 * cuBLASLt's heuristic on a plan-cache miss), so that running the step
 * finds every plan cached (kt_plan_queries_timed() stays 0). */
static int plan_gemms(kt_model *m, int T, int R)
{
    const kt_model_shape *s = &m->s;
    if (kt_test_skip_preplan()) /* the planted violation of tests/test_confirm_emu.c */
        return 0;
    if (T > 0 && (kt_gemm_plan(m->g_qkv, T, m->nqkv, s->hidden) ||
                  kt_gemm_plan(m->g_o, T, s->hidden, s->heads * s->head_dim) ||
                  kt_gemm_plan(m->g_gu, T, 2 * s->ffn, s->hidden) ||
                  kt_gemm_plan(m->g_down, T, s->hidden, s->ffn)))
        return -1;
    if (R > 0 && s->vocab > 0 && kt_gemm_plan(m->g_head, R, s->vocab, s->hidden))
        return -1;
    return 0;
}

kt_step *kl_step_plan(kt_model *m, kt_kv *kv, const int *seqs, const int *q_len, int b,
                      const int *extra, const int *pos, int logits, const int *n_logits)
{
    kt_step *st = (kt_step *)calloc(1, sizeof *st);
    int *ctx = NULL, *host = NULL;
    long long *koff = NULL;
    char *seen = NULL;
    int ok = 0;
    if (!st || !m || !kv || !seqs || b < 1 || kv->layers < 1 ||
        kv->kvw != m->s.kv_heads * m->s.head_dim) {
        kt_seterr(__FILE__, __LINE__, "step: bad arguments (b %d) or a cache of another shape", b);
        free(st);
        return NULL;
    }
    st->m = m;
    st->kv = kv;
    st->b = b;
    st->decode = q_len == NULL;
    st->seqs = (int *)malloc(b * sizeof(int));
    st->q_len = (int *)malloc(b * sizeof(int));
    ctx = (int *)malloc(b * sizeof(int));
    koff = (long long *)malloc(b * sizeof(long long));
    seen = (char *)calloc(kv->b, 1);
    if (!st->seqs || !st->q_len || !ctx || !koff || !seen) {
        kt_seterr(__FILE__, __LINE__, "step: out of host memory");
        goto cleanup;
    }
    for (int i = 0; i < b; i++) {
        if (seqs[i] < 0 || seqs[i] >= kv->b || seen[seqs[i]] || (q_len && q_len[i] < 0)) {
            kt_seterr(__FILE__, __LINE__, "step: entry %d: sequence %d unknown or repeated, "
                      "or q_len < 0", i, seqs[i]);
            goto cleanup;
        }
        seen[seqs[i]] = 1;
        st->seqs[i] = seqs[i];
        st->q_len[i] = q_len ? q_len[i] : 1;
        st->T += st->q_len[i];
    }
    host = (int *)malloc((size_t)(3 * st->T + 1) * sizeof(int));
    if (!host) {
        kt_seterr(__FILE__, __LINE__, "step: out of host memory");
        goto cleanup;
    }
    if (m->s.vocab == 0) { /* a bare stack (drafter layer, trainer): no LM head */
        logits = 0;
        n_logits = NULL;
    }
    if (plan_arrays(st, extra, pos, logits, n_logits, ctx, koff, host))
        goto cleanup;
    st->attn = kt_attn_plan(ctx, q_len ? st->q_len : NULL, b, m->s.heads, m->s.kv_heads,
                            m->s.head_dim, 0);
    if (!st->attn)
        goto cleanup;
    st->d_pos = (int *)kt_scratch_get((size_t)(2 * st->T + st->R + 1) * sizeof(int));
    if (!st->d_pos ||
        kt_upload(st->d_pos, host, (size_t)(2 * st->T + st->R) * sizeof(int)) ||
        kt_upload(st->attn->d_kv_off, koff, b * sizeof(long long)) ||
        kl_reserve(m, st->T, st->R) || plan_gemms(m, st->T, st->R))
        goto cleanup;
    st->d_krow = st->d_pos + st->T;
    st->d_lrow = st->d_pos + 2 * st->T;
    ok = 1;
cleanup:
    free(ctx); free(koff); free(seen); free(host);
    if (!ok) {
        kt_step_free(st);
        return NULL;
    }
    return st;
}

extern "C" kt_step *kt_step_plan(kt_model *m, kt_kv *kv, const int *seqs, const int *q_len,
                                 int b, int all_logits)
{
    return kl_step_plan(m, kv, seqs, q_len, b, NULL, NULL, all_logits ? 2 : 1, NULL);
}

extern "C" kt_step *kt_step_plan_rows(kt_model *m, kt_kv *kv, const int *seqs,
                                      const int *q_len, int b, const int *n_logits)
{
    return kl_step_plan(m, kv, seqs, q_len, b, NULL, NULL, 1, n_logits);
}

extern "C" int kt_step_tokens(const kt_step *st) { return st->T; }
extern "C" int kt_step_logit_rows(const kt_step *st) { return st->R; }
extern "C" double kt_step_ctx_sum(const kt_step *st) { return st->ctx_sum; }
extern "C" kt_bf16 *kt_step_hidden(kt_step *st) { return st->m->w.x; }

int kl_layer_run(kt_model *m, int l, const kt_step *st, int kv_layer, kt_bf16 *x)
{
    const kt_model_shape *s = &m->s;
    const kl_layer *L = &m->layer[l];
    kl_work *w = &m->w;
    const int T = st->T, D = s->hidden, H = s->heads, K = s->kv_heads, hd = s->head_dim;
    KT_REQUIRE(l >= 0 && l < s->layers && kv_layer >= 0 && kv_layer < st->kv->layers &&
               (size_t)T <= w->T, "layer %d (cache layer %d) of a step of %d tokens", l,
               kv_layer, T);
    if (T == 0)
        return 0;
    kt_bf16 *kc = kl_kv_k(st->kv, kv_layer), *vc = kl_kv_v(st->kv, kv_layer);
    if (kt_rmsnorm(x, L->ln1, w->h, T, D, s->rms_eps) ||
        kt_gemm_plan(m->g_qkv, T, m->nqkv, D) || kt_gemm_run(m->g_qkv, w->h, L->wqkv, w->qkv) ||
        kl_qkv_split(w->qkv, L->bqkv, T, H, K, hd, w->q, w->kn, NULL, vc, st->d_krow) ||
        kt_rope(w->q, st->d_pos, T, H, hd, s->rope_theta) ||
        kt_rope(w->kn, st->d_pos, T, K, hd, s->rope_theta) ||
        kl_copy_rows(w->kn, NULL, kc, st->d_krow, T, K * hd))
        return -1;
    if (st->decode ? kt_decode_attn(st->attn, w->q, kc, vc, w->ao, 0)
                   : kt_chunk_attn(st->attn, w->q, kc, vc, w->ao, 0))
        return -1;
    if (kt_gemm_plan(m->g_o, T, D, H * hd) || kt_gemm_run(m->g_o, w->ao, L->wo, w->t) ||
        kl_add(x, x, w->t, (size_t)T * D) ||
        kt_rmsnorm(x, L->ln2, w->h, T, D, s->rms_eps) ||
        kt_gemm_plan(m->g_gu, T, 2 * s->ffn, D) || kt_gemm_run(m->g_gu, w->h, L->wgu, w->gu) ||
        kt_swiglu(w->gu, w->act, T, s->ffn) ||
        kt_gemm_plan(m->g_down, T, D, s->ffn) ||
        kt_gemm_run(m->g_down, w->act, L->wdown, w->t) || kl_add(x, x, w->t, (size_t)T * D))
        return -1;
    return 0;
}

int kl_head(const kt_model_shape *s, const kt_bf16 *x, const int *d_rows, int R,
            const kt_bf16 *norm, const kt_bf16 *head, kt_gemm *g, kt_bf16 *sel, kt_bf16 *hn,
            kt_bf16 *logits)
{
    if (R == 0)
        return 0;
    if (kl_copy_rows(x, d_rows, sel, NULL, R, s->hidden) ||
        kt_rmsnorm(sel, norm, hn, R, s->hidden, s->rms_eps) ||
        kt_gemm_plan(g, R, s->vocab, s->hidden) || kt_gemm_run(g, hn, head, logits))
        return -1;
    return 0;
}

extern "C" int kt_step_layer(kt_step *st, int l)
{
    KT_REQUIRE(st && !st->spent, "kt_step_layer: no step, or a committed one");
    return kl_layer_run(st->m, l, st, l, st->m->w.x);
}

extern "C" int kt_step_forward(kt_step *st, const int *d_tokens, kt_bf16 *d_logits,
                               int *d_argmax)
{
    KT_REQUIRE(st && !st->spent && d_tokens, "kt_step_forward: no step, a committed one, "
               "or no tokens");
    kt_model *m = st->m;
    KT_REQUIRE(m->embed, "kt_step_forward: the model has no embedding (vocab 0)");
    if (kt_embed(m->embed, m->s.vocab, m->s.hidden, d_tokens, st->T, m->w.x))
        return -1;
    for (int l = 0; l < m->s.layers; l++)
        if (kl_layer_run(m, l, st, l, m->w.x))
            return -1;
    kt_bf16 *logits = d_logits ? d_logits : m->w.logits;
    if (kl_head(&m->s, m->w.x, st->d_lrow, st->R, m->final_norm, m->lm_head, m->g_head,
                m->w.sel, m->w.hn, logits))
        return -1;
    if (d_argmax && st->R > 0 && kt_argmax(logits, st->R, m->s.vocab, d_argmax))
        return -1;
    return 0;
}

extern "C" int kt_step_commit(kt_step *st)
{
    KT_REQUIRE(st && !st->spent, "kt_step_commit: no step, or committed twice");
    for (int i = 0; i < st->b; i++)
        st->kv->len[st->seqs[i]] += st->q_len[i];
    st->spent = 1;
    return 0;
}

static int forward_once(kt_model *m, kt_kv *kv, const int *seqs, const int *q_len, int b,
                        const int *d_tokens, int all_logits, kt_bf16 *d_logits, int *d_argmax)
{
    kt_step *st = kt_step_plan(m, kv, seqs, q_len, b, all_logits);
    if (!st)
        return -1;
    int rc = kt_step_forward(st, d_tokens, d_logits, d_argmax);
    if (rc == 0)
        rc = kt_step_commit(st);
    kt_step_free(st);
    return rc;
}

extern "C" int kt_forward_decode(kt_model *m, kt_kv *kv, const int *seqs, int b,
                                 const int *d_tokens, kt_bf16 *d_logits, int *d_argmax)
{
    return forward_once(m, kv, seqs, NULL, b, d_tokens, 0, d_logits, d_argmax);
}

extern "C" int kt_forward_chunk(kt_model *m, kt_kv *kv, const int *seqs, const int *q_len,
                                int b, const int *d_tokens, int all_logits, kt_bf16 *d_logits,
                                int *d_argmax)
{
    return forward_once(m, kv, seqs, q_len, b, d_tokens, all_logits, d_logits, d_argmax);
}
