/*
 * Data-centric parallel training (DCP): planners that turn a batch trace
 * (traces/batch.h) into optimizer steps on a cluster, and a simulator that
 * prices every step with the training cost model (models/train_cost.h).
 *
 * A plan is a list of steps; a step is a set of SP groups (disjoint GPU
 * ranges) that each run a list of micro-batches (its gradient-accumulation
 * count) and then all synchronise gradients once.  Every sequence of the
 * trace is in exactly one micro-batch of one plan.  Strategies:
 *   bucket     one fixed SP size; a bucket's micro-batch doubled until memory
 *              runs out, then cut toward the median bucket time; one
 *              micro-batch per group per step; checkpointing everywhere;
 *   packed     the same SP size; sequences packed first-fit-decreasing into
 *              micro-batches of a token budget;
 *   dcp-intra  groups filled from the data as they come, each then re-picks
 *              (SP, micro-batch) so that all finish near the fastest;
 *   dcp-inter  each bucket keeps its best (SP, micro-batch) by samples/s/GPU;
 *              groups get accumulation counts from dcp_gas_search();
 *   +pac       (suffix) per bucket, a knapsack over the free memory picks how
 *              many layers of each type skip recomputation;
 *   bound      a lower bound on the time of the whole trace: each sequence at
 *              its cheapest SP size in GPU-seconds (tc_seq_lower_bound),
 *              perfectly balanced, plus one gradient synchronisation.
 * Planning uses a per-bucket profile (dcp_ctx) as DCP's profiler does; the
 * simulation prices each micro-batch from its own sequences.
 *
 * Ownership: dcp_ctx_init() allocates the profile, freed by dcp_ctx_free();
 * a dcp_plan owns its arrays, freed by dcp_plan_free() (both NULL-safe and
 * idempotent on zeroed structs).  Nothing here prints.
 */
#ifndef TS_DCP_H
#define TS_DCP_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "models/hw.h"
#include "models/train_cost.h"
#include "results/result.h"
#include "traces/batch.h"

#define DCP_MAX_SP 8        /* SP sizes a scenario may list */
#define DCP_MAX_STRATEGIES 12
#define DCP_MAX_K 22        /* micro-batches up to 2^21 sequences */
/* Most micro-batches a group accumulates in one step: a guard on planner
 * time and scratch memory, not a planning rule (VideoSys bounds a group only
 * by max_gas x the longest micro-batch over its own; no STDiT3 or 1D plan of
 * the shipped scenarios reaches 256, where 64 bound +pac's small ones). */
#define DCP_GAS_HARD 256

typedef enum dcp_kind { DCP_BUCKET, DCP_PACKED, DCP_INTRA, DCP_INTER, DCP_BOUND } dcp_kind;

typedef struct dcp_strategy {
    dcp_kind kind;
    int pac;           /* 1: pyramid activation checkpointing (knapsack per bucket) */
    char name[32];     /* as written: "dcp-inter+pac" */
} dcp_strategy;

/* Parses a comma-separated list ("bucket,dcp-inter+pac,bound").  Returns 0
 * and sets *n, or -1 naming the bad entry. */
int dcp_parse_strategies(const char *list, dcp_strategy *out, int max, int *n, ts_err *e);

/* Parses "1,2,4,8" (ascending powers of two, at most DCP_MAX_SP).  Returns 0 or -1. */
int dcp_parse_sp_sizes(const char *list, int *sp, int *n, ts_err *e);

typedef struct dcp_cfg {
    int gpus;               /* cluster GPUs */
    int sp[DCP_MAX_SP];     /* SP sizes the planners may use, ascending */
    int n_sp;
    int bucket_sp;          /* SP of bucket/packed; 0: the smallest listed that fits the longest sequence */
    double mem_cap;         /* fraction of HBM a micro-batch may use (states included) */
    double reserve_bytes;   /* per GPU: CUDA context, workspaces, fragmentation */
    int zero_stage;         /* 0..3 */
    int ring;               /* 1: ring attention, 0: Ulysses */
    int max_gas;            /* dcp-inter: most micro-batches per group per step */
    double overshoot;       /* dcp-inter: penalty on finishing after the target */
    int fill;               /* dcp-inter: 1 = a group with slack before the step's longest
                             * takes one more, partial micro-batch that fits in it */
    double ahead;           /* dcp-inter: coarse buckets are drawn to finish this many steps
                             * before the epoch ends (0: in proportion, as the others) */
    int draw_work;          /* dcp-inter: 0 = a step's groups draw the bucket with the largest
                             * share of its sequences left; 1 = the largest work left per
                             * group already drawn (dcp.draw = work) */
    int xfill;              /* dcp-inter: 1 = a group's slack left after the fill takes
                             * micro-batches of other buckets at its SP size (beyond DCP) */
    int endgame;            /* dcp-inter: once what is left fits in this many steps at the
                             * last target, pack it into that many (sim/dcp/dcp_endgame.c; 0: off) */
    double coarse;          /* dcp-inter: a bucket is coarse when one micro-batch takes more
                             * than this fraction of the previous step's target */
    double tie_tol;         /* dcp-intra/inter: configurations within this fraction of a
                             * bucket's best samples/s/GPU count as ties; the shortest wins */
    double pack_tokens;     /* packed: token budget per micro-batch (0: the longest sequence) */
    uint64_t seed;          /* planner randomness (bucket access order) */
} dcp_cfg;

/* Sets DCP's defaults: SP 1,2,4,8, cap 0.70, 2 GB reserve, ZeRO 1, Ulysses,
 * at most 5 accumulation steps, overshoot 1.2, seed 1; gpus is left 0. */
void dcp_cfg_default(dcp_cfg *c);

/* One way to run a bucket's micro-batch. */
typedef struct dcp_choice {
    int32_t sp;           /* SP size (0: infeasible) */
    int32_t bs;           /* micro-batch, sequences */
    int32_t ckpt_a, ckpt_b; /* checkpointed layers per type */
    double time_s;        /* one micro-batch, s (profile: the bucket's representative shape) */
} dcp_choice;

/* Everything the planners read: the cluster, the model, the trace and the
 * per-bucket profile. */
typedef struct dcp_ctx {
    const hw_desc *hw;
    const tc_model *tm;
    const btrace *bt;       /* bucketized */
    dcp_cfg cfg;
    int bucket_sp;          /* resolved */
    double states_bytes;    /* model states per GPU */
    double budget_bytes;    /* activation bytes a micro-batch may use per GPU */
    double sync_s;          /* gradient sync + optimizer per step */
    int32_t nb;             /* buckets */
    int32_t *max_bs;        /* [b * n_sp + j]: largest micro-batch at sp[j], full checkpointing (0: none) */
    double *tab;            /* [(b * n_sp + j) * DCP_MAX_K + k]: time at bs 2^k, full checkpointing */
    dcp_choice *best;       /* [b]: best by samples/s/GPU, full checkpointing */
    dcp_choice *best_pac;   /* [b]: best by samples/s/GPU with PAC */
    dcp_choice *bkt;        /* [b]: the bucket strategy's choice at bucket_sp */
    double profile_ms;      /* wall time of building the profile */
} dcp_ctx;

/* Builds the profile.  bt must be bucketized and outlive the context; hw and
 * tm too.  Returns 0, or -1 with a message: no SP size usable, a sequence
 * that fits at no SP size, the bucket SP does not fit the longest
 * sequence, allocation failure. */
int dcp_ctx_init(dcp_ctx *c, const hw_desc *hw, const tc_model *tm, const btrace *bt,
                 const dcp_cfg *cfg, ts_err *e);
void dcp_ctx_free(dcp_ctx *c);

/* Time of bucket b at SP index j and micro-batch bs from the profile
 * (interpolated between powers of two), full checkpointing. */
double dcp_prof_time(const dcp_ctx *c, int32_t b, int j, int32_t bs);

/* Planner (profile) time of one micro-batch of bs sequences of bucket b's
 * representative shape at SP sp with ca/cb checkpointed layers, s: what
 * DCP's profiler would have measured for it.  Cannot fail. */
double dcp_est_mb_time(const dcp_ctx *c, int32_t b, int sp, int32_t bs, int ca, int cb);

/* One step's terms of VideoSys' calculate_imbalance: group i holds sp[i]
 * GPUs for t[i] s (t >= 0), the step's compute lasts the largest t, GPUs in
 * no group wait all of it.  Returns the idle GPU-seconds, sum over GPUs of
 * (max - t_gpu), and sets *tmax to the largest t (0 when n == 0).  The
 * imbalance of a run is the sum of these over its steps divided by gpus
 * times the sum of *tmax: per step the mean over GPUs of (max - t_i), over
 * max, weighted by the step's length.  Cannot fail. */
double dcp_step_idle(const double *t, const int32_t *sp, int n, int gpus, double *tmax);

/* Planner time of n sequences of bucket b (n <= ch->bs) under choice ch,
 * s: ch->time_s scaled by the profile's ratio of n to ch->bs sequences at
 * ch's SP size.  ch->sp must be one of the configured sizes. */
double dcp_choice_time(const dcp_ctx *c, int32_t b, const dcp_choice *ch, int32_t n);

/* PAC: the checkpointing of bucket b at (sp, bs) that saves the most
 * recomputation within the memory budget (exact over both layer types).
 * Fills ckpt_a/ckpt_b and time_s of *ch from its sp and bs; returns 0, or
 * -1 when even full checkpointing does not fit. */
int dcp_pac(const dcp_ctx *c, int32_t b, dcp_choice *ch);

/* The accumulation search of dcp-inter, exact: given k group times e[]
 * (s, > 0), picks gas[i] in [1, min(cap[i], dcp_gas_limit(e[i], max e,
 * max_gas))] (cap may be NULL: no caps; the planner caps a group by the
 * micro-batches its bucket has left) and a target T in (0, max_gas * max e]
 * minimising sum_i pen(e[i] * gas[i] - T) / T, where pen(x) = x * overshoot
 * for x > 0 and -x otherwise.  VideoSys' search sums absolute deviations,
 * which never prefers a longer target; dividing by T makes it weigh the
 * imbalance relative to the step.  Groups with equal (time, limit) are
 * priced together: O(D^2 * DCP_GAS_HARD) for D distinct ones.  Returns the
 * minimum; k == 0 returns 0. */
double dcp_gas_search(const double *e, const int *cap, int k, int max_gas, double overshoot,
                      int *gas);

/* Most micro-batches a group of micro-batch time e may accumulate when the
 * longest group's is e_max: floor(max_gas * e_max / e), in [1, DCP_GAS_HARD]. */
int dcp_gas_limit(double e, double e_max, int max_gas);

typedef struct dcp_mb {
    int32_t first, n;        /* plan->seq[first .. first + n) */
    int32_t ckpt_a, ckpt_b;  /* checkpointed layers */
} dcp_mb;

typedef struct dcp_group {
    int32_t sp, gpu0;        /* GPUs gpu0 .. gpu0 + sp - 1 */
    int32_t mb0, n_mb;       /* micro-batches plan->mb[mb0 .. mb0 + n_mb) */
} dcp_group;

typedef struct dcp_step {
    int32_t g0, n_g;         /* groups plan->grp[g0 .. g0 + n_g) */
} dcp_step;

typedef struct dcp_plan {
    dcp_strategy strat;
    int32_t *seq; size_t n_seq, cap_seq;  /* sequence indices in execution order */
    dcp_mb *mb; size_t n_mb, cap_mb;
    dcp_group *grp; size_t n_grp, cap_grp;
    dcp_step *step; size_t n_step, cap_step;
    double bound_s;          /* bound: lower bound on the whole trace, s */
    double plan_ms;          /* planner wall time */
} dcp_plan;

/* Plans the whole trace with strategy s.  *out is overwritten (zeroed
 * first).  Returns 0, or -1 with a message (allocation failure, a
 * sequence no choice can hold). */
int dcp_plan_run(const dcp_ctx *c, const dcp_strategy *s, dcp_plan *out, ts_err *e);
void dcp_plan_free(dcp_plan *p);

/* Plan-building helpers shared by the planners (sim/dcp/dcp_*.c): append a
 * sequence index, a micro-batch over plan->seq[first .. first + n), a group
 * over its micro-batches, or close a step holding the groups from g0 on.
 * Each returns 0, or -1 with a message on allocation failure (the plan keeps
 * what it had; free it with dcp_plan_free()). */
int dcp_plan_push_seq(dcp_plan *p, int32_t idx, ts_err *e);
int dcp_plan_push_mb(dcp_plan *p, int32_t first, int32_t n, int32_t ca, int32_t cb, ts_err *e);
int dcp_plan_push_group(dcp_plan *p, int32_t sp, int32_t mb0, int32_t n_mb, ts_err *e);
int dcp_plan_push_step(dcp_plan *p, int32_t g0, ts_err *e);

/* dcp-inter's last steps (sim/dcp/dcp_endgame.c).  q[head[b] .. end[b]) are
 * bucket b's unplanned sequences, ch[b] its configuration.
 * dcp_endgame_work() is their planner work in GPU-seconds (each sequence
 * at its share of a full micro-batch).  dcp_endgame() appends them to *p
 * as `steps` steps: micro-batches of each bucket's configuration placed
 * longest first on the least-loaded of steps x (groups per step) bins of
 * their SP size, GPUs shared among SP sizes by work, the heaviest bins
 * making the first step.  Returns 1 when it did, 0 when it declined (a
 * bucket has no configuration, the SP sizes do not fit the GPUs, or a
 * group would exceed DCP_GAS_HARD micro-batches; *p untouched), -1 on
 * error. */
double dcp_endgame_work(const dcp_ctx *c, const dcp_choice *ch, const int32_t *head,
                        const int32_t *end);
int dcp_endgame(const dcp_ctx *c, const dcp_choice *ch, const int32_t *q, const int32_t *head,
                const int32_t *end, int steps, dcp_plan *p, ts_err *e);

typedef struct dcp_result {
    char name[32];
    int64_t steps;           /* optimizer steps simulated */
    int64_t seqs, tokens;    /* sequences and latent tokens simulated */
    double time_s;           /* sum of step times, s */
    double step_s;           /* mean step time, s */
    double sync_s;           /* of time_s: gradient sync + optimizer, s */
    double recompute_s;      /* GPU-seconds of recomputation / gpus, s */
    double comm_s;           /* GPU-seconds of SP communication / gpus, s */
    double tokens_per_s;
    double imbalance;        /* sum over steps and GPUs of (max - t) / (gpus * sum of max) */
    double imbalance_plan;   /* the same as VideoSys' sampler logs it: each group's time its
                              * micro-batch count x the profiled time of its largest one,
                              * over the steps that fill every GPU (VideoSys runs no other) */
    int64_t full_steps;      /* steps whose groups hold every GPU */
    double idle_fraction;    /* idle GPU-seconds / (gpus * time_s) */
    double peak_mem_bytes;   /* largest micro-batch memory per GPU, states included */
    int feasible;            /* 1: every micro-batch within the cap */
    double mean_gas;         /* micro-batches per group per step */
    double mean_ckpt;        /* checkpointed layers per micro-batch (fraction of all layers) */
    double sp_share[DCP_MAX_SP]; /* share of busy GPU-seconds at each cfg SP size */
    double plan_ms;
} dcp_result;

/* One simulated step (`tailsim dcp --per-step`). */
typedef struct dcp_step_stat {
    int32_t groups, gpus_used; /* groups, and the GPUs they hold */
    int32_t mbs;               /* micro-batches */
    int32_t mixed;             /* groups whose micro-batches span several buckets */
    double compute_s;          /* the slowest group's compute, s (the sync follows) */
    double idle_gs;            /* idle GPU-seconds before the sync */
    double imbalance;          /* idle_gs / (gpus x compute_s), 0 for an empty step */
} dcp_step_stat;

/* Simulates the first max_steps steps of plan p (max_steps <= 0: all) and
 * fills *r.  When rec is not NULL, appends the per-GPU timeline of the first
 * tl_steps steps (compute busy in phase "update", waiting idle, gradient sync
 * busy in phase "sync"), GPU indices shifted by gpu_offset.  Returns 0, or
 * -1 on allocation failure. */
int dcp_simulate(const dcp_ctx *c, const dcp_plan *p, int max_steps, dcp_result *r,
                 run_record *rec, int gpu_offset, int tl_steps, ts_err *e);

/* Checks the invariants of plan p of the trace in c: every sequence index
 * appears exactly once, micro-batches in plan order and none empty, every
 * step's groups non-empty, on consecutive GPUs from 0 and within the
 * cluster, at most DCP_GAS_HARD micro-batches a group, and every
 * micro-batch's memory at its group's SP size and checkpointing within the
 * cap (bound: a positive time).  Returns 0, or -1 with the first broken one
 * in why (the tests assert on it; the planner fuzz target aborts). */
int dcp_plan_check(const dcp_ctx *c, const dcp_plan *p, char *why, size_t n);

/* Plans and simulates like dcp_run() without the timeline, and returns the
 * figures of every simulated step in *steps (r->steps entries, NULL for
 * `bound`, which has no steps; free() it).  Returns 0, or -1 with e set. */
int dcp_run_steps(const dcp_ctx *c, const dcp_strategy *s, int max_steps, dcp_result *r,
                  dcp_step_stat **steps, ts_err *e);

/* Plans with strategy s (dcp_plan_run) and simulates the plan
 * (dcp_simulate with max_steps, rec, gpu_offset, tl_steps); when plan is
 * not NULL, writes its dcp_plan_describe() there (plan_n bytes).  The plan
 * is freed.  Returns 0, or -1 with the planner's or simulator's message. */
int dcp_run(const dcp_ctx *c, const dcp_strategy *s, int max_steps, dcp_result *r,
            run_record *rec, int gpu_offset, int tl_steps, char *plan, size_t plan_n, ts_err *e);

/* A one-line description of a plan's first step ("4 x [sp8 bs64 gas1
 * ckpt56]") and its SP/gas spread, into buf.  Returns buf. */
const char *dcp_plan_describe(const dcp_ctx *c, const dcp_plan *p, char *buf, size_t n);

#endif
