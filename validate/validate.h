/*
 * Shared declarations of the validation program (build/tailsim-validate):
 * the subcommands, and the calibration rows that `calibrate` measures and
 * stores as CSV and SQLite (validate/calib_store.c).
 *
 * A calibration row is one op at one shape, timed with CUDA events after
 * warm-up with L2 flushed before every repeat.  Shape columns by op:
 *   gemm, gemm_peak   m tokens, n outputs, k inputs (C[m,n] = A[m,k] W[n,k]^T)
 *   decode_attn       m heads, n kv_heads, k head_dim, batch, ctx_sum,
 *                     ctx_max, q_len = 1 (TP-local heads)
 *   chunk_attn        as decode_attn, q_len = query tokens per sequence
 *   rmsnorm           m rows, n dim
 *   rope              m tokens, n heads (q and k heads together), k head_dim
 *   swiglu            m rows, n ffn (TP-local)
 *   embed             m tokens, n dim
 *   verify_accept     m rows = batch*(q_len+1), n vocab, batch, q_len = V
 *   copy              m bytes copied device to device (the bandwidth ceiling)
 * flops and bytes are the napkin numbers of each row (bytes = each input
 * read once, each output written once).
 */
#ifndef TS_VALIDATE_H
#define TS_VALIDATE_H

#include <stddef.h>

#include "common/err.h"
#include "kernels/kernels.h"

/* Exit status of a check that could not run (no GPU): automake's "skip". */
#define VAL_EXIT_SKIP 77

typedef struct calib_row {
    char op[32];
    double m, n, k;          /* shape, see above */
    double batch;            /* sequences */
    double ctx_sum, ctx_max; /* tokens (attention only, else 0) */
    double q_len;            /* query tokens per sequence (attention, verify) */
    double median_us, p10_us, p90_us;
    double flops;            /* FLOPs of one run */
    double bytes;            /* minimum bytes moved by one run */
    int sm_mhz, mem_mhz;     /* clocks read right after the repeats; 0 unknown */
} calib_row;

typedef struct calib_set {
    char device[256];
    calib_row *rows;
    size_t n, cap;
} calib_set;

/* Appends a copy of r.  Returns 0, or -1 on allocation failure. */
int calib_add(calib_set *s, const calib_row *r, ts_err *e);
/* Frees the rows (not s itself); the set is empty afterwards. */
void calib_free(calib_set *s);

/* Sorts us[0..n-1] and returns its 10th, 50th and 90th percentiles (linear
 * interpolation between order statistics).  n >= 1; cannot fail. */
void calib_stats(float *us, int n, double *p10, double *p50, double *p90);

/* Writes the set as CSV (header line, one row per line), atomically.
 * Returns 0 or -1 with e naming the file. */
int calib_write_csv(const calib_set *s, const char *path, ts_err *e);

/* Replaces the rows of table calib in the SQLite database at path (created
 * if needed) with the set, in one transaction.  Refuses a database whose
 * user_version is newer than this program's.  Returns 0 or -1. */
int calib_write_db(const calib_set *s, const char *path, ts_err *e);

/* Subcommands: return the process exit status. */
int val_selftest(int argc, char **argv);
int val_calibrate(int argc, char **argv);

/* Opens the GPU; prints "no CUDA device" (and why) to stderr when there is
 * none.  Returns 1 when a device is open, 0 when none, -1 on error. */
int val_open_device(kt_device *d);

#endif
