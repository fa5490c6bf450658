/*
 * Tests of the results store (results/store.c) and the run record it saves
 * (results/result.c).  Each test gets a fresh temporary directory (created in
 * .init, removed in .fini) and works on databases inside it.  Checked: an
 * exact save/load round trip of a seeded random run (metric order, 1000
 * intervals, 1000 responses, NaN and uint64 edge values), latest-run lookup,
 * refusal of a newer schema, of a file that is not a database and of an
 * unwritable path, all-or-nothing saves (a constraint that fails halfway
 * leaves no row behind), and two processes saving 50 runs each into one file
 * at the same time.
 */
#define _DEFAULT_SOURCE /* usleep, kill */
#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "results/result.h"
#include "results/store.h"

static char tmpdir[256];
static char dbpath[512];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ts_store_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    snprintf(dbpath, sizeof dbpath, "%s/t.db", tmpdir);
}

static void teardown(void)
{
    DIR *d = opendir(tmpdir);
    if (!d)
        return;
    struct dirent *de;
    char p[1024];
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, de->d_name);
        remove(p);
    }
    closedir(d);
    rmdir(tmpdir);
}

TestSuite(store, .init = setup, .fini = teardown);

/* xorshift64*: a tiny seeded generator so the test data are reproducible. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}
static double rnd_unit(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* A run with n intervals and n responses, filled from the seeded generator. */
static run_record *make_run(uint64_t seed, size_t n)
{
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    rng_state = seed * 2654435761ULL + 1;
    snprintf(r->command, sizeof r->command, "rlstep");
    snprintf(r->scenario, sizeof r->scenario, "tlt-qwen7b|seed %llu", (unsigned long long)seed);
    snprintf(r->calibration, sizeof r->calibration, "h200-measured");
    snprintf(r->version, sizeof r->version, "0.1.0");
    r->seed = seed;
    r->gpus = 64, r->replicas = 8, r->tp = 8;
    /* deliberately not alphabetical: order must be kept */
    cr_assert_eq(run_add_metric(r, "step_s", 123.456), 0);
    cr_assert_eq(run_add_metric(r, "bubble", 0.4172), 0);
    cr_assert_eq(run_add_metric(r, "accepted_len", 6.53), 0);
    cr_assert_eq(run_add_metric(r, "events", 1234567.0), 0);
    cr_assert_eq(run_add_metric(r, "a_first", -1e-300), 0);
    for (size_t i = 0; i < n; i++) {
        double t0 = rnd_unit() * 100.0;
        cr_assert_eq(run_add_interval(r, (int32_t)(rnd() % 64), (int32_t)(rnd() % PH_COUNT),
                                      (int32_t)(rnd() % 3), t0, t0 + rnd_unit() * 10.0), 0);
        cr_assert_eq(run_add_response(r, (int32_t)(rnd() % 8), (int32_t)(rnd() % 4096),
                                      (int32_t)(rnd() % 32768), rnd_unit() * 300.0), 0);
    }
    /* a multi-turn run's trajectory intervals (schema 8): two trajectories */
    double t = 0;
    for (int i = 0; i < 6; i++, t += 1.5) {
        traj_interval iv = {i / 3, 17 + i / 3, i % 3, (i + 1) % TJ_COUNT, t, t + 1.5};
        cr_assert_eq(run_add_traj(r, &iv), 0);
    }
    return r;
}

static store *open_ok(const char *path)
{
    store *s = NULL;
    ts_err e = {""};
    int rc = store_open(path, &s, &e);
    cr_assert_eq(rc, 0, "store_open(%s): %s", path, e.msg);
    return s;
}

/* One integer from a query run directly through SQLite. */
static long long sql_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void assert_same_run(const run_record *a, const run_record *b)
{
    cr_assert_eq(a->id, b->id);
    cr_assert_str_eq(a->created, b->created);
    cr_assert_str_eq(a->command, b->command);
    cr_assert_str_eq(a->policy, b->policy);
    cr_assert_str_eq(a->scenario, b->scenario);
    cr_assert_str_eq(a->calibration, b->calibration);
    cr_assert_str_eq(a->version, b->version);
    cr_assert_eq(a->seed, b->seed);
    cr_assert_eq(a->gpus, b->gpus);
    cr_assert_eq(a->replicas, b->replicas);
    cr_assert_eq(a->tp, b->tp);
    cr_assert_eq(a->n_metrics, b->n_metrics);
    for (size_t i = 0; i < a->n_metrics; i++) {
        cr_assert_str_eq(a->metrics[i].key, b->metrics[i].key, "metric %zu", i);
        if (isnan(a->metrics[i].value))
            cr_assert(isnan(b->metrics[i].value));
        else
            cr_assert_eq(a->metrics[i].value, b->metrics[i].value, "metric %zu", i);
    }
    cr_assert_eq(a->n_tl, b->n_tl);
    for (size_t i = 0; i < a->n_tl; i++) {
        const tl_interval *x = &a->tl[i], *y = &b->tl[i];
        cr_assert(x->gpu == y->gpu && x->phase == y->phase && x->state == y->state &&
                  x->t0 == y->t0 && x->t1 == y->t1, "interval %zu differs", i);
    }
    cr_assert_eq(a->n_steps, b->n_steps);
    for (size_t k = 0; k < a->n_steps; k++)
        cr_assert_eq(a->step_t0[k], b->step_t0[k], "step %zu starts elsewhere", k);
    cr_assert_eq(a->n_tj, b->n_tj);
    for (size_t i = 0; i < a->n_tj; i++) {
        const traj_interval *x = &a->tj[i], *y = &b->tj[i];
        cr_assert(x->rank == y->rank && x->resp == y->resp && x->turn == y->turn &&
                  x->kind == y->kind && x->t0 == y->t0 && x->t1 == y->t1,
                  "trajectory interval %zu differs", i);
    }
    cr_assert_eq(a->n_resp, b->n_resp);
    for (size_t i = 0; i < a->n_resp; i++) {
        const resp_outcome *x = &a->resp[i], *y = &b->resp[i];
        cr_assert(x->replica == y->replica && x->prompt_tokens == y->prompt_tokens &&
                  x->length == y->length && x->finish_s == y->finish_s,
                  "response %zu differs", i);
    }
}

Test(store, record_basics)
{
    run_record_free(NULL);
    cr_assert_str_eq(tl_state_name[TL_TRAIN], "train");
    cr_assert_str_eq(tl_phase_name[PH_OLD_LOGP], "old_logp");
    cr_assert_str_eq(tl_phase_name[PH_UPDATE], "update");
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    for (int i = 0; i < 5000; i++)
        cr_assert_eq(run_add_interval(r, i, 0, 0, i, i + 1), 0);
    cr_assert_eq(r->n_tl, 5000);
    cr_assert_geq(r->cap_tl, r->n_tl);
    cr_assert_eq(r->cap_tl & (r->cap_tl - 1), 0, "capacity grows by doubling");
    cr_assert_eq(r->tl[4999].gpu, 4999);
    double v = 0;
    cr_assert_eq(run_get_metric(r, "x", &v), -1);
    run_add_metric(r, "x", 2.5);
    cr_assert_eq(run_get_metric(r, "x", &v), 0);
    cr_assert_eq(v, 2.5);
    run_record_free(r);
}

Test(store, round_trip)
{
    store *s = open_ok(dbpath);
    run_record *r = make_run(7, 1000);
    run_add_metric(r, "not_a_number", NAN);
    r->seed = UINT64_MAX; /* high bit set: must survive the signed column */
    for (int k = 0; k < 3; k++) /* a run of three RL steps */
        cr_assert_eq(run_add_step(r, 12.5 * k + 0.1), 0);
    run_set_policy(r, "partial+tlt");
    ts_err e = {""};
    cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
    cr_assert_gt(r->id, 0);
    cr_assert_eq(strlen(r->created), 20, "created '%s' is ISO-8601 UTC", r->created);
    cr_assert_eq(r->created[10], 'T');
    cr_assert_eq(r->created[19], 'Z');
    run_record *back = NULL;
    cr_assert_eq(store_load_run(s, r->id, &back, &e), 0, "%s", e.msg);
    assert_same_run(r, back);
    run_record_free(back);
    store_close(s);

    /* Reopening the file (no migration left) reads the same run. */
    s = open_ok(dbpath);
    cr_assert_eq(store_load_run(s, r->id, &back, &e), 0, "%s", e.msg);
    assert_same_run(r, back);
    run_record_free(back);
    store_close(s);
    run_record_free(r);
    cr_assert_eq(sql_int(dbpath, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM timeline"), 1000);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM responses"), 1000);
}

Test(store, wal_mode)
{
    store_close(open_ok(dbpath));
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

Test(store, latest_and_missing)
{
    store *s = open_ok(dbpath);
    ts_err e = {""};
    run_record *got = NULL;
    cr_assert_eq(store_load_run(s, 0, &got, &e), -1);
    cr_assert_null(got);
    cr_assert(strstr(e.msg, "no runs"), "%s", e.msg);
    int64_t ids[3];
    for (int i = 0; i < 3; i++) {
        run_record *r = make_run(100 + i, 10);
        cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
        ids[i] = r->id;
        run_record_free(r);
    }
    cr_assert(ids[0] < ids[1] && ids[1] < ids[2]);
    cr_assert_eq(store_load_run(s, 0, &got, &e), 0, "%s", e.msg);
    cr_assert_eq(got->id, ids[2]);
    cr_assert_eq(got->seed, 102);
    run_record_free(got);
    cr_assert_eq(store_load_run(s, -1, &got, &e), 0, "%s", e.msg);
    cr_assert_eq(got->id, ids[2]);
    run_record_free(got);
    cr_assert_eq(store_load_run(s, ids[0], &got, &e), 0, "%s", e.msg);
    cr_assert_eq(got->seed, 100);
    run_record_free(got);
    got = NULL;
    cr_assert_eq(store_load_run(s, 999, &got, &e), -1);
    cr_assert_null(got);
    cr_assert(strstr(e.msg, "999") && strstr(e.msg, dbpath), "%s", e.msg);
    store_close(s);
}

Test(store, refuses_newer_schema)
{
    store_close(open_ok(dbpath));
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    store *s = NULL;
    ts_err e = {""};
    cr_assert_eq(store_open(dbpath, &s, &e), -1);
    cr_assert_null(s);
    cr_assert(strstr(e.msg, "newer"), "%s", e.msg);
    char want[16];
    snprintf(want, sizeof want, "(%d)", STORE_SCHEMA_VERSION);
    cr_assert(strstr(e.msg, dbpath) && strstr(e.msg, "99") && strstr(e.msg, want), "%s", e.msg);
}

/* Saves run r (NULL: a fresh one) into a fresh database, then takes the
 * file back to an older schema with sql (run through SQLite directly).
 * Returns the run (free it). */
static run_record *saved_then_downgraded(run_record *r, const char *sql)
{
    store *s = open_ok(dbpath);
    ts_err e = {""};
    if (!r)
        r = make_run(7, 10);
    cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
    store_close(s);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return r;
}

/* Take a saved database back to before schema version 7 (DROP_V7) or 6. */
#define DROP_V7 "DROP VIEW timeline_named; DROP TABLE phase_names; DROP TABLE state_names; "
#define DROP_V6                                                                          \
    DROP_V7                                                                              \
    "ALTER TABLE runs DROP COLUMN scenario_ini; ALTER TABLE runs DROP COLUMN overrides;" \
    " ALTER TABLE runs DROP COLUMN steps; ALTER TABLE runs DROP COLUMN trace_path;"      \
    " ALTER TABLE runs DROP COLUMN trace_hash; "

/* Version 7: the timeline's phase and state names, as tables that match
 * the C names row for row, and the view timeline_named that shows them; a
 * version-6 file migrates to them. */
Test(store, timeline_names_match_the_enums)
{
    run_record *r = saved_then_downgraded(NULL, DROP_V7 "PRAGMA user_version = 6");
    store_close(open_ok(dbpath));
    cr_assert_eq(sql_int(dbpath, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM phase_names"), PH_COUNT);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM state_names"), 3);
    for (int i = 0; i < PH_COUNT; i++) {
        char q[200];
        snprintf(q, sizeof q, "SELECT count(*) FROM phase_names WHERE id = %d AND name = '%s'", i,
                 tl_phase_name[i]);
        cr_assert_eq(sql_int(dbpath, q), 1, "phase %d is not '%s'", i, tl_phase_name[i]);
    }
    for (int i = 0; i < 3; i++) {
        char q[200];
        snprintf(q, sizeof q, "SELECT count(*) FROM state_names WHERE id = %d AND name = '%s'", i,
                 tl_state_name[i]);
        cr_assert_eq(sql_int(dbpath, q), 1, "state %d is not '%s'", i, tl_state_name[i]);
    }
    /* every timeline row shows up named, with its own numbers */
    cr_assert_gt(sql_int(dbpath, "SELECT count(*) FROM timeline"), 0);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM timeline_named"),
                 sql_int(dbpath, "SELECT count(*) FROM timeline"));
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM timeline t JOIN timeline_named n"
                                 " ON n.run_id = t.run_id AND n.gpu = t.gpu AND n.t0 = t.t0"
                                 " AND n.t1 = t.t1 JOIN phase_names p ON p.name = n.phase"
                                 " JOIN state_names s ON s.name = n.state"
                                 " WHERE p.id <> t.phase OR s.id <> t.state"), 0);
    run_record_free(r);
}

/* Version 8: a version-7 file gets the trajectories' table and the names of
 * their kinds (matching tj_kind_name row for row); its runs load with no
 * trajectory intervals, a new run keeps its own. */
Test(store, migrates_version_7_to_8)
{
    run_record *r = saved_then_downgraded(NULL, "DROP TABLE traj_timeline;"
                                          " DROP TABLE traj_kind_names; PRAGMA user_version = 7");
    ts_err e = {""};
    store *s = open_ok(dbpath);
    cr_assert_eq(sql_int(dbpath, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM traj_kind_names"), TJ_COUNT);
    for (int i = 0; i < TJ_COUNT; i++) {
        char q[200];
        snprintf(q, sizeof q, "SELECT count(*) FROM traj_kind_names WHERE id = %d AND name = '%s'",
                 i, tj_kind_name[i]);
        cr_assert_eq(sql_int(dbpath, q), 1, "kind %d is not '%s'", i, tj_kind_name[i]);
    }
    run_record *back = NULL;
    cr_assert_eq(store_load_run(s, r->id, &back, &e), 0, "%s", e.msg);
    cr_assert_eq(back->n_tj, 0);
    run_record_free(back);
    run_record *two = make_run(8, 10);
    cr_assert_eq(store_save_run(s, two, &e), 0, "%s", e.msg);
    cr_assert_eq(store_load_run(s, two->id, &back, &e), 0, "%s", e.msg);
    cr_assert_eq(back->n_tj, 6);
    assert_same_run(two, back);
    run_record_free(back);
    run_record_free(two);
    store_close(s);
    run_record_free(r);
}

/* A version-1 database (no sweep tables, no steps) is migrated to the
 * current version on open, keeping its runs. */
Test(store, migrates_version_1_to_current)
{
    run_record *r = saved_then_downgraded(NULL, DROP_V6 "DROP TABLE steps;"
                                          " ALTER TABLE runs DROP COLUMN policy;"
                                          " DROP TABLE sweep_runs; DROP TABLE sweeps;"
                                          " PRAGMA user_version = 1");
    store *s = open_ok(dbpath);
    store_close(s);
    cr_assert_eq(sql_int(dbpath, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM sweeps"), 0);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM steps"), 0);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM runs"), 1);
    run_record_free(r);
}

/* A version-2 database (runs without policy or step starts) gets them on
 * open; its runs load with none, and new runs keep theirs. */
Test(store, migrates_version_2_to_current)
{
    run_record *r = saved_then_downgraded(NULL, DROP_V6 "DROP TABLE steps;"
                                          " ALTER TABLE runs DROP COLUMN policy;"
                                          " PRAGMA user_version = 2");
    ts_err e = {""};
    store *s = open_ok(dbpath);
    cr_assert_eq(sql_int(dbpath, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    run_record *back = NULL;
    cr_assert_eq(store_load_run(s, r->id, &back, &e), 0, "%s", e.msg);
    cr_assert_eq(back->n_steps, 0);
    cr_assert_str_eq(back->policy, "");
    run_record_free(back);
    run_record *two = make_run(7, 10);
    run_set_policy(two, "tailbatch+tlt");
    cr_assert_eq(run_add_step(two, 0.0), 0);
    cr_assert_eq(run_add_step(two, 40.0), 0);
    cr_assert_eq(store_save_run(s, two, &e), 0, "%s", e.msg);
    cr_assert_eq(store_load_run(s, two->id, &back, &e), 0, "%s", e.msg);
    assert_same_run(two, back);
    run_record_free(back);
    run_record_free(two);
    store_close(s);
    run_record_free(r);
}

/* A version-3 database (step starts, no policy) gets the policy column on
 * open, its runs reading '' and keeping their steps. */
Test(store, migrates_version_3_to_4)
{
    run_record *r = make_run(7, 10);
    cr_assert_eq(run_add_step(r, 0.0), 0);
    cr_assert_eq(run_add_step(r, 33.0), 0);
    saved_then_downgraded(r, DROP_V6 "ALTER TABLE runs DROP COLUMN policy; PRAGMA user_version = 3");
    ts_err e = {""};
    store *s = open_ok(dbpath);
    cr_assert_eq(sql_int(dbpath, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    run_record *back = NULL;
    cr_assert_eq(store_load_run(s, r->id, &back, &e), 0, "%s", e.msg);
    cr_assert_str_eq(back->policy, "");
    cr_assert_eq(back->n_steps, 2);
    cr_assert_eq(back->step_t0[1], 33.0);
    run_record_free(back);
    store_close(s);
    run_record_free(r);
}

/* A step start that is not a number is refused, and the run with it. */
Test(store, nan_step_start_is_refused)
{
    store *s = open_ok(dbpath);
    ts_err e = {""};
    run_record *r = make_run(2, 5);
    cr_assert_eq(run_add_step(r, 0.0), 0);
    cr_assert_eq(run_add_step(r, NAN), 0);
    cr_assert_eq(store_save_run(s, r, &e), -1);
    cr_assert(strstr(e.msg, "step 1"), "%s", e.msg);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM runs"), 0, "nothing half-written");
    store_close(s);
    run_record_free(r);
}

/* A sweep configuration is saved in one transaction with its run; a failed
 * one keeps its error and no run; a second save of the same configuration
 * is refused and leaves no orphan run behind. */
Test(store, sweep_runs_are_atomic)
{
    store *s = open_ok(dbpath);
    ts_err e = {""};
    int64_t id = 0;
    run_record *r = make_run(3, 20);
    cr_assert_eq(store_sweep_begin(s, "g.ini", "qwen7b-64gpu", "rlstep", 2, &id, &e), 0, "%s", e.msg);
    cr_assert_eq(store_save_sweep_run(s, id, 0, "{\"rollout.tp\":\"2\"}", r, NULL, &e), 0, "%s", e.msg);
    cr_assert_gt(r->id, 0);
    cr_assert_eq(store_save_sweep_run(s, id, 1, "{}", NULL, "does not fit", &e), 0, "%s", e.msg);
    cr_assert_eq(store_save_sweep_run(s, id, 0, "{}", r, NULL, &e), -1);
    cr_assert(strstr(e.msg, "configuration 0"), "%s", e.msg);
    cr_assert_eq(store_sweep_end(s, id, STORE_SWEEP_FAILED, &e), 0, "%s", e.msg);
    store_close(s);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM runs"), 1);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM metrics"), (long long)r->n_metrics);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM sweep_runs WHERE error IS NOT NULL"), 1);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM sweeps WHERE status = 'failed'"), 1);
    run_record_free(r);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

Test(store, refuses_garbage_file)
{
    unsigned char junk[8192];
    rng_state = 42;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)rnd();
    write_file(dbpath, junk, sizeof junk);
    store *s = NULL;
    ts_err e = {""};
    cr_assert_eq(store_open(dbpath, &s, &e), -1);
    cr_assert_null(s);
    cr_assert(strstr(e.msg, "not a database") && strstr(e.msg, dbpath), "%s", e.msg);

    const char text[] = "step,prompt_id,prompt_tokens,response_tokens\n0,0,512,4096\n";
    write_file(dbpath, text, sizeof text - 1);
    e.msg[0] = 0;
    cr_assert_eq(store_open(dbpath, &s, &e), -1);
    cr_assert(strstr(e.msg, "not a database") && strstr(e.msg, dbpath), "%s", e.msg);
}

Test(store, refuses_unwritable_path)
{
    /* Tests may run as root, which ignores permission bits: use paths that
     * cannot be created by anyone. */
    const char *bad[] = {"/nonexistent-tailsim-dir/sub/t.db", "/proc/tailsim-test.db"};
    char dirpath[512];
    snprintf(dirpath, sizeof dirpath, "%s", tmpdir); /* a directory, not a file */
    for (int i = 0; i < 3; i++) {
        const char *p = i < 2 ? bad[i] : dirpath;
        store *s = NULL;
        ts_err e = {""};
        cr_assert_eq(store_open(p, &s, &e), -1, "%s opened", p);
        cr_assert_null(s);
        cr_assert(strstr(e.msg, p), "message names the file: %s", e.msg);
    }
}

/* Saves r, expects failure, and checks that no table gained a row. */
static void assert_save_fails_cleanly(store *s, run_record *r, const char *expect)
{
    ts_err e = {""};
    cr_assert_eq(store_save_run(s, r, &e), -1, "bad run was saved");
    cr_assert(strstr(e.msg, expect), "message '%s' lacks '%s'", e.msg, expect);
    cr_assert_eq(r->id, 0, "id set on failure");
    cr_assert_eq(r->created[0], 0, "created set on failure");
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM runs"), 0);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM metrics"), 0);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM timeline"), 0);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM responses"), 0);
}

Test(store, failed_save_leaves_nothing)
{
    store *s = open_ok(dbpath);
    /* Interval 500 ends before it starts: the CHECK fails after the run row,
     * the metrics and 500 intervals are already inserted. */
    run_record *r = make_run(1, 1000);
    r->tl[500].t1 = r->tl[500].t0 - 1.0;
    assert_save_fails_cleanly(s, r, "interval_order");
    /* A NaN time cannot be stored either. */
    r->tl[500].t1 = r->tl[500].t0 + 1.0;
    r->tl[999].t0 = NAN;
    assert_save_fails_cleanly(s, r, "timeline interval 999");
    r->tl[999].t0 = 0.0;
    /* A duplicate metric key fails on the primary key. */
    run_add_metric(r, "bubble", 0.5);
    assert_save_fails_cleanly(s, r, "bubble");
    r->n_metrics--;
    /* A phase outside the enum is refused halfway through the timeline. */
    r->tl[700].phase = PH_COUNT;
    assert_save_fails_cleanly(s, r, "out of range");
    r->tl[700].phase = PH_REF;
    /* A negative length fails in the last table. */
    r->resp[999].length = -1;
    assert_save_fails_cleanly(s, r, "response 999");
    r->resp[999].length = 10;

    /* The store is still usable, and the repaired run saves whole. */
    ts_err e = {""};
    cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM runs"), 1);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM timeline"), 1000);
    run_record_free(r);
    store_close(s);
}

Test(store, deleting_a_run_cascades)
{
    store *s = open_ok(dbpath);
    run_record *r = make_run(3, 50);
    ts_err e = {""};
    cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
    store_close(s);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "PRAGMA foreign_keys=ON; DELETE FROM runs", NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM metrics"), 0);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM timeline"), 0);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM traj_timeline"), 0);
    run_record_free(r);
}

/* Child body: opens the (possibly not yet existing) file and saves 50 runs.
 * Returns the exit status for _exit(). */
static int writer(uint64_t base)
{
    store *s = NULL;
    ts_err e = {""};
    if (store_open(dbpath, &s, &e)) {
        fprintf(stderr, "writer %llu: %s\n", (unsigned long long)base, e.msg);
        return 1;
    }
    int bad = 0;
    for (uint64_t i = 0; i < 50 && !bad; i++) {
        run_record *r = make_run(base + i, 200);
        if (!r || store_save_run(s, r, &e)) {
            fprintf(stderr, "writer %llu run %llu: %s\n", (unsigned long long)base,
                    (unsigned long long)i, e.msg);
            bad = 1;
        }
        run_record_free(r);
    }
    store_close(s);
    return bad;
}

Test(store, two_processes_write_at_once)
{
    pid_t pid[2];
    for (int k = 0; k < 2; k++) {
        pid[k] = fork();
        cr_assert_geq(pid[k], 0);
        if (pid[k] == 0)
            _exit(writer(1000 * (uint64_t)(k + 1)));
    }
    for (int k = 0; k < 2; k++) {
        int st = 0;
        cr_assert_eq(waitpid(pid[k], &st, 0), pid[k]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed", k);
    }
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
    sqlite3_close(db);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM runs"), 100);
    cr_assert_eq(sql_int(dbpath, "SELECT count(DISTINCT seed) FROM runs"), 100);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM timeline"), 100 * 200);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM metrics"), 100 * 5);
    /* every run is whole: 200 responses each */
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM (SELECT run_id FROM responses"
                                 " GROUP BY run_id HAVING count(*) = 200)"), 100);
}

/* Child body for the crash test: saves large runs forever (until killed). */
static void endless_writer(void)
{
    store *s = NULL;
    ts_err e = {""};
    if (store_open(dbpath, &s, &e))
        _exit(1);
    for (uint64_t i = 0;; i++) {
        run_record *r = make_run(5000 + i, 20000);
        if (!r || store_save_run(s, r, &e))
            _exit(1);
        run_record_free(r);
    }
}

Test(store, sigkill_mid_write_leaves_no_partial_run, .timeout = 120)
{
    /* kill the writer at several points in its life: each time the database
     * must open, pass integrity_check and hold only whole runs */
    const int delays_ms[] = {30, 120, 400, 900};
    for (size_t k = 0; k < sizeof delays_ms / sizeof delays_ms[0]; k++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
            endless_writer();
        usleep((useconds_t)delays_ms[k] * 1000);
        kill(pid, SIGKILL);
        int st = 0;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFSIGNALED(st), "the writer ended by itself (status %d)", st);
        store *s = open_ok(dbpath); /* opens after the crash */
        store_close(s);
        sqlite3 *db = NULL;
        sqlite3_stmt *q = NULL;
        cr_assert_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
        cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
        cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
        cr_assert_str_eq((const char *)sqlite3_column_text(q, 0), "ok");
        sqlite3_finalize(q);
        sqlite3_close(db);
        long long runs = sql_int(dbpath, "SELECT count(*) FROM runs");
        /* every run present is whole: 5 metrics, 20000 intervals, 20000 responses */
        cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM metrics"), 5 * runs);
        cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM timeline"), 20000 * runs);
        cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM responses"), 20000 * runs);
    }
    /* and the database stays usable: one more run saves and counts add up */
    long long before = sql_int(dbpath, "SELECT count(*) FROM runs");
    store *s = open_ok(dbpath);
    run_record *r = make_run(99, 100);
    ts_err e = {""};
    cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
    run_record_free(r);
    store_close(s);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM runs"), before + 1);
    cr_assert_eq(sql_int(dbpath, "SELECT count(*) FROM responses"), 20000 * before + 100);
}
