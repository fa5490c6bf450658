/*
 * gemm_algos.csv (cuBLASLt's kernel per GEMM shape, models/gemm_algos.c)
 * and `tailsim calib algos`: a small hand-written file loads with every
 * column; cuBLAS's tile is turned round (its name is of the column-major
 * n x m output) before it is matched with the model's choice
 * (cost_gemm_choice), so the tile written transposed agrees and the tile as
 * the model writes it does not (on h100's 64x128 and 128x256 kernels);
 * the CPU emulator's rows and batched products are skipped and counted;
 * each bad line is refused with file, line, column number and name; the
 * command's exit status and JSON summary.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "models/cost.h"
#include "models/gemm_algos.h"
#include "models/hw_calib.h"
#include "tests/helpers.h"

static hw_desc h100;

static void load(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &h100, &e), 0, "%s", e.msg);
    cr_assert_eq(h100.n_gemm_tiles, 2);
}

TestSuite(gemm_algos, .init = load);

/* A file whose first two rows carry the model's own choice for (m, n, k),
 * the tile written cuBLAS's way (n x m) and then the model's way round. */
static void write_choice_file(double m, double n, double k, char *path, size_t pn)
{
    int kern, split;
    cost_gemm_choice(&h100, m, n, k, &kern, &split);
    cr_assert(kern >= 0);
    const hw_gemm_tile *g = &h100.gemm_tiles[kern];
    cr_assert_neq(g->m, g->n, "a square tile cannot tell the orientation");
    char text[2048];
    snprintf(text, sizeof text,
             GEMM_ALGOS_HEADER "\n"
             "\"NVIDIA H100\",%.0f,%.0f,%.0f,1,0,1,31,%dx%d,0,3,%d,0,1,0\n"
             "\"NVIDIA H100\",%.0f,%.0f,%.0f,1,0,1,31,%dx%d,0,3,%d,0,1,0\n"
             "\"tailsim CPU emulator\",8,512,256,1,0,1,-1,emu,0,0,1,0,0,0\n"
             "\"NVIDIA H100\",64,128,64,28,1,0,6,128x64,18,5,1,0,0,0\n"
             "\"NVIDIA H100\",16,4096,4096,1,0,1,66,undefined,0,0,-1,-1,-1,-1\n",
             m, n, k, g->n, g->m, split, m, n, k, g->m, g->n, split == 1 ? 2 : 1);
    write_tmp(text, path, pn);
}

Test(gemm_algos, loads_and_turns_cublas_tile_round)
{
    char path[64];
    write_choice_file(4096, 12288, 4096, path, sizeof path);
    gemm_algo_row *rows;
    size_t n;
    ts_err e = {{0}};
    cr_assert_eq(gemm_algos_load(path, &rows, &n, &e), 0, "%s", e.msg);
    unlink(path);
    cr_assert_eq(n, 5);
    cr_expect_str_eq(rows[0].device, "NVIDIA H100");
    cr_expect(rows[0].m == 4096 && rows[0].n == 12288 && rows[0].k == 4096 && rows[0].tb == 1);
    cr_expect(rows[0].tile_rows > 0 && rows[0].stages_id == 3 && rows[0].swizzle == 1);
    cr_expect_eq(rows[0].line, 2);
    cr_expect(rows[2].emulated && rows[2].algo_id == -1);
    cr_expect(rows[3].batch == 28 && rows[3].ta == 1);
    cr_expect(rows[4].tile_rows == 0 && rows[4].splitk == -1 && rows[4].cluster == -1);

    gemm_algo_cmp c[5];
    for (size_t i = 0; i < n; i++)
        gemm_algo_compare(&h100, &rows[i], &c[i]);
    cr_expect_eq(c[0].skip, 0);
    cr_expect_eq(c[0].tile_agrees, 1, "cuBLAS's %s (n x m) is the model's %dx%d", rows[0].tile,
                 c[0].model_m, c[0].model_n);
    cr_expect_eq(c[0].split_agrees, 1);
    cr_expect_eq(c[0].t_model, cost_gemm(&h100, 4096, 12288, 4096));
    cr_expect_eq(c[0].t_cublas, c[0].t_model, "the model's own choice, forced, prices the same");
    cr_expect_eq(c[1].tile_agrees, 0, "%s read as m x n must not match", rows[1].tile);
    cr_expect_eq(c[1].split_agrees, 0);
    cr_expect_eq(c[2].skip, GEMM_ALGO_SKIP_EMULATED);
    cr_expect_eq(c[3].skip, GEMM_ALGO_SKIP_BATCHED);
    cr_expect(c[4].skip == 0 && c[4].tile_agrees == -1 && c[4].split_agrees == -1 &&
              c[4].t_cublas < 0);
    free(rows);
}

/* Without the cluster column (cuBLAS < 12's headers) the file loads. */
Test(gemm_algos, header_without_cluster)
{
    char path[64];
    write_tmp("device,m,n,k,batch,ta,tb,algo_id,tile,tile_id,stages_id,splitk,reduction,swizzle\n"
              "H100,1,4608,3584,1,0,1,21,64x128,17,8,4,2,0\n",
              path, sizeof path);
    gemm_algo_row *rows;
    size_t n;
    ts_err e = {{0}};
    cr_assert_eq(gemm_algos_load(path, &rows, &n, &e), 0, "%s", e.msg);
    unlink(path);
    cr_expect(n == 1 && rows[0].cluster == -1 && rows[0].splitk == 4 && rows[0].reduction == 2);
    free(rows);
}

/* Each bad file: the message names the file, the line and the column. */
Test(gemm_algos, bad_lines_name_file_line_and_column)
{
    static const char ok[] = "\"H\",1,4608,3584,1,0,1,21,64x128,17,8,1,0,0,0\n";
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", ":1: empty file"},
        {"device,m,n,k,batch,ta,tb,algo,tile\n", ":1: column 8: expected 'algo_id'"},
        {GEMM_ALGOS_HEADER ",extra\n", ":1: column 16: unexpected column"},
        {GEMM_ALGOS_HEADER "\n", ":2: no rows"},
        {GEMM_ALGOS_HEADER "\n\"H\",0,4608,3584,1,0,1,21,64x128,17,8,1,0,0,0\n",
         ":2: column 2 'm': '0' is not an integer >= 1"},
        {GEMM_ALGOS_HEADER "\n%s\"H\",1,4608,3584,1,2,1,21,64x128,17,8,1,0,0,0\n",
         ":3: column 6 'ta': '2' is not 0 or 1"},
        {GEMM_ALGOS_HEADER "\n%s\"H\",1,4608,3584,1,0,1,21,64by128,17,8,1,0,0,0\n",
         ":3: column 9 'tile': '64by128' is not a tile"},
        {GEMM_ALGOS_HEADER "\n\"H\",1,4608,3584,1,0,1,5,emu,0,0,1,0,0,0\n",
         ":2: column 9 'tile': 'emu' (the CPU emulator's) with an algo_id >= 0"},
        {GEMM_ALGOS_HEADER "\n\"H\",1,4608,3584,1,0,1,21,64x128,17,8,0,0,0,0\n",
         ":2: column 12 'splitk': '0': split-K is 1"},
        {GEMM_ALGOS_HEADER "\n\"H\",1,4608,3584,1,0,1,21,64x128,17,-2,1,0,0,0\n",
         ":2: column 11 'stages_id': '-2' is not an integer >= -1"},
        {GEMM_ALGOS_HEADER "\n\"H\",1,4608,3584,1,0,1,21,64x128,17,8,1,0\n",
         ":2: column 14 'swizzle': missing"},
        {GEMM_ALGOS_HEADER "\n%s\"H\",1,4608,3584,1,0,1,21,64x128,17,8,1,0,0,0,9\n",
         ":3: column 16: more fields"},
        {GEMM_ALGOS_HEADER "\n\"H,1,4608,3584,1,0,1,21,64x128,17,8,1,0,0,0\n",
         ":2: column 1 'device': malformed quotes"},
        {GEMM_ALGOS_HEADER "\n%s\n", ":3: column 1 'device': empty line"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024], path[64];
        snprintf(text, sizeof text, cases[i].text, ok);
        write_tmp(text, path, sizeof path);
        gemm_algo_row *rows = (gemm_algo_row *)1;
        size_t n = 7;
        ts_err e = {{0}};
        int rc = gemm_algos_load(path, &rows, &n, &e);
        unlink(path);
        cr_expect_eq(rc, -1, "case %zu loaded", i);
        cr_expect(rows == NULL && n == 0, "case %zu: partial result", i);
        cr_expect(strstr(e.msg, path) && strstr(e.msg, cases[i].want),
                  "case %zu: '%s' lacks '%s'", i, e.msg, cases[i].want);
    }
}

/* The command: exit 0 with the summary, 1 on a bad file (message names
 * it), 2 on usage errors; --json has the summary keys. */
Test(gemm_algos, command_exit_status_and_json)
{
    char path[64], bad[64];
    write_choice_file(4096, 12288, 4096, path, sizeof path);
    write_tmp(GEMM_ALGOS_HEADER "\n\"H\",1,x,3584,1,0,1,21,64x128,17,8,1,0,0,0\n", bad,
              sizeof bad);
    char *argv1[] = {"algos", path, "--hw", "h100", NULL};
    cr_expect_eq(calib_algos_main(4, argv1), 0);
    char *argv2[] = {"algos", bad, NULL};
    cr_expect_eq(calib_algos_main(2, argv2), 1);
    char *argv3[] = {"algos", NULL};
    cr_expect_eq(calib_algos_main(1, argv3), 2);
    char *argv4[] = {"algos", path, "--frobnicate", NULL};
    cr_expect_eq(calib_algos_main(3, argv4), 2);
    if (access("build/tailsim", X_OK) == 0) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "build/tailsim calib algos %s --hw h100 --json", path);
        char *out = run_capture(cmd);
        json_error_t je;
        json_t *j = json_loads(out, 0, &je);
        cr_assert_not_null(j, "%s: %s", je.text, out);
        cr_expect_eq(json_integer_value(json_object_get(j, "rows")), 5);
        cr_expect_eq(json_integer_value(json_object_get(j, "compared")), 3);
        cr_expect_eq(json_integer_value(json_object_get(j, "skipped_emulated")), 1);
        cr_expect_eq(json_integer_value(json_object_get(j, "skipped_batched")), 1);
        cr_expect_eq(json_integer_value(json_object_get(j, "tile_known")), 2);
        cr_expect_eq(json_integer_value(json_object_get(j, "tile_agree")), 1);
        cr_expect_eq(json_integer_value(json_object_get(j, "split_agree")), 1);
        cr_expect_eq(json_array_size(json_object_get(j, "shapes")), 3);
        json_decref(j);
        free(out);
    }
    unlink(path);
    unlink(bad);
}
