/*
 * Tests of the training references (kernels/ref/kref_train.c): every
 * backward is checked against central finite differences of its forward
 * reference, on seeded random inputs (never zeros).  The loss is
 * L = sum(g * f(inputs)) for a fixed random g, summed in double; each check
 * perturbs a random sample of input coordinates by +-h (h = 1e-2, inputs of
 * magnitude ~1) and compares (L+ - L-) / 2h with the analytic gradient.
 * Tolerance 2e-3 + 2e-2 * |analytic|: the truncation error is O(h^2) and
 * the float rounding of the forward outputs, divided by 2h, stays below
 * ~5e-4 at these sizes.  round = 0 everywhere (exact float math), except
 * the last test, which bounds how far bf16 emulation moves the results.
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
    rng = ts_rng_new(20250301, 7);
    cr_assert_not_null(rng);
}

static void teardown(void)
{
    gsl_rng_free(rng);
    rng = NULL;
}

TestSuite(kernels_train, .init = setup, .fini = teardown);

static float *rand_vec(size_t n, double scale)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < n; i++) {
        double u = gsl_rng_uniform_pos(rng) * 2.0 - 1.0;
        x[i] = (float)((u == 0.0 ? 0.5 : u) * scale);
    }
    return x;
}

static float *zeros(size_t n)
{
    float *x = calloc(n ? n : 1, sizeof *x);
    cr_assert_not_null(x);
    return x;
}

static double dot(const float *g, const float *y, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * y[i];
    return s;
}

#define FD_H 1e-2
#define FD_ABS 2e-3
#define FD_REL 2e-2
#define FD_SAMPLES 12

/* The function under test: evaluates L at the current inputs. */
typedef double (*loss_fn)(void *ctx);

/* Checks grad[i] against finite differences of fn at FD_SAMPLES random
 * coordinates of x (n values), which fn reads through ctx. */
static void fd_check(const char *what, loss_fn fn, void *ctx, float *x, size_t n,
                     const float *grad)
{
    for (int s = 0; s < FD_SAMPLES; s++) {
        size_t i = (size_t)gsl_rng_uniform_int(rng, (unsigned long)n);
        float x0 = x[i];
        x[i] = (float)(x0 + FD_H);
        double hp = (double)x[i] - x0, lp = fn(ctx);
        x[i] = (float)(x0 - FD_H);
        double hm = x0 - (double)x[i], lm = fn(ctx);
        x[i] = x0;
        double fd = (lp - lm) / (hp + hm);
        cr_assert(fabs(fd - grad[i]) <= FD_ABS + FD_REL * fabs(grad[i]),
                  "%s: index %zu: finite difference %.6g, backward %.6g", what, i, fd,
                  (double)grad[i]);
    }
}

/* ---- GEMM ---------------------------------------------------------------- */

Test(kernels_train, gemm_tn_is_transpose_then_nn)
{
    int m = 7, n = 11, k = 19;
    float *A = rand_vec((size_t)k * m, 1.0), *B = rand_vec((size_t)k * n, 1.0);
    float *At = zeros((size_t)m * k), *C1 = zeros((size_t)m * n), *C2 = zeros((size_t)m * n);
    for (int l = 0; l < k; l++)
        for (int i = 0; i < m; i++)
            At[(size_t)i * k + l] = A[(size_t)l * m + i];
    kref_gemm_tn(A, B, C1, m, n, k);
    kref_gemm_nn(At, B, C2, m, n, k);
    for (int i = 0; i < m * n; i++)
        cr_assert_float_eq(C1[i], C2[i], 1e-5, "index %d", i);
    free(A); free(B); free(At); free(C1); free(C2);
}

/* ---- RMSNorm -------------------------------------------------------------- */

typedef struct { float *x, *w, *g, *y; int rows, dim; } norm_ctx;

static double norm_loss(void *p)
{
    norm_ctx *c = p;
    kref_rmsnorm(c->x, c->w, c->y, c->rows, c->dim, 1e-6f);
    return dot(c->g, c->y, (size_t)c->rows * c->dim);
}

Test(kernels_train, rmsnorm_bwd_matches_finite_differences)
{
    norm_ctx c = {rand_vec(5 * 48, 2.0), rand_vec(48, 1.0), rand_vec(5 * 48, 1.0),
                  zeros(5 * 48), 5, 48};
    float *dx = zeros(5 * 48), *dw = zeros(48);
    kref_rmsnorm_bwd(c.x, c.w, c.g, 5, 48, 1e-6f, dx, dw);
    fd_check("rmsnorm dx", norm_loss, &c, c.x, 5 * 48, dx);
    fd_check("rmsnorm dw", norm_loss, &c, c.w, 48, dw);
    free(c.x); free(c.w); free(c.g); free(c.y); free(dx); free(dw);
}

/* ---- SwiGLU --------------------------------------------------------------- */

typedef struct { float *gu, *g, *y; int rows, ffn; } swiglu_ctx;

static double swiglu_loss(void *p)
{
    swiglu_ctx *c = p;
    kref_swiglu(c->gu, c->y, c->rows, c->ffn);
    return dot(c->g, c->y, (size_t)c->rows * c->ffn);
}

Test(kernels_train, swiglu_bwd_matches_finite_differences)
{
    swiglu_ctx c = {rand_vec(4 * 2 * 40, 4.0), rand_vec(4 * 40, 1.0), zeros(4 * 40), 4, 40};
    float *dgu = zeros(4 * 2 * 40);
    kref_swiglu_bwd(c.gu, c.g, 4, 40, dgu);
    fd_check("swiglu", swiglu_loss, &c, c.gu, 4 * 2 * 40, dgu);
    free(c.gu); free(c.g); free(c.y); free(dgu);
}

/* ---- RoPE ----------------------------------------------------------------- */

Test(kernels_train, rope_bwd_is_the_transpose_and_the_inverse)
{
    enum { T = 6, H = 3, HD = 16 };
    int pos[T] = {0, 1, 17, 300, 4095, 70000};
    size_t n = (size_t)T * H * HD;
    float *x = rand_vec(n, 1.0), *g = rand_vec(n, 1.0);
    float *rx = malloc(n * sizeof *rx), *rg = malloc(n * sizeof *rg);
    cr_assert(rx && rg);
    memcpy(rx, x, n * sizeof *x);
    memcpy(rg, g, n * sizeof *g);
    kref_rope(rx, pos, T, H, HD, KREF_QWEN25_ROPE_THETA);
    kref_rope_bwd(rg, pos, T, H, HD, KREF_QWEN25_ROPE_THETA);
    /* <g, R x> = <R^T g, x> */
    double a = dot(g, rx, n), b = dot(rg, x, n);
    cr_assert(fabs(a - b) <= 1e-5 * (1.0 + fabs(a)), "<g,Rx> %.9g <R'g,x> %.9g", a, b);
    kref_rope_bwd(rx, pos, T, H, HD, KREF_QWEN25_ROPE_THETA); /* R^T R = I */
    for (size_t i = 0; i < n; i++)
        cr_assert_float_eq(rx[i], x[i], 1e-5, "index %zu", i);
    free(x); free(g); free(rx); free(rg);
}

/* ---- attention ------------------------------------------------------------ */

typedef struct {
    float *q, *k, *v, *g, *y;
    const int *ctx, *q_len;
    int b, heads, kv_heads, hd;
    size_t nq;
} attn_ctx;

static double attn_loss(void *p)
{
    attn_ctx *c = p;
    cr_assert_eq(kref_chunk_attn(c->q, c->k, c->v, c->ctx, c->q_len, c->b, c->heads,
                                 c->kv_heads, c->hd, c->y), 0);
    return dot(c->g, c->y, c->nq);
}

Test(kernels_train, chunk_attn_bwd_matches_finite_differences)
{
    /* GQA (G = 3), a cached prefix before the chunk, and a full prefill */
    static const int ctx[2] = {9, 6}, q_len[2] = {4, 6};
    enum { H = 6, K = 2, HD = 8, TQ = 10, TK = 15 };
    attn_ctx c = {rand_vec(TQ * H * HD, 2.0), rand_vec(TK * K * HD, 2.0),
                  rand_vec(TK * K * HD, 1.0), rand_vec(TQ * H * HD, 1.0),
                  zeros(TQ * H * HD), ctx, q_len, 2, H, K, HD, TQ * H * HD};
    float *dq = zeros(TQ * H * HD), *dk = zeros(TK * K * HD), *dv = zeros(TK * K * HD);
    cr_assert_eq(kref_chunk_attn_bwd(c.q, c.k, c.v, c.g, ctx, q_len, 2, H, K, HD, dq, dk, dv),
                 0);
    fd_check("attention dq", attn_loss, &c, c.q, TQ * H * HD, dq);
    fd_check("attention dk", attn_loss, &c, c.k, TK * K * HD, dk);
    fd_check("attention dv", attn_loss, &c, c.v, TK * K * HD, dv);
    /* cached positions no query sees get no gradient: none here, all are
     * visible to the last query; keys after a query's position give it none */
    int bad[2] = {9, 7};
    cr_assert_eq(kref_chunk_attn_bwd(c.q, c.k, c.v, c.g, ctx, bad, 2, H, K, HD, dq, dk, dv),
                 -1);
    free(c.q); free(c.k); free(c.v); free(c.g); free(c.y); free(dq); free(dk); free(dv);
}

/* ---- a whole layer -------------------------------------------------------- */

enum { LD = 32, LH = 4, LK = 2, LHD = 8, LF = 40, LT = 9 };
static const int LENS[2] = {6, 3};
#define LQKV ((LH + 2 * LK) * LHD)

typedef struct {
    kref_shape s;
    float *ln1, *wqkv, *bqkv, *wo, *ln2, *wgu, *wdown;
    float *x, *g, *y, *abuf;
    kref_acts a;
} layer_ctx;

static kref_layer_w layer_w(const layer_ctx *c)
{
    kref_layer_w w = {c->ln1, c->wqkv, c->bqkv, c->wo, c->ln2, c->wgu, c->wdown};
    return w;
}

static double layer_loss(void *p)
{
    layer_ctx *c = p;
    kref_layer_w w = layer_w(c);
    cr_assert_eq(kref_train_layer_fwd(&c->s, &w, LENS, 2, c->x, &c->a, c->y, 0), 0);
    return dot(c->g, c->y, (size_t)LT * LD);
}

static void layer_init(layer_ctx *c)
{
    kref_shape s = {LD, LH, LK, LHD, LF, 0, 1e-6f, 10000.0};
    c->s = s;
    c->ln1 = rand_vec(LD, 1.0);
    c->wqkv = rand_vec((size_t)LQKV * LD, sqrt(3.0 / LD));
    c->bqkv = rand_vec(LQKV, 0.5);
    c->wo = rand_vec((size_t)LD * LH * LHD, sqrt(3.0 / (LH * LHD)));
    c->ln2 = rand_vec(LD, 1.0);
    c->wgu = rand_vec((size_t)2 * LF * LD, sqrt(3.0 / LD));
    c->wdown = rand_vec((size_t)LD * LF, sqrt(3.0 / LF));
    c->x = rand_vec((size_t)LT * LD, 1.0);
    c->g = rand_vec((size_t)LT * LD, 1.0);
    c->y = zeros((size_t)LT * LD);
    c->abuf = zeros(kref_acts_floats(&c->s, LT));
    kref_acts_carve(&c->s, LT, c->abuf, &c->a);
}

static void layer_fini(layer_ctx *c)
{
    free(c->ln1); free(c->wqkv); free(c->bqkv); free(c->wo); free(c->ln2); free(c->wgu);
    free(c->wdown); free(c->x); free(c->g); free(c->y); free(c->abuf);
}

Test(kernels_train, layer_bwd_matches_finite_differences)
{
    layer_ctx c;
    layer_init(&c);
    kref_layer_g g = {zeros(LD), zeros((size_t)LQKV * LD), zeros(LQKV),
                      zeros((size_t)LD * LH * LHD), zeros(LD), zeros((size_t)2 * LF * LD),
                      zeros((size_t)LD * LF)};
    float *dx = zeros((size_t)LT * LD);
    layer_loss(&c); /* fills the activations */
    kref_layer_w w = layer_w(&c);
    cr_assert_eq(kref_train_layer_bwd(&c.s, &w, LENS, 2, &c.a, c.g, dx, &g, 0), 0);
    fd_check("layer dx", layer_loss, &c, c.x, (size_t)LT * LD, dx);
    fd_check("layer d ln1", layer_loss, &c, c.ln1, LD, g.ln1);
    fd_check("layer d wqkv", layer_loss, &c, c.wqkv, (size_t)LQKV * LD, g.wqkv);
    fd_check("layer d bqkv", layer_loss, &c, c.bqkv, LQKV, g.bqkv);
    fd_check("layer d wo", layer_loss, &c, c.wo, (size_t)LD * LH * LHD, g.wo);
    fd_check("layer d ln2", layer_loss, &c, c.ln2, LD, g.ln2);
    fd_check("layer d wgu", layer_loss, &c, c.wgu, (size_t)2 * LF * LD, g.wgu);
    fd_check("layer d wdown", layer_loss, &c, c.wdown, (size_t)LD * LF, g.wdown);
    /* gradients accumulate: a second backward doubles them */
    float ln1_0 = g.ln1[3], wo_0 = g.wo[17];
    cr_assert_eq(kref_train_layer_bwd(&c.s, &w, LENS, 2, &c.a, c.g, dx, &g, 0), 0);
    cr_assert_float_eq(g.ln1[3], 2 * ln1_0, 1e-5 * (1 + fabsf(ln1_0)));
    cr_assert_float_eq(g.wo[17], 2 * wo_0, 1e-5 * (1 + fabsf(wo_0)));
    free(g.ln1); free(g.wqkv); free(g.bqkv); free(g.wo); free(g.ln2); free(g.wgu);
    free(g.wdown); free(dx);
    layer_fini(&c);
}

Test(kernels_train, training_forward_equals_the_inference_layer)
{
    /* the packed training forward is the cached layer forward from empty caches */
    layer_ctx c;
    layer_init(&c);
    kref_layer_w w = layer_w(&c);
    float *x = malloc((size_t)LT * LD * sizeof *x);
    float *kc = zeros((size_t)LT * LK * LHD), *vc = zeros((size_t)LT * LK * LHD);
    cr_assert_not_null(x);
    memcpy(x, c.x, (size_t)LT * LD * sizeof *x);
    static const long long off[2] = {0, 6};
    static const int len0[2] = {0, 0};
    kref_kv kv = {kc, vc, off};
    kref_batch bt = {2, len0, LENS, NULL};
    cr_assert_eq(kref_layer_forward(&c.s, &w, &bt, &kv, x, 0), 0);
    layer_loss(&c);
    for (int i = 0; i < LT * LD; i++)
        cr_assert_float_eq(x[i], c.y[i], 1e-5 * (1 + fabsf(c.y[i])), "index %d", i);
    for (int i = 0; i < LT * LK * LHD; i++) {
        cr_assert_eq(kc[i], c.a.k[i], "k cache %d", i);
        cr_assert_eq(vc[i], c.a.v[i], "v cache %d", i);
    }
    free(x); free(kc); free(vc);
    layer_fini(&c);
}

Test(kernels_train, bf16_emulation_stays_within_a_few_eps)
{
    layer_ctx c;
    layer_init(&c);
    kref_layer_w w = layer_w(&c);
    kref_round_bf16(c.x, (size_t)LT * LD);
    float *y0 = zeros((size_t)LT * LD), *buf1 = zeros(kref_acts_floats(&c.s, LT));
    float *dx0 = zeros((size_t)LT * LD), *dx1 = zeros((size_t)LT * LD);
    float *gw0 = zeros((size_t)LD * LF), *gw1 = zeros((size_t)LD * LF);
    float *s0 = zeros(4 * (size_t)LQKV * LD); /* scratch gradients */
    kref_acts a1;
    kref_acts_carve(&c.s, LT, buf1, &a1);
    cr_assert_eq(kref_train_layer_fwd(&c.s, &w, LENS, 2, c.x, &c.a, y0, 0), 0);
    cr_assert_eq(kref_train_layer_fwd(&c.s, &w, LENS, 2, c.x, &a1, c.y, 1), 0);
    double e = 0, r = 0;
    for (int i = 0; i < LT * LD; i++) {
        e += (c.y[i] - y0[i]) * (double)(c.y[i] - y0[i]);
        r += (double)y0[i] * y0[i];
    }
    cr_assert(sqrt(e / r) < 4 * KREF_BF16_EPS, "forward rms relative error %.3g", sqrt(e / r));
    kref_layer_g g0 = {s0, s0, s0, s0, s0, s0, gw0}, g1 = {s0, s0, s0, s0, s0, s0, gw1};
    cr_assert_eq(kref_train_layer_bwd(&c.s, &w, LENS, 2, &c.a, c.g, dx0, &g0, 0), 0);
    cr_assert_eq(kref_train_layer_bwd(&c.s, &w, LENS, 2, &a1, c.g, dx1, &g1, 1), 0);
    double ex = 0, rx = 0, ew = 0, rw = 0;
    for (int i = 0; i < LT * LD; i++) {
        ex += (dx1[i] - dx0[i]) * (double)(dx1[i] - dx0[i]);
        rx += (double)dx0[i] * dx0[i];
    }
    for (int i = 0; i < LD * LF; i++) {
        ew += (gw1[i] - gw0[i]) * (double)(gw1[i] - gw0[i]);
        rw += (double)gw0[i] * gw0[i];
    }
    cr_assert(sqrt(ex / rx) < 4 * KREF_BF16_EPS, "dx rms relative error %.3g", sqrt(ex / rx));
    cr_assert(sqrt(ew / rw) < 4 * KREF_BF16_EPS, "dwdown rms relative error %.3g",
              sqrt(ew / rw));
    free(y0); free(buf1); free(dx0); free(dx1); free(gw0); free(gw1); free(s0);
    layer_fini(&c);
}
