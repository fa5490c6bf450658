/*
 * The validation program's commands that must work without a GPU: confirm
 * prints tailsim's predictions for its mini rollout and exits 77 (skipped)
 * when no device is present; with a device it must exit 0 or 1 (targets met
 * or not), never 2.  Skips when nvcc was not found (no tailsim-validate).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

Test(validate, confirm_predicts_without_a_gpu, .timeout = 600)
{
    if (access("build/tailsim-validate", X_OK) != 0)
        cr_skip_test("build/tailsim-validate not built (no nvcc)");
    FILE *p = popen("build/tailsim-validate confirm --responses 48 --max-len 2048 2>&1", "r");
    cr_assert_not_null(p);
    char buf[8192] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    int st = pclose(p);
    cr_assert(WIFEXITED(st));
    int rc = WEXITSTATUS(st);
    cr_assert(rc == 77 || rc == 0 || rc == 1, "exit %d: %s", rc, buf);
    cr_assert(strstr(buf, "predicted: baseline"), "%s", buf);
    cr_assert(strstr(buf, "speedup"), "%s", buf);
    if (rc == 77)
        cr_assert(strstr(buf, "no CUDA device"), "%s", buf);
}

Test(validate, confirm_rejects_bad_flags)
{
    if (access("build/tailsim-validate", X_OK) != 0)
        cr_skip_test("build/tailsim-validate not built (no nvcc)");
    int st = system("build/tailsim-validate confirm --responses 0 >/dev/null 2>&1");
    cr_assert(WIFEXITED(st));
    cr_assert_eq(WEXITSTATUS(st), 2);
    st = system("build/tailsim-validate confirm --trace build/no-such-trace.jsonl >/dev/null 2>&1");
    cr_assert_eq(WEXITSTATUS(st), 2);
}
