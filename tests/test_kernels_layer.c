/*
 * Tests of the composite references (kernels/ref/kref_layer.c): the decoder
 * layer, the stack with its LM head, and the EAGLE drafter's step, top-k and
 * beam selection.  The single-op references they compose are tested in
 * test_kernels_ref.c; here the wiring is checked through identities that any
 * correct implementation satisfies, on seeded random inputs (never zeros):
 * chunked prefill equals one chunk, decode equals a chunk of one, a batch
 * equals its sequences run one by one, causality within a draft step, and
 * top-k / selection against brute-force sorting.  Tolerance: identities of
 * the same float math are exact (0) or 1e-5 relative where the summation
 * order differs; round = 0 (no bf16 emulation) unless stated.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "kernels/ref/kref.h"

static gsl_rng *rng;

static void setup(void)
{
    rng = ts_rng_new(20250302, 11);
    cr_assert_not_null(rng);
}

static void teardown(void)
{
    gsl_rng_free(rng);
    rng = NULL;
}

TestSuite(kernels_layer, .init = setup, .fini = teardown);

static float *rand_vec(size_t n, double scale)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < n; i++) {
        double u = gsl_rng_uniform_pos(rng) * 2.0 - 1.0;
        x[i] = kref_bf16_round((float)((u == 0.0 ? 0.5 : u) * scale));
    }
    return x;
}

static void assert_close(const char *what, const float *ref, const float *got, size_t n,
                         double rel)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs((double)got[i] - ref[i]) <= rel * (1e-3 + fabs(ref[i])),
                  "%s: index %zu: %.9g vs %.9g", what, i, (double)ref[i], (double)got[i]);
}

/* A small model: 2 layers, GQA 6/2, hd 8, vocab 64. */
enum { D = 24, H = 6, K = 2, HD = 8, F = 32, V = 64, L = 2, CAP = 40 };
#define NQKV ((H + 2 * K) * HD)

typedef struct {
    kref_shape s;
    float *buf[L][7], *embed, *fnorm, *head;
    kref_layer_w w[L];
    kref_model m;
} model;

static void model_init(model *mo)
{
    kref_shape s = {D, H, K, HD, F, V, 1e-6f, 10000.0};
    mo->s = s;
    const size_t n[7] = {D, (size_t)NQKV * D, NQKV, (size_t)D * H * HD, D, (size_t)2 * F * D,
                         (size_t)D * F};
    const double sc[7] = {1, sqrt(3.0 / D), 0.5, sqrt(3.0 / (H * HD)), 1, sqrt(3.0 / D),
                          sqrt(3.0 / F)};
    for (int l = 0; l < L; l++) {
        for (int j = 0; j < 7; j++)
            mo->buf[l][j] = rand_vec(n[j], sc[j]);
        kref_layer_w w = {mo->buf[l][0], mo->buf[l][1], mo->buf[l][2], mo->buf[l][3],
                          mo->buf[l][4], mo->buf[l][5], mo->buf[l][6]};
        mo->w[l] = w;
    }
    mo->embed = rand_vec((size_t)V * D, 1.0);
    mo->fnorm = rand_vec(D, 1.0);
    mo->head = rand_vec((size_t)V * D, sqrt(3.0 / D));
    kref_model m = {s, L, mo->embed, mo->w, mo->fnorm, mo->head};
    mo->m = m;
}

static void model_fini(model *mo)
{
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 7; j++)
            free(mo->buf[l][j]);
    free(mo->embed); free(mo->fnorm); free(mo->head);
}

/* per-layer caches of b sequences of CAP rows each */
typedef struct { float *k, *v; long long off[4]; kref_kv kv[L]; } caches;

static void caches_init(caches *c, int b)
{
    size_t n = (size_t)b * CAP * K * HD * L;
    c->k = rand_vec(n, 1.0); /* garbage beyond each length must never be read */
    c->v = rand_vec(n, 1.0);
    for (int i = 0; i < b; i++)
        c->off[i] = (long long)i * CAP;
    for (int l = 0; l < L; l++) {
        kref_kv kv = {c->k + (size_t)l * b * CAP * K * HD, c->v + (size_t)l * b * CAP * K * HD,
                      c->off};
        c->kv[l] = kv;
    }
}

static void caches_fini(caches *c)
{
    free(c->k);
    free(c->v);
}

Test(kernels_layer, prefill_in_chunks_then_decode_equals_one_chunk)
{
    model mo;
    model_init(&mo);
    caches a, b;
    caches_init(&a, 1);
    caches_init(&b, 1);
    int tokens[12];
    for (int i = 0; i < 12; i++)
        tokens[i] = (int)gsl_rng_uniform_int(rng, V);
    float la[12 * V], lb[12 * V], hid_a[12 * D], hid_b[12 * D];
    /* a: all 12 tokens at once, logits for all */
    int len0 = 0, q12 = 12;
    kref_batch ba = {1, &len0, &q12, NULL};
    cr_assert_eq(kref_model_forward(&mo.m, &ba, a.kv, tokens, 1, hid_a, la, 0), 0);
    /* b: chunks of 5 and 6, then one decode step */
    int len = 0, q = 5;
    kref_batch bb = {1, &len, &q, NULL};
    cr_assert_eq(kref_model_forward(&mo.m, &bb, b.kv, tokens, 1, hid_b, lb, 0), 0);
    len = 5, q = 6;
    cr_assert_eq(kref_model_forward(&mo.m, &bb, b.kv, tokens + 5, 1, hid_b + 5 * D,
                                    lb + 5 * V, 0), 0);
    len = 11, q = 1;
    cr_assert_eq(kref_model_forward(&mo.m, &bb, b.kv, tokens + 11, 0, hid_b + 11 * D,
                                    lb + 11 * V, 0), 0);
    assert_close("hidden", hid_a, hid_b, 12 * D, 1e-5);
    assert_close("logits", la, lb, 12 * V, 1e-5);
    for (int l = 0; l < L; l++)
        assert_close("k cache", a.kv[l].k, b.kv[l].k, 12 * K * HD, 1e-5);
    caches_fini(&a);
    caches_fini(&b);
    model_fini(&mo);
}

Test(kernels_layer, ragged_batch_equals_sequences_one_by_one)
{
    model mo;
    model_init(&mo);
    caches all, one;
    caches_init(&all, 3);
    caches_init(&one, 3);
    memcpy(one.k, all.k, (size_t)3 * CAP * K * HD * L * sizeof(float));
    memcpy(one.v, all.v, (size_t)3 * CAP * K * HD * L * sizeof(float));
    /* cached lengths (the random cache contents stand for earlier tokens) */
    int len[3] = {17, 0, 30}, q_len[3] = {3, 7, 0}, tokens[10];
    for (int i = 0; i < 10; i++)
        tokens[i] = (int)gsl_rng_uniform_int(rng, V);
    float lg_all[2 * V], lg_one[2 * V];
    kref_batch bt = {3, len, q_len, NULL};
    cr_assert_eq(kref_logit_rows(&bt, 0), 2);
    cr_assert_eq(kref_logit_rows(&bt, 1), 10);
    cr_assert_eq(kref_model_forward(&mo.m, &bt, all.kv, tokens, 0, NULL, lg_all, 0), 0);
    int t0 = 0, out = 0;
    for (int i = 0; i < 3; i++) {
        kref_kv kv[L];
        for (int l = 0; l < L; l++) {
            kv[l] = one.kv[l];
            kv[l].off = &one.off[i];
        }
        kref_batch b1 = {1, &len[i], &q_len[i], NULL};
        if (q_len[i] > 0) {
            cr_assert_eq(kref_model_forward(&mo.m, &b1, kv, tokens + t0, 0, NULL,
                                            lg_one + out * V, 0), 0);
            out++;
        }
        t0 += q_len[i];
    }
    assert_close("batch vs one by one", lg_one, lg_all, 2 * V, 1e-6);
    caches_fini(&all);
    caches_fini(&one);
    model_fini(&mo);
}

Test(kernels_layer, bf16_emulation_changes_logits_by_a_few_eps)
{
    model mo;
    model_init(&mo);
    caches a, b;
    caches_init(&a, 1);
    caches_init(&b, 1);
    memcpy(b.k, a.k, (size_t)CAP * K * HD * L * sizeof(float));
    memcpy(b.v, a.v, (size_t)CAP * K * HD * L * sizeof(float));
    int len = 20, q = 4, tokens[4] = {1, 63, 7, 30};
    float l0[4 * V], l1[4 * V];
    kref_batch bt = {1, &len, &q, NULL};
    cr_assert_eq(kref_model_forward(&mo.m, &bt, a.kv, tokens, 1, NULL, l0, 0), 0);
    cr_assert_eq(kref_model_forward(&mo.m, &bt, b.kv, tokens, 1, NULL, l1, 1), 0);
    double e = 0, r = 0;
    for (int i = 0; i < 4 * V; i++) {
        cr_assert_eq(l1[i], kref_bf16_round(l1[i]), "rounded logits are bf16 values");
        e += (l1[i] - l0[i]) * (double)(l1[i] - l0[i]);
        r += (double)l0[i] * l0[i];
    }
    cr_assert(sqrt(e / r) < 4 * KREF_BF16_EPS, "rms relative error %.3g", sqrt(e / r));
    caches_fini(&a);
    caches_fini(&b);
    model_fini(&mo);
}

Test(kernels_layer, topk_matches_sorting_and_lse)
{
    enum { R = 5, N = 300, KK = 6 };
    float *x = rand_vec((size_t)R * N, 3.0); /* bf16 values: ties happen */
    x[2 * N + 10] = x[2 * N + 200] = 9.0f;   /* an exact tie at the top */
    x[3 * N + 5] = NAN;
    int idx[R * KK];
    float val[R * KK], lse[R];
    kref_topk(x, R, N, KK, idx, val, lse);
    for (int r = 0; r < R; r++) {
        double mx = -INFINITY, s = 0;
        for (int i = 0; i < N; i++)
            if (!isnan(x[r * N + i]))
                mx = fmax(mx, x[r * N + i]);
        for (int i = 0; i < N; i++)
            if (!isnan(x[r * N + i]))
                s += exp(x[r * N + i] - mx);
        cr_assert_float_eq(lse[r], mx + log(s), 1e-5);
        for (int j = 0; j < KK; j++) {
            /* rank j = number of values strictly better */
            int better = 0, i0 = idx[r * KK + j];
            cr_assert_eq(val[r * KK + j], x[r * N + i0]);
            for (int i = 0; i < N; i++) {
                float v = x[r * N + i];
                better += !isnan(v) && (v > x[r * N + i0] || (v == x[r * N + i0] && i < i0));
            }
            cr_assert_eq(better, j, "row %d rank %d", r, j);
        }
    }
    cr_assert_eq(idx[2 * KK], 10);
    cr_assert_eq(idx[2 * KK + 1], 200);
    free(x);
}

Test(kernels_layer, draft_select_keeps_the_best_paths)
{
    /* 2 sequences, 2 frontier rows each, top-2 per row */
    const float score[4] = {-0.5f, -1.0f, -2.0f, -0.1f};
    const int idx[8] = {10, 11, 20, 21, 30, 31, 40, 41};
    const float val[8] = {0.0f, -0.2f, 0.0f, -3.0f, 0.0f, 0.0f, -1.0f, -1.5f};
    const float lse[4] = {1.0f, 0.5f, 0.0f, 0.0f};
    int tok[4], parent[4];
    float ns[4];
    kref_draft_select(2, 2, 2, score, idx, val, lse, tok, parent, ns);
    /* seq 0: -1.5 (10), -1.7 (11), -1.5 (20), -4.5 (21): ties keep (r, rank) order */
    cr_assert_eq(tok[0], 10);
    cr_assert_eq(parent[0], 0);
    cr_assert_eq(tok[1], 20);
    cr_assert_eq(parent[1], 1);
    cr_assert_float_eq(ns[1], -1.5f, 1e-6);
    /* seq 1: -2 (30), -2 (31), -1.1 (40), -1.6 (41) */
    cr_assert_eq(tok[2], 40);
    cr_assert_eq(tok[3], 41);
    cr_assert_eq(parent[2], 1);
    cr_assert_float_eq(ns[3], -1.6f, 1e-6);
}

Test(kernels_layer, draft_step_is_causal_within_the_step)
{
    model mo;
    model_init(&mo);
    float *fc = rand_vec((size_t)D * 2 * D, sqrt(3.0 / (2 * D)));
    float *dnorm = rand_vec(D, 1.0);
    kref_drafter dr = {mo.s, fc, mo.w[0], dnorm, mo.embed, mo.head};
    caches a, b;
    caches_init(&a, 2);
    caches_init(&b, 2);
    memcpy(b.k, a.k, (size_t)2 * CAP * K * HD * L * sizeof(float));
    memcpy(b.v, a.v, (size_t)2 * CAP * K * HD * L * sizeof(float));
    /* 4 draft rows per sequence at one tree depth: row 0 of each must not see
     * rows 1..3 (they come later in creation order) */
    int len[2] = {9, 13}, q4[2] = {4, 4}, pos[8] = {10, 10, 10, 10, 14, 14, 14, 14};
    int tokens[8] = {3, 5, 7, 9, 11, 13, 15, 17};
    float *feat = rand_vec((size_t)8 * D, 2.0);
    float h4[8 * D], lg4[8 * V], h1[2 * D], lg1[2 * V];
    kref_batch b4 = {2, len, q4, pos};
    cr_assert_eq(kref_draft_forward(&dr, &b4, &a.kv[0], tokens, feat, h4, lg4, 0), 0);
    int q1[2] = {1, 1}, pos1[2] = {10, 14}, tok1[2] = {3, 11};
    float f1[2 * D];
    memcpy(f1, feat, D * sizeof *f1);
    memcpy(f1 + D, feat + 4 * D, D * sizeof *f1);
    kref_batch b1 = {2, len, q1, pos1};
    cr_assert_eq(kref_draft_forward(&dr, &b1, &b.kv[0], tok1, f1, h1, lg1, 0), 0);
    assert_close("first row, seq 0", h1, h4, D, 1e-6);
    assert_close("first row, seq 1", h1 + D, h4 + 4 * D, D, 1e-6);
    assert_close("logits, seq 1", lg1 + V, lg4 + 4 * V, V, 1e-6);
    free(fc); free(dnorm); free(feat);
    caches_fini(&a);
    caches_fini(&b);
    model_fini(&mo);
}
