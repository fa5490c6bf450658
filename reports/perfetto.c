/*
 * Chrome / Perfetto trace export of a run's per-GPU timeline (perfetto.h):
 * DIR/timeline.json, which ui.perfetto.dev and chrome://tracing open as one
 * process with a track per GPU, a slice per timeline interval (named after
 * its phase, its state as the category) and a global marker where each later
 * RL step starts.
 *
 * The file is streamed: the skeleton by hand, each event built as a small
 * jansson object and dumped (compact) on its own line, so memory stays that
 * of one event plus an index per interval, whatever the run's size.  Times
 * are whole microseconds, both ends rounded (end - start for the duration),
 * so that intervals the simulation made adjacent stay adjacent and never
 * overlap by a rounding error, which the viewers would draw as nesting.
 * Intervals are sorted by (GPU, start, end), as the viewers expect each
 * track's slices in order; a GPU's intervals never overlap (the simulation
 * lays them end to end), but one may have no length (a replica that got no
 * work is busy from t to t), and it comes before the one that starts where
 * it ends, so that it is drawn beside it, not nested in it.
 *
 * A multi-turn run (issue 20) adds a second process, "trajectories", with a
 * track per trajectory the record kept (run_record.tj: the ones that
 * finished last, the critical path on top): each turn's wait in the
 * replica's queue and its generation ("turn k", category queue / generate),
 * its tool call and any wait for a tool slot ("tool k", category tool /
 * tool_queue).  A trajectory's intervals are consecutive (one ends where the
 * next starts) and kept in time order, so they never nest.  Names from the record (scenario, policy,
 * command) reach the JSON only through json_string() after sanitising, so
 * the file is valid JSON (UTF-8) whatever bytes the database held.
 *
 * Runs in O(n log n) for n intervals; writes atomically (ts_atomic_*); never
 * prints.
 */
#include "reports/perfetto.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define PID 1
/* JSON dump flags of one event: one line, keys in insertion order. */
#define JFLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER)

/* One interval's place on the track, for sorting. */
typedef struct slot {
    int32_t gpu;
    long long ts, end; /* microseconds */
    size_t i;          /* index in r->tl */
} slot;

static int cmp_slot(const void *a, const void *b)
{
    const slot *x = a, *y = b;
    if (x->gpu != y->gpu)
        return (x->gpu > y->gpu) - (x->gpu < y->gpu);
    if (x->ts != y->ts)
        return (x->ts > y->ts) - (x->ts < y->ts);
    if (x->end != y->end) /* a zero-length interval before the one it starts */
        return (x->end > y->end) - (x->end < y->end);
    return (x->i > y->i) - (x->i < y->i);
}

/* A JSON string of s (at most cap bytes): control characters as spaces and,
 * when the bytes are not valid UTF-8, every byte above 0x7f as '?'.
 * Returns NULL only on allocation failure. */
static json_t *jname(const char *s, size_t cap)
{
    char buf[512];
    size_t n = strnlen(s, cap);
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        buf[k] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
    }
    buf[n] = 0;
    json_t *j = json_string(buf);
    if (j)
        return j;
    for (size_t k = 0; k < n; k++)
        if ((unsigned char)buf[k] > 0x7f)
            buf[k] = '?';
    return json_string(buf);
}

/* Writes event ev (taken) as one line of the traceEvents array, after a
 * comma unless it is the first.  Returns 0, or -1 when ev is NULL (out of
 * memory) or cannot be written. */
static int put_event(FILE *f, json_t *ev, int *first)
{
    if (!ev)
        return -1;
    fputs(*first ? "\n" : ",\n", f);
    *first = 0;
    int rc = json_dumpf(ev, f, JFLAGS);
    json_decref(ev);
    return rc;
}

/* Microseconds of t seconds, rounded. */
static long long usec(double t)
{
    return llround(t * 1e6);
}

/* Checks interval i; returns 0, or -1 with e naming what is wrong. */
static int check_interval(const tl_interval *t, size_t i, const char *path, ts_err *e)
{
    if (t->gpu < 0 || t->gpu >= INT32_MAX || t->phase < 0 || t->phase >= PH_COUNT || t->state < 0 ||
        t->state > TL_TRAIN)
        return ts_errf(e, "%s: timeline interval %zu: gpu %d, phase %d or state %d out of range",
                       path, i, t->gpu, t->phase, t->state);
    /* 1e12 s: far beyond any run, and its microseconds fit a long long */
    if (!isfinite(t->t0) || !isfinite(t->t1) || t->t0 < 0 || t->t1 < t->t0 || t->t1 > 1e12)
        return ts_errf(e, "%s: timeline interval %zu (gpu %d): times [%g, %g] s are not a "
                          "non-negative span", path, i, t->gpu, t->t0, t->t1);
    return 0;
}

/* Checks trajectory interval i; returns 0, or -1 with e naming what is wrong. */
static int check_traj(const traj_interval *t, size_t i, const char *path, ts_err *e)
{
    if (t->rank < 0 || t->rank >= INT32_MAX - 1 || t->resp < 0 || t->turn < 0 || t->kind < 0 ||
        t->kind >= TJ_COUNT)
        return ts_errf(e, "%s: trajectory interval %zu: rank %d, response %d, turn %d or kind "
                          "%d out of range", path, i, t->rank, t->resp, t->turn, t->kind);
    if (!isfinite(t->t0) || !isfinite(t->t1) || t->t0 < 0 || t->t1 < t->t0 || t->t1 > 1e12)
        return ts_errf(e, "%s: trajectory interval %zu (response %d): times [%g, %g] s are not "
                          "a non-negative span", path, i, t->resp, t->t0, t->t1);
    return 0;
}

/* The trajectories' process: its name and a named track per rank, then
 * every interval as a slice.  Returns 0, or -1 (out of memory, or a write
 * failed). */
static int put_trajs(FILE *f, const run_record *r, int *first)
{
    if (put_event(f, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "process_name", "ph", "M",
                               "pid", PID + 1, "tid", 0, "args", "name",
                               "trajectories that finished last (top: the critical path)"),
                  first) ||
        put_event(f, json_pack("{s:s, s:s, s:i, s:i, s:{s:i}}", "name", "process_sort_index",
                               "ph", "M", "pid", PID + 1, "tid", 0, "args", "sort_index", 1),
                  first))
        return -1;
    for (size_t k = 0; k < r->n_tj; k++) {
        const traj_interval *t = &r->tj[k];
        if (k && t->rank == r->tj[k - 1].rank)
            continue;
        char name[64];
        snprintf(name, sizeof name, "#%d trajectory %d%s", t->rank, t->resp,
                 t->rank == 0 ? " (critical path)" : "");
        if (put_event(f, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph",
                                   "M", "pid", PID + 1, "tid", t->rank + 1, "args", "name", name),
                      first) ||
            put_event(f, json_pack("{s:s, s:s, s:i, s:i, s:{s:i}}", "name", "thread_sort_index",
                                   "ph", "M", "pid", PID + 1, "tid", t->rank + 1, "args",
                                   "sort_index", t->rank),
                      first))
            return -1;
    }
    for (size_t k = 0; k < r->n_tj; k++) {
        const traj_interval *t = &r->tj[k];
        char name[32];
        snprintf(name, sizeof name, "%s %d", t->kind >= TJ_TOOL_QUEUE ? "tool" : "turn", t->turn);
        long long ts = usec(t->t0), end = usec(t->t1);
        json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:{s:i, s:i, s:s}}", "name",
                               name, "cat", tj_kind_name[t->kind], "ph", "X", "ts", (json_int_t)ts,
                               "dur", (json_int_t)(end - ts), "pid", PID + 1, "tid", t->rank + 1,
                               "args", "response", t->resp, "turn", t->turn, "kind",
                               tj_kind_name[t->kind]);
        if (put_event(f, ev, first))
            return -1;
    }
    return 0;
}

/* The run's identity for otherData, or NULL when out of memory. */
static json_t *identity(const run_record *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = json_object_set_new(o, "tool", json_string("tailsim")) ||
              json_object_set_new(o, "run", json_integer((json_int_t)r->id)) ||
              json_object_set_new(o, "command", jname(r->command, sizeof r->command)) ||
              json_object_set_new(o, "policy", jname(r->policy, sizeof r->policy)) ||
              json_object_set_new(o, "scenario", jname(r->scenario, sizeof r->scenario)) ||
              json_object_set_new(o, "seed", json_integer((json_int_t)r->seed)) ||
              json_object_set_new(o, "calibration", jname(r->calibration, sizeof r->calibration)) ||
              json_object_set_new(o, "version", jname(r->version, sizeof r->version)) ||
              json_object_set_new(o, "gpus", json_integer(r->gpus)) ||
              json_object_set_new(o, "replicas", json_integer(r->replicas)) ||
              json_object_set_new(o, "tp", json_integer(r->tp)) ||
              json_object_set_new(o, "time_unit", json_string("ts and dur in microseconds from "
                                                               "the start of the run"));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The process_name event: "tailsim run ID: COMMAND POLICY (SCENARIO)". */
static json_t *process_name(const run_record *r)
{
    char name[400], id[40] = "";
    if (r->id > 0)
        snprintf(id, sizeof id, " run %lld:", (long long)r->id);
    snprintf(name, sizeof name, "tailsim%s %.*s%s%.*s (%.*s)", id, (int)sizeof r->command,
             r->command, r->policy[0] ? " " : "", (int)sizeof r->policy, r->policy, 300,
             r->scenario);
    return json_pack("{s:s, s:s, s:i, s:i, s:{s:o}}", "name", "process_name", "ph", "M", "pid",
                     PID, "tid", 0, "args", "name", jname(name, sizeof name));
}

int perfetto_write(const run_record *r, const char *path, ts_err *e)
{
    slot *s = NULL;
    int rc = -1, first = 1;
    for (size_t i = 0; i < r->n_tl; i++)
        if (check_interval(&r->tl[i], i, path, e))
            return -1;
    for (size_t i = 0; i < r->n_tj; i++) {
        const traj_interval *t = &r->tj[i], *p = i ? &r->tj[i - 1] : NULL;
        if (check_traj(t, i, path, e))
            return -1;
        if (p && (t->rank < p->rank || (t->rank == p->rank && t->t0 < p->t1)))
            return ts_errf(e, "%s: trajectory interval %zu is not after the one before (by "
                              "rank, then time)", path, i);
    }
    if (r->n_tl && !(s = malloc(r->n_tl * sizeof *s)))
        return ts_errf(e, "%s: out of memory sorting %zu intervals", path, r->n_tl);
    for (size_t i = 0; i < r->n_tl; i++)
        s[i] = (slot){r->tl[i].gpu, usec(r->tl[i].t0), usec(r->tl[i].t1), i};
    if (r->n_tl)
        qsort(s, r->n_tl, sizeof *s, cmp_slot);

    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        goto done;
    FILE *f = a.f;
    fputs("{\"traceEvents\":[", f);
    if (put_event(f, process_name(r), &first))
        goto oom;
    /* a named, ordered track per GPU */
    for (size_t k = 0; k < r->n_tl; k++) {
        if (k && s[k].gpu == s[k - 1].gpu)
            continue;
        char name[32];
        int32_t g = s[k].gpu;
        snprintf(name, sizeof name, "GPU %d", g);
        if (put_event(f, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph",
                                   "M", "pid", PID, "tid", g + 1, "args", "name", name),
                      &first) ||
            put_event(f, json_pack("{s:s, s:s, s:i, s:i, s:{s:i}}", "name", "thread_sort_index",
                                   "ph", "M", "pid", PID, "tid", g + 1, "args", "sort_index", g),
                      &first))
            goto oom;
    }
    /* the slices, track by track in time order */
    for (size_t k = 0; k < r->n_tl; k++) {
        const tl_interval *t = &r->tl[s[k].i];
        const char *ph = tl_phase_name[t->phase], *st = tl_state_name[t->state];
        json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:I, s:i, s:i, s:{s:i, s:s, s:s}}", "name",
                               ph, "cat", st, "ph", "X", "ts", (json_int_t)s[k].ts, "dur",
                               (json_int_t)(s[k].end - s[k].ts), "pid", PID, "tid", t->gpu + 1,
                               "args", "gpu", t->gpu, "phase", ph, "state", st);
        if (put_event(f, ev, &first))
            goto oom;
    }
    /* where each RL step starts (a run of several) */
    for (size_t k = 0; r->n_steps > 1 && k < r->n_steps; k++) {
        char name[32];
        snprintf(name, sizeof name, "step %zu", k + 1);
        double t0 = r->step_t0[k];
        if (!isfinite(t0) || t0 < 0 || t0 > 1e12) {
            ts_errf(e, "%s: step %zu starts at %g s", path, k + 1, t0);
            ts_atomic_abort(&a);
            goto done;
        }
        if (put_event(f, json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i}", "name", name, "cat",
                                   "step", "ph", "i", "s", "g", "ts", (json_int_t)usec(t0), "pid",
                                   PID, "tid", 0),
                      &first))
            goto oom;
    }
    if (r->n_tj && put_trajs(f, r, &first))
        goto oom;
    fputs("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":", f);
    json_t *id = identity(r);
    if (!id || json_dumpf(id, f, JFLAGS)) {
        json_decref(id);
        goto oom;
    }
    json_decref(id);
    fputs("}\n", f);
    rc = ts_atomic_commit(&a, e);
    goto done;
oom:
    if (ferror(f))
        ts_errf(e, "%s: cannot write", path);
    else
        ts_errf(e, "%s: out of memory writing the trace", path);
    ts_atomic_abort(&a);
done:
    free(s);
    return rc;
}
