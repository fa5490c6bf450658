/*
 * The data distribution's effect on DCP (`tailsim dcp --sweep-dist`): the
 * scenario's video mix re-generated along a fixed grid that moves it from
 * short-dominated (many images) to long-dominated (no images, a flat Zipf),
 * every strategy planned and simulated on each, with the share of long
 * sequences that orders the grid.
 */
#ifndef TS_DCP_SWEEP_H
#define TS_DCP_SWEEP_H

#include "sim/dcp/dcp.h"
#include "sim/scenario.h"

/* One point of the grid: the generator keys it sets (the rest are the
 * scenario's). */
typedef struct dcp_dist_point {
    const char *label;  /* short name, e.g. "img50" */
    double image_mix;   /* dcp.image_mix (exclusive mixing) */
    double zipf_alpha;  /* dcp.zipf_alpha */
    double zipf_offset; /* dcp.zipf_offset */
} dcp_dist_point;

#define DCP_DIST_N 9
/* The shipped grid, short- to long-dominated (docs/dcp.md). */
extern const dcp_dist_point dcp_dist_grid[DCP_DIST_N];

/* A sequence is "long" from this many patch tokens: 1/8 of the longest
 * video of the mix (720p x 408 frames, 432,000 tokens); the 720p 51-frame
 * clip (54,000) is the shortest long one. */
#define DCP_LONG_TOKENS 54000

/* What one grid point gave. */
typedef struct dcp_dist_row {
    int64_t seqs;                          /* sequences of the generated trace */
    double long_share;                     /* patch tokens in long sequences / all */
    double speedup[DCP_MAX_STRATEGIES];    /* tokens/s over bucket, per strategy */
    double imbalance[DCP_MAX_STRATEGIES];  /* simulated imbalance per strategy (NAN: bound) */
    double bucket_imbalance;               /* bucket's simulated imbalance */
} dcp_dist_row;

/* The share of b's patch tokens held by sequences of at least
 * DCP_LONG_TOKENS tokens, 0 for an empty trace.  Cannot fail. */
double dcp_long_share(const btrace *b);

/* Runs strategies st[0..ns) (bound allowed; bucket is the reference, always
 * run) on the scenario s (a video-mix scenario, validated) at each of the n
 * points pts, into rows[0..n).  Returns 0, or -1 with e naming the point
 * (a scenario whose dcp.dist is not video-mix, a generator or planner
 * failure). */
int dcp_sweep_dist(const scenario *s, const dcp_dist_point *pts, int n, const dcp_strategy *st,
                   int ns, dcp_dist_row *rows, ts_err *e);

#endif
