/*
 * Error reporting shared by every module.
 *
 * Library code never prints or exits: a function that can fail takes a
 * `ts_err *` and returns -1 (or NULL) after filling it with one line that names
 * the file, line and field of the bad input.  Only main() prints the message.
 * Three tiers, as in SQLite and llm.c:
 *   assert()        internal invariants, compiled out with NDEBUG;
 *   TS_CHECK(expr)  "cannot happen" checks that stay on in release builds;
 *   ts_err returns  everything that comes from outside (files, flags, DB, GSL).
 */
#ifndef TS_ERR_H
#define TS_ERR_H

#include <stddef.h>

/* Room for two paths of PATH_MAX (4096) bytes' worth of text: a message that
 * still does not fit is cut and ends in "..." (TS_ERR_CUT), never silently. */
#define TS_ERR_MAX 8192
#define TS_ERR_CUT "..."

typedef struct ts_err {
    char msg[TS_ERR_MAX]; /* one line, no trailing newline; "" when no error */
} ts_err;

/* Formats a message into e (no-op when e is NULL); a message longer than
 * TS_ERR_MAX - 1 bytes is cut and ends in TS_ERR_CUT.  Always returns -1 so
 * that callers can write `return ts_errf(e, "...")`. */
int ts_errf(ts_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes an existing message with context ("while loading X: ..."); when
 * the two do not fit, the end is cut and marked with TS_ERR_CUT.  Returns -1.
 * No-op when e is NULL. */
int ts_err_prefix(ts_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Always-on check: prints the expression, file and line, then aborts. */
void ts_check_failed(const char *expr, const char *file, int line);
#define TS_CHECK(expr) \
    ((expr) ? (void)0 : ts_check_failed(#expr, __FILE__, __LINE__))

#endif
