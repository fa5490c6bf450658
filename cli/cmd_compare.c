/*
 * `tailsim compare SCENARIO --policies verl,tlt,... [--steps N] [--json]`:
 * runs the same RL steps (the same trace steps, or the same generated ones)
 * under each policy and prints them side by side: step and rollout time,
 * bubble, drafter-training and tail fractions, rollout utilization, speedup
 * of step and rollout over the first policy listed, accepted length, drafter
 * quality, off-policy fraction and staleness, the off-policy share of the
 * trained tokens, and the goodput: trained tokens per second over the whole
 * run relative to the first policy (the fair speed of policies that train
 * other samples than the synchronous step; a policy's speed is never shown
 * without what it does to the samples that train).  Every other value is the
 * mean over the steps.  Output is deterministic for a seed.  --train LIST runs
 * every policy under each train.strategy (sim/rlstep_train.h) too, so TLT in
 * the rollout and DCP in the update show up as policy x strategy rows with a
 * `train` column; speedups stay over the first row.  -o DIR also writes the
 * comparison's report (cli/paper.c's paper_run_compare: one RL step under
 * one train strategy, so --steps > 1 and --train are refused with it) with
 * the terminal table verbatim; stdout is the same with or without it.
 *
 * Phases: compare_parse and compare_lists (the command line, the policies
 * and train strategies), compare_run (every row's steps and the bootstrap;
 * prints nothing), then compare_emit_json or the table (table_print), and
 * compare_report for -o.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "sim/bootstrap.h"
#include "cli/cmd.h"
#include "reports/report.h"
#include "cli/cmd_run.h"
#include "cli/opts.h"
#include "cli/progress.h"
#include "cli/paper.h"

#define MAX_POL 16
#define MAX_TRAIN 8
#define MAX_ROWS (MAX_POL * MAX_TRAIN)

typedef struct compare_opts {
    opts_common co;               /* --set, --seed, --steps, --trace, --json, -o */
    const char *scenario;
    const char *pols;             /* --policies LIST, NULL: every registered policy */
    const char *trains;           /* --train LIST, or NULL */
    int nboot;                    /* --bootstrap N (0: none) */
    int per_step;                 /* --per-step (0 or 1) */
    int argi;                     /* argv index of SCENARIO after getopt_long */
    const policy *plist[MAX_POL]; /* the policies, np of them */
    int np;
    char tbuf[256];               /* --train's list, split in place into tlist */
    char *tlist[MAX_TRAIN];       /* the train strategies, nt of them (0: the scenario's) */
    int nt;
} compare_opts;

static void usage(FILE *f)
{
    size_t n;
    const policy *const *all = policy_all(&n);
    fprintf(f, "usage: tailsim compare SCENARIO [--policies P1,P2,...] [--steps N] [--seed S]\n"
               "                       [--trace FILE] [--set SEC.KEY=VAL] [--train S1,S2,...]\n"
               "                       [--bootstrap N] [--per-step] [--json] [-o DIR]\n\n"
               "Runs the same RL steps under each policy and compares them; speedups are over\n"
               "the first policy listed (default: all policies, verl first).  --train runs each\n"
               "policy under each train.strategy (none, bucket, packed, dcp-intra, dcp-inter,\n"
               "dcp-inter+pac).  --bootstrap N reruns on N resamples of the prompts (with\n"
               "replacement, whole groups) and adds the median and 5-95%% range of each metric\n"
               "(with one train strategy at most).  --per-step adds each row's step time per\n"
               "RL step (JSON: per_step, with --steps above 1).  -o DIR also writes\n"
               "DIR/index.md and DIR/index.html: the table, a Gantt chart and length CDF per\n"
               "policy, the speedup bars and, for a speculative policy, accepted length vs\n"
               "draft depth (all --steps on one timeline; one train strategy; needs\n"
               "gnuplot).  Policies:\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %-10s %s  [%s]\n", all[i]->name, all[i]->summary, all[i]->source);
    const policy *const *co = policy_combos(&n);
    fprintf(f, "Combinations (not in the default list; name them):\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %-13s %s\n", co[i]->name, co[i]->summary);
}

/* Width of the policy column: the longest name, at least 10. */
static int name_width(const policy *const *plist, int np)
{
    int w = 10;
    for (int i = 0; i < np; i++)
        if ((int)strlen(plist[i]->name) > w)
            w = (int)strlen(plist[i]->name);
    return w;
}

static const char *const shown[] = {"step_s", "rollout_s", "bubble_fraction", "train_fraction",
                                    "tail_fraction", "rollout_utilization", "accept_len",
                                    "drafter_quality", "off_policy_fraction", "mean_staleness",
                                    "trained_tokens_per_s", "off_policy_tokens"};
#define N_SHOWN (sizeof shown / sizeof shown[0])
enum { I_TOK_S = 10, I_OFFTOK = 11 }; /* shown[]: trained_tokens_per_s, off_policy_tokens */

/* {"<metric>": {"median", "p5", "p95"}, ...} of policy i. */
static json_t *boot_json(const boot_result *b, int i)
{
    json_t *o = json_object();
    for (int k = 0; k < b->nk; k++) {
        const boot_stat *st = &b->stat[(size_t)i * b->nk + k];
        json_t *x = json_object();
        json_object_set_new(x, "median", json_real(st->median));
        json_object_set_new(x, "p5", json_real(st->p5));
        json_object_set_new(x, "p95", json_real(st->p95));
        json_object_set_new(o, b->keys[k], x);
    }
    return o;
}

static void boot_print(FILE *f, const boot_result *b, const policy *const *plist, int np,
                       uint64_t seed)
{
    static const char *const cols[] = {"speedup", "rollout_speedup", "step_s", "rollout_s",
                                       "bubble_fraction"};
    int w = name_width(plist, np);
    fprintf(f, "\nbootstrap: %d resamples of the prompts (seed %llu): median [5%%, 95%%]\n%-*s",
            b->n, (unsigned long long)seed, w, "policy");
    const size_t nc = sizeof cols / sizeof cols[0];
    for (size_t k = 0; k < nc; k++)
        fprintf(f, k + 1 < nc ? " %-27s" : " %s", cols[k]);
    fprintf(f, "\n");
    for (int i = 0; i < np; i++) {
        fprintf(f, "%-*s", w, plist[i]->name);
        for (size_t k = 0; k < nc; k++) {
            const boot_stat *st = boot_get(b, i, cols[k]);
            char cell[80];
            snprintf(cell, sizeof cell, "%.3f [%.3f, %.3f]", st->median, st->p5, st->p95);
            fprintf(f, k + 1 < nc ? " %-27s" : " %s", cell);
        }
        fprintf(f, "\n");
    }
}

/* What the runs produced, for the table and the report. */
typedef struct cmp_table {
    const scenario *s;
    const llm_desc *m;
    const hw_desc *hw;
    int steps, np, nt, nrow;      /* nt: --train strategies (0: none); nrow = np x max(nt, 1) */
    const policy *const *plist;
    const char (*row_train)[32];  /* train strategy per row */
    const double (*val)[N_SHOWN]; /* shown[] per row */
    const double *upd;            /* update_s per row */
    const boot_result *boot;      /* NULL: no bootstrap */
    const double *step_s;         /* --per-step: nrow x steps step times, else NULL */
} cmp_table;

/* The comparison table (and the bootstrap's) as the terminal shows it. */
static void table_print(FILE *f, const cmp_table *t)
{
    const scenario *s = t->s;
    const int nt = t->nt, np = t->np;
    const double(*val)[N_SHOWN] = t->val;
    char name[sizeof s->name], mn[64], hn[64];
    fprintf(f, "compare  scenario %s  model %s  hw %s  seed %llu  steps %d (means over steps)\n\n",
            cmd_flat(s->name, name, sizeof name), cmd_flat(t->m->name, mn, sizeof mn),
            cmd_flat(t->hw->name, hn, sizeof hn), (unsigned long long)s->seed, t->steps);
    int w = name_width(t->plist, np);
    fprintf(f, "%-*s ", w, "policy");
    if (nt)
        fprintf(f, "%-13s ", "strategy");
    fprintf(f, "%9s %9s %7s %7s %6s %6s %6s %7s %6s %6s %7s %6s %7s %7s", "step_s", "rollout_s",
            "speedup", "ro_spd", "bubble", "train", "tail", "util", "accept", "q", "offpol",
            "stale", "offtok", "goodput");
    fprintf(f, nt ? " %9s\n" : "\n", "update_s");
    for (int i = 0; i < t->nrow; i++) {
        const double *x = val[i];
        fprintf(f, "%-*s ", w, t->plist[i % np]->name);
        if (nt)
            fprintf(f, "%-13s ", t->row_train[i]);
        fprintf(f, "%9.2f %9.2f %7.3f %7.3f %6.3f %6.3f %6.3f %7.3f %6.2f %6.3f %7.3f %6.2f %7.3f %7.3f",
                x[0], x[1], val[0][0] / x[0], val[0][1] / x[1], x[2], x[3], x[4], x[5], x[6], x[7],
                x[8], x[9], x[I_OFFTOK], val[0][I_TOK_S] > 0 ? x[I_TOK_S] / val[0][I_TOK_S] : 0.0);
        fprintf(f, nt ? " %9.2f\n" : "\n", t->upd[i]);
    }
    if (t->boot)
        boot_print(f, t->boot, t->plist, np, s->seed);
    if (t->step_s) {
        fprintf(f, "\nstep_s per RL step\n%-*s ", w, "policy");
        if (nt)
            fprintf(f, "%-13s ", "strategy");
        for (int k = 0; k < t->steps; k++)
            fprintf(f, " %8d", k + 1);
        fprintf(f, "\n");
        for (int i = 0; i < t->nrow; i++) {
            fprintf(f, "%-*s ", w, t->plist[i % np]->name);
            if (nt)
                fprintf(f, "%-13s ", t->row_train[i]);
            for (int k = 0; k < t->steps; k++)
                fprintf(f, " %8.2f", t->step_s[(size_t)i * (size_t)t->steps + (size_t)k]);
            fprintf(f, "\n");
        }
    }
}

/* The command line without -o DIR, for the report's page; argi is the
 * index of SCENARIO, where getopt_long moved it after the options. */
static void command_line(int argc, char **argv, int argi, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "tailsim compare %s", argv[argi]);
    for (int i = 1; i < argi && i < argc && k < n; i++) {
        if (!strcmp(argv[i], "-o")) {
            i++;
            continue;
        }
        if (!strncmp(argv[i], "-o", 2) || !strcmp(argv[i], "--"))
            continue;
        k += (size_t)snprintf(buf + k, n - k, " %s", argv[i]);
    }
}

/* Reruns the comparison as a report (cli/paper.c) and writes o->dir/index.md
 * and index.html with the table t as the terminal shows it.  Returns 0, or
 * -1 with the problem. */
static int write_report(const paper_compare_opts *o, const cmp_table *t, ts_err *e)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        return ts_errf(e, "out of memory");
    table_print(f, t);
    if (fclose(f)) {
        free(text);
        return ts_errf(e, "out of memory");
    }
    paper_doc d;
    int rc = -1;
    if (paper_run_compare(o, &d, e))
        goto done;
    d.terminal = text;
    rc = paper_report_write(&d, o->dir, e);
    paper_free(&d);
done:
    free(text);
    return rc;
}

/* Parses the command line into o (the lists by compare_lists()).  Returns
 * -1 to go on, or the exit status (0 after --help, 2 after a usage error,
 * said on stderr). */
static int compare_parse(int argc, char **argv, compare_opts *o)
{
    static const struct option lo[] = {
        {"policies", required_argument, 0, 'P'},
        OPTS_LONG_STEPS,
        OPTS_LONG_SEED,
        OPTS_LONG_TRACE,
        OPTS_LONG_SET,
        OPTS_LONG_JSON,
        {"train", required_argument, 0, 'T'},
        {"bootstrap", required_argument, 0, 'B'},
        {"per-step", no_argument, 0, 'X'},
        OPTS_LONG_HELP,
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    opts_init(&o->co, "compare", OPTS_MAX_SETS);
    int64_t v;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "ho:", lo, NULL)) != -1) {
        int t = opts_step(&o->co, c, optarg, usage);
        if (t == OPTS_STEP_TAKEN)
            continue;
        if (t != OPTS_STEP_OTHER)
            return t;
        switch (c) {
        case 'P': o->pols = optarg; break;
        case 'T': o->trains = optarg; break;
        case 'X': o->per_step = 1; break;
        case 'B':
            if (ts_parse_i64(optarg, 1, 100000, &v)) {
                fprintf(stderr, "tailsim compare: --bootstrap '%s': expected an integer in [1, 100000]\n", optarg);
                return 2;
            }
            o->nboot = (int)v;
            break;
        default: usage(stderr); return 2;
        }
    }
    if (!(o->scenario = opts_scenario(&o->co, argc, argv)))
        return 2;
    o->argi = optind;
    return -1;
}

/* The policies (--policies, else every registered one) and train strategies
 * (--train) of o, and the combinations refused.  Returns -1 to go on, or 2
 * after saying what is wrong on stderr. */
static int compare_lists(compare_opts *o)
{
    if (o->co.out && o->trains) {
        fprintf(stderr, "tailsim compare: --train cannot be drawn with -o: the report draws one "
                        "train strategy (use --set train.strategy=S instead)\n");
        return 2;
    }
    if (!o->pols) {
        size_t n;
        const policy *const *all = policy_all(&n);
        for (size_t i = 0; i < n && o->np < MAX_POL; i++)
            o->plist[o->np++] = all[i];
    } else {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", o->pols);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (o->np == MAX_POL || !(o->plist[o->np] = policy_find(tok))) {
                fprintf(stderr, "tailsim compare: unknown policy '%s' (try --help)\n", tok);
                return 2;
            }
            o->np++;
        }
    }
    snprintf(o->tbuf, sizeof o->tbuf, "%s", o->trains ? o->trains : "");
    for (char *tok = strtok(o->tbuf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->nt == MAX_TRAIN) {
            fprintf(stderr, "tailsim compare: --train: at most %d strategies\n", MAX_TRAIN);
            return 2;
        }
        o->tlist[o->nt++] = tok;
    }
    if (o->nboot && o->nt > 1) {
        fprintf(stderr, "tailsim compare: --bootstrap takes one --train strategy at most "
                        "(run one compare per strategy)\n");
        return 2;
    }
    return -1;
}

/* What the runs produced: one row per policy x train strategy (policy
 * fastest). */
typedef struct compare_out {
    scenario s;
    hw_desc hw;
    llm_desc m;
    trace **tr;                   /* the steps every row replays, n_tr of them */
    int n_tr;
    int nrow;
    double (*val)[N_SHOWN];       /* shown[] per row (means over the steps) */
    double upd[MAX_ROWS];         /* update_s per row */
    json_t *per_step[MAX_ROWS];   /* --json over several steps: each step's metrics per row */
    double *step_s;               /* --per-step: nrow x steps step times, else NULL */
    char row_train[MAX_ROWS][32]; /* train strategy per row */
    boot_result boot;             /* --bootstrap's, else empty */
} compare_out;

/* Runs row `row` of o into r (the scenario's train.strategy set to the
 * row's).  Returns 0, or -1 with e set. */
static int compare_row(const compare_opts *o, compare_out *r, int row, ts_err *e)
{
    const int steps = o->co.steps;
    const policy *p = o->plist[row % o->np];
    char set[64];
    snprintf(set, sizeof set, "train.strategy=%s",
             o->nt ? o->tlist[row / o->np] : r->s.train_strategy);
    if (scenario_set(&r->s, set, e))
        return -1;
    snprintf(r->row_train[row], sizeof r->row_train[row], "%s", r->s.train_strategy);
    multistep_result m;
    run_record *rec = run_record_new();
    if (!rec)
        return ts_errf(e, "out of memory");
    if (policy_run(&r->s, p, &r->hw, &r->m, r->tr, steps, 1, &m, NULL, e)) {
        ts_err_prefix(e, "policy %s, train %s: ", p->name, r->s.train_strategy);
        run_record_free(rec);
        return -1;
    }
    for (int k = 0; r->step_s && k < steps; k++)
        r->step_s[(size_t)row * (size_t)steps + (size_t)k] = m.step[k].step_s;
    int bad = run_multistep_metrics(rec, &m, r->tr, 1,
                                    o->co.json && steps > 1 ? &r->per_step[row] : NULL);
    for (size_t k = 0; k < N_SHOWN && !bad; k++)
        bad = run_get_metric(rec, shown[k], &r->val[row][k]);
    if (!bad)
        bad = run_get_metric(rec, "update_s", &r->upd[row]);
    run_record_free(rec);
    multistep_result_free(&m);
    return bad ? ts_errf(e, "out of memory") : 0;
}

/* Runs every row of o, then the bootstrap, into r, drawing pg's progress
 * line (rows, then resamples x policies).  Returns 0, or -1 with e set. */
static int compare_rows(const compare_opts *o, compare_out *r, progress *pg, ts_err *e)
{
    for (int row = 0; row < r->nrow; row++) {
        progress_step(pg, o->plist[row % o->np]->name, row, r->nrow);
        if (compare_row(o, r, row, e))
            return -1;
    }
    progress_step(pg, o->plist[(r->nrow - 1) % o->np]->name, r->nrow, r->nrow);
    pg->what = "bootstrap";
    if (o->nboot && boot_compare(&r->s, o->plist, o->np, &r->hw, &r->m, r->tr, o->co.steps,
                                 o->nboot, shown, (int)N_SHOWN, progress_cb, pg, &r->boot, e))
        return -1;
    return 0;
}

/* Sets up the scenario and its steps and runs every row of o, and the
 * bootstrap, into r (zeroed first; free with compare_out_free() whatever
 * this returns).  Prints nothing but the progress line on a terminal
 * (cleared before this returns).  Returns 0, or -1 with e set. */
static int compare_run(const compare_opts *o, compare_out *r, ts_err *e)
{
    memset(r, 0, sizeof *r);
    const opts_common *co = &o->co;
    r->nrow = o->np * (o->nt ? o->nt : 1);
    r->tr = calloc((size_t)co->steps, sizeof *r->tr);
    r->val = calloc((size_t)r->nrow, sizeof *r->val);
    r->step_s = o->per_step ? calloc((size_t)r->nrow * (size_t)co->steps, sizeof *r->step_s)
                            : NULL;
    if (!r->tr || !r->val || (o->per_step && !r->step_s))
        return ts_errf(e, "out of memory");
    r->n_tr = co->steps;
    if (run_setup(o->scenario, co->sets, co->n_sets, co->have_seed, co->seed, &r->s, &r->hw,
                  &r->m, e) ||
        policy_load_steps(&r->s, co->trace, co->steps, r->tr, e) ||
        run_check_placement(&r->s, co->trace, o->plist, o->np, r->tr, co->steps, e))
        return -1;
    progress pg;
    progress_start(&pg, "tailsim compare");
    int rc = compare_rows(o, r, &pg, e);
    progress_end(&pg);
    return rc;
}

static void compare_out_free(compare_out *r)
{
    boot_result_free(&r->boot);
    for (int i = 0; i < r->nrow; i++)
        json_decref(r->per_step[i]);
    for (int k = 0; r->tr && k < r->n_tr; k++)
        trace_free(r->tr[k]);
    free(r->tr);
    free(r->val);
    free(r->step_s);
}

/* The table of o's runs r, for table_print(). */
static cmp_table compare_table(const compare_opts *o, const compare_out *r)
{
    const cmp_table t = {&r->s,    &r->m,    &r->hw,   o->co.steps,
                         o->np,    o->nt,    r->nrow,  o->plist,
                         r->row_train, (const double(*)[N_SHOWN])r->val, r->upd,
                         o->nboot ? &r->boot : NULL, r->step_s};
    return t;
}

/* Prints the comparison as one JSON object; moves r's per-step metrics into
 * it.  Returns 0, or -1 with e set. */
static int compare_emit_json(const compare_opts *o, compare_out *r, ts_err *e)
{
    const double(*val)[N_SHOWN] = (const double(*)[N_SHOWN])r->val;
    json_t *out = json_object(), *arr = json_array();
    if (!out || !arr) {
        json_decref(out);
        json_decref(arr);
        return ts_errf(e, "out of memory");
    }
    json_object_set_new(out, "command", json_string("compare"));
    json_object_set_new(out, "scenario", json_string(r->s.name));
    json_object_set_new(out, "model", json_string(r->m.name));
    json_object_set_new(out, "hw", json_string(r->hw.name));
    json_object_set_new(out, "seed", json_integer((json_int_t)r->s.seed));
    json_object_set_new(out, "steps", json_integer(o->co.steps));
    for (int i = 0; i < r->nrow; i++) {
        const policy *pol = o->plist[i % o->np];
        json_t *p = json_object();
        json_object_set_new(p, "policy", json_string(pol->name));
        if (o->nt) {
            json_object_set_new(p, "train", json_string(r->row_train[i]));
            json_object_set_new(p, "update_s", json_real(r->upd[i]));
        }
        json_object_set_new(p, "source", json_string(pol->source));
        for (size_t k = 0; k < N_SHOWN; k++)
            json_object_set_new(p, shown[k], json_real(val[i][k]));
        json_object_set_new(p, "speedup", json_real(val[0][0] / val[i][0]));
        json_object_set_new(p, "rollout_speedup", json_real(val[0][1] / val[i][1]));
        json_object_set_new(p, "goodput_speedup",
                            json_real(val[0][I_TOK_S] > 0 ? val[i][I_TOK_S] / val[0][I_TOK_S] : 0.0));
        if (o->nboot)
            json_object_set_new(p, "bootstrap", boot_json(&r->boot, i));
        if (r->per_step[i]) {
            json_object_set_new(p, "per_step", r->per_step[i]);
            r->per_step[i] = NULL;
        }
        json_array_append_new(arr, p);
    }
    if (o->nboot)
        json_object_set_new(out, "bootstrap", json_integer(o->nboot));
    json_object_set_new(out, "policies", arr);
    int rc = cmd_print_json(out, 10, e);
    json_decref(out);
    return rc;
}

/* -o DIR: the comparison's report with table t, and a line on stderr.
 * Returns 0, or -1 with e set. */
static int compare_report(const compare_opts *o, const compare_out *r, const cmp_table *t,
                          int argc, char **argv, ts_err *e)
{
    const opts_common *co = &o->co;
    char cmdline[2048];
    command_line(argc, argv, o->argi, cmdline, sizeof cmdline);
    const paper_compare_opts po = {co->out,       o->scenario, o->pols, co->sets,
                                   co->n_sets,    co->have_seed, co->seed, co->trace,
                                   co->steps,     o->nboot,    o->nboot ? &r->boot : NULL,
                                   cmdline};
    fflush(stdout);
    if (write_report(&po, t, e))
        return -1;
    fprintf(stderr, "tailsim compare: report: %s/index.html (and index.md)\n", co->out);
    return 0;
}

int cmd_compare(int argc, char **argv)
{
    compare_opts o;
    int prc = compare_parse(argc, argv, &o);
    if (prc < 0)
        prc = compare_lists(&o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    if (o.co.out && report_can_draw(o.co.out, &e)) {
        fprintf(stderr, "tailsim compare: -o %s: %s\n", o.co.out, e.msg);
        return 1;
    }
    compare_out r;
    int rc = 1;
    if (compare_run(&o, &r, &e))
        goto fail;
    const cmp_table tab = compare_table(&o, &r);
    if (o.co.json) {
        if (compare_emit_json(&o, &r, &e))
            goto fail;
    } else {
        table_print(stdout, &tab);
    }
    if (o.co.out && compare_report(&o, &r, &tab, argc, argv, &e))
        goto fail;
    run_note_carry("tailsim compare", o.pols, o.co.steps, ", and read goodput");
    run_note_truncation("tailsim compare", &r.s, r.tr, r.n_tr);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tailsim compare: %s\n", e.msg);
done:
    compare_out_free(&r);
    return rc;
}
