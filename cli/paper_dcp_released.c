/*
 * Runner of `tailsim paper`'s "DCP as released" section: VideoSys' released
 * DCP benchmark configurations (scenarios dcp-videosys-1x8-frac{1,10,50},
 * one node of 8 GPUs, bucket SP 4) run on 8 H100 and 8 H200, and on the DCP
 * paper's 32 H200 (`cluster.gpus=32`), each with every strategy of the
 * scenario.  It adds two tables to the report:
 *   - the numbers the DCP paper states (DCP-inter 1.68-2.70x, best variant
 *     up to 2.88x, bucket imbalance ~16% vs DCP ~3% at 32 GPUs) with the
 *     configuration each belongs to as far as the sources say, against
 *     tailsim's value under each configuration, the model's bound beside
 *     them; its note is the 2.88x row's explanation (computed from the
 *     bounds) and names the fitted dcp.a2a_eff;
 *   - one row per configuration and strategy: speedup over bucket, the
 *     bound, bucket parallel's imbalance and the strategy's own.
 * The published values are constants here (those of cli/paper.c's DCP rows);
 * every other number is computed.  No published row of the tolerance table
 * comes from here: the sources tie no published number to a released
 * configuration.  Each run is one pass over the scenario's batch trace
 * (about 0.1 s for all nine), so --quick runs it unchanged.  Nothing here
 * prints.
 */
#include "cli/paper_exp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "sim/dcp/dcp_setup.h"
#include "sim/scenario.h"

/* The released configurations (VideoSys' image-mixing fractions) and the
 * hardware each runs on: the released node on both Hopper GPUs, and the
 * paper's GPU count on H200. */
static const struct {
    const char *scen, *label;
} released[] = {
    {"dcp-videosys-1x8-frac1", "frac 1"},
    {"dcp-videosys-1x8-frac10", "frac 10"},
    {"dcp-videosys-1x8-frac50", "frac 50"},
};
static const struct {
    const char *hw, *label;
    int gpus;
} machines[] = {{"h100", "H100", 8}, {"h200", "H200", 8}, {"h200", "H200", 32}};

#define N_REL (sizeof released / sizeof released[0])
#define N_MACH (sizeof machines / sizeof machines[0])
#define N_CFG (N_REL * N_MACH)

/* One configuration's results: every strategy's speedup over bucket and
 * imbalance (%), and the values the published-numbers table reads. */
typedef struct rel_run {
    char label[48];                       /* "frac 10, 8 x H200" */
    int n;                                /* strategies */
    char name[DCP_MAX_STRATEGIES][32];
    dcp_kind kind[DCP_MAX_STRATEGIES];
    int pac[DCP_MAX_STRATEGIES];
    double sp[DCP_MAX_STRATEGIES];        /* tokens/s over bucket's */
    double imb[DCP_MAX_STRATEGIES];       /* % */
    int64_t steps[DCP_MAX_STRATEGIES];
    double bound, bucket_imb;             /* NAN when the scenario lists no bound */
    double inter, inter_imb, pac_sp, pac_imb; /* NAN when absent */
    double best;                          /* best DCP strategy (not bucket, not bound) */
    int best_i;
    double a2a_eff;                       /* the scenario's dcp.a2a_eff */
} rel_run;

/* The values of r's strategies that the published table reads. */
static void rel_summarise(rel_run *r)
{
    r->bound = r->bucket_imb = r->inter = r->inter_imb = r->pac_sp = r->pac_imb = NAN;
    r->best = NAN;
    r->best_i = -1;
    for (int i = 0; i < r->n; i++) {
        if (r->kind[i] == DCP_BOUND)
            r->bound = r->sp[i];
        else if (r->kind[i] == DCP_BUCKET)
            r->bucket_imb = r->imb[i];
        else if (r->kind[i] == DCP_INTER && !r->pac[i]) {
            r->inter = r->sp[i];
            r->inter_imb = r->imb[i];
        } else if (r->kind[i] == DCP_INTER) {
            r->pac_sp = r->sp[i];
            r->pac_imb = r->imb[i];
        }
        if (r->kind[i] != DCP_BOUND && r->kind[i] != DCP_BUCKET &&
            (r->best_i < 0 || r->sp[i] > r->best)) {
            r->best = r->sp[i];
            r->best_i = i;
        }
    }
}

/* Runs scenario scen on hw x gpus with every strategy it lists into r.  Returns
 * 0, or -1 with the problem. */
static int rel_run_one(paper_ctx *c, const char *scen, const char *hw, int gpus, rel_run *r,
                       ts_err *e)
{
    scenario s;
    dcp_setup d;
    dcp_ctx ctx;
    memset(&d, 0, sizeof d);
    memset(&ctx, 0, sizeof ctx);
    char set_hw[64], set_gpus[64];
    snprintf(set_hw, sizeof set_hw, "cluster.hw=%s", hw);
    snprintf(set_gpus, sizeof set_gpus, "cluster.gpus=%d", gpus);
    if (scenario_load(scen, &s, e) || scenario_set(&s, set_hw, e) ||
        scenario_set(&s, set_gpus, e) || scenario_validate(&s, e) ||
        dcp_setup_load(&s, NULL, &d, e))
        return -1;
    paper_note_calibration(c, d.hw.calibration);
    int rc = -1;
    dcp_result ref, res;
    dcp_strategy bucket = {DCP_BUCKET, 0, "bucket"};
    if (dcp_ctx_init(&ctx, &d.hw, &d.tm, d.bt, &d.cfg, e) ||
        dcp_run(&ctx, &bucket, s.dcp.steps, &ref, NULL, 0, 0, NULL, 0, e))
        goto done;
    r->n = d.n_strat;
    r->a2a_eff = s.dcp.a2a_eff;
    for (int i = 0; i < d.n_strat; i++) {
        if (dcp_run(&ctx, &d.strat[i], s.dcp.steps, &res, NULL, 0, 0, NULL, 0, e))
            goto done;
        snprintf(r->name[i], sizeof r->name[i], "%s", d.strat[i].name);
        r->kind[i] = d.strat[i].kind;
        r->pac[i] = d.strat[i].pac;
        r->sp[i] = res.tokens_per_s / ref.tokens_per_s;
        r->imb[i] = 100 * res.imbalance;
        r->steps[i] = res.steps;
    }
    rel_summarise(r);
    rc = 0;
done:
    dcp_ctx_free(&ctx);
    dcp_setup_free(&d);
    return rc;
}

/* "1.45x" or "-" for NAN. */
static void cell_x(char *buf, double v)
{
    if (isnan(v))
        snprintf(buf, PAPER_CELL, "-");
    else
        snprintf(buf, PAPER_CELL, "%.2fx", v);
}

static void cell_pct(char *buf, double v)
{
    if (isnan(v))
        snprintf(buf, PAPER_CELL, "-");
    else
        snprintf(buf, PAPER_CELL, "%.1f%%", v);
}

/* The published numbers, where the sources place them (a header, a
 * published row, a sources row), then tailsim's value per configuration. */
#define WHERE "32 H200 (paper); no released config named"
static const char *const pub_cells[3][6] = {
    {"DCP paper vs tailsim", "DCP-inter over bucket", "best DCP variant", "bound (model)",
     "bucket imbalance", "DCP imbalance (inter, +pac)"},
    {"published (DCP paper)", "1.68-2.70x", "up to 2.88x", "none published", "~16% at 32 GPUs",
     "~3% at 32 GPUs"},
    {"configuration, per the sources", WHERE, WHERE, "-", WHERE, WHERE},
};

/* The 2.88x row's explanation and the fitted parameter, from the bounds. */
static void explain(char *note, size_t n, const rel_run *r)
{
    int hi = 0, lo8 = -1, hi8 = -1, best = 0;
    for (size_t k = 0; k < N_CFG; k++) {
        if (isnan(r[k].bound))
            continue;
        if (isnan(r[hi].bound) || r[k].bound > r[hi].bound)
            hi = (int)k;
        if (machines[k % N_MACH].gpus == 8) {
            if (lo8 < 0 || r[k].bound < r[lo8].bound)
                lo8 = (int)k;
            if (hi8 < 0 || r[k].bound > r[hi8].bound)
                hi8 = (int)k;
        }
        if (r[k].best > r[best].best)
            best = (int)k;
    }
    int reached = r[hi].bound >= 2.88;
    char a2a[64];
    snprintf(a2a, sizeof a2a, "%.2f", r[0].a2a_eff);
    for (size_t k = 1; k < N_CFG; k++)
        if (r[k].a2a_eff != r[0].a2a_eff)
            snprintf(a2a, sizeof a2a, "%.2f-%.2f (differs by configuration)", r[0].a2a_eff,
                     r[k].a2a_eff);
    snprintf(note, n,
             "The 2.88x row: %s under a released configuration. The model's bound (each sequence "
             "at its cheapest SP size, every GPU busy, one gradient sync) is at most %.2fx (%s) "
             "and %.2f-%.2fx at the released 8 GPUs%s; the best strategy reaches %.2fx (%s, %s). "
             "What the sources do not give is the per-GPU cost of a short sequence at a fixed SP "
             "size, which bucket parallel's cost and so the bound rest on (docs/paper-dcp.md). "
             "Fitted: dcp.a2a_eff = %s, fitted to the published DCP-inter 1.68x on "
             "dcp-stdit3-32xh200-mix1 and reused unchanged; every speedup here inherits it. "
             "Which configuration each published number belongs to: the paper's are on 32 H200; "
             "VideoSys' released scripts (1 x 8 GPUs, fractions 1, 10, 50) log no number; so "
             "the sources tie none to a released configuration, and none is in the "
             "tolerance table above.",
             reached ? "the bound reaches it" : "not reached", r[hi].bound, r[hi].label,
             lo8 >= 0 ? r[lo8].bound : NAN, hi8 >= 0 ? r[hi8].bound : NAN,
             reached ? "" : ", so no planner gets there", r[best].best, r[best].label,
             r[best].best_i >= 0 ? r[best].name[r[best].best_i] : "-", a2a);
}

/* Table 1: the published numbers against each configuration. */
static int table_published(paper_ctx *c, const rel_run *r, ts_err *e)
{
    paper_table *t = paper_doc_table(
        c->doc, "DCP as released: the published numbers against VideoSys' configurations",
        3 + (int)N_CFG, 6, e);
    if (!t)
        return -1;
    explain(t->note, sizeof t->note, r);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 6; k++)
            snprintf(t->cell[i][k], PAPER_CELL, "%s", pub_cells[i][k]);
    for (size_t k = 0; k < N_CFG; k++) {
        char(*row)[PAPER_CELL] = t->cell[3 + k];
        snprintf(row[0], PAPER_CELL, "%.47s", r[k].label);
        cell_x(row[1], r[k].inter);
        cell_x(row[2], r[k].best);
        if (r[k].best_i >= 0) {
            size_t m = strlen(row[2]);
            snprintf(row[2] + m, PAPER_CELL - m, " (%.30s)", r[k].name[r[k].best_i]);
        }
        cell_x(row[3], r[k].bound);
        cell_pct(row[4], r[k].bucket_imb);
        if (isnan(r[k].inter_imb) || isnan(r[k].pac_imb))
            cell_pct(row[5], isnan(r[k].inter_imb) ? r[k].pac_imb : r[k].inter_imb);
        else
            snprintf(row[5], PAPER_CELL, "%.1f%%, %.1f%%", r[k].inter_imb, r[k].pac_imb);
    }
    return 0;
}

/* What the DCP paper states for a strategy (its kind and PAC). */
static const char *published_for(dcp_kind kind, int pac)
{
    switch (kind) {
    case DCP_BUCKET: return "imbalance ~16% at 32 GPUs";
    case DCP_INTER: return pac ? "up to 2.88x (best); DCP ~3%" : "1.68-2.70x; DCP ~3%";
    case DCP_BOUND: return "none (the model's limit)";
    default: return "none";
    }
}

/* Table 2: one row per configuration and strategy. */
static int table_strategies(paper_ctx *c, const rel_run *r, ts_err *e)
{
    int rows = 1;
    for (size_t k = 0; k < N_CFG; k++)
        rows += r[k].n;
    paper_table *t = paper_doc_table(
        c->doc, "DCP as released: every strategy per configuration", rows, 8, e);
    if (!t)
        return -1;
    snprintf(t->note, sizeof t->note,
             "VideoSys' released DCP benchmarks (dcp-videosys-1x8-frac{1,10,50}: commit "
             "73a546be75dc, bucket SP 4, 2,000 videos, Zipf alpha 3 offset 5, exclusive image "
             "mixing, memory cap 0.56), each one pass over its batch trace (seed 42) on 8 H100, "
             "8 H200 and the paper's 32 H200 (cluster.gpus=32). Speedup in tokens/s over bucket "
             "parallel; bound: the model's upper limit; imbalance: idle GPU-seconds before each "
             "sync over gpus x compute. The published column is what the DCP paper states for "
             "32 H200, tied to no released configuration.");
    const char *hdr[] = {"configuration", "strategy", "steps", "speedup", "bound",
                         "bucket imbalance", "imbalance", "published (DCP paper, 32 H200)"};
    for (int k = 0; k < 8; k++)
        snprintf(t->cell[0][k], PAPER_CELL, "%s", hdr[k]);
    int row = 1;
    for (size_t k = 0; k < N_CFG; k++)
        for (int i = 0; i < r[k].n; i++, row++) {
            char(*x)[PAPER_CELL] = t->cell[row];
            snprintf(x[0], PAPER_CELL, "%.47s", r[k].label);
            snprintf(x[1], PAPER_CELL, "%s", r[k].name[i]);
            snprintf(x[2], PAPER_CELL, "%lld", (long long)r[k].steps[i]);
            cell_x(x[3], r[k].sp[i]);
            cell_x(x[4], r[k].bound);
            cell_pct(x[5], r[k].bucket_imb);
            if (r[k].kind[i] == DCP_BOUND)
                snprintf(x[6], PAPER_CELL, "-");
            else
                cell_pct(x[6], r[k].imb[i]);
            snprintf(x[7], PAPER_CELL, "%s", published_for(r[k].kind[i], r[k].pac[i]));
        }
    return 0;
}

int paper_exp_dcp_released(const paper_exp *x, paper_ctx *c, ts_err *e)
{
    (void)x;
    rel_run r[N_CFG];
    memset(r, 0, sizeof r);
    for (size_t i = 0; i < N_REL; i++)
        for (size_t m = 0; m < N_MACH; m++) {
            rel_run *q = &r[i * N_MACH + m];
            snprintf(q->label, sizeof q->label, "%s, %d x %s", released[i].label,
                     machines[m].gpus, machines[m].label);
            if (rel_run_one(c, released[i].scen, machines[m].hw, machines[m].gpus, q, e))
                return ts_err_prefix(e, "%s on %d %s: ", released[i].scen, machines[m].gpus,
                                     machines[m].label);
        }
    return table_published(c, r, e) || table_strategies(c, r, e) ? -1 : 0;
}
