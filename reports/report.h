/*
 * Report writer: from a run (stored or just simulated), writes its exports
 * (Perfetto timeline.json, responses.csv, phases.csv), gnuplot .dat files,
 * runs the static scripts in reports/ with `gnuplot -d -c SCRIPT DAT PNG`,
 * and writes report.md and index.html with the run's metrics.  Output goes
 * to a directory that is created if missing.
 */
#ifndef TS_REPORT_H
#define TS_REPORT_H

#include <stdio.h>

#include "common/err.h"
#include "results/result.h"

/* Writes DIR/timeline.json (perfetto_write()), DIR/responses.csv and
 * DIR/phases.csv (csv_write_responses(), csv_write_phases()), DIR/gantt.dat,
 * DIR/gantt.png, DIR/cdf.dat, DIR/cdf.png, DIR/report.md and DIR/index.html
 * (the same as a page of tables and the two figures, through the paper
 * report's HTML writer), in that order, each atomically.  A run with no id
 * (r->id <= 0: not saved) is titled without one.  Returns 0 or -1 (an
 * interval whose phase or state is out of range, before anything is
 * written; gnuplot missing or failing is an error naming the script). */
int report_write(const run_record *r, const char *dir, ts_err *e);

/* report_write(), with the Gantt chart's time axis running to xmax seconds
 * (when beyond the run's own end), so that several runs' charts share one
 * axis (a comparison passes its longest makespan).  xmax <= 0: the run's
 * own end, as report_write().  Returns as report_write(). */
int report_write_axis(const run_record *r, const char *dir, double xmax, ts_err *e);

/* Creates dir and its missing parents (like mkdir -p).  Returns 0, or -1
 * naming the part that could not be created. */
int report_mkdir_p(const char *dir, ts_err *e);

/* Checks, before any work, that an executable gnuplot is on PATH and that
 * dir (created like mkdir -p) is a writable directory.  Returns 0, or -1
 * saying which is wrong. */
int report_can_draw(const char *dir, ts_err *e);

/* Writes into buf (cap bytes) the path of the static script
 * ts_data_root()/reports/NAME.gp.  Only there: a script is code gnuplot runs,
 * so none is ever taken from the current directory (as ts_find_data() falls
 * back to for data).  Returns 0, or -1 when it cannot be read. */
int report_script(const char *name, char *buf, size_t cap, ts_err *e);

/* Runs `gnuplot -d -c script dat <png.tmp> title` (no shell; gnuplot's
 * stderr to a temporary log in dir) and renames the image to png; both
 * temporaries come from ts_atomic_open()/ts_tmp_open() (exclusive, removed
 * on a fatal signal after gnuplot, started by ts_spawn(), is killed).  Returns 0, or -1 naming the script (gnuplot missing,
 * failing, killed, writing no image) or png (refused by ts_output_check()). */
int report_gnuplot(const char *script, const char *dat, const char *png, const char *title,
                   const char *dir, ts_err *e);

/* report_gnuplot() with a fourth script argument, a number (ARG4: written
 * with "%.9g", so it never starts with '<' or '|' and the script only reads
 * it as a number); NaN: none (report_gnuplot()).  Returns as
 * report_gnuplot(). */
int report_gnuplot_num(const char *script, const char *dat, const char *png, const char *title,
                       double arg4, const char *dir, ts_err *e);

/* Names in report files.  A name (scenario, policy, strategy, plot label,
 * path: anything from a file, a flag or the database) may hold any byte; these
 * write it so that it stays in its place.  Each writes s up to its NUL or cap
 * bytes, whichever comes first (s need not be NUL-terminated within cap), to
 * f, every control character (0x01-0x1f and 0x7f: newline, carriage return,
 * tab, escape, ...) as a space, so a name never starts a line of its own.
 * They cannot fail: a failed write shows in ferror(f), which
 * ts_atomic_commit() reports. */

/* As it is, bar the control characters: a .dat comment. */
void report_put_line(FILE *f, const char *s, size_t cap);

/* Markdown text: also '\' as "\\", '<' before a letter, '/', '!' or '?'
 * (what opens inline HTML) as "\<" and ']' before '(' (what makes a link)
 * as "\]"; with REPORT_MD_CELL also '|' as
 * "\|" (a table cell), with REPORT_MD_LINK '[' and ']' as "\[" "\]" (an
 * image's alt text). */
#define REPORT_MD_CELL 1
#define REPORT_MD_LINK 2
void report_put_md(FILE *f, const char *s, size_t cap, int flags);

/* Writes text verbatim as a fenced Markdown block (info string lang, "" for
 * none) whose fence (three backticks, or one more than the longest run of
 * them in text) no line of text can close; control characters but newline
 * and tab as spaces.  Cannot fail (stream errors are the caller's). */
void report_put_fenced(FILE *f, const char *text, const char *lang);

/* A gnuplot data string: in double quotes, each '"' in s as a single quote. */
void report_put_dat_string(FILE *f, const char *s, size_t cap);

/* A relative link target (Markdown, HTML src): letters, digits and
 * "-._~/+,=" as they are, every other byte percent-encoded ("%20"). */
void report_put_url(FILE *f, const char *s, size_t cap);

#endif
