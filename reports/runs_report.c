/*
 * Several stored runs side by side (see runs_report.h).  The page is a
 * paper_doc, written by the paper report's writer: one table (a row per
 * run: identity and the headline metrics it has, "-" for those it has not),
 * the speedup bars (step and rollout speedup of each run over the first,
 * for runs that have both times), then every run's Gantt chart and length
 * CDF, each drawn into the run's own directory by report_write().
 */
#include "reports/runs_report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "reports/dcp_report.h"
#include "reports/paper_report.h"
#include "reports/report.h"

/* The table's metric columns: the key in the run record and the header. */
static const char *const keys[] = {"step_s",         "rollout_s",   "bubble_fraction",
                                   "train_fraction", "accept_len",  "off_policy_tokens"};
static const char *const heads[] = {"step_s", "rollout_s", "bubble", "train", "accept", "offtok"};
#define NKEY (sizeof keys / sizeof keys[0])
#define NCOL (6 + NKEY) /* run, command, policy, scenario, GPUs, speedup + the metrics */

/* Copies src (at most cap bytes, maybe not NUL-terminated) into a table
 * cell, '|' replaced so that it cannot end a Markdown cell. */
static void cell_text(char *cell, const char *src, size_t cap)
{
    size_t n = strnlen(src, cap), k = 0;
    for (size_t i = 0; i < n && k + 1 < PAPER_CELL; i++)
        cell[k++] = src[i] == '|' ? '/' : src[i];
    cell[k] = 0;
    if (!k)
        snprintf(cell, PAPER_CELL, "-");
}

static double metric_or_nan(const run_record *r, const char *key)
{
    double v;
    return run_get_metric(r, key, &v) ? NAN : v;
}

/* "run 7 tlt" (or "run 7 rlstep" without a policy). */
static void run_label(char *buf, size_t n, const run_record *r)
{
    const char *what = r->policy[0] ? r->policy : r->command;
    snprintf(buf, n, "run %lld %.*s", (long long)r->id, 24, what);
}

int runs_report_write(run_record *const *runs, size_t n, const char *source, const char *dir,
                      ts_err *e)
{
    if (n < 2)
        return ts_errf(e, "a comparison needs at least two runs");
    if (report_can_draw(dir, e))
        return -1;
    paper_doc d;
    memset(&d, 0, sizeof d);
    int rc = -1;
    /* every run's own report, in DIR/run-<id> */
    for (size_t i = 0; i < n; i++) {
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/run-%lld", dir, (long long)runs[i]->id);
        if (report_write(runs[i], sub, e) ||
            (!strncmp(runs[i]->command, "dcp", sizeof runs[i]->command) &&
             dcp_report_write(runs[i], sub, e)))
            goto done;
    }
    /* the page */
    size_t o = (size_t)snprintf(d.title, sizeof d.title, "tailsim report: runs");
    for (size_t i = 0; i < n && o < sizeof d.title; i++)
        o += (size_t)snprintf(d.title + o, sizeof d.title - o, "%s %lld", i ? "," : "",
                              (long long)runs[i]->id);
    snprintf(d.meta, sizeof d.meta,
             "Stored runs of %.200s, side by side; speedups are over run %lld, the first listed.",
             source, (long long)runs[0]->id);
    paper_table *t = paper_doc_table(&d, "Runs", (int)n + 1, (int)NCOL, e);
    if (!t)
        goto done;
    snprintf(t->note, sizeof t->note,
             "Each run's metrics as stored (means over its steps); \"-\" where a run has no "
             "such metric. speedup: run %lld's step_s over the run's. offtok: the share of "
             "the trained tokens an older policy generated.",
             (long long)runs[0]->id);
    const char *fixed[] = {"run", "command", "policy", "scenario", "GPUs", "speedup"};
    for (size_t c = 0; c < 6; c++)
        snprintf(t->cell[0][c], PAPER_CELL, "%s", fixed[c]);
    for (size_t k = 0; k < NKEY; k++)
        snprintf(t->cell[0][6 + k], PAPER_CELL, "%s", heads[k]);
    double step0 = metric_or_nan(runs[0], "step_s"), ro0 = metric_or_nan(runs[0], "rollout_s");
    for (size_t i = 0; i < n; i++) {
        const run_record *r = runs[i];
        char(*row)[PAPER_CELL] = t->cell[i + 1];
        snprintf(row[0], PAPER_CELL, "%lld", (long long)r->id);
        cell_text(row[1], r->command, sizeof r->command);
        cell_text(row[2], r->policy, sizeof r->policy);
        cell_text(row[3], r->scenario, sizeof r->scenario);
        snprintf(row[4], PAPER_CELL, "%d", r->gpus);
        double step = metric_or_nan(r, "step_s"), ro = metric_or_nan(r, "rollout_s");
        if (step > 0 && step0 > 0)
            snprintf(row[5], PAPER_CELL, "%.2fx", step0 / step);
        else
            snprintf(row[5], PAPER_CELL, "-");
        for (size_t k = 0; k < NKEY; k++) {
            double v = metric_or_nan(r, keys[k]);
            if (isnan(v))
                snprintf(row[6 + k], PAPER_CELL, "-");
            else
                snprintf(row[6 + k], PAPER_CELL, k < 2 ? "%.2f" : "%.3f", v);
        }
        if (step > 0 && step0 > 0 && ro > 0 && ro0 > 0 && d.n_speedups < PAPER_MAX_SPEEDUPS) {
            paper_bar *b = &d.speedups[d.n_speedups++];
            run_label(b->label, sizeof b->label, r);
            b->a = b->a_lo = b->a_hi = step0 / step;
            b->b = b->b_lo = b->b_hi = ro0 / ro;
        }
    }
    snprintf(d.speedup_ref, sizeof d.speedup_ref, "run %lld", (long long)runs[0]->id);
    /* the figures report_write drew (a chart for a run with a timeline, a CDF
     * for one with responses), the Gantt charts first, then the CDFs */
    for (int kind = 0; kind < 2; kind++)
        for (size_t i = 0; i < n; i++) {
            if (!(kind ? runs[i]->n_resp : runs[i]->n_tl))
                continue;
            char path[128], cap[200], lb[64];
            snprintf(path, sizeof path, "run-%lld/%s", (long long)runs[i]->id,
                     kind ? "cdf.png" : "gantt.png");
            run_label(lb, sizeof lb, runs[i]);
            snprintf(cap, sizeof cap, "%s, %.*s: %s", lb, 64, runs[i]->scenario,
                     kind ? "response-length CDF" : "per-GPU timeline (busy, idle, drafter training)");
            if (paper_doc_fig(&d, kind ? "Length CDFs" : "Per-GPU timelines", path, cap, e))
                goto done;
        }
    rc = paper_report_write(&d, dir, e);
done:
    paper_doc_free(&d);
    return rc;
}
