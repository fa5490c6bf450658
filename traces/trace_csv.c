/*
 * The two CSV readers of traces.  Plain CSV (trace_load_csv): the header
 * step,prompt_id,prompt_tokens,response_tokens[,dp_rank] that trace_write_csv
 * writes, one row per response; consecutive rows with the same (step,
 * prompt_id) are one prompt's group, and the same (step, prompt_id) appearing
 * again after other rows is an error (rows of one prompt must be
 * consecutive).  Vidur request CSV (trace_load_vidur): any header with
 * num_prefill_tokens and num_decode_tokens, one request per row, prompt id
 * the row index, step 0; integral floats ("54.0") are accepted.  The read
 * loop, the line input, the field splitting and format detection are in
 * traces/trace.c (traces/trace_impl.h).
 */
#include "traces/trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "traces/trace_impl.h"

/* --------------------------------------------------------------- plain CSV */

static const char *const csv_cols[5] = {"step", "prompt_id", "prompt_tokens",
                                        "response_tokens", "dp_rank"};
static const int64_t csv_lo[5] = {0, 0, 0, 1, -1};
static const int64_t csv_hi[5] = {INT32_MAX, INT32_MAX, TRACE_MAX_TOKENS, TRACE_MAX_TOKENS,
                                  INT32_MAX};

/* Number of columns (4 or 5) when the fields are the plain CSV header, else 0. */
int tr_csv_header_cols(char **f, long n)
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

int tr_csv_row(loader *L, ts_err *e)
{
    const line_reader *r = &L->r;
    char **f = L->f;
    long nf = L->nf, ncols = L->ncols;
    csv_group *g = &L->g;
    if (!ncols) {
        if (!(L->ncols = tr_csv_header_cols(f, nf)))
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
int tr_csv_end(loader *L, ts_err *e)
{
    if (csv_flush(L, e))
        return -1;
    const trace *t = L->t;
    key3 *k = tr_sorted_ids(t, 1);
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
    return tr_load_run(path, out, tr_csv_row, tr_csv_end, 1, e);
}

/* --------------------------------------------------------------- Vidur CSV */

/* Finds the two Vidur columns; -1 when absent (or -2 when duplicated). */
void tr_vidur_cols(char **f, long nf, long *prefill, long *decode)
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

int tr_vidur_row(loader *L, ts_err *e)
{
    const char *path = L->r.path;
    long line = L->r.lineno;
    if (!L->ncols) {
        tr_vidur_cols(L->f, L->nf, &L->cp, &L->cd);
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
    return tr_load_run(path, out, tr_vidur_row, NULL, 1, e);
}
