/*
 * Private to the results store (results/store.c, results/store_save.c,
 * results/store_load.c): the store's state and the functions the three files
 * share, all defined in results/store.c.  Not part of the library's
 * interface; nothing outside results/store*.c includes it.
 */
#ifndef TS_STORE_IMPL_H
#define TS_STORE_IMPL_H

#include <sqlite3.h>
#include <stdint.h>

#include "common/err.h"
#include "results/store.h"

struct store {
    sqlite3 *db;
    sqlite3_stmt *ins_run, *ins_metric, *ins_tl, *ins_resp, *ins_step; /* reused per save */
    sqlite3_stmt *ins_tj;   /* per-trajectory intervals (schema 8) */
    sqlite3_stmt *ins_sweep_run;
    int version;      /* the file's schema version (STORE_SCHEMA_VERSION for a writer) */
    int readonly;     /* opened by store_open_read(): nothing is ever written */
    int immutable;    /* read-only over a file no writer had open (see the header) */
    uint64_t sig;     /* with immutable: the files' fingerprint before opening */
    int refused;      /* the last save failed on the record itself, not the database */
    double stall_s, wait_s;     /* patience for a lock, s */
    double wait_t0, progress_t; /* the current wait: its start, the last progress (ts_wall_s) */
    double waited_s, stalled_s; /* the last wait given up: its length, without progress */
    uint64_t seen;              /* the files' fingerprint at the last progress */
    char path[4096];
};

/* A fingerprint of the database file and of its -wal and -journal files;
 * sets *active (when not NULL) to 1 when a writer has the file open. */
uint64_t store_files_print(const char *path, int *active);

/* Fills e with what failed on s's connection (and, for a lock, how long it
 * was waited for).  Returns -1. */
int store_db_err(ts_err *e, const store *s, const char *what);

/* Runs sql on s; on failure fills e (store_db_err()) and returns -1. */
int store_exec_sql(store *s, const char *sql, const char *what, ts_err *e);

/* Rolls back the open transaction, if any; keeps the first error message. */
void store_rollback(store *s);

/* (Re)opens s read-only: immutable over a file that no writer has open
 * (unless locked is set), else through SQLite's locks; then checks what
 * the file is.  Returns 0 or -1. */
int store_read_conn(store *s, int locked, ts_err *e);

#endif
