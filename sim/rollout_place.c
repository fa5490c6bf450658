/*
 * Where a rollout's prompts go (split from sim/rollout.c, which runs the
 * replicas): the placement rules' names, the trace's recorded rollout ranks,
 * and the placement itself.
 *
 * Prompts go to replicas by rollout.placement (rollout_place): balanced, the
 * default, deals the step's prompts in equal contiguous chunks in trace
 * order, as VeRL dispatches a batch to the rollout's data-parallel ranks
 * (DataProto.chunk: prompt i of n on replica floor(i * replicas / n));
 * round-robin deals prompt i to replica i % replicas; trace pins each prompt
 * to the dp_rank the trace recorded, and only when the recording had
 * exactly as many ranks as the rollout has replicas (a two-rank log on 16
 * replicas would leave 14 idle).
 *
 * A policy's own placement (rollout_cfg.place) overrides the rule; run_load
 * in sim/rollout_run.c applies either.  Pure functions of the trace.
 */
#include "sim/rollout.h"

#include <stdint.h>
#include <string.h>

int rollout_placement_parse(const char *name, rollout_placement *p)
{
    static const char *const names[] = {"balanced", "trace", "round-robin"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, names[i])) {
            *p = (rollout_placement)i;
            return 0;
        }
    return -1;
}

int rollout_trace_ranks(const trace *t, size_t *unranked)
{
    int32_t top = -1;
    size_t first_without = SIZE_MAX;
    for (size_t i = 0; i < t->n_prompts; i++) {
        int32_t r = t->prompts[i].dp_rank;
        if (r < 0 && first_without == SIZE_MAX)
            first_without = i;
        if (r > top)
            top = r;
    }
    if (top < 0)
        return 0;
    if (first_without != SIZE_MAX) {
        if (unranked)
            *unranked = first_without;
        return -1;
    }
    return top + 1;
}

int rollout_place(const trace *t, int replicas, rollout_placement rule, int ranks, int32_t *out,
                  ts_err *e)
{
    size_t n = t->n_prompts;
    if (rule == PLACE_TRACE) {
        size_t bad = 0;
        int own = rollout_trace_ranks(t, &bad);
        if (own == 0)
            return ts_errf(e, "rollout.placement = trace: the trace records no dp_rank; use "
                              "rollout.placement = balanced (the default)");
        if (own < 0)
            return ts_errf(e, "rollout.placement = trace: prompt %zu of the trace has no "
                              "dp_rank; use rollout.placement = balanced (the default)", bad);
        int want = ranks > 0 ? ranks : own;
        if (want != replicas || own > replicas)
            return ts_errf(e, "rollout.placement = trace: the trace records %d rollout rank%s "
                              "(dp_rank 0..%d) but the rollout has %d replica%s: pinning would "
                              "leave replicas idle or unplaced; use rollout.placement = balanced "
                              "(the default) to deal the prompts to every replica",
                           want, want == 1 ? "" : "s", want - 1, replicas,
                           replicas == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++)
            out[i] = t->prompts[i].dp_rank;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = rule == PLACE_ROUND_ROBIN
                     ? (int32_t)(i % (size_t)replicas)
                     : (int32_t)((uint64_t)i * (uint64_t)replicas / (uint64_t)n);
    return 0;
}
