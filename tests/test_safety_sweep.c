/*
 * An interrupted sweep (issue 21) must end cleanly, which needs the fatal
 * signals deferred while the collector finishes.  This suite checks the
 * deferral (common/util.c: ts_signal_defer, ts_signal_pending,
 * ts_signal_resume), each case in a forked child that signals itself: the
 * signal is recorded, a blocking call fails with EINTR, resuming does the
 * handler's cleanup and dies of it, a forked child is never deferred, an
 * ignored signal stays ignored.
 */
#define _GNU_SOURCE /* ppoll */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "sweepsig");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(safety_sweep, .init = setup, .fini = teardown);

/* dir/name into buf. */
static const char *in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static int fatal_sigs[] = {SIGINT, SIGTERM, SIGHUP};
#define N_FATAL (int)(sizeof fatal_sigs / sizeof fatal_sigs[0])

/* Puts the three signals' actions back to the default and unblocks them (a
 * test runner or a background shell may have left them ignored, which exec
 * keeps). */
static void default_signals(void)
{
    sigset_t s;
    sigemptyset(&s);
    for (int i = 0; i < N_FATAL; i++) {
        signal(fatal_sigs[i], SIG_DFL);
        sigaddset(&s, fatal_sigs[i]);
    }
    sigprocmask(SIG_UNBLOCK, &s, NULL);
}

/* Waits for child pid; returns its wait status. */
static int reap(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        cr_assert_eq(errno, EINTR, "waitpid: %s", strerror(errno));
    return st;
}

static void expect_killed_by(int st, int sig)
{
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == sig,
              "status %#x (exit %d, signal %d), expected death by signal %d", st,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0, sig);
}

/* ------------------------------------------------------------------------ */
/* The deferral (common/util.c)                                              */

ParameterizedTestParameters(safety_sweep, deferred_signal_waits_for_resume)
{
    return cr_make_param_array(int, fatal_sigs, N_FATAL);
}

/* A deferred signal is recorded (the first of several), the process goes on
 * (it says so through a pipe), and ts_signal_resume() then removes the
 * temporaries and dies of that first signal. */
ParameterizedTest(int *sig, safety_sweep, deferred_signal_waits_for_resume)
{
    char out[512];
    in(out, sizeof out, "out.csv");
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        default_signals();
        ts_err e = {{0}};
        ts_atomic a;
        if (ts_atomic_open(&a, out, &e))
            _exit(3);
        ts_signal_defer();
        if (ts_signal_pending() != 0)
            _exit(5);
        kill(getpid(), *sig);
        kill(getpid(), *sig == SIGTERM ? SIGINT : SIGTERM); /* a second: the first stays */
        if (ts_signal_pending() != *sig)
            _exit(6);
        fputs("half\n", a.f);
        fflush(a.f);
        if (write(fd[1], "alive", 5) != 5)
            _exit(7);
        ts_signal_resume();
        _exit(4);
    }
    close(fd[1]);
    char buf[8] = {0};
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int st = reap(pid);
    cr_expect_eq(n, 5, "the deferred process did not go on after the signal");
    expect_killed_by(st, *sig);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)pid);
    cr_expect_neq(access(tmp, F_OK), 0, "resume left the temporary %s", tmp);
    cr_expect_neq(access(out, F_OK), 0, "out.csv was written");
}

/* Without a signal, resume returns and ends the deferral: the next signal
 * kills at once, with the normal cleanup. */
Test(safety_sweep, resume_without_signal_returns)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        default_signals();
        ts_signal_defer();
        ts_signal_defer(); /* no nesting: still one deferral */
        ts_signal_resume();
        if (ts_signal_pending() != 0)
            _exit(5);
        kill(getpid(), SIGTERM);
        _exit(4);
    }
    expect_killed_by(reap(pid), SIGTERM);
}

/* A signal that arrives while blocked makes a blocking call (ppoll, with the
 * signal unblocked for its duration) fail with EINTR once the handler has
 * recorded it: what the sweep's collector relies on. */
Test(safety_sweep, deferred_signal_interrupts_a_blocking_call)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        default_signals();
        int fd[2];
        if (pipe(fd))
            _exit(3);
        ts_signal_defer();
        sigset_t block, during;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigprocmask(SIG_BLOCK, &block, &during);
        kill(getpid(), SIGINT); /* pending, blocked */
        if (ts_signal_pending() != 0)
            _exit(5);
        sigdelset(&during, SIGINT);
        struct pollfd p = {.fd = fd[0], .events = POLLIN};
        int rc = ppoll(&p, 1, NULL, &during); /* nothing to read: only the signal ends it */
        if (rc != -1 || errno != EINTR)
            _exit(6);
        if (ts_signal_pending() != SIGINT)
            _exit(7);
        ts_signal_resume();
        _exit(4);
    }
    expect_killed_by(reap(pid), SIGINT);
}

/* A child forked by a deferring process (a sweep worker) is not deferred:
 * it dies of SIGTERM at once and sees no pending signal of its parent's. */
Test(safety_sweep, forked_child_is_not_deferred)
{
    default_signals();
    ts_signal_defer();
    kill(getpid(), SIGHUP);
    cr_assert_eq(ts_signal_pending(), SIGHUP);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (ts_signal_pending() != 0)
            _exit(5);
        kill(getpid(), SIGTERM);
        _exit(4);
    }
    expect_killed_by(reap(pid), SIGTERM);
    cr_expect_eq(ts_signal_pending(), SIGHUP, "the parent's record changed");
    /* end the test without dying of the recorded SIGHUP */
    signal(SIGHUP, SIG_IGN);
}

/* An ignored signal stays ignored: nothing is recorded, resume returns. */
Test(safety_sweep, ignored_signal_stays_ignored)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        default_signals();
        signal(SIGHUP, SIG_IGN);
        ts_signal_defer();
        kill(getpid(), SIGHUP);
        if (ts_signal_pending() != 0)
            _exit(5);
        ts_signal_resume();
        _exit(0);
    }
    int st = reap(pid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}
