/*
 * `tailsim-validate confirm [--quick] [--trace FILE] [-o DIR] [--json]`:
 * confirms end to end that a speedup the simulator predicts is the speedup
 * the hardware delivers.
 *
 * Setup: a sample of long-tail responses (from --trace, or generated
 * lognormal lengths) on one replica: a stack of Qwen2.5-7B decoder layers
 * (--layers, default 28: the whole model) with the embedding and LM head, random weights,
 * one GPU.  tailsim simulates the rollout twice with its cost model and the
 * GPU's calibration (models/hw/<hw>.ini, or models/calib/<hw>.csv when
 * committed): plain continuous batching, and TLT's adaptive speculation
 * (switch after 10 decode iterations at <= 32 running; EAGLE drafter of depth
 * 8 and top-k 4; verify of V tokens by batch size; accepted counts drawn from
 * tailsim's acceptance model, since random weights cannot agree).
 *
 * Each simulated iteration is then executed on the GPU as the simulator
 * planned it (rollout_iter: which sequences decode at which context, which
 * prefill chunks run, how many tokens each speculative sequence gains):
 * plain iterations are one forward pass over decode tokens and prefill chunks;
 * speculative ones are the drafter's steps, the target's verification of V
 * tokens per sequence, and the draft extend over the accepted tokens (a
 * one-layer model with the LM head stands for the drafter layer there).
 * The KV caches hold random rows and each iteration sets every sequence's
 * cached length to what the simulator says, so the kernels see exactly the
 * planned contexts.  Each iteration is timed with CUDA events; host planning
 * is outside the timed region (serving engines hide it with CUDA graphs).
 * The measured makespan is the sum of the measured iterations.
 *
 * Reported: predicted and measured makespan of both runs, both speedups,
 * their errors against the targets (makespan within 10%, goal 5%;
 * speedup within 5%), and per-kind iteration error.  Without a GPU the
 * predictions are printed and the command exits 77.  The replay prints its
 * progress every 10 s; --budget S stops it S seconds after the GPU set-up
 * began, reports the iterations replayed so far (predicted against measured
 * over the same iterations) and exits 3.  -o DIR writes DIR/confirm.json
 * with the totals and every replayed iteration's predicted and measured
 * time.
 */
#include "models/hw_calib.h"
#include "validate/confirm.h"

#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "models/hw.h"
#include "sim/rollout.h"
#include "traces/gen.h"
#include "validate/validate.h"

/* ---- the simulator's plan, recorded ------------------------------------ */

typedef struct it_rec {
    double dt;          /* predicted, s */
    int n_dec, V;       /* V 0: plain */
    int n_chunks;
    size_t off;         /* into the log's int pool: seq, ctx, acc per dec; seq, len, done per chunk */
} it_rec;

typedef struct it_log {
    it_rec *it;
    size_t n, cap;
    int32_t *pool;
    size_t np, capp;
    int oom;
} it_log;

static int push_ints(it_log *l, const int32_t *x, size_t n)
{
    if (l->np + n > l->capp) {
        size_t nc = l->capp ? l->capp : 1 << 16;
        while (nc < l->np + n)
            nc *= 2;
        int32_t *p = realloc(l->pool, nc * sizeof *p);
        if (!p)
            return -1;
        l->pool = p;
        l->capp = nc;
    }
    if (n)
        memcpy(l->pool + l->np, x, n * sizeof *x);
    l->np += n;
    return 0;
}

static void record_iter(void *ctx, const rollout_iter *it)
{
    it_log *l = ctx;
    if (l->oom)
        return;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 4096;
        it_rec *p = realloc(l->it, nc * sizeof *p);
        if (!p) {
            l->oom = 1;
            return;
        }
        l->it = p;
        l->cap = nc;
    }
    it_rec r = {it->dt, it->n_dec, it->spec_budget, it->n_chunks, l->np};
    int32_t ones[1] = {1};
    int bad = push_ints(l, it->dec_seq, (size_t)it->n_dec) || push_ints(l, it->dec_ctx, (size_t)it->n_dec);
    if (it->dec_acc)
        bad |= push_ints(l, it->dec_acc, (size_t)it->n_dec);
    else
        for (int k = 0; k < it->n_dec && !bad; k++)
            bad |= push_ints(l, ones, 1);
    bad |= push_ints(l, it->chunk_seq, (size_t)it->n_chunks) ||
           push_ints(l, it->chunk_len, (size_t)it->n_chunks) ||
           push_ints(l, it->chunk_done, (size_t)it->n_chunks);
    if (bad) {
        l->oom = 1;
        return;
    }
    l->it[l->n++] = r;
}

static void log_free(it_log *l)
{
    free(l->it);
    free(l->pool);
    memset(l, 0, sizeof *l);
}

/* ---- options and the workload ------------------------------------------ */

typedef struct conf_opts {
    const char *trace, *out, *hw;
    int quick, json, layers, responses, max_len;
    uint64_t seed;
    double budget;      /* s of replay at most; 0 none */
} conf_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: tailsim-validate confirm [--quick] [--trace FILE] [--responses N] [--max-len L]\n"
               "                                [--layers L] [--hw h200] [--seed S] [--budget S] [-o DIR]\n"
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

typedef struct run_pred {
    double makespan;    /* predicted, s */
    double accept_len;
    int64_t iterations, spec_iterations;
    it_log log;
} run_pred;

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
    c.on_iter = record_iter;
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

/* Replays one recorded iteration; returns its measured time in s, or -1. */
static double replay_iter(gpu *g, const it_log *l, const it_rec *r, int *seqs, int *qlen)
{
    const int32_t *p = l->pool + r->off;
    const int32_t *dseq = p, *dctx = p + r->n_dec, *dacc = p + 2 * r->n_dec;
    const int32_t *cseq = p + 3 * r->n_dec, *clen = cseq + r->n_chunks, *cdone = clen + r->n_chunks;
    step_ctx c = {0};
    c.d_tokens = g->d_tokens;
    c.d_hidden = g->d_hidden;
    int b = 0, rc = -1;
    for (int k = 0; k < r->n_dec; k++) {
        if (kt_kv_set_len(g->kv, dseq[k], dctx[k]))
            return -1;
        seqs[b] = dseq[k];
        qlen[b++] = r->V > 0 ? r->V : 1;
    }
    for (int k = 0; k < r->n_chunks; k++) {
        if (kt_kv_set_len(g->kv, cseq[k], cdone[k]))
            return -1;
        seqs[b] = cseq[k];
        qlen[b++] = clen[k];
    }
    if (r->V > 0 && r->n_dec > 0) {
        for (int k = 0; k < r->n_dec; k++)
            if (kt_kv_set_len(g->dkv, dseq[k], dctx[k]) || kt_kv_set_len(g->ekv, dseq[k], dctx[k]))
                return -1;
        c.draft = kt_draft_plan(g->drafter, g->dkv, dseq, r->n_dec, 8, 4);
        c.ext = kt_step_plan(g->extend, g->ekv, dseq, dacc, r->n_dec, 0);
        if (!c.draft || !c.ext)
            goto done;
    }
    c.target = kt_step_plan(g->model, g->kv, seqs, qlen, b, r->V > 0);
    if (!c.target)
        goto done;
    float us;
    if (kt_time(launch_iter, &c, 0, 1, &us))
        goto done;
    rc = 0;
done:
    kt_step_free(c.target);
    kt_step_free(c.ext);
    kt_draft_free(c.draft);
    return rc ? -1.0 : us * 1e-6;
}

typedef struct replay_stats {
    double measured;         /* s, over the iterations replayed */
    double predicted;        /* s, the same iterations' predicted times */
    double err_abs[3];       /* sum |meas - pred| / pred by kind: decode, mixed, spec */
    int n[3];
    size_t done;             /* iterations replayed (all of them unless out of time) */
    double *iter_s;          /* measured time of each replayed iteration, s */
} replay_stats;

/* Replays the recorded iterations in order, printing progress every 10 s,
 * until all are done or ts_wall_s() passes deadline (0: none).  0, or -1
 * with e set on a CUDA error; st->done < p->log.n means out of time. */
static int replay(gpu *g, const char *name, const run_pred *p, double deadline,
                  replay_stats *st, ts_err *e)
{
    memset(st, 0, sizeof *st);
    int *seqs = malloc(4096 * sizeof *seqs), *qlen = malloc(4096 * sizeof *qlen);
    st->iter_s = malloc((p->log.n ? p->log.n : 1) * sizeof *st->iter_s);
    if (!seqs || !qlen || !st->iter_s) {
        free(seqs);
        free(qlen);
        return ts_errf(e, "out of memory");
    }
    double next_report = ts_wall_s() + 10.0;
    for (size_t i = 0; i < p->log.n; i++) {
        double now = ts_wall_s();
        if (deadline > 0 && now > deadline)
            break;
        if (now > next_report) {
            printf("  %s: %zu/%zu iterations, measured %.3f s, predicted %.3f s (%+.1f%%)\n",
                   name, st->done, p->log.n, st->measured, st->predicted,
                   st->predicted > 0 ? 100.0 * (st->measured - st->predicted) / st->predicted : 0.0);
            fflush(stdout);
            next_report = now + 10.0;
        }
        const it_rec *r = &p->log.it[i];
        double t = replay_iter(g, &p->log, r, seqs, qlen);
        if (t < 0) {
            printf("  %s: stopped by an error at iteration %zu of %zu: measured %.3f s, "
                   "predicted %.3f s over the %zu before\n", name, i, p->log.n, st->measured,
                   st->predicted, st->done);
            free(seqs);
            free(qlen);
            return ts_errf(e, "%s iteration %zu: %s", name, i, kt_error());
        }
        int kind = r->V > 0 ? 2 : r->n_chunks > 0 ? 1 : 0;
        st->iter_s[st->done++] = t;
        st->measured += t;
        st->predicted += r->dt;
        st->err_abs[kind] += fabs(t - r->dt) / r->dt;
        st->n[kind]++;
    }
    free(seqs);
    free(qlen);
    return 0;
}

/* A JSON array of the first n values of x (NULL on allocation failure). */
static json_t *json_reals(const double *x, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real(x[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* The predicted times of the first n recorded iterations, as a JSON array. */
static json_t *json_pred(const it_log *l, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real(l->it[i].dt))) {
            json_decref(a);
            return NULL;
        }
    return a;
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
        {"seed", required_argument, 0, 's'},   {"json", no_argument, 0, 'j'},
        {"budget", required_argument, 0, 'B'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    *o = (conf_opts){NULL, NULL, "h200", 0, 0, 28, 256, 16384, 1, 0};
    int c, quick_n = 0, quick_l = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
        int64_t v;
        switch (c) {
        case 'q': o->quick = 1; break;
        case 't': o->trace = optarg; break;
        case 'o': o->out = optarg; break;
        case 'H': o->hw = optarg; break;
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

static double pct(double meas, double pred) { return 100.0 * (meas - pred) / pred; }

/* Everything one run holds between its phases; run_free() releases it. */
typedef struct conf_run {
    hw_desc hw;
    llm_desc m;             /* Qwen2.5-7B with the --layers stack */
    trace *t;               /* the workload */
    trace_stats ts;
    run_pred base, spec;    /* the simulator's plans: plain, tail speculation */
    kt_device dev;
    int have_gpu;           /* dev opened: g is to be freed */
    gpu g;
    replay_stats rb, rs;    /* the plans replayed on the GPU */
} conf_run;

/* Predicted against measured: the run's errors and whether it met the
 * targets. */
typedef struct conf_verdict {
    int complete;           /* both plans replayed in full */
    int ok;                 /* complete and within the targets */
    double sp_pred, sp_meas; /* speedups; sp_meas 0 unless complete */
    double eb, es, esp;     /* % errors: baseline, speculative makespan, speedup */
} conf_verdict;

/* Simulates the workload with and without tail speculation and prints the
 * predictions; 0, or -1 with e set. */
static int predict(const conf_opts *o, conf_run *r, ts_err *e)
{
    if (hw_load(o->hw, &r->hw, e) || llm_load("qwen2.5-7b", &r->m, e))
        return -1;
    r->m.layers = o->layers;
    if (!(r->t = workload(o, e)))
        return -1;
    if (simulate(&r->hw, &r->m, r->t, SPEC_OFF, o->seed, &r->base, e) ||
        simulate(&r->hw, &r->m, r->t, SPEC_ADAPTIVE, o->seed, &r->spec, e))
        return -1;
    trace_stats_compute(r->t, &r->ts, e);
    printf("confirm: %lld responses (mean %.0f, max %lld tokens), Qwen2.5-7B x %d layers, hw %s\n"
           "calibration: %s\n"
           "predicted: baseline %.3f s (%lld iterations), tail speculation %.3f s (%lld iterations, "
           "%lld speculative, accept %.2f), speedup %.3f\n",
           (long long)r->ts.responses, r->ts.mean, (long long)r->ts.max, o->layers, r->hw.name,
           r->hw.calibration, r->base.makespan, (long long)r->base.iterations, r->spec.makespan,
           (long long)r->spec.iterations, (long long)r->spec.spec_iterations, r->spec.accept_len,
           r->base.makespan / r->spec.makespan);
    fflush(stdout);
    return 0;
}

/* Sets the GPU up and replays the baseline plan, then (if it finished within
 * --budget) the speculative one; 0, or -1 with e set. */
static int measure(const conf_opts *o, conf_run *r, ts_err *e)
{
    double t0 = ts_wall_s(), deadline = o->budget > 0 ? t0 + o->budget : 0;
    if (gpu_setup(&r->g, &r->m, o->layers, r->t, o->seed, e))
        return -1;
    printf("GPU set-up: %.1f s\n", ts_wall_s() - t0);
    fflush(stdout);
    if (replay(&r->g, "baseline", &r->base, deadline, &r->rb, e) ||
        (r->rb.done == r->base.log.n &&
         replay(&r->g, "speculative", &r->spec, deadline, &r->rs, e)))
        return -1;
    return 0;
}

/* Compares the replays with the predictions against the targets. */
static void judge(const conf_run *r, conf_verdict *v)
{
    const replay_stats *rb = &r->rb, *rs = &r->rs;
    v->complete = rb->done == r->base.log.n && rs->done == r->spec.log.n;
    v->sp_pred = r->base.makespan / r->spec.makespan;
    v->sp_meas = v->complete ? rb->measured / rs->measured : 0;
    v->eb = pct(rb->measured, rb->predicted);
    v->es = rs->done ? pct(rs->measured, rs->predicted) : 0;
    v->esp = v->complete ? pct(v->sp_meas, v->sp_pred) : 0;
    v->ok = v->complete && fabs(v->eb) <= 10 && fabs(v->es) <= 10 && fabs(v->esp) <= 5;
}

/* Prints the predicted against measured table, the per-kind errors and the
 * targets' verdict. */
static void report(const conf_opts *o, const conf_run *r, const conf_verdict *v)
{
    const replay_stats *rb = &r->rb, *rs = &r->rs;
    const char *kinds[3] = {"decode", "mixed", "speculative"};
    printf("\n%-22s %12s %12s %8s\n", "", "predicted", "measured", "error");
    printf("%-22s %10.3f s %10.3f s %+7.1f%%  (%zu/%zu iterations)\n", "baseline makespan",
           rb->predicted, rb->measured, v->eb, rb->done, r->base.log.n);
    printf("%-22s %10.3f s %10.3f s %+7.1f%%  (%zu/%zu iterations)\n", "speculative makespan",
           rs->predicted, rs->measured, v->es, rs->done, r->spec.log.n);
    if (v->complete)
        printf("%-22s %11.3fx %11.3fx %+7.1f%%\n", "speedup", v->sp_pred, v->sp_meas, v->esp);
    printf("\nper-iteration mean |error| by kind (both runs):\n");
    for (int k = 0; k < 3; k++) {
        int n = rb->n[k] + rs->n[k];
        if (n)
            printf("  %-12s %7d iterations  %6.1f%%\n", kinds[k], n,
                   100.0 * (rb->err_abs[k] + rs->err_abs[k]) / n);
    }
    if (v->complete)
        printf("\ntargets: makespan within 10%% (goal 5%%), speedup within 5%%: %s\n",
               v->ok ? "met" : "NOT met");
    else
        printf("\ntargets: not evaluated: out of time (--budget %.0f s) after %zu of %zu "
               "iterations; the rows above compare the iterations replayed\n",
               o->budget, rb->done + rs->done, r->base.log.n + r->spec.log.n);
}

/* Writes o->out/confirm.json (creating o->out); a failure is reported on
 * stderr and does not change the exit status. */
static void write_json(const conf_opts *o, const conf_run *r, const conf_verdict *v)
{
    mkdir(o->out, 0777);
    json_t *j = json_object();
    json_object_set_new(j, "device", json_string(r->dev.name));
    json_object_set_new(j, "calibration", json_string(r->hw.calibration));
    json_object_set_new(j, "responses", json_integer(r->ts.responses));
    json_object_set_new(j, "layers", json_integer(o->layers));
    json_object_set_new(j, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(j, "complete", json_boolean(v->complete));
    json_object_set_new(j, "predicted_baseline_s", json_real(r->base.makespan));
    json_object_set_new(j, "measured_baseline_s", json_real(r->rb.measured));
    json_object_set_new(j, "predicted_spec_s", json_real(r->spec.makespan));
    json_object_set_new(j, "measured_spec_s", json_real(r->rs.measured));
    json_object_set_new(j, "predicted_speedup", json_real(v->sp_pred));
    json_object_set_new(j, "measured_speedup", json_real(v->sp_meas));
    json_object_set_new(j, "targets_met", json_boolean(v->ok));
    /* every iteration replayed, so that a later calibration can be
     * checked against these measurements without a GPU */
    json_object_set_new(j, "baseline_iter_predicted_s", json_pred(&r->base.log, r->rb.done));
    json_object_set_new(j, "baseline_iter_measured_s", json_reals(r->rb.iter_s, r->rb.done));
    json_object_set_new(j, "spec_iter_predicted_s", json_pred(&r->spec.log, r->rs.done));
    json_object_set_new(j, "spec_iter_measured_s", json_reals(r->rs.iter_s, r->rs.done));
    char path[1024];
    snprintf(path, sizeof path, "%s/confirm.json", o->out);
    ts_err e = {{0}};
    ts_atomic a;
    if (ts_atomic_open(&a, path, &e) == 0) {
        if (json_dumpf(j, a.f, JSON_INDENT(1) | JSON_REAL_PRECISION(8))) {
            ts_atomic_abort(&a);
            ts_errf(&e, "%s: write failed", path);
        } else {
            ts_atomic_commit(&a, &e);
        }
    }
    if (e.msg[0])
        fprintf(stderr, "tailsim-validate confirm: %s\n", e.msg);
    json_decref(j);
}

/* Frees what the phases allocated (r zeroed before the first one). */
static void run_free(conf_run *r)
{
    if (r->have_gpu)
        gpu_free(&r->g);
    log_free(&r->base.log);
    log_free(&r->spec.log);
    free(r->rb.iter_s);
    free(r->rs.iter_s);
    trace_free(r->t);
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
    conf_verdict v;
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
    judge(&r, &v);
    report(&o, &r, &v);
    if (o.out)
        write_json(&o, &r, &v);
    rc = !v.complete ? 3 : v.ok ? 0 : 1;
    goto done;
fail:
    fprintf(stderr, "tailsim-validate confirm: %s\n", e.msg);
    rc = 2;
done:
    run_free(&r);
    return rc;
}
