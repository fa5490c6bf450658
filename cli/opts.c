/*
 * The options the CLI commands share (cli/opts.h): each command's getopt_long
 * loop hands every option to opts_take(), which keeps the shared ones in an
 * opts_common and checks their values, so that --set, --seed, --steps, -j and
 * the rest read and fail the same way in every command.  The messages are the
 * commands' own from before they shared this ("tailsim CMD: --seed 'x':
 * expected a non-negative integer"), and tests/test_badinput.c holds some of
 * them.  Also the two helpers of the hand-parsed commands (trace, report,
 * calib) for "--flag VALUE" and "--flag=VALUE".  Only prints to stderr.
 */
#include "cli/opts.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"

void opts_init(opts_common *o, const char *cmd, int max_sets)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->max_sets = max_sets < OPTS_MAX_SETS ? max_sets : OPTS_MAX_SETS;
    o->steps = 1;
    o->jobs = 1;
}

int opts_take(opts_common *o, int c, const char *arg)
{
    int64_t v;
    switch (c) {
    case 'h': return OPTS_HELP;
    case 'o': o->out = arg; return OPTS_TAKEN;
    case OPT_DB: o->db = arg; return OPTS_TAKEN;
    case OPT_TRACE: o->trace = arg; return OPTS_TAKEN;
    case OPT_JSON: o->json = 1; return OPTS_TAKEN;
    case OPT_NO_WALL: o->no_wall = 1; return OPTS_TAKEN;
    case OPT_SET:
        if (o->n_sets == o->max_sets) {
            fprintf(stderr, "tailsim %s: too many --set options\n", o->cmd);
            return OPTS_BAD;
        }
        o->sets[o->n_sets++] = arg;
        return OPTS_TAKEN;
    case OPT_SEED:
        if (ts_parse_i64(arg, 0, INT64_MAX, &v)) {
            fprintf(stderr, "tailsim %s: --seed '%s': expected a non-negative integer\n", o->cmd,
                    arg);
            return OPTS_BAD;
        }
        o->seed = (uint64_t)v;
        o->have_seed = 1;
        return OPTS_TAKEN;
    case OPT_STEPS:
        if (ts_parse_i64(arg, 1, 100000, &v)) {
            fprintf(stderr, "tailsim %s: --steps '%s': expected an integer in [1, 100000]\n",
                    o->cmd, arg);
            return OPTS_BAD;
        }
        o->steps = (int)v;
        return OPTS_TAKEN;
    case 'j':
        if (ts_parse_i64(arg, 1, 256, &v)) {
            fprintf(stderr, "tailsim %s: -j '%s': expected an integer in [1, 256]\n", o->cmd, arg);
            return OPTS_BAD;
        }
        o->jobs = (int)v;
        return OPTS_TAKEN;
    default: return OPTS_OTHER;
    }
}

const char *opts_scenario(const opts_common *o, int argc, char **argv)
{
    if (optind != argc - 1) {
        fprintf(stderr, "tailsim %s: expected exactly one SCENARIO (try --help)\n", o->cmd);
        return NULL;
    }
    return argv[optind];
}

int opts_match(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == 0 || arg[n] == '=');
}

const char *opts_value(int argc, char **argv, int *i, const char *name)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (!strncmp(a, name, n) && a[n] == '=')
        return a + n + 1;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

int opts_step(opts_common *o, int c, const char *arg, void (*usage)(FILE *))
{
    switch (opts_take(o, c, arg)) {
    case OPTS_TAKEN:
        return OPTS_STEP_TAKEN;
    case OPTS_HELP:
        usage(stdout);
        return 0;
    case OPTS_BAD:
        return 2;
    default:
        return OPTS_STEP_OTHER;
    }
}
