/*
 * Storage of calibration rows: percentiles of the repeat times, the CSV
 * (models/calib/<gpu>.csv is a copy of one) and the SQLite table calib.
 * The CSV is written through ts_atomic so a reader never sees half a file;
 * the database gets all rows in one transaction, replacing the previous
 * contents, with a user_version schema stamp (WAL, synchronous=NORMAL).
 * Both hold the same rows in the same order.  gemm_algos.csv, the
 * algorithm cuBLASLt's heuristic chose for each GEMM shape planned
 * (kt_blas_algos), is written through ts_atomic too.
 */
#include "validate/validate.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define CALIB_SCHEMA_VERSION 2 /* 2: peak_bytes */

int calib_add(calib_set *s, const calib_row *r, ts_err *e)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        calib_row *rows = realloc(s->rows, cap * sizeof *rows);
        if (!rows)
            return ts_errf(e, "calibration: out of memory for %zu rows", cap);
        s->rows = rows;
        s->cap = cap;
    }
    s->rows[s->n++] = *r;
    return 0;
}

void calib_free(calib_set *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n = s->cap = 0;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static double quantile(const float *sorted, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    int hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

void calib_stats(float *us, int n, double *p10, double *p50, double *p90)
{
    qsort(us, (size_t)n, sizeof *us, cmp_float);
    *p10 = quantile(us, n, 0.10);
    *p50 = quantile(us, n, 0.50);
    *p90 = quantile(us, n, 0.90);
}

static const char CSV_HEADER[] =
    "device,sm_clock_mhz,mem_clock_mhz,op,m,n,k,batch,ctx_sum,ctx_max,q_len,"
    "median_us,p10_us,p90_us,flops,bytes,peak_bytes";

int calib_write_csv(const calib_set *s, const char *path, ts_err *e)
{
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    fprintf(a.f, "%s\n", CSV_HEADER);
    for (size_t i = 0; i < s->n; i++) {
        const calib_row *r = &s->rows[i];
        fprintf(a.f,
                "\"%s\",%d,%d,%s,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.3f,%.3f,%.3f,%.6g,%.6g,"
                "%.0f\n",
                s->device, r->sm_mhz, r->mem_mhz, r->op, r->m, r->n, r->k, r->batch,
                r->ctx_sum, r->ctx_max, r->q_len, r->median_us, r->p10_us, r->p90_us,
                r->flops, r->bytes, r->peak_bytes);
    }
    if (ferror(a.f)) {
        ts_atomic_abort(&a);
        return ts_errf(e, "%s: write failed", path);
    }
    return ts_atomic_commit(&a, e);
}

int calib_write_algos(const char *device, const kt_blas_algo *a, size_t n, const char *path,
                      ts_err *e)
{
    ts_atomic t;
    if (ts_atomic_open(&t, path, e))
        return -1;
    fprintf(t.f, "%s\n", CALIB_ALGOS_HEADER);
    for (size_t i = 0; i < n; i++) {
        const kt_blas_algo *r = &a[i];
        fprintf(t.f, "\"%s\",%d,%d,%d,%d,%d,%d,%d,%s,%d,%d,%d,%d,%d,%d\n", device, r->m, r->n,
                r->k, r->batch, r->ta, r->tb, r->algo_id, r->tile, r->tile_id, r->stages_id,
                r->splitk, r->reduction, r->swizzle, r->cluster);
    }
    if (ferror(t.f)) {
        ts_atomic_abort(&t);
        return ts_errf(e, "%s: write failed", path);
    }
    return ts_atomic_commit(&t, e);
}

static int exec_sql(sqlite3 *db, const char *sql, const char *path, ts_err *e)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        ts_errf(e, "%s: %s: %s", path, sql, msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

/* The file's schema version into *version: 0 for an empty (new) database,
 * 1..CALIB_SCHEMA_VERSION for ours.  Anything else is refused, changing
 * nothing: a negative or newer version, or version 0 with tables in it
 * (another program's database, whose own `calib` table must not be
 * emptied).  Returns 0 or -1. */
static int schema_check(sqlite3 *db, const char *path, int *version, ts_err *e)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT (SELECT user_version FROM pragma_user_version),"
                           " (SELECT count(*) FROM sqlite_master)",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        ts_errf(e, "%s: not a readable SQLite database: %s", path, sqlite3_errmsg(db));
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_int64 v = sqlite3_column_int64(st, 0), objects = sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    if (v < 0 || v > CALIB_SCHEMA_VERSION)
        return ts_errf(e, "%s: schema version %lld is not one this program writes (1..%d); "
                          "left untouched", path, (long long)v, CALIB_SCHEMA_VERSION);
    if (v == 0 && objects > 0)
        return ts_errf(e, "%s: not a tailsim calibration database (it holds %lld other "
                          "objects); left untouched", path, (long long)objects);
    *version = (int)v;
    return 0;
}

int calib_write_db(const calib_set *s, const char *path, ts_err *e)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *ins = NULL;
    int rc = -1, in_tx = 0;
    if (sqlite3_open(path, &db) != SQLITE_OK) {
        ts_errf(e, "%s: cannot open: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        goto cleanup;
    }
    sqlite3_busy_timeout(db, 60000);
    /* what the file is, before anything is changed (no WAL switch, no table) */
    int version;
    if (schema_check(db, path, &version, e))
        goto cleanup;
    if (exec_sql(db, "PRAGMA journal_mode=WAL", path, e) ||
        exec_sql(db, "PRAGMA synchronous=NORMAL", path, e) ||
        exec_sql(db, "PRAGMA foreign_keys=ON", path, e))
        goto cleanup;
    if (exec_sql(db, "BEGIN IMMEDIATE", path, e))
        goto cleanup;
    in_tx = 1;
    int again; /* another writer may have migrated it since: check under the lock */
    if (schema_check(db, path, &again, e))
        goto cleanup;
    version = again;
    if (version < 1 &&
        (exec_sql(db,
                  "CREATE TABLE IF NOT EXISTS calib ("
                  " device TEXT NOT NULL, sm_clock_mhz INTEGER, mem_clock_mhz INTEGER,"
                  " op TEXT NOT NULL, m REAL, n REAL, k REAL, batch REAL, ctx_sum REAL,"
                  " ctx_max REAL, q_len REAL, median_us REAL NOT NULL, p10_us REAL,"
                  " p90_us REAL, flops REAL, bytes REAL)",
                  path, e) ||
         exec_sql(db, "PRAGMA user_version = 1", path, e) || exec_sql(db, "COMMIT", path, e) ||
         exec_sql(db, "BEGIN IMMEDIATE", path, e)))
        goto cleanup;
    if (version < 2 && /* 1 -> 2: peak_bytes of the training rows */
        (exec_sql(db, "ALTER TABLE calib ADD COLUMN peak_bytes REAL", path, e) ||
         exec_sql(db, "PRAGMA user_version = 2", path, e) || exec_sql(db, "COMMIT", path, e) ||
         exec_sql(db, "BEGIN IMMEDIATE", path, e)))
        goto cleanup;
    if (exec_sql(db, "DELETE FROM calib", path, e))
        goto cleanup;
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO calib VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,"
                           "?12,?13,?14,?15,?16,?17)",
                           -1, &ins, NULL) != SQLITE_OK) {
        ts_errf(e, "%s: preparing insert: %s", path, sqlite3_errmsg(db));
        goto cleanup;
    }
    for (size_t i = 0; i < s->n; i++) {
        const calib_row *r = &s->rows[i];
        const double vals[] = {r->m, r->n, r->k, r->batch, r->ctx_sum, r->ctx_max, r->q_len,
                               r->median_us, r->p10_us, r->p90_us, r->flops, r->bytes,
                               r->peak_bytes};
        sqlite3_bind_text(ins, 1, s->device, -1, SQLITE_STATIC);
        sqlite3_bind_int(ins, 2, r->sm_mhz);
        sqlite3_bind_int(ins, 3, r->mem_mhz);
        sqlite3_bind_text(ins, 4, r->op, -1, SQLITE_STATIC);
        for (int j = 0; j < 13; j++)
            sqlite3_bind_double(ins, 5 + j, vals[j]);
        if (sqlite3_step(ins) != SQLITE_DONE) {
            ts_errf(e, "%s: inserting row %zu: %s", path, i, sqlite3_errmsg(db));
            goto cleanup;
        }
        sqlite3_reset(ins);
        sqlite3_clear_bindings(ins);
    }
    if (exec_sql(db, "COMMIT", path, e))
        goto cleanup;
    in_tx = 0;
    rc = 0;
cleanup:
    if (in_tx)
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_finalize(ins);
    if (db && sqlite3_close(db) != SQLITE_OK && rc == 0)
        rc = ts_errf(e, "%s: close failed", path);
    return rc;
}
