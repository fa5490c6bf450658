/*
 * `tailsim calib algos FILE [--hw NAME|PATH] [--json]`
 *
 * Sets cuBLASLt's kernel choices (gemm_algos.csv, which `tailsim-validate
 * calibrate` writes next to calib.csv: the algorithm its heuristic returned
 * for each GEMM shape) against the cost model's own choice among the
 * hardware's gemm_tiles (cost_gemm_choice): per shape cuBLAS's tile and
 * split-K beside the model's, and a summary of how often the tile and the
 * split agree.  cuBLAS's tile is printed the model's way round, m (tokens)
 * x n (outputs): cuBLASLt names the tiles of its column-major output, n x m
 * (models/gemm_algos.c).  Rows of the CPU emulator (tile "emu": its
 * stand-in has no kernels) and batched products (cost_gemm prices one) are
 * counted and skipped.  --json prints the same as JSON with the stable keys
 * file, hw, rows, compared, skipped_emulated, skipped_batched,
 * tile_known, tile_agree, split_known, split_agree, shapes [{line, m, n, k,
 * ta, tb, cublas {algo_id, tile, tile_id, tile_m, tile_n, splitk, stages_id,
 * reduction, swizzle, cluster}, model {kernel, tile_m, tile_n, splitk,
 * time_us}, cublas_time_us, tile_agrees, split_agrees}] (tile_m/tile_n null
 * when unknown, agreement null when cuBLAS's side is unknown,
 * cublas_time_us null unless cuBLAS's tile is one of the model's kernels).
 * Exit status 0 (whatever agrees), 1 on bad input (the message names file,
 * line and column), 2 on a usage error.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "models/gemm_algos.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "cli/cmd.h"
#include "cli/opts.h"

typedef struct algos_opts {
    const char *file;    /* gemm_algos.csv ("-": standard input) */
    const char *hw_name; /* --hw (default h200: the GPU gpu.sh measures) */
    int json;            /* --json */
} algos_opts;

/* The summary counts. */
typedef struct algos_sum {
    size_t compared, emulated, batched;
    size_t tile_known, tile_agree, split_known, split_agree;
} algos_sum;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim calib algos FILE [--hw NAME|PATH] [--json]\n"
            "\n"
            "Reads gemm_algos.csv (tailsim-validate calibrate: cuBLASLt's algorithm per\n"
            "GEMM shape) and prints per shape cuBLAS's tile and split-K next to the cost\n"
            "model's choice among the hardware's gemm_tiles, then how often they agree.\n"
            "Tiles are m (tokens) x n (outputs); cuBLASLt's own name of the tile is its\n"
            "output's transpose (n x m).  The CPU emulator's rows (tile emu) and\n"
            "batched products are skipped and counted.\n"
            "\n"
            "  --hw NAME    hardware description (models/hw/NAME.ini or a path; default h200)\n"
            "  --json       print JSON instead of a table\n"
            "  --help       this text\n");
}

/* Parses argv (argv[0] is "algos") into o; -1 to go on, else the exit status. */
static int parse(int argc, char **argv, algos_opts *o)
{
    o->file = NULL;
    o->hw_name = "h200";
    o->json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (opts_match(a, "--hw")) {
            if (!(v = opts_value(argc, argv, &i, "--hw"))) {
                fprintf(stderr, "tailsim calib algos: --hw needs a value\n");
                return 2;
            }
            o->hw_name = v;
        } else if (a[0] == '-' && a[1]) {
            char q[TS_QUOTE_BUF];
            fprintf(stderr, "tailsim calib algos: unknown option '%s'\n",
                    ts_quote(a, TS_QUOTE_MAX, q, sizeof q));
            usage(stderr);
            return 2;
        } else if (!o->file) {
            o->file = a;
        } else {
            fprintf(stderr, "tailsim calib algos: one FILE only\n");
            return 2;
        }
    }
    if (!o->file) {
        fprintf(stderr, "tailsim calib algos: FILE (gemm_algos.csv) is required\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

static void count(const gemm_algo_cmp *c, algos_sum *s)
{
    if (c->skip == GEMM_ALGO_SKIP_EMULATED) {
        s->emulated++;
        return;
    }
    if (c->skip == GEMM_ALGO_SKIP_BATCHED) {
        s->batched++;
        return;
    }
    s->compared++;
    s->tile_known += c->tile_agrees >= 0;
    s->tile_agree += c->tile_agrees == 1;
    s->split_known += c->split_agrees >= 0;
    s->split_agree += c->split_agrees == 1;
}

static double pct(size_t a, size_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

static const char *yes_no(int v)
{
    return v < 0 ? "?" : v ? "yes" : "no";
}

static void print_table(const algos_opts *o, const hw_desc *hw, const gemm_algo_row *rows,
                        const gemm_algo_cmp *cmp, size_t n, const algos_sum *s)
{
    char dev[128];
    printf("cuBLASLt's kernels (%s, %s) against the cost model (%s)\n", o->file,
           cmd_flat(rows[0].device, dev, sizeof dev), hw->name);
    printf("%6s %6s %7s %6s %2s %2s | %-9s %-9s %5s | %-9s %5s %9s | %4s %5s\n", "line", "m",
           "n", "k", "ta", "tb", "cublas", "(m x n)", "split", "model", "split", "model_us",
           "tile", "split");
    for (size_t i = 0; i < n; i++) {
        const gemm_algo_row *r = &rows[i];
        const gemm_algo_cmp *c = &cmp[i];
        if (c->skip)
            continue;
        char mn[24] = "?", model[24];
        if (c->cublas_m > 0)
            snprintf(mn, sizeof mn, "%dx%d", c->cublas_m, c->cublas_n);
        snprintf(model, sizeof model, "%dx%d", c->model_m, c->model_n);
        printf("%6d %6d %7d %6d %2d %2d | %-9s %-9s %5d | %-9s %5d %9.2f | %4s %5s\n", r->line,
               r->m, r->n, r->k, r->ta, r->tb, r->tile, mn, r->splitk, model, c->split,
               c->t_model * 1e6, yes_no(c->tile_agrees), yes_no(c->split_agrees));
    }
    printf("compared %zu of %zu shapes", s->compared, n);
    if (s->emulated)
        printf("; skipped %zu of the CPU emulator (tile emu: a fake configuration, not "
               "cuBLASLt's)", s->emulated);
    if (s->batched)
        printf("; skipped %zu batched (cost_gemm prices one product)", s->batched);
    printf("\n");
    printf("tile agrees:    %zu of %zu (%.0f%%)\n", s->tile_agree, s->tile_known,
           pct(s->tile_agree, s->tile_known));
    printf("split agrees:   %zu of %zu (%.0f%%)\n", s->split_agree, s->split_known,
           pct(s->split_agree, s->split_known));
}

/* Sets key to an integer, or null when v < 0 (unknown). */
static void set_known(json_t *o, const char *key, int v)
{
    json_object_set_new(o, key, v < 0 ? json_null() : json_integer(v));
}

static json_t *shape_json(const gemm_algo_row *r, const gemm_algo_cmp *c)
{
    json_t *o = json_object(), *cu = json_object(), *mo = json_object();
    if (!o || !cu || !mo) {
        json_decref(o);
        json_decref(cu);
        json_decref(mo);
        return NULL;
    }
    json_object_set_new(o, "line", json_integer(r->line));
    json_object_set_new(o, "m", json_integer(r->m));
    json_object_set_new(o, "n", json_integer(r->n));
    json_object_set_new(o, "k", json_integer(r->k));
    json_object_set_new(o, "ta", json_integer(r->ta));
    json_object_set_new(o, "tb", json_integer(r->tb));
    json_object_set_new(cu, "algo_id", json_integer(r->algo_id));
    json_object_set_new(cu, "tile", json_string(r->tile));
    json_object_set_new(cu, "tile_id", json_integer(r->tile_id));
    set_known(cu, "tile_m", c->cublas_m > 0 ? c->cublas_m : -1);
    set_known(cu, "tile_n", c->cublas_n > 0 ? c->cublas_n : -1);
    json_object_set_new(cu, "splitk", json_integer(r->splitk));
    json_object_set_new(cu, "stages_id", json_integer(r->stages_id));
    json_object_set_new(cu, "reduction", json_integer(r->reduction));
    json_object_set_new(cu, "swizzle", json_integer(r->swizzle));
    json_object_set_new(cu, "cluster", json_integer(r->cluster));
    json_object_set_new(o, "cublas", cu);
    json_object_set_new(mo, "kernel", json_integer(c->kernel));
    json_object_set_new(mo, "tile_m", json_integer(c->model_m));
    json_object_set_new(mo, "tile_n", json_integer(c->model_n));
    json_object_set_new(mo, "splitk", json_integer(c->split));
    json_object_set_new(mo, "time_us", json_real(c->t_model * 1e6));
    json_object_set_new(o, "model", mo);
    json_object_set_new(o, "cublas_time_us",
                        c->t_cublas < 0 ? json_null() : json_real(c->t_cublas * 1e6));
    json_object_set_new(o, "tile_agrees",
                        c->tile_agrees < 0 ? json_null() : json_boolean(c->tile_agrees));
    json_object_set_new(o, "split_agrees",
                        c->split_agrees < 0 ? json_null() : json_boolean(c->split_agrees));
    return o;
}

static int print_json(const algos_opts *o, const hw_desc *hw, const gemm_algo_row *rows,
                      const gemm_algo_cmp *cmp, size_t n, const algos_sum *s)
{
    json_t *root = json_object(), *shapes = json_array();
    int rc = root && shapes ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (cmp[i].skip)
            continue;
        json_t *sh = shape_json(&rows[i], &cmp[i]);
        rc = sh ? json_array_append_new(shapes, sh) : -1;
    }
    if (rc == 0) {
        json_object_set_new(root, "file", json_string(o->file));
        json_object_set_new(root, "hw", json_string(hw->name));
        json_object_set_new(root, "rows", json_integer((json_int_t)n));
        const size_t v[7] = {s->compared,  s->emulated,    s->batched,    s->tile_known,
                             s->tile_agree, s->split_known, s->split_agree};
        static const char *const k[7] = {"compared",   "skipped_emulated", "skipped_batched",
                                         "tile_known", "tile_agree",       "split_known",
                                         "split_agree"};
        for (int i = 0; i < 7; i++)
            json_object_set_new(root, k[i], json_integer((json_int_t)v[i]));
        json_object_set_new(root, "shapes", shapes);
        shapes = NULL;
        ts_err e = {{0}};
        if (cmd_print_json(root, 6, &e)) {
            fprintf(stderr, "tailsim calib algos: %s\n", e.msg);
            rc = -1;
        }
    } else {
        fprintf(stderr, "tailsim calib algos: out of memory building the JSON\n");
    }
    json_decref(shapes);
    json_decref(root);
    return rc;
}

int calib_algos_main(int argc, char **argv)
{
    algos_opts o;
    int prc = parse(argc, argv, &o);
    if (prc >= 0)
        return prc;
    ts_err e = {{0}};
    hw_desc hw;
    gemm_algo_row *rows = NULL;
    size_t n = 0;
    if (hw_load(o.hw_name, &hw, &e) || gemm_algos_load(o.file, &rows, &n, &e)) {
        fprintf(stderr, "tailsim calib algos: %s\n", e.msg);
        return 1;
    }
    gemm_algo_cmp *cmp = calloc(n, sizeof *cmp);
    if (!cmp) {
        fprintf(stderr, "tailsim calib algos: out of memory for %zu rows\n", n);
        free(rows);
        return 1;
    }
    algos_sum s = {0};
    for (size_t i = 0; i < n; i++) {
        gemm_algo_compare(&hw, &rows[i], &cmp[i]);
        count(&cmp[i], &s);
    }
    int rc = 0;
    if (o.json)
        rc = print_json(&o, &hw, rows, cmp, n, &s) ? 1 : 0;
    else
        print_table(&o, &hw, rows, cmp, n, &s);
    free(cmp);
    free(rows);
    return rc;
}
