/*
 * The CPU emulator of the kernels (emu/, build/tailsim-validate-emu): its own
 * checks pass, one op's selftest passes on it and fails with the op's planted
 * bug absent (that is emu/planted.sh's job in `make kernels-emu`), and
 * `calibrate` refuses it (emulated timings are not GPU timings) with exit 2
 * and a message naming the emulator, writing nothing; `calibrate
 * --algos-only` (plans, times nothing) runs on it and writes gemm_algos.csv
 * with the header calibrate writes on a GPU and the stand-in's fake rows
 * (algorithm -1, tile "emu"), one per shape of the gemm group.  Skips when the
 * emulator is not built (`make check` builds it unless SANITIZE is set).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers.h"

#define EMU "build/tailsim-validate-emu"

static int exit_status(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(emu, own_checks_pass)
{
    if (access("build/emu/emu-test", X_OK) != 0)
        cr_skip_test("build/emu/emu-test not built");
    cr_expect_eq(exit_status(system("build/emu/emu-test >/dev/null 2>&1")), 0);
}

Test(emu, selftest_of_one_op_passes, .timeout = 120)
{
    if (access(EMU, X_OK) != 0)
        cr_skip_test(EMU " not built");
    int st = system(EMU " selftest --small --seed 7 --only rmsnorm > build/test_emu.log 2>&1");
    cr_expect_eq(exit_status(st), 0, "selftest --only rmsnorm on the emulator failed");
    char *log = slurp_file("build/test_emu.log");
    cr_assert(log);
    cr_expect(strstr(log, "device: tailsim CPU emulator"), "no emulator device line:\n%s", log);
    cr_expect(strstr(log, "PASS rmsnorm"), "no PASS line:\n%s", log);
    free(log);
}

Test(emu, calibrate_refuses_the_emulator)
{
    if (access(EMU, X_OK) != 0)
        cr_skip_test(EMU " not built");
    int st = system("rm -rf build/test_emu_cal && " EMU
                    " calibrate --quick -o build/test_emu_cal > build/test_emu_cal.log 2>&1");
    cr_expect_eq(exit_status(st), 2);
    char *log = slurp_file("build/test_emu_cal.log");
    cr_assert(log);
    cr_expect(strstr(log, "not GPU timings"), "no refusal message:\n%s", log);
    free(log);
    cr_expect_neq(access("build/test_emu_cal/calib.csv", F_OK), 0, "calib.csv written");
    cr_expect_neq(access("build/test_emu_cal/gemm_algos.csv", F_OK), 0,
                  "gemm_algos.csv written");
}

/* --tail's gemm group: gemm_peak and 5 products of Qwen2.5-7B at TP 1 at 7
 * token counts (validate/calib_sweeps.c), 36 distinct shapes. */
Test(emu, calibrate_algos_only_writes_gemm_algos_csv, .timeout = 60)
{
    if (access(EMU, X_OK) != 0)
        cr_skip_test(EMU " not built");
    int st = system("rm -rf build/test_emu_algos && " EMU " calibrate --algos-only --tail "
                    "-o build/test_emu_algos > build/test_emu_algos.log 2>&1");
    cr_assert_eq(exit_status(st), 0, "calibrate --algos-only failed (build/test_emu_algos.log)");
    char *csv = slurp_file("build/test_emu_algos/gemm_algos.csv");
    cr_assert(csv, "no gemm_algos.csv");
    const char header[] = "device,m,n,k,batch,ta,tb,algo_id,tile,tile_id,stages_id,splitk,"
                          "reduction,swizzle,cluster\n";
    cr_expect(!strncmp(csv, header, sizeof header - 1), "header:\n%.200s", csv);
    cr_expect(strstr(csv, "\n\"tailsim CPU emulator\",8192,8192,8192,1,0,1,-1,emu,0,0,1,0,0,0\n"),
              "no gemm_peak row:\n%.400s", csv);
    int rows = 0, fake = 0;
    for (const char *p = strchr(csv, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        rows++;
        const char *e = strchr(p + 1, '\n');
        const char *t = strstr(p + 1, ",-1,emu,");
        fake += t && (!e || t < e);
    }
    cr_expect_eq(rows, 36, "%d rows", rows);
    cr_expect_eq(fake, rows, "%d of %d rows are the emulator's fake configuration", fake, rows);
    free(csv);
    cr_expect_neq(access("build/test_emu_algos/calib.csv", F_OK), 0, "calib.csv written");
}
