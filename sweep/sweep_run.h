/*
 * The sweep runner, shared by `tailsim sweep` and `tailsim plan`: runs the
 * configurations of a grid (sweep/grid.h) in worker processes and hands each
 * result to one collector, which alone touches the database and stdout.
 * Transports: local fork()ed workers (sweep_run_local) or, in the MPI build,
 * MPI ranks (sweep/sweep_mpi.c); both carry results as sweep_result_pack()
 * bytes, so a configuration's metrics are bit-identical whichever ran it.
 */
#ifndef TS_SWEEP_RUN_H
#define TS_SWEEP_RUN_H

#include <stddef.h>

#include "common/err.h"
#include "sweep/grid.h"
#include "results/result.h"

typedef struct sweep_result {
    size_t config;          /* configuration index in the grid */
    int ok;                 /* 1: rec holds the run; 0: err says why it failed */
    char err[TS_ERR_MAX];
    run_record *rec;        /* identity and metrics (no timeline or responses); NULL when !ok */
} sweep_result;

/* Called in the collecting process only.  begin (may be NULL) runs once
 * before the first result; result runs once per configuration, in arrival
 * order, and may take r->rec (setting it to NULL); progress (may be NULL)
 * after each.  begin/result return 0, or -1 with e set to stop the sweep. */
typedef struct sweep_hooks {
    void *ctx;
    int (*begin)(void *ctx, ts_err *e);
    int (*result)(void *ctx, sweep_result *r, ts_err *e);
    void (*progress)(void *ctx, size_t done, size_t total);
} sweep_hooks;

/* Checks configuration `config` without simulating: scenario keys, cross
 * checks, hardware, model, policy, and that the model fits at its TP.
 * Returns 0, or -1 with a message naming the configuration's values. */
int sweep_config_check(const grid *g, size_t config, ts_err *e);

/* Simulates configuration `config` into *out (out->ok says whether it
 * succeeded).  Returns 0, or -1 on allocation failure.  Free with
 * sweep_result_clear(). */
int sweep_config_run(const grid *g, size_t config, sweep_result *out);
void sweep_result_clear(sweep_result *r);

/* The configuration's swept values as a JSON object text (free it), e.g.
 * {"policy.name": "tlt", "rollout.tp": "2"}; NULL on allocation failure. */
char *sweep_config_params(const grid *g, size_t config);

/* Serialises a result into a new buffer (*buf, free it) of *n bytes, and
 * back.  pack returns 0 or -1 (out of memory); unpack returns 0 or -1 with e
 * set on a malformed buffer. */
int sweep_result_pack(const sweep_result *r, unsigned char **buf, size_t *n);
int sweep_result_unpack(const unsigned char *buf, size_t n, sweep_result *r, ts_err *e);

/* What the runners return when a deferred signal stopped them. */
#define SWEEP_INTERRUPTED (-2)

/* Runs every configuration whose mask byte is non-zero (mask NULL: all) in
 * `jobs` forked worker processes (1: in this process), handing results to
 * the hooks here.  Returns 0; -1 when a hook failed, a worker died or the
 * pipes failed; or SWEEP_INTERRUPTED when the caller defers the fatal
 * signals (ts_signal_defer(), common/util.h) and one came: no result is
 * handed over after it (with jobs 1, the configuration being simulated is
 * finished and dropped) and e says "GRID: interrupted by signal N (NAME)".
 * Workers are stopped (SIGTERM) and reaped in every case but success; they
 * never defer signals, so they die of it and write nothing more. */
int sweep_run_local(const grid *g, int jobs, const unsigned char *mask, const sweep_hooks *h,
                    ts_err *e);

/* A remote transport (the MPI build's sweep_mpi_exec, set by its main()
 * under mpirun): runs the same contract across processes; *collector is 1
 * in the one process that called the hooks. */
typedef int (*sweep_remote_fn)(const grid *g, const unsigned char *mask, const sweep_hooks *h,
                               int *collector, ts_err *e);
extern sweep_remote_fn sweep_remote;
int sweep_mpi_exec(const grid *g, const unsigned char *mask, const sweep_hooks *h,
                   int *collector, ts_err *e);

/* sweep_remote when set, else sweep_run_local (*collector = 1).  The number
 * of processes is the MPI world's under mpirun, else jobs.  Both stop at a
 * deferred signal (SWEEP_INTERRUPTED, in the collector; under MPI the
 * caller defers on every rank, see sweep/sweep_mpi.c). */
int sweep_exec(const grid *g, int jobs, const unsigned char *mask, const sweep_hooks *h,
               int *collector, ts_err *e);

#endif
