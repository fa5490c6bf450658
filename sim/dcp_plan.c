/*
 * DCP planners: bucket, packed, dcp-intra, dcp-inter (each optionally with
 * PAC) and the bound.  Each turns the whole batch trace into optimizer steps
 * (sim/dcp.h describes the plan) reading only the profile in dcp_ctx, so
 * planning is a few passes over the sequences and buckets.
 *
 * Filling a step: the DCP planners fill a step's GPUs with groups, each
 * serving one bucket at its chosen SP size and taking up to its micro-batch
 * of that bucket's sequences (each bucket keeps a queue of its sequences in
 * data order).  The next group serves the bucket with the largest share of
 * its sequences still unplanned among those whose SP size fits the GPUs
 * left, ties to the earliest sequence in data order: O(buckets) per group.
 * dcp-inter also counts what each group is expected to accumulate at the
 * previous step's target, so that buckets are drawn in proportion to what
 * steps really consume and the rare, long buckets are not left alone at the
 * end.  Reservations are counts per bucket until the step is final, so
 * dcp-intra can shrink a group and give its sequences back to the next
 * step.  bucket and packed follow DCP's baselines instead: micro-batches
 * formed per bucket (or packed), then shuffled with ts_rng_new(seed, 1)
 * (packed: stream 2), so every run with the same seed plans the same steps.
 * Groups of a step are laid out on consecutive GPUs, largest SP size first,
 * so power-of-two groups never straddle a node boundary they need not cross.
 *
 * Invariant (checked by tests/test_dcp_plan.c): every sequence index appears in
 * plan->seq exactly once, and each micro-batch's memory at its group's SP
 * size and checkpointing is within the budget.
 */
#include "sim/dcp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common/util.h"

/* Index of SP size sp in the config, or -1. */
static int sp_index(const dcp_ctx *c, int sp)
{
    for (int j = 0; j < c->cfg.n_sp; j++)
        if (c->cfg.sp[j] == sp)
            return j;
    return -1;
}

/* Bucket queues with reservations. */
typedef struct queues {
    int32_t *q;      /* sequence indices grouped by bucket, data order within */
    int32_t *off;    /* nb + 1 offsets into q */
    int32_t *head;   /* nb: next unplanned position */
    int32_t *resv;   /* nb: reserved for the step being planned */
    int32_t *vres;   /* nb: further sequences the step's groups are expected to take
                      * by accumulation (only steers next_bucket()) */
    int32_t *spare;  /* nb: scratch for emit_step() */
    int32_t *xs;     /* nb: scratch for fill_across() */
    int32_t *cnt;    /* gpus * DCP_GAS_HARD: scratch for emit_step() */
    size_t left;     /* sequences not planned */
} queues;

static void queues_free(queues *Q)
{
    free(Q->q);
    free(Q->off);
    free(Q->head);
    free(Q->resv);
    free(Q->vres);
    free(Q->spare);
    free(Q->xs);
    free(Q->cnt);
}

static int queues_init(queues *Q, const dcp_ctx *c, ts_err *e)
{
    const btrace *bt = c->bt;
    int32_t nb = c->nb;
    memset(Q, 0, sizeof *Q);
    Q->q = malloc(bt->n * sizeof *Q->q);
    Q->off = calloc((size_t)nb + 1, sizeof *Q->off);
    Q->head = calloc((size_t)nb, sizeof *Q->head);
    Q->resv = calloc((size_t)nb, sizeof *Q->resv);
    Q->vres = calloc((size_t)nb, sizeof *Q->vres);
    Q->spare = calloc((size_t)nb, sizeof *Q->spare);
    Q->xs = calloc((size_t)nb, sizeof *Q->xs);
    Q->cnt = malloc((size_t)c->cfg.gpus * DCP_GAS_HARD * sizeof *Q->cnt);
    if (!Q->q || !Q->off || !Q->head || !Q->resv || !Q->vres || !Q->spare || !Q->xs || !Q->cnt) {
        queues_free(Q);
        return ts_errf(e, "out of memory");
    }
    for (size_t i = 0; i < bt->n; i++)
        Q->off[bt->seq[i].bucket + 1]++;
    for (int32_t b = 0; b < nb; b++)
        Q->off[b + 1] += Q->off[b];
    for (int32_t b = 0; b < nb; b++)
        Q->head[b] = Q->off[b];
    for (size_t i = 0; i < bt->n; i++) {
        int32_t b = bt->seq[i].bucket;
        Q->q[Q->head[b] + Q->resv[b]++] = (int32_t)i;
    }
    memset(Q->resv, 0, (size_t)nb * sizeof *Q->resv);
    Q->left = bt->n;
    return 0;
}

/* Sequences of bucket b neither planned nor reserved. */
static int32_t avail(const queues *Q, int32_t b)
{
    return Q->off[b + 1] - Q->head[b] - Q->resv[b];
}

/* Moves n reserved sequences of bucket b into the plan as one micro-batch. */
static int take_mb(dcp_plan *p, queues *Q, int32_t b, int32_t n, int ca, int cb, ts_err *e)
{
    int32_t first = (int32_t)p->n_seq;
    for (int32_t i = 0; i < n; i++)
        if (dcp_plan_push_seq(p, Q->q[Q->head[b]++], e))
            return -1;
    Q->left -= (size_t)n;
    return dcp_plan_push_mb(p, first, n, ca, cb, e);
}

/* The next bucket to serve, among those whose SP size fits `remain` GPUs
 * (with any_sp, any usable SP size of the bucket counts, else the bucket's
 * chosen one, ch[b].sp): the one with the largest share of its sequences
 * still unplanned, ties to the earliest such sequence in data order.
 * Serving the most-behind bucket keeps the remaining mix like the whole
 * trace, so the last steps do not pile up the rare, long buckets.  -1 when
 * none fits. */
static int32_t next_bucket(const dcp_ctx *c, const queues *Q, const dcp_choice *ch, int remain,
                           int any_sp, const double *boost)
{
    int32_t best = -1, best_pos = INT32_MAX;
    double best_share = -1;
    for (int32_t b = 0; b < c->nb; b++) {
        int32_t a = avail(Q, b);
        if (a <= 0)
            continue;
        int fits = 0;
        if (any_sp) {
            for (int j = 0; j < c->cfg.n_sp && !fits; j++)
                fits = c->cfg.sp[j] <= remain && c->max_bs[(size_t)b * c->cfg.n_sp + j] >= 1;
        } else {
            fits = ch[b].sp <= remain;
        }
        if (!fits)
            continue;
        double share = (double)(a - Q->vres[b]) / (Q->off[b + 1] - Q->off[b]);
        if (boost)
            share *= boost[b];
        int32_t pos = Q->q[Q->head[b] + Q->resv[b]];
        if (share > best_share || (share == best_share && pos < best_pos)) {
            best_share = share;
            best_pos = pos;
            best = b;
        }
    }
    return best;
}

#define XFILL_MAX 4 /* micro-batches of other buckets one group takes in its slack */

/* A group being planned. */
typedef struct pgroup {
    int32_t b, n, sp, gas;   /* bucket, sequences in its first micro-batch, SP, micro-batches */
    dcp_choice ch;           /* the micro-batch configuration */
    double t;                /* planner time of one micro-batch, s */
    int32_t extra;           /* sequences of one more, partial micro-batch (fill), or 0 */
    int nx;                  /* micro-batches of other buckets in its last slack (xfill) */
    int32_t xb[XFILL_MAX], xn[XFILL_MAX]; /* their buckets and sizes */
} pgroup;

static int cmp_pgroup_sp(const void *x, const void *y)
{
    const pgroup *a = x, *b = y;
    if (a->sp != b->sp)
        return (a->sp < b->sp) - (a->sp > b->sp);
    return (a->b > b->b) - (a->b < b->b);
}

/* Materialises a step from groups g[0..n): the reserved first micro-batches,
 * then each group's further micro-batches (g->gas - 1 of up to g->ch.bs),
 * handed out round by round so that groups sharing a bucket share what is
 * left of it. */
static int emit_step(dcp_plan *p, queues *Q, const dcp_choice *ch, pgroup *g, int n, ts_err *e)
{
    int mg = DCP_GAS_HARD;
    qsort(g, (size_t)n, sizeof *g, cmp_pgroup_sp);
    for (int i = 0; i < n; i++) {
        int32_t b = g[i].b;
        Q->resv[b] = 0;
        Q->vres[b] = 0;
        Q->spare[b] = Q->off[b + 1] - Q->head[b];
    }
    for (int i = 0; i < n; i++) {
        Q->spare[g[i].b] -= g[i].n;
        Q->cnt[i * mg] = g[i].n;
    }
    for (int k = 1; k < mg; k++)
        for (int i = 0; i < n; i++) {
            int32_t b = g[i].b, x = 0;
            if (k < g[i].gas) {
                x = g[i].ch.bs < Q->spare[b] ? g[i].ch.bs : Q->spare[b];
                Q->spare[b] -= x;
            } else if (k == g[i].gas && g[i].extra > 0) {
                x = g[i].extra < Q->spare[b] ? g[i].extra : Q->spare[b];
                Q->spare[b] -= x;
            }
            Q->cnt[i * mg + k] = x;
        }
    int32_t g0 = (int32_t)p->n_grp;
    for (int i = 0; i < n; i++) {
        int32_t mb0 = (int32_t)p->n_mb, nmb = 0;
        for (int k = 0; k < mg; k++) {
            int32_t x = Q->cnt[i * mg + k];
            if (x <= 0)
                continue;
            if (take_mb(p, Q, g[i].b, x, g[i].ch.ckpt_a, g[i].ch.ckpt_b, e))
                return -1;
            nmb++;
        }
        for (int x = 0; x < g[i].nx; x++) {
            const dcp_choice *o = &ch[g[i].xb[x]];
            if (take_mb(p, Q, g[i].xb[x], g[i].xn[x], o->ckpt_a, o->ckpt_b, e))
                return -1;
            nmb++;
        }
        if (dcp_plan_push_group(p, g[i].sp, mb0, nmb, e))
            return -1;
    }
    return dcp_plan_push_step(p, g0, e);
}

/* -------------------------------------------------------------- inter */

/* dcp.ahead: drawing buckets in proportion to what is left makes every
 * bucket run out together at the end of the epoch, when the coarse ones (one
 * micro-batch over dcp.coarse of the step: long videos, one per GPU) cannot
 * be balanced by anything, so the last steps wait on them.  With S steps of
 * work left at the last target T (each bucket's sequences at its chosen
 * configuration, in GPU-seconds, over G x T), a coarse bucket's share left is
 * weighed S / (S - ahead), so that it finishes `ahead` steps early and the
 * fine-grained buckets, which the accumulation counts and the slack fill can
 * balance, make the last steps.  All weights are 1 before the first step and
 * once fewer than `ahead` steps are left. */
static void coarse_boost(const dcp_ctx *c, const queues *Q, const dcp_choice *ch, double T,
                         double *boost)
{
    double W = 0;
    for (int32_t b = 0; b < c->nb; b++) {
        int32_t a = avail(Q, b);
        if (a > 0 && ch[b].bs > 0)
            W += a * ch[b].time_s / ch[b].bs * ch[b].sp;
    }
    double ahead = c->cfg.ahead, S = T > 0 ? W / (c->cfg.gpus * T) : 0;
    for (int32_t b = 0; b < c->nb; b++)
        boost[b] = T > 0 && ahead > 0 && S > ahead && ch[b].time_s > c->cfg.coarse * T
                       ? S / (S - ahead)
                       : 1.0;
}

/* dcp.fill: the search aims at a target that one group may overshoot (the
 * overshoot penalty is finite), and that group's end T is the step's.  Each
 * other group first accumulates the most micro-batches that still end by T
 * (within its cap), then, with room left, takes the most sequences of its
 * bucket, fewer than its micro-batch size, whose planner time fits in what
 * remains before T; groups of one bucket share what the bucket has left
 * after their full micro-batches.  T does not move, and a partial
 * micro-batch is smaller than the group's, so within memory. */
static void fill_slack(const dcp_ctx *c, queues *Q, pgroup *g, const int *cap, int n, double T)
{
    for (int i = 0; i < n; i++) {
        double fit = floor(T / g[i].t * (1 + 1e-12)); /* a double: t may be tiny */
        int more = fit < cap[i] ? (int)fit : cap[i];
        if (more > g[i].gas)
            g[i].gas = more;
    }
    for (int i = 0; i < n; i++)
        Q->spare[g[i].b] = avail(Q, g[i].b) + Q->resv[g[i].b];
    for (int i = 0; i < n; i++)
        Q->spare[g[i].b] -= g[i].n + (int32_t)(g[i].gas - 1) * g[i].ch.bs;
    for (int i = 0; i < n; i++) {
        int32_t b = g[i].b, left = Q->spare[b];
        double slack = T - g[i].gas * g[i].t;
        if (g[i].gas >= DCP_GAS_HARD || left <= 0 || slack <= 0)
            continue;
        int j = sp_index(c, g[i].sp);
        /* the profiled time grows with the count: the largest k in [0, lim]
         * that fits, by bisection */
        int32_t lo = 0, hi = g[i].ch.bs - 1 < left ? g[i].ch.bs - 1 : left;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo + 1) / 2;
            if (dcp_prof_time(c, b, j, mid) <= slack)
                lo = mid;
            else
                hi = mid - 1;
        }
        int32_t k = lo;
        g[i].extra = k;
        Q->spare[b] -= k;
    }
}

/* dcp.xfill (off by default): after the slack fill (if on), a group
 * whose slack before T still holds a micro-batch of another bucket at its
 * SP size takes the most sequences of the bucket with the largest share
 * left (beyond what the step's groups take) whose planner time fits, up to
 * XFILL_MAX times.  Each such micro-batch keeps its own bucket's
 * configuration, so the plan stays within memory; T does not move.  This
 * goes beyond DCP, whose groups serve one bucket a step. */
static void fill_across(const dcp_ctx *c, queues *Q, const dcp_choice *ch, pgroup *g, int n,
                        double T)
{
    int32_t *xs = Q->xs;
    for (int32_t b = 0; b < c->nb; b++)
        xs[b] = Q->off[b + 1] - Q->head[b];
    for (int i = 0; i < n; i++)
        xs[g[i].b] -= g[i].n + (g[i].gas - 1) * g[i].ch.bs + g[i].extra;
    for (int i = 0; i < n; i++) {
        double slack = T - g[i].gas * g[i].t;
        if (g[i].extra > 0)
            slack -= dcp_choice_time(c, g[i].b, &g[i].ch, g[i].extra);
        int used = g[i].gas + (g[i].extra > 0);
        while (g[i].nx < XFILL_MAX && used < DCP_GAS_HARD && slack > 0) {
            int32_t best = -1;
            double bshare = -1;
            for (int32_t b = 0; b < c->nb; b++) {
                if (ch[b].sp != g[i].sp || ch[b].bs < 1 || xs[b] <= 0 ||
                    dcp_choice_time(c, b, &ch[b], 1) > slack)
                    continue;
                double share = (double)xs[b] / (Q->off[b + 1] - Q->off[b]);
                if (share > bshare) {
                    bshare = share;
                    best = b;
                }
            }
            if (best < 0)
                break;
            int32_t lo = 1, hi = ch[best].bs < xs[best] ? ch[best].bs : xs[best];
            while (lo < hi) {
                int32_t mid = lo + (hi - lo + 1) / 2;
                if (dcp_choice_time(c, best, &ch[best], mid) <= slack)
                    lo = mid;
                else
                    hi = mid - 1;
            }
            g[i].xb[g[i].nx] = best;
            g[i].xn[g[i].nx++] = lo;
            xs[best] -= lo;
            slack -= dcp_choice_time(c, best, &ch[best], lo);
            used++;
        }
    }
}

static int plan_inter(const dcp_ctx *c, const dcp_strategy *s, dcp_plan *p, ts_err *e)
{
    const dcp_choice *ch = s->pac ? c->best_pac : c->best;
    int G = c->cfg.gpus, rc = -1;
    queues Q;
    if (queues_init(&Q, c, e))
        return -1;
    pgroup *g = malloc((size_t)G * sizeof *g);
    double *et = malloc((size_t)G * sizeof *et);
    int *gas = malloc((size_t)G * sizeof *gas), *cap = malloc((size_t)G * sizeof *cap);
    double *boost = malloc((size_t)c->nb * sizeof *boost);
    if (!g || !et || !gas || !cap || !boost) {
        ts_errf(e, "out of memory");
        goto done;
    }
    double T_est = 0; /* the previous step's target, s */
    while (Q.left > 0) {
        int n = 0, remain = G;
        int32_t b;
        if (c->cfg.endgame && T_est > 0) {
            for (int32_t b2 = 0; b2 < c->nb; b2++)
                Q.spare[b2] = Q.off[b2 + 1];
            double k = ceil(dcp_endgame_work(c, ch, Q.head, Q.spare) / (G * T_est) - 1e-9);
            if (k <= c->cfg.endgame) {
                int r = dcp_endgame(c, ch, Q.q, Q.head, Q.spare, k < 1 ? 1 : (int)k, p, e);
                if (r < 0)
                    goto done;
                if (r > 0)
                    break;
            }
        }
        coarse_boost(c, &Q, ch, T_est, boost);
        while (remain > 0 && (b = next_bucket(c, &Q, ch, remain, 0, boost)) >= 0) {
            int32_t a = avail(&Q, b), cnt = ch[b].bs < a ? ch[b].bs : a;
            Q.resv[b] += cnt;
            g[n] = (pgroup){.b = b, .n = cnt, .sp = ch[b].sp, .gas = 1, .ch = ch[b],
                            .t = dcp_choice_time(c, b, &ch[b], cnt)};
            et[n] = g[n].t;
            remain -= ch[b].sp;
            /* what this group will likely accumulate at the last step's target,
             * so that buckets are drawn in proportion to what steps consume */
            if (T_est > g[n].t) {
                double more = (c->cfg.fill ? floor(T_est / g[n].t) - 1 : floor(T_est / g[n].t - 0.5)) * ch[b].bs;
                int32_t room = avail(&Q, b) - Q.vres[b];
                Q.vres[b] += (int32_t)fmin(more, room > 0 ? room : 0);
            }
            n++;
        }
        if (n == 0) {
            ts_errf(e, "dcp-inter: no bucket fits %d GPUs", G);
            goto done;
        }
        /* cap each group by the micro-batches its bucket has left, shared
         * among the step's groups of that bucket */
        for (int i = 0; i < n; i++)
            Q.spare[g[i].b] = 0;
        for (int i = 0; i < n; i++)
            Q.spare[g[i].b]++;
        for (int i = 0; i < n; i++) {
            int32_t b2 = g[i].b, left = avail(&Q, b2) / Q.spare[b2];
            int64_t more = (left + g[i].ch.bs - 1) / g[i].ch.bs;
            cap[i] = 1 + (int)(more < DCP_GAS_HARD ? more : DCP_GAS_HARD);
        }
        dcp_gas_search(et, cap, n, c->cfg.max_gas, c->cfg.overshoot, gas);
        T_est = 0;
        for (int i = 0; i < n; i++) {
            g[i].gas = gas[i];
            T_est = fmax(T_est, gas[i] * et[i]);
        }
        if (c->cfg.fill)
            fill_slack(c, &Q, g, cap, n, T_est);
        if (c->cfg.xfill)
            fill_across(c, &Q, ch, g, n, T_est);
        if (emit_step(p, &Q, ch, g, n, e))
            goto done;
    }
    rc = 0;
done:
    free(g);
    free(et);
    free(gas);
    free(cap);
    free(boost);
    queues_free(&Q);
    return rc;
}

/* -------------------------------------------------------------- intra */

static double penalty(double t, double T, double over)
{
    return t > T ? (t - T) * over : T - t;
}

/* Picks (SP <= remain, bs <= limit) for bucket b closest to target T.
 * Returns 0 and fills *out, or -1 when nothing fits. */
static int pick_near(const dcp_ctx *c, int32_t b, int32_t limit, int remain, double T,
                     pgroup *out)
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
                *out = (pgroup){.b = b, .n = x, .sp = sp, .gas = 1,
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
    queues Q;
    if (queues_init(&Q, c, e))
        return -1;
    pgroup *g = malloc((size_t)G * sizeof *g);
    if (!g) {
        ts_errf(e, "out of memory");
        goto done;
    }
    while (Q.left > 0) {
        int n = 0, remain = G;
        int32_t b;
        /* 1. fill in data order at each bucket's best configuration */
        while (remain > 0 && (b = next_bucket(c, &Q, ch, remain, 0, NULL)) >= 0) {
            int32_t a = avail(&Q, b), cnt = ch[b].bs < a ? ch[b].bs : a;
            Q.resv[b] += cnt;
            g[n] = (pgroup){.b = b, .n = cnt, .sp = ch[b].sp, .gas = 1, .ch = ch[b],
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
            pgroup ng;
            if (pick_near(c, g[i].b, g[i].n, G, T, &ng) == 0) {
                Q.resv[g[i].b] -= g[i].n - ng.n;
                g[i] = ng;
            }
            used += g[i].sp;
        }
        /* 4. too many GPUs: drop the smallest groups; too few: add groups */
        qsort(g, (size_t)n, sizeof *g, cmp_pgroup_sp);
        while (used > G && n > 1) {
            n--;
            Q.resv[g[n].b] -= g[n].n;
            used -= g[n].sp;
        }
        while (used < G && (b = next_bucket(c, &Q, ch, G - used, 1, NULL)) >= 0) {
            pgroup ng;
            if (pick_near(c, b, avail(&Q, b), G - used, T, &ng))
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
            int j = sp_index(c, g[i].sp);
            int32_t mb = c->max_bs[(size_t)g[i].b * c->cfg.n_sp + j];
            int32_t lim = g[i].n + avail(&Q, g[i].b);
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
        if (emit_step(p, &Q, ch, g, n, e))
            goto done;
    }
    rc = 0;
done:
    free(g);
    queues_free(&Q);
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
    queues Q;
    if (queues_init(&Q, c, e))
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
    queues_free(&Q);
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
    case DCP_INTER: rc = plan_inter(c, s, out, e); break;
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
