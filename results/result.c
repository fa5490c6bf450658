/*
 * A finished run in memory: identity fields, ordered scalar metrics, the
 * per-GPU timeline and per-response outcomes.  The command that ran a
 * simulation fills one with run_add_metric / run_add_interval /
 * run_add_response; the store saves and loads it; the report reads it.
 *
 * Invariants: each array holds n_* valid elements in cap_* slots
 * (n <= cap); arrays grow by doubling, so appending N items costs O(N)
 * amortised and at most log2(N) reallocations.  A failed append leaves the
 * record unchanged.  Metric keys longer than the fixed key field are
 * truncated; metrics keep insertion order and duplicates are allowed here
 * (the store rejects duplicate keys within a run).
 */
#include "results/result.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

const char *const tl_state_name[3] = {"busy", "idle", "train"};
const char *const tj_kind_name[TJ_COUNT] = {"queue", "generate", "tool_queue", "tool"};
const char *const tl_phase_name[PH_COUNT] = {
    "sync", "rollout", "reward", "old_logp", "ref", "update"};

run_record *run_record_new(void)
{
    return calloc(1, sizeof(run_record));
}

void run_record_free(run_record *r)
{
    if (!r)
        return;
    free(r->metrics);
    free(r->tl);
    free(r->resp);
    free(r->step_t0);
    free(r->tj);
    free(r->scenario_ini);
    free(r->overrides);
    free(r);
}

void run_set_identity(run_record *r, const char *command, const char *scenario,
                      const char *calibration, uint64_t seed, int32_t gpus, int32_t replicas,
                      int32_t tp)
{
    snprintf(r->command, sizeof r->command, "%s", command);
    snprintf(r->scenario, sizeof r->scenario, "%s", scenario);
    snprintf(r->calibration, sizeof r->calibration, "%s", calibration);
    snprintf(r->version, sizeof r->version, "%s", TS_VERSION);
    r->seed = seed;
    r->gpus = gpus;
    r->replicas = replicas;
    r->tp = tp;
}

int run_set_source(run_record *r, const char *ini, const char *overrides, int32_t steps,
                   const char *trace_path, const char *trace_hash)
{
    char *i2 = ini ? strdup(ini) : NULL, *o2 = overrides ? strdup(overrides) : NULL;
    if ((ini && !i2) || (overrides && !o2)) {
        free(i2);
        free(o2);
        return -1;
    }
    free(r->scenario_ini);
    free(r->overrides);
    r->scenario_ini = i2;
    r->overrides = o2;
    r->steps = steps;
    snprintf(r->trace_path, sizeof r->trace_path, "%s", trace_path ? trace_path : "");
    snprintf(r->trace_hash, sizeof r->trace_hash, "%s", trace_hash ? trace_hash : "");
    return 0;
}

void run_set_policy(run_record *r, const char *policy)
{
    snprintf(r->policy, sizeof r->policy, "%s", policy ? policy : "");
}

/* Makes room for one more element of size `elem` in *arr (n used, *cap
 * slots), doubling the capacity.  Returns 0, or -1 leaving *arr untouched. */
static int grow(void **arr, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    if (ncap < *cap || ncap > (size_t)-1 / elem)
        return -1;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

int run_add_metric(run_record *r, const char *key, double value)
{
    void *p = r->metrics;
    if (grow(&p, r->n_metrics, &r->cap_metrics, sizeof(metric)) != 0)
        return -1;
    r->metrics = p;
    metric *m = &r->metrics[r->n_metrics++];
    memset(m->key, 0, sizeof m->key);
    strncpy(m->key, key ? key : "", sizeof m->key - 1);
    m->value = value;
    return 0;
}

int run_add_interval(run_record *r, int32_t gpu, int32_t phase, int32_t state,
                     double t0, double t1)
{
    void *p = r->tl;
    if (grow(&p, r->n_tl, &r->cap_tl, sizeof(tl_interval)) != 0)
        return -1;
    r->tl = p;
    r->tl[r->n_tl++] = (tl_interval){gpu, phase, state, t0, t1};
    return 0;
}

int run_add_response(run_record *r, int32_t replica, int32_t prompt_tokens,
                     int32_t length, double finish_s)
{
    void *p = r->resp;
    if (grow(&p, r->n_resp, &r->cap_resp, sizeof(resp_outcome)) != 0)
        return -1;
    r->resp = p;
    r->resp[r->n_resp++] = (resp_outcome){replica, prompt_tokens, length, finish_s};
    return 0;
}

int run_add_step(run_record *r, double t0)
{
    void *p = r->step_t0;
    if (grow(&p, r->n_steps, &r->cap_steps, sizeof(double)) != 0)
        return -1;
    r->step_t0 = p;
    r->step_t0[r->n_steps++] = t0;
    return 0;
}

int run_add_traj(run_record *r, const traj_interval *iv)
{
    void *p = r->tj;
    if (grow(&p, r->n_tj, &r->cap_tj, sizeof *r->tj) != 0)
        return -1;
    r->tj = p;
    r->tj[r->n_tj++] = *iv;
    return 0;
}

int run_get_metric(const run_record *r, const char *key, double *v)
{
    for (size_t i = 0; i < r->n_metrics; i++) {
        if (!strncmp(r->metrics[i].key, key, sizeof r->metrics[i].key)) {
            *v = r->metrics[i].value;
            return 0;
        }
    }
    return -1;
}
