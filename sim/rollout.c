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
 * each advances by its own accepted count.  The spot trainer (TLT) is priced
 * at the end (rollout_run): a replica that has finished trains the drafter
 * until the last replica finishes.
 *
 * Prompts go to replicas by rollout.placement (rollout_place): balanced, the
 * default, deals the step's prompts in equal contiguous chunks in trace
 * order, as VeRL dispatches a batch to the rollout's data-parallel ranks
 * (DataProto.chunk: prompt i of n on replica floor(i * replicas / n));
 * round-robin deals prompt i to replica i % replicas; trace pins each prompt
 * to the dp_rank the trace recorded, and only when the recording had
 * exactly as many ranks as the rollout has replicas (a two-rank log on 16
 * replicas would leave 14 idle).
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
 * when an iteration was scheduled, 1 when the replica has nothing left. */
static int plan(sim *s, engine *e, replica *rp)
{
    const rollout_cfg *cfg = s->cfg;
    double cap = cfg->kv_tokens;
    /* decode tokens must fit: preempt until they do */
    while (rp->nheap + rp->nsp > 0 && rp->kv_used + decode_kv_need(s, rp) > cap)
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
                                           s->reqs[rp->wq[rp->whead]].gen)) {
                r = wq_pop_front(rp);
                req *q = &s->reqs[r];
                q->state = R_PREFILL;
                q->need = q->prompt + q->gen;
                q->done = 0;
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
            TS_CHECK(dt > 0 && isfinite(dt));
            if (engine_schedule(e, engine_now(e) + dt, iter_done, s, (uint64_t)rp->id) == 0) {
                s->failed = 1;
                ts_errf(s->e, "out of memory scheduling an iteration");
                engine_stop(e);
            }
            return 0;
        }
        if (rp->npre == 0 && rp->wn == 0)
            return 1;
        /* KV is held by partial prefills that cannot progress: free the latest */
        if (preempt_latest(s, rp))
            return 1;
    }
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
    assert(rp->kv_used <= cfg->kv_tokens + 0.5);
    /* TLT's adaptive switch: consecutive decode iterations in the tail */
    if (cfg->spec == SPEC_ADAPTIVE && !rp->spec_on && rp->sched_dec > 0) {
        rp->patience = rp->running_at_plan <= cfg->tail_threshold ? rp->patience + 1 : 0;
        if (rp->patience >= cfg->spec_patience && rp->nheap + rp->npre > 0)
            ro_spec_switch(s, rp, now);
    }
    plan(s, e, rp);
}

/* ---- driver ------------------------------------------------------------- */

int rollout_placement_parse(const char *name, rollout_placement *p)
{
    static const char *const names[] = {"balanced", "trace", "round-robin"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, names[i])) {
            *p = (rollout_placement)i;
            return 0;
        }
    return -1;
}

int rollout_trace_ranks(const trace *t, size_t *unranked)
{
    int32_t top = -1;
    size_t first_without = SIZE_MAX;
    for (size_t i = 0; i < t->n_prompts; i++) {
        int32_t r = t->prompts[i].dp_rank;
        if (r < 0 && first_without == SIZE_MAX)
            first_without = i;
        if (r > top)
            top = r;
    }
    if (top < 0)
        return 0;
    if (first_without != SIZE_MAX) {
        if (unranked)
            *unranked = first_without;
        return -1;
    }
    return top + 1;
}

int rollout_place(const trace *t, int replicas, rollout_placement rule, int ranks, int32_t *out,
                  ts_err *e)
{
    size_t n = t->n_prompts;
    if (rule == PLACE_TRACE) {
        size_t bad = 0;
        int own = rollout_trace_ranks(t, &bad);
        if (own == 0)
            return ts_errf(e, "rollout.placement = trace: the trace records no dp_rank; use "
                              "rollout.placement = balanced (the default)");
        if (own < 0)
            return ts_errf(e, "rollout.placement = trace: prompt %zu of the trace has no "
                              "dp_rank; use rollout.placement = balanced (the default)", bad);
        int want = ranks > 0 ? ranks : own;
        if (want != replicas || own > replicas)
            return ts_errf(e, "rollout.placement = trace: the trace records %d rollout rank%s "
                              "(dp_rank 0..%d) but the rollout has %d replica%s: pinning would "
                              "leave replicas idle or unplaced; use rollout.placement = balanced "
                              "(the default) to deal the prompts to every replica",
                           want, want == 1 ? "" : "s", want - 1, replicas,
                           replicas == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++)
            out[i] = t->prompts[i].dp_rank;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = rule == PLACE_ROUND_ROBIN
                     ? (int32_t)(i % (size_t)replicas)
                     : (int32_t)((uint64_t)i * (uint64_t)replicas / (uint64_t)n);
    return 0;
}

void rollout_result_free(rollout_result *res)
{
    if (!res)
        return;
    free(res->rep);
    free(res->finish_s);
    free(res->resp_replica);
    free(res->gen);
    memset(res, 0, sizeof *res);
}

/* Decode rate of one replica at full batch: the batch that max_running and
 * the KV cache allow at the trace's token-weighted mean context (a token of
 * an L-token response sees on average prompt + L/2 context, weighted by L),
 * priced by the same cost model. */
void rollout_full_rate(const rollout_cfg *cfg, const trace *t, double *rate, double *batch_out)
{
    double sum_l = 0, sum_l2 = 0, sum_p = 0;
    size_t n = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++) {
            double l = t->prompts[i].resp[j];
            if (cfg->max_response > 0 && l > cfg->max_response)
                l = cfg->max_response;
            sum_l += l;
            sum_l2 += l * l;
            sum_p += t->prompts[i].prompt_tokens;
            n++;
        }
    double ctx = (n ? sum_p / (double)n : 0) + (sum_l > 0 ? sum_l2 / (2 * sum_l) : 0);
    double batch = fmin((double)cfg->max_running, floor(cfg->kv_tokens / fmax(ctx, 1)));
    if (batch < 1)
        batch = 1;
    double dt = cost_decode_iter(cfg->hw, cfg->llm, cfg->tp, (int)batch, batch * ctx);
    *batch_out = batch;
    *rate = batch / dt;
}

/* Checks a rollout of n responses under cfg.  Returns 0, or -1 with e set. */
static int run_check(const rollout_cfg *cfg, size_t n, ts_err *e)
{
    if (n == 0)
        return ts_errf(e, "trace has no responses");
    if (cfg->replicas < 1 || cfg->tp < 1)
        return ts_errf(e, "need at least one replica of at least one GPU");
    if (cfg->kv_tokens < 1)
        return ts_errf(e, "KV cache capacity is %.0f tokens: the model does not fit", cfg->kv_tokens);
    if (cfg->spec != SPEC_OFF && spec_params_check(&cfg->sp, e))
        return -1;
    if (cfg->spot && drafter_params_check(&cfg->dp, e))
        return -1;
    return 0;
}

/* Allocates the state of a rollout of n responses over n_prompts prompts:
 * s's requests, replicas, engine, cost memo and stop-condition groups, and
 * res's arrays.  Returns 0, or -1 with e set (allocation failure); run_free()
 * and rollout_result_free() free what was allocated. */
static int run_alloc(sim *s, size_t n, size_t n_prompts, rollout_result *res)
{
    const rollout_cfg *cfg = s->cfg;
    s->reqs = calloc(n, sizeof *s->reqs);
    s->reps = calloc((size_t)cfg->replicas, sizeof *s->reps);
    res->rep = calloc((size_t)cfg->replicas, sizeof *res->rep);
    res->finish_s = calloc(n, sizeof *res->finish_s);
    res->resp_replica = calloc(n, sizeof *res->resp_replica);
    res->gen = calloc(n, sizeof *res->gen);
    s->eng = engine_new();
    s->cc = cost_cache_new(cfg->hw, cfg->llm, cfg->tp);
    if (cfg->stop_groups > 0) {
        s->grp = malloc(n * sizeof *s->grp);
        s->grp_left = calloc(n_prompts, sizeof *s->grp_left);
    }
    if (!s->reqs || !s->reps || !res->rep || !res->finish_s || !res->resp_replica || !res->gen ||
        !s->eng || !s->cc || (cfg->stop_groups > 0 && (!s->grp || !s->grp_left)))
        return ts_errf(s->e, "out of memory for %zu responses", n);
    s->finish_s = res->finish_s;
    res->replicas = cfg->replicas;
    res->responses = (int64_t)n;
    return 0;
}

/* Places every prompt of t on a replica (cfg->place, or rollout_place() by
 * cfg->placement) and sets up its responses' requests in trace order,
 * counting each replica's responses into res->rep.  Returns 0, or -1 with e
 * set: a place outside the replicas, a placement rollout_place() refuses, a
 * response that can never fit in the KV cache, a start_gen
 * outside [0, length), allocation failure. */
static int run_load(sim *s, const trace *t, size_t n, rollout_result *res)
{
    const rollout_cfg *cfg = s->cfg;
    ts_err *e = s->e;
    int rc = -1;
    int32_t *place = calloc(t->n_prompts, sizeof *place);
    if (!place)
        return ts_errf(e, "out of memory for %zu responses", n);
    if (cfg->place) {
        for (size_t i = 0; i < t->n_prompts; i++) {
            if (cfg->place[i] < 0 || cfg->place[i] >= cfg->replicas) {
                ts_errf(e, "prompt %zu: placed on replica %d of %d", i, cfg->place[i],
                        cfg->replicas);
                goto done;
            }
            place[i] = cfg->place[i];
        }
    } else if (rollout_place(t, cfg->replicas, cfg->placement, cfg->ranks, place, e)) {
        goto done;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[i];
        for (int32_t j = 0; j < p->n_resp; j++, k++) {
            int32_t len = p->resp[j];
            if (cfg->max_response > 0 && len > cfg->max_response)
                len = cfg->max_response;
            /* speculation writes up to 48 draft tokens beyond the sequence */
            double margin = cfg->spec != SPEC_OFF ? spec_budget_for_batch(1) : 0;
            if ((double)p->prompt_tokens + len + margin > cfg->kv_tokens) {
                ts_errf(e, "prompt %zu response %d: prompt + response = %d tokens exceed the "
                           "KV cache capacity of one replica (%.0f tokens)",
                        i, j, p->prompt_tokens + len, cfg->kv_tokens - margin);
                goto done;
            }
            int32_t g0 = cfg->start_gen ? cfg->start_gen[k] : 0;
            if (g0 < 0 || g0 >= len) {
                ts_errf(e, "prompt %zu response %d: resumes at token %d of %d", i, j, g0, len);
                goto done;
            }
            s->reqs[k] = (req){.prompt = p->prompt_tokens, .target = len, .gen = g0,
                               .replica = place[i]};
            if (s->grp) {
                s->grp[k] = (int32_t)i;
                s->grp_left[i]++;
            }
            res->resp_replica[k] = place[i];
            res->rep[place[i]].responses++;
        }
    }
    rc = 0;
done:
    free(place);
    return rc;
}

/* Gives replica r its queues and scratch, sized by its response count
 * (res->rep[r]), its RNG stream and its starting mode.  Returns 0, or -1
 * with e set (allocation failure); run_free() frees what was allocated. */
static int replica_init(sim *s, int r, rollout_result *res)
{
    const rollout_cfg *cfg = s->cfg;
    replica *rp = &s->reps[r];
    rp->id = r;
    rp->st = &res->rep[r];
    rp->wcap = rp->st->responses + 1;
    rp->wq = malloc((size_t)rp->wcap * sizeof *rp->wq);
    rp->pre = malloc((size_t)rp->wcap * sizeof *rp->pre);
    rp->heap = malloc((size_t)rp->wcap * sizeof *rp->heap);
    rp->sched = malloc((size_t)rp->wcap * sizeof *rp->sched);
    rp->sp = malloc((size_t)rp->wcap * sizeof *rp->sp);
    /* at most max_running requests decode speculatively at once */
    int32_t spec_max = cfg->max_running < rp->wcap ? cfg->max_running : rp->wcap;
    size_t nt = (size_t)(cfg->spec != SPEC_OFF ? spec_max : 0) + 1;
    rp->sp_tree = malloc(nt * sizeof *rp->sp_tree);
    rp->sp_key = calloc(nt, sizeof *rp->sp_key);
    if (cfg->on_iter && !(rp->it_buf = malloc(6 * (size_t)rp->wcap * sizeof *rp->it_buf)))
        return ts_errf(s->e, "out of memory for replica %d", r);
    rp->rng = ts_rng_new(cfg->seed, (uint64_t)r);
    rp->chunk = cfg->chunk_tokens;
    rp->spec_on = cfg->spec == SPEC_ALWAYS;
    rp->st->spec_on_s = rp->spec_on ? 0.0 : -1.0;
    if (!rp->wq || !rp->pre || !rp->heap || !rp->sched || !rp->sp || !rp->rng || !rp->sp_tree ||
        !rp->sp_key)
        return ts_errf(s->e, "out of memory for replica %d", r);
    return 0;
}

/* Draws each sequence's drafter quality and n-gram repetitiveness, in trace
 * order from its replica's stream.  Cannot fail. */
static void run_draw(sim *s, size_t n)
{
    const rollout_cfg *cfg = s->cfg;
    for (size_t q = 0; q < n; q++) {
        replica *rp = &s->reps[s->reqs[q].replica];
        s->reqs[q].q = cfg->spec != SPEC_OFF ? spec_draw_quality(&cfg->sp, rp->rng) : 0.0;
        s->reqs[q].rep =
            cfg->spec != SPEC_OFF && cfg->sp.ngram ? ngram_draw_rep(&cfg->sp, rp->rng) : 0.0;
    }
}

/* Queues every response on its replica's waiting deque, in cfg->order or
 * else trace order.  Returns 0, or -1 with e set: an order entry out of
 * range or repeated, allocation failure. */
static int run_queue(sim *s, size_t n)
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
static int run_events(sim *s, size_t n_prompts, size_t n)
{
    const rollout_cfg *cfg = s->cfg;
    if (s->grp)
        for (size_t i = 0; i < n_prompts; i++)
            s->must_left += cfg->must_finish && cfg->must_finish[i];
    s->unfinished = (int64_t)n;
    for (int r = 0; r < cfg->replicas; r++)
        plan(s, s->eng, &s->reps[r]);
    engine_run(s->eng, INFINITY);
    if (s->failed)
        return -1;
    TS_CHECK(s->unfinished == 0 || cfg->stop_groups > 0);
    return 0;
}

/* Collects where the run ended into res: complete groups, a stopped run's
 * replicas charged up to the stop, each response's tokens generated (finish
 * time -1 when unfinished), the engine's event count.  Cannot fail. */
static void run_collect(const sim *s, size_t n, rollout_result *res)
{
    const rollout_cfg *cfg = s->cfg;
    res->groups_done = s->groups_done;
    if (s->unfinished > 0) {
        /* stopped: every replica with work left aborts its iteration in flight */
        double T = engine_now(s->eng);
        res->stopped = 1;
        for (int r = 0; r < cfg->replicas; r++) {
            const replica *rp = &s->reps[r];
            if (rp->wn + rp->npre + rp->nheap + rp->nsp == 0)
                continue;
            rp->st->busy_s += T - rp->t_last;
            rp->st->end_s = T;
        }
    }
    for (size_t q = 0; q < n; q++) {
        const req *rq = &s->reqs[q];
        int heap = rq->state == R_DECODE && !s->reps[rq->replica].spec_on;
        res->gen[q] = rq->state == R_DONE ? rq->target
                                          : heap ? dec_gen(rq, s->reps[rq->replica].D) : rq->gen;
        if (rq->state != R_DONE)
            res->finish_s[q] = -1;
    }
    res->events = engine_events(s->eng);
}

/* The run's metrics from the per-replica figures in res: makespan, token,
 * preemption and speculation totals, TLT's spot trainer, the bubble, train
 * and tail fractions, utilization against rollout_full_rate().  Cannot
 * fail. */
static void run_metrics(const rollout_cfg *cfg, const trace *t, rollout_result *res)
{
    double idle = 0, tail = 0;
    int64_t seq_steps = 0, accepted = 0;
    for (int r = 0; r < cfg->replicas; r++) {
        replica_stats *st = &res->rep[r];
        if (st->end_s > res->makespan_s)
            res->makespan_s = st->end_s;
        res->decode_tokens += st->decode_tokens;
        res->prefill_tokens += st->prefill_tokens;
        res->preemptions += st->preemptions;
        res->spec_iterations += st->spec_iterations;
        res->ngram_iterations += st->ngram_iterations;
        seq_steps += st->spec_seq_steps;
        accepted += st->spec_accepted;
        tail += st->tail_s;
    }
    /* TLT's spot trainer: a finished replica releases its KV cache, loads the
     * drafter and trains it until the last replica finishes (a step cut off
     * by the end of the rollout is not counted) */
    if (cfg->spot) {
        res->spot_step_s = cost_draft_train_step(cfg->hw, cfg->llm, cfg->dp.seqs, cfg->dp.window);
        TS_CHECK(res->spot_step_s > 0 && isfinite(res->spot_step_s));
    }
    double train = 0;
    for (int r = 0; r < cfg->replicas; r++) {
        replica_stats *st = &res->rep[r];
        idle += res->makespan_s - st->busy_s;
        double free_s = res->makespan_s - st->end_s - cfg->dp.start_s;
        if (cfg->spot && free_s > 0) {
            st->train_s = free_s;
            st->drafter_steps = (int64_t)floor(free_s / res->spot_step_s) * cfg->tp;
            res->drafter_gpu_steps += st->drafter_steps;
            train += free_s;
        }
    }
    res->accept_len = seq_steps > 0 ? (double)accepted / (double)seq_steps : 0.0;
    rollout_full_rate(cfg, t, &res->full_rate, &res->full_batch);
    double span = res->makespan_s * cfg->replicas;
    res->bubble_fraction = span > 0 ? (idle - train) / span : 0;
    res->train_fraction = span > 0 ? train / span : 0;
    res->tail_fraction = span > 0 ? tail / span : 0;
    res->utilization = span > 0 ? (double)res->decode_tokens / (span * res->full_rate) : 0;
}

/* Frees the run's state in s (not the result).  Cannot fail. */
static void run_free(sim *s)
{
    if (s->reps)
        for (int r = 0; r < s->cfg->replicas; r++) {
            free(s->reps[r].wq);
            free(s->reps[r].pre);
            free(s->reps[r].heap);
            free(s->reps[r].sched);
            free(s->reps[r].sp);
            free(s->reps[r].sp_tree);
            free(s->reps[r].sp_key);
            free(s->reps[r].it_buf);
            ro_spec_free(&s->reps[r]);
            if (s->reps[r].rng)
                gsl_rng_free(s->reps[r].rng);
        }
    free(s->reps);
    free(s->reqs);
    free(s->grp);
    free(s->grp_left);
    engine_free(s->eng);
    cost_cache_free(s->cc);
}

int rollout_run(const rollout_cfg *cfg, const trace *t, rollout_result *res, ts_err *e)
{
    memset(res, 0, sizeof *res);
    size_t n = trace_n_responses(t);
    if (run_check(cfg, n, e))
        return -1;
    sim s = {0};
    s.cfg = cfg;
    s.e = e;
    if (cfg->spec != SPEC_OFF && cfg->sp.bandit &&
        (s.n_arms = spec_arms_parse(cfg->sp.arms, s.arms, e)) < 0)
        return -1;
    int rc = -1;
    if (run_alloc(&s, n, t->n_prompts, res) || run_load(&s, t, n, res))
        goto cleanup;
    for (int r = 0; r < cfg->replicas; r++)
        if (replica_init(&s, r, res))
            goto cleanup;
    run_draw(&s, n);
    if (run_queue(&s, n) || run_events(&s, t->n_prompts, n))
        goto cleanup;
    run_collect(&s, n, res);
    run_metrics(cfg, t, res);
    rc = 0;
cleanup:
    run_free(&s);
    if (rc)
        rollout_result_free(res);
    return rc;
}
