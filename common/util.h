/*
 * Small helpers every module uses: strict number parsing, locating the
 * project's data files (models/, scenarios/), the one RNG constructor, and
 * safe output: the check of an output path, exclusive temporary files that a
 * fatal signal removes, atomic file replacement, and deferring the fatal
 * signals around work that must end cleanly.
 */
#ifndef TS_UTIL_H
#define TS_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

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
 * path as is; otherwise "<dir>/<name><ext>" is looked up under the data root
 * (ts_data_root()), then the current directory.  Writes the path found into
 * buf and returns 0; returns -1 when nothing exists, with "unknown model
 * 'NAME' (no file ROOT/models/llm/NAME.ini); available: a, b, c" (hardware
 * for models/hw, scenario for scenarios; the names ts_data_list() finds), or
 * naming the whole path when it does not fit in bufsz bytes (a path is never
 * cut). */
int ts_find_data(const char *dir, const char *name, const char *ext,
                 char *buf, size_t bufsz, ts_err *e);

/* Root of the project's data (the directory holding models/, scenarios/ and
 * the gnuplot scripts reports/NAME.gp): $TAILSIM_DATA when set; else, from the running
 * executable's directory up to two levels above it, the first directory
 * that holds models/hw (the build tree: build/tailsim -> .) or
 * share/tailsim/models/hw (an installed tree: PREFIX/bin/tailsim ->
 * PREFIX/share/tailsim, what `make install` writes); else ".".  Found once
 * per process.  Returns a static string. */
const char *ts_data_root(void);

/* The names of the data files "<root>/<dir>/NAME<ext>" (regular files, or
 * links to them, that a name without '/' can select), sorted, without
 * hidden files: *names gets an array of *n strings (NULL, 0 when there are
 * none).  Free with ts_data_list_free().  Returns 0, or -1 naming the
 * directory when it cannot be read or memory runs out (nothing to free). */
int ts_data_list(const char *dir, const char *ext, char ***names, size_t *n, ts_err *e);
void ts_data_list_free(char **names, size_t n);

/* The one RNG constructor: mt19937 seeded from (seed, stream) through
 * splitmix64, so each entity gets its own stream and adding an entity does not
 * perturb the others.  Returns NULL on allocation failure; free with
 * gsl_rng_free(). */
gsl_rng *ts_rng_new(uint64_t seed, uint64_t stream);
uint64_t ts_splitmix64(uint64_t x);

/* Output targets.  tailsim replaces only what it may write: a path that
 * does not exist yet, or a regular file with write permission (as root, at
 * least one write bit: a file nobody may write is read-only to root too).
 * Returns 0 for such a path; -1 naming the path and why otherwise ("a
 * symbolic link", "not a regular file (a FIFO)", "not writable (no write
 * permission)", or the error of looking it up).  A symbolic link is refused, never
 * followed.  Cannot change anything on disk. */
int ts_output_check(const char *path, ts_err *e);

/* Temporary files, removed if the process is killed.  ts_tmp_open() creates
 * "<base>.tmp.<pid>" (or, when that exists, "<base>.tmp.<pid>.<n>") with
 * O_CREAT|O_EXCL|O_CLOEXEC and permission bits `mode & ~umask`, writes its
 * name into tmp (cap bytes) and returns the open descriptor for writing; it
 * never opens an existing file, so it never follows a planted link.  Until
 * ts_tmp_remove() (unlinks it) or ts_tmp_keep() (it was renamed into place)
 * the name stays in a fixed registry that a SIGINT, SIGTERM, SIGHUP or
 * SIGPIPE handler unlinks (after killing the children of ts_spawn() below)
 * before the process dies of that signal (the handler is installed on the
 * first call of either or of ts_signal_defer(), for each of these signals
 * whose action is still the default; a forked child removes only its own
 * files).  Returns
 * -1 naming base when the name does not fit, the registry (32 files) is
 * full, or the file cannot be created.  Both other calls are no-ops for "". */
int ts_tmp_open(const char *base, unsigned mode, char *tmp, size_t cap, ts_err *e);
void ts_tmp_remove(const char *tmp);
void ts_tmp_keep(const char *tmp);

/* A helper program that writes into a temporary (gnuplot): ts_spawn() runs
 * file (looked up on PATH) with argv, stdout to /dev/null and stderr to
 * err_fd (inherited when err_fd < 0), and registers the child so that the
 * handler above kills (SIGKILL) and reaps it before removing the
 * temporaries: it cannot write one after its removal.  Returns 0 with *pid
 * set, or the error number as posix_spawnp() does (ENOENT: not found;
 * EAGAIN: 8 children already registered).  ts_child_wait() waits for such a
 * child (retrying on EINTR) and forgets it; returns 0 with its wait status,
 * or -1 with errno set. */
int ts_spawn(const char *file, char *const argv[], int err_fd, pid_t *pid);
int ts_child_wait(pid_t pid, int *status);

/* Deferring the fatal signals around work that must end cleanly (a sweep
 * marking its row).  ts_signal_defer() installs the handler above (as
 * ts_tmp_open() does: for each of SIGINT, SIGTERM, SIGHUP, SIGPIPE whose
 * action is still the default) and makes it, in this process only, record the first
 * such signal and return instead of dying: a blocking call it interrupts
 * fails with EINTR, and the caller should poll ts_signal_pending() (the
 * recorded signal number, or 0; always 0 when not deferring and in a forked
 * child, which is never deferred and dies of the signal at once) and stop.
 * ts_signal_resume() ends the deferral; when a signal was recorded it does
 * what the handler would have (kills and reaps the ts_spawn() children,
 * removes the temporaries) and the process dies of that signal, so it
 * returns only when none came.  A second ts_signal_defer() while deferring
 * is a no-op (no nesting).  All three cannot fail and allocate nothing;
 * the handler's side is async-signal-safe.  A write to a closed pipe (a
 * progress line into `| head`) is such a signal too: deferred, the write
 * fails with EPIPE instead.  ts_signal_name() names SIGINT, SIGTERM, SIGHUP
 * and SIGPIPE ("a signal" for any other; a static string). */
void ts_signal_defer(void);
int ts_signal_pending(void);
void ts_signal_resume(void);
const char *ts_signal_name(int sig);

/* Atomic output: ts_atomic_open() refuses what ts_output_check() refuses,
 * then opens a temporary beside path (ts_tmp_open(), so it is exclusive and
 * removed if the process is killed) for writing through a->f; when path is
 * an existing file, the temporary gets its permission bits.
 * ts_atomic_commit() flushes and closes it, checks path again and renames
 * the temporary over it (0 on success; on failure the temporary is removed).
 * ts_atomic_abort() closes and removes the temporary.  Readers never see a
 * half-written file.  After a failed open, commit or abort, a->f is NULL and
 * ts_atomic_abort() is a no-op. */
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
