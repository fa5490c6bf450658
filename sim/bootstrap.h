/*
 * Bootstrap over prompts: how much a policy comparison depends on which
 * prompts the step happened to draw.  A resample draws a trace's prompts with
 * replacement (whole groups: a prompt keeps its G responses together, as GRPO
 * samples them), keeping each step's prompt count; every policy then replays
 * the same resampled steps, so speedups are paired.  The median and the 5-95%
 * range are taken over the resamples.  Deterministic for a seed: one RNG
 * stream, ts_rng_new(seed, BOOT_STREAM), draws every resample in order.
 */
#ifndef TS_BOOTSTRAP_H
#define TS_BOOTSTRAP_H

#include "sim/policy/policy.h"

#define BOOT_STREAM 0xB0075EEDull

/* A new trace with t's prompt count, each prompt drawn uniformly with
 * replacement from t (copied with its group, step and dp_rank; prompt ids
 * renumbered 0..n-1 so the draws stay distinct).  Returns NULL with a
 * message on allocation failure or an empty trace; free with trace_free(). */
trace *boot_resample(const trace *t, gsl_rng *r, ts_err *e);

/* Median and the 5% / 95% quantiles (linear interpolation between order
 * statistics) of x[0..n-1]; sorts x in place.  n >= 1.  Cannot fail. */
void boot_summary(double *x, int n, double *median, double *p5, double *p95);

/* The metrics of one policy in the compare table, summarised. */
typedef struct boot_stat {
    double median, p5, p95;
} boot_stat;

typedef struct boot_result {
    int n;              /* resamples */
    int np;             /* policies */
    int nk;             /* metrics: the keys given, then "speedup", "rollout_speedup" */
    const char **keys;  /* nk names (the caller's strings and two literals) */
    boot_stat *stat;    /* np * nk, policy-major */
} boot_result;

/* A progress callback: `done` of `total` units of work are done (called
 * from the loop, in order; ctx is the caller's).  The library prints nothing
 * itself; the CLI draws a line on a terminal. */
typedef void (*boot_progress_fn)(void *ctx, int done, int total);

/* Runs n resamples: each draws every one of the `steps` traces anew with
 * boot_resample(), replays them under each of the np policies with
 * policy_run() (whole RL steps) and records the mean over steps of each of
 * the nk metric keys (names as run_multistep_metrics() writes them; "step_s"
 * and "rollout_s" must be among them), plus the step and rollout speedups
 * over plist[0] on the same resample.  When progress is not NULL it is
 * called with (pctx, done, n * np) after each policy of each resample.
 * Returns 0 (free with boot_result_free) or -1 naming the policy and
 * resample that failed. */
int boot_compare(const scenario *s, const policy *const *plist, int np, const hw_desc *hw,
                 const llm_desc *m, trace *const *tr, int steps, int n, const char *const *keys,
                 int nk, boot_progress_fn progress, void *pctx, boot_result *out, ts_err *e);
/* The summary of metric key for policy i, or NULL when absent. */
const boot_stat *boot_get(const boot_result *b, int i, const char *key);
void boot_result_free(boot_result *b);

#endif
