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
 *   build/tools/vidur-bound --by-shape FILE...
 *                                       one fit per (op, kernel shape) over
 *                                       all the files: the bound for a model
 *                                       that sees only the kernel's shape
 *                                       and the tokens (as tailsim's does)
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

#define MAX_N 4096 /* rows of one group: 261 per (op, TP) in Vidur's files */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Best non-decreasing fit of y[0..n) at x[0..n) (sorted ascending; equal x
 * get one value) minimising sum |f_i - y_i| / y_i; writes f and returns the
 * summed relative error, or -1 when n is out of range or memory runs out.
 * y must be > 0. */
static double iso_fit(const int *x, const double *y, int n, double *f)
{
    static double v[MAX_N], dp[MAX_N * 2];
    static int first[MAX_N];
    if (n <= 0 || n > MAX_N)
        return -1.0;
    /* candidate values: the distinct measured values, sorted */
    for (int i = 0; i < n; i++)
        v[i] = y[i];
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    int nv = 0;
    for (int i = 0; i < n; i++)
        if (nv == 0 || v[i] != v[nv - 1])
            v[nv++] = v[i];
    /* blocks of equal x: block b starts at first[b] */
    int nb = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || x[i] != x[i - 1])
            first[nb++] = i;
    int *arg = malloc((size_t)nb * (size_t)nv * sizeof *arg);
    if (!arg)
        return -1.0;
    double *cur = dp, *prev = dp + MAX_N;
    /* cur[j]: least cost of blocks 0..b with block b's value <= v[j];
     * arg[b * nv + j] the value index block b takes in that solution */
    for (int b = 0; b < nb; b++) {
        int end = b + 1 < nb ? first[b + 1] : n;
        double run = INFINITY;
        int ra = 0;
        for (int j = 0; j < nv; j++) {
            double c = b ? prev[j] : 0.0;
            for (int i = first[b]; i < end; i++)
                c += fabs(v[j] - y[i]) / y[i];
            if (c < run) {
                run = c;
                ra = j;
            }
            cur[j] = run;
            arg[b * nv + j] = ra;
        }
        double *t = cur;
        cur = prev;
        prev = t;
    }
    double total = prev[nv - 1];
    int j = nv - 1;
    for (int b = nb - 1; b >= 0; b--) {
        int end = b + 1 < nb ? first[b + 1] : n;
        j = arg[b * nv + j];
        for (int i = first[b]; i < end; i++)
            f[i] = v[j];
    }
    free(arg);
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

/* The shape of the kernel an op runs for a row, as the simulator sees it
 * (models/cost.c layer_op_time): two numbers and the op's kind. */
static void op_shape(const vidur_row *r, int op, double *k1, double *k2)
{
    const llm_desc *a = &r->arch;
    double h = a->hidden, hd = a->head_dim, ffn = (double)a->ffn / r->tp;
    double heads = (double)a->heads / r->tp, kvh = (double)a->kv_heads / r->tp;
    if (kvh < 1)
        kvh = 1;
    *k2 = 0;
    switch (op) {
    case VOP_EMB: *k1 = h; *k2 = (double)a->vocab / r->tp; break;
    case VOP_PRE_PROJ: *k1 = (heads + 2 * kvh) * hd; *k2 = h; break;
    case VOP_ROPE: *k1 = heads * hd; *k2 = kvh * hd; break;
    case VOP_POST_PROJ: *k1 = h; *k2 = heads * hd; break;
    case VOP_UP_PROJ: *k1 = a->gated ? 2 * ffn : ffn; *k2 = h; break;
    case VOP_ACT: *k1 = ffn; *k2 = a->gated; break;
    case VOP_DOWN_PROJ: *k1 = h; *k2 = ffn; break;
    default: *k1 = h; break; /* norms, residual add */
    }
}

typedef struct pt {
    double k1, k2;  /* kernel shape */
    int tokens, file;
    double y;       /* measured, ms */
} pt;

static int cmp_pt(const void *a, const void *b)
{
    const pt *x = a, *y = b;
    if (x->k1 != y->k1)
        return x->k1 < y->k1 ? -1 : 1;
    if (x->k2 != y->k2)
        return x->k2 < y->k2 ? -1 : 1;
    return (x->tokens > y->tokens) - (x->tokens < y->tokens);
}

/* Fits each shape group of p[0..n) (sorted by cmp_pt), restricted to band
 * (-1: all tokens), adding each point's error to a[its file].  Returns 0, or
 * -1 when a group is too large. */
static int fit_shapes(const pt *p, int n, int band, acc *a)
{
    static double y[MAX_N], f[MAX_N];
    static int tok[MAX_N], fl[MAX_N];
    for (int g0 = 0; g0 < n;) {
        int g1 = g0;
        while (g1 < n && p[g1].k1 == p[g0].k1 && p[g1].k2 == p[g0].k2)
            g1++;
        int m = 0;
        for (int i = g0; i < g1; i++) {
            if (band >= 0 && vidur_band_of(p[i].tokens) != band)
                continue;
            if (m == MAX_N)
                return -1;
            tok[m] = p[i].tokens;
            y[m] = p[i].y;
            fl[m++] = p[i].file;
        }
        if (m && iso_fit(tok, y, m, f) < 0)
            return -1;
        for (int i = 0; i < m; i++) {
            double e = fabs(f[i] - y[i]) / y[i] * 100.0;
            int b = vidur_band_of(tok[i]);
            a[fl[i]].sum[b] += e;
            a[fl[i]].n[b]++;
            a[fl[i]].sum[VIDUR_BANDS] += e;
            a[fl[i]].n[VIDUR_BANDS]++;
        }
        g0 = g1;
    }
    return 0;
}

/* --by-shape: one fit per (op, kernel shape) over the rows of every file
 * (a kernel of the same shape gets the same time whichever file measured
 * it); prints the table of each file.  Returns 0, or -1 (message printed). */
static int report_shapes(char **paths, const vidur_table *t, int nf)
{
    size_t cap = 0;
    for (int i = 0; i < nf; i++)
        cap += t[i].n;
    pt *p = malloc((cap ? cap : 1) * sizeof *p);
    acc (*all)[VOP_COUNT] = calloc((size_t)nf, sizeof *all);
    acc (*by)[VOP_COUNT] = calloc((size_t)nf, sizeof *by);
    int rc = -1;
    if (!p || !all || !by) {
        fprintf(stderr, "vidur-bound: out of memory\n");
        goto done;
    }
    for (int op = 0; op < VOP_ALL_REDUCE; op++) {
        int n = 0;
        for (int i = 0; i < nf; i++)
            for (size_t r = 0; t[i].has[op] && r < t[i].n; r++) {
                if (t[i].rows[r].ms[op] <= 0)
                    continue;
                op_shape(&t[i].rows[r], op, &p[n].k1, &p[n].k2);
                p[n].tokens = t[i].rows[r].tokens;
                p[n].file = i;
                p[n++].y = t[i].rows[r].ms[op];
            }
        qsort(p, (size_t)n, sizeof *p, cmp_pt);
        acc a[64], b[64];
        memset(a, 0, sizeof a);
        memset(b, 0, sizeof b);
        if (fit_shapes(p, n, -1, a))
            goto too_big;
        for (int band = 0; band < VIDUR_BANDS; band++)
            if (fit_shapes(p, n, band, b))
                goto too_big;
        for (int i = 0; i < nf; i++) {
            all[i][op] = a[i];
            by[i][op] = b[i];
        }
    }
    for (int i = 0; i < nf; i++) {
        const char *base = strrchr(paths[i], '/');
        printf("%s%s: best non-decreasing fit in tokens per (op, kernel shape) over all the "
               "files, MAPE %%\n", i ? "\n" : "", base ? base + 1 : paths[i]);
        printf("%-26s %8s %8s %8s %8s %8s   %8s %8s %8s %8s\n", "op", "all", "1-32", "33-256",
               "257-1024", "1025-", "b:1-32", "b:33-256", "b:257-", "b:1025-");
        for (int op = 0; op < VOP_ALL_REDUCE; op++) {
            if (!t[i].has[op])
                continue;
            printf("%-26s %8.2f", vidur_op_names[op], mean(&all[i][op], VIDUR_BANDS));
            for (int b = 0; b < VIDUR_BANDS; b++)
                printf(" %8.2f", mean(&all[i][op], b));
            printf("  ");
            for (int b = 0; b < VIDUR_BANDS; b++)
                printf(" %8.2f", mean(&by[i][op], b));
            printf("\n");
        }
    }
    printf("(all, 1-32 ...: one fit over all tokens; b:...: a fit within the band alone)\n");
    rc = 0;
    goto done;
too_big:
    fprintf(stderr, "vidur-bound: a shape group has more than %d rows\n", MAX_N);
done:
    free(p);
    free(all);
    free(by);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--self-test"))
        return self_test();
    int shapes = argc > 1 && !strcmp(argv[1], "--by-shape");
    char **paths = argv + 1 + shapes;
    int nf = argc - 1 - shapes;
    if (nf < 1 || nf > 64) {
        fprintf(stderr, "usage: vidur-bound [--by-shape] FILE... (at most 64) | --self-test\n");
        return 1;
    }
    vidur_table t[64];
    int rc = 0, loaded = 0;
    for (; loaded < nf; loaded++) {
        ts_err e = {0};
        if (vidur_load(paths[loaded], "median", &t[loaded], &e)) {
            fprintf(stderr, "vidur-bound: %s\n", e.msg);
            rc = 1;
            break;
        }
    }
    if (!rc && shapes)
        rc = report_shapes(paths, t, nf) ? 1 : 0;
    for (int i = 0; !rc && !shapes && i < nf; i++) {
        if (i)
            printf("\n");
        rc = report(paths[i], &t[i]) ? 1 : 0;
    }
    for (int i = 0; i < loaded; i++)
        vidur_free(&t[i]);
    return rc;
}
