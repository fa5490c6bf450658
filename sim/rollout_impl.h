/*
 * Private to the rollout replica (sim/rollout.c, sim/rollout_spec.c,
 * sim/rollout_run.c): the request and replica state, and the functions the
 * files share.  Not part of the library's interface; nothing outside
 * sim/rollout*.c includes it.
 */
#ifndef TS_ROLLOUT_IMPL_H
#define TS_ROLLOUT_IMPL_H

#include "models/cost.h"
#include "sim/engine.h"
#include "sim/rollout.h"
#include "sim/spec_bandit.h"

enum { R_WAIT, R_PREFILL, R_DECODE, R_DONE };

typedef struct req {
    int32_t prompt;     /* prompt tokens */
    int32_t target;     /* response length, tokens */
    int32_t gen;        /* tokens generated (while decoding: as of d_start) */
    int32_t need;       /* tokens to prefill in this admission */
    int32_t done;       /* tokens of it prefilled so far */
    int32_t state;
    int32_t hpos;       /* index in the decode heap */
    int32_t replica;
    int64_t d_start;    /* replica decode counter when decoding began */
    int64_t fin;        /* decode counter value at which it finishes */
    int64_t admit;      /* admission order (preemption picks the largest) */
    int32_t kv;         /* speculative decoding: KV tokens held */
    int32_t acc;        /* speculative decoding: tokens of the verify in flight */
    double q;           /* drafter quality for this sequence */
    double rep;         /* n-gram repetitiveness of this sequence */
} req;

/* A multi-turn request's state (sim/rollout_turns.c), in sim.rt parallel to
 * sim.reqs; allocated only when the trace has turns, so that a single-turn
 * rollout's requests stay as small as before (memory and cache footprint of
 * the hot path). */
typedef struct req_turn {
    const trace_turn *tt; /* its turns (NULL: a single-turn response) */
    int32_t nt, k;      /* turn count, current turn */
    int32_t full;       /* its trace length (rollout_result.gen when done) */
    int32_t held;       /* context tokens in KV while out of the batch (counted in
                         * kv_used, or kv_soft when soft) */
    int32_t lprev, lnext; /* the replica's list of held contexts, oldest first (-1) */
    int32_t soft;       /* 1: held is evictable prefix cache (kv_soft) */
    int32_t turn_arg;   /* its longest turn so far: which */
    int32_t hit;        /* context tokens its current turn found in KV at admission
                         * (counted in sim.cached_tokens until a flush or a
                         * preemption makes the turn prefill them after all) */
    int64_t tv0;        /* its first turn's index in sim.tv */
    double t_turn;      /* when the current turn entered the waiting queue, s */
    double t_tool;      /* when its tool call was issued, s */
    double tool_sum;    /* time in tool calls, slot waits included, s */
    double turn_max;    /* longest turn so far, s */
} req_turn;

/* When a turn got where (sim.tv, multi-turn only), s from the start of the
 * rollout; -1: not reached.  The per-trajectory timeline is built from it. */
typedef struct turn_times {
    double queued;      /* joined the replica's waiting queue */
    double admitted;    /* first admitted (its prefill began) */
    double ended;       /* generated its last token */
    double tool0;       /* its tool call started (got a slot) */
    double tool1;       /* its tool call returned */
} turn_times;

typedef struct chunk {
    int32_t r;          /* request */
    int32_t c;          /* tokens in this chunk */
} chunk;

typedef struct replica {
    int id;
    int32_t *wq;        /* waiting deque (ring) */
    int32_t wcap, whead, wn;
    int32_t *pre;       /* prefilling requests, admission order */
    int32_t npre;
    int32_t *heap;      /* decoding requests, min-heap on fin */
    int32_t nheap;
    chunk *sched;       /* chunks of the iteration in flight */
    int32_t nsched;
    int32_t sched_dec;  /* decode tokens of the iteration in flight */
    int32_t running_at_plan;
    int64_t D;          /* decode iterations so far */
    double kv_used;     /* tokens */
    double dsum;        /* sum of decoding requests' KV tokens */
    double t_last;      /* start of the iteration in flight, s */
    int32_t chunk;      /* prefill token budget per iteration */
    int spec_on;        /* decoding speculatively */
    int patience;       /* consecutive tail decode iterations (adaptive switch) */
    int32_t *sp;        /* speculative decoding requests, admission order */
    spec_tree *sp_tree; /* their verify trees (parallel to sp; rebuilt when V changes) */
    int32_t *sp_key;    /* the tree's V | depth << 12 | topk << 20 (0: none yet) */
    int32_t nsp;
    int32_t sp_budget;  /* verify budget V of the iteration in flight */
    double sp_ctx;      /* sum of their KV tokens */
    struct spec_bandit *bandit; /* draft-configuration bandit, or NULL (table) */
    int sp_arm;         /* bandit arm of the iteration in flight (-1: table) */
    int sp_ngram;       /* the iteration in flight drafts by n-gram retrieval */
    double kv_soft;     /* tokens of evictable prefix cache (multi-turn) */
    int32_t lhead, ltail; /* held contexts, oldest first (-1: none) */
    int idle;           /* no iteration in flight (nothing to run now) */
    double idle_t;      /* since when, s */
    gsl_rng *rng;       /* acceptance draws */
    int32_t *it_buf;    /* scratch for rollout_iter callbacks (6 x wcap), or NULL */
    replica_stats *st;
} replica;

typedef struct sim {
    const rollout_cfg *cfg;
    req *reqs;
    req_turn *rt;       /* multi-turn state parallel to reqs; NULL: single-turn trace */
    replica *reps;
    int64_t admit_seq;
    spec_arm arms[SPEC_MAX_ARMS]; /* the bandit's arms (cfg->sp.bandit) */
    int n_arms;
    double *finish_s;
    int64_t unfinished;
    int failed;
    ts_err *e;
    /* stop_groups (sim/rollout.c): group of each response, responses left
     * per group, complete groups, must_finish groups left */
    int32_t *grp, *grp_left;
    int64_t groups_done, must_left;
    engine *eng;
    cost_cache *cc;     /* memo of cost_iter() on (hw, llm, tp), owned by rollout_run */
    /* multi-turn: tool calls running, and those waiting for a slot (FIFO) */
    int32_t tools_running;
    int32_t *tq;
    int64_t tq_head, tq_n, tq_cap;
    int64_t tool_calls, cached_tokens, evictions;
    double tool_s, tool_queue_s;
    double *turn_lat;   /* every finished turn's latency, s (n_turn_lat of them) */
    turn_times *tv;     /* every turn's times (req_turn.tv0 + turn) */
    int64_t n_tv;       /* turns given a place in tv so far (while loading) */
    int64_t n_turn_lat;
} sim;

/* KV tokens a decoding request holds: prompt + generated tokens that have
 * been fed back (the newest token enters the cache in the next iteration). */
static inline double dec_kv(const req *q, int64_t D)
{
    return (double)q->need + (double)(D - q->d_start);
}

static inline int32_t dec_gen(const req *q, int64_t D)
{
    return q->gen + (int32_t)(D - q->d_start);
}

/* sim/rollout.c: marks request r of rp finished at time t. */
void ro_finish(sim *s, replica *rp, int32_t r, double t);
/* sim/rollout.c: queues every response on its replica's waiting deque, in
 * cfg->order or else trace order.  Returns 0, or -1 with e set: an order
 * entry out of range or repeated, allocation failure. */
int ro_run_queue(sim *s, size_t n);
/* sim/rollout.c: the event loop; plans every replica's first iteration and
 * runs the engine until every response has finished or the stop condition
 * holds.  Returns 0, or -1 with e set when an iteration could not be
 * scheduled. */
int ro_run_events(sim *s, size_t n_prompts, size_t n);

/* sim/rollout.c: plans rp's next iteration.  Returns 0 when one was
 * scheduled, 1 when the replica has nothing to run now (it is then idle). */
int ro_plan(sim *s, engine *e, replica *rp);
/* sim/rollout.c: appends r to rp's waiting deque. */
void ro_wq_push_back(replica *rp, int32_t r);

/* sim/rollout_turns.c: the multi-turn path. */
/* Request r (with turns) has generated its turn's last token at time now; it
 * held kv tokens, already taken out of kv_used (and dsum).  Finishes it, or
 * keeps its context (held) and sends it to its tool. */
void ro_turn_end(sim *s, replica *rp, int32_t r, double now, double kv);
/* Evicts the oldest held context of rp (soft_only: only prefix cache).
 * Returns 1 if one was evicted, 0 if none could be. */
int ro_turn_evict(sim *s, replica *rp, int soft_only);
/* Request r (with turns) is admitted at time now: takes its held context (if
 * any) off the list and returns the held tokens (now prefilled, in kv_used),
 * 0 when none. */
int32_t ro_turn_admit(sim *s, replica *rp, int32_t r, double now);
/* Request r (multi-turn) prefills its whole context again (TLT's switch
 * flushed the KV): its turn's cache hit is taken back from cached_tokens.
 * Cannot fail. */
void ro_turn_unhit(sim *s, int32_t r);

/* sim/rollout_spec.c: the speculative path of a replica. */
/* TLT's adaptive switch: flush the KV cache, re-prefill every running
 * request (prompt + tokens so far), prefill budget / 4, speculate from now on. */
void ro_spec_switch(sim *s, replica *rp, double now);
/* Draws every speculative sequence's accepted tokens for a verify of budget V
 * and returns the iteration's duration (draft + verify with the prefill
 * chunks of b sharing the verify pass), s. */
double ro_spec_plan(sim *s, replica *rp, int32_t V, const cost_batch *b);
/* Applies the verify in flight: each sequence gains its tokens; finished
 * ones leave. */
void ro_spec_verify_done(sim *s, replica *rp, double now);
/* A request whose prefill completed joins the speculative batch. */
void ro_spec_admit(sim *s, replica *rp, int32_t r);
/* Removes the speculative request at index idx (preemption). */
void ro_spec_remove(sim *s, replica *rp, int32_t idx);
/* Verify tokens per sequence to reserve (KV, token budget) for a speculative
 * step of n sequences: TLT's table, or with the bandit the largest V among
 * the arms it may pick at n.  Pure. */
int32_t ro_spec_budget(const sim *s, int32_t n);
/* Frees the replica's speculative state (the bandit).  NULL-safe fields. */
void ro_spec_free(replica *rp);

#endif
