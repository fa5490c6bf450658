/*
 * The same core options everywhere, and progress on long work (issue 17,
 * items 5 and 6).  Item 5: plan --trace FILE gives the numbers of
 * plan --vary trace.file=FILE (one value), plan --seed S those of
 * --vary trace.seed=S, memory and specdec --seed S those of
 * --set trace.seed=S (and differ from the default where the seed matters),
 * dcp -o DIR writes the run's report and leaves its --json unchanged.
 * Item 6: under a pseudo-terminal for stderr (script(1) from bsdutils; the
 * tests skip without it) compare, rlstep --steps N and dcp draw a progress
 * line on the terminal, and their --json stdout is byte-identical to a run
 * whose stderr is not a terminal (which prints no progress at all).  Each
 * test has a fresh temporary directory.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers.h"

static char tmpdir[256];

static void setup(void)
{
    tmpdir_create(tmpdir, sizeof tmpdir, "safety-prog");
}

static void teardown(void)
{
    tmpdir_remove(tmpdir);
}

TestSuite(safety_prog, .init = setup, .fini = teardown, .timeout = 240);

#define T "build/tailsim "

/* The policy suites' small scenario as tmpdir/s.ini, and a generated trace
 * (16 prompts x 4, a lognormal other than the scenario's) as tmpdir/t.jsonl. */
static void small_inputs(void)
{
    char p[512], cmd[1024];
    snprintf(p, sizeof p, "%s/s.ini", tmpdir);
    write_aside(p, POLICY_SCENARIO_INI);
    snprintf(cmd, sizeof cmd,
             T "trace gen --dist lognormal:900:0.8 --prompts 16 --group 4 --seed 5 -o %s/t.jsonl "
               ">/dev/null",
             tmpdir);
    cr_assert_eq(system(cmd), 0);
}

/* stdout of the command printf(fmt, ...) (run_capture: fails the test on a
 * non-zero exit); free it. */
static char *capture(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return run_capture(cmd);
}

Test(safety_prog, plan_trace_is_vary_trace_file)
{
    small_inputs();
    char *tr = capture(T "plan %s/s.ini --gpus 8 --tp 1,2 --trace %s/t.jsonl --json 2>/dev/null",
                       tmpdir, tmpdir);
    char *vary = capture(T "plan %s/s.ini --gpus 8 --tp 1,2 --vary trace.file=%s/t.jsonl --json "
                           "2>/dev/null", tmpdir, tmpdir);
    char *plain = capture(T "plan %s/s.ini --gpus 8 --tp 1,2 --json 2>/dev/null", tmpdir);
    cr_expect_str_eq(tr, vary, "plan --trace FILE must give plan --vary trace.file=FILE's numbers");
    cr_expect_str_neq(tr, plain, "plan --trace must take effect");
    cr_expect_not_null(strstr(tr, "\"step_s\""));
    free(tr);
    free(vary);
    free(plain);
}

Test(safety_prog, plan_trace_relative_to_cwd)
{
    small_inputs();
    /* --trace is relative to the current directory (as in rlstep), not to the
     * scenario's directory as trace.file in a grid is */
    char *rel = capture("d=$PWD; cd %s && $d/" T "plan s.ini --gpus 8 --tp 2 --trace t.jsonl "
                        "--json 2>/dev/null", tmpdir);
    char *abs = capture(T "plan %s/s.ini --gpus 8 --tp 2 --trace %s/t.jsonl --json 2>/dev/null",
                        tmpdir, tmpdir);
    const char *a = strstr(rel, "\"feasible\""), *b = strstr(abs, "\"feasible\"");
    cr_assert(a && b);
    cr_expect_str_eq(a, b); /* the scenario's name as given differs */
    free(rel);
    free(abs);
}

Test(safety_prog, plan_seed_is_vary_trace_seed)
{
    small_inputs();
    char *sd = capture(T "plan %s/s.ini --gpus 8 --tp 2 --seed 9 --json 2>/dev/null", tmpdir);
    char *vary = capture(T "plan %s/s.ini --gpus 8 --tp 2 --vary trace.seed=9 --json 2>/dev/null",
                         tmpdir);
    char *plain = capture(T "plan %s/s.ini --gpus 8 --tp 2 --json 2>/dev/null", tmpdir);
    cr_expect_str_eq(sd, vary);
    cr_expect_str_neq(sd, plain, "plan --seed must take effect");
    free(sd);
    free(vary);
    free(plain);
}

Test(safety_prog, memory_seed_is_set_trace_seed)
{
    small_inputs();
    const char *few = "--set trace.prompts=2 --set trace.group=2"; /* the longest varies */
    char *sd = capture(T "memory %s/s.ini %s --seed 9 --json", tmpdir, few);
    char *set = capture(T "memory %s/s.ini %s --set trace.seed=9 --json", tmpdir, few);
    char *plain = capture(T "memory %s/s.ini %s --json", tmpdir, few);
    cr_expect_str_eq(sd, set);
    cr_expect_str_neq(sd, plain, "memory --seed must take effect");
    free(sd);
    free(set);
    free(plain);
}

Test(safety_prog, specdec_seed_is_set_trace_seed)
{
    small_inputs();
    const char *ng = "--set spec.ngram=true --batch 1,8 --ctx 2048";
    char *sd = capture(T "specdec %s/s.ini %s --seed 9 --json", tmpdir, ng);
    char *set = capture(T "specdec %s/s.ini %s --set trace.seed=9 --json", tmpdir, ng);
    char *plain = capture(T "specdec %s/s.ini %s --json", tmpdir, ng);
    cr_expect_str_eq(sd, set);
    cr_expect_str_neq(sd, plain, "specdec --seed must take effect");
    free(sd);
    free(set);
    free(plain);
}

Test(safety_prog, dcp_o_writes_report)
{
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char *with = capture(T "dcp dcp-llama8b-32xh200 --strategies packed,dcp-inter --no-wall "
                           "--json -o %s/out 2>/dev/null", tmpdir);
    char *without = capture(T "dcp dcp-llama8b-32xh200 --strategies packed,dcp-inter --no-wall "
                              "--json 2>/dev/null");
    cr_expect_str_eq(with, without, "-o must not change dcp's --json");
    const char *files[] = {"index.html", "report.md", "dcp.md"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/out/%s", tmpdir, files[i]);
        cr_expect_eq(access(p, R_OK), 0, "dcp -o did not write %s", files[i]);
    }
    free(with);
    free(without);
}

/* Skips the test when script(1) (bsdutils) is not there to give a command a
 * pseudo-terminal. */
static void need_script(void)
{
    if (system("command -v script >/dev/null 2>&1") != 0)
        cr_skip_test("script(1) not found: no pseudo-terminal to test progress on");
}

/* Runs `args` (a tailsim command line, after "build/tailsim ") twice with
 * stdout into files: once under script(1), stderr a pseudo-terminal (what
 * the terminal showed into *tty: free it), once with stderr a file (into
 * *err: free it).  Fails the test unless both stdouts are byte-identical. */
static void run_tty_and_not(const char *args, char **tty, char **err)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "d=$PWD; cd %s && script -qec \"$d/" T "%s > tty.out\" /dev/null", tmpdir, args);
    *tty = run_capture(cmd);
    snprintf(cmd, sizeof cmd, "d=$PWD; cd %s && $d/" T "%s > plain.out 2> plain.err", tmpdir,
             args);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "cmp %s/tty.out %s/plain.out", tmpdir, tmpdir);
    cr_expect_eq(system(cmd), 0, "stdout differs with stderr on a terminal: %s", args);
    snprintf(cmd, sizeof cmd, "cat %s/plain.err", tmpdir);
    *err = run_capture(cmd);
}

Test(safety_prog, compare_progress_on_a_terminal_only)
{
    need_script();
    small_inputs();
    char *tty, *err;
    run_tty_and_not("compare s.ini --policies verl,tlt --steps 2 --bootstrap 5 --json", &tty,
                    &err);
    cr_expect_not_null(strstr(tty, "\r\033[Ktailsim compare: bootstrap 10/10 (100%)"),
                       "no bootstrap progress on the terminal: %s", tty);
    cr_expect_not_null(strstr(tty, "tailsim compare: verl 0/2"), "no per-policy progress");
    cr_expect_not_null(strstr(tty, "tailsim compare: tlt 2/2 (100%)"), "%s", tty);
    cr_expect_null(strstr(err, "tailsim compare: "), "progress off a terminal: %s", err);
    cr_expect_null(strchr(err, '\r'));
    free(tty);
    free(err);
}

Test(safety_prog, rlstep_steps_progress)
{
    need_script();
    small_inputs();
    char *tty, *err;
    run_tty_and_not("rlstep s.ini --steps 3 --json --no-wall", &tty, &err);
    cr_expect_not_null(strstr(tty, "\r\033[Ktailsim rlstep: step 3/3 (100%)"), "%s", tty);
    cr_expect_null(strstr(err, "tailsim rlstep: step"), "%s", err);
    free(tty);
    free(err);
    /* one step is quick: no line */
    run_tty_and_not("rollout s.ini --json --no-wall", &tty, &err);
    cr_expect_null(strstr(tty, "tailsim rollout: step"), "%s", tty);
    free(tty);
    free(err);
}

Test(safety_prog, dcp_progress)
{
    need_script();
    char *tty, *err;
    run_tty_and_not("dcp " "$d/scenarios/dcp-llama8b-32xh200.ini --strategies packed,dcp-inter "
                    "--no-wall --json", &tty, &err);
    cr_expect_not_null(strstr(tty, "\r\033[Ktailsim dcp: bucket 0/3"), "%s", tty);
    cr_expect_not_null(strstr(tty, "tailsim dcp: dcp-inter 3/3 (100%)"), "%s", tty);
    cr_expect_null(strstr(err, "tailsim dcp: "), "%s", err);
    free(tty);
    free(err);
}
