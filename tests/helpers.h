/*
 * Helpers shared by the Criterion suites: running the tailsim CLI, writing a
 * scenario file that parallel suites may be reading, loading a scenario with
 * its hardware and model, a per-test temporary directory, the real traces
 * under $TAILSIM_SHARED, whether gnuplot is there to draw, reading a whole
 * file and writing a temporary one.  Header-only (each suite is one translation unit);
 * every helper fails (or skips) the calling test instead of returning errors.
 */
#ifndef TS_TEST_HELPERS_H
#define TS_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/hw.h"
#include "models/hw_calib.h"
#include "sim/scenario.h"

/* The whole file at path as a new NUL-terminated string (free it); the
 * test fails when it cannot be read. */
static inline char *slurp_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot read %s", path);
    size_t cap = 1 << 16, n = 0, k;
    char *b = malloc(cap);
    cr_assert_not_null(b);
    while ((k = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap) {
            b = realloc(b, cap *= 2);
            cr_assert_not_null(b);
        }
    }
    b[n] = 0;
    fclose(f);
    return b;
}

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

/* Writes text to path through a file beside it (path.<pid>) renamed over
 * it, so that a parallel suite's setup never truncates the file under a
 * CLI test reading it, nor does any reader see it half written. */
static inline void write_aside(const char *path, const char *text)
{
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f, "cannot write %s", tmp);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(rename(tmp, path), 0);
}

/* The policy suites' scenario (tests/test_policy.c, test_policy_carry.c):
 * 8 GPUs as 4 replicas of TP 2, 32 prompts x 8 with a long-tail lognormal. */
#define POLICY_SCENARIO_INI                                                                   \
    "[cluster]\ngpus = 8\nhw = h100\n[model]\nname = qwen2.5-7b\n[rollout]\ntp = 2\n"          \
    "mem_util = 0.85\nmax_response = 16384\n[train]\nmicro_batch_tokens = 32768\n"            \
    "[trace]\ndist = lognormal:1500:1.0\nprompts = 32\ngroup = 8\ncap = 16384\nseed = 3\n"

/* Loads scenario `name` (a file or a bundled name) and its hardware and
 * model; the test fails with the loader's message on error. */
static inline void load_scenario_hw_llm(const char *name, scenario *s, hw_desc *hw, llm_desc *m)
{
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(name, s, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load(s->hw, hw, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load(s->model, m, &e), 0, "%s", e.msg);
}

/* Creates a fresh directory /tmp/tailsim-test-<tag>-XXXXXX into dir (n
 * bytes); a suite's .init. */
static inline void tmpdir_create(char *dir, size_t n, const char *tag)
{
    snprintf(dir, n, "/tmp/tailsim-test-%s-XXXXXX", tag);
    cr_assert_not_null(mkdtemp(dir), "cannot create a temporary directory");
}

/* Removes dir and everything in it (a warning when it cannot); a suite's
 * .fini. */
static inline void tmpdir_remove(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", dir);
}

/* Writes `text` to a fresh temporary file (mkstemp under /tmp); its path
 * goes to buf (n bytes).  The caller removes it. */
static inline void write_tmp(const char *text, char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/tailsim-test-XXXXXX");
    int fd = mkstemp(buf);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0, "%s", buf);
}

/* Writes into buf (n bytes) the path of rel under $TAILSIM_SHARED
 * (../shared when unset), or skips the test when it cannot be read. */
static inline void shared_path(char *buf, size_t n, const char *rel)
{
    const char *root = getenv("TAILSIM_SHARED");
    snprintf(buf, n, "%s/%s", root && *root ? root : "../shared", rel);
    if (access(buf, R_OK) != 0)
        cr_skip_test("%s not found (set TAILSIM_SHARED)", buf);
}

/* 1 when an executable gnuplot is on PATH (tests that draw skip without). */
static inline int have_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path)
        return 0;
    char buf[4096], p[4200];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *dir = strtok(buf, ":"); dir; dir = strtok(NULL, ":")) {
        snprintf(p, sizeof p, "%s/gnuplot", *dir ? dir : ".");
        if (access(p, X_OK) == 0)
            return 1;
    }
    return 0;
}

/* Checks that every <img> of the HTML page html (read from path) holds its
 * PNG as a data: URI (src="data:image/png;base64,<base64 of a PNG>") and
 * that no src names a file; returns how many images it holds. */
static inline int html_embedded_images(const char *path, const char *html)
{
    static const char pre[] = "<img src=\"data:image/png;base64,";
    int n = 0;
    for (const char *t = strstr(html, "<img "); t; t = strstr(t + 1, "<img ")) {
        cr_assert(!strncmp(t, pre, sizeof pre - 1), "%s: an image not embedded: %.80s", path, t);
        const char *b = t + sizeof pre - 1;
        cr_assert(!strncmp(b, "iVBORw0KGgo", 11), "%s: an embedded image is no PNG: %.80s",
                  path, b);
        size_t k = strspn(b, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
        k += strspn(b + k, "=");
        cr_assert(b[k] == '"' && k % 4 == 0, "%s: bad base64 in an image: %.40s", path, b + k);
        n++;
    }
    for (const char *t = strstr(html, "src=\""); t; t = strstr(t + 1, "src=\""))
        cr_assert(!strncmp(t + 5, "data:", 5), "%s: a relative image source: %.60s", path, t);
    return n;
}

#endif
