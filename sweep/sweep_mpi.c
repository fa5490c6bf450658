/*
 * The MPI transport of the sweep runner (compiled only into the MPI build:
 * `make MPI=1` or build/tailsim-mpi, with mpicc; never into libtailsim.a).
 * Rank r runs the configurations i with i % size == r; ranks other than 0
 * send each packed result (sweep_result_pack, MPI_BYTE) to rank 0, the one
 * collector, which runs its own share, draining arrived results between its
 * configurations, and then receives the rest.  Rank 0 opens the database
 * (the begin hook) before anyone starts and broadcasts whether it could, so
 * a bad --db stops every rank with nothing run.  Ranks run on one machine
 * type: the packed bytes are the host's layout.
 *
 * Interruption: the caller defers the fatal signals (ts_signal_defer())
 * on every rank before calling.  mpirun (OpenMPI 4) answers SIGINT/SIGTERM
 * by sending SIGTERM to every rank, and as soon as one rank dies it kills
 * the others (SIGKILL, within milliseconds as measured with 4.1): so no
 * rank may die before rank 0 has marked the sweep.  Rank 0 never blocks in
 * MPI (a non-blocking probe and a 1 ms nap in turn, the flag checked
 * between messages and between its own configurations), hands no result
 * to the hooks once a signal came, and returns SWEEP_INTERRUPTED without
 * waiting for the other ranks or calling MPI_Abort; its caller marks the
 * sweep, closes the database and dies of the signal (never reaching
 * MPI_Finalize).  Another rank stops after the configuration it is running
 * (its result is not sent) and lingers, sending nothing, until mpirun kills
 * it once rank 0 is gone, or dies of the signal itself after LINGER_S.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/util.h"
#include "sweep/sweep_run.h"

#define TAG_RESULT 71
#define LINGER_S 60 /* seconds an interrupted rank other than 0 waits to be killed */

/* A rank that cannot go on (out of memory) stops the whole job: the others
 * would wait for its share forever.  Says why first, since MPI_Abort ends
 * every rank before the caller could print. */
static void fatal(const char *what)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "tailsim sweep: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* SWEEP_INTERRUPTED with e set when a deferred signal came, else 0. */
static int interrupted(const grid *g, ts_err *e)
{
    int sig = ts_signal_pending();
    if (!sig)
        return 0;
    ts_errf(e, "%s: interrupted by signal %d (%s)", g->path, sig, ts_signal_name(sig));
    return SWEEP_INTERRUPTED;
}

/* On a rank other than 0 once a deferred signal came: waits (naps) for
 * mpirun to kill this rank after rank 0 has died, and dies of the signal
 * after LINGER_S (a signal sent to this rank alone).  Does not return. */
static void linger(void)
{
    const struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < LINGER_S * 100; i++)
        nanosleep(&nap, NULL);
    ts_signal_resume(); /* dies of the recorded signal */
    abort();            /* cannot happen: a signal was recorded */
}

/* Receives the result message st announced (MPI_Iprobe found it, so the
 * receive does not block) and hands it to the hooks unless the collector
 * already failed (then it is only drained).  Returns 0 or -1. */
static int receive_one(const sweep_hooks *h, const MPI_Status *st, int failed, size_t *done,
                       size_t total, ts_err *e)
{
    int n = 0;
    MPI_Get_count(st, MPI_BYTE, &n);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf)
        fatal("out of memory receiving a sweep result");
    MPI_Recv(buf, n, MPI_BYTE, st->MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ++*done;
    if (failed) {
        free(buf);
        return 0;
    }
    sweep_result r;
    int rc = sweep_result_unpack(buf, (size_t)n, &r, e);
    free(buf);
    if (rc)
        return ts_err_prefix(e, "from rank %d: ", st->MPI_SOURCE);
    rc = h->result ? h->result(h->ctx, &r, e) : 0;
    sweep_result_clear(&r);
    if (!rc && h->progress)
        h->progress(h->ctx, *done, total);
    return rc;
}

/* Receives on rank 0 every result message already arrived (wait 0) or,
 * waiting with 1 ms naps, until done reaches total (wait 1), stopping when
 * a deferred signal comes.  *failed is set when a hook fails (later results
 * are only drained).  Returns 0, or SWEEP_INTERRUPTED with e set. */
static int receive_some(const grid *g, const sweep_hooks *h, int wait, int *failed,
                        size_t *done, size_t total, ts_err *e)
{
    const struct timespec nap = {0, 1000 * 1000};
    while (!wait || *done < total) {
        if (interrupted(g, e))
            return SWEEP_INTERRUPTED;
        MPI_Status st;
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, &st);
        if (flag) {
            if (receive_one(h, &st, *failed, done, total, e))
                *failed = 1;
        } else if (!wait) {
            return 0;
        } else {
            nanosleep(&nap, NULL); /* EINTR by a signal: the flag is checked next */
        }
    }
    return 0;
}

/* Runs this rank's share (configurations i with i % size == rank): rank 0
 * hands its own to the hooks and receives between them, the others send
 * theirs (a deferred signal: they linger()).  Returns 0, or
 * SWEEP_INTERRUPTED with e set (rank 0 only). */
static int run_share(const grid *g, const unsigned char *mask, const sweep_hooks *h, int rank,
                     int size, int *failed, size_t *done, size_t total, ts_err *e)
{
    for (size_t i = (size_t)rank; i < g->n_configs; i += (size_t)size) {
        if (mask && !mask[i])
            continue;
        if (rank != 0 && ts_signal_pending())
            linger();
        if (rank == 0 && interrupted(g, e))
            return SWEEP_INTERRUPTED;
        sweep_result r;
        if (sweep_config_run(g, i, &r))
            fatal("out of memory running a configuration");
        if (rank != 0) {
            if (ts_signal_pending())
                linger(); /* finished after the signal: not sent */
            unsigned char *buf = NULL;
            size_t n = 0;
            if (sweep_result_pack(&r, &buf, &n))
                fatal("out of memory packing a result");
            MPI_Send(buf, (int)n, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
            free(buf);
            sweep_result_clear(&r);
            continue;
        }
        if (interrupted(g, e)) { /* finished after the signal: dropped */
            sweep_result_clear(&r);
            return SWEEP_INTERRUPTED;
        }
        ++*done;
        if (!*failed && h->result && h->result(h->ctx, &r, e))
            *failed = 1;
        else if (!*failed && h->progress)
            h->progress(h->ctx, *done, total);
        sweep_result_clear(&r);
        if (receive_some(g, h, 0, failed, done, total, e)) /* arrived meanwhile */
            return SWEEP_INTERRUPTED;
    }
    return 0;
}

int sweep_mpi_exec(const grid *g, const unsigned char *mask, const sweep_hooks *h,
                   int *collector, ts_err *e)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *collector = rank == 0;
    int go = 1;
    if (rank == 0 && h->begin && h->begin(h->ctx, e))
        go = 0;
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!go)
        return rank == 0 ? -1 : ts_errf(e, "rank 0 could not start the sweep");
    size_t total = 0;
    for (size_t i = 0; i < g->n_configs; i++)
        if (!mask || mask[i])
            total++;
    int failed = 0;
    size_t done = 0;
    if (run_share(g, mask, h, rank, size, &failed, &done, total, e))
        return SWEEP_INTERRUPTED;
    if (rank != 0)
        return 0;
    if (receive_some(g, h, 1, &failed, &done, total, e))
        return SWEEP_INTERRUPTED;
    return failed ? -1 : 0;
}
