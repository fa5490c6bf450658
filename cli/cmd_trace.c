/*
 * `tailsim trace`: inspect and generate response-length traces.
 *
 *   tailsim trace stats FILE... [--json] [--step N]
 *   tailsim trace gen --dist D --prompts N --group G [--steps S] [--cap C]
 *                     [--corr RHO] [--ranks R] [--prompt-median T]
 *                     [--prompt-sigma S] --seed S -o FILE
 *
 * stats loads every FILE (format detected from the content), concatenates
 * them, optionally keeps one step, and prints trace_stats as an aligned table
 * or, with --json, as one JSON object (jansson, keys in a fixed order, reals
 * rounded to 0.01 tokens; max_over_p50 to 0.001).  gen fills gen_params from
 * the flags and writes the plain CSV atomically.  Exit status: 0 success,
 * 1 input error (message on stderr as "tailsim: ..."), 2 usage error.
 * Flags take their value as the next argument or after '='.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/util.h"
#include "cli/cmd.h"
#include "traces/gen.h"
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
            "steps, prompts, responses, tokens, mean, p50, p90, p99, max, max/p50 and the "
            "mean prompt\n"
            "length (percentiles interpolate linearly between order statistics, like "
            "numpy).\nFILE may be - (standard input) or a pipe; each is read once.\n\n"
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
            "  --seed S            RNG seed (streams per step, reproducible)\n"
            "  -o FILE             output CSV\n"
            "  --help              this text\n");
}

/* Matches flag `name` at argv[*i]; sets *val to its value ("--x V" or
 * "--x=V").  Returns 1 on a match, 0 if not this flag, -1 when the value is
 * missing. */
static int flag_val(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n))
        return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n])
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "tailsim: trace: %s needs a value\n", name);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

static double round_to(double x, double unit)
{
    return round(x / unit) * unit;
}

static int print_stats(const trace_stats *s, char **files, int nfiles, int json)
{
    if (json) {
        json_t *o = json_object(), *fa = json_array();
        if (!o || !fa) {
            json_decref(o);
            json_decref(fa);
            fprintf(stderr, "tailsim: out of memory\n");
            return 1;
        }
        for (int i = 0; i < nfiles; i++)
            json_array_append_new(fa, json_string(files[i]));
        json_object_set_new(o, "files", fa);
        json_object_set_new(o, "steps", json_integer(s->steps));
        json_object_set_new(o, "prompts", json_integer(s->prompts));
        json_object_set_new(o, "responses", json_integer(s->responses));
        json_object_set_new(o, "tokens", json_integer(s->tokens));
        json_object_set_new(o, "mean", json_real(round_to(s->mean, 0.01)));
        json_object_set_new(o, "p50", json_real(round_to(s->p50, 0.01)));
        json_object_set_new(o, "p90", json_real(round_to(s->p90, 0.01)));
        json_object_set_new(o, "p99", json_real(round_to(s->p99, 0.01)));
        json_object_set_new(o, "max", json_integer(s->max));
        json_object_set_new(o, "max_over_p50", json_real(round_to(s->max_over_p50, 0.001)));
        json_object_set_new(o, "prompt_mean", json_real(round_to(s->prompt_mean, 0.01)));
        char *txt = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                                      JSON_REAL_PRECISION(10));
        json_decref(o);
        if (!txt) {
            fprintf(stderr, "tailsim: out of memory\n");
            return 1;
        }
        printf("%s\n", txt);
        free(txt);
        return 0;
    }
    for (int i = 0; i < nfiles; i++)
        printf("%-12s %s\n", i ? "" : "files", files[i]);
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
    return 0;
}

static int cmd_stats(int argc, char **argv)
{
    int json = 0, nfiles = 0, rc = 1;
    int64_t step = -1;
    char **files = calloc((size_t)argc, sizeof *files);
    trace *all = NULL, *one = NULL, *sel = NULL;
    ts_err e = {{0}};
    if (!files) {
        fprintf(stderr, "tailsim: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *v;
        int m;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage_stats(stdout);
            free(files);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if ((m = flag_val(argc, argv, &i, "--step", &v)) != 0) {
            if (m < 0 || ts_parse_i64(v, 0, INT32_MAX, &step)) {
                if (m > 0)
                    fprintf(stderr, "tailsim: trace stats: --step: expected an integer >= 0, "
                                    "got '%s'\n", v);
                free(files);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "tailsim: trace stats: unknown option '%s'\n", argv[i]);
            usage_stats(stderr);
            free(files);
            return 2;
        } else {
            files[nfiles++] = argv[i];
        }
    }
    if (nfiles == 0) {
        fprintf(stderr, "tailsim: trace stats: no FILE given\n");
        usage_stats(stderr);
        free(files);
        return 2;
    }
    if (!(all = trace_new())) {
        ts_errf(&e, "out of memory");
        goto done;
    }
    for (int i = 0; i < nfiles; i++) {
        if (trace_load(files[i], &one, &e) || trace_append(all, one, &e))
            goto done;
        trace_free(one);
        one = NULL;
    }
    if (step >= 0 && !(sel = trace_select_step(all, (int32_t)step, &e)))
        goto done;
    trace_stats s;
    if (trace_stats_compute(sel ? sel : all, &s, &e))
        goto done;
    rc = print_stats(&s, files, nfiles, json);
done:
    if (rc && e.msg[0])
        fprintf(stderr, "tailsim: %s\n", e.msg);
    trace_free(one);
    trace_free(all);
    trace_free(sel);
    free(files);
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

static int cmd_gen(int argc, char **argv)
{
    gen_params p;
    gen_params_default(&p);
    const char *out = NULL, *v;
    int have_dist = 0, have_prompts = 0, have_group = 0, have_seed = 0;
    ts_err e = {{0}};
    for (int i = 1; i < argc; i++) {
        int64_t n = 0;
        int m = 0, bad = 0;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage_gen(stdout);
            return 0;
        }
#define FLAG(name) ((m = flag_val(argc, argv, &i, name, &v)) != 0)
        if (FLAG("--dist")) {
            if (m > 0 && gen_parse_dist(v, &p, &e)) {
                fprintf(stderr, "tailsim: trace gen: %s\n", e.msg);
                return 2;
            }
            have_dist = 1;
        } else if (FLAG("--prompts")) {
            bad = m < 0 || int_flag("--prompts", v, 1, INT32_MAX, &n);
            p.prompts = (int32_t)n;
            have_prompts = 1;
        } else if (FLAG("--group")) {
            bad = m < 0 || int_flag("--group", v, 1, INT32_MAX, &n);
            p.group = (int32_t)n;
            have_group = 1;
        } else if (FLAG("--steps")) {
            bad = m < 0 || int_flag("--steps", v, 1, INT32_MAX, &n);
            p.steps = (int32_t)n;
        } else if (FLAG("--cap")) {
            bad = m < 0 || int_flag("--cap", v, 1, TRACE_MAX_TOKENS, &n);
            p.cap = (int32_t)n;
        } else if (FLAG("--ranks")) {
            bad = m < 0 || int_flag("--ranks", v, 0, INT32_MAX, &n);
            p.n_ranks = (int32_t)n;
        } else if (FLAG("--seed")) {
            bad = m < 0 || int_flag("--seed", v, 0, INT64_MAX, &n);
            p.seed = (uint64_t)n;
            have_seed = 1;
        } else if (FLAG("--corr")) {
            bad = m < 0 || real_flag("--corr", v, 0, 1, &p.corr);
        } else if (FLAG("--prompt-median")) {
            bad = m < 0 || real_flag("--prompt-median", v, 0, TRACE_MAX_TOKENS,
                                     &p.prompt_median);
        } else if (FLAG("--prompt-sigma")) {
            bad = m < 0 || real_flag("--prompt-sigma", v, 0, 10, &p.prompt_sigma);
        } else if (FLAG("-o") || FLAG("--output")) {
            bad = m < 0;
            out = v;
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
                        : !have_group ? "--group" : !have_seed ? "--seed" : !out ? "-o" : 0;
    if (missing) {
        fprintf(stderr, "tailsim: trace gen: %s is required\n", missing);
        usage_gen(stderr);
        return 2;
    }
    trace *t = gen_trace(&p, &e);
    if (!t) {
        fprintf(stderr, "tailsim: %s\n", e.msg);
        return 1;
    }
    int rc = trace_write_csv(t, out, &e);
    if (rc)
        fprintf(stderr, "tailsim: %s\n", e.msg);
    else
        printf("wrote %s: %d steps x %d prompts x %d responses, %lld tokens (seed %llu)\n",
               out, p.steps, p.prompts, p.group, (long long)trace_n_tokens(t),
               (unsigned long long)p.seed);
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
