/*
 * Error messages: a fixed-size buffer per call chain, filled by the function
 * that first sees the problem and optionally prefixed by its callers.  No
 * allocation, so reporting an out-of-memory error cannot itself fail.
 */
#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ts_errf(ts_err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int ts_err_prefix(ts_err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    char head[TS_ERR_MAX], old[TS_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t hl = strlen(head);
    if (hl >= sizeof e->msg)
        hl = sizeof e->msg - 1;
    memcpy(e->msg, head, hl);
    size_t ol = strlen(old);
    if (hl + ol >= sizeof e->msg)
        ol = sizeof e->msg - 1 - hl;
    memcpy(e->msg + hl, old, ol);
    e->msg[hl + ol] = 0;
    return -1;
}

void ts_check_failed(const char *expr, const char *file, int line)
{
    fprintf(stderr, "tailsim: internal check failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
