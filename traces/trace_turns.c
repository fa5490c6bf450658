/*
 * Multi-turn (agentic) trajectories in the RL rollout JSONL reader: the
 * format PolyTrace's workload collector writes for a tool-calling run such as
 * Search-R1.  One JSON object per trajectory: "step", "prompt_len",
 * "prompt_group_id", "turns" (per turn "prompt_tokens", the context the turn
 * starts from; "cached_tokens", its prefix-cache hits; "completion_tokens";
 * optionally "engine_latency_s"), "tool_calls" (per call "turn", the turn it
 * follows; "latency_s"; "append_len", the tokens its result adds to the
 * context), optionally "turn_count" and "final_response_len".
 *
 * Consecutive records of one (step, prompt_group_id) are one prompt's group
 * (GRPO's samples of a prompt); the same group again after other records is
 * an error.  A response's length (trace_prompt.resp) is its whole trained
 * response, "final_response_len" when given, else what its turns span (the
 * last turn's context + generation - prompt, plus a trailing tool result).
 * Several tool calls after one turn run one after another: their latencies
 * and appended tokens add up in the turn (trace_turn.tool_s, append).
 * trace_load_jsonl (traces/trace_jsonl.c) calls in here for every record
 * that has "turns", "tool_calls" or "turn_count"; a file holds one kind.
 * Also the turn statistics of `trace stats` (trace_turn_stats_compute).
 */
#include "traces/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "traces/jsonl.h"
#include "traces/trace_impl.h"

/* The prompt group being gathered: its key, line and responses so far. */
typedef struct mt_group {
    int32_t step, gid, prompt;  /* step, prompt_group_id, prompt_len (tokens) */
    long line;                  /* line of its first record */
    int32_t *resp, *nt;         /* per response: length (tokens), turn count */
    size_t n, cap;
    trace_turn *turns;          /* every response's turns, in order */
    size_t nturns, tcap;
    trace_turn *rec;            /* scratch: one record's turns */
    size_t rcap;
    int32_t *gids;              /* prompt_group_id of each flushed prompt */
    long *glines;               /* its first line */
    size_t ngids, gcap;
    int open;                   /* a group is being gathered */
} mt_group;

void tr_turns_free(mt_group *g)
{
    if (!g)
        return;
    free(g->resp);
    free(g->nt);
    free(g->turns);
    free(g->rec);
    free(g->gids);
    free(g->glines);
    free(g);
}

int tr_turns_is_record(const json_t *root)
{
    return json_object_get(root, "turns") || json_object_get(root, "tool_calls") ||
           json_object_get(root, "turn_count");
}

/* Grows *p (of element size sz, capacity *cap) to hold want.  Returns 0 or -1. */
static int grow(void **p, size_t *cap, size_t want, size_t sz)
{
    if (want <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < want)
        c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Reads number field key (integer or real) of obj into *out, >= 0.
 * Returns 0, 1 (absent or null, only when !required) or -1. */
static int num_field(const json_t *obj, const char *where, const char *key, int required,
                     double *out, const ts_lines *r, ts_err *e)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required)
            return ts_errf(e, "%s:%ld: field '%s%s': missing", r->path, r->lineno, where, key);
        return 1;
    }
    if (!json_is_number(v))
        return ts_errf(e, "%s:%ld: field '%s%s': expected a number of seconds, got %s", r->path,
                       r->lineno, where, key, jsonl_kind(v));
    double x = json_number_value(v);
    if (!(x >= 0) || !isfinite(x) || x > 86400)
        return ts_errf(e, "%s:%ld: field '%s%s': %g is outside 0..86400 s", r->path, r->lineno,
                       where, key, x);
    *out = x;
    return 0;
}

/* Reads integer field key of element obj (named where, e.g. "turns[1].") in
 * [lo, hi].  Returns 0, 1 (absent or null, when !required) or -1. */
static int int_field(const json_t *obj, const char *where, const char *key, int required,
                     json_int_t lo, json_int_t hi, json_int_t *out, const ts_lines *r, ts_err *e)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required)
            return ts_errf(e, "%s:%ld: field '%s%s': missing", r->path, r->lineno, where, key);
        return 1;
    }
    if (!json_is_integer(v))
        return ts_errf(e, "%s:%ld: field '%s%s': expected an integer in %lld..%lld, got %s",
                       r->path, r->lineno, where, key, (long long)lo, (long long)hi,
                       jsonl_kind(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return ts_errf(e, "%s:%ld: field '%s%s': %lld is outside %lld..%lld", r->path,
                       r->lineno, where, key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

/* The record's turns into g->rec[0..n).  Returns n, or -1. */
static long read_turns(mt_group *g, const json_t *root, const ts_lines *r, ts_err *e)
{
    const json_t *a = json_object_get(root, "turns");
    if (!a)
        return ts_errf(e, "%s:%ld: field 'turns': missing (a trajectory with tool calls or a "
                          "turn count needs its turns)", r->path, r->lineno);
    if (!json_is_array(a) || json_array_size(a) == 0)
        return ts_errf(e, "%s:%ld: field 'turns': expected a non-empty array of turn objects, "
                          "got %s", r->path, r->lineno,
                       json_is_array(a) ? "an empty array" : jsonl_kind(a));
    size_t n = json_array_size(a);
    if (n > 100000)
        return ts_errf(e, "%s:%ld: field 'turns': %zu turns (at most 100000)", r->path,
                       r->lineno, n);
    if (grow((void **)&g->rec, &g->rcap, n, sizeof *g->rec))
        return ts_errf(e, "%s:%ld: out of memory", r->path, r->lineno);
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(a, i);
        char w[40];
        snprintf(w, sizeof w, "turns[%zu].", i);
        if (!json_is_object(o))
            return ts_errf(e, "%s:%ld: field 'turns[%zu]': expected an object, got %s", r->path,
                           r->lineno, i, jsonl_kind(o));
        json_int_t ctx = 0, cached = 0, gen = 0, idx = 0;
        double lat = -1;
        if (int_field(o, w, "prompt_tokens", 1, 1, TRACE_MAX_TOKENS, &ctx, r, e) < 0 ||
            int_field(o, w, "cached_tokens", 0, 0, TRACE_MAX_TOKENS, &cached, r, e) < 0 ||
            int_field(o, w, "completion_tokens", 1, 1, TRACE_MAX_TOKENS, &gen, r, e) < 0 ||
            num_field(o, w, "engine_latency_s", 0, &lat, r, e) < 0)
            return -1;
        int got = int_field(o, w, "turn", 0, 0, INT32_MAX, &idx, r, e);
        if (got < 0)
            return -1;
        if (got == 0 && idx != (json_int_t)i)
            return ts_errf(e, "%s:%ld: field 'turns[%zu].turn': %lld; the turns must be listed "
                              "in order from 0", r->path, r->lineno, i, (long long)idx);
        if (cached > ctx)
            return ts_errf(e, "%s:%ld: field 'turns[%zu].cached_tokens': %lld cached tokens "
                              "exceed the turn's %lld prompt tokens", r->path, r->lineno, i,
                           (long long)cached, (long long)ctx);
        g->rec[i] = (trace_turn){(int32_t)ctx, (int32_t)cached, (int32_t)gen, 0, 0, 0, lat};
    }
    return (long)n;
}

/* The record's tool calls added to the turns they follow. Returns 0 or -1. */
static int read_tools(mt_group *g, long n, const json_t *root, const ts_lines *r, ts_err *e)
{
    const json_t *a = json_object_get(root, "tool_calls");
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a))
        return ts_errf(e, "%s:%ld: field 'tool_calls': expected an array, got %s", r->path,
                       r->lineno, jsonl_kind(a));
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *o = json_array_get(a, i);
        char w[40];
        snprintf(w, sizeof w, "tool_calls[%zu].", i);
        if (!json_is_object(o))
            return ts_errf(e, "%s:%ld: field 'tool_calls[%zu]': expected an object, got %s",
                           r->path, r->lineno, i, jsonl_kind(o));
        json_int_t turn = 0, app = 0;
        double lat = 0;
        if (int_field(o, w, "turn", 1, INT32_MIN, INT32_MAX, &turn, r, e) < 0)
            return -1;
        if (turn < 0 || turn >= n)
            return ts_errf(e, "%s:%ld: field 'tool_calls[%zu].turn': turn %lld does not exist "
                              "(the trajectory has %ld turn%s, 0..%ld)", r->path, r->lineno, i,
                           (long long)turn, n, n == 1 ? "" : "s", n - 1);
        const json_t *lv = json_object_get(o, "latency_s");
        if (lv && json_is_number(lv) && json_number_value(lv) < 0)
            return ts_errf(e, "%s:%ld: field 'tool_calls[%zu].latency_s': %g s is negative",
                           r->path, r->lineno, i, json_number_value(lv));
        if (num_field(o, w, "latency_s", 1, &lat, r, e) < 0 ||
            int_field(o, w, "append_len", 1, 0, TRACE_MAX_TOKENS, &app, r, e) < 0)
            return -1;
        trace_turn *u = &g->rec[turn];
        u->tools++;
        u->tool_s += lat;
        if ((int64_t)u->append + app > TRACE_MAX_TOKENS)
            return ts_errf(e, "%s:%ld: field 'tool_calls[%zu].append_len': turn %lld's tool "
                              "results exceed %d tokens", r->path, r->lineno, i,
                           (long long)turn, TRACE_MAX_TOKENS);
        u->append += (int32_t)app;
    }
    return 0;
}

/* Adds the gathered group as a prompt and remembers its id.  Returns 0 or -1. */
static int flush(loader *L, ts_err *e)
{
    mt_group *g = L->mt;
    if (!g || !g->open)
        return 0;
    if (grow((void **)&g->gids, &g->gcap, g->ngids + 1, sizeof *g->gids) ||
        !(g->glines = realloc(g->glines, g->gcap * sizeof *g->glines)))
        return ts_errf(e, "%s: out of memory", L->r.path);
    if (trace_add_turns(L->t, g->step, 0, -1, g->prompt, g->resp, (int32_t)g->n, g->nt,
                        g->turns, e)) {
        ts_err_prefix(e, "%s:%ld: ", L->r.path, g->line);
        return -1;
    }
    g->gids[g->ngids] = g->gid;
    g->glines[g->ngids++] = g->line;
    g->open = 0;
    g->n = g->nturns = 0;
    return 0;
}

int tr_turns_record(loader *L, const json_t *root, ts_err *e)
{
    const ts_lines *r = &L->r;
    if (!L->mt && !(L->mt = calloc(1, sizeof *L->mt)))
        return ts_errf(e, "%s:%ld: out of memory", r->path, r->lineno);
    mt_group *g = L->mt;
    json_int_t step = 0, plen = 0, gid = 0, count = 0, fin = 0;
    if (jsonl_int_field(root, "step", 1, 0, INT32_MAX, &step, r, e) < 0 ||
        jsonl_int_field(root, "prompt_len", 1, 0, TRACE_MAX_TOKENS, &plen, r, e) < 0 ||
        jsonl_int_field(root, "prompt_group_id", 1, 0, INT32_MAX, &gid, r, e) < 0)
        return -1;
    long n = read_turns(g, root, r, e);
    if (n < 0 || read_tools(g, n, root, r, e))
        return -1;
    int got = jsonl_int_field(root, "turn_count", 0, 0, INT32_MAX, &count, r, e);
    if (got < 0)
        return -1;
    if (got == 0 && count != n)
        return ts_errf(e, "%s:%ld: field 'turn_count': %lld, but 'turns' lists %ld", r->path,
                       r->lineno, (long long)count, n);
    const trace_turn *last = &g->rec[n - 1];
    int64_t span = (int64_t)last->context + last->gen + last->append - plen;
    if ((got = jsonl_int_field(root, "final_response_len", 0, 1, TRACE_MAX_TOKENS, &fin, r,
                               e)) < 0)
        return -1;
    if (got == 1) {
        if (span < 1 || span > TRACE_MAX_TOKENS)
            return ts_errf(e, "%s:%ld: field 'prompt_len': %lld leaves the turns a response of "
                              "%lld tokens (outside 1..%d)", r->path, r->lineno, (long long)plen,
                           (long long)span, TRACE_MAX_TOKENS);
        fin = span;
    }
    if (g->open && (g->step != step || g->gid != gid) && flush(L, e))
        return -1;
    if (!g->open) {
        *g = (mt_group){.resp = g->resp, .nt = g->nt, .cap = g->cap, .turns = g->turns,
                        .tcap = g->tcap, .rec = g->rec, .rcap = g->rcap, .gids = g->gids,
                        .glines = g->glines, .ngids = g->ngids, .gcap = g->gcap};
        g->step = (int32_t)step;
        g->gid = (int32_t)gid;
        g->prompt = (int32_t)plen;
        g->line = r->lineno;
        g->open = 1;
    } else if (g->prompt != plen) {
        return ts_errf(e, "%s:%ld: field 'prompt_len': %lld, but line %ld of the same prompt "
                          "group says %d", r->path, r->lineno, (long long)plen, g->line,
                       g->prompt);
    }
    if (g->n >= INT32_MAX || grow((void **)&g->resp, &g->cap, g->n + 1, sizeof *g->resp) ||
        !(g->nt = realloc(g->nt, g->cap * sizeof *g->nt)) ||
        grow((void **)&g->turns, &g->tcap, g->nturns + (size_t)n, sizeof *g->turns))
        return ts_errf(e, "%s:%ld: out of memory", r->path, r->lineno);
    g->resp[g->n] = (int32_t)fin;
    g->nt[g->n++] = (int32_t)n;
    memcpy(g->turns + g->nturns, g->rec, (size_t)n * sizeof *g->rec);
    g->nturns += (size_t)n;
    return 0;
}

int tr_turns_end(loader *L, ts_err *e)
{
    if (flush(L, e))
        return -1;
    mt_group *g = L->mt;
    trace *t = L->t;
    if (!g || g->ngids != t->n_prompts)
        return 0;
    /* a group id again after other groups: sort (step, gid) and look for ties */
    for (size_t i = 0; i < t->n_prompts; i++)
        t->prompts[i].prompt_id = g->gids[i];
    key3 *k = tr_sorted_ids(t, 1);
    if (!k)
        return ts_errf(e, "%s: out of memory", L->r.path);
    int rc = 0;
    for (size_t i = 1; i < t->n_prompts && !rc; i++)
        if (k[i].a == k[i - 1].a && k[i].b == k[i - 1].b)
            rc = ts_errf(e, "%s:%ld: field 'prompt_group_id': step %d, group %d again after "
                            "other groups (first on line %ld); a group's records must be "
                            "consecutive", L->r.path, g->glines[k[i].i], k[i].a, k[i].b,
                         g->glines[k[i - 1].i]);
    free(k);
    return rc;
}

/* ------------------------------------------------------------ statistics */

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between order statistics of sorted x[0..n). */
static double pct(const double *x, size_t n, double q)
{
    if (n == 0)
        return 0;
    double h = q * (double)(n - 1);
    size_t lo = (size_t)h;
    return lo + 1 < n ? x[lo] + (h - (double)lo) * (x[lo + 1] - x[lo]) : x[n - 1];
}

int trace_turn_stats_compute(const trace *t, trace_turn_stats *s, ts_err *e)
{
    memset(s, 0, sizeof *s);
    int64_t calls = 0;
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[i];
        if (!p->turn0)
            continue;
        s->trajectories += p->n_resp;
        s->turns += p->turn0[p->n_resp];
        for (int32_t j = 0; j < p->n_resp; j++) {
            int32_t nt = p->turn0[j + 1] - p->turn0[j];
            if (nt > s->max_turns)
                s->max_turns = nt;
        }
        for (int32_t k = 0; k < p->turn0[p->n_resp]; k++)
            calls += p->turns[k].tools > 0;
    }
    if (s->trajectories == 0)
        return 0;
    double *lat = malloc((size_t)(calls ? calls : 1) * sizeof *lat);
    if (!lat)
        return ts_errf(e, "out of memory");
    size_t m = 0;
    double eng = 0;
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[i];
        for (int32_t k = 0; p->turn0 && k < p->turn0[p->n_resp]; k++) {
            const trace_turn *u = &p->turns[k];
            s->tool_calls += u->tools;
            s->prompt_tokens += u->context;
            s->cached_tokens += u->cached;
            s->gen_tokens += u->gen;
            s->append_tokens += u->append;
            if (u->tools > 0) {
                lat[m++] = u->tool_s;
                s->tool_s += u->tool_s;
            }
            if (u->engine_s >= 0) {
                s->engine_turns++;
                eng += u->engine_s;
            }
        }
    }
    qsort(lat, m, sizeof *lat, dcmp);
    s->tool_turns = (int64_t)m;
    s->mean_turns = (double)s->turns / (double)s->trajectories;
    s->tool_mean_s = m ? s->tool_s / (double)m : 0;
    s->tool_p50_s = pct(lat, m, 0.5);
    s->tool_p99_s = pct(lat, m, 0.99);
    s->tool_max_s = m ? lat[m - 1] : 0;
    s->cached_fraction =
        s->prompt_tokens > 0 ? (double)s->cached_tokens / (double)s->prompt_tokens : 0;
    s->engine_mean_s = s->engine_turns ? eng / (double)s->engine_turns : 0;
    free(lat);
    return 0;
}
