/*
 * Run setup and the multi-step metrics shared by every command that runs RL
 * steps (rollout, rlstep, compare, plan, sweep, the paper report and the
 * bootstrap): loading a scenario with its overrides, hardware and model, and
 * turning a multistep_result into a run record's ordered metrics.  Library
 * code: it neither prints nor exits.
 */
#include "models/hw_calib.h"
#include "sim/run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void add(run_record *r, const char *k, double v, int *oom)
{
    if (run_add_metric(r, k, v))
        *oom = 1;
}

/* The metrics of one step, in the order the table and JSON print them. */
static int step_metrics(run_record *rec, const rlstep_result *res, const trace *t, int full,
                        double quality, const multistep_result *all)
{
    int oom = 0;
    const rollout_result *ro = &res->ro;
    add(rec, "gpus", res->gpus, &oom);
    add(rec, "tp", res->tp, &oom);
    add(rec, "replicas", res->replicas, &oom);
    add(rec, "responses", (double)ro->responses, &oom);
    add(rec, "tokens", (double)trace_n_tokens(t), &oom);
    add(rec, "truncated_responses", (double)res->truncated_responses, &oom);
    add(rec, "truncated_tokens", (double)res->truncated_tokens, &oom);
    if (full)
        add(rec, "step_s", res->step_s, &oom);
    add(rec, "rollout_s", ro->makespan_s, &oom);
    if (full) {
        add(rec, "sync_s", res->phase_s[PH_SYNC], &oom);
        add(rec, "reward_s", res->phase_s[PH_REWARD], &oom);
        if (res->reward.ranks > 0) { /* recorded in the trace: its spread over ranks */
            add(rec, "reward_ranks", res->reward.ranks, &oom);
            add(rec, "reward_rank_min_s", res->reward.min_s, &oom);
            add(rec, "reward_rank_median_s", res->reward.median_s, &oom);
            add(rec, "reward_rank_max_s", res->reward.max_s, &oom);
        }
        add(rec, "old_logp_s", res->phase_s[PH_OLD_LOGP], &oom);
        add(rec, "ref_s", res->phase_s[PH_REF], &oom);
        add(rec, "update_s", res->phase_s[PH_UPDATE], &oom);
        add(rec, "rollout_share", res->step_s > 0 ? ro->makespan_s / res->step_s : 0, &oom);
    }
    add(rec, "bubble_fraction", ro->bubble_fraction, &oom);
    add(rec, "train_fraction", ro->train_fraction, &oom);
    add(rec, "tail_fraction", ro->tail_fraction, &oom);
    add(rec, "rollout_utilization", ro->utilization, &oom);
    if (ro->turns) { /* a multi-turn trace (sim/rollout_turns.c) */
        add(rec, "tool_wait_fraction", ro->tool_wait_fraction, &oom);
        add(rec, "tool_turns", (double)ro->tool_calls, &oom);
        add(rec, "tool_s", ro->tool_s, &oom);
        add(rec, "tool_queue_s", ro->tool_queue_s, &oom);
        add(rec, "cached_tokens", (double)ro->cached_tokens, &oom);
        add(rec, "kv_evictions", (double)ro->evictions, &oom);
        add(rec, "critical_response", ro->crit_resp, &oom);
        add(rec, "critical_turns", ro->crit_turns, &oom);
        add(rec, "critical_tool_s", ro->crit_tool_s, &oom);
        add(rec, "critical_turn", ro->crit_turn, &oom);
        add(rec, "critical_turn_s", ro->crit_turn_s, &oom);
        add(rec, "turn_mean_s", ro->turn_mean_s, &oom);
        add(rec, "turn_p50_s", ro->turn_p50_s, &oom);
        add(rec, "turn_p90_s", ro->turn_p90_s, &oom);
        add(rec, "turn_max_s", ro->turn_max_s, &oom);
    }
    if (full)
        add(rec, "train_imbalance", res->train_imbalance, &oom);
    if (full && !res->train_dcp)
        add(rec, "train_mem_gb", res->train_mem_gb, &oom);
    if (full && res->train_dcp) {
        add(rec, "update_plan_steps", res->update_plan_steps, &oom);
        add(rec, "update_bound_s", res->update_bound_s, &oom);
    }
    add(rec, "kv_tokens_per_replica", res->kv_tokens, &oom);
    add(rec, "full_batch", ro->full_batch, &oom);
    add(rec, "decode_tokens", (double)ro->decode_tokens, &oom);
    add(rec, "prefill_tokens", (double)ro->prefill_tokens, &oom);
    add(rec, "preemptions", (double)ro->preemptions, &oom);
    add(rec, "spec_iterations", (double)ro->spec_iterations, &oom);
    add(rec, "accept_len", ro->accept_len, &oom);
    add(rec, "drafter_quality", quality, &oom);
    add(rec, "drafter_gpu_steps", (double)ro->drafter_gpu_steps, &oom);
    add(rec, "spot_step_s", ro->spot_step_s, &oom);
    add(rec, "off_policy_fraction", all->off_policy_fraction, &oom); /* over the whole run */
    add(rec, "mean_staleness", all->mean_staleness, &oom);
    add(rec, "events", (double)ro->events, &oom);
    return oom ? -1 : 0;
}

int run_multistep_metrics(run_record *rec, const multistep_result *r, trace *const *steps,
                          int full, json_t **per_step)
{
    run_record **one = calloc((size_t)r->steps, sizeof *one);
    int rc = -1;
    if (per_step)
        *per_step = NULL;
    if (!one)
        return -1;
    for (int k = 0; k < r->steps; k++)
        if (!(one[k] = run_record_new()) ||
            step_metrics(one[k], &r->step[k], steps[k], full, r->quality[k], r))
            goto done;
    json_t *ps = per_step ? json_object() : NULL;
    for (size_t i = 0; i < one[0]->n_metrics; i++) {
        const char *key = one[0]->metrics[i].key;
        double sum = 0;
        json_t *arr = ps ? json_array() : NULL;
        for (int k = 0; k < r->steps; k++) {
            sum += one[k]->metrics[i].value;
            if (arr)
                json_array_append_new(arr, json_real(one[k]->metrics[i].value));
        }
        if (ps)
            json_object_set_new(ps, key, arr);
        if (run_add_metric(rec, key, sum / r->steps)) {
            json_decref(ps);
            goto done;
        }
    }
    /* run totals: what trained, and how fast (the fair speed of policies
     * that train other samples than the step's) */
    double total = 0;
    for (int k = 0; k < r->steps; k++)
        total += r->step[k].step_s;
    if (run_add_metric(rec, "trained_tokens", (double)r->trained_tokens) ||
        run_add_metric(rec, "off_policy_tokens", r->off_policy_token_fraction) ||
        run_add_metric(rec, "trained_tokens_per_s", total > 0 ? r->trained_tokens / total : 0)) {
        json_decref(ps);
        goto done;
    }
    if (per_step)
        *per_step = ps;
    rc = 0;
done:
    for (int k = 0; k < r->steps; k++)
        run_record_free(one[k]);
    free(one);
    return rc;
}

int run_setup(const char *name, const char *const *sets, int n_sets, int have_seed, uint64_t seed,
              scenario *s, hw_desc *hw, llm_desc *m, ts_err *e)
{
    if (scenario_load(name, s, e))
        return -1;
    for (int i = 0; i < n_sets; i++)
        if (scenario_set(s, sets[i], e))
            return -1;
    if (have_seed)
        s->seed = seed;
    if (scenario_validate(s, e) || scenario_load_models(s, hw, m, e) ||
        scenario_check_model(s, m, e))
        return -1;
    if (s->gpus_per_node > 0)
        hw->gpus_per_node = s->gpus_per_node;
    return 0;
}

/* FNV-1a 64 over the n little-endian bytes of v. */
static uint64_t fnv_u64(uint64_t h, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

void run_trace_hash(trace *const *steps, int n, char *buf)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int k = 0; k < n; k++) {
        const trace *t = steps[k];
        h = fnv_u64(h, (uint64_t)t->n_prompts, 8);
        for (size_t i = 0; i < t->n_prompts; i++) {
            const trace_prompt *p = &t->prompts[i];
            h = fnv_u64(h, (uint32_t)p->step, 4);
            h = fnv_u64(h, (uint32_t)p->prompt_id, 4);
            h = fnv_u64(h, (uint32_t)p->dp_rank, 4);
            h = fnv_u64(h, (uint32_t)p->prompt_tokens, 4);
            h = fnv_u64(h, (uint32_t)p->n_resp, 4);
            for (int32_t j = 0; j < p->n_resp; j++)
                h = fnv_u64(h, (uint32_t)p->resp[j], 4);
        }
        h = fnv_u64(h, (uint64_t)t->n_reward, 8);
        for (size_t i = 0; i < t->n_reward; i++) {
            uint64_t bits;
            memcpy(&bits, &t->reward[i].time_s, sizeof bits);
            h = fnv_u64(h, (uint32_t)t->reward[i].step, 4);
            h = fnv_u64(h, (uint32_t)t->reward[i].rank, 4);
            h = fnv_u64(h, bits, 8);
        }
    }
    snprintf(buf, 32, "fnv1a64:%016llx", (unsigned long long)h);
}

int run_record_source(run_record *rec, const scenario *s, const char *const *sets, int n_sets,
                      int steps, const char *trace_override, trace *const *tr, int n_tr,
                      ts_err *e)
{
    int rc = -1;
    char *ini = NULL, *ov = NULL, path[1024] = "", hash[32] = "";
    json_t *a = json_array();
    if (!a) {
        ts_errf(e, "out of memory");
        goto cleanup;
    }
    for (int i = 0; i < n_sets; i++)
        if (json_array_append_new(a, json_string(sets[i]))) {
            ts_errf(e, "--set '%.200s': not UTF-8 text, or out of memory", sets[i]);
            goto cleanup;
        }
    if (!(ini = scenario_to_ini(s, e))) {
        ts_err_prefix(e, "%s: cannot record the effective scenario: ", s->path);
        goto cleanup;
    }
    if (!(ov = json_dumps(a, JSON_COMPACT))) {
        ts_errf(e, "out of memory");
        goto cleanup;
    }
    if (trace_override)
        snprintf(path, sizeof path, "%s", trace_override);
    else
        scenario_trace_path(s, path, sizeof path);
    if (n_tr > 0)
        run_trace_hash(tr, n_tr, hash);
    if (run_set_source(rec, ini, ov, steps, path, hash)) {
        ts_errf(e, "out of memory");
        goto cleanup;
    }
    rc = 0;
cleanup:
    json_decref(a);
    free(ini);
    free(ov);
    return rc;
}
