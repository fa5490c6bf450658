/*
 * Several stored runs side by side (`tailsim report --run A,B,...`): each
 * run's own report (reports/report.h, and the DCP one for a dcp run) in
 * DIR/run-<id>/, and DIR/index.md + DIR/index.html (reports/paper_report.h)
 * with a table of the runs' identities and headline metrics, each run's
 * step and rollout speedup over the first, and their Gantt charts and
 * length CDFs side by side.
 */
#ifndef TS_RUNS_REPORT_H
#define TS_RUNS_REPORT_H

#include <stddef.h>

#include "common/err.h"
#include "results/result.h"

/* Writes the comparison of runs[0..n) (n >= 2, distinct ids) into dir
 * (created if missing); source names where they came from (the database
 * path), for the page.  Needs gnuplot.  Returns 0, or -1 naming the file
 * or script that failed. */
int runs_report_write(run_record *const *runs, size_t n, const char *source, const char *dir,
                      ts_err *e);

#endif
