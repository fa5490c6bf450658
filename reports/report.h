/*
 * Report writer: from a stored run, writes gnuplot .dat files, runs the
 * static scripts in reports/ with `gnuplot -d -c SCRIPT DAT PNG`, and writes
 * report.md with the run's metrics.  Output goes to a directory that is
 * created if missing.
 */
#ifndef TS_REPORT_H
#define TS_REPORT_H

#include "common/err.h"
#include "results/result.h"

/* Writes DIR/gantt.dat, DIR/gantt.png, DIR/cdf.dat, DIR/cdf.png, DIR/report.md.
 * Returns 0 or -1 (gnuplot missing or failing is an error naming the script). */
int report_write(const run_record *r, const char *dir, ts_err *e);

/* Creates dir and its missing parents (like mkdir -p).  Returns 0, or -1
 * naming the part that could not be created. */
int report_mkdir_p(const char *dir, ts_err *e);

/* Checks, before any work, that an executable gnuplot is on PATH and that
 * dir (created like mkdir -p) is a writable directory.  Returns 0, or -1
 * saying which is wrong. */
int report_can_draw(const char *dir, ts_err *e);

/* Runs `gnuplot -d -c script dat <png.tmp> title` (no shell; gnuplot's
 * stderr to a temporary log in dir) and renames the image to png; both
 * temporaries come from ts_atomic_open()/ts_tmp_open() (exclusive, removed
 * on a fatal signal after gnuplot, started by ts_spawn(), is killed).  Returns 0, or -1 naming the script (gnuplot missing,
 * failing, killed, writing no image) or png (refused by ts_output_check()). */
int report_gnuplot(const char *script, const char *dat, const char *png, const char *title,
                   const char *dir, ts_err *e);

#endif
