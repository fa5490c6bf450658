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
 * The store is three files: this one opens, checks, migrates and closes
 * the file (connections, the schema and its migrations, the lock wait, the
 * read-only open); results/store_save.c saves runs and sweeps (and keeps a
 * run the database cannot take beside it); results/store_load.c loads and
 * checks a run.  What they share is in results/store_impl.h.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "results/store_impl.h"

#define STORE_STALL_S 120.0 /* give up a lock wait after this long without progress, s */
#define STORE_WAIT_S 900.0  /* ... or after this long in all, s */

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
    /* 6 -> 7: the names of the timeline's phase and state numbers (enum
     * tl_phase, enum tl_state: tl_phase_name, tl_state_name, which a test
     * compares with these rows), and the view `timeline_named` that shows
     * the timeline with names, so that no reader has to know the enums.
     * The numbers are fixed: a new phase or state appends a row in a new
     * migration.  IF NOT EXISTS / OR REPLACE: a file downgraded by hand
     * that kept them migrates all the same. */
    {"CREATE TABLE IF NOT EXISTS phase_names(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
     "INSERT OR REPLACE INTO phase_names(id, name) VALUES"
     " (0, 'sync'), (1, 'rollout'), (2, 'reward'), (3, 'old_logp'), (4, 'ref'), (5, 'update');"
     "CREATE TABLE IF NOT EXISTS state_names(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
     "INSERT OR REPLACE INTO state_names(id, name) VALUES (0, 'busy'), (1, 'idle'), (2, 'train');"
     "DROP VIEW IF EXISTS timeline_named;"
     "CREATE VIEW timeline_named AS"
     " SELECT t.run_id AS run_id, t.gpu AS gpu, p.name AS phase, s.name AS state,"
     " t.t0 AS t0, t.t1 AS t1"
     " FROM timeline t JOIN phase_names p ON p.id = t.phase JOIN state_names s ON s.id = t.state;",
     NULL},
    /* 7 -> 8: a multi-turn run's per-trajectory intervals (run_record.tj:
     * the trajectories that finished last, rank 0 the critical path) and
     * the names of their kinds (enum tj_kind, tj_kind_name).  IF NOT
     * EXISTS, as in 6 -> 7. */
    {"CREATE TABLE IF NOT EXISTS traj_timeline("
     " run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
     " rank INTEGER NOT NULL CONSTRAINT traj_rank CHECK(rank >= 0),"
     " resp INTEGER NOT NULL CONSTRAINT traj_resp CHECK(resp >= 0),"
     " turn INTEGER NOT NULL CONSTRAINT traj_turn CHECK(turn >= 0),"
     " kind INTEGER NOT NULL,"  /* enum tj_kind */
     " t0 REAL NOT NULL,"
     " t1 REAL NOT NULL,"
     " CONSTRAINT traj_order CHECK(t1 >= t0));"
     "CREATE INDEX IF NOT EXISTS traj_timeline_run ON traj_timeline(run_id);"
     "CREATE TABLE IF NOT EXISTS traj_kind_names(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
     "INSERT OR REPLACE INTO traj_kind_names(id, name) VALUES"
     " (0, 'queue'), (1, 'generate'), (2, 'tool_queue'), (3, 'tool');",
     NULL},
};

/* A fingerprint of the database file and of its -wal and -journal files
 * (inode, size, modification and change times; an absent file counts as
 * zeros); any write by any process changes it.  Sets *active (when not NULL)
 * to 1 when a -wal or -journal file exists, i.e. a writer has the file open
 * or died in a transaction. */
uint64_t store_files_print(const char *path, int *active)
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
    uint64_t sig = store_files_print(s->path, NULL);
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

int store_db_err(ts_err *e, const store *s, const char *what)
{
    int code = sqlite3_extended_errcode(s->db) & 0xff;
    if ((code == SQLITE_BUSY || code == SQLITE_LOCKED) && s->waited_s > 0)
        return ts_errf(e, "%s: %s: %s (another process holds the lock; waited %.1f s, the last "
                       "%.1f s with no writer making progress)", s->path, what,
                       sqlite3_errmsg(s->db), s->waited_s, s->stalled_s);
    return ts_errf(e, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

int store_exec_sql(store *s, const char *sql, const char *what, ts_err *e)
{
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_db_err(e, s, what);
    return 0;
}

/* Rolls back the open transaction, if any; keeps the first error message. */
void store_rollback(store *s)
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
            store_db_err(e, s, "cannot read database");
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
        rc = store_db_err(e, s, what);
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
    if (store_exec_sql(s, "PRAGMA foreign_keys=OFF", "cannot prepare the migration", e))
        return -1;
    for (;;) {
        if (store_exec_sql(s, "BEGIN IMMEDIATE", "cannot lock database for migration", e) ||
            check_schema(s, e))
            goto cleanup;
        int v = s->version;
        if (v == STORE_SCHEMA_VERSION) {
            if (store_exec_sql(s, "COMMIT", "cannot end migration", e))
                goto cleanup;
            break;
        }
        assert(v >= 0 && v < STORE_SCHEMA_VERSION); /* check_schema() refused the rest */
        char what[64], bump[64];
        snprintf(what, sizeof what, "migration to schema version %d failed", v + 1);
        snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
        if (store_exec_sql(s, migrations[v].sql, what, e) ||
            (migrations[v].fk_check && fk_check(s, migrations[v].fk_check, what, e)) ||
            store_exec_sql(s, bump, what, e) || store_exec_sql(s, "COMMIT", what, e))
            goto cleanup;
    }
    rc = 0;
cleanup:
    if (rc)
        store_rollback(s);
    ts_err e2 = {{0}};
    if (store_exec_sql(s, "PRAGMA foreign_keys=ON", "cannot enable foreign keys", rc ? &e2 : e))
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
            return store_db_err(e, s, "cannot enable WAL");
    }
}

static int prepare(store *s, const char *sql, sqlite3_stmt **st, ts_err *e)
{
    if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
        return store_db_err(e, s, "cannot prepare statement");
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
        store_exec_sql(s, "PRAGMA synchronous=NORMAL", "cannot set synchronous", e) ||
        store_exec_sql(s, "PRAGMA foreign_keys=ON", "cannot enable foreign keys", e))
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
        prepare(s, "INSERT INTO traj_timeline(run_id, rank, resp, turn, kind, t0, t1)"
                   " VALUES(?,?,?,?,?,?,?)", &s->ins_tj, e) ||
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
int store_read_conn(store *s, int locked, ts_err *e)
{
    int active = 0;
    sqlite3_close(s->db);
    s->db = NULL;
    s->sig = store_files_print(s->path, &active);
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
    if (store_read_conn(s, 0, e))
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
    sqlite3_finalize(s->ins_tj);
    sqlite3_finalize(s->ins_sweep_run);
    sqlite3_close(s->db); /* NULL is a harmless no-op */
    free(s);
}
