/*
 * Scale: a 1,000,000-response trace loads and simulates with memory that
 * grows at most linearly.  Runs the CLI on generated traces of 100,000 and
 * 1,000,000 responses (1,024 single-GPU replicas) and compares the peak
 * resident memory of the two processes (getrusage of the child): ten times
 * the responses may cost at most ~10x the memory beyond a fixed base, and
 * the bytes-per-response figure of docs/speed.md must hold.
 */
#define _DEFAULT_SOURCE /* wait4 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs argv, returns its peak RSS in bytes (or -1 on failure). */
static double peak_rss(char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return (double)ru.ru_maxrss * 1024.0;
}

static void gen(int prompts, const char *out)
{
    char p[32];
    snprintf(p, sizeof p, "%d", prompts);
    char *const argv[] = {"build/tailsim", "trace", "gen", "--dist", "lognormal:512:1.0", "--prompts", p,
                          "--group", "8", "--cap", "8192", "--seed", "3", "-o", (char *)out, NULL};
    cr_assert_geq(peak_rss(argv), 0, "trace gen failed");
}

static double simulate(const char *trace)
{
    char *const argv[] = {"build/tailsim", "rollout", "qwen7b-64gpu", "--trace", (char *)trace,
                          "--set", "cluster.gpus=1024", "--set", "rollout.tp=1", "--json", "--no-wall", NULL};
    return peak_rss(argv);
}

Test(scale, million_responses_linear_memory, .timeout = 300)
{
    gen(12500, "build/scale-100k.csv");
    gen(125000, "build/scale-1m.csv");
    double small = simulate("build/scale-100k.csv");
    double big = simulate("build/scale-1m.csv");
    cr_assert_gt(small, 0, "100k-response run failed");
    cr_assert_gt(big, 0, "1M-response run failed");
    double per_resp = (big - small) / 900000.0;
    /* docs/speed.md: about 110 bytes per response beyond a fixed base (AddressSanitizer
     * builds add redzones around every allocation) */
#ifdef __SANITIZE_ADDRESS__
    const double bound = 600.0;
#else
    const double bound = 200.0;
#endif
    cr_assert_lt(per_resp, bound, "%.0f bytes per response", per_resp);
    cr_assert_lt(big, 12.0 * small, "1M: %.0f MB, 100k: %.0f MB", big / 1e6, small / 1e6);
    remove("build/scale-100k.csv");
    remove("build/scale-1m.csv");
}
