/*
 * Speculative-decoding acceptance model (EAGLE-style draft trees).
 *
 * The drafter proposes, at every depth i = 1..depth, candidates ranked by its
 * own probability.  The target's next token is the drafter's rank-r candidate
 * with probability q_i (1 - q_i)^(r - 1) (a geometric rank law), where
 * q_i = q * decay^(i - 1): q is the drafter's quality for this sequence and
 * deeper positions are harder because the drafter runs on its own hidden
 * states.  The verify tree holds the `budget` nodes (rank paths with ranks <=
 * topk, depth <= depth) of highest path probability, as EAGLE-2's dynamic tree
 * does; it is prefix-closed.  A verify step accepts the longest path of the
 * tree that matches the target, plus the bonus token the target produces
 * itself, so
 *
 *     E[accepted | q] = 1 + sum over tree nodes of P(node's path is correct).
 *
 * Per-sequence heterogeneity: q ~ Beta(mean * kappa, (1 - mean) * kappa),
 * drawn once per sequence (kappa = 0: every sequence has q = mean).
 */
#ifndef TS_SPECDEC_H
#define TS_SPECDEC_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "common/err.h"
#include "models/cost.h"
#include "models/cost_host.h"

#define SPEC_MAX_DEPTH 15
#define SPEC_MAX_BUDGET 256

#define SPEC_MAX_ARMS 8

typedef struct spec_params {
    int depth;            /* draft steps d */
    int topk;             /* candidates kept per expanded node */
    double quality;       /* mean per-position top-1 acceptance q */
    double decay;         /* q_i = q * decay^(i-1) */
    double kappa;         /* Beta concentration of per-sequence q (0: none) */
    /* model-free (n-gram) drafting, see "N-gram drafting" below */
    int ngram;            /* 1: each step drafts with whichever of EAGLE and
                           * n-gram retrieval has the better expected goodput */
    double ngram_rep;     /* mean per-sequence repetitiveness rho in [0, 1) */
    double ngram_kappa;   /* Beta concentration of rho (0: every sequence has the mean) */
    int ngram_max;        /* longest retrieved continuation, tokens */
    double ngram_lookup_s;/* CPU suffix lookup per sequence per step, s */
    /* draft configuration: TLT's fixed batch-size table, or the bandit */
    int bandit;           /* 1: epsilon-greedy bandit over `arms` (sim/spec_bandit.h) */
    char arms[96];        /* "depth_topk_V,..." as fastrl's mab_configs */
    double epsilon;       /* bandit exploration probability */
    int window;           /* rewards kept per arm, steps */
} spec_params;

/* TLT's defaults: depth 8, top-k 4; quality 0.82 and decay 0.98 chosen so that the
 * expected accepted length at budget 48 (47 draft nodes), averaged over the
 * Beta spread of sequences (kappa 20), is 6.49: TLT reports an average of
 * 6.53.  N-gram drafting off, repetitiveness mean 0.3 with concentration 4,
 * continuations up to 8 tokens, 20 us lookup (assumptions, see docs/policies.md);
 * the bandit off, with fastrl's arms 8_4_48,8_4_32,8_4_16,8_4_8, epsilon 0.1,
 * window 300. */
void spec_params_default(spec_params *p);
int spec_params_check(const spec_params *p, ts_err *e);

/* E[accepted tokens per verify] at budget V, averaged over 2000 sequence
 * qualities drawn with ts_rng_new(seed, 1000 + V) (the same draws for every
 * call, so curves over depth or batch are smooth).  Returns 0 on allocation
 * failure of the RNG. */
double spec_mean_accept(const spec_params *p, int V, uint64_t seed);

/* TLT's verify budget by batch size: 1 -> 48, 2-4 -> 32, 5-20 -> 16, else 8. */
int spec_budget_for_batch(int batch);

/* The verify tree for one quality and budget: node rank paths packed 4 bits
 * per depth (depth 1 in the low bits), sorted for lookup. */
typedef struct spec_tree {
    int n;                       /* nodes (<= budget) */
    uint64_t node[SPEC_MAX_BUDGET];
    double reach[SPEC_MAX_DEPTH + 1]; /* reach[j]: P(at least j draft tokens accepted),
                                       * the summed path probability of the tree's
                                       * depth-j nodes; reach[0] = 1 */
    double expected;             /* E[accepted tokens per verify], bonus included */
} spec_tree;

/* Builds the verify tree of budget V for quality q: as in SGLang, V counts the
 * tree's root (the last verified token), so the tree holds the V - 1 most
 * probable draft nodes (best-first enumeration, O(V log V)); V = 1 drafts
 * nothing. */
void spec_tree_build(const spec_params *p, double q, int budget, spec_tree *t);

/* Samples the tokens one verify step produces (1 .. depth + 1) from the
 * tree's reach probabilities: one uniform draw, O(depth). */
int spec_sample(const spec_params *p, const spec_tree *t, gsl_rng *r);
/* The same law sampled the long way, by walking the target's token ranks
 * through the tree (used by the tests as an independent check). */
int spec_sample_walk(const spec_params *p, double q, const spec_tree *t, gsl_rng *r);

/* Draws a sequence's quality. */
double spec_draw_quality(const spec_params *p, gsl_rng *r);

/* Duration of one speculative iteration of `batch` sequences whose contexts
 * sum to ctx_sum, s: the draft (cost_draft), the verify of V tokens per
 * sequence with the prefill chunks of `extra` (may be NULL) sharing the pass
 * (cost_verify), and the draft extend (cost_draft_extend).  Cannot fail. */
double spec_iter_cost(const spec_params *p, const hw_desc *hw, const llm_desc *m, int tp,
                      int batch, int V, double ctx_sum, const cost_batch *extra);
/* The same on the (hw, model, tp) of cache c (models/cost.h), bit for bit. */
double spec_iter_cost_cached(const spec_params *p, cost_cache *c, int batch, int V,
                             double ctx_sum, const cost_batch *extra);

/* One point of `tailsim specdec` (and of the paper's microbenchmark): plain
 * against speculative decoding for `batch` sequences whose contexts sum to
 * ctx_sum, V from TLT's batch table, accepted length averaged over the
 * drafter-quality spread (spec_mean_accept); both iterations priced on the
 * host settings `host` (models/cost_host.h; NULL or off: GPU time only).
 * Cannot fail. */
typedef struct spec_point {
    int V;
    double accept;   /* tokens per sequence per speculative iteration */
    double t_plain;  /* one plain decode iteration (with sampling), s */
    double t_spec;   /* one speculative iteration, s */
    double plain;    /* plain tokens/s */
    double spec;     /* speculative tokens/s */
} spec_point;
void spec_point_eval(const spec_params *p, const hw_desc *hw, const host_mode *host,
                     const llm_desc *m, int tp, int batch, double ctx_sum, uint64_t seed,
                     spec_point *out);

/* Drafter quality across RL steps (TLT's adaptive drafter).  Between steps
 * the quality q (the mean per-position top-1 acceptance, spec_params.quality)
 * first gains from the spot trainer's n drafter GPU-steps,
 *     q <- q_max - (q_max - q) exp(-n / tau),
 * then loses to the policy update (the target moved, the drafter did not),
 *     q <- q_floor + (q - q_floor) (1 - drift).
 * With enough spot training every step, q settles at
 * q_floor + (q_max - q_floor)(1 - drift); without any, it decays
 * geometrically toward q_floor. */
typedef struct drafter_params {
    double q_max;     /* quality of a drafter trained to convergence on the current policy */
    double q_floor;   /* quality of a fully stale drafter */
    double drift;     /* fraction of (q - q_floor) lost per RL step */
    double tau;       /* drafter GPU-steps closing 1 - 1/e of the gap to q_max */
    int seqs;         /* sequences per GPU per drafter step (fastrl: min(batch, 4)) */
    int window;       /* tokens per training window (fastrl: 512) */
    double start_s;   /* s from a replica's last response to its first drafter step */
} drafter_params;

/* Defaults and where they come from: see specdec.c. */
void drafter_params_default(drafter_params *p);
int drafter_params_check(const drafter_params *p, ts_err *e);
/* The quality of the next RL step after `gpu_steps` drafter steps in this one. */
double drafter_next_quality(const drafter_params *p, double q, double gpu_steps);

/* N-gram drafting (model-free; SGLang's NGRAM / prompt-lookup decoding, TLT's
 * model-free drafter).  The drafter retrieves the continuation of the
 * longest suffix of the sequence that occurred before in the pool (earlier
 * responses of the same prompt group, which in the tail have mostly
 * finished, and earlier RL steps' responses) and proposes it as a chain of
 * L = min(V - 1, ngram_max) tokens.  Each sequence has a repetitiveness rho
 * ~ Beta(ngram_rep * ngram_kappa, (1 - ngram_rep) * ngram_kappa), drawn once:
 * the probability that a retrieved token is the target's and, given that,
 * that the next one is too (a geometric chain), so
 *     E[accepted | rho] = 1 + rho + ... + rho^L,
 * the bonus token included.  rho = 0 gives exactly plain decoding's one token.
 * No drafter GPU work: an n-gram step is the target's verify of V tokens
 * per sequence plus ngram_lookup_s of host time per sequence. */
double ngram_draw_rep(const spec_params *p, gsl_rng *r);
/* E[tokens per verify] for repetitiveness rep at budget V. */
double ngram_expected(const spec_params *p, double rep, int V);
/* Samples the tokens of one n-gram verify (1 .. L + 1): one uniform draw. */
int ngram_sample(const spec_params *p, double rep, int V, gsl_rng *r);
/* Duration of one n-gram iteration: verify + host lookups, s.  Cannot fail. */
double ngram_iter_cost(const spec_params *p, const hw_desc *hw, const llm_desc *m, int tp,
                       int batch, int V, double ctx_sum, const cost_batch *extra);
/* The same on the (hw, model, tp) of cache c (models/cost.h), bit for bit. */
double ngram_iter_cost_cached(const spec_params *p, cost_cache *c, int batch, int V,
                              double ctx_sum, const cost_batch *extra);

#endif
