/*
 * `tailsim rollout` and `tailsim rlstep`: load a scenario, its hardware and
 * model, its trace (a file or the generator), simulate, print a table or JSON
 * and optionally save the run to the SQLite store.
 *
 * JSON keys are stable (documented in the README).  wall_s and events_per_s
 * are the only values that change between identical runs; --no-wall drops
 * them so that outputs can be compared byte for byte.
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "cli/cmd.h"
#include "cli/cmd_run.h"
#include "sim/rlstep.h"
#include "results/store.h"


typedef struct run_opts {
    const char *scenario;
    const char *trace;     /* --trace override, relative to the current directory */
    const char *db;
    int json, no_wall;
    int have_seed;
    uint64_t seed;
    const char *sets[64];
    int n_sets;
    int steps;             /* --steps N */
    const char *policy;    /* --policy NAME (NULL: the scenario's policy.name) */
} run_opts;

int cmd_print_json(const json_t *o, int precision, ts_err *e)
{
    char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(precision));
    if (!txt)
        return ts_errf(e, "out of memory printing JSON");
    puts(txt);
    free(txt);
    return 0;
}

void cmd_json_identity(json_t *o, const run_record *rec, const char *model, const char *hw)
{
    json_object_set_new(o, "command", json_string(rec->command));
    json_object_set_new(o, "scenario", json_string(rec->scenario));
    json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "hw", json_string(hw));
    json_object_set_new(o, "calibration", json_string(rec->calibration));
    json_object_set_new(o, "version", json_string(rec->version));
    json_object_set_new(o, "seed", json_integer((json_int_t)rec->seed));
}

static void run_usage(FILE *f, const char *cmd)
{
    fprintf(f,
            "usage: tailsim %s SCENARIO [options]\n\n"
            "%s\n\n"
            "SCENARIO is a name under scenarios/ (e.g. qwen7b-64gpu) or a path to an .ini file.\n\n"
            "options:\n"
            "  --trace FILE        replay FILE (JSONL, CSV or Vidur CSV) instead of the scenario's trace\n"
            "  --seed S            seed of the generated trace (overrides trace.seed)\n"
            "  --set SEC.KEY=VAL   override a scenario key (repeatable), e.g. --set rollout.tp=4\n"
            "  --policy NAME       long-tail policy: verl, tlt-base, tlt, sorted, partial,\n"
            "                      tailbatch, async, or BASE+tlt (`tailsim compare --help`;\n"
            "                      default: policy.name, else the scenario's [spec] keys)\n"
            "  --steps N           replay N RL steps (trace steps from trace.step on, or generated\n"
            "                      with seed trace.seed + k), carrying the drafter across steps;\n"
            "                      metrics are means over the steps, per_step holds each step's\n"
            "  --db FILE           save the run (metrics, per-GPU timeline, responses) to SQLite\n"
            "  --json              print one JSON object instead of a table\n"
            "  --no-wall           leave out wall_s and events_per_s (byte-identical output)\n"
            "  -h, --help          this text\n",
            cmd,
            !strcmp(cmd, "rollout")
                ? "Simulates the rollout phase: continuous batching of every response on gpus/tp replicas,\n"
                  "and reports makespan, bubble_fraction, tail_fraction and rollout_utilization."
                : "Simulates one synchronous RL step (weight sync, rollout, reward, old log-prob, ref,\n"
                  "actor update) and reports each phase, the step time and the rollout's tail metrics.");
}

static int parse_run_opts(int argc, char **argv, run_opts *o)
{
    static const struct option lo[] = {
        {"trace", required_argument, 0, 't'}, {"seed", required_argument, 0, 's'},
        {"set", required_argument, 0, 'S'},   {"db", required_argument, 0, 'd'},
        {"json", no_argument, 0, 'j'},        {"no-wall", no_argument, 0, 'W'},
        {"help", no_argument, 0, 'h'},        {"steps", required_argument, 0, 'n'},
        {"policy", required_argument, 0, 'p'}, {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->steps = 1;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 't': o->trace = optarg; break;
        case 'd': o->db = optarg; break;
        case 'j': o->json = 1; break;
        case 'W': o->no_wall = 1; break;
        case 'h': run_usage(stdout, argv[0]); return 0;
        case 'p': o->policy = optarg; break;
        case 'n': {
            int64_t v;
            if (ts_parse_i64(optarg, 1, 100000, &v)) {
                fprintf(stderr, "tailsim %s: --steps '%s': expected an integer in [1, 100000]\n", argv[0], optarg);
                return 2;
            }
            o->steps = (int)v;
            break;
        }
        case 's': {
            int64_t v;
            if (ts_parse_i64(optarg, 0, INT64_MAX, &v)) {
                fprintf(stderr, "tailsim %s: --seed '%s': expected a non-negative integer\n", argv[0], optarg);
                return 2;
            }
            o->seed = (uint64_t)v;
            o->have_seed = 1;
            break;
        }
        case 'S':
            if (o->n_sets == 64) {
                fprintf(stderr, "tailsim %s: too many --set options\n", argv[0]);
                return 2;
            }
            o->sets[o->n_sets++] = optarg;
            break;
        default: run_usage(stderr, argv[0]); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "tailsim %s: expected exactly one SCENARIO (try --help)\n", argv[0]);
        return 2;
    }
    o->scenario = argv[optind];
    return -1;
}


void run_note_carry(const char *cmd, const char *policies, int steps, const char *hint)
{
    if (steps >= CARRY_FAIR_STEPS)
        return;
    /* the policies named (or every registered one) */
    const policy *list[64];
    size_t np = 0;
    if (policies) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", policies);
        for (char *tok = strtok(buf, ","); tok && np < 64; tok = strtok(NULL, ","))
            if ((list[np] = policy_find(tok)))
                np++;
    } else {
        size_t n;
        const policy *const *all = policy_all(&n);
        for (size_t i = 0; i < n && np < 64; i++)
            list[np++] = all[i];
    }
    /* those that carry work across steps */
    char names[256] = "";
    size_t len = 0;
    int count = 0;
    for (size_t i = 0; i < np; i++) {
        const policy *p = list[i];
        if (!p->run || p->lossless || len + strlen(p->name) + 3 >= sizeof names)
            continue;
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", p->name);
        count++;
    }
    if (count)
        fprintf(stderr,
                "%s: note: %s %s work across steps, so %d step%s misstate%s %s (one step of "
                "partial or tailbatch leaves its long responses for later, one of async has "
                "nothing to overlap): use --steps %d or more%s\n",
                cmd, names, count > 1 ? "carry" : "carries", steps, steps > 1 ? "s" : "",
                steps > 1 ? "" : "s", count > 1 ? "them" : "it", CARRY_FAIR_STEPS,
                hint ? hint : "");
}


static int is_integer_metric(const char *k)
{
    static const char *ints[] = {"gpus", "tp", "replicas", "responses", "tokens", "decode_tokens",
                                 "prefill_tokens", "preemptions", "events", "kv_tokens_per_replica",
                                 "spec_iterations", "drafter_gpu_steps", "trained_tokens"};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(k, ints[i]))
            return 1;
    return 0;
}

static int print_json(const run_record *rec, const char *model, const char *hw, const char *pol,
                      int steps, json_t *per_step)
{
    json_t *o = json_object();
    cmd_json_identity(o, rec, model, hw);
    json_object_set_new(o, "policy", json_string(pol));
    json_object_set_new(o, "steps", json_integer(steps));
    for (size_t i = 0; i < rec->n_metrics; i++) {
        const metric *m = &rec->metrics[i];
        json_object_set_new(o, m->key, is_integer_metric(m->key) && steps == 1
                                           ? json_integer((json_int_t)llround(m->value))
                                           : json_real(m->value));
    }
    json_t *ph = json_object();
    for (int p = 0; p < PH_COUNT; p++) {
        char key[48];
        double v;
        snprintf(key, sizeof key, "%s_s", tl_phase_name[p]);
        if (run_get_metric(rec, key, &v) == 0)
            json_object_set_new(ph, tl_phase_name[p], json_real(v));
    }
    json_object_set_new(o, "phases_s", ph);
    json_object_set(o, "per_step", per_step);
    int rc = cmd_print_json(o, 10, NULL);
    json_decref(o);
    return rc;
}

static void print_table(const run_record *rec, const char *model, const char *hw, const char *pol,
                        int steps)
{
    printf("%s  scenario %s  model %s  hw %s  seed %llu  policy %s", rec->command, rec->scenario,
           model, hw, (unsigned long long)rec->seed, pol);
    if (steps > 1)
        printf("  steps %d (means over steps)", steps);
    printf("\ncalibration: %s\n\n", rec->calibration);
    for (size_t i = 0; i < rec->n_metrics; i++) {
        const metric *m = &rec->metrics[i];
        if (is_integer_metric(m->key) && steps == 1)
            printf("  %-22s %14.0f\n", m->key, m->value);
        else if (fabs(m->value) >= 1e6)
            printf("  %-22s %14.4g\n", m->key, m->value);
        else
            printf("  %-22s %14.4f\n", m->key, m->value);
    }
}


static int run_common(int argc, char **argv, int full)
{
    run_opts o;
    int prc = parse_run_opts(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    scenario s;
    hw_desc hw;
    llm_desc m;
    trace **steps = NULL;
    run_record *rec = NULL;
    json_t *per_step = NULL;
    multistep_result res;
    memset(&res, 0, sizeof res);
    int rc = 1;
    if (run_setup(o.scenario, o.sets, o.n_sets, o.have_seed, o.seed, &s, &hw, &m, &e))
        goto fail;
    const char *pname = o.policy ? o.policy : s.policy;
    const policy *pol = NULL;
    if (pname[0] && !(pol = policy_find(pname))) {
        ts_errf(&e, "unknown policy '%s' (tailsim compare --help lists them)", pname);
        goto fail;
    }
    if (!(steps = calloc((size_t)o.steps, sizeof *steps)) || !(rec = run_record_new())) {
        ts_errf(&e, "out of memory");
        goto fail;
    }
    if (policy_load_steps(&s, o.trace, o.steps, steps, &e))
        goto fail;
    double w0 = ts_wall_s();
    int src = policy_run(&s, pol, &hw, &m, steps, o.steps, full, &res, rec, &e);
    double wall = ts_wall_s() - w0;
    if (src)
        goto fail;
    run_set_identity(rec, full ? "rlstep" : "rollout", s.name, hw.calibration, s.seed,
                     res.step[0].gpus, res.step[0].replicas, res.step[0].tp);
    run_set_policy(rec, pol ? pol->name : NULL);
    int oom = run_multistep_metrics(rec, &res, steps, full, o.json && o.steps > 1 ? &per_step : NULL);
    if (!o.no_wall && !oom) {
        double ev = 0;
        for (int k = 0; k < res.steps; k++)
            ev += (double)res.step[k].ro.events;
        oom = run_add_metric(rec, "wall_s", wall) ||
              run_add_metric(rec, "events_per_s", wall > 0 ? ev / wall : 0);
    }
    if (oom) {
        ts_errf(&e, "out of memory");
        goto fail;
    }
    if (o.db && store_save_run_to(o.db, rec, &e))
        goto fail;
    const char *shown = pol ? pol->name : "custom";
    if (o.json) {
        if (print_json(rec, m.name, hw.name, shown, o.steps, per_step)) {
            ts_errf(&e, "out of memory printing JSON");
            goto fail;
        }
    } else {
        print_table(rec, m.name, hw.name, shown, o.steps);
    }
    if (o.db)
        fprintf(stderr, "tailsim: saved run %lld to %s\n", (long long)rec->id, o.db);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tailsim %s: %s\n", argv[0], e.msg);
done:
    json_decref(per_step);
    multistep_result_free(&res);
    run_record_free(rec);
    if (steps)
        for (int k = 0; k < o.steps; k++)
            trace_free(steps[k]);
    free(steps);
    return rc;
}

int cmd_rollout(int argc, char **argv) { return run_common(argc, argv, 0); }
int cmd_rlstep(int argc, char **argv) { return run_common(argc, argv, 1); }
