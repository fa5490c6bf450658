/*
 * `tailsim-validate calibrate [--quick] [--reps N] [--only GROUP] -o DIR`:
 * times every op the cost model prices over the shapes the simulator asks
 * about, and writes DIR/calib.csv and DIR/calib.db (table calib), the same
 * rows in both (see validate.h for the columns), and DIR/gemm_algos.csv:
 * the algorithm cuBLASLt's heuristic chose for every GEMM shape planned on
 * the way (kt_blas_algos: the gemm group's shapes and the layers', the
 * drafter's and the trainer's products), one row per distinct shape.
 * --algos-only plans the gemm group's shapes (the heuristic query alone)
 * and writes only gemm_algos.csv, timing nothing: seconds on a GPU, and the
 * one calibrate the CPU emulator runs (its rows are fake: tile "emu").
 *
 * Shapes.  Models are Qwen2.5-7B and -32B, loaded with llm_load() from
 * models/llm/ when the library has it, else from the built-in table below
 * (the published configs).  TP-local shapes: 7B at TP 1 and 32B at TP 4 in
 * --quick; 7B at TP 1, 2, 4 and 32B at TP 1, 2, 4, 8 otherwise.
 *   gemm           QKV, O, gate_up, down and LM head for tokens 1..4096,
 *                  plus one 8192^3 product (gemm_peak) as the matrix ceiling
 *   decode_attn    batch 1..512 x uniform contexts 128..65536, and long-tail
 *                  mixes: one 65536-token sequence among short ones ("tail"),
 *                  lognormal contexts (median 2048, sigma 1), and a draining
 *                  batch 65536, 32768, ... 512; total KV capped at 2M tokens
 *                  (--quick) or 8M (the memory of a real decode batch)
 *   chunk_attn     verification chunks V in {1,8,16,32,48} at several batches
 *                  and contexts, and prefill chunks of 256..2048 tokens
 *   rmsnorm, rope, swiglu, embed   rows 1..8192 at the model widths
 *   verify_accept  argmax over the vocabulary of b*(V+1) rows + acceptance
 *   copy           a 1 GiB device-to-device copy: the bandwidth ceiling
 *   host           pinned host-to-device (h2d) and device-to-host (d2h)
 *                  copies of 64 MiB and 1 GiB: the host link (hw pcie_bw)
 *   layer, drafter, train   the composite kernels (one decoder layer, the
 *                  EAGLE draft step, training forward/backward of a
 *                  two-layer stack): validate/calib_model.c
 * Each shape: warm-up, then repeats each preceded by an L2 flush, timed with
 * CUDA events (kt_time); median, p10 and p90 are stored, and each line
 * printed carries the napkin math (GB/s and TFLOP/s achieved, as fractions
 * of the measured copy bandwidth and of gemm_peak).
 *
 * --quick (7 repeats, fewer shapes) is sized to finish in well under three
 * minutes on one H200; the full sweep takes several times longer.  --tail
 * is --quick restricted to what the decode tail's cost needs, for the first
 * run of a short device window (gpu.sh): Qwen2.5-7B at TP 1 only, groups
 * copy, gemm (decode-sized rows upward, and the peak), decode_attn,
 * chunk_attn (the verify chunks), rows, verify and drafter; host copies,
 * the layer composites, training and the other TP degrees wait for
 * `gpu.sh --more` (collectives cannot be measured on one GPU at all).
 *
 * Never run on a GPU yet, so every step is built to keep what it measured:
 * DIR is created before the first measurement, DIR/calib.csv is rewritten
 * (atomically) after every row, a group that fails is reported and the next
 * group runs (unless the CUDA context is broken), and --budget S stops
 * measuring S seconds after the start; gemm_algos.csv is rewritten
 * (atomically) after every group.  --db FILE puts the database elsewhere
 * than DIR/calib.db (it is written once, at the end).  Exit status: 0 all
 * rows measured, 3 the budget ran out (the rows so far are written), 2 an
 * error (the rows so far are written too), 77 no GPU.
 *
 * This file holds the models and their TP configurations, the timing and
 * storing of one row (calib_measure) and the driver: options, output
 * paths, the group table and how a run ends.  The sweeps of copy, host,
 * gemm, the attention, the row-wise ops and verify_accept are in
 * validate/calib_sweeps.c (declared in calibrate_impl.h).
 */
#include "validate/calibrate_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "models/hw.h"

/* Weak, so that the program links before models/ implements it (see
 * validate.mk); null when the library lacks it. */
#pragma weak llm_load

static const vmodel BUILTIN[2] = {
    {"qwen2.5-7b", 3584, 28, 4, 128, 18944, 152064, 1},
    {"qwen2.5-32b", 5120, 40, 8, 128, 27648, 152064, 1},
};

static void load_model(const vmodel *builtin, vmodel *out)
{
    *out = *builtin;
    if (!llm_load) {
        printf("models: llm_load() not in this build; built-in %s shapes\n", builtin->name);
        return;
    }
    llm_desc d;
    ts_err e = {""};
    if (llm_load(builtin->name, &d, &e)) {
        printf("models: %s; built-in %s shapes\n", e.msg, builtin->name);
        return;
    }
    out->hidden = d.hidden;
    out->heads = d.heads;
    out->kv_heads = d.kv_heads;
    out->hd = d.head_dim;
    out->ffn = d.ffn;
    out->vocab = d.vocab;
    out->qkv_bias = d.qkv_bias;
    printf("models: %s from models/llm\n", builtin->name);
}

static int add_cfg(calib *c, const vmodel *m, int tp)
{
    if (m->heads % tp || m->ffn % tp || m->vocab % tp || (m->kv_heads >= tp && m->kv_heads % tp) ||
        m->hd != 128 || m->hidden % 8 || (m->ffn / tp) % 8 || (m->vocab / tp) % 8)
        return ts_errf(&c->err, "%s does not split at TP %d into the kernels' shapes", m->name, tp);
    vcfg *v = &c->cfgs[c->ncfg++];
    v->m = m;
    v->tp = tp;
    v->heads = m->heads / tp;
    v->kv = m->kv_heads >= tp ? m->kv_heads / tp : 1; /* replicated below 1 */
    v->ffn = m->ffn / tp;
    v->vocab = m->vocab / tp;
    return 0;
}

calib_row calib_row_init(const char *op)
{
    calib_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.op, sizeof r.op, "%s", op);
    return r;
}

/* Times fn, fills the statistics and clocks of r, prints it, stores it. */
int calib_measure(calib *c, kt_launch_fn fn, void *arg, calib_row *r)
{
    if (c->deadline > 0 && ts_wall_s() > c->deadline) {
        c->out_of_time = 1;
        return ts_errf(&c->err, "out of time (--budget) before %s m=%.0f n=%.0f k=%.0f b=%.0f",
                       r->op, r->m, r->n, r->k, r->batch);
    }
    if (kt_time(fn, arg, c->warmup, c->reps, c->us))
        return ts_errf(&c->err, "timing %s (m=%.0f n=%.0f k=%.0f b=%.0f): %s", r->op, r->m,
                       r->n, r->k, r->batch, kt_error());
    calib_stats(c->us, c->reps, &r->p10_us, &r->median_us, &r->p90_us);
    kt_clocks(&r->sm_mhz, &r->mem_mhz);
    double s = r->median_us * 1e-6, bw = r->bytes / s, fl = r->flops / s;
    printf("%-13s m=%-8.0f n=%-7.0f k=%-6.0f b=%-4.0f ctx=%-8.0f q=%-5.0f %10.1f us"
           " %7.0f GB/s %4.0f%% %7.1f TFLOP/s %4.0f%%  %d MHz\n",
           r->op, r->m, r->n, r->k, r->batch, r->ctx_sum, r->q_len, r->median_us, bw * 1e-9,
           c->copy_bw > 0 ? 100.0 * bw / c->copy_bw : 0.0, fl * 1e-12,
           c->peak_flops > 0 ? 100.0 * fl / c->peak_flops : 0.0, r->sm_mhz);
    fflush(stdout);
    if (calib_add(&c->set, r, &c->err))
        return -1;
    return c->csv[0] ? calib_write_csv(&c->set, c->csv, &c->err) : 0;
}

/* Allocates n bf16 on the device filled with U(-1, 1); NULL on failure. */
kt_bf16 *calib_dev_random(calib *c, size_t n, uint64_t seed)
{
    kt_bf16 *d = kt_malloc(n * sizeof *d);
    if (!d || kt_fill_bf16(d, n, seed, 1.0f)) {
        ts_errf(&c->err, "device buffer of %zu bf16: %s", n, kt_error());
        kt_free(d);
        return NULL;
    }
    return d;
}

/* ---- driver -------------------------------------------------------------- */

/* Writes the CSV (c->csv) and the database (db) with every row measured. */
static int write_outputs(calib *c, const char *db)
{
    if (calib_write_csv(&c->set, c->csv, &c->err))
        return -1;
    printf("calibrate: %zu rows -> %s\n", c->set.n, c->csv);
    if (calib_write_db(&c->set, db, &c->err))
        return -1;
    printf("calibrate: %zu rows -> %s\n", c->set.n, db);
    return 0;
}

/* Rewrites c->algos with every choice kt_blas_algos() holds (nothing when
 * no GEMM was planned); 0, or -1 with c->err set. */
static int write_algos(calib *c)
{
    size_t n = kt_blas_algos(NULL, 0);
    if (n == 0)
        return 0;
    kt_blas_algo *a = malloc(n * sizeof *a);
    if (!a)
        return ts_errf(&c->err, "%s: out of memory for %zu rows", c->algos, n);
    n = kt_blas_algos(a, n);
    int rc = calib_write_algos(c->set.device, a, n, c->algos, &c->err);
    free(a);
    return rc;
}

/* The command line of one run (--quick is stored in the calib itself). */
typedef struct cal_opts {
    const char *dir;    /* -o DIR; required */
    const char *only;   /* --only GROUP; NULL: every group */
    const char *db;     /* --db FILE; NULL until set_outputs() picks DIR/calib.db */
    int64_t reps;       /* --reps N; 0: the default for --quick or not */
    double budget;      /* --budget, s; 0: none */
    char dbpath[4096];  /* DIR/calib.db, the default of db */
} cal_opts;

/* The measurement groups in the order they run; a NULL fn is sweep_attn,
 * chunked for "chunk_attn". */
static const struct {
    const char *name;
    int (*fn)(calib *);
    int tail;           /* measured by --tail: what the decode tail's model needs */
} GROUPS[] = {
    {"copy", sweep_copy, 1}, {"host", sweep_host, 0}, {"gemm", sweep_gemm, 1},
    {"decode_attn", NULL, 1}, {"chunk_attn", NULL, 1}, {"rows", sweep_rows, 1},
    {"verify", sweep_verify, 1}, {"layer", calib_sweep_layer, 0},
    {"drafter", calib_sweep_drafter, 1}, {"train", calib_sweep_train, 0},
};

/* Parses argv into o and c->quick; -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, calib *c, cal_opts *o)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            c->quick = 1;
        } else if (!strcmp(argv[i], "--tail")) {
            c->quick = c->tail = 1;
        } else if (!strcmp(argv[i], "--algos-only")) {
            c->algos_only = 1;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            o->dir = argv[++i];
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (ts_parse_i64(argv[++i], 1, MAX_REPS, &o->reps)) {
                fprintf(stderr, "calibrate: --reps: '%s' is not in 1..%d\n", argv[i], MAX_REPS);
                return 2;
            }
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            o->only = argv[++i];
        } else if (!strcmp(argv[i], "--budget") && i + 1 < argc) {
            if (ts_parse_double(argv[++i], 1.0, 1e6, &o->budget)) {
                fprintf(stderr, "calibrate: --budget: '%s' is not a number of seconds >= 1\n",
                        argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--db") && i + 1 < argc) {
            o->db = argv[++i];
        } else {
            fprintf(stderr, "calibrate: unknown option '%s' (--quick, --tail, --algos-only, "
                            "--reps N, --only GROUP[,GROUP...] of copy host gemm decode_attn "
                            "chunk_attn rows verify layer drafter train, --budget S, --db FILE, "
                            "-o DIR)\n",
                    argv[i]);
            return 2;
        }
    }
    if (!o->dir) {
        fprintf(stderr, "calibrate: -o DIR is required\n");
        return 2;
    }
    return -1;
}

/* Creates the output directory and names the CSV and the database in it;
 * 0, or 2 (the exit status) when DIR cannot be created. */
static int set_outputs(calib *c, cal_opts *o)
{
    /* the output directory first: a run must not measure for minutes and
     * then find it cannot write */
    if (mkdir(o->dir, 0777) && errno != EEXIST) {
        fprintf(stderr, "calibrate: %s: cannot create: %s\n", o->dir, strerror(errno));
        return 2;
    }
    snprintf(c->csv, sizeof c->csv, "%s/calib.csv", o->dir);
    snprintf(c->algos, sizeof c->algos, "%s/gemm_algos.csv", o->dir);
    snprintf(o->dbpath, sizeof o->dbpath, "%s/calib.db", o->dir);
    if (!o->db)
        o->db = o->dbpath;
    return 0;
}

/* Fills the run's settings, models and TP configurations for the device;
 * 0, or -1 with c->err set when a model does not split at a TP degree. */
static int set_up(calib *c, const kt_device *dev, int64_t reps)
{
    snprintf(c->set.device, sizeof c->set.device, "%s", dev->name);
    c->warmup = c->quick ? 2 : 5;
    c->reps = reps ? (int)reps : c->quick ? 7 : 25;
    c->cap_tokens = c->quick ? (size_t)1 << 21 : (size_t)1 << 23;
    for (int i = 0; i < 2; i++)
        load_model(&BUILTIN[i], &c->models[i]);
    static const int tp7[] = {1, 2, 4}, tp32[] = {1, 2, 4, 8};
    int rc = 0;
    if (c->tail)
        rc = add_cfg(c, &c->models[0], 1);
    else if (c->quick)
        rc = add_cfg(c, &c->models[0], 1) || add_cfg(c, &c->models[1], 4);
    for (size_t i = 0; !c->quick && rc == 0 && i < NELEM(tp7); i++)
        rc = add_cfg(c, &c->models[0], tp7[i]);
    for (size_t i = 0; !c->quick && rc == 0 && i < NELEM(tp32); i++)
        rc = add_cfg(c, &c->models[1], tp32[i]);
    return rc;
}

/* The first name of the list only that is not a group, into bad; 0 when
 * all are (or only is NULL). */
static int unknown_group(const char *only, char *bad, size_t bn)
{
    const char *names[NELEM(GROUPS)];
    for (size_t g = 0; g < NELEM(GROUPS); g++)
        names[g] = GROUPS[g].name;
    return val_unknown_name(only, names, NELEM(GROUPS), bad, bn);
}

/* Runs the groups (those listed in only, and copy, when only is set; with
 * --tail the decode tail's groups; with --algos-only the gemm group alone,
 * planned, not timed), rewriting gemm_algos.csv after each.  A group that
 * fails is reported and the next one runs (one bad kernel must not cost the
 * other ops' rows), unless the CUDA context is broken or the budget is
 * spent: then -1.  *failed counts the groups that failed. */
static int run_groups(calib *c, const char *only, int *failed)
{
    int rc = 0;
    for (size_t g = 0; rc == 0 && g < NELEM(GROUPS); g++) {
        if (c->algos_only ? strcmp(GROUPS[g].name, "gemm") != 0
                          : (!val_in_list(only, GROUPS[g].name) || (c->tail && !GROUPS[g].tail)) &&
                                g != 0)
            continue; /* the copy ceiling always runs: the fractions need it */
        double tg = ts_wall_s();
        printf("== %s\n", GROUPS[g].name);
        fflush(stdout);
        int grc = GROUPS[g].fn ? GROUPS[g].fn(c)
                               : sweep_attn(c, !strcmp(GROUPS[g].name, "chunk_attn"));
        printf("== %s: %.1f s\n", GROUPS[g].name, ts_wall_s() - tg);
        if (write_algos(c)) { /* what the heuristic chose so far, kept as we go */
            fprintf(stderr, "calibrate: %s\n", c->err.msg);
            (*failed)++;
        }
        if (grc == 0)
            continue;
        if (c->out_of_time) {
            rc = -1;
            break;
        }
        (*failed)++;
        printf("== %s FAILED: %s\n", GROUPS[g].name, c->err.msg);
        fprintf(stderr, "calibrate: group %s failed: %s\n", GROUPS[g].name, c->err.msg);
        if (kt_sync()) {
            fprintf(stderr, "calibrate: the CUDA context is unusable (%s); stopping\n",
                    kt_error());
            rc = -1;
        }
    }
    return rc;
}

/* Reports how the run ended, writes the rows kept (partial ones too) and
 * frees them; returns the exit status: 0, 2 an error, 3 out of time. */
static int finish(calib *c, const char *db, int rc, int failed, double t0)
{
    int status = 0;
    if (c->out_of_time) {
        fprintf(stderr, "calibrate: %s; %zu rows kept (partial: exit 3)\n", c->err.msg, c->set.n);
        status = 3;
    } else if (rc || failed) {
        if (rc)
            fprintf(stderr, "calibrate: %s\n", c->err.msg);
        status = 2;
    }
    if (c->set.n > 0 && write_outputs(c, db)) { /* partial results are kept too */
        fprintf(stderr, "calibrate: %s\n", c->err.msg);
        status = 2;
    }
    if (write_algos(c)) {
        fprintf(stderr, "calibrate: %s\n", c->err.msg);
        status = 2;
    } else if (kt_blas_algos(NULL, 0) > 0) {
        printf("calibrate: %zu GEMM shapes (cuBLASLt's choice) -> %s\n", kt_blas_algos(NULL, 0),
               c->algos);
    }
    printf("calibrate: %zu rows in %.1f s\n", c->set.n, ts_wall_s() - t0);
    calib_free(&c->set);
    return status;
}

int val_calibrate(int argc, char **argv)
{
    static calib c; /* large: keep it off the stack */
    cal_opts o = {0};
    int rc = parse_options(argc, argv, &c, &o);
    if (rc >= 0)
        return rc;
    char bad[64];
    if (unknown_group(o.only, bad, sizeof bad)) {
        fprintf(stderr, "calibrate: --only: no group named '%s'\n", bad);
        return 2;
    }
    if (set_outputs(&c, &o))
        return 2;
    kt_device dev;
    rc = val_open_device(&dev);
    if (rc <= 0)
        return rc == 0 ? VAL_EXIT_SKIP : 2;
    if (!strcmp(dev.name, KT_EMU_DEVICE_NAME) && !c.algos_only) {
        fprintf(stderr, "calibrate: %s: the CPU emulator's timings are not GPU timings; "
                        "calibrate needs a GPU (the emulator runs selftest, confirm and "
                        "calibrate --algos-only)\n",
                dev.name);
        return 2;
    }
    rc = set_up(&c, &dev, o.reps);
    double t0 = ts_wall_s();
    c.deadline = o.budget > 0 ? t0 + o.budget : 0;
    int failed = 0;
    if (rc == 0)
        rc = run_groups(&c, o.only, &failed);
    return finish(&c, o.db, rc, failed, t0);
}
