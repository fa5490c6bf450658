/*
 * An MPI sweep interrupted through mpirun (docs/reliability.md): SIGTERM or
 * SIGINT sent to `mpirun -np 2 build/tailsim-mpi sweep GRID --db F` (which
 * OpenMPI turns into SIGTERM for every rank) leaves the sweep's row
 * 'interrupted' over the configurations rank 0 saved, every saved run intact
 * and linked, and a database that serves a report and takes a new sweep.
 * mpirun runs in a process group of its own; the test signals it once the
 * database (read through SQLite, read-only) shows a saved configuration, and
 * waits for it and its ranks to end.  Skipped when mpirun or
 * build/tailsim-mpi is absent.  Nothing here asserts a time: waits are
 * bounded loops of short naps.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <fcntl.h>
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

#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "mpisig");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(safety_mpi, .init = setup, .fini = teardown);

static const char *in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

/* One integer from sql on db, read-only; -1 when it cannot be read (yet). */
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

static long long sql_int(const char *db, const char *sql)
{
    long long v = sql_try(db, sql);
    cr_assert_neq(v, -1, "cannot read %s: %s", db, sql);
    return v;
}

/* 1 when sweep `id` of db has status `want`. */
static int sweep_is(const char *db, int id, const char *want)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sweeps WHERE id = %d AND status = '%s'", id,
             want);
    return sql_try(db, sql) == 1;
}

/* Waits for pid for at most `naps` naps of 10 ms; 1 with *st set when it
 * ended. */
static int reap_within(pid_t pid, int naps, int *st)
{
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < naps; i++) {
        pid_t r = waitpid(pid, st, WNOHANG);
        if (r == pid)
            return 1;
        cr_assert(r == 0 || errno == EINTR, "waitpid: %s", strerror(errno));
        nanosleep(&nap, NULL);
    }
    return 0;
}

/* 4,000 small configurations: far more than run before the test signals. */
#define BIG_CONFIGS 4000

static void write_big_grid(const char *path)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs("[sweep]\nscenario = qwen7b-64gpu\npolicy = tlt\n[trace]\nprompts = 32,48\nseed = ", f);
    for (int i = 1; i <= BIG_CONFIGS / 2; i++)
        fprintf(f, "%d%s", i, i == BIG_CONFIGS / 2 ? "\n" : i % 20 == 0 ? "\n    " : ",");
    cr_assert_eq(fclose(f), 0);
}

/* Starts mpirun -np 2 build/tailsim-mpi sweep GRID --db DB in a process
 * group of its own (its pid), with SIGINT/SIGTERM at their default action,
 * stdout to /dev/null, stderr to log. */
static pid_t start_mpi_sweep(const char *grid, const char *db, const char *log)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGINT);
        sigaddset(&s, SIGTERM);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, &s, NULL);
        setenv("ASAN_OPTIONS", "detect_leaks=0", 1); /* OpenMPI keeps its allocations */
        int out = open("/dev/null", O_WRONLY), err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
            _exit(126);
        execlp("mpirun", "mpirun", "-np", "2", "--oversubscribe", "--allow-run-as-root",
               "build/tailsim-mpi", "sweep", grid, "--db", db, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

static int mpi_sigs[] = {SIGTERM, SIGINT};

ParameterizedTestParameters(safety_mpi, interrupted_mpi_sweep)
{
    return cr_make_param_array(int, mpi_sigs, sizeof mpi_sigs / sizeof mpi_sigs[0]);
}

/* mpirun, signalled once rank 0 saved a configuration, ends with its
 * ranks; the row says 'interrupted' over intact runs, and the database
 * serves a report and a new sweep. */
ParameterizedTest(int *sig, safety_mpi, interrupted_mpi_sweep, .timeout = 600)
{
    struct stat sb;
    if (stat("build/tailsim-mpi", &sb) != 0 || system("command -v mpirun >/dev/null 2>&1") != 0)
        cr_skip_test("no build/tailsim-mpi or no mpirun (install openmpi-bin libopenmpi-dev)");
    char grid[600], db[600], log[600], cmd[2048], out[600], small[600], slog[600];
    write_big_grid(in(grid, sizeof grid, "big.ini"));
    in(db, sizeof db, "sweep.db");
    in(log, sizeof log, "sweep.log");
    pid_t pid = start_mpi_sweep(grid, db, log);
    int st = 0, saved = 0;
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 30000 && !saved; i++) { /* up to 5 minutes */
        saved = sql_try(db, "SELECT count(*) FROM sweep_runs") >= 1;
        if (!saved && waitpid(pid, &st, WNOHANG) == pid)
            cr_assert_fail("mpirun ended (status %#x) before saving anything; see %s", st, log);
        if (!saved)
            nanosleep(&nap, NULL);
    }
    if (!saved) {
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
        cr_assert_fail("the MPI sweep saved nothing in the time allowed; see %s", log);
    }
    cr_assert_eq(kill(pid, *sig), 0);
    if (!reap_within(pid, 30000, &st)) {
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
        cr_assert_fail("mpirun did not end after the signal; see %s", log);
    }
    /* the ranks go with mpirun (bounded wait: the group may take a moment) */
    int left = 1;
    for (int i = 0; i < 6000 && left; i++) {
        left = kill(-pid, 0) == 0;
        if (left)
            nanosleep(&nap, NULL);
    }
    if (left)
        kill(-pid, SIGKILL);
    cr_expect(!left, "a rank outlived mpirun");
    cr_expect(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "mpirun reported success");
    cr_expect(sweep_is(db, 1, "interrupted"), "sweep 1 is not 'interrupted'; see %s", log);
    long long n = sql_int(db, "SELECT count(*) FROM sweep_runs WHERE sweep_id = 1");
    cr_expect_geq(n, 1);
    cr_expect_lt(n, BIG_CONFIGS, "the sweep was not interrupted: every configuration ran");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM sweep_runs sr LEFT JOIN runs r"
                             " ON r.id = sr.run_id WHERE sr.run_id IS NOT NULL AND r.id IS NULL"),
                 0, "a link row without its run");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM runs r WHERE NOT EXISTS"
                             " (SELECT 1 FROM metrics m WHERE m.run_id = r.id)"),
                 0, "a run without metrics");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM runs"),
                 sql_int(db, "SELECT count(*) FROM sweep_runs WHERE run_id IS NOT NULL"),
                 "a run outside the sweep");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM pragma_integrity_check WHERE"
                             " integrity_check <> 'ok'"), 0, "integrity_check fails");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
    if (have_gnuplot()) {
        snprintf(cmd, sizeof cmd, "build/tailsim report --db %s -o %s >/dev/null 2>&1", db,
                 in(out, sizeof out, "report"));
        cr_expect_eq(system(cmd), 0, "tailsim report failed on the interrupted sweep's database");
    }
    write_aside(in(small, sizeof small, "small.ini"),
                "[sweep]\nscenario = qwen7b-64gpu\npolicy = tlt\n[trace]\nprompts = 4\n"
                "seed = 1,2\n");
    snprintf(cmd, sizeof cmd, "build/tailsim sweep %s -j 2 --db %s >/dev/null 2>%s", small, db,
             in(slog, sizeof slog, "small.log"));
    cr_expect_eq(system(cmd), 0, "a new sweep on the database failed; see %s", slog);
    cr_expect(sweep_is(db, 2, "done"), "sweep 2 is not 'done'");
    cr_expect_eq(sql_int(db, "SELECT count(*) FROM sweep_runs WHERE sweep_id = 2"), 2);
}
