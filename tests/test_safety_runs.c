/*
 * Stored runs that can be told apart (issue 17, item 7).  Every run saved
 * with --db (or reported with -o) keeps what it ran on: the effective
 * scenario as INI text (scenario_to_ini(): every key after the file and the
 * overrides), the --set overrides as given, the steps, the trace's path and
 * the hash of its numbers (schema version 6).  Checked here: the INI loads
 * back to the same scenario for every shipped scenario (with overrides);
 * values INI cannot hold are refused naming the key; a run saved with --set
 * and --trace shows them in the database and in report.md / index.html; the
 * stored INI reruns to byte-identical --json --no-wall output (but the
 * scenario name); a version-5 database migrates with its runs' new fields
 * unknown; crafted values read back are checked (size, type, JSON, hash)
 * and a report of hostile but accepted text stays escaped; `report --run
 * A,B` names the keys that differ.  Each test has a fresh temporary
 * directory.
 */
#include <criterion/criterion.h>
#include <glob.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "results/store.h"
#include "sim/run.h"
#include "sim/scenario.h"
#include "tests/helpers.h"

static char tmpdir[256];

static void setup(void)
{
    tmpdir_create(tmpdir, sizeof tmpdir, "safety-runs");
}

static void teardown(void)
{
    tmpdir_remove(tmpdir);
}

TestSuite(safety_runs, .init = setup, .fini = teardown, .timeout = 240);

/* Runs cmd through sh, stderr into *err (free it; NULL: dropped).
 * Returns the exit status. */
static int run_status(const char *cmd, char **err)
{
    char full[4096], ep[600];
    snprintf(ep, sizeof ep, "%s/stderr.txt", tmpdir);
    snprintf(full, sizeof full, "%s >/dev/null 2>'%s'", cmd, ep);
    int st = system(full);
    if (err)
        *err = slurp_file(ep);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs sql on the database at path; the test fails on an error. */
static void sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, "%s: %s", sql,
                 sqlite3_errmsg(db));
    sqlite3_close(db);
}

/* The text of a one-value query (free it; NULL for SQL NULL). */
static char *sql_text(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
    const unsigned char *t = sqlite3_column_text(st, 0);
    char *out = t ? strdup((const char *)t) : NULL;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

/* Writes s's INI into tmpdir/NAME.ini (path into buf) and loads it back
 * into *back; the test fails on any error. */
static void reload(const scenario *s, const char *name, char *buf, size_t n, scenario *back)
{
    ts_err e = {{0}};
    char *ini = scenario_to_ini(s, &e);
    cr_assert_not_null(ini, "%s", e.msg);
    snprintf(buf, n, "%s/%s.ini", tmpdir, name);
    write_aside(buf, ini);
    cr_assert_eq(scenario_load(buf, back, &e), 0, "%s: %s\n%s", name, e.msg, ini);
    free(ini);
}

/* Every field of a and b but name, path and dir, key by key: the INI of
 * both (numbers formatted so that they read back exactly, so equal text is
 * equal values) and a direct look at fields of each type. */
static void assert_same_scenario(const scenario *a, const scenario *b, const char *what)
{
    ts_err e = {{0}};
    char *ia = scenario_to_ini(a, &e), *ib = scenario_to_ini(b, &e);
    cr_assert(ia && ib, "%s", e.msg);
    cr_assert_str_eq(ia, ib, "%s: the INI differs after a reload", what);
    free(ia);
    free(ib);
    cr_assert_eq(a->gpus, b->gpus, "%s", what);
    cr_assert_eq(a->tp, b->tp, "%s", what);
    cr_assert_eq(a->mem_util, b->mem_util, "%s", what);
    cr_assert_eq(a->seed, b->seed, "%s", what);
    cr_assert_eq(a->sp.quality, b->sp.quality, "%s", what);
    cr_assert_eq(a->dp.tau, b->dp.tau, "%s", what);
    cr_assert_eq(a->dcp.seed, b->dcp.seed, "%s", what);
    cr_assert_str_eq(a->model, b->model, "%s", what);
    cr_assert_str_eq(a->spec_mode, b->spec_mode, "%s", what);
    cr_assert_str_eq(a->dcp.sp_sizes, b->dcp.sp_sizes, "%s", what);
    /* every key in the table appears once in the text */
    char *ini = scenario_to_ini(a, &e);
    size_t lines = 0;
    for (const char *p = ini; *p; p++)
        lines += *p == '=';
    free(ini);
    cr_assert_eq(lines, scenario_key_count(), "%s: %zu keys written, %zu in the table", what,
                 lines, scenario_key_count());
}

/* Every shipped scenario, as loaded and with overrides of every type, loads
 * back from its INI to the same scenario. */
Test(safety_runs, ini_reloads_every_field)
{
    glob_t g;
    cr_assert_eq(glob("scenarios/*.ini", 0, NULL, &g), 0);
    cr_assert_gt(g.gl_pathc, 3);
    static const char *const sets[] = {"rollout.tp=1", "rollout.mem_util=0.8123456789012",
                                       "trace.seed=9223372036854775807", "spec.mode=adaptive",
                                       "rollout.overlap=false", "spec.tau=1e-3",
                                       "dcp.sp_sizes=1,2", "trace.dist=lognormal:1500:1.0"};
    for (size_t i = 0; i < g.gl_pathc; i++) {
        scenario s, back;
        ts_err e = {{0}};
        char path[600];
        cr_assert_eq(scenario_load(g.gl_pathv[i], &s, &e), 0, "%s", e.msg);
        reload(&s, "plain", path, sizeof path, &back);
        assert_same_scenario(&s, &back, g.gl_pathv[i]);
        for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++)
            cr_assert_eq(scenario_set(&s, sets[k], &e), 0, "%s", e.msg);
        reload(&s, "set", path, sizeof path, &back);
        assert_same_scenario(&s, &back, g.gl_pathv[i]);
        cr_assert_eq(back.seed, 9223372036854775807ULL);
        cr_assert_eq(back.mem_util, 0.8123456789012);
    }
    globfree(&g);
}

/* A relative trace.file is written resolved, so that the INI loads the same
 * trace from another directory; shared: and absolute paths stay as given. */
Test(safety_runs, ini_resolves_relative_files)
{
    char path[600], back_path[600];
    scenario s, back;
    ts_err e = {{0}};
    snprintf(path, sizeof path, "%s/rel.ini", tmpdir);
    write_aside(path, "[cluster]\ngpus = 8\n[model]\nname = qwen2.5-7b\n[trace]\n"
                      "file = data/t.csv\nreward_file = shared:x/r.jsonl\n[dcp]\nfile = /abs/b.csv\n");
    cr_assert_eq(scenario_load(path, &s, &e), 0, "%s", e.msg);
    reload(&s, "sub-rel", back_path, sizeof back_path, &back);
    char want[600], got[1024], had[1024];
    snprintf(want, sizeof want, "%s/data/t.csv", tmpdir);
    scenario_trace_path(&back, got, sizeof got);
    scenario_trace_path(&s, had, sizeof had);
    cr_assert_str_eq(back.trace_file, want);
    cr_assert_str_eq(got, had);
    cr_assert_str_eq(back.trace_reward_file, "shared:x/r.jsonl");
    cr_assert_str_eq(back.dcp.file, "/abs/b.csv");
}

/* A value the INI reader could not read back is refused, naming the key:
 * an inline ';' comment, a leading blank, a control character. */
Test(safety_runs, ini_refuses_unwritable_values)
{
    static const char *const bad[] = {"trace.dist=mixture ;x", "trace.dist= lead",
                                      "trace.file=a\nb", "dcp.strategies=;bucket"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        scenario s;
        scenario_defaults(&s);
        ts_err e = {{0}};
        /* set directly: --set would give these as they are */
        char sec[64], key[64];
        const char *val;
        cr_assert_eq(scenario_parse_set(bad[i], sec, sizeof sec, key, sizeof key, 1, &val, &e), 0);
        cr_assert_eq(scenario_set_key(&s, sec, key, val, &e), 0, "%s", e.msg);
        char *ini = scenario_to_ini(&s, &e);
        cr_assert_null(ini, "%s was written", bad[i]);
        char want[140];
        snprintf(want, sizeof want, "key '%s.%s'", sec, key);
        cr_assert(strstr(e.msg, want), "%s: %s", bad[i], e.msg);
    }
}

/* A small two-step CSV trace in tmpdir/t.csv (path into buf). */
static void small_trace(char *buf, size_t n)
{
    snprintf(buf, n, "%s/t.csv", tmpdir);
    FILE *f = fopen(buf, "w");
    cr_assert_not_null(f);
    fprintf(f, "step,prompt_id,prompt_tokens,response_tokens\n");
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 4; j++)
                fprintf(f, "%d,%d,%d,%d\n", s, i, 100 + i, 200 + (i * 53 + j * 97 + s * 11) % 900);
    cr_assert_eq(fclose(f), 0);
}

/* The scenario of the CLI tests: 8 H100s, TP 2 (tmpdir/NAME.ini). */
static void scenario_file(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s.ini", tmpdir, name);
    write_aside(buf, "[cluster]\ngpus = 8\nhw = h100\n[model]\nname = qwen2.5-7b\n[rollout]\n"
                     "tp = 2\nmem_util = 0.85\n[train]\nmicro_batch_tokens = 32768\n");
}

/* A run saved with --set and --trace keeps them: the database has the
 * overrides as a JSON array, the steps, the trace path and hash and the
 * effective INI (with the override applied); report.md and index.html show
 * them in a "Scenario" section. */
Test(safety_runs, saved_run_shows_its_source)
{
    char scn[600], tr[600], db[600], out[600], cmd[4096];
    scenario_file(scn, sizeof scn, "small");
    small_trace(tr, sizeof tr);
    snprintf(db, sizeof db, "%s/r.db", tmpdir);
    snprintf(out, sizeof out, "%s/rep", tmpdir);
    snprintf(cmd, sizeof cmd, "build/tailsim rlstep '%s' --trace '%s' --steps 2 --set "
             "rollout.max_running=64 --set train.update_epochs=2 --db '%s'", scn, tr, db);
    char *err = NULL;
    cr_assert_eq(run_status(cmd, &err), 0, "%s", err);
    free(err);
    char *ov = sql_text(db, "SELECT overrides FROM runs"), *path = sql_text(db,
        "SELECT trace_path FROM runs"), *hash = sql_text(db, "SELECT trace_hash FROM runs"),
         *steps = sql_text(db, "SELECT steps FROM runs"), *ini = sql_text(db,
        "SELECT scenario_ini FROM runs");
    cr_assert_str_eq(ov, "[\"rollout.max_running=64\",\"train.update_epochs=2\"]");
    cr_assert_str_eq(path, tr);
    cr_assert_str_eq(steps, "2");
    cr_assert_eq(strlen(hash), 24, "%s", hash);
    cr_assert(!strncmp(hash, "fnv1a64:", 8), "%s", hash);
    cr_assert(strstr(ini, "\nmax_running = 64\n"), "%s", ini);
    cr_assert(strstr(ini, "\nupdate_epochs = 2\n"), "%s", ini);
    if (have_gnuplot()) {
        snprintf(cmd, sizeof cmd, "build/tailsim report --db '%s' -o '%s'", db, out);
        cr_assert_eq(run_status(cmd, &err), 0, "%s", err);
        free(err);
        char p[700];
        snprintf(p, sizeof p, "%s/report.md", out);
        char *md = slurp_file(p);
        cr_assert(strstr(md, "## Scenario\n"), "%s", md);
        cr_assert(strstr(md, "# overrides (--set): [\"rollout.max_running=64\",\"train.update_"
                             "epochs=2\"]\n"), "%s", md);
        cr_assert(strstr(md, "# steps: 2\n"), "%s", md);
        cr_assert(strstr(md, tr), "%s", md);
        cr_assert(strstr(md, hash), "%s", md);
        cr_assert(strstr(md, "\nmax_running = 64\n"), "%s", md);
        free(md);
        snprintf(p, sizeof p, "%s/index.html", out);
        char *html = slurp_file(p);
        cr_assert(strstr(html, "<h2>Scenario"), "no Scenario section in index.html");
        cr_assert(strstr(html, hash));
        free(html);
    }
    /* the same trace file hashes the same; a changed length changes the hash */
    snprintf(cmd, sizeof cmd, "build/tailsim rollout '%s' --trace '%s' --steps 2 --db '%s'", scn,
             tr, db);
    cr_assert_eq(run_status(cmd, NULL), 0);
    char *h2 = sql_text(db, "SELECT trace_hash FROM runs WHERE id = 2");
    cr_assert_str_eq(h2, hash);
    free(h2);
    sql_exec(db, "SELECT 1"); /* the database is still ours and fine */
    char *text = slurp_file(tr);
    char *at = strstr(text, "\n0,3,103,");
    cr_assert_not_null(at);
    at[9] = at[9] == '9' ? '8' : '9'; /* one response length changes */
    write_aside(tr, text);
    free(text);
    cr_assert_eq(run_status(cmd, NULL), 0);
    h2 = sql_text(db, "SELECT trace_hash FROM runs WHERE id = 3");
    cr_assert_str_neq(h2, hash);
    free(h2);
    free(ov);
    free(path);
    free(hash);
    free(steps);
    free(ini);
}

/* The stored INI, written to a file, reruns to the same --json --no-wall
 * output but for the scenario name (a generated trace, several steps, an
 * override). */
Test(safety_runs, stored_ini_reruns_identically)
{
    char scn[600], db[600], ini_path[600], cmd[4096];
    scenario_file(scn, sizeof scn, "orig");
    snprintf(db, sizeof db, "%s/r.db", tmpdir);
    snprintf(ini_path, sizeof ini_path, "%s/orig.ini", tmpdir);
    static const char *const cmds[] = {"rlstep", "rollout"};
    for (int c = 0; c < 2; c++) {
        snprintf(cmd, sizeof cmd, "build/tailsim %s '%s' --steps 2 --set trace.prompts=24 "
                 "--set trace.dist=lognormal:900:0.8 --json --no-wall --db '%s' 2>/dev/null",
                 cmds[c], scn, db);
        char *a = run_capture(cmd);
        char q[64];
        snprintf(q, sizeof q, "SELECT scenario_ini FROM runs WHERE id = %d", c + 1);
        char *ini = sql_text(db, q);
        snprintf(ini_path, sizeof ini_path, "%s/rerun.ini", tmpdir);
        write_aside(ini_path, ini);
        snprintf(cmd, sizeof cmd, "build/tailsim %s '%s' --steps 2 --json --no-wall 2>/dev/null",
                 cmds[c], ini_path);
        char *b = run_capture(cmd);
        char *na = strstr(a, "\"scenario\": \"orig\""), *nb = strstr(b, "\"scenario\": \"rerun\"");
        cr_assert(na && nb, "%s\n%s", a, b);
        memmove(na + 13, na + 17, strlen(na + 17) + 1);   /* "orig" -> "" */
        memmove(nb + 13, nb + 18, strlen(nb + 18) + 1);   /* "rerun" -> "" */
        cr_assert_str_eq(a, b, "%s: the rerun differs", cmds[c]);
        free(a);
        free(b);
        free(ini);
    }
}

/* A version-5 database (runs without the new columns) migrates to 6: its
 * runs load with nothing recorded (NULL INI and overrides, 0 steps, "" path
 * and hash), and a new run keeps all of it. */
Test(safety_runs, migrates_version_5_to_6)
{
    char db[600];
    snprintf(db, sizeof db, "%s/v5.db", tmpdir);
    store *s = NULL;
    ts_err e = {{0}};
    run_record *r = run_record_new();
    run_set_identity(r, "rlstep", "old", "", 1, 8, 4, 2);
    cr_assert_eq(run_add_metric(r, "step_s", 3.5), 0);
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
    store_close(s);
    sql_exec(db, "ALTER TABLE runs DROP COLUMN scenario_ini; ALTER TABLE runs DROP COLUMN "
                 "overrides; ALTER TABLE runs DROP COLUMN steps; ALTER TABLE runs DROP COLUMN "
                 "trace_path; ALTER TABLE runs DROP COLUMN trace_hash; PRAGMA user_version = 5");
    /* a reader reads version 5 as it is */
    run_record *back = NULL;
    cr_assert_eq(store_open_read(db, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(store_load_run(s, r->id, &back, &e), 0, "%s", e.msg);
    cr_assert_null(back->scenario_ini);
    store_close(s);
    run_record_free(back);
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    char *v = sql_text(db, "PRAGMA user_version");
    char want[16];
    snprintf(want, sizeof want, "%d", STORE_SCHEMA_VERSION);
    cr_assert_str_eq(v, want);
    free(v);
    cr_assert_eq(store_load_run(s, r->id, &back, &e), 0, "%s", e.msg);
    cr_assert_null(back->scenario_ini);
    cr_assert_null(back->overrides);
    cr_assert_eq(back->steps, 0);
    cr_assert_str_eq(back->trace_path, "");
    cr_assert_str_eq(back->trace_hash, "");
    run_record_free(back);
    cr_assert_eq(run_set_source(r, "[cluster]\ngpus = 8\n", "[\"a.b=1\"]", 3, "/t.csv",
                                "fnv1a64:0123456789abcdef"), 0);
    cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
    cr_assert_eq(store_load_run(s, r->id, &back, &e), 0, "%s", e.msg);
    cr_assert_str_eq(back->scenario_ini, "[cluster]\ngpus = 8\n");
    cr_assert_str_eq(back->overrides, "[\"a.b=1\"]");
    cr_assert_eq(back->steps, 3);
    cr_assert_str_eq(back->trace_path, "/t.csv");
    cr_assert_str_eq(back->trace_hash, "fnv1a64:0123456789abcdef");
    run_record_free(back);
    store_close(s);
    run_record_free(r);
}

/* Crafted values of the new fields are refused on load, naming the field:
 * an INI over STORE_MAX_INI bytes, a blob, overrides that are no JSON array
 * of strings, steps out of range, a malformed hash, a path over its field. */
Test(safety_runs, crafted_fields_refused)
{
    static const struct {
        const char *set, *field;
    } cases[] = {
        {"scenario_ini = printf('%.*c', 2000000, 'x')", "'scenario_ini'"},
        {"scenario_ini = x'00ff'", "'scenario_ini'"},
        {"overrides = '{\"a\": 1}'", "'overrides'"},
        {"overrides = '[1, 2]'", "'overrides'"},
        {"overrides = '[\"a\"'", "'overrides'"},
        {"steps = 0", "'steps'"},
        {"steps = 'two'", "'steps'"},
        {"trace_hash = 'fnv1a64:XYZ'", "'trace_hash'"},
        {"trace_path = printf('%.*c', 5000, 'p')", "'trace_path'"},
    };
    char db[600];
    snprintf(db, sizeof db, "%s/c.db", tmpdir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        remove(db);
        store *s = NULL;
        ts_err e = {{0}};
        run_record *r = run_record_new(), *back = NULL;
        run_set_identity(r, "rlstep", "x", "", 1, 8, 4, 2);
        cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
        cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
        store_close(s);
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE runs SET %s", cases[i].set);
        sql_exec(db, sql);
        cr_assert_eq(store_open_read(db, &s, &e), 0, "%s", e.msg);
        cr_assert_eq(store_load_run(s, r->id, &back, &e), -1, "%s was accepted", cases[i].set);
        cr_assert(strstr(e.msg, cases[i].field) && strstr(e.msg, db), "%s: %s", cases[i].set,
                  e.msg);
        store_close(s);
        run_record_free(r);
    }
}

/* Hostile text that the load accepts (a fence, HTML, control characters, a
 * newline in the path) stays inside the report's fenced block and is
 * escaped in the page. */
Test(safety_runs, hostile_text_escaped_in_report)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not found");
    char db[600], out[600], cmd[1400];
    snprintf(db, sizeof db, "%s/h.db", tmpdir);
    snprintf(out, sizeof out, "%s/rep", tmpdir);
    store *s = NULL;
    ts_err e = {{0}};
    run_record *r = run_record_new();
    run_set_identity(r, "rlstep", "x", "", 1, 8, 4, 2);
    cr_assert_eq(run_add_metric(r, "step_s", 1.0), 0);
    cr_assert_eq(run_set_source(r, "```\n# Heading\n<script>alert(1)</script>\x01\n",
                                "[\"a<b>=1\"]", 1, "/x\n## injected", ""), 0);
    cr_assert_eq(store_open(db, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(store_save_run(s, r, &e), 0, "%s", e.msg);
    store_close(s);
    snprintf(cmd, sizeof cmd, "build/tailsim report --db '%s' -o '%s'", db, out);
    char *err = NULL;
    cr_assert_eq(run_status(cmd, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "%s/report.md", out);
    char *md = slurp_file(cmd);
    cr_assert(strstr(md, "````ini\n"), "the fence is not longer than the text's: %s", md);
    cr_assert_null(strstr(md, "\n## injected"), "%s", md);
    cr_assert_null(strchr(md, '\x01'));
    free(md);
    snprintf(cmd, sizeof cmd, "%s/index.html", out);
    char *html = slurp_file(cmd);
    cr_assert_null(strstr(html, "<script>alert"), "unescaped HTML in the page");
    cr_assert_null(strstr(html, "a<b>"));
    free(html);
    run_record_free(r);
}

/* `report --run A,B` names what differs between the runs (an override's
 * key with both values, the overrides, the steps) and not what is the same. */
Test(safety_runs, report_runs_names_differences)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not found");
    char scn[600], db[600], out[600], cmd[4096];
    scenario_file(scn, sizeof scn, "small");
    snprintf(db, sizeof db, "%s/d.db", tmpdir);
    snprintf(out, sizeof out, "%s/cmp", tmpdir);
    snprintf(cmd, sizeof cmd, "build/tailsim rollout '%s' --set trace.prompts=16 --db '%s'", scn,
             db);
    cr_assert_eq(run_status(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "build/tailsim rollout '%s' --set trace.prompts=16 --set "
             "rollout.max_running=32 --steps 2 --db '%s'", scn, db);
    cr_assert_eq(run_status(cmd, NULL), 0);
    snprintf(cmd, sizeof cmd, "build/tailsim report --db '%s' --run 1,2 -o '%s'", db, out);
    char *err = NULL;
    cr_assert_eq(run_status(cmd, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "%s/index.md", out);
    char *md = slurp_file(cmd);
    char *at = strstr(md, "## What differs");
    cr_assert_not_null(at, "%s", md);
    cr_assert(strstr(at, "| rollout.max_running | 256 | 32 |"), "%s", at);
    cr_assert(strstr(at, "| steps | 1 | 2 |"), "%s", at);
    cr_assert(strstr(at, "| overrides |"), "%s", at);
    char *end = strstr(at + 3, "\n## ");
    if (end)
        *end = 0;
    cr_assert_null(strstr(at, "| trace.prompts |"), "a key that is the same is listed: %s", at);
    cr_assert_null(strstr(at, "| cluster.gpus |"), "%s", at);
    free(md);
}

/* A sweep saves each configuration's effective scenario: its overrides (the
 * grid's values for it), the steps, the INI with those values applied and
 * the trace hash its worker computed, as a single run saves them. */
Test(safety_runs, sweep_saves_each_configuration)
{
    char scn[600], grid[600], db[600], text[1400];
    scenario_file(scn, sizeof scn, "small");
    snprintf(grid, sizeof grid, "%s/g.ini", tmpdir);
    snprintf(db, sizeof db, "%s/s.db", tmpdir);
    snprintf(text, sizeof text, "[sweep]\nscenario = %s\ncommand = rollout\nsteps = 2\n"
             "[rollout]\nmax_running = 32,64\n[trace]\nprompts = 16\n", scn);
    write_aside(grid, text);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "build/tailsim sweep '%s' -j 2 --db '%s'", grid, db);
    char *err = NULL;
    cr_assert_eq(run_status(cmd, &err), 0, "%s", err);
    free(err);
    static const char *const want[] = {"[\"rollout.max_running=32\",\"trace.prompts=16\"]",
                                       "[\"rollout.max_running=64\",\"trace.prompts=16\"]"};
    for (int c = 0; c < 2; c++) {
        char q[160];
        snprintf(q, sizeof q, "SELECT r.overrides FROM runs r JOIN sweep_runs s ON s.run_id = r.id"
                 " WHERE s.config = %d", c);
        char *ov = sql_text(db, q);
        cr_assert_str_eq(ov, want[c]);
        free(ov);
        snprintf(q, sizeof q, "SELECT r.scenario_ini || '|' || r.steps || '|' || r.trace_hash"
                 " FROM runs r JOIN sweep_runs s ON s.run_id = r.id WHERE s.config = %d", c);
        char *all = sql_text(db, q), line[64];
        cr_assert_not_null(all);
        snprintf(line, sizeof line, "\nmax_running = %d\n", c ? 64 : 32);
        cr_assert(strstr(all, line), "%s", all);
        cr_assert(strstr(all, "\nprompts = 16\n"), "%s", all);
        cr_assert(strstr(all, "|2|fnv1a64:"), "%s", all);
        free(all);
    }
}

/* compare -o: each policy's report shows what it ran on, its policy in the
 * INI (so that rlstep on the INI reruns that policy) and the overrides. */
Test(safety_runs, compare_reports_show_source)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not found");
    char scn[600], out[600], cmd[2000];
    scenario_file(scn, sizeof scn, "small");
    snprintf(out, sizeof out, "%s/cmp", tmpdir);
    snprintf(cmd, sizeof cmd, "build/tailsim compare '%s' --policies verl,tlt --set "
             "trace.prompts=16 -o '%s'", scn, out);
    char *err = NULL;
    cr_assert_eq(run_status(cmd, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "%s/compare-tlt/report.md", out);
    char *md = slurp_file(cmd);
    cr_assert(strstr(md, "## Scenario\n"), "%s", md);
    cr_assert(strstr(md, "# overrides (--set): [\"trace.prompts=16\"]\n"), "%s", md);
    cr_assert(strstr(md, "[policy]\nname = tlt\n"), "%s", md);
    cr_assert(strstr(md, "`tailsim rlstep FILE --steps N`"), "%s", md);
    free(md);
}
