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
#include "cli/paper.h"

#define MAX_POL 16
#define MAX_TRAIN 8

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
    fprintf(f, "compare  scenario %s  model %s  hw %s  seed %llu  steps %d (means over steps)\n\n",
            s->name, t->m->name, t->hw->name, (unsigned long long)s->seed, t->steps);
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

/* The command line without -o DIR, for the report's page; call after
 * getopt, which moved SCENARIO to argv[optind]. */
static void command_line(int argc, char **argv, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "tailsim compare %s", argv[optind]);
    for (int i = 1; i < optind && i < argc && k < n; i++) {
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

int cmd_compare(int argc, char **argv)
{
    static const struct option lo[] = {
        {"policies", required_argument, 0, 'P'}, {"steps", required_argument, 0, 'n'},
        {"seed", required_argument, 0, 's'},     {"trace", required_argument, 0, 't'},
        {"set", required_argument, 0, 'S'},      {"json", no_argument, 0, 'j'},
        {"train", required_argument, 0, 'T'},   {"bootstrap", required_argument, 0, 'B'},
        {"per-step", no_argument, 0, 'X'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
    const char *pols = NULL, *trains = NULL, *trace_file = NULL, *out_dir = NULL, *sets[64];
    int n_sets = 0, steps = 1, json = 0, have_seed = 0, nboot = 0, per_step_table = 0;
    uint64_t seed = 0;
    int64_t v;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "ho:", lo, NULL)) != -1) {
        switch (c) {
        case 'P': pols = optarg; break;
        case 'o': out_dir = optarg; break;
        case 'T': trains = optarg; break;
        case 't': trace_file = optarg; break;
        case 'j': json = 1; break;
        case 'X': per_step_table = 1; break;
        case 'h': usage(stdout); return 0;
        case 'n':
            if (ts_parse_i64(optarg, 1, 100000, &v)) {
                fprintf(stderr, "tailsim compare: --steps '%s': expected an integer in [1, 100000]\n", optarg);
                return 2;
            }
            steps = (int)v;
            break;
        case 'B':
            if (ts_parse_i64(optarg, 1, 100000, &v)) {
                fprintf(stderr, "tailsim compare: --bootstrap '%s': expected an integer in [1, 100000]\n", optarg);
                return 2;
            }
            nboot = (int)v;
            break;
        case 's':
            if (ts_parse_i64(optarg, 0, INT64_MAX, &v)) {
                fprintf(stderr, "tailsim compare: --seed '%s': expected a non-negative integer\n", optarg);
                return 2;
            }
            seed = (uint64_t)v;
            have_seed = 1;
            break;
        case 'S':
            if (n_sets == 64) {
                fprintf(stderr, "tailsim compare: too many --set options\n");
                return 2;
            }
            sets[n_sets++] = optarg;
            break;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "tailsim compare: expected exactly one SCENARIO (try --help)\n");
        return 2;
    }
    if (out_dir && trains) {
        fprintf(stderr, "tailsim compare: --train cannot be drawn with -o: the report draws one "
                        "train strategy (use --set train.strategy=S instead)\n");
        return 2;
    }
    /* the policy list */
    const policy *plist[MAX_POL];
    int np = 0;
    if (!pols) {
        size_t n;
        const policy *const *all = policy_all(&n);
        for (size_t i = 0; i < n && np < MAX_POL; i++)
            plist[np++] = all[i];
    } else {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", pols);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (np == MAX_POL || !(plist[np] = policy_find(tok))) {
                fprintf(stderr, "tailsim compare: unknown policy '%s' (try --help)\n", tok);
                return 2;
            }
            np++;
        }
    }
    /* the train strategies: the scenario's unless --train lists them */
    char tbuf[256], *tlist[MAX_TRAIN];
    int nt = 0;
    snprintf(tbuf, sizeof tbuf, "%s", trains ? trains : "");
    for (char *tok = strtok(tbuf, ","); tok; tok = strtok(NULL, ",")) {
        if (nt == MAX_TRAIN) {
            fprintf(stderr, "tailsim compare: --train: at most %d strategies\n", MAX_TRAIN);
            return 2;
        }
        tlist[nt++] = tok;
    }
    if (nboot && nt > 1) {
        fprintf(stderr, "tailsim compare: --bootstrap takes one --train strategy at most "
                        "(run one compare per strategy)\n");
        return 2;
    }
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    if (out_dir && report_can_draw(out_dir, &e)) {
        fprintf(stderr, "tailsim compare: -o %s: %s\n", out_dir, e.msg);
        return 1;
    }
    scenario s;
    hw_desc hw;
    llm_desc m;
    int rc = 1;
    trace **tr = calloc((size_t)steps, sizeof *tr);
    int ntr = nt ? nt : 1, nrow = np * ntr;
    double (*val)[N_SHOWN] = calloc((size_t)nrow, sizeof *val);
    double upd[MAX_POL * MAX_TRAIN]; /* update_s per row, shown with --train */
    json_t *per_step[MAX_POL * MAX_TRAIN] = {0}; /* --json over several steps: each step's */
    double *step_s = per_step_table ? calloc((size_t)nrow * (size_t)steps, sizeof *step_s) : NULL;
    json_t *out = json_object(), *arr = json_array();
    boot_result boot = {0};
    if (!tr || !val || !out || !arr || (per_step_table && !step_s)) {
        ts_errf(&e, "out of memory");
        goto fail;
    }
    if (run_setup(argv[optind], sets, n_sets, have_seed, seed, &s, &hw, &m, &e) ||
        policy_load_steps(&s, trace_file, steps, tr, &e))
        goto fail;
    char row_train[MAX_POL * MAX_TRAIN][32];
    for (int row = 0; row < nrow; row++) {
        int i = row % np;
        char set[64];
        snprintf(set, sizeof set, "train.strategy=%s", nt ? tlist[row / np] : s.train_strategy);
        if (scenario_set(&s, set, &e))
            goto fail;
        snprintf(row_train[row], sizeof row_train[row], "%s", s.train_strategy);
        multistep_result r;
        run_record *rec = run_record_new();
        if (!rec) {
            ts_errf(&e, "out of memory");
            goto fail;
        }
        if (policy_run(&s, plist[i], &hw, &m, tr, steps, 1, &r, NULL, &e)) {
            ts_err_prefix(&e, "policy %s, train %s: ", plist[i]->name, s.train_strategy);
            run_record_free(rec);
            goto fail;
        }
        for (int k = 0; step_s && k < steps; k++)
            step_s[(size_t)row * (size_t)steps + (size_t)k] = r.step[k].step_s;
        int bad = run_multistep_metrics(rec, &r, tr, 1, json && steps > 1 ? &per_step[row] : NULL);
        for (size_t k = 0; k < N_SHOWN && !bad; k++)
            bad = run_get_metric(rec, shown[k], &val[row][k]);
        if (!bad)
            bad = run_get_metric(rec, "update_s", &upd[row]);
        run_record_free(rec);
        multistep_result_free(&r);
        if (bad) {
            ts_errf(&e, "out of memory");
            goto fail;
        }
    }
    if (nboot && boot_compare(&s, plist, np, &hw, &m, tr, steps, nboot, shown, (int)N_SHOWN, &boot, &e))
        goto fail;
    const cmp_table tab = {&s, &m, &hw, steps, np, nt, nrow, plist,
                           (const char(*)[32])row_train, (const double(*)[N_SHOWN])val, upd,
                           nboot ? &boot : NULL, step_s};
    if (json) {
        json_object_set_new(out, "command", json_string("compare"));
        json_object_set_new(out, "scenario", json_string(s.name));
        json_object_set_new(out, "model", json_string(m.name));
        json_object_set_new(out, "hw", json_string(hw.name));
        json_object_set_new(out, "seed", json_integer((json_int_t)s.seed));
        json_object_set_new(out, "steps", json_integer(steps));
        for (int i = 0; i < nrow; i++) {
            json_t *p = json_object();
            json_object_set_new(p, "policy", json_string(plist[i % np]->name));
            if (nt) {
                json_object_set_new(p, "train", json_string(row_train[i]));
                json_object_set_new(p, "update_s", json_real(upd[i]));
            }
            json_object_set_new(p, "source", json_string(plist[i % np]->source));
            for (size_t k = 0; k < N_SHOWN; k++)
                json_object_set_new(p, shown[k], json_real(val[i][k]));
            json_object_set_new(p, "speedup", json_real(val[0][0] / val[i][0]));
            json_object_set_new(p, "rollout_speedup", json_real(val[0][1] / val[i][1]));
            json_object_set_new(p, "goodput_speedup",
                                json_real(val[0][I_TOK_S] > 0 ? val[i][I_TOK_S] / val[0][I_TOK_S] : 0.0));
            if (nboot)
                json_object_set_new(p, "bootstrap", boot_json(&boot, i));
            if (per_step[i]) {
                json_object_set_new(p, "per_step", per_step[i]);
                per_step[i] = NULL;
            }
            json_array_append_new(arr, p);
        }
        if (nboot)
            json_object_set_new(out, "bootstrap", json_integer(nboot));
        json_object_set(out, "policies", arr);
        if (cmd_print_json(out, 10, &e))
            goto fail;
    } else {
        table_print(stdout, &tab);
    }
    if (out_dir) {
        char cmdline[2048];
        command_line(argc, argv, cmdline, sizeof cmdline);
        const paper_compare_opts po = {out_dir, argv[optind], pols,  sets,
                                       n_sets,  have_seed,    seed,  trace_file,
                                       steps,   nboot,        nboot ? &boot : NULL,
                                       cmdline};
        fflush(stdout);
        if (write_report(&po, &tab, &e))
            goto fail;
        fprintf(stderr, "tailsim compare: report: %s/index.html (and index.md)\n", out_dir);
    }
    run_note_carry("tailsim compare", pols, steps, ", and read goodput");
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tailsim compare: %s\n", e.msg);
done:
    boot_result_free(&boot);
    for (int i = 0; i < nrow; i++)
        json_decref(per_step[i]);
    json_decref(arr);
    json_decref(out);
    if (tr)
        for (int k = 0; k < steps; k++)
            trace_free(tr[k]);
    free(tr);
    free(val);
    free(step_s);
    return rc;
}
