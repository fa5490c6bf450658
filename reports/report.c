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
 * gantt.dat names each interval's phase and state after the integers that
 * gantt.gp colours by.
 * Scripts are found under ts_data_root()/reports/ only, never in the current
 * directory (report_script()), and run as `gnuplot -d -c SCRIPT DAT PNG
 * TITLE` through ts_spawn (posix_spawnp) with an argv (no shell); gnuplot's
 * stderr goes to a temporary log whose last line becomes the error message
 * on failure.
 * gnuplot itself reads some names as more than a file: a script or data name
 * that starts with '<' runs the rest as a shell command, an output name that
 * starts with '|' pipes into one, and "-", "+", "++", "$name", "~/" and ""
 * are the terminal, pseudo-files, a datablock, the home directory and the
 * previous file.  So every path reaches gnuplot starting with '/' or "./"
 * (gp_path()), which gnuplot only opens; the title is a string the scripts
 * never evaluate (no eval, load, system or @macro on an argument).
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
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "reports/csv_export.h"
#include "reports/paper_report.h"
#include "reports/perfetto.h"

#define PATH_CAP 4096
/* printf arguments for a fixed-size char field that may fill its array. */
#define FIELD(a) (int)sizeof(a), (a)

/* 1 for the bytes no name may write as they are: 0x01-0x1f and 0x7f. */
static int is_ctl(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

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

/* Nearest-rank percentile of n sorted values. */
static int32_t pct(const int32_t *v, size_t n, double p)
{
    size_t k = (size_t)ceil(p * (double)n);
    return v[k ? k - 1 : 0];
}

/* What ran, for titles: "rlstep tlt", or the command alone without a
 * policy. */
static const char *run_what(const run_record *r, char *buf, size_t n)
{
    snprintf(buf, n, "%.*s%s%.*s", FIELD(r->command), r->policy[0] ? " " : "", FIELD(r->policy));
    return buf;
}

/* "run ID (what, scenario)" in a .dat file's first comment line. */
static void put_run(FILE *f, const run_record *r)
{
    char what[80];
    fprintf(f, "run %lld (", (long long)r->id);
    report_put_line(f, run_what(r, what, sizeof what), sizeof what);
    fputs(", ", f);
    report_put_line(f, r->scenario, sizeof r->scenario);
    fputc(')', f);
}

static int write_gantt_dat(const run_record *r, const char *path, ts_err *e)
{
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    FILE *f = a.f;
    fputs("# tailsim GPU timeline, ", f);
    put_run(f, r);
    fputc('\n', f);
    fprintf(f, "# block 0: gpu phase state t0_s t1_s phase_name state_name   (phase and state "
               "as integers for gantt.gp, then as names; state 0 busy, 1 idle, 2 train)\n");
    for (size_t i = 0; i < r->n_tl; i++) {
        const tl_interval *t = &r->tl[i];
        fprintf(f, "%d %d %d %.9g %.9g %s %s\n", t->gpu, t->phase, t->state, t->t0, t->t1,
                tl_phase_name[t->phase], tl_state_name[t->state]);
    }
    /* the phases of the first step (all of a one-step run) */
    double end = r->n_steps > 1 ? r->step_t0[1] : INFINITY;
    fprintf(f, "\n\n# block 1: phase name t_start_s t_end_s%s\n",
            r->n_steps > 1 ? " (the first RL step; then -1 \"step k\" t t: where step k starts)"
                           : "");
    for (int p = 0; p < PH_COUNT; p++) {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < r->n_tl; i++) {
            if (r->tl[i].phase != p || r->tl[i].t0 >= end)
                continue;
            lo = fmin(lo, r->tl[i].t0);
            hi = fmax(hi, r->tl[i].t1);
        }
        if (lo <= hi)
            fprintf(f, "%d %s %.9g %.9g\n", p, tl_phase_name[p], lo, hi);
    }
    /* then the start of every later step, in the same columns (phase -1) */
    for (size_t k = 1; k < r->n_steps; k++)
        fprintf(f, "-1 \"step %zu\" %.9g %.9g\n", k + 1, r->step_t0[k], r->step_t0[k]);
    return ts_atomic_commit(&a, e);
}

static int write_cdf_dat(const run_record *r, const int32_t *len, size_t n,
                         const char *path, ts_err *e)
{
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    FILE *f = a.f;
    fputs("# tailsim response-length CDF, ", f);
    put_run(f, r);
    fprintf(f, ", %zu responses\n", n);
    fprintf(f, "# block 0: length_tokens fraction_le\n");
    if (n)
        fprintf(f, "%d 0\n", len[0]);
    for (size_t i = 0; i < n; i++)
        if (i + 1 == n || len[i + 1] != len[i])
            fprintf(f, "%d %.9g\n", len[i], (double)(i + 1) / (double)n);
    fprintf(f, "\n\n# block 1: label length_tokens fraction\n");
    if (n) {
        static const double ps[] = {0.5, 0.9, 0.99};
        static const char *const names[] = {"p50", "p90", "p99"};
        for (int i = 0; i < 3; i++)
            fprintf(f, "%s %d %g\n", names[i], pct(len, n, ps[i]), ps[i]);
        fprintf(f, "max %d 1\n", len[n - 1]);
    }
    return ts_atomic_commit(&a, e);
}

/* The last non-empty line of a small log file, into buf ("" if none). */
static void last_line(const char *path, char *buf, size_t cap)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (line[strspn(line, " \t^")])
            snprintf(buf, cap, "%s", line + strspn(line, " \t"));
    }
    fclose(f);
}

int report_can_draw(const char *dir, ts_err *e)
{
    const char *path = getenv("PATH");
    char buf[PATH_CAP], exe[PATH_CAP + 16];
    int found = 0;
    snprintf(buf, sizeof buf, "%s", path ? path : "");
    for (char *p = buf, *end; !found && p; p = end ? end + 1 : NULL) {
        if ((end = strchr(p, ':')))
            *end = 0;
        snprintf(exe, sizeof exe, "%s/gnuplot", *p ? p : ".");
        found = access(exe, X_OK) == 0;
    }
    if (!found)
        return ts_errf(e, "gnuplot not found on PATH (install gnuplot to draw reports)");
    if (report_mkdir_p(dir, e))
        return -1;
    if (access(dir, W_OK | X_OK) != 0)
        return ts_errf(e, "%s: cannot write there: %s", dir, strerror(errno));
    return 0;
}

int report_script(const char *name, char *buf, size_t cap, ts_err *e)
{
    if (snprintf(buf, cap, "%s/reports/%s.gp", ts_data_root(), name) >= (int)cap)
        return ts_errf(e, "%s: data directory path too long", ts_data_root());
    if (access(buf, R_OK) != 0)
        return ts_errf(e, "%s: cannot read the gnuplot script: %s", buf, strerror(errno));
    return 0;
}

/* Writes path into buf (cap bytes) as gnuplot may be given it: unchanged
 * when absolute, else with "./" in front, so that no leading character
 * ('<', '|', '-', '+', '$', '~') makes gnuplot run a command or read
 * anything but that file.  Returns 0, or -1 when empty or too long. */
static int gp_path(char *buf, size_t cap, const char *path, ts_err *e)
{
    if (!path[0])
        return ts_errf(e, "gnuplot: empty file name");
    if (snprintf(buf, cap, "%s%s", path[0] == '/' ? "" : "./", path) >= (int)cap)
        return ts_errf(e, "%s: path too long for gnuplot", path);
    return 0;
}

/* Runs `gnuplot -d -c script dat <png.tmp> title`, every path through
 * gp_path() and the title on one line, then renames the image into place.  The image's temporary (and gnuplot's stderr log, a temporary
 * in dir) come from ts_atomic_open()/ts_tmp_open(): the target is checked,
 * both are created exclusively and a fatal signal removes them, after
 * killing gnuplot (started by ts_spawn()).  Returns 0, or -1 naming the
 * script (gnuplot missing, failing, killed, or writing no image) or the
 * image (a target that may not be replaced). */
int report_gnuplot(const char *script, const char *dat, const char *png, const char *title,
                   const char *dir, ts_err *e)
{
    int rc = -1, logfd = -1;
    char logbase[PATH_CAP + 16], log[PATH_CAP + 64], why[512], ttl[1024];
    char gp[PATH_CAP + 2], in[PATH_CAP + 2], out[PATH_CAP + 64];
    pid_t pid = -1;
    ts_atomic img;
    log[0] = 0;
    if (gp_path(gp, sizeof gp, script, e) || gp_path(in, sizeof in, dat, e))
        return -1;
    snprintf(ttl, sizeof ttl, "%s", title); /* one line, whatever names it holds */
    for (char *p = ttl; *p; p++)
        if (is_ctl((unsigned char)*p))
            *p = ' ';
    if (ts_atomic_open(&img, png, e))
        return -1;
    if (gp_path(out, sizeof out, img.tmp, e))
        goto cleanup;
    snprintf(logbase, sizeof logbase, "%s/.gnuplot", dir);
    logfd = ts_tmp_open(logbase, 0600, log, sizeof log, e);
    if (logfd < 0)
        goto cleanup;
    char *argv[] = {"gnuplot", "-d", "-c", gp, in, out, ttl, NULL};
    int err = ts_spawn("gnuplot", argv, logfd, &pid);
    if (err) {
        if (err == ENOENT)
            ts_errf(e, "%s: gnuplot not found on PATH (install gnuplot to draw reports)",
                    script);
        else
            ts_errf(e, "%s: cannot start gnuplot: %s", script, strerror(err));
        goto cleanup;
    }
    int status = 0;
    if (ts_child_wait(pid, &status) != 0) {
        ts_errf(e, "%s: waiting for gnuplot: %s", script, strerror(errno));
        goto cleanup;
    }
    last_line(log, why, sizeof why);
    if (WIFSIGNALED(status)) {
        ts_errf(e, "%s: gnuplot killed by signal %d", script, WTERMSIG(status));
        goto cleanup;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
            ts_errf(e, "%s: gnuplot could not be run (exit 127)", script);
        else
            ts_errf(e, "%s: gnuplot failed (exit %d)%s%s", script,
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1, why[0] ? ": " : "", why);
        goto cleanup;
    }
    struct stat st;
    if (stat(img.tmp, &st) != 0 || st.st_size == 0) {
        ts_errf(e, "%s: gnuplot wrote no image%s%s", script, why[0] ? ": " : "", why);
        goto cleanup;
    }
    rc = ts_atomic_commit(&img, e);
cleanup:
    if (logfd >= 0)
        close(logfd);
    ts_tmp_remove(log);
    if (rc)
        ts_atomic_abort(&img);
    return rc;
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

static int write_md(const run_record *r, const char *path, const int32_t *len,
                    size_t n, ts_err *e)
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
static int write_html(const run_record *r, const char *path, const int32_t *len, size_t n,
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
        write_gantt_dat(r, dat, e))
        goto cleanup;
    if (r->n_tl) {
        snprintf(title, sizeof title, "%s%s %.*s, %d GPUs - GPU timeline by phase", run_tag,
                 run_what(r, what, sizeof what), FIELD(r->scenario), r->gpus);
        if (report_script("gantt", gp, sizeof gp, e) ||
            report_gnuplot(gp, dat, png, title, dir, e))
            goto cleanup;
    } else {
        remove(png); /* no stale chart from an earlier report in this directory */
    }

    /* Length CDF. */
    if (join(dat, dir, "cdf.dat", e) || join(png, dir, "cdf.png", e) ||
        write_cdf_dat(r, len, n, dat, e))
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

    if (join(md, dir, "report.md", e) || write_md(r, md, len, n, e) ||
        join(md, dir, "index.html", e) || write_html(r, md, len, n, e))
        goto cleanup;
    rc = 0;
cleanup:
    free(len);
    return rc;
}
