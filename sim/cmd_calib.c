/*
 * `tailsim calib vidur FILE --hw h100 [--json] [--stat median|mean|min|max]`
 *
 * Checks the cost model against measured operator times: reads a Vidur
 * profiling CSV (per-operator MLP-layer times, or NCCL all-reduce times),
 * predicts every op of every row with the hardware description's parameters
 * (cost_vidur_op, comm_allreduce), and prints the mean absolute percentage
 * error, the worst case (with its CSV line) and the row count per op, then
 * over the GEMM ops and over all ops: an aligned table, or JSON (jansson)
 * with the stable keys file, hw, calibration, stat, rows, ops {op: {n, mape,
 * worst}}, gemm_mape, overall_mape (null when there is nothing to average).
 * Exit status 0, 1 on bad input (the message names file, line and column),
 * 2 on a usage error.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "models/hw.h"
#include "models/vidur.h"
#include "sim/cmd.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim calib vidur FILE [--hw NAME|PATH] [--stat median|mean|min|max] [--json]\n"
            "\n"
            "Predicts every operator of a Vidur profiling CSV (per-operator MLP-layer\n"
            "times, or all-reduce times) with the cost model of the given hardware and\n"
            "prints MAPE, worst case and row count per op, over the GEMM ops and over\n"
            "all ops.\n"
            "\n"
            "  --hw NAME    hardware description (models/hw/NAME.ini or a path; default h100)\n"
            "  --stat S     measured column to compare with (default median)\n"
            "  --json       print JSON instead of a table\n"
            "  --help       this text\n");
}

static int print_json(const char *file, const hw_desc *hw, const char *stat,
                      const vidur_table *t, const vidur_report *r)
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
        if (!op)
            goto oom;
        json_object_set_new(ops, vidur_op_names[o], op);
        all_n += r->ops[o].n;
        gemm_n += vidur_op_is_gemm(o) ? r->ops[o].n : 0;
    }
    json_object_set_new(root, "ops", ops);
    ops = NULL;
    json_object_set_new(root, "gemm_mape", gemm_n ? json_real(r->gemm_mape) : json_null());
    json_object_set_new(root, "overall_mape", all_n ? json_real(r->overall_mape) : json_null());
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
}

int cmd_calib(int argc, char **argv)
{
    const char *hw_name = "h100", *stat = "median", *file = NULL;
    int json = 0;
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
    if (strcmp(argv[1], "vidur")) {
        fprintf(stderr, "tailsim calib: unknown source '%s' (expected: vidur)\n", argv[1]);
        usage(stderr);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--hw") || !strcmp(a, "--stat")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tailsim calib: %s needs a value\n", a);
                return 2;
            }
            if (!strcmp(a, "--hw"))
                hw_name = argv[++i];
            else
                stat = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tailsim calib: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!file) {
            file = a;
        } else {
            fprintf(stderr, "tailsim calib: more than one FILE ('%s')\n", a);
            return 2;
        }
    }
    if (!file) {
        fprintf(stderr, "tailsim calib: missing FILE\n");
        usage(stderr);
        return 2;
    }
    if (strcmp(stat, "median") && strcmp(stat, "mean") && strcmp(stat, "min") &&
        strcmp(stat, "max")) {
        fprintf(stderr, "tailsim calib: --stat must be median, mean, min or max (got '%s')\n", stat);
        return 2;
    }

    ts_err e = {{0}};
    hw_desc hw;
    if (hw_load(hw_name, &hw, &e)) {
        fprintf(stderr, "tailsim calib: %s\n", e.msg);
        return 1;
    }
    vidur_table t;
    if (vidur_load(file, stat, &t, &e)) {
        fprintf(stderr, "tailsim calib: %s\n", e.msg);
        return 1;
    }
    vidur_report r;
    vidur_evaluate(&t, &hw, &r);
    int rc = 0;
    if (json)
        rc = print_json(file, &hw, stat, &t, &r);
    else
        print_table(file, &hw, stat, &t, &r);
    vidur_free(&t);
    return rc;
}
