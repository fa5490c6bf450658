/*
 * tailsim: one binary, one subcommand per job.  main() only dispatches; each
 * subcommand parses its own flags and prints its own --help.
 *
 * The MPI build (make MPI=1, or build/tailsim-mpi) compiles this file with
 * -DTS_MPI: launched by mpirun, `sweep` and `plan` initialise MPI and spread
 * their configurations over the ranks (sweep/sweep_mpi.c); run without mpirun,
 * the MPI binary behaves exactly like the plain one.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "cli/cmd.h"

#ifdef TS_MPI
#include <mpi.h>

#include "sweep/sweep_run.h"

/* Whether mpirun (OpenMPI, or a PMI launcher) started this process. */
static int under_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}
#endif

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
    {"memory", cmd_memory, "memory SCENARIO: what one GPU holds in the rollout and the actor update"},
    {"specdec", cmd_specdec, "specdec SCENARIO: plain vs speculative decoding throughput per batch size"},
    {"compare", cmd_compare, "compare SCENARIO --policies verl,tlt,...: the same RL steps under each policy"},
    {"dcp", cmd_dcp, "dcp SCENARIO: plan and simulate variable-length training (bucket, packed, DCP)"},
    {"sweep", cmd_sweep, "sweep GRID.ini [-j N]: every combination of a grid of scenario keys, into SQLite"},
    {"plan", cmd_plan, "plan SCENARIO --gpus L --tp L --policies L: Pareto front of step time vs GPU-hours"},
    {"paper", cmd_paper, "paper [-o DIR] [--quick]: every paper experiment against the published numbers"},
    {"report", cmd_report, "report --run ID -o DIR: Gantt chart, length CDF and tables of a stored run"},
    {"keys", cmd_keys, "keys [SECTION]: every scenario key with its type, default, range and meaning"},
    {"models", cmd_models, "models: the models (models/llm) and hardware (models/hw) a scenario can name"},
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

/* Every command's output ends here: standard output is flushed and closed,
 * and a write that failed at any point (a full disk, /dev/full, a closed
 * descriptor) turns a successful exit into 1 with a message, so no output
 * is ever silently cut short.  Returns the exit status. */
static int finish(int rc)
{
    int bad = ferror(stdout);
    errno = 0;
    if (fclose(stdout) != 0 || bad) {
        if (rc) /* the command failed and said so (a failed write included) */
            return rc;
        if (errno)
            fprintf(stderr, "tailsim: cannot write standard output: %s\n", strerror(errno));
        else
            fprintf(stderr, "tailsim: cannot write standard output (a write failed)\n");
        return rc ? rc : 1;
    }
    return rc;
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
        return finish(0);
    }
    if (!strcmp(name, "version") || !strcmp(name, "--version")) {
        printf("tailsim %s\n", TS_VERSION);
        return finish(0);
    }
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(name, commands[i].name))
            continue;
#ifdef TS_MPI
        if ((!strcmp(name, "sweep") || !strcmp(name, "plan")) && under_mpirun()) {
            MPI_Init(&argc, &argv);
            sweep_remote = sweep_mpi_exec;
            int rc = commands[i].fn(argc - 1, argv + 1);
            MPI_Finalize();
            return finish(rc);
        }
#endif
        return finish(commands[i].fn(argc - 1, argv + 1));
    }
    fprintf(stderr, "tailsim: unknown command '%s' (try: tailsim help)\n", name);
    return 2;
}
