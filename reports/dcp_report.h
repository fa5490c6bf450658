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

/* `tailsim dcp --sweep-dist -o DIR`: writes DIR/dcp_dist.dat (one block per
 * strategy, "long_percent speedup" lines, NAN points left out, then a block
 * "bucket_imbalance" of "long_percent imbalance_percent") and DIR/dcp_dist.png
 * (reports/dcp_dist.gp through gnuplot: speedup over bucket above, bucket
 * imbalance below, against the share of long sequences).  long_share and
 * bucket_imb have npts entries (fractions), speedup npts x ns (point-major),
 * names ns strategy names (each written as one word).  DIR must exist.
 * Returns 0, or -1 with a message (a file that cannot be written, gnuplot
 * missing or failing). */
int dcp_dist_figure_write(const char *dir, const char *scenario, int npts,
                          const double *long_share, int ns, const char (*names)[48],
                          const double *speedup, const double *bucket_imb, ts_err *e);

#endif
