/*
 * The sweeps of `calibrate` over the simple ops, for the model
 * configurations calibrate.c chose (TP-local shapes of Qwen2.5-7B and -32B):
 * the copy ceiling (copy), the host link (h2d, d2h), GEMM (gemm, gemm_peak),
 * attention (decode_attn, chunk_attn), the row-wise ops (rmsnorm, rope,
 * swiglu, embed) and greedy verification (verify_accept).  The shapes of
 * each are listed in the header of calibrate.c; the composite kernels are
 * in calib_model.c.  Each sweep allocates its device buffers (random bf16),
 * times every shape with calib_measure() and frees them; it returns 0, or -1
 * with c->err set at the first shape that fails.  The copy and GEMM sweeps
 * also record the ceilings (c->copy_bw, c->peak_flops) the printed fractions
 * are taken against.  Declared in calibrate_impl.h.
 */
#include "validate/calibrate_impl.h"

#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* ---- copy ceiling -------------------------------------------------------- */

typedef struct copy_arg { void *dst; const void *src; size_t bytes; } copy_arg;

static int launch_copy(void *p)
{
    copy_arg *a = p;
    return kt_copy(a->dst, a->src, a->bytes);
}

int sweep_copy(calib *c)
{
    size_t bytes = (size_t)1 << 30;
    copy_arg a = {kt_malloc(bytes), NULL, bytes};
    a.src = calib_dev_random(c, bytes / 2, 1);
    int rc = -1;
    if (a.dst && a.src) {
        calib_row r = calib_row_init("copy");
        r.m = (double)bytes;
        r.bytes = 2.0 * bytes;
        rc = calib_measure(c, launch_copy, &a, &r);
        if (rc == 0)
            c->copy_bw = r.bytes / (r.median_us * 1e-6);
    } else if (!a.dst) {
        ts_errf(&c->err, "copy buffer: %s", kt_error());
    }
    kt_free(a.dst);
    kt_free((void *)a.src);
    return rc;
}

/* ---- host link ----------------------------------------------------------- */

typedef struct host_arg { void *dev, *host; size_t bytes; int d2h; } host_arg;

static int launch_host(void *p)
{
    host_arg *a = p;
    return a->d2h ? kt_copy_d2h(a->host, a->dev, a->bytes) : kt_copy_h2d(a->dev, a->host, a->bytes);
}

/* Pinned host <-> device copies of 64 MiB and 1 GiB each way: the host link
 * a trainer that offloads its states uses (hw pcie_bw, sim/rlstep_mem.c). */
int sweep_host(calib *c)
{
    size_t most = (size_t)1 << 30;
    host_arg a = {kt_malloc(most), kt_host_malloc(most), 0, 0};
    int rc = -1;
    if (!a.dev || !a.host) {
        ts_errf(&c->err, "host-link buffers of %zu bytes: %s", most, kt_error());
        goto done;
    }
    memset(a.host, 0x5a, most);
    for (size_t bytes = (size_t)1 << 26; bytes <= most; bytes <<= 4)
        for (a.d2h = 0; a.d2h < 2; a.d2h++) {
            calib_row r = calib_row_init(a.d2h ? "d2h" : "h2d");
            a.bytes = bytes;
            r.m = (double)bytes;
            r.bytes = (double)bytes;
            if (calib_measure(c, launch_host, &a, &r))
                goto done;
        }
    rc = 0;
done:
    kt_free(a.dev);
    kt_host_free(a.host);
    return rc;
}

/* ---- GEMM ---------------------------------------------------------------- */

typedef struct gemm_arg { kt_gemm *g; kt_bf16 *A, *W, *C; } gemm_arg;

static int launch_gemm(void *p)
{
    gemm_arg *a = p;
    return kt_gemm_run(a->g, a->A, a->W, a->C);
}

static int time_gemm(calib *c, gemm_arg *a, const char *op, int m, int n, int k)
{
    if (kt_gemm_plan(a->g, m, n, k))
        return ts_errf(&c->err, "gemm %d x %d x %d: %s", m, n, k, kt_error());
    calib_row r = calib_row_init(op);
    r.m = m;
    r.n = n;
    r.k = k;
    r.flops = 2.0 * m * n * k;
    r.bytes = 2.0 * ((double)m * k + (double)n * k + (double)m * n);
    return calib_measure(c, launch_gemm, a, &r);
}

/* --algos-only: plans gemm_peak and every shape (the heuristic query that
 * kt_blas_algos records), allocating and timing nothing. */
static int plan_gemms(calib *c, const int *ms, int nm, const int (*shapes)[2], int ns)
{
    kt_gemm *g = kt_gemm_new();
    int rc = g ? 0 : ts_errf(&c->err, "gemm setup: %s", kt_error());
    if (rc == 0 && kt_gemm_plan(g, 8192, 8192, 8192))
        rc = ts_errf(&c->err, "gemm 8192 x 8192 x 8192: %s", kt_error());
    for (int s = 0; rc == 0 && s < ns; s++)
        for (int i = 0; rc == 0 && i < nm; i++)
            if (kt_gemm_plan(g, ms[i], shapes[s][0], shapes[s][1]))
                rc = ts_errf(&c->err, "gemm %d x %d x %d: %s", ms[i], shapes[s][0],
                             shapes[s][1], kt_error());
    kt_gemm_free(g);
    if (rc == 0)
        printf("gemm: %d shapes planned, none timed (--algos-only)\n", 1 + ns * nm);
    return rc;
}

int sweep_gemm(calib *c)
{
    static const int quick_m[] = {1, 8, 32, 128, 512, 2048, 4096};
    static const int full_m[] = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384,
                                 512, 768, 1024, 1536, 2048, 3072, 4096};
    const int *ms = c->quick ? quick_m : full_m;
    int nm = c->quick ? (int)NELEM(quick_m) : (int)NELEM(full_m), max_m = ms[nm - 1];
    int shapes[5 * 8][2], ns = 0;
    for (int i = 0; i < c->ncfg; i++) {
        const vcfg *v = &c->cfgs[i];
        const int h = v->m->hidden, d = v->m->hd;
        const int nk[5][2] = {{(v->heads + 2 * v->kv) * d, h}, {h, v->heads * d},
                              {2 * v->ffn, h}, {h, v->ffn}, {v->vocab, h}};
        for (int j = 0; j < 5; j++) {
            int dup = 0;
            for (int s = 0; s < ns; s++)
                dup |= shapes[s][0] == nk[j][0] && shapes[s][1] == nk[j][1];
            if (!dup) {
                shapes[ns][0] = nk[j][0];
                shapes[ns++][1] = nk[j][1];
            }
        }
    }
    if (c->algos_only)
        return plan_gemms(c, ms, nm, (const int (*)[2])shapes, ns);
    size_t na = 8192 * 8192, nw = 8192 * 8192, nc = 8192 * 8192;
    for (int s = 0; s < ns; s++) {
        size_t n = (size_t)shapes[s][0], k = (size_t)shapes[s][1];
        na = na > max_m * k ? na : max_m * k;
        nw = nw > n * k ? nw : n * k;
        nc = nc > max_m * n ? nc : max_m * n;
    }
    gemm_arg a = {kt_gemm_new(), calib_dev_random(c, na, 2), calib_dev_random(c, nw, 3),
                  kt_malloc(nc * 2)};
    int rc = -1;
    if (!a.g || !a.C) {
        ts_errf(&c->err, "gemm setup: %s", kt_error());
        goto cleanup;
    }
    if (!a.A || !a.W || time_gemm(c, &a, "gemm_peak", 8192, 8192, 8192))
        goto cleanup;
    const calib_row *peak = &c->set.rows[c->set.n - 1];
    c->peak_flops = peak->flops / (peak->median_us * 1e-6);
    for (int s = 0; s < ns; s++)
        for (int i = 0; i < nm; i++)
            if (time_gemm(c, &a, "gemm", ms[i], shapes[s][0], shapes[s][1]))
                goto cleanup;
    rc = 0;
cleanup:
    kt_gemm_free(a.g);
    kt_free(a.A);
    kt_free(a.W);
    kt_free(a.C);
    return rc;
}

/* ---- attention ----------------------------------------------------------- */

typedef struct attn_arg {
    kt_attn *p;
    kt_bf16 *q, *k, *v, *o;
    int chunk;
} attn_arg;

static int launch_attn(void *p)
{
    attn_arg *a = p;
    return a->chunk ? kt_chunk_attn(a->p, a->q, a->k, a->v, a->o, 0)
                    : kt_decode_attn(a->p, a->q, a->k, a->v, a->o, 0);
}

#define ATTN_MAX_Q_ROWS 8192

/* Times one ragged batch (qlen NULL: decode); skips batches over the caps. */
static int time_attn(calib *c, attn_arg *a, const vcfg *v, const int *ctx, const int *qlen, int b)
{
    double ctx_sum = 0, ctx_max = 0, q_rows = 0;
    for (int i = 0; i < b; i++) {
        ctx_sum += ctx[i];
        ctx_max = ctx[i] > ctx_max ? ctx[i] : ctx_max;
        q_rows += qlen ? qlen[i] : 1;
    }
    if (ctx_sum > (double)c->cap_tokens || q_rows > ATTN_MAX_Q_ROWS)
        return 0;
    a->chunk = qlen != NULL;
    a->p = kt_attn_plan(ctx, qlen, b, v->heads, v->kv, 128, 0);
    if (!a->p)
        return ts_errf(&c->err, "attention plan (b=%d): %s", b, kt_error());
    calib_row r = calib_row_init(qlen ? "chunk_attn" : "decode_attn");
    r.m = v->heads;
    r.n = v->kv;
    r.k = 128;
    r.batch = b;
    r.ctx_sum = ctx_sum;
    r.ctx_max = ctx_max;
    r.q_len = qlen ? qlen[0] : 1;
    r.flops = 4.0 * v->heads * 128 * kt_attn_pairs(a->p);
    r.bytes = 4.0 * v->kv * 128 * ctx_sum + 4.0 * q_rows * v->heads * 128;
    int rc = calib_measure(c, launch_attn, a, &r);
    kt_attn_free(a->p);
    a->p = NULL;
    return rc;
}

static int decode_cases(calib *c, attn_arg *a, const vcfg *v, int *ctx)
{
    static const int qb[] = {1, 8, 64, 256, 512};
    static const int fb[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512};
    static const int qc[] = {128, 1024, 8192, 32768, 65536};
    static const int fc[] = {128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
    const int *bs = c->quick ? qb : fb, *cs = c->quick ? qc : fc;
    int nb = c->quick ? (int)NELEM(qb) : (int)NELEM(fb);
    int nc = c->quick ? (int)NELEM(qc) : (int)NELEM(fc);
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nc; j++) {
            for (int s = 0; s < bs[i]; s++)
                ctx[s] = cs[j];
            if (time_attn(c, a, v, ctx, NULL, bs[i]))
                return -1;
        }
    static const int tail_b[] = {32, 128, 512}, logn_b[] = {16, 64, 256, 512};
    for (size_t i = 0; i < NELEM(tail_b); i++) { /* one long tail among short ones */
        for (int s = 0; s < tail_b[i]; s++)
            ctx[s] = s == 0 ? 65536 : 512;
        if (time_attn(c, a, v, ctx, NULL, tail_b[i]))
            return -1;
    }
    for (size_t i = c->quick ? 1 : 0; i < NELEM(logn_b); i += c->quick ? 2 : 1) {
        gsl_rng *rng = ts_rng_new(7, (uint64_t)logn_b[i]);
        if (!rng)
            return ts_errf(&c->err, "out of memory for an RNG");
        for (int s = 0; s < logn_b[i]; s++) {
            double x = gsl_ran_lognormal(rng, log(2048.0), 1.0);
            ctx[s] = (int)fmin(65536.0, fmax(128.0, x));
        }
        gsl_rng_free(rng);
        if (time_attn(c, a, v, ctx, NULL, logn_b[i]))
            return -1;
    }
    for (int s = 0; s < 8; s++) /* a draining batch: the tail of a rollout */
        ctx[s] = 65536 >> s;
    return time_attn(c, a, v, ctx, NULL, 8);
}

static int chunk_cases(calib *c, attn_arg *a, const vcfg *v, int *ctx, int *qlen)
{
    static const int V[] = {1, 8, 16, 32, 48};
    static const int qb[] = {1, 32}, fb[] = {1, 8, 32, 128};
    static const int qc[] = {1024, 16384}, fc[] = {1024, 4096, 16384, 65536};
    const int *bs = c->quick ? qb : fb, *cs = c->quick ? qc : fc;
    int nb = c->quick ? (int)NELEM(qb) : (int)NELEM(fb);
    int nc = c->quick ? (int)NELEM(qc) : (int)NELEM(fc);
    for (size_t iv = 0; iv < NELEM(V); iv++)
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < nc; j++) {
                for (int s = 0; s < bs[i]; s++) {
                    ctx[s] = cs[j];
                    qlen[s] = V[iv];
                }
                if (time_attn(c, a, v, ctx, qlen, bs[i]))
                    return -1;
            }
    static const int qq[] = {512, 2048}, fq[] = {256, 512, 1024, 2048};
    static const int qbefore[] = {0, 16384}, fbefore[] = {0, 4096, 16384, 32768};
    const int *qs = c->quick ? qq : fq, *before = c->quick ? qbefore : fbefore;
    int nq = c->quick ? (int)NELEM(qq) : (int)NELEM(fq);
    int nbf = c->quick ? (int)NELEM(qbefore) : (int)NELEM(fbefore);
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < nbf; j++) {
            ctx[0] = before[j] + qs[i];
            qlen[0] = qs[i];
            if (time_attn(c, a, v, ctx, qlen, 1))
                return -1;
        }
    return 0;
}

int sweep_attn(calib *c, int chunk)
{
    int max_kv = 1, max_heads = 1;
    for (int i = 0; i < c->ncfg; i++) {
        max_kv = c->cfgs[i].kv > max_kv ? c->cfgs[i].kv : max_kv;
        max_heads = c->cfgs[i].heads > max_heads ? c->cfgs[i].heads : max_heads;
    }
    size_t nkv = c->cap_tokens * max_kv * 128, nq = (size_t)ATTN_MAX_Q_ROWS * max_heads * 128;
    attn_arg a = {NULL, calib_dev_random(c, nq, 4), calib_dev_random(c, nkv, 5),
                  calib_dev_random(c, nkv, 6), kt_malloc(nq * 2), chunk};
    int *ctx = malloc(512 * sizeof *ctx), *qlen = malloc(512 * sizeof *qlen);
    int rc = -1;
    if (!ctx || !qlen) {
        ts_errf(&c->err, "out of host memory");
        goto cleanup;
    }
    if (!a.q || !a.k || !a.v || !a.o) {
        if (!a.o)
            ts_errf(&c->err, "attention output buffer: %s", kt_error());
        goto cleanup;
    }
    for (int i = 0; i < c->ncfg; i++) {
        int dup = 0; /* one sweep per distinct (heads, kv_heads) */
        for (int j = 0; j < i; j++)
            dup |= c->cfgs[j].heads == c->cfgs[i].heads && c->cfgs[j].kv == c->cfgs[i].kv;
        if (!dup && (chunk ? chunk_cases(c, &a, &c->cfgs[i], ctx, qlen)
                           : decode_cases(c, &a, &c->cfgs[i], ctx)))
            goto cleanup;
    }
    rc = 0;
cleanup:
    kt_free(a.q);
    kt_free(a.k);
    kt_free(a.v);
    kt_free(a.o);
    free(ctx);
    free(qlen);
    return rc;
}

/* ---- row-wise ops -------------------------------------------------------- */

typedef struct rows_arg {
    int op; /* 0 rmsnorm, 1 rope, 2 swiglu, 3 embed */
    int rows, n, vocab;
    kt_bf16 *x, *y, *w, *table;
    int *pos, *ids;
} rows_arg;

static int launch_rows(void *p)
{
    rows_arg *a = p;
    switch (a->op) {
    case 0: return kt_rmsnorm(a->x, a->w, a->y, a->rows, a->n, 1e-6f);
    case 1: return kt_rope(a->x, a->pos, a->rows, a->n, 128, 1e6);
    case 2: return kt_swiglu(a->x, a->y, a->rows, a->n);
    default: return kt_embed(a->table, a->vocab, a->n, a->ids, a->rows, a->y);
    }
}

int sweep_rows(calib *c)
{
    static const int qr[] = {1, 16, 128, 1024, 4096};
    static const int fr[] = {1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
    static const char *names[4] = {"rmsnorm", "rope", "swiglu", "embed"};
    const int *rs = c->quick ? qr : fr;
    int nr = c->quick ? (int)NELEM(qr) : (int)NELEM(fr), max_rows = rs[nr - 1];
    int width = 0, hidden = 0, vocab = 0;
    for (int i = 0; i < c->ncfg; i++) {
        const vcfg *v = &c->cfgs[i];
        int w = 2 * v->ffn > (v->heads + v->kv) * 128 ? 2 * v->ffn : (v->heads + v->kv) * 128;
        w = w > v->m->hidden ? w : v->m->hidden;
        width = w > width ? w : width;
        hidden = v->m->hidden > hidden ? v->m->hidden : hidden;
        vocab = v->m->vocab > vocab ? v->m->vocab : vocab;
    }
    size_t nx = (size_t)max_rows * width;
    rows_arg a = {0, 0, 0, vocab, calib_dev_random(c, nx, 8), calib_dev_random(c, nx, 9),
                  calib_dev_random(c, (size_t)hidden, 10),
                  calib_dev_random(c, (size_t)vocab * hidden, 11),
                  kt_malloc(max_rows * sizeof(int)), kt_malloc(max_rows * sizeof(int))};
    int *h = malloc(max_rows * sizeof *h);
    int rc = -1, seen[4][16], nseen[4] = {0};
    if (!h || !a.pos || !a.ids) {
        ts_errf(&c->err, "row-op buffers: %s", h ? kt_error() : "out of host memory");
        goto cleanup;
    }
    if (!a.x || !a.y || !a.w || !a.table)
        goto cleanup;
    for (int i = 0; i < max_rows; i++)
        h[i] = 1000 + 7 * i; /* positions */
    if (kt_upload(a.pos, h, max_rows * sizeof(int))) {
        ts_errf(&c->err, "uploading positions: %s", kt_error());
        goto cleanup;
    }
    for (int i = 0; i < max_rows; i++)
        h[i] = (int)(ts_splitmix64((uint64_t)i) % (uint64_t)vocab); /* token ids */
    if (kt_upload(a.ids, h, max_rows * sizeof(int))) {
        ts_errf(&c->err, "uploading ids: %s", kt_error());
        goto cleanup;
    }
    for (int i = 0; i < c->ncfg; i++) {
        const vcfg *v = &c->cfgs[i];
        const int widths[4] = {v->m->hidden, v->heads + v->kv, v->ffn, v->m->hidden};
        for (a.op = 0; a.op < 4; a.op++) {
            int dup = 0;
            for (int j = 0; j < nseen[a.op]; j++)
                dup |= seen[a.op][j] == widths[a.op];
            if (dup || nseen[a.op] == 16)
                continue;
            seen[a.op][nseen[a.op]++] = a.n = widths[a.op];
            for (int j = 0; j < nr; j++) {
                calib_row r = calib_row_init(names[a.op]);
                a.rows = rs[j];
                r.m = a.rows;
                r.n = a.n;
                double elems = (double)a.rows * a.n;
                if (a.op == 1) {
                    r.k = 128;
                    elems *= 128;
                }
                const double fl[4] = {4 * elems, 6 * elems, 6 * elems, 0};
                const double by[4] = {4 * elems + 2.0 * a.n, 4 * elems + 4.0 * a.rows,
                                      6 * elems, 4 * elems + 4.0 * a.rows};
                r.flops = fl[a.op];
                r.bytes = by[a.op];
                if (calib_measure(c, launch_rows, &a, &r))
                    goto cleanup;
            }
        }
    }
    rc = 0;
cleanup:
    kt_free(a.x); kt_free(a.y); kt_free(a.w); kt_free(a.table);
    kt_free(a.pos); kt_free(a.ids);
    free(h);
    return rc;
}

/* ---- greedy verification ------------------------------------------------- */

typedef struct verify_arg {
    kt_bf16 *logits;
    int *draft, *target, *n_acc, *out;
    int b, V, vocab;
} verify_arg;

static int launch_verify(void *p)
{
    verify_arg *a = p;
    if (kt_argmax(a->logits, a->b * (a->V + 1), a->vocab, a->target))
        return -1;
    return kt_greedy_accept(a->draft, a->target, a->b, a->V, a->n_acc, a->out);
}

int sweep_verify(calib *c)
{
    static const int qb[] = {1, 32, 128}, fb[] = {1, 8, 32, 64, 128};
    static const int qv[] = {1, 16, 48}, fv[] = {1, 8, 16, 32, 48};
    const int *bs = c->quick ? qb : fb, *vs = c->quick ? qv : fv;
    int nb = c->quick ? (int)NELEM(qb) : (int)NELEM(fb);
    int nv = c->quick ? (int)NELEM(qv) : (int)NELEM(fv);
    const int vocab = c->models[0].vocab, max_rows = 128 * 49;
    verify_arg a = {calib_dev_random(c, (size_t)max_rows * vocab, 12), kt_malloc(max_rows * 4),
                    kt_malloc(max_rows * 4), kt_malloc(128 * 4), kt_malloc(max_rows * 4),
                    0, 0, vocab};
    int *h = malloc(max_rows * sizeof *h), rc = -1;
    if (!h || !a.draft || !a.target || !a.n_acc || !a.out) {
        ts_errf(&c->err, "verify buffers: %s", h ? kt_error() : "out of host memory");
        goto cleanup;
    }
    if (!a.logits)
        goto cleanup;
    for (int i = 0; i < max_rows; i++)
        h[i] = (int)(ts_splitmix64((uint64_t)i + 99) % (uint64_t)vocab);
    if (kt_upload(a.draft, h, max_rows * sizeof(int))) {
        ts_errf(&c->err, "uploading drafts: %s", kt_error());
        goto cleanup;
    }
    for (int i = 0; i < nb; i++)
        for (int j = 0; j < nv; j++) {
            calib_row r = calib_row_init("verify_accept");
            a.b = bs[i];
            a.V = vs[j];
            r.m = (double)a.b * (a.V + 1);
            r.n = vocab;
            r.batch = a.b;
            r.q_len = a.V;
            r.flops = r.m * vocab;
            r.bytes = 2.0 * r.m * vocab + 8.0 * r.m + 4.0 * a.b * a.V;
            if (calib_measure(c, launch_verify, &a, &r))
                goto cleanup;
        }
    rc = 0;
cleanup:
    kt_free(a.logits); kt_free(a.draft); kt_free(a.target); kt_free(a.n_acc); kt_free(a.out);
    free(h);
    return rc;
}
