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
#include <stdlib.h>
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

/* One "section.key = value" of a run's stored INI, or one of the other
 * things a run ran on (seed, steps, overrides, trace, trace hash). */
typedef struct src_item {
    char key[72];
    char val[PAPER_CELL];
} src_item;
#define MAX_ITEMS 1024 /* items compared per run (a stored INI has ~100 keys) */

/* Appends key = val to items (at most MAX_ITEMS; more are dropped). */
static void item_add(src_item *items, size_t *n, const char *key, const char *val, size_t vlen)
{
    if (*n >= MAX_ITEMS)
        return;
    snprintf(items[*n].key, sizeof items[*n].key, "%s", key);
    cell_text(items[*n].val, val, vlen ? vlen : 1);
    if (!vlen)
        snprintf(items[*n].val, PAPER_CELL, "\"\"");
    (*n)++;
}

/* What run r ran on as items: seed, steps, overrides, trace, trace hash,
 * then every key = value line of its INI under its [section] ("(not
 * recorded)" for what a run stored before schema version 6 lacks).  Lines
 * that are neither are skipped; every value is cut to a table cell. */
static size_t source_items(const run_record *r, src_item *items)
{
    size_t n = 0;
    char num[32];
    const char *nr = "(not recorded)";
    snprintf(num, sizeof num, "%llu", (unsigned long long)r->seed);
    item_add(items, &n, "seed", num, strlen(num));
    snprintf(num, sizeof num, "%d", r->steps);
    item_add(items, &n, "steps", r->steps ? num : nr, strlen(r->steps ? num : nr));
    item_add(items, &n, "overrides", r->overrides ? r->overrides : nr,
             strlen(r->overrides ? r->overrides : nr));
    item_add(items, &n, "trace", r->trace_path[0] ? r->trace_path : "(generated)",
             strnlen(r->trace_path[0] ? r->trace_path : "(generated)", sizeof r->trace_path));
    item_add(items, &n, "trace hash", r->trace_hash[0] ? r->trace_hash : "-",
             strnlen(r->trace_hash[0] ? r->trace_hash : "-", sizeof r->trace_hash));
    if (!r->scenario_ini)
        return n;
    char sec[32] = "";
    for (const char *p = r->scenario_ini; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (len > 2 && p[0] == '[' && p[len - 1] == ']') {
            snprintf(sec, sizeof sec, "%.*s", (int)(len - 2 < 31 ? len - 2 : 31), p + 1);
        } else if (eq && p[0] != '#' && p[0] != ';') {
            size_t kl = (size_t)(eq - p), vo = kl + 1;
            while (kl && p[kl - 1] == ' ')
                kl--;
            while (vo < len && p[vo] == ' ')
                vo++;
            char key[72];
            snprintf(key, sizeof key, "%s.%.*s", sec, (int)(kl < 38 ? kl : 38), p);
            item_add(items, &n, key, p + vo, len - vo);
        }
        p += len + (end != NULL);
    }
    return n;
}

/* The value of key among items[0..n), or NULL. */
static const char *item_find(const src_item *items, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(items[i].key, key))
            return items[i].val;
    return NULL;
}

/* Adds the table "What differs" to d: a row per item (seed, steps,
 * overrides, trace, trace hash, scenario key) whose value is not the same in
 * every run, a column per run (the first PAPER_MAX_COLS - 1).  Returns 0,
 * or -1 (out of memory, or the page full). */
static int diff_table(paper_doc *d, run_record *const *runs, size_t n, ts_err *e)
{
    int rc = -1;
    size_t shown = n < PAPER_MAX_COLS - 1 ? n : PAPER_MAX_COLS - 1;
    src_item **items = calloc(shown, sizeof *items);
    size_t *ni = calloc(shown, sizeof *ni);
    const char **diff = NULL;
    size_t nd = 0;
    if (!items || !ni)
        goto oom;
    for (size_t i = 0; i < shown; i++) {
        if (!(items[i] = malloc(MAX_ITEMS * sizeof **items)))
            goto oom;
        ni[i] = source_items(runs[i], items[i]);
    }
    if (!(diff = malloc(shown * MAX_ITEMS * sizeof *diff)))
        goto oom;
    /* the union of the keys in order of first appearance; a key differs when
     * some run lacks it or has another value */
    for (size_t i = 0; i < shown; i++)
        for (size_t k = 0; k < ni[i]; k++) {
            const char *key = items[i][k].key;
            int seen = 0, differs = 0;
            for (size_t j = 0; j < i && !seen; j++)
                seen = item_find(items[j], ni[j], key) != NULL;
            if (seen)
                continue;
            for (size_t j = 0; j < shown && !differs; j++) {
                const char *v = item_find(items[j], ni[j], key);
                differs = !v || strcmp(v, items[i][k].val);
            }
            if (differs)
                diff[nd++] = key;
        }
    paper_table *t = paper_doc_table(d, "What differs", (int)(nd ? nd : 1) + 1, (int)shown + 1, e);
    if (!t)
        goto done;
    snprintf(t->note, sizeof t->note,
             "%s Each run's stored seed, steps, --set overrides, trace, trace hash and "
             "effective scenario (section.key), compared; values cut to %d characters (each "
             "run's own report has them whole, under Scenario).%s",
             nd ? "What the runs ran on where it differs." : "The runs ran on the same scenario, "
             "overrides, steps and trace.", PAPER_CELL - 1,
             shown < n ? " Only the first runs have a column." : "");
    snprintf(t->cell[0][0], PAPER_CELL, "key");
    for (size_t i = 0; i < shown; i++)
        snprintf(t->cell[0][i + 1], PAPER_CELL, "run %lld", (long long)runs[i]->id);
    if (!nd)
        snprintf(t->cell[1][0], PAPER_CELL, "(none)");
    for (size_t r = 0; r < nd; r++) {
        cell_text(t->cell[r + 1][0], diff[r], strlen(diff[r]));
        for (size_t i = 0; i < shown; i++) {
            const char *v = item_find(items[i], ni[i], diff[r]);
            snprintf(t->cell[r + 1][i + 1], PAPER_CELL, "%s", v ? v : "-");
        }
    }
    rc = 0;
    goto done;
oom:
    ts_errf(e, "out of memory comparing the runs");
done:
    for (size_t i = 0; items && i < shown; i++)
        free(items[i]);
    free(items);
    free(ni);
    free(diff);
    return rc;
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
    if (diff_table(&d, runs, n, e))
        goto done;
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
