/*
 * gemm_algos.csv: the algorithm cuBLASLt's heuristic returned for each GEMM
 * shape `tailsim-validate calibrate` planned (kernels/blas.cu records it,
 * validate/calib_store.c writes it), and the comparison with the cost
 * model's choice among hw->gemm_tiles (cost_gemm_choice).  This is the data
 * that fitting cuBLAS's per-shape kernel choice needs: a "fastest kernel"
 * model cannot follow a heuristic that picks a slower one.
 *
 * The reader is strict in the way models/calib.c's is: the header exactly
 * (with or without the last column, cluster), every field checked, the
 * first bad one reported with file, line, column number and name, nothing
 * partial returned.  Rows of the CPU emulator (tile "emu", algorithm -1)
 * load, flagged, so that the command can say what it skipped.
 *
 * Orientation: blas.cu hands cuBLASLt the row-major product as its
 * column-major transpose D^T (n x m), so a cuBLASLt tile ROWSxCOLS covers
 * ROWS outputs (n) by COLS tokens (m); the cost model's tiles are m x n.
 * The comparison turns cuBLAS's tile round before matching.
 */
#include "models/gemm_algos.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/lines.h"
#include "common/util.h"
#include "models/calib.h"
#include "models/cost.h"

static const char *const col_names[GEMM_ALGOS_COLUMNS] = {
    "device",  "m",        "n",         "k",      "batch",     "ta",      "tb",     "algo_id",
    "tile",    "tile_id",  "stages_id", "splitk", "reduction", "swizzle", "cluster",
};

/* This reader's column errors (col_names above; models/calib.c). */
static int bad_col(ts_err *e, const char *path, int line, int col, const char *fmt,
                   const char *value)
{
    return calib_csv_bad_col(e, path, line, col, col_names[col], fmt, value);
}

/* "ROWSxCOLS" with both in 1..65536 into *r, *c; 0 or -1. */
static int parse_tile(const char *s, int *r, int *c)
{
    const char *x = strchr(s, 'x');
    if (!x || x == s || strchr(x + 1, 'x'))
        return -1;
    char a[16];
    size_t la = (size_t)(x - s);
    if (la >= sizeof a)
        return -1;
    memcpy(a, s, la);
    a[la] = 0;
    int64_t v1, v2;
    if (ts_parse_i64(a, 1, 65536, &v1) || ts_parse_i64(x + 1, 1, 65536, &v2))
        return -1;
    *r = (int)v1;
    *c = (int)v2;
    return 0;
}

/* The tile field into r; 0 or -1 with e set. */
static int parse_tile_field(const char *f, const char *path, int line, gemm_algo_row *r,
                            ts_err *e)
{
    if (strlen(f) >= sizeof r->tile)
        return bad_col(e, path, line, 8, "'%s' is longer than 23 characters", f);
    memcpy(r->tile, f, strlen(f) + 1);
    int64_t id;
    if (!strcmp(f, "emu")) {
        if (r->algo_id >= 0)
            return bad_col(e, path, line, 8, "'%s' (the CPU emulator's) with an algo_id >= 0",
                           f);
        r->emulated = 1;
    } else if (strcmp(f, "undefined") && strcmp(f, "?") &&
               !(!strncmp(f, "id:", 3) && !ts_parse_i64(f + 3, 0, INT32_MAX, &id)) &&
               parse_tile(f, &r->tile_rows, &r->tile_cols)) {
        return bad_col(e, path, line, 8,
                       "'%s' is not a tile (ROWSxCOLS, undefined, id:N, ? or emu)", f);
    }
    return 0;
}

/* Parses the fields of one data line into r; 0 or -1 with e set. */
static int parse_row(char **f, int ncols, const char *path, int line, gemm_algo_row *r,
                     ts_err *e)
{
    memset(r, 0, sizeof *r);
    r->line = line;
    r->cluster = -1;
    if (!f[0][0])
        return bad_col(e, path, line, 0, "empty device name%s", "");
    if (strlen(f[0]) >= sizeof r->device)
        return bad_col(e, path, line, 0, "device name longer than 127 characters%s", "");
    memcpy(r->device, f[0], strlen(f[0]) + 1);
    int *dims[4] = {&r->m, &r->n, &r->k, &r->batch};
    int64_t v;
    for (int c = 1; c <= 4; c++) {
        if (ts_parse_i64(f[c], 1, INT32_MAX, &v))
            return bad_col(e, path, line, c, "'%s' is not an integer >= 1", f[c]);
        *dims[c - 1] = (int)v;
    }
    for (int c = 5; c <= 6; c++) {
        if (ts_parse_i64(f[c], 0, 1, &v))
            return bad_col(e, path, line, c, "'%s' is not 0 or 1", f[c]);
        *(c == 5 ? &r->ta : &r->tb) = (int)v;
    }
    if (ts_parse_i64(f[7], INT32_MIN, INT32_MAX, &v))
        return bad_col(e, path, line, 7, "'%s' is not an integer", f[7]);
    r->algo_id = (int)v;
    if (parse_tile_field(f[8], path, line, r, e))
        return -1;
    int *raw[6] = {&r->tile_id, &r->stages_id, &r->splitk, &r->reduction, &r->swizzle,
                   &r->cluster};
    for (int c = 9; c < ncols; c++) {
        if (ts_parse_i64(f[c], -1, INT32_MAX, &v))
            return bad_col(e, path, line, c, "'%s' is not an integer >= -1 (-1: unknown)", f[c]);
        *raw[c - 9] = (int)v;
    }
    if (r->splitk == 0)
        return bad_col(e, path, line, 11, "'%s': split-K is 1 (unsplit) or more", f[11]);
    return 0;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
}

/* Splits and parses one data line; 0 or -1 with e set. */
static int read_line(char *line, int ncols, const char *path, int lineno, gemm_algo_row *r,
                     ts_err *e)
{
    if (!line[0])
        return ts_errf(e, "%s:%d: column 1 '%s': empty line", path, lineno, col_names[0]);
    char *f[GEMM_ALGOS_COLUMNS + 1];
    int nf = calib_csv_split(line, f, ncols);
    if (nf < -1)
        return bad_col(e, path, lineno, -nf - 2, "malformed quotes%s", "");
    if (nf < 0)
        return ts_errf(e, "%s:%d: column %d: more fields than the header's %d", path, lineno,
                       ncols + 1, ncols);
    if (nf < ncols)
        return ts_errf(e, "%s:%d: column %d '%s': missing (the line has %d fields, the header %d)",
                       path, lineno, nf + 1, col_names[nf], nf, ncols);
    return parse_row(f, ncols, path, lineno, r, e);
}

int gemm_algos_load(const char *path, gemm_algo_row **rows_out, size_t *n_out, ts_err *e)
{
    *rows_out = NULL;
    *n_out = 0;
    ts_lines in;
    if (ts_lines_open(&in, path, TS_LINES_STDIN, e))
        return -1;
    int rc = -1, ncols = 0, got;
    size_t n = 0, cap = 0;
    gemm_algo_row *rows = NULL;
    if ((got = ts_lines_next(&in, e)) <= 0) {
        if (got == 0)
            ts_errf(e, "%s:1: empty file (expected the header: %s)", in.path, GEMM_ALGOS_HEADER);
        goto cleanup;
    }
    chomp(in.buf);
    if (calib_csv_header(in.buf, in.path, col_names, GEMM_ALGOS_COLUMNS, GEMM_ALGOS_HEADER, &ncols,
                         e))
        goto cleanup;
    while ((got = ts_lines_next(&in, e)) > 0) {
        if (in.lineno > INT32_MAX) {
            ts_errf(e, "%s:%ld: too many lines", in.path, in.lineno);
            goto cleanup;
        }
        chomp(in.buf);
        gemm_algo_row r;
        if (read_line(in.buf, ncols, in.path, (int)in.lineno, &r, e))
            goto cleanup;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            gemm_algo_row *nr = realloc(rows, nc * sizeof *nr);
            if (!nr) {
                ts_errf(e, "%s:%ld: out of memory", in.path, in.lineno);
                goto cleanup;
            }
            rows = nr;
            cap = nc;
        }
        rows[n++] = r;
    }
    if (got < 0)
        goto cleanup;
    if (n == 0) {
        ts_errf(e, "%s:2: no rows after the header", in.path);
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

void gemm_algo_compare(const hw_desc *hw, const gemm_algo_row *r, gemm_algo_cmp *c)
{
    memset(c, 0, sizeof *c);
    c->kernel = -1;
    c->tile_agrees = c->split_agrees = -1;
    c->t_cublas = -1.0;
    if (r->emulated) {
        c->skip = GEMM_ALGO_SKIP_EMULATED;
        return;
    }
    if (r->batch > 1) {
        c->skip = GEMM_ALGO_SKIP_BATCHED;
        return;
    }
    c->t_model = cost_gemm_choice(hw, r->m, r->n, r->k, &c->kernel, &c->split);
    c->model_m = c->kernel >= 0 ? hw->gemm_tiles[c->kernel].m : hw->tile_m;
    c->model_n = c->kernel >= 0 ? hw->gemm_tiles[c->kernel].n : hw->tile_n;
    int cublas_kernel = -2;
    if (r->tile_rows > 0) {
        c->cublas_m = r->tile_cols; /* COLS run along m (tokens) */
        c->cublas_n = r->tile_rows;
        c->tile_agrees = c->cublas_m == c->model_m && c->cublas_n == c->model_n;
        for (int i = 0; i < hw->n_gemm_tiles; i++)
            if (hw->gemm_tiles[i].m == c->cublas_m && hw->gemm_tiles[i].n == c->cublas_n)
                cublas_kernel = i;
        if (hw->n_gemm_tiles == 0 && c->tile_agrees)
            cublas_kernel = -1;
    }
    if (r->splitk >= 1)
        c->split_agrees = r->splitk == c->split;
    if (cublas_kernel >= -1 && r->splitk >= 1) {
        double t = cost_gemm_forced(hw, r->m, r->n, r->k, cublas_kernel, r->splitk);
        c->t_cublas = t < 1e30 ? t : -1.0;
    }
}
