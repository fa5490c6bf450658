/*
 * `calibrate` sweeps of the composite kernels (kernels/layer.cu, drafter.cu,
 * train.cu), for the model configurations calibrate.c chose (TP-local
 * shapes of Qwen2.5-7B and -32B): see validate.h for the row columns.
 *
 *   layer            layer_decode: batch 1..512 x uniform contexts, and a
 *                    long-tail mix (one 65536-token sequence among 1024-token
 *                    ones); layer_chunk: verification of V in {1,8,16,32,48}
 *                    draft tokens over contexts 1k..32k, and prefill chunks
 *                    of 256..4096 tokens after 0 or 8192 cached.  One layer
 *                    of random weights, a KV cache of random contents.
 *   drafter          drafter_step at depth 1 (the frontier of topk rows per
 *                    sequence), TLT's topk 4 and a chain (topk 1), batch
 *                    1..32 (speculation runs in the tail), contexts 2k..32k.
 *   train            train_fwd, train_fwd_bwd, train_fwd_bwd_recompute of a
 *                    two-layer stack on micro-batches of 4096 tokens (8192
 *                    in the full sweep) made of sequences of 512..8192
 *                    tokens; peak_bytes is the trainer's tracked memory.
 *
 * Time of --quick (estimated from FLOPs and bytes at the H200's ceilings,
 * not yet measured): each row is 2 warm-ups + 7 repeats of <= 35 ms plus
 * ~10 ms of setup (cache fill, attention plan), except the training rows
 * (~25-35 ms per fwd+bwd of 2 layers of 7B at 4096 tokens) and one trainer
 * (~4 GB of allocations) per shape: about 2 s for layer, 2 s for drafter
 * (two models with 1 GB LM heads to create and fill), 8 s for train; ~12 s
 * in all for the two quick configurations.
 */
#include "validate/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static kt_model_shape shape_of(const vcfg *v, int layers, int with_head)
{
    kt_model_shape s = {layers, v->m->hidden, v->heads, v->kv, v->m->hd, v->ffn,
                        with_head ? v->vocab : 0, v->m->qkv_bias, 1e-6f, 1e6};
    return s;
}

/* one configuration per distinct TP-local shape */
static int distinct(const calib *c, int i)
{
    for (int j = 0; j < i; j++)
        if (c->cfgs[j].m == c->cfgs[i].m && c->cfgs[j].tp == c->cfgs[i].tp)
            return 0;
    return 1;
}

/* ---- one layer ----------------------------------------------------------- */

typedef struct layer_arg {
    kt_step *st;
} layer_arg;

static int launch_layer(void *p)
{
    return kt_step_layer(((layer_arg *)p)->st, 0);
}

/* FLOPs of one layer over T new tokens attending `pairs` (query, key) pairs. */
static double layer_flops(const kt_model_shape *s, double T, double pairs)
{
    const double D = s->hidden, qw = (double)s->heads * s->head_dim;
    const double nq = (double)(s->heads + 2 * s->kv_heads) * s->head_dim;
    return 2.0 * T * (D * nq + qw * D + 3.0 * D * s->ffn) + 4.0 * qw * pairs;
}

/* Times one layer step: ctx[i] tokens in sequence i after the step, q[i]
 * of them new (q NULL: decode).  Skips batches over the KV cap. */
static int time_layer(calib *c, const vcfg *v, kt_model *m, const int *ctx, const int *q, int b)
{
    double ctx_sum = 0, ctx_max = 0, pairs = 0;
    for (int i = 0; i < b; i++) {
        const double qn = q ? q[i] : 1;
        ctx_sum += ctx[i];
        ctx_max = ctx[i] > ctx_max ? ctx[i] : ctx_max;
        pairs += qn * (ctx[i] - qn) + 0.5 * qn * (qn + 1);
    }
    if (ctx_sum > (double)c->cap_tokens)
        return 0;
    int *seqs = malloc(b * sizeof *seqs);
    if (!seqs)
        return ts_errf(&c->err, "out of host memory");
    for (int i = 0; i < b; i++)
        seqs[i] = i;
    kt_kv *kv = kt_kv_new(m, b, ctx);
    layer_arg a = {NULL};
    int rc = -1;
    for (int i = 0; kv && i < b; i++)
        if (kt_kv_set_len(kv, i, ctx[i] - (q ? q[i] : 1)))
            goto cleanup;
    if (kv)
        a.st = kt_step_plan(m, kv, seqs, q, b, 0);
    if (!a.st || kt_fill_bf16(kt_step_hidden(a.st), (size_t)kt_step_tokens(a.st) * v->m->hidden,
                              5, 1.0f)) {
        ts_errf(&c->err, "layer step (b=%d): %s", b, kt_error());
        goto cleanup;
    }
    const kt_model_shape s = shape_of(v, 1, 0);
    const double T = kt_step_tokens(a.st), kvw = (double)v->kv * v->m->hd;
    calib_row r = calib_row_init(q ? "layer_chunk" : "layer_decode");
    r.m = T;
    r.n = v->m->hidden;
    r.k = v->tp;
    r.batch = b;
    r.ctx_sum = ctx_sum;
    r.ctx_max = ctx_max;
    r.q_len = q ? q[0] : 1;
    r.flops = layer_flops(&s, T, pairs);
    r.bytes = (double)kt_model_layer_bytes(m) + 4.0 * kvw * ctx_sum +
              4.0 * T * (3.0 * v->m->hidden + 3.0 * v->ffn + 2.0 * v->heads * v->m->hd);
    rc = calib_measure(c, launch_layer, &a, &r);
cleanup:
    kt_step_free(a.st);
    kt_kv_free(kv);
    free(seqs);
    return rc;
}

static int layer_cases(calib *c, const vcfg *v, kt_model *m, int *ctx, int *q)
{
    static const int qb[] = {1, 8, 64, 256}, fb[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
    static const int qc[] = {1024, 16384}, fc[] = {256, 1024, 4096, 16384, 65536};
    const int *bs = c->quick ? qb : fb, *cs = c->quick ? qc : fc;
    const int nb = c->quick ? (int)NELEM(qb) : (int)NELEM(fb);
    const int nc = c->quick ? (int)NELEM(qc) : (int)NELEM(fc);
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nc; j++) {
            for (int s = 0; s < bs[i]; s++)
                ctx[s] = cs[j];
            if (time_layer(c, v, m, ctx, NULL, bs[i]))
                return -1;
        }
    for (int s = 0; s < 32; s++) /* the long tail: one long sequence among short */
        ctx[s] = s == 0 ? 65536 : 1024;
    if (time_layer(c, v, m, ctx, NULL, 32))
        return -1;
    static const int V[] = {1, 8, 16, 32, 48}, qvb[] = {1, 16}, fvb[] = {1, 4, 16, 32};
    static const int qvc[] = {4096}, fvc[] = {1024, 8192, 32768};
    const int *vb = c->quick ? qvb : fvb, *vc = c->quick ? qvc : fvc;
    const int nvb = c->quick ? (int)NELEM(qvb) : (int)NELEM(fvb);
    const int nvc = c->quick ? (int)NELEM(qvc) : (int)NELEM(fvc);
    for (size_t iv = c->quick ? 1 : 0; iv < NELEM(V); iv++)
        for (int i = 0; i < nvb; i++)
            for (int j = 0; j < nvc; j++) {
                for (int s = 0; s < vb[i]; s++) {
                    ctx[s] = vc[j] + V[iv];
                    q[s] = V[iv];
                }
                if (time_layer(c, v, m, ctx, q, vb[i]))
                    return -1;
            }
    static const int qp[] = {512, 2048}, fp[] = {256, 512, 1024, 2048, 4096};
    static const int qbefore[] = {0}, fbefore[] = {0, 8192};
    const int *ps = c->quick ? qp : fp, *before = c->quick ? qbefore : fbefore;
    const int np = c->quick ? (int)NELEM(qp) : (int)NELEM(fp);
    const int nbf = c->quick ? (int)NELEM(qbefore) : (int)NELEM(fbefore);
    for (int i = 0; i < np; i++)
        for (int j = 0; j < nbf; j++) {
            ctx[0] = before[j] + ps[i];
            q[0] = ps[i];
            if (time_layer(c, v, m, ctx, q, 1))
                return -1;
        }
    return 0;
}

int calib_sweep_layer(calib *c)
{
    int *ctx = malloc(512 * sizeof *ctx), *q = malloc(512 * sizeof *q), rc = 0;
    if (!ctx || !q) {
        free(ctx);
        free(q);
        return ts_errf(&c->err, "out of host memory");
    }
    for (int i = 0; rc == 0 && i < c->ncfg; i++) {
        if (!distinct(c, i))
            continue;
        const kt_model_shape s = shape_of(&c->cfgs[i], 1, 0);
        kt_model *m = kt_model_new(&s, 100 + i);
        if (!m)
            rc = ts_errf(&c->err, "%s TP %d layer: %s", c->cfgs[i].m->name, c->cfgs[i].tp,
                         kt_error());
        else
            rc = layer_cases(c, &c->cfgs[i], m, ctx, q);
        kt_model_free(m);
    }
    free(ctx);
    free(q);
    return rc;
}

/* ---- the drafter --------------------------------------------------------- */

typedef struct draft_arg {
    kt_draft *p;
} draft_arg;

static int launch_draft(void *p)
{
    return kt_draft_step(((draft_arg *)p)->p, 1);
}

static int time_draft(calib *c, const vcfg *v, kt_model *tg, kt_drafter *d, int b, int ctx,
                      int topk)
{
    const int depth = 2, rows = b * topk, D = v->m->hidden;
    int *cap = malloc(b * sizeof *cap), *seqs = malloc(b * sizeof *seqs);
    int *tok = malloc(b * sizeof *tok), *d_tok = kt_malloc(b * sizeof *tok);
    kt_bf16 *d_h = kt_malloc((size_t)b * D * 2);
    kt_kv *kv = NULL;
    draft_arg a = {NULL};
    int rc = -1;
    if (!cap || !seqs || !tok || !d_tok || !d_h) {
        ts_errf(&c->err, "drafter buffers: %s", kt_error());
        goto cleanup;
    }
    for (int i = 0; i < b; i++) {
        cap[i] = ctx + 1 + depth * topk;
        seqs[i] = i;
        tok[i] = (int)(ts_splitmix64((uint64_t)i) % (uint64_t)v->vocab);
    }
    kv = kt_drafter_kv_new(d, b, cap);
    for (int i = 0; kv && i < b; i++)
        if (kt_kv_set_len(kv, i, ctx))
            goto cleanup;
    if (kv)
        a.p = kt_draft_plan(d, kv, seqs, b, depth, topk);
    if (!a.p || kt_upload(d_tok, tok, b * sizeof *tok) ||
        kt_fill_bf16(d_h, (size_t)b * D, 9, 1.0f) || kt_draft_input(a.p, d_tok, d_h) ||
        kt_draft_run(a.p, NULL, NULL, NULL)) {
        ts_errf(&c->err, "draft (b=%d ctx=%d topk=%d): %s", b, ctx, topk, kt_error());
        goto cleanup;
    }
    const kt_model_shape s = shape_of(v, 1, 1);
    const double kvw = (double)v->kv * v->m->hd, cs = (double)b * (ctx + 1 + topk);
    calib_row r = calib_row_init("drafter_step");
    r.m = rows;
    r.n = D;
    r.k = v->tp;
    r.batch = b;
    r.ctx_sum = cs;
    r.ctx_max = ctx + 1 + topk;
    r.q_len = topk;
    r.flops = layer_flops(&s, rows, cs * topk) + 2.0 * rows * (2.0 * D * D + (double)D * v->vocab);
    r.bytes = (double)kt_model_layer_bytes(tg) + 4.0 * D * D + 2.0 * D * (double)v->vocab +
              4.0 * rows * (double)v->vocab + 4.0 * kvw * cs;
    rc = calib_measure(c, launch_draft, &a, &r);
cleanup:
    kt_draft_free(a.p);
    kt_kv_free(kv);
    kt_free(d_tok);
    kt_free(d_h);
    free(cap); free(seqs); free(tok);
    return rc;
}

int calib_sweep_drafter(calib *c)
{
    static const int qb[] = {1, 8, 32}, fb[] = {1, 2, 4, 8, 16, 32};
    static const int qc[] = {2048, 16384}, fc[] = {2048, 8192, 16384, 32768};
    const int *bs = c->quick ? qb : fb, *cs = c->quick ? qc : fc;
    const int nb = c->quick ? (int)NELEM(qb) : (int)NELEM(fb);
    const int nc = c->quick ? (int)NELEM(qc) : (int)NELEM(fc);
    int rc = 0;
    for (int i = 0; rc == 0 && i < c->ncfg; i++) {
        if (!distinct(c, i))
            continue;
        const vcfg *v = &c->cfgs[i];
        const kt_model_shape s = shape_of(v, 1, 1);
        kt_model *tg = kt_model_new(&s, 200 + i);
        kt_drafter *d = tg ? kt_drafter_new(tg, 300 + i) : NULL;
        if (!d)
            rc = ts_errf(&c->err, "%s TP %d drafter: %s", v->m->name, v->tp, kt_error());
        for (int j = 0; rc == 0 && j < nb; j++)
            for (int k = 0; rc == 0 && k < nc; k++)
                rc = time_draft(c, v, tg, d, bs[j], cs[k], 4);
        for (int j = 0; rc == 0 && j < nb; j++) /* chains at the shortest context */
            rc = time_draft(c, v, tg, d, bs[j], cs[0], 1);
        kt_drafter_free(d);
        kt_model_free(tg);
    }
    return rc;
}

/* ---- training ------------------------------------------------------------ */

typedef struct train_arg {
    kt_train *t;
    kt_bf16 *x, *y, *dy, *dx;
    int backward;
} train_arg;

static int launch_train(void *p)
{
    train_arg *a = p;
    if (kt_train_forward(a->t, a->x, a->y))
        return -1;
    return a->backward ? kt_train_backward(a->t, a->dy, a->dx) : 0;
}

static int time_train(calib *c, const vcfg *v, kt_model *m, train_arg *a, int T, int L)
{
    const int n = T / L, layers = 2;
    int *lens = malloc(n * sizeof *lens), rc = 0;
    if (!lens)
        return ts_errf(&c->err, "out of host memory");
    for (int i = 0; i < n; i++)
        lens[i] = L;
    static const char *ops[3] = {"train_fwd", "train_fwd_bwd", "train_fwd_bwd_recompute"};
    for (int op = 0; rc == 0 && op < 3; op++) {
        a->t = kt_train_new(m, lens, n, op == 2);
        a->backward = op > 0;
        if (!a->t) {
            rc = ts_errf(&c->err, "trainer (T=%d L=%d): %s", T, L, kt_error());
            break;
        }
        kt_train_mem mem;
        kt_train_memory(a->t, &mem);
        calib_row r = calib_row_init(ops[op]);
        r.m = T;
        r.n = v->m->hidden;
        r.k = v->tp;
        r.batch = n;
        r.ctx_sum = T;
        r.ctx_max = L;
        r.q_len = layers;
        r.flops = kt_train_flops(a->t, op > 0);
        /* napkin bytes: weights read once per pass (forward, backward's dX
         * and dW, the recomputed forward), fp32 gradients read and written,
         * saved activations written (and read back by the backward) */
        const double passes = op == 0 ? 1 : op == 1 ? 3 : 4;
        r.bytes = passes * mem.weights + (op ? 2.0 * mem.grads : 0) +
                  (op ? 2.0 : 1.0) * mem.activations;
        r.peak_bytes = (double)mem.total;
        rc = calib_measure(c, launch_train, a, &r);
        kt_train_memory(a->t, &mem);
        if (rc == 0)
            printf("  %s: tracked %.2f GiB (weights %.2f, grads %.2f, activations %.2f, "
                   "scratch %.2f); device in use %.2f GiB\n", ops[op], mem.total / 1073741824.0,
                   mem.weights / 1073741824.0, mem.grads / 1073741824.0,
                   mem.activations / 1073741824.0, mem.scratch / 1073741824.0,
                   mem.device_used / 1073741824.0);
        kt_train_free(a->t);
        a->t = NULL;
    }
    free(lens);
    return rc;
}

int calib_sweep_train(calib *c)
{
    static const int qT[] = {4096}, fT[] = {4096, 8192};
    static const int qL[] = {512, 2048, 4096}, fL[] = {256, 512, 1024, 2048, 4096, 8192};
    const int *Ts = c->quick ? qT : fT, *Ls = c->quick ? qL : fL;
    const int nT = c->quick ? (int)NELEM(qT) : (int)NELEM(fT);
    const int nL = c->quick ? (int)NELEM(qL) : (int)NELEM(fL);
    int rc = 0;
    for (int i = 0; rc == 0 && i < c->ncfg; i++) {
        if (!distinct(c, i))
            continue;
        const vcfg *v = &c->cfgs[i];
        const kt_model_shape s = shape_of(v, 2, 0);
        const size_t nx = (size_t)8192 * v->m->hidden;
        kt_model *m = kt_model_new(&s, 400 + i);
        train_arg a = {NULL, calib_dev_random(c, nx, 41), kt_malloc(nx * 2),
                       calib_dev_random(c, nx, 42), kt_malloc(nx * 2), 0};
        if (!m || !a.x || !a.y || !a.dy || !a.dx)
            rc = ts_errf(&c->err, "%s TP %d trainer setup: %s", v->m->name, v->tp, kt_error());
        for (int j = 0; rc == 0 && j < nT; j++)
            for (int k = 0; rc == 0 && k < nL; k++)
                if (Ls[k] <= Ts[j])
                    rc = time_train(c, v, m, &a, Ts[j], Ls[k]);
        kt_free(a.x); kt_free(a.y); kt_free(a.dy); kt_free(a.dx);
        kt_model_free(m);
    }
    return rc;
}
