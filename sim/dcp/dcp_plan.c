/*
 * DCP planners: bucket, packed, dcp-intra, dcp-inter (sim/dcp/dcp_inter.c; each
 * optionally with PAC) and the bound, and the dispatch.  Each turns the whole batch trace into optimizer steps
 * (sim/dcp/dcp.h describes the plan) reading only the profile in dcp_ctx, so
 * planning is a few passes over the sequences and buckets.
 *
 * dcp-intra and dcp-inter fill a step's GPUs with groups drawn from the
 * bucket queues (sim/dcp/dcp_queue.c).  bucket and packed follow DCP's
 * baselines instead: micro-batches
 * formed per bucket (or packed), then shuffled with ts_rng_new(seed, 1)
 * (packed: stream 2), so every run with the same seed plans the same steps.
 * Groups of a step are laid out on consecutive GPUs, largest SP size first,
 * so power-of-two groups never straddle a node boundary they need not cross.
 *
 * Invariant (checked by tests/test_dcp_plan.c): every sequence index appears in
 * plan->seq exactly once, and each micro-batch's memory at its group's SP
 * size and checkpointing is within the budget.
 */
#include "sim/dcp/dcp_inter.h"
#include "sim/dcp/dcp_queue.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common/util.h"

/* -------------------------------------------------------------- intra */

static double penalty(double t, double T, double over)
{
    return t > T ? (t - T) * over : T - t;
}

/* Picks (SP <= remain, bs <= limit) for bucket b closest to target T.
 * Returns 0 and fills *out, or -1 when nothing fits. */
static int pick_near(const dcp_ctx *c, int32_t b, int32_t limit, int remain, double T,
                     dq_group *out)
{
    double best = INFINITY;
    int found = -1;
    for (int j = 0; j < c->cfg.n_sp; j++) {
        int sp = c->cfg.sp[j];
        int32_t mb = c->max_bs[(size_t)b * c->cfg.n_sp + j];
        if (sp > remain || mb < 1)
            continue;
        int32_t lim = limit < mb ? limit : mb;
        double t1 = dcp_prof_time(c, b, j, lim);
        int32_t guess = t1 > 0 ? (int32_t)floor(lim * T / t1) : lim;
        for (int32_t bs = guess - 1; bs <= guess + 1; bs++) {
            int32_t x = bs < 1 ? 1 : bs > lim ? lim : bs;
            double t = dcp_prof_time(c, b, j, x);
            double v = penalty(t, T, c->cfg.overshoot) + 1e-12 * sp;
            if (v < best) {
                best = v;
                found = j;
                *out = (dq_group){.b = b, .n = x, .sp = sp, .gas = 1,
                                .ch = {sp, x, c->tm->n_a, c->tm->n_b, t}, .t = t};
            }
        }
    }
    return found >= 0 ? 0 : -1;
}

static int plan_intra(const dcp_ctx *c, const dcp_strategy *s, dcp_plan *p, ts_err *e)
{
    const dcp_choice *ch = c->best;
    int G = c->cfg.gpus, rc = -1;
    dq_queues Q;
    if (dq_init(&Q, c, e))
        return -1;
    dq_group *g = malloc((size_t)G * sizeof *g);
    if (!g) {
        ts_errf(e, "out of memory");
        goto done;
    }
    while (Q.left > 0) {
        int n = 0, remain = G;
        int32_t b;
        /* 1. fill in data order at each bucket's best configuration */
        while (remain > 0 && (b = dq_next_bucket(c, &Q, ch, remain, 0, NULL)) >= 0) {
            int32_t a = dq_avail(&Q, b), cnt = ch[b].bs < a ? ch[b].bs : a;
            Q.resv[b] += cnt;
            g[n] = (dq_group){.b = b, .n = cnt, .sp = ch[b].sp, .gas = 1, .ch = ch[b],
                            .t = dcp_choice_time(c, b, &ch[b], cnt)};
            remain -= ch[b].sp;
            n++;
        }
        if (n == 0) {
            ts_errf(e, "dcp-intra: no bucket fits %d GPUs", G);
            goto done;
        }
        /* 2. target: the fastest full group (or the fastest of all) */
        double T = INFINITY, Tall = INFINITY;
        for (int i = 0; i < n; i++) {
            Tall = fmin(Tall, g[i].t);
            if (g[i].n == ch[g[i].b].bs)
                T = fmin(T, g[i].t);
        }
        if (!isfinite(T))
            T = Tall;
        /* 3. every group re-picks (SP, bs) toward T; surplus goes back */
        int used = 0;
        for (int i = 0; i < n; i++) {
            dq_group ng;
            if (pick_near(c, g[i].b, g[i].n, G, T, &ng) == 0) {
                Q.resv[g[i].b] -= g[i].n - ng.n;
                g[i] = ng;
            }
            used += g[i].sp;
        }
        /* 4. too many GPUs: drop the smallest groups; too few: add groups */
        qsort(g, (size_t)n, sizeof *g, dq_cmp_group_sp);
        while (used > G && n > 1) {
            n--;
            Q.resv[g[n].b] -= g[n].n;
            used -= g[n].sp;
        }
        while (used < G && (b = dq_next_bucket(c, &Q, ch, G - used, 1, NULL)) >= 0) {
            dq_group ng;
            if (pick_near(c, b, dq_avail(&Q, b), G - used, T, &ng))
                break;
            Q.resv[b] += ng.n;
            g[n++] = ng;
            used += ng.sp;
        }
        /* 5. grow every group toward the slowest */
        double M = 0;
        for (int i = 0; i < n; i++)
            M = fmax(M, g[i].t);
        for (int i = 0; i < n; i++) {
            int j = dq_sp_index(c, g[i].sp);
            int32_t mb = c->max_bs[(size_t)g[i].b * c->cfg.n_sp + j];
            int32_t lim = g[i].n + dq_avail(&Q, g[i].b);
            if (lim > mb)
                lim = mb;
            int32_t x = g[i].n, hi = lim; /* largest x in [n, lim] with t(x) <= M */
            while (x < hi) {
                int32_t mid = x + (hi - x + 1) / 2;
                if (dcp_prof_time(c, g[i].b, j, mid) <= M)
                    x = mid;
                else
                    hi = mid - 1;
            }
            Q.resv[g[i].b] += x - g[i].n;
            g[i].n = x;
            g[i].ch.bs = x;
            g[i].t = dcp_prof_time(c, g[i].b, j, x);
        }
        /* PAC: each group's checkpointing for its final shape */
        for (int i = 0; s->pac && i < n; i++) {
            dcp_choice pc = {g[i].sp, g[i].n, 0, 0, 0};
            if (dcp_pac(c, g[i].b, &pc) == 0)
                g[i].ch = pc;
        }
        if (dq_emit_step(p, &Q, ch, g, n, e))
            goto done;
    }
    rc = 0;
done:
    free(g);
    dq_free(&Q);
    return rc;
}

/* ------------------------------------------------------------- bucket */

typedef struct mbref {
    int32_t b, first, n;  /* bucket; range of its queue; packed: b = -1, range of order[] */
} mbref;

static void shuffle_mbs(mbref *m, size_t n, uint64_t seed, uint64_t stream)
{
    gsl_rng *r = ts_rng_new(seed, stream);
    if (!r)
        return; /* unshuffled: still a valid plan */
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)gsl_rng_uniform_int(r, (unsigned long)i);
        mbref t = m[i - 1];
        m[i - 1] = m[j];
        m[j] = t;
    }
    gsl_rng_free(r);
}

/* Emits steps of G / sp groups, one micro-batch each, from mbs[]; the
 * sequences of micro-batch i are idx[first .. first + n). */
static int emit_fixed(const dcp_ctx *c, dcp_plan *p, const mbref *m, size_t n_mb,
                      const int32_t *idx, int sp, const dcp_choice *ck, ts_err *e)
{
    int per = c->cfg.gpus / sp;
    if (per < 1)
        per = 1;
    for (size_t i = 0; i < n_mb; i += (size_t)per) {
        int32_t g0 = (int32_t)p->n_grp;
        for (size_t k = i; k < n_mb && k < i + (size_t)per; k++) {
            int32_t first = (int32_t)p->n_seq;
            for (int32_t x = 0; x < m[k].n; x++)
                if (dcp_plan_push_seq(p, idx[m[k].first + x], e))
                    return -1;
            int ca = ck ? ck[m[k].b].ckpt_a : c->tm->n_a;
            int cb = ck ? ck[m[k].b].ckpt_b : c->tm->n_b;
            if (dcp_plan_push_mb(p, first, m[k].n, ca, cb, e) ||
                dcp_plan_push_group(p, sp, (int32_t)p->n_mb - 1, 1, e))
                return -1;
        }
        if (dcp_plan_push_step(p, g0, e))
            return -1;
    }
    return 0;
}

static int plan_bucket(const dcp_ctx *c, const dcp_strategy *s, dcp_plan *p, ts_err *e)
{
    dq_queues Q;
    if (dq_init(&Q, c, e))
        return -1;
    size_t n_mb = 0;
    for (int32_t b = 0; b < c->nb; b++) {
        int32_t cnt = Q.off[b + 1] - Q.off[b];
        n_mb += (size_t)((cnt + c->bkt[b].bs - 1) / c->bkt[b].bs);
    }
    mbref *m = malloc(n_mb * sizeof *m);
    dcp_choice *ck = NULL;
    int rc = -1;
    if (!m) {
        ts_errf(e, "out of memory");
        goto done;
    }
    if (s->pac) {
        if (!(ck = malloc((size_t)c->nb * sizeof *ck))) {
            ts_errf(e, "out of memory");
            goto done;
        }
        for (int32_t b = 0; b < c->nb; b++) {
            ck[b] = c->bkt[b];
            dcp_pac(c, b, &ck[b]);
        }
    }
    size_t k = 0;
    for (int32_t b = 0; b < c->nb; b++)
        for (int32_t i = Q.off[b]; i < Q.off[b + 1]; i += c->bkt[b].bs) {
            int32_t n = Q.off[b + 1] - i;
            m[k++] = (mbref){b, i, n < c->bkt[b].bs ? n : c->bkt[b].bs};
        }
    shuffle_mbs(m, n_mb, c->cfg.seed, 1);
    rc = emit_fixed(c, p, m, n_mb, Q.q, c->bucket_sp, ck, e);
done:
    free(m);
    free(ck);
    dq_free(&Q);
    return rc;
}

/* ------------------------------------------------------------- packed */

typedef struct bin {
    double tokens;
    tc_work w;
    int32_t n, head; /* members, first index into the link list */
} bin;

typedef struct tokidx {
    int64_t tokens;
    int32_t i;
} tokidx;

/* Longest first, ties in data order. */
static int cmp_tokens_desc(const void *x, const void *y)
{
    const tokidx *a = x, *b = y;
    if (a->tokens != b->tokens)
        return (a->tokens < b->tokens) - (a->tokens > b->tokens);
    return (a->i > b->i) - (a->i < b->i);
}

static int plan_packed(const dcp_ctx *c, dcp_plan *p, ts_err *e)
{
    const btrace *bt = c->bt;
    int sp = c->bucket_sp, rc = -1;
    double budget = c->cfg.pack_tokens;
    for (size_t i = 0; i < bt->n; i++)
        budget = fmax(budget, (double)bt_tokens(&bt->seq[i]));
    tokidx *ord = malloc(bt->n * sizeof *ord);
    int32_t *next = malloc(bt->n * sizeof *next);
    int32_t *idx = malloc(bt->n * sizeof *idx);
    bin *bins = NULL;
    mbref *m = NULL;
    size_t nbins = 0, capb = 0;
    if (!ord || !next || !idx) {
        ts_errf(e, "out of memory");
        goto done;
    }
    /* first-fit decreasing by tokens (ties in data order) */
    for (size_t i = 0; i < bt->n; i++)
        ord[i] = (tokidx){bt_tokens(&bt->seq[i]), (int32_t)i};
    qsort(ord, bt->n, sizeof *ord, cmp_tokens_desc);
    tc_par par = {sp, c->cfg.ring, c->tm->n_a, c->tm->n_b};
    for (size_t i = 0; i < bt->n; i++) {
        const bt_seq *q = &bt->seq[ord[i].i];
        double tok = (double)bt_tokens(q);
        size_t k;
        for (k = 0; k < nbins; k++) {
            if (bins[k].tokens + tok > budget)
                continue;
            tc_work w = bins[k].w;
            tc_work_add(&w, q->t, q->s, 1);
            if (tc_act_bytes(c->tm, &par, &w) <= c->budget_bytes)
                break;
        }
        if (k == nbins) {
            if (nbins == capb) {
                size_t nc = capb ? capb * 2 : 64;
                bin *nb = realloc(bins, nc * sizeof *nb);
                if (!nb) {
                    ts_errf(e, "out of memory");
                    goto done;
                }
                bins = nb;
                capb = nc;
            }
            memset(&bins[nbins], 0, sizeof bins[nbins]);
            bins[nbins].head = -1;
            nbins++;
        }
        bins[k].tokens += tok;
        tc_work_add(&bins[k].w, q->t, q->s, 1);
        next[ord[i].i] = bins[k].head;
        bins[k].head = ord[i].i;
        bins[k].n++;
    }
    /* bins in creation order, members in packing order */
    if (!(m = malloc((nbins ? nbins : 1) * sizeof *m))) {
        ts_errf(e, "out of memory");
        goto done;
    }
    size_t pos = 0;
    for (size_t k = 0; k < nbins; k++) {
        m[k] = (mbref){0, (int32_t)pos, bins[k].n};
        size_t end = pos + (size_t)bins[k].n;
        for (int32_t x = bins[k].head; x >= 0; x = next[x])
            idx[--end] = x; /* list is newest first: fill backwards */
        pos += (size_t)bins[k].n;
    }
    shuffle_mbs(m, nbins, c->cfg.seed, 2);
    rc = emit_fixed(c, p, m, nbins, idx, sp, NULL, e);
done:
    free(ord);
    free(next);
    free(idx);
    free(bins);
    free(m);
    return rc;
}

/* -------------------------------------------------------------- bound */

static int plan_bound(const dcp_ctx *c, dcp_plan *p, ts_err *e)
{
    const btrace *bt = c->bt;
    double gpu_s = 0, longest = 0;
    /* 2D buckets are exact shapes: price each bucket once */
    double *memo = NULL;
    if (bt->kind == BT_2D && !(memo = malloc((size_t)c->nb * 2 * sizeof *memo)))
        return ts_errf(e, "out of memory");
    for (int32_t b = 0; memo && b < c->nb; b++)
        memo[2 * b] = -1;
    for (size_t i = 0; i < bt->n; i++) {
        const bt_seq *q = &bt->seq[i];
        double g_best = INFINITY, t_best = INFINITY;
        if (memo && memo[2 * q->bucket] >= 0) {
            g_best = memo[2 * q->bucket];
            t_best = memo[2 * q->bucket + 1];
        } else {
            for (int j = 0; j < c->cfg.n_sp; j++) {
                int sp = c->cfg.sp[j];
                if (!tc_sp_ok(c->tm, sp, c->cfg.ring) || sp > c->cfg.gpus)
                    continue;
                double l = tc_seq_lower_bound(c->hw, c->tm, sp, c->cfg.ring, q->t, q->s,
                                              c->budget_bytes);
                if (l < 0)
                    continue;
                g_best = fmin(g_best, sp * l);
                t_best = fmin(t_best, l);
            }
            if (!isfinite(g_best)) {
                free(memo);
                return ts_errf(e, "bound: sequence %zu (%lld tokens) fits at no SP size", i,
                               (long long)bt_tokens(q));
            }
            if (memo) {
                memo[2 * q->bucket] = g_best;
                memo[2 * q->bucket + 1] = t_best;
            }
        }
        gpu_s += g_best;
        longest = fmax(longest, t_best);
    }
    free(memo);
    p->bound_s = fmax(gpu_s / c->cfg.gpus, longest) + c->sync_s;
    return 0;
}

/* ------------------------------------------------------------ dispatch */

/* Lays out each step's groups on consecutive GPUs. */
static void place(dcp_plan *p)
{
    for (size_t s = 0; s < p->n_step; s++) {
        int32_t gpu = 0;
        for (int32_t g = 0; g < p->step[s].n_g; g++) {
            dcp_group *x = &p->grp[p->step[s].g0 + g];
            x->gpu0 = gpu;
            gpu += x->sp;
        }
    }
}

int dcp_plan_run(const dcp_ctx *c, const dcp_strategy *s, dcp_plan *out, ts_err *e)
{
    memset(out, 0, sizeof *out);
    out->strat = *s;
    double w0 = ts_wall_s();
    int rc;
    switch (s->kind) {
    case DCP_BUCKET: rc = plan_bucket(c, s, out, e); break;
    case DCP_PACKED: rc = plan_packed(c, out, e); break;
    case DCP_INTRA: rc = plan_intra(c, s, out, e); break;
    case DCP_INTER: rc = dcp_plan_inter(c, s, out, e); break;
    default: rc = plan_bound(c, out, e); break;
    }
    if (rc) {
        dcp_plan_free(out);
        return ts_err_prefix(e, "%s: ", s->name);
    }
    place(out);
    out->plan_ms = (ts_wall_s() - w0) * 1e3;
    return 0;
}
