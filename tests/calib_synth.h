/*
 * The synthetic calibration data the calibration suites share
 * (tests/test_calib.c, tests/test_calib_load.c): a per-test temporary
 * directory, the "true" hardware (h200's INI with other values), rows of
 * the shapes `calibrate --quick` sweeps priced by the cost model with seeded
 * noise, and writing and reading them as a calibration CSV.  Header-only,
 * like tests/helpers.h; every helper fails the calling test instead of
 * returning errors.
 */
#ifndef TS_TEST_CALIB_SYNTH_H
#define TS_TEST_CALIB_SYNTH_H

#include <criterion/criterion.h>
#include <math.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "models/calib.h"
#include "models/cost.h"
#include "models/hw.h"

static char tmpdir[256];

static inline void calib_tmp_setup(void)
{
    gsl_set_error_handler_off();
    unsetenv("TAILSIM_NO_CALIB");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tailsim-calib-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static inline void calib_tmp_teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_expect_eq(system(cmd), 0);
}

/* ---- synthetic calibration data ------------------------------------------ */

/* The "true" hardware of the synthetic data: h200's INI with other values. */
static inline hw_desc truth_hw(void)
{
    hw_desc hw;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini("h200", &hw, &e), 0, "%s", e.msg);
    hw.gemm_eff = 0.74;
    hw.gemm_half_flops = 0;
    hw.gemm_lat_s = 4.0e-6;
    hw.launch_s = 1.7e-6;
    hw.mem_eff = 0.86;
    hw.attn_eff = 0.47;
    hw.attn_fa_version = 0; /* attention at the flat attn_eff the fit recovers */
    return hw;
}

typedef struct synth {
    calib_row rows[1024];
    size_t n;
} synth;

static inline void add(synth *s, const char *op, double m, double n, double k, double b,
                double ctx_sum, double ctx_max, double q)
{
    cr_assert_lt(s->n, 1024);
    calib_row *r = &s->rows[s->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->device, sizeof r->device, "Synthetic H200, \"seeded\"");
    snprintf(r->op, sizeof r->op, "%s", op);
    r->m = m, r->n = n, r->k = k, r->batch = b, r->ctx_sum = ctx_sum, r->ctx_max = ctx_max;
    r->q_len = q;
    r->sm_mhz = 1980;
    r->mem_mhz = 3201;
}

/* Rows of the shapes of `calibrate --quick`, priced with `hw` times
 * (1 + noise * N(0, 1)) from seed. */
static inline void synth_rows(synth *s, const hw_desc *hw, double noise, uint64_t seed)
{
    s->n = 0;
    static const struct { int h, heads, kv, ffn, vocab; } cfg[2] = {
        {3584, 28, 4, 18944, 152064},      /* Qwen2.5-7B, TP 1 */
        {5120, 10, 2, 27648 / 4, 38016},   /* Qwen2.5-32B, TP 4 */
    };
    static const int ms[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
    add(s, "copy", 1073741824.0, 0, 0, 0, 0, 0, 0);
    add(s, "gemm_peak", 8192, 8192, 8192, 0, 0, 0, 0);
    for (int c = 0; c < 2; c++) {
        int h = cfg[c].h, d = 128;
        const int nk[5][2] = {{(cfg[c].heads + 2 * cfg[c].kv) * d, h}, {h, cfg[c].heads * d},
                              {2 * cfg[c].ffn, h}, {h, cfg[c].ffn}, {cfg[c].vocab, h}};
        for (int j = 0; j < 5; j++)
            for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
                add(s, "gemm", ms[i], nk[j][0], nk[j][1], 0, 0, 0, 0);
        static const int bs[] = {1, 8, 64, 256, 512}, cs[] = {128, 1024, 8192, 32768, 65536};
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++)
                if ((double)bs[i] * cs[j] <= 2097152.0)
                    add(s, "decode_attn", cfg[c].heads, cfg[c].kv, d, bs[i],
                        (double)bs[i] * cs[j], cs[j], 1);
        static const int tails[] = {32, 128, 512};
        for (int i = 0; i < 3; i++) /* one 64k sequence among 512-token ones */
            add(s, "decode_attn", cfg[c].heads, cfg[c].kv, d, tails[i],
                65536.0 + 512.0 * (tails[i] - 1), 65536, 1);
        add(s, "decode_attn", cfg[c].heads, cfg[c].kv, d, 8, 65536.0 * 255 / 128, 65536, 1);
        static const int V[] = {1, 8, 16, 32, 48}, vb[] = {1, 32}, vc[] = {1024, 16384};
        for (int v = 0; v < 5; v++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++)
                    add(s, "chunk_attn", cfg[c].heads, cfg[c].kv, d, vb[i],
                        (double)vb[i] * vc[j], vc[j], V[v]);
        static const int pq[] = {512, 2048}, pb[] = {0, 16384};
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                add(s, "chunk_attn", cfg[c].heads, cfg[c].kv, d, 1, pb[j] + pq[i],
                    pb[j] + pq[i], pq[i]);
        static const int rs[] = {1, 16, 128, 1024, 4096};
        for (int i = 0; i < 5; i++) {
            add(s, "rmsnorm", rs[i], h, 0, 0, 0, 0, 0);
            add(s, "rope", rs[i], cfg[c].heads + cfg[c].kv, d, 0, 0, 0, 0);
            add(s, "swiglu", rs[i], cfg[c].ffn, 0, 0, 0, 0, 0);
            add(s, "embed", rs[i], h, 0, 0, 0, 0, 0);
        }
    }
    gsl_rng *rng = ts_rng_new(seed, 0);
    cr_assert_not_null(rng);
    for (size_t i = 0; i < s->n; i++) {
        calib_row *r = &s->rows[i];
        double t = cost_calib_op(hw, r) * 1e6;
        cr_assert_gt(t, 0, "%s is not modelled", r->op);
        r->median_us = t * (1.0 + noise * gsl_ran_gaussian(rng, 1.0));
        r->p10_us = 0.98 * r->median_us;
        r->p90_us = 1.03 * r->median_us;
        r->flops = 2.0 * r->m * r->n * r->k;
        r->bytes = 2.0 * (r->m + r->n);
    }
    gsl_rng_free(rng);
    /* ops the cost model does not price: loaded, skipped, counted */
    const size_t priced = s->n;
    add(s, "verify_accept", 33, 152064, 0, 1, 0, 0, 32);
    add(s, "verify_accept", 1568, 152064, 0, 32, 0, 0, 48);
    add(s, "layer_decode", 64, 3584, 28, 64, 131072, 2048, 1);
    for (size_t i = priced; i < s->n; i++)
        s->rows[i].median_us = 50.0 + (double)i;
}

/* Writes rows as calib_store.c does (v1: the first format, without
 * peak_bytes), to tmpdir/name (or to name when it is a path); the path goes
 * to out. */
static inline void write_csv_fmt(const synth *s, const char *name, char *out, size_t n, int v1)
{
    if (name[0] == '/')
        snprintf(out, n, "%s", name);
    else
        snprintf(out, n, "%s/%s", tmpdir, name);
    FILE *f = fopen(out, "w");
    cr_assert_not_null(f, "%s", out);
    fprintf(f, "%s\n", v1 ? CALIB_CSV_HEADER_V1 : CALIB_CSV_HEADER);
    for (size_t i = 0; i < s->n; i++) {
        const calib_row *r = &s->rows[i];
        fprintf(f, "\"Synthetic H200, \"\"seeded\"\"\",%d,%d,%s,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,"
                   "%.0f,%.3f,%.3f,%.3f,%.6g,%.6g",
                r->sm_mhz, r->mem_mhz, r->op, r->m, r->n, r->k, r->batch, r->ctx_sum,
                r->ctx_max, r->q_len, r->median_us, r->p10_us, r->p90_us, r->flops, r->bytes);
        if (v1)
            fputc('\n', f);
        else
            fprintf(f, ",%.0f\n", r->peak_bytes);
    }
    cr_assert_eq(fclose(f), 0);
}

static inline void write_csv(const synth *s, const char *name, char *out, size_t n)
{
    write_csv_fmt(s, name, out, n, 0);
}

static inline void load(const char *path, calib_row **rows, size_t *n)
{
    ts_err e = {{0}};
    cr_assert_eq(calib_csv_load(path, rows, n, &e), 0, "%s", e.msg);
}

/* got within rel of want (relative), naming what. */
static inline void expect_rel(double got, double want, double rel, const char *what)
{
    cr_expect(fabs(got - want) <= rel * fabs(want), "%s: fitted %.5g, true %.5g (%.2f%% off)",
              what, got, want, 100 * fabs(got - want) / fabs(want));
}

#endif
