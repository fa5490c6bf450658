/*
 * Calibration CSVs: the kernel timings `tailsim-validate calibrate` writes
 * (and models/calib/<gpu>.csv keeps), read strictly, and the cost model's
 * prediction for each of their rows.  Pure data and pure functions: no
 * printing, no CUDA.
 */
#ifndef TS_CALIB_H
#define TS_CALIB_H

#include <stddef.h>

#include "common/err.h"
#include "models/hw.h"

/* The header lines the reader accepts, exactly: the first calibration
 * format (16 columns) and the current one, which adds peak_bytes (the
 * training rows' tracked memory; validate/calib_store.c writes it). */
#define CALIB_CSV_HEADER_V1                                                     \
    "device,sm_clock_mhz,mem_clock_mhz,op,m,n,k,batch,ctx_sum,ctx_max,q_len," \
    "median_us,p10_us,p90_us,flops,bytes"
#define CALIB_CSV_HEADER CALIB_CSV_HEADER_V1 ",peak_bytes"
#define CALIB_CSV_COLUMNS 17 /* of CALIB_CSV_HEADER; 16 in the first format */

/* One timed op at one shape.  Shape columns by op (validate/validate.h has
 * the full list): gemm/gemm_peak m, n, k; decode_attn/chunk_attn m heads, n
 * KV heads, k head_dim, batch, ctx_sum, ctx_max, q_len (query tokens per
 * sequence, each sequence's ctx counts its own chunk); rmsnorm, swiglu,
 * embed, add m rows, n width; rope m tokens, n heads (q and k), k head_dim;
 * copy m bytes copied. */
typedef struct calib_row {
    char device[128];        /* GPU name as the driver reports it */
    char op[32];             /* op name, [A-Za-z0-9_]+ */
    double m, n, k;          /* shape, see above */
    double batch;            /* sequences */
    double ctx_sum, ctx_max; /* tokens (attention only, else 0) */
    double q_len;            /* query tokens per sequence (attention, verify) */
    double median_us, p10_us, p90_us; /* measured, us; median > 0 */
    double flops;            /* FLOPs of one run (napkin count) */
    double bytes;            /* minimum bytes moved by one run */
    double peak_bytes;       /* train_* rows: tracked peak device memory; else 0 */
    int sm_mhz, mem_mhz;     /* clocks seen; 0 unknown */
    int line;                /* line in the CSV (2 = first row); 0 if not from a file */
} calib_row;

/* Reads a calibration CSV.  The header must be CALIB_CSV_HEADER or
 * CALIB_CSV_HEADER_V1; every line must have the header's field count (RFC
 * 4180 quoting allowed, as the device column uses), numbers in range and
 * median_us > 0.  The first bad field is
 * reported as "FILE:LINE: column N 'NAME': ..." and nothing is returned.
 * An op the cost model does not know is not an error (see calib_op_kind).
 * Lines are bounded and NUL-free (common/lines.h).
 * On success *rows (free with free()) holds *n >= 1 rows in file order. */
int calib_csv_load(const char *path, calib_row **rows, size_t *n, ts_err *e);

/* Splits one CSV line in place into at most `max` fields (f[0..]), unquoting
 * "..." fields ("" is a quote), as the calibration CSVs are written.
 * Returns the field count, -1 when there are more than max fields, or
 * -2 - i for a malformed quote in field i.  Cannot fail otherwise. */
int calib_csv_split(char *line, char **f, int max);

/* Checks a CSV header line (modified: split in place) against names[0..ncols)
 * where the last column is optional; the count found (ncols - 1 or ncols)
 * goes to *got.  Returns 0, or -1 with e naming path, line 1, the column
 * and `header` (the full expected line).  ncols must be below 64. */
int calib_csv_header(char *line, const char *path, const char *const *names, int ncols,
                     const char *header, int *got, ts_err *e);

/* The error "path:line: column col+1 'name': " followed by fmt with one %s
 * for value (quoted, cut and sanitised: a field of the file); returns -1. */
int calib_csv_bad_col(ts_err *e, const char *path, int line, int col, const char *name,
                      const char *fmt, const char *value);

/* Ops the cost model predicts, and how. */
typedef enum calib_op {
    CALIB_OP_GEMM,          /* gemm, gemm_peak: cost_gemm(m, n, k) */
    CALIB_OP_DECODE_ATTN,   /* cost_attn_decode */
    CALIB_OP_CHUNK_ATTN,    /* cost_attn_chunk */
    CALIB_OP_RMSNORM,       /* cost_kernel(COST_K_NORM, 4 m n) */
    CALIB_OP_ROPE,          /* cost_kernel(COST_K_ROPE, 4 m n k) */
    CALIB_OP_SWIGLU,        /* cost_kernel(COST_K_ACT, 6 m n) */
    CALIB_OP_EMBED,         /* cost_kernel(COST_K_GATHER, 4 m n) */
    CALIB_OP_ADD,           /* cost_kernel(COST_K_ADD, 4 m n) */
    CALIB_OP_COPY,          /* cost_stream(2 m) */
    CALIB_OP_COUNT
} calib_op;

/* The kind of an op name, or -1 when the cost model does not price it
 * (verify_accept, the layer/drafter/training rows, anything new).  Cannot
 * fail. */
int calib_op_kind(const char *op);

/* Predicted time of the row as op kind `kind` (calib_op_kind(row->op)), s.
 * Pure; returns -1 for a kind out of range. */
double calib_predict(const hw_desc *hw, int kind, const calib_row *row);

/* Predicted time of one calibration row, s, or -1 when its op is not
 * modelled.  The shapes map to the same cost functions, with the same byte
 * counts, that cost_iter() charges for the op inside a forward pass. */
double cost_calib_op(const hw_desc *hw, const calib_row *row);

/* Writes a short description of the row's shape ("m=1 n=4608 k=3584",
 * "heads=28 kv=4 hd=128 b=64 ctx_sum=131072 ctx_max=2048") into buf.
 * Cannot fail (truncates). */
void calib_row_shape(const calib_row *row, char *buf, size_t n);

/* The host link's bandwidth measured by the rows' pinned copies (ops h2d and
 * d2h, written by `tailsim-validate calibrate`'s host group): per direction
 * the largest copy's bytes over its median time, and the slower direction
 * into *bw, bytes/s.  Returns 0, or -1 (bw untouched) when no such row has a
 * positive size and time. */
int calib_host_bw(const calib_row *rows, size_t n, double *bw);

#endif
