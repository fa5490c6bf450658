/*
 * The speculative path of a rollout replica (TLT), split from sim/rollout.c,
 * which owns the plain continuous-batching loop; both share the state in
 * sim/rollout_impl.h.
 *
 * Once a replica decodes speculatively (from the start, or after TLT's
 * adaptive switch), its decoding requests live in a plain array `sp` in
 * admission order, since each advances by its own accepted count.  A step's
 * draft configuration is TLT's batch-size table (depth 8, top-k 4, V by
 * batch) or, with spec.bandit, the arm the replica's epsilon-greedy bandit
 * picks (sim/spec_bandit.h; created on first use, rewarded at the end of the
 * step with tokens x batch / step time).  With spec.ngram the step then
 * drafts with EAGLE or with n-gram retrieval, whichever gives more expected
 * tokens per second over the batch (sum of expected accepted lengths over
 * the step's duration, spec_iter_cost vs ngram_iter_cost).  Each sequence
 * gains the tokens drawn from the chosen acceptance model (sim/specdec.c),
 * never more than it has left: a response still ends at exactly its trace
 * length (lossless).  Each sequence keeps the verify tree of its own drafter
 * quality, rebuilt only when (depth, top-k, V) changes.  The switch flushes
 * the KV cache, sends every running request back to prefill (prompt +
 * tokens so far) and cuts the prefill budget to a quarter, as TLT's engine
 * does.  Speculation runs in the tail, so the O(batch) work per speculative
 * step (plus O(window) for the bandit) is small.
 */
#include <math.h>
#include <string.h>

#include "sim/rollout_impl.h"
#include "models/cost_host.h"
#include "sim/spec_bandit.h"

/* RNG stream of replica r's bandit: BANDIT_STREAM + r (the acceptance draws use r) */
#define BANDIT_STREAM ((uint64_t)1 << 32)

/* The OOM filter fastrl's bandit applies (eagle_mab.py
 * _get_valid_strategies): arms with V x batch <= 2048, or if none, the arm
 * of least V. */
#define BANDIT_TOKENS 2048

static int arm_valid(const spec_arm *a, int n_arms, int k, int32_t n)
{
    if ((int64_t)a[k].V * n <= BANDIT_TOKENS)
        return 1;
    for (int j = 0; j < n_arms; j++)
        if ((int64_t)a[j].V * n <= BANDIT_TOKENS || a[j].V < a[k].V || (a[j].V == a[k].V && j < k))
            return 0;
    return 1; /* the first arm of least V, when none fits */
}

int32_t ro_spec_budget(const sim *s, int32_t n)
{
    const rollout_cfg *cfg = s->cfg;
    if (!cfg->sp.bandit)
        return spec_budget_for_batch(n);
    int32_t V = 1;
    for (int k = 0; k < s->n_arms; k++)
        if (arm_valid(s->arms, s->n_arms, k, n) && s->arms[k].V > V)
            V = s->arms[k].V;
    return V;
}

void ro_spec_free(replica *rp)
{
    spec_bandit_free(rp->bandit);
    rp->bandit = NULL;
}

/* The bandit's pick among the arms valid at n (creating the bandit on first
 * use).  Returns the arm, or -1 when out of memory. */
static int pick_arm(sim *s, replica *rp, int32_t n)
{
    if (!rp->bandit) {
        rp->bandit = spec_bandit_new(s->n_arms, s->cfg->sp.epsilon, s->cfg->sp.window,
                                     s->cfg->seed, BANDIT_STREAM + (uint64_t)rp->id);
        if (!rp->bandit)
            return -1;
    }
    unsigned mask = 0;
    for (int k = 0; k < s->n_arms; k++)
        if (arm_valid(s->arms, s->n_arms, k, n))
            mask |= 1u << k;
    return spec_bandit_pick(rp->bandit, (int)n, mask);
}

double ro_spec_plan(sim *s, replica *rp, int32_t V, const cost_batch *b)
{
    const rollout_cfg *cfg = s->cfg;
    int32_t n_dec = rp->nsp;
    spec_params p = cfg->sp;
    rp->sp_arm = -1;
    if (p.bandit) {
        int arm = pick_arm(s, rp, n_dec);
        if (arm < 0) { /* the run fails at its end; this step uses arm 0, unrecorded */
            s->failed = 1;
            ts_errf(s->e, "out of memory for the draft bandit of replica %d", rp->id);
            arm = 0;
        } else {
            rp->sp_arm = arm;
        }
        p.depth = s->arms[arm].depth;
        p.topk = s->arms[arm].topk;
        V = s->arms[arm].V;
    }
    /* the tree cache key: budget, depth and top-k */
    int32_t key = V | p.depth << 12 | p.topk << 20;
    double e_eagle = 0, e_ngram = 0;
    for (int32_t k = 0; k < n_dec; k++) {
        req *q = &s->reqs[rp->sp[k]];
        if (rp->sp_key[k] != key) {
            spec_tree_build(&p, q->q, V, &rp->sp_tree[k]);
            rp->sp_key[k] = key;
        }
        e_eagle += rp->sp_tree[k].expected;
        if (p.ngram)
            e_ngram += ngram_expected(&p, q->rep, V);
    }
    /* host time (models/cost_host.c): eager launches above the engine's CUDA
     * graph limit or with prefill chunks in the step, exposed scheduling */
    int batch = n_dec + (b ? b->n_prefill_seqs : 0), graphable = !b || b->prefill_tokens == 0;
    double t_eagle = cost_host_spec_step(cfg->hw, &cfg->host, batch, graphable,
                                    cost_spec_kernels(cfg->llm, cfg->tp, p.depth),
                                    spec_iter_cost_cached(&p, s->cc, n_dec, V, rp->sp_ctx, b));
    double t = t_eagle;
    rp->sp_ngram = 0;
    if (p.ngram) {
        double t_ngram = cost_host_spec_step(cfg->hw, &cfg->host, batch, graphable,
                                        cost_spec_kernels(cfg->llm, cfg->tp, 1),
                                        ngram_iter_cost_cached(&p, s->cc, n_dec, V, rp->sp_ctx,
                                                               b));
        if (e_ngram * t_eagle > e_eagle * t_ngram) {
            rp->sp_ngram = 1;
            t = t_ngram;
        }
    }
    /* draw every sequence's accepted tokens now, apply them at the end */
    for (int32_t k = 0; k < n_dec; k++) {
        req *q = &s->reqs[rp->sp[k]];
        int a = rp->sp_ngram ? ngram_sample(&p, q->rep, V, rp->rng) : spec_sample(&p, &rp->sp_tree[k], rp->rng);
        rp->st->spec_accepted += a;
        q->acc = a < q->target - q->gen ? a : q->target - q->gen;
    }
    return t;
}

void ro_spec_verify_done(sim *s, replica *rp, double now)
{
    int32_t keep = 0;
    rp->st->spec_iterations++;
    rp->st->ngram_iterations += rp->sp_ngram;
    rp->st->spec_seq_steps += rp->sched_dec;
    if (rp->sp_arm >= 0 && now > rp->t_last) {
        /* fastrl's reward: tokens per sequence (bonus included) x batch / step time */
        int64_t tokens = 0;
        for (int32_t k = 0; k < rp->nsp; k++)
            tokens += s->reqs[rp->sp[k]].acc;
        spec_bandit_record(rp->bandit, rp->nsp, rp->sp_arm, (double)tokens / (now - rp->t_last));
    }
    for (int32_t k = 0; k < rp->nsp; k++) {
        int32_t r = rp->sp[k];
        req *q = &s->reqs[r];
        q->gen += q->acc;
        q->kv += q->acc;
        rp->kv_used += q->acc;
        rp->sp_ctx += q->acc;
        rp->st->decode_tokens += q->acc;
        rp->st->spec_tokens += q->acc;
        if (q->gen >= q->target) {
            rp->kv_used -= q->kv;
            rp->sp_ctx -= q->kv;
            if (s->rt && s->rt[r].tt) /* a turn's end: its tool follows (no speculation) */
                ro_turn_end(s, rp, r, now, q->kv);
            else
                ro_finish(s, rp, r, now);
        } else {
            if (keep != k) {
                rp->sp_tree[keep] = rp->sp_tree[k];
                rp->sp_key[keep] = rp->sp_key[k];
            }
            rp->sp[keep++] = r;
        }
    }
    rp->nsp = keep;
}

void ro_spec_admit(sim *s, replica *rp, int32_t r)
{
    req *q = &s->reqs[r];
    q->kv = q->need;
    rp->sp_ctx += q->need;
    rp->sp_key[rp->nsp] = 0;
    rp->sp[rp->nsp++] = r;
}

void ro_spec_remove(sim *s, replica *rp, int32_t idx)
{
    req *q = &s->reqs[rp->sp[idx]];
    rp->kv_used -= q->kv;
    rp->sp_ctx -= q->kv;
    size_t tail = (size_t)(rp->nsp - idx - 1);
    memmove(&rp->sp[idx], &rp->sp[idx + 1], tail * sizeof *rp->sp);
    memmove(&rp->sp_tree[idx], &rp->sp_tree[idx + 1], tail * sizeof *rp->sp_tree);
    memmove(&rp->sp_key[idx], &rp->sp_key[idx + 1], tail * sizeof *rp->sp_key);
    rp->nsp--;
}

static int cmp_admit(const void *a, const void *b, void *ctx)
{
    const req *reqs = ctx;
    int64_t x = reqs[*(const int32_t *)a].admit, y = reqs[*(const int32_t *)b].admit;
    return (x > y) - (x < y);
}

/* TLT's switch: flush the KV cache (multi-turn: held contexts included),
 * send every running request back to prefill (prompt + tokens so far) in
 * admission order, quarter the prefill budget, and decode speculatively
 * from now on. */
void ro_spec_switch(sim *s, replica *rp, double now)
{
    for (int32_t k = 0; k < rp->nheap; k++) {
        int32_t r = rp->heap[k];
        req *q = &s->reqs[r];
        q->gen = dec_gen(q, rp->D);
        q->state = R_PREFILL;
        rp->pre[rp->npre++] = r;
    }
    rp->nheap = 0;
    for (int32_t k = 0; k < rp->npre; k++) {
        req *q = &s->reqs[rp->pre[k]];
        q->need = q->prompt + q->gen;
        q->done = 0;
        if (s->rt) /* a turn admitted with a cached prefix recomputes it */
            ro_turn_unhit(s, rp->pre[k]);
    }
    /* insertion sort by admission order (tail batches are small) */
    for (int32_t k = 1; k < rp->npre; k++) {
        int32_t r = rp->pre[k], j = k;
        while (j > 0 && cmp_admit(&rp->pre[j - 1], &r, s->reqs) > 0) {
            rp->pre[j] = rp->pre[j - 1];
            j--;
        }
        rp->pre[j] = r;
    }
    /* the flush takes multi-turn contexts held for trajectories out on tools
     * too: their next turn prefills its whole context */
    while (rp->lhead >= 0 && ro_turn_evict(s, rp, 0))
        ;
    rp->kv_used = 0;
    rp->dsum = 0;
    rp->chunk = rp->chunk / 4 > 0 ? rp->chunk / 4 : 1;
    rp->spec_on = 1;
    rp->st->spec_on_s = now;
}
