/*
 * `tailsim rollout` and `tailsim rlstep`: load a scenario, its hardware and
 * model, its trace (a file or the generator), simulate, print a table or JSON,
 * optionally save the run to the SQLite store and, with -o DIR, write its
 * report there (reports/report.h, as `tailsim report` does for a stored run).
 *
 * JSON keys are stable (documented in docs/metrics.md).  wall_s and events_per_s
 * are the only values that change between identical runs; --no-wall drops
 * them so that outputs can be compared byte for byte.
 *
 * Both run in four phases: run_parse (the command line), run_simulate (set
 * up, simulate, collect the metrics and save to --db; prints nothing),
 * then run_emit_json or run_emit_text.  Also home of the helpers every
 * command shares (cli/cmd.h): cmd_print_json and cmd_json_identity.
 */
#include <errno.h>
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
#include "cli/opts.h"
#include "cli/progress.h"
#include "reports/report.h"
#include "sim/rlstep.h"
#include "results/store.h"


typedef struct run_opts {
    opts_common co;        /* --trace (relative to the current directory), --seed, --set,
                            * --steps, --db, -o, --json, --no-wall */
    const char *scenario;
    const char *policy;    /* --policy NAME (NULL: the scenario's policy.name) */
} run_opts;

/* What one rollout or RL-step run produced, for the emitters. */
typedef struct run_out {
    scenario s;
    hw_desc hw;
    llm_desc m;
    const policy *pol;     /* NULL: the scenario's [spec] keys, shown as "custom" */
    trace **steps;         /* the n_steps steps replayed */
    int n_steps;
    multistep_result res;
    run_record *rec;       /* identity, metrics (means over the steps) and timeline */
    json_t *per_step;      /* --json over several steps: each step's metrics, else NULL */
} run_out;

int cmd_print_json(const json_t *o, int precision, ts_err *e)
{
    char *txt = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(precision));
    if (!txt)
        return ts_errf(e, "out of memory printing JSON");
    /* checked here too, so that a command whose JSON could not be written
     * fails before it reports success on stderr */
    int bad = puts(txt) == EOF || fflush(stdout) != 0;
    free(txt);
    if (bad)
        return ts_errf(e, "cannot write standard output: %s", strerror(errno));
    return 0;
}

const char *cmd_flat(const char *s, char *buf, size_t n)
{
    if (s != buf) /* in place when s is buf */
        snprintf(buf, n, "%s", s);
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    return buf;
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
            "  --trace FILE        replay FILE (JSONL, CSV or Vidur CSV; - for standard input)\n"
            "                      instead of the scenario's trace; a directory is one trace\n"
            "                      (its step files in name order), and its PolyTrace\n"
            "                      reward_timings_step_N.jsonl (or trace.reward_file) give the\n"
            "                      reward phase: per step, the slowest rank's recorded time\n"
            "  --seed S            seed of the generated trace (overrides trace.seed)\n"
            "  --set SEC.KEY=VAL   override a scenario key (repeatable), e.g. --set rollout.tp=4\n"
            "  --policy NAME       long-tail policy: verl, tlt-base, tlt, sorted, partial,\n"
            "                      tailbatch, async, or BASE+tlt (`tailsim compare --help`;\n"
            "                      default: policy.name, else the scenario's [spec] keys)\n"
            "  --steps N           replay N RL steps (trace steps from trace.step on, or generated\n"
            "                      with seed trace.seed + k), carrying the drafter across steps;\n"
            "                      metrics are means over the steps, per_step holds each step's\n"
            "  --db FILE           save the run (metrics, per-GPU timeline, responses) to SQLite\n"
            "  -o DIR              also write the run's report into DIR (created if missing), as\n"
            "                      `tailsim report` does: gantt.png, cdf.png, report.md, index.html,\n"
            "                      timeline.json (ui.perfetto.dev), responses.csv, phases.csv;\n"
            "                      needs gnuplot, checked before simulating\n"
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

/* Parses the command line into o.  Returns -1 to go on, or the exit status
 * (0 after --help, 2 after a usage error, said on stderr). */
static int run_parse(int argc, char **argv, run_opts *o)
{
    static const struct option lo[] = {
        OPTS_LONG_TRACE,
        OPTS_LONG_SEED,
        OPTS_LONG_SET,
        OPTS_LONG_DB,
        OPTS_LONG_JSON,
        OPTS_LONG_NO_WALL,
        OPTS_LONG_HELP,
        OPTS_LONG_STEPS,
        {"policy", required_argument, 0, 'p'},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    opts_init(&o->co, argv[0], OPTS_MAX_SETS);
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "ho:", lo, NULL)) != -1) {
        int t = opts_take(&o->co, c, optarg);
        if (t == OPTS_HELP) {
            run_usage(stdout, argv[0]);
            return 0;
        }
        if (t == OPTS_BAD)
            return 2;
        if (t == OPTS_TAKEN)
            continue;
        switch (c) {
        case 'p': o->policy = optarg; break;
        default: run_usage(stderr, argv[0]); return 2;
        }
    }
    if (!(o->scenario = opts_scenario(&o->co, argc, argv)))
        return 2;
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


const char *run_trace_name(const scenario *s, const char *override, char *buf, size_t n)
{
    if (override)
        snprintf(buf, n, "%s", override);
    else if (scenario_trace_path(s, buf, n))
        snprintf(buf, n, "the generated trace");
    return buf;
}

int run_check_placement(const scenario *s, const char *override, const policy *const *list,
                        int np, trace *const *steps, int n, ts_err *e)
{
    char name[1024];
    run_trace_name(s, override, name, sizeof name);
    for (int i = 0; i < np; i++)
        if (policy_check_placement(s, list[i], name, steps, n, e))
            return -1;
    return 0;
}

void run_note_truncation(const char *cmd, const scenario *s, trace *const *steps, int n)
{
    int64_t resp = 0, tok = 0, all_resp = 0, all_tok = 0;
    for (int k = 0; k < n; k++) {
        int64_t r, t;
        trace_truncation(steps[k], s->max_response, &r, &t);
        resp += r;
        tok += t;
        all_resp += (int64_t)trace_n_responses(steps[k]);
        all_tok += trace_n_tokens(steps[k]);
    }
    if (resp > 0)
        fprintf(stderr,
                "%s: note: rollout.max_response = %d cuts %lld of the trace's %lld responses "
                "(%.1f%%), dropping %lld of its %lld tokens (%.1f%%): the rollout and training "
                "end them at the cap (metrics truncated_responses, truncated_tokens)\n",
                cmd, s->max_response, (long long)resp, (long long)all_resp,
                100.0 * (double)resp / (double)all_resp, (long long)tok, (long long)all_tok,
                100.0 * (double)tok / (double)all_tok);
}

static int is_integer_metric(const char *k)
{
    static const char *ints[] = {"gpus", "tp", "replicas", "responses", "tokens", "decode_tokens",
                                 "prefill_tokens", "preemptions", "events", "kv_tokens_per_replica",
                                 "spec_iterations", "drafter_gpu_steps", "trained_tokens",
                                 "truncated_responses", "truncated_tokens",
                                 "reward_ranks", "tool_turns", "cached_tokens", "kv_evictions",
                                 "critical_response", "critical_turns", "critical_turn"};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(k, ints[i]))
            return 1;
    return 0;
}

/* Sets up and simulates o's run into r (zeroed first; free with
 * run_out_free() whatever this returns): the scenario, its policy and steps,
 * the simulation, the run's identity and metrics (wall_s and events_per_s
 * unless --no-wall), saved to --db.  Prints nothing.  Returns 0, or -1 with
 * e set. */
static int run_simulate(const run_opts *o, int full, run_out *r, ts_err *e)
{
    memset(r, 0, sizeof *r);
    const opts_common *co = &o->co;
    if (run_setup(o->scenario, co->sets, co->n_sets, co->have_seed, co->seed, &r->s, &r->hw,
                  &r->m, e))
        return -1;
    const char *pname = o->policy ? o->policy : r->s.policy;
    if (pname[0] && !(r->pol = policy_find(pname)))
        return ts_errf(e, "unknown policy '%s' (tailsim compare --help lists them)", pname);
    if (!(r->steps = calloc((size_t)co->steps, sizeof *r->steps)) || !(r->rec = run_record_new()))
        return ts_errf(e, "out of memory");
    r->n_steps = co->steps;
    if (policy_load_steps(&r->s, co->trace, co->steps, r->steps, e) ||
        run_check_placement(&r->s, co->trace, &r->pol, 1, r->steps, co->steps, e))
        return -1;
    double w0 = ts_wall_s();
    progress pg; /* --steps N > 1: the steps, on a terminal */
    progress_start(&pg, full ? "tailsim rlstep" : "tailsim rollout");
    pg.what = "step";
    int src = policy_run_progress(&r->s, r->pol, &r->hw, &r->m, r->steps, co->steps, full,
                                  &r->res, r->rec, co->steps > 1 ? progress_cb : NULL, &pg, e);
    progress_end(&pg);
    double wall = ts_wall_s() - w0;
    if (src)
        return -1;
    run_set_identity(r->rec, full ? "rlstep" : "rollout", r->s.name, r->hw.calibration, r->s.seed,
                     r->res.step[0].gpus, r->res.step[0].replicas, r->res.step[0].tp);
    run_set_policy(r->rec, r->pol ? r->pol->name : NULL);
    int oom = run_multistep_metrics(r->rec, &r->res, r->steps, full,
                                    co->json && co->steps > 1 ? &r->per_step : NULL);
    if (!co->no_wall && !oom) {
        double ev = 0;
        for (int k = 0; k < r->res.steps; k++)
            ev += (double)r->res.step[k].ro.events;
        oom = run_add_metric(r->rec, "wall_s", wall) ||
              run_add_metric(r->rec, "events_per_s", wall > 0 ? ev / wall : 0);
    }
    if (oom)
        return ts_errf(e, "out of memory");
    if ((co->db || co->out) &&
        run_record_source(r->rec, &r->s, co->sets, co->n_sets, co->steps, co->trace, r->steps,
                          r->n_steps, e))
        return -1;
    return co->db ? store_save_run_to(co->db, r->rec, e) : 0;
}

static void run_out_free(run_out *r)
{
    json_decref(r->per_step);
    multistep_result_free(&r->res);
    run_record_free(r->rec);
    for (int k = 0; k < r->n_steps; k++)
        trace_free(r->steps[k]);
    free(r->steps);
}

/* The policy's name as the output shows it. */
static const char *run_policy_shown(const run_out *r)
{
    return r->pol ? r->pol->name : "custom";
}

/* Prints r as one JSON object.  Returns 0, or -1 with e set. */
static int run_emit_json(const run_out *r, ts_err *e)
{
    const run_record *rec = r->rec;
    json_t *o = json_object();
    cmd_json_identity(o, rec, r->m.name, r->hw.name);
    json_object_set_new(o, "policy", json_string(run_policy_shown(r)));
    json_object_set_new(o, "steps", json_integer(r->n_steps));
    for (size_t i = 0; i < rec->n_metrics; i++) {
        const metric *m = &rec->metrics[i];
        json_object_set_new(o, m->key, is_integer_metric(m->key) && r->n_steps == 1
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
    double v;
    if (run_get_metric(rec, "reward_ranks", &v) == 0) /* else the keys stay as they were */
        json_object_set_new(o, "reward_source", json_string("trace"));
    json_object_set(o, "per_step", r->per_step);
    int rc = cmd_print_json(o, 10, e);
    json_decref(o);
    return rc;
}

/* Prints r as a table.  Cannot fail. */
static void run_emit_text(const run_out *r)
{
    const run_record *rec = r->rec;
    char n1[256], n2[64], n3[64];
    printf("%s  scenario %s  model %s  hw %s  seed %llu  policy %s", rec->command,
           cmd_flat(rec->scenario, n1, sizeof n1), cmd_flat(r->m.name, n2, sizeof n2),
           cmd_flat(r->hw.name, n3, sizeof n3), (unsigned long long)rec->seed, run_policy_shown(r));
    if (r->n_steps > 1)
        printf("  steps %d (means over steps)", r->n_steps);
    printf("\ncalibration: %s\n\n", rec->calibration);
    for (size_t i = 0; i < rec->n_metrics; i++) {
        const metric *m = &rec->metrics[i];
        if (is_integer_metric(m->key) && r->n_steps == 1)
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
    int prc = run_parse(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    /* -o: gnuplot and the directory are checked before any simulation */
    if (o.co.out && report_can_draw(o.co.out, &e)) {
        fprintf(stderr, "tailsim %s: -o %s: %s\n", argv[0], o.co.out, e.msg);
        return 1;
    }
    run_out r;
    int rc = 1;
    if (run_simulate(&o, full, &r, &e))
        goto fail;
    if (o.co.json) {
        if (run_emit_json(&r, &e))
            goto fail;
    } else {
        run_emit_text(&r);
    }
    char who[64];
    snprintf(who, sizeof who, "tailsim %s", argv[0]);
    run_note_truncation(who, &r.s, r.steps, r.n_steps);
    if (o.co.db)
        fprintf(stderr, "tailsim: saved run %lld to %s\n", (long long)r.rec->id, o.co.db);
    if (o.co.out) {
        if (report_write(r.rec, o.co.out, &e))
            goto fail;
        fprintf(stderr, "tailsim %s: report: %s/index.html (and report.md, timeline.json, "
                        "responses.csv, phases.csv)\n", argv[0], o.co.out);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tailsim %s: %s\n", argv[0], e.msg);
done:
    run_out_free(&r);
    return rc;
}

int cmd_rollout(int argc, char **argv) { return run_common(argc, argv, 0); }
int cmd_rlstep(int argc, char **argv) { return run_common(argc, argv, 1); }
