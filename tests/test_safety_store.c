/*
 * Safety of the results store against files it did not write and against
 * other processes (results/store.c; issue 21, items 4 and 7).  Each test
 * gets a fresh temporary directory.  Checked:
 *   - crafted schema versions (negative, newer) are refused with the file
 *     and the version named, by every command that opens the store, and
 *     nothing crashes;
 *   - crafted rows (wrong types, values outside their range or enum, t1
 *     before t0, NULL where a value is needed) are refused on load, naming
 *     the file, run, table, row and field;
 *   - another program's SQLite file, and files that are not SQLite at all,
 *     are left byte for byte as they were (no WAL switch, no table, no
 *     -wal/-shm/-journal file left);
 *   - `tailsim report` reads without changing anything: a read-only copy,
 *     an older schema, a rollback-journal file, a file a writer holds;
 *   - concurrent writers queued behind a lock held longer than SQLite's
 *     usual busy timeout all save; a run the database cannot take is kept in
 *     a database of its own beside it, named in the message; a run the
 *     schema refuses is not.
 * Tests may run as root, where permission bits stop nothing: read-only use
 * is checked by the file's bytes, modification time and the absence of
 * side files, not by chmod alone.
 */
#define _DEFAULT_SOURCE /* usleep */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "results/result.h"
#include "results/store.h"
#include "helpers.h"

static char dir[256];

static void setup(void) { tmpdir_create(dir, sizeof dir, "safety-store"); }
static void teardown(void) { tmpdir_remove(dir); }

TestSuite(safety_store, .init = setup, .fini = teardown);

/* A small scenario (8 GPUs, 8 responses): a run takes a fraction of a second. */
#define SMALL_INI                                                                          \
    "[cluster]\ngpus = 8\nhw = h100\n[model]\nname = qwen2.5-7b\n[rollout]\ntp = 2\n"      \
    "[trace]\ndist = fixed:200\nprompts = 4\ngroup = 2\ncap = 1000\nseed = 1\n"

/* dir/name into buf (1024 bytes). */
static const char *in_dir(char *buf, const char *name)
{
    snprintf(buf, 1024, "%s/%s", dir, name);
    return buf;
}

/* Runs cmd through the shell with stdout and stderr to dir/out and dir/err.
 * Returns the exit status; the test fails when the command did not exit
 * (a crash) .  The stderr text goes into err (n bytes). */
static int sh(const char *cmd, char *err, size_t n)
{
    char full[4096], p[1024];
    snprintf(full, sizeof full, "%s >%s/out 2>%s/err </dev/null", cmd, dir, dir);
    int st = system(full);
    cr_assert(WIFEXITED(st), "did not exit normally (status %d): %s", st, cmd);
    FILE *f = fopen(in_dir(p, "err"), "r");
    cr_assert_not_null(f);
    size_t k = fread(err, 1, n - 1, f);
    err[k] = 0;
    fclose(f);
    return WEXITSTATUS(st);
}

/* Executes sql on the database at path through SQLite directly. */
static void craft(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, &msg), SQLITE_OK, "%s: %s", sql, msg);
    sqlite3_close(db);
}

/* One integer from a query run directly through SQLite. */
static long long sql_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* A file's bytes and modification time, to see that nothing touched it. */
typedef struct snap {
    char *bytes;
    size_t n;
    struct timespec mtime;
} snap;

static snap snap_take(const char *path)
{
    snap s = {0};
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s missing", path);
    s.mtime = st.st_mtim;
    s.n = (size_t)st.st_size;
    s.bytes = malloc(s.n + 1);
    cr_assert_not_null(s.bytes);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    cr_assert_eq(fread(s.bytes, 1, s.n, f), s.n);
    fclose(f);
    return s;
}

/* Fails unless path has the bytes and modification time of s and no
 * -wal, -shm or -journal file lies beside it.  Frees s. */
static void snap_same(snap s, const char *path, const char *what)
{
    snap now = snap_take(path);
    cr_assert(now.n == s.n && !memcmp(now.bytes, s.bytes, s.n), "%s: %s changed", what, path);
    cr_assert(now.mtime.tv_sec == s.mtime.tv_sec && now.mtime.tv_nsec == s.mtime.tv_nsec,
              "%s: %s was written to (mtime moved)", what, path);
    static const char *const side[] = {"-wal", "-shm", "-journal"};
    for (int i = 0; i < 3; i++) {
        char p[1100];
        snprintf(p, sizeof p, "%s%s", path, side[i]);
        cr_assert_neq(access(p, F_OK), 0, "%s: %s left behind", what, p);
    }
    free(now.bytes);
    free(s.bytes);
}

/* How many files in dir have a name containing part. */
static int count_files(const char *part)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strstr(de->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* The side file a failed save names ("... kept in PATH instead ..."), into
 * buf (n bytes); the test fails when the message names none. */
static void side_file_of(const char *msg, char *buf, size_t n)
{
    const char *a = strstr(msg, "kept in "), *b = a ? strstr(a, " instead") : NULL;
    cr_assert(a && b, "the message names no side file: %s", msg);
    a += strlen("kept in ");
    snprintf(buf, n, "%.*s", (int)(b - a), a);
}

/* A run of n intervals and n responses, all valid. */
static run_record *small_run(uint64_t seed, size_t n)
{
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    run_set_identity(r, "rlstep", "safety", "test", seed, 8, 4, 2);
    run_set_policy(r, "tlt");
    cr_assert_eq(run_add_metric(r, "step_s", 12.5), 0);
    cr_assert_eq(run_add_metric(r, "rollout_s", 10.0), 0);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(run_add_interval(r, (int32_t)(i % 8), (int32_t)(i % PH_COUNT),
                                      (int32_t)(i % 3), (double)i, (double)i + 0.5), 0);
        cr_assert_eq(run_add_response(r, (int32_t)(i % 4), 100, (int32_t)(10 + i), 1.0 + i), 0);
    }
    return r;
}

/* Writes the small scenario and returns its path (static buffer). */
static const char *small_scenario(void)
{
    static char p[1024];
    in_dir(p, "s.ini");
    write_aside(p, SMALL_INI);
    return p;
}

/* Saves runs of seeds 1..n through the CLI into db. */
static void cli_runs(const char *db, int n)
{
    const char *scn = small_scenario();
    for (int i = 1; i <= n; i++) {
        char cmd[4096], err[4096];
        snprintf(cmd, sizeof cmd, "build/tailsim rollout %s --seed %d --db %s", scn, i, db);
        int rc = sh(cmd, err, sizeof err);
        cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    }
}

/* ------------------------------------------------------------------------ */
/* Item 1: crafted schema versions                                           */

/* A schema version below 0 crashed the store (migrations[v] with v < 0):
 * every command that opens the store now refuses it, naming the file and
 * the version; a version above ours is refused the same way. */
Test(safety_store, crafted_versions_refused_by_every_command, .timeout = 60)
{
    static const struct {
        const char *version;
        int tables; /* 1: a store of ours with the version overwritten */
        const char *expect;
    } cases[] = {
        {"-1", 0, "schema version -1 "},
        {"-1000000", 0, "schema version -1000000 "},
        {"-2147483648", 1, "schema version -2147483648 "},
        {"-1", 1, "schema version -1 "},
        {"99", 1, "newer"},
    };
    const char *scn = small_scenario();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char db[1024], sql[256], cmd[4096], err[4096], name[64];
        snprintf(name, sizeof name, "v%zu.db", i);
        in_dir(db, name);
        if (cases[i].tables) {
            store *s = NULL;
            ts_err e = {""};
            cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
            run_record *r = small_run(1, 4);
            cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
            run_record_free(r);
            store_close(s);
        }
        snprintf(sql, sizeof sql, "PRAGMA user_version = %s", cases[i].version);
        craft(db, sql);
        const char *cmds[] = {
            "build/tailsim rollout %s --db %s",
            "build/tailsim rlstep %s --db %s",
            "build/tailsim report --db %2$s -o %2$s.out",
            "build/tailsim report --db %2$s --run 1,2 -o %2$s.out",
        };
        for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
            snprintf(cmd, sizeof cmd, cmds[k], scn, db);
            int rc = sh(cmd, err, sizeof err);
            cr_assert_eq(rc, 1, "%s: exit %d: %s", cmd, rc, err);
            cr_assert(strstr(err, db) && strstr(err, cases[i].expect),
                      "%s: the message does not name the file and version (%s): %s", cmd,
                      cases[i].expect, err);
        }
        cr_assert_eq(sql_int(db, "PRAGMA user_version"), atoll(cases[i].version),
                     "the version was changed");
        /* the library says the same to a direct caller, in both modes */
        store *s = NULL;
        ts_err e = {""};
        cr_assert_eq(store_open(db, &s, &e), -1);
        cr_assert_null(s);
        cr_assert(strstr(e.msg, cases[i].expect), "%s", e.msg);
        e.msg[0] = 0;
        cr_assert_eq(store_open_read(db, &s, &e), -1);
        cr_assert_null(s);
        cr_assert(strstr(e.msg, cases[i].expect), "%s", e.msg);
    }
}

/* A sweep opens its store before running: a crafted version stops it there
 * with the same message. */
Test(safety_store, crafted_version_stops_a_sweep, .timeout = 60)
{
    char db[1024], grid[1024], cmd[4096], err[4096];
    in_dir(db, "sweep.db");
    craft(db, "PRAGMA user_version = -7");
    write_aside(in_dir(grid, "g.ini"), "[sweep]\nscenario = qwen7b-64gpu\n[trace]\nprompts = 4\n");
    snprintf(cmd, sizeof cmd, "build/tailsim sweep %s --db %s", grid, db);
    int rc = sh(cmd, err, sizeof err);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
    cr_assert(strstr(err, db) && strstr(err, "schema version -7 "), "%s", err);
}

/* ------------------------------------------------------------------------ */
/* Item 1: crafted rows                                                      */

/* Our schema without its constraints, at version 4, and two good runs. */
#define LOOSE_SCHEMA                                                                         \
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, created, command, scenario, seed,"            \
    " calibration, version, gpus, replicas, tp, policy);"                                   \
    "CREATE TABLE metrics(run_id, key, value, ord);"                                        \
    "CREATE TABLE timeline(run_id, gpu, phase, state, t0, t1);"                             \
    "CREATE TABLE responses(run_id, idx, replica, prompt_tokens, length, finish_s);"        \
    "CREATE TABLE steps(run_id, k, t0);"                                                    \
    "CREATE TABLE sweeps(id INTEGER PRIMARY KEY, created, grid, scenario, command,"          \
    " n_configs, status);"                                                                  \
    "CREATE TABLE sweep_runs(sweep_id, config, run_id, params, error);"                     \
    "PRAGMA user_version = 4;"                                                              \
    "INSERT INTO runs VALUES(1, '2025-01-01T00:00:00Z', 'rlstep', 's', 7, 'c', '0.1.0',"     \
    " 8, 4, 2, 'tlt');"                                                                     \
    "INSERT INTO runs VALUES(2, '2025-01-01T00:00:00Z', 'rlstep', 's', 8, 'c', '0.1.0',"     \
    " 8, 4, 2, 'verl');"                                                                    \
    "INSERT INTO metrics VALUES(1, 'step_s', 10.0, 0), (2, 'step_s', 12.0, 0);"             \
    "INSERT INTO timeline VALUES(1, 0, 1, 0, 0.0, 1.0), (1, 1, 1, 1, 0.0, 2.0),"            \
    " (2, 0, 1, 0, 0.0, 1.0);"                                                              \
    "INSERT INTO responses VALUES(1, 0, 0, 100, 50, 1.0), (1, 1, 1, 100, 70, 2.0),"         \
    " (2, 0, 0, 100, 50, 1.0);"                                                             \
    "INSERT INTO steps VALUES(1, 0, 0.0);"

typedef struct bad_row {
    const char *sql;   /* what breaks run 1 */
    const char *table; /* what the message must name */
    const char *field;
} bad_row;

static const bad_row bad_rows[] = {
    {"INSERT INTO timeline VALUES(1, 2, 99, 0, 0.0, 1.0)", "timeline row 2", "'phase'"},
    {"INSERT INTO timeline VALUES(1, 2, -1, 0, 0.0, 1.0)", "timeline row 2", "'phase'"},
    {"INSERT INTO timeline VALUES(1, 2, 1, 3, 0.0, 1.0)", "timeline row 2", "'state'"},
    {"INSERT INTO timeline VALUES(1, 2, 1, -2147483648, 0.0, 1.0)", "timeline row 2", "'state'"},
    {"INSERT INTO timeline VALUES(1, -3, 1, 0, 0.0, 1.0)", "timeline row 2", "'gpu'"},
    {"INSERT INTO timeline VALUES(1, 1099511627776, 1, 0, 0.0, 1.0)", "timeline row 2", "'gpu'"},
    {"INSERT INTO timeline VALUES(1, 2, 'rollout', 0, 0.0, 1.0)", "timeline row 2", "'phase'"},
    {"INSERT INTO timeline VALUES(1, 2, 1.5, 0, 0.0, 1.0)", "timeline row 2", "'phase'"},
    {"INSERT INTO timeline VALUES(1, 2, 1, 0, NULL, 1.0)", "timeline row 2", "'t0'"},
    {"INSERT INTO timeline VALUES(1, 2, 1, 0, 0.0, x'00ff')", "timeline row 2", "'t1'"},
    {"INSERT INTO timeline VALUES(1, 2, 1, 0, 5.0, 1.0)", "timeline row 2", "'t1'"},
    {"INSERT INTO responses VALUES(1, 2, 0, 100, -5, 1.0)", "responses row 2", "'length'"},
    {"INSERT INTO responses VALUES(1, 2, 0, 100, 8589934592, 1.0)", "responses row 2",
     "'length'"},
    {"INSERT INTO responses VALUES(1, 2, -1, 100, 5, 1.0)", "responses row 2", "'replica'"},
    {"INSERT INTO responses VALUES(1, 2, 0, 'many', 5, 1.0)", "responses row 2",
     "'prompt_tokens'"},
    {"INSERT INTO responses VALUES(1, 2, 0, 100, 5, 'soon')", "responses row 2", "'finish_s'"},
    {"INSERT INTO metrics VALUES(1, NULL, 1.0, 1)", "metrics row 1", "'key'"},
    {"INSERT INTO metrics VALUES(1, 'bubble', 'high', 1)", "metrics row 1", "'value'"},
    {"INSERT INTO steps VALUES(1, 1, NULL)", "steps row 1", "'t0'"},
    {"UPDATE runs SET gpus = -64 WHERE id = 1", "runs row 0", "'gpus'"},
    {"UPDATE runs SET tp = 'two' WHERE id = 1", "runs row 0", "'tp'"},
    {"UPDATE runs SET replicas = 4294967300 WHERE id = 1", "runs row 0", "'replicas'"},
    {"UPDATE runs SET seed = 7.5 WHERE id = 1", "runs row 0", "'seed'"},
};
#define N_BAD_ROWS (sizeof bad_rows / sizeof bad_rows[0])
static int bad_row_index[N_BAD_ROWS];

ParameterizedTestParameters(safety_store, crafted_row_refused_on_load)
{
    for (size_t i = 0; i < N_BAD_ROWS; i++)
        bad_row_index[i] = (int)i;
    return cr_make_param_array(int, bad_row_index, N_BAD_ROWS);
}

/* Every value read back that indexes, sizes or names anything is checked:
 * the load fails naming the file, run, table, row and field, for a direct
 * caller and for `tailsim report` (one run and several), while the good
 * run 2 in the same file still loads. */
ParameterizedTest(int *idx, safety_store, crafted_row_refused_on_load, .timeout = 30)
{
    const bad_row *c = &bad_rows[*idx];
    char db[1024], cmd[4096], err[4096], out[1100];
    in_dir(db, "crafted.db");
    craft(db, LOOSE_SCHEMA);
    craft(db, c->sql);
    for (int mode = 0; mode < 2; mode++) {
        store *s = NULL;
        ts_err e = {""};
        cr_assert_eq(mode ? store_open(db, &s, &e) : store_open_read(db, &s, &e), 0, "%s", e.msg);
        run_record *r = NULL;
        cr_assert_eq(store_load_run(s, 1, &r, &e), -1, "%s: run 1 loaded", c->sql);
        cr_assert_null(r);
        cr_assert(strstr(e.msg, db) && strstr(e.msg, "run 1") && strstr(e.msg, c->table) &&
                  strstr(e.msg, c->field), "%s: message '%s' lacks '%s' or '%s'", c->sql,
                  e.msg, c->table, c->field);
        cr_assert_eq(store_load_run(s, 2, &r, &e), 0, "%s", e.msg);
        cr_assert_eq(r->seed, 8);
        run_record_free(r);
        store_close(s);
    }
    snprintf(out, sizeof out, "%s.out", db);
    const char *cmds[] = {"build/tailsim report --db %s --run 1 -o %s",
                          "build/tailsim report --db %s --run 2,1 -o %s"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, cmds[k], db, out);
        int rc = sh(cmd, err, sizeof err);
        cr_assert_eq(rc, 1, "%s: exit %d: %s", cmd, rc, err);
        cr_assert(strstr(err, c->table) && strstr(err, c->field), "%s: %s", cmd, err);
        char p[1200];
        snprintf(p, sizeof p, "%s/report.md", out);
        cr_assert_neq(access(p, F_OK), 0, "%s: a report was written", cmd);
        snprintf(p, sizeof p, "%s/index.md", out);
        cr_assert_neq(access(p, F_OK), 0, "%s: a comparison was written", cmd);
    }
}

/* The loose schema with good rows only loads whole (the checks refuse
 * nothing that tailsim itself writes). */
Test(safety_store, loose_schema_good_rows_load)
{
    char db[1024];
    in_dir(db, "good.db");
    craft(db, LOOSE_SCHEMA);
    store *s = NULL;
    ts_err e = {""};
    cr_assert_eq(store_open_read(db, &s, &e), 0, "%s", e.msg);
    run_record *r = NULL;
    cr_assert_eq(store_load_run(s, 1, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r->n_tl, 2);
    cr_assert_eq(r->n_resp, 2);
    cr_assert_eq(r->n_steps, 1);
    cr_assert_str_eq(r->policy, "tlt");
    run_record_free(r);
    store_close(s);
}

/* ------------------------------------------------------------------------ */
/* Item 2: files that are not ours                                           */

/* Another program's SQLite file (user_version 0, tables of its own), in
 * rollback-journal or WAL mode: refused before anything changes it. */
Test(safety_store, foreign_sqlite_file_left_untouched, .timeout = 60)
{
    const char *scn = small_scenario();
    for (int wal = 0; wal < 2; wal++) {
        char db[1024], cmd[4096], err[4096];
        in_dir(db, wal ? "foreign-wal.db" : "foreign.db");
        craft(db, wal ? "PRAGMA journal_mode=WAL; CREATE TABLE users(name TEXT);"
                        " INSERT INTO users VALUES('ada')"
                      : "CREATE TABLE users(name TEXT); INSERT INTO users VALUES('ada')");
        snap before = snap_take(db);
        usleep(20000); /* a write now would move the modification time */
        snprintf(cmd, sizeof cmd, "build/tailsim rollout %s --db %s", scn, db);
        int rc = sh(cmd, err, sizeof err);
        cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
        cr_assert(strstr(err, db) && strstr(err, "not a tailsim store"), "%s", err);
        snap_same(before, db, "rollout");

        before = snap_take(db);
        store *s = NULL;
        ts_err e = {""};
        cr_assert_eq(store_open(db, &s, &e), -1);
        cr_assert(strstr(e.msg, "not a tailsim store"), "%s", e.msg);
        snprintf(cmd, sizeof cmd, "build/tailsim report --db %s -o %s.out", db, db);
        rc = sh(cmd, err, sizeof err);
        cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
        cr_assert(strstr(err, "not a tailsim store"), "%s", err);
        snap_same(before, db, "store_open and report");
        cr_assert_eq(sql_int(db, "SELECT count(*) FROM sqlite_master"), 1, "a table was added");
    }
}

/* Files that are not SQLite at all: "not a database", the file as it was. */
Test(safety_store, non_sqlite_file_left_untouched, .timeout = 60)
{
    const char *scn = small_scenario();
    unsigned char junk[8192];
    uint64_t x = 42;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        junk[i] = (unsigned char)(x >> 56);
    }
    const char *text = "step,prompt_id,prompt_tokens,response_tokens\n0,0,512,4096\n";
    for (int k = 0; k < 2; k++) {
        char db[1024], cmd[4096], err[4096];
        in_dir(db, k ? "junk.db" : "text.db");
        FILE *f = fopen(db, "wb");
        cr_assert_not_null(f);
        if (k)
            fwrite(junk, 1, sizeof junk, f);
        else
            fputs(text, f);
        fclose(f);
        snap before = snap_take(db);
        usleep(20000);
        snprintf(cmd, sizeof cmd, "build/tailsim rollout %s --db %s", scn, db);
        int rc = sh(cmd, err, sizeof err);
        cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
        cr_assert(strstr(err, db) && strstr(err, "not a database"), "%s", err);
        snap_same(before, db, "rollout");
        before = snap_take(db);
        snprintf(cmd, sizeof cmd, "build/tailsim report --db %s -o %s.out", db, db);
        rc = sh(cmd, err, sizeof err);
        cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
        cr_assert(strstr(err, db) && strstr(err, "not a database"), "%s", err);
        snap_same(before, db, "report");
    }
}

/* An empty file is a new store: initialised, as before. */
Test(safety_store, empty_file_becomes_a_store)
{
    char db[1024];
    in_dir(db, "empty.db");
    FILE *f = fopen(db, "wb");
    cr_assert_not_null(f);
    fclose(f);
    store *s = NULL;
    ts_err e = {""};
    cr_assert_eq(store_open_read(db, &s, &e), -1, "an empty file read as a store");
    cr_assert(strstr(e.msg, "no runs"), "%s", e.msg);
    struct stat st;
    cr_assert_eq(stat(db, &st), 0);
    cr_assert_eq(st.st_size, 0, "reading wrote to the empty file");
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    store_close(s);
    cr_assert_eq(sql_int(db, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
}

/* ------------------------------------------------------------------------ */
/* Item 3: reading changes nothing                                           */

/* Reads runs 1 and 2 of db through store_open_read() and, when gnuplot is
 * there to draw, through `tailsim report` (one run, then both side by
 * side); checks that this succeeds without changing a byte of db or
 * leaving a side file. */
static void report_changes_nothing(const char *db, const char *what)
{
    char cmd[4096], err[4096], out[1100], p[1200];
    snap before = snap_take(db);
    usleep(20000); /* a write now would move the modification time */
    store *s = NULL;
    ts_err e = {""};
    cr_assert_eq(store_open_read(db, &s, &e), 0, "%s: %s", what, e.msg);
    for (int id = 1; id <= 2; id++) {
        run_record *r = NULL;
        cr_assert_eq(store_load_run(s, id, &r, &e), 0, "%s: %s", what, e.msg);
        cr_assert_eq(r->seed, (uint64_t)id);
        cr_assert_gt(r->n_resp, 0);
        run_record_free(r);
    }
    store_close(s);
    if (have_gnuplot()) {
        snprintf(out, sizeof out, "%s.out", db);
        snprintf(cmd, sizeof cmd, "build/tailsim report --db %s -o %s", db, out);
        int rc = sh(cmd, err, sizeof err);
        cr_assert_eq(rc, 0, "%s: exit %d: %s", what, rc, err);
        snprintf(p, sizeof p, "%s/report.md", out);
        cr_assert_eq(access(p, F_OK), 0, "%s: no report", what);
        snprintf(cmd, sizeof cmd, "build/tailsim report --db %s --run 1,2 -o %s", db, out);
        rc = sh(cmd, err, sizeof err);
        cr_assert_eq(rc, 0, "%s: exit %d: %s", what, rc, err);
    }
    snap_same(before, db, what);
}

/* A read-only copy (mode 0444) in a directory of its own: the report reads
 * it.  Root ignores the mode, so the file's bytes, time and side files are
 * what is checked. */
Test(safety_store, report_reads_read_only_copy, .timeout = 60)
{
    char db[1024], ro[1024], cmd[4096];
    in_dir(db, "w.db");
    cli_runs(db, 2);
    cr_assert_eq(mkdir(in_dir(ro, "ro"), 0755), 0);
    in_dir(ro, "ro/r.db");
    snprintf(cmd, sizeof cmd, "cp %s %s && chmod 0444 %s", db, ro, ro);
    cr_assert_eq(system(cmd), 0);
    report_changes_nothing(ro, "read-only copy");
    store *s = NULL;
    ts_err e = {""};
    cr_assert_eq(store_open_read(ro, &s, &e), 0, "%s", e.msg);
    run_record *r = small_run(3, 2);
    cr_assert_eq(store_save_run(s, r, &e), -1, "a read-only store saved a run");
    cr_assert(strstr(e.msg, "read-only"), "%s", e.msg);
    cr_assert_eq(count_files(".unsaved-"), 0, "a read-only store's refusal spilled the run");
    run_record_free(r);
    store_close(s);
}

/* Older schemas (versions 1 to 3) are read as they are, not migrated; a
 * rollback-journal file is not switched to WAL. */
Test(safety_store, report_neither_migrates_nor_switches_journal, .timeout = 60)
{
    static const struct {
        const char *name, *sql;
        int version;
    } cases[] = {
        {"v3.db", "ALTER TABLE runs DROP COLUMN policy; PRAGMA user_version = 3", 3},
        {"v2.db", "DROP TABLE steps; ALTER TABLE runs DROP COLUMN policy;"
                  " PRAGMA user_version = 2", 2},
        {"v1.db", "DROP TABLE steps; ALTER TABLE runs DROP COLUMN policy; DROP TABLE sweep_runs;"
                  " DROP TABLE sweeps; PRAGMA user_version = 1", 1},
        {"delete.db", "PRAGMA journal_mode=DELETE", STORE_SCHEMA_VERSION},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char db[1024];
        in_dir(db, cases[i].name);
        cli_runs(db, 2);
        craft(db, cases[i].sql);
        report_changes_nothing(db, cases[i].name);
        cr_assert_eq(sql_int(db, "PRAGMA user_version"), cases[i].version);
    }
}

/* While a writer holds the file (a -wal file exists, the write lock is
 * taken, a run is half inserted), the report reads the committed runs. */
Test(safety_store, report_reads_while_a_writer_holds_the_lock, .timeout = 60)
{
    char db[1024], cmd[4096], err[4096], out[1100], p[1200];
    if (!have_gnuplot())
        cr_skip_test("gnuplot not found: the report cannot draw");
    in_dir(db, "busy.db");
    cli_runs(db, 2);
    sqlite3 *w = NULL;
    cr_assert_eq(sqlite3_open(db, &w), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(w, "BEGIN IMMEDIATE; INSERT INTO runs(created, command, scenario,"
                                 " seed, calibration, version, gpus, replicas, tp) VALUES("
                                 "'x', 'rollout', 'half', 99, '', '', 8, 4, 2)",
                              NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(w));
    snprintf(out, sizeof out, "%s.out", db);
    snprintf(cmd, sizeof cmd, "build/tailsim report --db %s -o %s", db, out);
    int rc = sh(cmd, err, sizeof err);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err);
    snprintf(p, sizeof p, "%s/report.md", out);
    FILE *f = fopen(p, "r");
    cr_assert_not_null(f);
    char md[8192] = {0};
    cr_assert_gt(fread(md, 1, sizeof md - 1, f), 0);
    fclose(f);
    cr_assert(strstr(md, "# tailsim run 2:"), "the latest committed run is 2: %.300s", md);
    cr_assert_null(strstr(md, "half"), "an uncommitted run was read");
    sqlite3_exec(w, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(w);
}

/* ------------------------------------------------------------------------ */
/* Item 4 (issue item 7): concurrent writers                                 */

/* Starts `sh -c cmd` in the background.  Returns its pid. */
static pid_t spawn(const char *cmd)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Runs n rollouts at once into db (seeds 1..n); hold_s > 0: while this
 * process holds the write lock for that long.  All must succeed. */
static void writers_at_once(const char *db, int n, unsigned hold_s)
{
    const char *scn = small_scenario();
    sqlite3 *w = NULL;
    if (hold_s) {
        cr_assert_eq(sqlite3_open(db, &w), SQLITE_OK);
        cr_assert_eq(sqlite3_exec(w, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    }
    pid_t pid[16];
    for (int i = 0; i < n; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "build/tailsim rollout %s --seed %d --db %s >/dev/null "
                 "2>%s.err%d", scn, i + 1, db, db, i);
        pid[i] = spawn(cmd);
    }
    if (hold_s) {
        sleep(hold_s); /* longer than SQLite's usual busy timeout */
        sqlite3_exec(w, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(w);
    }
    for (int i = 0; i < n; i++) {
        int st = 0;
        cr_assert_eq(waitpid(pid[i], &st, 0), pid[i]);
        char p[1100], msg[1024] = "";
        snprintf(p, sizeof p, "%s.err%d", db, i);
        FILE *f = fopen(p, "r");
        if (f) {
            msg[fread(msg, 1, sizeof msg - 1, f)] = 0;
            fclose(f);
        }
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed: %s", i, msg);
    }
    cr_assert_eq(sql_int(db, "SELECT count(*) FROM runs"), n);
    cr_assert_eq(sql_int(db, "SELECT count(DISTINCT seed) FROM runs"), n);
    cr_assert_eq(count_files(".unsaved-"), 0, "a run was spilled");
}

/* 8 writers queued behind a lock held for longer than SQLite's usual busy
 * timeout (10 s): every run is saved.  (They failed with "database is
 * locked" after simulating.)  Then 8 writers at once on a file that does
 * not exist yet. */
Test(safety_store, concurrent_writers_all_saved, .timeout = 180)
{
    char db[1024];
    in_dir(db, "queue.db");
    store *s = NULL;
    ts_err e = {""};
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    store_close(s);
    writers_at_once(db, 8, 13);
    in_dir(db, "fresh.db");
    writers_at_once(db, 8, 0);
}

/* A lock that does not come within the patience: the save fails with a
 * clear message, and the run is kept whole in a database of its own named
 * there; the store itself gets nothing. */
Test(safety_store, locked_store_keeps_the_run_beside_it, .timeout = 60)
{
    char db[1024], side[1024];
    in_dir(db, "locked.db");
    store *s = NULL;
    ts_err e = {""};
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    store_set_patience(s, 0.3, 5.0);
    sqlite3 *w = NULL;
    cr_assert_eq(sqlite3_open(db, &w), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(w, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    run_record *r = small_run(5, 50);
    cr_assert_eq(run_add_step(r, 0.0), 0);
    cr_assert_eq(run_add_step(r, 20.0), 0);
    cr_assert_eq(store_save_run(s, r, &e), -1, "saved through a held lock");
    cr_assert(strstr(e.msg, db) && strstr(e.msg, "locked"), "%s", e.msg);
    cr_assert_eq(r->id, 0, "the id was set on failure");
    side_file_of(e.msg, side, sizeof side);
    sqlite3_exec(w, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(w);
    store_close(s);
    cr_assert_eq(sql_int(db, "SELECT count(*) FROM runs"), 0);

    store *t = NULL;
    cr_assert_eq(store_open_read(side, &t, &e), 0, "%s", e.msg);
    run_record *back = NULL;
    cr_assert_eq(store_load_run(t, 0, &back, &e), 0, "%s", e.msg);
    cr_assert_str_eq(back->command, r->command);
    cr_assert_str_eq(back->policy, r->policy);
    cr_assert_eq(back->seed, r->seed);
    cr_assert_eq(back->n_metrics, r->n_metrics);
    cr_assert_eq(back->n_tl, r->n_tl);
    cr_assert_eq(back->n_resp, r->n_resp);
    cr_assert_eq(back->n_steps, 2);
    for (size_t i = 0; i < r->n_resp; i++)
        cr_assert_eq(back->resp[i].length, r->resp[i].length);
    run_record_free(back);
    store_close(t);
    run_record_free(r);
}

/* A store that cannot be opened after the simulation (here: newer schema):
 * the command fails naming the reason and the side file, which holds the
 * run and reads like any store; the store is unchanged. */
Test(safety_store, unopenable_store_keeps_the_run_beside_it, .timeout = 60)
{
    char db[1024], cmd[4096], err[4096], side[1024];
    in_dir(db, "newer.db");
    cli_runs(db, 1);
    craft(db, "PRAGMA user_version = 99");
    snap before = snap_take(db);
    usleep(20000);
    snprintf(cmd, sizeof cmd, "build/tailsim rollout %s --seed 9 --db %s", small_scenario(), db);
    int rc = sh(cmd, err, sizeof err);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, err);
    cr_assert(strstr(err, "newer"), "%s", err);
    side_file_of(err, side, sizeof side);
    snap_same(before, db, "rollout into a newer store");
    cr_assert_eq(sql_int(side, "SELECT count(*) FROM runs"), 1);
    cr_assert_eq(sql_int(side, "SELECT seed FROM runs"), 9);
    if (have_gnuplot()) {
        snprintf(cmd, sizeof cmd, "build/tailsim report --db %s -o %s.out", side, side);
        rc = sh(cmd, err, sizeof err);
        cr_assert_eq(rc, 0, "the side file does not report: %s", err);
    }
}

/* A run the schema refuses (a bug in the record, not the database) is not
 * kept anywhere: the store is fine, the run is not. */
Test(safety_store, refused_record_is_not_kept)
{
    char db[1024];
    in_dir(db, "refused.db");
    store *s = NULL;
    ts_err e = {""};
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    run_record *r = small_run(6, 10);
    r->tl[3].t1 = r->tl[3].t0 - 1.0;
    cr_assert_eq(store_save_run(s, r, &e), -1);
    cr_assert(strstr(e.msg, "interval_order"), "%s", e.msg);
    r->tl[3].t1 = r->tl[3].t0 + 1.0;
    r->tl[4].phase = PH_COUNT;
    cr_assert_eq(store_save_run(s, r, &e), -1);
    cr_assert(strstr(e.msg, "out of range"), "%s", e.msg);
    cr_assert_null(strstr(e.msg, "kept in"), "%s", e.msg);
    cr_assert_eq(count_files(".unsaved-"), 0);
    run_record_free(r);
    store_close(s);
}
