/*
 * Results store (SQLite): one database file per user, default tailsim.db.
 * Tables: runs, metrics, timeline, responses, steps, sweeps, sweep_runs, phase_names,
 * state_names (and the view timeline_named); schema versioned with
 * PRAGMA user_version, migrations one version per transaction; a database
 * newer than this code, with a version below 0, or holding another
 * program's tables is refused untouched.  WAL, synchronous=NORMAL,
 * foreign_keys=ON; the write lock is taken only to save, and waiting for it
 * goes on while other writers make progress.  A run is saved in one
 * transaction: either all its rows are there or none; a run the database
 * cannot take is kept in a database of its own beside it.  Readers open
 * read-only and change nothing.
 */
#ifndef TS_STORE_H
#define TS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "results/result.h"

#define STORE_SCHEMA_VERSION 8
/* The largest stored scenario INI and overrides a load accepts, bytes (the
 * INI of every key is about 3 KB; anything far larger was not written by
 * tailsim). */
#define STORE_MAX_INI (1 << 20)
#define STORE_MAX_OVERRIDES (1 << 16)

typedef struct store store;

/* Opens for writing (creating and migrating as needed).  Returns 0 and sets
 * *out (close with store_close), or -1: unreadable/corrupt file, not a
 * tailsim store (another program's tables, a schema version below 0),
 * newer schema, read-only path, or the write lock not obtained within the
 * patience (see store_set_patience).  A refused file is left as it was. */
int store_open(const char *path, store **out, ts_err *e);

/* Opens an existing store for reading only: no file is created, nothing is
 * migrated or written, no -wal/-shm file is left beside it; any schema
 * version from 1 up is read as it is.  Returns 0 and sets *out (close with
 * store_close), or -1: missing file, not a database, not a tailsim store,
 * newer schema, an empty database.  The write functions refuse such a
 * store. */
int store_open_read(const char *path, store **out, ts_err *e);

/* How long a lock wait may last: given up after stall_s seconds in which no
 * writer made progress, or wait_s seconds in all (defaults 120 and 900).
 * For callers that prefer to fail fast (tests).  Cannot fail. */
void store_set_patience(store *s, double stall_s, double wait_s);

void store_close(store *s); /* NULL is a no-op */

/* Saves r in one transaction; sets r->id and r->created.  Returns 0 or -1
 * (nothing written to the store on failure).  When the failure is the
 * database's rather than the record's (locked past the patience, I/O error,
 * disk full), r is kept in a new database of its own beside the store,
 * "<path>.unsaved-<UTC time>-<pid>.db", and the message says so (r's id is
 * not set). */
int store_save_run(store *s, run_record *r, ts_err *e);

/* Opens the store at path, saves r and closes it: what a command that has
 * simulated one run does.  Returns 0 or -1 as store_save_run(); when the
 * store cannot even be opened (not a database, another program's, newer
 * schema, ...), r is kept beside it in the same way, so that nothing
 * simulated is lost. */
int store_save_run_to(const char *path, run_record *r, ts_err *e);

/* How a sweep ended (sweeps.status): 'done' (every configuration saved, none
 * failed), 'failed' (a configuration failed, or the sweep broke off on an
 * error), 'interrupted' (stopped by a signal; schema version 5).  A sweep
 * that is still running, or whose process was killed outright, is
 * 'running'. */
typedef enum store_sweep_status {
    STORE_SWEEP_DONE = 1, /* 0 is no status: the old `int ok` false is refused */
    STORE_SWEEP_FAILED,
    STORE_SWEEP_INTERRUPTED
} store_sweep_status;

/* Sweeps (schema version 2).  store_sweep_begin() records a sweep of
 * n_configs configurations of `grid` with status 'running' and sets *id;
 * store_save_sweep_run() saves one configuration in one transaction: its run
 * (identity and metrics of r, which gets its id) and the link row with
 * `params` (a JSON object of the swept keys), or, when r is NULL, the `error`
 * that stopped it; store_sweep_end() sets the status to `status`'s name (a
 * value outside the enum is refused).  Each returns 0 or -1 (nothing
 * written on failure; a run the database could not take is kept beside it
 * as by store_save_run()). */
int store_sweep_begin(store *s, const char *grid, const char *scenario, const char *command,
                      size_t n_configs, int64_t *id, ts_err *e);
int store_save_sweep_run(store *s, int64_t sweep_id, size_t config, const char *params,
                         run_record *r, const char *error, ts_err *e);
int store_sweep_end(store *s, int64_t sweep_id, store_sweep_status status, ts_err *e);
/* The status's name as stored ("done", "failed", "interrupted"), or NULL for
 * a value outside the enum.  A static string; cannot fail. */
const char *store_sweep_status_name(store_sweep_status status);

/* Loads run `id` (id <= 0: the latest).  Returns 0 and sets *out (free with
 * run_record_free), or -1 when absent, or when a row breaks what the store
 * would have saved (a type, a range, an enum value: the message names the
 * file, run, table, row and field). */
int store_load_run(store *s, int64_t id, run_record **out, ts_err *e);

#endif
