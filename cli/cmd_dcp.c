/*
 * `tailsim dcp SCENARIO`: plans the scenario's batch trace with each
 * requested strategy (bucket, packed, dcp-intra, dcp-inter, +pac, bound),
 * simulates every plan and prints, per strategy, the step time, tokens/s,
 * speedup over bucket, imbalance, GPU-idle fraction, peak memory and the
 * plan of the first step; --scale adds imbalance at 8, 16, 32, 64 and 128
 * GPUs, --buckets the per-bucket profile.  --db saves one run (command
 * "dcp") whose metrics are "<strategy>.<metric>" and whose timeline stacks
 * the strategies' GPUs (strategy k's GPU i is row k * gpus + i) over the
 * first --tl-steps steps, for `tailsim report`.  The bucket plan is always
 * computed, as the speedup reference.  JSON keys are documented in the
 * README; wall_s and plan_ms are the only values that vary between
 * identical runs, and --no-wall leaves them out.
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
#include "sim/dcp/dcp_setup.h"
#include "results/store.h"

typedef struct dcp_opts {
    const char *scenario, *strategies, *db, *trace, *per_step;
    int json, no_wall, scale, buckets, steps, have_steps, tl_steps;
    const char *sets[64];
    int n_sets;
} dcp_opts;

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
            "  --trace FILE       batch trace CSV ('tokens' or 'frames,height,width' header)\n"
            "  --set SEC.KEY=VAL  override a scenario key (repeatable), e.g. --set dcp.image_mix=5\n"
            "  --scale            also print imbalance at 8, 16, 32, 64 and 128 GPUs\n"
            "  --buckets          also print the per-bucket profile\n"
            "  --per-step NAME    also print every step of strategy NAME (groups, GPUs,\n"
            "                     micro-batches, mixed-bucket groups, compute time, imbalance)\n"
            "  --db FILE          save the run (metrics, per-GPU timelines) to SQLite\n"
            "  --tl-steps N       steps of each strategy's timeline saved with --db (default 4)\n"
            "  --json             one JSON object instead of tables\n"
            "  --no-wall          leave out wall-clock fields (byte-identical output)\n"
            "  -h, --help         this text\n");
}

static int parse_opts(int argc, char **argv, dcp_opts *o)
{
    static const struct option lo[] = {
        {"strategies", required_argument, 0, 'S'}, {"steps", required_argument, 0, 'n'},
        {"trace", required_argument, 0, 't'},      {"set", required_argument, 0, 's'},
        {"db", required_argument, 0, 'd'},         {"tl-steps", required_argument, 0, 'T'},
        {"json", no_argument, 0, 'j'},             {"no-wall", no_argument, 0, 'W'},
        {"scale", no_argument, 0, 'g'},            {"buckets", no_argument, 0, 'b'},
        {"per-step", required_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->tl_steps = 4;
    optind = 1;
    int c;
    int64_t v;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'S': o->strategies = optarg; break;
        case 't': o->trace = optarg; break;
        case 'd': o->db = optarg; break;
        case 'j': o->json = 1; break;
        case 'W': o->no_wall = 1; break;
        case 'g': o->scale = 1; break;
        case 'b': o->buckets = 1; break;
        case 'p': o->per_step = optarg; break;
        case 'h': dcp_usage(stdout); return 0;
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
        case 's':
            if (o->n_sets == 64) {
                fprintf(stderr, "tailsim dcp: too many --set options\n");
                return 2;
            }
            o->sets[o->n_sets++] = optarg;
            break;
        default: dcp_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "tailsim dcp: expected exactly one SCENARIO (try --help)\n");
        return 2;
    }
    o->scenario = argv[optind];
    return -1;
}

static void print_buckets(const dcp_ctx *c)
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

int cmd_dcp(int argc, char **argv)
{
    dcp_opts o;
    int prc = parse_opts(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    double w0 = ts_wall_s();
    ts_err e = {{0}};
    scenario s;
    dcp_setup d;
    dcp_ctx c;
    memset(&d, 0, sizeof d);
    memset(&c, 0, sizeof c);
    run_record *rec = NULL;
    json_t *root = NULL;
    int rc = 1;
    dcp_strategy st[DCP_MAX_STRATEGIES];
    int ns = 0;
    dcp_result res[DCP_MAX_STRATEGIES], ref;
    char plans[DCP_MAX_STRATEGIES][512];
    double imb[DCP_SCALE_N][DCP_MAX_STRATEGIES], imbp[DCP_SCALE_N][DCP_MAX_STRATEGIES];
    dcp_strategy pst;
    dcp_result pres;
    dcp_step_stat *psteps = NULL;

    if (scenario_load(o.scenario, &s, &e))
        goto fail;
    for (int i = 0; i < o.n_sets; i++)
        if (scenario_set(&s, o.sets[i], &e))
            goto fail;
    if (scenario_validate(&s, &e) || dcp_setup_load(&s, o.trace, &d, &e))
        goto fail;
    if (o.strategies) {
        if (dcp_parse_strategies(o.strategies, st, DCP_MAX_STRATEGIES, &ns, &e)) {
            ts_err_prefix(&e, "--strategies: ");
            goto fail;
        }
    } else {
        ns = d.n_strat;
        memcpy(st, d.strat, sizeof st);
    }
    int steps = o.have_steps ? o.steps : s.dcp.steps;
    if (o.per_step) {
        int one = 0;
        if (dcp_parse_strategies(o.per_step, &pst, 1, &one, &e)) {
            ts_err_prefix(&e, "--per-step: ");
            goto fail;
        }
        if (pst.kind == DCP_BOUND) {
            ts_errf(&e, "--per-step: bound has no steps (it is one perfectly balanced pass)");
            goto fail;
        }
    }
    if (dcp_ctx_init(&c, &d.hw, &d.tm, d.bt, &d.cfg, &e))
        goto fail;
    if (!(rec = run_record_new())) {
        ts_errf(&e, "out of memory");
        goto fail;
    }
    dcp_strategy bucket = {DCP_BUCKET, 0, "bucket"};
    if (dcp_run(&c, &bucket, steps, &ref, NULL, 0, 0, NULL, 0, &e))
        goto fail;
    for (int i = 0; i < ns; i++)
        if (dcp_run(&c, &st[i], steps, &res[i], o.db ? rec : NULL, i * d.cfg.gpus, o.tl_steps,
                    plans[i], sizeof plans[i], &e))
            goto fail;
    if (o.scale && dcp_setup_scale(&d, st, ns, imb, imbp, &e))
        goto fail;
    if (o.per_step && dcp_run_steps(&c, &pst, steps, &pres, &psteps, &e))
        goto fail;
    double wall = ts_wall_s() - w0;

    run_set_identity(rec, "dcp", s.name, d.hw.calibration, s.dcp.seed, d.cfg.gpus, d.cfg.gpus, 1);
    int oom = run_add_metric(rec, "gpus", d.cfg.gpus) ||
              run_add_metric(rec, "sequences", (double)d.bt->n) ||
              run_add_metric(rec, "tokens", (double)btrace_tokens(d.bt)) ||
              run_add_metric(rec, "buckets", d.bt->n_buckets) ||
              run_add_metric(rec, "sync_s", c.sync_s);
    for (int i = 0; i < ns && !oom; i++)
        oom = dcp_result_add_metrics(rec, &res[i], res[i].tokens_per_s / ref.tokens_per_s);
    if (o.scale && !oom)
        oom = dcp_scale_add_metrics(rec, st, ns, imb);
    if (oom) {
        ts_errf(&e, "out of memory");
        goto fail;
    }
    if (o.db && store_save_run_to(o.db, rec, &e))
        goto fail;

    if (o.json) {
        root = json_object();
        cmd_json_identity(root, rec, d.m.name, d.hw.name);
        json_object_set_new(root, "gpus", json_integer(d.cfg.gpus));
        json_object_set_new(root, "gpus_per_node", json_integer(d.hw.gpus_per_node));
        json_object_set_new(root, "trace", json_string(d.trace_desc));
        json_object_set_new(root, "sequences", json_integer((json_int_t)d.bt->n));
        json_object_set_new(root, "tokens", json_integer((json_int_t)btrace_tokens(d.bt)));
        json_object_set_new(root, "buckets", json_integer(d.bt->n_buckets));
        json_object_set_new(root, "mem_cap", json_real(d.cfg.mem_cap));
        json_object_set_new(root, "bucket_sp", json_integer(c.bucket_sp));
        json_object_set_new(root, "sync_s", json_real(c.sync_s));
        json_t *di = json_object();
        json_object_set_new(di, "max_gas", json_integer(d.cfg.max_gas));
        json_object_set_new(di, "overshoot", json_real(d.cfg.overshoot));
        json_object_set_new(di, "fill", json_boolean(d.cfg.fill));
        json_object_set_new(di, "ahead", json_real(d.cfg.ahead));
        json_object_set_new(di, "coarse", json_real(d.cfg.coarse));
        json_object_set_new(di, "endgame", json_integer(d.cfg.endgame));
        json_object_set_new(di, "draw", json_string(d.cfg.draw_work ? "work" : "share"));
        json_object_set_new(di, "xfill", json_boolean(d.cfg.xfill));
        json_object_set_new(root, "dcp_inter", di);
        json_t *arr = json_array();
        for (int i = 0; i < ns; i++) {
            const dcp_result *r = &res[i];
            json_t *x = json_object();
            json_object_set_new(x, "name", json_string(r->name));
            json_object_set_new(x, "steps", json_integer(r->steps));
            json_object_set_new(x, "step_s", json_real(r->step_s));
            json_object_set_new(x, "time_s", json_real(r->time_s));
            json_object_set_new(x, "tokens_per_s", json_real(r->tokens_per_s));
            json_object_set_new(x, "speedup", json_real(r->tokens_per_s / ref.tokens_per_s));
            json_object_set_new(x, "imbalance", json_real(r->imbalance));
            json_object_set_new(x, "imbalance_plan", json_real(r->imbalance_plan));
            json_object_set_new(x, "full_steps", json_integer(r->full_steps));
            json_object_set_new(x, "idle_fraction", json_real(r->idle_fraction));
            json_object_set_new(x, "peak_mem_gb", json_real(r->peak_mem_bytes / 1e9));
            json_object_set_new(x, "feasible", json_boolean(r->feasible));
            json_object_set_new(x, "mean_gas", json_real(r->mean_gas));
            json_object_set_new(x, "ckpt_fraction", json_real(r->mean_ckpt));
            json_object_set_new(x, "recompute_s", json_real(r->recompute_s));
            json_object_set_new(x, "sp_comm_s", json_real(r->comm_s));
            json_object_set_new(x, "sync_s", json_real(r->sync_s));
            json_t *sh = json_object();
            for (int j = 0; j < d.cfg.n_sp; j++) {
                char k[16];
                snprintf(k, sizeof k, "%d", d.cfg.sp[j]);
                json_object_set_new(sh, k, json_real(r->sp_share[j]));
            }
            json_object_set_new(x, "sp_share", sh);
            json_object_set_new(x, "plan", json_string(plans[i]));
            if (!o.no_wall)
                json_object_set_new(x, "plan_ms", json_real(r->plan_ms));
            json_array_append_new(arr, x);
        }
        json_object_set_new(root, "strategies", arr);
        if (o.scale) {
            json_t *sc = json_object();
            for (int k = 0; k < DCP_SCALE_N; k++) {
                json_t *row = json_object();
                for (int i = 0; i < ns; i++)
                    if (!isnan(imb[k][i]))
                        json_object_set_new(row, st[i].name, json_real(imb[k][i]));
                char key[16];
                snprintf(key, sizeof key, "%d", dcp_scale_gpus[k]);
                json_object_set_new(sc, key, row);
            }
            json_object_set_new(root, "imbalance_vs_gpus", sc);
            json_t *sp = json_object();
            for (int k = 0; k < DCP_SCALE_N; k++) {
                json_t *row = json_object();
                for (int i = 0; i < ns; i++)
                    if (!isnan(imbp[k][i]))
                        json_object_set_new(row, st[i].name, json_real(imbp[k][i]));
                char key[16];
                snprintf(key, sizeof key, "%d", dcp_scale_gpus[k]);
                json_object_set_new(sp, key, row);
            }
            json_object_set_new(root, "imbalance_plan_vs_gpus", sp);
        }
        if (o.per_step) {
            json_t *ps = json_object(), *arr2 = json_array();
            json_object_set_new(ps, "strategy", json_string(pres.name));
            for (int64_t k = 0; k < pres.steps; k++) {
                const dcp_step_stat *x = &psteps[k];
                json_t *row = json_object();
                json_object_set_new(row, "groups", json_integer(x->groups));
                json_object_set_new(row, "gpus_used", json_integer(x->gpus_used));
                json_object_set_new(row, "micro_batches", json_integer(x->mbs));
                json_object_set_new(row, "mixed_groups", json_integer(x->mixed));
                json_object_set_new(row, "compute_s", json_real(x->compute_s));
                json_object_set_new(row, "imbalance", json_real(x->imbalance));
                json_array_append_new(arr2, row);
            }
            json_object_set_new(ps, "steps", arr2);
            json_object_set_new(root, "per_step", ps);
        }
        if (!o.no_wall)
            json_object_set_new(root, "wall_s", json_real(wall));
        if (cmd_print_json(root, 10, &e))
            goto fail;
    } else {
        printf("dcp  scenario %s  model %s  hw %s  gpus %d (%d per node)  seed %llu\n", s.name,
               d.m.name, d.hw.name, d.cfg.gpus, d.hw.gpus_per_node,
               (unsigned long long)s.dcp.seed);
        printf("trace: %s\n", d.trace_desc);
        printf("       %zu sequences, %.4g tokens, %d buckets\n", d.bt->n,
               (double)btrace_tokens(d.bt), d.bt->n_buckets);
        printf("memory cap %.2f x %.0f GB, ZeRO %d, %s, SP sizes %s (bucket/packed SP %d), "
               "grad sync + optimizer %.4f s/step\n",
               d.cfg.mem_cap, d.hw.hbm_bytes / 1e9, d.cfg.zero_stage,
               d.cfg.ring ? "ring attention" : "Ulysses", s.dcp.sp_sizes, c.bucket_sp, c.sync_s);
        printf("dcp-inter: max_gas %d, overshoot %g, fill %s, ahead %g (coarse %g), endgame %d, "
               "draw %s, xfill %s\n\n",
               d.cfg.max_gas, d.cfg.overshoot, d.cfg.fill ? "on" : "off", d.cfg.ahead,
               d.cfg.coarse, d.cfg.endgame, d.cfg.draw_work ? "work" : "share",
               d.cfg.xfill ? "on" : "off");
        printf("%-15s %6s %9s %10s %11s %8s %7s %7s %7s %8s %5s\n", "strategy", "steps",
               "step_s", "total_s", "tokens/s", "speedup", "imbal", "imb_pl", "idle", "peak_GB",
               "gas");
        for (int i = 0; i < ns; i++) {
            const dcp_result *r = &res[i];
            printf("%-15s %6lld %9.4f %10.3f %11.4g %7.2fx %6.1f%% %6.1f%% %6.1f%% %8.1f %5.2f%s\n",
                   r->name, (long long)r->steps, r->step_s, r->time_s, r->tokens_per_s,
                   r->tokens_per_s / ref.tokens_per_s, 100 * r->imbalance,
                   100 * r->imbalance_plan, 100 * r->idle_fraction, r->peak_mem_bytes / 1e9, r->mean_gas,
                   r->feasible ? "" : "  OVER CAP");
        }
        printf("\nplans (first step; ckpt = checkpointed layers):\n");
        for (int i = 0; i < ns; i++)
            printf("  %-15s %s\n", res[i].name, plans[i]);
        if (o.scale) {
            for (int v = 0; v < 2; v++) {
                printf("\n%s vs GPU count (same trace)\n  %-6s",
                       v ? "imbalance as VideoSys' sampler estimates it (imb_pl)" : "imbalance",
                       "gpus");
                for (int i = 0; i < ns; i++)
                    if (st[i].kind != DCP_BOUND)
                        printf(" %14s", st[i].name);
                printf("\n");
                for (int k = 0; k < DCP_SCALE_N; k++) {
                    printf("  %-6d", dcp_scale_gpus[k]);
                    for (int i = 0; i < ns; i++)
                        if (st[i].kind != DCP_BOUND)
                            printf(" %13.1f%%", 100 * (v ? imbp[k][i] : imb[k][i]));
                    printf("\n");
                }
            }
        }
        if (o.buckets)
            print_buckets(&c);
        if (o.per_step) {
            printf("\nper step, %s (imbalance: idle GPU-seconds before the sync over gpus x "
                   "compute)\n  %5s %7s %5s %6s %6s %10s %7s\n",
                   pres.name, "step", "groups", "gpus", "mbs", "mixed", "compute_s", "imbal");
            for (int64_t k = 0; k < pres.steps; k++) {
                const dcp_step_stat *x = &psteps[k];
                printf("  %5lld %7d %5d %6d %6d %10.4f %6.1f%%\n", (long long)k + 1, x->groups,
                       x->gpus_used, x->mbs, x->mixed, x->compute_s, 100 * x->imbalance);
            }
        }
        if (!o.no_wall)
            printf("\nprofile %.1f ms, wall %.3f s\n", c.profile_ms, wall);
    }
    if (o.db)
        fprintf(stderr, "tailsim: saved run %lld to %s\n", (long long)rec->id, o.db);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "tailsim dcp: %s\n", e.msg);
done:
    free(psteps);
    json_decref(root);
    run_record_free(rec);
    dcp_ctx_free(&c);
    dcp_setup_free(&d);
    return rc;
}
