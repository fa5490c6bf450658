/*
 * DCP report: turns a stored `tailsim dcp` run into DIR/dcp.md (the
 * strategy table: steps, step time, tokens/s, speedup over bucket,
 * imbalance, GPU-idle fraction, peak memory) and, when the run carries
 * imbalance at several GPU counts (`--scale`, metrics "g<N>.<strategy>.
 * imbalance"), DIR/dcp_imbalance.dat and DIR/dcp_imbalance.png drawn by
 * the static script reports/dcp_imbalance.gp with `gnuplot -d -c`.
 *
 * Strategies are discovered from the run's metric keys ("<name>.steps"), in
 * the order the command stored them, so the report needs nothing but the
 * record.  Files appear atomically (.md/.dat through ts_atomic_*, the PNG
 * rendered to a temporary name and renamed by report_gnuplot()).  The
 * scenario and the strategy names come from the record, so from the
 * database: they go into dcp.md through report_put_md() and into
 * dcp_imbalance.dat as one word each (put_word()).  Nothing here prints or
 * exits.
 */
#include "reports/dcp_report.h"
#include "reports/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"


#define MAX_STRAT 16
#define PATHN 4200

static const int scale_gpus[] = {8, 16, 32, 64, 128};
#define N_SCALE 5

/* Strategy names in the order of their "<name>.steps" metrics. */
static int strategies(const run_record *r, char names[MAX_STRAT][48])
{
    int n = 0;
    for (size_t i = 0; i < r->n_metrics && n < MAX_STRAT; i++) {
        const char *k = r->metrics[i].key;
        size_t l = strlen(k);
        if (l > 6 && !strcmp(k + l - 6, ".steps") && k[0] != 'g') {
            snprintf(names[n], 48, "%.*s", (int)(l - 6), k);
            n++;
        }
    }
    return n;
}

/* A strategy name as the first word of a .dat block, which the script
 * reads as the line's title (columnheader): every byte that would end or
 * quote the word, or make the line a comment, written as '_'. */
static void put_word(FILE *f, const char *s)
{
    for (size_t i = 0; s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        fputc(c <= ' ' || c == 0x7f || c == '"' || (c == '#' && !i) ? '_' : c, f);
    }
}

static double metric_of(const run_record *r, const char *name, const char *what)
{
    char key[96];
    double v;
    snprintf(key, sizeof key, "%.47s.%.40s", name, what);
    return run_get_metric(r, key, &v) == 0 ? v : NAN;
}

/* The strategy table of r's ns strategies (names) into f. */
static void md_strategies(FILE *f, const run_record *r, char (*names)[48], int ns)
{
    fprintf(f, "| strategy | steps | step (s) | total (s) | tokens/s | speedup | imbalance "
               "| imbalance (sampler's estimate) | GPU idle | peak GB | mean gas |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < ns; i++) {
        const char *n = names[i];
        /* runs saved before imbalance_plan existed have none: "-" */
        double ip = metric_of(r, n, "imbalance_plan");
        char ipb[32];
        if (isnan(ip))
            snprintf(ipb, sizeof ipb, "-");
        else
            snprintf(ipb, sizeof ipb, "%.1f%%", 100 * ip);
        fputs("| ", f);
        report_put_md(f, n, sizeof names[i], REPORT_MD_CELL);
        fprintf(f, " | %.0f | %.4f | %.3f | %.4g | %.2fx | %.1f%% | %s | %.1f%% | %.1f | %.2f |\n",
                metric_of(r, n, "steps"), metric_of(r, n, "step_s"), metric_of(r, n, "time_s"),
                metric_of(r, n, "tokens_per_s"), metric_of(r, n, "speedup"),
                100 * metric_of(r, n, "imbalance"), ipb, 100 * metric_of(r, n, "idle_fraction"),
                metric_of(r, n, "peak_mem_gb"), metric_of(r, n, "mean_gas"));
    }
}

int dcp_report_write(const run_record *r, const char *dir, ts_err *e)
{
    if (strcmp(r->command, "dcp"))
        return ts_errf(e, "run %lld is a '%.*s' run, not dcp", (long long)r->id,
                       (int)sizeof r->command, r->command);
    char names[MAX_STRAT][48];
    int ns = strategies(r, names);
    char path[PATHN];
    ts_atomic a;
    snprintf(path, sizeof path, "%s/dcp.md", dir);
    if (ts_atomic_open(&a, path, e))
        return -1;
    FILE *f = a.f;
    fputs("# DCP: ", f);
    report_put_md(f, r->scenario, sizeof r->scenario, 0);
    if (r->id > 0) /* a stored run; the paper report's runs are not stored */
        fprintf(f, " (run %lld)", (long long)r->id);
    fprintf(f, "\n\n");
    md_strategies(f, r, names, ns);
    /* the scale metrics are "g<N>.<name>.imbalance" */
    int have_scale = 0;
    double imb[N_SCALE][MAX_STRAT];
    for (int k = 0; k < N_SCALE; k++)
        for (int i = 0; i < ns; i++) {
            char key[96];
            double v;
            snprintf(key, sizeof key, "g%d.%.47s.imbalance", scale_gpus[k], names[i]);
            imb[k][i] = run_get_metric(r, key, &v) == 0 ? v : NAN;
            have_scale |= !isnan(imb[k][i]);
        }
    if (have_scale) {
        fprintf(f, "\n## Imbalance vs GPU count\n\n| GPUs |");
        for (int i = 0; i < ns; i++)
            if (!isnan(imb[0][i])) {
                fputc(' ', f);
                report_put_md(f, names[i], sizeof names[i], REPORT_MD_CELL);
                fputs(" |", f);
            }
        fprintf(f, "\n|---:|");
        for (int i = 0; i < ns; i++)
            if (!isnan(imb[0][i]))
                fprintf(f, "---:|");
        fprintf(f, "\n");
        for (int k = 0; k < N_SCALE; k++) {
            fprintf(f, "| %d |", scale_gpus[k]);
            for (int i = 0; i < ns; i++)
                if (!isnan(imb[0][i]))
                    fprintf(f, " %.1f%% |", 100 * imb[k][i]);
            fprintf(f, "\n");
        }
        fprintf(f, "\n![imbalance vs GPUs](dcp_imbalance.png)\n");
    }
    if (ts_atomic_commit(&a, e))
        return -1;
    if (!have_scale)
        return 0;

    char dat[PATHN], png[PATHN], script[PATHN], title[400];
    snprintf(dat, sizeof dat, "%s/dcp_imbalance.dat", dir);
    snprintf(png, sizeof png, "%s/dcp_imbalance.png", dir);
    if (ts_atomic_open(&a, dat, e))
        return -1;
    int blocks = 0;
    for (int i = 0; i < ns; i++) {
        if (isnan(imb[0][i]))
            continue;
        fputs(blocks ? "\n\n" : "", a.f);
        put_word(a.f, names[i]);
        fputs(" imbalance_percent\n", a.f);
        for (int k = 0; k < N_SCALE; k++)
            if (!isnan(imb[k][i]))
                fprintf(a.f, "%d %.6g\n", scale_gpus[k], 100 * imb[k][i]);
        blocks++;
    }
    if (ts_atomic_commit(&a, e))
        return -1;
    if (report_script("dcp_imbalance", script, sizeof script, e))
        return -1;
    if (r->id > 0)
        snprintf(title, sizeof title, "run %lld: %.*s - imbalance vs GPU count", (long long)r->id,
                 (int)sizeof r->scenario, r->scenario);
    else /* an unsaved run (the paper report's) */
        snprintf(title, sizeof title, "%.*s - imbalance vs GPU count", (int)sizeof r->scenario,
                 r->scenario);
    return report_gnuplot(script, dat, png, title, dir, e);
}

int dcp_dist_figure_write(const char *dir, const char *scenario, int npts,
                          const double *long_share, int ns, const char (*names)[48],
                          const double *speedup, const double *bucket_imb, ts_err *e)
{
    char dat[PATHN], png[PATHN], script[PATHN], title[400];
    snprintf(dat, sizeof dat, "%s/dcp_dist.dat", dir);
    snprintf(png, sizeof png, "%s/dcp_dist.png", dir);
    ts_atomic a;
    if (ts_atomic_open(&a, dat, e))
        return -1;
    int blocks = 0;
    for (int i = 0; i < ns; i++) {
        fputs(blocks++ ? "\n\n" : "", a.f);
        put_word(a.f, names[i]);
        fputs(" speedup\n", a.f);
        for (int k = 0; k < npts; k++)
            if (!isnan(speedup[k * ns + i]))
                fprintf(a.f, "%.6g %.6g\n", 100 * long_share[k], speedup[k * ns + i]);
    }
    fputs(blocks ? "\n\n" : "", a.f);
    fputs("bucket_imbalance imbalance_percent\n", a.f);
    for (int k = 0; k < npts; k++)
        fprintf(a.f, "%.6g %.6g\n", 100 * long_share[k], 100 * bucket_imb[k]);
    if (ts_atomic_commit(&a, e))
        return -1;
    if (report_script("dcp_dist", script, sizeof script, e))
        return -1;
    snprintf(title, sizeof title, "%.200s - speedup and bucket imbalance vs long share", scenario);
    return report_gnuplot(script, dat, png, title, dir, e);
}
