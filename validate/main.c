/*
 * tailsim-validate: measures on a real GPU the operations tailsim's cost
 * model prices, so that the model can be fitted and checked against them.
 *
 *   tailsim-validate selftest [--seed N] [--only OP,...] [--small]   every kernel vs its C reference
 *   tailsim-validate calibrate [--quick|--tail] [--budget S] -o DIR   timings -> DIR/calib.csv, calib.db,
 *                                              cuBLASLt's choices -> DIR/gemm_algos.csv
 *   tailsim-validate check CSV [--json] [-o FILE.ini]   fit and hold-out error
 *   tailsim-validate confirm [--quick] [--trace FILE] [-o DIR]   mini rollout on the GPU
 *
 * check runs anywhere and never initialises CUDA (validate/check.c; the same
 * command is `tailsim calib check`).
 * Without a CUDA device, selftest and calibrate print "no CUDA device" and
 * exit 77 (the conventional "skipped" status); 0 means success, 1 a failed
 * check, 2 a usage or runtime error, 3 (calibrate, confirm) out of time with
 * the partial results written.
 */
#include <stdio.h>
#include <string.h>

#include "validate/check.h"
#include "validate/confirm.h"
#include "validate/validate.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim-validate COMMAND [options]\n"
            "  selftest [--seed N] [--only OP,...] [--small]\n"
            "                               run every kernel on random data and compare\n"
            "                               with the C reference (exit 0 when all pass);\n"
            "                               --small: small shapes, same code paths\n"
            "  calibrate [--quick|--tail] [--reps N] [--only GROUP,...] [--budget S] [--db FILE]\n"
            "            [--algos-only] -o DIR\n"
            "                               time every op over the model shapes (--tail: what\n"
            "                               the decode tail needs, 7B at TP 1); writes\n"
            "                               DIR/calib.csv (after every row), DIR/calib.db and\n"
            "                               DIR/gemm_algos.csv (cuBLASLt's kernel per GEMM\n"
            "                               shape; --algos-only: that file alone, nothing\n"
            "                               timed, on the CPU emulator too);\n"
            "                               exit 3 when --budget S ran out (rows kept)\n"
            "  check CSV [--json] [--hw NAME] [-o FILE.ini]\n"
            "                               fit the cost model on half of the CSV's shapes\n"
            "                               and report the other half (no GPU needed)\n"
            "  confirm [--quick] [--trace FILE] [--budget S] [-o DIR]\n"
            "                               mini rollout on the GPU, baseline and tail\n"
            "                               speculation, against tailsim's prediction\n"
            "                               (GPU time by CUDA events; exit 2 when a part\n"
            "                               failed, 3 when one ran out of time)\n"
            "Exit status 77: no CUDA device (skipped).\n");
}

int val_open_device(kt_device *d)
{
    int rc = kt_device_open(d);
    if (rc == 0)
        fprintf(stderr, "tailsim-validate: no CUDA device: %s\n", kt_error());
    else if (rc < 0)
        fprintf(stderr, "tailsim-validate: opening the GPU: %s\n", kt_error());
    else
        printf("device: %s (sm_%d%d, %d SMs, L2 %.0f MiB, %.1f GiB)\n", d->name,
               d->cc_major, d->cc_minor, d->sms, d->l2_bytes / 1048576.0,
               d->mem_bytes / 1073741824.0);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "selftest") || !strcmp(cmd, "calibrate")) {
        int rc = cmd[0] == 's' ? val_selftest(argc - 1, argv + 1)
                               : val_calibrate(argc - 1, argv + 1);
        kt_close();
        return rc;
    }
    if (!strcmp(cmd, "check"))
        return val_check(argc - 1, argv + 1); /* no kt_* call: CUDA stays untouched */
    if (!strcmp(cmd, "confirm")) {
        int rc = val_confirm(argc - 1, argv + 1);
        kt_close();
        return rc;
    }
    fprintf(stderr, "tailsim-validate: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
