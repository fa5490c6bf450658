/*
 * The CPU emulator of the kernels (emu/, build/tailsim-validate-emu): its own
 * checks pass, one op's selftest passes on it and fails with the op's planted
 * bug absent (that is emu/planted.sh's job in `make kernels-emu`), and
 * `calibrate` refuses it (emulated timings are not GPU timings) with exit 2
 * and a message naming the emulator, writing nothing.  Skips when the
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
}
