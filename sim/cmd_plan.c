/*
 * `tailsim plan SCENARIO --gpus 32,64,128 --tp 1,2,4,8 --policies verl,tlt
 *  [--train STRATEGIES] [--target-step 30m] [--steps N] [-j N] [--json] [-o DIR]`:
 * capacity planning.  The searched configurations are a sweep grid over
 * policy.name x cluster.gpus x rollout.tp (x train.strategy), built in memory
 * and run by the sweep runner (sim/sweep_run.h, locally or over MPI ranks).
 * Configurations that cannot run (TP not dividing the GPUs, the model not
 * fitting at that TP, ...) are skipped with the reason.  Prints every
 * feasible configuration, the Pareto front of step time vs GPU-hours per
 * 1,000 steps, and the cheapest configuration meeting the step-time target;
 * with -o DIR also plan.dat and plan_front.png.  Deterministic for a seed.
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "reports/plan_report.h"
#include "sim/cmd.h"
#include "sim/cmd_run.h"
#include "sim/cmd_sweep.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim plan SCENARIO [--gpus LIST] [--tp LIST] [--policies LIST]\n"
            "                    [--train STRATEGIES] [--target-step T] [--steps N] [-j N]\n"
            "                    [--set SEC.KEY=VAL] [--json] [-o DIR]\n\n"
            "Searches every combination of GPU count, rollout TP, policy (and training\n"
            "strategy), skipping those that cannot run, and prints the Pareto front of RL\n"
            "step time vs GPU-hours per 1,000 steps and the cheapest configuration meeting\n"
            "the target step time.\n\n"
            "options:\n"
            "  --gpus LIST         cluster.gpus values, e.g. 32,64,128,256 (default: the scenario's)\n"
            "  --tp LIST           rollout.tp values, e.g. 1,2,4,8 (default: the scenario's)\n"
            "  --policies LIST     policies (default verl,tlt)\n"
            "  --train LIST        train.strategy values (none, bucket, packed, dcp-intra,\n"
            "                      dcp-inter, dcp-inter+pac), through the scenario key table\n"
            "  --target-step T     step-time target: seconds, or with a unit (90s, 30m, 1.5h)\n"
            "  --steps N           RL steps simulated per configuration (default 1)\n"
            "  --set SEC.KEY=VAL   a fixed scenario override (repeatable)\n"
            "  -j, --jobs N        worker processes (default 1; MPI ranks under mpirun)\n"
            "  --json              print one JSON object\n"
            "  -o DIR              write DIR/plan.dat and DIR/plan_front.png (gnuplot)\n"
            "  -h, --help          this text\n");
}

/* "30m", "90s", "1.5h", "120" (seconds) -> seconds.  Returns 0 or -1. */
static int parse_duration(const char *s, double *out)
{
    char buf[64];
    size_t n = strlen(s);
    if (!n || n >= sizeof buf)
        return -1;
    double mult = 1;
    memcpy(buf, s, n + 1);
    char u = buf[n - 1];
    if (u == 's' || u == 'm' || u == 'h') {
        mult = u == 's' ? 1 : u == 'm' ? 60 : 3600;
        buf[n - 1] = 0;
    }
    double v;
    if (ts_parse_double(buf, 1e-9, 1e12, &v))
        return -1;
    *out = v * mult;
    return 0;
}

/* The label of configuration i: "tlt 64x tp2" (+ " dcp-inter"). */
static void label(const grid *g, size_t i, char *buf, size_t n)
{
    size_t idx[GRID_MAX_DIMS];
    grid_config(g, i, idx);
    size_t o = 0;
    buf[0] = 0;
    for (size_t d = 0; d < g->n_dims && o + 1 < n; d++) {
        const grid_dim *dm = &g->dim[d];
        const char *v = dm->vals[idx[d]];
        if (dm->n < 2 && strcmp(dm->key, "gpus") && strcmp(dm->key, "tp"))
            continue; /* a fixed --set: the same for every configuration */
        if (!strcmp(dm->key, "gpus"))
            o += (size_t)snprintf(buf + o, n - o, "%s%sx", o ? " " : "", v);
        else if (!strcmp(dm->key, "tp"))
            o += (size_t)snprintf(buf + o, n - o, "%stp%s", o ? " " : "", v);
        else
            o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? " " : "", v);
    }
}

static json_t *point_json(const plan_point *p, const grid *g)
{
    json_t *o = json_object();
    char *params = sweep_config_params(g, p->config);
    json_object_set_new(o, "config", json_integer((json_int_t)p->config));
    json_object_set_new(o, "label", json_string(p->label));
    json_object_set_new(o, "params", params ? json_loads(params, 0, NULL) : json_null());
    free(params);
    json_object_set_new(o, "gpus", json_integer(p->gpus));
    json_object_set_new(o, "tp", json_integer(p->tp));
    json_object_set_new(o, "step_s", json_real(p->step_s));
    json_object_set_new(o, "gpu_hours_per_1000_steps", json_real(p->gpu_h));
    json_object_set_new(o, "pareto", json_boolean(p->front));
    return o;
}

static int print_plan(const grid *g, const plan_point *pt, size_t np, char **why, size_t n_bad,
                      double target, long best, int json, ts_err *e)
{
    if (json) {
        json_t *o = json_object(), *all = json_array(), *front = json_array(),
               *bad = json_array();
        json_object_set_new(o, "command", json_string("plan"));
        json_object_set_new(o, "scenario", json_string(g->scenario));
        json_object_set_new(o, "steps", json_integer(g->steps));
        json_object_set_new(o, "searched", json_integer((json_int_t)g->n_configs));
        json_object_set_new(o, "target_step_s", target > 0 ? json_real(target) : json_null());
        for (size_t i = 0; i < np; i++) {
            json_array_append_new(all, point_json(&pt[i], g));
            if (pt[i].front)
                json_array_append_new(front, json_integer((json_int_t)pt[i].config));
        }
        for (size_t i = 0; i < g->n_configs; i++) {
            if (!why[i])
                continue;
            json_t *b = json_object();
            char *params = sweep_config_params(g, i);
            json_object_set_new(b, "config", json_integer((json_int_t)i));
            json_object_set_new(b, "params", params ? json_loads(params, 0, NULL) : json_null());
            json_object_set_new(b, "reason", json_string(why[i]));
            free(params);
            json_array_append_new(bad, b);
        }
        json_object_set_new(o, "feasible", all);
        json_object_set_new(o, "pareto", front);
        json_object_set_new(o, "infeasible", bad);
        json_object_set_new(o, "cheapest", best >= 0 ? point_json(&pt[best], g) : json_null());
        int rc = cmd_print_json(o, 10, e);
        json_decref(o);
        return rc;
    }
    printf("plan  scenario %s  steps %d  %zu configurations searched, %zu feasible, %zu skipped\n\n",
           g->scenario, g->steps, g->n_configs, np, n_bad);
    printf("  %-34s %5s %3s %11s %16s  %s\n", "configuration", "gpus", "tp", "step_s",
           "GPU-h/1k steps", "front");
    for (size_t i = 0; i < np; i++)
        printf("  %-34s %5d %3d %11.2f %16.1f  %s\n", pt[i].label, pt[i].gpus, pt[i].tp,
               pt[i].step_s, pt[i].gpu_h, pt[i].front ? "*" : "");
    if (n_bad) {
        printf("\nskipped (cannot run):\n");
        for (size_t i = 0; i < g->n_configs; i++)
            if (why[i]) {
                char lb[96];
                label(g, i, lb, sizeof lb);
                printf("  %-34s %s\n", lb, why[i]);
            }
    }
    printf("\nPareto front (step time vs GPU-hours per 1,000 steps):\n");
    for (size_t i = 0; i < np; i++)
        if (pt[i].front)
            printf("  %-34s step %9.2f s  %10.1f GPU-h/1k steps\n", pt[i].label, pt[i].step_s,
                   pt[i].gpu_h);
    if (target > 0) {
        if (best >= 0)
            printf("\ncheapest meeting step <= %.0f s: %s  (step %.2f s, %.1f GPU-h per 1,000 steps)\n",
                   target, pt[best].label, pt[best].step_s, pt[best].gpu_h);
        else
            printf("\nno configuration meets step <= %.0f s\n", target);
    } else if (best >= 0) {
        printf("\ncheapest: %s  (step %.2f s, %.1f GPU-h per 1,000 steps)\n", pt[best].label,
               pt[best].step_s, pt[best].gpu_h);
    }
    return 0;
}

/* The reason text of a failure, without the "plan: config N (...): " prefix
 * and the scenario file's path (the same for every configuration). */
static const char *reason_of(const char *msg)
{
    const char *p = strstr(msg, "): ");
    p = p ? p + 3 : msg;
    const char *ini = strstr(p, ".ini: ");
    if (ini && !memchr(p, ' ', (size_t)(ini - p)))
        p = ini + 6;
    return p;
}

int cmd_plan(int argc, char **argv)
{
    static const struct option lo[] = {
        {"gpus", required_argument, 0, 'g'},   {"tp", required_argument, 0, 't'},
        {"policies", required_argument, 0, 'P'}, {"train", required_argument, 0, 'T'},
        {"target-step", required_argument, 0, 'x'}, {"steps", required_argument, 0, 'n'},
        {"set", required_argument, 0, 'S'},    {"jobs", required_argument, 0, 'j'},
        {"json", no_argument, 0, 'J'},         {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *gpus = NULL, *tp = NULL, *pols = "verl,tlt", *train = NULL, *out_dir = NULL;
    const char *sets[64];
    int n_sets = 0, steps = 1, jobs = 1, json = 0, c;
    double target = 0;
    int64_t v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:j:", lo, NULL)) != -1) {
        switch (c) {
        case 'g': gpus = optarg; break;
        case 't': tp = optarg; break;
        case 'P': pols = optarg; break;
        case 'T': train = optarg; break;
        case 'o': out_dir = optarg; break;
        case 'J': json = 1; break;
        case 'h': usage(stdout); return 0;
        case 'x':
            if (parse_duration(optarg, &target)) {
                fprintf(stderr, "tailsim plan: --target-step '%s': expected a positive duration "
                                "(e.g. 1800, 90s, 30m, 1.5h)\n", optarg);
                return 2;
            }
            break;
        case 'n':
            if (ts_parse_i64(optarg, 1, 100000, &v)) {
                fprintf(stderr, "tailsim plan: --steps '%s': expected an integer in [1, 100000]\n", optarg);
                return 2;
            }
            steps = (int)v;
            break;
        case 'j':
            if (sweep_parse_jobs("plan", optarg, &jobs))
                return 2;
            break;
        case 'S':
            if (n_sets == 64) {
                fprintf(stderr, "tailsim plan: too many --set options\n");
                return 2;
            }
            sets[n_sets++] = optarg;
            break;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "tailsim plan: expected exactly one SCENARIO (try --help)\n");
        return 2;
    }
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    grid g;
    grid_init(&g, "plan", argv[optind]);
    g.steps = steps;
    sweep_collect col;
    sweep_hooks h;
    memset(&col, 0, sizeof col);
    unsigned char *mask = NULL;
    char **why = NULL;
    plan_point *pt = NULL;
    size_t np = 0, n_bad = 0;
    int rc = 1, collector = 1;
    if (grid_check_base(&g, &e) ||
        grid_add_dim(&g, "policy", "name", pols, 0, "--policies", &e) ||
        (gpus && grid_add_dim(&g, "cluster", "gpus", gpus, 0, "--gpus", &e)) ||
        (tp && grid_add_dim(&g, "rollout", "tp", tp, 0, "--tp", &e)) ||
        (train && grid_add_dim(&g, "train", "strategy", train, 0, "--train", &e)))
        goto fail;
    for (int i = 0; i < n_sets; i++) {
        char sec[sizeof g.dim[0].section], key[sizeof g.dim[0].key];
        const char *val;
        if (scenario_parse_set(sets[i], sec, sizeof sec, key, sizeof key, 1, &val, &e))
            goto fail;
        char one[GRID_SET_MAX];
        snprintf(one, sizeof one, "\"%s\"", val); /* one value, verbatim */
        if (grid_add_dim(&g, sec, key, one, 0, "--set", &e))
            goto fail;
    }
    mask = calloc(g.n_configs, 1);
    why = calloc(g.n_configs, sizeof *why);
    pt = calloc(g.n_configs, sizeof *pt);
    if (!mask || !why || !pt) {
        ts_errf(&e, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < g.n_configs; i++) {
        ts_err ce = {{0}};
        if (sweep_config_check(&g, i, &ce) == 0)
            mask[i] = 1;
        else if (!(why[i] = strdup(reason_of(ce.msg)))) {
            ts_errf(&e, "out of memory");
            goto fail;
        }
    }
    if (sweep_collect_init(&col, &g, "plan", NULL, &h, &e))
        goto fail;
    int xrc = sweep_exec(&g, jobs, mask, &h, &collector, &e);
    if (!collector) {
        rc = xrc ? 1 : 0;
        goto done;
    }
    if (xrc)
        goto fail;
    for (size_t i = 0; i < g.n_configs; i++) {
        if (!mask[i])
            continue;
        if (!col.rec[i]) { /* failed while running: also "cannot run" */
            if (!(why[i] = strdup(col.err[i] ? reason_of(col.err[i]) : "did not run"))) {
                ts_errf(&e, "out of memory");
                goto fail;
            }
            continue;
        }
        plan_point *p = &pt[np++];
        double s = 0;
        p->config = i;
        label(&g, i, p->label, sizeof p->label);
        p->gpus = col.rec[i]->gpus;
        p->tp = col.rec[i]->tp;
        if (run_get_metric(col.rec[i], "step_s", &s)) {
            ts_errf(&e, "configuration %zu has no step_s", i);
            goto fail;
        }
        p->step_s = s;
        p->gpu_h = plan_gpu_hours(p->gpus, s);
    }
    for (size_t i = 0; i < g.n_configs; i++)
        n_bad += why[i] != NULL;
    plan_pareto(pt, np);
    long best = plan_cheapest(pt, np, target > 0 ? target : INFINITY);
    if (print_plan(&g, pt, np, why, n_bad, target, best, json, &e))
        goto fail;
    if (out_dir) {
        char title[512];
        snprintf(title, sizeof title, "tailsim plan: %s, %d step%s per configuration",
                 g.scenario, g.steps, g.steps > 1 ? "s" : "");
        if (plan_plot(pt, np, target, best, out_dir, title, &e))
            goto fail;
        fprintf(stderr, "tailsim plan: wrote %s/plan.dat and %s/plan_front.png\n", out_dir,
                out_dir);
    }
    run_note_carry("tailsim plan", pols, g.steps, NULL);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tailsim plan: %s\n", e.msg);
done:
    sweep_collect_free(&col);
    if (why)
        for (size_t i = 0; i < g.n_configs; i++)
            free(why[i]);
    free(why);
    free(mask);
    free(pt);
    grid_free(&g);
    return rc;
}
