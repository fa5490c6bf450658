/*
 * The sweep collector shared by `tailsim sweep` and `tailsim plan`
 * (sweep/sweep_collect.c).  It receives each configuration's result from the
 * sweep runner (sweep/sweep_run.h), saves it to the store when one is open
 * (one transaction per configuration, under one sweep id) and keeps its run
 * record or error for the caller's table.  It prints nothing; the progress
 * fields are the CLI's progress hook's (cli/cmd_sweep.h).
 */
#ifndef TS_SWEEP_COLLECT_H
#define TS_SWEEP_COLLECT_H

#include <stdint.h>

#include "results/store.h"
#include "sweep/sweep_run.h"

typedef struct sweep_collect {
    const grid *g;
    const char *prog;       /* "sweep" or "plan", for the progress line */
    const char *db;         /* database path, or NULL: keep results in memory only */
    store *st;              /* opened by the begin hook */
    int64_t sweep_id;
    run_record **rec;       /* per configuration: the run, or NULL */
    char **err;             /* per configuration: why it failed, or NULL */
    size_t collected;       /* configurations taken (and saved, with a store) */
    size_t failed;          /* ... of which failed */
    store_sweep_status marked; /* how finish marked the sweep's row; 0: not marked */
    double t0;              /* wall clock at the start, s */
    int tty, last_decile;
} sweep_collect;

/* Prepares c for grid g (allocating the per-configuration arrays) and fills
 * h with its hooks (progress NULL).  Returns 0 or -1 (out of memory). */
int sweep_collect_init(sweep_collect *c, const grid *g, const char *prog, const char *db,
                       sweep_hooks *h, ts_err *e);
/* Ends the sweep in the store (when open) and closes it: `how` is
 * STORE_SWEEP_DONE when every configuration came back (stored as failed
 * when one of them failed), STORE_SWEEP_FAILED when the sweep broke off on
 * an error, STORE_SWEEP_INTERRUPTED when a signal stopped it.  Returns 0 or
 * -1 (the store is closed either way). */
int sweep_collect_finish(sweep_collect *c, store_sweep_status how, ts_err *e);
void sweep_collect_free(sweep_collect *c);


#endif
