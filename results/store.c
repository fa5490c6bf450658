/*
 * Results store on SQLite.  One database file per user (default tailsim.db)
 * holds every run: its identity row in `runs`, its scalar metrics in
 * `metrics` (order kept in `ord`), its per-GPU timeline in `timeline`
 * (insertion order = rowid order), its responses in `responses` and, for a
 * run of several RL steps, where each starts in `steps`.  Since schema
 * version 6 a run also keeps what it ran on (the effective scenario as INI
 * text, the --set overrides, the steps, the trace's path and hash), NULL
 * for runs saved before.
 * Commands that simulate call store_save_run_to() (or store_open() once,
 * store_save_run() per finished run and store_close()); the report command
 * opens with store_open_read() and calls store_load_run().
 *
 * Invariants and habits:
 *   - The schema version lives in PRAGMA user_version.  It is read together
 *     with the number of tables (one statement, one snapshot) and checked
 *     before anything else happens to the file: a version below 0 or above
 *     STORE_SCHEMA_VERSION, or version 0 with tables in it (another
 *     program's database), is refused with nothing changed: no WAL switch,
 *     no table created.  Only an empty file or one of ours is initialised
 *     or migrated.  Each migration step runs in its own BEGIN IMMEDIATE
 *     transaction that re-reads and re-checks the version, so two processes
 *     opening a fresh file at once migrate it exactly once.  Migrations run
 *     with foreign keys off, so that rebuilding a table (version 5: sweeps,
 *     for the 'interrupted' status) does not cascade into the rows that
 *     refer to it; those references are checked before the step commits.
 *   - Writers: WAL journal, synchronous=NORMAL, foreign_keys=ON.  A write
 *     lock is taken only for a save (one BEGIN IMMEDIATE transaction per
 *     run), never held between saves.  Waiting for it is patient
 *     (busy_wait()): it goes on while the other writers make progress
 *     (their files change) and gives up only after STORE_STALL_S without
 *     any progress or STORE_WAIT_S in all.
 *   - A run is written in one BEGIN IMMEDIATE transaction with four prepared
 *     statements kept for the life of the connection and reused per row
 *     (sqlite3_reset + sqlite3_clear_bindings).  Any failure rolls the whole
 *     transaction back: either all of a run's rows exist or none do.  When
 *     the database cannot take the run (locked past the patience, I/O error,
 *     full disk, a file that cannot be opened as our store), the run goes to
 *     a database of its own beside it (spill_run()), named in the error, so
 *     nothing simulated is lost; a run the schema refuses is not kept.
 *   - Readers (store_open_read()): SQLITE_OPEN_READONLY, no migration, no
 *     WAL switch, no pragma that writes; any schema version from 1 up is read
 *     as it is.  A file that no writer has open (no -wal, no -journal) is
 *     opened immutable, so SQLite creates no -wal/-shm file beside it, and
 *     every read is checked against the files' fingerprint taken before
 *     opening: if a writer changed anything meanwhile, the read is done
 *     again (in the end through SQLite's own locks).
 *   - The schema enforces what a bad record could break (t1 >= t0, gpu >= 0,
 *     one value per metric key, non-NULL times); a NaN binds as NULL, so a NaN
 *     interval time is refused while a NaN metric value round-trips as NaN.
 *     Loading checks every row again (types, ranges, enums), since the file
 *     may have been written by something else: a loaded record is one that
 *     could have been saved.
 *   - seed is a uint64 kept in a signed INTEGER column: the bits round-trip.
 *   - Every function has one `cleanup:` exit; no function prints or exits.
 */
#include "results/store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

#define STORE_STALL_S 120.0 /* give up a lock wait after this long without progress, s */
#define STORE_WAIT_S 900.0  /* ... or after this long in all, s */
#define STORE_READ_TRIES 3  /* immutable reads before reading through SQLite's locks */

struct store {
    sqlite3 *db;
    sqlite3_stmt *ins_run, *ins_metric, *ins_tl, *ins_resp, *ins_step; /* reused per save */
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

/* Migration i takes a database from user_version i to i + 1.  They run with
 * foreign keys off (migrate()), so a step that rebuilds a table (SQLite's
 * 12-step procedure: create the new table, copy, drop the old, rename) does
 * not cascade the DROP into the rows referring to it; fk_check names the
 * table whose references are checked (PRAGMA foreign_key_check) before the
 * step commits. */
static const struct migration {
    const char *sql;
    const char *fk_check; /* a table referring to the rebuilt one, or NULL */
} migrations[STORE_SCHEMA_VERSION] = {
    /* 0 -> 1: the initial schema. */
    {"CREATE TABLE runs("
    " id INTEGER PRIMARY KEY,"
    " created TEXT NOT NULL,"
    " command TEXT NOT NULL,"
    " scenario TEXT NOT NULL,"
    " seed INTEGER NOT NULL,"
    " calibration TEXT NOT NULL,"
    " version TEXT NOT NULL,"
    " gpus INTEGER NOT NULL,"
    " replicas INTEGER NOT NULL,"
    " tp INTEGER NOT NULL);"
    "CREATE TABLE metrics("
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " key TEXT NOT NULL,"
    " value REAL,"            /* NULL = NaN */
    " ord INTEGER NOT NULL,"
    " PRIMARY KEY(run_id, key));"
    "CREATE TABLE timeline("
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " gpu INTEGER NOT NULL CONSTRAINT gpu_index CHECK(gpu >= 0),"
    " phase INTEGER NOT NULL,"  /* enum tl_phase */
    " state INTEGER NOT NULL,"  /* enum tl_state */
    " t0 REAL NOT NULL,"
    " t1 REAL NOT NULL,"
    " CONSTRAINT interval_order CHECK(t1 >= t0));"
    "CREATE INDEX timeline_run ON timeline(run_id);"
    "CREATE TABLE responses("
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " idx INTEGER NOT NULL,"
    " replica INTEGER NOT NULL,"
    " prompt_tokens INTEGER NOT NULL,"
    " length INTEGER NOT NULL CONSTRAINT length_nonneg CHECK(length >= 0),"
    " finish_s REAL,"           /* NULL = NaN (did not finish) */
    " PRIMARY KEY(run_id, idx));", NULL},
    /* 1 -> 2: sweeps (tailsim sweep / plan): one row per sweep, one row per
     * configuration linking it to its run (or saying why it failed). */
    {"CREATE TABLE sweeps("
    " id INTEGER PRIMARY KEY,"
    " created TEXT NOT NULL,"
    " grid TEXT NOT NULL,"
    " scenario TEXT NOT NULL,"
    " command TEXT NOT NULL,"
    " n_configs INTEGER NOT NULL CONSTRAINT n_configs_pos CHECK(n_configs >= 1),"
    " status TEXT NOT NULL CONSTRAINT sweep_status"
    "  CHECK(status IN ('running', 'done', 'failed')));"
    "CREATE TABLE sweep_runs("
    " sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,"
    " config INTEGER NOT NULL CONSTRAINT config_index CHECK(config >= 0),"
    " run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE," /* NULL: failed */
    " params TEXT NOT NULL,"     /* JSON object: swept key -> value */
    " error TEXT,"               /* why the configuration failed, else NULL */
    " PRIMARY KEY(sweep_id, config),"
    " CONSTRAINT run_or_error CHECK((run_id IS NULL) <> (error IS NULL)));", NULL},
    /* 2 -> 3: where each RL step of a run of several starts on its timeline
     * (run_record.step_t0; none for one step). */
    {"CREATE TABLE steps("
    " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    " k INTEGER NOT NULL CONSTRAINT step_index CHECK(k >= 0),"
    " t0 REAL NOT NULL,"
    " PRIMARY KEY(run_id, k));", NULL},
    /* 3 -> 4: the policy a run ran (older runs: ''). */
    {"ALTER TABLE runs ADD COLUMN policy TEXT NOT NULL DEFAULT '';", NULL},
    /* 4 -> 5: a sweep stopped by a signal is 'interrupted'.  SQLite cannot
     * change a CHECK in place, so the table is rebuilt with its rows (ids
     * kept, so sweep_runs still points at them). */
    {"CREATE TABLE sweeps_v5("
     " id INTEGER PRIMARY KEY,"
     " created TEXT NOT NULL,"
     " grid TEXT NOT NULL,"
     " scenario TEXT NOT NULL,"
     " command TEXT NOT NULL,"
     " n_configs INTEGER NOT NULL CONSTRAINT n_configs_pos CHECK(n_configs >= 1),"
     " status TEXT NOT NULL CONSTRAINT sweep_status"
     "  CHECK(status IN ('running', 'done', 'failed', 'interrupted')));"
     "INSERT INTO sweeps_v5(id, created, grid, scenario, command, n_configs, status)"
     " SELECT id, created, grid, scenario, command, n_configs, status FROM sweeps;"
     "DROP TABLE sweeps;"
     "ALTER TABLE sweeps_v5 RENAME TO sweeps;", "sweep_runs"},
    /* 5 -> 6: what a run ran on (older runs: NULL): the effective scenario
     * as INI text, the --set overrides (JSON array), the steps, the trace's
     * path and the hash of its numbers. */
    {"ALTER TABLE runs ADD COLUMN scenario_ini TEXT;"
     "ALTER TABLE runs ADD COLUMN overrides TEXT;"
     "ALTER TABLE runs ADD COLUMN steps INTEGER;"
     "ALTER TABLE runs ADD COLUMN trace_path TEXT;"
     "ALTER TABLE runs ADD COLUMN trace_hash TEXT;", NULL},
};

/* A fingerprint of the database file and of its -wal and -journal files
 * (inode, size, modification and change times; an absent file counts as
 * zeros); any write by any process changes it.  Sets *active (when not NULL)
 * to 1 when a -wal or -journal file exists, i.e. a writer has the file open
 * or died in a transaction. */
static uint64_t files_print(const char *path, int *active)
{
    static const char *const suffix[] = {"", "-wal", "-journal"};
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    if (active)
        *active = 0;
    for (int i = 0; i < 3; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        struct stat st;
        uint64_t v[7] = {0};
        if (stat(p, &st) == 0) {
            v[0] = 1;
            v[1] = (uint64_t)st.st_ino;
            v[2] = (uint64_t)st.st_size;
            v[3] = (uint64_t)st.st_mtim.tv_sec;
            v[4] = (uint64_t)st.st_mtim.tv_nsec;
            v[5] = (uint64_t)st.st_ctim.tv_sec;
            v[6] = (uint64_t)st.st_ctim.tv_nsec;
            if (i > 0 && active)
                *active = 1;
        }
        for (int k = 0; k < 7; k++)
            h = ts_splitmix64(h ^ v[k]);
    }
    return h;
}

/* SQLite's busy handler for every connection of the store, and the wait of
 * enable_wal(): n is how often it was called for this lock.  Sleeps a
 * little (1 ms growing to 100 ms) and returns 1 to try again, or 0 to give
 * up: after s->stall_s with no writer making progress (the files'
 * fingerprint unchanged), or s->wait_s in all.  Writers queued behind each
 * other's saves therefore wait as long as the queue moves, however long it
 * is, while a process that holds the lock and does nothing is given up on. */
static int busy_wait(void *ctx, int n)
{
    static const int ms[] = {1, 2, 5, 10, 20, 50, 100};
    store *s = ctx;
    double now = ts_wall_s();
    uint64_t sig = files_print(s->path, NULL);
    if (n == 0) {
        s->wait_t0 = s->progress_t = now;
        s->waited_s = s->stalled_s = 0;
        s->seen = sig;
    } else if (sig != s->seen) {
        s->seen = sig;
        s->progress_t = now;
    }
    if (now - s->progress_t >= s->stall_s || now - s->wait_t0 >= s->wait_s) {
        s->waited_s = now - s->wait_t0;
        s->stalled_s = now - s->progress_t;
        return 0;
    }
    sqlite3_sleep(ms[n < 6 ? n : 6]);
    return 1;
}

static int db_err(ts_err *e, const store *s, const char *what)
{
    int code = sqlite3_extended_errcode(s->db) & 0xff;
    if ((code == SQLITE_BUSY || code == SQLITE_LOCKED) && s->waited_s > 0)
        return ts_errf(e, "%s: %s: %s (another process holds the lock; waited %.1f s, the last "
                       "%.1f s with no writer making progress)", s->path, what,
                       sqlite3_errmsg(s->db), s->waited_s, s->stalled_s);
    return ts_errf(e, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static int exec_sql(store *s, const char *sql, const char *what, ts_err *e)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return db_err(e, s, what);
    return 0;
}

/* Rolls back the open transaction, if any; keeps the first error message. */
static void rollback(store *s)
{
    if (!sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Reads the schema version and the number of tables in one statement (one
 * snapshot) and checks them before anything uses the version: below 0 or
 * above STORE_SCHEMA_VERSION, or 0 with tables (another program's file), is
 * refused.  Sets s->version.  Returns 0 or -1. */
static int check_schema(store *s, ts_err *e)
{
    sqlite3_stmt *st = NULL;
    int rc = -1;
    int src = sqlite3_prepare_v2(s->db, "SELECT (SELECT user_version FROM pragma_user_version),"
                                 " (SELECT count(*) FROM sqlite_master)", -1, &st, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
        int code = sqlite3_errcode(s->db) & 0xff;
        if (code == SQLITE_NOTADB)
            ts_errf(e, "%s: file is not a database (not a tailsim store?)", s->path);
        else
            db_err(e, s, "cannot read database");
        goto cleanup;
    }
    sqlite3_int64 v = sqlite3_column_int64(st, 0), n = sqlite3_column_int64(st, 1);
    if (v < 0) {
        ts_errf(e, "%s: database schema version %lld is not one tailsim writes (0 to %d), so "
                "not a tailsim store", s->path, (long long)v, STORE_SCHEMA_VERSION);
        goto cleanup;
    }
    if (v > STORE_SCHEMA_VERSION) {
        ts_errf(e, "%s: database schema version %lld is newer than this tailsim supports (%d); "
                "use a newer tailsim or another database file", s->path, (long long)v,
                STORE_SCHEMA_VERSION);
        goto cleanup;
    }
    if (v == 0 && n > 0) {
        ts_errf(e, "%s: not a tailsim store: it holds another program's tables (schema version "
                "0, %lld schema entries); left untouched, use another database file", s->path,
                (long long)n);
        goto cleanup;
    }
    s->version = (int)v;
    rc = 0;
cleanup:
    sqlite3_finalize(st);
    return rc;
}

/* Whether the references from table `table` are all there (PRAGMA
 * foreign_key_check).  Returns 0, or -1 naming the first missing one. */
static int fk_check(store *s, const char *table, const char *what, ts_err *e)
{
    char sql[128];
    sqlite3_stmt *st = NULL;
    snprintf(sql, sizeof sql, "PRAGMA foreign_key_check(%s)", table);
    int src = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    int rc = 0;
    if (src == SQLITE_ROW)
        rc = ts_errf(e, "%s: %s: %s row %lld refers to a missing %s row", s->path, what, table,
                     (long long)sqlite3_column_int64(st, 1), sqlite3_column_text(st, 2));
    else if (src != SQLITE_DONE)
        rc = db_err(e, s, what);
    sqlite3_finalize(st);
    return rc;
}

/* Runs the migrations from the file's version up to STORE_SCHEMA_VERSION,
 * one version per transaction, with foreign keys off (switched back on
 * after, whatever happened).  Another process may migrate concurrently:
 * the version is re-read and re-checked under the write lock. */
static int migrate(store *s, ts_err *e)
{
    int rc = -1;
    if (exec_sql(s, "PRAGMA foreign_keys=OFF", "cannot prepare the migration", e))
        return -1;
    for (;;) {
        if (exec_sql(s, "BEGIN IMMEDIATE", "cannot lock database for migration", e) ||
            check_schema(s, e))
            goto cleanup;
        int v = s->version;
        if (v == STORE_SCHEMA_VERSION) {
            if (exec_sql(s, "COMMIT", "cannot end migration", e))
                goto cleanup;
            break;
        }
        assert(v >= 0 && v < STORE_SCHEMA_VERSION); /* check_schema() refused the rest */
        char what[64], bump[64];
        snprintf(what, sizeof what, "migration to schema version %d failed", v + 1);
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        if (exec_sql(s, migrations[v].sql, what, e) ||
            (migrations[v].fk_check && fk_check(s, migrations[v].fk_check, what, e)) ||
            exec_sql(s, bump, what, e) || exec_sql(s, "COMMIT", what, e))
            goto cleanup;
    }
    rc = 0;
cleanup:
    if (rc)
        rollback(s);
    ts_err e2 = {{0}};
    if (exec_sql(s, "PRAGMA foreign_keys=ON", "cannot enable foreign keys", rc ? &e2 : e))
        rc = -1;
    return rc;
}

/* Switches the file to WAL (a no-op when it already is).  The switch needs
 * an exclusive lock taken from a shared one, and when two processes do it at
 * once on a fresh file SQLite answers one of them "locked" at once instead of
 * calling the busy handler (waiting could deadlock), or reports the other's
 * rollback journal vanishing under it.  Both are retried, with the statement
 * finalized (locks released) in between, for as long as busy_wait() allows.
 * A file system without WAL support keeps its journal mode: still correct,
 * only less concurrent. */
static int enable_wal(store *s, ts_err *e)
{
    for (int n = 0;; n++) {
        sqlite3_stmt *st = NULL;
        int src = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        sqlite3_finalize(st);
        if (src == SQLITE_ROW || src == SQLITE_DONE)
            return 0;
        int code = sqlite3_extended_errcode(s->db);
        int transient = (code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED ||
                        code == SQLITE_IOERR_DELETE_NOENT;
        if (!transient || !busy_wait(s, n))
            return db_err(e, s, "cannot enable WAL");
    }
}

static int prepare(store *s, const char *sql, sqlite3_stmt **st, ts_err *e)
{
    if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
        return db_err(e, s, "cannot prepare statement");
    return 0;
}

/* A store for path, not yet open.  Returns NULL after filling e. */
static store *store_new(const char *path, ts_err *e)
{
    store *s = calloc(1, sizeof *s);
    if (!s) {
        ts_errf(e, "%s: out of memory opening the store", path);
        return NULL;
    }
    snprintf(s->path, sizeof s->path, "%s", path);
    s->stall_s = STORE_STALL_S;
    s->wait_s = STORE_WAIT_S;
    return s;
}

/* Refuses a directory where a database file is expected. */
static int not_a_dir(const char *path, ts_err *e)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return ts_errf(e, "%s: is a directory, not a database file", path);
    return 0;
}

/* Settings of every connection: extended result codes, the patient busy
 * handler. */
static void setup_conn(store *s)
{
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_handler(s->db, busy_wait, s);
}

int store_open(const char *path, store **out, ts_err *e)
{
    int rc = -1;
    store *s = store_new(path, e);
    if (!s || not_a_dir(path, e))
        goto cleanup;
    int src = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (src != SQLITE_OK) {
        if (!s->db)
            ts_errf(e, "%s: cannot open database: out of memory", path);
        else
            ts_errf(e, "%s: cannot open database: %s (missing directory or no write "
                    "permission?)", path, sqlite3_errmsg(s->db));
        goto cleanup;
    }
    setup_conn(s);
    if (sqlite3_db_readonly(s->db, "main") == 1) {
        ts_errf(e, "%s: database is read-only", path);
        goto cleanup;
    }
    /* what the file is, before anything changes it */
    if (check_schema(s, e))
        goto cleanup;
    if (enable_wal(s, e) ||
        exec_sql(s, "PRAGMA synchronous=NORMAL", "cannot set synchronous", e) ||
        exec_sql(s, "PRAGMA foreign_keys=ON", "cannot enable foreign keys", e))
        goto cleanup;
    if (s->version < STORE_SCHEMA_VERSION && migrate(s, e))
        goto cleanup;
    if (prepare(s, "INSERT INTO runs(created, command, scenario, seed, calibration,"
                   " version, gpus, replicas, tp, policy, scenario_ini, overrides, steps,"
                   " trace_path, trace_hash) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                &s->ins_run, e) ||
        prepare(s, "INSERT INTO metrics(run_id, key, value, ord) VALUES(?,?,?,?)",
                &s->ins_metric, e) ||
        prepare(s, "INSERT INTO timeline(run_id, gpu, phase, state, t0, t1)"
                   " VALUES(?,?,?,?,?,?)", &s->ins_tl, e) ||
        prepare(s, "INSERT INTO responses(run_id, idx, replica, prompt_tokens, length,"
                   " finish_s) VALUES(?,?,?,?,?,?)", &s->ins_resp, e) ||
        prepare(s, "INSERT INTO steps(run_id, k, t0) VALUES(?,?,?)", &s->ins_step, e) ||
        prepare(s, "INSERT INTO sweep_runs(sweep_id, config, run_id, params, error)"
                   " VALUES(?,?,?,?,?)", &s->ins_sweep_run, e))
        goto cleanup;
    *out = s;
    s = NULL;
    rc = 0;
cleanup:
    store_close(s);
    return rc;
}

/* Appends the URI of path for sqlite3_open_v2(SQLITE_OPEN_URI) to buf:
 * "file:" and the path with '%', '?' and '#' escaped (a path starting with
 * "//" gets "/." in front so that it does not read as an authority), then
 * the query.  Returns 0, or -1 when buf (n bytes) is too small. */
static int uri_of(const char *path, const char *query, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "file:%s", path[0] == '/' && path[1] == '/' ? "/." : "");
    for (const char *p = path; *p && o + 4 < n; p++) {
        if (*p == '%' || *p == '?' || *p == '#')
            o += (size_t)snprintf(buf + o, n - o, "%%%02X", (unsigned char)*p);
        else
            buf[o++] = *p;
    }
    if (o + 4 >= n)
        return -1;
    buf[o] = 0;
    return snprintf(buf + o, n - o, "?%s", query) >= (int)(n - o) ? -1 : 0;
}

/* (Re)opens s read-only: immutable over a file that no writer has open
 * (unless locked is set), else through SQLite's locks; then checks what
 * the file is.  Returns 0 or -1. */
static int open_read(store *s, int locked, ts_err *e)
{
    int active = 0;
    sqlite3_close(s->db);
    s->db = NULL;
    s->sig = files_print(s->path, &active);
    s->immutable = !locked && !active;
    char uri[8400];
    if (uri_of(s->path, s->immutable ? "mode=ro&immutable=1" : "mode=ro", uri, sizeof uri))
        return ts_errf(e, "%s: path too long", s->path);
    int src = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (src != SQLITE_OK) {
        if (!s->db)
            return ts_errf(e, "%s: cannot open database: out of memory", s->path);
        return ts_errf(e, "%s: cannot open database for reading: %s", s->path,
                       sqlite3_errmsg(s->db));
    }
    setup_conn(s);
    if (check_schema(s, e))
        return -1;
    if (s->version == 0)
        return ts_errf(e, "%s: no runs stored yet (an empty database)", s->path);
    return 0;
}

int store_open_read(const char *path, store **out, ts_err *e)
{
    int rc = -1;
    store *s = store_new(path, e);
    if (!s || not_a_dir(path, e))
        goto cleanup;
    if (access(path, F_OK) != 0) {
        ts_errf(e, "%s: no such database", path);
        goto cleanup;
    }
    s->readonly = 1;
    if (open_read(s, 0, e))
        goto cleanup;
    *out = s;
    s = NULL;
    rc = 0;
cleanup:
    store_close(s);
    return rc;
}

void store_set_patience(store *s, double stall_s, double wait_s)
{
    s->stall_s = stall_s;
    s->wait_s = wait_s;
}

void store_close(store *s)
{
    if (!s)
        return;
    sqlite3_finalize(s->ins_run);
    sqlite3_finalize(s->ins_metric);
    sqlite3_finalize(s->ins_tl);
    sqlite3_finalize(s->ins_resp);
    sqlite3_finalize(s->ins_step);
    sqlite3_finalize(s->ins_sweep_run);
    sqlite3_close(s->db); /* NULL is a harmless no-op */
    free(s);
}

/* Binds a fixed-size char field (possibly not NUL-terminated). */
static int bind_field(sqlite3_stmt *st, int col, const char *field, size_t cap)
{
    return sqlite3_bind_text(st, col, field, (int)strnlen(field, cap), SQLITE_TRANSIENT);
}

/* Binds an owned string, or NULL as NULL. */
static int bind_text_or_null(sqlite3_stmt *st, int col, const char *v)
{
    return v ? sqlite3_bind_text(st, col, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, col);
}

/* Binds a double; NaN binds as NULL (SQLite would do so anyway). */
static int bind_real(sqlite3_stmt *st, int col, double v)
{
    return isnan(v) ? sqlite3_bind_null(st, col) : sqlite3_bind_double(st, col, v);
}

/* Steps a bound insert to completion and readies it for the next row.
 * Returns 0, or -1 after noting in s->refused whether the row itself was
 * refused (a constraint) rather than the database failing. */
static int step_insert(store *s, sqlite3_stmt *st)
{
    int src = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (src == SQLITE_DONE)
        return 0;
    s->refused = (src & 0xff) == SQLITE_CONSTRAINT;
    return -1;
}

/* The current UTC time as ISO-8601 into buf[32].  Returns 0 or -1. */
static int now_iso(store *s, char *buf, ts_err *e)
{
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || !strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
        return ts_errf(e, "%s: cannot format the current time", s->path);
    return 0;
}

/* Inserts r's rows inside the caller's open transaction; sets *out_id.
 * Returns 0 or -1 (the caller rolls back). */
static int insert_run(store *s, const run_record *r, const char *created, sqlite3_int64 *out_id,
                      ts_err *e)
{
    int rc = -1;
    sqlite3_stmt *st = s->ins_run;
    if (sqlite3_bind_text(st, 1, created, -1, SQLITE_TRANSIENT) ||
        bind_field(st, 2, r->command, sizeof r->command) ||
        bind_field(st, 3, r->scenario, sizeof r->scenario) ||
        sqlite3_bind_int64(st, 4, (sqlite3_int64)r->seed) ||
        bind_field(st, 5, r->calibration, sizeof r->calibration) ||
        bind_field(st, 6, r->version, sizeof r->version) ||
        sqlite3_bind_int(st, 7, r->gpus) || sqlite3_bind_int(st, 8, r->replicas) ||
        sqlite3_bind_int(st, 9, r->tp) || bind_field(st, 10, r->policy, sizeof r->policy) ||
        bind_text_or_null(st, 11, r->scenario_ini) || bind_text_or_null(st, 12, r->overrides) ||
        (r->steps > 0 ? sqlite3_bind_int(st, 13, r->steps) : sqlite3_bind_null(st, 13)) ||
        bind_field(st, 14, r->trace_path, sizeof r->trace_path) ||
        bind_field(st, 15, r->trace_hash, sizeof r->trace_hash) || step_insert(s, st)) {
        db_err(e, s, "saving run");
        goto cleanup;
    }
    sqlite3_int64 id = sqlite3_last_insert_rowid(s->db);

    st = s->ins_metric;
    for (size_t i = 0; i < r->n_metrics; i++) {
        const metric *m = &r->metrics[i];
        if (sqlite3_bind_int64(st, 1, id) || bind_field(st, 2, m->key, sizeof m->key) ||
            bind_real(st, 3, m->value) || sqlite3_bind_int64(st, 4, (sqlite3_int64)i) ||
            step_insert(s, st)) {
            ts_errf(e, "%s: saving run: metric %zu '%.*s': %s", s->path, i,
                    (int)sizeof m->key, m->key, sqlite3_errmsg(s->db));
            goto cleanup;
        }
    }

    st = s->ins_tl;
    for (size_t i = 0; i < r->n_tl; i++) {
        const tl_interval *t = &r->tl[i];
        if (t->phase < 0 || t->phase >= PH_COUNT || t->state < 0 || t->state > TL_TRAIN) {
            s->refused = 1;
            ts_errf(e, "%s: saving run: timeline interval %zu (gpu %d): phase %d or "
                    "state %d out of range", s->path, i, t->gpu, t->phase, t->state);
            goto cleanup;
        }
        if (sqlite3_bind_int64(st, 1, id) || sqlite3_bind_int(st, 2, t->gpu) ||
            sqlite3_bind_int(st, 3, t->phase) || sqlite3_bind_int(st, 4, t->state) ||
            bind_real(st, 5, t->t0) || bind_real(st, 6, t->t1) || step_insert(s, st)) {
            ts_errf(e, "%s: saving run: timeline interval %zu (gpu %d, t0 %g, t1 %g): %s",
                    s->path, i, t->gpu, t->t0, t->t1, sqlite3_errmsg(s->db));
            goto cleanup;
        }
    }

    st = s->ins_resp;
    for (size_t i = 0; i < r->n_resp; i++) {
        const resp_outcome *o = &r->resp[i];
        if (sqlite3_bind_int64(st, 1, id) || sqlite3_bind_int64(st, 2, (sqlite3_int64)i) ||
            sqlite3_bind_int(st, 3, o->replica) || sqlite3_bind_int(st, 4, o->prompt_tokens) ||
            sqlite3_bind_int(st, 5, o->length) || bind_real(st, 6, o->finish_s) ||
            step_insert(s, st)) {
            ts_errf(e, "%s: saving run: response %zu (length %d): %s", s->path, i,
                    o->length, sqlite3_errmsg(s->db));
            goto cleanup;
        }
    }

    st = s->ins_step;
    for (size_t k = 0; k < r->n_steps; k++) {
        if (sqlite3_bind_int64(st, 1, id) || sqlite3_bind_int64(st, 2, (sqlite3_int64)k) ||
            bind_real(st, 3, r->step_t0[k]) || step_insert(s, st)) {
            ts_errf(e, "%s: saving run: step %zu (start %g): %s", s->path, k, r->step_t0[k],
                    sqlite3_errmsg(s->db));
            goto cleanup;
        }
    }

    *out_id = id;
    rc = 0;
cleanup:
    return rc;
}

/* Sets r->id and r->created after a commit. */
static void set_saved(run_record *r, sqlite3_int64 id, const char *created)
{
    r->id = (int64_t)id;
    snprintf(r->created, sizeof r->created, "%s", created);
}

/* Refuses a write on a store opened for reading. */
static int writable(const store *s, ts_err *e)
{
    if (s->readonly)
        return ts_errf(e, "%s: the store was opened read-only", s->path);
    return 0;
}

/* Saves r in one transaction and sets *id, leaving r as it is.  Returns 0
 * or -1 (rolled back; s->refused says whether the record was at fault). */
static int save_run(store *s, const run_record *r, const char *created, sqlite3_int64 *id,
                    ts_err *e)
{
    int rc = -1;
    s->refused = 0;
    if (exec_sql(s, "BEGIN IMMEDIATE", "cannot begin saving a run", e) ||
        insert_run(s, r, created, id, e) ||
        exec_sql(s, "COMMIT", "cannot commit the run", e))
        goto cleanup;
    rc = 0;
cleanup:
    if (rc)
        rollback(s);
    return rc;
}

/* Appends note to e's message, cutting the message (not the note) to fit. */
static void err_append(ts_err *e, const char *note)
{
    if (!e)
        return;
    size_t nl = strlen(note), ml = strlen(e->msg);
    if (nl >= sizeof e->msg)
        nl = sizeof e->msg - 1;
    if (ml + nl >= sizeof e->msg)
        ml = sizeof e->msg - 1 - nl;
    memcpy(e->msg + ml, note, nl);
    e->msg[ml + nl] = 0;
}

/* Keeps r, which could not be saved into the database at path, in a
 * database of its own beside it: "<path>.unsaved-<UTC time>-<pid>.db" (a
 * new file, never one that exists), holding the run alone, readable like
 * any store.  Appends to e's message where the run went, or why it could
 * not be kept either (the side file is then removed). */
static void spill_run(const char *path, const run_record *r, ts_err *e)
{
    char side[4300], stamp[32] = "", note[TS_ERR_MAX];
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    int fd = -1;
    for (int k = 0; k < 100 && fd < 0; k++) {
        int n = k ? snprintf(side, sizeof side, "%s.unsaved-%s-%ld-%d.db", path, stamp,
                             (long)getpid(), k)
                  : snprintf(side, sizeof side, "%s.unsaved-%s-%ld.db", path, stamp,
                             (long)getpid());
        if (n >= (int)sizeof side)
            break;
        fd = open(side, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        snprintf(note, sizeof note, "; the run could not be kept beside it either (%s)",
                 strerror(errno));
        err_append(e, note);
        return;
    }
    close(fd);
    store *t = NULL;
    ts_err e2 = {""};
    char created[32];
    sqlite3_int64 id = 0;
    if (store_open(side, &t, &e2) || now_iso(t, created, &e2) ||
        save_run(t, r, created, &id, &e2)) {
        store_close(t);
        static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
        for (int i = 0; i < 4; i++) {
            char p[4400];
            snprintf(p, sizeof p, "%s%s", side, suffix[i]);
            remove(p);
        }
        snprintf(note, sizeof note, "; the run could not be kept beside it either: %s", e2.msg);
        err_append(e, note);
        return;
    }
    store_close(t);
    snprintf(note, sizeof note, "; the run is kept in %.440s instead (a results database of its "
             "own)", side);
    err_append(e, note);
}

int store_save_run(store *s, run_record *r, ts_err *e)
{
    char created[32];
    sqlite3_int64 id = 0;
    if (writable(s, e) || now_iso(s, created, e))
        return -1;
    if (save_run(s, r, created, &id, e)) {
        if (!s->refused)
            spill_run(s->path, r, e);
        return -1;
    }
    set_saved(r, id, created);
    return 0;
}

int store_save_run_to(const char *path, run_record *r, ts_err *e)
{
    store *s = NULL;
    int rc = -1;
    if (store_open(path, &s, e)) {
        spill_run(path, r, e);
        goto cleanup;
    }
    rc = store_save_run(s, r, e);
cleanup:
    store_close(s);
    return rc;
}

int store_sweep_begin(store *s, const char *grid, const char *scenario, const char *command,
                      size_t n_configs, int64_t *id, ts_err *e)
{
    int rc = -1;
    char created[32];
    sqlite3_stmt *st = NULL;
    if (writable(s, e) || now_iso(s, created, e))
        goto cleanup;
    if (sqlite3_prepare_v2(s->db, "INSERT INTO sweeps(created, grid, scenario, command,"
                           " n_configs, status) VALUES(?,?,?,?,?,'running')", -1, &st,
                           NULL) != SQLITE_OK ||
        sqlite3_bind_text(st, 1, created, -1, SQLITE_TRANSIENT) ||
        sqlite3_bind_text(st, 2, grid, -1, SQLITE_TRANSIENT) ||
        sqlite3_bind_text(st, 3, scenario, -1, SQLITE_TRANSIENT) ||
        sqlite3_bind_text(st, 4, command, -1, SQLITE_TRANSIENT) ||
        sqlite3_bind_int64(st, 5, (sqlite3_int64)n_configs) || sqlite3_step(st) != SQLITE_DONE) {
        db_err(e, s, "cannot start the sweep");
        goto cleanup;
    }
    *id = (int64_t)sqlite3_last_insert_rowid(s->db);
    rc = 0;
cleanup:
    sqlite3_finalize(st);
    return rc;
}

int store_save_sweep_run(store *s, int64_t sweep_id, size_t config, const char *params,
                         run_record *r, const char *error, ts_err *e)
{
    int rc = -1;
    char created[32];
    sqlite3_int64 id = 0;
    if (writable(s, e) || now_iso(s, created, e))
        return -1;
    s->refused = 0;
    if (exec_sql(s, "BEGIN IMMEDIATE", "cannot begin saving a sweep run", e))
        goto cleanup;
    if (r && insert_run(s, r, created, &id, e))
        goto cleanup;
    sqlite3_stmt *st = s->ins_sweep_run;
    if (sqlite3_bind_int64(st, 1, sweep_id) || sqlite3_bind_int64(st, 2, (sqlite3_int64)config) ||
        (r ? sqlite3_bind_int64(st, 3, id) : sqlite3_bind_null(st, 3)) ||
        sqlite3_bind_text(st, 4, params, -1, SQLITE_TRANSIENT) ||
        (r ? sqlite3_bind_null(st, 5) : sqlite3_bind_text(st, 5, error, -1, SQLITE_TRANSIENT)) ||
        step_insert(s, st)) {
        ts_errf(e, "%s: saving sweep %lld configuration %zu: %s", s->path, (long long)sweep_id,
                config, sqlite3_errmsg(s->db));
        goto cleanup;
    }
    if (exec_sql(s, "COMMIT", "cannot commit the sweep run", e))
        goto cleanup;
    if (r)
        set_saved(r, id, created);
    rc = 0;
cleanup:
    if (rc) {
        rollback(s);
        if (r && !s->refused)
            spill_run(s->path, r, e);
    }
    return rc;
}

const char *store_sweep_status_name(store_sweep_status status)
{
    switch (status) {
    case STORE_SWEEP_DONE:
        return "done";
    case STORE_SWEEP_FAILED:
        return "failed";
    case STORE_SWEEP_INTERRUPTED:
        return "interrupted";
    }
    return NULL;
}

int store_sweep_end(store *s, int64_t sweep_id, store_sweep_status status, ts_err *e)
{
    const char *name = store_sweep_status_name(status);
    int rc = -1;
    sqlite3_stmt *st = NULL;
    if (writable(s, e))
        goto cleanup;
    if (!name) {
        ts_errf(e, "%s: sweep %lld: no such sweep status %d", s->path, (long long)sweep_id,
                (int)status);
        goto cleanup;
    }
    if (sqlite3_prepare_v2(s->db, "UPDATE sweeps SET status = ? WHERE id = ?", -1, &st,
                           NULL) != SQLITE_OK ||
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) ||
        sqlite3_bind_int64(st, 2, sweep_id) || sqlite3_step(st) != SQLITE_DONE) {
        db_err(e, s, "cannot finish the sweep");
        goto cleanup;
    }
    rc = 0;
cleanup:
    sqlite3_finalize(st);
    return rc;
}

/* Copies a text column into a fixed field (NULL -> ""), truncating. */
static void copy_col(char *dst, size_t cap, sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

/* Where a loaded row comes from, for messages. */
typedef struct row_at {
    const store *s;
    int64_t run;       /* run id */
    const char *table; /* "runs", "metrics", ... */
    size_t row;        /* the row's place among the run's rows of that table */
} row_at;

static const char *type_name(int type)
{
    switch (type) {
    case SQLITE_INTEGER: return "an integer";
    case SQLITE_FLOAT: return "a real number";
    case SQLITE_TEXT: return "text";
    case SQLITE_BLOB: return "a blob";
    default: return "NULL";
    }
}

/* Reads column col (named field) of the current row into *out: it must be
 * an INTEGER within [lo, hi] (sqlite3_column_int() would cut a wider value
 * and turn text into 0 silently).  Returns 0, or -1 naming the file, run,
 * table, row and field. */
static int int_field(const row_at *at, sqlite3_stmt *st, int col, const char *field, int64_t lo,
                     int64_t hi, int64_t *out, ts_err *e)
{
    int type = sqlite3_column_type(st, col);
    if (type != SQLITE_INTEGER)
        return ts_errf(e, "%s: run %lld: %s row %zu: field '%s' is %s, not an integer",
                       at->s->path, (long long)at->run, at->table, at->row, field,
                       type_name(type));
    sqlite3_int64 v = sqlite3_column_int64(st, col);
    if (v < lo || v > hi)
        return ts_errf(e, "%s: run %lld: %s row %zu: field '%s' is %lld, outside %lld to %lld",
                       at->s->path, (long long)at->run, at->table, at->row, field,
                       (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return 0;
}

/* int_field() into an int32_t. */
static int i32_field(const row_at *at, sqlite3_stmt *st, int col, const char *field, int64_t lo,
                     int64_t hi, int32_t *out, ts_err *e)
{
    int64_t v = 0;
    if (int_field(at, st, col, field, lo, hi, &v, e))
        return -1;
    *out = (int32_t)v;
    return 0;
}

/* Reads column col (named field) into *out: a number (INTEGER or REAL), or,
 * when nullable, NULL (read as NaN).  Returns 0, or -1 as int_field(). */
static int real_field(const row_at *at, sqlite3_stmt *st, int col, const char *field,
                      int nullable, double *out, ts_err *e)
{
    int type = sqlite3_column_type(st, col);
    if (type == SQLITE_NULL && nullable) {
        *out = NAN;
        return 0;
    }
    if (type != SQLITE_INTEGER && type != SQLITE_FLOAT)
        return ts_errf(e, "%s: run %lld: %s row %zu: field '%s' is %s, not a number",
                       at->s->path, (long long)at->run, at->table, at->row, field,
                       type_name(type));
    *out = sqlite3_column_double(st, col);
    return 0;
}

/* Checks one row of a per-run child query and appends it to r as metric
 * (kind 'm'), interval ('t'), response ('r') or step start ('s').  Returns
 * 0, or -1 (a bad row, or out of memory). */
static int load_row(const row_at *at, sqlite3_stmt *st, char kind, run_record *r, ts_err *e)
{
    int oom = 0;
    if (kind == 'm') {
        double v;
        if (sqlite3_column_type(st, 0) != SQLITE_TEXT)
            return ts_errf(e, "%s: run %lld: metrics row %zu: field 'key' is %s, not text",
                           at->s->path, (long long)at->run, at->row,
                           type_name(sqlite3_column_type(st, 0)));
        if (real_field(at, st, 1, "value", 1, &v, e))
            return -1;
        oom = run_add_metric(r, (const char *)sqlite3_column_text(st, 0), v);
    } else if (kind == 't') {
        int32_t gpu, phase, state;
        double t0, t1;
        if (i32_field(at, st, 0, "gpu", 0, INT32_MAX, &gpu, e) ||
            i32_field(at, st, 1, "phase", 0, PH_COUNT - 1, &phase, e) ||
            i32_field(at, st, 2, "state", 0, TL_TRAIN, &state, e) ||
            real_field(at, st, 3, "t0", 0, &t0, e) || real_field(at, st, 4, "t1", 0, &t1, e))
            return -1;
        if (!(t1 >= t0))
            return ts_errf(e, "%s: run %lld: timeline row %zu: field 't1' (%g) is before 't0' "
                           "(%g)", at->s->path, (long long)at->run, at->row, t1, t0);
        oom = run_add_interval(r, gpu, phase, state, t0, t1);
    } else if (kind == 'r') {
        int32_t replica, prompt, length;
        double finish;
        if (i32_field(at, st, 0, "replica", 0, INT32_MAX, &replica, e) ||
            i32_field(at, st, 1, "prompt_tokens", 0, INT32_MAX, &prompt, e) ||
            i32_field(at, st, 2, "length", 0, INT32_MAX, &length, e) ||
            real_field(at, st, 3, "finish_s", 1, &finish, e))
            return -1;
        oom = run_add_response(r, replica, prompt, length, finish);
    } else {
        double t0;
        if (real_field(at, st, 0, "t0", 0, &t0, e))
            return -1;
        oom = run_add_step(r, t0);
    }
    if (oom)
        return ts_errf(e, "%s: out of memory loading run %lld", at->s->path, (long long)at->run);
    return 0;
}

/* Runs one per-run child query (bound to run_id) over `table` and appends
 * each row to r (see load_row()). */
static int load_rows(store *s, const char *sql, const char *table, char kind, run_record *r,
                     ts_err *e)
{
    int rc = -1, src = SQLITE_DONE;
    sqlite3_stmt *st = NULL;
    row_at at = {s, r->id, table, 0};
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        db_err(e, s, "cannot read run");
        goto cleanup;
    }
    sqlite3_bind_int64(st, 1, r->id);
    for (; (src = sqlite3_step(st)) == SQLITE_ROW; at.row++)
        if (load_row(&at, st, kind, r, e))
            goto cleanup;
    if (src != SQLITE_DONE) {
        db_err(e, s, "cannot read run");
        goto cleanup;
    }
    rc = 0;
cleanup:
    sqlite3_finalize(st);
    return rc;
}

/* Reads text column col (named field) into *out: NULL stays NULL (when
 * nullable, else ""), else TEXT of at most max bytes with no NUL byte inside.
 * *out is a new string (free() it) or NULL.  Returns 0, or -1 as
 * int_field() (or out of memory). */
static int text_field(const row_at *at, sqlite3_stmt *st, int col, const char *field,
                      size_t max, char **out, ts_err *e)
{
    *out = NULL;
    int type = sqlite3_column_type(st, col);
    if (type == SQLITE_NULL)
        return 0;
    if (type != SQLITE_TEXT)
        return ts_errf(e, "%s: run %lld: %s row %zu: field '%s' is %s, not text", at->s->path,
                       (long long)at->run, at->table, at->row, field, type_name(type));
    const char *t = (const char *)sqlite3_column_text(st, col);
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    if (!t)
        return ts_errf(e, "%s: out of memory loading run %lld", at->s->path, (long long)at->run);
    if (n > max)
        return ts_errf(e, "%s: run %lld: %s row %zu: field '%s' is %zu bytes, over %zu",
                       at->s->path, (long long)at->run, at->table, at->row, field, n, max);
    if (strlen(t) != n)
        return ts_errf(e, "%s: run %lld: %s row %zu: field '%s' holds a NUL byte", at->s->path,
                       (long long)at->run, at->table, at->row, field);
    if (!(*out = strdup(t)))
        return ts_errf(e, "%s: out of memory loading run %lld", at->s->path, (long long)at->run);
    return 0;
}

/* 1 when h is a trace hash as run_trace_hash() writes it: "fnv1a64:" and
 * 16 lowercase hex digits. */
static int hash_ok(const char *h)
{
    if (strncmp(h, "fnv1a64:", 8) || strlen(h) != 24)
        return 0;
    for (int i = 8; i < 24; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
            return 0;
    return 1;
}

/* Reads the columns col.. (scenario_ini, overrides, steps, trace_path,
 * trace_hash; all NULL before schema version 6) of the current runs row into
 * r, checking each: the INI at most STORE_MAX_INI bytes; the overrides at
 * most STORE_MAX_OVERRIDES bytes and a JSON array of strings; steps NULL or
 * in [1, 1000000]; the path shorter than its field; the hash "" or
 * hash_ok().  Returns 0, or -1 naming the field. */
static int load_source(const row_at *at, sqlite3_stmt *st, int col, run_record *r, ts_err *e)
{
    int rc = -1;
    char *path = NULL, *hash = NULL;
    if (text_field(at, st, col, "scenario_ini", STORE_MAX_INI, &r->scenario_ini, e) ||
        text_field(at, st, col + 1, "overrides", STORE_MAX_OVERRIDES, &r->overrides, e))
        goto cleanup;
    if (r->overrides) {
        json_error_t je;
        json_t *a = json_loads(r->overrides, JSON_REJECT_DUPLICATES, &je);
        int ok = a && json_is_array(a);
        for (size_t i = 0; ok && i < json_array_size(a); i++)
            ok = json_is_string(json_array_get(a, i));
        json_decref(a);
        if (!ok) {
            ts_errf(e, "%s: run %lld: runs row %zu: field 'overrides' is not a JSON array of "
                    "strings", at->s->path, (long long)at->run, at->row);
            goto cleanup;
        }
    }
    if (sqlite3_column_type(st, col + 2) != SQLITE_NULL &&
        i32_field(at, st, col + 2, "steps", 1, 1000000, &r->steps, e))
        goto cleanup;
    if (text_field(at, st, col + 3, "trace_path", sizeof r->trace_path - 1, &path, e) ||
        text_field(at, st, col + 4, "trace_hash", sizeof r->trace_hash - 1, &hash, e))
        goto cleanup;
    if (hash && hash[0] && !hash_ok(hash)) {
        ts_errf(e, "%s: run %lld: runs row %zu: field 'trace_hash' is not \"fnv1a64:\" and 16 "
                "hex digits", at->s->path, (long long)at->run, at->row);
        goto cleanup;
    }
    snprintf(r->trace_path, sizeof r->trace_path, "%s", path ? path : "");
    snprintf(r->trace_hash, sizeof r->trace_hash, "%s", hash ? hash : "");
    rc = 0;
cleanup:
    free(path);
    free(hash);
    return rc;
}

/* Loads run id (id <= 0: the latest) in one read transaction.  A store
 * read-only over an older schema reads it as it is: no policy before
 * version 4 (''), no step starts before version 3. */
static int load_run(store *s, int64_t id, run_record **out, ts_err *e)
{
    int rc = -1;
    run_record *r = NULL;
    sqlite3_stmt *st = NULL;
    /* One read transaction: the five queries see the same snapshot. */
    if (exec_sql(s, "BEGIN", "cannot begin reading", e))
        goto cleanup;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT id, created, command, scenario, seed, calibration, version,"
             " gpus, replicas, tp, %s, %s FROM runs %s", s->version >= 4 ? "policy" : "''",
             s->version >= 6 ? "scenario_ini, overrides, steps, trace_path, trace_hash"
                             : "NULL, NULL, NULL, NULL, NULL",
             id > 0 ? "WHERE id = ?" : "ORDER BY id DESC LIMIT 1");
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        db_err(e, s, "cannot query runs");
        goto cleanup;
    }
    if (id > 0)
        sqlite3_bind_int64(st, 1, id);
    int src = sqlite3_step(st);
    if (src == SQLITE_DONE) {
        if (id > 0)
            ts_errf(e, "%s: no run with id %lld", s->path, (long long)id);
        else
            ts_errf(e, "%s: no runs stored yet", s->path);
        goto cleanup;
    }
    if (src != SQLITE_ROW) {
        db_err(e, s, "cannot read run");
        goto cleanup;
    }
    if (!(r = run_record_new())) {
        ts_errf(e, "%s: out of memory loading run", s->path);
        goto cleanup;
    }
    row_at at = {s, id, "runs", 0};
    int64_t seed = 0;
    if (int_field(&at, st, 0, "id", 1, INT64_MAX, &r->id, e))
        goto cleanup;
    at.run = r->id;
    copy_col(r->created, sizeof r->created, st, 1);
    copy_col(r->command, sizeof r->command, st, 2);
    copy_col(r->scenario, sizeof r->scenario, st, 3);
    copy_col(r->calibration, sizeof r->calibration, st, 5);
    copy_col(r->version, sizeof r->version, st, 6);
    copy_col(r->policy, sizeof r->policy, st, 10);
    if (int_field(&at, st, 4, "seed", INT64_MIN, INT64_MAX, &seed, e) ||
        i32_field(&at, st, 7, "gpus", 0, INT32_MAX, &r->gpus, e) ||
        i32_field(&at, st, 8, "replicas", 0, INT32_MAX, &r->replicas, e) ||
        i32_field(&at, st, 9, "tp", 0, INT32_MAX, &r->tp, e))
        goto cleanup;
    r->seed = (uint64_t)seed;
    if (load_source(&at, st, 11, r, e))
        goto cleanup;
    if (load_rows(s, "SELECT key, value FROM metrics WHERE run_id = ? ORDER BY ord", "metrics",
                  'm', r, e) ||
        load_rows(s, "SELECT gpu, phase, state, t0, t1 FROM timeline WHERE run_id = ?"
                     " ORDER BY rowid", "timeline", 't', r, e) ||
        load_rows(s, "SELECT replica, prompt_tokens, length, finish_s FROM responses"
                     " WHERE run_id = ? ORDER BY idx", "responses", 'r', r, e) ||
        (s->version >= 3 &&
         load_rows(s, "SELECT t0 FROM steps WHERE run_id = ? ORDER BY k", "steps", 's', r, e)))
        goto cleanup;
    if (exec_sql(s, "COMMIT", "cannot end reading", e))
        goto cleanup;
    *out = r;
    r = NULL;
    rc = 0;
cleanup:
    sqlite3_finalize(st);
    if (rc)
        rollback(s);
    run_record_free(r);
    return rc;
}

int store_load_run(store *s, int64_t id, run_record **out, ts_err *e)
{
    for (int tries = 1;; tries++) {
        int rc = load_run(s, id, out, e);
        if (!s->immutable || files_print(s->path, NULL) == s->sig)
            return rc;
        /* a writer changed the file while it was read without locks: what
         * was read may mix two states; read it again */
        if (rc == 0) {
            run_record_free(*out);
            *out = NULL;
        }
        if (open_read(s, tries >= STORE_READ_TRIES, e))
            return -1;
    }
}
