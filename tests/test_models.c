/*
 * Tests of models/: INI loading and its errors, parameter counts, the cost
 * model's shape (monotone in work, per-sequence attention, memory-bound
 * decode), collectives, memory, the issue-18 GEMM and engine-mode terms.
 * The Vidur CSV reader and the acceptance check against Vidur's measured
 * H100 operator times are in tests/test_vidur.c.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "models/comm.h"
#include "models/cost.h"
#include "models/cost_spec.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "models/memory.h"
#include "models/vidur.h"
#include "tests/helpers.h"
#include "cli/cmd.h"

static hw_desc h100;
static llm_desc q7;

static void setup(void)
{
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h100", &h100, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("qwen2.5-7b", &q7, &e), 0, "%s", e.msg);
}

TestSuite(models, .init = setup);

/* ---- INI files ------------------------------------------------------------ */

static int load_all_in(const char *sub, int is_hw)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", ts_data_root(), sub);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".ini"))
            continue;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        ts_err e = {{0}};
        if (is_hw) {
            hw_desc hw;
            cr_expect_eq(hw_load(path, &hw, &e), 0, "%s: %s", path, e.msg);
            cr_expect_gt(hw.peak_flops, 0);
        } else {
            llm_desc m;
            cr_expect_eq(llm_load(path, &m, &e), 0, "%s: %s", path, e.msg);
            cr_expect_gt(llm_params(&m), 1e8, "%s", path);
        }
        n++;
    }
    closedir(d);
    return n;
}

Test(models, every_shipped_ini_loads)
{
    cr_expect_geq(load_all_in("models/hw", 1), 2);
    cr_expect_geq(load_all_in("models/llm", 0), 8);
    static const char *const names[] = {
        "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "deepseek-r1-distill-qwen-7b",
        "llama-3.1-8b", "llama-3.1-70b", "llama-2-7b", "opensora-stdit3",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        llm_desc m;
        ts_err e = {{0}};
        cr_expect_eq(llm_load(names[i], &m, &e), 0, "%s", e.msg);
        cr_expect_str_eq(m.name, names[i]);
    }
    hw_desc h200;
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h200", &h200, &e), 0, "%s", e.msg);
    cr_expect_str_eq(h200.name, "h200");
    cr_expect_gt(h200.hbm_bw, h100.hbm_bw);
    cr_expect_eq(h100.sms, 132);
    cr_expect_eq(h100.gpus_per_node, 8);
    cr_expect(strlen(h100.calibration) > 0);
}

static void expect_near(double got, double want, double rel, const char *what)
{
    cr_expect(fabs(got - want) <= rel * want, "%s: %.4g, expected %.4g within %.0f%%", what, got,
              want, rel * 100);
}

Test(models, llm_params_match_published_sizes)
{
    static const struct { const char *name; double params; } cases[] = {
        {"qwen2.5-7b", 7.6e9}, {"qwen2.5-32b", 32.8e9}, {"llama-3.1-8b", 8.0e9},
        {"llama-3.1-70b", 70.6e9}, {"qwen2.5-14b", 14.8e9}, {"llama-2-7b", 6.74e9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        llm_desc m;
        ts_err e = {{0}};
        cr_assert_eq(llm_load(cases[i].name, &m, &e), 0, "%s", e.msg);
        expect_near(llm_params(&m), cases[i].params, 0.02, cases[i].name);
    }
}

static const char good_llm[] =
    "[model]\nlayers = 2\nhidden = 64\nheads = 4\nkv_heads = 2\nhead_dim = 16\n"
    "ffn = 128\nvocab = 100\ntied = 0\ngated = 1\nqkv_bias = 0\n";

/* Loads `text` as an LLM description and expects an error containing each of
 * the NULL-terminated strings (the path is always expected). */
static void expect_llm_error(const char *text, const char *want1, const char *want2)
{
    char path[64];
    write_tmp(text, path, sizeof path);
    llm_desc m;
    ts_err e = {{0}};
    int rc = llm_load(path, &m, &e);
    unlink(path);
    cr_assert_eq(rc, -1, "expected an error for:\n%s", text);
    cr_expect(strstr(e.msg, path) != NULL, "message lacks the file: %s", e.msg);
    if (want1)
        cr_expect(strstr(e.msg, want1) != NULL, "message lacks '%s': %s", want1, e.msg);
    if (want2)
        cr_expect(strstr(e.msg, want2) != NULL, "message lacks '%s': %s", want2, e.msg);
}

Test(models, good_temporary_ini_loads)
{
    char path[64];
    write_tmp(good_llm, path, sizeof path);
    llm_desc m;
    ts_err e = {{0}};
    cr_expect_eq(llm_load(path, &m, &e), 0, "%s", e.msg);
    unlink(path);
    cr_expect_eq(m.layers, 2);
    cr_expect_eq(m.ffn, 128);
    cr_expect_eq(m.gated, 1);
}

Test(models, bad_ini_errors_name_file_line_and_key)
{
    /* unknown key on line 3 */
    expect_llm_error("[model]\nlayers = 2\nlayerz = 3\n", ":3:", "layerz");
    /* negative value on line 4 */
    expect_llm_error("[model]\nlayers = 2\nhidden = 64\nheads = -4\n", ":4:", "heads");
    /* not a number on line 2 */
    expect_llm_error("[model]\nhidden = abc\n", ":2:", "hidden");
    /* unknown section */
    expect_llm_error("[modle]\nlayers = 2\n", ":2:", "modle");
    /* missing key: everything but ffn */
    char text[512];
    snprintf(text, sizeof text, "%s", good_llm);
    char *p = strstr(text, "ffn = 128\n");
    memmove(p, p + 10, strlen(p + 10) + 1);
    expect_llm_error(text, "missing", "ffn");
    /* syntax error */
    expect_llm_error("[model]\nlayers 2\n", ":2:", NULL);

    /* hardware: out-of-range value and unknown key */
    char path[64];
    write_tmp("[gpu]\npeak_flops = -1\n", path, sizeof path);
    hw_desc hw;
    ts_err e = {{0}};
    cr_expect_eq(hw_load(path, &hw, &e), -1);
    cr_expect(strstr(e.msg, ":2:") && strstr(e.msg, "peak_flops"), "%s", e.msg);
    unlink(path);
    write_tmp("[gpu]\npeak_flops = 1e15\n[efficiency]\nwarp_speed = 9\n", path, sizeof path);
    cr_expect_eq(hw_load(path, &hw, &e), -1);
    cr_expect(strstr(e.msg, ":4:") && strstr(e.msg, "warp_speed"), "%s", e.msg);
    unlink(path);
    write_tmp("[gpu]\npeak_flops = 1e15\n", path, sizeof path);
    cr_expect_eq(hw_load(path, &hw, &e), -1);
    cr_expect(strstr(e.msg, "missing") && strstr(e.msg, "hbm_bw"), "%s", e.msg);
    unlink(path);

    cr_expect_eq(llm_load("no-such-model", &q7, &e), -1);
    cr_expect(strstr(e.msg, "no-such-model") != NULL, "%s", e.msg);
}

/* ---- cost model ------------------------------------------------------------- */

Test(models, gemm_is_monotone_and_roofline_bound)
{
    double prev = 0;
    for (int m = 1; m <= 8192; m += (m < 64 ? 1 : 7)) {
        double t = cost_gemm(&h100, m, 4096, 4096);
        cr_expect_geq(t, prev, "m=%d: %.3g < %.3g", m, t, prev);
        prev = t;
        double floor_c = 2.0 * m * 4096.0 * 4096.0 / h100.peak_flops;
        double floor_m = 2.0 * 4096.0 * 4096.0 / h100.hbm_bw;
        cr_expect_gt(t, floor_c);
        cr_expect_gt(t, floor_m);
    }
    cr_expect_eq(cost_gemm(&h100, 0, 10, 10), 0.0);
    /* a large GEMM runs near gemm_eff of peak: its last wave, gemm_lat_s and
     * gemm_mix of its memory side take ~6% */
    double t = cost_gemm(&h100, 8192, 8192, 8192);
    double eff = 2.0 * 8192.0 * 8192.0 * 8192.0 / t / h100.peak_flops;
    cr_expect(eff > 0.9 * h100.gemm_eff && eff <= h100.gemm_eff, "eff %.3f", eff);
}

/* The elementwise kernels (models/cost.c ew_kernels): never cheaper with
 * more rows of the same width, faster while the working set fits the L2
 * and the same beyond it, and in waves of two rows per SM when the per-row
 * floor rules. */
Test(models, elementwise_kernels_rows_l2_and_waves)
{
    static const double widths[] = {256, 2048, 8192, 16384, 44032};
    for (int k = 0; k < COST_K_COUNT; k++)
        for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
            double prev = 0;
            for (int T = 1; T <= 16384; T += (T < 600 ? 1 : 37)) {
                double t = cost_kernel(&h100, (cost_kernel_kind)k, T * widths[w], T);
                cr_expect_geq(t, prev, "kind %d width %.0f T=%d", k, widths[w], T);
                prev = t;
            }
        }
    hw_desc no_l2 = h100;
    no_l2.l2_bytes = 0;
    cr_assert_gt(h100.l2_bytes, 40e6, "l2_bytes %.3g", h100.l2_bytes);
    /* an RMSNorm of 20 MB (well inside the L2) streams faster than from HBM */
    double rows = 20e6 / (2.0 * 8192 * 2.0);
    double in_l2 = cost_kernel(&h100, COST_K_NORM, 20e6, rows);
    double hbm = cost_kernel(&no_l2, COST_K_NORM, 20e6, rows);
    cr_expect_lt(in_l2, 0.9 * hbm, "%.3g vs %.3g", in_l2, hbm);
    /* past the L2 the working set comes from HBM: the same time either way */
    rows = 2.0 * h100.l2_bytes / (2.0 * 8192 * 2.0);
    cr_expect_float_eq(cost_kernel(&h100, COST_K_NORM, 2.0 * h100.l2_bytes, rows),
                       cost_kernel(&no_l2, COST_K_NORM, 2.0 * h100.l2_bytes, rows), 1e-12);
    /* waves: one row more than two per SM starts a second wave of the floor */
    int full = 2 * h100.sms;
    double row_bytes = 2.0 * 8192 * 2.0;
    double one = cost_kernel(&h100, COST_K_NORM, full * row_bytes, full);
    double two = cost_kernel(&h100, COST_K_NORM, (full + 1) * row_bytes, full + 1);
    double t_row = row_bytes / h100.ew_row_bw[COST_K_NORM];
    cr_expect_gt(two - one, 0.5 * t_row, "step %.3g us, row %.3g us", (two - one) * 1e6,
                 t_row * 1e6);
    cr_expect_eq(cost_kernel(&h100, COST_K_NORM, 0, 0), 0.0);
}

Test(models, more_tokens_never_cheaper)
{
    double prev = 0;
    for (int T = 1; T <= 16384; T += (T < 128 ? 1 : 61)) {
        double t = cost_prefill_chunk(&h100, &q7, 1, T, 0);
        cr_expect_geq(t, prev, "prefill T=%d", T);
        prev = t;
    }
    for (int tp = 1; tp <= 8; tp *= 2) {
        prev = 0;
        for (int b = 1; b <= 1024; b++) {
            double t = cost_decode_iter(&h100, &q7, tp, b, 1000.0 * b);
            cr_expect_geq(t, prev, "decode tp=%d b=%d", tp, b);
            prev = t;
        }
    }
    for (int b = 1; b <= 512; b *= 2)
        cr_expect_gt(cost_decode_iter(&h100, &q7, 1, b, 2.0 * 4096 * b),
                     cost_decode_iter(&h100, &q7, 1, b, 4096.0 * b), "ctx 2x, b=%d", b);
    cost_batch empty = {0};
    cr_expect_eq(cost_iter(&h100, &q7, 1, &empty), 0.0);
}

Test(models, attention_uses_per_sequence_sums)
{
    /* {100, 100000} and {50050, 50050}: same sum, same cost; the sum decides */
    cost_batch a = {.n_decode = 2, .decode_ctx_sum = 100.0 + 100000.0};
    cost_batch b = {.n_decode = 2, .decode_ctx_sum = 50050.0 + 50050.0};
    cr_expect_float_eq(cost_iter(&h100, &q7, 1, &a), cost_iter(&h100, &q7, 1, &b), 1e-12);
    cost_batch c = {.n_decode = 2, .decode_ctx_sum = 2000.0};
    cr_expect_gt(cost_iter(&h100, &q7, 1, &a), cost_iter(&h100, &q7, 1, &c));
    double long_ctx = cost_decode_iter(&h100, &q7, 1, 1, 65536);
    double short_ctx = cost_decode_iter(&h100, &q7, 1, 1, 1024);
    cr_expect_gt(long_ctx, short_ctx);
    /* a mixed batch costs more than either part */
    cost_batch mix = {.n_decode = 32, .decode_ctx_sum = 32 * 4096.0, .n_prefill_seqs = 1,
                      .prefill_tokens = 512, .prefill_attn = 512.0 * (1000 + 256.5),
                      .prefill_kv_sum = 1512};
    cost_batch dec = {.n_decode = 32, .decode_ctx_sum = 32 * 4096.0};
    cr_expect_gt(cost_iter(&h100, &q7, 1, &mix), cost_iter(&h100, &q7, 1, &dec));
    cr_expect_gt(cost_iter(&h100, &q7, 1, &mix),
                 cost_prefill_chunk(&h100, &q7, 1, 512, 1000));
}

Test(models, small_batch_decode_is_weight_bandwidth_bound)
{
    double ideal = mem_weights(&q7, 1) / (h100.hbm_bw * h100.mem_eff);
    double t = cost_decode_iter(&h100, &q7, 1, 1, 1024);
    expect_near(t, ideal, 0.15, "qwen2.5-7b decode bs=1");
    double kv = 8 * 1024 * mem_kv_per_token(&q7, 1);
    double t8 = cost_decode_iter(&h100, &q7, 1, 8, 8 * 1024);
    expect_near(t8, ideal + kv / (h100.hbm_bw * h100.mem_eff), 0.15, "qwen2.5-7b decode bs=8");
    /* TP splits the weights: faster per iteration */
    cr_expect_lt(cost_decode_iter(&h100, &q7, 2, 1, 1024), t);
}

/* ---- cost_cache: the memo returns cost_iter() bit for bit ------------------ */

/* Exact equality of two doubles, bit pattern included (so +0.0 != -0.0). */
static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* A small seeded generator (xorshift64*), so the cases are the same every run. */
static uint64_t rnd_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* The models the cache is checked on: the shipped Qwen2.5-7B and -32B and
 * Llama-3.1-70B, a plain-MLP copy, and a copy without vocabulary (no LM head). */
static int cache_models(llm_desc *out)
{
    ts_err e = {{0}};
    int n = 0;
    out[n++] = q7;
    cr_assert_eq(llm_load("qwen2.5-32b", &out[n++], &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("llama-3.1-70b", &out[n++], &e), 0, "%s", e.msg);
    out[n] = q7;
    out[n++].gated = 0;
    out[n] = q7;
    out[n++].vocab = 0;
    return n;
}

Test(models, cost_cache_matches_cost_iter_bit_for_bit)
{
    llm_desc ms[5];
    int nm = cache_models(ms);
    hw_desc h200;
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h200", &h200, &e), 0, "%s", e.msg);
    const hw_desc *hws[2] = {&h100, &h200};
    const int tps[] = {0, 1, 2, 4, 8};
    uint64_t seed = 42;
    long checked = 0;
    for (int h = 0; h < 2; h++)
        for (int mi = 0; mi < nm; mi++)
            for (size_t ti = 0; ti < sizeof tps / sizeof *tps; ti++) {
                const hw_desc *hw = hws[h];
                const llm_desc *m = &ms[mi];
                int tp = tps[ti];
                cost_cache *c = cost_cache_new(hw, m, tp);
                cr_assert_not_null(c);
                llm_desc one = *m;
                one.layers = 1;
                /* decode-only batches 1..1024, twice (miss, then hit), at several contexts */
                for (int pass = 0; pass < 2; pass++)
                    for (int b = 1; b <= 1024; b++) {
                        double ctx = b * (100.0 + (double)(rnd_next(&seed) % 32768));
                        cost_batch x = {.n_decode = b, .decode_ctx_sum = ctx};
                        double want = cost_iter(hw, m, tp, &x), got = cost_iter_cached(c, &x);
                        cr_assert(same_bits(want, got), "%s tp %d batch %d: %.17g != %.17g",
                                  m->name, tp, b, got, want);
                        cr_assert(same_bits(cost_iter(hw, &one, tp, &x),
                                            cost_iter_cached_n(c, 1, &x)),
                                  "one layer, batch %d", b);
                        checked += 2;
                    }
                /* mixed and prefill-only batches, counts that collide in the
                 * direct-mapped tables (T and T + COST_CACHE_SLOTS), empty ones */
                for (int i = 0; i < 3000; i++) {
                    cost_batch x = {0};
                    x.n_decode = (int)(rnd_next(&seed) % 600);
                    x.decode_ctx_sum = x.n_decode * (double)(rnd_next(&seed) % 40000);
                    if (rnd_next(&seed) % 2) {
                        x.n_prefill_seqs = 1 + (int)(rnd_next(&seed) % 8);
                        x.prefill_tokens = x.n_prefill_seqs +
                                           (int)(rnd_next(&seed) % 3) * COST_CACHE_SLOTS +
                                           (int)(rnd_next(&seed) % 9000);
                        double q = x.prefill_tokens, before = (double)(rnd_next(&seed) % 30000);
                        x.prefill_attn = q * (before + (q + 1) / 2);
                        x.prefill_kv_sum = before + q;
                    }
                    double want = cost_iter(hw, m, tp, &x), got = cost_iter_cached(c, &x);
                    cr_assert(same_bits(want, got),
                              "%s tp %d: decode %d, prefill %d in %d: %.17g != %.17g", m->name,
                              tp, x.n_decode, x.prefill_tokens, x.n_prefill_seqs, got, want);
                    checked++;
                }
                cost_batch empty = {0};
                cr_assert(same_bits(cost_iter_cached(c, &empty), 0.0));
                /* the speculative-decoding costs on the same cache */
                int ktp = tp < 1 ? 1 : tp;
                for (int b = 1; b <= 96; b += (b < 16 ? 1 : 5))
                    for (int V = 1; V <= 64; V += (V < 8 ? 1 : 8)) {
                        double ctx = b * (500.0 + (double)(rnd_next(&seed) % 20000));
                        int depth = 1 + (int)(rnd_next(&seed) % 10);
                        int topk = 1 + (int)(rnd_next(&seed) % 8);
                        cost_batch extra = {.n_prefill_seqs = 1, .prefill_tokens = 100,
                                            .prefill_attn = 100 * (2000 + 50.5),
                                            .prefill_kv_sum = 2100};
                        const cost_batch *xs[2] = {NULL, &extra};
                        cr_assert(same_bits(cost_draft(hw, m, ktp, b, depth, topk, ctx),
                                            cost_draft_cached(c, b, depth, topk, ctx)),
                                  "draft b %d depth %d topk %d", b, depth, topk);
                        cr_assert(same_bits(cost_draft_extend(hw, m, ktp, b, depth, ctx),
                                            cost_draft_extend_cached(c, b, depth, ctx)),
                                  "draft extend b %d depth %d", b, depth);
                        for (int k = 0; k < 2; k++)
                            cr_assert(same_bits(cost_verify(hw, m, ktp, b, V, ctx, xs[k]),
                                                cost_verify_cached(c, b, V, ctx, xs[k])),
                                      "verify b %d V %d extra %d", b, V, k);
                        checked += 4;
                    }
                cost_cache_free(c);
            }
    cr_assert_gt(checked, 100000);
    cost_cache_free(NULL);
}

Test(models, training_costs)
{
    double f = cost_train_fwd(&h100, &q7, 4096, 4096.0 * 4096.0);
    cr_expect_gt(f, 2.0 * 7e9 * 4096 / h100.peak_flops);
    cr_expect_float_eq(cost_train_fwd_bwd(&h100, &q7, 4096, 4096.0 * 4096.0, 0), 3 * f, 1e-12);
    cr_expect_float_eq(cost_train_fwd_bwd(&h100, &q7, 4096, 4096.0 * 4096.0, 1), 4 * f, 1e-12);
    /* the same tokens in one long sequence cost more than in short ones */
    cr_expect_gt(cost_train_fwd(&h100, &q7, 32768, 32768.0 * 32768.0),
                 cost_train_fwd(&h100, &q7, 32768, 8 * 4096.0 * 4096.0));
}

Test(models, vidur_op_names)
{
    static const char *const ops[] = {
        "emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
        "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add",
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        cr_expect_gt(cost_vidur_op(&h100, &q7, 2, ops[i], 256), 0.0, "%s", ops[i]);
    cr_expect_eq(cost_vidur_op(&h100, &q7, 1, "attn_decode", 16), -1.0);
}

/* ---- comm and memory -------------------------------------------------------- */

Test(models, collectives)
{
    cr_expect_eq(comm_allreduce(&h100, 1e6, 1), 0.0);
    double intra = comm_allreduce(&h100, 64e6, 8);
    double inter = comm_allreduce(&h100, 64e6, 16);
    cr_expect_gt(inter, intra);
    cr_expect_gt(comm_allreduce(&h100, 128e6, 8), intra);
    cr_expect_gt(comm_allgather(&h100, 64e6, 16), comm_allgather(&h100, 64e6, 8));
    cr_expect_gt(comm_alltoall(&h100, 64e6, 16), comm_alltoall(&h100, 64e6, 8));
    cr_expect_gt(comm_p2p(&h100, 1e8, 0), comm_p2p(&h100, 1e8, 1));
    cr_expect_gt(comm_broadcast(&h100, 15e9, 64), comm_broadcast(&h100, 15e9, 8));
    /* ring all-reduce of a large buffer on NVLink: ~2(n-1)/n * bytes / (bw * eff) */
    expect_near(intra, 2.0 * 7 / 8 * 64e6 / (h100.nvlink_bw * h100.ar_eff), 0.15, "allreduce");
    /* a group spread over nodes: on one node as the contiguous group; one GPU
     * per node (HSDP's replicas of a shard) goes over the NICs */
    cr_expect_eq(comm_allreduce_spread(&h100, 64e6, 8, 1), intra);
    cr_expect_eq(comm_allreduce_spread(&h100, 64e6, 16, 2), inter);
    double strided = comm_allreduce_spread(&h100, 64e6, 8, 8);
    cr_expect_gt(strided, intra);
    expect_near(strided, 2.0 * 7 / 8 * 64e6 / (h100.nic_bw * h100.ar_eff), 0.15, "strided");
    cr_expect_eq(comm_allreduce_spread(&h100, 64e6, 1, 1), 0.0);
}

Test(models, memory)
{
    cr_expect_float_eq(mem_kv_per_token(&q7, 1), 28.0 * 2 * 4 * 128 * 2, 1e-9);
    cr_expect_float_eq(mem_kv_per_token(&q7, 8), 28.0 * 2 * 1 * 128 * 2, 1e-9); /* replicated */
    cr_expect_gt(mem_kv_capacity(&h100, &q7, 1, 0.9, 1e9), 0.0);
    llm_desc l70;
    ts_err e = {{0}};
    cr_assert_eq(llm_load("llama-3.1-70b", &l70, &e), 0, "%s", e.msg);
    cr_expect_leq(mem_kv_capacity(&h100, &l70, 1, 0.9, 1e9), 0.0);
    cr_expect_gt(mem_kv_capacity(&h100, &l70, 8, 0.9, 1e9), 0.0);
    expect_near(mem_weights(&q7, 1), 2 * llm_params(&q7), 0.001, "weights tp1");
    cr_expect_lt(mem_weights(&q7, 4), mem_weights(&q7, 1) / 3.5);
    double p = llm_params(&q7);
    cr_expect_float_eq(mem_model_states(&q7, 0, 8), 16 * p, 1e-3 * p);
    cr_expect_float_eq(mem_model_states(&q7, 3, 8), 2 * p, 1e-3 * p);
    cr_expect_lt(mem_model_states(&q7, 2, 8), mem_model_states(&q7, 1, 8));
    cr_expect_lt(mem_act_per_token(&q7, 1), mem_act_per_token(&q7, 0));
}

/* The actor update's peak (models/memory.c, mem_train_fsdp), term by term on
 * Qwen2.5-7B (28 layers, hidden 3584, vocab 152064, untied head). */
Test(models, training_memory_terms)
{
    double p = llm_params(&q7), tok = 16384, h = 3584, V = 152064;
    mem_train a, b, c;
    mem_train_fsdp(&q7, 64, 8, tok, 1, 34.0, 0, &a);
    cr_expect_float_eq(a.states, 16 * p / 64, 1e-6 * p);
    cr_expect_float_eq(a.kept, 28 * 2 * h * tok, 1.0);       /* each layer's bf16 input */
    cr_expect_float_eq(a.layer, 34 * h * tok, 1.0);          /* one layer recomputed */
    cr_expect_float_eq(a.logits, 4 * V * tok, 1.0);
    cr_expect_float_eq(a.gathered, 4 * V * h, 1.0);          /* two units: the embedding is the largest */
    cr_expect_float_eq(a.total, a.states + a.gathered + a.kept + a.layer + a.logits, 1.0);
    cr_expect_float_eq(a.host, 0.0, 1e-9);
    /* offload moves the states to the host: a node holds its 8 GPUs' shards */
    mem_train_fsdp(&q7, 64, 8, tok, 1, 34.0, 1, &b);
    cr_expect_float_eq(b.states, 0.0, 1e-9);
    cr_expect_float_eq(b.host, 8 * a.states, 1e-6 * p);
    cr_expect_float_eq(b.total, a.total - a.states, 1.0);
    /* without checkpointing every layer keeps its activations */
    mem_train_fsdp(&q7, 64, 8, tok, 0, 34.0, 0, &c);
    cr_expect_float_eq(c.kept, 28 * 34 * h * tok, 1.0);
    cr_expect_float_eq(c.layer, 0.0, 1e-9);
    cr_expect_gt(c.total, a.total);
    /* fewer GPUs or more tokens never need less; a trainer of 4 GPUs puts 4
     * shards on its node, and under HSDP a node holds one shard per GPU */
    mem_train_fsdp(&q7, 8, 8, tok, 1, 34.0, 0, &c);
    cr_expect_float_eq(c.states, 8 * a.states, 1e-6 * p);
    mem_train_fsdp(&q7, 64, 8, 2 * tok, 1, 34.0, 0, &c);
    cr_expect_gt(c.total, a.total);
    mem_train_fsdp(&q7, 4, 4, tok, 1, 34.0, 1, &c);
    cr_expect_float_eq(c.host, 16 * p, 1e-6 * p);
    mem_train_fsdp(&q7, 4, 8, tok, 1, 34.0, 1, &c); /* shards of 4, 8 GPUs to a node */
    cr_expect_float_eq(c.host, 32 * p, 1e-6 * p);
}

/* Without the issue-18 GEMM keys a hardware INI prices a GEMM exactly as
 * before: launch_s + gemm_lat_s + max(compute, bytes / (hbm_bw * mem_eff)). */
Test(models, gemm_keys_absent_keep_the_old_form)
{
    char path[64];
    write_tmp("[gpu]\npeak_flops = 989e12\nhbm_bw = 3.35e12\nhbm_bytes = 85e9\nsms = 132\n"
              "[interconnect]\nnvlink_bw = 450e9\nnvlink_lat = 0.75e-6\nnic_bw = 50e9\n"
              "nic_lat = 5e-6\ngpus_per_node = 8\n",
              path, sizeof path);
    hw_desc d;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini(path, &d, &e), 0, "%s", e.msg);
    unlink(path);
    double bytes = 2.0 * (1.0 * 4096 + 4096.0 * 12288 + 12288.0);
    cr_expect_eq(cost_gemm(&d, 1, 12288, 4096),
                 d.launch_s + d.gemm_lat_s + bytes / (d.hbm_bw * d.mem_eff));
    /* H100's fit streams decode GEMMs at gemm_mem_eff after its own fill;
     * the shorter compute side (padded tiles) adds gemm_mix of itself */
    double fill = h100.gemm_mem_fill_s * bytes / (bytes + h100.gemm_mem_fill_bytes);
    double t_mem = h100.gemm_mem_lat_s + fill + bytes / (h100.hbm_bw * h100.gemm_mem_eff);
    double t = cost_gemm(&h100, 1, 12288, 4096) - h100.launch_s;
    cr_expect(h100.gemm_mix > 0 && t > t_mem && t <= (1.0 + h100.gemm_mix) * t_mem,
              "t %g, memory side %g", t, t_mem);
}

/* Issue 18, engine modes: a batch-1 decode step at TP 8 replayed from a CUDA
 * graph (custom all-reduce for its small messages) spends under 20% of its
 * time in collectives; the eager step is cost_iter() bit for bit and its
 * collectives are today's NCCL figure (20 us a call plus ring hops); the
 * cache prices either mode as the pure function does. */
Test(models, engine_graph_collectives_of_batch1_decode_tp8)
{
    static const char *const names[] = {"qwen2.5-7b", "qwen2.5-32b"};
    for (size_t i = 0; i < 2; i++) {
        llm_desc m;
        ts_err e = {{0}};
        cr_assert_eq(llm_load(names[i], &m, &e), 0, "%s", e.msg);
        cost_batch b = {.n_decode = 1, .decode_ctx_sum = 1000};
        double tg = cost_iter_mode(&h100, &m, 8, &b, 1), cg = cost_iter_comm(&h100, &m, 8, &b, 1);
        double te = cost_iter_mode(&h100, &m, 8, &b, 0), ce = cost_iter_comm(&h100, &m, 8, &b, 0);
        cr_expect_lt(cg / tg, 0.20, "%s graph: collectives %.1f%% of the step", names[i],
                     100 * cg / tg);
        cr_expect_eq(te, cost_iter(&h100, &m, 8, &b), "%s", names[i]);
        double act = 2.0 * m.hidden;
        double today = m.layers * 2.0 * comm_allreduce(&h100, act, 8) +
                       comm_allreduce(&h100, act, 8) + comm_allgather(&h100, 2.0 * m.vocab, 8);
        cr_expect_float_eq(ce, today, 1e-15, "%s", names[i]);
        /* today's NCCL call: 20 us + 14 ring hops of 0.75 us, a 36% or more share */
        cr_expect_float_eq(comm_allreduce(&h100, act, 8), 20e-6 + 14 * 0.75e-6 +
                           2.0 * 7 / 8 * act / (h100.nvlink_bw * h100.ar_eff), 1e-12);
        cr_expect_gt(ce / te, 0.36, "%s eager share %.1f%%", names[i], 100 * ce / te);
        cost_cache *c = cost_cache_new(&h100, &m, 8);
        cr_assert_not_null(c);
        cost_cache_set_graph(c, 1);
        cr_expect_eq(cost_iter_cached(c, &b), tg);
        cost_cache_set_graph(c, 0);
        cr_expect_eq(cost_iter_cached(c, &b), te);
        cost_cache_free(c);
    }
    /* the custom all-reduce stops at car_max_bytes: NCCL in the graph above */
    double big = h100.car_max_bytes * 2;
    cr_expect_gt(comm_allreduce_graph(&h100, big, 8), h100.coll_lat_graph_s);
    cr_expect_lt(comm_allreduce_graph(&h100, big, 8), comm_allreduce(&h100, big, 8));
    cr_expect_float_eq(comm_allreduce_graph(&h100, 8192, 8),
                       h100.car_lat_s + 2.0 * 7 / 8 * 8192 / (h100.nvlink_bw * h100.ar_eff), 1e-15);
}
