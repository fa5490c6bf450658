/*
 * Calibration CSVs: strict reader, and the cost model's price for each row.
 *
 * `tailsim-validate calibrate` writes one row per (op, shape) with the
 * median, p10 and p90 of its repeat times (validate/calib_store.c); a copy of
 * such a file committed as models/calib/<gpu>.csv calibrates the hardware
 * description (models/hw.c, models/fit.c).  calib_csv_load() reads one: the
 * header must be exactly CALIB_CSV_HEADER, each line must have its sixteen
 * fields (double-quoted fields allowed, with "" for a quote, as the device
 * column is written), numbers must parse in range and the median must be
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
 */
#include "models/calib.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "models/cost.h"

static const char *const col_names[CALIB_CSV_COLUMNS] = {
    "device", "sm_clock_mhz", "mem_clock_mhz", "op", "m", "n", "k", "batch", "ctx_sum",
    "ctx_max", "q_len", "median_us", "p10_us", "p90_us", "flops", "bytes",
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
        return cost_kernel(hw, COST_K_NORM, 4.0 * r->m * r->n);
    case CALIB_OP_ROPE:
        return cost_kernel(hw, COST_K_ROPE, 4.0 * r->m * r->n * r->k);
    case CALIB_OP_SWIGLU:
        return cost_kernel(hw, COST_K_ACT, 6.0 * r->m * r->n);
    case CALIB_OP_EMBED:
        return cost_kernel(hw, COST_K_GATHER, 4.0 * r->m * r->n);
    case CALIB_OP_ADD:
        return cost_kernel(hw, COST_K_ADD, 4.0 * r->m * r->n);
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

/* Splits one CSV line in place into at most `max` fields, unquoting
 * "..." fields ("" is a quote).  Returns the field count, -1 when there are
 * more than max fields, or -2 - i for a malformed quote in field i. */
static int split_fields(char *line, char **f, int max)
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

static int bad_col(ts_err *e, const char *path, int line, int col, const char *fmt,
                   const char *value)
{
    char what[200];
    snprintf(what, sizeof what, fmt, value);
    return ts_errf(e, "%s:%d: column %d '%s': %s", path, line, col + 1, col_names[col], what);
}

static int check_header(char *line, const char *path, ts_err *e)
{
    char *f[CALIB_CSV_COLUMNS + 1];
    int nf = split_fields(line, f, CALIB_CSV_COLUMNS + 1);
    if (nf < -1)
        return ts_errf(e, "%s:1: column %d: malformed quotes in the header", path, -nf - 1);
    int upto = nf < 0 ? CALIB_CSV_COLUMNS + 1 : nf;
    for (int c = 0; c < upto && c < CALIB_CSV_COLUMNS; c++)
        if (strcmp(f[c], col_names[c]))
            return ts_errf(e, "%s:1: column %d: expected '%s', found '%s' (header must be: %s)",
                           path, c + 1, col_names[c], f[c], CALIB_CSV_HEADER);
    if (upto < CALIB_CSV_COLUMNS)
        return ts_errf(e, "%s:1: column %d: expected '%s', the header ends (header must be: %s)",
                       path, upto + 1, col_names[upto], CALIB_CSV_HEADER);
    if (upto > CALIB_CSV_COLUMNS)
        return ts_errf(e, "%s:1: column %d: unexpected column '%s' (header must be: %s)", path,
                       CALIB_CSV_COLUMNS + 1, nf < 0 ? "..." : f[CALIB_CSV_COLUMNS],
                       CALIB_CSV_HEADER);
    return 0;
}

/* Parses the fields of one data line into r; 0 or -1 with e set. */
static int parse_row(char **f, const char *path, int line, calib_row *r, ts_err *e)
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
    double *num[12] = {&r->m, &r->n, &r->k, &r->batch, &r->ctx_sum, &r->ctx_max, &r->q_len,
                       &r->median_us, &r->p10_us, &r->p90_us, &r->flops, &r->bytes};
    for (int c = 4; c < CALIB_CSV_COLUMNS; c++)
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
    FILE *fp = fopen(path, "r");
    if (!fp)
        return ts_errf(e, "%s: cannot open file", path);
    int rc = -1, lineno = 1;
    char *line = NULL;
    size_t cap = 0, n = 0, rows_cap = 0;
    calib_row *rows = NULL;
    if (getline(&line, &cap, fp) < 0) {
        ts_errf(e, "%s:1: empty file (expected the header: %s)", path, CALIB_CSV_HEADER);
        goto cleanup;
    }
    chomp(line);
    if (check_header(line, path, e))
        goto cleanup;
    while (getline(&line, &cap, fp) >= 0) {
        lineno++;
        chomp(line);
        if (!line[0]) {
            ts_errf(e, "%s:%d: column 1 '%s': empty line", path, lineno, col_names[0]);
            goto cleanup;
        }
        char *f[CALIB_CSV_COLUMNS + 1];
        int nf = split_fields(line, f, CALIB_CSV_COLUMNS);
        if (nf < -1) {
            bad_col(e, path, lineno, -nf - 2, "malformed quotes%s", "");
            goto cleanup;
        }
        if (nf < 0) {
            ts_errf(e, "%s:%d: column %d: more fields than the header's %d", path, lineno,
                    CALIB_CSV_COLUMNS + 1, CALIB_CSV_COLUMNS);
            goto cleanup;
        }
        if (nf < CALIB_CSV_COLUMNS) {
            char what[64];
            snprintf(what, sizeof what, "missing (the line has %d fields, the header %d)", nf,
                     CALIB_CSV_COLUMNS);
            bad_col(e, path, lineno, nf, "%s", what);
            goto cleanup;
        }
        calib_row r;
        if (parse_row(f, path, lineno, &r, e))
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
    if (ferror(fp)) {
        ts_errf(e, "%s: read error", path);
        goto cleanup;
    }
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
    free(line);
    fclose(fp);
    return rc;
}
