/*
 * Cost model: seconds for the operations the simulator prices, from FLOPs and
 * bytes with the efficiency parameters of hw_desc.  Pure functions: shapes in,
 * seconds out; no state, cannot fail (callers pass validated descriptions).
 * The one stateful piece, cost_cache, is a memo the caller owns and passes in
 * explicitly; it returns what the pure cost_iter() returns, bit for bit.
 *
 * Attention is priced from per-sequence contexts: callers pass sums over the
 * sequences of a batch (sum of context lengths, sum of q*ctx products), never
 * a batch mean, because the tail lives in those sums.
 */
#ifndef TS_COST_H
#define TS_COST_H

#include "models/hw.h"

/* One GEMM of (m x k) by (k x n) in bf16 on one GPU, s: the fastest of
 * hw's kernels (gemm_tiles) with split-K, tile/wave quantization, launch
 * overhead and the memory-bound regime (models/cost.c gemm_time).  Never
 * decreases as m grows; 0 when m, n or k is not positive.  Cannot fail. */
double cost_gemm(const hw_desc *hw, double m, double n, double k);

/* Which kernel cost_gemm() prices the GEMM with: *kernel the index into
 * hw->gemm_tiles of the fastest kernel (-1 when hw has no gemm_tiles: its
 * one tile_m x tile_n kernel), *split its split-K factor (1 unsplit, 2, 4,
 * 8 or 16; the first of equal times, as cost_gemm takes it).  Returns
 * cost_gemm(hw, m, n, k), bit for bit; when m, n or k is not positive 0,
 * with *kernel -1 and *split 0.  cost_gemm() itself does not pay for the
 * bookkeeping.  Cannot fail. */
double cost_gemm_choice(const hw_desc *hw, double m, double n, double k, int *kernel, int *split);

/* cost_gemm() with the compute side run on one kernel (index into
 * hw->gemm_tiles, or -1 for the tile_m x tile_n kernel when there are no
 * gemm_tiles) at one split-K factor: what the model charges had cuBLAS
 * picked that kernel.  cost_gemm_forced(hw, m, n, k, kernel, split) with
 * cost_gemm_choice()'s kernel and split is cost_gemm(), bit for bit.
 * INFINITY for a kernel out of range, a split < 1, or a split the model
 * never runs for this k (one of 1, 2, 4, 8, 16 whose K slices are >= 128
 * deep, 1 always); 0 when m, n or k is not positive.  Cannot fail. */
double cost_gemm_forced(const hw_desc *hw, double m, double n, double k, int kernel, int split);

/* cost_gemm() for a training step's GEMM: the compute side at train_eff
 * (cost_train_gemm_eff) instead of gemm_eff, the rest as cost_gemm(). */
double cost_gemm_train(const hw_desc *hw, double m, double n, double k);

/* The base compute efficiency of training GEMMs: train_eff, or gemm_eff
 * when train_eff is 0 (an INI without the key).  Cannot fail. */
double cost_train_gemm_eff(const hw_desc *hw);

/* A streaming elementwise kernel moving `bytes` bytes, s. */
double cost_stream(const hw_desc *hw, double bytes);

/* ---- per-op predictors (what `tailsim calib check` fits and checks) ------
 * cost_iter() below is the sum of these over one layer, with the same
 * arithmetic, so a prediction for one measured op is the simulator's price
 * for it.  All pure; they cannot fail and return 0 for empty work. */

/* The elementwise kernels serving engines run between the GEMMs. */
typedef enum cost_kernel_kind {
    COST_K_ADD,             /* residual add */
    COST_K_ACT,             /* SiLU(gate) * up */
    COST_K_ROPE,            /* rotary embedding of q and k */
    COST_K_NORM,            /* RMSNorm */
    COST_K_GATHER,          /* embedding gather */
    COST_K_COUNT
} cost_kernel_kind;

/* One elementwise kernel of `kind` moving `bytes` bytes (the cost model's
 * count: each input read once, each output written once) over `rows` rows
 * (tokens), s: launch_s and the kind's minimum, plus the longer of the bytes
 * at the kind's fraction of the streaming bandwidth (faster while they fit
 * hw->l2_bytes) with a cost per row, and waves of rows (two per SM) each at
 * one row's bytes over hw->ew_row_bw[kind] (the per-row floor; 0: none,
 * and rows < 1 skips it); models/cost.c ew_kernels.  Never decreases as
 * rows grow at a fixed row width.  Returns 0 for bytes <= 0 or an unknown
 * kind; cannot fail. */
double cost_kernel(const hw_desc *hw, cost_kernel_kind kind, double bytes, double rows);

/* Decode attention of `batch` sequences, one query token each, over
 * contexts summing to ctx_sum tokens, with `heads` query heads and
 * `kv_heads` KV heads of head_dim (TP-local), s. */
double cost_attn_decode(const hw_desc *hw, double heads, double kv_heads, double head_dim,
                        double batch, double ctx_sum);

/* Causal attention of chunks (prefill chunks, or V verified tokens per
 * sequence): q_tokens query tokens in all, attn_sum (query, key) pairs
 * (per chunk q*(ctx_before + (q+1)/2)), kv_sum KV tokens read (per chunk
 * ctx_before + q), s. */
double cost_attn_chunk(const hw_desc *hw, double heads, double kv_heads, double head_dim,
                       double q_tokens, double attn_sum, double kv_sum);

/* A batch of work for one forward pass of the model on one TP group. */
typedef struct cost_batch {
    int n_decode;           /* sequences producing one token each */
    double decode_ctx_sum;  /* sum over decode sequences of context length, tokens */
    int n_prefill_seqs;     /* sequences with a prefill chunk in this pass */
    int prefill_tokens;     /* sum of chunk lengths, tokens */
    double prefill_attn;    /* sum over chunks of q*(ctx_before + (q+1)/2), token^2 */
    double prefill_kv_sum;  /* sum over chunks of (ctx_before + q): KV read, tokens */
} cost_batch;

/* The LM head GEMM over `rows` logits rows on a TP group of tp >= 1 GPUs
 * (vocabulary-parallel: vocab / tp columns each), s; 0 for rows <= 0.
 * Cannot fail. */
double cost_lm_head(const hw_desc *hw, const llm_desc *m, int tp, double rows);

/* The EAGLE drafter's fc layer (2 * hidden -> hidden, output split over
 * tp >= 1 GPUs) over `tokens` tokens, s; 0 for tokens <= 0.  Cannot fail. */
double cost_draft_fc(const hw_desc *hw, const llm_desc *m, int tp, double tokens);

/* Time of one forward iteration (all layers, LM head, TP all-reduces) of the
 * batch on a TP group of `tp` GPUs, s.  An empty batch costs 0. */
double cost_iter(const hw_desc *hw, const llm_desc *m, int tp, const cost_batch *b);

/* How an engine step runs its collectives (cost_iter_mode's `graph`). */
enum cost_coll_mode {
    COST_COLL_EAGER = 0,     /* eagerly, every collective an NCCL call (cost_iter()) */
    COST_COLL_GRAPH = 1,     /* replayed from a CUDA graph: comm_allreduce_graph(),
                              * comm_allgather_graph() */
    COST_COLL_EAGER_CAR = 2  /* eagerly, by an engine with a custom all-reduce:
                              * comm_allreduce_eager_car(), NCCL's all-gather */
};

/* cost_iter() as an engine runs the step, its collectives as `graph` (an
 * enum cost_coll_mode) says: COST_COLL_EAGER is exactly cost_iter(); any
 * other value counts as COST_COLL_EAGER.  Cannot fail. */
double cost_iter_mode(const hw_desc *hw, const llm_desc *m, int tp, const cost_batch *b,
                      int graph);

/* The collectives' part of cost_iter_mode() (TP all-reduces, embedding
 * all-reduce, logits all-gather), s; 0 when tp <= 1.  Cannot fail. */
double cost_iter_comm(const hw_desc *hw, const llm_desc *m, int tp, const cost_batch *b,
                      int graph);

/* ---- memo of cost_iter() ------------------------------------------------
 * On one (hardware, model, TP) every term of cost_iter() but attention is a
 * function of the token count T = n_decode + prefill_tokens (the layer's
 * GEMMs, elementwise kernels and all-reduces, the embedding) or of the LM
 * head's row count n_decode + n_prefill_seqs (final norm, LM head GEMM,
 * logits all-gather), and a rollout prices the same few hundred decode batch
 * sizes millions of times.  A cost_cache keeps those terms in two
 * direct-mapped tables keyed by the count, and cost_iter_cached() adds them
 * with the attention terms in cost_iter()'s order, so it returns exactly
 * (bit for bit) what cost_iter() returns: a cache changes the speed of a
 * simulation, never its result.
 *
 * The cache is the caller's state: one per simulation (sim/rollout_run.c holds
 * one per rollout_run), never shared between threads; forked workers each
 * build their own.  It copies hw and m, so later changes to the caller's
 * descriptions do not reach it. */
#define COST_CACHE_SLOTS 4096   /* entries per table (a power of two) */

typedef struct cost_cache_tok {
    double T;               /* key: token count (0: empty slot) */
    double pre;             /* input norm + QKV + RoPE of one layer, summed in order, s */
    double post[8];         /* O, residual, norm, MLP up, activation, MLP down, residual,
                             * 2 x all-reduce (0 when tp == 1), s */
    double ar_graph;        /* the 2 all-reduces inside a CUDA graph (0 when tp == 1), s */
    double ar_car;          /* the 2 all-reduces of an eager step with the custom all-reduce, s */
    double emb;             /* embedding gather, s */
    double emb_ar;          /* embedding all-reduce (0 when tp == 1), s */
    double emb_ar_graph;    /* the same inside a CUDA graph, s */
    double emb_ar_car;      /* the same eagerly with the custom all-reduce, s */
    double fc;              /* EAGLE drafter's fc, T x 2h -> h / tp (models/cost_spec.c), s */
} cost_cache_tok;

typedef struct cost_cache_row {
    double rows;            /* key: LM head rows (0: empty slot) */
    double norm;            /* final norm, s */
    double head;            /* LM head GEMM, s */
    double gather;          /* logits all-gather (0 when tp == 1), s */
    double gather_graph;    /* the same inside a CUDA graph, s */
} cost_cache_row;

typedef struct cost_cache {
    hw_desc hw;             /* copies of the descriptions the terms are for */
    llm_desc m;
    int tp;                 /* GPUs of the TP group (>= 1) */
    double heads, kvh;      /* TP-local query heads and KV heads (>= 1), as cost_iter() has them */
    int graph;              /* the collectives' enum cost_coll_mode (cost_cache_set_graph) */
    cost_cache_tok tok[COST_CACHE_SLOTS];
    cost_cache_row row[COST_CACHE_SLOTS];
} cost_cache;

/* A cache for cost_iter(hw, m, tp, .) (tp < 1 counts as 1).  Returns NULL on
 * allocation failure; free with cost_cache_free(). */
cost_cache *cost_cache_new(const hw_desc *hw, const llm_desc *m, int tp);

/* Frees a cache; NULL is a no-op. */
void cost_cache_free(cost_cache *c);

/* Sets how the next cost_iter_cached*() calls price the step's collectives:
 * an enum cost_coll_mode (COST_COLL_EAGER, the state of a new cache; an
 * unknown value counts as it).  Cannot fail. */
void cost_cache_set_graph(cost_cache *c, int graph);

/* Exactly cost_iter_mode(&c->hw, &c->m, c->tp, b, graph) with the cache's
 * graph state, filling the cache's entries for b's counts on a miss.
 * Cannot fail. */
double cost_iter_cached(cost_cache *c, const cost_batch *b);

/* Exactly cost_iter() on a copy of c's model with `layers` layers (EAGLE's
 * drafter is one decoder layer of the target's shape: layers = 1); the
 * per-layer terms are the same, so the drafter shares the target's cache.
 * Cannot fail. */
double cost_iter_cached_n(cost_cache *c, int layers, const cost_batch *b);

/* Exactly cost_lm_head(&c->hw, &c->m, c->tp, rows) (rows a whole number).
 * Cannot fail. */
double cost_cache_head(cost_cache *c, double rows);

/* Exactly cost_draft_fc(&c->hw, &c->m, c->tp, tokens) (tokens a whole
 * number).  Cannot fail. */
double cost_cache_fc(cost_cache *c, double tokens);

/* Convenience wrappers around cost_iter(). */
double cost_decode_iter(const hw_desc *hw, const llm_desc *m, int tp,
                        int batch, double ctx_sum);
double cost_prefill_chunk(const hw_desc *hw, const llm_desc *m, int tp,
                          int tokens, double ctx_before);

/* Training: forward (1x) and backward (2x) of `tokens` tokens in sequences
 * whose squared lengths sum to `sq_sum`, on one GPU of a data-parallel group
 * (no TP), s.  `recompute` adds one forward.  GEMM FLOPs at train_eff x
 * peak (gemm_eff when train_eff is 0), attention at attn_eff. */
double cost_train_fwd(const hw_desc *hw, const llm_desc *m, double tokens, double sq_sum);
double cost_train_fwd_bwd(const hw_desc *hw, const llm_desc *m, double tokens,
                          double sq_sum, int recompute);

/* Per-operator prediction for one layer, as Vidur profiles them (ms are the
 * caller's business; this returns s).  `tokens` rows on a TP group of `tp`;
 * returns -1.0 for an unknown op name. */
double cost_vidur_op(const hw_desc *hw, const llm_desc *m, int tp,
                     const char *op, int tokens);

#endif
