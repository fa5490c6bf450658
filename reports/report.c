/*
 * Report writer: turns one run_record (usually loaded from the store by
 * `tailsim report`) into a directory of plain files:
 *   gantt.dat / gantt.png  per-GPU timeline coloured busy / idle / train,
 *                          drawn by the static script reports/gantt.gp;
 *   cdf.dat / cdf.png      response-length CDF, drawn by reports/cdf.gp;
 *   report.md              identity, metrics (in the record's order), a
 *                          per-phase bubble table, length percentiles, and
 *                          links to the two PNGs.
 *   index.html             the same as one page (a paper_doc written by
 *                          the paper report's HTML writer; relative links);
 *   timeline.json,         the exports (reports/perfetto.c,
 *   responses.csv,         reports/csv_export.c), written first: they need
 *   phases.csv             no gnuplot.
 * This file holds report_write(), which checks the run, sorts its response
 * lengths and writes the files in that order, and what the other report
 * writers share: report_mkdir_p() and the name writers report_put_*().  The
 * .dat files and gnuplot (report_gnuplot(), report_can_draw(),
 * report_script()) are in reports/report_dat.c, report.md and index.html in
 * reports/report_md.c; reports/report_impl.h, private to the three, holds
 * what they share.
 *
 * The run's names (command, policy, scenario: from the database, so from
 * anyone) reach the .dat comments, report.md and the titles with every
 * control character as a space and Markdown's '|', '\' and '<tag'
 * escaped (report_put_*(), which the other report writers share).
 *
 * Invariants: every file appears atomically (a .dat or .md through
 * ts_atomic_*, a PNG rendered by gnuplot into a ts_atomic_* temporary and
 * renamed on success), so a reader never sees half a file and nothing but a
 * regular file is replaced; the directory is created like `mkdir -p`.
 * A run without intervals (or without responses) gets its .dat file and a
 * note in report.md but no PNG: gnuplot cannot plot an empty set.  Nothing
 * here prints or exits.
 */
#include "reports/report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "reports/csv_export.h"
#include "reports/perfetto.h"
#include "reports/report_impl.h"

/* Creates dir and its missing parents.  Returns 0, or -1 naming the part
 * that could not be created. */
int report_mkdir_p(const char *dir, ts_err *e)
{
    char buf[PATH_CAP];
    struct stat st;
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf || !buf[0])
        return ts_errf(e, "%s: bad output directory name", dir);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != 0)
            continue;
        char c = *p;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return ts_errf(e, "%s: cannot create directory: %s", buf, strerror(errno));
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
            return ts_errf(e, "%s: not a directory", buf);
        *p = c;
        if (!c)
            break;
    }
    return 0;
}

static int join(char *buf, const char *dir, const char *name, ts_err *e)
{
    if (snprintf(buf, PATH_CAP, "%s/%s", dir, name) >= PATH_CAP)
        return ts_errf(e, "%s: output path too long", dir);
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void report_put_line(FILE *f, const char *s, size_t cap)
{
    for (size_t i = 0; i < cap && s[i]; i++)
        fputc(is_ctl((unsigned char)s[i]) ? ' ' : s[i], f);
}

void report_put_md(FILE *f, const char *s, size_t cap, int flags)
{
    for (size_t i = 0; i < cap && s[i]; i++) {
        char c = s[i], nx = i + 1 < cap ? s[i + 1] : 0;
        if (is_ctl((unsigned char)c))
            c = ' ';
        else if (c == '\\' || (c == '|' && (flags & REPORT_MD_CELL)) ||
                 ((c == '[' || c == ']') && (flags & REPORT_MD_LINK)) || (c == ']' && nx == '(') ||
                 (c == '<' && (((nx | 0x20) >= 'a' && (nx | 0x20) <= 'z') || nx == '/' ||
                               nx == '!' || nx == '?')))
            fputc('\\', f);
        fputc(c, f);
    }
}

void report_put_dat_string(FILE *f, const char *s, size_t cap)
{
    fputc('"', f);
    for (size_t i = 0; i < cap && s[i]; i++)
        fputc(is_ctl((unsigned char)s[i]) ? ' ' : s[i] == '"' ? '\'' : s[i], f);
    fputc('"', f);
}

void report_put_url(FILE *f, const char *s, size_t cap)
{
    for (size_t i = 0; i < cap && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-._~/+,=", c))
            fputc(c, f);
        else
            fprintf(f, "%%%02X", c);
    }
}

/* Checks that every interval's phase and state name an enum value (the
 * files name them).  Returns 0, or -1 naming the interval. */
static int check_timeline(const run_record *r, ts_err *e)
{
    for (size_t i = 0; i < r->n_tl; i++) {
        const tl_interval *t = &r->tl[i];
        if (t->phase < 0 || t->phase >= PH_COUNT || t->state < 0 || t->state > TL_TRAIN)
            return ts_errf(e, "timeline interval %zu (gpu %d): phase %d or state %d out of range",
                           i, t->gpu, t->phase, t->state);
    }
    return 0;
}

int report_write(const run_record *r, const char *dir, ts_err *e)
{
    return report_write_axis(r, dir, 0, e);
}

int report_write_axis(const run_record *r, const char *dir, double xmax, ts_err *e)
{
    int rc = -1;
    int32_t *len = NULL;
    size_t n = r->n_resp;
    char gp[PATH_CAP], dat[PATH_CAP], png[PATH_CAP], md[PATH_CAP], title[512], run_tag[40] = "";
    char what[80];
    if (r->id > 0) /* a stored run; an unsaved one (the paper report's) has no id */
        snprintf(run_tag, sizeof run_tag, "run %lld: ", (long long)r->id);
    if (check_timeline(r, e) || report_mkdir_p(dir, e))
        goto cleanup;
    if (n && !(len = malloc(n * sizeof *len))) {
        ts_errf(e, "out of memory sorting %zu response lengths", n);
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++)
        len[i] = r->resp[i].length;
    if (n)
        qsort(len, n, sizeof *len, cmp_i32);

    /* The exports, which need no gnuplot. */
    if (join(dat, dir, "timeline.json", e) || perfetto_write(r, dat, e) ||
        join(dat, dir, "responses.csv", e) || csv_write_responses(r, dat, e) ||
        join(dat, dir, "phases.csv", e) || csv_write_phases(r, dat, e))
        goto cleanup;

    /* Gantt chart. */
    if (join(dat, dir, "gantt.dat", e) || join(png, dir, "gantt.png", e) ||
        rp_write_gantt_dat(r, dat, xmax, e))
        goto cleanup;
    if (r->n_tl) {
        snprintf(title, sizeof title, "%s%s %.*s, %d GPUs - GPU timeline by phase", run_tag,
                 run_what(r, what, sizeof what), FIELD(r->scenario), r->gpus);
        if (report_script("gantt", gp, sizeof gp, e) ||
            report_gnuplot_num(gp, dat, png, title, xmax > 0 ? xmax : NAN, dir, e))
            goto cleanup;
    } else {
        remove(png); /* no stale chart from an earlier report in this directory */
    }

    /* Length CDF. */
    if (join(dat, dir, "cdf.dat", e) || join(png, dir, "cdf.png", e) ||
        rp_write_cdf_dat(r, len, n, dat, e))
        goto cleanup;
    if (n) {
        snprintf(title, sizeof title, "%s%s %.*s - response lengths (%zu responses)", run_tag,
                 run_what(r, what, sizeof what), FIELD(r->scenario), n);
        if (report_script("cdf", gp, sizeof gp, e) ||
            report_gnuplot(gp, dat, png, title, dir, e))
            goto cleanup;
    } else {
        remove(png);
    }

    if (join(md, dir, "report.md", e) || rp_write_md(r, md, len, n, e) ||
        join(md, dir, "index.html", e) || rp_write_html(r, md, len, n, e))
        goto cleanup;
    rc = 0;
cleanup:
    free(len);
    return rc;
}
