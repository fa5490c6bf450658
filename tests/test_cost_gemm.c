/*
 * The GEMM cost model of issue 18 (models/cost.c gemm_time): cuBLAS's
 * choice among the kernels of hw_desc.gemm_tiles, split-K and the partly
 * hidden shorter side.  cost_gemm() must never
 * decrease as the token count grows (the rollout's cost cache and the
 * schedulers assume it): checked token by token on every GEMM shape of the
 * two Vidur H100 profiles the model was fitted to, on each shipped GPU, for
 * serving and training.  The gemm_tiles key's reader and its errors, and
 * the fit's reach on the profiles themselves (skipped when
 * $TAILSIM_SHARED/profiles is absent).  And, since the fit saw two
 * architectures only, every shipped model's GEMMs on every shipped GPU
 * stay inside the roofline and reach a sane share of it.  cost_gemm_choice()
 * names the kernel and split cost_gemm() prices: forced onto them
 * (cost_gemm_forced) the price is cost_gemm's bit for bit, and no other
 * kernel or split is cheaper, over a grid of shapes on every shipped GPU.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/cost.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "models/vidur.h"
#include "tests/helpers.h"

static hw_desc h100;

static void load(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &h100, &e), 0, "%s", e.msg);
    cr_assert_eq(h100.n_gemm_tiles, 2);
}

TestSuite(cost_gemm, .init = load);

/* The architectures of the two Vidur MLP profiles (their n_head, n_kv_head,
 * n_embd, n_expanded_embd columns), profiled at TP 1, 2, 4 and 8. */
static const llm_desc vidur_archs[2] = {
    {.name = "llama-2-7b", .layers = 1, .hidden = 4096, .heads = 32, .kv_heads = 32,
     .head_dim = 128, .ffn = 11008, .vocab = 32768, .gated = 1},
    {.name = "codellama-34b", .layers = 1, .hidden = 8192, .heads = 64, .kv_heads = 8,
     .head_dim = 128, .ffn = 22016, .vocab = 32768, .gated = 1},
};
static const char *const gemm_ops[4] = {"attn_pre_proj", "attn_post_proj", "mlp_up_proj",
                                        "mlp_down_proj"};

/* Every GEMM shape of both files (4 ops x 4 TP sizes x 2 models), token by
 * token from 1 to 8192 (twice the profiles' largest): never cheaper with
 * more tokens, under hw. */
static void expect_monotone_on_vidur_shapes(const hw_desc *hw)
{
    for (int a = 0; a < 2; a++)
        for (int tp = 1; tp <= 8; tp *= 2)
            for (int o = 0; o < 4; o++) {
                double prev = 0;
                for (int T = 1; T <= 8192; T++) {
                    double t = cost_vidur_op(hw, &vidur_archs[a], tp, gemm_ops[o], T);
                    if (t < prev) {
                        cr_expect_geq(t, prev, "%s: %s %s tp %d: %d tokens %.6g s < %.6g s",
                                      hw->name, vidur_archs[a].name, gemm_ops[o], tp, T, t,
                                      prev);
                        return;
                    }
                    prev = t;
                }
            }
}

Test(cost_gemm, never_cheaper_with_more_tokens_on_the_fitted_shapes)
{
    static const char *const gpus[3] = {"h100", "h200", "a100"};
    for (int g = 0; g < 3; g++) {
        hw_desc hw;
        ts_err e = {{0}};
        cr_assert_eq(hw_load(gpus[g], &hw, &e), 0, "%s", e.msg);
        expect_monotone_on_vidur_shapes(&hw);
        /* a training step's GEMMs: the same kernels at train_eff */
        for (int n = 1024; n <= 16384; n *= 4) {
            double prev = 0;
            for (int m = 1; m <= 16384; m += (m < 1024 ? 1 : 13)) {
                double t = cost_gemm_train(&hw, m, n, 4096);
                cr_expect_geq(t, prev, "%s train m %d n %d", gpus[g], m, n);
                if (t < prev)
                    break;
                prev = t;
            }
        }
    }
}

/* The kernel choice: a decode GEMM is bound by its weights' bytes, a large
 * one by the large-tile kernel; with only the small-tile kernel a large GEMM
 * runs at its lower efficiency. */
Test(cost_gemm, the_fastest_kernel_prices_the_gemm)
{
    double bytes = 2.0 * 4096.0 * 12288.0;
    double t1 = cost_gemm(&h100, 1, 12288, 4096);
    cr_expect(t1 > bytes / h100.hbm_bw && t1 < 2.0 * bytes / h100.hbm_bw, "decode %g s", t1);
    hw_desc small = h100;
    small.n_gemm_tiles = 1; /* 64x128 alone */
    cr_assert_eq(small.gemm_tiles[0].m, 64);
    double big = cost_gemm(&h100, 4096, 12288, 4096), only = cost_gemm(&small, 4096, 12288, 4096);
    cr_expect_gt(only / big, 1.3, "large GEMM on the small-tile kernel: %g x", only / big);
    /* gemm_splitk_bytes prices the split kernels' partial sums: a GEMM of
     * few tiles and deep K gets dearer when they cost more */
    hw_desc dear = h100;
    dear.gemm_splitk_bytes = 4.0 * h100.gemm_splitk_bytes;
    cr_expect_gt(cost_gemm(&dear, 256, 1280, 8192), cost_gemm(&h100, 256, 1280, 8192));
}

/* cost_gemm_choice() returns cost_gemm() and names the kernel and split it
 * priced: forced onto them the price is the same, bit for bit, and every
 * other kernel and split (1..16) costs at least as much.  Every shipped GPU
 * (one without gemm_tiles too), tokens 1..16384, shapes of 7B to 72B
 * models at TP 1 to 8, K from 128 up (where splits start and stop). */
Test(cost_gemm, the_choice_is_the_kernel_priced)
{
    static const char *const gpus[] = {"h100", "h200", "a100"};
    static const double M[] = {1, 7, 64, 100, 255, 256, 257, 700, 1024, 3000, 8192, 16384};
    static const double NK[][2] = {{4608, 3584}, {3584, 3584}, {37888, 3584}, {3584, 18944},
                                   {1280, 8192}, {152064, 5120}, {512, 128}, {29568, 8192}};
    static const int splits[] = {1, 2, 4, 8, 16};
    int checked = 0, kernels_seen[2] = {0, 0}, split_seen[17] = {0};
    for (size_t g = 0; g < sizeof gpus / sizeof gpus[0]; g++) {
        hw_desc hw;
        ts_err e = {{0}};
        cr_assert_eq(hw_load(gpus[g], &hw, &e), 0, "%s", e.msg);
        for (int variant = 0; variant < 2; variant++) {
            if (variant == 1)
                hw.n_gemm_tiles = 0; /* the one tile_m x tile_n kernel */
            for (size_t i = 0; i < sizeof M / sizeof M[0]; i++)
                for (size_t j = 0; j < sizeof NK / sizeof NK[0]; j++) {
                    double m = M[i], n = NK[j][0], k = NK[j][1];
                    int kern = -7, split = -7;
                    double t = cost_gemm_choice(&hw, m, n, k, &kern, &split);
                    cr_assert_eq(t, cost_gemm(&hw, m, n, k), "%s m %g n %g k %g", gpus[g], m,
                                 n, k);
                    cr_assert(kern >= -1 && kern < hw.n_gemm_tiles && (kern >= 0) ==
                              (hw.n_gemm_tiles > 0), "kernel %d", kern);
                    cr_assert(split == 1 || split == 2 || split == 4 || split == 8 ||
                              split == 16, "split %d", split);
                    cr_assert_eq(cost_gemm_forced(&hw, m, n, k, kern, split), t,
                                 "%s m %g n %g k %g: kernel %d split %d", gpus[g], m, n, k,
                                 kern, split);
                    for (int o = hw.n_gemm_tiles > 0 ? 0 : -1;
                         o < (hw.n_gemm_tiles > 0 ? hw.n_gemm_tiles : 0); o++)
                        for (int s = 0; s < 5; s++)
                            cr_assert_geq(cost_gemm_forced(&hw, m, n, k, o, splits[s]), t,
                                          "%s m %g n %g k %g: kernel %d split %d is cheaper "
                                          "than the choice %d/%d", gpus[g], m, n, k, o,
                                          splits[s], kern, split);
                    if (kern >= 0 && kern < 2)
                        kernels_seen[kern]++;
                    split_seen[split]++;
                    checked++;
                }
        }
    }
    /* the grid must exercise the choice, not one corner of it */
    cr_expect_gt(kernels_seen[0], 0, "the first kernel never chosen");
    cr_expect_gt(kernels_seen[1], 0, "the second kernel never chosen");
    cr_expect_gt(split_seen[1], 0);
    cr_expect_gt(split_seen[2] + split_seen[4] + split_seen[8] + split_seen[16], 0,
                 "no split-K ever chosen");
    /* what cannot run */
    cr_expect(isinf(cost_gemm_forced(&h100, 64, 4096, 128, 0, 2)), "K slices of 64");
    cr_expect(isinf(cost_gemm_forced(&h100, 64, 4096, 4096, 2, 1)), "kernel out of range");
    cr_expect(isinf(cost_gemm_forced(&h100, 64, 4096, 4096, -1, 1)), "-1 with gemm_tiles");
    cr_expect(isinf(cost_gemm_forced(&h100, 64, 4096, 4096, 0, 3)), "split 3");
    int kern, split;
    cr_expect_eq(cost_gemm_choice(&h100, 0, 4096, 4096, &kern, &split), 0.0);
    cr_expect(kern == -1 && split == 0);
    cr_expect_gt(checked, 500);
}

/* An absent gemm_tiles is one tile_m x tile_n kernel at gemm_eff: the same
 * prices as the list naming just that kernel. */
Test(cost_gemm, absent_tiles_are_one_tile_m_by_tile_n_kernel)
{
    char a[64], b[64];
    const char *base = "[gpu]\npeak_flops = 989e12\nhbm_bw = 3.35e12\nhbm_bytes = 85e9\n"
                       "sms = 132\n[interconnect]\nnvlink_bw = 450e9\nnvlink_lat = 0.75e-6\n"
                       "nic_bw = 50e9\nnic_lat = 5e-6\ngpus_per_node = 8\n[efficiency]\n"
                       "tile_m = 64\ntile_n = 256\n";
    char text[1024];
    write_tmp(base, a, sizeof a);
    snprintf(text, sizeof text, "%sgemm_tiles = 64x256:1\n", base);
    write_tmp(text, b, sizeof b);
    hw_desc da, db;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini(a, &da, &e), 0, "%s", e.msg);
    cr_assert_eq(hw_load_ini(b, &db, &e), 0, "%s", e.msg);
    unlink(a);
    unlink(b);
    cr_expect_eq(da.n_gemm_tiles, 0);
    cr_expect_eq(db.n_gemm_tiles, 1);
    static const double M[] = {1, 33, 300, 1000, 5000};
    for (int i = 0; i < 5; i++)
        cr_expect_eq(cost_gemm(&da, M[i], 5120, 3584), cost_gemm(&db, M[i], 5120, 3584), "m %g",
                     M[i]);
}

/* gemm_tiles values: what loads, and each malformed one an error naming
 * the file, the line and the key, the description left as it was. */
Test(cost_gemm, gemm_tiles_reader)
{
    static const struct {
        const char *value;
        const char *what; /* NULL: loads */
    } cases[] = {
        {"64x128:0.5 128x256:1", NULL},
        {"  256x128:1\t64x64:0.25 ", NULL},
        {"64x128", "ROWSxCOLS:REL"},
        {"64x128:0", "ROWSxCOLS:REL"},
        {"64x128:1.5", "ROWSxCOLS:REL"},
        {"0x128:1", "ROWSxCOLS:REL"},
        {"64x2048:1", "ROWSxCOLS:REL"},
        {"64:128x1", "ROWSxCOLS:REL"},
        {"64x128:1 64x128:0.5", "repeats tile 64x128"},
        {"8x8:1 16x16:1 32x32:1 64x64:1 128x128:1", "more than 4 kernels"},
        {"", "no kernel"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64], text[1024];
        snprintf(text, sizeof text,
                 "[gpu]\npeak_flops = 989e12\nhbm_bw = 3.35e12\nhbm_bytes = 85e9\nsms = 132\n"
                 "[interconnect]\nnvlink_bw = 450e9\nnvlink_lat = 0.75e-6\nnic_bw = 50e9\n"
                 "nic_lat = 5e-6\ngpus_per_node = 8\n[efficiency]\ngemm_tiles = %s\n",
                 cases[i].value);
        write_tmp(text, path, sizeof path);
        hw_desc hw;
        ts_err e = {{0}};
        int rc = hw_load_ini(path, &hw, &e);
        unlink(path);
        if (!cases[i].what) {
            cr_expect_eq(rc, 0, "'%s': %s", cases[i].value, e.msg);
            cr_expect_eq(hw.n_gemm_tiles, 2, "'%s'", cases[i].value);
            continue;
        }
        cr_expect_eq(rc, -1, "'%s' loaded", cases[i].value);
        cr_expect(strstr(e.msg, ":13:") && strstr(e.msg, "gemm_tiles") &&
                      strstr(e.msg, cases[i].what),
                  "'%s': %s", cases[i].value, e.msg);
    }
}

/* ---- the fit's reach on its own data ----------------------------------------- */

/* What the H100 fit reaches on the two profiles it was fitted to (issue 18:
 * the goal is 8% per op and 10% per band; docs/model.md has the table):
 * every GEMM op within 11%, every band within 13%, so a change that
 * loses the fit shows. */
static void gemm_reach(const char *file)
{
    char path[4096], rel[256];
    snprintf(rel, sizeof rel, "profiles/vidur-h100/%s", file);
    shared_path(path, sizeof path, rel);
    vidur_table t;
    ts_err e = {{0}};
    cr_assert_eq(vidur_load(path, "median", &t, &e), 0, "%s", e.msg);
    vidur_report r;
    vidur_evaluate(&t, &h100, &r);
    for (int o = 0; o < VOP_COUNT; o++) {
        if (!vidur_op_is_gemm(o))
            continue;
        cr_expect_leq(r.ops[o].mape, 11.0, "%s %s: MAPE %.2f%%", file, vidur_op_names[o],
                      r.ops[o].mape);
        for (int b = 0; b < VIDUR_BANDS; b++)
            cr_expect_leq(r.bands[o][b].mape, 13.0, "%s %s band %d: MAPE %.2f%%", file,
                          vidur_op_names[o], b, r.bands[o][b].mape);
    }
    vidur_free(&t);
}

Test(cost_gemm, fit_reach_llama2_7b)
{
    gemm_reach("llama-2-7b-mlp.csv");
}

Test(cost_gemm, fit_reach_codellama_34b)
{
    gemm_reach("codellama-34b-mlp.csv");
}

/* Every shipped model's serving GEMMs (QKV, O, up, down, LM head) at TP 1-8
 * and its training GEMMs (forward, and the weight gradient whose K is the
 * micro-batch's tokens), on every shipped GPU: never faster than the
 * roofline (peak FLOPs, or the weights from HBM), and a GEMM of thousands of
 * rows reaches at least 0.4 of gemm_eff (train_eff) x peak.  Shapes the fit
 * never saw (Qwen2.5's 3,584 hidden and 18,944 FFN, Llama-3.1-70B's 28,672)
 * must price like GEMMs, not like the outliers of a curve. */
static void expect_sane(const hw_desc *hw, double m, double n, double k, int train,
                        const char *what)
{
    double t = train ? cost_gemm_train(hw, m, n, k) : cost_gemm(hw, m, n, k);
    double flops = 2.0 * m * n * k;
    double roof = fmax(flops / hw->peak_flops, 2.0 * n * k / hw->hbm_bw);
    cr_expect_gt(t, roof, "%s %s: %.4g s under the roofline %.4g s", hw->name, what, t, roof);
    if (m >= 4096 && n >= 1024 && k >= 1024) {
        double eff = flops / t / hw->peak_flops;
        double base = train ? cost_train_gemm_eff(hw) : hw->gemm_eff;
        cr_expect_geq(eff, 0.4 * base, "%s %s: %.3f of peak", hw->name, what, eff);
    }
}

Test(cost_gemm, every_shipped_model_and_gpu_prices_sane_gemms)
{
    static const char *const gpus[] = {"h100", "h200", "a100"};
    static const char *const models[] = {"qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
                                         "llama-3.1-8b", "llama-3.1-70b", "llama-2-7b"};
    static const double rows[] = {1, 7, 48, 300, 1000, 4096, 16384};
    for (size_t g = 0; g < sizeof gpus / sizeof gpus[0]; g++) {
        hw_desc hw;
        ts_err e = {{0}};
        cr_assert_eq(hw_load(gpus[g], &hw, &e), 0, "%s", e.msg);
        for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
            llm_desc md;
            cr_assert_eq(llm_load(models[i], &md, &e), 0, "%s", e.msg);
            for (int tp = 1; tp <= 8; tp *= 2) {
                double h = md.hidden, hd = md.head_dim;
                double q = (double)md.heads / tp * hd, kv = fmax(1.0, (double)md.kv_heads / tp) * hd;
                double f = (double)md.ffn / tp, v = (double)md.vocab / tp;
                char what[160];
                for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                    double m = rows[r];
                    snprintf(what, sizeof what, "%s tp %d m %.0f", models[i], tp, m);
                    expect_sane(&hw, m, q + 2.0 * kv, h, 0, what);
                    expect_sane(&hw, m, h, q, 0, what);
                    expect_sane(&hw, m, md.gated ? 2.0 * f : f, h, 0, what);
                    expect_sane(&hw, m, h, f, 0, what);
                    expect_sane(&hw, m, v, h, 0, what);
                    expect_sane(&hw, m, f, h, 1, what);
                    /* the weight gradient: K is the micro-batch's tokens */
                    expect_sane(&hw, h, f, m, 1, what);
                }
            }
        }
    }
}
