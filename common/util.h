/*
 * Small helpers every module uses: strict number parsing, locating the
 * project's data files (models/, scenarios/), the one RNG constructor, and
 * atomic file replacement.
 */
#ifndef TS_UTIL_H
#define TS_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include <gsl/gsl_rng.h>

#include "common/err.h"

#define TS_VERSION "0.1.0"

/* Strict parsers: the whole string must be a number in range, no trailing
 * junk, no NaN/inf.  Return 0 on success, -1 (without touching *out) otherwise. */
int ts_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
int ts_parse_double(const char *s, double min, double max, double *out);
int ts_parse_bool(const char *s, int *out); /* true/false/1/0/yes/no */

/* A piece of input made safe to quote in a message: s copied into buf (n
 * bytes) cut to at most max characters ("..." added when cut), every byte
 * outside printable ASCII, and the quote ', replaced by '?'.  Messages quote
 * input only through this, and only names and values that matched our own
 * keys, never a raw line.  Returns buf.  Cannot fail. */
#define TS_QUOTE_MAX 40
#define TS_QUOTE_BUF (TS_QUOTE_MAX + 4)
const char *ts_quote(const char *s, size_t max, char *buf, size_t n);

/* Resolves a data file.  `name` containing '/' or ending in `ext` is used as a
 * path as is; otherwise "<dir>/<name><ext>" is looked up under $TAILSIM_DATA,
 * then under the directory above the running executable (build/..), then the
 * current directory.  Writes the path found into buf and returns 0; returns -1
 * with a message listing what was tried when nothing exists. */
int ts_find_data(const char *dir, const char *name, const char *ext,
                 char *buf, size_t bufsz, ts_err *e);

/* Root of the project's data (the directory holding models/ and scenarios/),
 * found as above.  Returns a static string; "." when nothing better is known. */
const char *ts_data_root(void);

/* The one RNG constructor: mt19937 seeded from (seed, stream) through
 * splitmix64, so each entity gets its own stream and adding an entity does not
 * perturb the others.  Returns NULL on allocation failure; free with
 * gsl_rng_free(). */
gsl_rng *ts_rng_new(uint64_t seed, uint64_t stream);
uint64_t ts_splitmix64(uint64_t x);

/* Atomic output: ts_atomic_open() opens "<path>.tmp.<pid>" for writing;
 * ts_atomic_commit() flushes, closes and renames it over path (0 on success);
 * ts_atomic_abort() closes and removes the temporary.  Readers never see a
 * half-written file. */
typedef struct ts_atomic {
    FILE *f;
    char tmp[4096];
    char path[4096];
} ts_atomic;
int ts_atomic_open(ts_atomic *a, const char *path, ts_err *e);
int ts_atomic_commit(ts_atomic *a, ts_err *e);
void ts_atomic_abort(ts_atomic *a);

/* Monotonic wall clock in seconds, and process CPU time in seconds. */
double ts_wall_s(void);
double ts_cpu_s(void);

#endif
