/*
 * `tailsim-validate selftest`: runs every kernel on seeded random data and
 * compares it with its C reference (kernels/ref/), tolerance
 * abs + |ref| * eps(bf16), through the kt_<op>_selftest functions that sit in
 * each kernel file's "C reference" section; --small runs smaller shapes that
 * cover the same code paths (for the CPU emulator, make kernels-emu).  The
 * tolerances are kt_tol's (kernels.h, docs/validation.md "Selftest
 * tolerances").  Prints per-op results with the
 * first few mismatches (--only OP,OP,...: those ops alone); exit 0 when all pass, 1 on a mismatch, 2 on a CUDA
 * error, 77 without a GPU.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "validate/validate.h"

typedef int (*selftest_fn)(uint64_t seed, FILE *log);

static const struct {
    const char *name;
    selftest_fn fn;
} OPS[] = {
    {"gemm", kt_gemm_selftest},
    {"decode_attn", kt_decode_attn_selftest},
    {"chunk_attn", kt_chunk_attn_selftest},
    {"rmsnorm", kt_rmsnorm_selftest},
    {"rope", kt_rope_selftest},
    {"swiglu", kt_swiglu_selftest},
    {"embed", kt_embed_selftest},
    {"accept", kt_accept_selftest},
    {"layer", kt_layer_selftest},
    {"drafter", kt_drafter_selftest},
    {"train", kt_train_selftest},
};

int val_selftest(int argc, char **argv)
{
    int64_t seed = 1234;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            if (ts_parse_i64(argv[++i], 0, INT64_MAX, &seed)) {
                fprintf(stderr, "selftest: --seed: '%s' is not a non-negative integer\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--small")) {
            kt_selftest_set_small(1);
        } else {
            fprintf(stderr, "selftest: unknown option '%s' (--seed N, --only OP[,OP...], --small)\n",
                    argv[i]);
            return 2;
        }
    }
    const char *names[sizeof OPS / sizeof OPS[0]];
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        names[i] = OPS[i].name;
    char bad[64];
    if (val_unknown_name(only, names, sizeof OPS / sizeof OPS[0], bad, sizeof bad)) {
        fprintf(stderr, "selftest: --only: no op named '%s'\n", bad);
        return 2;
    }
    kt_device dev;
    int rc = val_open_device(&dev);
    if (rc <= 0)
        return rc == 0 ? VAL_EXIT_SKIP : 2;
    int passed = 0, failed = 0, errors = 0;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        if (!val_in_list(only, OPS[i].name))
            continue;
        printf("== %s\n", OPS[i].name);
        fflush(stdout);
        double t0 = ts_wall_s();
        int r = OPS[i].fn((uint64_t)seed, stdout);
        double dt = ts_wall_s() - t0;
        if (r == 0) {
            printf("PASS %s (%.1f s)\n", OPS[i].name, dt);
            passed++;
        } else if (r > 0) {
            printf("FAIL %s (%.1f s)\n", OPS[i].name, dt);
            failed++;
        } else {
            printf("ERROR %s: %s\n", OPS[i].name, kt_error());
            errors++;
            /* a sticky CUDA error poisons the context: stop here */
            if (kt_sync())
                break;
        }
        fflush(stdout);
    }
    printf("selftest: %d passed, %d failed, %d errors (seed %lld)\n", passed, failed, errors,
           (long long)seed);
    return errors ? 2 : failed ? 1 : 0;
}
