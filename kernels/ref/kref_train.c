/*
 * Reference training math: the backward of every op of a decoder layer
 * (linear layers, RMSNorm, SwiGLU, RoPE, causal GQA attention) and a layer's
 * training forward and backward composed from them.  The specification of
 * kernels/train.cu and kernels/train_ops.cu.  Each backward is checked
 * against central finite differences of its forward reference in
 * tests/test_kernels_train.c.
 *
 * Conventions: activation gradients are written, weight gradients are
 * accumulated (+=), as a training step accumulates them over micro-batches.
 * Sums run in double.  The attention backward recomputes the softmax of each
 * query row (O(heads * hd * visible keys) per query), so it suits test
 * shapes only.  round != 0 rounds to bf16 where the CUDA code stores bf16.
 *
 * Build: part of build/libtailsim.a (make); tested by
 *        build/tests/test_kernels_train (make check), no CUDA needed.
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

void kref_gemm_tn(const float *A, const float *B, float *C, int m, int n, int k)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int l = 0; l < k; l++)
                s += (double)A[(size_t)l * m + i] * B[(size_t)l * n + j];
            C[(size_t)i * n + j] = (float)s;
        }
}

void kref_rmsnorm_bwd(const float *x, const float *w, const float *dy, int rows,
                      int dim, float eps, float *dx, float *dw)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim, *g = dy + (size_t)r * dim;
        double ss = 0.0, dot = 0.0;
        for (int i = 0; i < dim; i++) {
            ss += (double)xr[i] * xr[i];
            dot += (double)w[i] * g[i] * xr[i];
        }
        double rs = 1.0 / sqrt(ss / dim + (double)eps);
        double c = rs * rs * rs * dot / dim;
        for (int i = 0; i < dim; i++) {
            dx[(size_t)r * dim + i] = (float)(rs * w[i] * g[i] - xr[i] * c);
            dw[i] += (float)(g[i] * xr[i] * rs);
        }
    }
}

void kref_swiglu_bwd(const float *gate_up, const float *dout, int rows, int ffn,
                     float *dgate_up)
{
    for (int r = 0; r < rows; r++) {
        const float *gt = gate_up + (size_t)r * 2 * ffn, *up = gt + ffn;
        float *dg = dgate_up + (size_t)r * 2 * ffn, *du = dg + ffn;
        for (int i = 0; i < ffn; i++) {
            double g = gt[i], sg = 1.0 / (1.0 + exp(-g)), d = dout[(size_t)r * ffn + i];
            du[i] = (float)(d * g * sg);
            dg[i] = (float)(d * up[i] * sg * (1.0 + g * (1.0 - sg)));
        }
    }
}

void kref_rope_bwd(float *dx, const int *pos, int tokens, int heads, int hd,
                   double theta)
{
    int half = hd / 2;
    for (int t = 0; t < tokens; t++)
        for (int h = 0; h < heads; h++) {
            float *v = dx + ((size_t)t * heads + h) * hd;
            for (int i = 0; i < half; i++) {
                double a = (double)pos[t] * pow(theta, -2.0 * i / hd);
                double c = cos(a), s = sin(a), x1 = v[i], x2 = v[i + half];
                v[i] = (float)(x1 * c + x2 * s);
                v[i + half] = (float)(x2 * c - x1 * s);
            }
        }
}

int kref_chunk_attn_bwd(const float *q, const float *k, const float *v,
                        const float *dout, const int *ctx, const int *q_len, int b,
                        int heads, int kv_heads, int hd, float *dq, float *dk,
                        float *dv)
{
    if (b < 1 || heads < 1 || kv_heads < 1 || hd < 1 || heads % kv_heads)
        return -1;
    size_t total = 0, tq = 0;
    int max_ctx = 1;
    for (int i = 0; i < b; i++) {
        if (ctx[i] < 1 || q_len[i] < 0 || q_len[i] > ctx[i])
            return -1;
        total += (size_t)ctx[i];
        tq += (size_t)q_len[i];
        max_ctx = ctx[i] > max_ctx ? ctx[i] : max_ctx;
    }
    const size_t kvs = (size_t)kv_heads * hd, nkv = total * kvs;
    double *acc_k = calloc(nkv ? nkv : 1, sizeof *acc_k);
    double *acc_v = calloc(nkv ? nkv : 1, sizeof *acc_v);
    double *p = malloc((size_t)max_ctx * sizeof *p), *dp = malloc((size_t)max_ctx * sizeof *dp);
    if (!acc_k || !acc_v || !p || !dp) {
        free(acc_k); free(acc_v); free(p); free(dp);
        return -1;
    }
    const int G = heads / kv_heads;
    const double scale = 1.0 / sqrt((double)hd);
    size_t kv0 = 0, q0 = 0;
    for (int i = 0; i < b; i++) {
        for (int j = 0; j < q_len[i]; j++) {
            const int n_keys = ctx[i] - q_len[i] + j + 1;
            for (int h = 0; h < heads; h++) {
                const size_t qi = ((q0 + j) * heads + h) * hd;
                const size_t kb = kv0 * kvs + (size_t)(h / G) * hd;
                double mx = -INFINITY, sum = 0.0, D = 0.0;
                for (int t = 0; t < n_keys; t++) {
                    double s = 0.0, d = 0.0;
                    for (int e = 0; e < hd; e++) {
                        s += (double)q[qi + e] * k[kb + t * kvs + e];
                        d += (double)dout[qi + e] * v[kb + t * kvs + e];
                    }
                    p[t] = s * scale;
                    dp[t] = d;
                    mx = p[t] > mx ? p[t] : mx;
                }
                for (int t = 0; t < n_keys; t++) {
                    p[t] = exp(p[t] - mx);
                    sum += p[t];
                }
                for (int t = 0; t < n_keys; t++) {
                    p[t] /= sum;
                    D += p[t] * dp[t];
                }
                for (int e = 0; e < hd; e++) {
                    double g = 0.0;
                    for (int t = 0; t < n_keys; t++)
                        g += p[t] * (dp[t] - D) * k[kb + t * kvs + e];
                    dq[qi + e] = (float)(g * scale);
                }
                for (int t = 0; t < n_keys; t++) {
                    const double ds = p[t] * (dp[t] - D) * scale;
                    for (int e = 0; e < hd; e++) {
                        acc_k[kb + t * kvs + e] += ds * q[qi + e];
                        acc_v[kb + t * kvs + e] += p[t] * dout[qi + e];
                    }
                }
            }
        }
        kv0 += (size_t)ctx[i];
        q0 += (size_t)q_len[i];
    }
    for (size_t e = 0; e < nkv; e++) {
        dk[e] = (float)acc_k[e];
        dv[e] = (float)acc_v[e];
    }
    free(acc_k); free(acc_v); free(p); free(dp);
    return 0;
}

/* ---- a layer ------------------------------------------------------------- */

size_t kref_acts_floats(const kref_shape *s, int T)
{
    const size_t D = (size_t)s->hidden, qw = (size_t)s->heads * s->hd;
    const size_t kw = (size_t)s->kv_heads * s->hd, F = (size_t)s->ffn;
    return (size_t)T * (4 * D + 2 * qw + 2 * kw + 3 * F);
}

void kref_acts_carve(const kref_shape *s, int T, float *buf, kref_acts *a)
{
    const size_t D = (size_t)s->hidden, qw = (size_t)s->heads * s->hd;
    const size_t kw = (size_t)s->kv_heads * s->hd, F = (size_t)s->ffn, t = (size_t)T;
    a->x = buf;
    a->h1 = a->x + t * D;
    a->q = a->h1 + t * D;
    a->k = a->q + t * qw;
    a->v = a->k + t * kw;
    a->o = a->v + t * kw;
    a->x2 = a->o + t * qw;
    a->h2 = a->x2 + t * D;
    a->gu = a->h2 + t * D;
    a->s = a->gu + t * 2 * F;
}

/* positions 0..len-1 of each packed sequence; NULL when out of memory */
static int *train_pos(const int *lens, int n, int T)
{
    int *pos = malloc((size_t)(T ? T : 1) * sizeof *pos);
    if (!pos)
        return NULL;
    int r = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < lens[i]; j++)
            pos[r++] = j;
    return pos;
}

static int total_tokens(const kref_shape *s, const int *lens, int n)
{
    if (n < 1 || s->heads % s->kv_heads || s->hd % 2)
        return -1;
    long long T = 0;
    for (int i = 0; i < n; i++) {
        if (lens[i] < 1)
            return -1;
        T += lens[i];
    }
    return T < (1 << 30) ? (int)T : -1;
}

int kref_train_layer_fwd(const kref_shape *s, const kref_layer_w *w, const int *lens,
                         int n, const float *x_in, kref_acts *a, float *x_out, int round)
{
    const int T = total_tokens(s, lens, n);
    if (T < 0)
        return -1;
    const int H = s->heads, K = s->kv_heads, hd = s->hd, D = s->hidden, F = s->ffn;
    const size_t nqkv = (size_t)(H + 2 * K) * hd, t = (size_t)T;
    float *qkv = malloc(t * nqkv * sizeof *qkv), *tmp = malloc(t * D * sizeof *tmp);
    int *pos = train_pos(lens, n, T);
    int rc = -1;
    if (!qkv || !tmp || !pos)
        goto cleanup;
    memcpy(a->x, x_in, t * D * sizeof *tmp);
    kref_rmsnorm(a->x, w->ln1, a->h1, T, D, s->eps);
    maybe_round(a->h1, t * D, round);
    kref_gemm_nt(a->h1, w->wqkv, qkv, T, (int)nqkv, D);
    maybe_round(qkv, t * nqkv, round);
    for (size_t r = 0; r < t; r++) {
        float *row = qkv + r * nqkv;
        for (size_t c = 0; w->bqkv && c < nqkv; c++)
            row[c] += w->bqkv[c];
        memcpy(a->q + r * H * hd, row, (size_t)H * hd * sizeof *tmp);
        memcpy(a->k + r * K * hd, row + (size_t)H * hd, (size_t)K * hd * sizeof *tmp);
        memcpy(a->v + r * K * hd, row + (size_t)(H + K) * hd, (size_t)K * hd * sizeof *tmp);
    }
    maybe_round(a->q, t * H * hd, round);
    maybe_round(a->k, t * K * hd, round);
    maybe_round(a->v, t * K * hd, round);
    kref_rope(a->q, pos, T, H, hd, s->theta);
    kref_rope(a->k, pos, T, K, hd, s->theta);
    maybe_round(a->q, t * H * hd, round);
    maybe_round(a->k, t * K * hd, round);
    if (kref_chunk_attn(a->q, a->k, a->v, lens, lens, n, H, K, hd, a->o))
        goto cleanup;
    maybe_round(a->o, t * H * hd, round);
    kref_gemm_nt(a->o, w->wo, tmp, T, D, H * hd);
    maybe_round(tmp, t * D, round);
    for (size_t e = 0; e < t * D; e++)
        a->x2[e] = a->x[e] + tmp[e];
    maybe_round(a->x2, t * D, round);
    kref_rmsnorm(a->x2, w->ln2, a->h2, T, D, s->eps);
    maybe_round(a->h2, t * D, round);
    kref_gemm_nt(a->h2, w->wgu, a->gu, T, 2 * F, D);
    maybe_round(a->gu, t * 2 * F, round);
    kref_swiglu(a->gu, a->s, T, F);
    maybe_round(a->s, t * F, round);
    kref_gemm_nt(a->s, w->wdown, tmp, T, D, F);
    maybe_round(tmp, t * D, round);
    for (size_t e = 0; e < t * D; e++)
        x_out[e] = a->x2[e] + tmp[e];
    maybe_round(x_out, t * D, round);
    rc = 0;
cleanup:
    free(qkv); free(tmp); free(pos);
    return rc;
}

/* g[i] += w[i] for an [m, n] weight gradient computed into tmp */
static void add_to(float *g, const float *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g[i] += w[i];
}

int kref_train_layer_bwd(const kref_shape *s, const kref_layer_w *w, const int *lens,
                         int n, const kref_acts *a, const float *dy, float *dx,
                         kref_layer_g *g, int round)
{
    const int T = total_tokens(s, lens, n);
    if (T < 0)
        return -1;
    const int H = s->heads, K = s->kv_heads, hd = s->hd, D = s->hidden, F = s->ffn;
    const int nqkv = (H + 2 * K) * hd;
    const size_t t = (size_t)T;
    size_t wmax = (size_t)nqkv * D;
    wmax = wmax > (size_t)2 * F * D ? wmax : (size_t)2 * F * D;
    float *ds = malloc(t * F * sizeof *ds), *dgu = malloc(t * 2 * F * sizeof *ds);
    float *dh = malloc(t * D * sizeof *ds), *dx2 = malloc(t * D * sizeof *ds);
    float *dqkv = malloc(t * nqkv * sizeof *ds), *dq = malloc(t * H * hd * sizeof *ds);
    float *dk = malloc(t * K * hd * sizeof *ds), *dv = malloc(t * K * hd * sizeof *ds);
    float *tmp = malloc(wmax * sizeof *ds);
    int *pos = train_pos(lens, n, T);
    int rc = -1;
    if (!ds || !dgu || !dh || !dx2 || !dqkv || !dq || !dk || !dv || !tmp || !pos)
        goto cleanup;
    /* MLP: x_out = x2 + swiglu(h2 wgu^T) wdown^T */
    kref_gemm_nn(dy, w->wdown, ds, T, F, D);
    maybe_round(ds, t * F, round);
    kref_gemm_tn(dy, a->s, tmp, D, F, T);
    add_to(g->wdown, tmp, (size_t)D * F);
    kref_swiglu_bwd(a->gu, ds, T, F, dgu);
    maybe_round(dgu, t * 2 * F, round);
    kref_gemm_tn(dgu, a->h2, tmp, 2 * F, D, T);
    add_to(g->wgu, tmp, (size_t)2 * F * D);
    kref_gemm_nn(dgu, w->wgu, dh, T, D, 2 * F);
    maybe_round(dh, t * D, round);
    kref_rmsnorm_bwd(a->x2, w->ln2, dh, T, D, s->eps, dx2, g->ln2);
    for (size_t e = 0; e < t * D; e++)
        dx2[e] += dy[e];
    maybe_round(dx2, t * D, round);
    /* attention: x2 = x + attn(rope(q), rope(k), v) wo^T */
    float *dout = dq; /* dO [T, H hd] lives in dq's buffer until the attention backward */
    kref_gemm_nn(dx2, w->wo, dout, T, H * hd, D);
    maybe_round(dout, t * H * hd, round);
    kref_gemm_tn(dx2, a->o, tmp, D, H * hd, T);
    add_to(g->wo, tmp, (size_t)D * H * hd);
    float *dq2 = dqkv; /* scratch for dq: dqkv is assembled below */
    if (kref_chunk_attn_bwd(a->q, a->k, a->v, dout, lens, lens, n, H, K, hd, dq2, dk, dv))
        goto cleanup;
    memcpy(dq, dq2, t * H * hd * sizeof *dq);
    maybe_round(dq, t * H * hd, round);
    maybe_round(dk, t * K * hd, round);
    maybe_round(dv, t * K * hd, round);
    kref_rope_bwd(dq, pos, T, H, hd, s->theta);
    kref_rope_bwd(dk, pos, T, K, hd, s->theta);
    maybe_round(dq, t * H * hd, round);
    maybe_round(dk, t * K * hd, round);
    for (size_t r = 0; r < t; r++) {
        float *row = dqkv + r * nqkv;
        memcpy(row, dq + r * H * hd, (size_t)H * hd * sizeof *row);
        memcpy(row + (size_t)H * hd, dk + r * K * hd, (size_t)K * hd * sizeof *row);
        memcpy(row + (size_t)(H + K) * hd, dv + r * K * hd, (size_t)K * hd * sizeof *row);
        for (int c = 0; g->bqkv && c < nqkv; c++)
            g->bqkv[c] += row[c];
    }
    kref_gemm_tn(dqkv, a->h1, tmp, nqkv, D, T);
    add_to(g->wqkv, tmp, (size_t)nqkv * D);
    kref_gemm_nn(dqkv, w->wqkv, dh, T, D, nqkv);
    maybe_round(dh, t * D, round);
    kref_rmsnorm_bwd(a->x, w->ln1, dh, T, D, s->eps, dx, g->ln1);
    for (size_t e = 0; e < t * D; e++)
        dx[e] += dx2[e];
    maybe_round(dx, t * D, round);
    rc = 0;
cleanup:
    free(ds); free(dgu); free(dh); free(dx2); free(dqkv); free(dq); free(dk); free(dv);
    free(tmp); free(pos);
    return rc;
}
