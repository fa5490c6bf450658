/*
 * Calibration CSVs: strict reader, and the cost model's price for each row.
 *
 * `tailsim-validate calibrate` writes one row per (op, shape) with the
 * median, p10 and p90 of its repeat times (validate/calib_store.c); a copy of
 * such a file committed as models/calib/<gpu>.csv calibrates the hardware
 * description (models/hw.c, models/fit.c).  calib_csv_load() reads one: the
 * header must be exactly CALIB_CSV_HEADER (17 columns, ending in
 * peak_bytes) or the first format without peak_bytes, each line must have
 * the header's field count (double-quoted fields allowed, with "" for a
 * quote, as the device column is written), numbers must parse in range and the median must be
 * positive, since every comparison is relative to it.  The first bad field
 * is reported with file, line, column number and column name, and nothing
 * partial is returned.  Op names are only checked for shape
 * ([A-Za-z0-9_]+): rows of ops the cost model does not price (greedy
 * verification, whole layers, the drafter step, training passes, whatever the
 * calibration program adds next) load fine and are skipped by the fit and
 * reported as "not modelled".
 *
 * calib_predict() maps a row to the cost function the simulator uses for
 * that op, with the byte counts cost_iter() uses (so it checks the
 * simulator's own arithmetic, not a separate model of the kernel): GEMMs
 * through cost_gemm, attention through cost_attn_decode/cost_attn_chunk with
 * the per-sequence sums (a chunk row's ctx counts its own q tokens, so its
 * (query, key) pairs are q*ctx_sum - b*q*(q-1)/2), elementwise kernels
 * through cost_kernel, the copy ceiling through cost_stream.  It runs in the
 * fit's inner loop, so the op name is resolved once (calib_op_kind) and the
 * prediction itself is a switch.  Reading runs once per `check` or hw_load;
 * memory is one growing array of rows.
 *
 * The report of a hold-out check (models/fit.c runs it) is rendered here too,
 * as an aligned table (through open_memstream) or as JSON (jansson), both
 * returned as strings for the command to print.
 */
#include "models/calib.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/lines.h"
#include "common/util.h"
#include "models/cost.h"
#include "models/fit.h"

static const char *const col_names[CALIB_CSV_COLUMNS] = {
    "device", "sm_clock_mhz", "mem_clock_mhz", "op", "m", "n", "k", "batch", "ctx_sum",
    "ctx_max", "q_len", "median_us", "p10_us", "p90_us", "flops", "bytes", "peak_bytes",
};

static const struct { const char *name; calib_op kind; } op_table[] = {
    {"gemm", CALIB_OP_GEMM},           {"gemm_peak", CALIB_OP_GEMM},
    {"decode_attn", CALIB_OP_DECODE_ATTN}, {"chunk_attn", CALIB_OP_CHUNK_ATTN},
    {"rmsnorm", CALIB_OP_RMSNORM},     {"rope", CALIB_OP_ROPE},
    {"swiglu", CALIB_OP_SWIGLU},       {"embed", CALIB_OP_EMBED},
    {"add", CALIB_OP_ADD},             {"copy", CALIB_OP_COPY},
};

int calib_op_kind(const char *op)
{
    for (size_t i = 0; i < sizeof op_table / sizeof op_table[0]; i++)
        if (!strcmp(op, op_table[i].name))
            return (int)op_table[i].kind;
    return -1;
}

double calib_predict(const hw_desc *hw, int kind, const calib_row *r)
{
    switch (kind) {
    case CALIB_OP_GEMM:
        return cost_gemm(hw, r->m, r->n, r->k);
    case CALIB_OP_DECODE_ATTN:
        return cost_attn_decode(hw, r->m, r->n, r->k, r->batch, r->ctx_sum);
    case CALIB_OP_CHUNK_ATTN: {
        double q = r->q_len, b = r->batch;
        return cost_attn_chunk(hw, r->m, r->n, r->k, b * q,
                               q * r->ctx_sum - b * q * (q - 1.0) / 2.0, r->ctx_sum);
    }
    case CALIB_OP_RMSNORM:
        return cost_kernel(hw, COST_K_NORM, 4.0 * r->m * r->n, r->m);
    case CALIB_OP_ROPE:
        return cost_kernel(hw, COST_K_ROPE, 4.0 * r->m * r->n * r->k, r->m);
    case CALIB_OP_SWIGLU:
        return cost_kernel(hw, COST_K_ACT, 6.0 * r->m * r->n, r->m);
    case CALIB_OP_EMBED:
        return cost_kernel(hw, COST_K_GATHER, 4.0 * r->m * r->n, r->m);
    case CALIB_OP_ADD:
        return cost_kernel(hw, COST_K_ADD, 4.0 * r->m * r->n, r->m);
    case CALIB_OP_COPY:
        return cost_stream(hw, 2.0 * r->m);
    default:
        return -1.0;
    }
}

double cost_calib_op(const hw_desc *hw, const calib_row *row)
{
    return calib_predict(hw, calib_op_kind(row->op), row);
}

int calib_host_bw(const calib_row *rows, size_t n, double *bw)
{
    double most[2] = {0, 0}, rate[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        int d = !strcmp(rows[i].op, "d2h") ? 1 : !strcmp(rows[i].op, "h2d") ? 0 : -1;
        if (d < 0 || !(rows[i].m > 0) || !(rows[i].median_us > 0) || rows[i].m <= most[d])
            continue;
        most[d] = rows[i].m;
        rate[d] = rows[i].m / (rows[i].median_us * 1e-6);
    }
    if (rate[0] <= 0 && rate[1] <= 0)
        return -1;
    *bw = rate[0] <= 0 ? rate[1] : rate[1] <= 0 ? rate[0] : fmin(rate[0], rate[1]);
    return 0;
}

void calib_row_shape(const calib_row *r, char *buf, size_t n)
{
    switch (calib_op_kind(r->op)) {
    case CALIB_OP_DECODE_ATTN:
    case CALIB_OP_CHUNK_ATTN:
        snprintf(buf, n, "heads=%.0f kv=%.0f hd=%.0f b=%.0f ctx_sum=%.0f ctx_max=%.0f q=%.0f",
                 r->m, r->n, r->k, r->batch, r->ctx_sum, r->ctx_max, r->q_len);
        break;
    case CALIB_OP_COPY:
        snprintf(buf, n, "bytes=%.0f", r->m);
        break;
    case CALIB_OP_GEMM:
    case CALIB_OP_ROPE:
        snprintf(buf, n, "m=%.0f n=%.0f k=%.0f", r->m, r->n, r->k);
        break;
    case CALIB_OP_RMSNORM:
    case CALIB_OP_SWIGLU:
    case CALIB_OP_EMBED:
    case CALIB_OP_ADD:
        snprintf(buf, n, "m=%.0f n=%.0f", r->m, r->n);
        break;
    default: /* every column that is set */
        snprintf(buf, n, "m=%.0f n=%.0f k=%.0f b=%.0f ctx_sum=%.0f q=%.0f", r->m, r->n, r->k,
                 r->batch, r->ctx_sum, r->q_len);
    }
}

/* ---- reader --------------------------------------------------------------- */

int calib_csv_split(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max)
            return -1;
        if (*p == '"') {
            char *w = ++p;
            f[n] = w;
            for (;;) {
                if (!*p)
                    return -2 - n; /* unterminated */
                if (*p == '"') {
                    if (p[1] == '"') {
                        *w++ = '"';
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            n++;
            if (*p == 0) {
                *w = 0;
                return n;
            }
            if (*p != ',')
                return -2 - (n - 1); /* text after the closing quote */
            *w = 0;
            p++;
            continue;
        }
        f[n++] = p;
        char *c = strchr(p, ',');
        if (strchr(p, '"') && (!c || strchr(p, '"') < c))
            return -2 - (n - 1); /* quote inside an unquoted field */
        if (!c)
            return n;
        *c = 0;
        p = c + 1;
    }
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
}

int calib_csv_bad_col(ts_err *e, const char *path, int line, int col, const char *name,
                      const char *fmt, const char *value)
{
    char what[200], q[TS_QUOTE_BUF];
    if (snprintf(what, sizeof what, fmt, ts_quote(value, TS_QUOTE_MAX, q, sizeof q)) >=
        (int)sizeof what)
        memcpy(what + sizeof what - sizeof TS_ERR_CUT, TS_ERR_CUT, sizeof TS_ERR_CUT);
    return ts_errf(e, "%s:%d: column %d '%s': %s", path, line, col + 1, name, what);
}

/* This reader's column errors (col_names above). */
static int bad_col(ts_err *e, const char *path, int line, int col, const char *fmt,
                   const char *value)
{
    return calib_csv_bad_col(e, path, line, col, col_names[col], fmt, value);
}

int calib_csv_header(char *line, const char *path, const char *const *names, int ncols,
                     const char *header, int *got, ts_err *e)
{
    char *f[64];
    if (ncols < 1 || ncols >= 64)
        return ts_errf(e, "%s:1: internal: %d header columns", path, ncols);
    int nf = calib_csv_split(line, f, ncols + 1);
    if (nf < -1)
        return ts_errf(e, "%s:1: column %d: malformed quotes in the header", path, -nf - 1);
    int upto = nf < 0 ? ncols + 1 : nf;
    char q[TS_QUOTE_BUF];
    for (int c = 0; c < upto && c < ncols; c++)
        if (strcmp(f[c], names[c]))
            return ts_errf(e, "%s:1: column %d: expected '%s', found '%s' (header must be: %s)",
                           path, c + 1, names[c], ts_quote(f[c], 32, q, sizeof q), header);
    if (upto < ncols - 1)
        return ts_errf(e, "%s:1: column %d: expected '%s', the header ends (header must be: %s)",
                       path, upto + 1, names[upto], header);
    if (upto > ncols)
        return ts_errf(e, "%s:1: column %d: unexpected column '%s' (header must be: %s)", path,
                       ncols + 1, nf < 0 ? "..." : ts_quote(f[ncols], 32, q, sizeof q), header);
    *got = upto;
    return 0;
}

/* Parses the fields of one data line into r; 0 or -1 with e set. */
static int parse_row(char **f, int ncols, const char *path, int line, calib_row *r, ts_err *e)
{
    memset(r, 0, sizeof *r);
    r->line = line;
    if (!f[0][0])
        return bad_col(e, path, line, 0, "empty device name%s", "");
    if (strlen(f[0]) >= sizeof r->device)
        return bad_col(e, path, line, 0, "device name longer than 127 characters%s", "");
    memcpy(r->device, f[0], strlen(f[0]) + 1);
    int64_t clk[2];
    for (int c = 1; c <= 2; c++)
        if (ts_parse_i64(f[c], 0, 1000000, &clk[c - 1]))
            return bad_col(e, path, line, c, "'%s' is not a clock in MHz (an integer >= 0)", f[c]);
    r->sm_mhz = (int)clk[0];
    r->mem_mhz = (int)clk[1];
    size_t ol = strlen(f[3]);
    if (ol == 0 || ol >= sizeof r->op || strspn(f[3], "abcdefghijklmnopqrstuvwxyz"
                                                      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != ol)
        return bad_col(e, path, line, 3, "'%s' is not an op name ([A-Za-z0-9_]+, < 32 chars)",
                       f[3]);
    memcpy(r->op, f[3], ol + 1);
    double *num[13] = {&r->m, &r->n, &r->k, &r->batch, &r->ctx_sum, &r->ctx_max, &r->q_len,
                       &r->median_us, &r->p10_us, &r->p90_us, &r->flops, &r->bytes,
                       &r->peak_bytes};
    for (int c = 4; c < ncols; c++)
        if (ts_parse_double(f[c], 0.0, 1e30, num[c - 4]))
            return bad_col(e, path, line, c, "'%s' is not a number >= 0", f[c]);
    if (!(r->median_us > 0))
        return bad_col(e, path, line, 11, "'%s': the median time must be > 0", f[11]);
    return 0;
}

int calib_csv_load(const char *path, calib_row **rows_out, size_t *n_out, ts_err *e)
{
    *rows_out = NULL;
    *n_out = 0;
    ts_lines in;
    if (ts_lines_open(&in, path, 0, e))
        return -1;
    int rc = -1, lineno = 1, ncols = 0, got;
    char *line;
    size_t n = 0, rows_cap = 0;
    calib_row *rows = NULL;
    if ((got = ts_lines_next(&in, e)) <= 0) {
        if (got == 0)
            ts_errf(e, "%s:1: empty file (expected the header: %s)", path, CALIB_CSV_HEADER);
        goto cleanup;
    }
    line = in.buf;
    chomp(line);
    if (calib_csv_header(line, path, col_names, CALIB_CSV_COLUMNS, CALIB_CSV_HEADER, &ncols, e))
        goto cleanup;
    while ((got = ts_lines_next(&in, e)) > 0) {
        if (in.lineno > INT32_MAX) {
            ts_errf(e, "%s:%ld: too many lines", path, in.lineno);
            goto cleanup;
        }
        lineno = (int)in.lineno;
        line = in.buf;
        chomp(line);
        if (!line[0]) {
            ts_errf(e, "%s:%d: column 1 '%s': empty line", path, lineno, col_names[0]);
            goto cleanup;
        }
        char *f[CALIB_CSV_COLUMNS + 1];
        int nf = calib_csv_split(line, f, ncols);
        if (nf < -1) {
            bad_col(e, path, lineno, -nf - 2, "malformed quotes%s", "");
            goto cleanup;
        }
        if (nf < 0) {
            ts_errf(e, "%s:%d: column %d: more fields than the header's %d", path, lineno,
                    ncols + 1, ncols);
            goto cleanup;
        }
        if (nf < ncols) {
            ts_errf(e, "%s:%d: column %d '%s': missing (the line has %d fields, the header %d)",
                    path, lineno, nf + 1, col_names[nf], nf, ncols);
            goto cleanup;
        }
        calib_row r;
        if (parse_row(f, ncols, path, lineno, &r, e))
            goto cleanup;
        if (n == rows_cap) {
            size_t nc = rows_cap ? 2 * rows_cap : 256;
            calib_row *nr = realloc(rows, nc * sizeof *nr);
            if (!nr) {
                ts_errf(e, "%s:%d: out of memory", path, lineno);
                goto cleanup;
            }
            rows = nr;
            rows_cap = nc;
        }
        rows[n++] = r;
    }
    if (got < 0)
        goto cleanup;
    if (n == 0) {
        ts_errf(e, "%s:2: no data rows after the header", path);
        goto cleanup;
    }
    *rows_out = rows;
    *n_out = n;
    rows = NULL;
    rc = 0;
cleanup:
    free(rows);
    ts_lines_close(&in);
    return rc;
}

/* ---- rendering of a hold-out check (declared in models/fit.h) ------------------------------------------------------------ */

static const char *state_words(const fit_result *f, int j)
{
    if (f->state[j] == FIT_DEGENERATE)
        return j == FIT_GEMM_HALF ? "degenerate, kept 0" : "degenerate, kept";
    return f->state[j] == FIT_UNUSED ? "unused, kept" : "fitted";
}

static const char *device_of(const calib_check *c, const calib_row *rows, int *mixed)
{
    *mixed = 0;
    for (size_t i = 1; i < c->rows; i++)
        *mixed |= strcmp(rows[i].device, rows[0].device) != 0;
    return c->rows ? rows[0].device : "";
}

char *calib_check_table(const calib_check *c, const calib_row *rows, const char *file,
                        const hw_desc *start)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int mixed;
    const char *dev = device_of(c, rows, &mixed);
    const fit_result *fr = &c->fit;
    fprintf(f, "file         %s\n", file);
    fprintf(f, "device       %s%s\n", dev, mixed ? " (and others: the file mixes devices)" : "");
    fprintf(f, "hw           %s (start: %s)\n", start->name, start->calibration);
    fprintf(f, "rows         %zu: %zu fit, %zu held out, %zu not modelled\n\n", c->rows,
            c->rows_fit, c->rows_held, c->rows_skipped);
    fprintf(f, "fit on %zu rows: %d iterations, %s; RMS relative error %.2f%% -> %.2f%%\n",
            fr->rows, fr->iterations, fr->stop, 100 * fr->rms_before, 100 * fr->rms_after);
    fprintf(f, "  %-16s %12s %12s   %s\n", "parameter", "before", "after", "state");
    for (int j = 0; j < FIT_NPARAM; j++)
        fprintf(f, "  %-16s %12.4g %12.4g   %s\n", fit_param_names[j], fr->before[j],
                fr->after[j], state_words(fr, j));
    if (fr->half_tried)
        fprintf(f, "  (gemm_half_flops freed in a second pass: cost %+.1f%%, %s)\n",
                -100 * fr->half_gain,
                fr->state[FIT_GEMM_HALF] == FIT_FITTED
                    ? "kept"
                    : "not kept: needs -2% and a standard error under 25%");
    fprintf(f, "\nheld-out shapes, predicted vs measured (errors in %%):\n");
    fprintf(f, "%-14s %5s %5s %9s %8s %8s %8s   %s\n", "op", "fit", "held", "fit MAPE", "MAPE",
            "median", "worst", "worst case");
    for (size_t o = 0; o < c->n_ops; o++) {
        const calib_op_report *op = &c->ops[o];
        if (!op->modelled) {
            fprintf(f, "%-14s %5s %5s   not modelled: %zu row%s skipped\n", op->op, "-", "-",
                    op->rows, op->rows == 1 ? "" : "s");
            continue;
        }
        fprintf(f, "%-14s %5zu %5zu %9.2f", op->op, op->n_fit, op->n_held, op->fit_mape);
        if (!op->n_held) {
            fprintf(f, " %8s %8s %8s   (no held-out row: fit only)\n", "-", "-", "-");
            continue;
        }
        const calib_row *w = &rows[op->worst_row];
        char shape[160];
        calib_row_shape(w, shape, sizeof shape);
        fprintf(f, " %8.2f %8.2f %8.2f   line %d: %s: %.4g us predicted, %.4g measured\n",
                op->mape, op->median, op->worst, w->line, shape, op->worst_pred_us,
                w->median_us);
    }
    if (c->worst_op[0]) {
        fprintf(f, "\nmedian per-op MAPE %7.2f%%   target <= %.0f%%: %s\n", c->median_op_mape,
                CALIB_TARGET_MEDIAN_OP, c->median_ok ? "met" : "MISSED");
        fprintf(f, "worst op MAPE      %7.2f%%   target <= %.0f%%: %s (%s)\n", c->worst_op_mape,
                CALIB_TARGET_WORST_OP, c->worst_ok ? "met" : "MISSED", c->worst_op);
        fprintf(f, "all held-out rows  %7.2f%%   (%zu rows)\n", c->overall_mape, c->rows_held);
    } else {
        fprintf(f, "\nno held-out rows: nothing to compare (targets not evaluated)\n");
    }
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* json_object_set_new that remembers an allocation failure. */
static void jset(json_t *o, const char *k, json_t *v, int *bad)
{
    if (!v || json_object_set_new(o, k, v))
        *bad = 1;
}

char *calib_check_json(const calib_check *c, const calib_row *rows, const char *file,
                       const hw_desc *start)
{
    int bad = 0, mixed;
    const fit_result *fr = &c->fit;
    json_t *root = json_object(), *skipped = json_object(), *fit = json_object(),
           *params = json_object(), *ops = json_object(), *tg = json_object();
    if (!root || !skipped || !fit || !params || !ops || !tg) {
        json_decref(root); json_decref(skipped); json_decref(fit);
        json_decref(params); json_decref(ops); json_decref(tg);
        return NULL;
    }
    jset(root, "file", json_string(file), &bad);
    jset(root, "device", json_string(device_of(c, rows, &mixed)), &bad);
    jset(root, "mixed_devices", json_boolean(mixed), &bad);
    jset(root, "hw", json_string(start->name), &bad);
    jset(root, "start_calibration", json_string(start->calibration), &bad);
    jset(root, "rows", json_integer((json_int_t)c->rows), &bad);
    jset(root, "rows_fit", json_integer((json_int_t)c->rows_fit), &bad);
    jset(root, "rows_held_out", json_integer((json_int_t)c->rows_held), &bad);
    jset(root, "rows_not_modelled", json_integer((json_int_t)c->rows_skipped), &bad);
    for (size_t o = 0; o < c->n_ops; o++) {
        const calib_op_report *op = &c->ops[o];
        if (!op->modelled) {
            jset(skipped, op->op, json_integer((json_int_t)op->rows), &bad);
            continue;
        }
        json_t *j = json_object();
        if (!j) {
            bad = 1;
            break;
        }
        int h = op->n_held > 0;
        const calib_row *w = &rows[op->worst_row];
        char shape[160];
        calib_row_shape(w, shape, sizeof shape);
        jset(j, "n", json_integer((json_int_t)op->n_held), &bad);
        jset(j, "fit_n", json_integer((json_int_t)op->n_fit), &bad);
        jset(j, "fit_mape", op->n_fit ? json_real(op->fit_mape) : json_null(), &bad);
        jset(j, "mape", h ? json_real(op->mape) : json_null(), &bad);
        jset(j, "median", h ? json_real(op->median) : json_null(), &bad);
        jset(j, "worst", h ? json_real(op->worst) : json_null(), &bad);
        jset(j, "worst_line", h ? json_integer(w->line) : json_null(), &bad);
        jset(j, "worst_shape", h ? json_string(shape) : json_null(), &bad);
        jset(j, "worst_pred_us", h ? json_real(op->worst_pred_us) : json_null(), &bad);
        jset(j, "worst_meas_us", h ? json_real(w->median_us) : json_null(), &bad);
        jset(ops, op->op, j, &bad);
    }
    jset(root, "not_modelled", skipped, &bad);
    jset(fit, "rows", json_integer((json_int_t)fr->rows), &bad);
    jset(fit, "iterations", json_integer(fr->iterations), &bad);
    jset(fit, "stop", json_string(fr->stop), &bad);
    jset(fit, "rms_before", json_real(100 * fr->rms_before), &bad);
    jset(fit, "rms_after", json_real(100 * fr->rms_after), &bad);
    jset(fit, "half_gain", fr->half_tried ? json_real(100 * fr->half_gain) : json_null(), &bad);
    for (int j = 0; j < FIT_NPARAM; j++)
        jset(params, fit_param_names[j],
             json_pack("{s:f, s:f, s:s}", "before", fr->before[j], "after", fr->after[j],
                       "state", fit_state_names[fr->state[j]]),
             &bad);
    jset(fit, "params", params, &bad);
    jset(root, "fit", fit, &bad);
    jset(root, "ops", ops, &bad);
    int any = c->worst_op[0] != 0;
    jset(root, "median_op_mape", any ? json_real(c->median_op_mape) : json_null(), &bad);
    jset(root, "worst_op_mape", any ? json_real(c->worst_op_mape) : json_null(), &bad);
    jset(root, "worst_op", any ? json_string(c->worst_op) : json_null(), &bad);
    jset(root, "overall_mape", any ? json_real(c->overall_mape) : json_null(), &bad);
    jset(tg, "median_op_mape_max", json_real(CALIB_TARGET_MEDIAN_OP), &bad);
    jset(tg, "worst_op_mape_max", json_real(CALIB_TARGET_WORST_OP), &bad);
    jset(tg, "median_ok", json_boolean(c->median_ok), &bad);
    jset(tg, "worst_ok", json_boolean(c->worst_ok), &bad);
    jset(tg, "met", json_boolean(c->median_ok && c->worst_ok), &bad);
    jset(root, "targets", tg, &bad);
    char *s = bad ? NULL
                  : json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER |
                                         JSON_REAL_PRECISION(8));
    json_decref(root);
    return s;
}
