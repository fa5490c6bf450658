/*
 * A rollout run from setup to result (split from sim/rollout.c, which owns
 * the replicas' continuous-batching loop; both share the state in
 * sim/rollout_impl.h): rollout_run checks the configuration, allocates the
 * requests and replicas, places every prompt (rollout_place, or the policy's
 * own placement) and loads its responses, draws each sequence's drafter
 * quality, queues the responses and runs the event loop (ro_run_queue,
 * ro_run_events in sim/rollout.c), then collects where each response got and
 * the run's metrics, and frees its state.  Also the result's destructor and
 * rollout_full_rate(), the decode rate a replica reaches at full batch that
 * utilization is measured against.
 *
 * The spot trainer (TLT) is priced at the end (run_metrics): a replica that
 * has finished trains the drafter until the last replica finishes.
 */
#include "sim/rollout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "models/cost.h"
#include "models/cost_spec.h"
#include "sim/rollout_impl.h"

void rollout_result_free(rollout_result *res)
{
    if (!res)
        return;
    free(res->rep);
    free(res->finish_s);
    free(res->resp_replica);
    free(res->gen);
    free(res->tj);
    free(res->turns_done);
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
    hw_desc hw; /* the engine's attention kernel (decode prices none of it today) */
    rollout_attn_apply(cfg->hw, cfg->attn, &hw);
    double dt = cost_decode_iter(&hw, cfg->llm, cfg->tp, (int)batch, batch * ctx);
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
    if (rollout_attn_check(cfg->hw, cfg->attn, e))
        return ts_err_prefix(e, "rollout.attn = ");
    return 0;
}

/* Allocates the state of a rollout of t's n responses:
 * s's requests, replicas, engine, cost memo and stop-condition groups, and
 * res's arrays.  Returns 0, or -1 with e set (allocation failure); run_free()
 * and rollout_result_free() free what was allocated. */
static int run_alloc(sim *s, const trace *t, size_t n, rollout_result *res)
{
    size_t n_prompts = t->n_prompts;
    const rollout_cfg *cfg = s->cfg;
    s->reqs = calloc(n, sizeof *s->reqs);
    s->reps = calloc((size_t)cfg->replicas, sizeof *s->reps);
    res->rep = calloc((size_t)cfg->replicas, sizeof *res->rep);
    res->finish_s = calloc(n, sizeof *res->finish_s);
    res->resp_replica = calloc(n, sizeof *res->resp_replica);
    res->gen = calloc(n, sizeof *res->gen);
    s->eng = engine_new();
    s->cc = cost_cache_new(cfg->hw, cfg->llm, cfg->tp);
    if (s->tq_cap > 0 && !(s->tq = malloc((size_t)s->tq_cap * sizeof *s->tq)))
        return ts_errf(s->e, "out of memory for %zu responses", n);
    if (res->turns) {
        if (!(s->rt = calloc(n, sizeof *s->rt)) ||
            !(res->turns_done = calloc(n, sizeof *res->turns_done)))
            return ts_errf(s->e, "out of memory for %zu responses", n);
        for (size_t k = 0; k < n; k++)
            s->rt[k].lprev = s->rt[k].lnext = -1;
        size_t nt = 0;
        for (size_t i = 0; i < n_prompts; i++)
            if (t->prompts[i].turn0)
                nt += (size_t)t->prompts[i].turn0[t->prompts[i].n_resp];
            else
                nt += (size_t)t->prompts[i].n_resp;
        if (!(s->turn_lat = malloc((nt ? nt : 1) * sizeof *s->turn_lat)) ||
            !(s->tv = malloc((nt ? nt : 1) * sizeof *s->tv)))
            return ts_errf(s->e, "out of memory for %zu turns", nt);
        for (size_t u = 0; u < nt; u++)
            s->tv[u] = (turn_times){0, -1, -1, -1, -1}; /* turn 0 queues at the start */
    }
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

/* Sets up response j of multi-turn prompt p (index i) as request k on replica rep: its
 * first turn queued, the others to follow (sim/rollout_turns.c).  Returns 0,
 * or -1 with e set: a turn that can never fit in the KV cache. */
static int load_turns(sim *s, const trace_prompt *p, size_t i, int32_t j, size_t k,
                      int32_t rep, rollout_result *res)
{
    const trace_turn *tt = p->turns + p->turn0[j];
    int32_t nt = p->turn0[j + 1] - p->turn0[j];
    /* speculation writes up to 48 draft tokens beyond the sequence */
    double margin = s->cfg->spec != SPEC_OFF ? spec_budget_for_batch(1) : 0;
    for (int32_t u = 0; u < nt; u++)
        if ((double)tt[u].context + tt[u].gen + margin > s->cfg->kv_tokens)
            return ts_errf(s->e, "prompt %d response %d turn %d: context + generation = %d "
                                 "tokens exceed the KV cache capacity of one replica (%.0f "
                                 "tokens)", p->prompt_id, j, u, tt[u].context + tt[u].gen,
                           s->cfg->kv_tokens);
    s->reqs[k] = (req){.prompt = tt[0].context, .target = tt[0].gen, .replica = rep};
    s->rt[k] = (req_turn){.tt = tt, .nt = nt, .full = p->resp[j], .lprev = -1, .lnext = -1,
                          .tv0 = s->n_tv};
    s->n_tv += nt;
    if (s->grp) {
        s->grp[k] = (int32_t)i;
        s->grp_left[i]++;
    }
    res->resp_replica[k] = rep;
    res->rep[rep].responses++;
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
            if (p->turn0) {
                if (load_turns(s, p, i, j, k, place[i], res))
                    goto done;
                continue;
            }
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
    rp->lhead = rp->ltail = -1;
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

/* Appends [t0, t1] of kind to res->tj when it has a length. */
static void traj_put(rollout_result *res, int32_t rank, int32_t resp, int32_t turn, int kind,
                     double t0, double t1)
{
    if (t0 >= 0 && t1 > t0)
        res->tj[res->n_tj++] = (traj_interval){rank, (int32_t)resp, turn, kind, t0, t1};
}

/* The intervals of the ROLLOUT_TRAJ_TRACKS trajectories that finished last
 * (latest first; ties: lower index first) into res->tj.  Returns 0, or -1
 * with e set (allocation failure). */
static int run_collect_traj(const sim *s, size_t n, rollout_result *res)
{
    int32_t pick[ROLLOUT_TRAJ_TRACKS];
    int np = 0;
    for (size_t q = 0; q < n; q++) { /* insertion into a short list, latest first */
        double f = res->finish_s[q];
        int at = np;
        while (at > 0 && f > res->finish_s[pick[at - 1]])
            at--;
        if (at >= ROLLOUT_TRAJ_TRACKS)
            continue;
        if (np < ROLLOUT_TRAJ_TRACKS)
            np++;
        memmove(pick + at + 1, pick + at, (size_t)(np - 1 - at) * sizeof *pick);
        pick[at] = (int32_t)q;
    }
    size_t cap = 0;
    for (int i = 0; i < np; i++)
        cap += 4 * (size_t)s->rt[pick[i]].nt;
    if (cap && !(res->tj = malloc(cap * sizeof *res->tj)))
        return ts_errf(s->e, "out of memory for the trajectories' timeline");
    for (int i = 0; i < np; i++) {
        const req_turn *t = &s->rt[pick[i]];
        for (int32_t k = 0; k < t->nt; k++) {
            const turn_times *v = &s->tv[t->tv0 + k];
            traj_put(res, i, pick[i], k, TJ_QUEUE, v->queued, v->admitted);
            traj_put(res, i, pick[i], k, TJ_GEN, v->admitted, v->ended);
            traj_put(res, i, pick[i], k, TJ_TOOL_QUEUE, v->ended, v->tool0);
            traj_put(res, i, pick[i], k, TJ_TOOL, v->tool0, v->tool1);
        }
    }
    return 0;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A multi-turn run's totals, critical path, turn latencies (lower order
 * statistics) and the timeline of the trajectories that finished last into
 * res.  Returns 0, or -1 with e set (allocation failure). */
static int run_collect_turns(const sim *s, size_t n, rollout_result *res)
{
    if (!res->turns)
        return 0;
    res->tool_calls = s->tool_calls;
    res->tool_s = s->tool_s;
    res->tool_queue_s = s->tool_queue_s;
    res->cached_tokens = s->cached_tokens;
    res->evictions = s->evictions;
    res->crit_resp = 0;
    for (size_t q = 1; q < n; q++)
        if (res->finish_s[q] > res->finish_s[res->crit_resp])
            res->crit_resp = (int32_t)q;
    const req_turn *c = &s->rt[res->crit_resp];
    res->crit_turns = c->tt ? c->nt : 1;
    res->crit_tool_s = c->tool_sum;
    res->crit_turn_s = c->turn_max;
    res->crit_turn = c->turn_arg;
    double *x = s->turn_lat, sum = 0;
    int64_t m = s->n_turn_lat;
    if (m == 0)
        return run_collect_traj(s, n, res);
    qsort(x, (size_t)m, sizeof *x, dbl_cmp);
    for (int64_t i = 0; i < m; i++)
        sum += x[i];
    res->turn_mean_s = sum / (double)m;
    res->turn_p50_s = x[(m - 1) / 2];
    res->turn_p90_s = x[(int64_t)(0.9 * (double)(m - 1))];
    res->turn_max_s = x[m - 1];
    return run_collect_traj(s, n, res);
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
        if (res->turns_done) { /* multi-turn: where a cut leaves it, a turn boundary */
            const req_turn *t = &s->rt[q];
            int ended = rq->state == R_DONE || s->tv[t->tv0 + t->k].ended >= 0;
            res->turns_done[q] = rq->state == R_DONE ? t->nt : t->k + ended;
            if (!ended)
                res->cut_tokens += res->gen[q];
        }
    }
    res->events = engine_events(s->eng);
}

/* The run's metrics from the per-replica figures in res: makespan, token,
 * preemption and speculation totals, TLT's spot trainer, the bubble, train
 * and tail fractions, utilization against rollout_full_rate().  Cannot
 * fail. */
static void run_metrics(const rollout_cfg *cfg, const trace *t, rollout_result *res)
{
    double idle = 0, tail = 0, wait = 0;
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
        wait += st->tool_wait_s;
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
    res->bubble_fraction = span > 0 ? (idle - train - wait) / span : 0;
    res->tool_wait_fraction = span > 0 ? wait / span : 0;
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
    free(s->rt);
    free(s->grp);
    free(s->grp_left);
    free(s->tq);
    free(s->turn_lat);
    free(s->tv);
    engine_free(s->eng);
    cost_cache_free(s->cc);
}

int rollout_run(const rollout_cfg *cfg, const trace *t, rollout_result *res, ts_err *e)
{
    memset(res, 0, sizeof *res);
    size_t n = trace_n_responses(t);
    if (run_check(cfg, n, e))
        return -1;
    /* the engine prices its iterations on a copy of the hardware with its own
     * attention kernel (rollout.attn); the spot trainer (run_metrics) keeps
     * cfg's */
    hw_desc hw;
    rollout_attn_apply(cfg->hw, cfg->attn, &hw);
    rollout_cfg eng = *cfg;
    eng.hw = &hw;
    sim s = {0};
    s.cfg = &eng;
    s.e = e;
    if (cfg->spec != SPEC_OFF && cfg->sp.bandit &&
        (s.n_arms = spec_arms_parse(cfg->sp.arms, s.arms, e)) < 0)
        return -1;
    int rc = -1;
    if ((res->turns = trace_has_turns(t))) {
        if (cfg->start_gen)
            return ts_errf(e, "start_gen resumes single-turn responses by tokens; a "
                              "multi-turn trajectory resumes at a turn: pass its remaining "
                              "turns (the trace has turns)");
        if (cfg->tool_concurrency < 0)
            return ts_errf(e, "tool_concurrency is %d (0: unlimited)", cfg->tool_concurrency);
        s.tq_cap = (int64_t)n;
    }
    if (run_alloc(&s, t, n, res) || run_load(&s, t, n, res))
        goto cleanup;
    for (int r = 0; r < cfg->replicas; r++)
        if (replica_init(&s, r, res))
            goto cleanup;
    run_draw(&s, n);
    if (ro_run_queue(&s, n) || ro_run_events(&s, t->n_prompts, n))
        goto cleanup;
    run_collect(&s, n, res);
    if (run_collect_turns(&s, n, res))
        goto cleanup;
    run_metrics(cfg, t, res);
    rc = 0;
cleanup:
    run_free(&s);
    if (rc)
        rollout_result_free(res);
    return rc;
}
