/*
 * The joint RL step (sim/rlstep_train.h): train.strategy plans the training
 * phases of `tailsim rlstep` with a DCP strategy.  Checked here: strategy
 * none leaves the step exactly as the plain data-parallel one; a strategy
 * changes only the training phases; every response is trained exactly once
 * with its prompt and capped length; each phase's per-GPU timeline covers
 * the phase without gaps; dcp-inter is not slower than bucket on a
 * long-tail trace and DCP's bound is below every strategy; the key takes
 * exactly the strategy names; `tailsim compare --train` gives policy x
 * strategy rows, deterministically.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "models/hw_calib.h"
#include "sim/policy/policy.h"
#include "sim/rlstep.h"
#include "sim/rlstep_train.h"
#include "tests/helpers.h"

static const char *const strategies[] = {"bucket", "packed", "dcp-intra", "dcp-inter",
                                         "dcp-inter+pac"};
#define N_STRAT (sizeof strategies / sizeof strategies[0])

typedef struct fixture {
    scenario s;
    hw_desc hw;
    llm_desc m;
    trace *t;
} fixture;

/* The joint scenario on a smaller generated trace (64 prompts x 8). */
static void fixture_init(fixture *f, const char *strategy)
{
    ts_err e = {{0}};
    cr_assert_eq(scenario_load("joint-qwen7b-64gpu", &f->s, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&f->s, "trace.prompts=64", &e), 0, "%s", e.msg);
    char set[64];
    snprintf(set, sizeof set, "train.strategy=%s", strategy);
    cr_assert_eq(scenario_set(&f->s, set, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_validate(&f->s, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load(f->s.hw, &f->hw, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load(f->s.model, &f->m, &e), 0, "%s", e.msg);
    f->hw.gpus_per_node = f->s.gpus_per_node;
    cr_assert_eq(policy_load_steps(&f->s, NULL, 1, &f->t, &e), 0, "%s", e.msg);
}

static void fixture_free(fixture *f)
{
    trace_free(f->t);
}

/* Each GPU's intervals in `phase` tile [t0, t0 + len] exactly. */
static void check_tiling(const run_record *rec, int gpus, int phase, double t0, double len)
{
    for (int g = 0; g < gpus; g++) {
        double covered = 0, lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < rec->n_tl; i++) {
            const tl_interval *v = &rec->tl[i];
            if (v->gpu != g || v->phase != phase)
                continue;
            cr_assert_gt(v->t1, v->t0);
            covered += v->t1 - v->t0;
            lo = fmin(lo, v->t0);
            hi = fmax(hi, v->t1);
        }
        cr_assert_float_eq(lo, t0, 1e-9 * (1 + t0), "gpu %d phase %d starts at %g", g, phase, lo);
        cr_assert_float_eq(hi, t0 + len, 1e-9 * (1 + t0 + len), "gpu %d phase %d", g, phase);
        cr_assert_float_eq(covered, len, 1e-9 * (1 + len), "gpu %d phase %d has gaps", g, phase);
    }
}

Test(rlstep_dcp, none_is_the_plain_step_and_strategies_change_only_training, .timeout = 120)
{
    fixture f;
    fixture_init(&f, "none");
    ts_err e = {{0}};
    rlstep_result a, b;
    run_record *ra = run_record_new(), *rb = run_record_new();
    cr_assert(ra && rb);
    /* a scenario without the key defaults to none (the CLI check below compares the runs) */
    scenario plain;
    cr_assert_eq(scenario_load("qwen7b-64gpu", &plain, &e), 0, "%s", e.msg);
    cr_assert_str_eq(plain.train_strategy, "none");
    cr_assert_eq(rlstep_run(&f.s, &f.hw, &f.m, f.t, &a, ra, &e), 0, "%s", e.msg);
    cr_assert_eq(a.train_dcp, 0);
    cr_assert_eq(scenario_set(&f.s, "train.strategy=dcp-inter", &e), 0, "%s", e.msg);
    cr_assert_eq(rlstep_run(&f.s, &f.hw, &f.m, f.t, &b, rb, &e), 0, "%s", e.msg);
    cr_assert_eq(b.train_dcp, 1);
    for (int ph = PH_SYNC; ph <= PH_REWARD; ph++) {
        cr_assert_eq(a.phase_s[ph], b.phase_s[ph], "phase %d", ph);
        cr_assert_eq(a.phase_t0[ph], b.phase_t0[ph], "phase %d", ph);
    }
    cr_assert_neq(a.phase_s[PH_UPDATE], b.phase_s[PH_UPDATE]);
    /* the step is the sum of its phases and every GPU's timeline tiles each phase */
    const rlstep_result *rs[2] = {&a, &b};
    const run_record *rr[2] = {ra, rb};
    for (int k = 0; k < 2; k++) {
        double sum = 0;
        for (int ph = 0; ph < PH_COUNT; ph++)
            sum += rs[k]->phase_s[ph];
        cr_assert_float_eq(sum, rs[k]->step_s, 1e-9 * rs[k]->step_s);
        for (int ph = PH_OLD_LOGP; ph <= PH_UPDATE; ph++)
            check_tiling(rr[k], f.s.gpus, ph, rs[k]->phase_t0[ph], rs[k]->phase_s[ph]);
    }
    rlstep_result_free(&a);
    rlstep_result_free(&b);
    run_record_free(ra);
    run_record_free(rb);
    fixture_free(&f);
    /* the CLI: the default and an explicit none print the same JSON, without DCP's keys */
    char *x = run_capture("build/tailsim rlstep qwen7b-64gpu --set trace.prompts=32 --json --no-wall");
    char *y = run_capture("build/tailsim rlstep qwen7b-64gpu --set trace.prompts=32 "
                          "--set train.strategy=none --json --no-wall");
    cr_assert_str_eq(x, y);
    cr_assert_null(strstr(x, "update_plan_steps"));
    char *z = run_capture("build/tailsim rlstep qwen7b-64gpu --set trace.prompts=32 "
                          "--set train.strategy=bucket --json --no-wall");
    cr_assert(strstr(z, "\"update_plan_steps\"") && strstr(z, "\"update_bound_s\""), "%s", z);
    free(x);
    free(y);
    free(z);
}

Test(rlstep_dcp, every_response_is_trained_exactly_once, .timeout = 120)
{
    for (size_t k = 0; k < N_STRAT; k++) {
        fixture f;
        fixture_init(&f, strategies[k]);
        ts_err e = {{0}};
        /* a cap below the longest response: the training sequence is capped too */
        cr_assert_eq(scenario_set(&f.s, "rollout.max_response=12000", &e), 0, "%s", e.msg);
        rlstep_train rt;
        cr_assert_eq(rlstep_train_init(&rt, &f.s, &f.hw, &f.m, f.t, &e), 0, "%s: %s",
                     strategies[k], e.msg);
        size_t n = trace_n_responses(f.t);
        cr_assert_eq(rt.bt->n, n);
        size_t r = 0;
        int capped = 0;
        for (size_t i = 0; i < f.t->n_prompts; i++)
            for (int32_t j = 0; j < f.t->prompts[i].n_resp; j++, r++) {
                int32_t len = f.t->prompts[i].resp[j];
                capped |= len > 12000;
                len = len > 12000 ? 12000 : len;
                cr_assert_eq(rt.bt->seq[r].s, f.t->prompts[i].prompt_tokens + len);
            }
        cr_assert(capped, "the trace should have responses above the cap");
        int *seen = calloc(n, sizeof *seen);
        cr_assert_not_null(seen);
        size_t in_mb = 0;
        for (size_t b = 0; b < rt.plan.n_mb; b++)
            for (int32_t i = 0; i < rt.plan.mb[b].n; i++) {
                int32_t q = rt.plan.seq[rt.plan.mb[b].first + i];
                cr_assert(q >= 0 && (size_t)q < n);
                seen[q]++;
                in_mb++;
            }
        cr_assert_eq(in_mb, n, "%s", strategies[k]);
        for (size_t q = 0; q < n; q++)
            cr_assert_eq(seen[q], 1, "%s: response %zu trained %d times", strategies[k], q, seen[q]);
        /* every group lies within the cluster */
        for (size_t g = 0; g < rt.plan.n_grp; g++)
            cr_assert(rt.plan.grp[g].gpu0 >= 0 && rt.plan.grp[g].gpu0 + rt.plan.grp[g].sp <= f.s.gpus);
        free(seen);
        rlstep_train_free(&rt);
        fixture_free(&f);
    }
}

Test(rlstep_dcp, dcp_inter_not_slower_than_bucket_and_bound_below_all, .timeout = 120)
{
    double upd[N_STRAT], bound = 0;
    for (size_t k = 0; k < N_STRAT; k++) {
        fixture f;
        fixture_init(&f, strategies[k]);
        ts_err e = {{0}};
        rlstep_result r;
        cr_assert_eq(rlstep_run(&f.s, &f.hw, &f.m, f.t, &r, NULL, &e), 0, "%s", e.msg);
        upd[k] = r.phase_s[PH_UPDATE];
        if (k == 3) { /* two epochs replay the same plan twice, one sync each */
            rlstep_result r2;
            cr_assert_eq(scenario_set(&f.s, "train.update_epochs=2", &e), 0, "%s", e.msg);
            cr_assert_eq(rlstep_run(&f.s, &f.hw, &f.m, f.t, &r2, NULL, &e), 0, "%s", e.msg);
            cr_assert_float_eq(r2.phase_s[PH_UPDATE], 2 * upd[k], 1e-9 * upd[k]);
            cr_assert_float_eq(r2.update_bound_s, 2 * r.update_bound_s, 1e-9 * upd[k]);
            cr_assert_eq(r2.phase_s[PH_OLD_LOGP], r.phase_s[PH_OLD_LOGP]);
            rlstep_result_free(&r2);
        }
        cr_assert_gt(r.update_plan_steps, 0);
        cr_assert(r.train_imbalance >= 0 && r.train_imbalance < 1);
        cr_assert_leq(r.update_bound_s, upd[k] * (1 + 1e-9), "%s: bound %g above %g",
                      strategies[k], r.update_bound_s, upd[k]);
        if (k > 0)
            cr_assert_float_eq(r.update_bound_s, bound, 1e-12 * bound, "one bound per trace");
        bound = r.update_bound_s;
        rlstep_result_free(&r);
        fixture_free(&f);
    }
    cr_assert_leq(upd[3], upd[0], "dcp-inter %g s vs bucket %g s", upd[3], upd[0]);
}

Test(rlstep_dcp, key_takes_exactly_the_strategy_names)
{
    scenario s;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load("qwen7b-64gpu", &s, &e), 0, "%s", e.msg);
    const char *ok[] = {"none", "bucket", "packed", "dcp-intra", "dcp-inter", "dcp-inter+pac"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char set[64];
        snprintf(set, sizeof set, "train.strategy=%s", ok[i]);
        cr_assert_eq(scenario_set(&s, set, &e), 0, "%s: %s", ok[i], e.msg);
        cr_assert_str_eq(s.train_strategy, ok[i]);
    }
    const char *bad[] = {"bound", "dcp-inter+pac,bucket", "DCP-inter", "", "dcp"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char set[64];
        snprintf(set, sizeof set, "train.strategy=%s", bad[i]);
        cr_assert_eq(scenario_set(&s, set, &e), -1, "'%s' accepted", bad[i]);
        cr_assert(strstr(e.msg, "train.strategy"), "%s", e.msg);
    }
    /* in a file: file and line */
    const char *path = "build/test-rlstep-dcp-bad.ini";
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fputs("[cluster]\ngpus = 8\n[model]\nname = qwen2.5-7b\n[train]\nstrategy = bound\n", fp);
    cr_assert_eq(fclose(fp), 0);
    cr_assert_eq(scenario_load(path, &s, &e), -1);
    cr_assert(strstr(e.msg, "test-rlstep-dcp-bad.ini:6") && strstr(e.msg, "train.strategy"), "%s",
              e.msg);
    remove(path);
}

Test(rlstep_dcp, compare_shows_policy_by_strategy, .timeout = 120)
{
    const char *cmd = "build/tailsim compare joint-qwen7b-64gpu --set trace.prompts=32 "
                      "--policies verl,tlt --train bucket,dcp-inter --json";
    char *a = run_capture(cmd), *b = run_capture(cmd);
    cr_assert_str_eq(a, b);
    const char *rows[4][2] = {{"verl", "bucket"}, {"tlt", "bucket"}, {"verl", "dcp-inter"},
                              {"tlt", "dcp-inter"}};
    const char *p = a;
    for (int i = 0; i < 4; i++) {
        char pol[64], tr[64];
        snprintf(pol, sizeof pol, "\"policy\": \"%s\"", rows[i][0]);
        snprintf(tr, sizeof tr, "\"train\": \"%s\"", rows[i][1]);
        p = strstr(p, pol);
        cr_assert_not_null(p, "row %d missing in %s", i, a);
        const char *q = strstr(p, tr);
        cr_assert(q && (!strstr(p + 1, "\"policy\"") || q < strstr(p + 1, "\"policy\"")),
                  "row %d has no train %s", i, rows[i][1]);
        p++;
    }
    free(a);
    free(b);
}
