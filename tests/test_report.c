/*
 * Tests of the report writer (reports/report.c): a small synthetic RL step
 * (16 GPUs in 4 replicas, a long-tailed rollout with idle and drafter-training
 * intervals, the training phases after it, 512 responses) is written to a
 * fresh temporary directory; the test checks that every file exists, that
 * the charts are real PNGs, that report.md lists the metrics in order, and
 * that failures (gnuplot missing, an output path that is a file) are errors
 * with a message rather than crashes.  Tests that draw skip when gnuplot is
 * not on PATH.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reports/report.h"
#include "reports/runs_report.h"
#include "results/result.h"
#include "tests/helpers.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_report_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

/* Removes path and everything below it; returns the number of entries
 * (files and directories) removed. */
static int remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    int n = 1;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        char p[1024];
        while (d && (de = readdir(d))) {
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", path, de->d_name);
                n += remove_tree(p);
            }
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        remove(path);
    }
    return n;
}

/* Number of entries in a directory, "." and ".." excluded. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static void teardown(void)
{
    remove_tree(tmpdir);
}

TestSuite(report, .init = setup, .fini = teardown);

/* One synchronous RL step on `gpus` GPUs (TP 4): every replica decodes until
 * its last response finishes (a long tail across replicas), then idles, and
 * replicas that finish early train the drafter for part of the wait. */
static run_record *make_step(int gpus)
{
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    r->id = 42;
    snprintf(r->command, sizeof r->command, "rlstep");
    snprintf(r->scenario, sizeof r->scenario, "tlt_qwen7b|demo");
    snprintf(r->calibration, sizeof r->calibration, "h200-2025");
    snprintf(r->version, sizeof r->version, "0.1.0");
    snprintf(r->created, sizeof r->created, "2025-01-01T00:00:00Z");
    r->seed = 7, r->gpus = gpus, r->tp = 4, r->replicas = gpus / 4;
    double t_sync = 3.0, t_roll_end = 0;
    double fin[1024];
    for (int k = 0; k < r->replicas; k++) {
        /* replica finish: most early, a few late (the long tail) */
        double u = (double)((k * 37) % r->replicas) / (double)r->replicas;
        fin[k] = t_sync + 40.0 + 80.0 * pow(u, 4.0);
        t_roll_end = fmax(t_roll_end, fin[k]);
    }
    const double phase_len[] = {0, 0, 4.0, 12.0, 8.0, 30.0}; /* reward .. update */
    for (int g = 0; g < gpus; g++) {
        int k = g / 4;
        cr_assert_eq(run_add_interval(r, g, PH_SYNC, TL_BUSY, 0.0, t_sync), 0);
        cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_BUSY, t_sync, fin[k]), 0);
        if (fin[k] < t_roll_end) {
            double mid = fin[k] + 0.6 * (t_roll_end - fin[k]);
            if (k % 2 == 0) {
                cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_TRAIN, fin[k], mid), 0);
                cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_IDLE, mid, t_roll_end), 0);
            } else {
                cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_IDLE, fin[k], t_roll_end), 0);
            }
        }
        double t = t_roll_end;
        for (int p = PH_REWARD; p < PH_COUNT; p++) {
            cr_assert_eq(run_add_interval(r, g, p, TL_BUSY, t, t + phase_len[p]), 0);
            t += phase_len[p];
        }
    }
    cr_assert_eq(run_add_metric(r, "step_s", t_roll_end + 54.0), 0);
    cr_assert_eq(run_add_metric(r, "rollout_s", t_roll_end - t_sync), 0);
    cr_assert_eq(run_add_metric(r, "bubble_rollout", 0.31), 0);
    cr_assert_eq(run_add_metric(r, "events", 123456), 0);
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 512; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double u1 = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double u2 = ((double)(x >> 11) + 0.5) / 9007199254740992.0;
        double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        int len = (int)fmin(32768.0, exp(8.3 + 0.8 * z));
        cr_assert_eq(run_add_response(r, i % r->replicas, 600, len, len * 0.004), 0);
    }
    return r;
}

static long file_size(const char *dir, const char *name)
{
    char p[600];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static void assert_png(const char *dir, const char *name)
{
    static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    char p[600];
    unsigned char head[8] = {0};
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f, "%s missing", p);
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    cr_assert(n == 8 && !memcmp(head, magic, 8), "%s is not a PNG", p);
    cr_assert_gt(file_size(dir, name), 2000, "%s is suspiciously small", p);
}

static char *slurp(const char *dir, const char *name)
{
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f, "%s missing", p);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

Test(report, writes_all_files)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char out[400];
    snprintf(out, sizeof out, "%s/a/b/report", tmpdir); /* parents do not exist yet */
    run_record *r = make_step(16);
    ts_err e = {""};
    cr_assert_eq(report_write(r, out, &e), 0, "%s", e.msg);
    assert_png(out, "gantt.png");
    assert_png(out, "cdf.png");
    cr_assert_gt(file_size(out, "gantt.dat"), 0);
    cr_assert_gt(file_size(out, "cdf.dat"), 0);
    const char *md = slurp(out, "report.md");
    cr_assert(strstr(md, "run 42"), "title names the run");
    cr_assert(strstr(md, "tlt_qwen7b\\|demo"), "scenario with '|' escaped");
    cr_assert(strstr(md, "h200-2025") && strstr(md, "0.1.0"));
    const char *keys[] = {"step_s", "rollout_s", "bubble_rollout", "events"};
    const char *prev = md;
    for (int i = 0; i < 4; i++) {
        const char *at = strstr(md, keys[i]);
        cr_assert_not_null(at, "report.md lacks metric %s", keys[i]);
        cr_assert_geq(at, prev, "metric %s out of order", keys[i]);
        prev = at;
    }
    cr_assert(strstr(md, "| 123456 |"), "integral metric printed exactly");
    cr_assert(strstr(md, "(gantt.png)") && strstr(md, "(cdf.png)"));
    cr_assert(strstr(md, "| rollout |") && strstr(md, "| update |"), "phase table");
    /* no temporaries or logs left behind */
    cr_assert_eq(file_size(out, "gantt.png.tmp"), -1);
    /* and the exports and the page (tests/test_safety_export.c checks them) */
    cr_assert_eq(count_entries(out), 9, "exactly nine files in %s", out);

    /* Writing again over the same directory works (atomic replace). */
    cr_assert_eq(report_write(r, out, &e), 0, "%s", e.msg);
    assert_png(out, "gantt.png");
    run_record_free(r);
}

/* Two steps on one timeline: the chart names the first step's phases (not
 * spans over the whole run) and marks where the second starts. */
Test(report, several_steps_mark_each_start)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    run_record *r = make_step(16);
    size_t n = r->n_tl;
    double T = 0;
    for (size_t i = 0; i < n; i++)
        T = fmax(T, r->tl[i].t1);
    for (size_t i = 0; i < n; i++) {
        tl_interval c = r->tl[i];
        cr_assert_eq(run_add_interval(r, c.gpu, c.phase, c.state, c.t0 + T, c.t1 + T), 0);
    }
    cr_assert_eq(run_add_step(r, 0.0), 0);
    cr_assert_eq(run_add_step(r, T), 0);
    ts_err e = {""};
    cr_assert_eq(report_write(r, tmpdir, &e), 0, "%s", e.msg);
    assert_png(tmpdir, "gantt.png");
    const char *dat = slurp(tmpdir, "gantt.dat");
    const char *b1 = strstr(dat, "# block 1");
    cr_assert_not_null(b1);
    double lo, hi;
    const char *upd = strstr(b1, "\n5 update ");
    cr_assert_not_null(upd, "%s", b1);
    cr_assert_eq(sscanf(upd, " 5 update %lf %lf", &lo, &hi), 2);
    cr_assert_leq(hi, T, "the update row spans the first step only");
    const char *st = strstr(b1, "\n-1 \"step 2\" ");
    cr_assert_not_null(st, "%s", b1);
    cr_assert_eq(sscanf(st, " -1 \"step 2\" %lf %lf", &lo, &hi), 2);
    cr_assert(fabs(lo - T) < 1e-6 * T && lo == hi);
    run_record_free(r);
}

Test(report, many_gpus)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    run_record *r = make_step(256);
    ts_err e = {""};
    cr_assert_eq(report_write(r, tmpdir, &e), 0, "%s", e.msg);
    assert_png(tmpdir, "gantt.png");
    run_record_free(r);
}

Test(report, empty_run_has_no_charts)
{
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    snprintf(r->command, sizeof r->command, "rollout");
    ts_err e = {""};
    cr_assert_eq(report_write(r, tmpdir, &e), 0, "%s", e.msg);
    cr_assert_eq(file_size(tmpdir, "gantt.png"), -1);
    cr_assert_eq(file_size(tmpdir, "cdf.png"), -1);
    const char *md = slurp(tmpdir, "report.md");
    cr_assert(strstr(md, "No timeline recorded") && strstr(md, "No responses recorded"));
    run_record_free(r);
}

Test(report, gnuplot_missing_is_an_error)
{
    run_record *r = make_step(8);
    setenv("PATH", "/nonexistent-tailsim-bin", 1); /* this test's process only */
    ts_err e = {""};
    cr_assert_eq(report_write(r, tmpdir, &e), -1);
    cr_assert(strstr(e.msg, "gnuplot") && strstr(e.msg, "gantt.gp"), "%s", e.msg);
    run_record_free(r);
}

Test(report, output_path_is_a_file)
{
    char out[400];
    snprintf(out, sizeof out, "%s/file", tmpdir);
    FILE *f = fopen(out, "w");
    cr_assert_not_null(f);
    fclose(f);
    run_record *r = make_step(8);
    ts_err e = {""};
    cr_assert_eq(report_write(r, out, &e), -1);
    cr_assert(strstr(e.msg, out) && strstr(e.msg, "not a directory"), "%s", e.msg);
    snprintf(out, sizeof out, "%s/file/sub", tmpdir);
    cr_assert_eq(report_write(r, out, &e), -1);
    cr_assert(strstr(e.msg, "file"), "%s", e.msg);
    run_record_free(r);
}

/* Two runs side by side: each one's report in run-<id>/, the page's table
 * with a row per run and the second's speedup over the first, and every
 * Gantt chart and CDF linked. */
Test(report, runs_side_by_side)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    run_record *a = make_step(16), *b = make_step(16);
    b->id = 43;
    run_set_policy(a, "verl");
    run_set_policy(b, "tlt|x"); /* a '|' must not break the table */
    for (size_t i = 0; i < b->n_metrics; i++)
        if (!strcmp(b->metrics[i].key, "step_s"))
            b->metrics[i].value /= 2; /* twice as fast */
    run_record *both[2] = {a, b};
    ts_err e = {""};
    cr_assert_eq(runs_report_write(both, 2, "t.db", tmpdir, &e), 0, "%s", e.msg);
    char sub[400];
    snprintf(sub, sizeof sub, "%s/run-43", tmpdir);
    assert_png(sub, "gantt.png");
    assert_png(tmpdir, "speedup.png");
    const char *md = slurp(tmpdir, "index.md");
    cr_assert(strstr(md, "# tailsim report: runs 42, 43"), "%s", md);
    cr_assert(strstr(md, "| 42 | rlstep | verl | tlt_qwen7b/demo | 16 | 1.00x |"), "%s", md);
    cr_assert(strstr(md, "| 43 | rlstep | tlt/x | tlt_qwen7b/demo | 16 | 2.00x |"), "%s", md);
    cr_assert(strstr(md, "(run-42/gantt.png)") && strstr(md, "(run-43/gantt.png)") &&
                  strstr(md, "(run-42/cdf.png)") && strstr(md, "(run-43/cdf.png)"),
              "%s", md);
    run_record *one[1] = {a};
    cr_assert_eq(runs_report_write(one, 1, "t.db", tmpdir, &e), -1);
    /* a run stored without a timeline (a sweep's) gets its CDF, no chart */
    run_record *c = make_step(16);
    c->id = 44;
    c->n_tl = 0;
    run_record *three[3] = {a, b, c};
    cr_assert_eq(runs_report_write(three, 3, "t.db", tmpdir, &e), 0, "%s", e.msg);
    md = slurp(tmpdir, "index.md");
    cr_assert(strstr(md, "(run-44/cdf.png)") && !strstr(md, "(run-44/gantt.png)"), "%s", md);
    run_record_free(a);
    run_record_free(b);
    run_record_free(c);
}

/* The CLI: --run A,B writes the page and each run's report; a repeated or
 * bad id is a usage error, an unknown one a runtime error that writes
 * nothing. */
Test(report, cli_runs_side_by_side, .timeout = 120)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char cmd[1024], db[400], out[400];
    snprintf(db, sizeof db, "%s/r.db", tmpdir);
    snprintf(out, sizeof out, "%s/side", tmpdir);
    const char *pols[] = {"verl", "tlt"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "build/tailsim rlstep qwen7b-64gpu --set trace.prompts=8 "
                                  "--policy %s --db %s >/dev/null 2>&1", pols[i], db);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
    }
    snprintf(cmd, sizeof cmd, "build/tailsim report --db %s --run 1,2 -o %s 2>&1", db, out);
    char *txt = run_capture(cmd);
    cr_assert(strstr(txt, "/side/index.html\n") && strstr(txt, "/side/run-2/\n"), "%s", txt);
    const char *md = slurp(out, "index.md");
    cr_assert(strstr(md, "| 1 | rlstep | verl | qwen7b-64gpu |") &&
                  strstr(md, "| 2 | rlstep | tlt | qwen7b-64gpu |"),
              "%s", md);
    free(txt);
    snprintf(cmd, sizeof cmd, "build/tailsim report --db %s --run 1,1 -o %s/x >/dev/null 2>&1", db,
             tmpdir);
    cr_assert_eq(system(cmd) >> 8, 2);
    snprintf(cmd, sizeof cmd, "build/tailsim report --db %s --run 1,two -o %s/x >/dev/null 2>&1",
             db, tmpdir);
    cr_assert_eq(system(cmd) >> 8, 2);
    snprintf(cmd, sizeof cmd, "build/tailsim report --db %s --run 1,9 -o %s/x 2>%s/err.txt",
             db, tmpdir, tmpdir);
    cr_assert_eq(system(cmd) >> 8, 1);
    const char *err = slurp(tmpdir, "err.txt");
    cr_assert(strstr(err, "no run with id 9"), "%s", err);
    snprintf(out, sizeof out, "%s/x", tmpdir);
    struct stat st;
    cr_assert_neq(stat(out, &st), 0, "an unknown run wrote %s", out);
}
