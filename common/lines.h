/*
 * Bounded line input for every text reader (traces, batch traces, Vidur
 * profiles, calibration CSVs).
 *
 * A reader opens its path once and reads it front to back, so pipes, FIFOs
 * and process substitutions (`--trace <(cmd)`) work as files do; with
 * TS_LINES_STDIN the path "-" is standard input.  No line may be longer than
 * TS_LINE_MAX bytes and no line may hold a NUL byte: either stops the read
 * with "file:line: ..." before the line is kept, so memory per line is
 * bounded whatever the input (a file with no newline, /dev/zero).
 */
#ifndef TS_LINES_H
#define TS_LINES_H

#include <stddef.h>
#include <stdio.h>

#include "common/err.h"

/* The longest line a reader accepts, bytes (without its "\n"). */
#define TS_LINE_MAX (16L * 1024 * 1024)

/* ts_lines_open() flags. */
#define TS_LINES_STDIN 1 /* the path "-" means standard input */

typedef struct ts_lines {
    FILE *f;            /* the stream being read */
    const char *path;   /* its name in messages: the path, or "<stdin>" */
    char *buf;          /* the current line, NUL-terminated, without its "\n" */
    size_t len;         /* bytes in buf, <= TS_LINE_MAX */
    size_t cap;         /* bytes allocated for buf */
    long lineno;        /* 1-based number of the current line; 0 before the first */
    int own;            /* 1 when f was opened here (ts_lines_close closes it) */
} ts_lines;

/* Opens path for reading once (with TS_LINES_STDIN, "-" is stdin, which is
 * read but never closed).  r keeps a pointer to path: it must outlive r.
 * Returns 0, or -1 with "path: cannot open: reason". */
int ts_lines_open(ts_lines *r, const char *path, int flags, ts_err *e);

/* Reads the next line into r->buf (any "\r" before the "\n" is left for the
 * caller).  Returns 1, 0 at the end of the input, or -1 with
 * "file:line: ..." on a read error, a NUL byte or a line longer than
 * TS_LINE_MAX bytes.  A last line without "\n" is a line. */
int ts_lines_next(ts_lines *r, ts_err *e);

/* Closes the stream (unless it is stdin) and frees the buffer; a closed or
 * zeroed r is a no-op.  Cannot fail. */
void ts_lines_close(ts_lines *r);

#endif
