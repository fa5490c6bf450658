/*
 * Error messages: a fixed-size buffer per call chain, filled by the function
 * that first sees the problem and optionally prefixed by its callers.  No
 * allocation, so reporting an out-of-memory error cannot itself fail.  The
 * buffer (TS_ERR_MAX) holds paths up to PATH_MAX whole; a longer message is
 * cut with a visible "..." at the end.
 */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ends a message that filled all of msg (size bytes) with TS_ERR_CUT. */
static void mark_cut(char *msg, size_t size)
{
    size_t k = sizeof TS_ERR_CUT; /* with its NUL */
    memcpy(msg + size - k, TS_ERR_CUT, k);
}

int ts_errf(ts_err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof e->msg)
        mark_cut(e->msg, sizeof e->msg);
    return -1;
}

int ts_err_prefix(ts_err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    char head[TS_ERR_MAX], old[TS_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    old[sizeof old - 1] = 0;
    size_t hl = strlen(head), ol = strlen(old);
    int cut = n >= (int)sizeof head || hl + ol >= sizeof e->msg;
    if (hl >= sizeof e->msg)
        hl = sizeof e->msg - 1;
    memcpy(e->msg, head, hl);
    if (hl + ol >= sizeof e->msg)
        ol = sizeof e->msg - 1 - hl;
    memcpy(e->msg + hl, old, ol);
    e->msg[hl + ol] = 0;
    if (cut)
        mark_cut(e->msg, sizeof e->msg);
    return -1;
}

void ts_check_failed(const char *expr, const char *file, int line)
{
    fprintf(stderr, "tailsim: internal check failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
