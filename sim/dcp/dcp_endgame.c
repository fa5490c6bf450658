/*
 * dcp-inter's last step(s) (dcp.endgame).
 *
 * dcp-inter plans a step at a time: groups drawn bucket by bucket, then
 * accumulation counts from the target search.  At the end of the epoch that
 * leaves a step whose groups hold a few sequences each and are capped by
 * what their buckets have left, and the sequences that did not fit spill
 * into one more short step with most GPUs idle (at mix 1 on 32 GPUs the
 * last two steps ran at 33% and 71% imbalance).  Once what is left fits in
 * dcp.endgame steps (default 1) at the previous target, this plans it as
 * that many steps instead:
 *
 *   1. every bucket's remaining sequences are cut into micro-batches of its
 *      chosen configuration (SP size, micro-batch, checkpointing; the last
 *      one partial), each priced by the profile (dcp_choice_time);
 *   2. each SP size in use gets one group, then the GPUs left go one group
 *      at a time to the SP size with the most work per group;
 *   3. micro-batches go longest first to the least-loaded of the steps x
 *      groups bins of their SP size (LPT), so a group may accumulate
 *      micro-batches of several buckets, as gradient accumulation allows;
 *   4. with several steps, the heaviest bins of each SP size make the
 *      first step, the next ones the second, and so on.
 *
 * Each micro-batch keeps its bucket's memory-feasible configuration, so the
 * step is feasible; a group takes at most DCP_GAS_HARD micro-batches, and
 * when that cannot hold everything the step is declined (the planner goes
 * on step by step).  Deterministic: ties break on bucket and data order.
 */
#include "sim/dcp/dcp.h"

#include <stdlib.h>
#include <string.h>

typedef struct egitem {
    int32_t b, pos, n;  /* bucket, position in the queue array, sequences */
    int j;              /* SP index */
    double t;           /* planner time, s */
} egitem;

static int cmp_item(const void *x, const void *y)
{
    const egitem *a = x, *b = y;
    if (a->t != b->t)
        return (a->t < b->t) - (a->t > b->t);
    if (a->b != b->b)
        return (a->b > b->b) - (a->b < b->b);
    return (a->pos > b->pos) - (a->pos < b->pos);
}

double dcp_endgame_work(const dcp_ctx *c, const dcp_choice *ch, const int32_t *head,
                        const int32_t *end)
{
    double W = 0;
    for (int32_t b = 0; b < c->nb; b++) {
        int32_t a = end[b] - head[b];
        if (a > 0 && ch[b].bs > 0)
            W += a * ch[b].time_s / ch[b].bs * ch[b].sp;
    }
    return W;
}

typedef struct egbin {
    double load;
    int32_t bin;
} egbin;

/* heaviest first, ties to the lower index */
static int cmp_bin(const void *x, const void *y)
{
    const egbin *a = x, *b = y;
    if (a->load != b->load)
        return (a->load < b->load) - (a->load > b->load);
    return (a->bin > b->bin) - (a->bin < b->bin);
}

int dcp_endgame(const dcp_ctx *c, const dcp_choice *ch, const int32_t *q, const int32_t *head,
                const int32_t *end, int steps, dcp_plan *p, ts_err *e)
{
    int G = c->cfg.gpus, nsp = c->cfg.n_sp, rc = -1;
    size_t n_it = 0;
    if (steps < 1)
        return 0;
    for (int32_t b = 0; b < c->nb; b++) {
        int32_t a = end[b] - head[b];
        if (a <= 0)
            continue;
        if (ch[b].bs < 1 || ch[b].sp < 1)
            return 0; /* no configuration: leave it to the step planner's error */
        n_it += (size_t)((a + ch[b].bs - 1) / ch[b].bs);
    }
    if (n_it == 0)
        return 0;
    size_t nbin = (size_t)G * steps;
    egitem *it = malloc(n_it * sizeof *it);
    int32_t *bof = malloc(n_it * sizeof *bof), *ord = malloc(n_it * sizeof *ord);
    double *load = calloc(nbin, sizeof *load);
    int32_t *cnt = calloc(nbin + 1, sizeof *cnt), *rank = malloc(nbin * sizeof *rank);
    egbin *sb = malloc(nbin * sizeof *sb);
    int gclass[DCP_MAX_SP] = {0}, g0[DCP_MAX_SP] = {0};
    double W[DCP_MAX_SP] = {0};
    size_t items[DCP_MAX_SP] = {0};
    if (!it || !bof || !ord || !load || !cnt || !rank || !sb) {
        ts_errf(e, "out of memory");
        goto done;
    }

    /* 1. micro-batches */
    size_t k = 0;
    for (int32_t b = 0; b < c->nb; b++) {
        int j = 0;
        while (j < nsp && c->cfg.sp[j] != ch[b].sp)
            j++;
        for (int32_t pos = head[b]; pos < end[b]; pos += ch[b].bs) {
            int32_t n = end[b] - pos < ch[b].bs ? end[b] - pos : ch[b].bs;
            it[k] = (egitem){b, pos, n, j, dcp_choice_time(c, b, &ch[b], n)};
            W[j] += it[k].t * ch[b].sp;
            items[j]++;
            k++;
        }
    }

    /* 2. groups per SP size, the same in every step */
    int used = 0;
    for (int j = 0; j < nsp; j++)
        if (items[j]) {
            gclass[j] = 1;
            used += c->cfg.sp[j];
        }
    if (used > G) {
        rc = 0;
        goto done;
    }
    for (;;) {
        int best = -1;
        double bw = 0;
        for (int j = 0; j < nsp; j++) {
            if (!items[j] || (size_t)gclass[j] * steps >= items[j] || c->cfg.sp[j] > G - used)
                continue;
            double w = W[j] / ((double)c->cfg.sp[j] * gclass[j]);
            if (w > bw) {
                bw = w;
                best = j;
            }
        }
        if (best < 0)
            break;
        gclass[best]++;
        used += c->cfg.sp[best];
    }
    /* a step's groups of SP size j are slots g0[j] .. g0[j] + gclass[j),
     * largest SP first; bins of size j: steps x as many, from steps x g0[j] */
    int ng = 0;
    for (int j = nsp - 1; j >= 0; j--) {
        g0[j] = ng;
        ng += gclass[j];
    }

    /* 3. longest first to the least-loaded bin of its SP size */
    qsort(it, n_it, sizeof *it, cmp_item);
    for (size_t i = 0; i < n_it; i++) {
        int j = it[i].j;
        int32_t lo = (int32_t)steps * g0[j], hi = lo + (int32_t)steps * gclass[j], bb = -1;
        for (int32_t x = lo; x < hi; x++)
            if (cnt[x] < DCP_GAS_HARD && (bb < 0 || load[x] < load[bb]))
                bb = x;
        if (bb < 0) {
            rc = 0; /* more micro-batches than the groups may accumulate */
            goto done;
        }
        bof[i] = bb;
        load[bb] += it[i].t;
        cnt[bb]++;
    }
    /* 4. the heaviest bins of each SP size make the first step, and so on
     * (consecutive bins by load, so the sum of the steps' longest is least):
     * rank[steps x g0[j] + r] is the bin of SP size j with the r-th largest
     * load, run by slot g0[j] + r % gclass[j] in step r / gclass[j] */
    for (int j = 0; j < nsp; j++) {
        if (!gclass[j])
            continue;
        int32_t lo = (int32_t)steps * g0[j], n = (int32_t)steps * gclass[j];
        for (int32_t x = 0; x < n; x++)
            sb[x] = (egbin){load[lo + x], lo + x};
        qsort(sb, (size_t)n, sizeof *sb, cmp_bin);
        for (int32_t x = 0; x < n; x++)
            rank[lo + x] = sb[x].bin;
    }

    /* emit: step by step, slot by slot, each bin's micro-batches longest first */
    for (size_t x = 0, s = 0; x <= nbin; x++) {
        int32_t v = cnt[x];
        cnt[x] = (int32_t)s;
        s += (size_t)v;
    }
    int32_t *start = malloc((nbin + 1) * sizeof *start);
    if (!start) {
        ts_errf(e, "out of memory");
        goto done;
    }
    memcpy(start, cnt, (nbin + 1) * sizeof *start);
    for (size_t i = 0; i < n_it; i++)
        ord[cnt[bof[i]]++] = (int32_t)i;
    for (int st = 0; st < steps; st++) {
        int32_t gstart = (int32_t)p->n_grp;
        for (int j = nsp - 1; j >= 0; j--)
            for (int g = 0; g < gclass[j]; g++) {
                int32_t bin = rank[steps * g0[j] + st * gclass[j] + g];
                int32_t mb0 = (int32_t)p->n_mb, nmb = 0;
                for (int32_t o = start[bin]; o < start[bin + 1]; o++) {
                    const egitem *m = &it[ord[o]];
                    int32_t first = (int32_t)p->n_seq;
                    for (int32_t x = 0; x < m->n; x++)
                        if (dcp_plan_push_seq(p, q[m->pos + x], e))
                            goto fail;
                    if (dcp_plan_push_mb(p, first, m->n, ch[m->b].ckpt_a, ch[m->b].ckpt_b, e))
                        goto fail;
                    nmb++;
                }
                if (nmb && dcp_plan_push_group(p, c->cfg.sp[j], mb0, nmb, e))
                    goto fail;
            }
        if ((int32_t)p->n_grp > gstart && dcp_plan_push_step(p, gstart, e))
            goto fail;
    }
    rc = 1;
fail:
    free(start);
done:
    free(it);
    free(bof);
    free(ord);
    free(load);
    free(cnt);
    free(rank);
    free(sb);
    return rc;
}
