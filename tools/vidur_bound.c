/*
 * vidur-bound: what any cost model monotone in tokens can reach on a Vidur
 * operator profile (an analysis tool, not part of tailsim).
 *
 * For each op of a Vidur MLP profile and each tensor-parallel size, it fits
 * the best NON-DECREASING function of num_tokens to the measured times,
 * minimising the sum of relative errors |f - y| / y (weighted L1 isotonic
 * regression, solved exactly by dynamic programming over the measured values:
 * a weighted-L1 isotonic fit has an optimum taking only data values).  The
 * simulator needs such a model (more tokens never cost less), so the MAPE of
 * this fit is a lower bound on the MAPE of any admissible model, tailsim's
 * included.  Two tables: the fit over all tokens (op MAPE, and its per-band
 * MAPE), and the bound per band (the fit within the band only, a lower bound
 * for that band on its own).  Rows with a zero time are skipped, as
 * `tailsim calib vidur` skips them; repeated token counts (Vidur's files
 * repeat 2048 and 4096) share one value.
 *
 *   build/tools/vidur-bound FILE...     print the tables
 *   build/tools/vidur-bound --self-test check the fit against brute force
 *
 * Cost: O(n^2) per (op, TP) group of n rows; a 1044-row file takes ~10 ms.
 * Exit status 0, 1 on bad input or a failed self-test (message on stderr).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "models/vidur.h"

#define MAX_N 512 /* rows of one (op, TP) group; Vidur's files have 261 */

/* Best non-decreasing fit of y[0..n) at x[0..n) (sorted ascending; equal x
 * get one value) minimising sum |f_i - y_i| / y_i; writes f and returns the
 * summed relative error, or -1 when n is out of range.  y must be > 0. */
static double iso_fit(const int *x, const double *y, int n, double *f)
{
    static double v[MAX_N], dp[MAX_N * 2];
    static int arg[MAX_N][MAX_N], first[MAX_N];
    if (n <= 0 || n > MAX_N)
        return -1.0;
    /* candidate values: the sorted measured values */
    for (int i = 0; i < n; i++)
        v[i] = y[i];
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    /* blocks of equal x: block b starts at first[b] */
    int nb = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || x[i] != x[i - 1])
            first[nb++] = i;
    double *cur = dp, *prev = dp + MAX_N;
    /* cur[j]: least cost of blocks 0..b with block b's value <= v[j];
     * arg[b][j] the value index block b takes in that solution */
    for (int b = 0; b < nb; b++) {
        int end = b + 1 < nb ? first[b + 1] : n;
        double run = INFINITY;
        int ra = 0;
        for (int j = 0; j < n; j++) {
            double c = b ? prev[j] : 0.0;
            for (int i = first[b]; i < end; i++)
                c += fabs(v[j] - y[i]) / y[i];
            if (c < run) {
                run = c;
                ra = j;
            }
            cur[j] = run;
            arg[b][j] = ra;
        }
        double *t = cur;
        cur = prev;
        prev = t;
    }
    double total = prev[n - 1];
    int j = n - 1;
    for (int b = nb - 1; b >= 0; b--) {
        int end = b + 1 < nb ? first[b + 1] : n;
        j = arg[b][j];
        for (int i = first[b]; i < end; i++)
            f[i] = v[j];
    }
    return total;
}

/* Brute force over a fine grid of values (data values included) for small n:
 * the least summed relative error of a non-decreasing assignment. */
static double brute(const int *x, const double *y, int n, const double *grid, int g, int i,
                    int lo, double acc)
{
    if (i == n)
        return acc;
    double m = INFINITY;
    int hi = (i && x[i] == x[i - 1]) ? lo + 1 : g; /* equal x: the same value */
    for (int k = lo; k < hi; k++) {
        double c = brute(x, y, n, grid, g, i + 1, k, acc + fabs(grid[k] - y[i]) / y[i]);
        if (c < m)
            m = c;
    }
    return m;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The DP against brute force on seeded random inputs; returns 0 when every
 * case agrees. */
static int self_test(void)
{
    unsigned s = 12345;
    int bad = 0;
    for (int c = 0; c < 300; c++) {
        int n = 1 + c % 6;
        double y[8], f[8], grid[64];
        int x[8], g = 0;
        for (int i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            y[i] = 1.0 + (s >> 16) % 20;
            x[i] = i ? x[i - 1] + (int)((s >> 8) % 3 != 0) : 0; /* some ties */
            grid[g++] = y[i];
        }
        for (int k = 0; g < 40; k++)
            grid[g++] = 0.5 + 0.55 * k;
        qsort(grid, (size_t)g, sizeof grid[0], cmp_d);
        double dp = iso_fit(x, y, n, f), bf = brute(x, y, n, grid, g, 0, 0, 0.0);
        double chk = 0;
        for (int i = 0; i < n; i++) {
            chk += fabs(f[i] - y[i]) / y[i];
            if (i && (f[i] < f[i - 1] || (x[i] == x[i - 1] && f[i] != f[i - 1])))
                bad = 1;
        }
        if (fabs(dp - bf) > 1e-9 || fabs(chk - dp) > 1e-9) {
            fprintf(stderr, "self-test: case %d: dp %.9g brute %.9g fit %.9g\n", c, dp, bf, chk);
            bad = 1;
        }
    }
    if (!bad)
        printf("vidur-bound self-test: 300 random cases agree with brute force\n");
    return bad;
}

typedef struct acc {
    double sum[VIDUR_BANDS + 1]; /* summed relative error, %; [VIDUR_BANDS]: all */
    int n[VIDUR_BANDS + 1];
} acc;

/* Fits the rows of t with the given TP and op whose band is `band` (-1: all
 * tokens); adds each row's error to a (its band, and all).  Returns 0, or -1
 * when a group is too large. */
static int fit_group(const vidur_table *t, int op, int tp, int band, acc *a)
{
    static double y[MAX_N], f[MAX_N];
    static int tok[MAX_N];
    int n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const vidur_row *r = &t->rows[i];
        if (r->tp != tp || r->ms[op] <= 0)
            continue;
        if (band >= 0 && vidur_band_of(r->tokens) != band)
            continue;
        if (n == MAX_N)
            return -1;
        /* insert by tokens */
        int j = n++;
        for (; j > 0 && tok[j - 1] > r->tokens; j--) {
            tok[j] = tok[j - 1];
            y[j] = y[j - 1];
        }
        tok[j] = r->tokens;
        y[j] = r->ms[op];
    }
    if (n == 0)
        return 0;
    if (iso_fit(tok, y, n, f) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        double e = fabs(f[i] - y[i]) / y[i] * 100.0;
        int b = vidur_band_of(tok[i]);
        a->sum[b] += e;
        a->n[b]++;
        a->sum[VIDUR_BANDS] += e;
        a->n[VIDUR_BANDS]++;
    }
    return 0;
}

static double mean(const acc *a, int b)
{
    return a->n[b] ? a->sum[b] / a->n[b] : 0.0;
}

/* Prints both tables for one loaded file; returns 0, or -1 (message
 * printed) on a group the tool cannot fit. */
static int report(const char *path, const vidur_table *t)
{
    int tps[64], ntp = 0;
    for (size_t i = 0; i < t->n; i++) {
        int seen = 0;
        for (int k = 0; k < ntp; k++)
            seen |= tps[k] == t->rows[i].tp;
        if (!seen && ntp < 64)
            tps[ntp++] = t->rows[i].tp;
    }
    const char *base = strrchr(path, '/');
    printf("%s: best non-decreasing fit in tokens per (op, TP), MAPE %%\n", base ? base + 1 : path);
    printf("%-26s %8s %8s %8s %8s %8s   %8s %8s %8s %8s\n", "op", "all", "1-32", "33-256",
           "257-1024", "1025-", "b:1-32", "b:33-256", "b:257-", "b:1025-");
    for (int op = 0; op < VOP_COUNT; op++) {
        if (!t->has[op] || op == VOP_ALL_REDUCE)
            continue;
        acc all = {0}, by = {0};
        for (int k = 0; k < ntp; k++) {
            if (fit_group(t, op, tps[k], -1, &all))
                goto too_big;
            for (int b = 0; b < VIDUR_BANDS; b++)
                if (fit_group(t, op, tps[k], b, &by))
                    goto too_big;
        }
        printf("%-26s %8.2f", vidur_op_names[op], mean(&all, VIDUR_BANDS));
        for (int b = 0; b < VIDUR_BANDS; b++)
            printf(" %8.2f", mean(&all, b));
        printf("  ");
        for (int b = 0; b < VIDUR_BANDS; b++)
            printf(" %8.2f", mean(&by, b));
        printf("\n");
    }
    printf("(all, 1-32 ...: one fit over all tokens; b:...: a fit within the band alone)\n");
    return 0;
too_big:
    fprintf(stderr, "vidur-bound: %s: an (op, TP) group has more than %d rows\n", path, MAX_N);
    return -1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--self-test"))
        return self_test();
    if (argc < 2) {
        fprintf(stderr, "usage: vidur-bound FILE... | --self-test\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        vidur_table t;
        ts_err e = {0};
        if (vidur_load(argv[i], "median", &t, &e)) {
            fprintf(stderr, "vidur-bound: %s\n", e.msg);
            return 1;
        }
        int rc = report(argv[i], &t);
        vidur_free(&t);
        if (rc)
            return 1;
        if (i + 1 < argc)
            printf("\n");
    }
    return 0;
}
