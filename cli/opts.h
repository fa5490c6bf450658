/*
 * The options the CLI commands share, parsed in one place (cli/opts.c).
 *
 * Commands that parse with getopt_long (rollout, rlstep, dcp, compare, plan,
 * specdec, memory, sweep, paper) put the entries below for the shared options
 * they accept into their long-option table, in the order their --help and
 * getopt's "ambiguous option" message list them, and hand every code getopt
 * returns to opts_take() before their own switch.  The shared options are
 * --set SEC.KEY=VAL (repeatable, up to a bound per command), --seed S,
 * --steps N (in [1, 100000]; dcp has its own), --json, --no-wall, --db FILE,
 * --trace FILE, -j/--jobs N (sweep, plan), -o DIR/FILE and -h/--help; their
 * error messages are the same in every command, "tailsim CMD: ...".
 *
 * Commands that parse by hand (trace, report, calib) take "--flag VALUE" and
 * "--flag=VALUE" with opts_match() and opts_value(), and keep their own
 * messages.
 */
#ifndef TS_OPTS_H
#define TS_OPTS_H

#include <stdio.h>

#include <getopt.h>
#include <stdint.h>

#define OPTS_MAX_SETS 64

/* getopt_long codes of the shared long options: above every character, so
 * that they never meet a command's own codes.  The short options -o, -h and
 * -j (and --help, --jobs) keep 'o', 'h' and 'j', which no command uses for
 * anything else. */
enum {
    OPT_SET = 0x100, /* --set SEC.KEY=VAL */
    OPT_SEED,        /* --seed S */
    OPT_STEPS,       /* --steps N */
    OPT_JSON,        /* --json */
    OPT_NO_WALL,     /* --no-wall */
    OPT_DB,          /* --db FILE */
    OPT_TRACE,       /* --trace FILE */
};

/* Entries of a command's `struct option` table. */
#define OPTS_LONG_SET {"set", required_argument, 0, OPT_SET}
#define OPTS_LONG_SEED {"seed", required_argument, 0, OPT_SEED}
#define OPTS_LONG_STEPS {"steps", required_argument, 0, OPT_STEPS}
#define OPTS_LONG_JSON {"json", no_argument, 0, OPT_JSON}
#define OPTS_LONG_NO_WALL {"no-wall", no_argument, 0, OPT_NO_WALL}
#define OPTS_LONG_DB {"db", required_argument, 0, OPT_DB}
#define OPTS_LONG_TRACE {"trace", required_argument, 0, OPT_TRACE}
#define OPTS_LONG_HELP {"help", no_argument, 0, 'h'}
#define OPTS_LONG_JOBS {"jobs", required_argument, 0, 'j'}

/* The shared options of one command line.  Pointers point into argv. */
typedef struct opts_common {
    const char *cmd;                 /* the command's name in messages ("dcp", "rlstep") */
    int max_sets;                    /* --set options accepted (at most OPTS_MAX_SETS) */
    const char *sets[OPTS_MAX_SETS]; /* --set SEC.KEY=VAL, in command-line order */
    int n_sets;
    int have_seed;                   /* 1: --seed given */
    uint64_t seed;                   /* --seed */
    int steps;                       /* --steps (default 1) */
    int jobs;                        /* -j/--jobs, worker processes in [1, 256] (default 1) */
    int json, no_wall;               /* --json, --no-wall (0 or 1) */
    const char *db;                  /* --db FILE, NULL when not given */
    const char *out;                 /* -o DIR or FILE, NULL when not given */
    const char *trace;               /* --trace FILE, NULL when not given */
} opts_common;

/* Sets o to no options given (steps and jobs 1) for command cmd (kept, not copied),
 * accepting up to max_sets --set options.  Cannot fail. */
void opts_init(opts_common *o, const char *cmd, int max_sets);

/* What opts_take() did with a getopt_long code. */
enum {
    OPTS_OTHER, /* none of the shared options: the command's own, or getopt's '?' */
    OPTS_TAKEN, /* stored in o */
    OPTS_HELP,  /* -h or --help: the caller prints its usage on stdout and exits 0 */
    OPTS_BAD,   /* a bad value, said on stderr: the caller exits 2 */
};

/* Takes option c (a getopt_long code) with its argument arg (optarg) into o.
 * Returns OPTS_OTHER, OPTS_TAKEN, OPTS_HELP or OPTS_BAD (above). */
int opts_take(opts_common *o, int c, const char *arg);

/* The one operand left after getopt_long (argv[optind]), or NULL after
 * printing "tailsim CMD: expected exactly one SCENARIO (try --help)" when
 * there is none or more than one. */
const char *opts_scenario(const opts_common *o, int argc, char **argv);

/* For hand-parsed commands: 1 when arg is flag `name` ("--db"), alone or as
 * "name=VALUE", else 0. */
int opts_match(const char *arg, const char *name);

/* The value of flag `name` at argv[*i] (which opts_match()es it): what
 * follows '=', or the next argument (advancing *i).  Returns it, or NULL
 * when no argument follows; prints nothing. */
const char *opts_value(int argc, char **argv, int *i, const char *name);

/* One getopt_long code of a command's loop through opts_take(), with the
 * usual answers: -h prints usage(stdout) and returns 0 (exit 0), a bad value
 * returns 2 (exit 2, said on stderr), a shared option returns
 * OPTS_STEP_TAKEN (continue the loop) and anything else OPTS_STEP_OTHER (the
 * command's own switch).  So a loop reads
 *     int t = opts_step(&co, c, optarg, usage);
 *     if (t == OPTS_STEP_TAKEN) continue;
 *     if (t != OPTS_STEP_OTHER) return t;
 * Cannot fail. */
#define OPTS_STEP_TAKEN (-2)
#define OPTS_STEP_OTHER (-1)
int opts_step(opts_common *o, int c, const char *arg, void (*usage)(FILE *));

#endif
