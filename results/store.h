/*
 * Results store (SQLite): one database file per user, default tailsim.db.
 * Tables: runs, metrics, timeline, responses, sweeps, sweep_runs; schema versioned with
 * PRAGMA user_version, migrations one version per transaction; a database
 * newer than this code, with a version below 0, or holding another
 * program's tables is refused untouched.  WAL, synchronous=NORMAL, foreign_keys=ON,
 * busy timeout so concurrent writers wait instead of failing.  A run is saved
 * in one transaction: either all its rows are there or none.
 */
#ifndef TS_STORE_H
#define TS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "results/result.h"

#define STORE_SCHEMA_VERSION 4

typedef struct store store;

/* Opens (creating and migrating as needed).  Returns 0 and sets *out, or -1:
 * unreadable/corrupt file, not a tailsim store (another program's tables, a
 * schema version below 0), newer schema, read-only path.  A refused file is
 * left as it was. */
int store_open(const char *path, store **out, ts_err *e);
void store_close(store *s); /* NULL is a no-op */

/* Saves r in one transaction; sets r->id and r->created.  Returns 0 or -1
 * (nothing written on failure). */
int store_save_run(store *s, run_record *r, ts_err *e);

/* Sweeps (schema version 2).  store_sweep_begin() records a sweep of
 * n_configs configurations of `grid` with status 'running' and sets *id;
 * store_save_sweep_run() saves one configuration in one transaction: its run
 * (identity and metrics of r, which gets its id) and the link row with
 * `params` (a JSON object of the swept keys), or, when r is NULL, the `error`
 * that stopped it; store_sweep_end() sets the status to 'done' (ok) or
 * 'failed'.  Each returns 0 or -1 (nothing written on failure). */
int store_sweep_begin(store *s, const char *grid, const char *scenario, const char *command,
                      size_t n_configs, int64_t *id, ts_err *e);
int store_save_sweep_run(store *s, int64_t sweep_id, size_t config, const char *params,
                         run_record *r, const char *error, ts_err *e);
int store_sweep_end(store *s, int64_t sweep_id, int ok, ts_err *e);

/* Loads run `id` (id <= 0: the latest).  Returns 0 and sets *out (free with
 * run_record_free), or -1 when absent, or when a row breaks what the store
 * would have saved (a type, a range, an enum value: the message names the
 * file, run, table, row and field). */
int store_load_run(store *s, int64_t id, run_record **out, ts_err *e);

#endif
