/*
 * The sweep collector shared by `tailsim sweep` and `tailsim plan`: it
 * receives each configuration's result from the sweep runner
 * (sweep/sweep_run.h) in the one collecting process, saves it to the store
 * when one is open (one transaction per configuration, under one sweep id)
 * and keeps its run record or its error for the caller's table.  Library
 * code: it prints nothing (the CLI adds its progress hook).
 */
#include "sweep/sweep_collect.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sim/run.h"
#include "sweep/grid.h"

static int collect_begin(void *ctx, ts_err *e)
{
    sweep_collect *c = ctx;
    c->t0 = ts_wall_s();
    if (!c->db)
        return 0;
    if (store_open(c->db, &c->st, e) ||
        store_sweep_begin(c->st, c->g->path, c->g->scenario, c->g->command, c->g->n_configs,
                          &c->sweep_id, e))
        return -1;
    return 0;
}

/* Records in rec what configuration `config` ran on (run_record_source()):
 * the grid's scenario with the configuration's overrides applied, as INI,
 * those overrides, the grid's steps and the scenario's trace path; the
 * trace hash the worker computed (it alone loaded the trace) is kept.
 * Returns 0, or -1 with e filled. */
static int collect_source(const grid *g, size_t config, run_record *rec, ts_err *e)
{
    char sets[GRID_MAX_DIMS][GRID_SET_MAX], hash[sizeof rec->trace_hash];
    const char *setp[GRID_MAX_DIMS];
    size_t n = grid_config_sets(g, config, sets);
    int rc = -1;
    scenario *s = malloc(sizeof *s);
    if (!s)
        return ts_errf(e, "out of memory");
    for (size_t i = 0; i < n; i++)
        setp[i] = sets[i];
    if (scenario_load(g->scenario, s, e))
        goto cleanup;
    for (size_t i = 0; i < n; i++)
        if (scenario_set(s, setp[i], e))
            goto cleanup;
    memcpy(hash, rec->trace_hash, sizeof hash);
    if (run_record_source(rec, s, setp, (int)n, g->steps, NULL, NULL, 0, e))
        goto cleanup;
    memcpy(rec->trace_hash, hash, sizeof hash);
    rc = 0;
cleanup:
    free(s);
    if (rc)
        ts_err_prefix(e, "%s: config %zu: ", g->path, config);
    return rc;
}

static int collect_result(void *ctx, sweep_result *r, ts_err *e)
{
    sweep_collect *c = ctx;
    if (r->config >= c->g->n_configs || c->rec[r->config] || c->err[r->config])
        return ts_errf(e, "%s: configuration %zu came back twice", c->g->path, r->config);
    if (c->st) {
        char *params = sweep_config_params(c->g, r->config);
        if (!params)
            return ts_errf(e, "out of memory");
        if (r->ok && r->rec && collect_source(c->g, r->config, r->rec, e)) {
            free(params);
            return -1;
        }
        int bad = store_save_sweep_run(c->st, c->sweep_id, r->config, params,
                                       r->ok ? r->rec : NULL, r->err, e);
        free(params);
        if (bad)
            return -1;
    }
    if (r->ok) {
        c->rec[r->config] = r->rec;
        r->rec = NULL;
    } else {
        if (!(c->err[r->config] = strdup(r->err)))
            return ts_errf(e, "out of memory");
        c->failed++;
    }
    c->collected++;
    return 0;
}

int sweep_collect_init(sweep_collect *c, const grid *g, const char *prog, const char *db,
                       sweep_hooks *h, ts_err *e)
{
    memset(c, 0, sizeof *c);
    c->g = g;
    c->prog = prog;
    c->db = db;
    c->rec = calloc(g->n_configs, sizeof *c->rec);
    c->err = calloc(g->n_configs, sizeof *c->err);
    if (!c->rec || !c->err)
        return ts_errf(e, "out of memory");
    h->ctx = c;
    h->begin = collect_begin;
    h->result = collect_result;
    h->progress = NULL; /* the caller may draw progress (ctx is c) */
    return 0;
}

int sweep_collect_finish(sweep_collect *c, store_sweep_status how, ts_err *e)
{
    int rc = 0;
    if (how == STORE_SWEEP_DONE && c->failed)
        how = STORE_SWEEP_FAILED;
    if (c->st && (rc = store_sweep_end(c->st, c->sweep_id, how, e)) == 0)
        c->marked = how;
    store_close(c->st);
    c->st = NULL;
    return rc;
}

void sweep_collect_free(sweep_collect *c)
{
    store_close(c->st);
    c->st = NULL;
    for (size_t i = 0; c->g && i < c->g->n_configs; i++) {
        if (c->rec)
            run_record_free(c->rec[i]);
        if (c->err)
            free(c->err[i]);
    }
    free(c->rec);
    free(c->err);
    c->rec = NULL;
    c->err = NULL;
}
