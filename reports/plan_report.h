/*
 * Capacity planning (`tailsim plan`): the Pareto front of step time against
 * GPU-hours per 1,000 steps over the searched configurations, the cheapest
 * configuration meeting a step-time target, and the front's figure
 * (DIR/plan.dat + reports/plan_front.gp -> DIR/plan_front.png).
 */
#ifndef TS_PLAN_REPORT_H
#define TS_PLAN_REPORT_H

#include <stddef.h>

#include "common/err.h"

typedef struct plan_point {
    size_t config;     /* configuration index in the plan's grid */
    char label[96];    /* e.g. "tlt 64x tp2" */
    int gpus, tp;
    double step_s;     /* mean RL step time, s */
    double gpu_h;      /* GPU-hours per 1,000 steps: gpus * step_s * 1000 / 3600 */
    double offtok;     /* share of the trained tokens an older policy generated */
    double stale;      /* mean staleness of the trained samples, policy versions */
    int excluded;      /* 1: left out of the front and the cheapest pick (its
                        * off-policy share is above the plan's limit) */
    int front;         /* 1: on the Pareto front (set by plan_pareto) */
} plan_point;

/* GPU-hours per 1,000 steps of `gpus` GPUs at step_s seconds a step.
 * Cannot fail. */
double plan_gpu_hours(int gpus, double step_s);

/* Marks p[i].front for every point that is not excluded and that no other
 * point that is not excluded dominates (no worse in both step time and
 * GPU-hours, better in one); equal points are all on the front.  Returns
 * the number on the front.  Cannot fail. */
size_t plan_pareto(plan_point *p, size_t n);

/* Index of the configuration with the fewest GPU-hours among those not
 * excluded with step_s <= target_s (ties: the faster, then the lower
 * index), or -1 when none meets it.  Cannot fail. */
long plan_cheapest(const plan_point *p, size_t n, double target_s);

/* Writes DIR/plan.dat (block 0: every point; block 1: the front, by
 * GPU-hours) and DIR/plan_front.png through gnuplot, marking the target
 * (target_s <= 0: none) and the cheapest point (-1: none).  Creates DIR.
 * Returns 0 or -1 naming the file or script. */
int plan_plot(const plan_point *p, size_t n, double target_s, long cheapest, const char *dir,
              const char *title, ts_err *e);

#endif
