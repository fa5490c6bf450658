/*
 * The capacity plan's front and figure (see plan_report.h).  n is the number
 * of searched configurations (tens to thousands), so the dominance check is
 * the plain O(n^2) pairwise one, which is also its own specification.  The
 * figure follows the report's habit: a .dat written atomically and a static
 * gnuplot script run with `gnuplot -d -c`.  A label is a gnuplot string in
 * plan.dat (report_put_dat_string()), whatever the --vary values it names
 * hold.
 */
#include "reports/plan_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "reports/report.h"

double plan_gpu_hours(int gpus, double step_s)
{
    return (double)gpus * step_s * 1000.0 / 3600.0;
}

size_t plan_pareto(plan_point *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int dominated = p[i].excluded;
        for (size_t j = 0; j < n && !dominated; j++)
            dominated = j != i && !p[j].excluded && p[j].step_s <= p[i].step_s &&
                        p[j].gpu_h <= p[i].gpu_h &&
                        (p[j].step_s < p[i].step_s || p[j].gpu_h < p[i].gpu_h);
        p[i].front = !dominated;
        k += p[i].front;
    }
    return k;
}

long plan_cheapest(const plan_point *p, size_t n, double target_s)
{
    long best = -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i].excluded || !(p[i].step_s <= target_s))
            continue;
        if (best < 0 || p[i].gpu_h < p[best].gpu_h ||
            (p[i].gpu_h == p[best].gpu_h && p[i].step_s < p[best].step_s))
            best = (long)i;
    }
    return best;
}

/* Front points sorted by GPU-hours for the line through them. */
static int cmp_gh(const void *a, const void *b)
{
    const plan_point *x = *(const plan_point *const *)a, *y = *(const plan_point *const *)b;
    if (x->gpu_h != y->gpu_h)
        return x->gpu_h < y->gpu_h ? -1 : 1;
    return x->step_s < y->step_s ? -1 : x->step_s > y->step_s;
}

int plan_plot(const plan_point *p, size_t n, double target_s, long cheapest, const char *dir,
              const char *title, ts_err *e)
{
    char dat[4096], png[4096], gp[4096];
    const plan_point **fr = calloc(n ? n : 1, sizeof *fr);
    size_t nf = 0;
    int rc = -1;
    ts_atomic a;
    if (!fr) {
        ts_errf(e, "out of memory");
        goto cleanup;
    }
    if (report_mkdir_p(dir, e))
        goto cleanup;
    snprintf(dat, sizeof dat, "%s/plan.dat", dir);
    snprintf(png, sizeof png, "%s/plan_front.png", dir);
    if (ts_atomic_open(&a, dat, e))
        goto cleanup;
    fprintf(a.f, "# tailsim plan: every feasible configuration\n"
                 "# gpu_hours_per_1000_steps step_s label excluded (1: above the off-policy "
                 "limit)\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(a.f, "%.6g %.6g ", p[i].gpu_h, p[i].step_s);
        report_put_dat_string(a.f, p[i].label, sizeof p[i].label);
        fprintf(a.f, " %d\n", p[i].excluded ? 1 : 0);
    }
    fprintf(a.f, "\n\n# the Pareto front, by GPU-hours\n");
    for (size_t i = 0; i < n; i++)
        if (p[i].front)
            fr[nf++] = &p[i];
    qsort(fr, nf, sizeof *fr, cmp_gh);
    for (size_t i = 0; i < nf; i++) {
        fprintf(a.f, "%.6g %.6g ", fr[i]->gpu_h, fr[i]->step_s);
        report_put_dat_string(a.f, fr[i]->label, sizeof fr[i]->label);
        fputc('\n', a.f);
    }
    fprintf(a.f, "\n\n# target step time (s) and the cheapest configuration meeting it\n");
    if (cheapest >= 0) {
        fprintf(a.f, "%.6g %.6g ", p[cheapest].gpu_h, p[cheapest].step_s);
        report_put_dat_string(a.f, p[cheapest].label, sizeof p[cheapest].label);
        fprintf(a.f, " %.6g\n", target_s > 0 ? target_s : 0.0);
    } else
        fprintf(a.f, "NaN NaN \"none\" %.6g\n", target_s > 0 ? target_s : 0.0);
    fprintf(a.f, "\n\n# the configurations off the front (labelled smaller, in grey)\n");
    for (size_t i = 0; i < n; i++)
        if (!p[i].front) {
            fprintf(a.f, "%.6g %.6g ", p[i].gpu_h, p[i].step_s);
            report_put_dat_string(a.f, p[i].label, sizeof p[i].label);
            fputc('\n', a.f);
        }
    if (ts_atomic_commit(&a, e))
        goto cleanup;
    if (!n) {
        remove(png);
        rc = 0;
        goto cleanup;
    }
    if (report_script("plan_front", gp, sizeof gp, e) ||
        report_gnuplot(gp, dat, png, title, dir, e))
        goto cleanup;
    rc = 0;
cleanup:
    free(fr);
    return rc;
}
