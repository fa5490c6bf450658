/*
 * DCP-planned training phases of the RL step (train.strategy != none).
 *
 * Once per RL step: the responses of the step's trace, each with its prompt
 * and capped at rollout.max_response, become a 1D batch trace in trace
 * order; it is bucketized and planned once with the scenario's strategy on
 * all cluster.gpus GPUs (colocated, as VeRL's hybrid engine trains on the
 * GPUs that rolled out; the rollout's KV cache is released by then, so the
 * [dcp] memory cap applies to the whole HBM).  The plan has one or more
 * optimizer steps (DCP's: a step ends when its slowest group has run its
 * micro-batches); a phase replays it, pricing every micro-batch from its own
 * sequences with tc_microbatch_time(), exactly as sim/dcp/dcp_sim.c does.  The
 * training strategy must not change the RL algorithm, so the plan's steps are
 * only barriers (groups re-form between them) and the gradients accumulate
 * over all of them into the update's one optimizer step per epoch, as with
 * train.strategy = none: one gradient sync (ZeRO reduce-scatter + all-gather
 * + Adam, dcp_ctx.sync_s) per epoch.  The
 * forward-only passes (old log-prob, reference) reuse the update's plan with
 * forward time only and no sync: the same grouping, a conservative choice
 * (a forward-only pass could take larger micro-batches).
 *
 * Cost: the DCP profile (a few ms) and one plan per RL step; one cost-model
 * evaluation per micro-batch per pass.
 */
#include "sim/rlstep_train.h"

#include <stdlib.h>
#include <string.h>

#include "sim/dcp/dcp_setup.h"

void rlstep_train_free(rlstep_train *rt)
{
    if (!rt)
        return;
    dcp_plan_free(&rt->plan);
    dcp_ctx_free(&rt->ctx);
    btrace_free(rt->bt);
    rt->bt = NULL;
}

int rlstep_train_init(rlstep_train *rt, const scenario *s, const hw_desc *hw, const llm_desc *m,
                      const trace *t, ts_err *e)
{
    memset(rt, 0, sizeof *rt);
    int n = 0;
    if (!strcmp(s->train_strategy, "none") ||
        dcp_parse_strategies(s->train_strategy, &rt->strat, 1, &n, e) || n != 1 ||
        rt->strat.kind == DCP_BOUND)
        return ts_errf(e, "%s: key 'train.strategy': '%s' is not a DCP training strategy",
                       s->path, s->train_strategy);
    if (tc_model_init(&rt->tm, m, s->dcp.cross_tokens, s->dcp.act_factor, e))
        return ts_err_prefix(e, "%s: [dcp]: ", s->path);
    rt->tm.a2a_eff = s->dcp.a2a_eff;
    rt->tm.frame_split = s->dcp.frame_split;
    dcp_cfg cfg;
    if (dcp_setup_cfg(s, &cfg, e))
        return -1;
    if (!(rt->bt = btrace_new(BT_1D)))
        return ts_errf(e, "out of memory");
    for (size_t i = 0; i < t->n_prompts; i++) {
        const trace_prompt *p = &t->prompts[i];
        for (int32_t j = 0; j < p->n_resp; j++) {
            int64_t len = (int64_t)scenario_cap_response(s, p->resp[j]) + p->prompt_tokens;
            if (btrace_add_1d(rt->bt, (int32_t)(len < BT_MAX_TOKENS ? len : BT_MAX_TOKENS), e))
                goto fail;
        }
    }
    if (rt->bt->n == 0) {
        ts_errf(e, "the step's trace has no responses");
        goto fail;
    }
    dcp_strategy bound = {DCP_BOUND, 0, "bound"};
    dcp_plan bp;
    if (bt_bucketize(rt->bt, e) || dcp_ctx_init(&rt->ctx, hw, &rt->tm, rt->bt, &cfg, e) ||
        dcp_plan_run(&rt->ctx, &bound, &bp, e))
        goto fail;
    rt->bound_s = bp.bound_s;
    dcp_plan_free(&bp);
    if (dcp_plan_run(&rt->ctx, &rt->strat, &rt->plan, e))
        goto fail;
    return 0;
fail:
    ts_err_prefix(e, "%s: train.strategy %s: ", s->path, s->train_strategy);
    rlstep_train_free(rt);
    return -1;
}

static int add_iv(run_record *rec, int gpu, int phase, int state, double t0, double t1)
{
    return t1 > t0 ? run_add_interval(rec, gpu, phase, state, t0, t1) : 0;
}

int rlstep_train_run(const rlstep_train *rt, int update, int passes, int phase, double t0,
                     run_record *rec, rlstep_train_phase *out, ts_err *e)
{
    memset(out, 0, sizeof *out);
    const dcp_ctx *c = &rt->ctx;
    const dcp_plan *p = &rt->plan;
    int G = c->cfg.gpus;
    /* group times of one pass, computed once: every pass prices the same */
    size_t n_gt = 0;
    for (size_t k = 0; k < p->n_step; k++)
        n_gt += (size_t)p->step[k].n_g;
    double *gt = malloc((n_gt ? n_gt : 1) * sizeof *gt);
    if (!gt)
        return ts_errf(e, "out of memory");
    for (size_t k = 0, gi = 0; k < p->n_step; k++)
        for (int32_t g = 0; g < p->step[k].n_g; g++, gi++) {
            const dcp_group *grp = &p->grp[p->step[k].g0 + g];
            double tg = 0;
            for (int32_t b = 0; b < grp->n_mb; b++) {
                const dcp_mb *mb = &p->mb[grp->mb0 + b];
                tc_work w = {0};
                for (int32_t i = 0; i < mb->n; i++) {
                    const bt_seq *q = &c->bt->seq[p->seq[mb->first + i]];
                    tc_work_add(&w, q->t, q->s, 1);
                }
                tc_par par = {grp->sp, c->cfg.ring, mb->ckpt_a, mb->ckpt_b};
                tc_breakdown bd;
                double full = tc_microbatch_time(c->hw, c->tm, &par, &w, &bd);
                tg += update ? full : bd.fwd_s;
            }
            gt[gi] = tg;
        }
    double sync = update ? c->sync_s : 0;
    double now = t0, idle = 0, maxsum = 0;
    for (int pass = 0; pass < passes; pass++) {
        for (size_t k = 0, gi = 0; k < p->n_step; k++) {
            const dcp_step *st = &p->step[k];
            double cmax = 0;
            for (int32_t g = 0; g < st->n_g; g++)
                cmax = gt[gi + (size_t)g] > cmax ? gt[gi + (size_t)g] : cmax;
            int used = 0;
            for (int32_t g = 0; g < st->n_g; g++, gi++) {
                const dcp_group *grp = &p->grp[st->g0 + g];
                idle += grp->sp * (cmax - gt[gi]);
                for (int x = 0; rec && x < grp->sp; x++)
                    if (add_iv(rec, grp->gpu0 + x, phase, TL_BUSY, now, now + gt[gi]) ||
                        add_iv(rec, grp->gpu0 + x, phase, TL_IDLE, now + gt[gi], now + cmax))
                        goto oom;
                used = grp->gpu0 + grp->sp > used ? grp->gpu0 + grp->sp : used;
            }
            idle += (double)(G - used) * cmax;
            for (int gpu = used; rec && gpu < G; gpu++)
                if (add_iv(rec, gpu, phase, TL_IDLE, now, now + cmax))
                    goto oom;
            maxsum += G * cmax;
            now += cmax;
            out->plan_steps++;
        }
        /* the pass's one optimizer step: gradients accumulated over all plan steps */
        for (int gpu = 0; rec && gpu < G; gpu++)
            if (add_iv(rec, gpu, phase, TL_BUSY, now, now + sync))
                goto oom;
        now += sync;
    }
    free(gt);
    out->len_s = now - t0;
    out->imbalance = maxsum > 0 ? idle / maxsum : 0;
    return 0;
oom:
    free(gt);
    return ts_errf(e, "out of memory for the timeline");
}
