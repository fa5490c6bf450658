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
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "sweep/sweep_run.h"

#define TAG_RESULT 71

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

/* Receives one result message (any source) and hands it to the hooks unless
 * the collector already failed (then it is only drained).  Returns 0 or -1. */
static int receive_one(const sweep_hooks *h, int failed, size_t *done, size_t total, ts_err *e)
{
    MPI_Status st;
    int n = 0;
    MPI_Probe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_BYTE, &n);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf)
        fatal("out of memory receiving a sweep result");
    MPI_Recv(buf, n, MPI_BYTE, st.MPI_SOURCE, TAG_RESULT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ++*done;
    if (failed) {
        free(buf);
        return 0;
    }
    sweep_result r;
    int rc = sweep_result_unpack(buf, (size_t)n, &r, e);
    free(buf);
    if (rc)
        return ts_err_prefix(e, "from rank %d: ", st.MPI_SOURCE);
    rc = h->result ? h->result(h->ctx, &r, e) : 0;
    sweep_result_clear(&r);
    if (!rc && h->progress)
        h->progress(h->ctx, *done, total);
    return rc;
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
    for (size_t i = (size_t)rank; i < g->n_configs; i += (size_t)size) {
        if (mask && !mask[i])
            continue;
        sweep_result r;
        if (sweep_config_run(g, i, &r))
            fatal("out of memory running a configuration");
        if (rank != 0) {
            unsigned char *buf = NULL;
            size_t n = 0;
            if (sweep_result_pack(&r, &buf, &n))
                fatal("out of memory packing a result");
            MPI_Send(buf, (int)n, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
            free(buf);
            sweep_result_clear(&r);
            continue;
        }
        done++;
        if (!failed && h->result && h->result(h->ctx, &r, e))
            failed = 1;
        else if (!failed && h->progress)
            h->progress(h->ctx, done, total);
        sweep_result_clear(&r);
        int flag = 1;
        while (flag) { /* results that arrived meanwhile */
            MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            if (flag && receive_one(h, failed, &done, total, e))
                failed = 1;
        }
    }
    if (rank != 0)
        return 0;
    while (done < total)
        if (receive_one(h, failed, &done, total, e))
            failed = 1;
    return failed ? -1 : 0;
}
