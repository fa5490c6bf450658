/*
 * Internals of `tailsim-validate confirm` shared by its three files:
 * confirm.c (the command and the GPU replay), confirm_batch.c (the
 * simulator's plan as recorded, and the batch each recorded iteration
 * replays: plain C) and confirm_report.c (judging, the table and
 * confirm.json: plain C).  The two plain-C files use no CUDA, so that
 * tests/test_confirm.c drives them without a GPU.  Not a public interface.
 */
#ifndef TS_VALIDATE_CONFIRM_IMPL_H
#define TS_VALIDATE_CONFIRM_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "sim/rollout.h"

/* The drafter the simulator prices in confirm (spec_params_default: TLT's
 * table, no bandit): depth and top-k of every speculative iteration. */
#define CONF_DEPTH 8
#define CONF_TOPK 4

/* ---- the simulator's plan, recorded (confirm_batch.c) ---------------------- */

typedef struct it_rec {
    double dt;          /* predicted, s */
    int n_dec, V;       /* V 0: plain */
    int n_chunks;
    size_t off;         /* into the log's int pool: seq, ctx, acc per dec; seq, len, done per chunk */
} it_rec;

typedef struct it_log {
    it_rec *it;
    size_t n, cap;
    int32_t *pool;
    size_t np, capp;
    int oom;            /* an allocation failed: the log is incomplete */
} it_log;

/* rollout_cfg.on_iter callback: appends *it to the it_log ctx (sets oom
 * instead when memory runs out).  log_free() releases the log (zeroed
 * before the first call); both accept an empty log. */
void conf_record_iter(void *ctx, const rollout_iter *it);
void conf_log_free(it_log *l);

/* What a recorded iteration runs on the GPU, the way the simulator prices
 * it.  Target step: the decoding sequences first (V tokens each when
 * speculative, else one), then the prefill chunks; logit rows: V per
 * speculative sequence (verification), one per plain decoding sequence and
 * one per chunk (its last token), as cost_iter and cost_verify count them.
 * decode: no chunks and not speculative, so the step is planned with q_len
 * NULL and runs the decode attention kernel that calibrate times.
 * Speculative iterations add the draft (CONF_DEPTH steps over the n_dec
 * sequences, top-k CONF_TOPK) and the draft extend of CONF_DEPTH + 1 tokens
 * per sequence (cost_draft_extend's padded shape) with one logit row each. */
typedef struct conf_batch {
    int b;              /* target sequences: n_dec + n_chunks */
    int *seqs, *qlen, *nlog; /* [b]: sequence, new tokens, logit rows */
    int decode;         /* plain decode step: plan with q_len NULL */
    int spec;           /* speculative: draft and extend over seqs[0..n_dec-1] */
    int n_dec;
    int *ext_q;         /* [n_dec] draft-extend tokens per sequence */
    long long T, R;     /* target tokens and logit rows */
    int cap;            /* allocated entries */
} conf_batch;

/* The kind of r for the per-kind errors and the warm-up: 0 decode, 1 mixed
 * (prefill chunks in a plain iteration, or in a speculative one with no
 * decoding sequence, which drafts nothing), 2 speculative (drafts). */
int conf_iter_kind(const it_rec *r);
/* Fills bt (grown as needed; zero it before the first call, free with
 * conf_batch_free) with the batch of l's record r.  0, or -1 with e set on
 * allocation failure. */
int conf_batch_build(const it_log *l, const it_rec *r, conf_batch *bt, ts_err *e);
void conf_batch_free(conf_batch *bt);

/* The largest shapes of a recorded plan, each the maximum over its
 * iterations (not one iteration's): what the models' workspaces are
 * reserved for before the warm-up, so that no later step grows them. */
typedef struct conf_max {
    long long T, R;       /* target step: new tokens, logit rows */
    int draft_seqs;       /* sequences of a speculative iteration (the draft's b;
                             its steps run draft_seqs * CONF_TOPK rows) */
    long long ext_T;      /* draft-extend tokens: draft_seqs * (CONF_DEPTH + 1) */
} conf_max;

/* Walks l once and fills mx with the largest batch conf_batch_build makes
 * of any record (bt is scratch, as for conf_batch_build).  0, or -1 with e
 * set on allocation failure. */
int conf_log_max(const it_log *l, conf_batch *bt, conf_max *mx, ts_err *e);

/* ---- the replay's outcome and the report (confirm_report.c) -------------- */

typedef struct run_pred {
    double makespan;    /* predicted, s */
    double accept_len;
    int64_t iterations, spec_iterations;
    it_log log;
} run_pred;

/* How one part (baseline or speculative replay) ended. */
typedef enum part_status {
    PART_NOT_RUN = 0,   /* never started (no GPU, an earlier error, out of time) */
    PART_OK,            /* every iteration replayed and measured */
    PART_OUT_OF_TIME,   /* --budget stopped it: the iterations before are kept */
    PART_ERROR          /* stopped by an error (msg): the iterations before are kept */
} part_status;

typedef struct replay_stats {
    part_status status;
    char msg[512];           /* PART_ERROR's message; why not run */
    double measured;         /* s of GPU time (CUDA events), over the iterations replayed */
    double predicted;        /* s, the same iterations' predicted times */
    double host_s;           /* s of host work outside the timed intervals (planning) */
    long long queries_timed; /* cuBLASLt heuristic queries inside timed intervals: must be 0 */
    long long alloc_calls;   /* cudaMalloc + cudaFree calls of the replayed iterations (after
                                the warm-up; planning, timing, freeing): 0 expected */
    double err_abs[3];       /* sum |meas - pred| / pred by kind: decode, mixed, spec */
    int n[3];
    size_t done;             /* iterations replayed */
    double *iter_s;          /* measured time of each replayed iteration, s */
} replay_stats;

/* Everything the report shows; the pointers are borrowed. */
typedef struct conf_result {
    const char *device;      /* the GPU's name; "" when none was opened */
    const char *calibration; /* the hardware model's calibration */
    long long responses;
    int layers;
    uint64_t seed;
    double budget;           /* --budget, s; 0 none */
    const run_pred *base, *spec;
    const replay_stats *rb, *rs;
} conf_result;

/* Predicted against measured. */
typedef struct conf_verdict {
    int complete;            /* both parts PART_OK */
    int valid;               /* no part with a timed plan query */
    int ok;                  /* complete, valid and within the targets */
    double sp_pred, sp_meas; /* speedups; sp_meas 0 unless complete */
    double eb, es, esp;      /* % errors: baseline, speculative makespan, speedup */
} conf_verdict;

/* The status word of a part: "ok", "out of time", "error", "not run". */
const char *conf_status_name(part_status s);
/* Compares the replays with the predictions against the targets (makespan
 * within 10%, speedup within 5%).  Cannot fail. */
void conf_judge(const conf_result *r, conf_verdict *v);
/* Prints the predicted-against-measured table with each part's status, the
 * host time, the timed plan queries, the per-kind errors and the verdict to
 * f.  Cannot fail (write errors show in ferror(f)). */
void conf_print(FILE *f, const conf_result *r, const conf_verdict *v);
/* Writes dir/confirm.json (creating dir) atomically: the totals, each
 * part's status and message, and every replayed iteration's predicted and
 * measured time.  0, or -1 with e set (nothing half-written). */
int conf_write_json(const char *dir, const conf_result *r, const conf_verdict *v, ts_err *e);
/* The command's exit status: 2 when a part failed (error, timed plan
 * queries), 3 when one ran out of time or was not run, else 0 targets met,
 * 1 missed. */
int conf_exit_status(const conf_result *r, const conf_verdict *v);

#endif
