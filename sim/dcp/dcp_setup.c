/*
 * Scenario -> DCP setup.  The [dcp] section lives in the same key table as
 * every other section (sim/scenario.c), so its keys are typed, ranged and
 * reported with file, line and key like the rest; this file turns the
 * validated values into a dcp_cfg, resolves the batch trace (a CSV file,
 * "shared:PATH" under $TAILSIM_SHARED, or a generator: "video-mix" for
 * DCP's Zipf video mix, otherwise a 1D length distribution) and checks the
 * cross-field rules: SP sizes parse, the bucket SP size is one of them, the
 * trace's kind matches the model's architecture.
 */
#include "models/hw_calib.h"
#include "sim/dcp/dcp_setup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

const int dcp_scale_gpus[DCP_SCALE_N] = {8, 16, 32, 64, 128};

int dcp_setup_scale(const dcp_setup *d, const dcp_strategy *st, int ns,
                    double imb[DCP_SCALE_N][DCP_MAX_STRATEGIES],
                    double imbp[DCP_SCALE_N][DCP_MAX_STRATEGIES], ts_err *e)
{
    for (int k = 0; k < DCP_SCALE_N; k++) {
        dcp_cfg cfg = d->cfg;
        cfg.gpus = dcp_scale_gpus[k];
        dcp_ctx c;
        if (dcp_ctx_init(&c, &d->hw, &d->tm, d->bt, &cfg, e))
            return ts_err_prefix(e, "at %d GPUs: ", dcp_scale_gpus[k]);
        for (int i = 0; i < ns; i++) {
            dcp_result r;
            imb[k][i] = imbp[k][i] = NAN;
            if (st[i].kind == DCP_BOUND)
                continue;
            if (dcp_run(&c, &st[i], 0, &r, NULL, 0, 0, NULL, 0, e)) {
                dcp_ctx_free(&c);
                return ts_err_prefix(e, "at %d GPUs: ", dcp_scale_gpus[k]);
            }
            imb[k][i] = r.imbalance;
            imbp[k][i] = r.imbalance_plan;
        }
        dcp_ctx_free(&c);
    }
    return 0;
}

int dcp_result_add_metrics(run_record *rec, const dcp_result *r, double speedup)
{
    const struct {
        const char *k;
        double v;
    } m[] = {
        {"steps", (double)r->steps},      {"step_s", r->step_s},
        {"time_s", r->time_s},            {"tokens_per_s", r->tokens_per_s},
        {"speedup", speedup},             {"imbalance", r->imbalance},
        {"imbalance_plan", r->imbalance_plan},
        {"idle_fraction", r->idle_fraction}, {"peak_mem_gb", r->peak_mem_bytes / 1e9},
        {"feasible", r->feasible},        {"mean_gas", r->mean_gas},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        char key[48];
        snprintf(key, sizeof key, "%.24s.%.20s", r->name, m[i].k);
        if (run_add_metric(rec, key, m[i].v))
            return -1;
    }
    return 0;
}

int dcp_scale_add_metrics(run_record *rec, const dcp_strategy *st, int ns,
                          double imb[DCP_SCALE_N][DCP_MAX_STRATEGIES])
{
    for (int k = 0; k < DCP_SCALE_N; k++)
        for (int i = 0; i < ns; i++) {
            char key[48];
            if (isnan(imb[k][i]))
                continue;
            snprintf(key, sizeof key, "g%d.%.24s.imbalance", dcp_scale_gpus[k], st[i].name);
            if (run_add_metric(rec, key, imb[k][i]))
                return -1;
        }
    return 0;
}

void dcp_setup_free(dcp_setup *d)
{
    if (!d)
        return;
    btrace_free(d->bt);
    d->bt = NULL;
}

int dcp_setup_cfg(const scenario *s, dcp_cfg *cfg, ts_err *e)
{
    const scn_dcp *x = &s->dcp;
    dcp_cfg_default(cfg);
    cfg->gpus = s->gpus;
    if (dcp_parse_sp_sizes(x->sp_sizes, cfg->sp, &cfg->n_sp, e))
        return ts_err_prefix(e, "%s: key 'dcp.sp_sizes': ", s->path);
    if (x->bucket_sp) {
        int ok = 0;
        for (int j = 0; j < cfg->n_sp; j++)
            ok |= cfg->sp[j] == x->bucket_sp;
        if (!ok)
            return ts_errf(e, "%s: key 'dcp.bucket_sp': %d is not in dcp.sp_sizes (%s)", s->path,
                           x->bucket_sp, x->sp_sizes);
    }
    cfg->bucket_sp = x->bucket_sp;
    cfg->mem_cap = x->mem_cap;
    cfg->reserve_bytes = x->reserve_gb * 1e9;
    cfg->zero_stage = x->zero_stage;
    cfg->ring = x->ring;
    cfg->max_gas = x->max_gas;
    cfg->overshoot = x->overshoot;
    cfg->fill = x->fill;
    cfg->endgame = x->endgame;
    cfg->xfill = x->xfill;
    cfg->draw_work = !strcmp(x->draw, "work");
    if (!cfg->draw_work && strcmp(x->draw, "share"))
        return ts_errf(e, "%s: key 'dcp.draw': '%s' is not share or work", s->path, x->draw);
    cfg->ahead = x->ahead;
    cfg->coarse = x->coarse;
    cfg->tie_tol = x->tie_tol;
    cfg->pack_tokens = x->pack_tokens;
    cfg->seed = x->seed;
    return 0;
}

/* The video-mix generator from the [dcp] keys into d->bt and d->trace_desc
 * (the description of the shipped scenarios' default keys is unchanged).
 * Returns 0, or -1 naming the scenario file and key. */
static int dcp_setup_video_mix(const scenario *s, dcp_setup *d, ts_err *e)
{
    const scn_dcp *x = &s->dcp;
    bt_video_mix vm = {x->videos, x->image_mix, x->zipf_alpha, x->zipf_offset, x->seed, 0, 0, 0, 0};
    vm.inclusive = !strcmp(x->image_mixing, "inclusive");
    if (!vm.inclusive && strcmp(x->image_mixing, "exclusive"))
        return ts_errf(e, "%s: key 'dcp.image_mixing': '%s' is not exclusive or inclusive",
                       s->path, x->image_mixing);
    vm.rank_height = !strcmp(x->zipf_rank, "height");
    if (!vm.rank_height && strcmp(x->zipf_rank, "pixels"))
        return ts_errf(e, "%s: key 'dcp.zipf_rank': '%s' is not pixels or height", s->path,
                       x->zipf_rank);
    if ((x->res_scale > 0) != (x->frame_scale > 0))
        return ts_errf(e, "%s: key 'dcp.%s': res_scale and frame_scale go together (both 0: "
                          "Zipf, both > 0: half-normal)",
                       s->path, x->res_scale > 0 ? "frame_scale" : "res_scale");
    vm.res_scale = x->res_scale;
    vm.frame_scale = x->frame_scale;
    if (!(d->bt = bt_gen_video_mix(&vm, e)))
        return ts_err_prefix(e, "%s: [dcp]: ", s->path);
    if (vm.res_scale > 0)
        snprintf(d->trace_desc, sizeof d->trace_desc,
                 "video-mix: %d samples, half-normal res_scale %g frame_scale %g (seed %llu)",
                 x->videos, x->res_scale, x->frame_scale, (unsigned long long)x->seed);
    else
        snprintf(d->trace_desc, sizeof d->trace_desc,
                 "video-mix: %d videos, image_mix %g%s, Zipf alpha %g offset %g%s (seed %llu)",
                 x->videos, x->image_mix, vm.inclusive ? " inclusive" : "", x->zipf_alpha,
                 x->zipf_offset, vm.rank_height ? " by height x frames" : "",
                 (unsigned long long)x->seed);
    return 0;
}

int dcp_setup_load(const scenario *s, const char *trace_file, dcp_setup *d, ts_err *e)
{
    memset(d, 0, sizeof *d);
    const scn_dcp *x = &s->dcp;
    if (scenario_load_models(s, &d->hw, &d->m, e))
        return -1;
    if (s->gpus_per_node > 0)
        d->hw.gpus_per_node = s->gpus_per_node;
    if (tc_model_init(&d->tm, &d->m, x->cross_tokens, x->act_factor, e))
        return ts_err_prefix(e, "%s: [dcp]: ", s->path);
    d->tm.a2a_eff = x->a2a_eff;
    d->tm.frame_split = x->frame_split;
    if (dcp_setup_cfg(s, &d->cfg, e))
        return -1;
    if (dcp_parse_strategies(x->strategies, d->strat, DCP_MAX_STRATEGIES, &d->n_strat, e))
        return ts_err_prefix(e, "%s: key 'dcp.strategies': ", s->path);

    char path[1024];
    const char *file = trace_file;
    if (!file && x->file[0]) {
        scenario_resolve_path(s, x->file, path, sizeof path);
        file = path;
    }
    if (file) {
        if (btrace_load(file, &d->bt, e))
            return -1;
        snprintf(d->trace_desc, sizeof d->trace_desc, "%s", file);
    } else if (!strcmp(x->dist, "video-mix")) {
        if (dcp_setup_video_mix(s, d, e))
            return -1;
    } else {
        if (!(d->bt = bt_gen_1d(x->dist, x->seqs, x->cap, x->seed, e)))
            return ts_err_prefix(e, "%s: key 'dcp.dist': ", s->path);
        snprintf(d->trace_desc, sizeof d->trace_desc, "%s: %d sequences, cap %d (seed %llu)",
                 x->dist, x->seqs, x->cap, (unsigned long long)x->seed);
    }
    if ((d->bt->kind == BT_2D) != (d->tm.arch == TC_STDIT)) {
        ts_errf(e, "%s: a %s batch trace needs a %s model, but model.name = %s is a %s",
                s->path, d->bt->kind == BT_2D ? "video (2D)" : "1D",
                d->bt->kind == BT_2D ? "video (no vocabulary)" : "decoder", s->model,
                d->tm.arch == TC_STDIT ? "video model" : "decoder");
        dcp_setup_free(d);
        return -1;
    }
    if (bt_bucketize(d->bt, e)) {
        dcp_setup_free(d);
        return -1;
    }
    return 0;
}
