/*
 * `tailsim-validate confirm [--quick] [--trace FILE] [-o DIR] [--json]`:
 * confirms end to end that a speedup the simulator predicts is the speedup
 * the hardware delivers.
 *
 * Setup: a sample of long-tail responses (from --trace, or generated
 * lognormal lengths) on one replica: a stack of Qwen2.5-7B decoder layers
 * (--model: another models/llm name or INI, e.g. a tiny one for emulation)
 * (--layers, default the model's: 28 for Qwen2.5-7B) with the embedding and LM head, random weights,
 * one GPU.  tailsim simulates the rollout twice with its cost model and the
 * GPU's calibration (models/hw/<hw>.ini, or models/calib/<hw>.csv when
 * committed): plain continuous batching, and TLT's adaptive speculation
 * (switch after 10 decode iterations at <= 32 running; EAGLE drafter of depth
 * 8 and top-k 4; verify of V tokens by batch size; accepted counts drawn from
 * tailsim's acceptance model, since random weights cannot agree).
 *
 * Each simulated iteration is then executed on the GPU as the simulator
 * planned it (rollout_iter: which sequences decode at which context, which
 * prefill chunks run, how many tokens each speculative sequence gains) and
 * as the cost model prices it (validate/confirm_batch.c): plain decode
 * iterations are one forward pass through the decode attention kernel,
 * mixed ones one pass over decode tokens and prefill chunks, speculative
 * ones the drafter's steps, the target's verification of V tokens per
 * sequence and the draft extend (a one-layer model with the LM head stands
 * for the drafter layer there); logits only for the rows the model prices.
 * The KV caches hold random rows and each iteration sets every sequence's
 * cached length to what the simulator says, so the kernels see exactly the
 * planned contexts.
 *
 * Timing: the host work of an iteration (cached lengths, attention plans,
 * uploads, and every cuBLASLt plan its GEMMs will use: kt_step_plan_rows and
 * kt_draft_plan prepare them) runs before the timed interval and is summed
 * as host time; the launches alone are timed with CUDA events (kt_time).
 * The first iteration of each kind runs once first, its time discarded
 * (warm-up).  Plans take their device arrays from kt_scratch_get's cache,
 * so that after the warm-up an iteration allocates and frees no device
 * memory; the calls it makes (kt_device_alloc_calls) are reported.
 * kt_plan_queries_timed() counts cuBLASLt heuristic queries made inside a
 * timed interval: a part with any is reported as an invalid measurement.
 * The measured makespan is the sum of the measured iterations; host time is
 * reported beside it, not added (the predictions are GPU time only: the
 * simulator's host model is off here, as serving engines hide planning
 * behind the GPU).
 *
 * Reported (validate/confirm_report.c): predicted and measured makespan of
 * both runs with each part's status (ok, out of time, error: message, not
 * run), both speedups, their errors against the targets (makespan
 * within 10%, goal 5%; speedup within 5%), and per-kind iteration error.
 * A part that fails keeps what it measured: the table and -o DIR's
 * confirm.json are written either way.  Without a GPU the predictions are
 * printed and the command exits 77.  The replay prints its progress every
 * 10 s; --budget S stops it S seconds after the GPU set-up began.  Exit
 * status: 0 targets met, 1 missed, 3 out of time (partial), 2 an error.
 */
#include "models/hw_calib.h"
#include "validate/confirm.h"
#include "validate/confirm_impl.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "models/hw.h"
#include "sim/rollout.h"
#include "traces/gen.h"
#include "validate/validate.h"

/* ---- options and the workload ------------------------------------------ */

typedef struct conf_opts {
    const char *trace, *out, *hw;
    const char *model;  /* --model: models/llm name or INI path (a tiny one for emulation) */
    int quick, json, layers, responses, max_len;
    uint64_t seed;
    double budget;      /* s of replay at most; 0 none */
} conf_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: tailsim-validate confirm [--quick] [--trace FILE] [--responses N] [--max-len L]\n"
               "                                [--layers L] [--hw h200] [--model qwen2.5-7b|FILE.ini]\n"
               "                                [--seed S] [--budget S] [-o DIR]\n"
               "                                [--json]\n");
}

/* A one-step trace of opt->responses responses, lengths capped at max_len,
 * one response per prompt (a single replica: groups do not matter). */
static trace *workload(const conf_opts *o, ts_err *e)
{
    trace *src = NULL;
    if (o->trace) {
        trace *all = NULL;
        if (trace_load(o->trace, &all, e))
            return NULL;
        src = trace_select_step(all, -1, e);
        trace_free(all);
    } else {
        gen_params p;
        gen_params_default(&p);
        char dist[64];
        snprintf(dist, sizeof dist, "lognormal:%d:1.1", o->max_len / 10);
        if (gen_parse_dist(dist, &p, e))
            return NULL;
        p.prompts = o->responses / 8 > 0 ? o->responses / 8 : 1;
        p.group = 8;
        p.cap = o->max_len;
        p.seed = o->seed;
        p.prompt_median = 128;
        src = gen_trace(&p, e);
    }
    if (!src)
        return NULL;
    size_t n = trace_n_responses(src), stride = n > (size_t)o->responses ? n / (size_t)o->responses : 1;
    trace *t = trace_new();
    size_t k = 0, taken = 0;
    for (size_t i = 0; t && i < src->n_prompts; i++)
        for (int32_t j = 0; j < src->prompts[i].n_resp; j++, k++) {
            if (k % stride || taken == (size_t)o->responses)
                continue;
            int32_t len = src->prompts[i].resp[j] < o->max_len ? src->prompts[i].resp[j] : o->max_len;
            if (trace_add(t, 0, (int32_t)taken, -1, src->prompts[i].prompt_tokens, &len, 1, e)) {
                trace_free(t);
                t = NULL;
                break;
            }
            taken++;
        }
    trace_free(src);
    if (!t)
        ts_errf(e, "out of memory");
    return t;
}

/* ---- simulation --------------------------------------------------------- */

static int simulate(const hw_desc *hw, const llm_desc *m, const trace *t, spec_mode mode,
                    uint64_t seed, run_pred *p, ts_err *e)
{
    memset(p, 0, sizeof *p);
    rollout_cfg c;
    memset(&c, 0, sizeof c);
    c.hw = hw;
    c.llm = m;
    c.tp = 1;
    c.replicas = 1;
    c.max_running = 256;
    c.chunk_tokens = 8192;
    c.kv_tokens = 1e9; /* the GPU run sizes its caches to the workload */
    c.tail_threshold = 32;
    c.spec = mode;
    c.spec_patience = 10;
    spec_params_default(&c.sp);
    c.seed = seed;
    c.on_iter = conf_record_iter;
    c.on_iter_ctx = &p->log;
    rollout_result r;
    if (rollout_run(&c, t, &r, e))
        return -1;
    if (p->log.oom) {
        rollout_result_free(&r);
        return ts_errf(e, "out of memory recording the plan");
    }
    p->makespan = r.makespan_s;
    p->accept_len = r.accept_len;
    p->iterations = r.rep[0].iterations;
    p->spec_iterations = r.spec_iterations;
    rollout_result_free(&r);
    return 0;
}

/* ---- GPU replay --------------------------------------------------------- */

typedef struct gpu {
    kt_model *model, *extend;  /* target stack; one-layer stand-in for the drafter extend */
    kt_kv *kv, *ekv, *dkv;     /* target, extend and drafter caches */
    kt_drafter *drafter;
    int *d_tokens;             /* random token ids, enough for any step */
    kt_bf16 *d_hidden;         /* random root features for the drafter */
    int max_tokens;
} gpu;

typedef struct step_ctx {
    kt_step *target, *ext;
    kt_draft *draft;
    const int *d_tokens;
    const kt_bf16 *d_hidden;
} step_ctx;

static int launch_iter(void *arg)
{
    step_ctx *c = arg;
    if (c->draft && (kt_draft_input(c->draft, c->d_tokens, c->d_hidden) ||
                     kt_draft_run(c->draft, NULL, NULL, NULL)))
        return -1;
    if (c->target && kt_step_forward(c->target, c->d_tokens, NULL, NULL))
        return -1;
    if (c->ext && kt_step_forward(c->ext, c->d_tokens, NULL, NULL))
        return -1;
    return 0;
}

static void step_ctx_free(step_ctx *c)
{
    kt_step_free(c->target);
    kt_step_free(c->ext);
    kt_draft_free(c->draft);
    c->target = c->ext = NULL;
    c->draft = NULL;
}

/* Host work of one recorded iteration: sets every sequence's cached length
 * to the simulator's context and plans the steps of bt (attention plans,
 * uploads, and every cuBLASLt plan the launches will use).  0, or -1
 * (kt_error() says why). */
static int plan_iter(gpu *g, const it_log *l, const it_rec *r, const conf_batch *bt,
                     step_ctx *c)
{
    const int32_t *p = l->pool + r->off;
    const int32_t *dseq = p, *dctx = p + r->n_dec;
    const int32_t *cseq = p + 3 * r->n_dec, *cdone = cseq + 2 * r->n_chunks;
    memset(c, 0, sizeof *c);
    c->d_tokens = g->d_tokens;
    c->d_hidden = g->d_hidden;
    for (int k = 0; k < r->n_dec; k++)
        if (kt_kv_set_len(g->kv, dseq[k], dctx[k]))
            return -1;
    for (int k = 0; k < r->n_chunks; k++)
        if (kt_kv_set_len(g->kv, cseq[k], cdone[k]))
            return -1;
    if (bt->spec) {
        for (int k = 0; k < r->n_dec; k++)
            if (kt_kv_set_len(g->dkv, dseq[k], dctx[k]) || kt_kv_set_len(g->ekv, dseq[k], dctx[k]))
                return -1;
        c->draft = kt_draft_plan(g->drafter, g->dkv, bt->seqs, bt->n_dec, CONF_DEPTH, CONF_TOPK);
        c->ext = c->draft ? kt_step_plan(g->extend, g->ekv, bt->seqs, bt->ext_q, bt->n_dec, 0)
                          : NULL;
        if (!c->ext)
            return -1;
    }
    c->target = kt_step_plan_rows(g->model, g->kv, bt->seqs, bt->decode ? NULL : bt->qlen, bt->b,
                                  bt->decode ? NULL : bt->nlog);
    return c->target ? 0 : -1;
}

/* Reserves the workspaces of the target, the extend stand-in and the
 * drafter layer for the largest step of p's plan (conf_log_max), so that
 * no step after the warm-up grows one: with the batch shrinking, verified
 * tokens per sequence rise (spec_budget_for_batch) and a late step can be
 * the largest.  Prints what was reserved.  0, or -1 with e set. */
static int reserve_for(gpu *g, const char *name, const run_pred *p, conf_batch *bt, ts_err *e)
{
    conf_max mx;
    if (conf_log_max(&p->log, bt, &mx, e))
        return -1;
    if (mx.T > INT32_MAX || mx.ext_T > INT32_MAX)
        return ts_errf(e, "a step of %lld tokens is too large", mx.T);
    if (kt_model_reserve(g->model, (int)mx.T, (int)mx.R) ||
        kt_model_reserve(g->extend, (int)mx.ext_T, mx.draft_seqs) ||
        kt_drafter_reserve(g->drafter, mx.draft_seqs, CONF_TOPK))
        return ts_errf(e, "reserving the workspaces: %s", kt_error());
    /* the plans' device arrays: planning every iteration once (host work,
     * nothing launched) leaves kt_scratch_get's cache holding a block for
     * each array the replay will ask for */
    for (size_t i = 0; i < p->log.n; i++) {
        step_ctx c;
        if (conf_batch_build(&p->log, &p->log.it[i], bt, e))
            return -1;
        int rc = plan_iter(g, &p->log, &p->log.it[i], bt, &c);
        step_ctx_free(&c);
        if (rc)
            return ts_errf(e, "planning iteration %zu ahead: %s", i, kt_error());
    }
    printf("  %s: workspaces reserved for %lld tokens and %lld logit rows (target), %d draft "
           "sequences; target and extend %.1f MiB\n", name, mx.T, mx.R, mx.draft_seqs,
           (double)(kt_model_work_bytes(g->model) + kt_model_work_bytes(g->extend)) / 1048576.0);
    fflush(stdout);
    return 0;
}

/* Runs the first iteration of each kind (decode, mixed, speculative) of p
 * once through kt_time, its time discarded: module loading, first launches,
 * the L2 flush buffer and the first cached plan blocks (kt_scratch_get)
 * stay out of the measurements.  0, or -1 with e set. */
static int warm_up(gpu *g, const run_pred *p, conf_batch *bt, ts_err *e)
{
    int seen[3] = {0, 0, 0};
    for (size_t i = 0; i < p->log.n; i++) {
        const it_rec *r = &p->log.it[i];
        int kind = conf_iter_kind(r);
        if (seen[kind])
            continue;
        seen[kind] = 1;
        step_ctx c;
        if (conf_batch_build(&p->log, r, bt, e))
            return -1;
        float us;
        int rc = plan_iter(g, &p->log, r, bt, &c) || kt_time(launch_iter, &c, 0, 1, &us);
        step_ctx_free(&c);
        if (rc)
            return ts_errf(e, "warm-up on iteration %zu: %s", i, kt_error());
    }
    return 0;
}

/* Replays one recorded iteration: plans it (host time into st->host_s),
 * then times the launches alone with CUDA events.  Its GPU time in s, or -1
 * with e set. */
static double replay_iter(gpu *g, const it_log *l, const it_rec *r, conf_batch *bt,
                          replay_stats *st, ts_err *e)
{
    step_ctx c;
    long long a0 = kt_device_alloc_calls();
    double h0 = ts_wall_s();
    if (conf_batch_build(l, r, bt, e))
        return -1;
    int rc = plan_iter(g, l, r, bt, &c);
    st->host_s += ts_wall_s() - h0;
    float us = 0;
    long long q0 = kt_plan_queries_timed();
    if (rc == 0)
        rc = kt_time(launch_iter, &c, 0, 1, &us);
    st->queries_timed += kt_plan_queries_timed() - q0;
    h0 = ts_wall_s();
    step_ctx_free(&c);
    st->host_s += ts_wall_s() - h0;
    st->alloc_calls += kt_device_alloc_calls() - a0;
    if (rc) {
        ts_errf(e, "%s", kt_error());
        return -1;
    }
    return us * 1e-6;
}

/* Replays p's recorded iterations in order after a warm-up, printing
 * progress every 10 s, until all are done (PART_OK), ts_wall_s() passes
 * deadline (0: none; PART_OUT_OF_TIME) or an error stops it (PART_ERROR,
 * st->msg).  What was measured before stays in st.  0, or -1 when memory
 * ran out before anything was measured. */
static int replay(gpu *g, const char *name, const run_pred *p, double deadline,
                  replay_stats *st, ts_err *e)
{
    memset(st, 0, sizeof *st);
    conf_batch bt = {0};
    st->iter_s = malloc((p->log.n ? p->log.n : 1) * sizeof *st->iter_s);
    if (!st->iter_s)
        return ts_errf(e, "out of memory");
    ts_err ie = {{0}};
    if (reserve_for(g, name, p, &bt, &ie) || warm_up(g, p, &bt, &ie)) {
        st->status = PART_ERROR;
        snprintf(st->msg, sizeof st->msg, "%.500s", ie.msg);
        conf_batch_free(&bt);
        return 0;
    }
    st->status = PART_OK;
    double next_report = ts_wall_s() + 10.0;
    for (size_t i = 0; i < p->log.n; i++) {
        double now = ts_wall_s();
        if (deadline > 0 && now > deadline) {
            st->status = PART_OUT_OF_TIME;
            break;
        }
        if (now > next_report) {
            printf("  %s: %zu/%zu iterations, measured %.3f s, predicted %.3f s (%+.1f%%)\n",
                   name, st->done, p->log.n, st->measured, st->predicted,
                   st->predicted > 0 ? 100.0 * (st->measured - st->predicted) / st->predicted : 0.0);
            fflush(stdout);
            next_report = now + 10.0;
        }
        const it_rec *r = &p->log.it[i];
        double t = replay_iter(g, &p->log, r, &bt, st, &ie);
        if (t < 0) {
            st->status = PART_ERROR;
            snprintf(st->msg, sizeof st->msg, "iteration %zu: %.470s", i, ie.msg);
            printf("  %s: stopped by an error at iteration %zu of %zu: %s\n", name, i,
                   p->log.n, ie.msg);
            break;
        }
        int kind = conf_iter_kind(r);
        st->iter_s[st->done++] = t;
        st->measured += t;
        st->predicted += r->dt;
        st->err_abs[kind] += fabs(t - r->dt) / r->dt;
        st->n[kind]++;
    }
    conf_batch_free(&bt);
    return 0;
}

static void gpu_free(gpu *g)
{
    kt_kv_free(g->kv);
    kt_kv_free(g->ekv);
    kt_kv_free(g->dkv);
    kt_drafter_free(g->drafter);
    kt_model_free(g->extend);
    kt_model_free(g->model);
    kt_free(g->d_tokens);
    kt_free(g->d_hidden);
    memset(g, 0, sizeof *g); /* freeing twice (set-up failure, then run_free) is harmless */
}

static int gpu_setup(gpu *g, const llm_desc *m, int layers, const trace *t, uint64_t seed, ts_err *e)
{
    memset(g, 0, sizeof *g);
    kt_model_shape s = {layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab,
                        m->qkv_bias, 1e-6f, 1e6};
    kt_model_shape one = s;
    one.layers = 1;
    int n = (int)trace_n_responses(t);
    int *cap = malloc((size_t)n * sizeof *cap);
    if (!cap)
        return ts_errf(e, "out of memory");
    for (size_t i = 0; i < t->n_prompts; i++)
        cap[i] = t->prompts[i].prompt_tokens + t->prompts[i].resp[0] + 1 + 48 + 8 * 4;
    g->max_tokens = 8192 + 256 * 48;
    int *ids = malloc((size_t)g->max_tokens * sizeof *ids);
    if (!ids) {
        free(cap);
        return ts_errf(e, "out of memory");
    }
    for (int i = 0; i < g->max_tokens; i++)
        ids[i] = (int)(ts_splitmix64(seed + (uint64_t)i) % (uint64_t)m->vocab);
    g->model = kt_model_new(&s, seed);
    g->extend = g->model ? kt_model_new(&one, seed + 1) : NULL;
    g->kv = g->extend ? kt_kv_new(g->model, n, cap) : NULL;
    g->ekv = g->kv ? kt_kv_new(g->extend, n, cap) : NULL;
    g->drafter = g->ekv ? kt_drafter_new(g->model, seed + 2) : NULL;
    g->dkv = g->drafter ? kt_drafter_kv_new(g->drafter, n, cap) : NULL;
    g->d_tokens = g->dkv ? kt_malloc((size_t)g->max_tokens * sizeof *ids) : NULL;
    g->d_hidden = g->d_tokens ? kt_malloc((size_t)256 * m->hidden * sizeof(kt_bf16)) : NULL;
    int bad = !g->d_hidden || kt_upload(g->d_tokens, ids, (size_t)g->max_tokens * sizeof *ids) ||
              kt_fill_bf16(g->d_hidden, (size_t)256 * m->hidden, seed + 3, 1.0f);
    free(cap);
    free(ids);
    if (bad) {
        ts_errf(e, "GPU set-up: %s", kt_error());
        gpu_free(g);
        return -1;
    }
    return 0;
}

/* ---- the command -------------------------------------------------------- */

static int parse(int argc, char **argv, conf_opts *o)
{
    static const struct option lo[] = {
        {"quick", no_argument, 0, 'q'},        {"trace", required_argument, 0, 't'},
        {"responses", required_argument, 0, 'n'}, {"max-len", required_argument, 0, 'L'},
        {"layers", required_argument, 0, 'l'}, {"hw", required_argument, 0, 'H'},
        {"model", required_argument, 0, 'M'},
        {"seed", required_argument, 0, 's'},   {"json", no_argument, 0, 'j'},
        {"budget", required_argument, 0, 'B'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    *o = (conf_opts){NULL, NULL, "h200", "qwen2.5-7b", 0, 0, 0, 256, 16384, 1, 0}; /* layers 0: the model's */
    int c, quick_n = 0, quick_l = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
        int64_t v;
        switch (c) {
        case 'q': o->quick = 1; break;
        case 't': o->trace = optarg; break;
        case 'o': o->out = optarg; break;
        case 'H': o->hw = optarg; break;
        case 'M': o->model = optarg; break;
        case 'j': o->json = 1; break;
        case 'h': usage(stdout); return 0;
        case 'B':
            if (ts_parse_double(optarg, 1.0, 1e6, &o->budget)) {
                fprintf(stderr, "tailsim-validate confirm: --budget: '%s' is not a number of "
                                "seconds >= 1\n", optarg);
                return 2;
            }
            break;
        case 'n': case 'L': case 'l': case 's':
            if (ts_parse_i64(optarg, c == 's' ? 0 : 1, c == 'n' ? 4096 : c == 'l' ? 128 : INT32_MAX, &v)) {
                fprintf(stderr, "tailsim-validate confirm: bad value '%s'\n", optarg);
                return 2;
            }
            if (c == 'n') o->responses = (int)v, quick_n = 1;
            if (c == 'L') o->max_len = (int)v, quick_l = 1;
            if (c == 'l') o->layers = (int)v;
            if (c == 's') o->seed = (uint64_t)v;
            break;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (o->quick) {
        if (!quick_n)
            o->responses = 128;
        if (!quick_l)
            o->max_len = 8192;
    }
    return -1;
}

/* Everything one run holds between its phases; run_free() releases it. */
typedef struct conf_run {
    hw_desc hw;
    llm_desc m;             /* --model (Qwen2.5-7B) with the --layers stack */
    trace *t;               /* the workload */
    trace_stats ts;
    run_pred base, spec;    /* the simulator's plans: plain, tail speculation */
    kt_device dev;
    int have_gpu;           /* dev opened: g is to be freed */
    gpu g;
    replay_stats rb, rs;    /* the plans replayed on the GPU */
} conf_run;

/* Simulates the workload with and without tail speculation and prints the
 * predictions; 0, or -1 with e set. */
static int predict(const conf_opts *o, conf_run *r, ts_err *e)
{
    if (hw_load(o->hw, &r->hw, e) || llm_load(o->model, &r->m, e))
        return -1;
    if (o->layers > 0)
        r->m.layers = o->layers;
    if (!(r->t = workload(o, e)))
        return -1;
    if (simulate(&r->hw, &r->m, r->t, SPEC_OFF, o->seed, &r->base, e) ||
        simulate(&r->hw, &r->m, r->t, SPEC_ADAPTIVE, o->seed, &r->spec, e))
        return -1;
    trace_stats_compute(r->t, &r->ts, e);
    printf("confirm: %lld responses (mean %.0f, max %lld tokens), %s x %d layers, hw %s\n"
           "calibration: %s\n"
           "predicted: baseline %.3f s (%lld iterations), tail speculation %.3f s (%lld iterations, "
           "%lld speculative, accept %.2f), speedup %.3f\n",
           (long long)r->ts.responses, r->ts.mean, (long long)r->ts.max, o->model, r->m.layers,
           r->hw.name,
           r->hw.calibration, r->base.makespan, (long long)r->base.iterations, r->spec.makespan,
           (long long)r->spec.iterations, (long long)r->spec.spec_iterations, r->spec.accept_len,
           r->base.makespan / r->spec.makespan);
    fflush(stdout);
    return 0;
}

/* Sets the GPU up and replays the baseline plan, then the speculative one.
 * Each part's outcome (ok, out of time, error) goes into r->rb / r->rs with
 * what it measured; a part after an error or the budget is not run.  0, or
 * -1 with e set when memory runs out. */
static int measure(const conf_opts *o, conf_run *r, ts_err *e)
{
    double t0 = ts_wall_s(), deadline = o->budget > 0 ? t0 + o->budget : 0;
    ts_err se = {{0}};
    if (gpu_setup(&r->g, &r->m, r->m.layers, r->t, o->seed, &se)) {
        r->rb.status = r->rs.status = PART_NOT_RUN;
        snprintf(r->rb.msg, sizeof r->rb.msg, "%.500s", se.msg);
        snprintf(r->rs.msg, sizeof r->rs.msg, "%.500s", se.msg);
        return 0;
    }
    printf("GPU set-up: %.1f s\n", ts_wall_s() - t0);
    fflush(stdout);
    if (replay(&r->g, "baseline", &r->base, deadline, &r->rb, e))
        return -1;
    if (r->rb.status == PART_ERROR && kt_sync()) {
        snprintf(r->rs.msg, sizeof r->rs.msg, "the CUDA context is unusable after the "
                 "baseline's error");
        return 0;
    }
    if (deadline > 0 && ts_wall_s() > deadline) {
        snprintf(r->rs.msg, sizeof r->rs.msg, "out of time (--budget %.0f s)", o->budget);
        return 0;
    }
    return replay(&r->g, "speculative", &r->spec, deadline, &r->rs, e);
}

/* Frees what the phases allocated (r zeroed before the first one). */
static void run_free(conf_run *r)
{
    if (r->have_gpu)
        gpu_free(&r->g);
    conf_log_free(&r->base.log);
    conf_log_free(&r->spec.log);
    free(r->rb.iter_s);
    free(r->rs.iter_s);
    trace_free(r->t);
}

/* The table, confirm.json (with -o) and the exit status of a run whose
 * parts have their outcomes. */
static int finish(const conf_opts *o, conf_run *r)
{
    conf_result res = {r->dev.name, r->hw.calibration, (long long)r->ts.responses, r->m.layers,
                       o->seed, o->budget, &r->base, &r->spec, &r->rb, &r->rs};
    conf_verdict v;
    conf_judge(&res, &v);
    conf_print(stdout, &res, &v);
    fflush(stdout);
    int rc = conf_exit_status(&res, &v);
    ts_err e = {{0}};
    if (o->out && conf_write_json(o->out, &res, &v, &e)) {
        fprintf(stderr, "tailsim-validate confirm: %s\n", e.msg);
        rc = 2;
    }
    return rc;
}

int val_confirm(int argc, char **argv)
{
    conf_opts o;
    int prc = parse(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    conf_run r = {0};
    int rc = 2;
    if (predict(&o, &r, &e))
        goto fail;
    int d = val_open_device(&r.dev);
    if (d <= 0) {
        rc = d == 0 ? VAL_EXIT_SKIP : 2;
        goto done;
    }
    r.have_gpu = 1;
    if (measure(&o, &r, &e))
        goto fail;
    rc = finish(&o, &r);
    goto done;
fail:
    fprintf(stderr, "tailsim-validate confirm: %s\n", e.msg);
    rc = 2;
done:
    run_free(&r);
    return rc;
}
