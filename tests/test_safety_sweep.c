/*
 * An interrupted sweep (issue 21): SIGINT, SIGTERM, SIGHUP or SIGPIPE during
 * `tailsim sweep GRID --db F` stops the workers, keeps every configuration
 * already saved, marks the sweep's row 'interrupted' (schema version 5),
 * closes the database and dies of the signal.
 *
 * Three parts.  The deferral itself (common/util.c: ts_signal_defer,
 * ts_signal_pending, ts_signal_resume), each case in a forked child that
 * signals itself: the signal is recorded, a blocking call fails with EINTR,
 * resuming does the handler's cleanup and dies of it, a forked child is never
 * deferred.  The migration: a version-4 database written with the old
 * schema's SQL migrates to 5 keeping its sweeps and their runs, with the
 * links intact and foreign keys back on, and one whose links are broken is
 * refused and left as it was.  The CLI end to end: build/tailsim sweep on a
 * grid of 4,000 small configurations runs in a process group of its own; once
 * the database (read through SQLite, read-only) shows a saved configuration
 * the test signals it (or, like a terminal's Ctrl-C, its whole group) and
 * checks that it died of that signal, that no process of its group is left,
 * that the row says 'interrupted' over intact runs as many as the stderr line
 * says, and that the database serves a report and takes a new sweep.  A
 * progress line written into a closed pipe (SIGPIPE) ends the sweep the same
 * way, and `tailsim plan`, the same runner without a database, stops the same
 * way.  Nothing here asserts a time: waits are bounded loops.
 */
#define _GNU_SOURCE /* ppoll */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "results/result.h"
#include "results/store.h"
#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "sweepsig");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(safety_sweep, .init = setup, .fini = teardown);

/* dir/name into buf. */
static const char *in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static int fatal_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
#define N_FATAL (int)(sizeof fatal_sigs / sizeof fatal_sigs[0])

/* Puts the four signals' actions back to the default and unblocks them (a
 * test runner or a background shell may have left them ignored, which exec
 * keeps). */
static void default_signals(void)
{
    sigset_t s;
    sigemptyset(&s);
    for (int i = 0; i < N_FATAL; i++) {
        signal(fatal_sigs[i], SIG_DFL);
        sigaddset(&s, fatal_sigs[i]);
    }
    sigprocmask(SIG_UNBLOCK, &s, NULL);
}

/* Waits for child pid; returns its wait status. */
static int reap(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        cr_assert_eq(errno, EINTR, "waitpid: %s", strerror(errno));
    return st;
}

static void expect_killed_by(int st, int sig)
{
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == sig,
              "status %#x (exit %d, signal %d), expected death by signal %d", st,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0, sig);
}

/* One integer from sql on db, read-only; -1 when the database cannot be read
 * yet (not created, no table yet). */
static long long sql_try(const char *db, const char *sql)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(h, 5000);
        if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* The same, failing the test when it cannot be read. */
static long long sql_int(const char *db, const char *sql)
{
    long long v = sql_try(db, sql);
    cr_assert_neq(v, -1, "cannot read %s: %s", db, sql);
    return v;
}

/* A text from sql on db into buf ("" when there is none). */
static const char *sql_text(const char *db, const char *sql, char *buf, size_t n)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    buf[0] = 0;
    cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "%s", db);
    cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(h);
    return buf;
}

/* The whole (small) file into buf. */
static const char *slurp(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return buf;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = 0;
    fclose(f);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* The deferral (common/util.c)                                              */

ParameterizedTestParameters(safety_sweep, deferred_signal_waits_for_resume)
{
    return cr_make_param_array(int, fatal_sigs, N_FATAL);
}

/* A deferred signal is recorded (the first of several), the process goes on
 * (it says so through a pipe), and ts_signal_resume() then removes the
 * temporaries and dies of that first signal. */
ParameterizedTest(int *sig, safety_sweep, deferred_signal_waits_for_resume)
{
    char out[512];
    in(out, sizeof out, "out.csv");
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        default_signals();
        ts_err e = {{0}};
        ts_atomic a;
        if (ts_atomic_open(&a, out, &e))
            _exit(3);
        ts_signal_defer();
        if (ts_signal_pending() != 0)
            _exit(5);
        kill(getpid(), *sig);
        kill(getpid(), *sig == SIGTERM ? SIGINT : SIGTERM); /* a second: the first stays */
        if (ts_signal_pending() != *sig)
            _exit(6);
        fputs("half\n", a.f);
        fflush(a.f);
        if (write(fd[1], "alive", 5) != 5)
            _exit(7);
        ts_signal_resume();
        _exit(4);
    }
    close(fd[1]);
    char buf[8] = {0};
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int st = reap(pid);
    cr_expect_eq(n, 5, "the deferred process did not go on after the signal");
    expect_killed_by(st, *sig);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)pid);
    cr_expect_neq(access(tmp, F_OK), 0, "resume left the temporary %s", tmp);
    cr_expect_neq(access(out, F_OK), 0, "out.csv was written");
}

/* Without a signal, resume returns and ends the deferral: the next signal
 * kills at once, with the normal cleanup. */
Test(safety_sweep, resume_without_signal_returns)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        default_signals();
        ts_signal_defer();
        ts_signal_defer(); /* no nesting: still one deferral */
        ts_signal_resume();
        if (ts_signal_pending() != 0)
            _exit(5);
        kill(getpid(), SIGTERM);
        _exit(4);
    }
    expect_killed_by(reap(pid), SIGTERM);
}

/* A signal that arrives while blocked makes a blocking call (ppoll, with the
 * signal unblocked for its duration) fail with EINTR once the handler has
 * recorded it: what the sweep's collector relies on. */
Test(safety_sweep, deferred_signal_interrupts_a_blocking_call)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        default_signals();
        int fd[2];
        if (pipe(fd))
            _exit(3);
        ts_signal_defer();
        sigset_t block, during;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigprocmask(SIG_BLOCK, &block, &during);
        kill(getpid(), SIGINT); /* pending, blocked */
        if (ts_signal_pending() != 0)
            _exit(5);
        sigdelset(&during, SIGINT);
        struct pollfd p = {.fd = fd[0], .events = POLLIN};
        int rc = ppoll(&p, 1, NULL, &during); /* nothing to read: only the signal ends it */
        if (rc != -1 || errno != EINTR)
            _exit(6);
        if (ts_signal_pending() != SIGINT)
            _exit(7);
        ts_signal_resume();
        _exit(4);
    }
    expect_killed_by(reap(pid), SIGINT);
}

/* A child forked by a deferring process (a sweep worker) is not deferred:
 * it dies of SIGTERM at once and sees no pending signal of its parent's. */
Test(safety_sweep, forked_child_is_not_deferred)
{
    default_signals();
    ts_signal_defer();
    kill(getpid(), SIGHUP);
    cr_assert_eq(ts_signal_pending(), SIGHUP);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (ts_signal_pending() != 0)
            _exit(5);
        kill(getpid(), SIGTERM);
        _exit(4);
    }
    expect_killed_by(reap(pid), SIGTERM);
    cr_expect_eq(ts_signal_pending(), SIGHUP, "the parent's record changed");
    /* end the test without dying of the recorded SIGHUP */
    signal(SIGHUP, SIG_IGN);
}

/* An ignored signal stays ignored: nothing is recorded, resume returns. */
Test(safety_sweep, ignored_signal_stays_ignored)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        default_signals();
        signal(SIGHUP, SIG_IGN);
        ts_signal_defer();
        kill(getpid(), SIGHUP);
        if (ts_signal_pending() != 0)
            _exit(5);
        ts_signal_resume();
        _exit(0);
    }
    int st = reap(pid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}

/* ------------------------------------------------------------------------ */
/* Schema version 5: the migration                                           */

/* The schema as versions 1 to 4 wrote it (the old sweeps CHECK), two runs,
 * and three sweeps ('done', 'failed', 'running') linking to them. */
#define V4_SCHEMA                                                                             \
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, created TEXT NOT NULL, command TEXT NOT NULL," \
    " scenario TEXT NOT NULL, seed INTEGER NOT NULL, calibration TEXT NOT NULL,"             \
    " version TEXT NOT NULL, gpus INTEGER NOT NULL, replicas INTEGER NOT NULL,"              \
    " tp INTEGER NOT NULL, policy TEXT NOT NULL DEFAULT '');"                                \
    "CREATE TABLE metrics(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"    \
    " key TEXT NOT NULL, value REAL, ord INTEGER NOT NULL, PRIMARY KEY(run_id, key));"       \
    "CREATE TABLE timeline(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"   \
    " gpu INTEGER NOT NULL CONSTRAINT gpu_index CHECK(gpu >= 0), phase INTEGER NOT NULL,"    \
    " state INTEGER NOT NULL, t0 REAL NOT NULL, t1 REAL NOT NULL,"                           \
    " CONSTRAINT interval_order CHECK(t1 >= t0));"                                           \
    "CREATE INDEX timeline_run ON timeline(run_id);"                                         \
    "CREATE TABLE responses(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"  \
    " idx INTEGER NOT NULL, replica INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL,"       \
    " length INTEGER NOT NULL CONSTRAINT length_nonneg CHECK(length >= 0), finish_s REAL,"   \
    " PRIMARY KEY(run_id, idx));"                                                            \
    "CREATE TABLE sweeps(id INTEGER PRIMARY KEY, created TEXT NOT NULL, grid TEXT NOT NULL," \
    " scenario TEXT NOT NULL, command TEXT NOT NULL,"                                        \
    " n_configs INTEGER NOT NULL CONSTRAINT n_configs_pos CHECK(n_configs >= 1),"            \
    " status TEXT NOT NULL CONSTRAINT sweep_status"                                          \
    "  CHECK(status IN ('running', 'done', 'failed')));"                                     \
    "CREATE TABLE sweep_runs(sweep_id INTEGER NOT NULL REFERENCES sweeps(id)"                \
    " ON DELETE CASCADE, config INTEGER NOT NULL CONSTRAINT config_index CHECK(config >= 0)," \
    " run_id INTEGER REFERENCES runs(id) ON DELETE CASCADE, params TEXT NOT NULL,"           \
    " error TEXT, PRIMARY KEY(sweep_id, config),"                                            \
    " CONSTRAINT run_or_error CHECK((run_id IS NULL) <> (error IS NULL)));"                  \
    "CREATE TABLE steps(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"      \
    " k INTEGER NOT NULL CONSTRAINT step_index CHECK(k >= 0), t0 REAL NOT NULL,"             \
    " PRIMARY KEY(run_id, k));"                                                              \
    "PRAGMA user_version = 4;"                                                               \
    "INSERT INTO runs VALUES(1, '2025-01-01T00:00:00Z', 'rlstep', 's', 7, 'c', '0.1.0',"      \
    " 8, 4, 2, 'tlt'), (2, '2025-01-01T00:00:00Z', 'rlstep', 's', 8, 'c', '0.1.0',"          \
    " 8, 4, 2, 'verl');"                                                                     \
    "INSERT INTO metrics VALUES(1, 'step_s', 10.0, 0), (2, 'step_s', 12.0, 0);"              \
    "INSERT INTO sweeps VALUES(3, '2025-01-02T00:00:00Z', 'a.ini', 's', 'rlstep', 2, 'done'),"\
    " (5, '2025-01-03T00:00:00Z', 'b.ini', 's', 'rlstep', 2, 'failed'),"                     \
    " (9, '2025-01-04T00:00:00Z', 'c.ini', 's', 'rollout', 7, 'running');"                   \
    "INSERT INTO sweep_runs VALUES(3, 0, 1, '{\"trace.seed\":\"7\"}', NULL),"                \
    " (3, 1, 2, '{\"trace.seed\":\"8\"}', NULL), (5, 0, NULL, '{}', 'does not fit'),"        \
    " (5, 1, NULL, '{}', 'does not fit');"

/* Writes a database with sql through SQLite directly (foreign keys on, as
 * tailsim writes). */
static void craft(const char *db, const char *sql)
{
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, "PRAGMA foreign_keys=ON", NULL, NULL, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
    sqlite3_close(h);
}

/* Every sweeps and sweep_runs row as one text (what must survive). */
static void sweeps_dump(const char *db, char *buf, size_t n)
{
    sql_text(db,
             "SELECT (SELECT group_concat(x, '|') FROM (SELECT id || ',' || created || ',' ||"
             " grid || ',' || scenario || ',' || command || ',' || n_configs || ',' || status"
             " AS x FROM sweeps ORDER BY id)) || ' / ' || (SELECT group_concat(y, '|') FROM"
             " (SELECT sweep_id || ',' || config || ',' || ifnull(run_id, '-') || ',' || params"
             " || ',' || ifnull(error, '-') AS y FROM sweep_runs ORDER BY sweep_id, config))",
             buf, n);
}

/* A version-4 database migrates to 5: its sweeps, their links and runs are
 * kept (same ids and values, references intact), the new CHECK takes
 * 'interrupted' and still refuses anything else, and the store marks a
 * sweep interrupted. */
Test(safety_sweep, migrates_version_4_to_5)
{
    char db[600], before[4096], after[4096], sql[256];
    in(db, sizeof db, "v4.db");
    craft(db, V4_SCHEMA);
    sweeps_dump(db, before, sizeof before);
    cr_assert(strstr(before, "3,0,1,"), "%s", before);
    store *s = NULL;
    ts_err e = {{0}};
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    /* through 5 on to the current version */
    cr_expect_eq(sql_int(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    cr_expect_geq(STORE_SCHEMA_VERSION, 5);
    sweeps_dump(db, after, sizeof after);
    cr_expect_str_eq(after, before, "the migration changed the sweeps");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'sweeps' AND"
                             " sql LIKE '%''interrupted''%'"), 1, "the new CHECK is not there");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'sweeps_%'"),
                 0, "the rebuild's table was left behind");
    /* the store writes the new status; the runs load */
    cr_expect_eq(store_sweep_end(s, 9, STORE_SWEEP_INTERRUPTED, &e), 0, "%s", e.msg);
    cr_expect_eq(store_sweep_end(s, 9, (store_sweep_status)0, &e), -1,
                 "the old `int ok` false was taken");
    run_record *r = NULL;
    cr_expect_eq(store_load_run(s, 2, &r, &e), 0, "%s", e.msg);
    run_record_free(r);
    store_close(s);
    cr_expect_str_eq(sql_text(db, "SELECT status FROM sweeps WHERE id = 9", sql, sizeof sql),
                     "interrupted");
    /* the CHECK still refuses a status tailsim does not write */
    sqlite3 *h = NULL;
    cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
    cr_expect_neq(sqlite3_exec(h, "UPDATE sweeps SET status = 'paused' WHERE id = 3", NULL, NULL,
                               NULL), SQLITE_OK, "status 'paused' was accepted");
    sqlite3_close(h);
}

/* After migrating, the program's connection has its foreign keys on again:
 * a link to a sweep that is not there is refused. */
Test(safety_sweep, migration_leaves_foreign_keys_on)
{
    char db[600];
    in(db, sizeof db, "v4f.db");
    craft(db, V4_SCHEMA);
    store *s = NULL;
    ts_err e = {{0}};
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    cr_expect_eq(store_save_sweep_run(s, 12345, 0, "{}", NULL, "does not fit", &e), -1,
                 "a link to a missing sweep was saved");
    store_close(s);
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM sweep_runs WHERE sweep_id = 12345"), 0);
}

/* A version-4 database whose links are broken (a sweep_runs row naming a
 * sweep that is not there) is refused by the migration's check, left at
 * version 4 with its rows as they were. */
Test(safety_sweep, migration_refuses_broken_links)
{
    char db[600], before[4096], after[4096];
    in(db, sizeof db, "broken.db");
    craft(db, V4_SCHEMA "PRAGMA foreign_keys=OFF; INSERT INTO sweep_runs VALUES(77, 0, 1, '{}',"
                        " NULL);");
    sweeps_dump(db, before, sizeof before);
    store *s = NULL;
    ts_err e = {{0}};
    cr_assert_eq(store_open(db, &s, &e), -1, "a database with a broken link was migrated");
    cr_assert_null(s);
    cr_expect(strstr(e.msg, db) && strstr(e.msg, "schema version 5") &&
                  strstr(e.msg, "sweep_runs") && strstr(e.msg, "sweeps"),
              "%s", e.msg);
    cr_expect_eq(sql_int(db, "PRAGMA user_version"), 4);
    sweeps_dump(db, after, sizeof after);
    cr_expect_str_eq(after, before);
}

/* The rebuild keeps the sweeps' links with foreign keys on in the program:
 * after the migration, deleting a sweep still cascades to its links (the
 * reference points at the new table). */
Test(safety_sweep, migrated_links_still_cascade)
{
    char db[600];
    in(db, sizeof db, "v4c.db");
    craft(db, V4_SCHEMA);
    store *s = NULL;
    ts_err e = {{0}};
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    store_close(s);
    craft(db, "DELETE FROM sweeps WHERE id = 3");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM sweep_runs WHERE sweep_id = 3"), 0);
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM sweep_runs WHERE sweep_id = 5"), 2);
}

/* ------------------------------------------------------------------------ */
/* The sweep, end to end                                                    */

/* The grid: TLT on the 7B scenario, 2 prompt counts x configs/2 seeds of
 * small configurations (4,000: far more than run before the test signals). */
#define BIG_CONFIGS 4000

static void write_big_grid(const char *path, int configs)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs("[sweep]\nscenario = qwen7b-64gpu\npolicy = tlt\n[trace]\nprompts = 32,48\nseed = ", f);
    for (int i = 1; i <= configs / 2; i++)
        fprintf(f, "%d%s", i, i == configs / 2 ? "\n" : i % 20 == 0 ? "\n    " : ",");
    cr_assert_eq(fclose(f), 0);
}

/* Starts build/tailsim sweep GRID -j JOBS --db DB in a process group of its
 * own (its pid), stdout to /dev/null, stderr to log. */
static pid_t start_sweep(const char *grid, int jobs, const char *db, const char *log)
{
    char j[16];
    snprintf(j, sizeof j, "%d", jobs);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        default_signals();
        int out = open("/dev/null", O_WRONLY), err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
            _exit(126);
        execl("build/tailsim", "tailsim", "sweep", grid, "-j", j, "--db", db, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with the signal below */
    return pid;
}

/* Waits (a bounded loop of short naps) until db holds a saved configuration
 * of a running sweep; fails the test, killing the group, when the sweep ended
 * first or never saved one. */
static void wait_for_a_saved_config(pid_t pid, const char *db, const char *log)
{
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 30000; i++) {
        if (sql_try(db, "SELECT count(*) FROM sweep_runs") >= 1)
            return;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            cr_assert_fail("the sweep ended (status %#x) before saving anything; see %s", st,
                           log);
        nanosleep(&nap, NULL);
    }
    kill(-pid, SIGKILL);
    reap(pid);
    cr_assert_fail("the sweep saved nothing in the time allowed; see %s", log);
}

/* What the database must hold after sweep 1 of `total` configurations was
 * interrupted: its row says 'interrupted', every link row has its run with
 * its metrics (or an error), as many as the stderr line in log says (when
 * log is not NULL), and nothing else half-written. */
static void expect_interrupted_db(const char *db, const char *log, int sig, int total)
{
    char buf[256], err[8192], want[256];
    cr_expect_str_eq(sql_text(db, "SELECT status FROM sweeps WHERE id = 1", buf, sizeof buf),
                     "interrupted");
    long long saved = sql_int(db, "SELECT count(*) FROM sweep_runs WHERE sweep_id = 1");
    cr_expect_geq(saved, 1);
    cr_expect_lt(saved, total, "the sweep was not interrupted: every configuration ran");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM sweep_runs sr LEFT JOIN runs r"
                             " ON r.id = sr.run_id WHERE sr.run_id IS NOT NULL AND r.id IS NULL"),
                 0, "a link row without its run");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM runs r WHERE NOT EXISTS"
                             " (SELECT 1 FROM metrics m WHERE m.run_id = r.id)"),
                 0, "a run without metrics");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM runs"),
                 sql_int(db, "SELECT count(*) FROM sweep_runs WHERE run_id IS NOT NULL"),
                 "a run outside the sweep");
    cr_expect_str_eq(sql_text(db, "PRAGMA integrity_check", buf, sizeof buf), "ok");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    if (!log)
        return;
    snprintf(want, sizeof want,
             "tailsim sweep: interrupted by %s: %lld of %d configurations saved; sweep 1 marked "
             "interrupted\n", ts_signal_name(sig), saved, total);
    cr_expect(strstr(slurp(log, err, sizeof err), want), "stderr lacks \"%s\": %s", want, err);
}

/* The database still works: the report's reader loads the latest run (and
 * `tailsim report` draws it when gnuplot is there), and a new sweep on it
 * completes as sweep 2. */
static void expect_db_usable(const char *db)
{
    store *s = NULL;
    run_record *r = NULL;
    ts_err e = {{0}};
    cr_assert_eq(store_open_read(db, &s, &e), 0, "%s", e.msg);
    cr_expect_eq(store_load_run(s, 0, &r, &e), 0, "%s", e.msg);
    run_record_free(r);
    store_close(s);
    char cmd[2048], out[600], grid[600], log[600], buf[64];
    if (have_gnuplot()) {
        snprintf(cmd, sizeof cmd, "build/tailsim report --db %s -o %s >/dev/null 2>&1", db,
                 in(out, sizeof out, "report"));
        cr_expect_eq(system(cmd), 0, "tailsim report failed on the interrupted sweep's database");
    }
    write_aside(in(grid, sizeof grid, "small.ini"),
                "[sweep]\nscenario = qwen7b-64gpu\npolicy = tlt\n[trace]\nprompts = 4\n"
                "seed = 1,2\n");
    snprintf(cmd, sizeof cmd, "build/tailsim sweep %s -j 2 --db %s >/dev/null 2>%s", grid, db,
             in(log, sizeof log, "small.log"));
    cr_expect_eq(system(cmd), 0, "a new sweep on the database failed; see %s", log);
    cr_expect_str_eq(sql_text(db, "SELECT status FROM sweeps WHERE id = 2", buf, sizeof buf),
                     "done");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM sweep_runs WHERE sweep_id = 2"), 2);
    cr_expect_str_eq(sql_text(db, "SELECT status FROM sweeps WHERE id = 1", buf, sizeof buf),
                     "interrupted");
}

typedef struct interrupt_case {
    int sig;   /* what is sent */
    int jobs;  /* -j */
    int group; /* 1: to the whole process group (a terminal's Ctrl-C) */
} interrupt_case;

static interrupt_case interrupt_cases[] = {
    {SIGINT, 2, 0}, {SIGTERM, 2, 0}, {SIGINT, 1, 0}, {SIGTERM, 1, 0},
    {SIGHUP, 3, 0}, {SIGINT, 2, 1},
};

ParameterizedTestParameters(safety_sweep, interrupted_sweep)
{
    return cr_make_param_array(interrupt_case, interrupt_cases,
                               sizeof interrupt_cases / sizeof interrupt_cases[0]);
}

/* The sweep, signalled once it has saved a configuration, dies of the
 * signal with its workers gone, its row 'interrupted' over intact runs, and
 * the database fit for a report and a new sweep. */
ParameterizedTest(interrupt_case *c, safety_sweep, interrupted_sweep, .timeout = 600)
{
    char grid[600], db[600], log[600];
    write_big_grid(in(grid, sizeof grid, "big.ini"), BIG_CONFIGS);
    in(db, sizeof db, "sweep.db");
    in(log, sizeof log, "sweep.log");
    pid_t pid = start_sweep(grid, c->jobs, db, log);
    wait_for_a_saved_config(pid, db, log);
    cr_assert_eq(kill(c->group ? -pid : pid, c->sig), 0);
    int st = reap(pid);
    /* the workers were reaped before the parent died: none of the group is
     * left (kill(-pgid, 0) finds no process) */
    int left = kill(-pid, 0) == 0;
    if (left)
        kill(-pid, SIGKILL);
    expect_killed_by(st, c->sig);
    cr_expect(!left, "a process of the sweep's group outlived it");
    expect_interrupted_db(db, log, c->sig, BIG_CONFIGS);
    expect_db_usable(db);
}

/* The progress line written into a closed pipe (`2>&1 | head -1`) is a
 * SIGPIPE: the sweep ends as if interrupted by it, never left 'running'.
 * 400 configurations: the first line comes at 10%, the next (into the closed
 * pipe) at 20%. */
Test(safety_sweep, progress_into_closed_pipe, .timeout = 600)
{
    char grid[600], db[600], line[256];
    write_big_grid(in(grid, sizeof grid, "pipe.ini"), 400);
    in(db, sizeof db, "pipe.db");
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        default_signals();
        close(fd[0]);
        int out = open("/dev/null", O_WRONLY);
        if (out < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(fd[1], STDERR_FILENO) < 0)
            _exit(126);
        execl("build/tailsim", "tailsim", "sweep", grid, "-j", "2", "--db", db, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    close(fd[1]);
    FILE *r = fdopen(fd[0], "r");
    cr_assert_not_null(r);
    int got = fgets(line, sizeof line, r) != NULL;
    fclose(r); /* what `head -1` does */
    int st = reap(pid);
    int left = kill(-pid, 0) == 0;
    if (left)
        kill(-pid, SIGKILL);
    cr_assert(got, "the sweep printed no progress line");
    cr_expect(strstr(line, "sweep: 40/400 configs (10%)"), "%s", line);
    expect_killed_by(st, SIGPIPE);
    cr_expect(!left, "a process of the sweep's group outlived it");
    expect_interrupted_db(db, NULL, SIGPIPE, 400);
}

/* `tailsim plan` runs the same runner without a database: interrupted, it
 * stops its workers, says how far it got and dies of the signal. */
Test(safety_sweep, interrupted_plan, .timeout = 600)
{
    char log[600], err[8192];
    in(log, sizeof log, "plan.log");
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        default_signals();
        int out = open("/dev/null", O_WRONLY), e = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || e < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(e, STDERR_FILENO) < 0)
            _exit(126);
        /* 2 policies x 4 GPU counts x 3 TP x 40 seeds, reported every 10% */
        char vary[4096];
        int o = snprintf(vary, sizeof vary, "trace.seed=");
        for (int i = 1; i <= 40; i++)
            o += snprintf(vary + o, sizeof vary - (size_t)o, "%d%s", i, i < 40 ? "," : "");
        execl("build/tailsim", "tailsim", "plan", "qwen7b-64gpu", "--gpus", "8,16,32,64", "--tp",
              "1,2,4", "--policies", "verl,tlt", "--vary", vary, "-j", "2", (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    /* wait for the first progress line (10% done; 90% to go) */
    struct timespec nap = {0, 10 * 1000 * 1000};
    int started = 0;
    for (int i = 0; i < 30000 && !started; i++) {
        started = strstr(slurp(log, err, sizeof err), "plan: ") != NULL;
        if (!started)
            nanosleep(&nap, NULL);
    }
    if (!started) {
        kill(-pid, SIGKILL);
        reap(pid);
        cr_assert_fail("the plan made no progress: %s", err);
    }
    cr_assert_eq(kill(pid, SIGINT), 0);
    int st = reap(pid);
    int left = kill(-pid, 0) == 0;
    if (left)
        kill(-pid, SIGKILL);
    expect_killed_by(st, SIGINT);
    cr_expect(!left, "a process of the plan's group outlived it");
    cr_expect(strstr(slurp(log, err, sizeof err), "tailsim plan: interrupted by SIGINT: ") &&
                  strstr(err, " of 960 configurations run; nothing written\n"),
              "%s", err);
}
