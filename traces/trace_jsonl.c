/*
 * The RL rollout JSONL reader of traces (trace_load_jsonl): one JSON object
 * per line, parsed by jansson, with "step" and "input" required, "dp_rank"
 * optional and "output" the non-empty array of response lengths.  Prompt ids
 * are the running index of the prompt within its step, in file order
 * (PolyTrace's local_index restarts at 0 on every dp_rank, so it is not
 * unique within a step and is ignored); tr_jsonl_end numbers them once the file
 * is read.  Also what the JSONL readers of traces/ share (traces/jsonl.h):
 * how a JSON value's kind reads in a message and the one report of a line
 * jansson could not parse, naming the field only when the error lies in its
 * value.  The read loop, the line input and format detection are in
 * traces/trace.c (traces/trace_impl.h).
 */
#include "traces/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/util.h"
#include "traces/jsonl.h"
#include "traces/trace_impl.h"

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

int jsonl_int_field(const json_t *obj, const char *key, int required, json_int_t lo,
                    json_int_t hi, json_int_t *out, const ts_lines *r, ts_err *e)
{
    return json_int_field(obj, key, required, lo, hi, out, r, e);
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
int tr_jsonl_record(loader *L, ts_err *e)
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
    int multi = tr_turns_is_record(root);
    if (L->nrec > 0 && multi != L->multi) {
        ts_errf(e, "%s:%ld: field '%s': a %s record after %s ones (one format per file)",
                r->path, r->lineno, multi ? "turns" : "output",
                multi ? "multi-turn" : "single-turn", multi ? "single-turn" : "multi-turn");
        goto cleanup;
    }
    L->multi = multi;
    L->nrec++;
    if (multi) {
        rc = tr_turns_record(L, root, e);
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
int tr_jsonl_end(loader *L, ts_err *e)
{
    trace *t = L->t;
    if (L->multi && tr_turns_end(L, e))
        return -1;
    key3 *k = tr_sorted_ids(t, 0);
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
    return tr_load_run(path, out, tr_jsonl_record, tr_jsonl_end, 0, e);
}
