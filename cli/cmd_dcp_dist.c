/*
 * `tailsim dcp SCENARIO --sweep-dist`: the data distribution's effect.  The
 * scenario's video mix is re-generated at each point of dcp_dist_grid
 * (sim/dcp/dcp_sweep.h: image mixing 50 -> 0 per video, then a flatter
 * Zipf), every strategy planned and simulated, and printed per point: the
 * share of long sequences, each strategy's speedup over bucket parallel and
 * bucket parallel's imbalance; --json as one object ("sweep_dist" rows);
 * -o DIR draws dcp_dist.png (reports/dcp_dist.gp).  The rows are printed
 * in grid order, which is increasing long share for the shipped grid
 * (tested).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cmd.h"
#include "cli/cmd_dcp.h"
#include "reports/dcp_report.h"
#include "sim/dcp/dcp_sweep.h"

static void dist_text(const scenario *s, const dcp_setup *d, const dcp_strategy *st, int ns,
                      const dcp_dist_row *rows)
{
    char n1[256];
    printf("dcp --sweep-dist  scenario %s  model %s  hw %s  gpus %d  seed %llu\n",
           cmd_flat(s->name, n1, sizeof n1), d->m.name, d->hw.name, d->cfg.gpus,
           (unsigned long long)s->dcp.seed);
    printf("the scenario's video mix (%d videos) moved from short- to long-dominated; long = "
           ">= %d patch tokens;\nspeedup = tokens/s over bucket parallel (SP %d), bucket_imb = "
           "its simulated imbalance\n\n",
           s->dcp.videos, DCP_LONG_TOKENS, s->dcp.bucket_sp);
    printf("%-9s %6s %5s %6s %7s %6s", "point", "images", "alpha", "offset", "seqs", "long");
    for (int i = 0; i < ns; i++)
        printf(" %14s", st[i].name);
    printf(" %10s\n", "bucket_imb");
    for (int k = 0; k < DCP_DIST_N; k++) {
        const dcp_dist_point *p = &dcp_dist_grid[k];
        printf("%-9s %6g %5g %6g %7lld %5.1f%%", p->label, p->image_mix, p->zipf_alpha,
               p->zipf_offset, (long long)rows[k].seqs, 100 * rows[k].long_share);
        for (int i = 0; i < ns; i++)
            printf(" %13.2fx", rows[k].speedup[i]);
        printf(" %9.1f%%\n", 100 * rows[k].bucket_imbalance);
    }
}

static int dist_json(const scenario *s, const dcp_setup *d, const dcp_strategy *st, int ns,
                     const dcp_dist_row *rows, ts_err *e)
{
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "command", json_string("dcp"));
    json_object_set_new(root, "scenario", json_string(s->name));
    json_object_set_new(root, "model", json_string(d->m.name));
    json_object_set_new(root, "hw", json_string(d->hw.name));
    json_object_set_new(root, "gpus", json_integer(d->cfg.gpus));
    json_object_set_new(root, "long_tokens", json_integer(DCP_LONG_TOKENS));
    for (int k = 0; k < DCP_DIST_N; k++) {
        const dcp_dist_point *p = &dcp_dist_grid[k];
        json_t *o = json_object(), *sp = json_object();
        json_object_set_new(o, "point", json_string(p->label));
        json_object_set_new(o, "image_mix", json_real(p->image_mix));
        json_object_set_new(o, "zipf_alpha", json_real(p->zipf_alpha));
        json_object_set_new(o, "zipf_offset", json_real(p->zipf_offset));
        json_object_set_new(o, "sequences", json_integer((json_int_t)rows[k].seqs));
        json_object_set_new(o, "long_share", json_real(rows[k].long_share));
        json_object_set_new(o, "bucket_imbalance", json_real(rows[k].bucket_imbalance));
        for (int i = 0; i < ns; i++)
            json_object_set_new(sp, st[i].name, json_real(rows[k].speedup[i]));
        json_object_set_new(o, "speedup", sp);
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "sweep_dist", arr);
    int rc = cmd_print_json(root, 10, e);
    json_decref(root);
    return rc;
}

static int dist_figure(const char *dir, const scenario *s, const dcp_strategy *st, int ns,
                       const dcp_dist_row *rows, ts_err *e)
{
    double ls[DCP_DIST_N], bi[DCP_DIST_N], sp[DCP_DIST_N * DCP_MAX_STRATEGIES];
    char names[DCP_MAX_STRATEGIES][48];
    for (int i = 0; i < ns; i++)
        snprintf(names[i], sizeof names[i], "%s", st[i].name);
    for (int k = 0; k < DCP_DIST_N; k++) {
        ls[k] = rows[k].long_share;
        bi[k] = rows[k].bucket_imbalance;
        for (int i = 0; i < ns; i++)
            sp[k * ns + i] = rows[k].speedup[i];
    }
    return dcp_dist_figure_write(dir, s->name, DCP_DIST_N, ls, ns, names, sp, bi, e);
}

int dcp_cmd_sweep_dist(const scenario *s, const dcp_setup *d, const dcp_strategy *st0, int ns0,
                       int json, const char *out, ts_err *e)
{
    dcp_strategy st[DCP_MAX_STRATEGIES]; /* the strategies but bucket, the reference */
    int ns = 0;
    for (int i = 0; i < ns0; i++)
        if (!(st0[i].kind == DCP_BUCKET && !st0[i].pac))
            st[ns++] = st0[i];
    dcp_dist_row rows[DCP_DIST_N];
    if (dcp_sweep_dist(s, dcp_dist_grid, DCP_DIST_N, st, ns, rows, e))
        return -1;
    if (json) {
        if (dist_json(s, d, st, ns, rows, e))
            return -1;
    } else {
        dist_text(s, d, st, ns, rows);
    }
    if (out) {
        if (dist_figure(out, s, st, ns, rows, e))
            return -1;
        fprintf(stderr, "tailsim dcp: figure: %s/dcp_dist.png\n", out);
    }
    return 0;
}
