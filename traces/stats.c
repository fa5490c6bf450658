/*
 * Views of a loaded trace: summary statistics of its response lengths (as
 * printed by `tailsim trace stats` and used to label scenarios and reports;
 * with how many responses sit exactly at the maximum, since a trace cut at
 * a generation cap shows a short tail that is not the real one), what a
 * response cap cuts from it, and the selection of one RL step (a copy, with
 * the step's recorded reward times; a negative step selects the lowest step
 * number present).  One statistics call copies every response length into
 * a scratch array, sorts it (gsl_sort,
 * O(n log n)) and reads the percentiles with
 * gsl_stats_quantile_from_sorted_data, which interpolates linearly between
 * order statistics at position (n-1)*q: the same as numpy's default
 * ('linear') method, so numbers match the papers' Python scripts.
 *
 * Invariants: the result is only written on success; an empty trace is an
 * error (a percentile of nothing is undefined).  Runs once per command, never
 * in the simulation loop.
 */
#include "traces/trace.h"

#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int trace_stats_compute(const trace *t, trace_stats *s, ts_err *e)
{
    if (!t || t->n_prompts == 0)
        return ts_errf(e, "trace statistics: the trace is empty");
    size_t n = trace_n_responses(t), np = t->n_prompts, k = 0;
    double *x = malloc(n * sizeof *x);
    int32_t *steps = malloc(np * sizeof *steps);
    if (!x || !steps) {
        free(x);
        free(steps);
        return ts_errf(e, "trace statistics: out of memory (%zu responses)", n);
    }
    trace_stats r;
    memset(&r, 0, sizeof r);
    double prompt_sum = 0;
    for (size_t i = 0; i < np; i++) {
        const trace_prompt *p = &t->prompts[i];
        steps[i] = p->step;
        prompt_sum += p->prompt_tokens;
        for (int32_t j = 0; j < p->n_resp; j++) {
            x[k++] = p->resp[j];
            r.tokens += p->resp[j];
        }
    }
    gsl_sort(x, 1, n);
    qsort(steps, np, sizeof *steps, cmp_i32);
    for (size_t i = 0; i < np; i++)
        r.steps += i == 0 || steps[i] != steps[i - 1];
    r.prompts = (int64_t)np;
    r.responses = (int64_t)n;
    r.mean = (double)r.tokens / (double)n;
    r.p50 = gsl_stats_quantile_from_sorted_data(x, 1, n, 0.50);
    r.p90 = gsl_stats_quantile_from_sorted_data(x, 1, n, 0.90);
    r.p99 = gsl_stats_quantile_from_sorted_data(x, 1, n, 0.99);
    r.max = (int64_t)x[n - 1];
    r.max_over_p50 = (double)r.max / r.p50; /* p50 >= 1: every length is >= 1 */
    for (size_t i = n; i > 0 && x[i - 1] == x[n - 1]; i--)
        r.at_max++;
    r.at_max_fraction = (double)r.at_max / (double)n;
    r.capped = r.at_max >= TRACE_CAPPED_MIN && r.at_max_fraction >= TRACE_CAPPED_FRACTION;
    r.prompt_mean = prompt_sum / (double)np;
    free(x);
    free(steps);
    *s = r;
    return 0;
}

void trace_truncation(const trace *t, int32_t cap, int64_t *responses, int64_t *tokens)
{
    *responses = *tokens = 0;
    if (cap <= 0)
        return;
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++)
            if (t->prompts[i].resp[j] > cap) {
                (*responses)++;
                *tokens += t->prompts[i].resp[j] - cap;
            }
}

trace *trace_select_step(const trace *t, int32_t step, ts_err *e)
{
    if (t->n_prompts == 0) {
        ts_errf(e, "trace is empty: no step to select");
        return NULL;
    }
    int32_t lo = t->prompts[0].step, hi = lo;
    for (size_t i = 1; i < t->n_prompts; i++) {
        if (t->prompts[i].step < lo)
            lo = t->prompts[i].step;
        if (t->prompts[i].step > hi)
            hi = t->prompts[i].step;
    }
    if (step < 0)
        step = lo;
    trace *s = trace_new();
    if (!s) {
        ts_errf(e, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[i];
        if (p->step == step && trace_add_prompt(s, p, e)) {
            trace_free(s);
            return NULL;
        }
    }
    if (s->n_prompts == 0) {
        ts_errf(e, "step %d is not in the trace (steps %d..%d)", step, lo, hi);
        trace_free(s);
        return NULL;
    }
    size_t nr = 0; /* the step's recorded reward times */
    for (size_t i = 0; i < t->n_reward; i++)
        nr += t->reward[i].step == step;
    if (nr && !(s->reward = malloc(nr * sizeof *s->reward))) {
        ts_errf(e, "out of memory");
        trace_free(s);
        return NULL;
    }
    for (size_t i = 0; i < t->n_reward; i++)
        if (t->reward[i].step == step)
            s->reward[s->n_reward++] = t->reward[i];
    return s;
}
