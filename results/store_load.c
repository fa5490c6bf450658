/*
 * Loading a run from the results store (split from results/store.c, which
 * opens it; the state they share is in results/store_impl.h).  A run is read
 * in one read transaction (one snapshot), whatever the file's schema version
 * from 1 up: what an older version lacks reads as its default (no policy
 * before version 4, no step starts before 3, nothing of what the run ran on
 * before 6).  Every row is checked again as it is read (types, ranges,
 * enums, sizes), since the file may have been written by something else:
 * a loaded record is one that could have been saved, and a bad row is named
 * by file, run, table, row and field.  A read without locks (an immutable
 * open) is checked against the files' fingerprint afterwards and done again
 * if a writer changed them meanwhile.  Every function has one `cleanup:`
 * exit; no function prints or exits.
 */
#include "results/store.h"

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/store_impl.h"

#define STORE_READ_TRIES 3  /* immutable reads before reading through SQLite's locks */


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
 * (kind 'm'), interval ('t'), response ('r'), trajectory interval ('j') or
 * step start ('s').  Returns
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
    } else if (kind == 'j') {
        traj_interval iv;
        if (i32_field(at, st, 0, "rank", 0, INT32_MAX, &iv.rank, e) ||
            i32_field(at, st, 1, "resp", 0, INT32_MAX, &iv.resp, e) ||
            i32_field(at, st, 2, "turn", 0, INT32_MAX, &iv.turn, e) ||
            i32_field(at, st, 3, "kind", 0, TJ_COUNT - 1, &iv.kind, e) ||
            real_field(at, st, 4, "t0", 0, &iv.t0, e) || real_field(at, st, 5, "t1", 0, &iv.t1, e))
            return -1;
        if (!(iv.t1 >= iv.t0))
            return ts_errf(e, "%s: run %lld: traj_timeline row %zu: field 't1' (%g) is before "
                           "'t0' (%g)", at->s->path, (long long)at->run, at->row, iv.t1, iv.t0);
        oom = run_add_traj(r, &iv);
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
        store_db_err(e, s, "cannot read run");
        goto cleanup;
    }
    sqlite3_bind_int64(st, 1, r->id);
    for (; (src = sqlite3_step(st)) == SQLITE_ROW; at.row++)
        if (load_row(&at, st, kind, r, e))
            goto cleanup;
    if (src != SQLITE_DONE) {
        store_db_err(e, s, "cannot read run");
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
    if (store_exec_sql(s, "BEGIN", "cannot begin reading", e))
        goto cleanup;
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT id, created, command, scenario, seed, calibration, version,"
             " gpus, replicas, tp, %s, %s FROM runs %s", s->version >= 4 ? "policy" : "''",
             s->version >= 6 ? "scenario_ini, overrides, steps, trace_path, trace_hash"
                             : "NULL, NULL, NULL, NULL, NULL",
             id > 0 ? "WHERE id = ?" : "ORDER BY id DESC LIMIT 1");
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
        store_db_err(e, s, "cannot query runs");
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
        store_db_err(e, s, "cannot read run");
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
         load_rows(s, "SELECT t0 FROM steps WHERE run_id = ? ORDER BY k", "steps", 's', r, e)) ||
        (s->version >= 8 &&
         load_rows(s, "SELECT rank, resp, turn, kind, t0, t1 FROM traj_timeline"
                      " WHERE run_id = ? ORDER BY rowid", "traj_timeline", 'j', r, e)))
        goto cleanup;
    if (store_exec_sql(s, "COMMIT", "cannot end reading", e))
        goto cleanup;
    *out = r;
    r = NULL;
    rc = 0;
cleanup:
    sqlite3_finalize(st);
    if (rc)
        store_rollback(s);
    run_record_free(r);
    return rc;
}

int store_load_run(store *s, int64_t id, run_record **out, ts_err *e)
{
    for (int tries = 1;; tries++) {
        int rc = load_run(s, id, out, e);
        if (!s->immutable || store_files_print(s->path, NULL) == s->sig)
            return rc;
        /* a writer changed the file while it was read without locks: what
         * was read may mix two states; read it again */
        if (rc == 0) {
            run_record_free(*out);
            *out = NULL;
        }
        if (store_read_conn(s, tries >= STORE_READ_TRIES, e))
            return -1;
    }
}
