/*
 * Report writer, gnuplot side (the rest: reports/report.c, the Markdown and
 * HTML pages reports/report_md.c): the two data files and the program that
 * draws them.
 *   gantt.dat              per-GPU intervals (gpu, phase, state, start, end),
 *                          the phases of the first step and a multi-turn
 *                          run's last trajectories' intervals, drawn by
 *                          reports/gantt.gp; each interval's phase and state
 *                          named after the integers that gantt.gp colours by;
 *   cdf.dat                the response-length CDF and its percentiles,
 *                          drawn by reports/cdf.gp.
 * Scripts are found under ts_data_root()/reports/ only, never in the current
 * directory (report_script()), and run as `gnuplot -d -c SCRIPT DAT PNG
 * TITLE [NUMBER]` through ts_spawn (posix_spawnp) with an argv (no shell); gnuplot's
 * stderr goes to a temporary log whose last line becomes the error message
 * on failure.  report_gnuplot() and report_can_draw() serve the other
 * report writers too.
 * gnuplot itself reads some names as more than a file: a script or data name
 * that starts with '<' runs the rest as a shell command, an output name that
 * starts with '|' pipes into one, and "-", "+", "++", "$name", "~/" and ""
 * are the terminal, pseudo-files, a datablock, the home directory and the
 * previous file.  So every path reaches gnuplot starting with '/' or "./"
 * (gp_path()), which gnuplot only opens; the title is a string the scripts
 * never evaluate (no eval, load, system or @macro on an argument).
 *
 * Invariants: a .dat file appears through ts_atomic_*; a PNG is rendered by
 * gnuplot into a ts_atomic_* temporary and renamed on success.  Nothing here
 * prints or exits.
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
#include "reports/report_impl.h"

/* Heights of the phase names over the Gantt chart (gantt.gp reserves a
 * band of this many lines). */
#define GANTT_LEVELS 6
/* Two CDF percentile points closer than this share of the length axis and
 * this much in fraction would overlap their labels (~12 characters). */
#define CDF_NEAR_X 0.15
#define CDF_NEAR_Y 0.08

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

/* A label over the Gantt chart: a phase (of the first step) or where a
 * later step starts. */
typedef struct gantt_label {
    int phase;          /* the phase, -1: a step's start */
    size_t step;        /* that step (1-based) when phase is -1 */
    double t0, t1;      /* s: the phase's span, or the step's start twice */
    double mid;         /* s: where the label is centred */
    int level;          /* 0 next to the chart, then upwards */
} gantt_label;

static int cmp_label(const void *a, const void *b)
{
    const gantt_label *x = a, *y = b;
    return (x->mid > y->mid) - (x->mid < y->mid);
}

/* Gives each label (sorted by centre) the lowest level where it clears the
 * labels already there, estimating its width from its length: gantt.gp
 * draws ~7 px a character (",10" font) across ~1260 px for span seconds.
 * When no level is free, the one whose last label ends first.  Cannot
 * fail. */
static void gantt_levels(gantt_label *l, size_t n, double span)
{
    double end[GANTT_LEVELS];
    for (int k = 0; k < GANTT_LEVELS; k++)
        end[k] = -INFINITY;
    qsort(l, n, sizeof *l, cmp_label);
    for (size_t i = 0; i < n; i++) {
        char name[32];
        if (l[i].phase >= 0)
            snprintf(name, sizeof name, "%s", tl_phase_name[l[i].phase]);
        else
            snprintf(name, sizeof name, "step %zu", l[i].step);
        double half = ((double)strlen(name) + 1.5) * 7.0 / 1260.0 * span / 2;
        int best = -1;
        for (int k = 0; k < GANTT_LEVELS && best < 0; k++)
            if (end[k] <= l[i].mid - half)
                best = k; /* the lowest free level */
        if (best < 0)
            for (int k = best = 0; k < GANTT_LEVELS; k++)
                if (end[k] < end[best])
                    best = k;
        l[i].level = best;
        end[best] = l[i].mid + half;
    }
}

int rp_write_gantt_dat(const run_record *r, const char *path, double xmax, ts_err *e)
{
    ts_atomic a;
    /* the phases of the first step (all of a one-step run), then the start
     * of every later step */
    double end = r->n_steps > 1 ? r->step_t0[1] : INFINITY, tmin = INFINITY, tmax = -INFINITY;
    size_t nl = 0, cap = PH_COUNT + (r->n_steps > 1 ? r->n_steps - 1 : 0);
    gantt_label *l = calloc(cap, sizeof *l);
    if (!l)
        return ts_errf(e, "out of memory labelling %zu phases", cap);
    for (size_t i = 0; i < r->n_tl; i++) {
        tmin = fmin(tmin, r->tl[i].t0);
        tmax = fmax(tmax, r->tl[i].t1);
    }
    for (int p = 0; p < PH_COUNT; p++) {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < r->n_tl; i++) {
            if (r->tl[i].phase != p || r->tl[i].t0 >= end)
                continue;
            lo = fmin(lo, r->tl[i].t0);
            hi = fmax(hi, r->tl[i].t1);
        }
        if (lo <= hi)
            l[nl++] = (gantt_label){p, 0, lo, hi, (lo + hi) / 2, 0};
    }
    for (size_t k = 1; k < r->n_steps; k++)
        l[nl++] = (gantt_label){-1, k + 1, r->step_t0[k], r->step_t0[k], r->step_t0[k], 0};
    if (xmax > tmax)
        tmax = xmax;
    gantt_levels(l, nl, tmax > tmin ? tmax - tmin : 1);
    if (ts_atomic_open(&a, path, e)) {
        free(l);
        return -1;
    }
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
    fprintf(f, "\n\n# block 1: phase name t_start_s t_end_s label_level%s; by time; "
               "label_level: the height of the name over the chart (0 lowest), so that no two "
               "names overlap\n",
            r->n_steps > 1 ? " (the first RL step; then -1 \"step k\" t t: where step k starts)"
                           : "");
    for (size_t i = 0; i < nl; i++) {
        if (l[i].phase >= 0)
            fprintf(f, "%d %s", l[i].phase, tl_phase_name[l[i].phase]);
        else
            fprintf(f, "-1 \"step %zu\"", l[i].step);
        fprintf(f, " %.9g %.9g %d\n", l[i].t0, l[i].t1, l[i].level);
    }
    free(l);
    fprintf(f, "\n\n# block 2: rank kind t0_s t1_s response turn kind_name   (a multi-turn "
               "run's trajectories that finished last, rank 0 the critical path; kind 0 queue, "
               "1 generate, 2 tool_queue, 3 tool; a single line with rank -1 when none)\n");
    for (size_t i = 0; i < r->n_tj; i++) {
        const traj_interval *t = &r->tj[i];
        if (t->kind < 0 || t->kind >= TJ_COUNT) {
            ts_atomic_abort(&a);
            return ts_errf(e, "%s: trajectory interval %zu: kind %d out of range", path, i,
                           t->kind);
        }
        fprintf(f, "%d %d %.9g %.9g %d %d %s\n", t->rank, t->kind, t->t0, t->t1, t->resp,
                t->turn, tj_kind_name[t->kind]);
    }
    if (r->n_tj == 0)
        fprintf(f, "-1 0 0 0 -1 -1 none\n");
    return ts_atomic_commit(&a, e);
}

int rp_write_cdf_dat(const run_record *r, const int32_t *len, size_t n, const char *path,
                     ts_err *e)
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
    fprintf(f, "\n\n# block 1: label length_tokens fraction side   (side 0: the label left of "
               "and above its point; 1: right of and below it, as the next label's point is "
               "closer than %g of the axis and %g in fraction: p99 next to a capped max)\n",
            CDF_NEAR_X, CDF_NEAR_Y);
    if (n) {
        static const double ps[] = {0.5, 0.9, 0.99, 1};
        static const char *const names[] = {"p50", "p90", "p99", "max"};
        int32_t x[4];
        for (int i = 0; i < 4; i++)
            x[i] = i < 3 ? pct(len, n, ps[i]) : len[n - 1];
        for (int i = 0; i < 4; i++) {
            int near = i < 3 && (double)(x[i + 1] - x[i]) < CDF_NEAR_X * (double)x[3] &&
                       ps[i + 1] - ps[i] < CDF_NEAR_Y;
            fprintf(f, "%s %d %g %d\n", names[i], x[i], ps[i], near);
        }
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
    return report_gnuplot_num(script, dat, png, title, NAN, dir, e);
}

int report_gnuplot_num(const char *script, const char *dat, const char *png, const char *title,
                       double arg4, const char *dir, ts_err *e)
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
    char num[32];
    snprintf(num, sizeof num, "%.9g", arg4); /* digits, '-', '.', 'e': never a command */
    char *argv[] = {"gnuplot", "-d", "-c", gp, in, out, ttl, isnan(arg4) ? NULL : num, NULL};
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
