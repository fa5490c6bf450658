/*
 * Sweeps and capacity planning: the grid's configuration order, the result
 * packing both transports use, the plan's Pareto front and cheapest pick
 * against brute force, and the CLI end to end: -j 1, -j 2 and MPI
 * (build/tailsim-mpi under mpirun, skipped when absent) store and print the
 * same results byte for byte; a sweep row equals a single rlstep run; two
 * sweeps writing one database at once both succeed; plan skips what cannot
 * run and draws its front.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reports/plan_report.h"
#include "sweep/grid.h"
#include "sweep/sweep_run.h"
#include "tests/helpers.h"

#define DIR "build/test_sweep"

static void sh(const char *cmd)
{
    cr_assert_eq(system(cmd), 0, "command failed: %s", cmd);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* Every stored metric of the latest sweep in db, one line per (config, key),
 * values to 17 digits: what must not depend on how the sweep ran. */
static char *dump_sweep(const char *db)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "%s", db);
    cr_assert_eq(sqlite3_prepare_v2(h,
                     "SELECT sr.config, sr.params, r.command, r.scenario, r.seed, r.gpus,"
                     " r.replicas, r.tp, m.key, m.value FROM sweep_runs sr"
                     " JOIN runs r ON r.id = sr.run_id JOIN metrics m ON m.run_id = r.id"
                     " WHERE sr.sweep_id = (SELECT max(id) FROM sweeps)"
                     " ORDER BY sr.config, m.ord", -1, &st, NULL), SQLITE_OK,
                 "%s", sqlite3_errmsg(h));
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    out[0] = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        char line[1024];
        int k = snprintf(line, sizeof line, "%d %s %s %s %lld %d %d %d %s %.17g\n",
                         sqlite3_column_int(st, 0), sqlite3_column_text(st, 1),
                         sqlite3_column_text(st, 2), sqlite3_column_text(st, 3),
                         (long long)sqlite3_column_int64(st, 4), sqlite3_column_int(st, 5),
                         sqlite3_column_int(st, 6), sqlite3_column_int(st, 7),
                         sqlite3_column_text(st, 8), sqlite3_column_double(st, 9));
        if (n + (size_t)k + 1 > cap)
            out = realloc(out, cap *= 2);
        memcpy(out + n, line, (size_t)k + 1);
        n += (size_t)k;
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return out;
}

/* The integer the query sql gives on db, after attaching `attach` (when not
 * NULL) as schema "one". */
static long long sql_int2(const char *db, const char *attach, const char *sql)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (attach) {
        char a[512];
        snprintf(a, sizeof a, "ATTACH '%s' AS one", attach);
        cr_assert_eq(sqlite3_exec(h, a, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(h));
    }
    cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
    cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

static long long sql_int(const char *db, const char *sql) { return sql_int2(db, NULL, sql); }

/* A small grid: 2 policies x 2 TP x 2 prompt counts, short traces. */
static const char *small_grid =
    "[sweep]\nscenario = qwen7b-64gpu\npolicy = verl,tlt\n"
    "[rollout]\ntp = 2,4\n[trace]\nprompts = 8,12\n";

Test(sweep, config_order_is_nested_loops)
{
    grid g;
    ts_err e = {{0}};
    grid_init(&g, "t", "qwen7b-64gpu");
    cr_assert_eq(grid_add_dim(&g, "rollout", "tp", "1, 2,4", 0, "--tp", &e), 0, "%s", e.msg);
    cr_assert_eq(grid_add_dim(&g, "trace", "dist", "\"lognormal:8:1\"", 0, "x", &e), 0, "%s", e.msg);
    cr_assert_eq(grid_add_dim(&g, "policy", "name", "verl,tlt", 0, "x", &e), 0, "%s", e.msg);
    cr_assert_eq(g.n_configs, 6);
    size_t c = 0;
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 2; b++, c++) {
            size_t idx[GRID_MAX_DIMS];
            grid_config(&g, c, idx);
            cr_assert(idx[0] == a && idx[1] == 0 && idx[2] == b, "config %zu", c);
        }
    char sets[GRID_MAX_DIMS][GRID_SET_MAX];
    cr_assert_eq(grid_config_sets(&g, 5, sets), 3);
    cr_assert_str_eq(sets[0], "rollout.tp=4");
    cr_assert_str_eq(sets[1], "trace.dist=lognormal:8:1");
    cr_assert_str_eq(sets[2], "policy.name=tlt");
    char *p = sweep_config_params(&g, 2);
    cr_assert_str_eq(p, "{\"rollout.tp\":\"2\",\"trace.dist\":\"lognormal:8:1\",\"policy.name\":\"verl\"}");
    free(p);
    cr_assert_eq(grid_add_dim(&g, "rollout", "tp", "8", 0, "--tp", &e), -1);
    cr_assert(strstr(e.msg, "--tp") && strstr(e.msg, "twice"), "%s", e.msg);
    grid_free(&g);
}

Test(sweep, pack_round_trip)
{
    sweep_result r, back;
    memset(&r, 0, sizeof r);
    r.config = 41;
    r.ok = 1;
    r.rec = run_record_new();
    snprintf(r.rec->command, sizeof r.rec->command, "rlstep");
    snprintf(r.rec->scenario, sizeof r.rec->scenario, "qwen7b-64gpu");
    run_set_policy(r.rec, "async+tlt");
    r.rec->seed = 0xfedcba9876543210ull;
    r.rec->gpus = 64;
    r.rec->tp = 2;
    r.rec->replicas = 32;
    for (int i = 0; i < 30; i++) {
        char k[16];
        snprintf(k, sizeof k, "m%d", i);
        cr_assert_eq(run_add_metric(r.rec, k, 1.0 / (i + 3)), 0);
    }
    unsigned char *buf = NULL;
    size_t n = 0;
    ts_err e = {{0}};
    cr_assert_eq(sweep_result_pack(&r, &buf, &n), 0);
    cr_assert_eq(sweep_result_unpack(buf, n, &back, &e), 0, "%s", e.msg);
    cr_assert_eq(back.config, 41);
    cr_assert_eq(back.rec->seed, r.rec->seed);
    cr_assert_str_eq(back.rec->scenario, "qwen7b-64gpu");
    cr_assert_str_eq(back.rec->policy, "async+tlt");
    cr_assert_eq(back.rec->n_metrics, 30);
    for (int i = 0; i < 30; i++)
        cr_assert(back.rec->metrics[i].value == r.rec->metrics[i].value);
    sweep_result bad;
    cr_assert_eq(sweep_result_unpack(buf, n - 1, &bad, &e), -1); /* truncated */
    cr_assert_null(bad.rec);
    free(buf);
    sweep_result_clear(&back);
    sweep_result_clear(&r);
}

/* The front against its definition, on seeded random points with ties. */
Test(sweep, pareto_and_cheapest_match_brute_force)
{
    uint64_t x = 12345;
    for (int trial = 0; trial < 50; trial++) {
        plan_point p[40];
        size_t n = 1 + (size_t)(trial % 40);
        for (size_t i = 0; i < n; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            memset(&p[i], 0, sizeof p[i]);
            p[i].config = i;
            p[i].gpus = 8 << (x >> 61);
            p[i].step_s = 10 + (double)((x >> 20) % 50);
            p[i].gpu_h = plan_gpu_hours(p[i].gpus, p[i].step_s);
            /* the second half of the trials leaves some points out (an
             * off-policy limit): they neither sit on the front nor dominate */
            p[i].excluded = trial >= 25 && ((x >> 33) % 3 == 0);
        }
        size_t k = plan_pareto(p, n), count = 0;
        for (size_t i = 0; i < n; i++) {
            int dom = p[i].excluded;
            for (size_t j = 0; j < n; j++)
                if (!p[j].excluded && ((p[j].step_s < p[i].step_s && p[j].gpu_h <= p[i].gpu_h) ||
                                       (p[j].step_s <= p[i].step_s && p[j].gpu_h < p[i].gpu_h)))
                    dom = 1;
            cr_assert_eq(p[i].front, !dom, "trial %d point %zu", trial, i);
            count += p[i].front;
        }
        cr_assert_eq(k, count);
        double target = 30;
        long best = plan_cheapest(p, n, target);
        for (size_t i = 0; i < n; i++)
            if (p[i].step_s <= target && !p[i].excluded)
                cr_assert(best >= 0 && p[best].gpu_h <= p[i].gpu_h);
        if (best >= 0)
            cr_assert(p[best].step_s <= target && p[best].front && !p[best].excluded,
                      "the cheapest is on the front");
    }
    cr_assert_eq(plan_gpu_hours(64, 36), 640.0);
}

Test(sweep, jobs_1_and_2_store_and_print_the_same, .timeout = 300)
{
    sh("rm -rf " DIR "/j && mkdir -p " DIR "/j");
    write_text(DIR "/j/g.ini", small_grid);
    char *a = run_capture("build/tailsim sweep " DIR "/j/g.ini -j 1 --db " DIR "/j/a.db --json 2>/dev/null");
    char *b = run_capture("build/tailsim sweep " DIR "/j/g.ini -j 2 --db " DIR "/j/b.db --json 2>/dev/null");
    cr_assert(strstr(a, "\"step_s\"") && strstr(a, "\"config\": 7"), "%s", a);
    cr_assert_str_eq(a, b, "-j 1 and -j 2 print different JSON");
    char *da = dump_sweep(DIR "/j/a.db"), *db = dump_sweep(DIR "/j/b.db");
    cr_assert_gt(strlen(da), 1000);
    cr_assert_str_eq(da, db, "-j 1 and -j 2 store different metrics");
    cr_assert_eq(sql_int(DIR "/j/b.db", "SELECT count(*) FROM sweep_runs"), 8);
    cr_assert_eq(sql_int(DIR "/j/b.db", "SELECT count(*) FROM sweeps WHERE status = 'done'"), 1);
    free(a);
    free(b);
    free(da);
    free(db);
}

/* OpenMPI keeps allocations to the end of the process: under a sanitizer
 * build the ranks run without LeakSanitizer (ASAN_OPTIONS=detect_leaks=0). */
Test(sweep, mpi_matches_local, .timeout = 300)
{
    struct stat sb;
    if (stat("build/tailsim-mpi", &sb) != 0 || system("command -v mpirun >/dev/null 2>&1") != 0)
        cr_skip_test("no build/tailsim-mpi or no mpirun (install openmpi-bin libopenmpi-dev)");
    sh("rm -rf " DIR "/m && mkdir -p " DIR "/m");
    write_text(DIR "/m/g.ini", small_grid);
    char *a = run_capture("build/tailsim sweep " DIR "/m/g.ini -j 2 --db " DIR "/m/a.db --json 2>/dev/null");
    char *m = run_capture("ASAN_OPTIONS=detect_leaks=0 mpirun -np 2 --oversubscribe --allow-run-as-root"
                          " build/tailsim-mpi sweep "
                          DIR "/m/g.ini --db " DIR "/m/m.db --json 2>/dev/null");
    cr_assert_str_eq(a, m, "MPI prints different JSON");
    char *da = dump_sweep(DIR "/m/a.db"), *dm = dump_sweep(DIR "/m/m.db");
    cr_assert_str_eq(da, dm, "MPI stores different metrics");
    cr_assert_eq(sql_int(DIR "/m/m.db", "SELECT count(*) FROM sweep_runs"), 8);
    free(a);
    free(m);
    /* plan goes through the same runner */
    a = run_capture("build/tailsim plan qwen7b-64gpu --gpus 16,24 --tp 2,16 --set trace.prompts=8"
                    " --json 2>/dev/null");
    m = run_capture("ASAN_OPTIONS=detect_leaks=0 mpirun -np 2 --oversubscribe --allow-run-as-root"
                    " build/tailsim-mpi plan"
                    " qwen7b-64gpu --gpus 16,24 --tp 2,16 --set trace.prompts=8 --json 2>/dev/null");
    cr_assert(strstr(a, "does not divide") && strstr(a, "\"pareto\": true"), "%s", a);
    cr_assert_str_eq(a, m, "plan under MPI differs");
    free(da);
    free(dm);
}

/* A configuration of a sweep is the same simulation as rlstep --set. */
Test(sweep, row_equals_a_single_run, .timeout = 300)
{
    sh("rm -rf " DIR "/one && mkdir -p " DIR "/one");
    write_text(DIR "/one/g.ini", small_grid);
    sh("build/tailsim sweep " DIR "/one/g.ini -j 2 --db " DIR "/one/s.db >/dev/null 2>&1");
    sh("build/tailsim rlstep qwen7b-64gpu --policy tlt --set rollout.tp=4 --set trace.prompts=12"
       " --no-wall --db " DIR "/one/r.db >/dev/null 2>&1");
    long long same = sql_int2(DIR "/one/s.db", DIR "/one/r.db",
                             "SELECT count(*) FROM sweep_runs sr JOIN metrics m ON m.run_id = sr.run_id"
                             " JOIN one.metrics o ON o.key = m.key AND o.value = m.value"
                             " WHERE sr.config = 7");
    long long all = sql_int(DIR "/one/r.db", "SELECT count(*) FROM metrics");
    cr_assert_gt(all, 20);
    cr_assert_eq(same, all, "%lld of %lld metrics agree", same, all);
}

Test(sweep, two_sweeps_write_one_database_at_once, .timeout = 300)
{
    sh("rm -rf " DIR "/c && mkdir -p " DIR "/c");
    write_text(DIR "/c/g.ini", small_grid);
    sh("(build/tailsim sweep " DIR "/c/g.ini --db " DIR "/c/x.db >/dev/null 2>&1 & "
       " build/tailsim sweep " DIR "/c/g.ini --db " DIR "/c/x.db >/dev/null 2>&1; a=$?; wait $!;"
       " b=$?; [ $a = 0 ] && [ $b = 0 ])");
    cr_assert_eq(sql_int(DIR "/c/x.db", "SELECT count(*) FROM sweeps WHERE status = 'done'"), 2);
    cr_assert_eq(sql_int(DIR "/c/x.db", "SELECT count(*) FROM sweep_runs"), 16);
    cr_assert_eq(sql_int(DIR "/c/x.db", "SELECT count(*) FROM runs"), 16);
}

Test(sweep, plan_skips_what_cannot_run_and_draws_the_front, .timeout = 300)
{
    sh("rm -rf " DIR "/p && mkdir -p " DIR "/p");
    const char *args = "plan qwen32b-64gpu --gpus 8,12,32 --tp 1,8 --policies verl,tlt"
                       " --set trace.prompts=8 --target-step 1h --json";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "build/tailsim %s -j 1 2>/dev/null", args);
    char *a = run_capture(cmd);
    snprintf(cmd, sizeof cmd, "build/tailsim %s -j 2 -o " DIR "/p 2>/dev/null", args);
    char *b = run_capture(cmd);
    cr_assert_str_eq(a, b, "plan -j 1 and -j 2 differ");
    cr_assert(strstr(a, "\"searched\": 12"), "%s", a);
    cr_assert(strstr(a, "does not divide"), "gpus 12 at tp 8 must be skipped: %s", a);
    cr_assert(strstr(a, "the actor update of qwen2.5-32b on 8 GPUs needs"),
              "32B's update does not fit 8 GPUs: %s", a);
    size_t skipped = 0;
    for (const char *q = a; (q = strstr(q, "\"reason\"")); q++)
        skipped++;
    cr_assert_eq(skipped, 10,
                 "tp 1 (32B does not fit), tp 8 on 12 GPUs and the update on 8 must be skipped: %s",
                 a);
    cr_assert(strstr(a, "\"pareto\": true"), "%s", a);
    cr_assert(strstr(a, "\"cheapest\": {"), "%s", a);
    struct stat sb;
    cr_assert_eq(stat(DIR "/p/plan_front.png", &sb), 0);
    cr_assert_gt(sb.st_size, 1000);
    free(a);
    free(b);
}

/* --offload false,true: 32B's update on 8 GPUs is skipped with its states on
 * the GPU and runs with them in host memory, labelled "offload". */
Test(sweep, plan_searches_offload, .timeout = 120)
{
    char *a = run_capture("build/tailsim plan qwen32b-64gpu --gpus 8 --tp 8 --policies verl"
                          " --offload false,true --set trace.prompts=8 --json 2>/dev/null");
    cr_assert(strstr(a, "\"searched\": 2"), "%s", a);
    const char *inf = strstr(a, "\"infeasible\"");
    cr_assert(inf && strstr(inf, "\"train.offload\": \"false\"") && strstr(inf, "needs"),
              "the states on the GPU do not fit: %s", a);
    cr_assert(strstr(a, "\"label\": \"8x tp8 offload\""), "%s", a);
    cr_assert(!strstr(a, ".ini: train"), "the reason leaves the scenario's path out: %s", a);
    cr_assert(strstr(a, "\"cheapest\": {"), "%s", a);
    free(a);
}

/* --vary searches any key: 32B's update on 16 GPUs fits with a 16k-token
 * budget per GPU and not with the script's 34,816; labels say which. */
Test(sweep, plan_varies_any_key, .timeout = 120)
{
    char *a = run_capture("build/tailsim plan qwen32b-64gpu --gpus 16 --tp 8 --policies verl"
                          " --vary train.micro_batch_tokens=16384,34816 --set trace.prompts=8"
                          " --json 2>/dev/null");
    cr_assert(strstr(a, "\"searched\": 2"), "%s", a);
    cr_assert(strstr(a, "\"label\": \"16x tp8 micro_batch_tokens=16384\""), "%s", a);
    const char *inf = strstr(a, "\"infeasible\"");
    cr_assert(inf && strstr(inf, "\"train.micro_batch_tokens\": \"34816\"") &&
                  strstr(inf, "needs"),
              "%s", a);
    free(a);
}

/* The shipped grids load and every configuration passes the checks. */
Test(sweep, shipped_grids_validate, .timeout = 120)
{
    const char *files[] = {"scenarios/grids/qwen7b-policy-tp.ini", "bench/grid-1000.ini"};
    const size_t want[] = {8, 1000};
    for (size_t f = 0; f < 2; f++) {
        grid g;
        ts_err e = {{0}};
        cr_assert_eq(grid_load(files[f], &g, &e), 0, "%s", e.msg);
        cr_assert_eq(grid_check_base(&g, &e), 0, "%s", e.msg);
        cr_assert_eq(g.n_configs, want[f], "%s", files[f]);
        for (size_t i = 0; i < g.n_configs; i++)
            cr_assert_eq(sweep_config_check(&g, i, &e), 0, "%s", e.msg);
        grid_free(&g);
    }
}

/* A long list continues on indented lines; the count and the checks follow. */
Test(sweep, list_continues_on_indented_lines)
{
    sh("mkdir -p " DIR);
    write_text(DIR "/cont.ini", "[sweep]\nscenario = qwen7b-64gpu\npolicy = verl\n  tlt\n"
                                "[trace]\nseed = 1,2,3\n    4,5\n  6\nprompts = 4,8\n");
    grid g;
    ts_err e = {{0}};
    cr_assert_eq(grid_load(DIR "/cont.ini", &g, &e), 0, "%s", e.msg);
    cr_assert_eq(g.n_dims, 3);
    cr_assert_eq(g.dim[0].n, 2);
    cr_assert_eq(g.dim[1].n, 6);
    cr_assert_str_eq(g.dim[1].vals[5], "6");
    cr_assert_eq(g.n_configs, 24);
    grid_free(&g);
    write_text(DIR "/cont_bad.ini", "[sweep]\nscenario = qwen7b-64gpu\n[trace]\nseed = 1,2\n  2\n");
    cr_assert_eq(grid_load(DIR "/cont_bad.ini", &g, &e), -1);
    cr_assert(strstr(e.msg, "cont_bad.ini:5") && strstr(e.msg, "listed twice"), "%s", e.msg);
}

/* --train goes through the scenario key train.strategy: each strategy is a
 * configuration, and an unknown one is refused before anything runs. */
Test(sweep, plan_searches_training_strategies, .timeout = 300)
{
    char *a = run_capture("build/tailsim plan qwen7b-64gpu --gpus 32 --tp 2 --policies verl"
                          " --train bucket,dcp-inter --set trace.prompts=8 --json 2>/dev/null");
    cr_assert(strstr(a, "\"searched\": 2"), "%s", a);
    cr_assert(strstr(a, "\"train.strategy\": \"bucket\"") &&
              strstr(a, "\"train.strategy\": \"dcp-inter\""), "%s", a);
    free(a);
    cr_assert_neq(system("build/tailsim plan qwen7b-64gpu --gpus 32 --train bucket,nope"
                         " >/dev/null 2>&1"), 0);
}

/* plan shows what each configuration's speed costs in off-policy training,
 * and --max-off-policy keeps those above the limit off the front and the
 * pick (listed, marked x). */
Test(sweep, plan_shows_and_limits_the_off_policy_cost, .timeout = 300)
{
    const char *base = "build/tailsim plan qwen7b-64gpu --gpus 16 --tp 4 --policies verl,tlt,partial"
                       " --set trace.prompts=8 --steps 2";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --json 2>/dev/null", base);
    char *js = run_capture(cmd);
    json_error_t je;
    json_t *o = json_loads(js, 0, &je);
    cr_assert_not_null(o, "%s: %s", je.text, js);
    cr_assert_eq(json_real_value(json_object_get(o, "max_off_policy")), 1.0);
    json_t *all = json_object_get(o, "feasible");
    cr_assert_eq(json_array_size(all), 3);
    double partial_offtok = -1;
    for (size_t i = 0; i < 3; i++) {
        json_t *p = json_array_get(all, i);
        const char *lb = json_string_value(json_object_get(p, "label"));
        double off = json_real_value(json_object_get(p, "off_policy_tokens"));
        cr_assert(json_is_real(json_object_get(p, "mean_staleness")), "%s", lb);
        cr_assert(json_is_false(json_object_get(p, "excluded")), "%s", lb);
        if (!strncmp(lb, "partial", 7))
            partial_offtok = off;
        else
            cr_assert_eq(off, 0.0, "%s trains on-policy", lb);
    }
    cr_assert_gt(partial_offtok, 0.0, "partial resumes responses across steps");
    json_decref(o);
    /* on-policy only: partial listed, marked, off the front and the pick */
    snprintf(cmd, sizeof cmd, "%s --max-off-policy 0 --json 2>/dev/null", base);
    char *js0 = run_capture(cmd);
    o = json_loads(js0, 0, &je);
    cr_assert_not_null(o, "%s", js0);
    all = json_object_get(o, "feasible");
    for (size_t i = 0; i < json_array_size(all); i++) {
        json_t *p = json_array_get(all, i);
        const char *lb = json_string_value(json_object_get(p, "label"));
        int part = !strncmp(lb, "partial", 7);
        cr_assert_eq(json_is_true(json_object_get(p, "excluded")), part, "%s", lb);
        if (part)
            cr_assert(json_is_false(json_object_get(p, "pareto")));
    }
    const char *pick = json_string_value(json_object_get(json_object_get(o, "cheapest"), "label"));
    cr_assert(pick && strncmp(pick, "partial", 7), "picked %s", pick ? pick : "nothing");
    json_decref(o);
    sh("rm -rf " DIR "/offpol");
    snprintf(cmd, sizeof cmd, "%s --max-off-policy 0 -o " DIR "/offpol 2>/dev/null", base);
    char *txt = run_capture(cmd);
    cr_assert(strstr(txt, "offtok") && strstr(txt, "(x: offtok above --max-off-policy 0"), "%s",
              txt);
    /* the figure's data marks the excluded configurations (drawn as x) */
    FILE *f = fopen(DIR "/offpol/plan.dat", "r");
    cr_assert_not_null(f);
    char line[256];
    int seen = 0;
    while (fgets(line, sizeof line, f) && line[0] != '\n')
        if (line[0] != '#') {
            int part = strstr(line, "\"partial ") != NULL;
            size_t l = strlen(line);
            cr_assert(l > 2 && line[l - 2] == (part ? '1' : '0'), "%s", line);
            seen++;
        }
    fclose(f);
    cr_assert_eq(seen, 3);
    free(js);
    free(js0);
    free(txt);
}

/* A sweep's table shows an RL step's speed with its off-policy cost. */
Test(sweep, sweep_table_shows_the_off_policy_cost, .timeout = 300)
{
    sh("rm -rf " DIR "/o && mkdir -p " DIR "/o");
    write_text(DIR "/o/g.ini", "[sweep]\nscenario = qwen7b-64gpu\npolicy = verl,partial\nsteps = 2\n"
                               "[rollout]\ntp = 4\n[trace]\nprompts = 8\n");
    char *a = run_capture("build/tailsim sweep " DIR "/o/g.ini --db " DIR "/o/s.db 2>/dev/null");
    cr_assert(strstr(a, " offtok  params\n"), "%s", a);
    const char *v = strstr(a, "\n     0 "), *p = strstr(a, "\n     1 ");
    cr_assert(v && p, "%s", a);
    double col[6];
    cr_assert_eq(sscanf(v, " 0 %lf %lf %lf %lf %lf %lf", &col[0], &col[1], &col[2], &col[3],
                        &col[4], &col[5]), 6);
    cr_assert_eq(col[5], 0.0, "verl trains on-policy");
    cr_assert_eq(sscanf(p, " 1 %lf %lf %lf %lf %lf %lf", &col[0], &col[1], &col[2], &col[3],
                        &col[4], &col[5]), 6);
    cr_assert_gt(col[5], 0.0, "partial trains resumed responses: %s", a);
    free(a);
}
