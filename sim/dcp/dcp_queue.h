/*
 * The bucket queues the DCP planners draw from (sim/dcp/dcp_queue.c): the
 * per-bucket queues of unplanned sequences with reservations, and a step's
 * groups being planned and their materialisation into the plan.  Private to
 * sim/dcp/: used by dcp_plan.c (dcp-intra, bucket, packed, bound) and
 * dcp_inter.c (dcp-inter); it depends on neither.
 */
#ifndef TS_DCP_QUEUE_H
#define TS_DCP_QUEUE_H

#include "sim/dcp/dcp.h"

/* Bucket queues with reservations. */
typedef struct dq_queues {
    int32_t *q;      /* sequence indices grouped by bucket, data order within */
    int32_t *off;    /* nb + 1 offsets into q */
    int32_t *head;   /* nb: next unplanned position */
    int32_t *resv;   /* nb: reserved for the step being planned */
    int32_t *vres;   /* nb: further sequences the step's groups are expected to take
                      * by accumulation (only steers dq_next_bucket()) */
    int32_t *spare;  /* nb: scratch for dq_emit_step() */
    int32_t *xs;     /* nb: scratch for dcp-inter's cross-bucket fill */
    int32_t *kd;     /* nb: groups drawn per bucket in the step being planned (dcp.draw) */
    int32_t *cnt;    /* gpus * DCP_GAS_HARD: scratch for dq_emit_step() */
    size_t left;     /* sequences not planned */
} dq_queues;

/* Sequences of bucket b neither planned nor reserved. */
static inline int32_t dq_avail(const dq_queues *Q, int32_t b)
{
    return Q->off[b + 1] - Q->head[b] - Q->resv[b];
}

#define XFILL_MAX 4 /* micro-batches of other buckets one group takes in its slack */

/* A group being planned. */
typedef struct dq_group {
    int32_t b, n, sp, gas;   /* bucket, sequences in its first micro-batch, SP, micro-batches */
    dcp_choice ch;           /* the micro-batch configuration */
    double t;                /* planner time of one micro-batch, s */
    int32_t extra;           /* sequences of one more, partial micro-batch (fill), or 0 */
    int nx;                  /* micro-batches of other buckets in its last slack (xfill) */
    int32_t xb[XFILL_MAX], xn[XFILL_MAX]; /* their buckets and sizes */
} dq_group;

/* Index of SP size sp in the config, or -1. */
int dq_sp_index(const dcp_ctx *c, int sp);

/* Queues of the trace's sequences by bucket, data order within.  0 or -1
 * (out of memory). */
int dq_init(dq_queues *Q, const dcp_ctx *c, ts_err *e);
void dq_free(dq_queues *Q);

/* Moves n reserved sequences of bucket b into the plan as one micro-batch
 * with ca/cb checkpointed layers. */
int dq_take_mb(dcp_plan *p, dq_queues *Q, int32_t b, int32_t n, int ca, int cb, ts_err *e);

/* The next bucket to serve among those whose SP size fits `remain` GPUs
 * (sim/dcp/dcp_queue.c); -1 when none fits. */
int32_t dq_next_bucket(const dcp_ctx *c, const dq_queues *Q, const dcp_choice *ch, int remain,
                       int any_sp, const double *boost);

/* qsort order of groups: largest SP first, then bucket. */
int dq_cmp_group_sp(const void *x, const void *y);

/* Materialises a step from groups g[0..n) (sorted in place, largest SP
 * first); ch[] gives the configuration of other buckets' micro-batches. */
int dq_emit_step(dcp_plan *p, dq_queues *Q, const dcp_choice *ch, dq_group *g, int n, ts_err *e);

#endif
