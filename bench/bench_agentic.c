/*
 * Multi-turn (agentic) rollout speed (issue 20): the Search-R1 scenario
 * (scenarios/search-r1-7b-polytrace.ini) on 64 GPUs, first on the recorded
 * step 0 (2,048 trajectories, up to 5 turns), then on a 5-turn version of it
 * built here (every trajectory gets 5 turns: its recorded turns' generation
 * lengths repeated, a 0.45 s tool appending 400 tokens between turns).
 * Reports CPU seconds for the whole RL step, best of three.  Goal: under
 * 0.5 s of CPU for the 5-turn step.  Skips (exit 0) without the shared data.
 */
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "models/hw_calib.h"
#include "sim/policy/policy.h"

/* Every trajectory of t with 5 turns (see the header).  NULL on failure. */
static trace *five_turns(const trace *t, ts_err *e)
{
    trace *o = trace_new();
    if (!o)
        return NULL;
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[i];
        int32_t n = p->n_resp, *nt = malloc((size_t)n * sizeof *nt);
        int32_t *resp = malloc((size_t)n * sizeof *resp);
        trace_turn *tt = malloc((size_t)n * 5 * sizeof *tt);
        if (!nt || !resp || !tt) {
            free(nt), free(resp), free(tt), trace_free(o);
            return NULL;
        }
        for (int32_t j = 0; j < n; j++) {
            const trace_turn *src = p->turns + p->turn0[j];
            int32_t ns = p->turn0[j + 1] - p->turn0[j], ctx = p->prompt_tokens;
            for (int k = 0; k < 5; k++) {
                int32_t g = src[k % ns].gen;
                tt[j * 5 + k] = (trace_turn){ctx, 0, g, k < 4, k < 4 ? 400 : 0,
                                             k < 4 ? 0.45 : 0, -1};
                ctx += g + (k < 4 ? 400 : 0);
            }
            nt[j] = 5;
            resp[j] = ctx - p->prompt_tokens;
        }
        int rc = trace_add_turns(o, p->step, p->prompt_id, -1, p->prompt_tokens, resp, n, nt, tt,
                                 e);
        free(nt), free(resp), free(tt);
        if (rc) {
            trace_free(o);
            return NULL;
        }
    }
    return o;
}

static int bench(const char *label, const scenario *s, const hw_desc *hw, const llm_desc *m,
                 const trace *t)
{
    ts_err e = {{0}};
    trace_turn_stats ts;
    trace_turn_stats_compute(t, &ts, &e);
    double best = 1e30;
    rlstep_result r;
    for (int rep = 0; rep < 3; rep++) {
        double c0 = ts_cpu_s();
        if (rlstep_run(s, hw, m, t, &r, NULL, &e)) {
            fprintf(stderr, "bench_agentic: %s\n", e.msg);
            return 1;
        }
        double cpu = ts_cpu_s() - c0;
        if (cpu < best)
            best = cpu;
        if (rep < 2)
            rlstep_result_free(&r);
    }
    printf("rlstep %s, %s: %d GPUs, TP %d, %lld trajectories, %lld turns (max %d), %lld tool "
           "calls\n", s->name, label, s->gpus, s->tp, (long long)ts.trajectories,
           (long long)ts.turns, ts.max_turns, (long long)ts.tool_calls);
    printf("  CPU per simulated step: %.3f s (goal < 0.5 s: %s)\n", best,
           best < 0.5 ? "met" : "NOT met");
    printf("  engine events: %llu; simulated step %.1f s (rollout %.1f s, tool wait %.4f, "
           "tail bubble %.4f)\n", (unsigned long long)r.ro.events, r.step_s, r.ro.makespan_s,
           r.ro.tool_wait_fraction, r.ro.bubble_fraction);
    rlstep_result_free(&r);
    return 0;
}

int main(void)
{
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    scenario s;
    hw_desc hw;
    llm_desc m;
    char path[4096];
    trace *all = NULL, *t = NULL, *t5 = NULL;
    if (scenario_load("search-r1-7b-polytrace", &s, &e) || hw_load(s.hw, &hw, &e) ||
        llm_load(s.model, &m, &e)) {
        fprintf(stderr, "bench_agentic: %s\n", e.msg);
        return 1;
    }
    if (scenario_trace_path(&s, path, sizeof path) || trace_load_path(path, &all, &e)) {
        printf("bench_agentic: skipped, the Search-R1 trace is not here (%s)\n", e.msg);
        return 0;
    }
    s.gpus = 64;
    int rc = 1;
    if (!(t = trace_select_step(all, 0, &e)) || !(t5 = five_turns(t, &e))) {
        fprintf(stderr, "bench_agentic: %s\n", e.msg[0] ? e.msg : "out of memory");
        goto done;
    }
    rc = bench("recorded step 0", &s, &hw, &m, t) || bench("5 turns each", &s, &hw, &m, t5);
done:
    trace_free(all);
    trace_free(t);
    trace_free(t5);
    return rc;
}
