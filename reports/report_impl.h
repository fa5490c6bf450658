/*
 * Private to the run report writer (reports/report.c, reports/report_dat.c,
 * reports/report_md.c): the helpers the three files share and the file
 * writers report_write() calls.  Not part of the library's interface;
 * nothing outside reports/report*.c includes it.
 */
#ifndef TS_REPORT_IMPL_H
#define TS_REPORT_IMPL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "results/result.h"

#define PATH_CAP 4096
/* printf arguments for a fixed-size char field that may fill its array. */
#define FIELD(a) (int)sizeof(a), (a)

/* 1 for the bytes no name may write as they are: 0x01-0x1f and 0x7f. */
static inline int is_ctl(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

/* Nearest-rank percentile of n sorted values. */
static inline int32_t pct(const int32_t *v, size_t n, double p)
{
    size_t k = (size_t)ceil(p * (double)n);
    return v[k ? k - 1 : 0];
}

/* What ran, for titles: "rlstep tlt", or the command alone without a
 * policy. */
static inline const char *run_what(const run_record *r, char *buf, size_t n)
{
    snprintf(buf, n, "%.*s%s%.*s", FIELD(r->command), r->policy[0] ? " " : "", FIELD(r->policy));
    return buf;
}

/* report_dat.c: writes path (atomically) as gantt.dat, the per-GPU
 * intervals and the phases of the first step with the height of each
 * phase's name (laid out for a time axis up to xmax seconds, or the run's
 * own end when xmax is not beyond it), for reports/gantt.gp.  Returns 0 or
 * -1. */
int rp_write_gantt_dat(const run_record *r, const char *path, double xmax, ts_err *e);

/* report_dat.c: writes path (atomically) as cdf.dat, the CDF of the n
 * sorted response lengths len and their percentiles, for reports/cdf.gp.
 * Returns 0 or -1. */
int rp_write_cdf_dat(const run_record *r, const int32_t *len, size_t n, const char *path,
                     ts_err *e);

/* report_md.c: writes path (atomically) as report.md, from r and its n
 * sorted response lengths len.  Returns 0 or -1. */
int rp_write_md(const run_record *r, const char *path, const int32_t *len, size_t n, ts_err *e);

/* report_md.c: writes path as index.html (see its definition).  Returns 0
 * or -1. */
int rp_write_html(const run_record *r, const char *path, const int32_t *len, size_t n,
                  ts_err *e);

#endif
