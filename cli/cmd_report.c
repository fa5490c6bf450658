/*
 * `tailsim report [--db FILE] [--run ID|ID,ID,...] -o DIR`: loads one stored
 * run (the latest by default) from the results store and writes its Gantt
 * chart, length CDF, Markdown and HTML report and its exports (Perfetto
 * timeline.json, responses.csv, phases.csv: reports/report.h) into DIR
 * (created if missing), then prints the paths written, one per line.  With several ids it loads every
 * run first (nothing is written unless all load), writes each one's report
 * into DIR/run-<id>/ and a page comparing them, DIR/index.md and
 * DIR/index.html (reports/runs_report.h).  Exit status: 0 success, 1
 * runtime error (missing database, unknown run, gnuplot failure; one
 * "tailsim: ..." line on stderr), 2 usage error.  The database is never
 * created by this command: a missing file is an error rather than a new
 * empty store.  report_cmd_parse reads the flags ("--db FILE" or
 * "--db=FILE", through cli/opts.c); report_one and report_many write.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "reports/dcp_report.h"
#include "reports/report.h"
#include "reports/runs_report.h"
#include "cli/cmd.h"
#include "cli/opts.h"
#include "results/store.h"

#define REPORT_MAX_RUNS 16

static void report_usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim report [--db FILE] [--run ID|ID,ID,...] -o DIR\n\n"
            "Writes the Gantt chart, response-length CDF, Markdown and HTML report and\n"
            "the exports of a stored run into DIR (created if missing):\n"
            "  DIR/gantt.dat DIR/gantt.png DIR/cdf.dat DIR/cdf.png DIR/report.md DIR/index.html\n"
            "  DIR/timeline.json  per-GPU timeline for ui.perfetto.dev / chrome://tracing\n"
            "  DIR/responses.csv  one row per response;  DIR/phases.csv  one row per step and phase\n"
            "With several run ids, each run's report goes into DIR/run-<id>/ and\n"
            "DIR/index.md and DIR/index.html show them side by side (a table of the\n"
            "runs, their speedups over the first, the Gantt charts and CDFs).\n\n"
            "  --db FILE    results database (default tailsim.db)\n"
            "  --run ID     run id, or 'latest' (default latest); or 2 to %d distinct ids,\n"
            "               comma-separated\n"
            "  -o, --out DIR  output directory (required)\n"
            "  -h, --help   this help\n\n"
            "Needs gnuplot on PATH.\n", REPORT_MAX_RUNS);
}

/* 1 when the database file exists, else 0 after saying so: this command
 * never creates one. */
static int db_exists(const char *db)
{
    if (access(db, F_OK) == 0)
        return 1;
    fprintf(stderr, "tailsim: %s: no such database (run a simulation first, or pass --db FILE)\n",
            db);
    return 0;
}

typedef struct report_opts {
    const char *db;      /* --db FILE (default tailsim.db) */
    const char *out;     /* -o / --out DIR */
    const char *run;     /* --run ID, 'latest' or ID,ID,...; NULL: the latest */
} report_opts;

/* Parses the command line into o.  Returns -1 to go on, or the exit status
 * (0 after --help, 2 after a usage error, said on stderr). */
static int report_cmd_parse(int argc, char **argv, report_opts *o)
{
    o->db = "tailsim.db";
    o->out = o->run = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = NULL, *name = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            report_usage(stdout);
            return 0;
        } else if (opts_match(a, "--db")) {
            dst = &o->db, name = "--db";
        } else if (opts_match(a, "--run")) {
            dst = &o->run, name = "--run";
        } else if (opts_match(a, "--out")) {
            dst = &o->out, name = "--out";
        } else if (!strcmp(a, "-o")) {
            dst = &o->out, name = "-o";
        } else {
            fprintf(stderr, "tailsim: report: unexpected argument '%s'\n", a);
            report_usage(stderr);
            return 2;
        }
        const char *v = opts_value(argc, argv, &i, name);
        if (!v || !*v) {
            fprintf(stderr, "tailsim: report: %s needs a value\n", name);
            return 2;
        }
        *dst = v;
    }
    if (!o->out) {
        fprintf(stderr, "tailsim: report: missing -o DIR\n");
        report_usage(stderr);
        return 2;
    }
    return -1;
}

/* The ids of --run ID,ID,... into ids (REPORT_MAX_RUNS), their count into
 * *n.  Returns -1 to go on, or 2 after saying what is wrong on stderr. */
static int report_ids(const char *list, int64_t *ids, size_t *n)
{
    char buf[512];
    *n = 0;
    if (strlen(list) >= sizeof buf) {
        fprintf(stderr, "tailsim: report: --run: the list is too long\n");
        return 2;
    }
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = buf, *next; tok; tok = next) {
        if ((next = strchr(tok, ',')))
            *next++ = 0;
        int64_t id;
        if (ts_parse_i64(tok, 1, INT64_MAX, &id) != 0) {
            fprintf(stderr, "tailsim: report: --run: '%s' in '%s' is not a run id (a positive "
                            "integer)\n", tok, list);
            return 2;
        }
        for (size_t i = 0; i < *n; i++)
            if (ids[i] == id) {
                fprintf(stderr, "tailsim: report: --run: run %lld listed twice\n", (long long)id);
                return 2;
            }
        if (*n == REPORT_MAX_RUNS) {
            fprintf(stderr, "tailsim: report: --run: at most %d runs side by side\n",
                    REPORT_MAX_RUNS);
            return 2;
        }
        ids[(*n)++] = id;
    }
    return -1;
}

/* --run ID,ID,...: every run loaded before anything is written. */
static int report_many(const char *db, const char *list, const char *out)
{
    int64_t ids[REPORT_MAX_RUNS];
    size_t n;
    int prc = report_ids(list, ids, &n);
    if (prc >= 0)
        return prc;
    if (!db_exists(db))
        return 1;
    int rc = 1;
    ts_err e = {""};
    store *s = NULL;
    run_record *r[REPORT_MAX_RUNS] = {0};
    if (store_open_read(db, &s, &e))
        goto cleanup;
    for (size_t i = 0; i < n; i++)
        if (store_load_run(s, ids[i], &r[i], &e))
            goto cleanup;
    if (runs_report_write(r, n, db, out, &e))
        goto cleanup;
    printf("%s/index.md\n%s/index.html\n", out, out);
    for (size_t i = 0; i < n; i++)
        printf("%s/run-%lld/\n", out, (long long)ids[i]);
    rc = 0;
cleanup:
    if (rc)
        fprintf(stderr, "tailsim: %s\n", e.msg);
    for (size_t i = 0; i < n; i++)
        run_record_free(r[i]);
    store_close(s);
    return rc;
}

/* --run ID or 'latest' (run NULL: the latest): the run's report, then the
 * paths written. */
static int report_one(const char *db, const char *run, const char *out)
{
    int64_t id = 0;
    if (run && strcmp(run, "latest") && ts_parse_i64(run, 1, INT64_MAX, &id) != 0) {
        fprintf(stderr, "tailsim: report: --run: '%s' is not a run id (a positive "
                        "integer or 'latest')\n", run);
        return 2;
    }
    if (!db_exists(db))
        return 1;

    int rc = 1;
    ts_err e = {""};
    store *s = NULL;
    run_record *r = NULL;
    if (store_open_read(db, &s, &e) || store_load_run(s, id, &r, &e) || report_write(r, out, &e) ||
        (!strcmp(r->command, "dcp") && dcp_report_write(r, out, &e))) {
        fprintf(stderr, "tailsim: %s\n", e.msg);
        goto cleanup;
    }
    static const char *const files[] = {"gantt.dat",     "gantt.png",     "cdf.dat",
                                        "cdf.png",       "report.md",     "index.html",
                                        "timeline.json", "responses.csv", "phases.csv",
                                        "dcp.md",        "dcp_imbalance.dat",
                                        "dcp_imbalance.png"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", out, files[i]);
        if (access(p, F_OK) == 0)
            printf("%s\n", p);
    }
    rc = 0;
cleanup:
    run_record_free(r);
    store_close(s);
    return rc;
}

int cmd_report(int argc, char **argv)
{
    report_opts o;
    int prc = report_cmd_parse(argc, argv, &o);
    if (prc >= 0)
        return prc;
    if (o.run && strchr(o.run, ','))
        return report_many(o.db, o.run, o.out);
    return report_one(o.db, o.run, o.out);
}
