/*
 * `tailsim sweep GRID.ini [-j N] [--db FILE] [--json]`: runs every
 * configuration of a grid (sweep/grid.h) in N worker processes, or over MPI
 * ranks in the MPI build under mpirun, into one SQLite database under one
 * sweep id, with a progress bar on stderr.  The whole grid is validated
 * (every key, value and combination: scenario keys, TP dividing the GPUs,
 * hardware, model, policy, the model fitting at its TP) before the database
 * is opened, so bad input writes nothing.  Output lists configurations in
 * index order with no wall-clock values: it is byte-identical for -j 1,
 * -j N and MPI.  The collector is sweep/sweep_collect.c; the progress line
 * here is shared with `tailsim plan`.
 *
 * Phases: sweep_cmd_parse (the command line), sweep_cmd_run (load, check,
 * run and store the grid; prints only the progress line on stderr), then
 * sweep_emit_json or sweep_emit_text.
 *
 * SIGINT, SIGTERM, SIGHUP and SIGPIPE (the progress line written into a
 * closed pipe) are deferred from before the database is opened until it is
 * closed (under mpirun too: sweep/sweep_mpi.c): one that comes stops the
 * runner, its workers are killed and reaped, the sweep's row is marked
 * 'interrupted' over the configurations already saved, a line on stderr
 * says so, and the process dies of the signal.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "results/store.h"
#include "cli/cmd.h"
#include "cli/cmd_sweep.h"
#include "cli/opts.h"

typedef struct sweep_opts {
    opts_common co;        /* -j, --db (default tailsim.db), --json */
    const char *grid_file;
} sweep_opts;

/* The grid and its results. */
typedef struct sweep_out {
    grid g;
    int loaded;            /* 1: g holds a loaded grid */
    sweep_collect col;     /* the results, in configuration order */
    double wall;           /* seconds running the grid */
    char mark_err[TS_ERR_MAX]; /* why the sweep's row could not be marked after an
                                  interruption or an error ("": it was, or no store) */
} sweep_out;

static void progress_print(void *ctx, size_t done, size_t total)
{
    sweep_collect *c = ctx;
    double dt = ts_wall_s() - c->t0, rate = dt > 0 ? (double)done / dt : 0;
    if (c->tty) {
        char bar[41];
        size_t fill = total ? done * 40 / total : 40;
        for (size_t i = 0; i < 40; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[40] = 0;
        fprintf(stderr, "\r%s [%s] %zu/%zu configs  %.1f/s  %zu %s", c->prog, bar, done,
                total, rate, c->failed, strcmp(c->prog, "plan") ? "failed" : "cannot run");
        if (done == total)
            fputc('\n', stderr);
        fflush(stderr);
        return;
    }
    int decile = total ? (int)(done * 10 / total) : 10;
    if (decile > c->last_decile) { /* a log-friendly line every 10% */
        c->last_decile = decile;
        fprintf(stderr, "%s: %zu/%zu configs (%d%%)  %.1f/s  %zu %s\n", c->prog, done,
                total, decile * 10, rate, c->failed, strcmp(c->prog, "plan") ? "failed" : "cannot run");
    }
}

void sweep_progress_attach(sweep_collect *c, sweep_hooks *h)
{
    c->tty = isatty(STDERR_FILENO);
    h->progress = progress_print;
}

void sweep_signal_resume(const sweep_collect *c, size_t total, const char *mark_err)
{
    int sig = ts_signal_pending();
    if (!sig) {
        ts_signal_resume();
        return;
    }
    if (c->tty && c->collected < total) /* the bar's line is open */
        fputc('\n', stderr);
    fprintf(stderr, "tailsim %s: interrupted by %s: %zu of %zu configurations %s", c->prog,
            ts_signal_name(sig), c->collected, total, c->db ? "saved" : "run");
    if (c->marked)
        fprintf(stderr, "; sweep %lld marked %s\n", (long long)c->sweep_id,
                store_sweep_status_name(c->marked));
    else if (c->sweep_id)
        fprintf(stderr, "; sweep %lld could not be marked: %s\n", (long long)c->sweep_id,
                mark_err && *mark_err ? mark_err : "unknown error");
    else
        fprintf(stderr, "; nothing written\n");
    fflush(stderr);
    ts_signal_resume(); /* dies of sig */
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim sweep GRID.ini [-j N] [--db FILE] [--json]\n\n"
            "Runs every combination of a grid's value lists (cartesian product; the last key\n"
            "varies fastest) in N worker processes, into one SQLite database under one sweep id.\n"
            "Under mpirun (MPI build) the configurations are spread over the ranks and rank 0\n"
            "writes the database.\n\n"
            "GRID.ini:\n"
            "  [sweep]\n"
            "  scenario = qwen7b-64gpu   ; base scenario (name under scenarios/ or a path)\n"
            "  command  = rlstep         ; rlstep | rollout\n"
            "  steps    = 1              ; RL steps per configuration\n"
            "  policy   = verl,tlt       ; same as [policy] name = verl,tlt\n"
            "  [rollout]                 ; any scenario section: keys with value lists\n"
            "  tp = 1,2,4\n"
            "  [trace]\n"
            "  dist = \"lognormal:8:1\"    ; a double-quoted value is one value, verbatim\n"
            "  seed = 1,2,3,4            ; a long list continues on indented lines\n"
            "      5,6,7,8\n\n"
            "options:\n"
            "  -j, --jobs N   worker processes (default 1)\n"
            "  --db FILE      SQLite database (default tailsim.db)\n"
            "  --json         print the results as JSON (configuration order, no timings)\n"
            "  -h, --help     this text\n");
}

/* The metrics the table shows, per simulated command. */
static const char *const shown_rlstep[] = {"step_s", "rollout_s", "bubble_fraction",
                                           "rollout_utilization", "accept_len",
                                           "off_policy_tokens"};
static const char *const shown_rollout[] = {"rollout_s", "bubble_fraction", "tail_fraction",
                                            "rollout_utilization", "accept_len", NULL};
/* their column headers (an RL step's speed is shown with its off-policy cost) */
static const char *const head_rlstep[] = {"step_s", "rollout_s", "bubble", "util", "accept",
                                          "offtok"};
static const char *const head_rollout[] = {"rollout_s", "bubble", "tail", "util", "accept", NULL};
#define N_SHOWN_MAX 6

/* Prints the results as one JSON object.  Returns 0, or -1 with e set. */
static int sweep_emit_json(const grid *g, const sweep_collect *c, ts_err *e)
{
    json_t *o = json_object(), *arr = json_array();
    json_object_set_new(o, "command", json_string("sweep"));
    json_object_set_new(o, "scenario", json_string(g->scenario));
    json_object_set_new(o, "simulates", json_string(g->command));
    json_object_set_new(o, "steps", json_integer(g->steps));
    json_object_set_new(o, "configs", json_integer((json_int_t)g->n_configs));
    json_object_set_new(o, "failed", json_integer((json_int_t)c->failed));
    for (size_t i = 0; i < g->n_configs; i++) {
        json_t *r = json_object(), *m = json_object();
        char *params = sweep_config_params(g, i);
        json_object_set_new(r, "config", json_integer((json_int_t)i));
        json_object_set_new(r, "params", params ? json_loads(params, 0, NULL) : json_null());
        free(params);
        if (c->rec[i]) {
            for (size_t k = 0; k < c->rec[i]->n_metrics; k++)
                json_object_set_new(m, c->rec[i]->metrics[k].key,
                                    json_real(c->rec[i]->metrics[k].value));
            json_object_set_new(r, "metrics", m);
        } else {
            json_decref(m);
            json_object_set_new(r, "error", json_string(c->err[i] ? c->err[i] : "missing"));
        }
        json_array_append_new(arr, r);
    }
    json_object_set_new(o, "results", arr);
    int rc = cmd_print_json(o, 17, e);
    json_decref(o);
    return rc;
}

/* Prints the results as a table.  Cannot fail. */
static void sweep_emit_text(const grid *g, const sweep_collect *c)
{
    int full = !strcmp(g->command, "rlstep");
    const char *const *shown = full ? shown_rlstep : shown_rollout;
    const char *const *head = full ? head_rlstep : head_rollout;
    char n1[1024];
    printf("sweep  scenario %s  %s  steps %d  %zu configs\n\n",
           cmd_flat(g->scenario, n1, sizeof n1), g->command,
           g->steps, g->n_configs);
    printf("%6s", "config");
    for (int k = 0; k < N_SHOWN_MAX && head[k]; k++)
        printf(" %10s", head[k]);
    printf("  params\n");
    for (size_t i = 0; i < g->n_configs; i++) {
        char sets[GRID_MAX_DIMS][GRID_SET_MAX];
        size_t n = grid_config_sets(g, i, sets);
        printf("%6zu", i);
        for (int k = 0; k < N_SHOWN_MAX && shown[k]; k++) {
            double v = 0;
            if (c->rec[i] && run_get_metric(c->rec[i], shown[k], &v) == 0)
                printf(" %10.4f", v);
            else
                printf(" %10s", "-");
        }
        printf(" ");
        for (size_t k = 0; k < n; k++)
            printf(" %s", sets[k]);
        printf("\n");
        if (!c->rec[i])
            printf("        failed: %s\n", c->err[i] ? c->err[i] : "missing");
    }
}

/* Parses the command line into o.  Returns -1 to go on, or the exit status
 * (0 after --help, 2 after a usage error, said on stderr). */
static int sweep_cmd_parse(int argc, char **argv, sweep_opts *o)
{
    static const struct option lo[] = {OPTS_LONG_JOBS,
                                       OPTS_LONG_DB,
                                       OPTS_LONG_JSON,
                                       OPTS_LONG_HELP,
                                       {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    opts_init(&o->co, "sweep", 0);
    o->co.db = "tailsim.db";
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "hj:", lo, NULL)) != -1) {
        int t = opts_step(&o->co, c, optarg, usage);
        if (t == OPTS_STEP_OTHER) {
            usage(stderr);
            return 2;
        }
        if (t != OPTS_STEP_TAKEN)
            return t;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "tailsim sweep: expected exactly one GRID file (try --help)\n");
        return 2;
    }
    o->grid_file = argv[optind];
    return -1;
}

/* Loads and checks o's grid into r (zeroed first; free with
 * sweep_out_free() whatever this returns), runs it into the database and
 * collects the results, with the fatal signals deferred from before the
 * database is opened (on every MPI rank too; the caller ends the deferral
 * with sweep_signal_resume()).  *collector is 0 on an MPI rank that only
 * ran configurations.  Returns 0, or -1 or SWEEP_INTERRUPTED with e set;
 * the sweep's row is marked (done, failed or interrupted) and the database
 * closed in every case. */
static int sweep_cmd_run(const sweep_opts *o, sweep_out *r, int *collector, ts_err *e)
{
    memset(r, 0, sizeof *r);
    if (grid_load(o->grid_file, &r->g, e))
        return -1;
    r->loaded = 1;
    if (grid_check_base(&r->g, e))
        return -1;
    for (size_t i = 0; i < r->g.n_configs; i++)
        if (sweep_config_check(&r->g, i, e))
            return -1;
    sweep_hooks h;
    if (sweep_collect_init(&r->col, &r->g, "sweep", o->co.db, &h, e))
        return -1;
    sweep_progress_attach(&r->col, &h);
    double w0 = ts_wall_s();
    ts_signal_defer(); /* under MPI too, on every rank (sweep/sweep_mpi.c) */
    int xrc = sweep_exec(&r->g, o->co.jobs, NULL, &h, collector, e);
    if (!*collector)
        return xrc ? -1 : 0;
    if (xrc) { /* rows are missing: failed, or interrupted */
        ts_err e2 = {{0}};
        if (sweep_collect_finish(&r->col, xrc == SWEEP_INTERRUPTED ? STORE_SWEEP_INTERRUPTED
                                                                   : STORE_SWEEP_FAILED, &e2))
            snprintf(r->mark_err, sizeof r->mark_err, "%s", e2.msg);
        return xrc == SWEEP_INTERRUPTED ? SWEEP_INTERRUPTED : -1;
    }
    r->wall = ts_wall_s() - w0;
    return sweep_collect_finish(&r->col, STORE_SWEEP_DONE, e);
}

static void sweep_out_free(sweep_out *r)
{
    sweep_collect_free(&r->col);
    if (r->loaded)
        grid_free(&r->g);
}

int cmd_sweep(int argc, char **argv)
{
    sweep_opts o;
    int prc = sweep_cmd_parse(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    sweep_out r;
    int rc = 1, collector = 1;
    int xrc = sweep_cmd_run(&o, &r, &collector, &e);
    if (!collector) { /* an MPI rank other than 0: rank 0 reports */
        rc = xrc ? 1 : 0;
        goto done;
    }
    if (xrc == -1)
        fprintf(stderr, "tailsim sweep: %s\n", e.msg);
    /* the store is closed: a signal that came dies here, saying what was kept */
    sweep_signal_resume(&r.col, r.g.n_configs, r.mark_err[0] ? r.mark_err : e.msg);
    if (xrc == -1)
        goto done;
    if (xrc)
        goto fail;
    if (o.co.json) {
        if (sweep_emit_json(&r.g, &r.col, &e))
            goto fail;
    } else {
        sweep_emit_text(&r.g, &r.col);
    }
    fprintf(stderr, "tailsim sweep: sweep %lld: %zu configs (%zu failed) in %.1f s, %.2f configs/s"
                    " -> %s\n", (long long)r.col.sweep_id, r.g.n_configs, r.col.failed, r.wall,
            r.wall > 0 ? (double)r.g.n_configs / r.wall : 0, o.co.db);
    rc = r.col.failed ? 1 : 0;
    goto done;
fail:
    fprintf(stderr, "tailsim sweep: %s\n", e.msg);
done:
    sweep_out_free(&r);
    return rc;
}
