/*
 * Private to traces/trace.c, traces/trace_jsonl.c and traces/trace_csv.c:
 * the load machinery the three trace readers share.  trace.c owns the line
 * input (ts_lines with "\r" and a byte-order mark dropped), the read loop
 * (load_body, tr_load_run) and the sorted (step, prompt_id) index of the
 * whole-file checks; trace_jsonl.c and trace_csv.c define the per-format row
 * and end functions that trace.c's format detection (load_detect) calls.
 * Nothing outside those three files includes this header.
 */
#ifndef TS_TRACE_IMPL_H
#define TS_TRACE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/lines.h"
#include "traces/trace.h"

/* Trace readers read through common/lines.h (bounded lines, no NUL bytes,
 * "-" for stdin); lr_next (trace.c) drops only the "\r" of "\r\n" and a
 * UTF-8 byte-order mark on line 1. */
typedef ts_lines line_reader;

/* Sort key for whole-file checks: (a, b, index in file order). */
typedef struct key3 {
    int32_t a, b;
    size_t i;
} key3;

/* Sorts (step, prompt_id) keys of t; returns the array (caller frees) or NULL
 * on allocation failure.  (trace.c) */
key3 *tr_sorted_ids(const trace *t, int with_id);

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
    long nrec;         /* JSONL: records read */
    int multi;         /* JSONL: the records are multi-turn (trace_turns.c) */
    struct mt_group *mt; /* JSONL multi-turn: the prompt group being gathered */
} loader;

typedef int (*load_fn)(loader *L, ts_err *e);

/* Opens path, reads it with load_body and sets *out only on success; frees
 * everything else.  (trace.c) */
int tr_load_run(const char *path, trace **out, load_fn row, load_fn end, int csv, ts_err *e);

/* JSONL (trace_jsonl.c): one record per line, then prompt ids numbered. */
int tr_jsonl_record(loader *L, ts_err *e);
int tr_jsonl_end(loader *L, ts_err *e);

/* Multi-turn JSONL (trace_turns.c): whether a record is one (it has "turns",
 * "tool_calls" or "turn_count"); one record (a trajectory) gathered into its
 * prompt group (consecutive records of one step and prompt_group_id); the
 * end (last group flushed, a group id repeated after others refused); the
 * gathering state's destructor (NULL-safe). */
struct json_t;
int tr_turns_is_record(const struct json_t *root);
int tr_turns_record(loader *L, const struct json_t *root, ts_err *e);
int tr_turns_end(loader *L, ts_err *e);
void tr_turns_free(struct mt_group *g);

/* Plain CSV (trace_csv.c): the header's column count (4 or 5, else 0), one
 * row, and the end (last prompt flushed, repeated (step, prompt_id) refused). */
int tr_csv_header_cols(char **f, long n);
int tr_csv_row(loader *L, ts_err *e);
int tr_csv_end(loader *L, ts_err *e);

/* Vidur CSV (trace_csv.c): the two columns' indices (-1 absent, -2
 * repeated), and one row. */
void tr_vidur_cols(char **f, long nf, long *prefill, long *decode);
int tr_vidur_row(loader *L, ts_err *e);

#endif
