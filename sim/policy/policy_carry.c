/*
 * Prompts carried across RL steps (see policy_carry.h), for the policies
 * partial (APRIL), tailbatch (RollPacker) and async (AReaL).
 *
 * The prompts come from a stream: the prompts of the loaded steps in order,
 * starting over at the first step when a policy launches more prompts than
 * the steps hold (over-provisioning draws ahead).  A replayed prompt is a new
 * sample with the same trace lengths, i.e. from the same distribution.
 *
 * A group in flight keeps each response's progress (tokens so far) and the
 * step of its first token.  A rollout segment runs the active groups'
 * unfinished responses, each resuming by re-prefilling prompt + its tokens
 * (what APRIL and AReaL's interruptible generation do after an abort or a
 * weight update), and stops once enough groups are complete.  Complete
 * groups leave for training; the accounting checks that every trained
 * response has exactly its trace length, and counts each one's staleness:
 * trained at step k, first token at step j, it is k - max(0, j - lag)
 * policy versions behind (lag 0 colocated, 1 when rollout runs one version
 * behind the trainer).
 *
 * A multi-turn trajectory (issue 20) counts its progress in turns, not
 * tokens: a segment runs its remaining turns, a stop leaves it at a turn
 * boundary (rollout_result.turns_done; the tokens of a turn cut part-way are
 * wasted), and it resumes at its next turn with that turn's whole context
 * prefilled.  Its tokens are its turns' generated ones.
 */
#include "sim/policy/policy_carry.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/comm.h"
#include "models/memory.h"

static int32_t cap_len(const carry_state *cs, int32_t len)
{
    return cs->max_response > 0 && len > cs->max_response ? cs->max_response : len;
}

/* Turns of response j of multi-turn prompt p. */
static int32_t n_turns(const trace_prompt *p, int32_t j)
{
    return p->turn0[j + 1] - p->turn0[j];
}

/* Where response j of g is complete: its capped length in tokens, or (a
 * multi-turn trajectory, whose progress counts turns) its turn count. */
static int32_t target(const carry_state *cs, const carry_group *g, int32_t j)
{
    return g->p->turn0 ? n_turns(g->p, j) : cap_len(cs, g->p->resp[j]);
}

/* Tokens response j of g has at progress u: u itself, or (multi-turn) what
 * its first u turns generated (the trained tokens once every turn is done,
 * as verl counts them: the model's own, not the tool results). */
static int64_t tokens_at(const carry_group *g, int32_t j, int32_t u)
{
    const trace_prompt *p = g->p;
    if (!p->turn0)
        return u;
    int64_t sum = 0;
    for (int32_t x = 0; x < u; x++)
        sum += p->turns[p->turn0[j] + x].gen;
    return sum;
}

void carry_init(carry_state *cs, trace *const *steps, int n, int max_response, int lag,
                multistep_result *res)
{
    memset(cs, 0, sizeof *cs);
    cs->steps = steps;
    cs->n_steps = n;
    cs->max_response = max_response;
    for (int k = 0; k < n; k++) {
        int r = rollout_trace_ranks(steps[k], NULL);
        if (r > cs->ranks)
            cs->ranks = r;
    }
    cs->lag = lag;
    cs->res = res;
}

static void group_free(carry_group *g)
{
    free(g->gen);
    free(g->first);
}

void carry_finish(carry_state *cs)
{
    for (size_t i = 0; i < cs->ng; i++) {
        carry_group *g = &cs->g[i];
        cs->res->pending_groups++;
        for (int32_t j = 0; j < g->p->n_resp; j++)
            cs->res->pending_tokens += tokens_at(g, j, g->gen[j]);
        group_free(g);
    }
    free(cs->g);
    cs->g = NULL;
    cs->ng = cs->cap = 0;
}

static size_t stream_len(const carry_state *cs)
{
    size_t total = 0;
    for (int k = 0; k < cs->n_steps; k++)
        total += cs->steps[k]->n_prompts;
    return total;
}

/* The prompt at stream position pos (the stream is not empty). */
static const trace_prompt *stream_at(const carry_state *cs, size_t pos)
{
    pos %= stream_len(cs);
    for (int k = 0;; k++) {
        if (pos < cs->steps[k]->n_prompts)
            return &cs->steps[k]->prompts[pos];
        pos -= cs->steps[k]->n_prompts;
    }
}

int carry_launch(carry_state *cs, int k, int count, ts_err *e)
{
    if (count > 0 && stream_len(cs) == 0)
        return ts_errf(e, "no prompts to launch: the steps are empty");
    for (int c = 0; c < count; c++) {
        if (cs->ng == cs->cap) {
            size_t nc = cs->cap ? 2 * cs->cap : 64;
            carry_group *ng = realloc(cs->g, nc * sizeof *ng);
            if (!ng)
                return ts_errf(e, "out of memory for the groups in flight");
            cs->g = ng;
            cs->cap = nc;
        }
        const trace_prompt *p = stream_at(cs, cs->next);
        carry_group *g = &cs->g[cs->ng];
        memset(g, 0, sizeof *g);
        g->p = p;
        g->gen = calloc((size_t)p->n_resp, sizeof *g->gen);
        g->first = malloc(3 * (size_t)p->n_resp * sizeof *g->first);
        if (!g->gen || !g->first) {
            group_free(g);
            return ts_errf(e, "out of memory for the groups in flight");
        }
        g->pre = g->first + p->n_resp;
        g->last = g->pre + p->n_resp;
        for (int32_t j = 0; j < p->n_resp; j++)
            g->first[j] = g->last[j] = -1, g->pre[j] = 0;
        g->launched = k;
        g->active = 1;
        g->done_step = -1;
        cs->ng++;
        cs->next++;
        cs->res->launched_groups++;
    }
    return 0;
}

static int group_complete(const carry_state *cs, const carry_group *g)
{
    for (int32_t j = 0; j < g->p->n_resp; j++)
        if (g->gen[j] < target(cs, g, j))
            return 0;
    return 1;
}

/* Appends group g's responses rj[0..n) to seg, each with its turns from
 * start[x] on: a carried trajectory resumes at a turn start, its context
 * (nothing of it in KV after the weight update) prefilled again.  Returns 0,
 * or -1 on allocation failure. */
static int seg_add_turns(trace *seg, const carry_group *g, const int32_t *rj,
                         const int32_t *start, int32_t n, ts_err *e)
{
    const trace_prompt *p = g->p;
    size_t nt = 0;
    for (int32_t x = 0; x < n; x++)
        nt += (size_t)(n_turns(p, rj[x]) - start[x]);
    int32_t *cnt = malloc(((size_t)n + 1) * sizeof *cnt);
    int32_t *full = malloc(((size_t)n + 1) * sizeof *full);
    trace_turn *tt = malloc((nt + 1) * sizeof *tt);
    int rc = -1;
    if (!cnt || !full || !tt) {
        ts_errf(e, "out of memory for a rollout segment");
        goto done;
    }
    size_t u = 0;
    for (int32_t x = 0; x < n; x++) {
        int32_t j = rj[x];
        cnt[x] = n_turns(p, j) - start[x];
        full[x] = p->resp[j];
        memcpy(tt + u, p->turns + p->turn0[j] + start[x], (size_t)cnt[x] * sizeof *tt);
        u += (size_t)cnt[x];
    }
    rc = trace_add_turns(seg, p->step, p->prompt_id, p->dp_rank, p->prompt_tokens, full, n,
                         cnt, tt, e);
done:
    free(cnt);
    free(full);
    free(tt);
    return rc;
}

int carry_rollout(carry_state *cs, const scenario *s, const hw_desc *hw, const llm_desc *m,
                  int k, int stop, rlstep_result *res, run_record *rec, ts_err *e)
{
    memset(res, 0, sizeof *res);
    trace *seg = trace_new();
    size_t nr = 0;
    for (size_t i = 0; i < cs->ng; i++)
        nr += (size_t)cs->g[i].p->n_resp;
    int32_t *len = malloc((nr + 1) * sizeof *len), *start = malloc((nr + 1) * sizeof *start);
    int32_t *gi = malloc((nr + 1) * sizeof *gi), *rj = malloc((nr + 1) * sizeof *rj);
    uint8_t *must = malloc(cs->ng + 1);
    int rc = -1;
    if (!seg || !len || !start || !gi || !rj || !must) {
        ts_errf(e, "out of memory for a rollout segment");
        goto done;
    }
    size_t q = 0, np = 0;
    int buffered = 0;
    for (size_t i = 0; i < cs->ng; i++) {
        carry_group *g = &cs->g[i];
        if (group_complete(cs, g))
            buffered++;
        if (!g->active || group_complete(cs, g))
            continue;
        int32_t n = 0;
        for (int32_t j = 0; j < g->p->n_resp; j++) {
            int32_t l = target(cs, g, j);
            if (g->gen[j] >= l)
                continue;
            len[q + (size_t)n] = l;
            start[q + (size_t)n] = g->gen[j];
            gi[q + (size_t)n] = (int32_t)i;
            rj[q + (size_t)n] = j;
            n++;
        }
        if (g->p->turn0 ? seg_add_turns(seg, g, rj + q, start + q, n, e)
                        : trace_add(seg, g->p->step, g->p->prompt_id, g->p->dp_rank,
                                    g->p->prompt_tokens, len + q, n, e))
            goto done;
        must[np++] = (uint8_t)g->must;
        q += (size_t)n;
    }
    if (np == 0) {
        ts_errf(e, "step %d: no prompt left to roll out", k);
        goto done;
    }
    if (stop > 0)
        stop = stop - buffered > 1 ? stop - buffered : 1;
    int turns = trace_has_turns(seg);
    rlstep_opts o = {.start_gen = turns ? NULL : start, .stop_groups = stop,
                     .must_finish = must, .ranks = cs->ranks};
    if (rlstep_rollout_opts(s, hw, m, seg, &o, res, rec, e))
        goto done;
    /* utilization against the full-batch rate of the step's own prompts:
     * the segment's (resumed, long) responses would understate it */
    rollout_cfg cfg;
    if (rlstep_rollout_cfg(s, hw, m, &cfg, e)) {
        rlstep_result_free(res);
        goto done;
    }
    rollout_full_rate(&cfg, cs->steps[k % cs->n_steps], &res->ro.full_rate, &res->ro.full_batch);
    double span = res->ro.makespan_s * res->ro.replicas * res->ro.full_rate;
    res->ro.utilization = span > 0 ? (double)res->ro.decode_tokens / span : 0;
    for (size_t x = 0; x < q; x++) {
        carry_group *g = &cs->g[gi[x]];
        /* a trajectory's progress is in turns: it ran from turn start[x] on */
        int32_t now = turns ? start[x] + res->ro.turns_done[x] : res->ro.gen[x];
        TS_CHECK(now >= start[x] && now <= len[x]);
        if (g->first[rj[x]] < 0 && now > 0)
            g->first[rj[x]] = k;
        if (now > start[x]) {
            g->pre[rj[x]] = start[x];
            g->last[rj[x]] = k;
        }
        g->gen[rj[x]] = now;
    }
    cs->res->wasted_tokens += res->ro.cut_tokens; /* turns cut part-way start over */
    /* groups complete in this segment: when (their last response's end) */
    for (size_t x = 0; x < q; x++) {
        carry_group *g = &cs->g[gi[x]];
        if (g->done_step == k || (g->done_step < 0 && group_complete(cs, g))) {
            if (g->done_step < 0)
                g->done_at = 0;
            g->done_step = k;
            if (res->ro.finish_s[x] > g->done_at)
                g->done_at = res->ro.finish_s[x];
        }
    }
    rc = 0;
done:
    trace_free(seg);
    free(len);
    free(start);
    free(gi);
    free(rj);
    free(must);
    return rc;
}

typedef struct done_key {
    int must, step;
    double at;
    size_t i;
} done_key;

/* must first, then earliest completed, then launch order */
static int by_done(const void *a, const void *b)
{
    const done_key *x = a, *y = b;
    if (x->must != y->must)
        return y->must - x->must;
    if (x->step != y->step)
        return x->step - y->step;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

int carry_take_done(carry_state *cs, int k, int limit, trace **out, ts_err *e)
{
    trace *t = trace_new();
    done_key *key = malloc((cs->ng + 1) * sizeof *key);
    uint8_t *take = calloc(cs->ng + 1, 1);
    if (!t || !key || !take) {
        trace_free(t);
        free(key);
        free(take);
        return ts_errf(e, "out of memory");
    }
    size_t nd = 0;
    for (size_t i = 0; i < cs->ng; i++)
        if (group_complete(cs, &cs->g[i]))
            key[nd++] = (done_key){cs->g[i].must, cs->g[i].done_step, cs->g[i].done_at, i};
    qsort(key, nd, sizeof *key, by_done);
    for (size_t x = 0; x < nd; x++)
        take[key[x].i] = key[x].must || limit <= 0 || x < (size_t)limit;
    free(key);
    size_t keep = 0;
    for (size_t i = 0; i < cs->ng; i++) {
        carry_group *g = &cs->g[i];
        if (!take[i]) {
            cs->g[keep++] = *g;
            continue;
        }
        if (trace_add(t, g->p->step, g->p->prompt_id, g->p->dp_rank, g->p->prompt_tokens,
                      g->p->resp, g->p->n_resp, e)) {
            /* keep the state consistent: the rest stays in flight */
            for (size_t r = i; r < cs->ng; r++)
                cs->g[keep++] = cs->g[r];
            cs->ng = keep;
            trace_free(t);
            free(take);
            return -1;
        }
        multistep_result *res = cs->res;
        res->trained_groups++;
        for (int32_t j = 0; j < g->p->n_resp; j++) {
            /* every trained response has exactly its trace length */
            TS_CHECK(g->gen[j] == target(cs, g, j) && g->first[j] >= 0);
            int v = g->first[j] - cs->lag > 0 ? g->first[j] - cs->lag : 0;
            int stale = k - v;
            int64_t pre = tokens_at(g, j, g->pre[j]), all = tokens_at(g, j, g->gen[j]);
            res->trained_tokens += all;
            /* tokens before its latest segment are older; those of it are
             * older too when that segment ran an earlier version than k */
            int vl = g->last[j] - cs->lag > 0 ? g->last[j] - cs->lag : 0;
            cs->offpol_tokens += pre + (vl < k ? all - pre : 0);
            cs->trained_resp++;
            cs->stale_sum += stale;
            cs->offpol += stale > 0;
            if (stale > res->max_staleness)
                res->max_staleness = stale;
        }
        group_free(g);
    }
    cs->ng = keep;
    free(take);
    *out = t;
    return 0;
}

void carry_restart(carry_state *cs, size_t i)
{
    carry_group *g = &cs->g[i];
    for (int32_t j = 0; j < g->p->n_resp; j++) {
        cs->res->wasted_tokens += tokens_at(g, j, g->gen[j]);
        g->gen[j] = 0;
        g->first[j] = g->last[j] = -1;
        g->pre[j] = 0;
    }
    g->done_step = -1;
}

int carry_step(carry_state *cs, const scenario *s, const hw_desc *hw, const llm_desc *m, int k,
               int stop, int limit, int full, rlstep_result *res, run_record *rec, ts_err *e)
{
    double sync = full ? comm_allgather(hw, mem_weights(m, s->tp), s->gpus) : 0.0;
    size_t first = rec ? rec->n_tl : 0;
    if (carry_rollout(cs, s, hw, m, k, stop, res, rec, e))
        return -1;
    policy_shift_record(rec, first, sync, 0);
    trace *batch = NULL;
    if (carry_take_done(cs, k, limit, &batch, e)) {
        rlstep_result_free(res);
        return -1;
    }
    res->step_s = res->ro.makespan_s;
    if (!full) {
        trace_free(batch);
        return 0;
    }
    for (int g = 0; rec && g < s->gpus; g++)
        if (run_add_interval(rec, g, PH_SYNC, TL_BUSY, 0.0, sync)) {
            trace_free(batch);
            rlstep_result_free(res);
            return ts_errf(e, "out of memory for the timeline");
        }
    rlstep_result tr;
    double t_train = sync + res->ro.makespan_s;
    first = rec ? rec->n_tl : 0;
    /* the batch's reward phase: step k's recorded reward times, if any */
    int rc = reward_copy(batch, cs->steps[k % cs->n_steps], e) ||
             rlstep_train_half(s, hw, m, batch, &tr, rec, e);
    trace_free(batch);
    if (rc) {
        rlstep_result_free(res);
        return -1;
    }
    policy_shift_record(rec, first, t_train, 0);
    res->phase_s[PH_SYNC] = sync;
    res->phase_t0[PH_ROLLOUT] = sync;
    for (int ph = PH_REWARD; ph < PH_COUNT; ph++) {
        res->phase_s[ph] = tr.phase_s[ph];
        res->phase_t0[ph] = tr.phase_t0[ph] + t_train;
    }
    res->train_imbalance = tr.train_imbalance;
    res->train_mem_gb = tr.train_mem_gb;
    res->reward = tr.reward;
    res->step_s = t_train + tr.step_s;
    return 0;
}

void carry_summarize(carry_state *cs)
{
    multistep_result *r = cs->res;
    r->off_policy_fraction = cs->trained_resp ? (double)cs->offpol / (double)cs->trained_resp : 0;
    r->mean_staleness = cs->trained_resp ? cs->stale_sum / (double)cs->trained_resp : 0;
    r->off_policy_token_fraction =
        r->trained_tokens ? (double)cs->offpol_tokens / (double)r->trained_tokens : 0;
}

int carry_run_colocated(const carry_rounds *r, const scenario *s, const hw_desc *hw,
                        const llm_desc *m, trace *const *steps, int n, int full,
                        multistep_result *res, run_record *rec, ts_err *e)
{
    carry_state cs;
    carry_init(&cs, steps, n, s->max_response, 0, res);
    scenario sk = *s;
    double t0 = 0, q = s->sp.quality;
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        int P = (int)steps[k]->n_prompts, stop = P, limit = P;
        sk.seed = s->seed + (uint64_t)k;
        policy_drafter_use(&sk, res, k, q);
        size_t first = rec ? rec->n_tl : 0;
        rc = r->begin(&cs, s, k, P, &stop, &limit, e);
        if (!rc)
            rc = carry_step(&cs, &sk, hw, m, k, stop, limit, full, &res->step[k], rec, e);
        if (rc) {
            ts_err_prefix(e, "step %d: ", k);
            break;
        }
        if (r->end)
            r->end(&cs);
        q = policy_drafter_next(&sk, &res->step[k], q);
        policy_shift_record(rec, first, t0, 0);
        res->t0[k] = t0;
        t0 += res->step[k].step_s;
    }
    carry_summarize(&cs);
    carry_finish(&cs);
    return rc;
}
