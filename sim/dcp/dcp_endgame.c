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

/* The plan being built: the micro-batches, their bins and the groups. */
typedef struct endgame {
    const dcp_ctx *c;
    const dcp_choice *ch;
    int steps;
    size_t n_it, nbin;       /* micro-batches; bins: steps x G */
    egitem *it;              /* n_it micro-batches */
    int32_t *bof, *ord;      /* n_it: bin of each; emission order */
    double *load;            /* nbin: planner time per bin, s */
    int32_t *cnt, *rank;     /* nbin + 1: micro-batches per bin; nbin: bins by load */
    egbin *sb;               /* nbin: scratch for the ranking */
    int gclass[DCP_MAX_SP];  /* groups of each SP size in a step */
    int g0[DCP_MAX_SP];      /* first slot of each SP size's groups */
    double W[DCP_MAX_SP];    /* GPU-seconds of work at each SP size */
    size_t items[DCP_MAX_SP];/* micro-batches at each SP size */
} endgame;

/* Micro-batches the buckets' remaining sequences make at their chosen
 * configurations; 0 when nothing remains or a bucket with sequences left
 * has no configuration (then the step planner reports it).  Pure. */
static size_t eg_count(const dcp_ctx *c, const dcp_choice *ch, const int32_t *head,
                       const int32_t *end)
{
    size_t n_it = 0;
    for (int32_t b = 0; b < c->nb; b++) {
        int32_t a = end[b] - head[b];
        if (a <= 0)
            continue;
        if (ch[b].bs < 1 || ch[b].sp < 1)
            return 0; /* no configuration: leave it to the step planner's error */
        n_it += (size_t)((a + ch[b].bs - 1) / ch[b].bs);
    }
    return n_it;
}

/* 1. every bucket's remaining sequences cut into micro-batches and priced,
 * with the work and count per SP size.  Cannot fail. */
static void eg_items(endgame *g, const int32_t *head, const int32_t *end)
{
    const dcp_ctx *c = g->c;
    const dcp_choice *ch = g->ch;
    size_t k = 0;
    for (int32_t b = 0; b < c->nb; b++) {
        int j = 0;
        while (j < c->cfg.n_sp && c->cfg.sp[j] != ch[b].sp)
            j++;
        for (int32_t pos = head[b]; pos < end[b]; pos += ch[b].bs) {
            int32_t n = end[b] - pos < ch[b].bs ? end[b] - pos : ch[b].bs;
            g->it[k] = (egitem){b, pos, n, j, dcp_choice_time(c, b, &ch[b], n)};
            g->W[j] += g->it[k].t * ch[b].sp;
            g->items[j]++;
            k++;
        }
    }
}

/* 2. groups per SP size, the same in every step: one for each size in use,
 * then one at a time to the size with the most work per group.  Returns 1,
 * or 0 when the sizes in use need more than the GPUs. */
static int eg_groups(endgame *g)
{
    const dcp_ctx *c = g->c;
    int G = c->cfg.gpus, nsp = c->cfg.n_sp, used = 0;
    for (int j = 0; j < nsp; j++)
        if (g->items[j]) {
            g->gclass[j] = 1;
            used += c->cfg.sp[j];
        }
    if (used > G)
        return 0;
    for (;;) {
        int best = -1;
        double bw = 0;
        for (int j = 0; j < nsp; j++) {
            if (!g->items[j] || (size_t)g->gclass[j] * g->steps >= g->items[j] ||
                c->cfg.sp[j] > G - used)
                continue;
            double w = g->W[j] / ((double)c->cfg.sp[j] * g->gclass[j]);
            if (w > bw) {
                bw = w;
                best = j;
            }
        }
        if (best < 0)
            break;
        g->gclass[best]++;
        used += c->cfg.sp[best];
    }
    /* a step's groups of SP size j are slots g0[j] .. g0[j] + gclass[j),
     * largest SP first; bins of size j: steps x as many, from steps x g0[j] */
    int ng = 0;
    for (int j = nsp - 1; j >= 0; j--) {
        g->g0[j] = ng;
        ng += g->gclass[j];
    }
    return 1;
}

/* 3. micro-batches longest first to the least-loaded bin of their SP size.
 * Returns 1, or 0 when the groups cannot accumulate them all. */
static int eg_assign(endgame *g)
{
    qsort(g->it, g->n_it, sizeof *g->it, cmp_item);
    for (size_t i = 0; i < g->n_it; i++) {
        int j = g->it[i].j;
        int32_t lo = (int32_t)g->steps * g->g0[j], hi = lo + (int32_t)g->steps * g->gclass[j];
        int32_t bb = -1;
        for (int32_t x = lo; x < hi; x++)
            if (g->cnt[x] < DCP_GAS_HARD && (bb < 0 || g->load[x] < g->load[bb]))
                bb = x;
        if (bb < 0)
            return 0; /* more micro-batches than the groups may accumulate */
        g->bof[i] = bb;
        g->load[bb] += g->it[i].t;
        g->cnt[bb]++;
    }
    return 1;
}

/* 4. the heaviest bins of each SP size make the first step, and so on
 * (consecutive bins by load, so the sum of the steps' longest is least):
 * rank[steps x g0[j] + r] is the bin of SP size j with the r-th largest
 * load, run by slot g0[j] + r % gclass[j] in step r / gclass[j].  Cannot
 * fail. */
static void eg_rank(endgame *g)
{
    for (int j = 0; j < g->c->cfg.n_sp; j++) {
        if (!g->gclass[j])
            continue;
        int32_t lo = (int32_t)g->steps * g->g0[j], n = (int32_t)g->steps * g->gclass[j];
        for (int32_t x = 0; x < n; x++)
            g->sb[x] = (egbin){g->load[lo + x], lo + x};
        qsort(g->sb, (size_t)n, sizeof *g->sb, cmp_bin);
        for (int32_t x = 0; x < n; x++)
            g->rank[lo + x] = g->sb[x].bin;
    }
}

/* Emits the steps into p: step by step, slot by slot, each bin's
 * micro-batches longest first (the sequences of q).  Returns 1, or -1 with
 * e set (allocation failure). */
static int eg_emit(endgame *g, const int32_t *q, dcp_plan *p, ts_err *e)
{
    const dcp_ctx *c = g->c;
    size_t nbin = g->nbin;
    int32_t *cnt = g->cnt;
    int rc = -1;
    for (size_t x = 0, s = 0; x <= nbin; x++) {
        int32_t v = cnt[x];
        cnt[x] = (int32_t)s;
        s += (size_t)v;
    }
    int32_t *start = malloc((nbin + 1) * sizeof *start);
    if (!start)
        return ts_errf(e, "out of memory");
    memcpy(start, cnt, (nbin + 1) * sizeof *start);
    for (size_t i = 0; i < g->n_it; i++)
        g->ord[cnt[g->bof[i]]++] = (int32_t)i;
    for (int st = 0; st < g->steps; st++) {
        int32_t gstart = (int32_t)p->n_grp;
        for (int j = c->cfg.n_sp - 1; j >= 0; j--)
            for (int k = 0; k < g->gclass[j]; k++) {
                int32_t bin = g->rank[g->steps * g->g0[j] + st * g->gclass[j] + k];
                int32_t mb0 = (int32_t)p->n_mb, nmb = 0;
                for (int32_t o = start[bin]; o < start[bin + 1]; o++) {
                    const egitem *m = &g->it[g->ord[o]];
                    int32_t first = (int32_t)p->n_seq;
                    for (int32_t x = 0; x < m->n; x++)
                        if (dcp_plan_push_seq(p, q[m->pos + x], e))
                            goto fail;
                    if (dcp_plan_push_mb(p, first, m->n, g->ch[m->b].ckpt_a,
                                         g->ch[m->b].ckpt_b, e))
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
    return rc;
}

int dcp_endgame(const dcp_ctx *c, const dcp_choice *ch, const int32_t *q, const int32_t *head,
                const int32_t *end, int steps, dcp_plan *p, ts_err *e)
{
    if (steps < 1)
        return 0;
    endgame g = {.c = c, .ch = ch, .steps = steps, .n_it = eg_count(c, ch, head, end)};
    if (g.n_it == 0)
        return 0;
    g.nbin = (size_t)c->cfg.gpus * steps;
    g.it = malloc(g.n_it * sizeof *g.it);
    g.bof = malloc(g.n_it * sizeof *g.bof);
    g.ord = malloc(g.n_it * sizeof *g.ord);
    g.load = calloc(g.nbin, sizeof *g.load);
    g.cnt = calloc(g.nbin + 1, sizeof *g.cnt);
    g.rank = malloc(g.nbin * sizeof *g.rank);
    g.sb = malloc(g.nbin * sizeof *g.sb);
    int rc = 0;
    if (!g.it || !g.bof || !g.ord || !g.load || !g.cnt || !g.rank || !g.sb) {
        rc = ts_errf(e, "out of memory");
    } else {
        eg_items(&g, head, end);
        if (eg_groups(&g) && eg_assign(&g)) {
            eg_rank(&g);
            rc = eg_emit(&g, q, p, e);
        }
    }
    free(g.it);
    free(g.bof);
    free(g.ord);
    free(g.load);
    free(g.cnt);
    free(g.rank);
    free(g.sb);
    return rc;
}
