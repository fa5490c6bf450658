/*
 * The exports a user's own tools read (issue 17, item 8) and the report of
 * one run without a database (item 5): DIR/timeline.json (Chrome / Perfetto
 * Trace Event Format), DIR/responses.csv, DIR/phases.csv and DIR/index.html,
 * written by report_write() for `report --run`, `rollout`/`rlstep -o` and
 * `compare -o`'s per-policy folders.
 *
 * No browser can be run here (ui.perfetto.dev is not reachable offline), so
 * the trace is checked against the format instead, parsed with jansson:
 * every complete event ("ph":"X") has name, cat, ts, dur, pid and tid; every
 * GPU has its own track with a thread_name; each track's slices are in time
 * order and never overlap; each GPU's durations add up to its intervals in
 * the run record; step starts are global instant events.  The CSVs are
 * checked row by row against the record, and the timeline's phases and
 * states appear as names in every file.  The CLI tests run small rlstep and
 * compare runs (8 prompts) and skip without gnuplot.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "reports/csv_export.h"
#include "reports/perfetto.h"
#include "reports/report.h"
#include "results/result.h"
#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "export");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(export, .init = setup, .fini = teardown);

/* A synthetic run of `steps` RL steps on `gpus` GPUs (TP 2): per step, sync,
 * a rollout in which replicas finish at different times (then idle, or
 * train the drafter, then idle), then reward, old_logp, ref, update, with
 * times that are not round in binary (0.1 + k * 0.7 ...), so that rounding
 * to microseconds is exercised; 24 responses per step. */
static run_record *make_run(int gpus, int steps)
{
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    run_set_identity(r, "rlstep", "export-test", "none", 11, gpus, gpus / 2, 2);
    run_set_policy(r, "tlt");
    double t = 0;
    for (int k = 0; k < steps; k++) {
        if (steps > 1)
            cr_assert_eq(run_add_step(r, t), 0);
        double sync = 0.1 + 0.01 * k, roll_end = t + sync + 30.7;
        for (int g = 0; g < gpus; g++) {
            int rep = g / 2;
            double fin = t + sync + 10.3 + 20.4 * (double)((rep * 5) % (gpus / 2)) / (gpus / 2);
            cr_assert_eq(run_add_interval(r, g, PH_SYNC, TL_BUSY, t, t + sync), 0);
            cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_BUSY, t + sync, fin), 0);
            if (rep % 2) {
                double mid = fin + 0.37 * (roll_end - fin);
                cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_TRAIN, fin, mid), 0);
                cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_IDLE, mid, roll_end), 0);
            } else {
                cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, TL_IDLE, fin, roll_end), 0);
            }
            double u = roll_end;
            for (int p = PH_REWARD; p < PH_COUNT; p++) {
                double len = 0.3 + 0.7 * p;
                cr_assert_eq(run_add_interval(r, g, p, p == PH_REWARD ? TL_IDLE : TL_BUSY, u,
                                              u + len), 0);
                u += len;
            }
        }
        t = roll_end;
        for (int p = PH_REWARD; p < PH_COUNT; p++)
            t += 0.3 + 0.7 * p;
        for (int i = 0; i < 24; i++)
            cr_assert_eq(run_add_response(r, i % (gpus / 2), 100 + i, 50 + 37 * i, 0.25 * i + k),
                         0);
    }
    cr_assert_eq(run_add_metric(r, "step_s", t / steps), 0);
    return r;
}

static void path_in(char *buf, size_t n, const char *d, const char *name)
{
    int k = snprintf(buf, n, "%s/%s", d, name);
    cr_assert(k > 0 && (size_t)k < n, "path too long");
}

static int exists(const char *d, const char *name)
{
    char p[600];
    struct stat st;
    path_in(p, sizeof p, d, name);
    return stat(p, &st) == 0;
}

/* The whole of file d/name (free it). */
static char *slurp(const char *d, const char *name)
{
    char p[600];
    path_in(p, sizeof p, d, name);
    FILE *f = fopen(p, "rb");
    cr_assert_not_null(f, "%s missing", p);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static int is_phase_name(const char *s)
{
    for (int p = 0; p < PH_COUNT; p++)
        if (!strcmp(s, tl_phase_name[p]))
            return 1;
    return 0;
}

static int is_state_name(const char *s)
{
    for (int k = 0; k <= TL_TRAIN; k++)
        if (!strcmp(s, tl_state_name[k]))
            return 1;
    return 0;
}

#define MAXG 1024

/* What check_trace() found, for tests that compare it with other files. */
typedef struct trace_sum {
    size_t slices, instants, tracks;
    double dur_us; /* all slices' durations */
} trace_sum;

/* Parses d/timeline.json and checks its structure against the format (and,
 * given r, against the record).  Returns the totals. */
static trace_sum check_trace(const char *d, const run_record *r)
{
    char p[600];
    path_in(p, sizeof p, d, "timeline.json");
    json_error_t je;
    json_t *root = json_load_file(p, JSON_REJECT_DUPLICATES, &je);
    cr_assert_not_null(root, "%s: not JSON: line %d: %s", p, je.line, je.text);
    cr_assert(json_is_object(root));
    cr_assert_str_eq(json_string_value(json_object_get(root, "displayTimeUnit")), "ms");
    json_t *evs = json_object_get(root, "traceEvents");
    cr_assert(json_is_array(evs), "traceEvents is an array");

    static int named[MAXG];      /* tid has a thread_name "GPU tid-1" */
    static long long last_end[MAXG], last_ts[MAXG];
    static double sum_us[MAXG];
    static size_t count[MAXG];
    memset(named, 0, sizeof named);
    memset(sum_us, 0, sizeof sum_us);
    memset(count, 0, sizeof count);
    for (int i = 0; i < MAXG; i++)
        last_end[i] = last_ts[i] = -1;
    trace_sum s = {0};
    int have_process = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(evs, i, ev) {
        cr_assert(json_is_object(ev), "event %zu is an object", i);
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        const char *name = json_string_value(json_object_get(ev, "name"));
        cr_assert(ph && name, "event %zu has ph and name", i);
        json_t *pid = json_object_get(ev, "pid"), *tid = json_object_get(ev, "tid");
        cr_assert(json_is_integer(pid) && json_is_integer(tid), "event %zu has pid and tid", i);
        json_int_t t = json_integer_value(tid);
        if (!strcmp(ph, "M")) {
            json_t *args = json_object_get(ev, "args");
            cr_assert(json_is_object(args));
            if (!strcmp(name, "process_name")) {
                const char *pn = json_string_value(json_object_get(args, "name"));
                cr_assert(pn && !strchr(pn, '\n'), "process name");
                have_process = 1;
            } else if (!strcmp(name, "thread_name")) {
                cr_assert(t >= 1 && t <= MAXG, "tid %lld", (long long)t);
                char want[32];
                snprintf(want, sizeof want, "GPU %lld", (long long)t - 1);
                cr_assert_str_eq(json_string_value(json_object_get(args, "name")), want);
                cr_assert_eq(named[t - 1], 0, "GPU %lld named twice", (long long)t - 1);
                named[t - 1] = 1;
                cr_assert_eq(count[t - 1], 0, "the name comes before the track's slices");
            } else {
                cr_assert_str_eq(name, "thread_sort_index");
                cr_assert_eq(json_integer_value(json_object_get(args, "sort_index")), t - 1);
            }
        } else if (!strcmp(ph, "X")) {
            json_t *ts = json_object_get(ev, "ts"), *dur = json_object_get(ev, "dur");
            cr_assert(json_is_integer(ts) && json_is_integer(dur), "X event %zu: ts and dur", i);
            long long a = json_integer_value(ts), b = json_integer_value(dur);
            cr_assert(a >= 0 && b >= 0, "X event %zu: ts %lld dur %lld", i, a, b);
            cr_assert(t >= 1 && t <= MAXG && named[t - 1], "X event %zu on an unnamed track", i);
            const char *cat = json_string_value(json_object_get(ev, "cat"));
            json_t *args = json_object_get(ev, "args");
            cr_assert(is_phase_name(name), "X event %zu: name '%s' is a phase", i, name);
            cr_assert(cat && is_state_name(cat), "X event %zu: cat is a state", i);
            cr_assert_str_eq(json_string_value(json_object_get(args, "state")), cat);
            cr_assert_str_eq(json_string_value(json_object_get(args, "phase")), name);
            cr_assert_eq(json_integer_value(json_object_get(args, "gpu")), t - 1);
            /* in time order on its track, and never overlapping the previous */
            cr_assert_geq(a, last_ts[t - 1], "GPU %lld: slices out of order", (long long)t - 1);
            cr_assert_geq(a, last_end[t - 1], "GPU %lld: slice at %lld overlaps the previous",
                          (long long)t - 1, a);
            last_ts[t - 1] = a;
            last_end[t - 1] = a + b;
            sum_us[t - 1] += (double)b;
            count[t - 1]++;
            s.slices++;
            s.dur_us += (double)b;
        } else {
            cr_assert_str_eq(ph, "i", "event %zu: ph '%s'", i, ph);
            cr_assert_str_eq(json_string_value(json_object_get(ev, "s")), "g");
            cr_assert(json_is_integer(json_object_get(ev, "ts")));
            if (r) {
                cr_assert_lt(s.instants, r->n_steps);
                char want[32];
                snprintf(want, sizeof want, "step %zu", s.instants + 1);
                cr_assert_str_eq(name, want);
                cr_assert_eq(json_integer_value(json_object_get(ev, "ts")),
                             llround(r->step_t0[s.instants] * 1e6));
            }
            s.instants++;
        }
    }
    cr_assert(have_process, "a process_name event");
    for (int g = 0; g < MAXG; g++)
        if (named[g]) {
            s.tracks++;
            cr_assert_gt(count[g], 0, "GPU %d named but empty", g);
        }
    if (r) {
        cr_assert_eq(s.slices, r->n_tl, "one slice per interval");
        cr_assert_eq(s.instants, r->n_steps > 1 ? r->n_steps : 0);
        static double want[MAXG];
        static size_t nint[MAXG];
        memset(want, 0, sizeof want);
        memset(nint, 0, sizeof nint);
        for (size_t k = 0; k < r->n_tl; k++) {
            want[r->tl[k].gpu] += (r->tl[k].t1 - r->tl[k].t0) * 1e6;
            nint[r->tl[k].gpu]++;
        }
        size_t tracks = 0;
        for (int g = 0; g < MAXG; g++) {
            tracks += nint[g] > 0;
            cr_assert_eq(count[g], nint[g], "GPU %d: %zu slices, %zu intervals", g, count[g],
                         nint[g]);
            /* each end rounds by at most half a microsecond */
            cr_assert_leq(fabs(sum_us[g] - want[g]), (double)nint[g] + 1e-6 * want[g],
                          "GPU %d: durations %.0f us, timeline %.3f us", g, sum_us[g], want[g]);
        }
        cr_assert_eq(s.tracks, tracks, "one track per GPU");
    }
    json_decref(root);
    return s;
}

Test(export, perfetto_one_step)
{
    run_record *r = make_run(16, 1);
    char p[600];
    path_in(p, sizeof p, dir, "timeline.json");
    ts_err e = {""};
    cr_assert_eq(perfetto_write(r, p, &e), 0, "%s", e.msg);
    trace_sum s = check_trace(dir, r);
    cr_assert_eq(s.tracks, 16);
    cr_assert_eq(s.instants, 0);
    run_record_free(r);
}

Test(export, perfetto_steps_are_marked)
{
    run_record *r = make_run(8, 3);
    char p[600];
    path_in(p, sizeof p, dir, "timeline.json");
    ts_err e = {""};
    cr_assert_eq(perfetto_write(r, p, &e), 0, "%s", e.msg);
    trace_sum s = check_trace(dir, r);
    cr_assert_eq(s.instants, 3);
    run_record_free(r);
}

/* Intervals laid end to end at boundaries that fall between microseconds
 * (some of no length) stay end to end in the trace: no slice overlaps the
 * next (the viewers would nest it) and none leaves a gap. */
Test(export, perfetto_adjacent_stay_adjacent)
{
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    run_set_identity(r, "rollout", "adjacent", "", 1, 2, 2, 1);
    uint64_t x = 12345;
    for (int g = 0; g < 2; g++) {
        double t = 0;
        for (int i = 0; i < 2000; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            double len = (double)(x >> 40) / (double)(1ULL << 24) * 3e-6; /* 0-3 us */
            if (i % 100 == 7)
                len = 0; /* a replica with no work: busy from t to t */
            cr_assert_eq(run_add_interval(r, g, PH_ROLLOUT, i % 2 ? TL_IDLE : TL_BUSY, t,
                                          t + len), 0);
            t += len;
        }
    }
    char p[600];
    path_in(p, sizeof p, dir, "timeline.json");
    ts_err e = {""};
    cr_assert_eq(perfetto_write(r, p, &e), 0, "%s", e.msg);
    check_trace(dir, r);
    json_t *root = json_load_file(p, 0, NULL);
    json_t *ev;
    size_t i;
    long long end[2] = {0, 0};
    json_array_foreach(json_object_get(root, "traceEvents"), i, ev) {
        if (strcmp(json_string_value(json_object_get(ev, "ph")), "X"))
            continue;
        int g = (int)json_integer_value(json_object_get(ev, "tid")) - 1;
        long long ts = json_integer_value(json_object_get(ev, "ts"));
        cr_assert_eq(ts, end[g], "GPU %d: a slice at %lld after one ending at %lld", g, ts,
                     end[g]);
        end[g] = ts + json_integer_value(json_object_get(ev, "dur"));
    }
    json_decref(root);
    run_record_free(r);
}

/* Names from the database may hold any byte: the file stays valid JSON and
 * the names stay on their line. */
Test(export, perfetto_hostile_names)
{
    run_record *r = make_run(4, 1);
    snprintf(r->scenario, sizeof r->scenario, "a\"b\\c\nd\x01<e>\xff\xfe");
    snprintf(r->policy, sizeof r->policy, "p\xc3");
    char p[600];
    path_in(p, sizeof p, dir, "timeline.json");
    ts_err e = {""};
    cr_assert_eq(perfetto_write(r, p, &e), 0, "%s", e.msg);
    check_trace(dir, r);
    json_t *root = json_load_file(p, 0, NULL);
    const char *sc = json_string_value(json_object_get(json_object_get(root, "otherData"),
                                                       "scenario"));
    cr_assert_str_eq(sc, "a\"b\\c d <e>??");
    json_decref(root);
    run_record_free(r);
}

/* A record the exports cannot name (a phase out of range) is refused before
 * any file is written; a reversed interval likewise for the trace alone,
 * and steps out of order for phases.csv. */
Test(export, bad_interval_writes_nothing)
{
    run_record *r = make_run(4, 1);
    r->tl[3].phase = 9;
    char out[400], p[600];
    snprintf(out, sizeof out, "%s/rep", dir);
    ts_err e = {""};
    cr_assert_eq(report_write(r, out, &e), -1);
    cr_assert(strstr(e.msg, "interval 3") && strstr(e.msg, "phase 9"), "%s", e.msg);
    struct stat st;
    cr_assert_neq(stat(out, &st), 0, "%s was created", out);
    r->tl[3].phase = PH_ROLLOUT;
    r->tl[5].t1 = r->tl[5].t0 - 1;
    path_in(p, sizeof p, dir, "timeline.json");
    cr_assert_eq(perfetto_write(r, p, &e), -1);
    cr_assert(strstr(e.msg, "interval 5") && strstr(e.msg, "timeline.json"), "%s", e.msg);
    cr_assert(!exists(dir, "timeline.json"));
    run_record_free(r);
    /* steps out of order: phases.csv cannot attribute the intervals */
    r = make_run(4, 3);
    r->step_t0[2] = r->step_t0[1] - 1;
    path_in(p, sizeof p, dir, "phases.csv");
    cr_assert_eq(csv_write_phases(r, p, &e), -1);
    cr_assert(strstr(e.msg, "step 3") && strstr(e.msg, "phases.csv"), "%s", e.msg);
    cr_assert(!exists(dir, "phases.csv"));
    run_record_free(r);
}

/* A multi-turn run's trajectories (issue 20): a second process holds a
 * named track per rank (the critical path on top) and one slice per
 * interval, its category the kind, in time order; intervals out of order
 * are refused and nothing is written. */
Test(export, perfetto_trajectory_tracks)
{
    run_record *r = make_run(4, 1);
    double t = 0.1;
    for (int i = 0; i < 9; i++, t += 0.7) {
        traj_interval iv = {i / 5, 40 + i / 5, i % 5 / 2, (i % 5) % TJ_COUNT, t, t + 0.7};
        cr_assert_eq(run_add_traj(r, &iv), 0);
    }
    char p[600];
    path_in(p, sizeof p, dir, "timeline.json");
    ts_err e = {""};
    cr_assert_eq(perfetto_write(r, p, &e), 0, "%s", e.msg);
    json_error_t je;
    json_t *root = json_load_file(p, JSON_REJECT_DUPLICATES, &je);
    cr_assert_not_null(root, "not JSON: %s", je.text);
    size_t i, slices = 0, tracks = 0, gpu_slices = 0;
    long long last_end[3] = {-1, -1, -1};
    json_t *ev;
    json_array_foreach(json_object_get(root, "traceEvents"), i, ev) {
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        const char *name = json_string_value(json_object_get(ev, "name"));
        json_int_t pid = json_integer_value(json_object_get(ev, "pid"));
        json_int_t tid = json_integer_value(json_object_get(ev, "tid"));
        if (pid != 2) {
            gpu_slices += !strcmp(ph, "X");
            continue;
        }
        if (!strcmp(ph, "M") && !strcmp(name, "thread_name")) {
            const char *tn =
                json_string_value(json_object_get(json_object_get(ev, "args"), "name"));
            cr_assert(tid == 1 ? strstr(tn, "trajectory 40 (critical path)") != NULL
                               : strstr(tn, "trajectory 41") != NULL, "track %lld: %s",
                      (long long)tid, tn);
            tracks++;
        } else if (!strcmp(ph, "X")) {
            cr_assert(tid >= 1 && tid <= 2);
            const char *cat = json_string_value(json_object_get(ev, "cat"));
            int kind = -1;
            for (int k = 0; k < TJ_COUNT; k++)
                if (!strcmp(cat, tj_kind_name[k]))
                    kind = k;
            cr_assert_geq(kind, 0, "category '%s'", cat);
            cr_assert_eq(strncmp(name, kind >= TJ_TOOL_QUEUE ? "tool " : "turn ", 5), 0, "%s",
                         name);
            long long ts = json_integer_value(json_object_get(ev, "ts"));
            cr_assert_geq(ts, last_end[tid], "slice %zu overlaps the previous", i);
            last_end[tid] = ts + json_integer_value(json_object_get(ev, "dur"));
            slices++;
        }
    }
    json_decref(root);
    cr_assert_eq(tracks, 2);
    cr_assert_eq(slices, r->n_tj);
    cr_assert_eq(gpu_slices, r->n_tl, "the GPUs' tracks are unchanged");
    remove(p);
    r->tj[3].t0 = r->tj[1].t0; /* before the end of the one before */
    cr_assert_eq(perfetto_write(r, p, &e), -1);
    cr_assert(strstr(e.msg, "trajectory interval 3"), "%s", e.msg);
    cr_assert(!exists(dir, "timeline.json"));
    run_record_free(r);
}

/* Counts the lines of s. */
static size_t lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(export, responses_csv_matches_record)
{
    run_record *r = make_run(8, 2);
    char p[600];
    path_in(p, sizeof p, dir, "responses.csv");
    ts_err e = {""};
    cr_assert_eq(csv_write_responses(r, p, &e), 0, "%s", e.msg);
    char *txt = slurp(dir, "responses.csv");
    const char *head = "response,replica,prompt_tokens,length_tokens,finish_s\n";
    cr_assert_eq(strncmp(txt, head, strlen(head)), 0, "%s", txt);
    cr_assert_eq(lines(txt), r->n_resp + 1, "a row per response");
    const char *row = txt + strlen(head);
    for (size_t i = 0; i < r->n_resp; i++) {
        size_t idx;
        int rep, pt, len;
        double fin;
        cr_assert_eq(sscanf(row, "%zu,%d,%d,%d,%lf", &idx, &rep, &pt, &len, &fin), 5, "%s", row);
        cr_assert(idx == i && rep == r->resp[i].replica && pt == r->resp[i].prompt_tokens &&
                      len == r->resp[i].length && fabs(fin - r->resp[i].finish_s) < 1e-6,
                  "row %zu: %.60s", i, row);
        row = strchr(row, '\n') + 1;
    }
    free(txt);
    /* no responses: the header alone */
    r->n_resp = 0;
    cr_assert_eq(csv_write_responses(r, p, &e), 0, "%s", e.msg);
    txt = slurp(dir, "responses.csv");
    cr_assert_str_eq(txt, head);
    free(txt);
    run_record_free(r);
}

/* Sums phases.csv's GPU-second columns; checks its header, names and steps
 * and returns the number of rows. */
static size_t read_phases(const char *d, size_t steps, double *gpu_s)
{
    char *txt = slurp(d, "phases.csv");
    const char *head = "step,phase,start_s,end_s,busy_gpu_s,idle_gpu_s,train_gpu_s\n";
    cr_assert_eq(strncmp(txt, head, strlen(head)), 0, "%s", txt);
    size_t rows = 0, last_step = 1;
    *gpu_s = 0;
    for (char *line = strtok(txt + strlen(head), "\n"); line; line = strtok(NULL, "\n")) {
        size_t k;
        char name[32];
        double lo, hi, b, i, t;
        cr_assert_eq(sscanf(line, "%zu,%31[^,],%lf,%lf,%lf,%lf,%lf", &k, name, &lo, &hi, &b, &i,
                            &t), 7, "%s", line);
        cr_assert(is_phase_name(name), "phase '%s' is a name", name);
        cr_assert(k >= last_step && k <= steps, "step %zu after %zu (of %zu)", k, last_step,
                  steps);
        cr_assert_leq(lo, hi);
        last_step = k;
        *gpu_s += b + i + t;
        rows++;
    }
    free(txt);
    return rows;
}

Test(export, phases_csv_matches_record)
{
    for (int steps = 1; steps <= 3; steps += 2) {
        run_record *r = make_run(8, steps);
        char p[600];
        path_in(p, sizeof p, dir, "phases.csv");
        ts_err e = {""};
        cr_assert_eq(csv_write_phases(r, p, &e), 0, "%s", e.msg);
        double got, want = 0;
        size_t rows = read_phases(dir, (size_t)steps, &got);
        cr_assert_eq(rows, (size_t)steps * PH_COUNT, "a row per step and phase");
        for (size_t i = 0; i < r->n_tl; i++)
            want += r->tl[i].t1 - r->tl[i].t0;
        cr_assert_leq(fabs(got - want), 1e-6 * want, "GPU-s %g, timeline %g", got, want);
        /* the second step's rollout starts where that step's sync ends */
        if (steps == 3) {
            char *txt = slurp(dir, "phases.csv");
            char want_row[64];
            snprintf(want_row, sizeof want_row, "\n2,rollout,%.9g,", r->step_t0[1] + 0.11);
            cr_assert(strstr(txt, want_row), "%s lacks %s", txt, want_row);
            free(txt);
        }
        run_record_free(r);
    }
}

/* report_write() writes every file, names phases and states in gantt.dat,
 * and titles a run that was not saved without a run id. */
Test(export, report_write_all_files)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    run_record *r = make_run(8, 2);
    ts_err e = {""};
    cr_assert_eq(report_write(r, dir, &e), 0, "%s", e.msg);
    const char *files[] = {"timeline.json", "responses.csv", "phases.csv", "gantt.dat",
                           "gantt.png",     "cdf.dat",       "cdf.png",    "report.md",
                           "index.html"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        cr_assert(exists(dir, files[i]), "%s missing", files[i]);
    check_trace(dir, r);
    char *dat = slurp(dir, "gantt.dat");
    cr_assert(strstr(dat, " sync busy\n") && strstr(dat, " rollout idle\n") &&
                  strstr(dat, " rollout train\n") && strstr(dat, " reward idle\n"),
              "gantt.dat names phases and states");
    free(dat);
    char *md = slurp(dir, "report.md");
    cr_assert(!strstr(md, "run 0"), "an unsaved run has no id: %.200s", md);
    cr_assert(strstr(md, "# tailsim rlstep tlt\n") && strstr(md, "| run | not saved |"),
              "%.300s", md);
    cr_assert(strstr(md, "first start (s)") && strstr(md, "(phases.csv)"),
              "several steps: the spans say so");
    free(md);
    char *html = slurp(dir, "index.html");
    cr_assert(strstr(html, "<title>tailsim rlstep tlt</title>") &&
                  html_embedded_images("index.html", html) == 2 &&
                  strstr(html, "<td>timeline.json</td>") && strstr(html, "<td>step_s</td>") &&
                  strstr(html, "<td>rollout</td>") && strstr(html, "</html>"),
              "%s", html);
    free(html);
    run_record_free(r);
}

/* Runs cmd through the shell; returns its exit status. */
static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `rlstep -o DIR` writes the report without --db; with --db too, the
 * exports equal those `report --run` writes from the store; --json stdout
 * stays one JSON document. */
Test(export, cli_rlstep_o, .timeout = 120)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char cmd[2048], out[400], out2[400], db[400];
    snprintf(out, sizeof out, "%s/a/b", dir); /* parents created */
    snprintf(out2, sizeof out2, "%s/from-db", dir);
    snprintf(db, sizeof db, "%s/r.db", dir);
    snprintf(cmd, sizeof cmd,
             "build/tailsim rlstep qwen7b-64gpu --set trace.prompts=8 --steps 2 --policy tlt "
             "--json --no-wall --db %s -o %s 2>%s/err", db, out, dir);
    char *js = run_capture(cmd);
    json_error_t je;
    json_t *o = json_loads(js, 0, &je);
    cr_assert_not_null(o, "stdout is one JSON document: %s\n%s", je.text, js);
    char *err = slurp(dir, "err");
    cr_assert(strstr(err, "/a/b/index.html"), "%s", err);
    free(err);
    const char *files[] = {"timeline.json", "responses.csv", "phases.csv", "gantt.png",
                           "cdf.png",       "report.md",     "index.html"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        cr_assert(exists(out, files[i]), "%s missing", files[i]);
    trace_sum s = check_trace(out, NULL);
    cr_assert_eq((double)s.tracks, json_number_value(json_object_get(o, "gpus")), "a track per GPU");
    cr_assert_eq(s.instants, 2, "two step markers");
    double gpu_s;
    read_phases(out, 2, &gpu_s);
    cr_assert_leq(fabs(s.dur_us - gpu_s * 1e6), (double)s.slices + 1e-6 * s.dur_us,
                  "timeline.json %.0f us, phases.csv %.6f GPU-s", s.dur_us, gpu_s);
    char *rc = slurp(out, "responses.csv");
    double resp = json_real_value(json_object_get(o, "responses")); /* mean over the steps */
    cr_assert_eq(lines(rc), (size_t)llround(2 * resp) + 1, "%zu lines, %g responses a step",
                 lines(rc), resp);
    json_decref(o);
    free(js);
    /* the same run from the store: the same exports */
    snprintf(cmd, sizeof cmd, "build/tailsim report --db %s -o %s", db, out2);
    char *listed = run_capture(cmd);
    cr_assert(strstr(listed, "/from-db/timeline.json\n") &&
                  strstr(listed, "/from-db/index.html\n") &&
                  strstr(listed, "/from-db/phases.csv\n") &&
                  strstr(listed, "/from-db/responses.csv\n"),
              "%s", listed);
    free(listed);
    const char *same[] = {"timeline.json", "responses.csv", "phases.csv"};
    for (size_t i = 0; i < 3; i++) {
        char *a = slurp(out, same[i]), *b = slurp(out2, same[i]);
        cr_assert_str_eq(a, b, "%s differs between rlstep -o and report --run", same[i]);
        free(a);
        free(b);
    }
    free(rc);
    /* rollout -o without --db */
    snprintf(cmd, sizeof cmd, "build/tailsim rollout qwen7b-64gpu --set trace.prompts=8 -o %s/ro "
                              ">/dev/null 2>&1", dir);
    cr_assert_eq(sh(cmd), 0, "%s", cmd);
    snprintf(out, sizeof out, "%s/ro", dir);
    check_trace(out, NULL);
    char *md = slurp(out, "report.md");
    cr_assert(strstr(md, "# tailsim rollout\n"), "%.200s", md);
    free(md);
}

/* A bad -o is refused before the simulation: no database, nothing written. */
Test(export, cli_bad_o_refused_first, .timeout = 60)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char cmd[2048], f[400];
    snprintf(f, sizeof f, "%s/file", dir);
    FILE *fp = fopen(f, "w");
    cr_assert_not_null(fp);
    fclose(fp);
    const char *subs[] = {"", "/sub"};
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof cmd, "build/tailsim rlstep qwen7b-64gpu --db %s/r.db -o %s%s "
                                  ">%s/out 2>%s/err", dir, f, subs[k], dir, dir);
        cr_assert_eq(sh(cmd), 1, "%s", cmd);
        char *err = slurp(dir, "err");
        cr_assert(strstr(err, "tailsim rlstep: -o ") && strstr(err, "not a directory"), "%s",
                  err);
        free(err);
        cr_assert(!exists(dir, "r.db"), "simulated before refusing -o");
        char *out = slurp(dir, "out");
        cr_assert_str_eq(out, "", "nothing on stdout");
        free(out);
    }
}

/* compare -o: every policy's folder gets the exports too. */
Test(export, cli_compare_o_folders, .timeout = 120)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char cmd[2048], sub[600];
    snprintf(cmd, sizeof cmd, "build/tailsim compare qwen7b-64gpu --policies verl,tlt "
                              "--set trace.prompts=8 -o %s/c >/dev/null 2>&1", dir);
    cr_assert_eq(sh(cmd), 0, "%s", cmd);
    const char *pols[] = {"verl", "tlt"};
    for (int i = 0; i < 2; i++) {
        snprintf(sub, sizeof sub, "%s/c/compare-%s", dir, pols[i]);
        check_trace(sub, NULL);
        cr_assert(exists(sub, "responses.csv") && exists(sub, "phases.csv") &&
                      exists(sub, "index.html"),
                  "%s", sub);
    }
}
