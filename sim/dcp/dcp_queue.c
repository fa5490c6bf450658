/*
 * The planners' bucket queues and step materialisation (sim/dcp/dcp_queue.h).
 *
 * Filling a step: the DCP planners fill a step's GPUs with groups, each
 * serving one bucket at its chosen SP size and taking up to its micro-batch
 * of that bucket's sequences (each bucket keeps a queue of its sequences in
 * data order).  The next group serves the bucket with the largest share of
 * its sequences still unplanned among those whose SP size fits the GPUs
 * left, ties to the earliest sequence in data order: O(buckets) per group.
 * Reservations are counts per bucket until the step is final, so dcp-intra
 * can shrink a group and give its sequences back to the next step.
 */
#include "sim/dcp/dcp_queue.h"

#include <stdlib.h>
#include <string.h>

int dq_sp_index(const dcp_ctx *c, int sp)
{
    for (int j = 0; j < c->cfg.n_sp; j++)
        if (c->cfg.sp[j] == sp)
            return j;
    return -1;
}


void dq_free(dq_queues *Q)
{
    free(Q->q);
    free(Q->off);
    free(Q->head);
    free(Q->resv);
    free(Q->vres);
    free(Q->spare);
    free(Q->xs);
    free(Q->kd);
    free(Q->cnt);
}

int dq_init(dq_queues *Q, const dcp_ctx *c, ts_err *e)
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
    Q->kd = calloc((size_t)nb, sizeof *Q->kd);
    Q->cnt = malloc((size_t)c->cfg.gpus * DCP_GAS_HARD * sizeof *Q->cnt);
    if (!Q->q || !Q->off || !Q->head || !Q->resv || !Q->vres || !Q->spare || !Q->xs || !Q->kd || !Q->cnt) {
        dq_free(Q);
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


/* Moves n reserved sequences of bucket b into the plan as one micro-batch. */
int dq_take_mb(dcp_plan *p, dq_queues *Q, int32_t b, int32_t n, int ca, int cb, ts_err *e)
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
int32_t dq_next_bucket(const dcp_ctx *c, const dq_queues *Q, const dcp_choice *ch, int remain,
                           int any_sp, const double *boost)
{
    int32_t best = -1, best_pos = INT32_MAX;
    double best_share = -1;
    for (int32_t b = 0; b < c->nb; b++) {
        int32_t a = dq_avail(Q, b);
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


int dq_cmp_group_sp(const void *x, const void *y)
{
    const dq_group *a = x, *b = y;
    if (a->sp != b->sp)
        return (a->sp < b->sp) - (a->sp > b->sp);
    return (a->b > b->b) - (a->b < b->b);
}

/* Materialises a step from groups g[0..n): the reserved first micro-batches,
 * then each group's further micro-batches (g->gas - 1 of up to g->ch.bs),
 * handed out round by round so that groups sharing a bucket share what is
 * left of it. */
int dq_emit_step(dcp_plan *p, dq_queues *Q, const dcp_choice *ch, dq_group *g, int n, ts_err *e)
{
    /* rounds: the most any group takes (its extra is one round more) */
    int mg = 1;
    for (int i = 0; i < n; i++) {
        int r = g[i].gas + (g[i].extra > 0);
        mg = r > mg ? r : mg;
    }
    mg = mg < DCP_GAS_HARD ? mg : DCP_GAS_HARD;
    qsort(g, (size_t)n, sizeof *g, dq_cmp_group_sp);
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
            if (dq_take_mb(p, Q, g[i].b, x, g[i].ch.ckpt_a, g[i].ch.ckpt_b, e))
                return -1;
            nmb++;
        }
        for (int x = 0; x < g[i].nx; x++) {
            const dcp_choice *o = &ch[g[i].xb[x]];
            if (dq_take_mb(p, Q, g[i].xb[x], g[i].xn[x], o->ckpt_a, o->ckpt_b, e))
                return -1;
            nmb++;
        }
        if (dcp_plan_push_group(p, g[i].sp, mb0, nmb, e))
            return -1;
    }
    return dcp_plan_push_step(p, g0, e);
}
