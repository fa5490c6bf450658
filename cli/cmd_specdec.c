/*
 * `tailsim specdec SCENARIO`: the speculative-decoding microbenchmark of the
 * cost and acceptance models.  For each batch size and context it prices one
 * plain decode iteration and one speculative iteration (draft depth steps +
 * verify of V tokens per sequence, V from TLT's batch-size table), takes the
 * expected accepted length of the scenario's drafter (averaged over the Beta
 * spread of sequence qualities), and prints tokens/s of both and the speedup.
 * Where the speedup falls below 1 is the crossover that justifies switching
 * speculation on only in the tail.  A row whose batch x (context + V) tokens
 * exceed one replica's KV cache (the scenario's memory model) is marked: no
 * engine runs that batch at that context.  With spec.ngram set, the n-gram
 * drafter's expected tokens per verify and speedup (mean repetitiveness,
 * averaged over its Beta spread) are printed too.  Both columns include the
 * host time of the speculative engine (models/cost_host.c): eager launches
 * above spec.graph_max_bs and scheduling exposed without the overlap
 * scheduler.
 *
 * Phases: specdec_parse (the command line), specdec_run (the scenario and
 * every row; prints nothing), then specdec_emit_json or specdec_emit_text.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "models/cost_host.h"
#include "models/cost_spec.h"
#include "models/hw_calib.h"
#include "models/memory.h"
#include "cli/cmd.h"
#include "cli/opts.h"
#include "sim/scenario.h"
#include "sim/specdec.h"

#define SPECDEC_MAX_LIST 64 /* values of --batch and of --ctx */
#define SPECDEC_MAX_SETS 32 /* --set options */

typedef struct specdec_opts {
    opts_common co;                /* --set, --seed, --json */
    const char *scenario;
    int batches[SPECDEC_MAX_LIST]; /* --batch, nb of them */
    int nb;
    int ctxs[SPECDEC_MAX_LIST];    /* --ctx, tokens, nc of them */
    int nc;
} specdec_opts;

/* One batch size at one context. */
typedef struct specdec_row {
    int batch, ctx;                /* sequences; tokens per sequence */
    int V;                         /* verify budget, tokens per sequence */
    double accept;                 /* expected accepted tokens per verify */
    double plain, spec;            /* decode tokens/s without and with speculation */
    int fits;                      /* batch x (ctx + V) within the replica's KV cache */
    double ng_acc, ng_spd;         /* spec.ngram: its tokens per verify and speedup, else 0 */
} specdec_row;

/* The replica and its rows, for the emitters. */
typedef struct specdec_out {
    scenario s;
    hw_desc hw;
    llm_desc m;
    double kv_cap;                 /* KV cache of one replica, tokens */
    specdec_row *rows;             /* nc x nb, context-major; free() */
    int n;
} specdec_out;

static void usage(FILE *f)
{
    fprintf(f, "usage: tailsim specdec SCENARIO [--batch 1,2,4,...] [--ctx 1024,8192,...] "
               "[--seed S]\n"
               "                       [--set SEC.KEY=VAL] [--json]\n\n"
               "Plain vs speculative decoding throughput of one replica of SCENARIO, per batch size\n"
               "and context length, from the cost model and the acceptance model ([spec] keys).\n"
               "--seed S overrides trace.seed, the seed of the acceptance draws.\n");
}

/* Parses "a,b,c" into at most max positive integers.  Returns the count or -1. */
static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int64_t v;
        if (n == max || ts_parse_i64(tok, 1, 1 << 24, &v))
            return -1;
        out[n++] = (int)v;
    }
    return n;
}

/* E[tokens per n-gram verify] at budget V averaged over repetitiveness draws. */
static double mean_ngram(const spec_params *p, int V, uint64_t seed)
{
    gsl_rng *r = ts_rng_new(seed, 2000); /* the same draws for every V */
    if (!r)
        return 0;
    double s = 0;
    const int n = 2000;
    for (int k = 0; k < n; k++)
        s += ngram_expected(p, ngram_draw_rep(p, r), V);
    gsl_rng_free(r);
    return s / n;
}

/* Parses the command line into o.  Returns -1 to go on, or the exit status
 * (0 after --help, 2 after a usage error, said on stderr). */
static int specdec_parse(int argc, char **argv, specdec_opts *o)
{
    static const struct option lo[] = {
        {"batch", required_argument, 0, 'b'},
        {"ctx", required_argument, 0, 'c'},
        OPTS_LONG_SEED,
        OPTS_LONG_SET,
        OPTS_LONG_JSON,
        OPTS_LONG_HELP,
        {0, 0, 0, 0}};
    static const int batches[] = {1, 2, 4, 8, 16, 32, 64, 128, 256}, ctxs[] = {2048, 8192, 32768};
    memset(o, 0, sizeof *o);
    opts_init(&o->co, "specdec", SPECDEC_MAX_SETS);
    memcpy(o->batches, batches, sizeof batches);
    o->nb = (int)(sizeof batches / sizeof batches[0]);
    memcpy(o->ctxs, ctxs, sizeof ctxs);
    o->nc = (int)(sizeof ctxs / sizeof ctxs[0]);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        int t = opts_step(&o->co, c, optarg, usage);
        if (t == OPTS_STEP_TAKEN)
            continue;
        if (t != OPTS_STEP_OTHER)
            return t;
        switch (c) {
        case 'b':
            if ((o->nb = parse_list(optarg, o->batches, SPECDEC_MAX_LIST)) < 0) {
                fprintf(stderr, "tailsim specdec: --batch '%s': expected positive integers, comma-separated\n", optarg);
                return 2;
            }
            break;
        case 'c':
            if ((o->nc = parse_list(optarg, o->ctxs, SPECDEC_MAX_LIST)) < 0) {
                fprintf(stderr, "tailsim specdec: --ctx '%s': expected positive integers, comma-separated\n", optarg);
                return 2;
            }
            break;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    o->scenario = argv[optind];
    return -1;
}

/* Prices batch b at context ctx on the replica of r into *row. */
static void specdec_row_eval(const specdec_out *r, const host_mode *host, int b, int ctx,
                             specdec_row *row)
{
    const scenario *s = &r->s;
    double ctx_sum = (double)b * ctx;
    spec_point sp;
    spec_point_eval(&s->sp, &r->hw, host, &r->m, s->tp, b, ctx_sum, s->seed, &sp);
    row->batch = b;
    row->ctx = ctx;
    row->V = sp.V;
    row->accept = sp.accept;
    row->plain = sp.plain;
    row->spec = sp.spec;
    row->fits = (double)b * (ctx + sp.V) <= r->kv_cap;
    row->ng_acc = s->sp.ngram ? mean_ngram(&s->sp, sp.V, s->seed) : 0;
    row->ng_spd = s->sp.ngram
                      ? b * row->ng_acc /
                            cost_host_spec_step(&r->hw, host, b, 1, cost_spec_kernels(&r->m, s->tp, 1),
                                           ngram_iter_cost(&s->sp, &r->hw, &r->m, s->tp, b, sp.V,
                                                           ctx_sum, NULL)) /
                            sp.plain
                      : 0;
}

/* Loads o's scenario into r (zeroed first; free with specdec_out_free()
 * whatever this returns) and prices every row.  Prints nothing.  Returns 0,
 * or -1 with e set. */
static int specdec_run(const specdec_opts *o, specdec_out *r, ts_err *e)
{
    memset(r, 0, sizeof *r);
    scenario *s = &r->s;
    if (scenario_load(o->scenario, s, e))
        return -1;
    for (int i = 0; i < o->co.n_sets; i++)
        if (scenario_set(s, o->co.sets[i], e))
            return -1;
    if (o->co.have_seed)
        s->seed = o->co.seed; /* --seed, as trace.seed */
    if (scenario_validate(s, e) || scenario_load_models(s, &r->hw, &r->m, e) ||
        scenario_check_fit(s, &r->hw, &r->m, e) || spec_params_check(&s->sp, e))
        return -1;
    rollout_attn attn; /* every row prices the rollout engine: its attention kernel */
    if (scenario_rollout_attn(s, &r->hw, &attn, e))
        return -1;
    rollout_attn_apply(&r->hw, attn, &r->hw);
    r->kv_cap = mem_kv_capacity(&r->hw, &r->m, s->tp, s->mem_util, s->reserve_gb * 1e9);
    /* both columns on the speculative engine's host settings (CUDA graphs up
     * to spec.graph_max_bs, overlap scheduler per spec.overlap): the choice
     * TLT's threshold makes inside one engine */
    host_mode host = scenario_host_mode(s, 1);
    if (!(r->rows = calloc((size_t)o->nc * (size_t)o->nb, sizeof *r->rows)))
        return ts_errf(e, "out of memory");
    for (int ci = 0; ci < o->nc; ci++)
        for (int bi = 0; bi < o->nb; bi++)
            specdec_row_eval(r, &host, o->batches[bi], o->ctxs[ci], &r->rows[r->n++]);
    return 0;
}

static void specdec_out_free(specdec_out *r)
{
    free(r->rows);
}

/* Prints r as one JSON object.  Returns 0, or -1 with e set. */
static int specdec_emit_json(const specdec_out *r, ts_err *e)
{
    json_t *rows = json_array();
    for (int i = 0; i < r->n; i++) {
        const specdec_row *x = &r->rows[i];
        json_t *o = json_object();
        json_object_set_new(o, "batch", json_integer(x->batch));
        json_object_set_new(o, "ctx", json_integer(x->ctx));
        json_object_set_new(o, "budget", json_integer(x->V));
        json_object_set_new(o, "accept_len", json_real(x->accept));
        json_object_set_new(o, "plain_tokens_per_s", json_real(x->plain));
        json_object_set_new(o, "spec_tokens_per_s", json_real(x->spec));
        json_object_set_new(o, "speedup", json_real(x->spec / x->plain));
        json_object_set_new(o, "fits_kv", json_boolean(x->fits));
        if (r->s.sp.ngram) {
            json_object_set_new(o, "ngram_accept_len", json_real(x->ng_acc));
            json_object_set_new(o, "ngram_speedup", json_real(x->ng_spd));
        }
        json_array_append_new(rows, o);
    }
    json_t *o = json_object();
    json_object_set_new(o, "scenario", json_string(r->s.name));
    json_object_set_new(o, "model", json_string(r->m.name));
    json_object_set_new(o, "hw", json_string(r->hw.name));
    json_object_set_new(o, "calibration", json_string(r->hw.calibration));
    json_object_set_new(o, "kv_tokens_per_replica", json_real(r->kv_cap));
    json_object_set_new(o, "rows", rows);
    int rc = cmd_print_json(o, 8, e);
    json_decref(o);
    return rc;
}

/* Prints r as a table.  Cannot fail. */
static void specdec_emit_text(const specdec_out *r)
{
    const scenario *s = &r->s;
    int ng = s->sp.ngram;
    char n1[256], n2[64], n3[64];
    printf("specdec  scenario %s  model %s  hw %s  TP %d  depth %d  top-k %d  quality %.2f\n"
           "calibration: %s\nKV cache per replica: %.0f tokens (fits: batch x (ctx + V) within it)\n\n"
           "%6s %7s %4s %7s %12s %12s %8s %5s",
           cmd_flat(s->name, n1, sizeof n1), cmd_flat(r->m.name, n2, sizeof n2),
           cmd_flat(r->hw.name, n3, sizeof n3), s->tp, s->sp.depth, s->sp.topk, s->sp.quality,
           r->hw.calibration, r->kv_cap, "batch", "ctx", "V", "accept", "plain tok/s",
           "spec tok/s", "speedup", "fits");
    if (ng)
        printf(" %8s %8s", "ng_acc", "ng_spd");
    printf("\n");
    for (int i = 0; i < r->n; i++) {
        const specdec_row *x = &r->rows[i];
        printf("%6d %7d %4d %7.2f %12.0f %12.0f %8.2f %5s", x->batch, x->ctx, x->V, x->accept,
               x->plain, x->spec, x->spec / x->plain, x->fits ? "yes" : "no");
        if (ng)
            printf(" %8.2f %8.2f", x->ng_acc, x->ng_spd);
        printf("\n");
    }
}

int cmd_specdec(int argc, char **argv)
{
    specdec_opts o;
    int prc = specdec_parse(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    specdec_out r;
    int rc = 1;
    if (specdec_run(&o, &r, &e))
        goto fail;
    if (o.co.json) {
        if (specdec_emit_json(&r, &e))
            goto fail;
    } else {
        specdec_emit_text(&r);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tailsim specdec: %s\n", e.msg);
done:
    specdec_out_free(&r);
    return rc;
}
