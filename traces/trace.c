/*
 * Trace container and its file formats.  A trace is a flat, growable array of
 * prompts in file order; each prompt owns a copy of its response lengths.
 * Three readers feed it (RL rollout JSONL through jansson, the plain CSV that
 * trace_write_csv produces, and Vidur request CSVs), trace_load picks one from
 * the content (it refuses a reward-timings record, traces/reward.h, saying
 * so; trace_load_any reads one as reward timings), and trace_write_csv
 * writes the plain CSV back.  A trace also holds its steps' recorded reward
 * times (trace.reward), which trace_append merges.
 * Everything here runs once per file, so clarity beats speed: a load is one
 * pass of the bounded line reader (common/lines.h) plus one trace_add per
 * prompt, and the whole-file checks (prompt ids, duplicates) sort an index
 * array, O(n log n).  trace_load reads its input once as well: the first
 * non-blank line picks the format and is then parsed as the first line, so
 * pipes, FIFOs and stdin ("-") load whole.
 *
 * Invariants: every prompt in a trace has step >= 0, prompt_id >= 0,
 * dp_rank >= -1, 0 <= prompt_tokens <= TRACE_MAX_TOKENS, n_resp >= 1 and
 * every response in 1..TRACE_MAX_TOKENS (trace_add enforces them).  Readers
 * load everything or nothing: on the first bad record they free what they
 * built, leave *out untouched and return -1 with "file:line: field 'x': ...".
 *
 * Prompt ids.  JSONL: the running index of the prompt within its step, in file
 * order (PolyTrace's local_index restarts at 0 on every dp_rank, so it is not
 * unique within a step and is ignored).  Plain CSV: the prompt_id column;
 * consecutive rows with the same (step, prompt_id) are one prompt's group, and
 * the same (step, prompt_id) appearing again after other rows is an error
 * (rows of one prompt must be consecutive).  Vidur: the row index, step 0.
 * (trace_stats_compute and trace_select_step live in stats.c.)
 */
#include "traces/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/lines.h"
#include "common/util.h"
#include "traces/jsonl.h"
#include "traces/reward.h"

/* ---------------------------------------------------------------- container */

trace *trace_new(void)
{
    return calloc(1, sizeof(trace));
}

void trace_free(trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_prompts; i++)
        free(t->prompts[i].resp);
    free(t->prompts);
    free(t->reward);
    free(t);
}

static int trace_reserve(trace *t, size_t want, ts_err *e)
{
    if (want <= t->cap)
        return 0;
    size_t cap = t->cap ? t->cap : 64;
    while (cap < want) {
        if (cap > SIZE_MAX / 2 / sizeof(trace_prompt))
            return ts_errf(e, "trace: too many prompts");
        cap *= 2;
    }
    trace_prompt *p = realloc(t->prompts, cap * sizeof *p);
    if (!p)
        return ts_errf(e, "trace: out of memory (%zu prompts)", cap);
    t->prompts = p;
    t->cap = cap;
    return 0;
}

int trace_add(trace *t, int32_t step, int32_t prompt_id, int32_t dp_rank,
              int32_t prompt_tokens, const int32_t *resp, int32_t n_resp, ts_err *e)
{
    if (step < 0 || prompt_id < 0 || dp_rank < -1)
        return ts_errf(e, "trace_add: bad step %d, prompt_id %d or dp_rank %d",
                       step, prompt_id, dp_rank);
    if (prompt_tokens < 0 || prompt_tokens > TRACE_MAX_TOKENS)
        return ts_errf(e, "trace_add: prompt_tokens %d outside 0..%d", prompt_tokens,
                       TRACE_MAX_TOKENS);
    if (n_resp < 1 || !resp)
        return ts_errf(e, "trace_add: a prompt needs at least one response");
    for (int32_t i = 0; i < n_resp; i++)
        if (resp[i] < 1 || resp[i] > TRACE_MAX_TOKENS)
            return ts_errf(e, "trace_add: response %d has length %d, outside 1..%d", i,
                           resp[i], TRACE_MAX_TOKENS);
    if (trace_reserve(t, t->n_prompts + 1, e))
        return -1;
    int32_t *copy = malloc((size_t)n_resp * sizeof *copy);
    if (!copy)
        return ts_errf(e, "trace: out of memory (%d responses)", n_resp);
    memcpy(copy, resp, (size_t)n_resp * sizeof *copy);
    t->prompts[t->n_prompts++] = (trace_prompt){step, prompt_id, dp_rank, prompt_tokens,
                                                n_resp, copy};
    return 0;
}

/* Appends src's reward records to dst, refusing a (step, rank) twice.
 * All or nothing. */
static int reward_append(trace *dst, const trace *src, ts_err *e)
{
    size_t n0 = dst->n_reward, n = n0 + src->n_reward, first, again;
    if (src->n_reward == 0)
        return 0;
    if (n > SIZE_MAX / sizeof(trace_reward))
        return ts_errf(e, "trace: too many reward records");
    trace_reward *a = realloc(dst->reward, n * sizeof *a);
    if (!a)
        return ts_errf(e, "trace: out of memory (%zu reward records)", n);
    dst->reward = a;
    memcpy(a + n0, src->reward, src->n_reward * sizeof *a);
    int twice = reward_find_twice(a, n, &first, &again);
    if (twice == 0) {
        dst->n_reward = n;
        return 0;
    }
    if (twice < 0)
        return ts_errf(e, "trace: out of memory");
    if (first >= n0) /* both new: the reader checks its own file, so not from one */
        return ts_errf(e, "field 'dp_rank': step %d, rank %d has two reward times (lines %ld "
                          "and %ld)", a[again].step, a[again].rank, a[first].line,
                       a[again].line);
    return ts_errf(e, "field 'dp_rank': step %d, rank %d has a reward time on line %ld here and "
                      "on line %ld of an earlier file", a[again].step, a[again].rank,
                   a[again].line, a[first].line);
}

int trace_append(trace *dst, const trace *src, ts_err *e)
{
    size_t n0 = dst->n_prompts;
    if (trace_reserve(dst, n0 + src->n_prompts, e))
        return -1;
    size_t r0 = dst->n_reward;
    if (reward_append(dst, src, e))
        return -1;
    for (size_t i = 0; i < src->n_prompts; i++) {
        const trace_prompt *p = &src->prompts[i];
        if (trace_add(dst, p->step, p->prompt_id, p->dp_rank, p->prompt_tokens, p->resp,
                      p->n_resp, e)) {
            dst->n_reward = r0;
            while (dst->n_prompts > n0) /* roll back: all or nothing */
                free(dst->prompts[--dst->n_prompts].resp);
            return -1;
        }
    }
    return 0;
}

size_t trace_n_responses(const trace *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        n += (size_t)t->prompts[i].n_resp;
    return n;
}

int64_t trace_n_tokens(const trace *t)
{
    int64_t s = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++)
            s += t->prompts[i].resp[j];
    return s;
}

/* -------------------------------------------------------------- line input */

/* Trace readers read through common/lines.h (bounded lines, no NUL bytes,
 * "-" for stdin); here only the "\r" of "\r\n" and a UTF-8 byte-order mark
 * on line 1 are dropped. */
typedef ts_lines line_reader;

static int lr_open(line_reader *r, const char *path, ts_err *e)
{
    return ts_lines_open(r, path, TS_LINES_STDIN, e);
}

static void lr_close(line_reader *r)
{
    ts_lines_close(r);
}

/* Reads the next line.  Returns 1, 0 at end of file, or -1 (read error, NUL
 * byte, over-long line). */
static int lr_next(line_reader *r, ts_err *e)
{
    int got = ts_lines_next(r, e);
    if (got <= 0)
        return got;
    size_t len = r->len;
    if (len && r->buf[len - 1] == '\r')
        r->buf[--len] = 0;
    if (r->lineno == 1 && len >= 3 && !memcmp(r->buf, "\xEF\xBB\xBF", 3)) {
        memmove(r->buf, r->buf + 3, len - 2);
        len -= 3;
    }
    r->len = len;
    return 1;
}

static int is_blank(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t')
            return 0;
    return 1;
}

/* Splits s in place at commas into *fields (grown as needed), trimming spaces
 * and tabs around each field.  Returns the field count, or -1 on allocation
 * failure. */
static long split_csv(char *s, char ***fields, size_t *cap)
{
    size_t n = 0;
    for (;;) {
        if (n == *cap) {
            size_t nc = *cap ? *cap * 2 : 8;
            char **f = realloc(*fields, nc * sizeof *f);
            if (!f)
                return -1;
            *fields = f;
            *cap = nc;
        }
        while (*s == ' ' || *s == '\t')
            s++;
        char *comma = strchr(s, ',');
        char *end = comma ? comma : s + strlen(s);
        while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        (*fields)[n++] = s;
        if (!comma) {
            *end = 0;
            return (long)n;
        }
        *end = 0;
        s = comma + 1;
    }
}

/* Sort key for whole-file checks: (a, b, index in file order). */
typedef struct key3 {
    int32_t a, b;
    size_t i;
} key3;

static int key3_cmp(const void *x, const void *y)
{
    const key3 *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

/* Sorts (step, prompt_id) keys of t; returns the array (caller frees) or NULL
 * on allocation failure. */
static key3 *sorted_ids(const trace *t, int with_id)
{
    key3 *k = malloc((t->n_prompts ? t->n_prompts : 1) * sizeof *k);
    if (!k)
        return NULL;
    for (size_t i = 0; i < t->n_prompts; i++)
        k[i] = (key3){t->prompts[i].step, with_id ? t->prompts[i].prompt_id : 0, i};
    qsort(k, t->n_prompts, sizeof *k, key3_cmp);
    return k;
}

/* A prompt being gathered from consecutive plain-CSV rows. */
typedef struct csv_group {
    int64_t v[5];      /* step, prompt_id, prompt_tokens, -, dp_rank of the first row */
    long line;         /* line of its first row */
    int32_t *resp;     /* response lengths so far, tokens */
    size_t n, cap;
} csv_group;

/* One load in progress: the reader, the trace being built, per-format scratch. */
typedef struct loader {
    line_reader r;
    trace *t;
    char **f;          /* CSV: fields of the current line */
    size_t fcap;
    long nf;           /* CSV: fields in the current line */
    long ncols;        /* CSV: columns in the header, 0 before it */
    long cp, cd;       /* Vidur: prefill and decode columns */
    int32_t *resp;     /* JSONL: one record's lengths, tokens */
    size_t resp_cap;
    csv_group g;       /* plain CSV: the prompt being gathered */
    long *lines;       /* plain CSV: first line of each prompt */
    size_t lines_cap;
} loader;

typedef int (*load_fn)(loader *L, ts_err *e);

static void loader_free(loader *L)
{
    trace_free(L->t);
    free(L->f);
    free(L->resp);
    free(L->g.resp);
    free(L->lines);
    lr_close(&L->r);
}

/* The shared read loop over the open reader L->r: the current line first when
 * `pending` (already split into L->f when `csv`), then every further
 * non-blank line goes to row() (split at commas first when `csv`), then end()
 * runs once (if any); an empty result is "no records".  Leaves the trace in
 * L->t; returns 0 or -1. */
static int load_body(loader *L, int pending, load_fn row, load_fn end, int csv, ts_err *e)
{
    const char *path = L->r.path;
    int got;
    if (!(L->t = trace_new()))
        return ts_errf(e, "%s: out of memory", path);
    if (pending && row(L, e))
        return -1;
    while ((got = lr_next(&L->r, e)) > 0) {
        if (is_blank(L->r.buf))
            continue;
        if (csv && (L->nf = split_csv(L->r.buf, &L->f, &L->fcap)) < 0)
            return ts_errf(e, "%s:%ld: out of memory", path, L->r.lineno);
        if (row(L, e))
            return -1;
    }
    if (got < 0 || (end && end(L, e)))
        return -1;
    if (L->t->n_prompts == 0)
        return ts_errf(e, "%s:%ld: no records", path, L->r.lineno ? L->r.lineno : 1);
    return 0;
}

/* Opens path, reads it with load_body and sets *out only on success; frees
 * everything else. */
static int load_run(const char *path, trace **out, load_fn row, load_fn end, int csv,
                    ts_err *e)
{
    loader L;
    memset(&L, 0, sizeof L);
    if (lr_open(&L.r, path, e))
        return -1;
    int rc = load_body(&L, 0, row, end, csv, e);
    if (rc == 0) {
        *out = L.t;
        L.t = NULL;
    }
    loader_free(&L);
    return rc;
}

/* ------------------------------------------------------------------- JSONL */

static const char *json_kind(const json_t *v)
{
    static const char *const kind[] = {"an object", "an array", "a string", "an integer",
                                       "a real number", "true", "false", "null"};
    int k = (int)json_typeof(v);
    return k >= 0 && k < 8 ? kind[k] : "something else";
}

const char *jsonl_kind(const json_t *v)
{
    return json_kind(v);
}

/* Reads integer field `key` in [lo, hi].  Returns 0 (stored), 1 (absent or
 * null, only when !required) or -1 with a message. */
static int json_int_field(const json_t *obj, const char *key, int required,
                          json_int_t lo, json_int_t hi, json_int_t *out,
                          const line_reader *r, ts_err *e)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || (json_is_null(v) && !required)) {
        if (required)
            return ts_errf(e, "%s:%ld: field '%s': missing", r->path, r->lineno, key);
        return 1;
    }
    if (!json_is_integer(v))
        return ts_errf(e, "%s:%ld: field '%s': expected an integer in %lld..%lld, got %s",
                       r->path, r->lineno, key, (long long)lo, (long long)hi, json_kind(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return ts_errf(e, "%s:%ld: field '%s': %lld is outside %lld..%lld", r->path,
                       r->lineno, key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

/* Which top-level field a JSON syntax error lies in.  Scans line s (len
 * bytes) as JSON tokens up to the offending one: the token that ends at byte
 * `pos` (jansson's error position), or the end of the line when the line
 * ended early (`at_end`).  When that token starts inside the value of a key
 * of the top-level object (in a nested array or object, or as the key's
 * scalar), that key goes into key; otherwise (between fields, outside the
 * object, in a key) key is left empty, since no field is at fault.  Keys that
 * are not plain printable ASCII of fewer than keysz bytes are not named. */
static void json_error_field(const char *s, size_t len, size_t pos, int at_end, char *key,
                             size_t keysz)
{
    enum { S_KEY, S_COLON, S_VALUE, S_AFTER, S_BAD } st = S_BAD;
    char cur[64] = "";  /* the top-level key whose value comes or came last */
    int depth = 0, hit = 0, hit_depth = 0, hit_st = S_BAD;
    char hit_key[64] = "";
    size_t i = 0;
    key[0] = 0;
    if (pos > len)
        pos = len;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            i++;
            continue;
        }
        if (!at_end && i >= pos)
            break;
        size_t start = i;
        /* the token's extent */
        if (c == '"') {
            for (i++; i < len && s[i] != '"'; i++)
                if (s[i] == '\\' && i + 1 < len)
                    i++;
            i = i < len ? i + 1 : len;
        } else if (strchr("{}[],:", c)) {
            i++;
        } else {
            while (i < len && !strchr(" \t\r\n{}[],:\"", s[i]))
                i++;
        }
        hit = 1; /* this token starts before pos: the offending one so far */
        hit_depth = depth;
        hit_st = st;
        memcpy(hit_key, cur, sizeof cur);
        /* the state after it */
        if (c == '{' || c == '[') {
            if (depth == 0)
                st = c == '{' ? S_KEY : S_BAD;
            else if (depth == 1 && st != S_VALUE)
                st = S_BAD;
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth > 0)
                depth--;
            st = depth == 1 ? S_AFTER : S_BAD;
        } else if (depth != 1) {
            continue;
        } else if (c == '"' && st == S_KEY) {
            size_t kl = i - start >= 2 ? i - start - 2 : 0;
            int plain = kl < sizeof cur && s[i - 1] == '"' && i - start >= 2;
            for (size_t m = start + 1; plain && m < start + 1 + kl; m++)
                plain = (unsigned char)s[m] >= 0x20 && (unsigned char)s[m] < 0x7f && s[m] != '\\';
            if (plain) {
                memcpy(cur, s + start + 1, kl);
                cur[kl] = 0;
            } else {
                cur[0] = 0;
            }
            st = S_COLON;
        } else if (c == ':') {
            st = st == S_COLON ? S_VALUE : S_BAD;
        } else if (c == ',') {
            st = st == S_AFTER ? S_KEY : S_BAD;
        } else {
            st = st == S_VALUE ? S_AFTER : S_BAD;
        }
    }
    if (at_end) { /* the offending "token" is the end of the line */
        hit = 1;
        hit_depth = depth;
        hit_st = st;
        memcpy(hit_key, cur, sizeof cur);
    }
    if (!hit || !(hit_depth >= 2 || (hit_depth == 1 && hit_st == S_VALUE)))
        return;
    size_t kl = strlen(hit_key);
    if (kl < keysz) {
        memcpy(key, hit_key, kl + 1);
    }
}

/* The key jansson names in a duplicate-key error ("... near '"step"'"), into
 * key (empty when it cannot be read back plainly). */
static void key_duplicate(const char *text, char *key, size_t keysz)
{
    key[0] = 0;
    const char *a = strstr(text, "near '\""), *b;
    if (!a)
        return;
    a += 7;
    b = strrchr(a, '"');
    if (!b || b[1] != '\'' || (size_t)(b - a) >= keysz)
        return;
    for (const char *m = a; m < b; m++)
        if ((unsigned char)*m < 0x20 || (unsigned char)*m >= 0x7f || *m == '\\' || *m == '"')
            return;
    memcpy(key, a, (size_t)(b - a));
    key[b - a] = 0;
}

/* Reports a line jansson could not parse: where (the file's line, jansson's
 * column in characters) and jansson's own reason, naming the field only when
 * the error lies in its value (json_error_field) or the key is given twice. */
int jsonl_syntax_error(const line_reader *r, const json_error_t *jerr, ts_err *e)
{
    char key[64] = "", where[48] = "", why[JSON_ERROR_TEXT_LENGTH], q[TS_QUOTE_BUF];
    enum json_error_code code = json_error_code(jerr);
    /* jansson quotes the token it stopped at ("... near 'TOKEN'"): the file
     * may be any JSON, so the message keeps the column, not the token */
    snprintf(why, sizeof why, "%s", jerr->text);
    char *near = strstr(why, " near ");
    if (near)
        *near = 0;
    if (code == json_error_out_of_memory)
        return ts_errf(e, "%s:%ld: out of memory parsing the record", r->path, r->lineno);
    if (jerr->column > 0)
        snprintf(where, sizeof where, " at column %d", jerr->column);
    if (code == json_error_duplicate_key) {
        key_duplicate(jerr->text, key, sizeof key);
        if (key[0])
            return ts_errf(e, "%s:%ld: field '%s': given twice (invalid JSON%s: %s)", r->path,
                           r->lineno, ts_quote(key, 32, q, sizeof q), where, why);
    } else {
        size_t pos = jerr->position > 0 ? (size_t)jerr->position : 0;
        json_error_field(r->buf, r->len, pos, code == json_error_premature_end_of_input, key,
                         sizeof key);
        if (key[0])
            return ts_errf(e, "%s:%ld: field '%s': invalid JSON%s: %s", r->path, r->lineno,
                           ts_quote(key, 32, q, sizeof q), where, why);
    }
    return ts_errf(e, "%s:%ld: invalid JSON%s: %s%s", r->path, r->lineno, where, why,
                   code == json_error_end_of_input_expected ? " (one JSON object per line)" : "");
}

/* Parses one JSONL record into the reusable buffer *resp. */
static int jsonl_record(loader *L, ts_err *e)
{
    const line_reader *r = &L->r;
    json_error_t jerr;
    json_t *root = json_loadb(r->buf, r->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return jsonl_syntax_error(r, &jerr, e);
    int rc = -1;
    json_int_t step = 0, dp = -1, input = 0;
    if (!json_is_object(root)) {
        ts_errf(e, "%s:%ld: expected one JSON object per line, got %s", r->path, r->lineno,
                json_kind(root));
        goto cleanup;
    }
    if (json_int_field(root, "step", 1, 0, INT32_MAX, &step, r, e) < 0 ||
        json_int_field(root, "dp_rank", 0, -1, INT32_MAX, &dp, r, e) < 0 ||
        json_int_field(root, "input", 1, 0, TRACE_MAX_TOKENS, &input, r, e) < 0)
        goto cleanup;
    const json_t *out = json_object_get(root, "output");
    if (!out) {
        ts_errf(e, "%s:%ld: field 'output': missing", r->path, r->lineno);
        goto cleanup;
    }
    if (!json_is_array(out) || json_array_size(out) == 0) {
        ts_errf(e, "%s:%ld: field 'output': expected a non-empty array of positive "
                   "integers, got %s", r->path, r->lineno,
                json_is_array(out) ? "an empty array" : json_kind(out));
        goto cleanup;
    }
    size_t n = json_array_size(out);
    if (n > INT32_MAX) {
        ts_errf(e, "%s:%ld: field 'output': too many responses (%zu)", r->path, r->lineno, n);
        goto cleanup;
    }
    if (n > L->resp_cap) {
        int32_t *nb = realloc(L->resp, n * sizeof *nb);
        if (!nb) {
            ts_errf(e, "%s:%ld: out of memory", r->path, r->lineno);
            goto cleanup;
        }
        L->resp = nb;
        L->resp_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(out, i);
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
        if (!json_is_integer(v) || x < 1 || x > TRACE_MAX_TOKENS) {
            if (json_is_integer(v))
                ts_errf(e, "%s:%ld: field 'output': element %zu is %lld; expected an array "
                           "of positive integers (1..%d)", r->path, r->lineno, i,
                        (long long)x, TRACE_MAX_TOKENS);
            else
                ts_errf(e, "%s:%ld: field 'output': element %zu is %s; expected an array "
                           "of positive integers (1..%d)", r->path, r->lineno, i,
                        json_kind(v), TRACE_MAX_TOKENS);
            goto cleanup;
        }
        L->resp[i] = (int32_t)x;
    }
    if (trace_add(L->t, (int32_t)step, 0, (int32_t)dp, (int32_t)input, L->resp, (int32_t)n,
                  e)) {
        ts_err_prefix(e, "%s:%ld: ", r->path, r->lineno);
        goto cleanup;
    }
    rc = 0;
cleanup:
    json_decref(root);
    return rc;
}

/* Numbers prompts 0, 1, ... within each step, in file order. */
static int jsonl_end(loader *L, ts_err *e)
{
    trace *t = L->t;
    key3 *k = sorted_ids(t, 0);
    if (!k)
        return ts_errf(e, "%s: out of memory", L->r.path);
    int32_t next = 0;
    for (size_t i = 0; i < t->n_prompts; i++) {
        if (i == 0 || k[i].a != k[i - 1].a)
            next = 0;
        t->prompts[k[i].i].prompt_id = next++;
    }
    free(k);
    return 0;
}

int trace_load_jsonl(const char *path, trace **out, ts_err *e)
{
    return load_run(path, out, jsonl_record, jsonl_end, 0, e);
}

/* --------------------------------------------------------------- plain CSV */

static const char *const csv_cols[5] = {"step", "prompt_id", "prompt_tokens",
                                        "response_tokens", "dp_rank"};
static const int64_t csv_lo[5] = {0, 0, 0, 1, -1};
static const int64_t csv_hi[5] = {INT32_MAX, INT32_MAX, TRACE_MAX_TOKENS, TRACE_MAX_TOKENS,
                                  INT32_MAX};

/* Number of columns (4 or 5) when the fields are the plain CSV header, else 0. */
static int csv_header_cols(char **f, long n)
{
    if (n != 4 && n != 5)
        return 0;
    for (long i = 0; i < n; i++)
        if (strcmp(f[i], csv_cols[i]))
            return 0;
    return (int)n;
}

static int csv_flush(loader *L, ts_err *e)
{
    csv_group *g = &L->g;
    trace *t = L->t;
    if (g->n == 0)
        return 0;
    if (g->n > INT32_MAX)
        return ts_errf(e, "%s:%ld: too many responses for one prompt", L->r.path, g->line);
    if (trace_add(t, (int32_t)g->v[0], (int32_t)g->v[1], (int32_t)g->v[4],
                  (int32_t)g->v[2], g->resp, (int32_t)g->n, e))
        return ts_err_prefix(e, "%s:%ld: ", L->r.path, g->line);
    if (t->n_prompts > L->lines_cap) {
        size_t nc = L->lines_cap ? L->lines_cap * 2 : 64;
        long *nl = realloc(L->lines, nc * sizeof *nl);
        if (!nl)
            return ts_errf(e, "%s: out of memory", L->r.path);
        L->lines = nl;
        L->lines_cap = nc;
    }
    L->lines[t->n_prompts - 1] = g->line;
    g->n = 0;
    return 0;
}

static int csv_row(loader *L, ts_err *e)
{
    const line_reader *r = &L->r;
    char **f = L->f;
    long nf = L->nf, ncols = L->ncols;
    csv_group *g = &L->g;
    if (!ncols) {
        if (!(L->ncols = csv_header_cols(f, nf)))
            return ts_errf(e, "%s:%ld: field 'header': expected "
                              "step,prompt_id,prompt_tokens,response_tokens[,dp_rank]",
                           r->path, r->lineno);
        return 0;
    }
    if (nf < ncols)
        return ts_errf(e, "%s:%ld: field '%s': missing (expected %ld fields, got %ld)",
                       r->path, r->lineno, csv_cols[nf], ncols, nf);
    if (nf > ncols)
        return ts_errf(e, "%s:%ld: field #%ld: unexpected (the header has %ld columns)",
                       r->path, r->lineno, ncols + 1, ncols);
    int64_t v[5] = {0, 0, 0, 0, -1};
    char q[TS_QUOTE_BUF];
    for (long c = 0; c < ncols; c++)
        if (ts_parse_i64(f[c], csv_lo[c], csv_hi[c], &v[c]))
            return ts_errf(e, "%s:%ld: field '%s': expected an integer in %lld..%lld, got "
                              "'%s'", r->path, r->lineno, csv_cols[c],
                           (long long)csv_lo[c], (long long)csv_hi[c],
                           ts_quote(f[c], TS_QUOTE_MAX, q, sizeof q));
    if (g->n > 0 && v[0] == g->v[0] && v[1] == g->v[1]) {
        for (int c = 2; c <= 4; c += 2)
            if (v[c] != g->v[c])
                return ts_errf(e, "%s:%ld: field '%s': %lld differs from %lld on line %ld "
                                  "for the same prompt", r->path, r->lineno, csv_cols[c],
                               (long long)v[c], (long long)g->v[c], g->line);
    } else {
        if (csv_flush(L, e))
            return -1;
        memcpy(g->v, v, sizeof v);
        g->line = r->lineno;
    }
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 16;
        int32_t *nb = realloc(g->resp, nc * sizeof *nb);
        if (!nb)
            return ts_errf(e, "%s:%ld: out of memory", r->path, r->lineno);
        g->resp = nb;
        g->cap = nc;
    }
    g->resp[g->n++] = (int32_t)v[3];
    return 0;
}

/* Flushes the last prompt, then rejects a (step, prompt_id) seen twice,
 * reporting the earliest later occurrence. */
static int csv_end(loader *L, ts_err *e)
{
    if (csv_flush(L, e))
        return -1;
    const trace *t = L->t;
    key3 *k = sorted_ids(t, 1);
    if (!k)
        return ts_errf(e, "%s: out of memory", L->r.path);
    long bad = 0, first = 0;
    for (size_t i = 1; i < t->n_prompts; i++)
        if (k[i].a == k[i - 1].a && k[i].b == k[i - 1].b &&
            (!bad || L->lines[k[i].i] < bad)) {
            bad = L->lines[k[i].i];
            first = L->lines[k[i - 1].i];
        }
    free(k);
    if (bad)
        return ts_errf(e, "%s:%ld: field 'prompt_id': this (step, prompt_id) already "
                          "appeared at line %ld; rows of one prompt must be consecutive",
                       L->r.path, bad, first);
    return 0;
}

int trace_load_csv(const char *path, trace **out, ts_err *e)
{
    return load_run(path, out, csv_row, csv_end, 1, e);
}

/* --------------------------------------------------------------- Vidur CSV */

/* Finds the two Vidur columns; -1 when absent (or -2 when duplicated). */
static void vidur_cols(char **f, long nf, long *prefill, long *decode)
{
    *prefill = *decode = -1;
    for (long i = 0; i < nf; i++) {
        if (!strcmp(f[i], "num_prefill_tokens"))
            *prefill = *prefill == -1 ? i : -2;
        else if (!strcmp(f[i], "num_decode_tokens"))
            *decode = *decode == -1 ? i : -2;
    }
}

/* Integral token counts; "54.0" is accepted (pandas writes floats), 54.5 not. */
static int vidur_value(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (ts_parse_i64(s, lo, hi, out) == 0)
        return 0;
    double d;
    if (ts_parse_double(s, (double)lo, (double)hi, &d) || d != floor(d))
        return -1;
    *out = (int64_t)d;
    return 0;
}

static int vidur_row(loader *L, ts_err *e)
{
    const char *path = L->r.path;
    long line = L->r.lineno;
    if (!L->ncols) {
        vidur_cols(L->f, L->nf, &L->cp, &L->cd);
        const char *bad = L->cp < 0 ? "num_prefill_tokens"
                        : L->cd < 0 ? "num_decode_tokens" : NULL;
        if (bad)
            return ts_errf(e, "%s:%ld: field '%s': %s in the header", path, line, bad,
                           (L->cp == -2 || L->cd == -2) ? "column repeated" : "column missing");
        L->ncols = L->nf;
        return 0;
    }
    if (L->nf != L->ncols)
        return ts_errf(e, "%s:%ld: field '%s': expected %ld fields as in the header, got %ld",
                       path, line, L->nf < L->ncols ? "num_decode_tokens" : "(extra)",
                       L->ncols, L->nf);
    int64_t pre, dec;
    char q[TS_QUOTE_BUF];
    if (vidur_value(L->f[L->cp], 0, TRACE_MAX_TOKENS, &pre))
        return ts_errf(e, "%s:%ld: field 'num_prefill_tokens': expected an integer in 0..%d, "
                          "got '%s'", path, line, TRACE_MAX_TOKENS,
                       ts_quote(L->f[L->cp], TS_QUOTE_MAX, q, sizeof q));
    if (vidur_value(L->f[L->cd], 1, TRACE_MAX_TOKENS, &dec))
        return ts_errf(e, "%s:%ld: field 'num_decode_tokens': expected an integer in 1..%d, "
                          "got '%s'", path, line, TRACE_MAX_TOKENS,
                       ts_quote(L->f[L->cd], TS_QUOTE_MAX, q, sizeof q));
    if (L->t->n_prompts >= INT32_MAX)
        return ts_errf(e, "%s:%ld: too many requests", path, line);
    int32_t len = (int32_t)dec;
    if (trace_add(L->t, 0, (int32_t)L->t->n_prompts, -1, (int32_t)pre, &len, 1, e))
        return ts_err_prefix(e, "%s:%ld: ", path, line);
    return 0;
}

int trace_load_vidur(const char *path, trace **out, ts_err *e)
{
    return load_run(path, out, vidur_row, NULL, 1, e);
}

/* ------------------------------------------------------ detection, writing */

/* Reads the input once: the first non-blank line decides the format and is
 * then the reader's first line, so a pipe, a FIFO or stdin ("-") loads whole.
 * A reward-timings record there (traces/reward.h) is read as such when
 * `reward` is set (name_step: the step its file's name gives), else refused
 * with a message that says what it is. */
static int load_detect(const char *path, int reward, int32_t name_step, trace **out, ts_err *e)
{
    loader L;
    memset(&L, 0, sizeof L);
    if (lr_open(&L.r, path, e))
        return -1;
    int got, rc = -1;
    while ((got = lr_next(&L.r, e)) > 0 && is_blank(L.r.buf))
        ;
    if (got < 0)
        goto cleanup;
    if (got == 0) {
        ts_errf(e, "%s:%ld: no records", L.r.path, L.r.lineno ? L.r.lineno : 1);
        goto cleanup;
    }
    const char *s = L.r.buf + strspn(L.r.buf, " \t");
    long cp, cd;
    if (*s == '{' && reward_line_is_record(L.r.buf, L.r.len)) {
        if (!reward)
            ts_errf(e, "%s:%ld: field 'reward_time_s': a reward-timings record, not a "
                       "response-length trace (give its directory, or the file as "
                       "trace.reward_file)", L.r.path, L.r.lineno);
        else if (!(L.t = trace_new()))
            ts_errf(e, "%s: out of memory", L.r.path);
        else
            rc = reward_read(&L.r, 1, name_step, L.t, e);
    } else if (*s == '{') {
        rc = load_body(&L, 1, jsonl_record, jsonl_end, 0, e);
    } else if ((L.nf = split_csv(L.r.buf, &L.f, &L.fcap)) < 0) {
        ts_errf(e, "%s:%ld: out of memory", L.r.path, L.r.lineno);
    } else if (csv_header_cols(L.f, L.nf)) {
        rc = load_body(&L, 1, csv_row, csv_end, 1, e);
    } else if (vidur_cols(L.f, L.nf, &cp, &cd), cp != -1 && cd != -1) {
        rc = load_body(&L, 1, vidur_row, NULL, 1, e);
    } else {
        ts_errf(e, "%s:%ld: field 'header': unknown trace format (expected JSONL records, a "
                   "step,prompt_id,prompt_tokens,response_tokens CSV or a Vidur CSV with "
                   "num_prefill_tokens,num_decode_tokens)", L.r.path, L.r.lineno);
    }
    if (rc == 0) {
        *out = L.t;
        L.t = NULL;
    }
cleanup:
    loader_free(&L);
    return rc;
}

int trace_load(const char *path, trace **out, ts_err *e)
{
    return load_detect(path, 0, -1, out, e);
}

int trace_load_any(const char *path, int32_t name_step, trace **out, ts_err *e)
{
    return load_detect(path, 1, name_step, out, e);
}

int trace_write_csv(const trace *t, const char *path, ts_err *e)
{
    if (t->n_prompts == 0)
        return ts_errf(e, "%s: cannot write an empty trace", path);
    /* (step, prompt_id) must be unique, or reading back would merge prompts */
    key3 *k = sorted_ids(t, 1);
    if (!k)
        return ts_errf(e, "%s: out of memory", path);
    for (size_t i = 1; i < t->n_prompts; i++)
        if (k[i].a == k[i - 1].a && k[i].b == k[i - 1].b) {
            int32_t s = k[i].a, p = k[i].b;
            free(k);
            return ts_errf(e, "%s: cannot write: step %d has prompt_id %d twice (the CSV "
                              "would merge them)", path, s, p);
        }
    free(k);
    int dp = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        dp |= t->prompts[i].dp_rank != -1;
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    fprintf(a.f, "step,prompt_id,prompt_tokens,response_tokens%s\n", dp ? ",dp_rank" : "");
    for (size_t i = 0; i < t->n_prompts && !ferror(a.f); i++) {
        const trace_prompt *p = &t->prompts[i];
        for (int32_t j = 0; j < p->n_resp; j++) {
            if (dp)
                fprintf(a.f, "%d,%d,%d,%d,%d\n", p->step, p->prompt_id, p->prompt_tokens,
                        p->resp[j], p->dp_rank);
            else
                fprintf(a.f, "%d,%d,%d,%d\n", p->step, p->prompt_id, p->prompt_tokens,
                        p->resp[j]);
        }
    }
    return ts_atomic_commit(&a, e);
}
