/*
 * The speculative path of a rollout replica (TLT), split from sim/rollout.c,
 * which owns the plain continuous-batching loop; both share the state in
 * sim/rollout_impl.h.
 *
 * Once a replica decodes speculatively (from the start, or after TLT's
 * adaptive switch), its decoding requests live in a plain array `sp` in
 * admission order, since each advances by its own accepted count.  An
 * iteration drafts (cost_draft), verifies V tokens per sequence
 * (cost_verify, V from TLT's batch-size table), and each sequence gains the
 * tokens drawn from the acceptance model (sim/specdec.c), never more than it
 * has left: a response still ends at exactly its trace length (lossless).
 * The iteration's duration includes EAGLE's draft extend (spec_iter_cost).  Each sequence keeps the verify tree of its own drafter quality, rebuilt only
 * when V changes.  The switch flushes the KV cache, sends every running
 * request back to prefill (prompt + tokens so far) and cuts the prefill
 * budget to a quarter, as TLT's engine does.  Speculation runs in the tail,
 * so the O(batch) work per speculative iteration is small.
 */
#include <math.h>
#include <string.h>

#include "sim/rollout_impl.h"

double ro_spec_plan(sim *s, replica *rp, int32_t V, const cost_batch *b)
{
    const rollout_cfg *cfg = s->cfg;
    int32_t n_dec = rp->nsp;
    /* draw every sequence's accepted tokens now, apply them at the end */
    for (int32_t k = 0; k < n_dec; k++) {
        req *q = &s->reqs[rp->sp[k]];
        if (rp->sp_V[k] != V) {
            spec_tree_build(&cfg->sp, q->q, V, &rp->sp_tree[k]);
            rp->sp_V[k] = V;
        }
        int a = spec_sample(&cfg->sp, &rp->sp_tree[k], rp->rng);
        rp->st->spec_accepted += a;
        q->acc = a < q->target - q->gen ? a : q->target - q->gen;
    }
    return spec_iter_cost(&cfg->sp, cfg->hw, cfg->llm, cfg->tp, n_dec, V, rp->sp_ctx, b);
}

void ro_spec_verify_done(sim *s, replica *rp, double now)
{
    int32_t keep = 0;
    rp->st->spec_iterations++;
    rp->st->spec_seq_steps += rp->sched_dec;
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
            ro_finish(s, rp, r, now);
        } else {
            if (keep != k) {
                rp->sp_tree[keep] = rp->sp_tree[k];
                rp->sp_V[keep] = rp->sp_V[k];
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
    rp->sp_V[rp->nsp] = 0;
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
    memmove(&rp->sp_V[idx], &rp->sp_V[idx + 1], tail * sizeof *rp->sp_V);
    rp->nsp--;
}

static int cmp_admit(const void *a, const void *b, void *ctx)
{
    const req *reqs = ctx;
    int64_t x = reqs[*(const int32_t *)a].admit, y = reqs[*(const int32_t *)b].admit;
    return (x > y) - (x < y);
}

/* TLT's switch: flush the KV cache, send every running request back to
 * prefill (prompt + tokens so far) in admission order, quarter the prefill
 * budget, and decode speculatively from now on. */
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
    rp->kv_used = 0;
    rp->dsum = 0;
    rp->chunk = rp->chunk / 4 > 0 ? rp->chunk / 4 : 1;
    rp->spec_on = 1;
    rp->st->spec_on_s = now;
}
