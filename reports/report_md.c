/*
 * Report writer, pages (the rest: reports/report.c, the .dat files and
 * gnuplot reports/report_dat.c):
 *   report.md              identity, the scenario the run ran on (when
 *                          recorded), metrics (in the record's order), a
 *                          per-phase bubble table, length percentiles, and
 *                          links to the two PNGs;
 *   index.html             the same as one page (a paper_doc written by
 *                          the paper report's HTML writer; relative links).
 * Also report_put_fenced(), the fenced-block writer the paper document
 * shares.  The run's names reach both pages through report_put_md() (a
 * Markdown cell) or the paper writer's escaping (HTML).
 *
 * Invariants: report.md appears through ts_atomic_*, index.html through
 * paper_report_write_html(); a run without intervals (or without responses)
 * gets a note instead of the figure.  Nothing here prints or exits.
 */
#include "reports/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "reports/paper_report.h"
#include "reports/report_impl.h"

/* Writes s into a Markdown table cell. */
static void md_cell(FILE *f, const char *s, size_t cap)
{
    report_put_md(f, s, cap, REPORT_MD_CELL);
}

static void md_value(FILE *f, double v)
{
    if (isfinite(v) && v == floor(v) && fabs(v) < 1e15)
        fprintf(f, "%.0f", v);
    else
        fprintf(f, "%.6g", v);
}

/* Phase p over the whole run: its first start and last end (s) and its
 * busy / idle / train GPU-seconds.  Returns 1, or 0 when p has no interval. */
static int phase_totals(const run_record *r, int p, double *lo, double *hi, double gs[3])
{
    *lo = INFINITY, *hi = -INFINITY;
    gs[0] = gs[1] = gs[2] = 0;
    for (size_t i = 0; i < r->n_tl; i++) {
        const tl_interval *t = &r->tl[i];
        if (t->phase != p)
            continue;
        *lo = fmin(*lo, t->t0);
        *hi = fmax(*hi, t->t1);
        if (t->state >= 0 && t->state <= TL_TRAIN)
            gs[t->state] += t->t1 - t->t0;
    }
    return *lo <= *hi;
}

/* The phase table's header and row p's cells (cells[7][PHASE_CELL]).
 * Returns 0 when phase p has no interval. */
#define PHASE_CELL 32
static const char *const phase_heads[7] = {"phase",      "start (s)",   "end (s)",  "busy GPU-s",
                                           "idle GPU-s", "train GPU-s", "idle share"};
/* Header c of r's phase table: over several steps a phase's span runs from
 * its first step's start to its last step's end, and says so. */
static const char *phase_head(const run_record *r, int c)
{
    if (r->n_steps > 1 && c == 1)
        return "first start (s)";
    if (r->n_steps > 1 && c == 2)
        return "last end (s)";
    return phase_heads[c];
}
static int phase_row(const run_record *r, int p, char cells[7][PHASE_CELL])
{
    double lo, hi, gs[3];
    if (!phase_totals(r, p, &lo, &hi, gs))
        return 0;
    double tot = gs[0] + gs[1] + gs[2];
    snprintf(cells[0], PHASE_CELL, "%s", tl_phase_name[p]);
    snprintf(cells[1], PHASE_CELL, "%.3f", lo);
    snprintf(cells[2], PHASE_CELL, "%.3f", hi);
    for (int k = 0; k < 3; k++)
        snprintf(cells[3 + k], PHASE_CELL, "%.1f", gs[k]);
    snprintf(cells[6], PHASE_CELL, "%.1f%%", tot > 0 ? 100.0 * gs[1] / tot : 0.0);
    return 1;
}

static void md_phases(FILE *f, const run_record *r)
{
    if (r->n_steps > 1)
        fprintf(f, "Over all %zu RL steps (each step's phases: [phases.csv](phases.csv)).\n\n",
                r->n_steps);
    for (int c = 0; c < 7; c++)
        fprintf(f, "| %s ", phase_head(r, c));
    fputs("|\n|---|---:|---:|---:|---:|---:|---:|\n", f);
    for (int p = 0; p < PH_COUNT; p++) {
        char cells[7][PHASE_CELL];
        if (!phase_row(r, p, cells))
            continue;
        for (int c = 0; c < 7; c++)
            fprintf(f, "| %s ", cells[c]);
        fputs("|\n", f);
    }
}

/* Appends "# LABEL: VALUE\n" to buf (at *len of cap), the value's control
 * characters as blanks, so that the line stays one INI comment. */
static void put_comment(char *buf, size_t cap, size_t *len, const char *label, const char *v)
{
    int n = snprintf(buf + *len, cap - *len, "# %s: ", label);
    if (n < 0 || (size_t)n >= cap - *len)
        return;
    *len += (size_t)n;
    for (; *v && *len + 2 < cap; v++)
        buf[(*len)++] = is_ctl((unsigned char)*v) ? ' ' : *v;
    buf[(*len)++] = '\n';
    buf[*len] = 0;
}

/* What the run ran on as one text (a new string, free() it), or NULL when
 * nothing is known (a run stored before schema version 6) or out of memory:
 * INI comment lines with the steps, the --set overrides, the trace and its
 * hash, then the effective scenario's INI, so that the whole text reruns
 * as a scenario file. */
static char *source_text(const run_record *r)
{
    if (!r->scenario_ini && !r->overrides && !r->steps && !r->trace_path[0] &&
        !r->trace_hash[0])
        return NULL;
    size_t cap = (r->scenario_ini ? strlen(r->scenario_ini) : 0) +
                 (r->overrides ? strlen(r->overrides) : 0) + sizeof r->trace_path + 512, len = 0;
    char *buf = malloc(cap), num[32];
    if (!buf)
        return NULL;
    buf[0] = 0;
    snprintf(num, sizeof num, "%d", r->steps);
    put_comment(buf, cap, &len, "steps", r->steps ? num : "(not recorded)");
    put_comment(buf, cap, &len, "overrides (--set)", r->overrides ? r->overrides : "(not recorded)");
    put_comment(buf, cap, &len, "trace", r->trace_path[0] ? r->trace_path : "(generated)");
    put_comment(buf, cap, &len, "trace hash", r->trace_hash[0] ? r->trace_hash : "(none)");
    if (r->scenario_ini)
        len += (size_t)snprintf(buf + len, cap - len, "\n%s", r->scenario_ini);
    else
        snprintf(buf + len, cap - len, "# (the effective scenario was not recorded)\n");
    return buf;
}

void report_put_fenced(FILE *f, const char *text, const char *lang)
{
    size_t run = 0, fence = 3;
    for (const char *p = text; *p; p++) {
        run = *p == '`' ? run + 1 : 0;
        if (run >= fence)
            fence = run + 1;
    }
    for (size_t i = 0; i < fence; i++)
        fputc('`', f);
    fputs(lang, f);
    fputc('\n', f);
    for (const char *p = text; *p; p++) {
        unsigned char c = (unsigned char)*p;
        fputc((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? ' ' : c, f);
    }
    if (text[0] && text[strlen(text) - 1] != '\n')
        fputc('\n', f);
    for (size_t i = 0; i < fence; i++)
        fputc('`', f);
    fputc('\n', f);
}

/* The "Scenario" section of report.md, when the run recorded one. */
static void md_source(FILE *f, const run_record *r)
{
    char *text = source_text(r);
    if (!text)
        return;
    fputs("## Scenario\n\nWhat the run ran on: the steps, the `--set` overrides as given, the "
          "trace and the hash of its numbers, then the effective scenario (every key after the "
          "scenario file and the overrides).  Saved as a file, it reruns the run: `tailsim ", f);
    /* rollout and dcp rerun as themselves; rlstep, compare and paper runs
     * (their policy is in the INI) as rlstep */
    int own = !strcmp(r->command, "rollout") || !strcmp(r->command, "dcp");
    fputs(own ? r->command : "rlstep", f);
    fputs(" FILE --steps N`.\n\n", f);
    report_put_fenced(f, text, "ini");
    fputc('\n', f);
    free(text);
}

int rp_write_md(const run_record *r, const char *path, const int32_t *len, size_t n, ts_err *e)
{
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    FILE *f = a.f;
    char what[80];
    if (r->id > 0)
        fprintf(f, "# tailsim run %lld: ", (long long)r->id);
    else /* an unsaved run (rollout/rlstep -o without --db, the paper's) */
        fputs("# tailsim ", f);
    report_put_md(f, run_what(r, what, sizeof what), sizeof what, 0);
    fputs("\n\n| field | value |\n|---|---|\n", f);
    if (r->id > 0)
        fprintf(f, "| run | %lld |\n", (long long)r->id);
    else
        fputs("| run | not saved |\n", f);
    fputs("| command | ", f);
    md_cell(f, r->command, sizeof r->command);
    if (r->policy[0]) {
        fputs(" |\n| policy | ", f);
        md_cell(f, r->policy, sizeof r->policy);
    }
    fputs(" |\n| scenario | ", f);
    md_cell(f, r->scenario, sizeof r->scenario);
    fprintf(f, " |\n| seed | %llu |\n| calibration | ", (unsigned long long)r->seed);
    md_cell(f, r->calibration[0] ? r->calibration : "(none)", sizeof r->calibration);
    fputs(" |\n| version | ", f);
    md_cell(f, r->version, sizeof r->version);
    fputs(" |\n| created | ", f);
    md_cell(f, r->created, sizeof r->created);
    fprintf(f, " |\n| GPUs / replicas / TP | %d / %d / %d |\n\n", r->gpus, r->replicas,
            r->tp);

    md_source(f, r);
    fputs("## Metrics\n\n", f);
    if (r->n_metrics) {
        fputs("| key | value |\n|---|---:|\n", f);
        for (size_t i = 0; i < r->n_metrics; i++) {
            fputs("| ", f);
            md_cell(f, r->metrics[i].key, sizeof r->metrics[i].key);
            fputs(" | ", f);
            md_value(f, r->metrics[i].value);
            fputs(" |\n", f);
        }
    } else {
        fputs("No metrics recorded.\n", f);
    }

    fputs("\n## GPU timeline\n\n", f);
    if (r->n_tl) {
        fputs("![GPU timeline: busy / idle / drafter training per GPU](gantt.png)\n\n"
              "Data: [gantt.dat](gantt.dat).\n\n", f);
        md_phases(f, r);
    } else {
        fputs("No timeline recorded (no gantt.png).\n", f);
    }

    fputs("\n## Response lengths\n\n", f);
    if (n) {
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += len[i];
        fputs("![Response length CDF](cdf.png)\n\nData: [cdf.dat](cdf.dat).\n\n", f);
        fprintf(f, "| responses | mean | p50 | p90 | p99 | max |\n"
                   "|---:|---:|---:|---:|---:|---:|\n"
                   "| %zu | %.1f | %d | %d | %d | %d |\n", n, sum / (double)n,
                pct(len, n, 0.5), pct(len, n, 0.9), pct(len, n, 0.99), len[n - 1]);
    } else {
        fputs("No responses recorded (no cdf.png).\n", f);
    }
    return ts_atomic_commit(&a, e);
}

/* Fills table row `row` of t (2 columns) with a label and a value. */
static void kv(paper_table *t, int row, const char *k, const char *v)
{
    snprintf(t->cell[row][0], PAPER_CELL, "%s", k);
    snprintf(t->cell[row][1], PAPER_CELL, "%s", v);
}

/* The files report_write() writes besides the page, for its "Files" table. */
static const char *const files[][2] = {
    {"report.md", "this report in Markdown"},
    {"timeline.json", "per-GPU timeline: open in ui.perfetto.dev or chrome://tracing"},
    {"phases.csv", "per RL step and phase: span, busy/idle/train GPU-s"},
    {"responses.csv", "per response: replica, prompt and response tokens, finish"},
    {"gantt.dat", "the timeline as gnuplot data (gantt.png)"},
    {"cdf.dat", "the length CDF as gnuplot data (cdf.png)"},
};
#define NFILES (sizeof files / sizeof files[0])

/* Writes the one-run page, DIR/index.html, as a paper_doc through the paper
 * report's HTML writer: identity line, metrics, phase table, length
 * summary, the files beside it, and the two figures.  Returns 0 or -1. */
int rp_write_html(const run_record *r, const char *path, const int32_t *len, size_t n,
                  ts_err *e)
{
    int rc = -1;
    char what[80], *source = NULL;
    paper_doc *d = calloc(1, sizeof *d);
    if (!d)
        return ts_errf(e, "out of memory");
    run_what(r, what, sizeof what);
    if (r->id > 0)
        snprintf(d->title, sizeof d->title, "tailsim run %lld: %s", (long long)r->id, what);
    else
        snprintf(d->title, sizeof d->title, "tailsim %s", what);
    snprintf(d->meta, sizeof d->meta,
             "scenario %.*s \xc2\xb7 seed %llu \xc2\xb7 %d GPUs, %d replicas, TP %d \xc2\xb7 "
             "calibration %.*s \xc2\xb7 tailsim %.*s%s%.*s",
             120, r->scenario, (unsigned long long)r->seed, r->gpus, r->replicas, r->tp, 80,
             r->calibration[0] ? r->calibration : "(none)", FIELD(r->version),
             r->created[0] ? " \xc2\xb7 saved " : " \xc2\xb7 not saved", FIELD(r->created));
    paper_table *t = paper_doc_table(d, "Metrics", (int)r->n_metrics + 1, 2, e);
    if (!t)
        goto done;
    kv(t, 0, "key", "value");
    for (size_t i = 0; i < r->n_metrics; i++) {
        double v = r->metrics[i].value;
        char val[PAPER_CELL];
        if (isfinite(v) && v == floor(v) && fabs(v) < 1e15)
            snprintf(val, sizeof val, "%.0f", v);
        else
            snprintf(val, sizeof val, "%.6g", v);
        snprintf(t->cell[i + 1][0], PAPER_CELL, "%.*s", FIELD(r->metrics[i].key));
        snprintf(t->cell[i + 1][1], PAPER_CELL, "%s", val);
    }
    if (!r->n_metrics)
        snprintf(t->note, sizeof t->note, "No metrics recorded.");
    if (r->n_tl) {
        int rows = 1;
        for (int p = 0; p < PH_COUNT; p++) {
            char cells[7][PHASE_CELL];
            rows += phase_row(r, p, cells);
        }
        if (!(t = paper_doc_table(d, "GPU time by phase", rows, 7, e)))
            goto done;
        snprintf(t->note, sizeof t->note,
                 "Each phase's first start and last end (s from the start of the run) and the "
                 "GPU-seconds its intervals spent busy, idle (the bubble) and training the "
                 "drafter, over the whole run; phases.csv has them per RL step.");
        for (int c = 0; c < 7; c++)
            snprintf(t->cell[0][c], PAPER_CELL, "%s", phase_head(r, c));
        for (int p = 0, row = 1; p < PH_COUNT; p++) {
            char cells[7][PHASE_CELL];
            if (!phase_row(r, p, cells))
                continue;
            for (int c = 0; c < 7; c++)
                snprintf(t->cell[row][c], PAPER_CELL, "%.*s", PHASE_CELL - 1, cells[c]);
            row++;
        }
    }
    if (n) {
        if (!(t = paper_doc_table(d, "Response lengths (tokens)", 2, 6, e)))
            goto done;
        static const char *const heads[] = {"responses", "mean", "p50", "p90", "p99", "max"};
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += len[i];
        for (int c = 0; c < 6; c++)
            snprintf(t->cell[0][c], PAPER_CELL, "%s", heads[c]);
        snprintf(t->cell[1][0], PAPER_CELL, "%zu", n);
        snprintf(t->cell[1][1], PAPER_CELL, "%.1f", sum / (double)n);
        snprintf(t->cell[1][2], PAPER_CELL, "%d", pct(len, n, 0.5));
        snprintf(t->cell[1][3], PAPER_CELL, "%d", pct(len, n, 0.9));
        snprintf(t->cell[1][4], PAPER_CELL, "%d", pct(len, n, 0.99));
        snprintf(t->cell[1][5], PAPER_CELL, "%d", len[n - 1]);
    }
    if (!(t = paper_doc_table(d, "Files in this folder", (int)NFILES + 1, 2, e)))
        goto done;
    kv(t, 0, "file", "holds");
    for (size_t i = 0; i < NFILES; i++)
        kv(t, (int)i + 1, files[i][0], files[i][1]);
    if (r->n_tl) {
        char cap[200];
        snprintf(cap, sizeof cap, "Per-GPU timeline (busy, idle, drafter training) of %d GPUs%s",
                 r->gpus, r->n_steps > 1 ? "; dashed lines: where each later RL step starts" : "");
        if (paper_doc_fig(d, "Charts", "gantt.png", cap, e))
            goto done;
    }
    if (n && paper_doc_fig(d, "Charts", "cdf.png", "Response-length CDF", e))
        goto done;
    d->terminal = source = source_text(r);
    d->terminal_title = "Scenario (what the run ran on; saved as a file, it reruns)";
    rc = paper_report_write_html(d, path, e);
done:
    free(source);
    paper_doc_free(d);
    free(d);
    return rc;
}
