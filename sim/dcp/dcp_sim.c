/*
 * DCP simulation: prices every micro-batch of a plan from its own sequences
 * (tc_microbatch_time on the exact per-sequence sums, not the planner's
 * bucket estimate), so a 1D bucket's shorter members, partial last
 * micro-batches and packed mixtures all cost what they cost.  A step lasts
 * until its slowest group finishes its micro-batches, then every GPU joins
 * the gradient synchronisation and the optimizer update (dcp_ctx.sync_s);
 * GPUs whose group finished early, or that got no group, are idle in
 * between.  Metrics:
 *   imbalance      sum over steps and GPUs of (max_g t_g - t_gpu), over
 *                  gpus * sum of max_g t_g (DCP's calculate_imbalance, over
 *                  the whole trace);
 *   imbalance_plan the same formula as VideoSys' sampler evaluates it when
 *                  it logs its imbalance: a group's time is its
 *                  micro-batch count x the profiled time of its largest
 *                  micro-batch (a part-filled one counts as full), and only
 *                  steps whose groups hold every GPU count (VideoSys' DCP
 *                  sampler discards a step it cannot fill, its bucket
 *                  baseline drops each bucket's remainder, drop_last);
 *   idle_fraction  the same idle GPU-seconds over gpus * total time (the
 *                  synchronisation counts as busy);
 *   peak memory    the largest micro-batch's activations plus model states
 *                  plus the reserve, per GPU; a plan is feasible when every
 *                  micro-batch is within mem_cap of HBM.
 * The per-GPU timeline of the first steps goes into a run_record for
 * `tailsim report`.  Cost: one cost-model evaluation per micro-batch.
 */
#include "sim/dcp/dcp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tl_add(run_record *rec, int gpu, int phase, int state, double t0, double t1,
                  ts_err *e)
{
    if (t1 <= t0)
        return 0;
    if (run_add_interval(rec, gpu, phase, state, t0, t1))
        return ts_errf(e, "out of memory (timeline)");
    return 0;
}

static int32_t mb_bucket(const dcp_ctx *c, const dcp_plan *p, int32_t m)
{
    return c->bt->seq[p->seq[p->mb[m].first]].bucket;
}

/* Group g's time as the sampler estimates it: per bucket among its
 * micro-batches (one, but for dcp-inter's last step, sim/dcp/dcp_endgame.c),
 * their count x the profiled time of the bucket's largest of them. */
static double est_group_time(const dcp_ctx *c, const dcp_plan *p, const dcp_group *g)
{
    double t = 0;
    for (int32_t m = g->mb0; m < g->mb0 + g->n_mb; m++) {
        int32_t b = mb_bucket(c, p, m), bs = 0, k = 0, seen = 0;
        for (int32_t x = g->mb0; x < m && !seen; x++)
            seen = mb_bucket(c, p, x) == b;
        if (seen)
            continue; /* priced with its bucket's first micro-batch */
        for (int32_t x = m; x < g->mb0 + g->n_mb; x++)
            if (mb_bucket(c, p, x) == b) {
                bs = p->mb[x].n > bs ? p->mb[x].n : bs;
                k++;
            }
        t += k * dcp_est_mb_time(c, b, g->sp, bs, p->mb[m].ckpt_a, p->mb[m].ckpt_b);
    }
    return t;
}

/* A simulation's running state, step to step. */
typedef struct dsim {
    const dcp_ctx *c;
    const dcp_plan *p;
    dcp_result *r;
    double cap;              /* memory cap per GPU, bytes */
    double *gt, *ge;         /* per group of the step: time, the sampler's estimate, s */
    int32_t *gs;             /* per group of the step: SP size */
    double now;              /* end of the steps so far, s */
    double idle, maxsum;     /* idle GPU-seconds; sum over steps of gpus x longest group */
    double p_idle, p_maxsum; /* the same by the sampler's estimate, full steps only */
    double rec_gs, comm_gs;  /* recomputation, communication, GPU-seconds */
    double ckpt;             /* sum of the micro-batches' checkpointed fractions */
    int64_t n_mb, n_grp;
} dsim;

/* The bound's result: one perfectly balanced step of p->bound_s.  Cannot
 * fail. */
static void sim_bound(const dcp_ctx *c, const dcp_plan *p, dcp_result *r)
{
    r->steps = 1;
    r->seqs = (int64_t)c->bt->n;
    r->tokens = btrace_tokens(c->bt);
    r->time_s = r->step_s = p->bound_s;
    r->sync_s = c->sync_s;
    r->tokens_per_s = p->bound_s > 0 ? r->tokens / p->bound_s : 0;
    r->mean_gas = 1;
}

/* Group g's time, s: each of its micro-batches priced from its own
 * sequences, counted into the totals, its memory checked against the cap.
 * Cannot fail. */
static double group_time(dsim *d, const dcp_group *g)
{
    const dcp_ctx *c = d->c;
    const dcp_plan *p = d->p;
    const tc_model *tm = c->tm;
    dcp_result *r = d->r;
    double t = 0;
    for (int32_t m = 0; m < g->n_mb; m++) {
        const dcp_mb *mb = &p->mb[g->mb0 + m];
        tc_work w = {0};
        for (int32_t i = 0; i < mb->n; i++) {
            const bt_seq *q = &c->bt->seq[p->seq[mb->first + i]];
            tc_work_add(&w, q->t, q->s, 1);
            r->tokens += bt_tokens(q);
        }
        r->seqs += mb->n;
        tc_par par = {g->sp, c->cfg.ring, mb->ckpt_a, mb->ckpt_b};
        tc_breakdown bd;
        t += tc_microbatch_time(c->hw, tm, &par, &w, &bd);
        d->rec_gs += g->sp * bd.recompute_s;
        d->comm_gs += g->sp * bd.comm_s;
        double mem = c->states_bytes + c->cfg.reserve_bytes + tc_act_bytes(tm, &par, &w);
        if (mem > r->peak_mem_bytes)
            r->peak_mem_bytes = mem;
        if (mem > d->cap * (1 + 1e-9))
            r->feasible = 0;
        d->ckpt += (double)(mb->ckpt_a + mb->ckpt_b) / (tm->n_a + tm->n_b);
        d->n_mb++;
    }
    return t;
}
/* Prices the groups of step st into d->gt, d->ge and d->gs, adding their
 * GPU-seconds to *busy and the SP shares.  Returns the longest group's
 * time, s.  Cannot fail. */
static double step_price(dsim *d, const dcp_step *st, double *busy)
{
    const dcp_ctx *c = d->c;
    const dcp_plan *p = d->p;
    double cmax = 0;
    *busy = 0;
    for (int32_t k = 0; k < st->n_g; k++) {
        const dcp_group *g = &p->grp[st->g0 + k];
        double t = group_time(d, g);
        d->gt[k] = t;
        d->gs[k] = g->sp;
        d->ge[k] = p->strat.kind == DCP_PACKED ? t : est_group_time(c, p, g);
        *busy += g->sp * t;
        if (t > cmax)
            cmax = t;
        for (int j = 0; j < c->cfg.n_sp; j++)
            if (c->cfg.sp[j] == g->sp)
                d->r->sp_share[j] += g->sp * t;
        d->n_grp++;
    }
    return cmax;
}

/* Step st's figures into *x: groups, GPUs used, micro-batches, groups mixing
 * buckets, compute time cmax and idle GPU-seconds (of busy ones busy).
 * Cannot fail. */
static void step_stat(const dcp_ctx *c, const dcp_plan *p, const dcp_step *st, double cmax,
                      double busy, dcp_step_stat *x)
{
    int G = c->cfg.gpus;
    memset(x, 0, sizeof *x);
    x->groups = st->n_g;
    for (int32_t k = 0; k < st->n_g; k++) {
        const dcp_group *g = &p->grp[st->g0 + k];
        x->gpus_used += g->sp;
        x->mbs += g->n_mb;
        int32_t b0 = mb_bucket(c, p, g->mb0);
        for (int32_t m = g->mb0 + 1; m < g->mb0 + g->n_mb; m++)
            if (mb_bucket(c, p, m) != b0) {
                x->mixed++;
                break;
            }
    }
    x->compute_s = cmax;
    x->idle_gs = G * cmax - busy;
    x->imbalance = cmax > 0 ? x->idle_gs / (G * cmax) : 0.0;
}

/* The sampler's imbalance of step st (priced by step_price()), counted
 * only when its groups hold every GPU.  Cannot fail. */
static void step_plan_idle(dsim *d, const dcp_step *st)
{
    int G = d->c->cfg.gpus, used_gpus = 0;
    for (int32_t k = 0; k < st->n_g; k++)
        used_gpus += d->gs[k];
    if (used_gpus == G) {
        double emax;
        d->p_idle += dcp_step_idle(d->ge, d->gs, st->n_g, G, &emax);
        d->p_maxsum += G * emax;
        d->r->full_steps++;
    }
}

/* Step st's timeline into rec from d->now: each group's GPUs busy then idle
 * until the longest group (cmax), GPUs without a group idle, then every GPU
 * in the synchronisation until the step's end (step).  Returns 0, or -1
 * with e set (allocation failure). */
static int step_timeline(const dsim *d, const dcp_step *st, double cmax, double step,
                         run_record *rec, int gpu_offset, ts_err *e)
{
    const dcp_plan *p = d->p;
    int G = d->c->cfg.gpus, used = 0;
    double now = d->now;
    for (int32_t k = 0; k < st->n_g; k++) {
        const dcp_group *g = &p->grp[st->g0 + k];
        for (int x = 0; x < g->sp; x++) {
            int gpu = gpu_offset + g->gpu0 + x;
            if (tl_add(rec, gpu, PH_UPDATE, TL_BUSY, now, now + d->gt[k], e) ||
                tl_add(rec, gpu, PH_UPDATE, TL_IDLE, now + d->gt[k], now + cmax, e))
                return -1;
        }
        used = g->gpu0 + g->sp > used ? g->gpu0 + g->sp : used;
    }
    for (int gpu = used; gpu < G; gpu++)
        if (tl_add(rec, gpu_offset + gpu, PH_UPDATE, TL_IDLE, now, now + cmax, e))
            return -1;
    for (int gpu = 0; gpu < G; gpu++)
        if (tl_add(rec, gpu_offset + gpu, PH_SYNC, TL_BUSY, now + cmax, now + step, e))
            return -1;
    return 0;
}

/* The result's totals and ratios over nsteps steps.  Cannot fail. */
static void sim_finish(const dsim *d, size_t nsteps)
{
    dcp_result *r = d->r;
    int G = d->c->cfg.gpus;
    double now = d->now;
    r->steps = (int64_t)nsteps;
    r->time_s = now;
    r->step_s = nsteps ? now / nsteps : 0;
    r->tokens_per_s = now > 0 ? r->tokens / now : 0;
    r->imbalance = d->maxsum > 0 ? d->idle / d->maxsum : 0;
    r->imbalance_plan = d->p_maxsum > 0 ? d->p_idle / d->p_maxsum : 0;
    r->idle_fraction = now > 0 ? d->idle / (G * now) : 0;
    r->recompute_s = d->rec_gs / G;
    r->comm_s = d->comm_gs / G;
    r->mean_gas = d->n_grp ? (double)d->n_mb / d->n_grp : 0;
    r->mean_ckpt = d->n_mb ? d->ckpt / d->n_mb : 0;
    double tot = 0;
    for (int j = 0; j < d->c->cfg.n_sp; j++)
        tot += r->sp_share[j];
    for (int j = 0; tot > 0 && j < d->c->cfg.n_sp; j++)
        r->sp_share[j] /= tot;
}

/* dcp_simulate(), and each step's figures into ps[] when ps is not NULL. */
static int simulate(const dcp_ctx *c, const dcp_plan *p, int max_steps, dcp_result *r,
                    run_record *rec, int gpu_offset, int tl_steps, dcp_step_stat *ps, ts_err *e)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", p->strat.name);
    r->plan_ms = p->plan_ms;
    r->feasible = 1;
    if (p->strat.kind == DCP_BOUND) {
        sim_bound(c, p, r);
        return 0;
    }
    size_t nsteps = p->n_step;
    if (max_steps > 0 && (size_t)max_steps < nsteps)
        nsteps = (size_t)max_steps;
    size_t maxg = 1;
    for (size_t s = 0; s < nsteps; s++)
        if ((size_t)p->step[s].n_g > maxg)
            maxg = (size_t)p->step[s].n_g;
    dsim d = {.c = c, .p = p, .r = r, .cap = c->cfg.mem_cap * c->hw->hbm_bytes};
    d.gt = malloc(maxg * sizeof *d.gt);
    d.ge = malloc(maxg * sizeof *d.ge);
    d.gs = malloc(maxg * sizeof *d.gs);
    int rc = -1, G = c->cfg.gpus;
    if (!d.gt || !d.ge || !d.gs) {
        ts_errf(e, "out of memory");
        goto done;
    }
    for (size_t s = 0; s < nsteps; s++) {
        const dcp_step *st = &p->step[s];
        double busy;
        double cmax = step_price(&d, st, &busy);
        double step = cmax + c->sync_s;
        d.idle += G * cmax - busy;
        if (ps)
            step_stat(c, p, st, cmax, busy, &ps[s]);
        step_plan_idle(&d, st);
        d.maxsum += G * cmax;
        if (rec && (int)s < tl_steps && step_timeline(&d, st, cmax, step, rec, gpu_offset, e))
            goto done;
        d.now += step;
        r->sync_s += c->sync_s;
    }
    sim_finish(&d, nsteps);
    rc = 0;
done:
    free(d.gt);
    free(d.ge);
    free(d.gs);
    return rc;
}

int dcp_simulate(const dcp_ctx *c, const dcp_plan *p, int max_steps, dcp_result *r,
                 run_record *rec, int gpu_offset, int tl_steps, ts_err *e)
{
    return simulate(c, p, max_steps, r, rec, gpu_offset, tl_steps, NULL, e);
}

int dcp_run_steps(const dcp_ctx *c, const dcp_strategy *s, int max_steps, dcp_result *r,
                  dcp_step_stat **steps, ts_err *e)
{
    *steps = NULL;
    dcp_plan p;
    if (dcp_plan_run(c, s, &p, e))
        return -1;
    dcp_step_stat *ps = NULL;
    if (s->kind != DCP_BOUND && p.n_step > 0 &&
        !(ps = calloc(p.n_step, sizeof *ps))) {
        dcp_plan_free(&p);
        return ts_errf(e, "out of memory");
    }
    int rc = simulate(c, &p, max_steps, r, NULL, 0, 0, ps, e);
    dcp_plan_free(&p);
    if (rc) {
        free(ps);
        return -1;
    }
    *steps = ps;
    return 0;
}

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            snprintf(why, n, __VA_ARGS__);                                                 \
            free(seen);                                                                    \
            return -1;                                                                     \
        }                                                                                  \
    } while (0)

int dcp_plan_check(const dcp_ctx *c, const dcp_plan *p, char *why, size_t n)
{
    unsigned char *seen = NULL;
    if (p->strat.kind == DCP_BOUND) {
        CHECK(p->bound_s > 0, "%s: bound time %g", p->strat.name, p->bound_s);
        return 0;
    }
    size_t ns = c->bt->n, covered = 0;
    CHECK(p->n_seq == ns, "%s: %zu of %zu sequences planned", p->strat.name, p->n_seq, ns);
    seen = calloc(ns ? ns : 1, 1);
    CHECK(seen, "out of memory");
    double cap = c->cfg.mem_cap * c->hw->hbm_bytes;
    for (size_t s = 0; s < p->n_step; s++) {
        const dcp_step *st = &p->step[s];
        CHECK(st->n_g > 0, "%s: step %zu has no group", p->strat.name, s);
        int32_t gpu = 0;
        for (int32_t g = 0; g < st->n_g; g++) {
            const dcp_group *x = &p->grp[st->g0 + g];
            CHECK(x->gpu0 == gpu, "%s: step %zu: groups overlap or leave holes", p->strat.name, s);
            gpu += x->sp;
            CHECK(x->n_mb > 0 && x->n_mb <= DCP_GAS_HARD, "%s: step %zu group %d: %d micro-batches",
                  p->strat.name, s, g, x->n_mb);
            for (int32_t m = 0; m < x->n_mb; m++) {
                const dcp_mb *mb = &p->mb[x->mb0 + m];
                CHECK(mb->n > 0 && (size_t)mb->first == covered,
                      "%s: step %zu group %d: micro-batch empty or out of order", p->strat.name, s, g);
                covered += (size_t)mb->n;
                tc_work w = {0};
                for (int32_t i = 0; i < mb->n; i++) {
                    int32_t q = p->seq[mb->first + i];
                    CHECK(q >= 0 && (size_t)q < ns && !seen[q], "%s: sequence %d out of range or "
                          "planned twice", p->strat.name, q);
                    seen[q] = 1;
                    tc_work_add(&w, c->bt->seq[q].t, c->bt->seq[q].s, 1);
                }
                tc_par par = {x->sp, c->cfg.ring, mb->ckpt_a, mb->ckpt_b};
                double mem = c->states_bytes + c->cfg.reserve_bytes + tc_act_bytes(c->tm, &par, &w);
                CHECK(mem <= cap * (1 + 1e-9), "%s: step %zu group %d over the cap (%g GB)",
                      p->strat.name, s, g, mem / 1e9);
            }
        }
        CHECK(gpu <= c->cfg.gpus, "%s: step %zu uses %d GPUs", p->strat.name, s, gpu);
    }
    CHECK(covered == ns, "%s: micro-batches cover %zu of %zu sequences", p->strat.name, covered, ns);
    free(seen);
    return 0;
}

#undef CHECK

typedef struct gdesc {
    int32_t sp, bs, gas, ckpt;
    int count;
} gdesc;

const char *dcp_plan_describe(const dcp_ctx *c, const dcp_plan *p, char *buf, size_t n)
{
    if (p->strat.kind == DCP_BOUND || p->n_step == 0) {
        snprintf(buf, n, "each sequence at its cheapest SP size, perfectly balanced, one sync");
        return buf;
    }
    gdesc d[8];
    int nd = 0, more = 0;
    const dcp_step *st = &p->step[0];
    for (int32_t k = 0; k < st->n_g; k++) {
        const dcp_group *g = &p->grp[st->g0 + k];
        const dcp_mb *mb = &p->mb[g->mb0];
        gdesc x = {g->sp, mb->n, g->n_mb, mb->ckpt_a + mb->ckpt_b, 1};
        int i;
        for (i = 0; i < nd; i++)
            if (d[i].sp == x.sp && d[i].bs == x.bs && d[i].gas == x.gas && d[i].ckpt == x.ckpt)
                break;
        if (i < nd)
            d[i].count++;
        else if (nd < 8)
            d[nd++] = x;
        else
            more++;
    }
    size_t used = 0;
    int w = snprintf(buf, n, "step 1:");
    used = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < nd && used < n; i++) {
        w = snprintf(buf + used, n - used, " %dx[sp%d bs%d gas%d ckpt%d/%d]", d[i].count, d[i].sp,
                     d[i].bs, d[i].gas, d[i].ckpt, c->tm->n_a + c->tm->n_b);
        used += w > 0 ? (size_t)w : 0;
    }
    if (more && used < n)
        snprintf(buf + used, n - used, " +%d more", more);
    return buf;
}

int dcp_run(const dcp_ctx *c, const dcp_strategy *s, int max_steps, dcp_result *r,
            run_record *rec, int gpu_offset, int tl_steps, char *plan, size_t plan_n, ts_err *e)
{
    dcp_plan p;
    if (dcp_plan_run(c, s, &p, e))
        return -1;
    int rc = dcp_simulate(c, &p, max_steps, r, rec, gpu_offset, tl_steps, e);
    if (plan)
        dcp_plan_describe(c, &p, plan, plan_n);
    dcp_plan_free(&p);
    return rc;
}
