/*
 * Fitting the cost model's physical parameters to measured kernel times
 * (GSL nonlinear least squares), and the hold-out check behind
 * `tailsim calib check` and `tailsim-validate check`.  No printing: the
 * report comes back as data, or as text/JSON strings the caller prints.
 */
#ifndef TS_FIT_H
#define TS_FIT_H

#include <stddef.h>

#include "common/err.h"
#include "models/calib.h"
#include "models/hw.h"

/* The continuous parameters of hw_desc the fit may move (tile sizes and SM
 * count are discrete and stay as given). */
enum fit_param {
    FIT_GEMM_EFF, FIT_GEMM_HALF, FIT_GEMM_LAT, FIT_LAUNCH, FIT_MEM_EFF, FIT_ATTN_EFF,
    FIT_NPARAM
};
extern const char *const fit_param_names[FIT_NPARAM]; /* the hw_desc/INI key names */

/* What the fit did with a parameter. */
enum fit_state {
    FIT_FITTED,             /* moved to its least-squares value */
    FIT_UNUSED,             /* no selected row depends on it: kept */
    FIT_DEGENERATE          /* not separable from the others: kept (gemm_half_flops: 0) */
};
extern const char *const fit_state_names[3]; /* "fitted", "unused", "degenerate" */

typedef struct fit_result {
    hw_desc hw;                 /* the start description with the fitted values */
    double before[FIT_NPARAM];  /* start values */
    double after[FIT_NPARAM];   /* fitted values (= before unless FIT_FITTED, but
                                   gemm_half_flops becomes 0 when degenerate) */
    int state[FIT_NPARAM];      /* enum fit_state */
    size_t rows;                /* rows fitted (selected and modelled) */
    size_t skipped;             /* selected rows whose op is not modelled */
    int iterations;             /* trust-region iterations of the kept fit */
    int gsl_status;             /* GSL_SUCCESS, GSL_ENOPROG or GSL_EMAXITER */
    char stop[64];              /* why the iteration stopped, in words */
    double rms_before;          /* RMS relative error of the fitted rows at the start */
    double rms_after;           /* ... with the fitted values */
    int half_tried;             /* 1 when gemm_half_flops was freed in a second pass */
    double half_gain;           /* relative drop of the cost that pass gave */
} fit_result;

/* Fits the free parameters of `start` to rows[i] for which select is NULL
 * or select[i] != 0, minimising the sum of squared relative residuals
 * (predicted - measured) / measured over rows whose op is modelled
 * (calib_op_kind >= 0).  Efficiencies are fitted through a logistic map, so
 * they stay in (0, 1); latencies and gemm_half_flops through logarithms, so
 * they stay > 0.  gemm_half_flops is freed only when that lowers the cost by
 * at least 2% and its relative standard error is under 25%; otherwise it is
 * kept at 0 (FIT_DEGENERATE).  The first pass also restarts from two
 * far-apart points and keeps the lowest cost.  Deterministic: the same rows give the same
 * values bit for bit.  Returns 0, or -1 (too few modelled rows, GSL
 * failure) with e set; a GSL message goes through gsl_strerror. */
int fit_hw(const hw_desc *start, const calib_row *rows, size_t n, const unsigned char *select,
           fit_result *out, ts_err *e);

/* Per-op figures of a hold-out check, errors in %. */
typedef struct calib_op_report {
    char op[32];
    int modelled;           /* 0: op not priced by the cost model (rows skipped) */
    size_t rows;            /* rows of the op in the file */
    size_t n_fit, n_held;   /* rows in the fit half and the held-out half */
    double fit_mape;        /* MAPE on the fit half (in sample) */
    double mape;            /* MAPE on the held-out half */
    double median;          /* median absolute percentage error, held out */
    double worst;           /* largest absolute percentage error, held out */
    size_t worst_row;       /* index of that row in the rows passed */
    double worst_pred_us;   /* its prediction, us */
} calib_op_report;

/* Targets of issue 3 on held-out shapes, %. */
#define CALIB_TARGET_MEDIAN_OP 5.0
#define CALIB_TARGET_WORST_OP 10.0

typedef struct calib_check {
    fit_result fit;         /* on the fit half */
    calib_op_report *ops;   /* in order of first appearance in the rows */
    size_t n_ops;
    size_t rows;            /* all rows */
    size_t rows_fit, rows_held, rows_skipped;
    double overall_mape;    /* over all held-out rows */
    double median_op_mape;  /* median over ops with held-out rows of their MAPE */
    double worst_op_mape;   /* largest op MAPE ... */
    char worst_op[32];      /* ... and its op ("" when no op has held-out rows) */
    int median_ok, worst_ok; /* 1 when the target is met */
} calib_check;

/* Splits the rows deterministically (per op, sorted by shape, alternate
 * rows: 1st, 3rd, ... fit, 2nd, 4th, ... held out; an op with one row only
 * fits), fits on the fit half starting from `start`, and reports predicted
 * vs measured on the held-out half.  Returns 0, or -1 with e set; free with
 * calib_check_free() in both cases. */
int calib_check_run(const hw_desc *start, const calib_row *rows, size_t n, calib_check *c,
                    ts_err *e);
void calib_check_free(calib_check *c); /* NULL-safe */

/* The check as an aligned text table / as JSON (keys: file, device,
 * mixed_devices, hw, start_calibration, rows, rows_fit, rows_held_out,
 * rows_not_modelled, not_modelled {op: rows}, fit {rows, iterations, stop,
 * rms_before, rms_after, half_gain, params {name: {before, after, state}}},
 * ops {op: {n (held-out rows), fit_n,
 * fit_mape, mape, median, worst, worst_line, worst_shape, worst_pred_us,
 * worst_meas_us}}, median_op_mape, worst_op_mape, worst_op, overall_mape,
 * targets {median_op_mape_max, worst_op_mape_max, median_ok, worst_ok,
 * met}); percentages in %, null where there is nothing to average.
 * Malloc'd strings (free()); NULL on allocation failure.  Defined in
 * models/calib.c. */
char *calib_check_table(const calib_check *c, const calib_row *rows, const char *file,
                        const hw_desc *start);
char *calib_check_json(const calib_check *c, const calib_row *rows, const char *file,
                       const hw_desc *start);

/* Fits start to all rows (as hw_load() does with models/calib/<gpu>.csv)
 * and writes the result as a hardware INI at ini_path, its calibration
 * string naming csv_path's file name, row count and device, and a comment
 * saying that `tool` wrote it.  The fit goes to *all.  Returns 0 or -1. */
int fit_write_calibrated_ini(const hw_desc *start, const calib_row *rows, size_t n,
                             const char *csv_path, const char *tool, const char *ini_path,
                             fit_result *all, ts_err *e);

/* Writes hw as a complete hardware INI (loadable by hw_load) with a leading
 * comment, atomically.  Returns 0 or -1 with e naming the file. */
int fit_write_ini(const hw_desc *hw, const char *path, const char *comment, ts_err *e);

#endif
