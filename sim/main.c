/*
 * tailsim: one binary, one subcommand per job.  main() only dispatches; each
 * subcommand parses its own flags and prints its own --help.
 */
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "sim/cmd.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"trace", cmd_trace, "trace stats FILE... | trace gen ...: inspect and generate length traces"},
    {"calib", cmd_calib, "calib vidur FILE | calib check CSV: the cost model against measured GPU times"},
    {"rollout", cmd_rollout, "rollout SCENARIO: simulate the rollout phase and its bubble"},
    {"rlstep", cmd_rlstep, "rlstep SCENARIO: simulate one synchronous RL step (all phases)"},
    {"specdec", cmd_specdec, "specdec SCENARIO: plain vs speculative decoding throughput per batch size"},
    {"compare", cmd_compare, "compare SCENARIO --policies verl,tlt,...: the same RL steps under each policy"},
    {"dcp", cmd_dcp, "dcp SCENARIO: plan and simulate variable-length training (bucket, packed, DCP)"},
    {"paper", cmd_paper, "paper [-o DIR] [--quick]: every paper experiment against the published numbers"},
    {"report", cmd_report, "report --run ID -o DIR: Gantt chart, length CDF and tables of a stored run"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "tailsim %s: discrete-event simulator of the long tail in LLM RL training\n\n"
               "usage: tailsim COMMAND [ARGS]   (tailsim COMMAND --help for details)\n\n",
            TS_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-8s %s\n", "help", "this list");
    fprintf(f, "  %-8s %s\n", "version", "print the version");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "version") || !strcmp(name, "--version")) {
        printf("tailsim %s\n", TS_VERSION);
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tailsim: unknown command '%s' (try: tailsim help)\n", name);
    return 2;
}
