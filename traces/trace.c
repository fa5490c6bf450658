/*
 * Trace container, format detection and the CSV writer.  A trace is a flat,
 * growable array of prompts in file order; each prompt owns a copy of its
 * response lengths.  Three readers feed it (RL rollout JSONL through jansson,
 * traces/trace_jsonl.c; the plain CSV that trace_write_csv produces and Vidur
 * request CSVs, traces/trace_csv.c), trace_load picks one from the content
 * (it refuses a reward-timings record, traces/reward.h, saying so;
 * trace_load_any reads one as reward timings), and trace_write_csv writes the
 * plain CSV back.  A trace also holds its steps' recorded reward times
 * (trace.reward), which trace_append merges.  This file also holds what the
 * readers share (traces/trace_impl.h): the line input, the read loop and the
 * sorted (step, prompt_id) index.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/lines.h"
#include "common/util.h"
#include "traces/reward.h"
#include "traces/trace_impl.h"

/* ---------------------------------------------------------------- container */

trace *trace_new(void)
{
    return calloc(1, sizeof(trace));
}

void trace_free(trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_prompts; i++) {
        free(t->prompts[i].resp);
        free(t->prompts[i].turn0);
        free(t->prompts[i].turns);
    }
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
                                                n_resp, copy, NULL, NULL};
    return 0;
}

int trace_add_turns(trace *t, int32_t step, int32_t prompt_id, int32_t dp_rank,
                    int32_t prompt_tokens, const int32_t *resp, int32_t n_resp,
                    const int32_t *n_turns, const trace_turn *turns, ts_err *e)
{
    size_t nt = 0;
    for (int32_t j = 0; j < n_resp; j++) {
        if (n_turns[j] < 1)
            return ts_errf(e, "trace_add_turns: response %d has %d turns", j, n_turns[j]);
        nt += (size_t)n_turns[j];
    }
    if (nt > INT32_MAX)
        return ts_errf(e, "trace_add_turns: too many turns (%zu)", nt);
    for (size_t k = 0; k < nt; k++) {
        const trace_turn *u = &turns[k];
        if (u->context < 1 || u->context > TRACE_MAX_TOKENS || u->cached < 0 ||
            u->cached > u->context || u->gen < 1 || u->gen > TRACE_MAX_TOKENS ||
            u->tools < 0 || u->append < 0 || u->append > TRACE_MAX_TOKENS || !(u->tool_s >= 0))
            return ts_errf(e, "trace_add_turns: turn %zu is out of range", k);
    }
    if (trace_add(t, step, prompt_id, dp_rank, prompt_tokens, resp, n_resp, e))
        return -1;
    trace_prompt *p = &t->prompts[t->n_prompts - 1];
    p->turn0 = malloc(((size_t)n_resp + 1) * sizeof *p->turn0);
    p->turns = malloc(nt * sizeof *p->turns);
    if (!p->turn0 || !p->turns) {
        free(p->turn0);
        free(p->turns);
        free(p->resp);
        t->n_prompts--;
        return ts_errf(e, "trace: out of memory (%zu turns)", nt);
    }
    p->turn0[0] = 0;
    for (int32_t j = 0; j < n_resp; j++)
        p->turn0[j + 1] = p->turn0[j] + n_turns[j];
    memcpy(p->turns, turns, nt * sizeof *p->turns);
    return 0;
}

int trace_add_prompt(trace *t, const trace_prompt *p, ts_err *e)
{
    if (!p->turn0)
        return trace_add(t, p->step, p->prompt_id, p->dp_rank, p->prompt_tokens, p->resp,
                         p->n_resp, e);
    int32_t *nt = malloc((size_t)p->n_resp * sizeof *nt);
    if (!nt)
        return ts_errf(e, "trace: out of memory (%d responses)", p->n_resp);
    for (int32_t j = 0; j < p->n_resp; j++)
        nt[j] = p->turn0[j + 1] - p->turn0[j];
    int rc = trace_add_turns(t, p->step, p->prompt_id, p->dp_rank, p->prompt_tokens, p->resp,
                             p->n_resp, nt, p->turns, e);
    free(nt);
    return rc;
}

int trace_has_turns(const trace *t)
{
    for (size_t i = 0; i < t->n_prompts; i++)
        if (t->prompts[i].turn0)
            return 1;
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
        if (trace_add_prompt(dst, p, e)) {
            dst->n_reward = r0;
            while (dst->n_prompts > n0) { /* roll back: all or nothing */
                trace_prompt *q = &dst->prompts[--dst->n_prompts];
                free(q->resp);
                free(q->turn0);
                free(q->turns);
            }
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

/* (line_reader, ts_lines through common/lines.h: see traces/trace_impl.h.) */

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

/* Orders key3 (traces/trace_impl.h) by a, b, then file order. */
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
key3 *tr_sorted_ids(const trace *t, int with_id)
{
    key3 *k = malloc((t->n_prompts ? t->n_prompts : 1) * sizeof *k);
    if (!k)
        return NULL;
    for (size_t i = 0; i < t->n_prompts; i++)
        k[i] = (key3){t->prompts[i].step, with_id ? t->prompts[i].prompt_id : 0, i};
    qsort(k, t->n_prompts, sizeof *k, key3_cmp);
    return k;
}

/* ------------------------------------------------------------ read loop */

static void loader_free(loader *L)
{
    trace_free(L->t);
    free(L->f);
    free(L->resp);
    free(L->g.resp);
    free(L->lines);
    tr_turns_free(L->mt);
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
int tr_load_run(const char *path, trace **out, load_fn row, load_fn end, int csv, ts_err *e)
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
        rc = load_body(&L, 1, tr_jsonl_record, tr_jsonl_end, 0, e);
    } else if ((L.nf = split_csv(L.r.buf, &L.f, &L.fcap)) < 0) {
        ts_errf(e, "%s:%ld: out of memory", L.r.path, L.r.lineno);
    } else if (tr_csv_header_cols(L.f, L.nf)) {
        rc = load_body(&L, 1, tr_csv_row, tr_csv_end, 1, e);
    } else if (tr_vidur_cols(L.f, L.nf, &cp, &cd), cp != -1 && cd != -1) {
        rc = load_body(&L, 1, tr_vidur_row, NULL, 1, e);
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
    key3 *k = tr_sorted_ids(t, 1);
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
