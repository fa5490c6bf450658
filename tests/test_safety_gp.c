/*
 * Nothing reaches gnuplot as a command, and no name breaks a report file
 * (issue 21, items 1 and 9).
 *
 * gnuplot runs a data or script name that starts with '<' as a shell
 * command and pipes its output into one named '|cmd'; "$name" is a
 * datablock.  The CLI cases run every command that draws (compare -o, plan
 * -o, report of an RL step, of a DCP run and of several runs, paper -o) in a
 * fresh directory with such an output directory ("<touch PWNED;x",
 * "|touch PWNED;x", "$x") and, where the command takes one, a scenario file
 * named so (the name goes into titles and .dat files); each must succeed
 * with its files under the literal directory name, and no PWNED may appear.
 * Nor may a reports/gantt.gp planted in the current directory run when the
 * data root (TAILSIM_DATA) lacks the script: report fails naming it.
 *
 * The name cases give report_write, plan_plot, dcp_report_write and
 * paper_report_write (and, through the CLI, compare -o, report and plan -o)
 * names holding a newline, a carriage return, '"', '|', "[a](b)", "<script>"
 * and a Markdown fence: no line of a written file may start inside a name
 * (outside a fenced block), every .dat data line keeps its quotes paired,
 * every Markdown table row keeps its header's cells, no name opens HTML or
 * a link, an image tag keeps its two attributes on one line, and a link
 * target is one percent-encoded URL.  Every figure must still be drawn.
 * Tests that draw skip without gnuplot.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reports/dcp_report.h"
#include "reports/paper_report.h"
#include "reports/plan_report.h"
#include "reports/report.h"
#include "results/result.h"
#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "safety-gp");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(safety_gp, .init = setup, .fini = teardown, .timeout = 120);

/* ---- item 1: no command through gnuplot --------------------------------- */

/* The planted names: each would run `touch PWNED` (or read a datablock)
 * if it reached gnuplot as it is. */
static const char *const forms[] = {"<touch PWNED;x", "|touch PWNED;x", "$x"};

typedef struct gp_case {
    const char *name;
    int nforms;        /* the first nforms of forms[] */
    const char *cmd;   /* sh -c text: "$T" tailsim, "$R" the repository, "$O" the form */
    const char *files[4]; /* what the command must write under out */
} gp_case;

#define SMALL "--set trace.prompts=8"
#define QWEN "\"$R/scenarios/qwen7b-64gpu.ini\""
#define DCPS "\"$R/scenarios/dcp-llama8b-32xh200.ini\""

static const gp_case gp_cases[] = {
    {"compare", 3, "cp " QWEN " \"./$O.ini\" && \"$T\" compare \"./$O.ini\" --policies verl,tlt "
     SMALL " -o \"$O\"", {"index.md", "speedup.png", "compare-tlt/gantt.png", "specdec_depth.png"}},
    {"plan", 3, "cp " QWEN " \"./$O.ini\" && \"$T\" plan \"./$O.ini\" --gpus 64 --tp 4 " SMALL
     " -o \"$O\"", {"plan.dat", "plan_front.png"}},
    {"report", 3, "cp " QWEN " \"./$O.ini\" && \"$T\" rlstep \"./$O.ini\" " SMALL " --db r.db && "
     "\"$T\" report --db r.db -o \"$O\"", {"report.md", "gantt.png", "cdf.png"}},
    {"report_dcp", 3, "cp " DCPS " \"./$O.ini\" && \"$T\" dcp \"./$O.ini\" --scale "
     "--set dcp.seqs=512 --db r.db && \"$T\" report --db r.db -o \"$O\"",
     {"dcp.md", "dcp_imbalance.png", "gantt.png"}},
    {"report_runs", 3, "cp " QWEN " \"./$O.ini\" && \"$T\" rlstep \"./$O.ini\" " SMALL
     " --db r.db && \"$T\" rlstep qwen7b-64gpu " SMALL " --policy tlt --db r.db && "
     "\"$T\" report --db r.db --run 1,2 -o \"$O\"", {"index.md", "speedup.png", "run-1/gantt.png"}},
    /* the paper report (fixed scenarios) is the slowest: the two command forms */
    {"paper", 2, "\"$T\" paper --quick --bootstrap 0 -o \"$O\"",
     {"index.md", "index.html", "specdec_depth.png"}},
};

#define N_GP_CASES (sizeof gp_cases / sizeof gp_cases[0])

/* Criterion copies the parameters into each test's process: indices, not
 * pointers (the strings they point to would move). */
ParameterizedTestParameters(safety_gp, nothing_runs_through_gnuplot)
{
    static int idx[N_GP_CASES];
    for (size_t i = 0; i < N_GP_CASES; i++)
        idx[i] = (int)i;
    return cr_make_param_array(int, idx, N_GP_CASES);
}

ParameterizedTest(int *ci, safety_gp, nothing_runs_through_gnuplot)
{
    const gp_case *c = &gp_cases[*ci];
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char root[1024], cmd[8192], path[1024];
    cr_assert_not_null(getcwd(root, sizeof root));
    struct stat st;
    for (int k = 0; k < c->nforms; k++) {
        /* a fresh directory per form: the command's own files only */
        char sub[300];
        snprintf(sub, sizeof sub, "%s/%d", dir, k);
        cr_assert_eq(mkdir(sub, 0700), 0);
        /* the form goes through the environment, so the shell running the
         * command line never interprets it; gnuplot is what is tested */
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && T='%s/build/tailsim' R='%s' O='%s' sh -c '%s' >out.txt 2>err.txt",
                 sub, root, root, forms[k], c->cmd);
        int rc = system(cmd);
        snprintf(path, sizeof path, "%s/PWNED", sub);
        cr_assert_neq(stat(path, &st), 0, "%s with '%s': gnuplot ran the planted command",
                      c->name, forms[k]);
        snprintf(path, sizeof path, "%s/err.txt", sub);
        FILE *f = fopen(path, "r");
        char err[512] = "";
        if (f) {
            size_t n = fread(err, 1, sizeof err - 1, f);
            err[n] = 0;
            fclose(f);
        }
        cr_assert_eq(rc, 0, "%s with '%s' failed: %s", c->name, forms[k], err);
        for (int i = 0; i < 4 && c->files[i]; i++) {
            snprintf(path, sizeof path, "%s/%s/%s", sub, forms[k], c->files[i]);
            cr_assert(stat(path, &st) == 0 && st.st_size > 0, "%s with '%s': no %s", c->name,
                      forms[k], path);
        }
    }
}

/* ---- item 9: no name breaks a report file ------------------------------- */

/* A name that would start lines of its own ("\nINJECT", "\rINJECT": Markdown
 * ends a line at either), end a table cell, a gnuplot string, an HTML
 * attribute, a link text or target, open inline HTML and split a script's
 * "title|xlabel|..." argument. */
#define PAY "evil\nINJECT | c | \"q\" \" onerror=\"x [a](b) <script>t</script> \\| z\rINJECT"
#define PAY_SHORT "p\nINJECT|\"<script>" /* for the 32-byte policy field */
#define PAY_NAME "#s\nINJECT \"|x"  /* a strategy name (a 48-byte metric key) */

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

/* The '|' of a Markdown line that end cells (not after an odd run of '\'). */
static int md_pipes(const char *line, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (line[i] == '\\') {
            i++;
            continue;
        }
        k += line[i] == '|';
    }
    return k;
}

/* A line of only backticks, at least three: a Markdown fence; its length. */
static size_t fence_len(const char *line, size_t n)
{
    size_t k = 0;
    while (k < n && line[k] == '`')
        k++;
    return k >= 3 && k == n ? k : 0;
}

static void check_md(const char *path, const char *s)
{
    size_t fence = 0;
    int head = -1; /* pipes of the current table's header, -1: no table */
    for (const char *l = s; *l;) {
        size_t n = strcspn(l, "\r\n");
        size_t fl = fence_len(l, n);
        if (fence) {
            if (fl >= fence)
                fence = 0;
        } else if (fl) {
            fence = fl;
        } else {
            cr_assert(strncmp(l, "INJECT", 6), "%s: a name starts a line: %.60s", path, l);
            if (n && l[0] == '|') {
                int k = md_pipes(l, n);
                if (head < 0)
                    head = k;
                cr_assert_eq(k, head, "%s: a name adds cells to a table row: %.*s", path,
                             (int)n, l);
            } else {
                head = -1;
            }
            /* a name never opens inline HTML or a link of its own */
            for (size_t i = 0; i < n; i++) {
                if (l[i] == '<' && (!i || l[i - 1] != '\\'))
                    cr_assert(strncmp(l + i, "<script", 7) && strncmp(l + i, "</script", 8),
                              "%s: a name opens HTML: %.*s", path, (int)n, l);
                if (l[i] == ']' && i + 1 < n && l[i + 1] == '(' && (!i || l[i - 1] != '\\')) {
                    /* an image or link: its target is one percent-encoded URL */
                    size_t t = i + 2;
                    while (t < n && l[t] != ')') {
                        cr_assert(strchr("-._~/+,=%", l[t]) ||
                                      (l[t] >= '0' && l[t] <= '9') ||
                                      ((l[t] | 0x20) >= 'a' && (l[t] | 0x20) <= 'z'),
                                  "%s: a link target holds '%c': %.*s", path, l[t], (int)n, l);
                        t++;
                    }
                    cr_assert(strncmp(l + i + 1, "(b)", 3), "%s: a name made a link: %.*s", path,
                              (int)n, l);
                }
            }
        }
        l += n;
        l += *l == '\r' ? 1 : 0; /* "\r\n" is one line end, as Markdown reads it */
        l += *l == '\n' ? 1 : 0;
    }
}

static void check_dat(const char *path, const char *s)
{
    for (const char *l = s; *l;) {
        size_t n = strcspn(l, "\r\n"), q = 0;
        cr_assert(strncmp(l, "INJECT", 6), "%s: a name starts a line: %.60s", path, l);
        for (size_t i = 0; i < n; i++)
            q += l[i] == '"';
        cr_assert(l[0] == '#' || q % 2 == 0, "%s: a name leaves a string open: %.*s", path,
                  (int)n, l);
        l += n + (l[n] != 0);
    }
}

/* Writes dir/name as the smallest file the page writer embeds: a PNG
 * signature and a few bytes. */
static void plant_png(const char *dir, const char *name)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "%s", p);
    cr_assert_eq(fwrite("\x89PNG\r\n\x1a\nIHDR", 1, 12, f), 12);
    cr_assert_eq(fclose(f), 0);
}

static void check_html(const char *path, const char *s)
{
    cr_assert_null(strstr(s, "<script"), "%s: a name opens HTML", path);
    /* every image tag is exactly src="..." alt="..." */
    for (const char *t = strstr(s, "<img "); t; t = strstr(t + 1, "<img ")) {
        size_t n = strcspn(t, ">"), q = 0;
        for (size_t i = 0; i < n; i++)
            q += t[i] == '"';
        cr_assert_eq(q, 4, "%s: a name adds attributes: %.*s", path, (int)n, t);
        cr_assert_eq(strcspn(t, "\n"), n + strcspn(t + n, "\n"), "%s: a tag over lines: %.*s",
                     path, (int)n, t);
        cr_assert(!strncmp(t, "<img src=\"data:image/png;base64,", 32), "%.*s", (int)n, t);
        for (const char *u = t + 32; *u != '"'; u++)
            cr_assert(strchr("+/=", *u) || (*u >= '0' && *u <= '9') ||
                          ((*u | 0x20) >= 'a' && (*u | 0x20) <= 'z'),
                      "%s: an image source holds '%c': %.*s", path, *u, (int)n, t);
    }
    /* a link to a full-size image names it percent-encoded */
    for (const char *t = strstr(s, "<a href=\""); t; t = strstr(t + 1, "<a href=\""))
        for (const char *u = t + 9; *u != '"'; u++)
            cr_assert(strchr("-._~/+,=%", *u) || (*u >= '0' && *u <= '9') ||
                          ((*u | 0x20) >= 'a' && (*u | 0x20) <= 'z'),
                      "%s: a link holds '%c': %.60s", path, *u, t);
}

/* Checks every .dat, .md and .html file under root; returns how many. */
static int check_tree(const char *root)
{
    DIR *d = opendir(root);
    cr_assert_not_null(d, "cannot list %s", root);
    struct dirent *de;
    int n = 0;
    char p[1024];
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", root, de->d_name);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            n += check_tree(p);
            continue;
        }
        int md = ends_with(p, ".md"), dat = ends_with(p, ".dat"), html = ends_with(p, ".html");
        if (!md && !dat && !html)
            continue;
        char *s = slurp_file(p);
        if (md)
            check_md(p, s);
        else if (dat)
            check_dat(p, s);
        else
            check_html(p, s);
        free(s);
        n++;
    }
    closedir(d);
    return n;
}

static void assert_file(const char *d, const char *name)
{
    char p[1024];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", d, name);
    cr_assert(stat(p, &st) == 0 && st.st_size > 0, "no %s", p);
}

/* A small RL step under the planted names. */
static run_record *step_record(void)
{
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    r->id = 7;
    run_set_identity(r, "rlstep", PAY, PAY, 1, 4, 2, 2);
    run_set_policy(r, PAY_SHORT);
    for (int g = 0; g < 4; g++) {
        cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_BUSY, 0, 10 + g), 0);
        cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_IDLE, 10 + g, 14), 0);
    }
    for (int i = 0; i < 16; i++)
        cr_assert_eq(run_add_response(r, i % 2, 100, 50 + 40 * i, 1.0 + i), 0);
    cr_assert_eq(run_add_metric(r, "step_s", 14), 0);
    cr_assert_eq(run_add_metric(r, PAY_NAME, 1), 0);
    return r;
}

/* A DCP run whose strategies (the metric keys) carry the planted name. */
static run_record *dcp_record(void)
{
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    r->id = 8;
    run_set_identity(r, "dcp", PAY, "", 1, 8, 1, 1);
    const char *names[] = {"bucket", PAY_NAME};
    const int gpus[] = {8, 16, 32, 64, 128};
    char key[96];
    for (int i = 0; i < 2; i++) {
        snprintf(key, sizeof key, "%s.steps", names[i]);
        cr_assert_eq(run_add_metric(r, key, 3), 0);
        for (int k = 0; k < 5; k++) {
            snprintf(key, sizeof key, "g%d.%s.imbalance", gpus[k], names[i]);
            cr_assert_eq(run_add_metric(r, key, 0.05 * (i + 1) + 0.01 * k), 0);
        }
    }
    return r;
}

Test(safety_gp, names_stay_in_place_in_every_writer)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char d[400];
    ts_err e = {""};

    /* report_write: gantt.dat, cdf.dat, report.md */
    run_record *r = step_record();
    snprintf(d, sizeof d, "%s/run", dir);
    cr_assert_eq(report_write(r, d, &e), 0, "%s", e.msg);
    assert_file(d, "gantt.png");
    assert_file(d, "cdf.png");

    /* dcp_report_write: dcp.md, dcp_imbalance.dat (a strategy per block) */
    run_record *rd = dcp_record();
    snprintf(d, sizeof d, "%s/dcp", dir);
    cr_assert_eq(report_mkdir_p(d, &e), 0, "%s", e.msg);
    cr_assert_eq(dcp_report_write(rd, d, &e), 0, "%s", e.msg);
    assert_file(d, "dcp_imbalance.png");
    char p[1024];
    snprintf(p, sizeof p, "%s/dcp_imbalance.dat", d);
    char *dat = slurp_file(p);
    cr_assert(strstr(dat, "\n_s_INJECT__|x imbalance_percent\n"), "%s", dat);
    free(dat);

    /* plan_plot: labels as gnuplot strings */
    plan_point pt[2] = {{0}};
    snprintf(pt[0].label, sizeof pt[0].label, "%s", PAY);
    snprintf(pt[1].label, sizeof pt[1].label, "tlt %s", PAY_SHORT);
    pt[0].gpus = 8, pt[0].step_s = 20, pt[0].gpu_h = plan_gpu_hours(8, 20);
    pt[1].gpus = 16, pt[1].step_s = 12, pt[1].gpu_h = plan_gpu_hours(16, 12), pt[1].config = 1;
    plan_pareto(pt, 2);
    snprintf(d, sizeof d, "%s/plan", dir);
    cr_assert_eq(plan_plot(pt, 2, 15, plan_cheapest(pt, 2, 15), d, PAY, &e), 0, "%s", e.msg);
    assert_file(d, "plan_front.png");

    /* paper_report_write: every text of the document */
    paper_doc *doc = calloc(1, sizeof *doc);
    cr_assert_not_null(doc);
    snprintf(doc->title, sizeof doc->title, "%s", PAY);
    snprintf(doc->setup, sizeof doc->setup, "%s", PAY);
    snprintf(doc->version, sizeof doc->version, "%s", PAY_SHORT);
    snprintf(doc->calibration, sizeof doc->calibration, "%s", PAY);
    doc->terminal = "table\n```\nINJECT from the terminal\n```\n" PAY "\n";
    paper_row row = {PAY, PAY, PAY, PAY, 1, 1, 0.1, "x", PAY, PAY_SHORT, 1, 1.05, NAN, NAN, ""};
    doc->rows = &row;
    doc->n_rows = 1;
    paper_table *t = paper_doc_table(doc, PAY, 2, 2, &e);
    cr_assert_not_null(t, "%s", e.msg);
    snprintf(t->note, sizeof t->note, "%s", PAY);
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < 2; c++)
            snprintf(t->cell[i][c], PAPER_CELL, "%.40s", PAY);
    paper_plot *pl = &doc->plots[doc->n_plots++];
    snprintf(pl->file, sizeof pl->file, "names.png");
    snprintf(pl->title, sizeof pl->title, "%s", PAY);
    snprintf(pl->xlabel, sizeof pl->xlabel, "%.40s", PAY);
    snprintf(pl->ylabel, sizeof pl->ylabel, "%.40s", PAY);
    pl->ns = 1;
    snprintf(pl->s[0].name, sizeof pl->s[0].name, "%.40s", PAY);
    pl->s[0].n = 2;
    pl->s[0].x[0] = 1, pl->s[0].y[0] = 1, pl->s[0].x[1] = 2, pl->s[0].y[1] = 3;
    cr_assert_eq(paper_doc_fig(doc, PAY, "a b)(x\".png", PAY, &e), 0, "%s", e.msg);
    doc->n_speedups = 1;
    snprintf(doc->speedups[0].label, sizeof doc->speedups[0].label, "%.40s", PAY);
    doc->speedups[0].a = doc->speedups[0].a_lo = doc->speedups[0].a_hi = 1.2;
    doc->speedups[0].b = doc->speedups[0].b_lo = doc->speedups[0].b_hi = 1.1;
    snprintf(doc->speedup_ref, sizeof doc->speedup_ref, "%.40s", PAY);
    snprintf(doc->missing[doc->n_missing++], sizeof doc->missing[0], "%s", PAY);
    doc->refs[doc->n_refs++] = PAY;
    snprintf(d, sizeof d, "%s/paper", dir);
    cr_assert_eq(report_mkdir_p(d, &e), 0, "%s", e.msg);
    plant_png(d, "a b)(x\".png"); /* the figure the page embeds */
    cr_assert_eq(paper_report_write(doc, d, &e), 0, "%s", e.msg);
    assert_file(d, "bars.png");
    assert_file(d, "speedup.png");
    assert_file(d, "names.png");
    /* and once more with a meta line of its own */
    snprintf(doc->meta, sizeof doc->meta, "%s", PAY);
    snprintf(d, sizeof d, "%s/paper-meta", dir);
    cr_assert_eq(report_mkdir_p(d, &e), 0, "%s", e.msg);
    plant_png(d, "a b)(x\".png");
    cr_assert_eq(paper_report_write(doc, d, &e), 0, "%s", e.msg);

    cr_assert_geq(check_tree(dir), 14, "fewer files written than expected");
    paper_doc_free(doc);
    free(doc);
    run_record_free(r);
    run_record_free(rd);
}

/* The same through the CLI: a scenario file and a trace file named with a
 * newline, quotes, '|' and a link, in compare -o's report, the stored run's
 * report and plan -o's plan.dat (the trace file's path is in its labels). */
Test(safety_gp, names_stay_in_place_through_the_cli)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char root[1024], cmd[4096], p[1200];
    cr_assert_not_null(getcwd(root, sizeof root));
    snprintf(p, sizeof p, "%s/scenarios/qwen7b-64gpu.ini", root);
    char *ini = slurp_file(p);
    const char *name = "n\nINJECT \"q\" | [a](b) <script>\rINJECT";
    snprintf(p, sizeof p, "%s/%s.ini", dir, name);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(ini, f);
    cr_assert_eq(fclose(f), 0);
    free(ini);
    cr_assert_eq(setenv("S", name, 1), 0);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && T='%s/build/tailsim' && "
             "\"$T\" compare \"./$S.ini\" --policies verl,tlt " SMALL " -o cmp && "
             "\"$T\" rlstep \"./$S.ini\" " SMALL " --db r.db && \"$T\" report --db r.db -o rep && "
             "\"$T\" trace gen --dist lognormal --prompts 8 --group 8 --seed 1 -o t.csv && "
             "\"$T\" trace gen --dist lognormal --prompts 8 --group 8 --seed 2 -o \"$S.csv\" && "
             "\"$T\" plan qwen7b-64gpu --gpus 64 --tp 4 "
             "--vary \"trace.file=$PWD/t.csv,$PWD/$S.csv\" -o plan",
             dir, root);
    /* one subshell for the whole line, so all its output goes to the files */
    char full[4800];
    snprintf(full, sizeof full, "(%s) >'%s/out.txt' 2>'%s/err.txt'", cmd, dir, dir);
    int rc = system(full);
    snprintf(p, sizeof p, "%s/err.txt", dir);
    char *err = slurp_file(p);
    cr_assert_eq(rc, 0, "%s", err);
    free(err);
    /* the terminal tables too: compare's header, plan's configuration
     * labels (a --vary value) stay on their line */
    snprintf(p, sizeof p, "%s/out.txt", dir);
    char *out = slurp_file(p);
    cr_assert(strstr(out, "INJECT 'q'") || strstr(out, "INJECT \"q\""), "%s", out);
    cr_assert_null(strstr(out, "\nINJECT"), "a name started a line of its own:\n%s", out);
    cr_assert_null(strchr(out, '\r'), "a carriage return reached the terminal:\n%s", out);
    free(out);
    char d[400];
    snprintf(d, sizeof d, "%s/plan", dir);
    assert_file(d, "plan_front.png");
    snprintf(p, sizeof p, "%s/plan.dat", d);
    char *dat = slurp_file(p);
    cr_assert(strstr(dat, "INJECT 'q' | [a](b) <script> INJECT.csv\" 0\n"), "%s", dat);
    free(dat);
    snprintf(d, sizeof d, "%s/cmp", dir);
    cr_assert_geq(check_tree(d), 7);
    snprintf(d, sizeof d, "%s/rep", dir);
    cr_assert_geq(check_tree(d), 3);
    snprintf(d, sizeof d, "%s/plan", dir);
    cr_assert_geq(check_tree(d), 1);
}

/* A script is code: with a data root that lacks reports/ (TAILSIM_DATA
 * elsewhere), tailsim report fails naming the script rather than run a
 * reports/gantt.gp planted in the current directory. */
Test(safety_gp, no_script_from_the_current_directory)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char root[1024], cmd[4096], p[1200];
    cr_assert_not_null(getcwd(root, sizeof root));
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir -p reports data && "
             "printf 'system(\"touch PWNED\")\\n' > reports/gantt.gp && cp reports/gantt.gp "
             "reports/cdf.gp && '%s/build/tailsim' rlstep qwen7b-64gpu " SMALL " --db r.db "
             ">/dev/null 2>&1 && TAILSIM_DATA='%s/data' '%s/build/tailsim' report --db r.db "
             "-o out >/dev/null 2>err.txt",
             dir, root, dir, root);
    int rc = system(cmd);
    struct stat st;
    snprintf(p, sizeof p, "%s/PWNED", dir);
    cr_assert_neq(stat(p, &st), 0, "tailsim ran a script from the current directory");
    cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "exit %d", rc);
    snprintf(p, sizeof p, "%s/err.txt", dir);
    char *err = slurp_file(p);
    cr_assert(strstr(err, "/data/reports/gantt.gp") && strstr(err, "cannot read"), "%s", err);
    free(err);
    snprintf(p, sizeof p, "%s/out/gantt.png", dir);
    cr_assert_neq(stat(p, &st), 0, "a chart without its script");
}
