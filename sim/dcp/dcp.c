/*
 * DCP: strategy names, defaults, the per-bucket profile, PAC's knapsack and
 * the accumulation search.  The planners are in sim/dcp/dcp_plan.c,
 * sim/dcp/dcp_inter.c and sim/dcp/dcp_endgame.c (sim/dcp/dcp_queue.c their queues), the
 * simulator in sim/dcp/dcp_sim.c.
 *
 * The profile plays the part of DCP's profiler (VideoSys core/dcp), with the
 * cost model in place of measurement: for every bucket (its largest member)
 * and SP size it finds the largest micro-batch that fits the memory budget
 * with full checkpointing (memory is linear in the micro-batch, so two
 * evaluations give it exactly) and prices micro-batches of 1, 2, 4, ...
 * sequences up to it, as the profiler's doubling does.  From that table it
 * keeps, per bucket, the (SP, micro-batch) with the most samples per second
 * per GPU (dcp-intra/inter; within tie_tol of it, the shortest micro-batch),
 * the same with PAC's checkpointing, and the
 * bucket strategy's choice at its fixed SP size: doubled until memory runs
 * out, then, for buckets slower than the median bucket, cut to
 * max(1, floor(bs * median / time)) (the profiler's interpolation for fixed
 * SP).  Building it costs buckets x SP sizes x ~20 cost-model calls; the
 * planners then only read it.
 *
 * PAC: a layer of type A or B that keeps its activations saves its forward
 * recomputation (tc_layer_fwd_time) and costs tc_layer_keep_bytes; with two
 * item types and at most n_a + 1 choices of the A count, enumerating the A
 * count and filling the rest with B is an exact bounded knapsack.
 */
#include "sim/dcp/dcp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

void dcp_cfg_default(dcp_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->sp[0] = 1;
    c->sp[1] = 2;
    c->sp[2] = 4;
    c->sp[3] = 8;
    c->n_sp = 4;
    c->mem_cap = 0.70;
    c->reserve_bytes = 2e9;
    c->zero_stage = 1;
    c->max_gas = 5;
    c->overshoot = 1.2;
    c->fill = 1;
    c->endgame = 1;
    c->xfill = 0;
    c->draw_work = 0;
    c->ahead = 1.0;
    c->coarse = 0.25;
    c->tie_tol = 0.0;
    c->seed = 1;
}

int dcp_parse_strategies(const char *list, dcp_strategy *out, int max, int *n, ts_err *e)
{
    static const struct {
        const char *name;
        dcp_kind kind;
    } names[] = {{"bucket", DCP_BUCKET}, {"packed", DCP_PACKED}, {"dcp-intra", DCP_INTRA},
                 {"dcp-inter", DCP_INTER}, {"bound", DCP_BOUND}};
    char buf[512];
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf)
        return ts_errf(e, "strategy list too long");
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (*n == max)
            return ts_errf(e, "at most %d strategies", max);
        dcp_strategy *s = &out[*n];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", tok);
        char *plus = strchr(tok, '+');
        if (plus) {
            if (strcmp(plus, "+pac"))
                return ts_errf(e, "strategy '%s': unknown suffix '%s' (only +pac)", tok, plus);
            *plus = 0;
            s->pac = 1;
        }
        size_t k;
        for (k = 0; k < sizeof names / sizeof names[0]; k++)
            if (!strcmp(tok, names[k].name))
                break;
        if (k == sizeof names / sizeof names[0])
            return ts_errf(e, "unknown strategy '%s' (bucket, packed, dcp-intra, dcp-inter, "
                              "bound, with +pac on bucket/dcp-intra/dcp-inter)", s->name);
        s->kind = names[k].kind;
        if (s->pac && (s->kind == DCP_PACKED || s->kind == DCP_BOUND))
            return ts_errf(e, "strategy '%s': +pac applies to bucket, dcp-intra and dcp-inter",
                           s->name);
        (*n)++;
    }
    if (*n == 0)
        return ts_errf(e, "empty strategy list");
    return 0;
}

int dcp_parse_sp_sizes(const char *list, int *sp, int *n, ts_err *e)
{
    char buf[128];
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf)
        return ts_errf(e, "SP size list too long");
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (ts_parse_i64(tok, 1, 1 << 16, &v) || (v & (v - 1)))
            return ts_errf(e, "SP size '%s' is not a power of two in [1, 65536]", tok);
        if (*n == DCP_MAX_SP)
            return ts_errf(e, "at most %d SP sizes", DCP_MAX_SP);
        if (*n && v <= sp[*n - 1])
            return ts_errf(e, "SP sizes must be ascending ('%s')", list);
        sp[(*n)++] = (int)v;
    }
    if (*n == 0)
        return ts_errf(e, "empty SP size list");
    return 0;
}

/* ------------------------------------------------------------- profile */

static tc_work rep_work(const dcp_ctx *c, int32_t b, double bs)
{
    const bt_bucket *u = &c->bt->buckets[b];
    tc_work w = {0};
    tc_work_add(&w, u->t, u->s, bs);
    return w;
}

static double mb_time(const dcp_ctx *c, int32_t b, int sp, double bs, int ca, int cb)
{
    tc_work w = rep_work(c, b, bs);
    tc_par p = {sp, c->cfg.ring, ca, cb};
    return tc_microbatch_time(c->hw, c->tm, &p, &w, NULL);
}

double dcp_est_mb_time(const dcp_ctx *c, int32_t b, int sp, int32_t bs, int ca, int cb)
{
    return mb_time(c, b, sp, bs, ca, cb);
}

double dcp_step_idle(const double *t, const int32_t *sp, int n, int gpus, double *tmax)
{
    double m = 0, busy = 0;
    for (int i = 0; i < n; i++) {
        m = t[i] > m ? t[i] : m;
        busy += sp[i] * t[i];
    }
    *tmax = m;
    return gpus * m - busy;
}

/* Largest micro-batch of bucket b at sp with full checkpointing (0: none). */
static int32_t max_bs_at(const dcp_ctx *c, int32_t b, int sp)
{
    tc_par p = {sp, c->cfg.ring, c->tm->n_a, c->tm->n_b};
    tc_work w1 = rep_work(c, b, 1), w2 = rep_work(c, b, 2);
    double m1 = tc_act_bytes(c->tm, &p, &w1), m2 = tc_act_bytes(c->tm, &p, &w2);
    if (m1 > c->budget_bytes)
        return 0;
    double per = m2 - m1, base = m1 - per;
    double k = per > 0 ? floor((c->budget_bytes - base) / per) : 1 << 20;
    if (k > (1 << 20))
        k = 1 << 20;
    /* guard rounding: step down until it fits */
    while (k > 1) {
        tc_work wk = rep_work(c, b, k);
        if (tc_act_bytes(c->tm, &p, &wk) <= c->budget_bytes)
            break;
        k--;
    }
    return k < 1 ? 1 : (int32_t)k;
}

double dcp_prof_time(const dcp_ctx *c, int32_t b, int j, int32_t bs)
{
    const double *t = &c->tab[((size_t)b * c->cfg.n_sp + j) * DCP_MAX_K];
    if (bs < 1)
        return 0.0;
    int k = 0;
    while (k + 1 < DCP_MAX_K && (1 << (k + 1)) <= bs && t[k + 1] > 0)
        k++;
    double lo = (double)(1 << k);
    if (bs == (1 << k) || !(k + 1 < DCP_MAX_K && t[k + 1] > 0))
        return t[k] * bs / lo;
    return t[k] + (bs - lo) / lo * (t[k + 1] - t[k]);
}

double dcp_choice_time(const dcp_ctx *c, int32_t b, const dcp_choice *ch, int32_t n)
{
    if (n == ch->bs)
        return ch->time_s;
    int j = 0;
    while (j < c->cfg.n_sp && c->cfg.sp[j] != ch->sp)
        j++;
    double full = dcp_prof_time(c, b, j, ch->bs);
    return ch->time_s * (full > 0 ? dcp_prof_time(c, b, j, n) / full : (double)n / ch->bs);
}

int dcp_pac(const dcp_ctx *c, int32_t b, dcp_choice *ch)
{
    const tc_model *tm = c->tm;
    tc_work w = rep_work(c, b, ch->bs);
    tc_par p = {ch->sp, c->cfg.ring, tm->n_a, tm->n_b};
    if (tc_act_bytes(tm, &p, &w) > c->budget_bytes)
        return -1;
    double save[2] = {tc_layer_fwd_time(c->hw, tm, &p, &w, 0),
                      tm->n_b ? tc_layer_fwd_time(c->hw, tm, &p, &w, 1) : 0.0};
    double best = -1.0;
    int best_a = tm->n_a, best_b = tm->n_b;
    /* no checkpointing at all also drops the recomputation working set, so
     * memory is not monotone at that corner: try it first */
    p.ckpt_a = p.ckpt_b = 0;
    if (tc_act_bytes(tm, &p, &w) <= c->budget_bytes) {
        ch->ckpt_a = ch->ckpt_b = 0;
        ch->time_s = mb_time(c, b, ch->sp, ch->bs, 0, 0);
        return 0;
    }
    for (int ka = 0; ka <= tm->n_a; ka++) { /* ka layers of type A keep activations */
        p.ckpt_a = tm->n_a - ka;
        /* largest kb that fits: memory falls as ckpt_b rises */
        int lo = 0, hi = tm->n_b; /* kb in [lo, hi] */
        p.ckpt_b = tm->n_b;
        if (tc_act_bytes(tm, &p, &w) > c->budget_bytes)
            continue;
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            p.ckpt_b = tm->n_b - mid;
            if (tc_act_bytes(tm, &p, &w) <= c->budget_bytes)
                lo = mid;
            else
                hi = mid - 1;
        }
        double v = ka * save[0] + lo * save[1];
        if (v > best + 1e-15) {
            best = v;
            best_a = tm->n_a - ka;
            best_b = tm->n_b - lo;
        }
    }
    ch->ckpt_a = best_a;
    ch->ckpt_b = best_b;
    ch->time_s = mb_time(c, b, ch->sp, ch->bs, best_a, best_b);
    return 0;
}

/* DCP's choice among a bucket's configurations: the most samples per second
 * per GPU; of those within tie_tol of it, the shortest micro-batch, so that
 * near-ties go to the finer granularity the balancing needs. */
static dcp_choice pick_best(const dcp_choice *ch, int n, double tie_tol)
{
    double best = 0;
    for (int i = 0; i < n; i++) {
        double thr = ch[i].bs / (ch[i].sp * ch[i].time_s);
        if (thr > best)
            best = thr;
    }
    int w = -1;
    for (int i = 0; i < n; i++) {
        double thr = ch[i].bs / (ch[i].sp * ch[i].time_s);
        if (thr >= best * (1 - tie_tol) && (w < 0 || ch[i].time_s < ch[w].time_s))
            w = i;
    }
    return ch[w];
}

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* 1 when SP size sp can run: it divides the heads (or ring attention is on)
 * and fits the GPUs.  Pure. */
static int sp_usable(const dcp_ctx *c, int sp)
{
    return tc_sp_ok(c->tm, sp, c->cfg.ring) && sp <= c->cfg.gpus;
}

/* Checks c->cfg and sets the per-GPU memory budget and the step's
 * synchronisation time.  Returns 0, or -1 with e set. */
static int ctx_budget(dcp_ctx *c, ts_err *e)
{
    const dcp_cfg *cfg = &c->cfg;
    const btrace *bt = c->bt;
    if (!bt->buckets || bt->n_buckets <= 0)
        return ts_errf(e, "batch trace is not bucketized");
    if (cfg->gpus < 1 || cfg->n_sp < 1)
        return ts_errf(e, "DCP needs gpus >= 1 and at least one SP size");
    if (!(cfg->max_gas >= 1 && cfg->max_gas <= 64) || !(cfg->overshoot >= 1.0))
        return ts_errf(e, "DCP needs max_gas in [1, 64] and overshoot >= 1");
    c->nb = bt->n_buckets;
    c->states_bytes = tc_states_bytes(c->tm, cfg->zero_stage, cfg->gpus);
    c->budget_bytes = cfg->mem_cap * c->hw->hbm_bytes - c->states_bytes - cfg->reserve_bytes;
    if (c->budget_bytes <= 0)
        return ts_errf(e, "model states (%.1f GB) and reserve leave no memory under the cap "
                          "(%.2f of %.0f GB)", c->states_bytes / 1e9, cfg->mem_cap,
                       c->hw->hbm_bytes / 1e9);
    c->sync_s = tc_step_sync_time(c->hw, c->tm, cfg->gpus, cfg->zero_stage);
    return 0;
}

/* Profiles bucket b: at every usable SP size its largest micro-batch and
 * the time of micro-batches of 2^k sequences with full checkpointing, and
 * from those, and the same with PAC, the best configuration.  Returns 0, or
 * -1 with e set: the bucket fits in memory at no SP size. */
static int profile_bucket(dcp_ctx *c, int32_t b, ts_err *e)
{
    const tc_model *tm = c->tm;
    int nsp = c->cfg.n_sp;
    /* every (SP, 2^k) with full checkpointing and with PAC */
    dcp_choice full[DCP_MAX_SP * DCP_MAX_K], pac[DCP_MAX_SP * DCP_MAX_K];
    int nf = 0, np = 0;
    for (int j = 0; j < nsp; j++) {
        int sp = c->cfg.sp[j];
        if (!sp_usable(c, sp))
            continue;
        int32_t mb = max_bs_at(c, b, sp);
        c->max_bs[(size_t)b * nsp + j] = mb;
        double *t = &c->tab[((size_t)b * nsp + j) * DCP_MAX_K];
        for (int k = 0; k < DCP_MAX_K && (1 << k) <= mb; k++) {
            int32_t bs = 1 << k;
            t[k] = mb_time(c, b, sp, bs, tm->n_a, tm->n_b);
            full[nf++] = (dcp_choice){sp, bs, tm->n_a, tm->n_b, t[k]};
            dcp_choice pc = {sp, bs, 0, 0, 0};
            if (dcp_pac(c, b, &pc) == 0)
                pac[np++] = pc;
        }
    }
    if (nf == 0) {
        char nm[64];
        bt_bucket_name(c->bt, b, nm, sizeof nm);
        return ts_errf(e, "bucket %s (%d tokens) fits in memory at no SP size (cap %.2f of "
                          "%.0f GB)", nm, c->bt->buckets[b].hi, c->cfg.mem_cap,
                       c->hw->hbm_bytes / 1e9);
    }
    c->best[b] = pick_best(full, nf, c->cfg.tie_tol);
    c->best_pac[b] = np ? pick_best(pac, np, c->cfg.tie_tol) : c->best[b];
    return 0;
}

/* The bucket strategy's SP size: the one given, or the smallest that fits
 * the longest sequence.  Returns its index in cfg.sp, or -1 with e set. */
static int bucket_sp_index(const dcp_ctx *c, ts_err *e)
{
    const dcp_cfg *cfg = &c->cfg;
    for (int j = 0; j < cfg->n_sp; j++) {
        if (cfg->bucket_sp > 0 && cfg->sp[j] != cfg->bucket_sp)
            continue;
        if (!sp_usable(c, cfg->sp[j]))
            continue;
        if (c->max_bs[(size_t)(c->nb - 1) * cfg->n_sp + j] >= 1)
            return j;
    }
    if (cfg->bucket_sp > 0)
        return ts_errf(e, "bucket SP %d is not a listed, usable SP size that fits the "
                          "longest sequence", cfg->bucket_sp);
    return ts_errf(e, "no SP size fits the longest sequence");
}

/* The bucket strategy's choice per bucket at SP index j0: the profile's
 * largest power-of-two micro-batch, then for buckets slower than the median
 * bucket cut to max(1, floor(bs * median / time)).  Returns 0, or -1 with e
 * set: a bucket does not fit at that SP size, allocation failure. */
static int bucket_choices(dcp_ctx *c, int j0, ts_err *e)
{
    const tc_model *tm = c->tm;
    int nsp = c->cfg.n_sp;
    double *med = calloc((size_t)c->nb, sizeof *med);
    if (!med)
        return ts_errf(e, "out of memory");
    c->bucket_sp = c->cfg.sp[j0];
    for (int32_t b = 0; b < c->nb; b++) {
        int32_t mb = c->max_bs[(size_t)b * nsp + j0];
        if (mb < 1) {
            char nm[64];
            free(med);
            bt_bucket_name(c->bt, b, nm, sizeof nm);
            return ts_errf(e, "bucket %s does not fit at the bucket SP size %d", nm,
                           c->cfg.sp[j0]);
        }
        int k = 0;
        while ((1 << (k + 1)) <= mb && k + 1 < DCP_MAX_K)
            k++;
        double t = c->tab[((size_t)b * nsp + j0) * DCP_MAX_K + k];
        c->bkt[b] = (dcp_choice){c->bucket_sp, 1 << k, tm->n_a, tm->n_b, t};
        med[b] = t;
    }
    qsort(med, (size_t)c->nb, sizeof *med, cmp_dbl);
    double median = c->nb % 2 ? med[c->nb / 2] : 0.5 * (med[c->nb / 2 - 1] + med[c->nb / 2]);
    free(med);
    for (int32_t b = 0; b < c->nb; b++) {
        dcp_choice *ch = &c->bkt[b];
        if (ch->time_s > median && ch->bs > 1) {
            int32_t nbs = (int32_t)floor(ch->bs * median / ch->time_s);
            ch->bs = nbs < 1 ? 1 : nbs;
            ch->time_s = mb_time(c, b, ch->sp, ch->bs, tm->n_a, tm->n_b);
        }
    }
    return 0;
}

int dcp_ctx_init(dcp_ctx *c, const hw_desc *hw, const tc_model *tm, const btrace *bt,
                 const dcp_cfg *cfg, ts_err *e)
{
    double w0 = ts_wall_s();
    memset(c, 0, sizeof *c);
    c->hw = hw;
    c->tm = tm;
    c->bt = bt;
    c->cfg = *cfg;
    if (ctx_budget(c, e))
        return -1;
    size_t nbj = (size_t)c->nb * cfg->n_sp;
    c->max_bs = calloc(nbj, sizeof *c->max_bs);
    c->tab = calloc(nbj * DCP_MAX_K, sizeof *c->tab);
    c->best = calloc((size_t)c->nb, sizeof *c->best);
    c->best_pac = calloc((size_t)c->nb, sizeof *c->best_pac);
    c->bkt = calloc((size_t)c->nb, sizeof *c->bkt);
    if (!c->max_bs || !c->tab || !c->best || !c->best_pac || !c->bkt) {
        ts_errf(e, "out of memory");
        goto fail;
    }
    int usable = 0;
    for (int j = 0; j < cfg->n_sp; j++)
        if (sp_usable(c, cfg->sp[j]))
            usable = 1;
    if (!usable) {
        ts_errf(e, "no listed SP size divides the model's %d heads (or fits %d GPUs); "
                   "try ring attention", tm->m.heads, cfg->gpus);
        goto fail;
    }
    for (int32_t b = 0; b < c->nb; b++)
        if (profile_bucket(c, b, e))
            goto fail;
    int j0 = bucket_sp_index(c, e);
    if (j0 < 0 || bucket_choices(c, j0, e))
        goto fail;
    c->profile_ms = (ts_wall_s() - w0) * 1e3;
    return 0;
fail:
    dcp_ctx_free(c);
    return -1;
}

void dcp_ctx_free(dcp_ctx *c)
{
    if (!c)
        return;
    free(c->max_bs);
    free(c->tab);
    free(c->best);
    free(c->best_pac);
    free(c->bkt);
    c->max_bs = NULL;
    c->tab = NULL;
    c->best = c->best_pac = c->bkt = NULL;
}

/* ---------------------------------------------------- accumulation search */

static double pen(double x, double over)
{
    return x > 0 ? x * over : -x;
}

/* Best count in [1, g_max] for time e against target T, and its penalty
 * (the penalty is convex in the count, so floor or ceil of T / e wins). */
static int best_count(double e, double T, int g_max, double over, double *p)
{
    double q = floor(T / e);
    int g = q > g_max ? g_max : (int)q;
    int cand[2] = {g, g + 1};
    int bg = 1;
    double bp = INFINITY;
    for (int i = 0; i < 2; i++) {
        int x = cand[i] < 1 ? 1 : cand[i] > g_max ? g_max : cand[i];
        double v = pen(e * x - T, over);
        if (v < bp || (v == bp && x < bg)) {
            bp = v;
            bg = x;
        }
    }
    *p = bp;
    return bg;
}

int dcp_gas_limit(double e, double e_max, int max_gas)
{
    double q = floor(max_gas * e_max / e * (1 + 1e-12));
    if (q < 1)
        return 1;
    return q > DCP_GAS_HARD ? DCP_GAS_HARD : (int)q;
}

double dcp_gas_search(const double *e, const int *cap, int k, int max_gas, double overshoot,
                      int *gas)
{
    if (k <= 0)
        return 0.0;
    /* distinct (time, limit) pairs with multiplicities */
    double dv[256];
    int dl[256], dc[256], nd = 0;
    double *v = dv;
    int *lim = dl, *cnt = dc;
    void *heap = NULL;
    if (k > 256) {
        heap = malloc((size_t)k * (sizeof *v + 2 * sizeof *lim));
        if (!heap) { /* fall back to no accumulation */
            for (int i = 0; i < k; i++)
                gas[i] = 1;
            return INFINITY;
        }
        v = heap;
        lim = (int *)(v + k);
        cnt = lim + k;
    }
    double e_max = 0;
    for (int i = 0; i < k; i++)
        e_max = e[i] > e_max ? e[i] : e_max;
    for (int i = 0; i < k; i++) {
        int l = dcp_gas_limit(e[i], e_max, max_gas);
        if (cap && cap[i] < l)
            l = cap[i] < 1 ? 1 : cap[i];
        int d;
        for (d = 0; d < nd; d++)
            if (v[d] == e[i] && lim[d] == l)
                break;
        if (d == nd) {
            v[nd] = e[i];
            lim[nd] = l;
            cnt[nd++] = 0;
        }
        cnt[d]++;
    }
    /* for fixed counts the objective is (a + b T) / T on each interval
     * between the products e[i] * gas[i], so its minimum over T in
     * (0, max_gas * e_max] is at one of them or at the upper end: those are
     * the only targets to try */
    double Tmax = max_gas * e_max;
    double best = INFINITY, bestT = Tmax;
    for (int d = 0; d <= nd; d++) {
        int md = d < nd ? lim[d] : 1;
        for (int m = 1; m <= md; m++) {
            double T = d < nd ? v[d] * m : Tmax, sum = 0, p;
            if (T > Tmax * (1 + 1e-12))
                continue;
            int pruned = 0;
            for (int x = 0; x < nd && !pruned; x++) {
                best_count(v[x], T, lim[x], overshoot, &p);
                sum += cnt[x] * p;
                pruned = sum > best * T; /* already worse than the best target */
            }
            if (pruned)
                continue;
            double f = sum / T;
            if (f < best || (f == best && T > bestT)) {
                best = f;
                bestT = T;
            }
        }
    }
    for (int i = 0; i < k; i++) {
        int l = dcp_gas_limit(e[i], e_max, max_gas);
        if (cap && cap[i] < l)
            l = cap[i] < 1 ? 1 : cap[i];
        double p;
        gas[i] = best_count(e[i], bestT, l, overshoot, &p);
    }
    free(heap);
    return best;
}

/* ------------------------------------------------------ plan containers */

void dcp_plan_free(dcp_plan *p)
{
    if (!p)
        return;
    free(p->seq);
    free(p->mb);
    free(p->grp);
    free(p->step);
    memset(p, 0, sizeof *p);
}

static int grow(void **arr, size_t n, size_t *cap, size_t elem, ts_err *e)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    void *q = realloc(*arr, nc * elem);
    if (!q)
        return ts_errf(e, "out of memory (plan of %zu entries)", nc);
    *arr = q;
    *cap = nc;
    return 0;
}

int dcp_plan_push_seq(dcp_plan *p, int32_t idx, ts_err *e)
{
    void *a = p->seq;
    if (grow(&a, p->n_seq, &p->cap_seq, sizeof *p->seq, e))
        return -1;
    p->seq = a;
    p->seq[p->n_seq++] = idx;
    return 0;
}

int dcp_plan_push_mb(dcp_plan *p, int32_t first, int32_t n, int32_t ca, int32_t cb, ts_err *e)
{
    void *a = p->mb;
    if (grow(&a, p->n_mb, &p->cap_mb, sizeof *p->mb, e))
        return -1;
    p->mb = a;
    p->mb[p->n_mb++] = (dcp_mb){first, n, ca, cb};
    return 0;
}

int dcp_plan_push_group(dcp_plan *p, int32_t sp, int32_t mb0, int32_t n_mb, ts_err *e)
{
    void *a = p->grp;
    if (grow(&a, p->n_grp, &p->cap_grp, sizeof *p->grp, e))
        return -1;
    p->grp = a;
    p->grp[p->n_grp++] = (dcp_group){sp, 0, mb0, n_mb};
    return 0;
}

int dcp_plan_push_step(dcp_plan *p, int32_t g0, ts_err *e)
{
    void *a = p->step;
    if (grow(&a, p->n_step, &p->cap_step, sizeof *p->step, e))
        return -1;
    p->step = a;
    p->step[p->n_step++] = (dcp_step){g0, (int32_t)p->n_grp - g0};
    return 0;
}
