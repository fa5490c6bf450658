/*
 * `tailsim dcp SCENARIO`: plans the scenario's batch trace with each
 * requested strategy (bucket, packed, dcp-intra, dcp-inter, +pac, bound),
 * simulates every plan and prints, per strategy, the step time, tokens/s,
 * speedup over bucket, imbalance, GPU-idle fraction, peak memory and the
 * plan of the first step; --scale adds imbalance at 8, 16, 32, 64 and 128
 * GPUs, --buckets the per-bucket profile.  --db saves one run (command
 * "dcp") whose metrics are "<strategy>.<metric>" and whose timeline stacks
 * the strategies' GPUs (strategy k's GPU i is row k * gpus + i) over the
 * first --tl-steps steps, for `tailsim report`; -o DIR writes that run's
 * report at once (report_write and dcp_report_write).  The bucket plan is always
 * computed, as the speedup reference.  JSON keys are documented in
 * docs/dcp.md; wall_s and plan_ms are the only values that vary between
 * identical runs, and --no-wall leaves them out.
 *
 * Phases: dcp_cmd_parse (the command line), dcp_cmd_prepare (scenario,
 * trace and strategies), dcp_cmd_run (plan and simulate; prints nothing),
 * dcp_cmd_record (the run's metrics, saved to --db), then dcp_emit_json or
 * dcp_emit_text, and the report for -o.
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "cli/cmd.h"
#include "cli/cmd_dcp.h"
#include "cli/opts.h"
#include "cli/progress.h"
#include "reports/dcp_report.h"
#include "reports/report.h"
#include "results/store.h"
#include "sim/dcp/dcp_setup.h"
#include "sim/run.h"

typedef struct dcp_opts {
    opts_common co;          /* --set, --trace, --db, --json, --no-wall, -o */
    const char *scenario;
    const char *strategies;  /* --strategies LIST, NULL: dcp.strategies */
    const char *per_step;    /* --per-step NAME, or NULL */
    int scale, buckets;      /* --scale, --buckets (0 or 1) */
    int sweep_dist;          /* --sweep-dist (0 or 1) */
    int steps, have_steps;   /* --steps N (have_steps 0: dcp.steps) */
    int tl_steps;            /* --tl-steps N (default 4) */
} dcp_opts;

/* What the plans and simulations produced, for the emitters. */
typedef struct dcp_out {
    scenario s;
    dcp_setup d;                                 /* hardware, model, trace, planner config */
    dcp_ctx c;                                   /* the planners' profile */
    run_record *rec;                             /* metrics and timelines (--db, -o) */
    dcp_strategy st[DCP_MAX_STRATEGIES];         /* the strategies run, ns of them */
    int ns;
    int steps;                                   /* optimizer steps simulated (0: all) */
    dcp_result res[DCP_MAX_STRATEGIES], ref;     /* per strategy; ref: bucket, the reference */
    char plans[DCP_MAX_STRATEGIES][512];         /* first step's plan per strategy */
    double imb[DCP_SCALE_N][DCP_MAX_STRATEGIES]; /* --scale: imbalance per GPU count */
    double imbp[DCP_SCALE_N][DCP_MAX_STRATEGIES]; /* --scale: the sampler's estimate of it */
    dcp_strategy pst;                            /* --per-step's strategy */
    dcp_result pres;                             /* its result and steps */
    dcp_step_stat *psteps;
    double wall;                                 /* seconds, setup to the last simulation */
} dcp_out;

static void dcp_usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim dcp SCENARIO [options]\n\n"
            "Plans one pass over the scenario's training-batch trace with each strategy and\n"
            "simulates it: step time, tokens/s, speedup over bucket, imbalance, GPU-idle\n"
            "fraction, peak memory and the plan (SP size, micro-batch, accumulation count,\n"
            "checkpointed layers of the first step's groups).\n\n"
            "options:\n"
            "  --strategies LIST  comma-separated: bucket, packed, dcp-intra, dcp-inter, bound,\n"
            "                     with +pac on bucket/dcp-intra/dcp-inter (default: dcp.strategies)\n"
            "  --steps N          simulate the first N optimizer steps of each plan (default: all)\n"
            "  --trace FILE       batch trace CSV ('tokens' or 'frames,height,width' header;\n"
            "                     - for standard input)\n"
            "  --set SEC.KEY=VAL  override a scenario key (repeatable), e.g. --set dcp.image_mix=5\n"
            "  --scale            also print imbalance at 8, 16, 32, 64 and 128 GPUs\n"
            "  --buckets          also print the per-bucket profile\n"
            "  --sweep-dist       instead: the video mix moved from short- to long-dominated\n"
            "                     (images 50..0 per video, then a flatter Zipf): each\n"
            "                     strategy's speedup and bucket imbalance vs the share of\n"
            "                     long sequences (-o DIR: dcp_dist.png)\n"
            "  --per-step NAME    also print every step of strategy NAME (groups, GPUs,\n"
            "                     micro-batches, mixed-bucket groups, compute time, imbalance)\n"
            "  --db FILE          save the run (metrics, per-GPU timelines) to SQLite\n"
            "  --tl-steps N       steps of each strategy's timeline saved with --db or drawn\n"
            "                     with -o (default 4)\n"
            "  -o DIR             write the run's report into DIR (index.html, report.md, the\n"
            "                     per-GPU timelines, dcp.md; like `tailsim report --run` of a\n"
            "                     stored run)\n"
            "  --json             one JSON object instead of tables\n"
            "  --no-wall          leave out wall-clock fields (byte-identical output)\n"
            "  -h, --help         this text\n");
}

/* Parses the command line into o.  Returns -1 to go on, or the exit status
 * (0 after --help, 2 after a usage error, said on stderr). */
static int dcp_cmd_parse(int argc, char **argv, dcp_opts *o)
{
    static const struct option lo[] = {
        {"strategies", required_argument, 0, 'S'},
        {"steps", required_argument, 0, 'n'},
        OPTS_LONG_TRACE,
        OPTS_LONG_SET,
        OPTS_LONG_DB,
        {"tl-steps", required_argument, 0, 'T'},
        OPTS_LONG_JSON,
        OPTS_LONG_NO_WALL,
        {"scale", no_argument, 0, 'g'},
        {"buckets", no_argument, 0, 'b'},
        {"sweep-dist", no_argument, 0, 'W'},
        {"per-step", required_argument, 0, 'p'},
        OPTS_LONG_HELP,
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    opts_init(&o->co, "dcp", OPTS_MAX_SETS);
    o->tl_steps = 4;
    optind = 1;
    int c;
    int64_t v;
    while ((c = getopt_long(argc, argv, "ho:", lo, NULL)) != -1) {
        int t = opts_step(&o->co, c, optarg, dcp_usage);
        if (t == OPTS_STEP_TAKEN)
            continue;
        if (t != OPTS_STEP_OTHER)
            return t;
        switch (c) {
        case 'S': o->strategies = optarg; break;
        case 'g': o->scale = 1; break;
        case 'b': o->buckets = 1; break;
        case 'W': o->sweep_dist = 1; break;
        case 'p': o->per_step = optarg; break;
        case 'n':
        case 'T':
            if (ts_parse_i64(optarg, c == 'n' ? 1 : 0, 1 << 30, &v)) {
                fprintf(stderr, "tailsim dcp: --%s '%s': expected a %s integer\n",
                        c == 'n' ? "steps" : "tl-steps", optarg,
                        c == 'n' ? "positive" : "non-negative");
                return 2;
            }
            if (c == 'n') {
                o->steps = (int)v;
                o->have_steps = 1;
            } else {
                o->tl_steps = (int)v;
            }
            break;
        default: dcp_usage(stderr); return 2;
        }
    }
    if (!(o->scenario = opts_scenario(&o->co, argc, argv)))
        return 2;
    return -1;
}

/* Loads the scenario (with --set) and its batch trace into r, and the
 * strategies to run: --strategies, else the scenario's, and --per-step's.
 * Returns 0, or -1 with e set. */
static int dcp_cmd_prepare(const dcp_opts *o, dcp_out *r, ts_err *e)
{
    if (scenario_load(o->scenario, &r->s, e))
        return -1;
    for (int i = 0; i < o->co.n_sets; i++)
        if (scenario_set(&r->s, o->co.sets[i], e))
            return -1;
    if (scenario_validate(&r->s, e) || dcp_setup_load(&r->s, o->co.trace, &r->d, e))
        return -1;
    if (o->strategies) {
        if (dcp_parse_strategies(o->strategies, r->st, DCP_MAX_STRATEGIES, &r->ns, e)) {
            ts_err_prefix(e, "--strategies: ");
            return -1;
        }
    } else {
        r->ns = r->d.n_strat;
        memcpy(r->st, r->d.strat, sizeof r->st);
    }
    r->steps = o->have_steps ? o->steps : r->s.dcp.steps;
    if (o->per_step) {
        int one = 0;
        if (dcp_parse_strategies(o->per_step, &r->pst, 1, &one, e)) {
            ts_err_prefix(e, "--per-step: ");
            return -1;
        }
        if (r->pst.kind == DCP_BOUND)
            return ts_errf(e, "--per-step: bound has no steps (it is one perfectly balanced pass)");
    }
    return 0;
}

/* The bucket reference and every strategy of r, drawing pg (one unit per
 * strategy).  Returns 0, or -1 with e set. */
static int dcp_cmd_run_all(const dcp_opts *o, dcp_out *r, const dcp_strategy *bucket,
                           progress *pg, ts_err *e)
{
    const dcp_setup *d = &r->d;
    if (dcp_run(&r->c, bucket, r->steps, &r->ref, NULL, 0, 0, NULL, 0, e))
        return -1;
    for (int i = 0; i < r->ns; i++) {
        progress_step(pg, r->st[i].name, i + 1, r->ns + 1);
        if (dcp_run(&r->c, &r->st[i], r->steps, &r->res[i], o->co.db || o->co.out ? r->rec : NULL,
                    i * d->cfg.gpus, o->tl_steps, r->plans[i], sizeof r->plans[i], e))
            return -1;
    }
    progress_step(pg, r->ns ? r->st[r->ns - 1].name : "bucket", r->ns + 1, r->ns + 1);
    return 0;
}

/* Plans and simulates every strategy of r (and bucket, the reference; the
 * GPU counts of --scale; the steps of --per-step), with the timelines into
 * r->rec under --db or -o.  Prints nothing but the progress line on a
 * terminal (cleared before this returns).  Returns 0, or -1 with e set. */
static int dcp_cmd_run(const dcp_opts *o, dcp_out *r, ts_err *e)
{
    const dcp_setup *d = &r->d;
    if (dcp_ctx_init(&r->c, &d->hw, &d->tm, d->bt, &d->cfg, e))
        return -1;
    if (!(r->rec = run_record_new()))
        return ts_errf(e, "out of memory");
    dcp_strategy bucket = {DCP_BUCKET, 0, "bucket"};
    progress pg; /* the strategies (bucket first), on a terminal */
    progress_start(&pg, "tailsim dcp");
    progress_step(&pg, "bucket", 0, r->ns + 1);
    int rc = dcp_cmd_run_all(o, r, &bucket, &pg, e);
    progress_end(&pg);
    if (rc)
        return -1;
    if (o->scale && dcp_setup_scale(&r->d, r->st, r->ns, r->imb, r->imbp, e))
        return -1;
    if (o->per_step && dcp_run_steps(&r->c, &r->pst, r->steps, &r->pres, &r->psteps, e))
        return -1;
    return 0;
}

/* The run's identity and metrics into r->rec, saved to --db.  Returns 0, or
 * -1 with e set. */
static int dcp_cmd_record(const dcp_opts *o, dcp_out *r, ts_err *e)
{
    const dcp_setup *d = &r->d;
    run_record *rec = r->rec;
    run_set_identity(rec, "dcp", r->s.name, d->hw.calibration, r->s.dcp.seed, d->cfg.gpus,
                     d->cfg.gpus, 1);
    int oom = run_add_metric(rec, "gpus", d->cfg.gpus) ||
              run_add_metric(rec, "sequences", (double)d->bt->n) ||
              run_add_metric(rec, "tokens", (double)btrace_tokens(d->bt)) ||
              run_add_metric(rec, "buckets", d->bt->n_buckets) ||
              run_add_metric(rec, "sync_s", r->c.sync_s);
    for (int i = 0; i < r->ns && !oom; i++)
        oom = dcp_result_add_metrics(rec, &r->res[i], r->res[i].tokens_per_s / r->ref.tokens_per_s);
    if (o->scale && !oom)
        oom = dcp_scale_add_metrics(rec, r->st, r->ns, r->imb);
    if (oom)
        return ts_errf(e, "out of memory");
    if (o->co.db) {
        char path[1024] = "";
        if (o->co.trace)
            snprintf(path, sizeof path, "%s", o->co.trace);
        else if (r->s.dcp.file[0])
            scenario_resolve_path(&r->s, r->s.dcp.file, path, sizeof path);
        /* a DCP batch trace is no response trace: no hash of it */
        if (run_record_source(rec, &r->s, o->co.sets, o->co.n_sets, r->steps, path, NULL, 0, e))
            return -1;
    }
    return o->co.db ? store_save_run_to(o->co.db, rec, e) : 0;
}

/* VideoSys' latent positions per tailsim patch token over the trace (about
 * 4: STDiT3 patches 2 x 2 latent positions), or 0 for a 1D trace, which has
 * no second count.  Exact for a whole pass; with --steps it assumes the
 * simulated steps hold the trace's mix. */
static double dcp_positions_ratio(const dcp_out *r)
{
    const btrace *b = r->d.bt;
    int64_t t = btrace_tokens(b);
    if (b->kind != BT_2D || t <= 0)
        return 0;
    return (double)btrace_videosys_positions(b) / (double)t;
}

static void dcp_out_free(dcp_out *r)
{
    free(r->psteps);
    run_record_free(r->rec);
    dcp_ctx_free(&r->c);
    dcp_setup_free(&r->d);
}

/* The setup keys of the JSON object, after the run's identity. */
static void dcp_json_setup(json_t *root, const dcp_out *r)
{
    const dcp_setup *d = &r->d;
    json_object_set_new(root, "gpus", json_integer(d->cfg.gpus));
    json_object_set_new(root, "gpus_per_node", json_integer(d->hw.gpus_per_node));
    json_object_set_new(root, "trace", json_string(d->trace_desc));
    json_object_set_new(root, "sequences", json_integer((json_int_t)d->bt->n));
    json_object_set_new(root, "tokens", json_integer((json_int_t)btrace_tokens(d->bt)));
    json_object_set_new(root, "buckets", json_integer(d->bt->n_buckets));
    if (d->bt->kind == BT_2D)
        json_object_set_new(root, "videosys_positions",
                            json_integer((json_int_t)btrace_videosys_positions(d->bt)));
    json_object_set_new(root, "mem_cap", json_real(d->cfg.mem_cap));
    json_object_set_new(root, "bucket_sp", json_integer(r->c.bucket_sp));
    json_object_set_new(root, "sync_s", json_real(r->c.sync_s));
    json_t *di = json_object();
    json_object_set_new(di, "max_gas", json_integer(d->cfg.max_gas));
    json_object_set_new(di, "overshoot", json_real(d->cfg.overshoot));
    json_object_set_new(di, "fill", json_boolean(d->cfg.fill));
    json_object_set_new(di, "ahead", json_real(d->cfg.ahead));
    json_object_set_new(di, "coarse", json_real(d->cfg.coarse));
    json_object_set_new(di, "endgame", json_integer(d->cfg.endgame));
    json_object_set_new(di, "draw", json_string(d->cfg.draw_work ? "work" : "share"));
    json_object_set_new(di, "xfill", json_boolean(d->cfg.xfill));
    json_object_set_new(root, "dcp_inter", di);
}

/* Strategy i's entry of "strategies". */
static json_t *dcp_json_strategy(const dcp_out *r, int i, int no_wall)
{
    const dcp_result *x = &r->res[i];
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(x->name));
    json_object_set_new(o, "steps", json_integer(x->steps));
    json_object_set_new(o, "step_s", json_real(x->step_s));
    json_object_set_new(o, "time_s", json_real(x->time_s));
    json_object_set_new(o, "tokens_per_s", json_real(x->tokens_per_s));
    double pr = dcp_positions_ratio(r);
    if (pr > 0)
        json_object_set_new(o, "videosys_positions_per_s", json_real(x->tokens_per_s * pr));
    json_object_set_new(o, "speedup", json_real(x->tokens_per_s / r->ref.tokens_per_s));
    json_object_set_new(o, "imbalance", json_real(x->imbalance));
    json_object_set_new(o, "imbalance_plan", json_real(x->imbalance_plan));
    json_object_set_new(o, "full_steps", json_integer(x->full_steps));
    json_object_set_new(o, "idle_fraction", json_real(x->idle_fraction));
    json_object_set_new(o, "peak_mem_gb", json_real(x->peak_mem_bytes / 1e9));
    json_object_set_new(o, "feasible", json_boolean(x->feasible));
    json_object_set_new(o, "mean_gas", json_real(x->mean_gas));
    json_object_set_new(o, "ckpt_fraction", json_real(x->mean_ckpt));
    json_object_set_new(o, "recompute_s", json_real(x->recompute_s));
    json_object_set_new(o, "sp_comm_s", json_real(x->comm_s));
    json_object_set_new(o, "sync_s", json_real(x->sync_s));
    json_t *sh = json_object();
    for (int j = 0; j < r->d.cfg.n_sp; j++) {
        char k[16];
        snprintf(k, sizeof k, "%d", r->d.cfg.sp[j]);
        json_object_set_new(sh, k, json_real(x->sp_share[j]));
    }
    json_object_set_new(o, "sp_share", sh);
    json_object_set_new(o, "plan", json_string(r->plans[i]));
    if (!no_wall)
        json_object_set_new(o, "plan_ms", json_real(x->plan_ms));
    return o;
}

/* --scale's {"<gpus>": {"<strategy>": imbalance}} (plan: the sampler's
 * estimate); strategies without a value (bound) left out. */
static json_t *dcp_json_scale(const dcp_out *r, int plan)
{
    const double(*imb)[DCP_MAX_STRATEGIES] = plan ? r->imbp : r->imb;
    json_t *sc = json_object();
    for (int k = 0; k < DCP_SCALE_N; k++) {
        json_t *row = json_object();
        for (int i = 0; i < r->ns; i++)
            if (!isnan(imb[k][i]))
                json_object_set_new(row, r->st[i].name, json_real(imb[k][i]));
        char key[16];
        snprintf(key, sizeof key, "%d", dcp_scale_gpus[k]);
        json_object_set_new(sc, key, row);
    }
    return sc;
}

/* --per-step's {"strategy", "steps": [...]}. */
static json_t *dcp_json_per_step(const dcp_out *r)
{
    json_t *ps = json_object(), *arr = json_array();
    json_object_set_new(ps, "strategy", json_string(r->pres.name));
    for (int64_t k = 0; k < r->pres.steps; k++) {
        const dcp_step_stat *x = &r->psteps[k];
        json_t *row = json_object();
        json_object_set_new(row, "groups", json_integer(x->groups));
        json_object_set_new(row, "gpus_used", json_integer(x->gpus_used));
        json_object_set_new(row, "micro_batches", json_integer(x->mbs));
        json_object_set_new(row, "mixed_groups", json_integer(x->mixed));
        json_object_set_new(row, "compute_s", json_real(x->compute_s));
        json_object_set_new(row, "imbalance", json_real(x->imbalance));
        json_array_append_new(arr, row);
    }
    json_object_set_new(ps, "steps", arr);
    return ps;
}

/* Prints r as one JSON object.  Returns 0, or -1 with e set. */
static int dcp_emit_json(const dcp_opts *o, const dcp_out *r, ts_err *e)
{
    json_t *root = json_object();
    cmd_json_identity(root, r->rec, r->d.m.name, r->d.hw.name);
    dcp_json_setup(root, r);
    json_t *arr = json_array();
    for (int i = 0; i < r->ns; i++)
        json_array_append_new(arr, dcp_json_strategy(r, i, o->co.no_wall));
    json_object_set_new(root, "strategies", arr);
    if (o->scale) {
        json_object_set_new(root, "imbalance_vs_gpus", dcp_json_scale(r, 0));
        json_object_set_new(root, "imbalance_plan_vs_gpus", dcp_json_scale(r, 1));
    }
    if (o->per_step)
        json_object_set_new(root, "per_step", dcp_json_per_step(r));
    if (!o->co.no_wall)
        json_object_set_new(root, "wall_s", json_real(r->wall));
    int rc = cmd_print_json(root, 10, e);
    json_decref(root);
    return rc;
}

/* The lines above the table: scenario, trace, memory and planner settings. */
static void dcp_text_setup(const dcp_out *r)
{
    const dcp_setup *d = &r->d;
    char n1[256], n2[64], n3[64];
    printf("dcp  scenario %s  model %s  hw %s  gpus %d (%d per node)  seed %llu\n",
           cmd_flat(r->s.name, n1, sizeof n1), cmd_flat(d->m.name, n2, sizeof n2),
           cmd_flat(d->hw.name, n3, sizeof n3), d->cfg.gpus, d->hw.gpus_per_node,
           (unsigned long long)r->s.dcp.seed);
    printf("trace: %s\n", d->trace_desc);
    printf("       %zu sequences, %.4g tokens, %d buckets\n", d->bt->n,
           (double)btrace_tokens(d->bt), d->bt->n_buckets);
    if (d->bt->kind == BT_2D)
        printf("       %.4g latent positions as VideoSys counts tokens (B x T x H x W, "
               "%.3f per patch token; pos/s below)\n",
               (double)btrace_videosys_positions(d->bt), dcp_positions_ratio(r));
    printf("memory cap %.2f x %.0f GB, ZeRO %d, %s, SP sizes %s (bucket/packed SP %d), "
           "grad sync + optimizer %.4f s/step\n",
           d->cfg.mem_cap, d->hw.hbm_bytes / 1e9, d->cfg.zero_stage,
           d->cfg.ring ? "ring attention" : "Ulysses", r->s.dcp.sp_sizes, r->c.bucket_sp,
           r->c.sync_s);
    printf("dcp-inter: max_gas %d, overshoot %g, fill %s, ahead %g (coarse %g), endgame %d, "
           "draw %s, xfill %s\n\n",
           d->cfg.max_gas, d->cfg.overshoot, d->cfg.fill ? "on" : "off", d->cfg.ahead,
           d->cfg.coarse, d->cfg.endgame, d->cfg.draw_work ? "work" : "share",
           d->cfg.xfill ? "on" : "off");
}

/* The table of strategies and their first step's plans. */
static void dcp_text_strategies(const dcp_out *r)
{
    double pr = dcp_positions_ratio(r);
    printf("%-15s %6s %9s %10s %11s", "strategy", "steps", "step_s", "total_s", "tokens/s");
    if (pr > 0)
        printf(" %11s", "pos/s");
    printf(" %8s %7s %7s %7s %8s %5s\n", "speedup", "imbal", "imb_pl", "idle", "peak_GB", "gas");
    for (int i = 0; i < r->ns; i++) {
        const dcp_result *x = &r->res[i];
        printf("%-15s %6lld %9.4f %10.3f %11.4g", x->name, (long long)x->steps, x->step_s,
               x->time_s, x->tokens_per_s);
        if (pr > 0)
            printf(" %11.4g", x->tokens_per_s * pr);
        printf(" %7.2fx %6.1f%% %6.1f%% %6.1f%% %8.1f %5.2f%s\n",
               x->tokens_per_s / r->ref.tokens_per_s, 100 * x->imbalance,
               100 * x->imbalance_plan, 100 * x->idle_fraction, x->peak_mem_bytes / 1e9,
               x->mean_gas, x->feasible ? "" : "  OVER CAP");
    }
    printf("\nplans (first step; ckpt = checkpointed layers):\n");
    for (int i = 0; i < r->ns; i++)
        printf("  %-15s %s\n", r->res[i].name, r->plans[i]);
}

/* --scale: imbalance, then the sampler's estimate, per GPU count. */
static void dcp_text_scale(const dcp_out *r)
{
    for (int v = 0; v < 2; v++) {
        printf("\n%s vs GPU count (same trace)\n  %-6s",
               v ? "imbalance as VideoSys' sampler estimates it (imb_pl)" : "imbalance", "gpus");
        for (int i = 0; i < r->ns; i++)
            if (r->st[i].kind != DCP_BOUND)
                printf(" %14s", r->st[i].name);
        printf("\n");
        for (int k = 0; k < DCP_SCALE_N; k++) {
            printf("  %-6d", dcp_scale_gpus[k]);
            for (int i = 0; i < r->ns; i++)
                if (r->st[i].kind != DCP_BOUND)
                    printf(" %13.1f%%", 100 * (v ? r->imbp[k][i] : r->imb[k][i]));
            printf("\n");
        }
    }
}

/* --buckets: each bucket's plan under bucket, the best plan and with PAC. */
static void dcp_text_buckets(const dcp_ctx *c)
{
    printf("\nper-bucket profile (planner's view: the bucket's largest member)\n");
    printf("  %-22s %7s %9s  %-22s %-22s %-22s\n", "bucket", "count", "tokens",
           "bucket: sp bs time_s", "best: sp bs time_s", "pac: sp bs ckpt time_s");
    for (int32_t b = 0; b < c->nb; b++) {
        char nm[64];
        const bt_bucket *u = &c->bt->buckets[b];
        const dcp_choice *k = &c->bkt[b], *x = &c->best[b], *y = &c->best_pac[b];
        printf("  %-22s %7d %9d  %2d %5d %9.4f    %2d %5d %9.4f    %2d %5d %2d %9.4f\n",
               bt_bucket_name(c->bt, b, nm, sizeof nm), u->count, u->hi, k->sp, k->bs,
               k->time_s, x->sp, x->bs, x->time_s, y->sp, y->bs, y->ckpt_a + y->ckpt_b,
               y->time_s);
    }
}

/* --per-step: every step of the strategy. */
static void dcp_text_per_step(const dcp_out *r)
{
    printf("\nper step, %s (imbalance: idle GPU-seconds before the sync over gpus x "
           "compute)\n  %5s %7s %5s %6s %6s %10s %7s\n",
           r->pres.name, "step", "groups", "gpus", "mbs", "mixed", "compute_s", "imbal");
    for (int64_t k = 0; k < r->pres.steps; k++) {
        const dcp_step_stat *x = &r->psteps[k];
        printf("  %5lld %7d %5d %6d %6d %10.4f %6.1f%%\n", (long long)k + 1, x->groups,
               x->gpus_used, x->mbs, x->mixed, x->compute_s, 100 * x->imbalance);
    }
}

/* Prints r as tables.  Cannot fail. */
static void dcp_emit_text(const dcp_opts *o, const dcp_out *r)
{
    dcp_text_setup(r);
    dcp_text_strategies(r);
    if (o->scale)
        dcp_text_scale(r);
    if (o->buckets)
        dcp_text_buckets(&r->c);
    if (o->per_step)
        dcp_text_per_step(r);
    if (!o->co.no_wall)
        printf("\nprofile %.1f ms, wall %.3f s\n", r->c.profile_ms, r->wall);
}

int cmd_dcp(int argc, char **argv)
{
    dcp_opts o;
    int prc = dcp_cmd_parse(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    double w0 = ts_wall_s();
    ts_err e = {{0}};
    dcp_out r;
    memset(&r, 0, sizeof r);
    int rc = 1;
    if (o.co.out && report_can_draw(o.co.out, &e)) { /* before any work */
        fprintf(stderr, "tailsim dcp: -o %s: %s\n", o.co.out, e.msg);
        goto done;
    }
    if (dcp_cmd_prepare(&o, &r, &e))
        goto fail;
    if (o.sweep_dist) {
        if (dcp_cmd_sweep_dist(&r.s, &r.d, r.st, r.ns, o.co.json, o.co.out, &e))
            goto fail;
        rc = 0;
        goto done;
    }
    if (dcp_cmd_run(&o, &r, &e))
        goto fail;
    r.wall = ts_wall_s() - w0;
    if (dcp_cmd_record(&o, &r, &e))
        goto fail;
    if (o.co.json) {
        if (dcp_emit_json(&o, &r, &e))
            goto fail;
    } else {
        dcp_emit_text(&o, &r);
    }
    if (o.co.db)
        fprintf(stderr, "tailsim: saved run %lld to %s\n", (long long)r.rec->id, o.co.db);
    if (o.co.out) {
        if (report_write(r.rec, o.co.out, &e) || dcp_report_write(r.rec, o.co.out, &e))
            goto fail;
        fprintf(stderr, "tailsim dcp: report: %s/index.html (and report.md, dcp.md)\n", o.co.out);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tailsim dcp: %s\n", e.msg);
done:
    dcp_out_free(&r);
    return rc;
}
