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
#include "sim/cmd.h"
#include "sim/rlstep.h"
#include "sim/store.h"
#include "traces/gen.h"

typedef struct run_opts {
    const char *scenario;
    const char *trace;     /* --trace override, relative to the current directory */
    const char *db;
    int json, no_wall;
    int have_seed;
    uint64_t seed;
    const char *sets[64];
    int n_sets;
} run_opts;

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
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 't': o->trace = optarg; break;
        case 'd': o->db = optarg; break;
        case 'j': o->json = 1; break;
        case 'W': o->no_wall = 1; break;
        case 'h': run_usage(stdout, argv[0]); return 0;
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

/* Loads or generates the trace of a scenario. */
static trace *scenario_trace(const scenario *s, const char *override, ts_err *e)
{
    char path[1024];
    const char *file = override;
    if (!file && scenario_trace_path(s, path, sizeof path) == 0)
        file = path;
    if (file) {
        trace *all = NULL;
        if (trace_load(file, &all, e))
            return NULL;
        trace *one = trace_select_step(all, s->trace_step, e);
        trace_free(all);
        return one;
    }
    gen_params p;
    if (scenario_gen_params(s, &p, e))
        return NULL;
    return gen_trace(&p, e);
}

static void add(run_record *r, const char *k, double v, int *oom)
{
    if (run_add_metric(r, k, v))
        *oom = 1;
}

static int fill_metrics(run_record *rec, const rlstep_result *res, const trace *t, int full,
                        double wall, int no_wall)
{
    int oom = 0;
    const rollout_result *ro = &res->ro;
    add(rec, "gpus", res->gpus, &oom);
    add(rec, "tp", res->tp, &oom);
    add(rec, "replicas", res->replicas, &oom);
    add(rec, "responses", (double)ro->responses, &oom);
    add(rec, "tokens", (double)trace_n_tokens(t), &oom);
    if (full)
        add(rec, "step_s", res->step_s, &oom);
    add(rec, "rollout_s", ro->makespan_s, &oom);
    if (full) {
        add(rec, "sync_s", res->phase_s[PH_SYNC], &oom);
        add(rec, "reward_s", res->phase_s[PH_REWARD], &oom);
        add(rec, "old_logp_s", res->phase_s[PH_OLD_LOGP], &oom);
        add(rec, "ref_s", res->phase_s[PH_REF], &oom);
        add(rec, "update_s", res->phase_s[PH_UPDATE], &oom);
        add(rec, "rollout_share", res->step_s > 0 ? ro->makespan_s / res->step_s : 0, &oom);
    }
    add(rec, "bubble_fraction", ro->bubble_fraction, &oom);
    add(rec, "tail_fraction", ro->tail_fraction, &oom);
    add(rec, "rollout_utilization", ro->utilization, &oom);
    if (full)
        add(rec, "train_imbalance", res->train_imbalance, &oom);
    add(rec, "kv_tokens_per_replica", res->kv_tokens, &oom);
    add(rec, "full_batch", ro->full_batch, &oom);
    add(rec, "decode_tokens", (double)ro->decode_tokens, &oom);
    add(rec, "prefill_tokens", (double)ro->prefill_tokens, &oom);
    add(rec, "preemptions", (double)ro->preemptions, &oom);
    add(rec, "spec_iterations", (double)ro->spec_iterations, &oom);
    add(rec, "accept_len", ro->accept_len, &oom);
    add(rec, "events", (double)ro->events, &oom);
    if (!no_wall) {
        add(rec, "wall_s", wall, &oom);
        add(rec, "events_per_s", wall > 0 ? (double)ro->events / wall : 0, &oom);
    }
    return oom ? -1 : 0;
}

static int is_integer_metric(const char *k)
{
    static const char *ints[] = {"gpus", "tp", "replicas", "responses", "tokens", "decode_tokens",
                                 "prefill_tokens", "preemptions", "events", "kv_tokens_per_replica",
                                 "spec_iterations"};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(k, ints[i]))
            return 1;
    return 0;
}

static int print_json(const run_record *rec, const char *model, const char *hw)
{
    json_t *o = json_object();
    json_object_set_new(o, "command", json_string(rec->command));
    json_object_set_new(o, "scenario", json_string(rec->scenario));
    json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "hw", json_string(hw));
    json_object_set_new(o, "calibration", json_string(rec->calibration));
    json_object_set_new(o, "version", json_string(rec->version));
    json_object_set_new(o, "seed", json_integer((json_int_t)rec->seed));
    for (size_t i = 0; i < rec->n_metrics; i++) {
        const metric *m = &rec->metrics[i];
        json_object_set_new(o, m->key, is_integer_metric(m->key) ? json_integer((json_int_t)llround(m->value))
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
    char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(o);
    if (!txt)
        return -1;
    puts(txt);
    free(txt);
    return 0;
}

static void print_table(const run_record *rec, const char *model, const char *hw)
{
    printf("%s  scenario %s  model %s  hw %s  seed %llu\ncalibration: %s\n\n", rec->command,
           rec->scenario, model, hw, (unsigned long long)rec->seed, rec->calibration);
    for (size_t i = 0; i < rec->n_metrics; i++) {
        const metric *m = &rec->metrics[i];
        if (is_integer_metric(m->key))
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
    trace *t = NULL;
    run_record *rec = NULL;
    rlstep_result res;
    memset(&res, 0, sizeof res);
    int rc = 1;
    if (scenario_load(o.scenario, &s, &e))
        goto fail;
    for (int i = 0; i < o.n_sets; i++)
        if (scenario_set(&s, o.sets[i], &e))
            goto fail;
    if (o.have_seed)
        s.seed = o.seed;
    if (scenario_validate(&s, &e) || hw_load(s.hw, &hw, &e) || llm_load(s.model, &m, &e))
        goto fail;
    if (s.gpus_per_node > 0)
        hw.gpus_per_node = s.gpus_per_node;
    if (!(t = scenario_trace(&s, o.trace, &e)))
        goto fail;
    if (!(rec = run_record_new())) {
        ts_errf(&e, "out of memory");
        goto fail;
    }
    double w0 = ts_wall_s();
    int src = full ? rlstep_run(&s, &hw, &m, t, &res, rec, &e)
                   : rlstep_rollout(&s, &hw, &m, t, &res, rec, &e);
    double wall = ts_wall_s() - w0;
    if (src)
        goto fail;
    snprintf(rec->command, sizeof rec->command, "%s", full ? "rlstep" : "rollout");
    snprintf(rec->scenario, sizeof rec->scenario, "%s", s.name);
    snprintf(rec->calibration, sizeof rec->calibration, "%s", hw.calibration);
    snprintf(rec->version, sizeof rec->version, "%s", TS_VERSION);
    rec->seed = s.seed;
    rec->gpus = res.gpus;
    rec->replicas = res.replicas;
    rec->tp = res.tp;
    if (fill_metrics(rec, &res, t, full, wall, o.no_wall)) {
        ts_errf(&e, "out of memory");
        goto fail;
    }
    if (o.db) {
        store *st = NULL;
        if (store_open(o.db, &st, &e))
            goto fail;
        int sr = store_save_run(st, rec, &e);
        store_close(st);
        if (sr)
            goto fail;
    }
    if (o.json) {
        if (print_json(rec, m.name, hw.name)) {
            ts_errf(&e, "out of memory printing JSON");
            goto fail;
        }
    } else {
        print_table(rec, m.name, hw.name);
    }
    if (o.db)
        fprintf(stderr, "tailsim: saved run %lld to %s\n", (long long)rec->id, o.db);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tailsim %s: %s\n", argv[0], e.msg);
done:
    rlstep_result_free(&res);
    run_record_free(rec);
    trace_free(t);
    return rc;
}

int cmd_rollout(int argc, char **argv) { return run_common(argc, argv, 0); }
int cmd_rlstep(int argc, char **argv) { return run_common(argc, argv, 1); }
