/*
 * Rollout replicas: continuous batching of a trace's responses on TP groups,
 * one engine event per iteration of each replica.
 */
#ifndef TS_ROLLOUT_H
#define TS_ROLLOUT_H

#include <stdint.h>

#include "common/err.h"
#include "models/cost_host.h"
#include "models/hw.h"
#include "results/result.h"
#include "sim/specdec.h"
#include "traces/trace.h"

/* When a replica decodes speculatively (TLT). */
typedef enum spec_mode {
    SPEC_OFF = 0,      /* plain decoding throughout (VeRL) */
    SPEC_ALWAYS,       /* speculation from the first token (TLT-base) */
    SPEC_ADAPTIVE      /* on after `spec_patience` consecutive decode iterations
                        * with at most tail_threshold running, then on for the
                        * rest of the rollout; switching flushes the KV cache,
                        * re-prefills every remaining request (prompt + tokens
                        * so far) and cuts the prefill budget to a quarter */
} spec_mode;

/* One planned iteration of one replica, as the simulator decided it: the
 * validation program replays these on a GPU with real kernels.  Arrays are
 * valid only during the callback. */
typedef struct rollout_iter {
    int replica;
    double t0, dt;            /* predicted start and duration, s */
    int n_dec;                /* decoding sequences */
    const int32_t *dec_seq;   /* their response indices (trace order) */
    const int32_t *dec_ctx;   /* their KV tokens before this iteration */
    int spec_budget;          /* verify budget V; 0: plain decode */
    const int32_t *dec_acc;   /* speculative: tokens each gains (NULL: plain) */
    int n_chunks;             /* prefill chunks */
    const int32_t *chunk_seq; /* response index */
    const int32_t *chunk_len; /* tokens in the chunk */
    const int32_t *chunk_done;/* tokens of that prefill already in the KV cache */
} rollout_iter;
typedef void (*rollout_iter_fn)(void *ctx, const rollout_iter *it);

/* How the rollout deals a step's prompts to its replicas (rollout.placement).
 * A prompt's responses always stay together on one replica. */
typedef enum rollout_placement {
    PLACE_BALANCED = 0, /* equal contiguous chunks in trace order: prompt i of n on
                         * replica floor(i * replicas / n), as VeRL dispatches a
                         * batch to the rollout's data-parallel ranks
                         * (DataProto.chunk); the default */
    PLACE_TRACE,        /* the replica the trace recorded (dp_rank); only when the
                         * trace records exactly as many ranks as there are replicas */
    PLACE_ROUND_ROBIN   /* prompt i on replica i % replicas */
} rollout_placement;

/* The placement called name ("balanced", "trace", "round-robin") into *p.
 * Returns 0, or -1 for any other name.  Cannot fail otherwise. */
int rollout_placement_parse(const char *name, rollout_placement *p);

/* The attention kernel of the rollout engine (rollout.attn; sim/rollout_attn.c):
 * which rule prices its prefill, chunk and speculative-verify attention. */
typedef enum rollout_attn {
    ROLLOUT_ATTN_HW = 0,    /* the hardware INI's attn_fa_version (the default) */
    ROLLOUT_ATTN_FLAT,      /* attn_eff at every length (attn_fa_version 0) */
    ROLLOUT_ATTN_FA2,       /* FlashAttention-2's published table (attn_fa_version 2) */
    ROLLOUT_ATTN_FA3        /* FlashAttention-3's (attn_fa_version 3) */
} rollout_attn;

/* The kernel called name ("hw", "flat", "fa2", "fa3") into *a.  Returns 0, or
 * -1 for any other name.  Cannot fail otherwise. */
int rollout_attn_parse(const char *name, rollout_attn *a);

/* The name of a (a static string; "?" outside the enum).  Cannot fail. */
const char *rollout_attn_name(rollout_attn a);

/* Whether an engine on hw can run a.  Returns 0, or -1 with e set, the
 * message starting with a's name: fa3 on a GPU whose INI does not set
 * attn_fa3 = 1 (FlashAttention-3 is Hopper-only), fa2/fa3 on one whose INI
 * leaves attn_fa_version unset (the published tables are H100's), a value
 * outside the enum. */
int rollout_attn_check(const hw_desc *hw, rollout_attn a, ts_err *e);

/* Copies hw to *out (out may be hw) with attn_fa_version set for a: hw's own
 * for ROLLOUT_ATTN_HW, 0, 2 or 3 for flat, fa2, fa3.  Checks nothing
 * (rollout_attn_check does); cannot fail. */
void rollout_attn_apply(const hw_desc *hw, rollout_attn a, hw_desc *out);

typedef struct rollout_cfg {
    const hw_desc *hw;      /* the hardware; the engine prices its iterations on a
                             * copy with `attn` applied (rollout_attn_apply) */
    const llm_desc *llm;
    int tp;                 /* GPUs per replica */
    int replicas;           /* replica count */
    int max_running;        /* max running requests per replica */
    int chunk_tokens;       /* tokens per iteration (decode tokens + prefill chunks) */
    double kv_tokens;       /* KV capacity per replica, tokens */
    int tail_threshold;     /* a replica is "in the tail" with 1..this running */
    int max_response;       /* cap applied to trace lengths (0: none) */
    spec_mode spec;         /* speculative decoding policy */
    host_mode host;         /* host time of the engine's steps (CUDA-graph limit,
                             * overlap scheduler); zeroed: GPU time only */
    int spec_patience;      /* adaptive: decode iterations at or under the threshold */
    spec_params sp;         /* acceptance model */
    uint64_t seed;          /* acceptance draws: one stream per replica */
    int spot;               /* 1: a replica that has finished trains the drafter
                             * (TLT's spot trainer) until the rollout ends */
    drafter_params dp;      /* spot trainer's batch and start-up time */
    rollout_iter_fn on_iter;/* optional: called for every planned iteration */
    void *on_iter_ctx;
    rollout_placement placement; /* how prompts go to replicas when place is NULL */
    int ranks;              /* placement trace: the rollout ranks recorded by the trace
                             * t was drawn from (a policy's segment of it), which must
                             * equal replicas; 0: t's own (its largest dp_rank + 1) */
    /* Optional, for the policies that change what the rollout runs
     * (sim/policy/policy_*.c); zero/NULL: every response of the trace, placed by
     * rollout_place(), queued in trace order, run to the end. */
    const int32_t *place;   /* per prompt: its replica, overriding placement (NULL:
                             * rollout_place) */
    const int32_t *order;   /* every response index once, in the order they join
                             * their replica's waiting queue (NULL: trace order) */
    const int32_t *start_gen;/* per response: tokens generated in an earlier step,
                             * resumed by re-prefilling prompt + them; each below
                             * its length (NULL: none) */
    int stop_groups;        /* > 0: stop once this many prompts (groups) have all
                             * their responses finished, and every must_finish
                             * one; the rest are aborted where they stand (a
                             * multi-turn trajectory: at its last turn boundary,
                             * rollout_result.turns_done) */
    const uint8_t *must_finish; /* per prompt: 1 if the stop waits for it (NULL: none) */
    /* Multi-turn traces (trace_prompt.turns; sim/rollout_turns.c): a trajectory's
     * turns run in order on its replica, leaving the batch while its tool runs. */
    int keep_kv_during_tool;/* 1: a trajectory keeps its KV while its tool runs (evicted
                             * only when the replica could not progress otherwise); 0:
                             * its KV becomes prefix cache that new work may evict */
    int tool_concurrency;   /* tool calls running at once, all replicas (0: unlimited) */
    rollout_attn attn;      /* the engine's attention kernel (zero: the hardware's) */
} rollout_cfg;

/* Per-replica outcome. */
typedef struct replica_stats {
    double end_s;           /* time its last response finished, s */
    double tail_s;          /* time with 1..tail_threshold requests running, s */
    double busy_s;          /* time with at least one request running, s */
    int64_t decode_tokens;  /* tokens generated */
    int64_t prefill_tokens; /* tokens prefilled, recomputation included */
    int64_t iterations;
    int64_t preemptions;
    int64_t spec_iterations;/* verify steps */
    int64_t ngram_iterations;/* of them, drafted by n-gram retrieval */
    int64_t spec_tokens;    /* tokens produced by verify steps */
    int64_t spec_seq_steps; /* sequence-verifies (sum over verify steps of the batch) */
    int64_t spec_accepted;  /* accepted tokens drawn, bonus included, before the
                             * response's end truncates them */
    double spec_on_s;       /* when speculation switched on, s (-1: never) */
    double train_s;         /* spot trainer: drafter-training time after end_s, s */
    int64_t drafter_steps;  /* spot trainer: drafter steps, summed over the replica's GPUs */
    int32_t responses;      /* responses placed on it */
    int32_t peak_running;
    double tool_wait_s;     /* multi-turn: idle before end_s, every trajectory it holds
                             * out on a tool call, s */
} replica_stats;

/* Trajectories of a multi-turn rollout whose intervals are kept
 * (rollout_result.tj): the ones that finished last, the critical path
 * first.  All 2,048 of a Search-R1 step would be unreadable on one screen;
 * the tail is what holds the step. */
#define ROLLOUT_TRAJ_TRACKS 8

typedef struct rollout_result {
    double makespan_s;        /* s, last response of any replica */
    int replicas;
    replica_stats *rep;       /* replicas entries */
    double *finish_s;         /* per response, trace order (prompt by prompt), s;
                               * -1 for one aborted by stop_groups */
    int32_t *gen;             /* per response: tokens it has at the end, start_gen
                               * included (its capped length when finished) */
    int64_t groups_done;      /* prompts whose responses all finished */
    int stopped;              /* 1: ended by stop_groups with responses unfinished */
    int32_t *resp_replica;    /* per response: the replica that served it */
    int64_t responses;
    int64_t decode_tokens;
    int64_t prefill_tokens;
    int64_t preemptions;
    int64_t spec_iterations;  /* verify steps, all replicas */
    int64_t ngram_iterations; /* of them, drafted by n-gram retrieval */
    double accept_len;        /* mean tokens per sequence per verify step (0: none) */
    uint64_t events;          /* engine events */
    double full_rate;         /* decode tokens/s of one replica at full batch, see rollout.c */
    double full_batch;        /* the batch size behind full_rate */
    double spot_step_s;       /* one drafter training step on one GPU, s (0: no spot trainer) */
    int64_t drafter_gpu_steps;/* drafter steps the spot trainer ran, summed over GPUs */
    double train_fraction;    /* drafter-training replica-time over replicas*makespan */
    double bubble_fraction;   /* idle replica-time after each replica's end, drafter
                               * training excluded, over replicas*makespan */
    double tail_fraction;     /* sum tail_s over replicas*makespan */
    double utilization;       /* decode tokens over replicas*makespan*full_rate */
    /* multi-turn traces only (zero otherwise; sim/rollout_turns.c) */
    int turns;                /* 1: the trace had turns */
    int64_t tool_calls;       /* tool-call turns run (several calls after a turn: one) */
    double tool_s;            /* their summed latency, s */
    double tool_queue_s;      /* summed wait for a tool slot (tool_concurrency), s */
    int64_t cached_tokens;    /* context tokens a later turn found in KV (not prefilled) */
    int64_t evictions;        /* held contexts evicted under KV pressure */
    double tool_wait_fraction;/* sum tool_wait_s over replicas*makespan (a bubble of its
                               * own; bubble_fraction is then the tail bubble only) */
    int32_t *turns_done;      /* per response: turns whose generation ended (a stopped
                               * run: a trajectory out on a tool call counts the turn
                               * before it; one cut inside a turn does not count that
                               * turn); NULL for single-turn traces */
    int64_t cut_tokens;       /* tokens of turns a stop cut part-way (discarded: a cut
                               * trajectory resumes at a turn start) */
    int32_t crit_resp;        /* the trajectory that finished last (response index) */
    int32_t crit_turns;       /* its turns */
    double crit_tool_s;       /* its time in tool calls, slot waits included, s */
    double crit_turn_s;       /* its longest turn, admission to last token, s */
    int32_t crit_turn;        /* which turn that was (0-based) */
    traj_interval *tj;        /* the intervals of the ROLLOUT_TRAJ_TRACKS trajectories that
                               * finished last, rank 0 the critical path; s from the
                               * start of the rollout (owned) */
    size_t n_tj;
    double turn_mean_s, turn_p50_s, turn_p90_s, turn_max_s; /* every turn's latency:
                               * from joining the waiting queue (the rollout's start, or
                               * its tool's return) to its last token, s */
} rollout_result;

/* The rollout ranks trace t records: its largest dp_rank + 1, 0 when no
 * prompt has one; -1 when some prompts have one and others do not (*unranked
 * set to the first without).  unranked may be NULL.  Cannot fail. */
int rollout_trace_ranks(const trace *t, size_t *unranked);

/* Places t's prompts on replicas by rule (see rollout_placement); a prompt's
 * responses stay together.  ranks: for PLACE_TRACE, the rank count t's
 * recording had (0: t's own, rollout_trace_ranks()).  Writes n_prompts
 * entries into out.  Returns 0, or -1 with e set: PLACE_TRACE on a trace
 * whose prompts do not all have a dp_rank, or whose rank count is not the
 * replica count (the message names both and suggests `balanced`). */
int rollout_place(const trace *t, int replicas, rollout_placement rule, int ranks, int32_t *out,
                  ts_err *e);

/* Simulates the rollout of every response of t (until stop_groups groups
 * are complete when set).  Returns 0 and fills *res (free with
 * rollout_result_free), or -1: a request that can never fit in the KV cache,
 * a start_gen outside [0, length), a place outside the replicas, a placement
 * that rollout_place() refuses, an attention kernel (attn) that
 * rollout_attn_check() refuses on cfg->hw, allocation failure.  The engine's
 * iterations are priced on cfg->hw with cfg->attn applied. */
int rollout_run(const rollout_cfg *cfg, const trace *t, rollout_result *res, ts_err *e);
void rollout_result_free(rollout_result *res);

/* Decode tokens/s of one replica at full batch for trace t's lengths, and
 * that batch (rollout_result's full_rate and full_batch), on cfg->hw with
 * cfg->attn applied.  Cannot fail. */
void rollout_full_rate(const rollout_cfg *cfg, const trace *t, double *rate, double *batch);

#endif
