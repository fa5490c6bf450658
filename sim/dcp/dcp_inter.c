/*
 * dcp-inter: each bucket keeps its best (SP, micro-batch); a step's GPUs are
 * filled with groups (sim/dcp/dcp_queue.c's draw by share, or by work with
 * dcp.draw = work), the accumulation search gives each
 * group its micro-batch count (sim/dcp/dcp.c), and then, each optional: the
 * slack fill (dcp.fill), coarse buckets drawn to finish early (dcp.ahead),
 * other buckets' micro-batches in the slack (dcp.xfill), and the last
 * step(s) packed longest first (dcp.endgame, sim/dcp/dcp_endgame.c).  The
 * planner also counts what each group is expected to accumulate at the
 * previous step's target, so that buckets are drawn in proportion to what
 * steps really consume and the rare, long buckets are not left alone at
 * the end.
 */
#include "sim/dcp/dcp_inter.h"
#include "sim/dcp/dcp_queue.h"

#include <math.h>
#include <stdlib.h>

/* dcp.ahead: drawing buckets in proportion to what is left makes every
 * bucket run out together at the end of the epoch, when the coarse ones (one
 * micro-batch over dcp.coarse of the step: long videos, one per GPU) cannot
 * be balanced by anything, so the last steps wait on them.  With S steps of
 * work left at the last target T (each bucket's sequences at its chosen
 * configuration, in GPU-seconds, over G x T), a coarse bucket's share left is
 * weighed S / (S - ahead), so that it finishes `ahead` steps early and the
 * fine-grained buckets, which the accumulation counts and the slack fill can
 * balance, make the last steps.  All weights are 1 before the first step and
 * once fewer than `ahead` steps are left.  W: the work left, GPU-seconds
 * (dcp_endgame_work). */
static void coarse_boost(const dcp_ctx *c, const dcp_choice *ch, double W, double T,
                         double *boost)
{
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
static void fill_slack(const dcp_ctx *c, dq_queues *Q, dq_group *g, const int *cap, int n, double T)
{
    for (int i = 0; i < n; i++) {
        double fit = floor(T / g[i].t * (1 + 1e-12)); /* a double: t may be tiny */
        int more = fit < cap[i] ? (int)fit : cap[i];
        if (more > g[i].gas)
            g[i].gas = more;
    }
    for (int i = 0; i < n; i++)
        Q->spare[g[i].b] = dq_avail(Q, g[i].b) + Q->resv[g[i].b];
    for (int i = 0; i < n; i++)
        Q->spare[g[i].b] -= g[i].n + (int32_t)(g[i].gas - 1) * g[i].ch.bs;
    for (int i = 0; i < n; i++) {
        int32_t b = g[i].b, left = Q->spare[b];
        double slack = T - g[i].gas * g[i].t;
        if (g[i].gas >= DCP_GAS_HARD || left <= 0 || slack <= 0)
            continue;
        int j = dq_sp_index(c, g[i].sp);
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
static void fill_across(const dcp_ctx *c, dq_queues *Q, const dcp_choice *ch, dq_group *g, int n,
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

/* dcp.draw = work: the next group serves the bucket whose work left (its
 * unplanned sequences at its configuration, in one group's seconds, times
 * its coarse weight) per group is largest counting this group, Q->kd[b]
 * groups having been drawn for it this step (the D'Hondt rule), among those
 * with a sequence left to reserve and an SP size that fits `remain` GPUs;
 * ties to the earliest sequence in data order.  A bucket with less work
 * than a group's share of the step is then not drawn at all until the
 * others come down to it, instead of idling a group for most of the step,
 * and large buckets get several groups.  -1 when none fits. */
static int32_t next_by_work(const dcp_ctx *c, const dq_queues *Q, const dcp_choice *ch,
                           int remain, const double *boost)
{
    const int32_t *k = Q->kd;
    int32_t best = -1, best_pos = INT32_MAX;
    double bq = -1;
    for (int32_t b = 0; b < c->nb; b++) {
        int32_t a = dq_avail(Q, b);
        if (a <= 0 || ch[b].bs < 1 || ch[b].sp > remain)
            continue;
        double W = (double)(a + Q->resv[b]) * ch[b].time_s / ch[b].bs * boost[b];
        double q = W / (k[b] + 1);
        int32_t pos = Q->q[Q->head[b] + Q->resv[b]];
        if (q > bq || (q == bq && pos < best_pos)) {
            bq = q;
            best = b;
            best_pos = pos;
        }
    }
    return best;
}

int dcp_plan_inter(const dcp_ctx *c, const dcp_strategy *s, dcp_plan *p, ts_err *e)
{
    const dcp_choice *ch = s->pac ? c->best_pac : c->best;
    int G = c->cfg.gpus, rc = -1;
    dq_queues Q;
    if (dq_init(&Q, c, e))
        return -1;
    dq_group *g = malloc((size_t)G * sizeof *g);
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
        /* the work left: q[head[b] .. off[b + 1]) (nothing is reserved
         * between steps) */
        const int32_t *end = Q.off + 1;
        double W = dcp_endgame_work(c, ch, Q.head, end);
        if (c->cfg.endgame && T_est > 0) {
            double k = ceil(W / (G * T_est) - 1e-9);
            if (k <= c->cfg.endgame) {
                int r = dcp_endgame(c, ch, Q.q, Q.head, end, k < 1 ? 1 : (int)k, p, e);
                if (r < 0)
                    goto done;
                if (r > 0)
                    break;
            }
        }
        coarse_boost(c, ch, W, T_est, boost);
        for (int32_t b2 = 0; b2 < c->nb; b2++)
            Q.kd[b2] = 0;
        while (remain > 0 && (b = c->cfg.draw_work ? next_by_work(c, &Q, ch, remain, boost)
                                                   : dq_next_bucket(c, &Q, ch, remain, 0, boost)) >= 0) {
            Q.kd[b]++;
            int32_t a = dq_avail(&Q, b), cnt = ch[b].bs < a ? ch[b].bs : a;
            Q.resv[b] += cnt;
            g[n] = (dq_group){.b = b, .n = cnt, .sp = ch[b].sp, .gas = 1, .ch = ch[b],
                            .t = dcp_choice_time(c, b, &ch[b], cnt)};
            et[n] = g[n].t;
            remain -= ch[b].sp;
            /* what this group will likely accumulate at the last step's target,
             * so that buckets are drawn in proportion to what steps consume (the
             * share draw reads it; drawing by work counts groups instead) */
            if (T_est > g[n].t && !c->cfg.draw_work) {
                double more = (c->cfg.fill ? floor(T_est / g[n].t) - 1 : floor(T_est / g[n].t - 0.5)) * ch[b].bs;
                int32_t room = dq_avail(&Q, b) - Q.vres[b];
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
            int32_t b2 = g[i].b, left = dq_avail(&Q, b2) / Q.spare[b2];
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
        if (dq_emit_step(p, &Q, ch, g, n, e))
            goto done;
    }
    rc = 0;
done:
    free(g);
    free(et);
    free(gas);
    free(cap);
    free(boost);
    dq_free(&Q);
    return rc;
}
