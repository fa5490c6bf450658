/*
 * cuBLASLt's kernel choices (gemm_algos.csv, written by `tailsim-validate
 * calibrate`: which algorithm its heuristic returned for each GEMM shape)
 * read strictly, and set against the cost model's own choice
 * (cost_gemm_choice).  Pure data and pure functions: no printing, no CUDA.
 */
#ifndef TS_GEMM_ALGOS_H
#define TS_GEMM_ALGOS_H

#include <stddef.h>

#include "common/err.h"
#include "models/hw.h"

/* The header the reader accepts: calibrate's (validate/validate.h
 * CALIB_ALGOS_HEADER), or the same without its last column, cluster. */
#define GEMM_ALGOS_HEADER                                                             \
    "device,m,n,k,batch,ta,tb,algo_id,tile,tile_id,stages_id,splitk,reduction,swizzle," \
    "cluster"
#define GEMM_ALGOS_COLUMNS 15 /* 14 without cluster */

/* One shape and what cuBLASLt chose for it.  The product is row-major
 * D[m, n] = op(A)[m, k] op(B)[k, n] (m tokens, n outputs, k inputs, as the
 * calibration's gemm rows), batch products; cuBLASLt's tile "ROWSxCOLS" is
 * of its column-major output D^T (n x m): ROWS run along n, COLS along m. */
typedef struct gemm_algo_row {
    char device[128];       /* GPU name as the driver reports it */
    int m, n, k, batch;     /* shape, >= 1 */
    int ta, tb;             /* 0 or 1: A (B) stored transposed */
    int algo_id;            /* CUBLASLT_ALGO_CONFIG_ID; -1 the CPU emulator's */
    char tile[24];          /* "ROWSxCOLS", "undefined", "id:N", "?" or "emu" */
    int tile_rows, tile_cols; /* of a "ROWSxCOLS" tile; 0 otherwise */
    int tile_id, stages_id, splitk, reduction, swizzle; /* raw; -1 unknown */
    int cluster;            /* raw; -1 unknown or no such column */
    int emulated;           /* 1: tile "emu", the CPU emulator's fake configuration */
    int line;               /* line in the file (2 = first row) */
} gemm_algo_row;

/* Reads gemm_algos.csv.  The header must be GEMM_ALGOS_HEADER, or it
 * without cluster; every line must have the header's field count (the
 * device may be quoted), m, n, k, batch integers >= 1, ta and tb 0 or 1,
 * the raw values integers >= -1 (algo_id any int), split-K not 0, and the
 * tile one of the forms above ("emu" only with algo_id < 0).  The first bad
 * field is reported as "FILE:LINE: column N 'NAME': ..." and nothing is
 * returned.  Lines are bounded and NUL-free (common/lines.h); "-" is
 * standard input.  On success *rows (free with free()) holds *n >= 1 rows
 * in file order.  Returns 0 or -1. */
int gemm_algos_load(const char *path, gemm_algo_row **rows, size_t *n, ts_err *e);

/* One row set against the cost model. */
typedef struct gemm_algo_cmp {
    int skip;               /* 0 compared; GEMM_ALGO_SKIP_* why not */
    int kernel, split;      /* cost_gemm_choice(): index into hw->gemm_tiles (-1: the one
                             * tile_m x tile_n kernel), split-K factor */
    int model_m, model_n;   /* its tile: m rows (tokens) x n columns (outputs) */
    int cublas_m, cublas_n; /* cuBLAS's tile the same way round (its COLS x ROWS); 0 unknown */
    int tile_agrees;        /* 1 the same tile, 0 not, -1 cuBLAS's tile unknown */
    int split_agrees;       /* 1 the same split-K, 0 not, -1 cuBLAS's split unknown */
    double t_model;         /* cost_gemm(m, n, k), s */
    /* cost_gemm_forced() on cuBLAS's tile and split when that tile is one of
     * hw's kernels and the model runs that split, s; else -1 */
    double t_cublas;
} gemm_algo_cmp;

#define GEMM_ALGO_SKIP_EMULATED 1 /* the CPU emulator's fake configuration */
#define GEMM_ALGO_SKIP_BATCHED 2  /* batch > 1: cost_gemm prices one product */

/* Sets row against hw's GEMM model into *c.  Pure; cannot fail. */
void gemm_algo_compare(const hw_desc *hw, const gemm_algo_row *row, gemm_algo_cmp *c);

#endif
