/*
 * Rollout replicas: continuous batching as vLLM/SGLang do it, one engine
 * event per iteration of each replica.
 *
 * A replica holds a waiting deque, a FIFO of requests being prefilled and a
 * min-heap of decoding requests keyed by the iteration at which each one
 * finishes.  Every iteration decodes one token for every decoding request
 * (so a per-replica decode counter D advances by one and nothing per request
 * is touched), and fills the rest of the token budget (chunk_tokens, decode
 * tokens count against it, as in vLLM's max_num_batched_tokens) with prefill
 * chunks, admitting waiting requests while fewer than max_running run and
 * the request's whole prefill fits in the free KV cache.  The
 * last chunk of a prefill produces the request's next token.  KV usage is
 * counted in tokens; when the next iteration's decode tokens do not fit, the
 * most recently admitted request is preempted (recompute: its KV is freed and
 * it returns to the front of the waiting deque, to re-prefill prompt + tokens
 * so far).  A trace length is produced exactly: scheduling changes when a
 * token is produced, never how many.
 *
 * Cost per iteration is O(log n) for finishing requests plus O(chunks); the
 * attention cost gets the running sum of per-sequence contexts, kept
 * incrementally (context sum += decode batch per iteration).
 *
 * Speculative decoding (TLT) lives in sim/rollout_spec.c: once a replica
 * decodes speculatively (from the start, or adaptively after spec_patience
 * consecutive decode iterations with at most tail_threshold requests
 * running), its decoding requests leave the heap for a plain array, since
 * each advances by its own accepted count.
 *
 * Prompts reach the replicas' waiting deques by rollout.placement
 * (sim/rollout_place.c); rollout_run, the run's setup, metrics (with TLT's
 * spot trainer) and teardown live in sim/rollout_run.c, which drives this
 * file's loop through ro_run_queue and ro_run_events (sim/rollout_impl.h).
 *
 * For the policies that change what a rollout runs (sim/policy/policy_*.c) the
 * configuration may place prompts (overriding the placement) and order the
 * queues, resume responses from tokens generated earlier (start_gen: prefill
 * prompt + those tokens), and stop once stop_groups prompts have all their
 * responses finished (engine_stop from ro_finish): every replica then aborts where it stands,
 * and rollout_result.gen says how far each response got.
 *
 * Invariants (checked in debug builds): kv_used == sum of KV tokens of the
 * prefilling and decoding requests <= kv capacity; dsum == sum of the decoding
 * requests' KV tokens; every response finishes exactly once (unless stopped).
 */
#include "sim/rollout.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "models/cost.h"
#include "models/cost_spec.h"
#include "sim/rollout_impl.h"


/* ---- decode heap -------------------------------------------------------- */

static void heap_set(sim *s, replica *rp, int32_t i, int32_t r)
{
    rp->heap[i] = r;
    s->reqs[r].hpos = i;
}

static void heap_up(sim *s, replica *rp, int32_t i)
{
    int32_t r = rp->heap[i];
    int64_t k = s->reqs[r].fin;
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (s->reqs[rp->heap[p]].fin <= k)
            break;
        heap_set(s, rp, i, rp->heap[p]);
        i = p;
    }
    heap_set(s, rp, i, r);
}

static void heap_down(sim *s, replica *rp, int32_t i)
{
    int32_t r = rp->heap[i];
    int64_t k = s->reqs[r].fin;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= rp->nheap)
            break;
        if (c + 1 < rp->nheap && s->reqs[rp->heap[c + 1]].fin < s->reqs[rp->heap[c]].fin)
            c++;
        if (s->reqs[rp->heap[c]].fin >= k)
            break;
        heap_set(s, rp, i, rp->heap[c]);
        i = c;
    }
    heap_set(s, rp, i, r);
}

static void heap_push(sim *s, replica *rp, int32_t r)
{
    rp->heap[rp->nheap] = r;
    heap_up(s, rp, rp->nheap++);
}

static void heap_remove(sim *s, replica *rp, int32_t i)
{
    int32_t last = --rp->nheap;
    if (i == last)
        return;
    heap_set(s, rp, i, rp->heap[last]);
    if (i > 0 && s->reqs[rp->heap[i]].fin < s->reqs[rp->heap[(i - 1) / 2]].fin)
        heap_up(s, rp, i);
    else
        heap_down(s, rp, i);
}

/* ---- waiting deque ------------------------------------------------------ */

static void wq_push_back(replica *rp, int32_t r)
{
    assert(rp->wn < rp->wcap);
    rp->wq[(rp->whead + rp->wn++) % rp->wcap] = r;
}

static void wq_push_front(replica *rp, int32_t r)
{
    assert(rp->wn < rp->wcap);
    rp->whead = (rp->whead + rp->wcap - 1) % rp->wcap;
    rp->wq[rp->whead] = r;
    rp->wn++;
}

void ro_wq_push_back(replica *rp, int32_t r)
{
    wq_push_back(rp, r);
}

static int32_t wq_pop_front(replica *rp)
{
    int32_t r = rp->wq[rp->whead];
    rp->whead = (rp->whead + 1) % rp->wcap;
    rp->wn--;
    return r;
}

/* ---- request state ------------------------------------------------------ */

void ro_finish(sim *s, replica *rp, int32_t r, double t)
{
    s->reqs[r].state = R_DONE;
    s->finish_s[r] = t;
    s->unfinished--;
    if (t > rp->st->end_s)
        rp->st->end_s = t;
    if (!s->grp || --s->grp_left[s->grp[r]] > 0)
        return;
    /* a group is complete: the stop condition of the partial policies */
    s->groups_done++;
    if (s->cfg->must_finish && s->cfg->must_finish[s->grp[r]])
        s->must_left--;
    if (s->groups_done >= s->cfg->stop_groups && s->must_left == 0)
        engine_stop(s->eng);
}

/* Preempts the most recently admitted running request.  Returns 0, or -1
 * when nothing runs. */
static int preempt_latest(sim *s, replica *rp)
{
    int32_t best = -1, where = -1, idx = -1;
    for (int32_t i = 0; i < rp->npre; i++) {
        int32_t r = rp->pre[i];
        if (best < 0 || s->reqs[r].admit > s->reqs[best].admit)
            best = r, where = 0, idx = i;
    }
    for (int32_t i = 0; i < rp->nheap; i++) {
        int32_t r = rp->heap[i];
        if (best < 0 || s->reqs[r].admit > s->reqs[best].admit)
            best = r, where = 1, idx = i;
    }
    for (int32_t i = 0; i < rp->nsp; i++) {
        int32_t r = rp->sp[i];
        if (best < 0 || s->reqs[r].admit > s->reqs[best].admit)
            best = r, where = 2, idx = i;
    }
    if (best < 0)
        return -1;
    req *q = &s->reqs[best];
    if (where == 0) {
        rp->kv_used -= q->done;
        memmove(&rp->pre[idx], &rp->pre[idx + 1], (size_t)(rp->npre - idx - 1) * sizeof *rp->pre);
        rp->npre--;
    } else if (where == 2) {
        ro_spec_remove(s, rp, idx);
    } else {
        double kv = dec_kv(q, rp->D);
        rp->kv_used -= kv;
        rp->dsum -= kv;
        q->gen = dec_gen(q, rp->D);
        heap_remove(s, rp, idx);
    }
    q->state = R_WAIT;
    q->done = 0;
    wq_push_front(rp, best);
    rp->st->preemptions++;
    return 0;
}

/* ---- one iteration ------------------------------------------------------ */

static void iter_done(engine *e, void *ctx, uint64_t arg);

/* Decode tokens the next iteration adds to the KV cache: one per decoding
 * request, or V per speculative one (the verified draft tokens are written
 * before the rejected ones are dropped). */
static double decode_kv_need(const sim *s, const replica *rp)
{
    return rp->spec_on ? (double)rp->nsp * ro_spec_budget(s, rp->nsp) : (double)rp->nheap;
}

/* Describes the iteration just planned to cfg->on_iter (validation replay).
 * O(batch); only runs when a callback is set. */
static void report_iter(sim *s, replica *rp, double t0, double dt, int32_t n_dec, int32_t V)
{
    int32_t w = rp->wcap;
    int32_t *seq = rp->it_buf, *ctx = seq + w, *acc = ctx + w;
    int32_t *cseq = acc + w, *clen = cseq + w, *cdone = clen + w;
    for (int32_t k = 0; k < n_dec; k++) {
        int32_t r = rp->spec_on ? rp->sp[k] : rp->heap[k];
        const req *q = &s->reqs[r];
        seq[k] = r;
        ctx[k] = rp->spec_on ? q->kv : (int32_t)dec_kv(q, rp->D);
        acc[k] = rp->spec_on ? q->acc : 1;
    }
    for (int32_t k = 0; k < rp->nsched; k++) {
        cseq[k] = rp->sched[k].r;
        clen[k] = rp->sched[k].c;
        cdone[k] = s->reqs[rp->sched[k].r].done;
    }
    rollout_iter it = {rp->id, t0, dt, n_dec, seq, ctx, rp->spec_on ? V : 0,
                       rp->spec_on ? acc : NULL, rp->nsched, cseq, clen, cdone};
    s->cfg->on_iter(s->cfg->on_iter_ctx, &it);
}

/* Plans the next iteration of rp and schedules its completion.  Returns 0
 * when an iteration was scheduled, 1 when the replica has nothing to run now
 * (it is then idle until a tool call returns, or done). */
int ro_plan(sim *s, engine *e, replica *rp)
{
    const rollout_cfg *cfg = s->cfg;
    double cap = cfg->kv_tokens;
    /* decode tokens must fit: evict held contexts (multi-turn), then preempt */
    while (rp->nheap + rp->nsp > 0 && rp->kv_used + decode_kv_need(s, rp) > cap)
        if (rp->lhead < 0 || !ro_turn_evict(s, rp, 0))
            preempt_latest(s, rp);
    for (;;) {
        int32_t n_dec = rp->spec_on ? rp->nsp : rp->nheap;
        int32_t V = rp->spec_on ? ro_spec_budget(s, n_dec) : 1;
        double dec_tokens = (double)n_dec * V;
        double budget = (double)rp->chunk - dec_tokens;
        double kv_free = cap - rp->kv_used - dec_tokens;
        rp->nsched = 0;
        cost_batch b = {0};
        if (!rp->spec_on) {
            b.n_decode = n_dec;
            b.decode_ctx_sum = rp->dsum + n_dec;
        }
        /* continue prefills in admission order, then admit new requests */
        int32_t i = 0;
        for (;;) {
            if (budget < 1 || kv_free < 1)
                break;
            int32_t r;
            if (i < rp->npre) {
                r = rp->pre[i++];
            } else if (rp->wn > 0 && rp->npre + n_dec < cfg->max_running &&
                       /* admit only when the whole prefill fits (vLLM's can_allocate,
                        * SGLang's PrefillAdder): else a preempted request re-enters at
                        * once and is preempted again, recomputing its context each time */
                       kv_free >= (double)(s->reqs[rp->wq[rp->whead]].prompt +
                                           s->reqs[rp->wq[rp->whead]].gen -
                                           (s->rt ? s->rt[rp->wq[rp->whead]].held : 0))) {
                r = wq_pop_front(rp);
                req *q = &s->reqs[r];
                q->state = R_PREFILL;
                q->need = q->prompt + q->gen;
                q->done = s->rt ? ro_turn_admit(s, rp, r, engine_now(e)) : 0;
                q->admit = s->admit_seq++;
                rp->pre[rp->npre++] = r;
                i = rp->npre;
            } else {
                break;
            }
            req *q = &s->reqs[r];
            double c = fmin(fmin((double)(q->need - q->done), budget), kv_free);
            if (c < 1)
                continue;
            rp->sched[rp->nsched++] = (chunk){r, (int32_t)c};
            budget -= c;
            kv_free -= c;
            b.n_prefill_seqs++;
            b.prefill_tokens += (int)c;
            b.prefill_attn += c * ((double)q->done + (c + 1) / 2);
            b.prefill_kv_sum += (double)q->done + c;
        }
        if (n_dec > 0 || rp->nsched > 0) {
            double dt;
            cost_cache_set_graph(s->cc, cost_host_coll(&cfg->host, n_dec + rp->nsched,
                                                       rp->nsched == 0));
            if (rp->spec_on && n_dec > 0) {
                dt = ro_spec_plan(s, rp, V, &b);
            } else {
                dt = cost_iter_cached(s->cc, &b) +
                     cost_sample(cfg->hw, cfg->llm, b.n_decode + b.n_prefill_seqs);
                dt = cost_host_step(cfg->hw, &cfg->host, n_dec + rp->nsched, rp->nsched == 0,
                                    cost_iter_kernels(cfg->llm, cfg->tp), dt);
            }
            if (cfg->on_iter)
                report_iter(s, rp, engine_now(e), dt, n_dec, V);
            rp->sched_dec = n_dec;
            rp->sp_budget = V;
            rp->running_at_plan = rp->npre + n_dec;
            rp->t_last = engine_now(e);
            rp->idle = 0;
            TS_CHECK(dt > 0 && isfinite(dt));
            if (engine_schedule(e, engine_now(e) + dt, iter_done, s, (uint64_t)rp->id) == 0) {
                s->failed = 1;
                ts_errf(s->e, "out of memory scheduling an iteration");
                engine_stop(e);
            }
            return 0;
        }
        if (rp->npre == 0 && rp->wn == 0)
            break;
        /* KV is held by contexts out on tools or by partial prefills that
         * cannot progress: evict the oldest held context, else free the latest */
        if (rp->lhead >= 0 && ro_turn_evict(s, rp, 0))
            continue;
        if (preempt_latest(s, rp))
            break;
    }
    rp->idle = 1;
    rp->idle_t = engine_now(e);
    return 1;
}

static void iter_done(engine *e, void *ctx, uint64_t arg)
{
    sim *s = ctx;
    const rollout_cfg *cfg = s->cfg;
    replica *rp = &s->reps[arg];
    double now = engine_now(e);
    double dt = now - rp->t_last;
    rp->st->iterations++;
    rp->st->busy_s += dt;
    if (rp->running_at_plan <= cfg->tail_threshold)
        rp->st->tail_s += dt;
    if (rp->running_at_plan > rp->st->peak_running)
        rp->st->peak_running = rp->running_at_plan;
    if (rp->spec_on && rp->sched_dec > 0) {
        ro_spec_verify_done(s, rp, now);
    } else if (rp->sched_dec > 0) {
        /* decodes: every decoding request produced one token */
        rp->D++;
        rp->kv_used += rp->sched_dec;
        rp->dsum += rp->sched_dec;
        rp->st->decode_tokens += rp->sched_dec;
        while (rp->nheap > 0 && s->reqs[rp->heap[0]].fin <= rp->D) {
            int32_t r = rp->heap[0];
            double kv = dec_kv(&s->reqs[r], rp->D);
            rp->kv_used -= kv;
            rp->dsum -= kv;
            heap_remove(s, rp, 0);
            if (s->rt && s->rt[r].tt)
                ro_turn_end(s, rp, r, now, kv);
            else
                ro_finish(s, rp, r, now);
        }
    }
    /* prefill chunks: a completed prefill yields the request's next token */
    for (int32_t k = 0; k < rp->nsched; k++) {
        req *q = &s->reqs[rp->sched[k].r];
        q->done += rp->sched[k].c;
        rp->kv_used += rp->sched[k].c;
        rp->st->prefill_tokens += rp->sched[k].c;
    }
    int32_t keep = 0;
    for (int32_t k = 0; k < rp->npre; k++) {
        int32_t r = rp->pre[k];
        req *q = &s->reqs[r];
        if (q->done < q->need) {
            rp->pre[keep++] = r;
            continue;
        }
        q->gen++;
        rp->st->decode_tokens++;
        if (q->gen >= q->target) {
            rp->kv_used -= q->need;
            if (s->rt && s->rt[r].tt)
                ro_turn_end(s, rp, r, now, q->need);
            else
                ro_finish(s, rp, r, now);
            continue;
        }
        q->state = R_DECODE;
        if (rp->spec_on) {
            ro_spec_admit(s, rp, r);
        } else {
            q->d_start = rp->D;
            q->fin = rp->D + (q->target - q->gen);
            rp->dsum += q->need;
            heap_push(s, rp, r);
        }
    }
    rp->npre = keep;
    /* multi-turn: prefix cache gives way to the KV the iteration took; then,
     * if a tool call that returned during the iteration pinned its prefix
     * again over the capacity, held contexts of waiting turns go too */
    while (rp->kv_used + rp->kv_soft > cfg->kv_tokens + 0.5 &&
           ro_turn_evict(s, rp, rp->kv_soft > 0))
        ;
    assert(rp->kv_used <= cfg->kv_tokens + 0.5);
    /* TLT's adaptive switch: consecutive decode iterations in the tail */
    if (cfg->spec == SPEC_ADAPTIVE && !rp->spec_on && rp->sched_dec > 0) {
        rp->patience = rp->running_at_plan <= cfg->tail_threshold ? rp->patience + 1 : 0;
        if (rp->patience >= cfg->spec_patience && rp->nheap + rp->npre > 0)
            ro_spec_switch(s, rp, now);
    }
    ro_plan(s, e, rp);
}

/* ---- the run's queues and event loop (driven by sim/rollout_run.c) ------ */

/* Queues every response on its replica's waiting deque, in cfg->order or
 * else trace order.  Returns 0, or -1 with e set: an order entry out of
 * range or repeated, allocation failure. */
int ro_run_queue(sim *s, size_t n)
{
    const rollout_cfg *cfg = s->cfg;
    uint8_t *queued = NULL; /* cfg->order: responses queued so far */
    if (cfg->order && !(queued = calloc(n, 1)))
        return ts_errf(s->e, "out of memory for %zu responses", n);
    for (size_t q = 0; q < n; q++) {
        int32_t r = cfg->order ? cfg->order[q] : (int32_t)q;
        if (cfg->order && (r < 0 || (size_t)r >= n || queued[r]++)) {
            free(queued);
            return ts_errf(s->e, "admission order: entry %zu (response %d) is out of range or "
                                 "repeated", q, r);
        }
        wq_push_back(&s->reps[s->reqs[r].replica], r);
    }
    free(queued);
    return 0;
}

/* The event loop: sets the stop condition's counters, plans every replica's
 * first iteration and runs the engine until every response has finished or
 * the stop condition holds.  Returns 0, or -1 with e set when an iteration
 * could not be scheduled. */
int ro_run_events(sim *s, size_t n_prompts, size_t n)
{
    const rollout_cfg *cfg = s->cfg;
    if (s->grp)
        for (size_t i = 0; i < n_prompts; i++)
            s->must_left += cfg->must_finish && cfg->must_finish[i];
    s->unfinished = (int64_t)n;
    for (int r = 0; r < cfg->replicas; r++)
        ro_plan(s, s->eng, &s->reps[r]);
    engine_run(s->eng, INFINITY);
    if (s->failed)
        return -1;
    TS_CHECK(s->unfinished == 0 || cfg->stop_groups > 0);
    return 0;
}
