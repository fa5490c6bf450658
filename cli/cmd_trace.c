/*
 * `tailsim trace`: inspect and generate response-length traces.
 *
 *   tailsim trace stats FILE... [--json] [--step N]
 *   tailsim trace gen --dist D --prompts N --group G [--steps S] [--cap C]
 *                     [--corr RHO] [--ranks R] [--prompt-median T]
 *                     [--prompt-sigma S] --seed S -o FILE
 *   tailsim trace gen --turns search-r1[:P1,P2,...] --prompts N --group G
 *                     [--steps S] [--cap C] [--prompt-median T] --seed S -o FILE
 *
 * stats loads every FILE (format detected from the content), concatenates
 * them, optionally keeps one step, and prints trace_stats as an aligned table
 * or, with --json, as one JSON object (jansson, keys in a fixed order, reals
 * rounded to 0.01 tokens; max_over_p50 to 0.001).  gen fills gen_params from
 * the flags and writes the plain CSV atomically.  Exit status: 0 success,
 * 1 input error (message on stderr as "tailsim: ..."), 2 usage error.
 * Flags take their value as the next argument or after '=' (cli/opts.c's
 * opts_match and opts_value).  Each subcommand parses its flags
 * (stats_cmd_parse, gen_cmd_parse), computes, then prints (stats_emit_json
 * or stats_emit_text).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "common/util.h"
#include "cli/cmd.h"
#include "cli/opts.h"
#include "traces/gen.h"
#include "traces/reward.h"
#include "traces/trace.h"

static void usage_trace(FILE *f)
{
    fprintf(f, "usage: tailsim trace stats FILE... [--json] [--step N]\n"
               "       tailsim trace gen --dist D --prompts N --group G --seed S -o FILE "
               "[options]\n"
               "(tailsim trace stats --help, tailsim trace gen --help for details)\n");
}

static void usage_stats(FILE *f)
{
    fprintf(f,
            "usage: tailsim trace stats FILE... [--json] [--step N]\n\n"
            "Loads the traces (RL rollout JSONL, plain CSV "
            "step,prompt_id,prompt_tokens,response_tokens[,dp_rank],\n"
            "or a Vidur CSV with num_prefill_tokens,num_decode_tokens), concatenates them "
            "and prints\n"
            "steps, prompts, responses, tokens, mean, p50, p90, p99, max, max/p50, the "
            "mean prompt\n"
            "length and at_max, the responses exactly max tokens long (percentiles "
            "interpolate\nlinearly between order statistics, like numpy).  When at least "
            "5 responses and 1%% of\nthem end at the maximum, the trace looks truncated at a "
            "generation cap: a warning\non stderr says so (max/p50 then understates the "
            "tail).\n"
            "FILE may be - (standard input) or a pipe; each is read once.  A directory is one\n"
            "trace: its *.jsonl / *.csv files in name order (PolyTrace's step_N.jsonl or\n"
            "packed_lengths_step_N.jsonl).  Reward-timings files (reward_timings_step_N.jsonl,\n"
            "or JSONL records with reward_time_s), in a directory or given, add the steps'\n"
            "recorded reward times: reward_steps and the spread of a step's (its slowest\n"
            "rank's) are printed.\n\n"
            "  --json     print one JSON object instead of a table\n"
            "  --step N   only step N of the concatenated trace\n"
            "  --help     this text\n");
}

static void usage_gen(FILE *f)
{
    fprintf(f,
            "usage: tailsim trace gen --dist D --prompts N --group G --seed S -o FILE "
            "[options]\n\n"
            "Writes a synthetic trace as plain CSV (atomically).\n\n"
            "  --dist D            lognormal[:MEDIAN:SIGMA]  (default 1024:1.0)\n"
            "                      mixture[:W/M/S,...]       (default: Intern-S1 math fit,\n"
            "                                                 mean ~9.6k tokens)\n"
            "                      fixed:LEN\n"
            "  --prompts N         prompts per step\n"
            "  --group G           responses per prompt\n"
            "  --steps S           RL steps (default 1)\n"
            "  --cap C             max response length, tokens (default 32768)\n"
            "  --corr RHO          within-group correlation in [0,1] (default 0.5;\n"
            "                      Gaussian copula: 1 = identical lengths per group)\n"
            "  --ranks R           assign dp_rank = prompt %% R (default: none)\n"
            "  --prompt-median T   prompt length median, tokens (default 256)\n"
            "  --prompt-sigma S    lognormal sigma of prompt lengths (default 0: all T)\n"
            "  --turns search-r1[:P1,P2,...]\n"
            "                      multi-turn trajectories instead of --dist, written as\n"
            "                      multi-turn JSONL: the Search-R1 fit (docs/agentic.md),\n"
            "                      optionally other turn-count probabilities\n"
            "  --seed S            RNG seed (streams per step, reproducible)\n"
            "  -o FILE             output CSV (JSONL with --turns)\n"
            "  --help              this text\n");
}

/* Matches flag `name` at argv[*i]; sets *val to its value ("--x V" or
 * "--x=V").  Returns 1 on a match, 0 if not this flag, -1 when the value is
 * missing (said on stderr). */
static int flag_val(int argc, char **argv, int *i, const char *name, const char **val)
{
    if (!opts_match(argv[*i], name))
        return 0;
    if (!(*val = opts_value(argc, argv, i, name))) {
        fprintf(stderr, "tailsim: trace: %s needs a value\n", name);
        return -1;
    }
    return 1;
}

static double round_to(double x, double unit)
{
    return round(x / unit) * unit;
}

typedef struct stats_opts {
    int json;          /* --json */
    int64_t step;      /* --step N, -1: every step */
    char **files;      /* the FILE operands, nfiles of them (argv's; the array: free()) */
    int nfiles;
} stats_opts;

/* Parses `trace stats`'s arguments into o (free o->files whatever this
 * returns).  Returns -1 to go on, or the exit status (0 after --help, 1 out
 * of memory, 2 after a usage error; said on stderr). */
static int stats_cmd_parse(int argc, char **argv, stats_opts *o)
{
    memset(o, 0, sizeof *o);
    o->step = -1;
    if (!(o->files = calloc((size_t)argc, sizeof *o->files))) {
        fprintf(stderr, "tailsim: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *v;
        int m;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage_stats(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            o->json = 1;
        } else if ((m = flag_val(argc, argv, &i, "--step", &v)) != 0) {
            if (m < 0 || ts_parse_i64(v, 0, INT32_MAX, &o->step)) {
                if (m > 0)
                    fprintf(stderr, "tailsim: trace stats: --step: expected an integer >= 0, "
                                    "got '%s'\n", v);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tailsim: trace stats: unknown option '%s'\n", argv[i]);
            usage_stats(stderr);
            return 2;
        } else {
            o->files[o->nfiles++] = argv[i];
        }
    }
    if (o->nfiles == 0) {
        fprintf(stderr, "tailsim: trace stats: no FILE given\n");
        usage_stats(stderr);
        return 2;
    }
    return -1;
}

/* Loads one FILE of trace stats: a directory as one trace
 * (trace_load_path), a reward-timings file as its records, any other file
 * as a trace (trace_load_part).  Returns 0 or -1. */
static int stats_load(const char *path, trace **out, ts_err *e)
{
    struct stat st;
    if (strcmp(path, "-") && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return trace_load_path(path, out, e);
    return trace_load_part(path, out, e);
}

/* Loads and concatenates o's files, keeps --step's step and computes the
 * statistics into *s and the recorded reward times' spread over steps into
 * *rw, and a multi-turn trace's turn statistics into *ts.  Returns 0, or -1
 * with e set. */
static int stats_compute(const stats_opts *o, trace_stats *s, reward_summary *rw,
                         trace_turn_stats *ts, ts_err *e)
{
    trace *all = NULL, *one = NULL, *sel = NULL;
    int rc = -1;
    if (!(all = trace_new())) {
        ts_errf(e, "out of memory");
        goto done;
    }
    for (int i = 0; i < o->nfiles; i++) {
        if (stats_load(o->files[i], &one, e) || trace_append(all, one, e))
            goto done;
        trace_free(one);
        one = NULL;
    }
    if (o->step >= 0 && !(sel = trace_select_step(all, (int32_t)o->step, e)))
        goto done;
    rc = trace_stats_compute(sel ? sel : all, s, e) ||
         reward_steps(sel ? sel : all, rw, e) < 0 ||
         trace_turn_stats_compute(sel ? sel : all, ts, e) ? -1 : 0;
done:
    trace_free(one);
    trace_free(all);
    trace_free(sel);
    return rc;
}

/* Prints s (and rw, when steps have recorded reward times) as one JSON
 * object.  Returns 0, or 1 after saying so. */
static int stats_emit_json(const trace_stats *s, const reward_summary *rw,
                           const trace_turn_stats *ts, const stats_opts *o)
{
    json_t *j = json_object(), *fa = json_array();
    if (!j || !fa) {
        json_decref(j);
        json_decref(fa);
        fprintf(stderr, "tailsim: out of memory\n");
        return 1;
    }
    for (int i = 0; i < o->nfiles; i++)
        json_array_append_new(fa, json_string(o->files[i]));
    json_object_set_new(j, "files", fa);
    json_object_set_new(j, "steps", json_integer(s->steps));
    json_object_set_new(j, "prompts", json_integer(s->prompts));
    json_object_set_new(j, "responses", json_integer(s->responses));
    json_object_set_new(j, "tokens", json_integer(s->tokens));
    json_object_set_new(j, "mean", json_real(round_to(s->mean, 0.01)));
    json_object_set_new(j, "p50", json_real(round_to(s->p50, 0.01)));
    json_object_set_new(j, "p90", json_real(round_to(s->p90, 0.01)));
    json_object_set_new(j, "p99", json_real(round_to(s->p99, 0.01)));
    json_object_set_new(j, "max", json_integer(s->max));
    json_object_set_new(j, "max_over_p50", json_real(round_to(s->max_over_p50, 0.001)));
    json_object_set_new(j, "prompt_mean", json_real(round_to(s->prompt_mean, 0.01)));
    json_object_set_new(j, "at_max", json_integer(s->at_max));
    json_object_set_new(j, "at_max_fraction", json_real(round_to(s->at_max_fraction, 0.0001)));
    json_object_set_new(j, "capped", json_boolean(s->capped));
    if (rw->ranks > 0) { /* per step: the slowest rank's recorded reward time */
        json_object_set_new(j, "reward_steps", json_integer(rw->ranks));
        json_object_set_new(j, "reward_min_s", json_real(round_to(rw->min_s, 0.001)));
        json_object_set_new(j, "reward_median_s", json_real(round_to(rw->median_s, 0.001)));
        json_object_set_new(j, "reward_max_s", json_real(round_to(rw->max_s, 0.001)));
    }
    if (ts->trajectories > 0) { /* a multi-turn trace */
        json_object_set_new(j, "turns", json_integer(ts->turns));
        json_object_set_new(j, "turns_mean", json_real(round_to(ts->mean_turns, 0.001)));
        json_object_set_new(j, "turns_max", json_integer(ts->max_turns));
        json_object_set_new(j, "tool_calls", json_integer(ts->tool_calls));
        json_object_set_new(j, "tool_turns", json_integer(ts->tool_turns));
        json_object_set_new(j, "tool_mean_s", json_real(round_to(ts->tool_mean_s, 0.0001)));
        json_object_set_new(j, "tool_p50_s", json_real(round_to(ts->tool_p50_s, 0.0001)));
        json_object_set_new(j, "tool_p99_s", json_real(round_to(ts->tool_p99_s, 0.0001)));
        json_object_set_new(j, "tool_max_s", json_real(round_to(ts->tool_max_s, 0.0001)));
        json_object_set_new(j, "turn_prompt_tokens", json_integer(ts->prompt_tokens));
        json_object_set_new(j, "cached_tokens", json_integer(ts->cached_tokens));
        json_object_set_new(j, "cached_fraction", json_real(round_to(ts->cached_fraction, 0.0001)));
        json_object_set_new(j, "generated_tokens", json_integer(ts->gen_tokens));
        json_object_set_new(j, "appended_tokens", json_integer(ts->append_tokens));
        json_object_set_new(j, "engine_latency_mean_s",
                            json_real(round_to(ts->engine_mean_s, 0.001)));
    }
    char *txt = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(j);
    if (!txt) {
        fprintf(stderr, "tailsim: out of memory\n");
        return 1;
    }
    printf("%s\n", txt);
    free(txt);
    return 0;
}

/* Prints s (and rw, when steps have recorded reward times) as a table.
 * Cannot fail. */
static void stats_emit_text(const trace_stats *s, const reward_summary *rw,
                            const trace_turn_stats *ts, const stats_opts *o)
{
    for (int i = 0; i < o->nfiles; i++)
        printf("%-12s %s\n", i ? "" : "files", o->files[i]);
    printf("%-12s %12lld\n", "steps", (long long)s->steps);
    printf("%-12s %12lld\n", "prompts", (long long)s->prompts);
    printf("%-12s %12lld\n", "responses", (long long)s->responses);
    printf("%-12s %12lld  tokens\n", "tokens", (long long)s->tokens);
    printf("%-12s %12.2f  tokens\n", "mean", s->mean);
    printf("%-12s %12.2f  tokens\n", "p50", s->p50);
    printf("%-12s %12.2f  tokens\n", "p90", s->p90);
    printf("%-12s %12.2f  tokens\n", "p99", s->p99);
    printf("%-12s %12lld  tokens\n", "max", (long long)s->max);
    printf("%-12s %12.3f\n", "max/p50", s->max_over_p50);
    printf("%-12s %12.2f  tokens\n", "prompt_mean", s->prompt_mean);
    printf("%-12s %12lld  responses (%.2f%%)%s\n", "at_max", (long long)s->at_max,
           100.0 * s->at_max_fraction, s->capped ? ", at the cap" : "");
    if (rw->ranks > 0) {
        printf("%-12s %12d  steps with recorded reward times (a step's: its slowest rank's)\n",
               "reward_steps", rw->ranks);
        printf("%-12s %12.3f  s over those steps\n", "reward_min", rw->min_s);
        printf("%-12s %12.3f  s\n", "reward_med", rw->median_s);
        printf("%-12s %12.3f  s\n", "reward_max", rw->max_s);
    }
    if (ts->trajectories > 0) { /* a multi-turn trace */
        printf("%-12s %12lld  (%.3f a trajectory, at most %d)\n", "turns", (long long)ts->turns,
               ts->mean_turns, ts->max_turns);
        printf("%-12s %12lld  (after %lld turns)\n", "tool_calls", (long long)ts->tool_calls,
               (long long)ts->tool_turns);
        printf("%-12s %12.4f  s a tool turn (p50 %.4f, p99 %.4f, max %.4f)\n", "tool_mean",
               ts->tool_mean_s, ts->tool_p50_s, ts->tool_p99_s, ts->tool_max_s);
        printf("%-12s %12lld  tokens of %lld turn prompt tokens (%.2f%%)\n", "cached",
               (long long)ts->cached_tokens, (long long)ts->prompt_tokens,
               100.0 * ts->cached_fraction);
        printf("%-12s %12lld  tokens over all turns\n", "generated", (long long)ts->gen_tokens);
        printf("%-12s %12lld  tokens of tool results\n", "appended", (long long)ts->append_tokens);
        if (ts->engine_turns > 0)
            printf("%-12s %12.3f  s a turn, recorded (queueing included)\n", "engine_mean",
                   ts->engine_mean_s);
    }
}

/* Warns on stderr when s looks truncated at its maximum (trace_stats.capped):
 * its tail beyond the cap is not in the data, and max/p50 understates it.
 * Cannot fail. */
static void stats_warn_capped(const trace_stats *s)
{
    if (s->capped)
        fprintf(stderr,
                "tailsim: warning: %lld responses (%.1f%%) end at the maximum length %lld: the "
                "trace looks truncated at %lld tokens; the tail beyond it is not in the data\n",
                (long long)s->at_max, 100.0 * s->at_max_fraction, (long long)s->max,
                (long long)s->max);
}

static int cmd_stats(int argc, char **argv)
{
    stats_opts o;
    int rc = stats_cmd_parse(argc, argv, &o);
    if (rc < 0) {
        ts_err e = {{0}};
        trace_stats s;
        reward_summary rw;
        trace_turn_stats ts;
        if (stats_compute(&o, &s, &rw, &ts, &e)) {
            if (e.msg[0])
                fprintf(stderr, "tailsim: %s\n", e.msg);
            rc = 1;
        } else if (o.json) {
            stats_warn_capped(&s);
            rc = stats_emit_json(&s, &rw, &ts, &o);
        } else {
            stats_warn_capped(&s);
            stats_emit_text(&s, &rw, &ts, &o);
            rc = 0;
        }
    }
    free(o.files);
    return rc;
}

/* Parses an integer flag value; prints a usage message on failure. */
static int int_flag(const char *name, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (ts_parse_i64(v, lo, hi, out) == 0)
        return 0;
    fprintf(stderr, "tailsim: trace gen: %s: expected an integer in %lld..%lld, got '%s'\n",
            name, (long long)lo, (long long)hi, v);
    return -1;
}

static int real_flag(const char *name, const char *v, double lo, double hi, double *out)
{
    if (ts_parse_double(v, lo, hi, out) == 0)
        return 0;
    fprintf(stderr, "tailsim: trace gen: %s: expected a number in [%g, %g], got '%s'\n",
            name, lo, hi, v);
    return -1;
}

/* Parses `trace gen`'s flags into p (defaults first) and *out.  Returns -1
 * to go on, or the exit status (0 after --help, 2 after a usage error, said
 * on stderr). */
static int gen_cmd_parse(int argc, char **argv, gen_params *p, const char **out)
{
    gen_params_default(p);
    const char *v;
    int have_dist = 0, have_prompts = 0, have_group = 0, have_seed = 0;
    ts_err e = {{0}};
    *out = NULL;
    for (int i = 1; i < argc; i++) {
        int64_t n = 0;
        int m = 0, bad = 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage_gen(stdout);
            return 0;
        }
#define FLAG(name) ((m = flag_val(argc, argv, &i, name, &v)) != 0)
        if (FLAG("--dist")) {
            if (m > 0 && gen_parse_dist(v, p, &e)) {
                fprintf(stderr, "tailsim: trace gen: %s\n", e.msg);
                return 2;
            }
            have_dist = 1;
        } else if (FLAG("--turns")) {
            const char *pr = m > 0 ? v + (strncmp(v, "search-r1:", 10) ? 9 : 10) : NULL;
            if (m > 0 && (strncmp(v, "search-r1", 9) || (v[9] && v[9] != ':') ||
                          (v[9] == ':' && gen_parse_turn_probs(pr, &p->turns, &e)))) {
                fprintf(stderr, "tailsim: trace gen: --turns '%s': %s\n", v,
                        e.msg[0] ? e.msg : "expected search-r1[:P1,P2,...]");
                return 2;
            }
            bad = m < 0;
            p->turns.on = 1;
            have_dist = 1;
        } else if (FLAG("--prompts")) {
            bad = m < 0 || int_flag("--prompts", v, 1, INT32_MAX, &n);
            p->prompts = (int32_t)n;
            have_prompts = 1;
        } else if (FLAG("--group")) {
            bad = m < 0 || int_flag("--group", v, 1, INT32_MAX, &n);
            p->group = (int32_t)n;
            have_group = 1;
        } else if (FLAG("--steps")) {
            bad = m < 0 || int_flag("--steps", v, 1, INT32_MAX, &n);
            p->steps = (int32_t)n;
        } else if (FLAG("--cap")) {
            bad = m < 0 || int_flag("--cap", v, 1, TRACE_MAX_TOKENS, &n);
            p->cap = (int32_t)n;
        } else if (FLAG("--ranks")) {
            bad = m < 0 || int_flag("--ranks", v, 0, INT32_MAX, &n);
            p->n_ranks = (int32_t)n;
        } else if (FLAG("--seed")) {
            bad = m < 0 || int_flag("--seed", v, 0, INT64_MAX, &n);
            p->seed = (uint64_t)n;
            have_seed = 1;
        } else if (FLAG("--corr")) {
            bad = m < 0 || real_flag("--corr", v, 0, 1, &p->corr);
        } else if (FLAG("--prompt-median")) {
            bad = m < 0 || real_flag("--prompt-median", v, 0, TRACE_MAX_TOKENS,
                                     &p->prompt_median);
        } else if (FLAG("--prompt-sigma")) {
            bad = m < 0 || real_flag("--prompt-sigma", v, 0, 10, &p->prompt_sigma);
        } else if (FLAG("-o") || FLAG("--output")) {
            bad = m < 0;
            *out = v;
        } else {
            fprintf(stderr, "tailsim: trace gen: unknown option '%s'\n", argv[i]);
            usage_gen(stderr);
            return 2;
        }
#undef FLAG
        if (bad)
            return 2;
    }
    const char *missing = !have_dist ? "--dist" : !have_prompts ? "--prompts"
                        : !have_group ? "--group" : !have_seed ? "--seed" : !*out ? "-o" : 0;
    if (missing) {
        fprintf(stderr, "tailsim: trace gen: %s is required\n", missing);
        usage_gen(stderr);
        return 2;
    }
    return -1;
}

static int cmd_gen(int argc, char **argv)
{
    gen_params p;
    const char *out;
    int prc = gen_cmd_parse(argc, argv, &p, &out);
    if (prc >= 0)
        return prc;
    ts_err e = {{0}};
    trace *t = gen_trace(&p, &e);
    if (!t) {
        fprintf(stderr, "tailsim: %s\n", e.msg);
        return 1;
    }
    int rc = p.turns.on ? trace_write_turns_jsonl(t, out, &e) : trace_write_csv(t, out, &e);
    char shown[4096];
    if (rc) {
        fprintf(stderr, "tailsim: %s\n", e.msg);
    } else {
        printf("wrote %s: %d steps x %d prompts x %d responses, %lld tokens (seed %llu)\n",
               cmd_flat(out, shown, sizeof shown), p.steps, p.prompts, p.group, (long long)trace_n_tokens(t),
               (unsigned long long)p.seed);
        /* the generator clips at --cap: say how much of the draw it cut */
        int64_t at_cap = 0, n = (int64_t)trace_n_responses(t);
        for (size_t i = 0; i < t->n_prompts; i++)
            for (int32_t j = 0; j < t->prompts[i].n_resp; j++)
                at_cap += t->prompts[i].resp[j] == p.cap;
        if (at_cap > 0)
            fprintf(stderr, "tailsim: note: %lld responses (%.1f%%) end at --cap %d tokens, "
                            "where the generator clips its draws: the tail beyond it is not "
                            "in the trace\n",
                    (long long)at_cap, 100.0 * (double)at_cap / (double)n, p.cap);
    }
    trace_free(t);
    return rc ? 1 : 0;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2) {
        usage_trace(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        usage_trace(stdout);
        return 0;
    }
    if (!strcmp(sub, "stats"))
        return cmd_stats(argc - 1, argv + 1);
    if (!strcmp(sub, "gen"))
        return cmd_gen(argc - 1, argv + 1);
    fprintf(stderr, "tailsim: trace: unknown subcommand '%s'\n", sub);
    usage_trace(stderr);
    return 2;
}
