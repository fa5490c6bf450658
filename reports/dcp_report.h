/*
 * DCP report: from a stored `tailsim dcp` run (command "dcp"), writes the
 * strategy table and, when the run has imbalance-vs-GPU metrics (--scale),
 * the imbalance figure.  The per-GPU timelines are drawn by report_write()
 * like any other run's.
 */
#ifndef TS_DCP_REPORT_H
#define TS_DCP_REPORT_H

#include "common/err.h"
#include "results/result.h"

/* Writes DIR/dcp.md (one row per strategy: steps, step time, tokens/s,
 * speedup, imbalance, idle fraction, peak memory, and the imbalance-vs-GPUs
 * table) and, with --scale metrics, DIR/dcp_imbalance.dat and
 * DIR/dcp_imbalance.png (reports/dcp_imbalance.gp through gnuplot).  DIR
 * must exist.  Returns 0, or -1 with a message (a run that is not "dcp",
 * a file that cannot be written, gnuplot missing or failing). */
int dcp_report_write(const run_record *r, const char *dir, ts_err *e);

#endif
