/*
 * Policy `sorted`: length-aware scheduling, after SortedRL ("SortedRL:
 * Accelerating RL Training for LLMs through Online Length-Aware
 * Scheduling", arXiv 2603.23414).  SortedRL also groups short trajectories
 * into earlier updates behind an off-policy cache; that part is not
 * modelled.  Here is its scheduling idea in lossless form: the synchronous
 * step of verl with the rollout ordered by predicted response length.
 * Prompts go to replicas longest-predicted-group first, each to the replica
 * with the least predicted tokens so far (LPT), and every replica admits its
 * responses longest-predicted first, so the long ones start at once instead
 * of forming the tail.
 *
 * What it knows: the predictor is the trace's true length times
 * exp(sigma * N(0,1)) with sigma = policy.sort_noise.  The default, 0, is an
 * ORACLE (the true lengths): an upper bound on what length-aware scheduling
 * can buy, not a deployable predictor; raise sort_noise to model a real one.
 * The draws come from ts_rng_new(seed + step, SORT_STREAM).  Lossless: every
 * response is generated once, to its trace length, by the current policy.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common/util.h"
#include "sim/policy/policy.h"

#define SORT_STREAM 0x534f5254u /* "SORT": the predictor's RNG stream */

static const double *sort_key; /* qsort has no context argument in C11 */

static int by_key_desc(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (sort_key[x] != sort_key[y])
        return sort_key[x] < sort_key[y] ? 1 : -1;
    return (x > y) - (x < y);
}

/* Fills place (per prompt) and order (per response) for trace t. */
static int sorted_plan(const scenario *s, const trace *t, uint64_t seed, int32_t *place,
                       int32_t *order, ts_err *e)
{
    size_t n = trace_n_responses(t), np = t->n_prompts;
    int reps = s->gpus / s->tp;
    double *pred = malloc((n + 1) * sizeof *pred), *gsum = malloc((np + 1) * sizeof *gsum);
    double *load = calloc((size_t)reps, sizeof *load);
    int32_t *pidx = malloc((np + 1) * sizeof *pidx);
    gsl_rng *rng = ts_rng_new(seed, SORT_STREAM);
    int rc = -1;
    if (!pred || !gsum || !load || !pidx || !rng) {
        ts_errf(e, "out of memory");
        goto done;
    }
    size_t k = 0;
    for (size_t i = 0; i < np; i++) {
        gsum[i] = 0;
        pidx[i] = (int32_t)i;
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++, k++) {
            double l = scenario_cap_response(s, t->prompts[i].resp[j]);
            pred[k] = s->sort_noise > 0 ? l * exp(gsl_ran_gaussian(rng, s->sort_noise)) : l;
            gsum[i] += pred[k];
            order[k] = (int32_t)k;
        }
    }
    sort_key = gsum;
    qsort(pidx, np, sizeof *pidx, by_key_desc);
    for (size_t x = 0; x < np; x++) {
        int best = 0;
        for (int r = 1; r < reps; r++)
            if (load[r] < load[best])
                best = r;
        place[pidx[x]] = best;
        load[best] += gsum[pidx[x]];
    }
    sort_key = pred;
    qsort(order, n, sizeof *order, by_key_desc);
    sort_key = NULL;
    rc = 0;
done:
    free(pred);
    free(gsum);
    free(load);
    free(pidx);
    if (rng)
        gsl_rng_free(rng);
    return rc;
}

static int sorted_run(const scenario *s, const hw_desc *hw, const llm_desc *m,
                      trace *const *steps, int n, int full, multistep_result *res,
                      run_record *rec, ts_err *e)
{
    scenario sk = *s;
    double t0 = 0, q = s->sp.quality;
    for (int k = 0; k < n; k++) {
        const trace *t = steps[k];
        policy_drafter_use(&sk, res, k, q);
        int32_t *place = malloc((t->n_prompts + 1) * sizeof *place);
        int32_t *order = malloc((trace_n_responses(t) + 1) * sizeof *order);
        sk.seed = s->seed + (uint64_t)k;
        size_t first = rec ? rec->n_tl : 0;
        int rc = !place || !order ? ts_errf(e, "out of memory")
                                  : sorted_plan(s, t, sk.seed, place, order, e);
        rlstep_opts o = {.place = place, .order = order};
        if (!rc)
            rc = full ? rlstep_run_opts(&sk, hw, m, t, &o, &res->step[k], rec, e)
                      : rlstep_rollout_opts(&sk, hw, m, t, &o, &res->step[k], rec, e);
        free(place);
        free(order);
        if (rc) {
            ts_err_prefix(e, "step %d: ", k);
            return -1;
        }
        q = policy_drafter_next(&sk, &res->step[k], q);
        policy_count_sync_step(res, t, &res->step[k]);
        policy_shift_record(rec, first, t0, 0);
        res->t0[k] = t0;
        t0 += res->step[k].step_s;
    }
    return 0;
}

const policy policy_sorted = {
    "sorted", "length-aware: longest predicted first, LPT placement (default predictor: oracle)",
    "SortedRL (arXiv 2603.23414), its length-aware scheduling only; LPT", policy_apply_plain, 1, sorted_run, 0};

const policy policy_sorted_tlt = {
    "sorted+tlt", "sorted's length-aware rollout with TLT's adaptive speculation and spot trainer",
    "SortedRL's scheduling (arXiv 2603.23414) + TLT (arXiv 2511.16665); the combination is tailsim's",
    policy_apply_plain_tlt, 1, sorted_run, 0};
