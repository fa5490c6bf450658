/*
 * `tailsim dcp --sweep-dist`: one scenario's video mix moved along a grid
 * from short-dominated to long-dominated, each point re-generated
 * (dcp_setup_load on a copy of the scenario with the point's generator
 * keys), profiled and planned by every strategy, with bucket parallel as
 * the reference.  The grid first takes images away (exclusive image mixing
 * 50, 10, 5, 1, 0 per video: VideoSys' benchmark fractions and the paper's
 * mixes), then flattens the videos' Zipf (alpha 3 -> 1.05, VideoSys'
 * other hard-coded value -> 0.5; offset 5 -> 15, dcp_inter.yaml's), so the
 * share of long sequences (dcp_long_share) rises along it.  Each point is
 * independent and deterministic (the scenario's seed).  Nothing here prints.
 */
#include "sim/dcp/dcp_sweep.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/dcp/dcp_setup.h"

const dcp_dist_point dcp_dist_grid[DCP_DIST_N] = {
    {"img50", 50, 3, 5},         {"img10", 10, 3, 5},          {"img5", 5, 3, 5},
    {"img1", 1, 3, 5},           {"img0", 0, 3, 5},            {"a1.05", 0, 1.05, 5},
    {"a1.05o15", 0, 1.05, 15},   {"a0.5o15", 0, 0.5, 15},      {"a0.1o15", 0, 0.1, 15},
};

double dcp_long_share(const btrace *b)
{
    int64_t all = 0, lng = 0;
    for (size_t i = 0; i < b->n; i++) {
        int64_t t = bt_tokens(&b->seq[i]);
        all += t;
        if (t >= DCP_LONG_TOKENS)
            lng += t;
    }
    return all > 0 ? (double)lng / (double)all : 0;
}

/* One point: generate, profile, plan and simulate. */
static int sweep_point(const scenario *s0, const dcp_dist_point *p, const dcp_strategy *st,
                       int ns, dcp_dist_row *row, ts_err *e)
{
    scenario s = *s0;
    s.dcp.image_mix = p->image_mix;
    s.dcp.zipf_alpha = p->zipf_alpha;
    s.dcp.zipf_offset = p->zipf_offset;
    s.dcp.res_scale = s.dcp.frame_scale = 0;
    dcp_setup d;
    if (dcp_setup_load(&s, NULL, &d, e))
        return -1;
    dcp_ctx c;
    if (dcp_ctx_init(&c, &d.hw, &d.tm, d.bt, &d.cfg, e)) {
        dcp_setup_free(&d);
        return -1;
    }
    row->seqs = (int64_t)d.bt->n;
    row->long_share = dcp_long_share(d.bt);
    dcp_strategy bucket = {DCP_BUCKET, 0, "bucket"};
    dcp_result ref, r;
    int rc = dcp_run(&c, &bucket, 0, &ref, NULL, 0, 0, NULL, 0, e);
    row->bucket_imbalance = ref.imbalance;
    for (int i = 0; i < ns && !rc; i++) {
        rc = dcp_run(&c, &st[i], 0, &r, NULL, 0, 0, NULL, 0, e);
        row->speedup[i] = rc ? NAN : r.tokens_per_s / ref.tokens_per_s;
        row->imbalance[i] = rc || st[i].kind == DCP_BOUND ? NAN : r.imbalance;
    }
    dcp_ctx_free(&c);
    dcp_setup_free(&d);
    return rc ? -1 : 0;
}

int dcp_sweep_dist(const scenario *s, const dcp_dist_point *pts, int n, const dcp_strategy *st,
                   int ns, dcp_dist_row *rows, ts_err *e)
{
    if (strcmp(s->dcp.dist, "video-mix") || s->dcp.file[0])
        return ts_errf(e, "%s: --sweep-dist moves a generated video mix: it needs dcp.dist = "
                          "video-mix and no dcp.file (this scenario has dist '%s'%s)",
                       s->path, s->dcp.dist, s->dcp.file[0] ? " and a file" : "");
    for (int k = 0; k < n; k++)
        if (sweep_point(s, &pts[k], st, ns, &rows[k], e))
            return ts_err_prefix(e, "--sweep-dist point %s: ", pts[k].label);
    return 0;
}
