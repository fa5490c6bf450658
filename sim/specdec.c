/*
 * Acceptance model of EAGLE-style tree speculation and of n-gram retrieval
 * (see specdec.h for both models).  The tree is built by best-first enumeration of rank paths: the
 * most probable unexpanded path is taken, and its first child (rank 1 one
 * level deeper) and next sibling (rank + 1 at the same depth) become
 * candidates; every path is reached exactly once this way, and since
 * children are never more probable than their parent the result is the
 * prefix-closed set of the `budget` most probable paths.
 *
 * The events "the target's path passes through node x" are disjoint for the
 * nodes of one depth, so P(at least j tokens accepted) is the summed path
 * probability of the tree's depth-j nodes (reach[j]).  spec_sample() draws
 * one uniform u and accepts #{j : u < reach[j]} draft tokens, which has
 * exactly that law.  spec_sample_walk() gets the same law the long way: at
 * depth i it draws the target token's rank from the geometric law with q_i
 * and stops at the first rank beyond topk or path outside the tree; the tests
 * check the two against each other and against the expected value.
 *
 * Drafter dynamics (drafter_next_quality): the defaults are assumptions, not
 * fits, shaped after what TLT reports qualitatively (a frozen drafter's
 * acceptance falls as RL moves the policy; the spot-trained one keeps it):
 * q_floor 0.50 (a stale EAGLE head still gets about half of the top-1
 * tokens right), drift 0.02 per RL step (a frozen drafter loses 1 - 1/e of
 * its edge over about 50 steps), tau 2000 GPU-steps of 4 x 512 tokens (about
 * 4M tokens, a fraction of one step's rollout data: a step's bubble saturates
 * the training), q_max 0.8265 so that the trained steady state is the
 * calibrated 0.82 (accepted length 6.53 at V 48).  The training batch is
 * fastrl's: min(batch_size_per_gpu, 4) sequences, 512-token windows, from the
 * last 2 RL steps' buffer (verl/workers/drafter/eagle_background_trainer.py).
 */
#include "sim/specdec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <gsl/gsl_randist.h>

#include "common/util.h"
#include "models/cost_spec.h"
#include "sim/spec_bandit.h"

void spec_params_default(spec_params *p)
{
    p->depth = 8;
    p->topk = 4;
    p->quality = 0.82;
    p->decay = 0.98;
    p->kappa = 20.0;
    p->ngram = 0;
    p->ngram_rep = 0.3;
    p->ngram_kappa = 4.0;
    p->ngram_max = 8;
    p->ngram_lookup_s = 20e-6;
    p->bandit = 0;
    snprintf(p->arms, sizeof p->arms, "8_4_48,8_4_32,8_4_16,8_4_8");
    p->epsilon = 0.1;
    p->window = 300;
}

int spec_params_check(const spec_params *p, ts_err *e)
{
    if (p->depth < 1 || p->depth > SPEC_MAX_DEPTH)
        return ts_errf(e, "spec depth %d out of range [1, %d]", p->depth, SPEC_MAX_DEPTH);
    if (p->topk < 1 || p->topk > 15)
        return ts_errf(e, "spec topk %d out of range [1, 15]", p->topk);
    if (!(p->quality > 0 && p->quality < 1))
        return ts_errf(e, "spec quality %g out of range (0, 1)", p->quality);
    if (!(p->decay > 0 && p->decay <= 1))
        return ts_errf(e, "spec decay %g out of range (0, 1]", p->decay);
    if (!(p->kappa >= 0 && p->kappa < 1e9))
        return ts_errf(e, "spec kappa %g out of range [0, 1e9)", p->kappa);
    if (!(p->ngram_rep >= 0 && p->ngram_rep < 1))
        return ts_errf(e, "spec ngram_rep %g out of range [0, 1)", p->ngram_rep);
    if (!(p->ngram_kappa >= 0 && p->ngram_kappa < 1e9))
        return ts_errf(e, "spec ngram_kappa %g out of range [0, 1e9)", p->ngram_kappa);
    if (p->ngram_max < 1 || p->ngram_max > SPEC_MAX_BUDGET)
        return ts_errf(e, "spec ngram_max %d out of range [1, %d]", p->ngram_max, SPEC_MAX_BUDGET);
    if (!(p->ngram_lookup_s >= 0 && p->ngram_lookup_s < 1))
        return ts_errf(e, "spec ngram_lookup_s %g out of range [0, 1)", p->ngram_lookup_s);
    if (!(p->epsilon >= 0 && p->epsilon <= 1))
        return ts_errf(e, "spec epsilon %g out of range [0, 1]", p->epsilon);
    if (p->window < 1 || p->window > 1000000)
        return ts_errf(e, "spec window %d out of range [1, 1000000]", p->window);
    spec_arm arms[SPEC_MAX_ARMS];
    if (p->bandit && spec_arms_parse(p->arms, arms, e) < 0)
        return -1;
    return 0;
}

int spec_budget_for_batch(int batch)
{
    if (batch <= 1)
        return 48;
    if (batch <= 4)
        return 32;
    if (batch <= 20)
        return 16;
    return 8;
}

static inline double q_at(const spec_params *p, double q, int depth)
{
    return q * pow(p->decay, depth - 1);
}

/* probability that the target's token is the rank-r candidate at a depth */
static inline double rank_prob(double qi, int r)
{
    return qi * pow(1 - qi, r - 1);
}

typedef struct cand {
    double prob;     /* path probability */
    uint64_t path;   /* ranks, 4 bits per depth */
    int depth;
    int rank;        /* rank at the last depth */
} cand;

/* binary max-heap on prob (ties: smaller path first, for determinism) */
static int cand_less(const cand *a, const cand *b)
{
    return a->prob < b->prob || (a->prob == b->prob && a->path > b->path);
}

static void cand_push(cand *h, int *n, cand c)
{
    int i = (*n)++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!cand_less(&h[p], &c))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static cand cand_pop(cand *h, int *n)
{
    cand top = h[0], x = h[--(*n)];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && cand_less(&h[c], &h[c + 1]))
            c++;
        if (!cand_less(&x, &h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = x;
    return top;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void spec_tree_build(const spec_params *p, double q, int budget, spec_tree *t)
{
    if (budget > SPEC_MAX_BUDGET)
        budget = SPEC_MAX_BUDGET;
    budget -= 1; /* the root (the last verified token) is one of the V */
    cand heap[2 * SPEC_MAX_BUDGET + 2];
    int n = 0;
    t->n = 0;
    t->expected = 1.0; /* the bonus token */
    for (int j = 0; j <= SPEC_MAX_DEPTH; j++)
        t->reach[j] = 0.0;
    t->reach[0] = 1.0;
    cand_push(heap, &n, (cand){rank_prob(q_at(p, q, 1), 1), 1, 1, 1});
    while (t->n < budget && n > 0) {
        cand c = cand_pop(heap, &n);
        t->node[t->n++] = c.path;
        t->expected += c.prob;
        t->reach[c.depth] += c.prob;
        if (c.depth < p->depth) { /* first child */
            double pc = c.prob * rank_prob(q_at(p, q, c.depth + 1), 1);
            cand_push(heap, &n, (cand){pc, c.path | ((uint64_t)1 << (4 * c.depth)), c.depth + 1, 1});
        }
        if (c.rank < p->topk) { /* next sibling */
            double qi = q_at(p, q, c.depth);
            double ps = c.prob / rank_prob(qi, c.rank) * rank_prob(qi, c.rank + 1);
            uint64_t mask = (uint64_t)0xf << (4 * (c.depth - 1));
            uint64_t path = (c.path & ~mask) | ((uint64_t)(c.rank + 1) << (4 * (c.depth - 1)));
            cand_push(heap, &n, (cand){ps, path, c.depth, c.rank + 1});
        }
    }
    qsort(t->node, (size_t)t->n, sizeof t->node[0], cmp_u64);
}

static int in_tree(const spec_tree *t, uint64_t path)
{
    int lo = 0, hi = t->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (t->node[mid] == path)
            return 1;
        if (t->node[mid] < path)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

int spec_sample(const spec_params *p, const spec_tree *t, gsl_rng *r)
{
    double u = gsl_rng_uniform(r);
    int a = 0;
    while (a < p->depth && u < t->reach[a + 1])
        a++;
    return a + 1;
}

int spec_sample_walk(const spec_params *p, double q, const spec_tree *t, gsl_rng *r)
{
    int accepted = 0;
    uint64_t path = 0;
    for (int d = 1; d <= p->depth; d++) {
        unsigned int rank = gsl_ran_geometric(r, q_at(p, q, d));
        if (rank > (unsigned int)p->topk)
            break;
        path |= (uint64_t)rank << (4 * (d - 1));
        if (!in_tree(t, path))
            break;
        accepted++;
    }
    return accepted + 1;
}

double spec_draw_quality(const spec_params *p, gsl_rng *r)
{
    if (p->kappa <= 0)
        return p->quality;
    double q = gsl_ran_beta(r, p->quality * p->kappa, (1 - p->quality) * p->kappa);
    return fmin(fmax(q, 1e-6), 1 - 1e-6);
}

double spec_iter_cost(const spec_params *p, const hw_desc *hw, const llm_desc *m, int tp,
                      int batch, int V, double ctx_sum, const cost_batch *extra)
{
    return cost_draft(hw, m, tp, batch, p->depth, p->topk, ctx_sum) +
           cost_verify(hw, m, tp, batch, V, ctx_sum, extra) +
           cost_draft_extend(hw, m, tp, batch, p->depth, ctx_sum);
}

double spec_iter_cost_cached(const spec_params *p, cost_cache *c, int batch, int V,
                             double ctx_sum, const cost_batch *extra)
{
    return cost_draft_cached(c, batch, p->depth, p->topk, ctx_sum) +
           cost_verify_cached(c, batch, V, ctx_sum, extra) +
           cost_draft_extend_cached(c, batch, p->depth, ctx_sum);
}

double ngram_draw_rep(const spec_params *p, gsl_rng *r)
{
    if (p->ngram_rep <= 0)
        return 0.0;
    if (p->ngram_kappa <= 0)
        return p->ngram_rep;
    double x = gsl_ran_beta(r, p->ngram_rep * p->ngram_kappa, (1 - p->ngram_rep) * p->ngram_kappa);
    return fmin(fmax(x, 0.0), 1 - 1e-6);
}

static int ngram_len(const spec_params *p, int V)
{
    int L = V - 1;
    return L < p->ngram_max ? L : p->ngram_max;
}

double ngram_expected(const spec_params *p, double rep, int V)
{
    int L = ngram_len(p, V);
    double e = 1.0, term = 1.0;
    for (int j = 1; j <= L; j++) {
        term *= rep;
        e += term;
    }
    return e;
}

int ngram_sample(const spec_params *p, double rep, int V, gsl_rng *r)
{
    int L = ngram_len(p, V), a = 0;
    double u = gsl_rng_uniform(r), reach = rep;
    while (a < L && u < reach) {
        a++;
        reach *= rep;
    }
    return a + 1;
}

double ngram_iter_cost(const spec_params *p, const hw_desc *hw, const llm_desc *m, int tp,
                       int batch, int V, double ctx_sum, const cost_batch *extra)
{
    return cost_verify(hw, m, tp, batch, V, ctx_sum, extra) + batch * p->ngram_lookup_s;
}

double ngram_iter_cost_cached(const spec_params *p, cost_cache *c, int batch, int V,
                              double ctx_sum, const cost_batch *extra)
{
    return cost_verify_cached(c, batch, V, ctx_sum, extra) + batch * p->ngram_lookup_s;
}

void drafter_params_default(drafter_params *p)
{
    p->q_max = 0.8265;
    p->q_floor = 0.50;
    p->drift = 0.02;
    p->tau = 2000.0;
    p->seqs = 4;
    p->window = 512;
    p->start_s = 1.0;
}

int drafter_params_check(const drafter_params *p, ts_err *e)
{
    if (!(p->q_floor > 0 && p->q_floor <= p->q_max && p->q_max < 1))
        return ts_errf(e, "drafter: need 0 < q_floor (%g) <= q_max (%g) < 1", p->q_floor, p->q_max);
    if (!(p->drift >= 0 && p->drift <= 1))
        return ts_errf(e, "drafter: drift %g out of range [0, 1]", p->drift);
    if (!(p->tau > 0))
        return ts_errf(e, "drafter: tau %g must be positive", p->tau);
    if (p->seqs < 1 || p->window < 1)
        return ts_errf(e, "drafter: seqs %d and window %d must be positive", p->seqs, p->window);
    if (!(p->start_s >= 0))
        return ts_errf(e, "drafter: start_s %g must be non-negative", p->start_s);
    return 0;
}

double drafter_next_quality(const drafter_params *p, double q, double gpu_steps)
{
    if (gpu_steps > 0 && q < p->q_max)
        q = p->q_max - (p->q_max - q) * exp(-gpu_steps / p->tau);
    if (q > p->q_floor)
        q = p->q_floor + (q - p->q_floor) * (1.0 - p->drift);
    return fmin(fmax(q, 1e-6), 1 - 1e-6);
}

double spec_mean_accept(const spec_params *p, int V, uint64_t seed)
{
    gsl_rng *r = ts_rng_new(seed, 1000 + (uint64_t)V);
    if (!r)
        return 0;
    double s = 0;
    const int n = 2000;
    for (int k = 0; k < n; k++) {
        spec_tree t;
        spec_tree_build(p, spec_draw_quality(p, r), V, &t);
        s += t.expected;
    }
    gsl_rng_free(r);
    return s / n;
}

void spec_point_eval(const spec_params *p, const hw_desc *hw, const host_mode *host,
                     const llm_desc *m, int tp, int batch, double ctx_sum, uint64_t seed,
                     spec_point *out)
{
    const host_mode none = {0};
    if (!host)
        host = &none;
    out->V = spec_budget_for_batch(batch);
    out->accept = spec_mean_accept(p, out->V, seed);
    out->t_plain = cost_host_step(hw, host, batch, 1, cost_iter_kernels(m, tp),
                                  cost_decode_iter(hw, m, tp, batch, ctx_sum) +
                                      cost_sample(hw, m, batch));
    out->t_spec = cost_host_spec_step(hw, host, batch, 1, cost_spec_kernels(m, tp, p->depth),
                                 spec_iter_cost(p, hw, m, tp, batch, out->V, ctx_sum, NULL));
    out->plain = batch / out->t_plain;
    out->spec = batch * out->accept / out->t_spec;
}
