/*
 * Fitting hw_desc's physical parameters to measured kernel times, and the
 * hold-out check built on it.
 *
 * fit_hw() is a GSL nonlinear least-squares fit (gsl_multifit_nlinear,
 * trust region with Levenberg-Marquardt steps, forward-difference Jacobian)
 * of up to six continuous parameters: gemm_eff, gemm_half_flops,
 * gemm_lat_s, launch_s, mem_eff, attn_eff.  The residual of a row is its
 * relative error (predicted - measured) / measured, so a 5 us kernel counts
 * as much as a 5 ms one; the prediction is calib_predict(), i.e. the very
 * functions the simulator charges.  The parameters are mapped so that the
 * search is unconstrained and the results stay physical: efficiencies
 * through a logistic (always in (0, 1)), latencies and gemm_half_flops
 * through logarithms (always > 0).  Before fitting, each parameter is
 * probed: one that no selected row depends on is kept (FIT_UNUSED), and
 * launch_s is kept when only GEMM rows are present, where it cannot be told
 * from gemm_lat_s.  gemm_half_flops adds half/(peak*eff) to compute-bound
 * GEMMs only, which is almost what gemm_lat_s does, so it is fitted in a
 * second pass from the first pass's solution and kept only when it lowers
 * the cost by at least 2% with a relative standard error (from the
 * covariance at the solution) under 25%; otherwise it stays 0 and is
 * reported FIT_DEGENERATE.  The first pass runs from the INI's values and
 * from two far-apart starts and keeps the lowest cost, since the rooflines'
 * max() terms make the cost only piecewise smooth.  Everything is
 * deterministic: the same rows give the same floating-point operations and
 * so the same values bit for bit.  Cost: a residual is a few dozen flops, a
 * Jacobian p+1 passes over the rows; 3800 rows fit in about 20 ms (the test
 * suite holds it under 0.1 s), so hw_load() fits at every load and nothing
 * is cached.  GSL's error handler is switched off for the duration and
 * restored, and every status is checked.
 *
 * calib_check_run() splits the rows per op, sorted by shape, alternately
 * into a fit half and a held-out half, fits on the first and measures the
 * second (models/calib.c renders the report as text or JSON);
 * fit_write_ini() writes a fitted description as a hardware INI.
 */
#include "models/fit.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

const char *const fit_param_names[FIT_NPARAM] = {
    "gemm_eff", "gemm_half_flops", "gemm_lat_s", "launch_s", "mem_eff", "attn_eff",
};
const char *const fit_state_names[3] = {"fitted", "unused", "degenerate"};

#define MAX_ITER 200

static double *param_ref(hw_desc *hw, int j)
{
    switch (j) {
    case FIT_GEMM_EFF: return &hw->gemm_eff;
    case FIT_GEMM_HALF: return &hw->gemm_half_flops;
    case FIT_GEMM_LAT: return &hw->gemm_lat_s;
    case FIT_LAUNCH: return &hw->launch_s;
    case FIT_MEM_EFF: return &hw->mem_eff;
    default: return &hw->attn_eff;
    }
}

static int is_eff(int j) { return j == FIT_GEMM_EFF || j == FIT_MEM_EFF || j == FIT_ATTN_EFF; }
static double unit_of(int j) { return j == FIT_GEMM_HALF ? 1e9 : 1e-6; }

/* Unconstrained coordinate of a parameter value, and back. */
static double to_u(int j, double v)
{
    if (is_eff(j)) {
        v = fmin(fmax(v, 1e-4), 0.9999);
        return log(v / (1.0 - v));
    }
    return log(fmax(v, 1e-6 * unit_of(j)) / unit_of(j));
}

static double from_u(int j, double u)
{
    u = fmin(fmax(u, -40.0), 40.0);
    return is_eff(j) ? 1.0 / (1.0 + exp(-u)) : unit_of(j) * exp(u);
}

typedef struct fit_ctx {
    hw_desc hw;             /* trial description */
    const calib_row *rows;
    const size_t *idx;      /* fitted rows */
    const int *kind;        /* their op kinds */
    size_t n;
    int which[FIT_NPARAM];  /* parameter at each vector position */
    size_t p;
} fit_ctx;

static void set_params(fit_ctx *c, const gsl_vector *x)
{
    for (size_t i = 0; i < c->p; i++)
        *param_ref(&c->hw, c->which[i]) = from_u(c->which[i], gsl_vector_get(x, i));
}

static int resid(const gsl_vector *x, void *params, gsl_vector *f)
{
    fit_ctx *c = params;
    set_params(c, x);
    for (size_t i = 0; i < c->n; i++) {
        const calib_row *r = &c->rows[c->idx[i]];
        double pred = calib_predict(&c->hw, c->kind[i], r) * 1e6;
        double v = (pred - r->median_us) / r->median_us;
        if (!isfinite(v))
            return GSL_EDOM;
        gsl_vector_set(f, i, v);
    }
    return GSL_SUCCESS;
}

/* Sum of squared relative errors of the fitted rows under hw. */
static double cost_of(const fit_ctx *c, const hw_desc *hw)
{
    double s = 0;
    for (size_t i = 0; i < c->n; i++) {
        const calib_row *r = &c->rows[c->idx[i]];
        double v = (calib_predict(hw, c->kind[i], r) * 1e6 - r->median_us) / r->median_us;
        s += v * v;
    }
    return s;
}

typedef struct nlls_out {
    int iters, status, info;
    double cost;            /* sum of squared residuals at the solution */
    double se[FIT_NPARAM];  /* standard errors in u (relative, for log parameters) */
} nlls_out;

/* Runs the trust-region fit of c->which[0..p-1] from c->hw; on success
 * c->hw holds the solution. */
static int run_nlls(fit_ctx *c, nlls_out *o, ts_err *e)
{
    int rc = -1;
    gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, c->n, c->p);
    gsl_vector *x = gsl_vector_alloc(c->p);
    gsl_matrix *cov = gsl_matrix_alloc(c->p, c->p);
    if (!w || !x || !cov) {
        ts_errf(e, "fit: out of memory (%zu rows, %zu parameters)", c->n, c->p);
        goto cleanup;
    }
    for (size_t i = 0; i < c->p; i++)
        gsl_vector_set(x, i, to_u(c->which[i], *param_ref(&c->hw, c->which[i])));
    gsl_multifit_nlinear_fdf fdf = {.f = resid, .df = NULL, .fvv = NULL, .n = c->n,
                                    .p = c->p, .params = c};
    int s = gsl_multifit_nlinear_init(x, &fdf, w);
    if (s) {
        ts_errf(e, "fit: gsl_multifit_nlinear_init: %s", gsl_strerror(s));
        goto cleanup;
    }
    s = gsl_multifit_nlinear_driver(MAX_ITER, 1e-10, 1e-10, 0.0, NULL, NULL, &o->info, w);
    if (s != GSL_SUCCESS && s != GSL_ENOPROG && s != GSL_EMAXITER) {
        ts_errf(e, "fit: gsl_multifit_nlinear_driver: %s", gsl_strerror(s));
        goto cleanup;
    }
    o->status = s;
    o->iters = (int)gsl_multifit_nlinear_niter(w);
    set_params(c, gsl_multifit_nlinear_position(w));
    gsl_vector *f = gsl_multifit_nlinear_residual(w);
    gsl_blas_ddot(f, f, &o->cost);
    s = gsl_multifit_nlinear_covar(gsl_multifit_nlinear_jac(w), 0.0, cov);
    double dof = c->n > c->p ? (double)(c->n - c->p) : 1.0;
    for (size_t i = 0; i < c->p; i++) {
        double v = s ? INFINITY : gsl_matrix_get(cov, i, i) * o->cost / dof;
        o->se[i] = isfinite(v) && v >= 0 ? sqrt(v) : INFINITY;
    }
    rc = 0;
cleanup:
    gsl_multifit_nlinear_free(w);
    gsl_vector_free(x);
    gsl_matrix_free(cov);
    return rc;
}

/* 1 when changing parameter j moves any prediction. */
static int depends_on(const fit_ctx *c, const hw_desc *start, int j)
{
    hw_desc h = *start;
    double *v = param_ref(&h, j);
    *v = is_eff(j) ? *v * 0.5 : *v + (j == FIT_GEMM_HALF ? 1e10 : 1e-5);
    for (size_t i = 0; i < c->n; i++) {
        const calib_row *r = &c->rows[c->idx[i]];
        double a = calib_predict(start, c->kind[i], r), b = calib_predict(&h, c->kind[i], r);
        if (fabs(a - b) > 1e-9 * fabs(a))
            return 1;
    }
    return 0;
}

static void stop_words(const nlls_out *o, char *buf, size_t n)
{
    if (o->status == GSL_EMAXITER)
        snprintf(buf, n, "iteration limit (%d)", MAX_ITER);
    else if (o->status == GSL_ENOPROG)
        snprintf(buf, n, "no further progress");
    else
        snprintf(buf, n, "converged (%s)", o->info == 1 ? "small step" : "small gradient");
}

/* Selects the rows to fit, those of select (NULL: all n) whose op the
 * model prices, into idx and kind (c->n of them), counting the others
 * into out->skipped.  Returns 1 when a selected row is not a GEMM, else 0. */
static int fit_select(fit_ctx *c, size_t *idx, int *kind, size_t n,
                      const unsigned char *select, fit_result *out)
{
    int non_gemm = 0;
    for (size_t i = 0; i < n; i++) {
        if (select && !select[i])
            continue;
        int k = calib_op_kind(c->rows[i].op);
        if (k < 0) {
            out->skipped++;
            continue;
        }
        idx[c->n] = i;
        kind[c->n++] = k;
        non_gemm |= k != CALIB_OP_GEMM;
    }
    return non_gemm;
}

/* Pass 1's parameters: every one the rows depend on (in c->which), but
 * gemm_half_flops (set to 0) and launch_s without non-GEMM rows; the
 * others' states into out->state.  Returns 1 when the rows depend on
 * gemm_half_flops, else 0. */
static int fit_choose(fit_ctx *c, int non_gemm, fit_result *out)
{
    c->hw.gemm_half_flops = 0;
    int half_used = 0;
    for (int j = 0; j < FIT_NPARAM; j++) {
        int used = depends_on(c, &c->hw, j);
        if (j == FIT_GEMM_HALF) {
            half_used = used;
            out->state[j] = used ? FIT_DEGENERATE : FIT_UNUSED;
        } else if (!used) {
            out->state[j] = FIT_UNUSED;
        } else if (j == FIT_LAUNCH && !non_gemm) {
            out->state[j] = FIT_DEGENERATE;
        } else {
            out->state[j] = FIT_FITTED;
            c->which[c->p++] = j;
        }
    }
    return half_used;
}

/* Pass 1: fits c->which from the INI's values (c->hw), then from two
 * far-apart starts (the max() in the rooflines makes the cost piecewise
 * smooth: a start on the wrong side of a kink may stop in a worse valley);
 * the lowest cost wins, the INI start on ties.  c->hw gets the winner and
 * *o its fit.  Returns 0, or -1 with e set. */
static int fit_pass1(fit_ctx *c, nlls_out *o, ts_err *e)
{
    static const double alt[2][FIT_NPARAM] = {
        /* gemm_eff, half, gemm_lat_s, launch_s, mem_eff, attn_eff */
        {0.5, 0, 10e-6, 5e-6, 0.5, 0.2},
        {0.95, 0, 1e-6, 0.5e-6, 0.95, 0.7},
    };
    const hw_desc h0 = c->hw;
    if (c->p > 0 && run_nlls(c, o, e))
        return -1;
    if (c->p == 0)
        o->cost = cost_of(c, &c->hw);
    hw_desc best = c->hw;
    for (int a = 0; a < 2 && c->p > 0; a++) {
        c->hw = h0;
        for (size_t i = 0; i < c->p; i++)
            *param_ref(&c->hw, c->which[i]) = alt[a][c->which[i]];
        nlls_out oa = {0};
        if (run_nlls(c, &oa, e))
            return -1;
        if (oa.cost < o->cost * (1.0 - 1e-9)) {
            *o = oa;
            best = c->hw;
        }
    }
    c->hw = best;
    return 0;
}

/* Pass 2: gemm_half_flops free as well, from pass 1's solution (c->hw, its
 * fit o1; start's value or 1e8 to begin with); its solution replaces *best
 * and *kept when it lowers the cost by at least 2% with a relative standard
 * error under 25%.  Records the attempt in out.  Returns 0, or -1 with e
 * set. */
static int fit_pass2(fit_ctx *c, const hw_desc *start, const nlls_out *o1, hw_desc *best,
                     nlls_out *kept, fit_result *out, ts_err *e)
{
    c->which[c->p++] = FIT_GEMM_HALF;
    c->hw.gemm_half_flops = start->gemm_half_flops > 0 ? start->gemm_half_flops : 1e8;
    nlls_out o2 = {0};
    if (run_nlls(c, &o2, e))
        return -1;
    out->half_tried = 1;
    out->half_gain = o1->cost > 0 ? (o1->cost - o2.cost) / o1->cost : 0.0;
    if (out->half_gain >= 0.02 && o2.se[c->p - 1] < 0.25) {
        *kept = o2;
        *best = c->hw;
        out->state[FIT_GEMM_HALF] = FIT_FITTED;
    }
    return 0;
}

/* The fit's outcome into out: the kept description best and its
 * parameters, the kept run's iterations, status and how it stopped, the
 * RMS relative error after.  Cannot fail. */
static void fit_report(const fit_ctx *c, const hw_desc *best, const nlls_out *kept,
                       fit_result *out)
{
    out->hw = *best;
    for (int j = 0; j < FIT_NPARAM; j++)
        out->after[j] = *param_ref(&out->hw, j);
    out->iterations = kept->iters;
    out->gsl_status = kept->status;
    if (c->p > 0)
        stop_words(kept, out->stop, sizeof out->stop);
    else
        snprintf(out->stop, sizeof out->stop, "nothing to fit");
    out->rms_after = sqrt(cost_of(c, &out->hw) / (double)c->n);
}

int fit_hw(const hw_desc *start, const calib_row *rows, size_t n, const unsigned char *select,
           fit_result *out, ts_err *e)
{
    memset(out, 0, sizeof *out);
    out->hw = *start;
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    int *kind = malloc((n ? n : 1) * sizeof *kind);
    int rc = -1;
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    fit_ctx c = {.hw = *start, .rows = rows, .idx = idx, .kind = kind};
    /* measured attention replaces the published FlashAttention table
     * (attn_fa_version) by one fitted attn_eff; kept when no row uses it */
    c.hw.attn_fa_version = 0;
    if (!idx || !kind) {
        ts_errf(e, "fit: out of memory for %zu rows", n);
        goto cleanup;
    }
    int non_gemm = fit_select(&c, idx, kind, n, select, out);
    out->rows = c.n;
    for (int j = 0; j < FIT_NPARAM; j++)
        out->before[j] = out->after[j] = *param_ref(&c.hw, j);
    if (c.n == 0) {
        ts_errf(e, "fit: no rows of a modelled op (%zu rows skipped)", out->skipped);
        goto cleanup;
    }
    /* pass 1: every parameter the rows depend on, gemm_half_flops at 0 */
    int half_used = fit_choose(&c, non_gemm, out);
    if (c.n < c.p + 1) {
        ts_errf(e, "fit: %zu rows for %zu parameters (need at least %zu)", c.n, c.p, c.p + 1);
        goto cleanup;
    }
    out->rms_before = sqrt(cost_of(&c, start) / (double)c.n);
    nlls_out o1 = {0};
    if (fit_pass1(&c, &o1, e))
        goto cleanup;
    hw_desc best = c.hw;
    nlls_out kept = o1;
    if (half_used && c.n >= c.p + 2 && fit_pass2(&c, start, &o1, &best, &kept, out, e))
        goto cleanup;
    fit_report(&c, &best, &kept, out);
    if (out->state[FIT_ATTN_EFF] != FIT_FITTED)
        out->hw.attn_fa_version = start->attn_fa_version;
    rc = 0;
cleanup:
    gsl_set_error_handler(old);
    free(idx);
    free(kind);
    return rc;
}

/* ---- hold-out check ----------------------------------------------------- */

typedef struct sort_item {
    const calib_row *r;
    size_t i;               /* index in the rows */
    size_t op;              /* index in the op list */
} sort_item;

static int cmp_item(const void *pa, const void *pb)
{
    const sort_item *a = pa, *b = pb;
    if (a->op != b->op)
        return a->op < b->op ? -1 : 1;
    const double ka[7] = {a->r->m, a->r->n, a->r->k, a->r->batch, a->r->ctx_sum, a->r->ctx_max,
                          a->r->q_len};
    const double kb[7] = {b->r->m, b->r->n, b->r->k, b->r->batch, b->r->ctx_sum, b->r->ctx_max,
                          b->r->q_len};
    for (int j = 0; j < 7; j++)
        if (ka[j] != kb[j])
            return ka[j] < kb[j] ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

static double median_of(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void calib_check_free(calib_check *c)
{
    if (!c)
        return;
    free(c->ops);
    c->ops = NULL;
    c->n_ops = 0;
}

int calib_check_run(const hw_desc *start, const calib_row *rows, size_t n, calib_check *c,
                    ts_err *e)
{
    memset(c, 0, sizeof *c);
    c->rows = n;
    int rc = -1;
    sort_item *items = malloc((n ? n : 1) * sizeof *items);
    unsigned char *fit_sel = calloc(n ? n : 1, 1);
    double *ape = malloc((n ? n : 1) * sizeof *ape);
    c->ops = calloc(n ? n : 1, sizeof *c->ops);
    if (!items || !fit_sel || !ape || !c->ops) {
        ts_errf(e, "check: out of memory for %zu rows", n);
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        size_t o = 0;
        while (o < c->n_ops && strcmp(c->ops[o].op, rows[i].op))
            o++;
        if (o == c->n_ops) {
            snprintf(c->ops[o].op, sizeof c->ops[o].op, "%s", rows[i].op);
            c->ops[o].modelled = calib_op_kind(rows[i].op) >= 0;
            c->n_ops++;
        }
        c->ops[o].rows++;
        items[i] = (sort_item){&rows[i], i, o};
    }
    qsort(items, n, sizeof *items, cmp_item);
    for (size_t s = 0, pos = 0; s < n; s++) {
        pos = s > 0 && items[s].op == items[s - 1].op ? pos + 1 : 0;
        calib_op_report *op = &c->ops[items[s].op];
        if (!op->modelled) {
            c->rows_skipped++;
            continue;
        }
        fit_sel[items[s].i] = pos % 2 == 0 || op->rows == 1;
    }
    if (fit_hw(start, rows, n, fit_sel, &c->fit, e)) {
        ts_err_prefix(e, "check: ");
        goto cleanup;
    }
    /* evaluate: items are grouped by op, so each op's held-out errors are
     * one run of ape[] */
    size_t na = 0, all_held = 0;
    double all_sum = 0;
    for (size_t s = 0; s < n;) {
        calib_op_report *op = &c->ops[items[s].op];
        size_t first = na;
        double fit_sum = 0, held_sum = 0;
        for (; s < n && &c->ops[items[s].op] == op; s++) {
            if (!op->modelled)
                continue;
            const calib_row *r = items[s].r;
            double pred = calib_predict(&c->fit.hw, calib_op_kind(r->op), r) * 1e6;
            double a = fabs(pred - r->median_us) / r->median_us * 100.0;
            if (fit_sel[items[s].i]) {
                op->n_fit++;
                fit_sum += a;
                continue;
            }
            op->n_held++;
            held_sum += a;
            ape[na++] = a;
            if (op->n_held == 1 || a > op->worst) {
                op->worst = a;
                op->worst_row = items[s].i;
                op->worst_pred_us = pred;
            }
        }
        op->fit_mape = op->n_fit ? fit_sum / op->n_fit : 0.0;
        if (op->n_held) {
            op->mape = held_sum / op->n_held;
            op->median = median_of(ape + first, op->n_held);
            all_sum += held_sum;
            all_held += op->n_held;
        }
        c->rows_fit += op->n_fit;
    }
    c->rows_held = all_held;
    c->overall_mape = all_held ? all_sum / all_held : 0.0;
    size_t nm = 0;
    for (size_t o = 0; o < c->n_ops; o++) {
        if (!c->ops[o].n_held)
            continue;
        ape[nm++] = c->ops[o].mape;
        if (!c->worst_op[0] || c->ops[o].mape > c->worst_op_mape) {
            c->worst_op_mape = c->ops[o].mape;
            snprintf(c->worst_op, sizeof c->worst_op, "%s", c->ops[o].op);
        }
    }
    c->median_op_mape = nm ? median_of(ape, nm) : 0.0;
    c->median_ok = nm > 0 && c->median_op_mape <= CALIB_TARGET_MEDIAN_OP;
    c->worst_ok = nm > 0 && c->worst_op_mape <= CALIB_TARGET_WORST_OP;
    rc = 0;
cleanup:
    free(items);
    free(fit_sel);
    free(ape);
    return rc;
}

/* ---- INI output ----------------------------------------------------------- */

int fit_write_ini(const hw_desc *hw, const char *path, const char *comment, ts_err *e)
{
    char cal[sizeof hw->calibration];
    snprintf(cal, sizeof cal, "%s", hw->calibration);
    for (char *p = cal; *p; p++)
        if (*p == ';' || *p == '#' || *p == '\n' || *p == '\r')
            *p = ',';
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    FILE *f = a.f;
    fprintf(f, "; %s: hardware description", hw->name);
    if (comment) {
        fputs("\n; ", f);
        for (const char *p = comment; *p; p++) {
            fputc(*p, f);
            if (*p == '\n')
                fputs("; ", f);
        }
    }
    fprintf(f, "\n\n[gpu]\npeak_flops = %.9g\nhbm_bw = %.9g\nhbm_bytes = %.9g\nsms = %d\n",
            hw->peak_flops, hw->hbm_bw, hw->hbm_bytes, hw->sms);
    if (hw->l2_bytes > 0)
        fprintf(f, "l2_bytes = %.9g\n", hw->l2_bytes);
    fprintf(f, "\n[interconnect]\nnvlink_bw = %.9g\nnvlink_lat = %.9g\nnic_bw = %.9g\n"
               "nic_lat = %.9g\ngpus_per_node = %d\n",
            hw->nvlink_bw, hw->nvlink_lat, hw->nic_bw, hw->nic_lat, hw->gpus_per_node);
    fprintf(f, "\n[efficiency]\ngemm_eff = %.9g\ngemm_half_flops = %.9g\ngemm_lat_s = %.9g\n"
               "tile_m = %d\ntile_n = %d\nmem_eff = %.9g\nlaunch_s = %.9g\nattn_eff = %.9g\n"
               "ar_eff = %.9g\ncoll_lat_s = %.9g\ncalibration = %s\n",
            hw->gemm_eff, hw->gemm_half_flops, hw->gemm_lat_s, hw->tile_m, hw->tile_n,
            hw->mem_eff, hw->launch_s, hw->attn_eff, hw->ar_eff, hw->coll_lat_s, cal);
    /* the issue 18 keys, so the written INI prices GEMMs, attention,
     * training and collectives as the description it was fitted from;
     * a key at its "absent" value is left out (the loader's default) */
    fprintf(f, "gemm_mem_eff = %.9g\ngemm_mem_fill_s = %.9g\n"
               "gemm_mem_fill_bytes = %.9g\ncar_lat_s = %.9g\ncar_max_bytes = %.9g\n",
            hw->gemm_mem_eff, hw->gemm_mem_fill_s, hw->gemm_mem_fill_bytes, hw->car_lat_s,
            hw->car_max_bytes);
    fprintf(f, "gemm_splitk_bytes = %.9g\ngemm_mix = %.9g\n", hw->gemm_splitk_bytes,
            hw->gemm_mix);
    if (hw->n_gemm_tiles > 0) {
        fputs("gemm_tiles =", f);
        for (int i = 0; i < hw->n_gemm_tiles; i++)
            fprintf(f, " %dx%d:%.9g", hw->gemm_tiles[i].m, hw->gemm_tiles[i].n,
                    hw->gemm_tiles[i].rel);
        fputc('\n', f);
    }
    if (hw->gemm_mem_lat_s >= 0)
        fprintf(f, "gemm_mem_lat_s = %.9g\n", hw->gemm_mem_lat_s);
    if (hw->coll_lat_graph_s >= 0)
        fprintf(f, "coll_lat_graph_s = %.9g\n", hw->coll_lat_graph_s);
    if (hw->train_eff > 0)
        fprintf(f, "train_eff = %.9g\n", hw->train_eff);
    if (hw->attn_fa_version >= 2)
        fprintf(f, "attn_fa_version = %d\n", hw->attn_fa_version);
    if (hw->attn_fa3 >= 0)
        fprintf(f, "attn_fa3 = %d\n", hw->attn_fa3);
    static const char *const ew_names[5] = {"add", "act", "rope", "norm", "gather"};
    for (int i = 0; i < 5; i++)
        if (hw->ew_row_bw[i] > 0)
            fprintf(f, "ew_row_bw_%s = %.9g\n", ew_names[i], hw->ew_row_bw[i]);
    fprintf(f, "\n[host]\neager_launch_s = %.9g\nsched_s = %.9g\nsched_req_s = %.9g\n"
               "pcie_bw = %.9g\nhost_mem_bw = %.9g\nhost_bytes = %.9g\n",
            hw->eager_launch_s, hw->sched_s, hw->sched_req_s, hw->pcie_bw, hw->host_mem_bw,
            hw->host_bytes);
    if (ferror(f)) {
        ts_atomic_abort(&a);
        return ts_errf(e, "%s: write failed", path);
    }
    return ts_atomic_commit(&a, e);
}

int fit_write_calibrated_ini(const hw_desc *start, const calib_row *rows, size_t n,
                             const char *csv_path, const char *tool, const char *ini_path,
                             fit_result *all, ts_err *e)
{
    if (fit_hw(start, rows, n, NULL, all, e))
        return ts_err_prefix(e, "fit on all rows of %s: ", csv_path);
    int host = calib_host_bw(rows, n, &all->hw.pcie_bw) == 0;
    const char *slash = strrchr(csv_path, '/'), *base = slash ? slash + 1 : csv_path;
    snprintf(all->hw.calibration, sizeof all->hw.calibration, "%.50s (%zu rows of %.24s, %s)",
             base, all->rows, n ? rows[0].device : "", "fitted by calib check");
    char note[1024];
    snprintf(note, sizeof note,
             "Written by `%s %s -o %s`:\nthe INI %s with gemm_eff, gemm_half_flops, "
             "gemm_lat_s, launch_s, mem_eff and attn_eff\nfitted to all %zu modelled rows "
             "(RMS relative error %.2f%% -> %.2f%%)%s.",
             tool, csv_path, ini_path, start->name, all->rows, 100 * all->rms_before,
             100 * all->rms_after,
             host ? ",\nand pcie_bw from the measured pinned host copies" : "");
    return fit_write_ini(&all->hw, ini_path, note, e);
}
