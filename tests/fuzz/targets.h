/*
 * Fuzz targets: one function per reader, taking raw bytes.  Each writes the
 * bytes to a private temporary file (the readers take paths, as users give
 * them) and runs the reader; a reader may accept or reject the input, but it
 * must not crash, hang, leak or return a half-built object.  Included by the
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
#include "models/hw.h"
#include "models/vidur.h"
#include "traces/batch.h"
#include "sim/grid.h"
#include "sim/scenario.h"
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

/* Trace readers (JSONL, plain CSV, Vidur request CSV, chosen by content). */
static inline int fuzz_trace(const uint8_t *data, size_t size)
{
    char path[128];
    if (!fuzz_tmpfile(data, size, ".trace", path, sizeof path))
        return 0;
    trace *t = NULL;
    ts_err e = {{0}};
    if (trace_load(path, &t, &e) == 0) {
        if (!t)
            abort(); /* success must give a trace */
        trace_stats st;
        if (trace_stats_compute(t, &st, &e) == 0 && (st.responses <= 0 || st.max < 1))
            abort(); /* a loaded trace has positive lengths */
        trace_free(t);
    } else if (t || !e.msg[0]) {
        abort(); /* failure must leave nothing and say why */
    }
    remove(path);
    return 0;
}

/* Scenario INI reader. */
static inline int fuzz_scenario(const uint8_t *data, size_t size)
{
    char path[128];
    if (!fuzz_tmpfile(data, size, ".ini", path, sizeof path))
        return 0;
    scenario s;
    ts_err e = {{0}};
    if (scenario_load(path, &s, &e) == 0) {
        if (s.gpus < 1 || s.tp < 1 || !s.model[0])
            abort(); /* loaded scenarios respect their ranges */
        scenario_validate(&s, &e);
    } else if (!e.msg[0]) {
        abort();
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
    if (calib_csv_load(path, &rows, &n, &e) == 0)
        free(rows);
    else if (!e.msg[0])
        abort();
    remove(path);
    return 0;
}

/* Sweep grid INI reader (tailsim sweep).  A loaded grid must hold a base
 * scenario, at least one value per swept key, and a configuration count
 * equal to the product of the list sizes, within the limit; decoding the
 * last configuration must stay in range. */
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
        grid_free(&g);
    } else if (!e.msg[0] || g.n_dims) {
        abort(); /* failure must say why and leave nothing allocated */
    }
    remove(path);
    return 0;
}

#endif
