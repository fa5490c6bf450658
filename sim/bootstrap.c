/*
 * Bootstrap over prompts for `tailsim compare --bootstrap N` and the paper
 * report.  A resample keeps each step's prompt count and draws its prompts
 * uniformly with replacement (gsl_rng_uniform_int), each with its whole group
 * of responses; all policies replay the same resampled steps, so the speedup
 * of a resample is a paired ratio.  Cost: n x policies x steps RL steps.
 * Invariants: one RNG stream (ts_rng_new(seed, BOOT_STREAM)) drawn in a fixed
 * order, so the result is a function of the seed, the trace and the
 * scenario; a trace whose prompts are all identical resamples to itself, so
 * its range collapses to a point.  Nothing here prints.
 */
#include "sim/bootstrap.h"

#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "common/util.h"
#include "sim/run.h"
#include "traces/reward.h"

trace *boot_resample(const trace *t, gsl_rng *r, ts_err *e)
{
    if (!t || t->n_prompts == 0) {
        ts_errf(e, "bootstrap: empty trace");
        return NULL;
    }
    trace *o = trace_new();
    if (!o) {
        ts_errf(e, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[gsl_rng_uniform_int(r, t->n_prompts)];
        if (trace_add_prompt(o, p, e)) {
            trace_free(o);
            return NULL;
        }
        o->prompts[o->n_prompts - 1].prompt_id = (int32_t)i;
    }
    if (reward_copy(o, t, e)) { /* the step's recorded reward times stay the step's */
        trace_free(o);
        return NULL;
    }
    return o;
}

void boot_summary(double *x, int n, double *median, double *p5, double *p95)
{
    gsl_sort(x, 1, (size_t)n);
    *median = gsl_stats_median_from_sorted_data(x, 1, (size_t)n);
    *p5 = gsl_stats_quantile_from_sorted_data(x, 1, (size_t)n, 0.05);
    *p95 = gsl_stats_quantile_from_sorted_data(x, 1, (size_t)n, 0.95);
}

const boot_stat *boot_get(const boot_result *b, int i, const char *key)
{
    for (int k = 0; k < b->nk; k++)
        if (!strcmp(b->keys[k], key))
            return &b->stat[(size_t)i * b->nk + k];
    return NULL;
}

void boot_result_free(boot_result *b)
{
    if (!b)
        return;
    free(b->keys);
    free(b->stat);
    memset(b, 0, sizeof *b);
}

/* Runs one policy on the resampled steps and writes the mean over steps of
 * each key into v[0..nk-1].  Returns 0 or -1. */
static int one_policy(const scenario *s, const policy *p, const hw_desc *hw, const llm_desc *m,
                      trace *const *tr, int steps, const char *const *keys, int nk, double *v,
                      ts_err *e)
{
    multistep_result r;
    run_record *rec = run_record_new();
    if (!rec)
        return ts_errf(e, "out of memory");
    if (policy_run(s, p, hw, m, tr, steps, 1, &r, NULL, e)) {
        run_record_free(rec);
        return -1;
    }
    int rc = run_multistep_metrics(rec, &r, tr, 1, NULL) ? ts_errf(e, "out of memory") : 0;
    for (int k = 0; k < nk && !rc; k++)
        if (run_get_metric(rec, keys[k], &v[k]))
            rc = ts_errf(e, "bootstrap: no metric '%s'", keys[k]);
    run_record_free(rec);
    multistep_result_free(&r);
    return rc;
}

int boot_compare(const scenario *s, const policy *const *plist, int np, const hw_desc *hw,
                 const llm_desc *m, trace *const *tr, int steps, int n, const char *const *keys,
                 int nk, boot_progress_fn progress, void *pctx, boot_result *out, ts_err *e)
{
    memset(out, 0, sizeof *out);
    int ks = -1, kr = -1;
    for (int k = 0; k < nk; k++) {
        if (!strcmp(keys[k], "step_s"))
            ks = k;
        if (!strcmp(keys[k], "rollout_s"))
            kr = k;
    }
    if (ks < 0 || kr < 0 || n < 1 || np < 1)
        return ts_errf(e, "bootstrap: needs step_s and rollout_s, n >= 1 and a policy");
    int NK = nk + 2, rc = -1;
    gsl_rng *rng = ts_rng_new(s->seed, BOOT_STREAM);
    trace **rs = calloc((size_t)steps, sizeof *rs);
    double *x = calloc((size_t)np * NK * n, sizeof *x); /* [policy][metric][resample] */
    double *v = calloc((size_t)np * nk, sizeof *v);
    out->keys = calloc((size_t)NK, sizeof *out->keys);
    out->stat = calloc((size_t)np * NK, sizeof *out->stat);
    if (!rng || !rs || !x || !v || !out->keys || !out->stat) {
        ts_errf(e, "out of memory");
        goto done;
    }
    for (int b = 0; b < n; b++) {
        for (int k = 0; k < steps; k++) {
            trace_free(rs[k]);
            if (!(rs[k] = boot_resample(tr[k], rng, e)))
                goto done;
        }
        for (int i = 0; i < np; i++) {
            if (one_policy(s, plist[i], hw, m, rs, steps, keys, nk, &v[(size_t)i * nk], e)) {
                ts_err_prefix(e, "bootstrap resample %d, policy %s: ", b + 1, plist[i]->name);
                goto done;
            }
            if (progress)
                progress(pctx, b * np + i + 1, n * np);
        }
        for (int i = 0; i < np; i++) {
            double *vi = &v[(size_t)i * nk];
            for (int k = 0; k < nk; k++)
                x[((size_t)i * NK + k) * n + b] = vi[k];
            x[((size_t)i * NK + nk) * n + b] = v[ks] / vi[ks];
            x[((size_t)i * NK + nk + 1) * n + b] = v[kr] / vi[kr];
        }
    }
    for (int k = 0; k < nk; k++)
        out->keys[k] = keys[k];
    out->keys[nk] = "speedup";
    out->keys[nk + 1] = "rollout_speedup";
    for (int i = 0; i < np; i++)
        for (int k = 0; k < NK; k++) {
            boot_stat *st = &out->stat[(size_t)i * NK + k];
            boot_summary(&x[((size_t)i * NK + k) * n], n, &st->median, &st->p5, &st->p95);
        }
    out->n = n;
    out->np = np;
    out->nk = NK;
    rc = 0;
done:
    if (rc)
        boot_result_free(out);
    if (rs)
        for (int k = 0; k < steps; k++)
            trace_free(rs[k]);
    free(rs);
    free(x);
    free(v);
    if (rng)
        gsl_rng_free(rng);
    return rc;
}
