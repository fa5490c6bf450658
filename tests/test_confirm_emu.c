/*
 * `tailsim-validate confirm` replayed on the CPU emulator (emu/,
 * build/tailsim-validate-emu) with a tiny model written by the test (2
 * layers, hidden 256, 2 query heads on 1 KV head of 128, ffn 512, vocab
 * 512): issue 22's acceptance test that confirm times no host query inside
 * a measured interval.
 *
 *   - a short replay (8 responses up to 200 tokens) completes both parts,
 *     on the INI's 2 layers (no --layers given), covers plain (decode)
 *     and speculative iterations, and counts zero
 *     cuBLASLt heuristic queries inside timed intervals (confirm.json's
 *     plan_queries_timed, from kt_plan_queries_timed()) and no device
 *     allocation or free after the warm-up (device_alloc_calls, from
 *     kt_device_alloc_calls(): plans take cached blocks);
 *   - a replay whose later steps outgrow the first of their kind (16
 *     responses up to 400 tokens) makes no device allocation after the
 *     warm-up either: the workspaces and the plans' blocks are reserved for
 *     the largest step first (14 calls without that);
 *   - the same replay with the GEMM pre-planning dropped
 *     (KT_TEST_SKIP_PREPLAN=1, a test hook in kernels/devutil.cu) counts
 *     queries inside timed intervals, is reported invalid and exits 2: the
 *     count can fail.
 *
 * Emulated times are not a GPU's, so the targets are not asserted (exit 1,
 * "NOT met", is expected); nothing here asserts a time.  Each run takes about
 * 8 s on 2 cores.  Skips when the emulator is not built (not x86-64, or
 * `make check` under SANITIZE).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers.h"

#define EMU "build/tailsim-validate-emu"
#define DIR "build/test_confirm_emu"

static const char tiny_ini[] =
    "; a tiny Qwen2-style model for the emulated confirm test\n"
    "[model]\n"
    "layers = 2\nhidden = 256\nheads = 2\nkv_heads = 1\nhead_dim = 128\n"
    "ffn = 512\nvocab = 512\ntied = 0\ngated = 1\nqkv_bias = 1\n";

/* Runs the emulated confirm into DIR/<name>/ with env prefixed (may be "");
 * returns the exit status and the parsed confirm.json (json_decref it). */
static int run_confirm_args(const char *name, const char *env, const char *args, json_t **doc)
{
    if (access(EMU, X_OK) != 0)
        cr_skip_test(EMU " not built (make kernels-emu; x86-64 only)");
    mkdir("build", 0777);
    mkdir(DIR, 0777);
    write_aside(DIR "/tiny.ini", tiny_ini);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "rm -rf " DIR "/%s && %s " EMU " confirm --model " DIR "/tiny.ini %s "
             "--budget 300 -o " DIR "/%s > " DIR "/%s.log 2>&1",
             name, env, args, name, name);
    int st = system(cmd);
    cr_assert(WIFEXITED(st), "confirm did not exit: %s", cmd);
    char path[256];
    snprintf(path, sizeof path, DIR "/%s/confirm.json", name);
    json_error_t je;
    *doc = json_load_file(path, 0, &je);
    cr_assert_not_null(*doc, "%s: %s (see " DIR "/%s.log)", path, je.text, name);
    return WEXITSTATUS(st);
}

static int run_confirm(const char *name, const char *env, json_t **doc)
{
    return run_confirm_args(name, env, "--responses 8 --max-len 200 --seed 1", doc);
}

static long long part_int(json_t *doc, const char *part, const char *key)
{
    json_t *v = json_object_get(json_object_get(doc, part), key);
    cr_assert(json_is_integer(v), "%s.%s missing", part, key);
    return (long long)json_integer_value(v);
}

static long long kind_count(json_t *doc, const char *part, const char *kind)
{
    json_t *v = json_object_get(json_object_get(json_object_get(doc, part), "replayed_by_kind"),
                                kind);
    cr_assert(json_is_integer(v), "%s.replayed_by_kind.%s missing", part, kind);
    return (long long)json_integer_value(v);
}

Test(confirm_emu, replay_times_no_plan_query, .timeout = 240)
{
    json_t *doc = NULL;
    int rc = run_confirm("clean", "", &doc);
    /* 0 or 1 (the emulator's times miss the targets): complete and valid */
    cr_expect(rc == 0 || rc == 1, "exit %d (see " DIR "/clean.log)", rc);
    cr_expect(json_is_true(json_object_get(doc, "complete")), "not complete");
    cr_expect(json_is_true(json_object_get(doc, "valid")), "not valid");
    const char *parts[2] = {"baseline", "speculative"};
    for (int i = 0; i < 2; i++) {
        const char *st = json_string_value(json_object_get(json_object_get(doc, parts[i]),
                                                           "status"));
        cr_expect(st && !strcmp(st, "ok"), "%s: status %s", parts[i], st ? st : "(none)");
        long long n = part_int(doc, parts[i], "iterations");
        cr_expect_gt(n, 0, "%s: no iterations", parts[i]);
        cr_expect_eq(part_int(doc, parts[i], "replayed"), n, "%s: not all replayed", parts[i]);
        cr_expect_eq(part_int(doc, parts[i], "plan_queries_timed"), 0,
                     "%s: cuBLASLt queried inside timed intervals", parts[i]);
        /* plans reuse kt_scratch_get's blocks: no cudaMalloc / cudaFree
         * once the warm-up (the first of each kind) has run */
        cr_expect_eq(part_int(doc, parts[i], "device_alloc_calls"), 0,
                     "%s: device allocations after the warm-up", parts[i]);
    }
    /* the model's own depth without --layers (was 28, Qwen2.5-7B's) */
    json_t *layers = json_object_get(doc, "layers");
    cr_expect(json_is_integer(layers) && json_integer_value(layers) == 2,
              "layers %lld, expected the INI's 2", (long long)json_integer_value(layers));
    /* what was timed: plain decode steps in both parts, speculative
     * iterations (draft, verify, extend) in the second; more than one of
     * each, since the warm-up ran the first of each kind once untimed and
     * only later ones have shapes it did not plan */
    cr_expect_gt(kind_count(doc, "baseline", "decode"), 1);
    cr_expect_eq(kind_count(doc, "baseline", "speculative"), 0);
    cr_expect_gt(kind_count(doc, "speculative", "decode"), 0);
    cr_expect_gt(kind_count(doc, "speculative", "speculative"), 1);
    json_decref(doc);
}

Test(confirm_emu, dropped_preplanning_is_caught, .timeout = 240)
{
    json_t *doc = NULL;
    int rc = run_confirm("planted", "KT_TEST_SKIP_PREPLAN=1", &doc);
    cr_expect_eq(rc, 2, "exit %d, expected 2 (invalid measurement)", rc);
    cr_expect(json_is_false(json_object_get(doc, "valid")), "reported valid");
    cr_expect_gt(part_int(doc, "baseline", "plan_queries_timed"), 0,
                 "baseline: no timed query counted with the pre-planning dropped");
    cr_expect_gt(part_int(doc, "speculative", "plan_queries_timed"), 0,
                 "speculative: no timed query counted with the pre-planning dropped");
    json_decref(doc);
    char *log = slurp_file(DIR "/planted.log");
    cr_expect(strstr(log, "INVALID"), "the table does not say INVALID:\n%s", log);
    free(log);
}

/* 16 responses up to 400 tokens, seed 3: the speculative part's later
 * iterations are larger than the first of their kind (the re-prefill after
 * the switch outgrows the first prefill; verified tokens per sequence rise
 * as the batch shrinks), so without the reservation before the warm-up
 * (reserve_for in validate/confirm.c) the workspaces and the plans' blocks
 * grow during the measured replay: 14 allocation calls. */
Test(confirm_emu, larger_late_steps_allocate_nothing, .timeout = 240)
{
    json_t *doc = NULL;
    int rc = run_confirm_args("late", "", "--responses 16 --max-len 400 --seed 3", &doc);
    cr_expect(rc == 0 || rc == 1, "exit %d (see " DIR "/late.log)", rc);
    cr_expect(json_is_true(json_object_get(doc, "complete")), "not complete");
    cr_expect_gt(kind_count(doc, "speculative", "speculative"), 1);
    cr_expect_eq(part_int(doc, "baseline", "device_alloc_calls"), 0,
                 "baseline: device allocations after the warm-up");
    cr_expect_eq(part_int(doc, "speculative", "device_alloc_calls"), 0,
                 "speculative: device allocations after the warm-up");
    json_decref(doc);
    char *log = slurp_file(DIR "/late.log");
    cr_expect(strstr(log, "workspaces reserved for"), "no reservation reported:\n%s", log);
    free(log);
}
