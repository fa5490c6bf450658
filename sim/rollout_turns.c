/*
 * Multi-turn (agentic) trajectories on a rollout replica (issue 20): a
 * trajectory's turns (trace_prompt.turns) run in order on its replica.  A
 * turn is admitted, prefilled and decoded like any request (sim/rollout.c);
 * when it has generated its tokens it leaves the batch and, if a tool call
 * follows, waits for the tool off the GPU: tool calls of every replica run
 * in parallel, at most rollout.tool_concurrency at once (0: unlimited), the
 * others queue FIFO for a slot.  When the tool returns, the next turn joins
 * the back of the replica's waiting queue with the context the trace
 * records for it, and only the tokens not already in KV are prefilled.
 *
 * The context a trajectory leaves in KV (its "held" tokens: the turn's
 * context + generation, less the last token) is kept while its tool runs
 * (rollout.keep_kv_during_tool = true: counted in kv_used, evicted only when
 * the replica could not progress otherwise), or becomes prefix cache
 * (false: counted in kv_soft, evicted oldest first as soon as the running
 * batch needs the room).  An evicted trajectory prefills its whole context
 * again.  At least one token of a turn's context is always prefilled (the
 * engine recomputes the last one), so a context the trace records shorter
 * than what is held gives the excess back.
 *
 * A replica with nothing to run while some of its trajectories are out on
 * tools is idle; that time, up to its end, is its tool wait
 * (replica_stats.tool_wait_s), a bubble of its own next to the tail bubble
 * after the replica's end.  A trajectory whose last turn is followed by a
 * tool call finishes when that call returns.  The simulator counts its own
 * cache hits (rollout_result.cached_tokens; a hit that a preemption or TLT's
 * flush then makes the turn prefill after all is taken back); the trace's
 * recorded ones are for comparison (`tailsim trace stats`).
 *
 * Cost: O(1) per turn end and tool return, O(held contexts) per eviction
 * scan in the worst case (it stops at the first evictable one).
 */
#include "sim/rollout.h"

#include <math.h>

#include "common/util.h"
#include "sim/rollout_impl.h"

static void tool_done(engine *e, void *ctx, uint64_t arg);

/* Appends r to rp's list of held contexts. */
static void held_push(sim *s, replica *rp, int32_t r)
{
    req_turn *q = &s->rt[r];
    q->lprev = rp->ltail;
    q->lnext = -1;
    if (rp->ltail >= 0)
        s->rt[rp->ltail].lnext = r;
    else
        rp->lhead = r;
    rp->ltail = r;
}

/* Takes r off rp's list of held contexts. */
static void held_remove(sim *s, replica *rp, int32_t r)
{
    req_turn *q = &s->rt[r];
    if (q->lprev >= 0)
        s->rt[q->lprev].lnext = q->lnext;
    else
        rp->lhead = q->lnext;
    if (q->lnext >= 0)
        s->rt[q->lnext].lprev = q->lprev;
    else
        rp->ltail = q->lprev;
    q->lprev = q->lnext = -1;
}

/* Frees r's held context from the pool that counts it. */
static void held_drop(sim *s, replica *rp, int32_t r)
{
    req_turn *q = &s->rt[r];
    if (q->soft)
        rp->kv_soft -= q->held;
    else
        rp->kv_used -= q->held;
    q->held = 0;
    q->soft = 0;
    held_remove(s, rp, r);
}

int ro_turn_evict(sim *s, replica *rp, int soft_only)
{
    for (int32_t r = rp->lhead; r >= 0; r = s->rt[r].lnext)
        if (!soft_only || s->rt[r].soft) {
            held_drop(s, rp, r);
            s->evictions++;
            return 1;
        }
    return 0;
}

int32_t ro_turn_admit(sim *s, replica *rp, int32_t r, double now)
{
    req_turn *q = &s->rt[r];
    turn_times *tv = &s->tv[q->tv0 + q->k];
    if (tv->admitted < 0)
        tv->admitted = now;
    else /* admitted again after a preemption: its whole context is prefilled */
        ro_turn_unhit(s, r);
    int32_t h = q->held;
    if (h == 0)
        return 0;
    TS_CHECK(!q->soft);
    held_remove(s, rp, r);
    q->held = 0;
    q->hit = h;
    s->cached_tokens += h;
    return h;
}

void ro_turn_unhit(sim *s, int32_t r)
{
    s->cached_tokens -= s->rt[r].hit;
    s->rt[r].hit = 0;
}

/* Starts r's tool call at time now (a slot is free).  Sets s->failed when
 * the event cannot be scheduled. */
static void tool_start(sim *s, int32_t r, double now)
{
    req_turn *q = &s->rt[r];
    const trace_turn *u = &q->tt[q->k];
    s->tools_running++;
    s->tool_calls++;
    s->tool_s += u->tool_s;
    s->tool_queue_s += now - q->t_tool;
    s->tv[q->tv0 + q->k].tool0 = now;
    if (engine_schedule(s->eng, now + u->tool_s, tool_done, s, (uint64_t)r) == 0) {
        s->failed = 1;
        ts_errf(s->e, "out of memory scheduling a tool call");
        engine_stop(s->eng);
    }
}

/* The replica was idle with trajectories out on tools: that time is tool wait. */
static void charge_wait(replica *rp, double now)
{
    if (rp->idle) {
        rp->st->tool_wait_s += now - rp->idle_t;
        rp->idle_t = now;
    }
}

void ro_turn_end(sim *s, replica *rp, int32_t r, double now, double kv)
{
    const rollout_cfg *cfg = s->cfg;
    req *q = &s->reqs[r];
    req_turn *t = &s->rt[r];
    const trace_turn *u = &t->tt[t->k];
    double span = now - t->t_turn;
    s->tv[t->tv0 + t->k].ended = now;
    s->turn_lat[s->n_turn_lat++] = span;
    if (span > t->turn_max) {
        t->turn_max = span;
        t->turn_arg = t->k;
    }
    if (u->tools == 0) { /* its last turn (the reader ends a trajectory without a tool) */
        q->target = t->full;
        ro_finish(s, rp, r, now);
        return;
    }
    q->state = R_WAIT;
    if (t->k + 1 < t->nt) { /* keep the context for the next turn */
        t->held = (int32_t)kv;
        t->soft = !cfg->keep_kv_during_tool;
        if (t->soft)
            rp->kv_soft += t->held;
        else
            rp->kv_used += t->held;
        held_push(s, rp, r);
    }
    t->t_tool = now;
    if (cfg->tool_concurrency > 0 && s->tools_running >= cfg->tool_concurrency) {
        s->tq[(s->tq_head + s->tq_n++) % s->tq_cap] = r;
        return;
    }
    tool_start(s, r, now);
}

/* A tool call of request arg returned: the next turn queues on its replica
 * (which plans again if it was idle), or the trajectory finishes; a waiting
 * call takes the freed slot. */
static void tool_done(engine *e, void *ctx, uint64_t arg)
{
    sim *s = ctx;
    double now = engine_now(e);
    int32_t r = (int32_t)arg;
    req *q = &s->reqs[r];
    req_turn *t = &s->rt[r];
    replica *rp = &s->reps[q->replica];
    s->tools_running--;
    t->tool_sum += now - t->t_tool;
    s->tv[t->tv0 + t->k].tool1 = now;
    if (s->tq_n > 0) {
        int32_t w = s->tq[s->tq_head];
        s->tq_head = (s->tq_head + 1) % s->tq_cap;
        s->tq_n--;
        tool_start(s, w, now);
    }
    charge_wait(rp, now);
    if (++t->k >= t->nt) { /* a tool call after the last turn */
        q->target = t->full;
        ro_finish(s, rp, r, now);
        return;
    }
    const trace_turn *u = &t->tt[t->k];
    if (t->held > 0) {
        if (t->soft) { /* the prefix cache survived: it is pinned again */
            rp->kv_soft -= t->held;
            rp->kv_used += t->held;
            t->soft = 0;
        }
        if (t->held > u->context - 1) { /* the recorded context is shorter */
            rp->kv_used -= t->held - (u->context - 1);
            t->held = u->context - 1;
        }
        if (t->held == 0)
            held_remove(s, rp, r);
    }
    q->prompt = u->context;
    q->target = u->gen;
    t->hit = 0;
    q->gen = 0;
    t->t_turn = now;
    s->tv[t->tv0 + t->k].queued = now;
    ro_wq_push_back(rp, r);
    if (rp->idle)
        ro_plan(s, e, rp);
}
