/*
 * Simulator speed on the benchmark scenario (scenarios/bench-32b-128gpu.ini):
 * 128 GPUs, Qwen2.5-32B at TP 8, 8,192 responses up to 65,536 tokens.
 * Reports CPU seconds for the whole RL step, engine events per second and
 * simulated seconds per wall second.  Goal: under 0.5 s of CPU for the step
 * under verl's plain rollout, and under 1 s with the `tlt` policy (adaptive
 * speculation in the tail + spot trainer).
 */
#include <stdio.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "models/hw_calib.h"
#include "sim/policy/policy.h"
#include "traces/gen.h"

int main(void)
{
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    scenario s;
    hw_desc hw;
    llm_desc m;
    gen_params p;
    if (scenario_load("bench-32b-128gpu", &s, &e) || hw_load(s.hw, &hw, &e) ||
        llm_load(s.model, &m, &e) || scenario_gen_params(&s, &p, &e)) {
        fprintf(stderr, "bench_rlstep: %s\n", e.msg);
        return 1;
    }
    trace *t = gen_trace(&p, &e);
    if (!t) {
        fprintf(stderr, "bench_rlstep: %s\n", e.msg);
        return 1;
    }
    trace_stats st;
    trace_stats_compute(t, &st, &e);
    double best = 1e30;
    rlstep_result r;
    for (int rep = 0; rep < 3; rep++) {
        double c0 = ts_cpu_s();
        if (rlstep_run(&s, &hw, &m, t, &r, NULL, &e)) {
            fprintf(stderr, "bench_rlstep: %s\n", e.msg);
            return 1;
        }
        double cpu = ts_cpu_s() - c0;
        if (cpu < best)
            best = cpu;
        if (rep < 2)
            rlstep_result_free(&r);
    }
    printf("rlstep %s: %d GPUs, TP %d, %lld responses (max %lld, mean %.0f tokens)\n", s.name,
           s.gpus, s.tp, (long long)st.responses, (long long)st.max, st.mean);
    printf("  CPU per simulated step: %.3f s (goal < 0.5 s: %s)\n", best, best < 0.5 ? "met" : "NOT met");
    printf("  engine events: %llu, %.3g events/s\n", (unsigned long long)r.ro.events,
           (double)r.ro.events / best);
    printf("  simulated step %.1f s (rollout %.1f s): %.0f simulated s per CPU s\n", r.step_s,
           r.ro.makespan_s, r.step_s / best);
    rlstep_result_free(&r);
    /* the same step under TLT */
    double best_tlt = 1e30;
    multistep_result mr;
    for (int rep = 0; rep < 3; rep++) {
        double c0 = ts_cpu_s();
        if (policy_run(&s, policy_find("tlt"), &hw, &m, &t, 1, 1, &mr, NULL, &e)) {
            fprintf(stderr, "bench_rlstep: %s\n", e.msg);
            return 1;
        }
        double cpu = ts_cpu_s() - c0;
        if (cpu < best_tlt)
            best_tlt = cpu;
        if (rep < 2)
            multistep_result_free(&mr);
    }
    printf("rlstep %s --policy tlt: CPU per simulated step %.3f s (goal < 1 s: %s)\n", s.name,
           best_tlt, best_tlt < 1.0 ? "met" : "NOT met");
    printf("  engine events: %llu, speculative iterations %lld, accepted length %.2f\n",
           (unsigned long long)mr.step[0].ro.events, (long long)mr.step[0].ro.spec_iterations,
           mr.step[0].ro.accept_len);
    printf("  simulated step %.1f s (rollout %.1f s)\n", mr.step[0].step_s, mr.step[0].ro.makespan_s);
    multistep_result_free(&mr);
    trace_free(t);
    return 0;
}
