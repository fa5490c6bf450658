/*
 * Determinism across builds: the same seed and inputs give byte-identical
 * JSON from the optimized binary (build/tailsim) and from an unoptimized
 * debug build of the same sources (build/O0/tailsim, built here with
 * `make B=build/O0 OPT=-O0`), for a plain and a speculative policy.  (Runs
 * of one binary are compared in tests/test_sim.c and tests/test_policy.c.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers.h"

Test(determinism, debug_and_optimized_builds_agree, .timeout = 600)
{
    int rc = system("make -s --no-print-directory B=build/O0 OPT=-O0 build/O0/tailsim >/dev/null");
    cr_assert_eq(rc, 0, "building build/O0/tailsim failed");
    const char *args[] = {
        "rlstep qwen7b-64gpu --set trace.prompts=96 --policy verl --json --no-wall",
        "rlstep qwen7b-64gpu --set trace.prompts=96 --policy tlt --steps 2 --json --no-wall",
        "rollout dapo-32b-polytrace --set trace.file= --set trace.prompts=32 --policy tlt-base --json --no-wall",
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "build/tailsim %s", args[i]);
        char *opt = run_capture(cmd);
        snprintf(cmd, sizeof cmd, "build/O0/tailsim %s", args[i]);
        char *dbg = run_capture(cmd);
        cr_assert(strstr(opt, "\"rollout_s\""), "%s", opt);
        cr_assert_str_eq(opt, dbg, "outputs differ for: %s", args[i]);
        free(opt);
        free(dbg);
    }
}
