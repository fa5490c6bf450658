/*
 * Tests of data-centric parallel training: the batch traces (Open-Sora latent
 * shapes, the Zipf video mix, 1D generators, the CSV reader's file/line/field
 * errors, bucketing), the training cost model (a micro-batch never costs
 * less than the sum of its sequences' lower bounds; memory is linear in the
 * micro-batch).  Scenario and command errors name the file, line and key.
 * The planners are tested in tests/test_dcp_plan.c.  Each test runs in its
 * own process with a fresh temporary directory.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

#include "common/util.h"
#include "cli/cmd.h"
#include "models/hw_calib.h"
#include "sim/dcp/dcp_setup.h"
#include "sim/dcp/dcp_sweep.h"
#include "tests/helpers.h"

static char tmpdir[256];
static hw_desc h200;
static llm_desc stdit, llama;

static void setup(void)
{
    tmpdir_create(tmpdir, sizeof tmpdir, "dcp");
    ts_err e = {{0}};
    cr_assert_eq(hw_load("h200", &h200, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("opensora-stdit3", &stdit, &e), 0, "%s", e.msg);
    cr_assert_eq(llm_load("llama-3.1-8b", &llama, &e), 0, "%s", e.msg);
}

static void teardown(void)
{
    tmpdir_remove(tmpdir);
}

TestSuite(dcp, .init = setup, .fini = teardown);

static void tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* ------------------------------------------------------------ traces */

Test(dcp, latent_shapes_follow_open_sora)
{
    int32_t t, s;
    bt_latent(51, 720, 1280, &t, &s);
    cr_expect_eq(t, 15);
    cr_expect_eq(s, 3600);
    bt_latent(408, 720, 1280, &t, &s);
    cr_expect_eq(t, 120);
    bt_latent(1, 144, 256, &t, &s);
    cr_expect_eq(t, 1);
    cr_expect_eq(s, 144);
    bt_latent(102, 360, 640, &t, &s); /* 360 / 8 = 45 -> 23 patches */
    cr_expect_eq(t, 30);
    cr_expect_eq(s, 23 * 40);
    bt_latent(17, 240, 426, &t, &s);
    cr_expect_eq(t, 5);
    cr_expect_eq(s, 15 * 27);
}

Test(dcp, video_mix_counts_and_seeds)
{
    ts_err e = {{0}};
    bt_video_mix m = {2000, 2.0, 3.0, 5.0, 7, 0, 0, 0, 0};
    btrace *a = bt_gen_video_mix(&m, &e), *b = bt_gen_video_mix(&m, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_not_null(b, "%s", e.msg);
    cr_expect_eq(a->n, 6000u);
    size_t images = 0, smallest = 0;
    for (size_t i = 0; i < a->n; i++) {
        images += a->seq[i].frames == 1;
        smallest += a->seq[i].frames == 51 && a->seq[i].height == 144;
        cr_expect_eq(memcmp(&a->seq[i], &b->seq[i], sizeof a->seq[i]), 0);
    }
    cr_expect_eq(images, 4000u);
    /* rank 1 of 20 with offset 5, alpha 3: weight 6^-3 of the sum, plus the rounding rest */
    double w = 0;
    for (int r = 1; r <= 20; r++)
        w += pow(r + 5, -3.0);
    cr_expect(fabs((double)smallest - 2000 * pow(6, -3.0) / w) < 10, "%zu", smallest);
    m.seed = 8;
    btrace *c = bt_gen_video_mix(&m, &e);
    int same = 1;
    for (size_t i = 0; i < c->n && same; i++)
        same = !memcmp(&a->seq[i], &c->seq[i], sizeof a->seq[i]);
    cr_expect(!same, "a different seed should reorder the data");
    cr_assert_eq(bt_bucketize(a, &e), 0, "%s", e.msg);
    cr_expect_eq(a->n_buckets, 25);
    for (int32_t k = 1; k < a->n_buckets; k++)
        cr_expect_leq((int64_t)a->buckets[k - 1].t * a->buckets[k - 1].s,
                      (int64_t)a->buckets[k].t * a->buckets[k].s);
    btrace_free(a);
    btrace_free(b);
    btrace_free(c);
}

/* Count of the shape (frames, height) in b. */
static size_t count_shape(const btrace *b, int32_t frames, int32_t height)
{
    size_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        n += b->seq[i].frames == frames && b->seq[i].height == height;
    return n;
}

Test(dcp, video_mix_videosys_options)
{
    /* VideoSys ranks video buckets by frames x height: 720p 51f (36,720) comes before
     * 144p 408f (58,752), where frames x pixels puts it after */
    ts_err e = {{0}};
    bt_video_mix m = {2000, 1.0, 3.0, 5.0, 1, 0, 0, 0, 0};
    btrace *px = bt_gen_video_mix(&m, &e);
    m.rank_height = 1;
    btrace *ht = bt_gen_video_mix(&m, &e);
    cr_assert(px && ht, "%s", e.msg);
    cr_expect_gt(count_shape(ht, 51, 720), count_shape(px, 51, 720));
    cr_expect_lt(count_shape(ht, 408, 144), count_shape(px, 408, 144));
    cr_expect_eq(ht->n, px->n);
    /* inclusive: image_mix is the image share of `videos` samples */
    m.inclusive = 1;
    m.image_mix = 0.25;
    btrace *inc = bt_gen_video_mix(&m, &e);
    cr_assert_not_null(inc, "%s", e.msg);
    size_t img = 0;
    for (size_t i = 0; i < inc->n; i++)
        img += inc->seq[i].frames == 1;
    cr_expect_eq(inc->n, 2000u);
    cr_expect_eq(img, 500u);
    m.image_mix = 1.5;
    cr_expect_null(bt_gen_video_mix(&m, &e));
    cr_expect(strstr(e.msg, "inclusive") != NULL, "%s", e.msg);
    /* half-normal: a larger res_scale moves samples to the low resolutions */
    bt_video_mix h = {4000, 0, 3.0, 5.0, 1, 0, 0, 0.5, 1.0};
    btrace *lo = bt_gen_video_mix(&h, &e);
    h.res_scale = 3.0;
    btrace *hi = bt_gen_video_mix(&h, &e);
    cr_assert(lo && hi, "%s", e.msg);
    cr_expect_leq(lo->n, 4000u);
    cr_expect_gt(lo->n, 3975u); /* at most one sample lost per bucket to the floor */
    cr_expect_gt(count_shape(hi, 1, 144), count_shape(lo, 1, 144));
    cr_expect_lt(count_shape(hi, 408, 720), count_shape(lo, 408, 720));
    /* VideoSys' token count: latent frames x (h / 8) x (w / 8) */
    bt_seq v = {0};
    v.frames = 51, v.height = 720, v.width = 1280;
    cr_expect_eq(bt_videosys_positions(&v), 15 * 90 * 160);
    v.frames = 1, v.height = 240, v.width = 426;
    cr_expect_eq(bt_videosys_positions(&v), 30 * 53);
    v.frames = 408;
    cr_expect_eq(bt_videosys_positions(&v), 120 * 30 * 53);
    btrace_free(px);
    btrace_free(ht);
    btrace_free(inc);
    btrace_free(lo);
    btrace_free(hi);
}

Test(dcp, one_d_generators_are_seeded_and_capped)
{
    ts_err e = {{0}};
    const char *dists[] = {"sft", "pretrain", "lognormal:2000:1.0", "fixed:777"};
    for (size_t k = 0; k < 4; k++) {
        btrace *a = bt_gen_1d(dists[k], 3000, 20000, 3, &e);
        btrace *b = bt_gen_1d(dists[k], 3000, 20000, 3, &e);
        cr_assert_not_null(a, "%s: %s", dists[k], e.msg);
        cr_assert_not_null(b);
        for (size_t i = 0; i < a->n; i++) {
            cr_assert_eq(a->seq[i].s, b->seq[i].s);
            cr_assert(a->seq[i].s >= 1 && a->seq[i].s <= 20000);
        }
        cr_assert_eq(bt_bucketize(a, &e), 0);
        for (size_t i = 0; i < a->n; i++) {
            const bt_bucket *u = &a->buckets[a->seq[i].bucket];
            cr_assert(a->seq[i].s >= u->lo && a->seq[i].s <= u->hi);
            cr_assert(u->hi <= 1.2 * u->lo + 64, "bucket %d-%d too wide", u->lo, u->hi);
        }
        btrace_free(a);
        btrace_free(b);
    }
    cr_expect_null(bt_gen_1d("zipf", 10, 100, 1, &e));
    cr_expect_neq(e.msg[0], 0);
}

typedef struct bad_case {
    const char *text, *want1, *want2;
} bad_case;

Test(dcp, reader_names_file_line_and_field)
{
    static const bad_case cases[] = {
        {"tokens\n100\nabc\n", ":3:", "field 'tokens'"},
        {"tokens\n100\n0\n", ":3:", "field 'tokens'"},
        {"frames,height,width\n51,720,1280\n51,x,1280\n", ":3:", "field 'height'"},
        {"frames,height,width\n51,720\n", ":2:", "expected 3 fields"},
        {"frames,height,width\n51,720,1280,9\n", ":2:", "more than"},
        {"len\n5\n", ":1:", "header"},
        {"# only a comment\n", "", "empty"},
        {"tokens\n", "", "no sequences"},
        {"frames,height,width\n1,99999,10\n", ":2:", "field 'height'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[512];
        tmp_path(p, sizeof p, "bad.csv");
        write_file(p, cases[i].text);
        btrace *b = (btrace *)0x1;
        ts_err e = {{0}};
        cr_expect_eq(btrace_load(p, &b, &e), -1, "case %zu loaded", i);
        cr_expect_eq(b, (btrace *)0x1, "case %zu touched *out", i);
        cr_expect(strstr(e.msg, p) != NULL, "case %zu: no file in '%s'", i, e.msg);
        cr_expect(strstr(e.msg, cases[i].want1) != NULL, "case %zu: '%s'", i, e.msg);
        cr_expect(strstr(e.msg, cases[i].want2) != NULL, "case %zu: '%s'", i, e.msg);
    }
}

Test(dcp, csv_round_trip)
{
    ts_err e = {{0}};
    char p[512];
    tmp_path(p, sizeof p, "mix.csv");
    bt_video_mix m = {200, 1.0, 3.0, 5.0, 1, 0, 0, 0, 0};
    btrace *a = bt_gen_video_mix(&m, &e), *b = NULL;
    cr_assert_eq(btrace_write_csv(a, p, &e), 0, "%s", e.msg);
    cr_assert_eq(btrace_load(p, &b, &e), 0, "%s", e.msg);
    cr_assert_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++)
        cr_assert_eq(memcmp(&a->seq[i], &b->seq[i], sizeof a->seq[i]), 0);
    btrace_free(a);
    btrace_free(b);
}

/* -------------------------------------------------------- cost model */

Test(dcp, microbatch_never_below_its_sequences_bounds)
{
    ts_err e = {{0}};
    tc_model tv, tl;
    cr_assert_eq(tc_model_init(&tv, &stdit, 300, 34, &e), 0, "%s", e.msg);
    cr_assert_eq(tc_model_init(&tl, &llama, 0, 34, &e), 0, "%s", e.msg);
    tv.a2a_eff = 0.5;
    gsl_rng *r = ts_rng_new(11, 0);
    for (int it = 0; it < 300; it++) {
        int video = it % 2;
        tv.frame_split = it % 4 == 1; /* VideoSys' frame split on half the video cases */
        const tc_model *tm = video ? &tv : &tl;
        int sp = 1 << gsl_rng_uniform_int(r, 4);
        int ring = !video && gsl_rng_uniform_int(r, 3) == 0;
        int n = 1 + (int)gsl_rng_uniform_int(r, 6);
        tc_work w = {0};
        double lb = 0;
        for (int i = 0; i < n; i++) {
            int32_t t = video ? 1 + (int32_t)gsl_rng_uniform_int(r, 60) : 1;
            int32_t s = video ? 100 + (int32_t)gsl_rng_uniform_int(r, 3000)
                              : 16 + (int32_t)gsl_rng_uniform_int(r, 20000);
            tc_work_add(&w, t, s, 1);
            double l = tc_seq_lower_bound(&h200, tm, sp, ring, t, s, 1e15);
            cr_assert_geq(l, 0);
            lb += l;
        }
        tc_par p = {sp, ring, (int)gsl_rng_uniform_int(r, tm->n_a + 1),
                    (int)gsl_rng_uniform_int(r, tm->n_b + 1)};
        double t = tc_microbatch_time(&h200, tm, &p, &w, NULL);
        cr_assert_geq(t, lb, "case %d: %g < %g", it, t, lb);
    }
    gsl_rng_free(r);
}

/* Frame split (VideoSys): a video's spatial blocks need no exchange and each
 * temporal attention two all-to-alls of the activation, where Ulysses has four
 * of the same size (STDiT3: q, k, v widths equal the hidden size) in every
 * block: a quarter of the calls.  An image runs Ulysses in its spatial blocks
 * only: half.  Compute is unchanged. */
Test(dcp, frame_split_communicates_a_quarter_for_videos_half_for_images)
{
    ts_err e = {{0}};
    tc_model u, f;
    cr_assert_eq(tc_model_init(&u, &stdit, 300, 34, &e), 0, "%s", e.msg);
    f = u;
    f.frame_split = 1;
    cr_assert_eq(stdit.heads * stdit.head_dim, stdit.hidden);
    const int32_t shapes[3][2] = {{15, 3600}, {1, 144}, {30, 990}};
    for (int k = 0; k < 3; k++)
        for (int sp = 1; sp <= 8; sp *= 2) {
            tc_work w = {0};
            tc_work_add(&w, shapes[k][0], shapes[k][1], 3);
            tc_par p = {sp, 0, 28, 28};
            tc_breakdown bu, bf;
            double tu = tc_microbatch_time(&h200, &u, &p, &w, &bu);
            double tf = tc_microbatch_time(&h200, &f, &p, &w, &bf);
            double share = shapes[k][0] > 1 ? 0.25 : 0.5;
            if (sp == 1) {
                cr_assert_eq(bu.comm_s, 0);
                cr_assert_eq(bf.comm_s, 0);
                cr_assert_eq(tu, tf);
                continue;
            }
            cr_assert_gt(bu.comm_s, 0);
            cr_assert_float_eq(bf.comm_s, share * bu.comm_s, 1e-9 * bu.comm_s,
                               "shape %d sp %d: %g vs %g", k, sp, bf.comm_s, bu.comm_s);
            cr_assert_float_eq(tu - bu.comm_s, tf - bf.comm_s, 1e-9 * tu, "compute changed");
        }
}

Test(dcp, memory_is_linear_and_split_by_sp)
{
    ts_err e = {{0}};
    tc_model tv;
    cr_assert_eq(tc_model_init(&tv, &stdit, 300, 60, &e), 0);
    tc_par p = {1, 0, tv.n_a, tv.n_b};
    double m[4];
    for (int k = 1; k <= 3; k++) {
        tc_work w = {0};
        tc_work_add(&w, 15, 3600, k);
        m[k] = tc_act_bytes(&tv, &p, &w);
    }
    cr_expect(fabs((m[3] - m[2]) - (m[2] - m[1])) < 1e-6 * m[3]);
    tc_work w = {0};
    tc_work_add(&w, 120, 3600, 1);
    double one = tc_act_bytes(&tv, &p, &w);
    p.sp = 8;
    cr_expect_lt(tc_act_bytes(&tv, &p, &w), one / 4);
    p.sp = 1;
    p.ckpt_a = p.ckpt_b = 0;
    cr_expect_gt(tc_act_bytes(&tv, &p, &w), one);
    /* recomputation costs time, SP communication costs time */
    tc_par a = {1, 0, 0, 0}, b = {1, 0, tv.n_a, tv.n_b};
    cr_expect_gt(tc_microbatch_time(&h200, &tv, &b, &w, NULL),
                 tc_microbatch_time(&h200, &tv, &a, &w, NULL));
    tc_breakdown bd;
    tc_par c = {8, 0, 0, 0};
    tc_microbatch_time(&h200, &tv, &c, &w, &bd);
    cr_expect_gt(bd.comm_s, 0);
    cr_expect_eq(tc_sp_ok(&tv, 32, 0), 0); /* 16 heads */
    cr_expect_eq(tc_sp_ok(&tv, 32, 1), 1);
}


Test(dcp, scenario_errors_name_file_line_and_key)
{
    static const bad_case cases[] = {
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\nnope = 1\n",
         ":7:", "dcp.nope"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\nmem_cap = 2\n",
         ":7:", "dcp.mem_cap"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\n"
         "dist = video-mix\nzero_stage = 9\n",
         ":8:", "dcp.zero_stage"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\n"
         "fill = true\nendgame = 17\n",
         ":8:", "dcp.endgame"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\nxfill = maybe\n",
         ":7:", "dcp.xfill"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[512];
        tmp_path(p, sizeof p, "bad.ini");
        write_file(p, cases[i].text);
        scenario s;
        ts_err e = {{0}};
        cr_expect_eq(scenario_load(p, &s, &e), -1, "case %zu", i);
        cr_expect(strstr(e.msg, p) && strstr(e.msg, cases[i].want1) &&
                      strstr(e.msg, cases[i].want2),
                  "case %zu: '%s'", i, e.msg);
    }
    /* cross-field: setup-level errors name the file and the key */
    static const bad_case setups[] = {
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\n"
         "dist = video-mix\nsp_sizes = 1,3\n",
         "", "dcp.sp_sizes"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\n"
         "dist = video-mix\nbucket_sp = 16\n",
         "", "dcp.bucket_sp"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\ndist = sft\n",
         "", "1D batch trace needs a decoder"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = llama-3.1-8b\n[dcp]\n"
         "dist = mixture:1/5/nope\n",
         "", "dcp.dist"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = llama-3.1-8b\n[dcp]\n"
         "strategies = bucket,fast\n",
         "", "dcp.strategies"},
        {"[cluster]\ngpus = 8\nhw = h200\n[model]\nname = llama-3.1-8b\n[dcp]\ndraw = most\n",
         "", "dcp.draw"},
    };
    for (size_t i = 0; i < sizeof setups / sizeof setups[0]; i++) {
        char p[512];
        tmp_path(p, sizeof p, "cross.ini");
        write_file(p, setups[i].text);
        scenario s;
        dcp_setup d;
        ts_err e = {{0}};
        cr_assert_eq(scenario_load(p, &s, &e), 0, "case %zu: %s", i, e.msg);
        cr_expect_eq(dcp_setup_load(&s, NULL, &d, &e), -1, "case %zu", i);
        cr_expect(strstr(e.msg, p) && strstr(e.msg, setups[i].want2), "case %zu: '%s'", i, e.msg);
    }
}

Test(dcp, bad_trace_file_through_the_scenario)
{
    char t[512], p[512], ini[1400];
    tmp_path(t, sizeof t, "videos.csv");
    write_file(t, "frames,height,width\n51,720,1280\n408,720,-3\n");
    tmp_path(p, sizeof p, "file.ini");
    snprintf(ini, sizeof ini,
             "[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\nfile = %s\n",
             t);
    write_file(p, ini);
    scenario s;
    dcp_setup d;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(p, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(dcp_setup_load(&s, NULL, &d, &e), -1);
    cr_expect(strstr(e.msg, t) && strstr(e.msg, ":3:") && strstr(e.msg, "field 'width'"), "%s",
              e.msg);
}

Test(dcp, command_exit_statuses, .init = cr_redirect_stderr)
{
    setup();
    char *ok[] = {"dcp", "dcp-llama8b-32xh200", "--strategies", "bucket,dcp-inter,bound",
                  "--json", "--no-wall", "--scale", "--steps", "3", NULL};
    cr_redirect_stdout();
    cr_expect_eq(cmd_dcp(9, ok), 0);
    char *none[] = {"dcp", NULL};
    cr_expect_eq(cmd_dcp(1, none), 2);
    char *bad[] = {"dcp", "dcp-llama8b-32xh200", "--strategies", "fastest", NULL};
    cr_expect_eq(cmd_dcp(4, bad), 1);
    char *steps[] = {"dcp", "dcp-llama8b-32xh200", "--steps", "0", NULL};
    cr_expect_eq(cmd_dcp(4, steps), 2);
    char *set[] = {"dcp", "dcp-llama8b-32xh200", "--set", "dcp.sp_sizes=1,5", NULL};
    cr_expect_eq(cmd_dcp(4, set), 1);
    char *per[] = {"dcp", "dcp-llama8b-32xh200", "--strategies", "bucket", "--per-step",
                   "dcp-inter+pac", "--steps", "2", NULL};
    cr_expect_eq(cmd_dcp(8, per), 0);
    char *perj[] = {"dcp", "dcp-llama8b-32xh200", "--strategies", "bucket", "--per-step",
                    "dcp-inter", "--json", "--no-wall", NULL};
    cr_expect_eq(cmd_dcp(8, perj), 0);
    char *perb[] = {"dcp", "dcp-llama8b-32xh200", "--per-step", "bound", NULL};
    cr_expect_eq(cmd_dcp(4, perb), 1);
    char *perx[] = {"dcp", "dcp-llama8b-32xh200", "--per-step", "fastest", NULL};
    cr_expect_eq(cmd_dcp(4, perx), 1);
    teardown();
}

Test(dcp, speedup_falls_as_long_sequences_dominate)
{
    /* the direction, not the numbers: along the shipped grid the share of long
     * sequences rises, and DCP's gain over bucket parallel at a fixed SP size (and
     * the model's bound on it) is larger on the short-dominated end, where bucket
     * parallel pays SP communication and replicated cross-attention on work that
     * fits one GPU, than on the long-dominated end (docs/dcp.md) */
    ts_err e = {{0}};
    scenario s;
    cr_assert_eq(scenario_load("scenarios/dcp-videosys-1x8-frac1.ini", &s, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_validate(&s, &e), 0, "%s", e.msg);
    dcp_strategy st[3];
    int ns = 0;
    cr_assert_eq(dcp_parse_strategies("dcp-inter,dcp-inter+pac,bound", st, 3, &ns, &e), 0);
    dcp_dist_row rows[DCP_DIST_N];
    cr_assert_eq(dcp_sweep_dist(&s, dcp_dist_grid, DCP_DIST_N, st, ns, rows, &e), 0, "%s", e.msg);
    for (int k = 1; k < DCP_DIST_N; k++)
        cr_expect_gt(rows[k].long_share, rows[k - 1].long_share, "point %d", k);
    int n = DCP_DIST_N;
    for (int i = 0; i < ns; i++) {
        /* both ends, and the rank correlation (Kendall) over the grid */
        cr_expect_gt(rows[0].speedup[i], rows[n - 1].speedup[i], "%s", st[i].name);
        cr_expect_gt(rows[1].speedup[i], rows[n - 2].speedup[i], "%s", st[i].name);
        int conc = 0, disc = 0;
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++) {
                conc += rows[b].speedup[i] > rows[a].speedup[i];
                disc += rows[b].speedup[i] < rows[a].speedup[i];
            }
        cr_expect_gt(disc, 2 * conc, "%s: %d falling pairs, %d rising", st[i].name, disc, conc);
    }
    /* a scenario without a generated video mix is refused, naming the option */
    scenario l;
    cr_assert_eq(scenario_load("scenarios/dcp-llama8b-32xh200.ini", &l, &e), 0, "%s", e.msg);
    cr_expect_eq(dcp_sweep_dist(&l, dcp_dist_grid, 1, st, ns, rows, &e), -1);
    cr_expect(strstr(e.msg, "video-mix") != NULL, "%s", e.msg);
}
