/*
 * Tests of the kernel references (kernels/ref/): each is compared with an
 * independent, naive formulation of the same math, or with an identity the
 * operation must satisfy, on seeded random inputs (never zeros).  Tolerance
 * is abs + |ref| * eps.  The GPU kernels are judged against these references
 * by `tailsim-validate selftest`, so these tests are the root of that chain;
 * the last test runs that selftest when the program is built and skips
 * itself when there is no GPU (exit status 77).
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "kernels/ref/kref.h"

static gsl_rng *rng;

static void setup(void)
{
    rng = ts_rng_new(20240611, 3);
    cr_assert_not_null(rng);
}

static void teardown(void)
{
    gsl_rng_free(rng);
    rng = NULL;
}

TestSuite(kernels_ref, .init = setup, .fini = teardown);

/* Uniform in [-scale, scale], never exactly zero, rounded to bf16. */
static float *rand_vec(size_t n, double scale)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < n; i++) {
        double u = gsl_rng_uniform_pos(rng) * 2.0 - 1.0;
        if (u == 0.0)
            u = 0.5;
        x[i] = kref_bf16_round((float)(u * scale));
    }
    return x;
}

static void assert_close(const char *what, const float *ref, const float *got,
                         size_t n, double abs_tol, double eps)
{
    for (size_t i = 0; i < n; i++) {
        double tol = abs_tol + fabs(ref[i]) * eps;
        cr_assert(isfinite(got[i]) && fabs((double)got[i] - ref[i]) <= tol,
                  "%s: index %zu: ref %.9g got %.9g (tol %.3g)", what, i,
                  (double)ref[i], (double)got[i], tol);
    }
}

/* ---- bf16 ---------------------------------------------------------------- */

Test(kernels_ref, bf16_rounding)
{
    cr_assert_eq(kref_f2bf(1.0f), 0x3f80);
    cr_assert_eq(kref_f2bf(-2.0f), 0xc000);
    /* halfway cases round to even */
    cr_assert_eq(kref_bf16_round(1.0f + 0x1p-8f), 1.0f);
    cr_assert_eq(kref_bf16_round(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
    cr_assert(isnan(kref_bf2f(kref_f2bf(NAN))));
    cr_assert(isinf(kref_bf2f(kref_f2bf(INFINITY))));
    for (int i = 0; i < 10000; i++) {
        float x = (float)((gsl_rng_uniform_pos(rng) - 0.5) * 1e3);
        float r = kref_bf16_round(x);
        cr_assert(fabsf(r - x) <= fabsf(x) * 0x1p-8f, "x %g r %g", x, r);
        cr_assert_eq(kref_bf16_round(r), r);
    }
}

/* ---- GEMM ---------------------------------------------------------------- */

Test(kernels_ref, gemm_nt_matches_naive_and_nn)
{
    int m = 13, n = 29, k = 71;
    float *A = rand_vec((size_t)m * k, 1.0), *B = rand_vec((size_t)n * k, 1.0);
    float *Bt = malloc((size_t)k * n * sizeof *Bt);
    float *C1 = malloc((size_t)m * n * sizeof *C1);
    float *C2 = malloc((size_t)m * n * sizeof *C2);
    float *C3 = malloc((size_t)m * n * sizeof *C3);
    cr_assert(Bt && C1 && C2 && C3);
    for (int j = 0; j < n; j++)
        for (int l = 0; l < k; l++)
            Bt[(size_t)l * n + j] = B[(size_t)j * k + l];
    kref_gemm_nt(A, B, C1, m, n, k);
    kref_gemm_nn(A, Bt, C2, m, n, k);
    /* naive: float accumulation, k outermost */
    for (size_t i = 0; i < (size_t)m * n; i++)
        C3[i] = 0.0f;
    for (int l = 0; l < k; l++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                C3[(size_t)i * n + j] += A[(size_t)i * k + l] * B[(size_t)j * k + l];
    assert_close("nt vs nn", C1, C2, (size_t)m * n, 1e-6, 1e-6);
    assert_close("nt vs naive", C1, C3, (size_t)m * n, 1e-4, 1e-5);
    free(A); free(B); free(Bt); free(C1); free(C2); free(C3);
}

/* ---- attention ----------------------------------------------------------- */

/* Independent naive attention for one sequence: the full score matrix for
 * every query, a causal mask, softmax by the textbook formula in float. */
static void naive_seq_attn(const float *q, const float *k, const float *v,
                           int ctx, int qn, int heads, int kv_heads, int hd,
                           float *out)
{
    float *s = malloc((size_t)ctx * sizeof *s);
    cr_assert_not_null(s);
    for (int j = 0; j < qn; j++)
        for (int h = 0; h < heads; h++) {
            int kh = h * kv_heads / heads;
            const float *qr = q + ((size_t)j * heads + h) * hd;
            int last = ctx - qn + j;
            float mx = -INFINITY, den = 0.0f;
            for (int p = 0; p <= last; p++) {
                float d = 0.0f;
                for (int e = 0; e < hd; e++)
                    d += qr[e] * k[((size_t)p * kv_heads + kh) * hd + e];
                s[p] = d / sqrtf((float)hd);
                mx = fmaxf(mx, s[p]);
            }
            for (int p = 0; p <= last; p++)
                den += expf(s[p] - mx);
            for (int e = 0; e < hd; e++) {
                float acc = 0.0f;
                for (int p = 0; p <= last; p++)
                    acc += expf(s[p] - mx) / den *
                           v[((size_t)p * kv_heads + kh) * hd + e];
                out[((size_t)j * heads + h) * hd + e] = acc;
            }
        }
    free(s);
}

Test(kernels_ref, decode_attn_matches_naive_gqa_ragged)
{
    enum { B = 4, H = 14, KVH = 2, HD = 32 };
    int ctx[B] = {1, 7, 130, 301};
    int total = 0;
    for (int i = 0; i < B; i++)
        total += ctx[i];
    float *q = rand_vec((size_t)B * H * HD, 2.0);
    float *k = rand_vec((size_t)total * KVH * HD, 1.0);
    float *v = rand_vec((size_t)total * KVH * HD, 1.0);
    float *out = malloc((size_t)B * H * HD * sizeof *out);
    float *ref = malloc((size_t)B * H * HD * sizeof *ref);
    cr_assert(out && ref);
    cr_assert_eq(kref_decode_attn(q, k, v, ctx, B, H, KVH, HD, out), 0);
    size_t off = 0;
    for (int i = 0; i < B; i++) {
        size_t kvo = off * KVH * HD;
        naive_seq_attn(q + (size_t)i * H * HD, k + kvo, v + kvo, ctx[i], 1, H,
                       KVH, HD, ref + (size_t)i * H * HD);
        off += ctx[i];
    }
    assert_close("decode vs naive", ref, out, (size_t)B * H * HD, 1e-5, 1e-4);
    /* a sequence of one token returns its V row */
    for (int h = 0; h < H; h++)
        for (int e = 0; e < HD; e++)
            cr_assert_float_eq(out[h * HD + e], v[(h / (H / KVH)) * HD + e], 1e-6);
    int bad_ctx[B] = {1, 0, 3, 4};
    cr_assert_eq(kref_decode_attn(q, k, v, bad_ctx, B, H, KVH, HD, out), -1);
    cr_assert_eq(kref_decode_attn(q, k, v, ctx, B, H, 3, HD, out), -1);
    free(q); free(k); free(v); free(out); free(ref);
}

Test(kernels_ref, decode_equals_chunk_of_one)
{
    enum { B = 3, H = 8, KVH = 8, HD = 16 };
    int ctx[B] = {5, 64, 33}, one[B] = {1, 1, 1};
    int total = 5 + 64 + 33;
    float *q = rand_vec((size_t)B * H * HD, 3.0);
    float *k = rand_vec((size_t)total * KVH * HD, 1.0);
    float *v = rand_vec((size_t)total * KVH * HD, 1.0);
    float *o1 = malloc((size_t)B * H * HD * sizeof *o1);
    float *o2 = malloc((size_t)B * H * HD * sizeof *o2);
    cr_assert(o1 && o2);
    cr_assert_eq(kref_decode_attn(q, k, v, ctx, B, H, KVH, HD, o1), 0);
    cr_assert_eq(kref_chunk_attn(q, k, v, ctx, one, B, H, KVH, HD, o2), 0);
    assert_close("decode vs chunk(1)", o1, o2, (size_t)B * H * HD, 0.0, 0.0);
    free(q); free(k); free(v); free(o1); free(o2);
}

Test(kernels_ref, chunk_attn_matches_naive_and_decode_per_query)
{
    enum { B = 2, H = 6, KVH = 2, HD = 24 };
    int ctx[B] = {40, 19}, qlen[B] = {9, 19}; /* seq 1: prefill from 0 */
    int tq = 28, total = 59;
    float *q = rand_vec((size_t)tq * H * HD, 2.0);
    float *k = rand_vec((size_t)total * KVH * HD, 1.0);
    float *v = rand_vec((size_t)total * KVH * HD, 1.0);
    float *out = malloc((size_t)tq * H * HD * sizeof *out);
    float *ref = malloc((size_t)tq * H * HD * sizeof *ref);
    float *dec = malloc((size_t)H * HD * sizeof *dec);
    cr_assert(out && ref && dec);
    cr_assert_eq(kref_chunk_attn(q, k, v, ctx, qlen, B, H, KVH, HD, out), 0);
    naive_seq_attn(q, k, v, ctx[0], qlen[0], H, KVH, HD, ref);
    naive_seq_attn(q + (size_t)qlen[0] * H * HD, k + (size_t)ctx[0] * KVH * HD,
                   v + (size_t)ctx[0] * KVH * HD, ctx[1], qlen[1], H, KVH, HD,
                   ref + (size_t)qlen[0] * H * HD);
    assert_close("chunk vs naive", ref, out, (size_t)tq * H * HD, 1e-5, 1e-4);
    /* causality: query j of seq 0 equals decode over its visible prefix */
    for (int j = 0; j < qlen[0]; j++) {
        int vis = ctx[0] - qlen[0] + j + 1;
        cr_assert_eq(kref_decode_attn(q + (size_t)j * H * HD, k, v, &vis, 1, H,
                                      KVH, HD, dec), 0);
        assert_close("chunk query vs decode", dec, out + (size_t)j * H * HD,
                     (size_t)H * HD, 0.0, 0.0);
    }
    int bad_q[B] = {41, 1};
    cr_assert_eq(kref_chunk_attn(q, k, v, ctx, bad_q, B, H, KVH, HD, out), -1);
    free(q); free(k); free(v); free(out); free(ref); free(dec);
}

Test(kernels_ref, chunked_prefill_two_chunks_equal_one)
{
    enum { H = 4, KVH = 1, HD = 32 };
    for (int trial = 0; trial < 5; trial++) {
        int before = (int)gsl_rng_uniform_int(rng, 50);
        int n = 2 + (int)gsl_rng_uniform_int(rng, 60);
        int n1 = 1 + (int)gsl_rng_uniform_int(rng, (unsigned long)n - 1);
        int ctx = before + n;
        float *q = rand_vec((size_t)n * H * HD, 2.0);
        float *k = rand_vec((size_t)ctx * KVH * HD, 1.0);
        float *v = rand_vec((size_t)ctx * KVH * HD, 1.0);
        float *whole = malloc((size_t)n * H * HD * sizeof *whole);
        float *parts = malloc((size_t)n * H * HD * sizeof *parts);
        cr_assert(whole && parts);
        cr_assert_eq(kref_chunk_attn(q, k, v, &ctx, &n, 1, H, KVH, HD, whole), 0);
        /* first chunk sees only the cache up to its own last token */
        int ctx1 = before + n1, n2 = n - n1;
        cr_assert_eq(kref_chunk_attn(q, k, v, &ctx1, &n1, 1, H, KVH, HD, parts), 0);
        cr_assert_eq(kref_chunk_attn(q + (size_t)n1 * H * HD, k, v, &ctx, &n2, 1,
                                     H, KVH, HD, parts + (size_t)n1 * H * HD), 0);
        assert_close("two chunks vs one", whole, parts, (size_t)n * H * HD, 0.0, 0.0);
        free(q); free(k); free(v); free(whole); free(parts);
    }
}

/* ---- row-wise ops -------------------------------------------------------- */

Test(kernels_ref, rmsnorm_output_rms_is_weight_scale)
{
    int rows = 7, dim = 384;
    float *x = rand_vec((size_t)rows * dim, 5.0);
    float *w = malloc((size_t)dim * sizeof *w);
    float *out = malloc((size_t)rows * dim * sizeof *out);
    cr_assert(w && out);
    for (int i = 0; i < dim; i++)
        w[i] = 0.75f;
    kref_rmsnorm(x, w, out, rows, dim, 1e-6f);
    for (int r = 0; r < rows; r++) {
        double ss = 0.0;
        for (int i = 0; i < dim; i++)
            ss += (double)out[(size_t)r * dim + i] * out[(size_t)r * dim + i];
        cr_assert_float_eq(sqrt(ss / dim), 0.75, 1e-5, "row %d", r);
        /* direction is kept */
        for (int i = 0; i < dim; i++)
            cr_assert((out[(size_t)r * dim + i] > 0) == (x[(size_t)r * dim + i] > 0));
    }
    /* per-element weights scale per element */
    float *w2 = rand_vec((size_t)dim, 2.0), *out2 = malloc((size_t)rows * dim * 4);
    cr_assert_not_null(out2);
    kref_rmsnorm(x, w2, out2, rows, dim, 1e-6f);
    for (size_t i = 0; i < (size_t)rows * dim; i++) {
        float want = out[i] / 0.75f * w2[i % dim];
        cr_assert(fabsf(out2[i] - want) <= 1e-6f + fabsf(want) * 1e-5f);
    }
    free(x); free(w); free(out); free(w2); free(out2);
}

static double dot(const float *a, const float *b, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

Test(kernels_ref, rope_norms_identity_and_relative_positions)
{
    enum { HD = 128, H = 3 };
    double theta = KREF_QWEN25_ROPE_THETA;
    float *q = rand_vec((size_t)H * HD, 1.0), *k = rand_vec((size_t)H * HD, 1.0);
    float qa[H * HD], ka[H * HD], qb[H * HD], kb[H * HD];
    /* position 0 is the identity */
    memcpy(qa, q, sizeof qa);
    int p0 = 0;
    kref_rope(qa, &p0, 1, H, HD, theta);
    assert_close("rope(0)", q, qa, H * HD, 0.0, 0.0);
    for (int trial = 0; trial < 20; trial++) {
        int p1 = (int)gsl_rng_uniform_int(rng, 70000);
        int p2 = (int)gsl_rng_uniform_int(rng, 70000);
        int sh = (int)gsl_rng_uniform_int(rng, 1000);
        int p1s = p1 + sh, p2s = p2 + sh;
        memcpy(qa, q, sizeof qa); memcpy(ka, k, sizeof ka);
        memcpy(qb, q, sizeof qb); memcpy(kb, k, sizeof kb);
        kref_rope(qa, &p1, 1, H, HD, theta);
        kref_rope(ka, &p2, 1, H, HD, theta);
        kref_rope(qb, &p1s, 1, H, HD, theta);
        kref_rope(kb, &p2s, 1, H, HD, theta);
        for (int h = 0; h < H; h++) {
            /* each rotated pair keeps its length */
            for (int i = 0; i < HD / 2; i++) {
                const float *x = q + h * HD, *y = qa + h * HD;
                double n0 = hypot(x[i], x[i + HD / 2]);
                double n1 = hypot(y[i], y[i + HD / 2]);
                cr_assert(fabs(n0 - n1) <= 1e-6 + n0 * 1e-6, "pair %d", i);
            }
            double d1 = dot(qa + h * HD, ka + h * HD, HD);
            double d2 = dot(qb + h * HD, kb + h * HD, HD);
            cr_assert(fabs(d1 - d2) <= 1e-4 + fabs(d1) * 1e-5,
                      "q.k at (%d,%d) %.9g vs shifted by %d %.9g", p1, p2, d1, sh, d2);
        }
    }
    /* naive: pair i rotated as the complex number (x_i + i x_{i+hd/2}) e^{ia} */
    int p = 12345;
    memcpy(qa, q, sizeof qa);
    kref_rope(qa, &p, 1, H, HD, theta);
    for (int i = 0; i < HD / 2; i++) {
        double a = p / pow(theta, (double)(2 * i) / HD);
        double re = q[i] * cos(a) - q[i + HD / 2] * sin(a);
        double im = q[i] * sin(a) + q[i + HD / 2] * cos(a);
        cr_assert(fabs(qa[i] - re) <= 1e-6 && fabs(qa[i + HD / 2] - im) <= 1e-6);
    }
    free(q); free(k);
}

Test(kernels_ref, swiglu_matches_formula)
{
    int rows = 5, ffn = 96;
    float *gu = rand_vec((size_t)rows * 2 * ffn, 6.0);
    float *out = malloc((size_t)rows * ffn * sizeof *out);
    float *ref = malloc((size_t)rows * ffn * sizeof *ref);
    cr_assert(out && ref);
    kref_swiglu(gu, out, rows, ffn);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < ffn; i++) {
            float g = gu[(size_t)r * 2 * ffn + i], u = gu[(size_t)r * 2 * ffn + ffn + i];
            float sig = 1.0f / (1.0f + expf(-g));
            ref[(size_t)r * ffn + i] = g * sig * u;
        }
    assert_close("swiglu", ref, out, (size_t)rows * ffn, 1e-6, 1e-5);
    free(gu); free(out); free(ref);
}

Test(kernels_ref, embed_gathers_rows_and_rejects_bad_ids)
{
    int vocab = 50, dim = 24, n = 9;
    float *table = rand_vec((size_t)vocab * dim, 1.0);
    float *out = malloc((size_t)n * dim * sizeof *out);
    cr_assert_not_null(out);
    int ids[9] = {0, 49, 3, 3, 17, 48, 1, 0, 25};
    cr_assert_eq(kref_embed(table, vocab, dim, ids, n, out), 0);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < dim; i++)
            cr_assert_eq(out[t * dim + i], table[ids[t] * dim + i]);
    out[0] = 12345.0f;
    ids[4] = 50;
    cr_assert_eq(kref_embed(table, vocab, dim, ids, n, out), -1);
    cr_assert_eq(out[0], 12345.0f, "nothing written on error");
    ids[4] = -1;
    cr_assert_eq(kref_embed(table, vocab, dim, ids, n, out), -1);
    free(table); free(out);
}

/* ---- greedy verification ------------------------------------------------- */

Test(kernels_ref, argmax_first_max_skips_nan)
{
    float rows[4][6] = {
        {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f},   /* tie: first wins */
        {NAN, -3.0f, NAN, -2.0f, -2.5f, -9.0f},  /* NaN skipped */
        {NAN, NAN, NAN, NAN, NAN, NAN},          /* all NaN: 0 */
        {-INFINITY, -INFINITY, -5.0f, 7.0f, 7.5f, 7.25f},
    };
    int out[4];
    kref_argmax(&rows[0][0], 4, 6, out);
    cr_assert_eq(out[0], 1);
    cr_assert_eq(out[1], 3);
    cr_assert_eq(out[2], 0);
    cr_assert_eq(out[3], 4);
    /* random rows against a plain scan */
    int vocab = 1000;
    float *x = rand_vec((size_t)8 * vocab, 1.0);
    int got[8];
    kref_argmax(x, 8, vocab, got);
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < vocab; i++) {
            cr_assert(x[r * vocab + i] <= x[r * vocab + got[r]]);
            if (i < got[r])
                cr_assert(x[r * vocab + i] < x[r * vocab + got[r]]);
        }
    free(x);
}

typedef struct accept_case {
    int draft[4];
    int target[5];
    int want_accept;
} accept_case;

ParameterizedTestParameters(kernels_ref, greedy_accept_table)
{
    static accept_case cases[] = {
        {{5, 6, 7, 8}, {5, 6, 7, 8, 9}, 4}, /* all accepted + bonus */
        {{5, 6, 7, 8}, {1, 6, 7, 8, 9}, 0}, /* first rejected: bonus only */
        {{5, 6, 7, 8}, {5, 6, 0, 8, 9}, 2}, /* later matches do not count */
        {{5, 5, 5, 5}, {5, 5, 5, 4, 5}, 3},
        {{0, 1, 2, 3}, {0, 2, 2, 3, 3}, 1},
    };
    return cr_make_param_array(accept_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(accept_case *c, kernels_ref, greedy_accept_table)
{
    int n_acc = -1, out[5];
    kref_greedy_accept(c->draft, c->target, 1, 4, &n_acc, out);
    cr_assert_eq(n_acc, c->want_accept);
    for (int j = 0; j <= 4; j++)
        cr_assert_eq(out[j], j <= n_acc ? c->target[j] : -1, "token %d", j);
}

Test(kernels_ref, greedy_accept_batch_rows_independent)
{
    int draft[3 * 2] = {1, 2, 3, 4, 5, 6};
    int target[3 * 3] = {1, 2, 9, 0, 4, 4, 5, 7, 7};
    int acc[3], out[3 * 3];
    kref_greedy_accept(draft, target, 3, 2, acc, out);
    cr_assert_eq(acc[0], 2);
    cr_assert_eq(acc[1], 0);
    cr_assert_eq(acc[2], 1);
    int want[9] = {1, 2, 9, 0, -1, -1, 5, 7, -1};
    for (int i = 0; i < 9; i++)
        cr_assert_eq(out[i], want[i], "index %d", i);
}

/* ---- the GPU side of the chain ------------------------------------------- */

Test(kernels_ref, gpu_kernels_match_references, .timeout = 600)
{
    const char *bin = "build/tailsim-validate";
    if (access(bin, X_OK) != 0)
        cr_skip_test("%s not built (make validate needs nvcc)", bin);
    int st = system("build/tailsim-validate selftest > build/selftest.log 2>&1");
    cr_assert(st != -1 && WIFEXITED(st), "could not run %s", bin);
    if (WEXITSTATUS(st) == 77)
        cr_skip_test("no CUDA device");
    cr_assert_eq(WEXITSTATUS(st), 0, "%s selftest failed (exit %d): see build/selftest.log",
                 bin, WEXITSTATUS(st));
}
