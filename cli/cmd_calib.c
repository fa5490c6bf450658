/*
 * `tailsim calib vidur FILE --hw h100 [--json|--rows] [--stat median|mean|min|max]
 *                          [--bands [--resolution US]]`
 * `tailsim calib check CSV [--hw h200] [--json] [-o FILE.ini]`
 * `tailsim calib algos FILE [--hw h200] [--json]` (cli/cmd_calib_algos.c)
 *
 * Checks the cost model against measured operator times: reads a Vidur
 * profiling CSV (per-operator MLP-layer times, or NCCL all-reduce times),
 * predicts every op of every row with the hardware description's parameters
 * (cost_vidur_op, comm_allreduce), and prints the mean absolute percentage
 * error, the worst case (with its CSV line) and the row count per op, then
 * over the GEMM ops and over all ops: an aligned table, or JSON (jansson)
 * with the stable keys file, hw, calibration, stat, rows, ops {op: {n, mape,
 * worst}}, gemm_mape, overall_mape (null when there is nothing to average),
 * layer {n, mape, worst, bias} (each row's ops but the embedding summed,
 * as the simulator adds them into a layer; null for an all-reduce profile);
 * or, with --rows, every prediction as a CSV row (where the model misses).
 * --bands splits the errors by token band and adds the MAPE beyond the
 * profile's timing resolution (detected by vidur_load(), or --resolution):
 * a second table under the first, or in JSON resolution_us,
 * resolution_detected_us and a mape_beyond_res per op, band and layer.
 * Exit status 0, 1 on bad input (the message names file, line and column),
 * 2 on a usage error.
 *
 * `check` reads a calibration CSV written by `tailsim-validate calibrate`
 * (models/calib.c), fits the cost model's continuous parameters on one half
 * of the shapes starting from the INI's values (hw_load_ini: a committed
 * models/calib/<gpu>.csv does not move the starting point) and reports
 * predicted vs measured on the other half per op, against issue 3's targets
 * (models/fit.c does the work and renders the table or JSON; this file only
 * parses flags and prints).  -o writes the parameters fitted on all rows, as
 * hw_load() would fit them, as a loadable hardware INI.  The same command is
 * `tailsim-validate check` (validate/check.c), for machines with CUDA; this
 * one runs anywhere.  Exit status 0 when the report was produced (targets
 * met or not), 1 on bad input or a failed fit, 2 on a usage error.
 *
 * Both parse their flags first (calib_cmd_vidur_parse,
 * calib_cmd_check_parse; a flag's value is the next argument), then run and
 * print.
 */
#include <gsl/gsl_errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "models/calib.h"
#include "models/fit.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "models/vidur.h"
#include "cli/cmd.h"
#include "cli/opts.h"

typedef struct calib_vidur_opts {
    const char *hw_name;   /* --hw (default h100) */
    const char *stat;      /* --stat (default median) */
    const char *file;      /* the profiling CSV */
    int json, rows;        /* --json, --rows */
    int bands;             /* --bands */
    int res_set;           /* 1: --resolution given */
    double res_us;         /* --resolution, microseconds (>= 0; 0: no figure) */
} calib_vidur_opts;

typedef struct calib_check_opts {
    const char *hw_name;   /* --hw (default h200) */
    const char *file;      /* the calibration CSV */
    const char *ini;       /* -o FILE.ini, or NULL */
    int json;              /* --json */
} calib_check_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim calib vidur FILE [--hw NAME|PATH] [--stat median|mean|min|max] [--json|--rows]\n"
            "                                [--bands [--resolution US]]\n"
            "       tailsim calib check CSV [--hw NAME|PATH] [--json] [-o FILE.ini]\n"
            "       tailsim calib algos FILE [--hw NAME|PATH] [--json]\n"
            "\n"
            "check: fits the cost model's parameters (gemm_eff, gemm_half_flops, gemm_lat_s,\n"
            "launch_s, mem_eff, attn_eff) to half of the shapes of a calibration CSV\n"
            "(tailsim-validate calibrate) and prints predicted vs measured on the other\n"
            "half per op (MAPE, median, worst case) against the targets (median per-op\n"
            "MAPE <= 5%%, worst op <= 10%%).  --hw defaults to h200 (its INI values are\n"
            "the starting point); -o FILE.ini writes the fit on all rows as a hardware INI.\n"
            "\n"
            "vidur:\n"
            "Predicts every operator of a Vidur profiling CSV (per-operator MLP-layer\n"
            "times, or all-reduce times) with the cost model of the given hardware and\n"
            "prints MAPE, worst case and row count per op, over the GEMM ops and over\n"
            "all ops, and for each row's ops but the embedding summed (one layer's\n"
            "non-attention time, as the simulator adds it up), with the sums' mean\n"
            "signed error (bias).\n"
            "\n"
            "  --hw NAME    hardware description (models/hw/NAME.ini or a path; default h100)\n"
            "  --stat S     measured column to compare with (default median)\n"
            "  --json       print JSON instead of a table\n"
            "  --rows       print every prediction instead, as CSV: line, op, tp, tokens,\n"
            "               size, workers, measured_ms, predicted_ms, error_pct (signed)\n"
            "  --bands      print MAPE and signed bias (%%, > 0: predicted slow) per op and\n"
            "               token band (1-32, 33-256, 257-1024, 1025-4096) instead of the\n"
            "               per-op table (with --json: a \"bands\" object besides it), and\n"
            "               under it the MAPE beyond the profile's timing resolution (each\n"
            "               row's |error| less one step, found from the .min/.max columns:\n"
            "               Vidur records whole microseconds)\n"
            "  --resolution US  the step in microseconds instead of the file's (with\n"
            "               --bands; 0: no figure beyond it)\n"
            "  --help       this text\n");
}

/* Name of token band b ("1-32", ...) into buf.  Cannot fail. */
static void band_name(int b, char *buf, size_t n)
{
    snprintf(buf, n, "%d-%d", b ? vidur_band_hi[b - 1] + 1 : 1, vidur_band_hi[b]);
}

/* A time of ms milliseconds in the unit that keeps it readable ("1 us",
 * "0.5 us", "0.1 ms", "10 ns") into buf.  Cannot fail. */
static void time_words(double ms, char *buf, size_t n)
{
    if (ms >= 1.0)
        snprintf(buf, n, "%g ms", ms);
    else if (ms >= 1e-4 * (1 - 1e-9))
        snprintf(buf, n, "%g us", ms * 1e3);
    else
        snprintf(buf, n, "%g ns", ms * 1e6);
}

/* How a profile's timing resolution reads ("whole microseconds", "steps of
 * 0.1 us", "unknown") into buf.  Cannot fail. */
static void res_words(double ms, char *buf, size_t n)
{
    static const struct { double ms; const char *words; } whole[] = {
        {1.0, "whole milliseconds"}, {1e-3, "whole microseconds"}, {1e-6, "whole nanoseconds"},
    };
    if (ms <= 0) {
        snprintf(buf, n, "unknown");
        return;
    }
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        if (fabs(ms - whole[i].ms) < 1e-9 * whole[i].ms) {
            snprintf(buf, n, "%s", whole[i].words);
            return;
        }
    }
    char t[32];
    time_words(ms, t, sizeof t);
    snprintf(buf, n, "steps of %s", t);
}

/* A MAPE beyond the resolution as JSON: null when there is no allowance. */
static json_t *res_json(const vidur_report *r, double mape_res)
{
    return r->res_ms > 0 ? json_real(mape_res) : json_null();
}

/* Sets root's resolution_us (the step the figures allow for; null: none),
 * resolution_detected_us (the file's; null: unknown) and "bands": {op:
 * {band: {n, mape, bias, mape_beyond_res}}} for every op with banded
 * predictions, the layer sum under "layer".  Returns 0, or -1 on allocation
 * failure. */
static int bands_json(json_t *root, const vidur_table *t, const vidur_report *r)
{
    if (json_object_set_new(root, "resolution_us",
                            r->res_ms > 0 ? json_real(r->res_ms * 1e3) : json_null()) ||
        json_object_set_new(root, "resolution_detected_us",
                            t->res_ms > 0 ? json_real(t->res_ms * 1e3) : json_null()))
        return -1;
    json_t *all = json_object();
    if (!all || json_object_set_new(root, "bands", all))
        return -1;
    for (int o = 0; o <= VOP_COUNT; o++) {
        if (o < VOP_COUNT && (!t->has[o] || o == VOP_ALL_REDUCE))
            continue;
        json_t *op = json_object();
        if (!op || json_object_set_new(all, o < VOP_COUNT ? vidur_op_names[o] : "layer", op))
            return -1;
        for (int b = 0; b < VIDUR_BANDS; b++) {
            const vidur_band_stat *s = &r->bands[o][b];
            char name[32];
            band_name(b, name, sizeof name);
            json_t *j = s->n ? json_pack("{s:i, s:f, s:f, s:o}", "n", s->n, "mape", s->mape,
                                         "bias", s->bias, "mape_beyond_res",
                                         res_json(r, s->mape_res))
                             : json_null();
            if (!j || json_object_set_new(op, name, j))
                return -1;
        }
    }
    return 0;
}

/* The header line of a band table: op, all, the band names. */
static void bands_header(void)
{
    printf("%-26s %9s", "op", "all");
    for (int b = 0; b < VIDUR_BANDS; b++) {
        char name[32];
        band_name(b, name, sizeof name);
        printf(" %15s", name);
    }
    printf("\n");
}

/* 1 when the band tables have a line for op o (VOP_COUNT: the layer sum). */
static int bands_has_line(const vidur_table *t, const vidur_report *r, int o)
{
    if (o == VOP_COUNT)
        return r->layer.n > 0;
    return t->has[o] && o != VOP_ALL_REDUCE && r->ops[o].n > 0;
}

/* The second band table: the MAPE beyond the resolution r->res_ms, after a
 * header that names it (and where it came from: the file, or --resolution
 * when res_set); one line instead when the file's resolution is unknown,
 * nothing when --resolution 0 turned it off or no op has token bands. */
static void print_bands_res(const vidur_table *t, const vidur_report *r, int res_set)
{
    char file_res[64], step[32], layer[32];
    res_words(t->res_ms, file_res, sizeof file_res);
    if (r->res_ms <= 0) {
        if (!res_set)
            printf("\ntiming resolution unknown (no .min/.max column, or values finer than "
                   "1 ns):\nno MAPE beyond it; --resolution US sets one\n");
        return;
    }
    int lines = 0;
    for (int o = 0; o <= VOP_COUNT; o++)
        lines += bands_has_line(t, r, o);
    if (!lines)
        return; /* an all-reduce profile: no token bands */
    time_words(r->res_ms, step, sizeof step);
    time_words(r->res_ms * r->layer_ops, layer, sizeof layer);
    if (res_set)
        printf("\nresolution %s (--resolution; the file's: %s): MAPE %% beyond +-%s\n", step,
               file_res, step);
    else
        printf("\ntimings recorded in %s: MAPE %% beyond +-%s\n", file_res, step);
    printf("(each row's |predicted - measured| less one step");
    if (r->layer.n)
        printf("; the layer sum less one step an op, +-%s", layer);
    printf(")\n");
    bands_header();
    for (int o = 0; o <= VOP_COUNT; o++) {
        if (!bands_has_line(t, r, o))
            continue;
        printf("%-26s %9.2f", o < VOP_COUNT ? vidur_op_names[o] : "layer (ops but emb)",
               o < VOP_COUNT ? r->ops[o].mape_res : r->layer.mape_res);
        for (int b = 0; b < VIDUR_BANDS; b++) {
            const vidur_band_stat *s = &r->bands[o][b];
            if (s->n)
                printf(" %15.1f", s->mape_res);
            else
                printf(" %15s", "-");
        }
        printf("\n");
    }
}

/* --bands: one line per op (and the layer sum), MAPE and signed bias per
 * token band; then the MAPE beyond the resolution (print_bands_res). */
static void print_bands(const char *file, const hw_desc *hw, const char *stat,
                        const vidur_table *t, const vidur_report *r, int res_set)
{
    printf("file         %s\n", file);
    printf("hw           %s (calibration: %s)\n", hw->name, hw->calibration);
    printf("compared to  %s, %zu rows; MAPE %% / signed bias %% (> 0: predicted slow)\n\n",
           stat, r->rows);
    bands_header();
    for (int o = 0; o <= VOP_COUNT; o++) {
        if (!bands_has_line(t, r, o))
            continue;
        printf("%-26s %9.2f", o < VOP_COUNT ? vidur_op_names[o] : "layer (ops but emb)",
               o < VOP_COUNT ? r->ops[o].mape : r->layer.mape);
        for (int b = 0; b < VIDUR_BANDS; b++) {
            const vidur_band_stat *s = &r->bands[o][b];
            if (s->n)
                printf("   %5.1f / %+5.1f", s->mape, s->bias);
            else
                printf(" %15s", "-");
        }
        printf("\n");
    }
    print_bands_res(t, r, res_set);
}

static int print_json(const char *file, const hw_desc *hw, const char *stat,
                      const vidur_table *t, const vidur_report *r, int bands)
{
    json_t *root = json_object();
    json_t *ops = json_object();
    if (!root || !ops)
        goto oom;
    json_object_set_new(root, "file", json_string(file));
    json_object_set_new(root, "hw", json_string(hw->name));
    json_object_set_new(root, "calibration", json_string(hw->calibration));
    json_object_set_new(root, "stat", json_string(stat));
    json_object_set_new(root, "rows", json_integer((json_int_t)r->rows));
    int gemm_n = 0, all_n = 0;
    for (int o = 0; o < VOP_COUNT; o++) {
        if (!t->has[o] || r->ops[o].n == 0)
            continue;
        json_t *op = json_pack("{s:i, s:f, s:f}", "n", r->ops[o].n, "mape", r->ops[o].mape,
                               "worst", r->ops[o].worst);
        if (!op || (bands && json_object_set_new(op, "mape_beyond_res",
                                                 res_json(r, r->ops[o].mape_res)))) {
            json_decref(op);
            goto oom;
        }
        json_object_set_new(ops, vidur_op_names[o], op);
        all_n += r->ops[o].n;
        gemm_n += vidur_op_is_gemm(o) ? r->ops[o].n : 0;
    }
    json_object_set_new(root, "ops", ops);
    ops = NULL;
    json_object_set_new(root, "gemm_mape", gemm_n ? json_real(r->gemm_mape) : json_null());
    json_object_set_new(root, "overall_mape", all_n ? json_real(r->overall_mape) : json_null());
    if (r->layer.n) {
        json_t *l = json_pack("{s:i, s:f, s:f, s:f}", "n", r->layer.n, "mape", r->layer.mape,
                              "worst", r->layer.worst, "bias", r->layer_bias);
        if (!l || (bands && json_object_set_new(l, "mape_beyond_res",
                                                res_json(r, r->layer.mape_res)))) {
            json_decref(l);
            goto oom;
        }
        json_object_set_new(root, "layer", l);
    } else {
        json_object_set_new(root, "layer", json_null());
    }
    if (bands && bands_json(root, t, r))
        goto oom;
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(root);
    if (!s) {
        fprintf(stderr, "tailsim calib: out of memory\n");
        return 1;
    }
    puts(s);
    free(s);
    return 0;
oom:
    json_decref(ops);
    json_decref(root);
    fprintf(stderr, "tailsim calib: out of memory\n");
    return 1;
}

/* --rows: one CSV line per (row, op) the model predicts, in file order. */
static void print_rows(const hw_desc *hw, const vidur_table *t)
{
    printf("line,op,tp,tokens,size,workers,measured_ms,predicted_ms,error_pct\n");
    for (size_t i = 0; i < t->n; i++) {
        const vidur_row *row = &t->rows[i];
        for (int o = 0; o < VOP_COUNT; o++) {
            double ms = row->ms[o];
            if (!t->has[o] || ms <= 0)
                continue;
            double pred = vidur_predict(row, o, hw);
            if (pred < 0)
                continue;
            printf("%d,%s,%d,%d,%.0f,%d,%.6g,%.6g,%.3f\n", row->line, vidur_op_names[o],
                   o == VOP_ALL_REDUCE ? 0 : row->tp, o == VOP_ALL_REDUCE ? 0 : row->tokens,
                   o == VOP_ALL_REDUCE ? row->size : 0.0, o == VOP_ALL_REDUCE ? row->workers : 0,
                   ms, pred * 1e3, (pred * 1e3 - ms) / ms * 100.0);
        }
    }
}

static void print_table(const char *file, const hw_desc *hw, const char *stat,
                        const vidur_table *t, const vidur_report *r)
{
    printf("file         %s\n", file);
    printf("hw           %s (calibration: %s)\n", hw->name, hw->calibration);
    printf("compared to  %s, %zu rows\n\n", stat, r->rows);
    printf("%-26s %6s %9s %9s %11s\n", "op", "n", "MAPE %", "worst %", "worst line");
    int gemm_n = 0, all_n = 0;
    for (int o = 0; o < VOP_COUNT; o++) {
        if (!t->has[o] || r->ops[o].n == 0)
            continue;
        const vidur_op_stat *s = &r->ops[o];
        printf("%-26s %6d %9.2f %9.2f %11d%s\n", vidur_op_names[o], s->n, s->mape, s->worst,
               s->worst_line, vidur_op_is_gemm(o) ? "  (GEMM)" : "");
        all_n += s->n;
        gemm_n += vidur_op_is_gemm(o) ? s->n : 0;
    }
    printf("\n");
    if (gemm_n)
        printf("%-26s %6d %9.2f\n", "GEMM ops", gemm_n, r->gemm_mape);
    printf("%-26s %6d %9.2f\n", "all ops", all_n, r->overall_mape);
    if (r->layer.n)
        printf("%-26s %6d %9.2f %9.2f %11d  (bias %+.2f%%)\n", "layer (ops but emb summed)",
               r->layer.n, r->layer.mape, r->layer.worst, r->layer.worst_line, r->layer_bias);
}

/* Parses `check`'s arguments (argv[0] is "check") into o; prog names the
 * command in messages.  Returns -1 to go on, or 2 after a usage error, said
 * on stderr. */
static int calib_cmd_check_parse(int argc, char **argv, const char *prog, calib_check_opts *o)
{
    o->hw_name = "h200";
    o->file = o->ini = NULL;
    o->json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--hw") || !strcmp(a, "-o")) {
            if (!(v = opts_value(argc, argv, &i, a))) {
                fprintf(stderr, "%s: %s needs a value\n", prog, a);
                return 2;
            }
            *(a[1] == 'o' ? &o->ini : &o->hw_name) = v;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "%s: unknown option '%s'\n", prog, a);
            usage(stderr);
            return 2;
        } else if (!o->file) {
            o->file = a;
        } else {
            fprintf(stderr, "%s: more than one CSV ('%s')\n", prog, a);
            return 2;
        }
    }
    if (!o->file) {
        fprintf(stderr, "%s: missing CSV\n", prog);
        usage(stderr);
        return 2;
    }
    return -1;
}

/* `tailsim calib check ...` and `tailsim-validate check ...` (see cli/cmd.h);
 * argv[0] is "check". */
int calib_check_main(int argc, char **argv, const char *prog, int strict)
{
    calib_check_opts o;
    int prc = calib_cmd_check_parse(argc, argv, prog, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    hw_desc start;
    calib_row *rows = NULL;
    size_t n = 0;
    calib_check c = {0};
    char *text = NULL;
    int rc = strict ? 2 : 1;
    if (hw_load_ini(o.hw_name, &start, &e) || calib_csv_load(o.file, &rows, &n, &e) ||
        calib_check_run(&start, rows, n, &c, &e)) {
        fprintf(stderr, "%s: %s\n", prog, e.msg);
        goto cleanup;
    }
    text = o.json ? calib_check_json(&c, rows, o.file, &start)
                  : calib_check_table(&c, rows, o.file, &start);
    if (!text) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto cleanup;
    }
    fputs(text, stdout);
    if (o.json)
        fputc('\n', stdout);
    double host_bw;
    if (!o.json && calib_host_bw(rows, n, &host_bw) == 0)
        printf("\nhost link (pinned h2d/d2h copies, the slower direction): %.1f GB/s "
               "(pcie_bw; %s's INI: %.1f)\n",
               host_bw / 1e9, start.name, start.pcie_bw / 1e9);
    if (o.ini) {
        fit_result all;
        if (fit_write_calibrated_ini(&start, rows, n, o.file, prog, o.ini, &all, &e)) {
            fprintf(stderr, "%s: %s\n", prog, e.msg);
            goto cleanup;
        }
        fprintf(o.json ? stderr : stdout, "\nwrote %s (fit on all %zu modelled rows)\n", o.ini,
                all.rows);
    }
    rc = 0;
    if (strict && !(c.median_ok && c.worst_ok)) {
        rc = 1;
        fprintf(stderr, "%s: targets missed (median per-op MAPE %.2f%%, worst op %s %.2f%%)\n", prog,
                c.median_op_mape, c.worst_op[0] ? c.worst_op : "-", c.worst_op_mape);
    }
cleanup:
    free(text);
    calib_check_free(&c);
    free(rows);
    return rc;
}

/* Parses `vidur`'s arguments (argv[1] is "vidur") into o.  Returns -1 to go
 * on, or 2 after a usage error, said on stderr. */
static int calib_cmd_vidur_parse(int argc, char **argv, calib_vidur_opts *o)
{
    o->hw_name = "h100";
    o->stat = "median";
    o->file = NULL;
    o->json = o->rows = o->bands = o->res_set = 0;
    o->res_us = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        if (opts_match(a, "--resolution")) {
            if (!(v = opts_value(argc, argv, &i, "--resolution"))) {
                fprintf(stderr, "tailsim calib: --resolution needs a value\n");
                return 2;
            }
            if (ts_parse_double(v, 0.0, 1e6, &o->res_us)) {
                char q[TS_QUOTE_BUF];
                fprintf(stderr, "tailsim calib: --resolution must be a number of microseconds "
                        "from 0 to 1e6 (got '%s')\n", ts_quote(v, TS_QUOTE_MAX, q, sizeof q));
                return 2;
            }
            o->res_set = 1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--rows")) {
            o->rows = 1;
        } else if (!strcmp(a, "--bands")) {
            o->bands = 1;
        } else if (!strcmp(a, "--hw") || !strcmp(a, "--stat")) {
            if (!(v = opts_value(argc, argv, &i, a))) {
                fprintf(stderr, "tailsim calib: %s needs a value\n", a);
                return 2;
            }
            *(!strcmp(a, "--hw") ? &o->hw_name : &o->stat) = v;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tailsim calib: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!o->file) {
            o->file = a;
        } else {
            fprintf(stderr, "tailsim calib: more than one FILE ('%s')\n", a);
            return 2;
        }
    }
    if (!o->file) {
        fprintf(stderr, "tailsim calib: missing FILE\n");
        usage(stderr);
        return 2;
    }
    if (o->json && o->rows) {
        fprintf(stderr, "tailsim calib: --json and --rows exclude each other\n");
        return 2;
    }
    if (o->bands && o->rows) {
        fprintf(stderr, "tailsim calib: --bands and --rows exclude each other\n");
        return 2;
    }
    if (o->res_set && !o->bands) {
        fprintf(stderr, "tailsim calib: --resolution applies to --bands only\n");
        return 2;
    }
    if (strcmp(o->stat, "median") && strcmp(o->stat, "mean") && strcmp(o->stat, "min") &&
        strcmp(o->stat, "max")) {
        fprintf(stderr, "tailsim calib: --stat must be median, mean, min or max (got '%s')\n",
                o->stat);
        return 2;
    }
    return -1;
}

/* Predicts every op of o's profile and prints the report (or the rows).
 * Returns the exit status: 0, or 1 after saying what failed. */
static int calib_cmd_vidur(const calib_vidur_opts *o)
{
    ts_err e = {{0}};
    hw_desc hw;
    if (hw_load(o->hw_name, &hw, &e)) {
        fprintf(stderr, "tailsim calib: %s\n", e.msg);
        return 1;
    }
    vidur_table t;
    if (vidur_load(o->file, o->stat, &t, &e)) {
        fprintf(stderr, "tailsim calib: %s\n", e.msg);
        return 1;
    }
    vidur_report r;
    vidur_evaluate_at(&t, &hw, o->res_set ? o->res_us * 1e-3 : t.res_ms, &r);
    int rc = 0;
    if (o->json)
        rc = print_json(o->file, &hw, o->stat, &t, &r, o->bands);
    else if (o->rows)
        print_rows(&hw, &t);
    else if (o->bands)
        print_bands(o->file, &hw, o->stat, &t, &r, o->res_set);
    else
        print_table(o->file, &hw, o->stat, &t, &r);
    vidur_free(&t);
    return rc;
}

int cmd_calib(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "algos")) /* its own --help */
        return calib_algos_main(argc - 1, argv + 1);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "check"))
        return calib_check_main(argc - 1, argv + 1, "tailsim calib check", 0);
    if (strcmp(argv[1], "vidur")) {
        fprintf(stderr, "tailsim calib: unknown source '%s' (expected: vidur, check or algos)\n",
                argv[1]);
        usage(stderr);
        return 2;
    }
    calib_vidur_opts o;
    int prc = calib_cmd_vidur_parse(argc, argv, &o);
    return prc >= 0 ? prc : calib_cmd_vidur(&o);
}
