/*
 * Attention and training efficiency of the cost model (issue 18 items 4-5):
 * chunk attention follows FlashAttention's published H100 throughput by the
 * chunk's equivalent causal length, and an INI without the key keeps the flat
 * attn_eff exactly; training GEMMs at train_eff; `calib check -o`'s INI
 * writer keeps every issue 18 key.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "models/comm.h"
#include "models/cost.h"
#include "models/fit.h"
#include "models/hw.h"
#include "models/hw_calib.h"

static hw_desc h100;

static void load(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &h100, &e), 0, "%s", e.msg);
    cr_assert_eq(h100.attn_fa_version, 2);
}

TestSuite(cost_attn, .init = load);

/* Compute side of one causal sequence of L tokens (32 heads of 128, 8 KV
 * heads): FLOPs / (time - launch) is the table's throughput when compute
 * bound. */
static double tflops_at(const hw_desc *hw, double L)
{
    double attn = L * (L + 1) / 2.0, flops = 4.0 * 32 * 128 * attn;
    double t = cost_attn_chunk(hw, 32, 8, 128, L, attn, L) - hw->launch_s;
    return flops / t / 1e12;
}

Test(cost_attn, chunk_attention_follows_the_published_flashattention_table)
{
    /* FlashAttention-3 paper, Fig. 5, causal head dim 128, H100: FA2 */
    static const double L[] = {512, 1024, 2048, 4096, 8192, 16384};
    static const double fa2[] = {191, 260, 298, 319, 333, 335};
    static const double fa3[] = {292, 423, 521, 579, 602, 616};
    hw_desc h3 = h100;
    h3.attn_fa_version = 3;
    for (int i = 0; i < 6; i++) {
        cr_expect_lt(fabs(tflops_at(&h100, L[i]) / fa2[i] - 1), 0.01, "FA2 at %g: %.1f",
                     L[i], tflops_at(&h100, L[i]));
        cr_expect_lt(fabs(tflops_at(&h3, L[i]) / fa3[i] - 1), 0.01, "FA3 at %g: %.1f", L[i],
                     tflops_at(&h3, L[i]));
    }
    /* FA2's efficiency rises ~1.75x from 512 to 16k, FA3's ~2.1x */
    cr_expect_gt(tflops_at(&h100, 16384) / tflops_at(&h100, 512), 1.7);
    cr_expect_gt(tflops_at(&h3, 16384) / tflops_at(&h3, 512), 2.0);
    /* a short chunk after a long context runs like the long sequence: 512
     * queries after 15.8k tokens have 16k keys each, like a 32k sequence */
    double q = 512, ctx = 15872, pairs = q * (ctx + (q + 1) / 2);
    double t = cost_attn_chunk(&h100, 32, 8, 128, q, pairs, ctx + q) - h100.launch_s;
    cr_expect_lt(fabs(4.0 * 32 * 128 * pairs / t / 1e12 / 335 - 1), 0.01);
    /* without the key: attn_eff at every length, as before */
    hw_desc flat = h100;
    flat.attn_fa_version = 0;
    for (int i = 0; i < 6; i++)
        cr_expect_lt(fabs(tflops_at(&flat, L[i]) / (flat.attn_eff * flat.peak_flops / 1e12) - 1),
                     1e-9);
}

/* Item 5: training GEMMs at train_eff (published H100 MFU, 35-55% for 7-70B
 * dense), not the serving GEMMs' gemm_eff; an INI without the key keeps
 * gemm_eff exactly. */
Test(cost_attn, training_runs_at_its_own_efficiency)
{
    cr_assert_gt(h100.train_eff, 0);
    static const char *const names[] = {"qwen2.5-7b", "qwen2.5-32b"};
    for (int i = 0; i < 2; i++) {
        llm_desc m;
        ts_err e = {{0}};
        cr_assert_eq(llm_load(names[i], &m, &e), 0, "%s", e.msg);
        double tokens = 16384, sq = 4.0 * 4096.0 * 4096.0; /* four 4k sequences */
        double t = cost_train_fwd(&h100, &m, tokens, sq);
        double flops = 2.0 * (llm_params(&m) - (double)m.vocab * m.hidden) * tokens +
                       4.0 * m.layers * (double)m.heads * m.head_dim * sq / 2.0;
        double mfu = flops / t / h100.peak_flops;
        cr_expect(mfu > 0.35 && mfu < 0.55, "%s: MFU %.3f", names[i], mfu);
        hw_desc old = h100;
        old.train_eff = 0;
        double gemm = 2.0 * (llm_params(&m) - (double)m.vocab * m.hidden) * tokens;
        double attn = 4.0 * m.layers * (double)m.heads * m.head_dim * sq / 2.0;
        cr_expect_float_eq(cost_train_fwd(&old, &m, tokens, sq),
                           gemm / (old.peak_flops * old.gemm_eff) +
                               attn / (old.peak_flops * old.attn_eff), 1e-12);
        cr_expect_eq(cost_gemm_train(&old, 4096, 4096, 4096), cost_gemm(&old, 4096, 4096, 4096));
        cr_expect_gt(cost_gemm_train(&h100, 4096, 4096, 4096), cost_gemm(&h100, 4096, 4096, 4096));
    }
}

/* `calib check -o` writes an INI through fit_write_ini(): read back, it
 * prices every op as the description written (before, the GEMM memory terms,
 * the graph collectives and the attention table were dropped). */
Test(cost_attn, written_ini_keeps_the_issue18_keys)
{
    char dir[] = "/tmp/tailsim-attn-XXXXXX", path[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/h.ini", dir);
    ts_err e = {{0}};
    cr_assert_eq(fit_write_ini(&h100, path, "test", &e), 0, "%s", e.msg);
    hw_desc back;
    cr_assert_eq(hw_load_ini(path, &back, &e), 0, "%s", e.msg);
    static const double M[] = {1, 16, 300, 4096};
    for (int i = 0; i < 4; i++)
        cr_expect_eq(cost_gemm(&back, M[i], 4608, 3584), cost_gemm(&h100, M[i], 4608, 3584),
                     "m %g", M[i]);
    cr_expect_eq(comm_allreduce_graph(&back, 65536, 8), comm_allreduce_graph(&h100, 65536, 8));
    cr_expect_eq(comm_allgather_graph(&back, 1e8, 8), comm_allgather_graph(&h100, 1e8, 8));
    cr_expect_eq(cost_attn_chunk(&back, 32, 8, 128, 512, 512 * 256.5, 512),
                 cost_attn_chunk(&h100, 32, 8, 128, 512, 512 * 256.5, 512));
    cr_expect_eq(back.train_eff, h100.train_eff);
    unlink(path);
    rmdir(dir);
}
