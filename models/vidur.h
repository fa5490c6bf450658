/*
 * Vidur profiling CSVs (github.com/microsoft/vidur data/profiling/): per-
 * operator times of one transformer layer on H100, and NCCL all-reduce times.
 * Read strictly, predicted with the cost model, summarized as MAPE per op
 * and token band, with the timing resolution the file's samples were
 * recorded at and the error beyond it.  Used by `tailsim calib vidur` and by
 * the model tests.
 */
#ifndef TS_VIDUR_H
#define TS_VIDUR_H

#include <stddef.h>

#include "common/err.h"
#include "models/hw.h"

/* Operators known to the loader, in report order; the first ten are Vidur's
 * MLP-profile ops (cost_vidur_op names), the last is the all-reduce profile. */
enum {
    VOP_EMB, VOP_INPUT_LN, VOP_PRE_PROJ, VOP_ROPE, VOP_POST_PROJ, VOP_POST_LN,
    VOP_UP_PROJ, VOP_ACT, VOP_DOWN_PROJ, VOP_ADD, VOP_ALL_REDUCE, VOP_COUNT
};
extern const char *const vidur_op_names[VOP_COUNT];
/* 1 for the four GEMM ops (attn_pre_proj, attn_post_proj, mlp_up/down_proj). */
int vidur_op_is_gemm(int op);

typedef struct vidur_row {
    int line;               /* line in the CSV (1 = header) */
    llm_desc arch;          /* from the row's own columns (MLP profiles) */
    int tp;                 /* num_tensor_parallel_workers (MLP profiles) */
    int tokens;             /* num_tokens (MLP profiles) */
    double size;            /* bytes (all-reduce profiles) */
    int workers;            /* num_workers (all-reduce profiles) */
    double ms[VOP_COUNT];   /* measured time of the chosen stat, ms; < 0 if absent */
} vidur_row;

typedef struct vidur_table {
    vidur_row *rows;
    size_t n;
    int has[VOP_COUNT];     /* 1 when the file has a column for the op */
    /* Timing resolution of the samples, ms: the largest step of
     * vidur_res_steps_ms that every non-zero .min and .max value of the
     * known ops is a multiple of; 0 when unknown (no such column, every
     * value 0, or a value finer than the finest step). */
    double res_ms;
} vidur_table;

/* The steps vidur_load() tries, coarsest first, ms: 1 ms down to 1 ns by
 * factors of ten. */
#define VIDUR_RES_STEPS 7
extern const double vidur_res_steps_ms[VIDUR_RES_STEPS];

/* Reads FILE, taking the `stat` column ("median", "mean", "min", "max") of
 * every known op.  An MLP profile needs n_head, n_kv_head, n_embd,
 * n_expanded_embd, vocab_size, use_gated_mlp, num_tokens and
 * num_tensor_parallel_workers; an all-reduce profile needs size and
 * num_workers.  The .min and .max columns of every known op are read too
 * (they must be times in ms like the chosen one) to find the timing
 * resolution (t->res_ms).  Other columns are ignored.  Lines are bounded and NUL-free
 * (common/lines.h).  Returns 0, or -1 with a message naming file, line and
 * column (nothing is kept).  Free with vidur_free(). */
int vidur_load(const char *path, const char *stat, vidur_table *t, ts_err *e);
void vidur_free(vidur_table *t); /* NULL-safe; leaves an empty table */

typedef struct vidur_op_stat {
    int n;                  /* rows predicted */
    double mape;            /* mean absolute percentage error, % */
    double worst;           /* largest absolute percentage error, % */
    int worst_line;         /* CSV line of the worst case */
    double mape_res;        /* MAPE beyond the resolution allowance, % (res_ms 0: = mape) */
} vidur_op_stat;

/* Token bands of `calib vidur --bands` (MLP profiles): 1-32 tokens (decode
 * batches), 33-256, 257-1024 (prefill chunks), 1025 and up. */
#define VIDUR_BANDS 4
extern const int vidur_band_hi[VIDUR_BANDS]; /* last token count of each band */
/* Band of a token count (>= 1): 0..VIDUR_BANDS-1.  Cannot fail. */
int vidur_band_of(int tokens);

typedef struct vidur_band_stat {
    int n;                  /* predictions in the band */
    double mape;            /* mean absolute percentage error, % */
    double bias;            /* mean signed percentage error, % (> 0: predicted slow) */
    double mape_res;        /* MAPE beyond the resolution allowance, % (res_ms 0: = mape) */
} vidur_band_stat;

typedef struct vidur_report {
    vidur_op_stat ops[VOP_COUNT];
    /* per op and token band (MLP profiles only; the all-reduce has n = 0);
     * row VOP_COUNT is the layer sum (ops but the embedding) */
    vidur_band_stat bands[VOP_COUNT + 1][VIDUR_BANDS];
    size_t rows;
    double gemm_mape;       /* % over all GEMM-op predictions */
    double overall_mape;    /* % over all predictions */
    /* One MLP-profile row's per-layer ops added up (all but the embedding:
     * the non-attention part of a layer, as cost_iter adds the same terms):
     * MAPE, worst case and the signed mean error (bias, %) of the sums, over
     * the rows whose every op of the file was predicted; n = 0 for an
     * all-reduce profile. */
    vidur_op_stat layer;
    double layer_bias;
    /* The step the mape_res figures allow for, ms (0: none, and each
     * mape_res equals its mape): one step either way for an op, and one
     * step an op summed for the layer (layer_ops of them). */
    double res_ms;
    int layer_ops;          /* ops in each layer sum (the file's ops but emb and all_reduce) */
} vidur_report;

/* The cost model's time for op of row, in seconds (cost_vidur_op or
 * comm_allreduce); < 0 when the model has no formula for it. */
double vidur_predict(const vidur_row *row, int op, const hw_desc *hw);

/* A row's percentage error beyond a recording allowance: max(0, |pred -
 * meas| - allow) / meas x 100, all times in the same unit; meas > 0.  The
 * part of the error that no rounding or truncation of meas by up to allow
 * explains.  Cannot fail. */
double vidur_err_beyond(double pred, double meas, double allow);

/* Predicts every op of every row (cost_vidur_op, comm_allreduce) and
 * summarizes, with the mape_res figures for the file's own resolution
 * (t->res_ms).  Cannot fail. */
void vidur_evaluate(const vidur_table *t, const hw_desc *hw, vidur_report *r);

/* The same with the resolution res_ms (ms; <= 0: no allowance) instead of
 * the file's: `calib vidur --resolution`.  Cannot fail. */
void vidur_evaluate_at(const vidur_table *t, const hw_desc *hw, double res_ms, vidur_report *r);

#endif
