/*
 * Helpers shared by the Criterion suites that drive the tailsim CLI.
 * Header-only (each suite is one translation unit).
 */
#ifndef TS_TEST_HELPERS_H
#define TS_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs cmd through the shell and returns its whole stdout (free it); the
 * test fails when the command exits non-zero. */
static inline char *run_capture(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "popen: %s", cmd);
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    while ((k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += k;
        if (n + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            cr_assert_not_null(buf);
        }
    }
    buf[n] = 0;
    cr_assert_eq(pclose(p), 0, "command failed: %s", cmd);
    return buf;
}

#endif
