/*
 * Saving into the results store (split from results/store.c, which opens,
 * migrates and closes it; the state they share is in results/store_impl.h).
 * A run is written in one BEGIN IMMEDIATE transaction through the prepared
 * statements store_open() keeps (reset and cleared per row); any failure
 * rolls it all back.  A run the database cannot take (locked past the
 * patience, I/O error, full disk, a file that is not our store) goes to a
 * database of its own beside it (spill_run()), named in the error; a run
 * the schema refuses (s->refused) is not kept.  Sweeps: store_sweep_begin()
 * adds the sweep's row, store_save_sweep_run() each configuration with its
 * run (or why it failed) in one transaction, store_sweep_end() its status.
 * A store opened read-only refuses every write.  Every function has one
 * `cleanup:` exit; no function prints or exits.
 */
#include "results/store.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "results/store_impl.h"

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
        store_db_err(e, s, "saving run");
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

    st = s->ins_tj;
    for (size_t i = 0; i < r->n_tj; i++) {
        const traj_interval *t = &r->tj[i];
        if (t->kind < 0 || t->kind >= TJ_COUNT || t->rank < 0 || t->resp < 0 || t->turn < 0) {
            s->refused = 1;
            ts_errf(e, "%s: saving run: trajectory interval %zu: rank %d, response %d, turn %d "
                    "or kind %d out of range", s->path, i, t->rank, t->resp, t->turn, t->kind);
            goto cleanup;
        }
        if (sqlite3_bind_int64(st, 1, id) || sqlite3_bind_int(st, 2, t->rank) ||
            sqlite3_bind_int(st, 3, t->resp) || sqlite3_bind_int(st, 4, t->turn) ||
            sqlite3_bind_int(st, 5, t->kind) || bind_real(st, 6, t->t0) ||
            bind_real(st, 7, t->t1) || step_insert(s, st)) {
            ts_errf(e, "%s: saving run: trajectory interval %zu (response %d, t0 %g, t1 %g): %s",
                    s->path, i, t->resp, t->t0, t->t1, sqlite3_errmsg(s->db));
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
    if (store_exec_sql(s, "BEGIN IMMEDIATE", "cannot begin saving a run", e) ||
        insert_run(s, r, created, id, e) ||
        store_exec_sql(s, "COMMIT", "cannot commit the run", e))
        goto cleanup;
    rc = 0;
cleanup:
    if (rc)
        store_rollback(s);
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
        store_db_err(e, s, "cannot start the sweep");
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
    if (store_exec_sql(s, "BEGIN IMMEDIATE", "cannot begin saving a sweep run", e))
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
    if (store_exec_sql(s, "COMMIT", "cannot commit the sweep run", e))
        goto cleanup;
    if (r)
        set_saved(r, id, created);
    rc = 0;
cleanup:
    if (rc) {
        store_rollback(s);
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
        store_db_err(e, s, "cannot finish the sweep");
        goto cleanup;
    }
    rc = 0;
cleanup:
    sqlite3_finalize(st);
    return rc;
}
