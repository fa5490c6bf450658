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
 *   h2d, d2h          m bytes copied between pinned host memory and the device
 *                     (the host link, hw pcie_bw)
 *   layer_decode      one decoder layer, one new token per sequence: m tokens
 *                     (= batch), n hidden, k tp (shapes are the model's / tp),
 *                     batch, ctx_sum and ctx_max (context tokens attended,
 *                     new ones included), q_len 1
 *   layer_chunk       as layer_decode with q_len new tokens per sequence
 *                     (verification of V draft tokens, or a prefill chunk)
 *   drafter_step      one EAGLE draft step at depth >= 1: m rows (batch *
 *                     topk), n hidden, k tp, batch, ctx_sum, ctx_max, q_len
 *                     topk (fc + drafter layer + LM head + top-k + select)
 *   train_fwd, train_fwd_bwd, train_fwd_bwd_recompute
 *                     a stack of q_len layers on one micro-batch: m tokens,
 *                     n hidden, k tp, batch sequences of ctx_max tokens
 *                     (ctx_sum = m); peak_bytes = tracked device memory
 *                     (weights of the stack, fp32 gradients, activations,
 *                     scratch)
 * flops and bytes are the napkin numbers of each row (bytes = each input
 * read once, each output written once).  peak_bytes is 0 for other ops.
 */
#ifndef TS_VALIDATE_H
#define TS_VALIDATE_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

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
    double peak_bytes;       /* train_* rows: tracked peak device memory; else 0 */
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

/* The header of gemm_algos.csv (calib_write_algos). */
#define CALIB_ALGOS_HEADER                                                            \
    "device,m,n,k,batch,ta,tb,algo_id,tile,tile_id,stages_id,splitk,reduction,swizzle," \
    "cluster"

/* Writes the n records of cuBLASLt's choices (kt_blas_algos) as CSV with
 * CALIB_ALGOS_HEADER, one row per record, device (quoted) in the first
 * column, atomically (a reader never sees half a file; nothing is left on
 * failure).  Returns 0 or -1 with e naming the file. */
int calib_write_algos(const char *device, const kt_blas_algo *a, size_t n, const char *path,
                      ts_err *e);

/* ---- the calibrate command's state, shared by its sweep files ---------- */

#define MAX_REPS 200

typedef struct vmodel {
    char name[64];
    int hidden, heads, kv_heads, hd, ffn, vocab;
    int qkv_bias;
} vmodel;

typedef struct vcfg { /* a model at one tensor-parallel degree, local shapes */
    const vmodel *m;
    int tp, heads, kv, ffn, vocab;
} vcfg;

typedef struct calib {
    int quick, warmup, reps;
    int tail;            /* --tail: the decode tail's groups at TP 1 (implies quick) */
    int algos_only;      /* --algos-only: plan the gemm group's shapes, time nothing */
    size_t cap_tokens;   /* most KV tokens in one attention batch */
    double copy_bw;      /* bytes/s, measured; 0 before */
    double peak_flops;   /* FLOP/s of gemm_peak; 0 before */
    vmodel models[2];
    vcfg cfgs[8];
    int ncfg;
    calib_set set;
    float us[MAX_REPS];
    char csv[4096];      /* rewritten after every row; "" for none */
    char algos[4096];    /* DIR/gemm_algos.csv: rewritten after every group */
    double deadline;     /* ts_wall_s() after which no row starts; 0 none */
    int out_of_time;     /* set when a row was refused for the deadline */
    ts_err err;
} calib;

/* A zeroed row named op. */
calib_row calib_row_init(const char *op);
/* Times fn (kt_time), fills r's statistics and clocks, prints the row with
 * its napkin math, appends it to c->set and rewrites c->csv (when set) with
 * every row so far, so that a run killed midway keeps what it measured.
 * Past c->deadline it measures nothing: sets c->out_of_time and returns -1.
 * 0, or -1 with c->err set. */
int calib_measure(calib *c, kt_launch_fn fn, void *arg, calib_row *r);
/* n bf16 on the device, U(-1, 1); NULL (c->err set) on failure. */
kt_bf16 *calib_dev_random(calib *c, size_t n, uint64_t seed);

/* Sweeps of the composite kernels (validate/calib_model.c): one decoder
 * layer (layer_decode, layer_chunk), the drafter step, and training
 * forward/backward of a two-layer stack.  0, or -1 with c->err set. */
int calib_sweep_layer(calib *c);
int calib_sweep_drafter(calib *c);
int calib_sweep_train(calib *c);

/* Whether name is one of the comma-separated names of list ("a,b,c");
 * a NULL list holds every name.  Cannot fail. */
static inline int val_in_list(const char *list, const char *name)
{
    if (!list)
        return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return 1;
        if (!q)
            break;
        p = q + 1;
    }
    return 0;
}

/* The first name of the comma-separated list that names[0..n-1] lacks,
 * copied into bad (size bn); 0 when every name is known.  Cannot fail. */
static inline int val_unknown_name(const char *list, const char *const *names, size_t n,
                                   char *bad, size_t bn)
{
    for (const char *p = list; p && *p;) {
        const char *q = strchr(p, ',');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        int known = 0;
        for (size_t i = 0; i < n; i++)
            known |= strlen(names[i]) == len && !strncmp(p, names[i], len);
        if (!known) {
            snprintf(bad, bn, "%.*s", (int)len, p);
            return 1;
        }
        if (!q)
            break;
        p = q + 1;
    }
    return 0;
}

/* Subcommands: return the process exit status. */
int val_selftest(int argc, char **argv);
int val_calibrate(int argc, char **argv);

/* Opens the GPU; prints "no CUDA device" (and why) to stderr when there is
 * none.  Returns 1 when a device is open, 0 when none, -1 on error. */
int val_open_device(kt_device *d);

#endif
