/*
 * Writer of the paper-reproduction report.  From a paper_doc (filled by
 * cli/paper.c) it writes, into an existing directory:
 *   bars.dat / bars.png      every published speedup next to tailsim's
 *                            (reports/paper_bars.gp; none without rows);
 *   speedup.dat / .png       a comparison's step and rollout speedup per
 *                            policy (the same script);
 *   <plot>.dat / <plot>.png  the line figures (reports/paper_xy.gp);
 *   index.md, index.html     the comparison table (published value with its
 *                            citation, tailsim's value and bootstrap range,
 *                            difference, within-tolerance mark), the result
 *                            tables and the figures.  The HTML is one file
 *                            with inline CSS and every image embedded as a
 *                            data: URI (reports/report_html.c; the PNGs stay
 *                            beside it, and a wide figure links to its file).
 * Every file appears atomically (ts_atomic_*, report_gnuplot's rename).
 * The document's text holds names (scenarios, policies, runs from the
 * database, paths): each goes into index.md through report_put_md() (a
 * table cell's '|' escaped, an image's link target percent-encoded), into
 * index.html through report_put_html() (an attribute's '"' escaped too), into a
 * .dat file as a gnuplot string, and into a script's "a|b|c" title argument
 * with '|' as '/', so none leaves its line, cell, attribute or field.
 * Nothing here prints or exits.
 */
#include "reports/paper_report.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "reports/report.h"
#include "reports/report_html.h"

#define PATHN 4096

const paper_colour paper_bars_colour[2] = {{"grey", "#9a9a9a"}, {"blue", "#3b6fb6"}};
const paper_colour paper_speedup_colour[2] = {{"blue", "#3b6fb6"}, {"green", "#2e9e4f"}};

double paper_row_diff(const paper_row *r)
{
    if (r->sim >= r->lo && r->sim <= r->hi)
        return 0;
    double end = r->sim > r->hi ? r->hi : r->lo;
    return 100.0 * (r->sim - end) / end;
}

int paper_row_within(const paper_row *r)
{
    return r->ran && fabs(paper_row_diff(r)) <= 100.0 * r->tol + 1e-9;
}

paper_table *paper_doc_table(paper_doc *d, const char *title, int nrow, int ncol, ts_err *e)
{
    if (d->n_tables == PAPER_MAX_TABLES || ncol > PAPER_MAX_COLS || nrow < 1) {
        ts_errf(e, "paper report: too many tables or columns");
        return NULL;
    }
    paper_table *t = &d->tables[d->n_tables];
    memset(t, 0, sizeof *t);
    if (!(t->cell = calloc((size_t)nrow, sizeof *t->cell))) {
        ts_errf(e, "out of memory");
        return NULL;
    }
    snprintf(t->title, sizeof t->title, "%s", title);
    t->nrow = nrow;
    t->ncol = ncol;
    d->n_tables++;
    return t;
}

int paper_doc_fig(paper_doc *d, const char *section, const char *path, const char *caption,
                  ts_err *e)
{
    if (d->n_figs == PAPER_MAX_FIGS)
        return ts_errf(e, "paper report: too many figures");
    paper_fig *f = &d->figs[d->n_figs++];
    snprintf(f->section, sizeof f->section, "%s", section);
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->caption, sizeof f->caption, "%s", caption);
    f->wide = 0;
    return 0;
}

void paper_doc_free(paper_doc *d)
{
    for (int i = 0; i < d->n_tables; i++)
        free(d->tables[i].cell);
    d->n_tables = 0;
}

static int path_in(char *buf, const char *dir, const char *name, ts_err *e)
{
    if (snprintf(buf, PATHN, "%s/%s", dir, name) >= PATHN)
        return ts_errf(e, "%s: output path too long", dir);
    return 0;
}

/* tailsim's value as printed: "1.14x", "16.9%", "6.51". */
static void fmt_value(char *buf, size_t n, double v, const char *unit)
{
    if (!strcmp(unit, "%"))
        snprintf(buf, n, "%.1f%%", v);
    else
        snprintf(buf, n, "%.2f%.2s", v, unit);
}

static void fmt_sim(char *buf, size_t n, const paper_row *r)
{
    char v[24], a[24], b[24];
    if (!r->ran) {
        snprintf(buf, n, "not run");
        return;
    }
    fmt_value(v, sizeof v, r->sim, r->unit);
    if (isnan(r->sim_lo)) {
        snprintf(buf, n, "%s", v);
        return;
    }
    fmt_value(a, sizeof a, r->sim_lo, r->unit);
    fmt_value(b, sizeof b, r->sim_hi, r->unit);
    snprintf(buf, n, "%s (%s-%s)", v, a, b);
}

/* Copies s into buf (n bytes) as one '|'-separated part of a script's title
 * argument (paper_bars.gp, paper_xy.gp split it there): '|' becomes '/'. */
static void spec_part(char *buf, size_t n, const char *s)
{
    snprintf(buf, n, "%s", s);
    for (char *p = buf; *p; p++)
        if (*p == '|')
            *p = '/';
}

/* Writes DIR/<stem>.dat with one line per bar pair and draws <stem>.png with
 * reports/paper_bars.gp; spec is its "title|first legend|second legend". */
static int draw_bars(const paper_bar *b, int n, const char *dir, const char *stem,
                     const char *spec, ts_err *e)
{
    char dat[PATHN], png[PATHN], gp[PATHN], name[64];
    ts_atomic a;
    snprintf(name, sizeof name, "%s.dat", stem);
    if (path_in(dat, dir, name, e))
        return -1;
    snprintf(name, sizeof name, "%s.png", stem);
    if (path_in(png, dir, name, e) || ts_atomic_open(&a, dat, e))
        return -1;
    fputs("# label a a_lo a_hi b b_lo b_hi a_bound (1: a is an \"up to\" bound, drawn as a "
          "marker) (", a.f);
    report_put_line(a.f, spec, strlen(spec));
    fputs(")\n", a.f);
    for (int i = 0; i < n; i++) {
        report_put_dat_string(a.f, b[i].label, sizeof b[i].label);
        fprintf(a.f, " %.6g %.6g %.6g %.6g %.6g %.6g %d\n", b[i].a, b[i].a_lo, b[i].a_hi,
                b[i].b, b[i].b_lo, b[i].b_hi, b[i].a_bound ? 1 : 0);
    }
    if (ts_atomic_commit(&a, e))
        return -1;
    return report_script("paper_bars", gp, sizeof gp, e) ||
                   report_gnuplot(gp, dat, png, spec, dir, e)
               ? -1
               : 0;
}

/* bars.png: every published speedup that ran next to tailsim's. */
static int write_bars(const paper_doc *d, const char *dir, int *drawn, ts_err *e)
{
    *drawn = 0;
    if (!d->n_rows)
        return 0;
    paper_bar *b = calloc(d->n_rows, sizeof *b);
    if (!b)
        return ts_errf(e, "out of memory");
    for (size_t i = 0; i < d->n_rows; i++) {
        const paper_row *r = &d->rows[i];
        if (!r->bar || !r->ran)
            continue;
        paper_bar *x = &b[(*drawn)++];
        snprintf(x->label, sizeof x->label, "%s", r->bar);
        x->a_bound = !(r->lo > 0); /* "up to": lo 0 */
        x->a = r->lo > 0 ? (r->lo + r->hi) / 2 : r->hi;
        x->a_lo = r->lo > 0 ? r->lo : 0;
        x->a_hi = r->hi;
        x->b = r->sim;
        x->b_lo = isnan(r->sim_lo) ? r->sim : r->sim_lo;
        x->b_hi = isnan(r->sim_hi) ? r->sim : r->sim_hi;
    }
    char spec[256];
    snprintf(spec, sizeof spec,
             "Speedups: published vs tailsim|paper (range as error bar)|tailsim (bootstrap 5-95%% "
             "as error bar)|%s|%s",
             paper_bars_colour[0].rgb, paper_bars_colour[1].rgb);
    int rc = *drawn ? draw_bars(b, *drawn, dir, "bars", spec, e) : 0;
    free(b);
    return rc;
}

/* speedup.png: each policy's step and rollout speedup over the first. */
static int write_speedups(const paper_doc *d, const char *dir, ts_err *e)
{
    char spec[256], ref[sizeof d->speedup_ref];
    spec_part(ref, sizeof ref, d->speedup_ref);
    snprintf(spec, sizeof spec, "Speedup over %s%s|RL step|rollout|%s|%s", ref,
             d->bootstrap ? " (error bars: bootstrap 5-95%)" : "", paper_speedup_colour[0].rgb,
             paper_speedup_colour[1].rgb);
    return d->n_speedups ? draw_bars(d->speedups, d->n_speedups, dir, "speedup", spec, e) : 0;
}

static int write_plot(const paper_plot *p, const char *dir, ts_err *e)
{
    char dat[PATHN], png[PATHN], gp[PATHN], stem[64], spec[512], kinds[PAPER_MAX_SERIES + 1];
    char ttl[sizeof p->title], xl[sizeof p->xlabel], yl[sizeof p->ylabel];
    ts_atomic a;
    snprintf(stem, sizeof stem, "%.*s.dat", (int)strcspn(p->file, "."), p->file);
    if (path_in(dat, dir, stem, e) || path_in(png, dir, p->file, e) || ts_atomic_open(&a, dat, e))
        return -1;
    for (int i = 0; i < p->ns; i++) {
        fputs(i ? "\n\n" : "", a.f);
        report_put_dat_string(a.f, p->s[i].name, sizeof p->s[i].name);
        fputc('\n', a.f);
        for (int k = 0; k < p->s[i].n; k++)
            fprintf(a.f, "%.8g %.8g\n", p->s[i].x[k], p->s[i].y[k]);
    }
    if (ts_atomic_commit(&a, e))
        return -1;
    for (int i = 0; i < p->ns; i++)
        kinds[i] = (char)('0' + (p->s[i].kind >= 0 && p->s[i].kind <= 2 ? p->s[i].kind : 0));
    kinds[p->ns] = 0;
    spec_part(ttl, sizeof ttl, p->title);
    spec_part(xl, sizeof xl, p->xlabel);
    spec_part(yl, sizeof yl, p->ylabel);
    snprintf(spec, sizeof spec, "%s|%s|%s|%d|%s", ttl, xl, yl, p->logx, kinds);
    return report_script("paper_xy", gp, sizeof gp, e) ||
                   report_gnuplot(gp, dat, png, spec, dir, e)
               ? -1
               : 0;
}

/* Sections of the comparison table, in order of first appearance. */
static int sections(const paper_doc *d, const char *out[], int max)
{
    int n = 0;
    for (size_t i = 0; i < d->n_rows; i++) {
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= !strcmp(out[k], d->rows[i].section);
        if (!seen && n < max)
            out[n++] = d->rows[i].section;
    }
    return n;
}

static int count_within(const paper_doc *d, int *ran)
{
    int w = 0;
    *ran = 0;
    for (size_t i = 0; i < d->n_rows; i++) {
        *ran += d->rows[i].ran;
        w += paper_row_within(&d->rows[i]);
    }
    return w;
}

static void mark(char *buf, size_t n, const paper_row *r)
{
    if (!r->ran)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%s", paper_row_within(r) ? "yes" : "no");
}

static const char *doc_title(const paper_doc *d)
{
    return d->title[0] ? d->title : "tailsim: the TLT and DCP papers reproduced";
}

/* Markdown text, a table cell's text and an image's alt text: every name
 * in index.md goes through one of these (report_put_md()). */
static void md(FILE *f, const char *s)
{
    report_put_md(f, s, SIZE_MAX, 0);
}

static void md_cell(FILE *f, const char *s)
{
    report_put_md(f, s, SIZE_MAX, REPORT_MD_CELL);
}

/* "![alt](url)" */
static void md_image(FILE *f, const char *alt, const char *url)
{
    fputs("![", f);
    report_put_md(f, alt, SIZE_MAX, REPORT_MD_LINK);
    fputs("](", f);
    report_put_url(f, url, SIZE_MAX);
    fputc(')', f);
}

static void md_header(FILE *f, const paper_doc *d)
{
    int ran, w = count_within(d, &ran);
    fputs("# ", f);
    md(f, doc_title(d));
    fputs("\n\n", f);
    if (d->meta[0]) {
        md(f, d->meta);
        fputs("\n\n", f);
    } else {
        fputs("tailsim ", f);
        md(f, d->version);
        fputs("; calibration: ", f);
        md(f, d->calibration);
        fprintf(f, "; seed: each scenario's own (%s); ", d->quick ? "quick run" : "full run");
        if (d->bootstrap)
            fprintf(f, "bootstrap: %d resamples of the prompts for the TLT and DAPO speedups.\n\n",
                    d->bootstrap);
        else
            fprintf(f, "no bootstrap.\n\n");
    }
    if (d->setup[0]) {
        fputs("**Setup:** ", f);
        md(f, d->setup);
        fputs("\n\n", f);
    }
    if (d->terminal) {
        fputs("## ", f);
        md(f, d->terminal_title ? d->terminal_title : "Terminal output");
        fputs("\n\n", f);
        report_put_fenced(f, d->terminal, "");
    }
    if (d->n_rows)
        fprintf(f, "%d of %d published numbers reproduced within tolerance (%d of %zu run); the "
                   "experiments took %.1f s.\n\n",
                w, (int)d->n_rows, ran, d->n_rows, d->wall_s);
}

/* The published-numbers table of d (nothing when d has no rows). */
static void md_published(FILE *f, const paper_doc *d)
{
    if (d->n_rows)
        fprintf(f, "## Published numbers\n\n"
                   "Difference: tailsim against the published value, 0 inside a published range "
                   "or under an \"up to\" bound.  tailsim's range in parentheses is the bootstrap "
                   "5-95%%.\n\n"
                   "| section | quantity | source | paper | tailsim | diff | tol | within |\n"
                   "|---|---|---|---:|---:|---:|---:|:---:|\n");
    for (size_t i = 0; i < d->n_rows; i++) {
        const paper_row *r = &d->rows[i];
        char sim[96], mk[8], diff[200];
        fmt_sim(sim, sizeof sim, r);
        mark(mk, sizeof mk, r);
        if (r->ran)
            snprintf(diff, sizeof diff, "%+.1f%%", paper_row_diff(r));
        else
            snprintf(diff, sizeof diff, "%s", r->why);
        fputs("| ", f);
        md_cell(f, r->section);
        fputs(" | ", f);
        md_cell(f, r->what);
        if (r->note[0]) {
            fputs(" (", f);
            md_cell(f, r->note);
            fputc(')', f);
        }
        fputs(" | ", f);
        md_cell(f, r->cite);
        fputs(" | ", f);
        md_cell(f, r->published);
        fputs(" | ", f);
        md_cell(f, sim);
        fputs(" | ", f);
        md_cell(f, diff);
        fprintf(f, " | %.0f%% | %s |\n", 100 * r->tol, mk);
    }
}

static int write_md(const paper_doc *d, const char *path, int bars, ts_err *e)
{
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    FILE *f = a.f;
    md_header(f, d);
    md_published(f, d);
    if (bars)
        fprintf(f, "\n![Speedups: published vs tailsim](bars.png)\n");
    for (int t = 0; t < d->n_tables; t++) {
        const paper_table *tb = &d->tables[t];
        fputs("\n## ", f);
        md(f, tb->title);
        fputs("\n\n", f);
        if (tb->note[0]) {
            md(f, tb->note);
            fputs("\n\n", f);
        }
        for (int r = 0; r < tb->nrow; r++) {
            fprintf(f, "|");
            for (int c = 0; c < tb->ncol; c++) {
                fputc(' ', f);
                report_put_md(f, tb->cell[r][c], PAPER_CELL, REPORT_MD_CELL);
                fputs(" |", f);
            }
            fprintf(f, "\n");
            if (r == 0) {
                fprintf(f, "|");
                for (int c = 0; c < tb->ncol; c++)
                    fprintf(f, "%s", c ? "---:|" : "---|");
                fprintf(f, "\n");
            }
        }
    }
    if (d->n_speedups) {
        char alt[sizeof d->speedup_ref + 40];
        snprintf(alt, sizeof alt, "Step and rollout speedup over %s", d->speedup_ref);
        fputc('\n', f);
        md_image(f, alt, "speedup.png");
        fputc('\n', f);
    }
    fprintf(f, "\n## Figures\n\n");
    for (int p = 0; p < d->n_plots; p++) {
        md_image(f, d->plots[p].title, d->plots[p].file);
        fputs("\n\n", f);
    }
    for (int i = 0; i < d->n_figs; i++) {
        fputs("**", f);
        md(f, d->figs[i].section);
        fputs("**: ", f);
        md(f, d->figs[i].caption);
        fputs("\n\n", f);
        md_image(f, d->figs[i].caption, d->figs[i].path);
        fputs("\n\n", f);
    }
    if (d->n_missing) {
        fprintf(f, "## Not reproduced here\n\n");
        for (int i = 0; i < d->n_missing; i++) {
            fputs("* ", f);
            md(f, d->missing[i]);
            fputc('\n', f);
        }
    }
    if (d->n_refs) {
        fprintf(f, "\n## References\n\n");
        for (int i = 0; i < d->n_refs; i++) {
            fputs("* ", f);
            md(f, d->refs[i]);
            fputc('\n', f);
        }
    }
    return ts_atomic_commit(&a, e);
}

static void html(FILE *f, const char *s)
{
    report_put_html(f, s, 0);
}

static const char css[] =
    "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1180px;"
    "margin:24px auto;padding:0 16px;color:#222;line-height:1.45}"
    "h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;"
    "padding-bottom:.2em}h3{margin-top:1.2em}"
    ".meta{color:#555;font-size:.92em}.summary{font-size:1.05em;background:#f4f7fb;"
    "border-left:4px solid #3b6fb6;padding:8px 12px}"
    "table{border-collapse:collapse;margin:10px 0;font-size:.9em}"
    "th,td{border:1px solid #d8d8d8;padding:4px 8px;vertical-align:top}"
    "th{background:#f0f0f0;text-align:left}td.n{text-align:right;white-space:nowrap}"
    "tr.sec td{background:#fafafa;font-weight:bold}"
    ".yes{color:#1e7b34;font-weight:bold}.no{color:#b03a2e;font-weight:bold}"
    ".cite{color:#555;font-size:.92em}figure{margin:14px 0}img{max-width:100%;"
    "border:1px solid #e4e4e4}figcaption{color:#444;font-size:.9em}"
    ".grid{display:grid;grid-template-columns:1fr 1fr;gap:10px}.grid figure{margin:0}"
    ".grid figure.wide{grid-column:1/-1}";

static void html_table(FILE *f, const paper_table *tb)
{
    fprintf(f, "<h3>");
    html(f, tb->title);
    fprintf(f, "</h3>\n");
    if (tb->note[0]) {
        fprintf(f, "<p>");
        html(f, tb->note);
        fprintf(f, "</p>\n");
    }
    fprintf(f, "<table>\n");
    for (int r = 0; r < tb->nrow; r++) {
        fprintf(f, "<tr>");
        for (int c = 0; c < tb->ncol; c++) {
            fprintf(f, r ? (c ? "<td class=n>" : "<td>") : "<th>");
            html(f, tb->cell[r][c]);
            fprintf(f, r ? "</td>" : "</th>");
        }
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</table>\n");
}

/* The published-numbers section: summary, then one table row per number. */
static void html_published(FILE *f, const paper_doc *d)
{
    int ran, w = count_within(d, &ran);
    fprintf(f, "<p class=summary><b>%d of %d</b> published numbers reproduced within tolerance "
               "(%d of %zu run).</p>\n",
            w, (int)d->n_rows, ran, d->n_rows);
    fprintf(f, "<h2>Published numbers</h2>\n<p>Difference: tailsim against the published value; "
               "0 inside a published range or under an &ldquo;up to&rdquo; bound. The range in "
               "parentheses is the bootstrap 5&ndash;95%%.</p>\n<table>\n<tr><th>quantity</th>"
               "<th>source</th><th>paper</th><th>tailsim</th><th>diff</th><th>tol</th>"
               "<th>within</th></tr>\n");
    const char *sec[32];
    int ns = sections(d, sec, 32);
    for (int s = 0; s < ns; s++) {
        fprintf(f, "<tr class=sec><td colspan=7>");
        html(f, sec[s]);
        fprintf(f, "</td></tr>\n");
        for (size_t i = 0; i < d->n_rows; i++) {
            const paper_row *r = &d->rows[i];
            if (strcmp(r->section, sec[s]))
                continue;
            char sim[96], mk[8];
            fmt_sim(sim, sizeof sim, r);
            mark(mk, sizeof mk, r);
            fprintf(f, "<tr><td>");
            html(f, r->what);
            if (r->note[0]) {
                fprintf(f, " <i>(");
                html(f, r->note);
                fprintf(f, ")</i>");
            }
            fprintf(f, "</td><td class=cite>");
            html(f, r->cite);
            fprintf(f, "</td><td class=n>");
            html(f, r->published);
            fprintf(f, "</td><td class=n>");
            html(f, sim);
            if (r->ran)
                fprintf(f, "</td><td class=n>%+.1f%%", paper_row_diff(r));
            else {
                fprintf(f, "</td><td>");
                html(f, r->why);
            }
            fprintf(f, "</td><td class=n>%.0f%%</td><td class=%s>%s</td></tr>\n", 100 * r->tol,
                    !r->ran ? "n" : paper_row_within(r) ? "yes" : "no", mk);
        }
    }
    fprintf(f, "</table>\n");
}

/* One figure: the image embedded (report_html_img()), a wide one across
 * the grid and linked to its file, and its caption (none when NULL).
 * Returns 0, or -1 naming the image. */
static int html_figure(FILE *f, const char *dir, const char *rel, const char *alt, int wide,
                       const char *caption, ts_err *e)
{
    fputs(wide ? "<figure class=wide>" : "<figure>", f);
    if (report_html_img(f, dir, rel, alt, wide ? REPORT_IMG_LINK : 0, e))
        return -1;
    if (caption) {
        fputs("<figcaption>", f);
        html(f, caption);
        fputs(wide ? " (click for the full-size image)" : "", f);
        fputs("</figcaption>", f);
    }
    fputs("</figure>\n", f);
    return 0;
}

/* The page's figures, from the speedup bars to the last section's: every
 * image embedded, the bar charts' captions naming the colours the script
 * was given (paper_bars_colour, paper_speedup_colour).  Returns 0, or -1
 * naming an image that cannot be read. */
static int html_figures(FILE *f, const paper_doc *d, const char *dir, int bars, ts_err *e)
{
    char cap[600];
    if (bars) {
        snprintf(cap, sizeof cap,
                 "Every published speedup (%s; its range as the error bar; an \u201cup to\u201d "
                 "bound as a %s marker on a whisker from 0, labelled \u201cup to\u201d, not a "
                 "bar) next to tailsim's (%s; the bootstrap 5\u201395%% range as the error bar).",
                 paper_bars_colour[0].name, paper_bars_colour[0].name,
                 paper_bars_colour[1].name);
        if (html_figure(f, dir, "bars.png", "speedup bars", 0, cap, e))
            return -1;
    }
    fprintf(f, "<h2>Results</h2>\n");
    for (int t = 0; t < d->n_tables; t++)
        html_table(f, &d->tables[t]);
    if (d->n_speedups) {
        snprintf(cap, sizeof cap, "RL-step (%s) and rollout (%s) speedup of each policy over %s%s.",
                 paper_speedup_colour[0].name, paper_speedup_colour[1].name, d->speedup_ref,
                 d->bootstrap ? "; error bars: the bootstrap 5\u201395% range" : "");
        if (html_figure(f, dir, "speedup.png", "speedup bars", 0, cap, e))
            return -1;
    }
    fprintf(f, "<h2>Figures</h2>\n<div class=grid>\n");
    for (int p = 0; p < d->n_plots; p++)
        if (html_figure(f, dir, d->plots[p].file, d->plots[p].title, 0, NULL, e))
            return -1;
    fprintf(f, "</div>\n");
    /* each section's figures side by side, two to a row (a wide one alone) */
    for (int i = 0; i < d->n_figs; i++) {
        if (!i || strcmp(d->figs[i - 1].section, d->figs[i].section)) {
            fprintf(f, "%s<h3>", i ? "</div>\n" : "");
            html(f, d->figs[i].section);
            fprintf(f, "</h3>\n<div class=grid>\n");
        }
        if (html_figure(f, dir, d->figs[i].path, "", d->figs[i].wide, d->figs[i].caption, e))
            return -1;
    }
    if (d->n_figs)
        fprintf(f, "</div>\n");
    return 0;
}

static int write_html(const paper_doc *d, const char *dir, const char *path, int bars,
                      ts_err *e)
{
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    FILE *f = a.f;
    fprintf(f, "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>\n<title>");
    html(f, doc_title(d));
    fprintf(f, "</title>\n<style>%s</style></head><body>\n<h1>", css);
    html(f, doc_title(d));
    fprintf(f, "</h1>\n<p class=meta>");
    if (d->meta[0]) {
        html(f, d->meta);
    } else {
        fprintf(f, "tailsim ");
        html(f, d->version);
        fprintf(f, " &middot; calibration: ");
        html(f, d->calibration);
        fprintf(f, " &middot; seed: each scenario's own &middot; %s &middot; ",
                d->quick ? "quick run" : "full run");
        if (d->bootstrap)
            fprintf(f, "bootstrap: %d resamples of the prompts", d->bootstrap);
        else
            fprintf(f, "no bootstrap");
        fprintf(f, " &middot; experiments took %.1f s", d->wall_s);
    }
    fprintf(f, "</p>\n");
    if (d->setup[0]) {
        fprintf(f, "<p class=meta><b>Setup:</b> ");
        html(f, d->setup);
        fprintf(f, "</p>\n");
    }
    if (d->terminal) {
        fprintf(f, "<h2>");
        html(f, d->terminal_title ? d->terminal_title : "Terminal output");
        fprintf(f, "</h2>\n<pre>");
        html(f, d->terminal);
        fprintf(f, "</pre>\n");
    }
    if (d->n_rows)
        html_published(f, d);
    if (html_figures(f, d, dir, bars, e)) {
        ts_atomic_abort(&a);
        return -1;
    }
    if (d->n_missing) {
        fprintf(f, "<h2>Not reproduced here</h2>\n<ul>\n");
        for (int i = 0; i < d->n_missing; i++) {
            fprintf(f, "<li>");
            html(f, d->missing[i]);
            fprintf(f, "</li>\n");
        }
        fprintf(f, "</ul>\n");
    }
    if (d->n_refs) {
        fprintf(f, "<h2>References</h2>\n<ul>\n");
        for (int i = 0; i < d->n_refs; i++) {
            fprintf(f, "<li>");
            html(f, d->refs[i]);
            fprintf(f, "</li>\n");
        }
        fprintf(f, "</ul>\n");
    }
    fprintf(f, "</body></html>\n");
    return ts_atomic_commit(&a, e);
}

int paper_report_write(const paper_doc *d, const char *dir, ts_err *e)
{
    char path[PATHN];
    int bars;
    if (write_bars(d, dir, &bars, e))
        return -1;
    for (int p = 0; p < d->n_plots; p++)
        if (write_plot(&d->plots[p], dir, e))
            return -1;
    if (write_speedups(d, dir, e))
        return -1;
    if (path_in(path, dir, "index.md", e) || write_md(d, path, bars, e))
        return -1;
    if (path_in(path, dir, "index.html", e) || write_html(d, dir, path, bars, e))
        return -1;
    return 0;
}

int paper_report_write_html(const paper_doc *d, const char *path, ts_err *e)
{
    char dir[PATHN];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= (int)sizeof dir)
        return ts_errf(e, "%s: output path too long", path);
    else if (!dir[0])
        snprintf(dir, sizeof dir, "/");
    return write_html(d, dir, path, 0, e);
}
