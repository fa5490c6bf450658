/*
 * Runners of `tailsim paper` for the TLT side: the speculative-decoding
 * microbenchmark (speedup and accepted length per batch at 8k context,
 * accepted length per draft depth at batch 1) and the policy comparisons
 * (the same RL step under each policy: step and rollout speedups over the
 * first policy, with a paired bootstrap over prompts; a Gantt chart per
 * policy and the length CDF through report_write).  Values go into the
 * paper context under "<experiment id>/<name>".  Nothing here prints.
 * A comparison runs in phases on a cmp_state: the policies, the setup, each
 * policy's steps (run_policy), the figures, the bootstrap and the table.
 */
#include "cli/paper_exp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "models/cost_spec.h"
#include "models/hw_calib.h"
#include "reports/report.h"
#include "sim/bootstrap.h"
#include "cli/cmd_run.h"
#include "sim/specdec.h"

#define MAX_POL 16

static int put(paper_ctx *c, const paper_exp *x, const char *name, double v, double lo, double hi,
               ts_err *e)
{
    char key[96];
    snprintf(key, sizeof key, "%s/%s", x->id, name);
    return paper_put(c, key, v, lo, hi) ? ts_errf(e, "too many values") : 0;
}

/* Room for collect_sets(). */
#define MAX_ALL_SETS (2 * PAPER_MAX_SETS + PAPER_MAX_USER_SETS)

/* The overrides of x (and its quick ones under --quick), then the ad-hoc
 * run's, into sets (MAX_ALL_SETS); returns the count. */
static int collect_sets(const paper_exp *x, const paper_ctx *c, const char **sets)
{
    int n = 0;
    for (int i = 0; i < PAPER_MAX_SETS && x->sets[i]; i++)
        sets[n++] = x->sets[i];
    for (int i = 0; c->o->quick && i < PAPER_MAX_SETS && x->quick_sets[i]; i++)
        sets[n++] = x->quick_sets[i];
    for (int i = 0; i < c->n_user_sets && i < PAPER_MAX_USER_SETS; i++)
        sets[n++] = c->user_sets[i];
    return n;
}

static paper_plot *new_plot(paper_ctx *c, const char *file, const char *title, const char *xl,
                            const char *yl, int logx, ts_err *e)
{
    paper_doc *d = c->doc;
    if (d->n_plots == PAPER_MAX_PLOTS) {
        ts_errf(e, "too many plots");
        return NULL;
    }
    paper_plot *p = &d->plots[d->n_plots++];
    memset(p, 0, sizeof *p);
    snprintf(p->file, sizeof p->file, "%s", file);
    snprintf(p->title, sizeof p->title, "%s", title);
    snprintf(p->xlabel, sizeof p->xlabel, "%s", xl);
    snprintf(p->ylabel, sizeof p->ylabel, "%s", yl);
    p->logx = logx;
    return p;
}

static paper_series *series(paper_plot *p, const char *name)
{
    paper_series *s = &p->s[p->ns++];
    s->kind = 0;
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

static void point(paper_series *s, double x, double y)
{
    if (s->n < PAPER_MAX_POINTS) {
        s->x[s->n] = x;
        s->y[s->n] = y;
        s->n++;
    }
}

/* A published value v at x on plot p, named by fmt (one %.2f of v). */
static void published_point(paper_plot *p, const char *fmt, double x, double v)
{
    char name[48];
    snprintf(name, sizeof name, fmt, v);
    paper_series *s = series(p, name);
    s->kind = 1;
    point(s, x, v);
}

/* The plot of accepted length vs draft depth (depth 1-12, batch 1, verify
 * budget 48) of drafter sp, with the published point at depth 8 unless pub
 * is NAN.  Returns 0, or -1 when the document is full. */
static int depth_plot(paper_ctx *c, const spec_params *sp, uint64_t seed, double pub, ts_err *e)
{
    paper_plot *pd = new_plot(c, "specdec_depth.png", "Accepted length vs draft depth (batch 1, V 48)",
                              "draft depth", "accepted tokens per verify", 0, e);
    if (!pd)
        return -1;
    paper_series *sd = series(pd, "tailsim");
    spec_params p = *sp;
    for (int depth = 1; depth <= 12; depth++) {
        p.depth = depth;
        point(sd, depth, spec_mean_accept(&p, 48, seed));
    }
    if (!isnan(pub))
        published_point(pd, "TLT: %.2f at depth 8", 8, pub);
    return 0;
}

int paper_exp_specdec(const paper_exp *x, paper_ctx *c, ts_err *e)
{
    static const int batches[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    const int nb = (int)(sizeof batches / sizeof batches[0]), ctx = 8192;
    const char *sets[MAX_ALL_SETS];
    int ns = collect_sets(x, c, sets);
    scenario s;
    hw_desc hw;
    llm_desc m;
    if (scenario_load(x->scenario, &s, e))
        return -1;
    for (int i = 0; i < ns; i++)
        if (scenario_set(&s, sets[i], e))
            return -1;
    rollout_attn attn; /* the rollout engine's attention kernel, as `tailsim specdec` */
    if (scenario_validate(&s, e) || scenario_load_models(&s, &hw, &m, e) ||
        spec_params_check(&s.sp, e) || scenario_rollout_attn(&s, &hw, &attn, e))
        return -1;
    rollout_attn_apply(&hw, attn, &hw);
    paper_note_calibration(c, hw.calibration);
    char title[400];
    snprintf(title, sizeof title, "TLT speculative decoding: %s on %s, TP %d, 8k context", m.name,
             hw.name, s.tp);
    paper_table *t = paper_doc_table(c->doc, title, nb + 1, 7, e);
    paper_plot *pa = new_plot(c, "specdec_accept.png", "Accepted length vs batch (8k context, V from TLT's batch table)",
                              "batch size", "accepted tokens per verify", 1, e);
    paper_plot *pt = new_plot(c, "specdec_batch.png", "Speedup of speculative decoding vs batch",
                              "batch size", "speedup over plain decoding (x)", 1, e);
    paper_plot *pq = new_plot(c, "specdec_throughput.png",
                              "Decode throughput of one replica vs batch (8k context)", "batch size",
                              "tokens/s", 1, e);
    if (!t || !pa || !pt || !pq)
        return -1;
    snprintf(t->note, sizeof t->note,
             "One plain decode iteration against one speculative iteration (EAGLE drafter, depth "
             "%d, top-k %d, verify budget V from TLT's batch table); drafter quality %.2f (seed %llu).",
             s.sp.depth, s.sp.topk, s.sp.quality, (unsigned long long)s.seed);
    const char *hdr[] = {"batch", "V", "accepted", "plain tok/s", "spec tok/s", "speedup", "ctx"};
    for (int k = 0; k < 7; k++)
        snprintf(t->cell[0][k], PAPER_CELL, "%s", hdr[k]);
    paper_series *sa = series(pa, "tailsim"), *st = series(pt, "tailsim");
    paper_series *qp = series(pq, "plain decoding"), *qs = series(pq, "speculative (tailsim)");
    for (int i = 0; i < nb; i++) {
        int b = batches[i];
        spec_point sp;
        host_mode host = scenario_host_mode(&s, 1); /* as `tailsim specdec` */
        spec_point_eval(&s.sp, &hw, &host, &m, s.tp, b, (double)b * ctx, s.seed, &sp);
        int V = sp.V;
        double acc = sp.accept, plain = sp.plain, spec = sp.spec;
        char(*row)[PAPER_CELL] = t->cell[i + 1];
        snprintf(row[0], PAPER_CELL, "%d", b);
        snprintf(row[1], PAPER_CELL, "%d", V);
        snprintf(row[2], PAPER_CELL, "%.2f", acc);
        snprintf(row[3], PAPER_CELL, "%.0f", plain);
        snprintf(row[4], PAPER_CELL, "%.0f", spec);
        snprintf(row[5], PAPER_CELL, "%.2fx", spec / plain);
        snprintf(row[6], PAPER_CELL, "%d", ctx);
        point(sa, b, acc);
        point(st, b, spec / plain);
        point(qp, b, plain);
        point(qs, b, spec);
        if (b == 1 && (put(c, x, "speedup.b1", spec / plain, NAN, NAN, e) ||
                       put(c, x, "accept.b1", acc, NAN, NAN, e)))
            return -1;
    }
    paper_series *one = series(pt, "break-even (1x)");
    one->kind = 2;
    point(one, 1, 1);
    point(one, 256, 1);
    /* the paper's one published point, so the curves are read against it */
    double acc_pub = paper_published_value("specdec/accept.b1");
    if (depth_plot(c, &s.sp, s.seed, acc_pub, e))
        return -1;
    published_point(pa, "TLT: average %.2f (V 48)", 1, acc_pub);
    return 0;
}

/* The shared trace of the scenario is absent: skip, saying where it was looked for. */
static int trace_absent(const scenario *s, char *why, size_t n)
{
    char path[1024];
    if (scenario_trace_path(s, path, sizeof path) != 0 || access(path, R_OK) == 0)
        return 0;
    snprintf(why, n, "trace %.100s absent (set TAILSIM_SHARED)", path);
    return 1;
}

static const char *const keys[] = {"step_s", "rollout_s", "bubble_fraction", "train_fraction",
                                   "tail_fraction", "accept_len", "off_policy_fraction"};
#define NK (int)(sizeof keys / sizeof keys[0])

/* Runs policy p on the n steps tr into *out (its run record, with the
 * timeline and responses of all n; the caller frees it with
 * run_record_free()) and fills v[NK] (means over the steps, as `tailsim
 * compare` prints).  Returns 0, or -1 with e set and *out NULL. */
static int run_policy(const paper_exp *x, paper_ctx *c, const scenario *s, const policy *p,
                      const hw_desc *hw, const llm_desc *m, trace *const *tr, int n, double *v,
                      run_record **out, ts_err *e)
{
    multistep_result r;
    run_record *rec = run_record_new();
    *out = NULL;
    if (!rec)
        return ts_errf(e, "out of memory");
    int rc = -1;
    if (policy_run(s, p, hw, m, tr, n, 1, &r, rec, e)) {
        ts_err_prefix(e, "policy %s: ", p->name);
        run_record_free(rec);
        return -1;
    }
    if (run_multistep_metrics(rec, &r, tr, 1, NULL)) {
        ts_errf(e, "out of memory");
        goto done;
    }
    for (int k = 0; k < NK; k++)
        if (run_get_metric(rec, keys[k], &v[k])) {
            ts_errf(e, "no metric %s", keys[k]);
            goto done;
        }
    run_set_identity(rec, c->adhoc ? "compare" : "paper", s->name, hw->calibration, s->seed,
                     r.step[0].gpus, r.step[0].replicas, r.step[0].tp);
    run_set_policy(rec, p->name);
    {
        /* what the report's Scenario section shows: the scenario with this
         * policy and the overrides the experiment applied */
        const char *sets[MAX_ALL_SETS];
        int nsets = collect_sets(x, c, sets);
        scenario *ps = malloc(sizeof *ps);
        if (!ps) {
            ts_errf(e, "out of memory");
            goto done;
        }
        *ps = *s;
        snprintf(ps->policy, sizeof ps->policy, "%s", p->name);
        int bad = run_record_source(rec, ps, sets, nsets, n, c->trace, tr, n, e);
        free(ps);
        if (bad)
            goto done;
    }
    *out = rec;
    rec = NULL;
    rc = 0;
done:
    multistep_result_free(&r);
    run_record_free(rec);
    return rc;
}

/* The last end of rec's timeline (s; 0 without one).  Cannot fail. */
static double makespan(const run_record *rec)
{
    double t = 0;
    for (size_t i = 0; i < rec->n_tl; i++)
        t = fmax(t, rec->tl[i].t1);
    return t;
}

/* Writes policy p's report folder from rec (its run on the n steps), the
 * Gantt chart's time axis up to xmax (every policy's longest makespan, so
 * the comparison's charts share one axis), and adds its Gantt chart (full
 * width, linked to its file) and, for the first policy of a paper
 * experiment, its CDF to the document.  Returns 0, or -1 with e set. */
static int policy_figures(const paper_exp *x, paper_ctx *c, const scenario *s, const policy *p,
                          const run_record *rec, int n, int first, double xmax, ts_err *e)
{
    char sub[64], dir[4200], path[128], cap[400];
    snprintf(sub, sizeof sub, "%s-%s", x->id, p->name);
    snprintf(dir, sizeof dir, "%s/%s", c->o->dir, sub);
    if (report_write_axis(rec, dir, xmax, e))
        return -1;
    snprintf(path, sizeof path, "%s/gantt.png", sub);
    char what[32] = "one RL step";
    if (n > 1)
        snprintf(what, sizeof what, "%d RL steps", n);
    snprintf(cap, sizeof cap, "%s, policy %s: per-GPU timeline of %s (busy, idle, drafter training)",
             s->name, p->name, what);
    if (paper_doc_fig(c->doc, c->adhoc ? "Per-GPU timelines" : x->title, path, cap, e))
        return -1;
    c->doc->figs[c->doc->n_figs - 1].wide = 1;
    if (first && !c->adhoc) {
        snprintf(path, sizeof path, "%s/cdf.png", sub);
        snprintf(cap, sizeof cap, "%s: response-length CDF of the %s", s->name,
                 n > 1 ? "steps" : "step");
        if (paper_doc_fig(c->doc, x->title, path, cap, e))
            return -1;
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* 1 when every record of rec[0..n) holds the same response lengths (as a
 * multiset), 0 when not, -1 when out of memory. */
static int same_lengths(run_record *const *rec, int n)
{
    size_t m = rec[0]->n_resp;
    for (int i = 1; i < n; i++)
        if (rec[i]->n_resp != m)
            return 0;
    int32_t *a = malloc((m ? m : 1) * sizeof *a), *b = malloc((m ? m : 1) * sizeof *b);
    int same = a && b ? 1 : -1;
    for (size_t k = 0; same == 1 && k < m; k++)
        a[k] = rec[0]->resp[k].length;
    if (same == 1)
        qsort(a, m, sizeof *a, cmp_i32);
    for (int i = 1; same == 1 && i < n; i++) {
        for (size_t k = 0; k < m; k++)
            b[k] = rec[i]->resp[k].length;
        qsort(b, m, sizeof *b, cmp_i32);
        same = !memcmp(a, b, m * sizeof *a);
    }
    free(a);
    free(b);
    return same;
}

/* The ad-hoc comparison's figures after the runs: the length CDF (after
 * the Gantt charts, so each kind sits together): once when every policy
 * produced the same response lengths (the usual case: the policies change
 * when a response is generated, not its length), else one per policy, since
 * the curves then differ (partial rollouts, tail batching); and, when one of
 * the policies speculates, its drafter's accepted length vs draft depth.
 * Returns 0, or -1 when the document is full or memory runs out. */
static int adhoc_figures(const paper_exp *x, paper_ctx *c, const scenario *s,
                         const policy *const *plist, run_record *const *rec, int np, ts_err *e)
{
    char path[128], cap[400];
    scenario sa; /* the first speculative policy's scenario */
    int spec = 0, same = same_lengths(rec, np);
    if (same < 0)
        return ts_errf(e, "out of memory");
    for (int i = 0; i < np; i++) {
        if (same && i == 0) {
            size_t k = 0;
            snprintf(path, sizeof path, "%s-%s/cdf.png", x->id, plist[i]->name);
            k += (size_t)snprintf(cap, sizeof cap, "%s: response-length CDF of the %s, the same for "
                                  "every policy (", s->name, x->steps > 1 ? "steps" : "step");
            for (int j = 0; j < np && k < sizeof cap; j++)
                k += (size_t)snprintf(cap + k, sizeof cap - k, "%s%s", j ? ", " : "",
                                      plist[j]->name);
            if (k < sizeof cap)
                snprintf(cap + k, sizeof cap - k, "), so drawn once");
            if (paper_doc_fig(c->doc, "Length CDF", path, cap, e))
                return -1;
        } else if (!same) {
            snprintf(path, sizeof path, "%s-%s/cdf.png", x->id, plist[i]->name);
            snprintf(cap, sizeof cap, "%s, policy %s: response-length CDF of the %s (the "
                     "policies' lengths differ)", s->name, plist[i]->name,
                     x->steps > 1 ? "steps" : "step");
            if (paper_doc_fig(c->doc, "Length CDFs", path, cap, e))
                return -1;
        }
        scenario a = *s;
        if (plist[i]->apply)
            plist[i]->apply(&a);
        if (!spec && strcmp(a.spec_mode, "off")) {
            sa = a;
            spec = 1;
        }
    }
    return spec ? depth_plot(c, &sa.sp, sa.seed, NAN, e) : 0;
}

/* 1 when name is one of the comma-separated list. */
static int policy_in(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list;; p++) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, name, n))
            return 1;
        p += k;
        if (!*p)
            return 0;
    }
}

/* One policy comparison while it runs. */
typedef struct cmp_state {
    const paper_exp *x;
    paper_ctx *c;
    scenario s;
    hw_desc hw;
    llm_desc m;
    const policy *plist[MAX_POL]; /* the policies, np of them; the first is the reference */
    run_record *rec[MAX_POL];     /* each policy's run (owned), for its figures */
    int np;
    trace **tr;                   /* the steps every policy replays, ns of them */
    int ns;
    double (*v)[NK];              /* keys[] per policy (means over the steps) */
    int bi[MAX_POL];              /* policy i's index among the bootstrap's, -1: not rerun */
    boot_result b;                /* the bootstrap run here */
    const boot_result *bp;        /* the bootstrap the table shows: b or c->boot_done */
} cmp_state;

/* x's policies (x->arg, else every registered one) into st.  Returns 0, or
 * -1 with e set. */
static int cmp_policies(cmp_state *st, ts_err *e)
{
    if (!st->x->arg) {
        size_t n;
        const policy *const *all = policy_all(&n);
        for (size_t i = 0; i < n && st->np < MAX_POL; i++)
            st->plist[st->np++] = all[i];
        return 0;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", st->x->arg);
    for (char *tok = strtok(buf, ","); tok && st->np < MAX_POL; tok = strtok(NULL, ","))
        if (!(st->plist[st->np++] = policy_find(tok)))
            return ts_errf(e, "unknown policy '%s'", tok);
    return 0;
}

/* The bootstrap of x->boot's policies (all when NULL) into st->bp: the one
 * `tailsim compare -o` already ran, or one run here; none without
 * resamples.  Returns 0, or -1 with e set. */
static int cmp_bootstrap(cmp_state *st, ts_err *e)
{
    const paper_exp *x = st->x;
    paper_ctx *c = st->c;
    const policy *blist[MAX_POL];
    int nb = 0;
    for (int i = 0; i < st->np; i++) {
        st->bi[i] = -1;
        if (!x->boot || policy_in(x->boot, st->plist[i]->name)) {
            st->bi[i] = nb;
            blist[nb++] = st->plist[i];
        }
    }
    st->bp = &st->b;
    if (c->boot && nb && c->boot_done) {
        /* `tailsim compare -o` ran it over every policy listed, in order */
        if (c->boot_done->np != nb || c->boot_done->n != c->boot)
            return ts_errf(e, "the comparison's bootstrap covers %d policies x %d resamples, not "
                              "%d x %d", c->boot_done->np, c->boot_done->n, nb, c->boot);
        st->bp = c->boot_done;
    } else if (c->boot && nb) {
        char n[32];
        snprintf(n, sizeof n, "%d", c->boot);
        paper_progress(c, "  bootstrap: %s resamples of %s", n, st->s.name);
        if (boot_compare(&st->s, blist, nb, &st->hw, &st->m, st->tr, st->ns, c->boot, keys, NK,
                         NULL, NULL, &st->b, e))
            return -1;
    }
    return 0;
}

/* Policy i's row of table t, its values under "<x->id>/<policy>.speedup"
 * and ".rollout_speedup", and (ad hoc) its speedup bars.  Returns 0, or -1
 * with e set. */
static int cmp_row(const cmp_state *st, paper_table *t, int i, ts_err *e)
{
    const paper_exp *x = st->x;
    paper_ctx *c = st->c;
    const double(*v)[NK] = (const double(*)[NK])st->v;
    char(*row)[PAPER_CELL] = t->cell[i + 1];
    const char *name = st->plist[i]->name;
    double sp = v[0][0] / v[i][0], rs = v[0][1] / v[i][1];
    double lo = NAN, hi = NAN, rlo = NAN, rhi = NAN;
    int ranged = c->boot && st->bi[i] >= 0 && st->bi[0] == 0; /* paired with the same reference */
    if (ranged) {
        const boot_stat *a = boot_get(st->bp, st->bi[i], "speedup");
        const boot_stat *r2 = boot_get(st->bp, st->bi[i], "rollout_speedup");
        lo = a->p5, hi = a->p95, rlo = r2->p5, rhi = r2->p95;
    }
    snprintf(row[0], PAPER_CELL, "%s", name);
    snprintf(row[1], PAPER_CELL, "%.1f", v[i][0]);
    snprintf(row[2], PAPER_CELL, "%.1f", v[i][1]);
    if (ranged) {
        snprintf(row[3], PAPER_CELL, "%.2fx (%.2f-%.2f)", sp, lo, hi);
        snprintf(row[4], PAPER_CELL, "%.2fx (%.2f-%.2f)", rs, rlo, rhi);
    } else {
        snprintf(row[3], PAPER_CELL, "%.2fx", sp);
        snprintf(row[4], PAPER_CELL, "%.2fx", rs);
    }
    snprintf(row[5], PAPER_CELL, "%.3f", v[i][2]);
    snprintf(row[6], PAPER_CELL, "%.3f", v[i][3]);
    snprintf(row[7], PAPER_CELL, "%.2f", v[i][5]);
    snprintf(row[8], PAPER_CELL, "%.3f", v[i][6]);
    char key[64];
    snprintf(key, sizeof key, "%s.speedup", name);
    if (put(c, x, key, sp, lo, hi, e))
        return -1;
    snprintf(key, sizeof key, "%s.rollout_speedup", name);
    if (put(c, x, key, rs, rlo, rhi, e))
        return -1;
    if (c->adhoc && i < PAPER_MAX_SPEEDUPS) {
        paper_bar *sb = &c->doc->speedups[c->doc->n_speedups++];
        snprintf(sb->label, sizeof sb->label, "%s", name);
        sb->a = sp, sb->a_lo = ranged ? lo : sp, sb->a_hi = ranged ? hi : sp;
        sb->b = rs, sb->b_lo = ranged ? rlo : rs, sb->b_hi = ranged ? rhi : rs;
    }
    return 0;
}

/* The result table of the comparison (a row per policy, with its note), and
 * its values.  Returns 0, or -1 with e set. */
static int cmp_table(const cmp_state *st, ts_err *e)
{
    const paper_exp *x = st->x;
    paper_ctx *c = st->c;
    char title[400];
    snprintf(title, sizeof title, "%s (%s: %s on %d GPUs)", x->title, st->s.name, st->m.name,
             st->s.gpus);
    paper_table *t = paper_doc_table(c->doc, title, st->np + 1, 9, e);
    if (!t)
        return -1;
    size_t nr = 0;
    for (int k = 0; k < st->ns; k++)
        nr += trace_n_responses(st->tr[k]);
    char what[64] = "One RL step";
    if (st->ns > 1)
        snprintf(what, sizeof what, "%d RL steps (means over the steps)", st->ns);
    snprintf(t->note, sizeof t->note,
             "%s, %zu responses, seed %llu. Speedups are over %s%s.", what, nr,
             (unsigned long long)st->s.seed, st->plist[0]->name,
             c->boot ? "; in parentheses the bootstrap 5-95% range over resampled prompts "
                       "(policies without one are not rerun by the bootstrap)" : "");
    if (x->note) {
        size_t n = strlen(t->note);
        snprintf(t->note + n, sizeof t->note - n, " %s", x->note);
    }
    const char *hdr[] = {"policy", "step_s", "rollout_s", "speedup", "rollout speedup", "bubble",
                         "train", "accept", "off-policy"};
    for (int k = 0; k < 9; k++)
        snprintf(t->cell[0][k], PAPER_CELL, "%s", hdr[k]);
    for (int i = 0; i < st->np; i++)
        if (cmp_row(st, t, i, e))
            return -1;
    if (c->adhoc) {
        snprintf(c->doc->speedup_ref, sizeof c->doc->speedup_ref, "%s", st->plist[0]->name);
        c->doc->seed = (unsigned long long)st->s.seed;
    }
    return 0;
}

/* Runs every policy of the comparison st (scenario set up) over its steps,
 * with the figures, the bootstrap and the table.  Returns 0, or -1 with e
 * set. */
static int cmp_run(cmp_state *st, ts_err *e)
{
    if (policy_load_steps(&st->s, st->c->trace, st->ns, st->tr, e))
        return -1;
    double xmax = 0;
    for (int i = 0; i < st->np; i++) {
        if (run_policy(st->x, st->c, &st->s, st->plist[i], &st->hw, &st->m, st->tr, st->ns,
                       st->v[i], &st->rec[i], e))
            return -1;
        xmax = fmax(xmax, makespan(st->rec[i]));
    }
    /* the figures after every run: their Gantt charts share one time axis */
    for (int i = 0; i < st->np; i++)
        if (policy_figures(st->x, st->c, &st->s, st->plist[i], st->rec[i], st->ns, i == 0, xmax,
                           e))
            return -1;
    if (st->c->adhoc && adhoc_figures(st->x, st->c, &st->s, st->plist, st->rec, st->np, e))
        return -1;
    return cmp_bootstrap(st, e) || cmp_table(st, e) ? -1 : 0;
}

int paper_exp_compare(const paper_exp *x, paper_ctx *c, ts_err *e)
{
    const char *sets[MAX_ALL_SETS];
    int nsets = collect_sets(x, c, sets);
    cmp_state st;
    memset(&st, 0, sizeof st);
    st.x = x;
    st.c = c;
    char why[160];
    int rc = -1;
    if (cmp_policies(&st, e) ||
        run_setup(x->scenario, sets, nsets, c->have_seed, c->seed, &st.s, &st.hw, &st.m, e))
        goto done;
    if (!c->trace && trace_absent(&st.s, why, sizeof why)) {
        paper_skip(c, x, why);
        rc = 0;
        goto done;
    }
    paper_note_calibration(c, st.hw.calibration);
    st.ns = x->steps > 1 ? x->steps : 1;
    st.tr = calloc((size_t)st.ns, sizeof *st.tr);
    st.v = calloc((size_t)st.np, sizeof *st.v);
    if (!st.v || !st.tr) {
        ts_errf(e, "out of memory");
        goto done;
    }
    rc = cmp_run(&st, e);
done:
    boot_result_free(&st.b);
    for (int k = 0; st.tr && k < st.ns; k++)
        trace_free(st.tr[k]);
    free(st.tr);
    free(st.v);
    for (int i = 0; i < st.np; i++)
        run_record_free(st.rec[i]);
    return rc;
}
