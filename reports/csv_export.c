/*
 * CSV exports of a run (csv_export.h): responses.csv, a row per response as
 * the record holds it, and phases.csv, a row per (RL step, phase) with its
 * span and its busy / idle / drafter-training GPU-seconds.
 *
 * Columns hold numbers and the fixed phase names only, so no field needs
 * quoting; the first line is the header (no comment lines, which CSV
 * readers do not skip).  Seconds are written with 9 significant digits
 * ("%.9g"), as the report's .dat files are.  Steps come from r->step_t0
 * (empty for one step): an interval is attributed to the last step starting
 * at or before its start, found by binary search, so phases.csv costs
 * O(n log s) for n intervals and s steps, plus a table of s x PH_COUNT
 * totals.  Files appear atomically (ts_atomic_*); nothing here prints.
 */
#include "reports/csv_export.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/util.h"

int csv_write_responses(const run_record *r, const char *path, ts_err *e)
{
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    FILE *f = a.f;
    fputs("response,replica,prompt_tokens,length_tokens,finish_s\n", f);
    for (size_t i = 0; i < r->n_resp; i++) {
        const resp_outcome *o = &r->resp[i];
        fprintf(f, "%zu,%d,%d,%d,%.9g\n", i, o->replica, o->prompt_tokens, o->length,
                o->finish_s);
    }
    return ts_atomic_commit(&a, e);
}

/* The step (0-based) of an interval starting at t0: the last k with
 * step_t0[k] <= t0 (0 when t0 precedes them all, or for one step). */
static size_t step_of(const run_record *r, double t0)
{
    if (r->n_steps < 2)
        return 0;
    size_t lo = 0, hi = r->n_steps; /* step_t0[lo] <= t0 < step_t0[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->step_t0[mid] <= t0)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* One (step, phase) cell: span and GPU-seconds by state. */
typedef struct cell {
    double lo, hi;
    double gs[3]; /* busy, idle, train GPU-seconds */
    int used;
} cell;

int csv_write_phases(const run_record *r, const char *path, ts_err *e)
{
    size_t ns = r->n_steps > 1 ? r->n_steps : 1;
    for (size_t i = 0; i < r->n_tl; i++) {
        const tl_interval *t = &r->tl[i];
        if (t->phase < 0 || t->phase >= PH_COUNT || t->state < 0 || t->state > TL_TRAIN)
            return ts_errf(e, "%s: timeline interval %zu (gpu %d): phase %d or state %d out of "
                              "range", path, i, t->gpu, t->phase, t->state);
    }
    for (size_t k = 1; k < r->n_steps; k++)
        if (!(r->step_t0[k] >= r->step_t0[k - 1]))
            return ts_errf(e, "%s: step %zu starts at %g s, before step %zu (%g s)", path, k + 1,
                           r->step_t0[k], k, r->step_t0[k - 1]);
    cell *c = calloc(ns * PH_COUNT, sizeof *c);
    if (!c)
        return ts_errf(e, "%s: out of memory for %zu steps", path, ns);
    for (size_t i = 0; i < r->n_tl; i++) {
        const tl_interval *t = &r->tl[i];
        cell *x = &c[step_of(r, t->t0) * PH_COUNT + (size_t)t->phase];
        if (!x->used) {
            x->lo = t->t0, x->hi = t->t1, x->used = 1;
        } else {
            x->lo = fmin(x->lo, t->t0);
            x->hi = fmax(x->hi, t->t1);
        }
        x->gs[t->state] += t->t1 - t->t0;
    }
    ts_atomic a;
    if (ts_atomic_open(&a, path, e)) {
        free(c);
        return -1;
    }
    FILE *f = a.f;
    fputs("step,phase,start_s,end_s,busy_gpu_s,idle_gpu_s,train_gpu_s\n", f);
    for (size_t k = 0; k < ns; k++)
        for (int p = 0; p < PH_COUNT; p++) {
            const cell *x = &c[k * PH_COUNT + (size_t)p];
            if (x->used)
                fprintf(f, "%zu,%s,%.9g,%.9g,%.9g,%.9g,%.9g\n", k + 1, tl_phase_name[p], x->lo,
                        x->hi, x->gs[TL_BUSY], x->gs[TL_IDLE], x->gs[TL_TRAIN]);
        }
    free(c);
    return ts_atomic_commit(&a, e);
}
