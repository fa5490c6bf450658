/*
 * Results store (SQLite): one database file per user, default tailsim.db.
 * Tables: runs, metrics, timeline, responses; schema versioned with
 * PRAGMA user_version, migrations one version per transaction; a database
 * newer than this code is refused.  WAL, synchronous=NORMAL, foreign_keys=ON,
 * busy timeout so concurrent writers wait instead of failing.  A run is saved
 * in one transaction: either all its rows are there or none.
 */
#ifndef TS_STORE_H
#define TS_STORE_H

#include <stdint.h>

#include "common/err.h"
#include "sim/result.h"

#define STORE_SCHEMA_VERSION 1

typedef struct store store;

/* Opens (creating and migrating as needed).  Returns 0 and sets *out, or -1:
 * unreadable/corrupt file, newer schema, read-only path. */
int store_open(const char *path, store **out, ts_err *e);
void store_close(store *s); /* NULL is a no-op */

/* Saves r in one transaction; sets r->id and r->created.  Returns 0 or -1
 * (nothing written on failure). */
int store_save_run(store *s, run_record *r, ts_err *e);

/* Loads run `id` (id <= 0: the latest).  Returns 0 and sets *out (free with
 * run_record_free), or -1 when absent. */
int store_load_run(store *s, int64_t id, run_record **out, ts_err *e);

#endif
