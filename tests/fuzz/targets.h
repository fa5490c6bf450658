/*
 * Fuzz targets: one function per reader, taking raw bytes.  Each writes the
 * bytes to a private temporary file (the readers take paths, as users give
 * them) and runs the reader; a reader may accept or reject the input, but it
 * must not crash, hang, leak or return a half-built object.  The INI
 * targets (scenario, grid) also hold the readers to issue 21's contract:
 * what they accept has strict lines, and their messages name the file and
 * never echo its content or a control byte (fuzz_check_msg).  One more,
 * fuzz_dcpplan, decodes the bytes into a batch and a DCP configuration and
 * checks every planner's invariants.  Included by the
 * libFuzzer driver (tests/fuzz/driver.c, `make fuzz`) and by the regression
 * suite (tests/test_fuzz.c, `make check`), which replays every file of
 * tests/fuzz/corpus/<target>/.
 */
#ifndef TS_FUZZ_TARGETS_H
#define TS_FUZZ_TARGETS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "models/calib.h"
#include "models/train_cost.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "models/vidur.h"
#include "traces/batch.h"
#include "sim/dcp/dcp.h"
#include "sweep/grid.h"
#include "sim/scenario.h"
#include "traces/reward.h"
#include "traces/trace.h"

/* Writes data to a per-process temporary file with the given suffix; returns
 * its path in buf, or NULL. */
static inline const char *fuzz_tmpfile(const uint8_t *data, size_t size, const char *suffix,
                                       char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/tailsim-fuzz-%ld%s", (long)getpid(), suffix);
    FILE *f = fopen(buf, "wb");
    if (!f)
        return NULL;
    if (size && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return NULL;
    }
    fclose(f);
    return buf;
}

/* Trace readers (JSONL, plain CSV, Vidur request CSV, chosen by content),
 * and the same bytes as a directory's file, where reward timings are read
 * too (trace_load_any). */
static inline int fuzz_trace(const uint8_t *data, size_t size)
{
    char path[128];
    if (!fuzz_tmpfile(data, size, ".trace", path, sizeof path))
        return 0;
    trace *t = NULL;
    ts_err e = {{0}};
    int64_t tokens = -1;
    if (trace_load(path, &t, &e) == 0) {
        if (!t)
            abort(); /* success must give a trace */
        trace_stats st;
        if (trace_stats_compute(t, &st, &e) == 0 && (st.responses <= 0 || st.max < 1))
            abort(); /* a loaded trace has positive lengths */
        tokens = trace_n_tokens(t);
        trace_free(t);
    } else if (t || !e.msg[0]) {
        abort(); /* failure must leave nothing and say why */
    }
    /* the same bytes on standard input ("-") load the same, read once */
    if (freopen(path, "r", stdin)) {
        trace *u = NULL;
        ts_err e2 = {{0}};
        int rc = trace_load("-", &u, &e2);
        if ((rc == 0) != (tokens >= 0) || (rc == 0 && trace_n_tokens(u) != tokens) ||
            (rc != 0 && (u || !e2.msg[0])))
            abort(); /* a file and a stream of the same bytes disagree */
        trace_free(u);
    }
    /* as a file of a directory: reward timings (traces/reward.h) by content */
    trace *w = NULL;
    ts_err e3 = {{0}};
    if (trace_load_any(path, -1, &w, &e3) == 0) {
        if (!w || (w->n_prompts == 0) == (w->n_reward == 0))
            abort(); /* lengths or reward records, never both nor neither */
        size_t first, again;
        for (size_t i = 0; i < w->n_reward; i++)
            if (!(w->reward[i].time_s >= 0 && w->reward[i].time_s <= REWARD_MAX_S) ||
                w->reward[i].step < 0 || w->reward[i].rank < 0)
                abort(); /* a kept record is in range */
        if (reward_find_twice(w->reward, w->n_reward, &first, &again) != 0)
            abort(); /* one time a (step, rank) */
        if (w->n_prompts && trace_n_tokens(w) != tokens)
            abort(); /* a trace loads as trace_load loads it */
        trace_free(w);
    } else if (w || !e3.msg[0]) {
        abort();
    }
    remove(path);
    return 0;
}

/* 1 when the nn bytes at nd occur in h (hn bytes).  A plain loop, not
 * memmem(): libFuzzer hooks that and would steer inputs towards the
 * messages themselves. */
static inline int fuzz_contains(const uint8_t *h, size_t hn, const char *nd, size_t nn)
{
    for (size_t i = 0; i + nn <= hn; i++) {
        size_t k = 0;
        while (k < nn && h[i + k] == (uint8_t)nd[k])
            k++;
        if (k == nn)
            return 1;
    }
    return 0;
}

/* The INI readers' message contract (issue 21): one line of printable
 * ASCII naming the file, quoting no run of 64 or more bytes of the input
 * (a name or value of our keys is quoted at most 40 characters, cut; a raw
 * line never).  Every 48-byte window at a multiple of 16 is looked for, so
 * any longer echo is caught. */
static inline void fuzz_check_msg(const ts_err *e, const char *path, const uint8_t *data,
                                  size_t size)
{
    size_t n = strlen(e->msg);
    if (!n || !strstr(e->msg, path))
        abort(); /* a failure says why and names the file */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)e->msg[i] < 0x20 || (unsigned char)e->msg[i] >= 0x7f)
            abort(); /* no control bytes (terminal escapes) from the input */
    for (size_t i = 0; i + 48 <= n; i += 16)
        if (fuzz_contains(data, size, e->msg + i, 48))
            abort(); /* no echo of the file's content */
}

/* What an INI reader accepts has no NUL byte and no line over 198
 * characters (ts_ini_read refuses both, libinih alone would not). */
static inline void fuzz_check_lines(const uint8_t *data, size_t size)
{
    size_t len = 0;
    for (size_t i = 0; i < size; i++) {
        if (!data[i])
            abort();
        len = data[i] == '\n' ? 0 : len + 1;
        if (len > 198)
            abort();
    }
}

/* Scenario INI reader: an accepted file respects the ranges (at most
 * SCN_MAX_GPUS GPUs) and the strict lines; a refused one gets a message
 * under the contract above. */
static inline int fuzz_scenario(const uint8_t *data, size_t size)
{
    char path[128];
    if (!fuzz_tmpfile(data, size, ".ini", path, sizeof path))
        return 0;
    scenario s;
    ts_err e = {{0}};
    if (scenario_load(path, &s, &e) == 0) {
        if (s.gpus < 1 || s.gpus > SCN_MAX_GPUS || s.tp < 1 || !s.model[0] ||
            s.train_fsdp_size > SCN_MAX_GPUS)
            abort(); /* loaded scenarios respect their ranges */
        fuzz_check_lines(data, size);
        if (scenario_validate(&s, &e))
            fuzz_check_msg(&e, path, data, size);
    } else {
        fuzz_check_msg(&e, path, data, size);
    }
    remove(path);
    return 0;
}

/* Vidur operator-profile CSV reader (tailsim calib vidur). */
static inline int fuzz_vidur(const uint8_t *data, size_t size)
{
    char path[128];
    if (!fuzz_tmpfile(data, size, ".csv", path, sizeof path))
        return 0;
    vidur_table t;
    memset(&t, 0, sizeof t);
    ts_err e = {{0}};
    if (vidur_load(path, "median", &t, &e) == 0)
        vidur_free(&t);
    else if (!e.msg[0])
        abort();
    remove(path);
    return 0;
}

/* Training-batch traces for DCP (1D token counts, 2D videos). */
static inline int fuzz_batch(const uint8_t *data, size_t size)
{
    char path[128];
    if (!fuzz_tmpfile(data, size, ".csv", path, sizeof path))
        return 0;
    btrace *b = NULL;
    ts_err e = {{0}};
    if (btrace_load(path, &b, &e) == 0) {
        if (!b || btrace_tokens(b) <= 0)
            abort(); /* a loaded batch trace holds tokens */
        btrace_free(b);
    } else if (b || !e.msg[0]) {
        abort();
    }
    remove(path);
    return 0;
}

/* Calibration CSVs (tailsim-validate calibrate's output). */
static inline int fuzz_calib(const uint8_t *data, size_t size)
{
    char path[128];
    if (!fuzz_tmpfile(data, size, ".csv", path, sizeof path))
        return 0;
    calib_row *rows = NULL;
    size_t n = 0;
    ts_err e = {{0}};
    if (calib_csv_load(path, &rows, &n, &e) == 0) {
        double bw = -1;
        if (calib_host_bw(rows, n, &bw) == 0 && !(bw > 0))
            abort(); /* a host link is measured as a positive rate */
        free(rows);
    } else if (!e.msg[0]) {
        abort();
    }
    remove(path);
    return 0;
}

/* Sweep grid INI reader (tailsim sweep).  A loaded grid must hold a base
 * scenario, at least one value per swept key, and a configuration count
 * equal to the product of the list sizes, within the limit; decoding the
 * last configuration must stay in range; its lines are strict.  A refused
 * grid gets a message under the contract of fuzz_check_msg(). */
static inline int fuzz_grid(const uint8_t *data, size_t size)
{
    char path[128];
    if (!fuzz_tmpfile(data, size, ".grid.ini", path, sizeof path))
        return 0;
    grid g;
    ts_err e = {{0}};
    if (grid_load(path, &g, &e) == 0) {
        size_t prod = 1;
        if (!g.scenario[0] || g.steps < 1 || g.n_dims > GRID_MAX_DIMS)
            abort();
        for (size_t i = 0; i < g.n_dims; i++) {
            if (g.dim[i].n < 1)
                abort();
            prod *= g.dim[i].n;
        }
        if (prod != g.n_configs || prod > GRID_MAX_CONFIGS)
            abort();
        size_t idx[GRID_MAX_DIMS];
        grid_config(&g, g.n_configs - 1, idx);
        for (size_t i = 0; i < g.n_dims; i++)
            if (idx[i] != g.dim[i].n - 1)
                abort(); /* the last configuration takes every list's last value */
        fuzz_check_lines(data, size);
        grid_free(&g);
    } else {
        if (g.n_dims)
            abort(); /* failure must leave nothing allocated */
        fuzz_check_msg(&e, path, data, size);
    }
    remove(path);
    return 0;
}

/* The DCP planners, by property: the bytes choose a small training batch
 * (1D token counts or Open-Sora video shapes) and a planner configuration
 * (GPUs, memory cap, SP sizes, fill, ahead, xfill, endgame, draw); every strategy
 * either fails with a message or plans every sequence exactly once, in
 * order, in groups that do not share GPUs, each micro-batch within the
 * memory cap, and `bound` is never above a strategy's simulated time.
 * Layout: byte 0 flags (1 video, 2 fill, 4 xfill, 8 ring attention, 16 draw
 * by work), byte 1 endgame (low 2 bits) and ahead (next 2: 0, 0.5, 1, 2),
 * byte 2 GPUs, byte 3 memory cap, then 2 bytes per sequence (at most 256
 * sequences). */
static inline int fuzz_dcpplan(const uint8_t *data, size_t size)
{
    static const int gpus_of[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
    static const int frames_of[] = {1, 16, 32, 51, 68, 102, 204, 408};
    static const int res_of[][2] = {{144, 256}, {240, 426}, {360, 640}, {480, 854}, {720, 1280},
                                    {256, 256}, {512, 512}, {1024, 1024}};
    static const double ahead_of[] = {0, 0.5, 1, 2};
    if (size < 6)
        return 0;
    int video = data[0] & 1, ring = (data[0] >> 3) & 1;
    ts_err e = {{0}};
    hw_desc hw;
    llm_desc m;
    tc_model tm;
    if (hw_load("h200", &hw, &e) || llm_load(video ? "opensora-stdit3" : "llama-3.1-8b", &m, &e) ||
        tc_model_init(&tm, &m, video ? 300 : 0, 34, &e))
        abort(); /* shipped descriptions load */
    btrace *bt = btrace_new(video ? BT_2D : BT_1D);
    if (!bt)
        return 0;
    for (size_t i = 4; i + 1 < size && bt->n < 256; i += 2) {
        int rc;
        if (video)
            rc = btrace_add_video(bt, frames_of[data[i] % 8], res_of[data[i + 1] % 8][0],
                                  res_of[data[i + 1] % 8][1], &e);
        else
            rc = btrace_add_1d(bt, 1 + ((int32_t)data[i] << 8 | data[i + 1]) % 65536, &e);
        if (rc)
            abort(); /* valid shapes are accepted */
    }
    if (bt->n == 0 || bt_bucketize(bt, &e)) {
        btrace_free(bt);
        return 0;
    }
    dcp_cfg cfg;
    dcp_cfg_default(&cfg);
    cfg.gpus = gpus_of[data[2] % 12];
    cfg.mem_cap = 0.30 + 0.65 * data[3] / 255.0;
    cfg.fill = (data[0] >> 1) & 1;
    cfg.xfill = (data[0] >> 2) & 1;
    cfg.draw_work = (data[0] >> 4) & 1;
    cfg.endgame = data[1] & 3;
    cfg.ahead = ahead_of[(data[1] >> 2) & 3];
    cfg.ring = ring;
    if (ring) {
        int sp[] = {1, 2, 4, 8, 16};
        memcpy(cfg.sp, sp, sizeof sp);
        cfg.n_sp = 5;
    }
    dcp_ctx c;
    if (dcp_ctx_init(&c, &hw, &tm, bt, &cfg, &e)) {
        if (!e.msg[0])
            abort(); /* an infeasible setup says why */
        btrace_free(bt);
        return 0;
    }
    dcp_strategy st[DCP_MAX_STRATEGIES];
    int ns;
    if (dcp_parse_strategies("bucket,packed,dcp-intra,dcp-inter,dcp-inter+pac,dcp-intra+pac,bound",
                             st, DCP_MAX_STRATEGIES, &ns, &e))
        abort();
    double bound = -1, best = 1e300;
    for (int k = 0; k < ns; k++) {
        dcp_plan p;
        e.msg[0] = 0;
        if (dcp_plan_run(&c, &st[k], &p, &e)) {
            if (!e.msg[0])
                abort(); /* a planner that fails says why */
            continue;
        }
        dcp_result r;
        if (dcp_simulate(&c, &p, 0, &r, NULL, 0, 0, &e))
            abort();
        if (st[k].kind == DCP_BOUND) {
            bound = r.time_s;
            dcp_plan_free(&p);
            continue;
        }
        char why[256];
        if (r.seqs != (int64_t)bt->n || !r.feasible || dcp_plan_check(&c, &p, why, sizeof why))
            abort(); /* every sequence once, in order, tiled GPUs, within memory */
        best = r.time_s < best ? r.time_s : best;
        dcp_plan_free(&p);
    }
    if (bound > 0 && best < 1e300 && bound > best * (1 + 1e-9))
        abort(); /* the bound is a lower bound */
    dcp_ctx_free(&c);
    btrace_free(bt);
    return 0;
}

#endif
