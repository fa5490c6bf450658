/*
 * Bounded line input: one stream per reader, read once, front to back, one
 * byte at a time through stdio's buffer (getc_unlocked), into a line buffer
 * that doubles up to TS_LINE_MAX + 1 bytes and is reused for every line.
 * A NUL byte or the byte after TS_LINE_MAX stops the read at once, so
 * /dev/zero or a file with no newline costs at most TS_LINE_MAX bytes of
 * memory and fails with a message instead of growing without end.  Readers
 * run once per input file, so byte-wise reading is fast enough (about
 * 1 ns a byte) and keeps the limit exact.
 */
#include "common/lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ts_lines_open(ts_lines *r, const char *path, int flags, ts_err *e)
{
    memset(r, 0, sizeof *r);
    if ((flags & TS_LINES_STDIN) && !strcmp(path, "-")) {
        r->f = stdin;
        r->path = "<stdin>";
        return 0;
    }
    r->path = path;
    if (!(r->f = fopen(path, "r")))
        return ts_errf(e, "%s: cannot open: %s", path, strerror(errno));
    r->own = 1;
    return 0;
}

/* Grows r->buf to hold at least want bytes (want <= TS_LINE_MAX + 1). */
static int grow(ts_lines *r, size_t want, ts_err *e)
{
    size_t cap = r->cap ? r->cap : 256;
    while (cap < want)
        cap *= 2;
    if (cap > (size_t)TS_LINE_MAX + 1)
        cap = (size_t)TS_LINE_MAX + 1;
    char *b = realloc(r->buf, cap);
    if (!b)
        return ts_errf(e, "%s:%ld: out of memory (a line of %zu bytes)", r->path, r->lineno,
                       want);
    r->buf = b;
    r->cap = cap;
    return 0;
}

int ts_lines_next(ts_lines *r, ts_err *e)
{
    size_t n = 0;
    int c, rc = 1;
    if (!r->f)
        return 0;
    r->lineno++;
    errno = 0;
    flockfile(r->f);
    for (;;) {
        c = getc_unlocked(r->f);
        if (c == EOF || c == '\n')
            break;
        if (c == 0) {
            rc = ts_errf(e, "%s:%ld: binary data (a NUL byte at column %zu); expected text",
                         r->path, r->lineno, n + 1);
            break;
        }
        if (n == (size_t)TS_LINE_MAX) {
            rc = ts_errf(e, "%s:%ld: line longer than %ld bytes (the limit of a line)",
                         r->path, r->lineno, TS_LINE_MAX);
            break;
        }
        if (n + 1 >= r->cap && grow(r, n + 2, e)) {
            rc = -1;
            break;
        }
        r->buf[n++] = (char)c;
    }
    int failed = c == EOF && ferror(r->f);
    funlockfile(r->f);
    if (rc < 0)
        return -1;
    if (failed)
        return ts_errf(e, "%s:%ld: read error: %s", r->path, r->lineno,
                       strerror(errno ? errno : EIO));
    if (c == EOF && n == 0) {
        r->lineno--; /* no line here: the input ended after the last "\n" */
        return 0;
    }
    if (!r->buf && grow(r, 1, e))
        return -1;
    r->buf[n] = 0;
    r->len = n;
    return 1;
}

void ts_lines_close(ts_lines *r)
{
    if (r->f && r->own)
        fclose(r->f);
    free(r->buf);
    memset(r, 0, sizeof *r);
}
