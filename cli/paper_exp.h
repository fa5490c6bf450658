/*
 * Internals of `tailsim paper` shared by cli/paper.c (the tables and the
 * driver) and the experiment runners (cli/paper_exp.c: speculative decoding
 * and policy comparisons; cli/paper_dcp.c: DCP strategies).  Not a public
 * interface: use cli/paper.h.
 */
#ifndef TS_PAPER_EXP_H
#define TS_PAPER_EXP_H

#include "cli/paper.h"

#define PAPER_MAX_VALS 256
#define PAPER_MAX_SETS 4
#define PAPER_MAX_USER_SETS 64 /* ad-hoc --set overrides (as `tailsim compare` takes) */

typedef struct paper_val {
    char key[96];     /* "<experiment id>/<name>", e.g. "tlt-7b/tlt.speedup" */
    double v;         /* value in the published row's unit */
    double lo, hi;    /* bootstrap 5-95% range, NAN when none */
} paper_val;

typedef struct paper_ctx {
    const paper_opts *o;
    paper_doc *doc;
    double t0;                     /* wall clock at the start, for progress */
    int boot;                      /* bootstrap resamples (0: none) */
    paper_val vals[PAPER_MAX_VALS];
    int n_vals;
    char skip_id[8][32], skip_why[8][160];
    int n_skip;
    /* One ad-hoc comparison (paper_run_compare, `tailsim compare -o`); all
     * zero for `tailsim paper`. */
    int adhoc;                     /* 1: a CDF per policy, the speedup bars, the accepted-length
                                    * vs depth plot when a policy speculates */
    const char *const *user_sets;  /* overrides applied after the experiment's own */
    int n_user_sets;
    int have_seed;                 /* 1: seed replaces the scenario's */
    uint64_t seed;
    const char *trace;             /* trace file in place of the scenario's, or NULL */
    const struct boot_result *boot_done; /* the comparison's bootstrap, already run (or NULL) */
} paper_ctx;

struct paper_exp;
typedef int (*paper_runner)(const struct paper_exp *x, paper_ctx *c, ts_err *e);

typedef struct paper_exp {
    const char *id;        /* key prefix and output subdirectory */
    const char *title;
    const char *scenario;
    paper_runner run;
    const char *arg;       /* compare: policy list (NULL: policy_all()); dcp: "scale" for the
                            * imbalance-vs-GPUs figure */
    const char *boot;      /* compare: the policies the bootstrap reruns (NULL: all of them;
                            * the first listed is the speedup reference) */
    const char *sets[PAPER_MAX_SETS];       /* scenario overrides, NULL-terminated */
    const char *quick_sets[PAPER_MAX_SETS]; /* added under --quick */
    const char *note;      /* compare: appended to the result table's note (NULL: none) */
    int steps;             /* compare: RL steps per policy (0 or 1: one) */
} paper_exp;

/* Runners: 0, or -1 with a message.  An absent input is not an error: the
 * runner records it with paper_skip() and returns 0. */
int paper_exp_specdec(const paper_exp *x, paper_ctx *c, ts_err *e);
int paper_exp_compare(const paper_exp *x, paper_ctx *c, ts_err *e);
int paper_exp_dcp(const paper_exp *x, paper_ctx *c, ts_err *e);
/* VideoSys' released DCP configurations on H100 and H200 (cli/paper_dcp_released.c). */
int paper_exp_dcp_released(const paper_exp *x, paper_ctx *c, ts_err *e);

/* The recorded Search-R1 step against tailsim's simulation of it
 * (cli/paper_agentic.c). */
int paper_exp_agentic(const paper_exp *x, paper_ctx *c, ts_err *e);

/* Records a value under "<x->id>/<name>" (cli/paper.c).  Returns 0, or -1 when full. */
int paper_put(paper_ctx *c, const char *key, double v, double lo, double hi);
/* Adds a calibration name to the report's list unless present. */
void paper_note_calibration(paper_ctx *c, const char *calib);
/* Reports progress: fmt with two %s. */
void paper_progress(paper_ctx *c, const char *fmt, const char *a, const char *b);
/* The published value set against tailsim's value `key` (the low end of a
 * range, the bound of an "up to"), NAN when no row has that key. */
double paper_published_value(const char *key);
/* Marks experiment x as not run, with why (also listed in the report). */
void paper_skip(paper_ctx *c, const paper_exp *x, const char *why);

#endif
