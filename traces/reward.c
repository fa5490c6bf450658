/*
 * Recorded reward times (see reward.h): the reader of PolyTrace's rllm
 * reward_timings_step_N.jsonl files and the few operations the loader and
 * the simulator need on a trace's records (copy, the spread over ranks, the
 * (step, rank) uniqueness check).
 *
 * A file holds one record per rollout rank and step, so a few records per
 * file and a few hundred per trace: everything here runs once per load.
 * The reader goes through the bounded line reader (common/lines.h: lines of
 * at most TS_LINE_MAX bytes, no NUL, "-" for standard input), reads its
 * input once, and loads all or nothing: records go to a scratch array that
 * joins t->reward only when the whole file is good, so on the first bad
 * record t is as it was and the message is "file:line: field 'x': ...".
 * The uniqueness check sorts an index, O(n log n), so a long file cannot
 * make it quadratic.
 */
#include "traces/reward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "traces/jsonl.h"

int reward_name_step(const char *name, int32_t *step)
{
    static const char pre[] = "reward_timings", num[] = "reward_timings_step_";
    size_t l = strlen(name);
    *step = -1;
    if (strncmp(name, pre, sizeof pre - 1) || l < 6 || strcmp(name + l - 6, ".jsonl"))
        return 0;
    if (!strncmp(name, num, sizeof num - 1)) {
        const char *d = name + sizeof num - 1, *end = name + l - 6;
        int64_t v = 0;
        int ok = d < end && end - d <= 9;
        for (const char *c = d; ok && c < end; c++) {
            ok = *c >= '0' && *c <= '9';
            v = v * 10 + (*c - '0');
        }
        if (ok)
            *step = (int32_t)v;
    }
    return 1;
}

int reward_line_is_record(const char *buf, size_t len)
{
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, 0, &jerr);
    int is = root && json_is_object(root) && json_object_get(root, "reward_time_s");
    json_decref(root);
    return is;
}

/* (step, rank, index) order for the uniqueness check. */
typedef struct rkey {
    int32_t step, rank;
    size_t i;
} rkey;

static int rkey_cmp(const void *x, const void *y)
{
    const rkey *p = x, *q = y;
    if (p->step != q->step)
        return p->step < q->step ? -1 : 1;
    if (p->rank != q->rank)
        return p->rank < q->rank ? -1 : 1;
    return (p->i > q->i) - (p->i < q->i);
}

int reward_find_twice(const trace_reward *a, size_t n, size_t *first, size_t *again)
{
    if (n < 2)
        return 0;
    rkey *k = malloc(n * sizeof *k);
    if (!k)
        return -1;
    for (size_t i = 0; i < n; i++)
        k[i] = (rkey){a[i].step, a[i].rank, i};
    qsort(k, n, sizeof *k, rkey_cmp);
    int found = 0;
    for (size_t i = 1; i < n; i++) {
        if (k[i].step != k[i - 1].step || k[i].rank != k[i - 1].rank)
            continue;
        /* of all the repeats, the one that comes latest in a[] after its first */
        if (!found || k[i].i < *again) {
            *first = k[i - 1].i;
            *again = k[i].i;
        }
        found = 1;
    }
    free(k);
    return found;
}

/* Reads an optional integer field in lo..hi: 0 stored, 1 absent (or null),
 * -1 with a message. */
static int int_field(const json_t *obj, const char *key, json_int_t lo, json_int_t hi,
                     json_int_t *out, const ts_lines *r, ts_err *e)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_integer(v))
        return ts_errf(e, "%s:%ld: field '%s': expected an integer in %lld..%lld, got %s",
                       r->path, r->lineno, key, (long long)lo, (long long)hi, jsonl_kind(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return ts_errf(e, "%s:%ld: field '%s': %lld is outside %lld..%lld", r->path, r->lineno,
                       key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

/* Parses the current line into *rec.  Returns 1 (a record), 0 (a
 * validation record, skipped) or -1 with a message. */
static int parse_record(const ts_lines *r, int32_t name_step, trace_reward *rec, ts_err *e)
{
    json_error_t jerr;
    json_t *root = json_loadb(r->buf, r->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return jsonl_syntax_error(r, &jerr, e);
    int rc = -1;
    if (!json_is_object(root)) {
        ts_errf(e, "%s:%ld: expected one JSON object per line, got %s", r->path, r->lineno,
                jsonl_kind(root));
        goto done;
    }
    const json_t *v = json_object_get(root, "validate");
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        ts_errf(e, "%s:%ld: field 'validate': expected true or false, got %s", r->path,
                r->lineno, jsonl_kind(v));
        goto done;
    }
    json_int_t step = -1, rank = 0, x;
    int got = int_field(root, "step", 0, INT32_MAX, &step, r, e);
    if (got < 0)
        goto done;
    if (got == 1 && name_step < 0) {
        ts_errf(e, "%s:%ld: field 'step': missing (and the file name gives no step)", r->path,
                r->lineno);
        goto done;
    }
    if (got == 1)
        step = name_step;
    else if (name_step >= 0 && step != name_step) {
        ts_errf(e, "%s:%ld: field 'step': %lld, but the file is named for step %d", r->path,
                r->lineno, (long long)step, name_step);
        goto done;
    }
    if ((got = int_field(root, "dp_rank", 0, INT32_MAX, &x, r, e)) < 0)
        goto done;
    if (got == 0) {
        rank = x;
    } else {
        if ((got = int_field(root, "rank", 0, INT32_MAX, &x, r, e)) < 0)
            goto done;
        if (got == 0)
            rank = x;
    }
    v = json_object_get(root, "reward_time_s");
    if (!v) {
        ts_errf(e, "%s:%ld: field 'reward_time_s': missing", r->path, r->lineno);
        goto done;
    }
    double t = json_is_number(v) ? json_number_value(v) : NAN;
    if (!json_is_number(v) || !(t >= 0 && t <= REWARD_MAX_S)) {
        if (json_is_number(v))
            ts_errf(e, "%s:%ld: field 'reward_time_s': %g is outside 0..%g seconds", r->path,
                    r->lineno, t, REWARD_MAX_S);
        else
            ts_errf(e, "%s:%ld: field 'reward_time_s': expected seconds (a number in 0..%g), "
                       "got %s", r->path, r->lineno, REWARD_MAX_S, jsonl_kind(v));
        goto done;
    }
    if (json_is_true(json_object_get(root, "validate"))) {
        rc = 0;
        goto done;
    }
    *rec = (trace_reward){(int32_t)step, (int32_t)rank, t, r->lineno};
    rc = 1;
done:
    json_decref(root);
    return rc;
}

/* Reads the next line, dropping the "\r" of "\r\n" and a UTF-8 byte-order
 * mark on line 1 (as the trace readers do).  Returns 1, 0 or -1. */
static int next_line(ts_lines *r, ts_err *e)
{
    int got = ts_lines_next(r, e);
    if (got <= 0)
        return got;
    if (r->len && r->buf[r->len - 1] == '\r')
        r->buf[--r->len] = 0;
    if (r->lineno == 1 && r->len >= 3 && !memcmp(r->buf, "\xEF\xBB\xBF", 3)) {
        memmove(r->buf, r->buf + 3, r->len - 2);
        r->len -= 3;
    }
    return 1;
}

static int is_blank(const char *s)
{
    return s[strspn(s, " \t")] == 0;
}

int reward_read(ts_lines *r, int pending, int32_t name_step, trace *t, ts_err *e)
{
    trace_reward *a = NULL;
    size_t n = 0, cap = 0, skipped = 0, first, again;
    int got = pending ? 1 : 0, rc = -1;
    if (!pending)
        got = next_line(r, e);
    for (; got > 0; got = next_line(r, e)) {
        if (is_blank(r->buf))
            continue;
        trace_reward rec;
        int one = parse_record(r, name_step, &rec, e);
        if (one < 0)
            goto done;
        if (one == 0) {
            skipped++;
            continue;
        }
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            trace_reward *nb = nc > SIZE_MAX / sizeof *nb ? NULL : realloc(a, nc * sizeof *nb);
            if (!nb) {
                ts_errf(e, "%s:%ld: out of memory", r->path, r->lineno);
                goto done;
            }
            a = nb;
            cap = nc;
        }
        a[n++] = rec;
    }
    if (got < 0)
        goto done;
    if (n == 0) {
        ts_errf(e, "%s:%ld: no reward records%s", r->path, r->lineno ? r->lineno : 1,
                skipped ? " (only validation records, which are skipped)" : "");
        goto done;
    }
    int twice = reward_find_twice(a, n, &first, &again);
    if (twice < 0) {
        ts_errf(e, "%s: out of memory", r->path);
        goto done;
    }
    if (twice) {
        ts_errf(e, "%s:%ld: field 'dp_rank': step %d, rank %d has a reward time already (line "
                   "%ld)", r->path, a[again].line, a[again].step, a[again].rank, a[first].line);
        goto done;
    }
    trace src = {.reward = a, .n_reward = n};
    rc = trace_append(t, &src, e);
    if (rc)
        ts_err_prefix(e, "%s: ", r->path);
done:
    free(a);
    return rc;
}

int reward_load(const char *path, int32_t name_step, trace *t, ts_err *e)
{
    ts_lines r;
    if (ts_lines_open(&r, path, TS_LINES_STDIN, e))
        return -1;
    int rc = reward_read(&r, 0, name_step, t, e);
    ts_lines_close(&r);
    return rc;
}

int reward_copy(trace *dst, const trace *src, ts_err *e)
{
    trace_reward *a = NULL;
    if (src->n_reward) {
        if (!(a = malloc(src->n_reward * sizeof *a)))
            return ts_errf(e, "out of memory");
        memcpy(a, src->reward, src->n_reward * sizeof *a);
    }
    free(dst->reward);
    dst->reward = a;
    dst->n_reward = src->n_reward;
    return 0;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int reward_summarize(const trace *t, reward_summary *out, ts_err *e)
{
    memset(out, 0, sizeof *out);
    size_t n = t->n_reward;
    if (n == 0)
        return 0;
    double *v = malloc(n * sizeof *v);
    if (!v)
        return ts_errf(e, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = t->reward[i].time_s;
    qsort(v, n, sizeof *v, by_value);
    out->ranks = n > INT32_MAX ? INT32_MAX : (int)n;
    out->min_s = v[0];
    out->max_s = v[n - 1];
    out->median_s = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    return out->ranks;
}

static int by_step(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int reward_orphan(const trace *t, size_t from, size_t *bad)
{
    int32_t *st = malloc((t->n_prompts + 1) * sizeof *st);
    if (!st)
        return -1;
    for (size_t i = 0; i < t->n_prompts; i++)
        st[i] = t->prompts[i].step;
    qsort(st, t->n_prompts, sizeof *st, by_step);
    int found = 0;
    for (size_t j = from; j < t->n_reward && !found; j++)
        if (!bsearch(&t->reward[j].step, st, t->n_prompts, sizeof *st, by_step)) {
            *bad = j;
            found = 1;
        }
    free(st);
    return found;
}

int reward_steps(const trace *t, reward_summary *out, ts_err *e)
{
    memset(out, 0, sizeof *out);
    size_t n = t->n_reward, k = 0;
    if (n == 0)
        return 0;
    rkey *r = malloc(n * sizeof *r);
    double *v = malloc(n * sizeof *v);
    if (!r || !v) {
        free(r);
        free(v);
        return ts_errf(e, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        r[i] = (rkey){t->reward[i].step, 0, i};
    qsort(r, n, sizeof *r, rkey_cmp);
    for (size_t i = 0; i < n; i++) { /* the max of each run of one step */
        double x = t->reward[r[i].i].time_s;
        if (i == 0 || r[i].step != r[i - 1].step)
            v[k++] = x;
        else if (x > v[k - 1])
            v[k - 1] = x;
    }
    free(r);
    qsort(v, k, sizeof *v, by_value);
    out->ranks = k > INT32_MAX ? INT32_MAX : (int)k;
    out->min_s = v[0];
    out->max_s = v[k - 1];
    out->median_s = k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
    free(v);
    return out->ranks;
}
