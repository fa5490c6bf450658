/*
 * Runner of `tailsim paper` for the DCP side: plans the scenario's batch
 * trace with each of its strategies (bucket always first, as the speedup
 * reference), simulates every plan, and records per strategy the speedup
 * over bucket and the imbalance (in %); with x->arg "scale" also the
 * imbalance at 8-128 GPUs on the same trace.  The strategy table and the
 * imbalance figure come from dcp_report_write() into DIR/<id>/, like
 * `tailsim report` draws them for a stored `tailsim dcp --scale` run.
 * Nothing here prints.
 */
#include "cli/paper_exp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "reports/dcp_report.h"
#include "reports/report.h"
#include "sim/dcp/dcp_setup.h"

/* Imbalance at each GPU count into rec as "g<N>.<strategy>.imbalance". */
static int scale(const dcp_setup *d, const dcp_strategy *st, int ns, run_record *rec, ts_err *e)
{
    double imb[DCP_SCALE_N][DCP_MAX_STRATEGIES], imbp[DCP_SCALE_N][DCP_MAX_STRATEGIES];
    if (dcp_setup_scale(d, st, ns, imb, imbp, e))
        return -1;
    if (dcp_scale_add_metrics(rec, st, ns, imb))
        return ts_errf(e, "out of memory");
    return 0;
}

int paper_exp_dcp(const paper_exp *x, paper_ctx *c, ts_err *e)
{
    scenario s;
    dcp_setup d;
    dcp_ctx ctx;
    memset(&d, 0, sizeof d);
    memset(&ctx, 0, sizeof ctx);
    run_record *rec = NULL;
    int rc = -1, do_scale = x->arg && !strcmp(x->arg, "scale");
    if (scenario_load(x->scenario, &s, e))
        return -1;
    for (int i = 0; i < PAPER_MAX_SETS && x->sets[i]; i++)
        if (scenario_set(&s, x->sets[i], e))
            return -1;
    if (scenario_validate(&s, e) || dcp_setup_load(&s, NULL, &d, e))
        return -1;
    paper_note_calibration(c, d.hw.calibration);
    dcp_result ref, res[DCP_MAX_STRATEGIES];
    dcp_strategy bucket = {DCP_BUCKET, 0, "bucket"};
    if (dcp_ctx_init(&ctx, &d.hw, &d.tm, d.bt, &d.cfg, e) || !(rec = run_record_new()) ||
        dcp_run(&ctx, &bucket, s.dcp.steps, &ref, NULL, 0, 0, NULL, 0, e))
        goto done;
    for (int i = 0; i < d.n_strat; i++)
        if (dcp_run(&ctx, &d.strat[i], s.dcp.steps, &res[i], NULL, 0, 0, NULL, 0, e))
            goto done;
    run_set_identity(rec, "dcp", s.name, d.hw.calibration, s.dcp.seed, d.cfg.gpus, d.cfg.gpus, 1);
    char title[400];
    snprintf(title, sizeof title, "%s (%s, %s on %d GPUs; %.150s)", x->title, s.name, d.m.name,
             d.cfg.gpus, d.trace_desc);
    paper_table *t = paper_doc_table(c->doc, title, d.n_strat + 1, 8, e);
    if (!t)
        goto done;
    snprintf(t->note, sizeof t->note,
             "One pass over the batch trace (seed %llu); speedup in tokens/s over bucket parallel.",
             (unsigned long long)s.dcp.seed);
    const char *hdr[] = {"strategy", "steps", "step_s", "total_s", "speedup", "imbalance", "idle",
                         "peak GB"};
    for (int k = 0; k < 8; k++)
        snprintf(t->cell[0][k], PAPER_CELL, "%s", hdr[k]);
    double best = NAN;
    for (int i = 0; i < d.n_strat; i++) {
        const dcp_result *r = &res[i];
        double sp = r->tokens_per_s / ref.tokens_per_s;
        char(*row)[PAPER_CELL] = t->cell[i + 1];
        snprintf(row[0], PAPER_CELL, "%s", d.strat[i].name);
        snprintf(row[1], PAPER_CELL, "%lld", (long long)r->steps);
        snprintf(row[2], PAPER_CELL, "%.2f", r->step_s);
        snprintf(row[3], PAPER_CELL, "%.1f", r->time_s);
        snprintf(row[4], PAPER_CELL, "%.2fx", sp);
        snprintf(row[5], PAPER_CELL, "%.1f%%", 100 * r->imbalance);
        snprintf(row[6], PAPER_CELL, "%.1f%%", 100 * r->idle_fraction);
        snprintf(row[7], PAPER_CELL, "%.1f", r->peak_mem_bytes / 1e9);
        char key[96];
        snprintf(key, sizeof key, "%s/%s.speedup", x->id, d.strat[i].name);
        int bad = paper_put(c, key, sp, NAN, NAN);
        snprintf(key, sizeof key, "%s/%s.imbalance", x->id, d.strat[i].name);
        bad = bad || paper_put(c, key, 100 * r->imbalance, NAN, NAN);
        if (d.strat[i].kind != DCP_BOUND && d.strat[i].kind != DCP_BUCKET &&
            (isnan(best) || sp > best))
            best = sp;
        bad = bad || dcp_result_add_metrics(rec, r, sp);
        if (bad) {
            ts_errf(e, "too many values");
            goto done;
        }
    }
    char key[96];
    snprintf(key, sizeof key, "%s/best.speedup", x->id);
    if (!isnan(best) && paper_put(c, key, best, NAN, NAN)) {
        ts_errf(e, "too many values");
        goto done;
    }
    if (do_scale && scale(&d, d.strat, d.n_strat, rec, e))
        goto done;
    char dir[4200], path[128], cap[400];
    snprintf(dir, sizeof dir, "%s/%s", c->o->dir, x->id);
    if (report_mkdir_p(dir, e) || dcp_report_write(rec, dir, e))
        goto done;
    if (do_scale) {
        snprintf(path, sizeof path, "%s/dcp_imbalance.png", x->id);
        snprintf(cap, sizeof cap, "%s: imbalance vs GPU count, the same trace planned at 8-128 GPUs",
                 s.name);
        if (paper_doc_fig(c->doc, "DCP", path, cap, e))
            goto done;
    }
    rc = 0;
done:
    run_record_free(rec);
    dcp_ctx_free(&ctx);
    dcp_setup_free(&d);
    return rc;
}
