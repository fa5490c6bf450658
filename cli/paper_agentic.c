/*
 * Runner of `tailsim paper`'s agentic section (issue 20): the recorded
 * Search-R1 step 0 (scenario search-r1-7b-polytrace) next to tailsim's
 * simulation of it.  No paper publishes numbers for it, so no row of the
 * tolerance table comes from here; the section's table sets the recording's
 * own figures (trajectories, turns, tool calls, tool latency, the engine's
 * per-turn latency) beside tailsim's (the simulated step and rollout, the
 * tool-wait and tail bubbles, the per-turn latency, TLT's speedup), on the
 * cluster the scenario assumes (8 H100, rollout TP 1: the recording's
 * cluster is not published, so the latency rows are a shape check, not a
 * target).  Two RL steps of the 2,048-trajectory step (verl and tlt) take
 * about 0.1 s, so --quick runs it unchanged.  Without the shared trace the
 * section is skipped with the path it looked for.  Nothing here prints.
 */
#include "cli/paper_exp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "sim/policy/policy.h"
#include "sim/run.h"
#include "sim/scenario.h"
#include "traces/trace.h"

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The p-quantile of sorted v[0..n), linear between order statistics. */
static double quantile(const double *v, size_t n, double p)
{
    double h = p * (double)(n - 1);
    size_t i = (size_t)h;
    return i + 1 < n ? v[i] + (h - (double)i) * (v[i + 1] - v[i]) : v[n - 1];
}

/* The recorded engine latency of every turn of t: p50, p90, max (s), NAN
 * when none is recorded.  Returns 0, or -1 on allocation failure. */
static int engine_quantiles(const trace *t, double q[3], ts_err *e)
{
    size_t n = 0, cap = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        if (t->prompts[i].turns)
            cap += (size_t)t->prompts[i].turn0[t->prompts[i].n_resp];
    double *v = malloc((cap ? cap : 1) * sizeof *v);
    if (!v)
        return ts_errf(e, "out of memory");
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[i];
        for (int32_t k = 0; p->turns && k < p->turn0[p->n_resp]; k++)
            if (p->turns[k].engine_s >= 0)
                v[n++] = p->turns[k].engine_s;
    }
    q[0] = q[1] = q[2] = NAN;
    if (n) {
        qsort(v, n, sizeof *v, cmp_dbl);
        q[0] = quantile(v, n, 0.5);
        q[1] = quantile(v, n, 0.9);
        q[2] = v[n - 1];
    }
    free(v);
    return 0;
}

/* Runs policy name on step t: its step result into *r, whose scalars only
 * are valid (the arrays it points to are freed here). */
static int run_one(const scenario *s, const hw_desc *hw, const llm_desc *m, trace *t,
                   const char *name, rlstep_result *r, ts_err *e)
{
    multistep_result res;
    memset(&res, 0, sizeof res);
    if (policy_run(s, policy_find(name), hw, m, &t, 1, 1, &res, NULL, e))
        return ts_err_prefix(e, "policy %s: ", name);
    *r = res.step[0];
    multistep_result_free(&res);
    return 0;
}

static void row(paper_table *t, int i, const char *what, const char *rec, const char *sim,
                const char *tlt)
{
    snprintf(t->cell[i][0], PAPER_CELL, "%s", what);
    snprintf(t->cell[i][1], PAPER_CELL, "%s", rec);
    snprintf(t->cell[i][2], PAPER_CELL, "%s", sim);
    snprintf(t->cell[i][3], PAPER_CELL, "%s", tlt);
}

int paper_exp_agentic(const paper_exp *x, paper_ctx *c, ts_err *e)
{
    scenario s;
    hw_desc hw;
    llm_desc m;
    if (run_setup(x->scenario, NULL, 0, c->have_seed, c->seed, &s, &hw, &m, e))
        return -1;
    char path[1024];
    if (scenario_trace_path(&s, path, sizeof path) == 0 && access(path, R_OK) != 0) {
        char why[160];
        snprintf(why, sizeof why, "trace %.100s absent (set TAILSIM_SHARED)", path);
        paper_skip(c, x, why);
        return 0;
    }
    paper_note_calibration(c, hw.calibration);
    trace *t = NULL;
    trace_turn_stats ts;
    double eq[3] = {NAN, NAN, NAN};
    rlstep_result v, l;
    int rc = -1;
    if (policy_load_steps(&s, NULL, 1, &t, e) || trace_turn_stats_compute(t, &ts, e) ||
        engine_quantiles(t, eq, e) || run_one(&s, &hw, &m, t, "verl", &v, e) ||
        run_one(&s, &hw, &m, t, "tlt", &l, e))
        goto done;
    paper_table *tb = paper_doc_table(
        c->doc, "Agentic RL: the recorded Search-R1 step 0 against tailsim (8 H100 assumed)",
        14, 4, e);
    if (!tb)
        goto done;
    snprintf(tb->note, sizeof tb->note,
             "No published rows. Recorded: PolyTrace's Search-R1 Qwen2.5-7B GRPO step 0 "
             "(trace stats). tailsim: scenario search-r1-7b-polytrace on an assumed 8 H100, "
             "rollout TP 1 (the recording's cluster is not published), verl and tlt. The "
             "engine's recorded per-turn latency includes queueing on an unknown cluster: its "
             "scale is not a target, its shape (p90/p50) is compared (docs/agentic.md).");
    char a[4][PAPER_CELL];
    row(tb, 0, "quantity", "recorded", "tailsim verl", "tailsim tlt");
    snprintf(a[0], PAPER_CELL, "%lld", (long long)ts.trajectories);
    row(tb, 1, "trajectories", a[0], a[0], a[0]);
    snprintf(a[0], PAPER_CELL, "%lld (%.2f each)", (long long)ts.turns, ts.mean_turns);
    row(tb, 2, "turns", a[0], "as recorded", "as recorded");
    snprintf(a[0], PAPER_CELL, "%lld", (long long)ts.tool_calls);
    snprintf(a[1], PAPER_CELL, "%lld tool turns", (long long)v.ro.tool_calls);
    row(tb, 3, "tool calls", a[0], a[1], a[1]);
    snprintf(a[0], PAPER_CELL, "mean %.3f, p99 %.3f, max %.3f", ts.tool_mean_s, ts.tool_p99_s,
             ts.tool_max_s);
    row(tb, 4, "tool latency, s", a[0], "as recorded", "as recorded");
    snprintf(a[0], PAPER_CELL, "%.1f / %.1f / %.1f", eq[0], eq[1], eq[2]);
    snprintf(a[1], PAPER_CELL, "%.2f / %.2f / %.2f", v.ro.turn_p50_s, v.ro.turn_p90_s,
             v.ro.turn_max_s);
    snprintf(a[2], PAPER_CELL, "%.2f / %.2f / %.2f", l.ro.turn_p50_s, l.ro.turn_p90_s,
             l.ro.turn_max_s);
    row(tb, 5, "turn latency p50 / p90 / max, s", a[0], a[1], a[2]);
    snprintf(a[0], PAPER_CELL, "%.2f", eq[1] / eq[0]);
    snprintf(a[1], PAPER_CELL, "%.2f", v.ro.turn_p90_s / v.ro.turn_p50_s);
    snprintf(a[2], PAPER_CELL, "%.2f", l.ro.turn_p90_s / l.ro.turn_p50_s);
    row(tb, 6, "turn latency p90 / p50", a[0], a[1], a[2]);
    snprintf(a[1], PAPER_CELL, "%.2f", v.step_s);
    snprintf(a[2], PAPER_CELL, "%.2f", l.step_s);
    row(tb, 7, "step, s", "-", a[1], a[2]);
    snprintf(a[1], PAPER_CELL, "%.2f", v.ro.makespan_s);
    snprintf(a[2], PAPER_CELL, "%.2f", l.ro.makespan_s);
    row(tb, 8, "rollout, s", "-", a[1], a[2]);
    snprintf(a[1], PAPER_CELL, "%.2f%%", 100 * v.ro.tool_wait_fraction);
    snprintf(a[2], PAPER_CELL, "%.2f%%", 100 * l.ro.tool_wait_fraction);
    row(tb, 9, "tool-wait bubble", "-", a[1], a[2]);
    snprintf(a[1], PAPER_CELL, "%.1f%%", 100 * v.ro.bubble_fraction);
    snprintf(a[2], PAPER_CELL, "%.1f%%", 100 * l.ro.bubble_fraction);
    row(tb, 10, "tail bubble", "-", a[1], a[2]);
    snprintf(a[1], PAPER_CELL, "%d turns, %.2f s tool", v.ro.crit_turns, v.ro.crit_tool_s);
    snprintf(a[2], PAPER_CELL, "%d turns, %.2f s tool", l.ro.crit_turns, l.ro.crit_tool_s);
    row(tb, 11, "critical trajectory", "-", a[1], a[2]);
    snprintf(a[2], PAPER_CELL, "%.2fx", v.ro.makespan_s / l.ro.makespan_s);
    row(tb, 12, "TLT rollout speedup", "-", "1.00x", a[2]);
    snprintf(a[2], PAPER_CELL, "%.2fx", v.step_s / l.step_s);
    row(tb, 13, "TLT step speedup", "-", "1.00x", a[2]);
    rc = paper_put(c, "search-r1/tlt.speedup", v.step_s / l.step_s, NAN, NAN) ||
                 paper_put(c, "search-r1/tool_wait", v.ro.tool_wait_fraction, NAN, NAN)
             ? ts_errf(e, "paper: too many values")
             : 0;
done:
    trace_free(t);
    return rc;
}
