/*
 * `tailsim paper`: every shipped paper experiment run in one process, each
 * published number set against tailsim's value.  Two tables drive it
 * (cli/paper.c): the experiments (id, scenario, runner, policies, overrides)
 * and the published numbers (the paper's value with its citation and the
 * key of the tailsim value it is compared with).  Adding an experiment, e.g.
 * the joint TLT + DCP step once `train.strategy` exists, is one entry in
 * the first table, and its published numbers entries in the second.
 */
#ifndef TS_PAPER_H
#define TS_PAPER_H

#include <stdint.h>

#include "reports/paper_report.h"

typedef struct paper_opts {
    const char *dir;       /* output directory (created) */
    int quick;             /* 1: smaller TLT end-to-end traces, no bootstrap unless asked */
    int bootstrap;         /* resamples for the TLT / DAPO speedups; -1: the default */
    /* Called before each experiment and figure batch with a one-line message
     * (the driver prints it on stderr); may be NULL. */
    void (*progress)(void *ctx, const char *msg);
    void *progress_ctx;
} paper_opts;

/* The default resamples of a full run (quick: 0). */
#define PAPER_BOOTSTRAP_DEFAULT 10

/* Runs every experiment, draws the per-experiment figures (Gantt charts and
 * length CDFs through report_write, DCP tables and imbalance through
 * dcp_report_write) under o->dir, and fills d (rows allocated: free with
 * paper_free).  An experiment whose input is absent (a ../shared trace) is
 * not an error: its rows say why they were not run.  Returns 0, or -1 with
 * the experiment's id and the problem. */
int paper_run(const paper_opts *o, paper_doc *d, ts_err *e);
/* Frees what paper_run allocated (rows and tables); a second call is a no-op. */
void paper_free(paper_doc *d);

/* One comparison drawn as a report (`tailsim compare SCENARIO ... -o DIR`). */
typedef struct paper_compare_opts {
    const char *dir;               /* output directory (created) */
    const char *scenario;          /* name or path */
    const char *policies;          /* comma-separated; NULL: every registered policy */
    const char *const *sets;       /* "sec.key=val" overrides, n_sets of them (at most
                                    * PAPER_MAX_USER_SETS) */
    int n_sets;
    int have_seed;                 /* 1: seed replaces the scenario's */
    uint64_t seed;
    const char *trace;             /* trace file in place of the scenario's, or NULL */
    int steps;                     /* RL steps per policy (< 2: one) */
    int bootstrap;                 /* resamples of the prompts (0: none) */
    const struct boot_result *boot; /* that bootstrap already run over the same policies, step
                                    * and seed (`tailsim compare` has), or NULL: run it */
    const char *setup;             /* how it was run (the command line), stated on the page */
} paper_compare_opts;

/* Runs one RL step of the scenario under each policy as `tailsim paper`'s
 * policy comparisons do (cli/paper_exp.c), into d: the result table (with
 * the bootstrap range when o->bootstrap), a Gantt chart and length CDF per
 * policy (drawn under o->dir), each policy's step and rollout speedup over
 * the first, and, when a policy speculates, accepted length vs draft depth.
 * No published rows (d->n_rows is 0).  An absent trace is an error here.
 * Returns 0 (free d with paper_free), or -1 with the problem. */
int paper_run_compare(const paper_compare_opts *o, paper_doc *d, ts_err *e);

/* The published numbers (templates: sim and ran unset), n entries. */
const paper_row *paper_published(size_t *n);

#endif
