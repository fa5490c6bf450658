/*
 * Output safety (issue 21): tailsim replaces nothing but a regular file it
 * may write, creates its temporaries exclusively, and removes them when a
 * signal kills it (common/util.c: ts_output_check, ts_tmp_*, ts_atomic_*).
 *
 * Every case works in a fresh temporary directory: the targets that must be
 * refused (a symbolic link, a FIFO, a directory, a read-only file) are made
 * there, and the one system file involved, /dev/null, is only checked or
 * opened (an open that wrongly succeeds is aborted, never committed, so the
 * test cannot replace it).  The CLI cases run build/tailsim (trace gen, the
 * fitted INI of `calib check -o` through fit_write_ini, report, paper); the
 * figures are drawn by a fake gnuplot placed first on PATH that writes its
 * output file and, for the signal cases, then blocks on its stdin until the
 * test closes it, so the temporaries are there when the signal is sent and
 * no real gnuplot is needed.  Nothing here asserts a time.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "models/fit.h"
#include "models/hw.h"
#include "reports/report.h"
#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "atomic");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(safety_atomic, .init = setup, .fini = teardown);

/* dir/name into buf. */
static const char *in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* The whole (small) file into buf; "" when it cannot be read. */
static const char *slurp(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return buf;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = 0;
    fclose(f);
    return buf;
}

/* Asserts that path is still a symbolic link and that the file it points
 * to still holds "victim\n". */
static void expect_link_intact(const char *link, const char *victim)
{
    struct stat st;
    char buf[64];
    cr_assert_eq(lstat(link, &st), 0, "%s is gone", link);
    cr_expect(S_ISLNK(st.st_mode), "%s was replaced", link);
    cr_expect_str_eq(slurp(victim, buf, sizeof buf), "victim\n", "%s was written through", victim);
}

/* dir/victim holding "victim\n" and dir/<link> pointing to it. */
static void make_link(const char *link, char *victim, size_t n)
{
    put(in(victim, n, "victim"), "victim\n");
    char p[512];
    cr_assert_eq(symlink(victim, in(p, sizeof p, link)), 0);
}

/* Number of temporaries left under root (recursively): names holding
 * ".tmp." or starting with ".gnuplot" (the old log's name). */
static int leftovers(const char *root, char *first, size_t n)
{
    DIR *d = opendir(root);
    if (!d)
        return 0;
    int count = 0;
    struct dirent *de;
    char p[1024];
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", root, de->d_name);
        if (strstr(de->d_name, ".tmp.") || !strncmp(de->d_name, ".gnuplot", 8)) {
            if (!count && first)
                snprintf(first, n, "%s", p);
            count++;
        }
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            count += leftovers(p, count ? NULL : first, n);
    }
    closedir(d);
    return count;
}

/* Writes dir/bin/gnuplot and returns dir/bin.  The fake writes "x" to its
 * output ($5) and a line to stderr; when late, it first writes its pid to
 * dir/gnuplot.pid and waits for EOF on stdin, so that it writes its output
 * only after the test has killed tailsim (as a real gnuplot still starting
 * would), unless it was killed first. */
static const char *fake_gnuplot(int late, char *bin, size_t n)
{
    char p[512], script[1024];
    cr_assert_eq(mkdir(in(bin, n, "bin"), 0755), 0);
    snprintf(p, sizeof p, "%s/gnuplot", bin);
    if (late)
        snprintf(script, sizeof script,
                 "#!/bin/sh\necho $$ > '%s/gnuplot.pid'\ncat >/dev/null\nprintf x > \"$5\"\n"
                 "echo fake gnuplot >&2\n",
                 dir);
    else
        snprintf(script, sizeof script, "#!/bin/sh\nprintf x > \"$5\"\necho fake gnuplot >&2\n");
    put(p, script);
    cr_assert_eq(chmod(p, 0755), 0);
    return bin;
}

/* 1 when process pid has ended (gone, or a zombie nobody has reaped yet). */
static int ended(long pid)
{
    char p[64], buf[512];
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    slurp(p, buf, sizeof buf);
    const char *close_paren = strrchr(buf, ')');
    return !buf[0] || (close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z');
}

/* Runs cmd through the shell with stderr into err (n bytes); returns the
 * exit status (-1 when it did not exit). */
static int run_cli(const char *cmd, char *err, size_t n)
{
    char full[4096], path[512];
    snprintf(full, sizeof full, "%s >%s/cli.out 2>%s/cli.err </dev/null", cmd, dir, dir);
    int st = system(full);
    slurp(in(path, sizeof path, "cli.err"), err, n);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- the target ------------------------------------------------------------ */

/* A device node is refused by the check and by ts_atomic_open (which, had it
 * succeeded, would only have made a temporary: it is aborted, not renamed). */
Test(safety_atomic, dev_null_is_refused)
{
    ts_err e = {{0}};
    cr_expect_eq(ts_output_check("/dev/null", &e), -1);
    cr_expect(strstr(e.msg, "/dev/null") && strstr(e.msg, "not a regular file"), "%s", e.msg);
    ts_atomic a;
    e.msg[0] = 0;
    int rc = ts_atomic_open(&a, "/dev/null", &e);
    if (rc == 0)
        ts_atomic_abort(&a);
    cr_expect_eq(rc, -1, "ts_atomic_open accepted /dev/null");
    cr_expect(strstr(e.msg, "/dev/null") && strstr(e.msg, "character device"), "%s", e.msg);
    cr_expect_eq(ts_output_check(dir, &e), -1);
    cr_expect(strstr(e.msg, "a directory"), "%s", e.msg);
    char p[512];
    cr_expect_eq(ts_output_check(in(p, sizeof p, "absent.csv"), &e), 0);
}

/* A symbolic link is refused, not followed and not replaced. */
Test(safety_atomic, symlink_is_refused)
{
    char link[512], victim[512];
    make_link("link.csv", victim, sizeof victim);
    in(link, sizeof link, "link.csv");
    ts_err e = {{0}};
    ts_atomic a;
    int rc = ts_atomic_open(&a, link, &e);
    if (rc == 0) {
        fputs("new\n", a.f);
        ts_atomic_commit(&a, &e);
    }
    cr_expect_eq(rc, -1, "a symbolic link was accepted");
    cr_expect(strstr(e.msg, link) && strstr(e.msg, "symbolic link"), "%s", e.msg);
    expect_link_intact(link, victim);
    cr_expect_eq(leftovers(dir, NULL, 0), 0);
}

/* A FIFO and a directory are refused and stay what they are. */
Test(safety_atomic, fifo_and_directory_are_refused)
{
    char fifo[512], sub[512];
    cr_assert_eq(mkfifo(in(fifo, sizeof fifo, "fifo"), 0644), 0);
    cr_assert_eq(mkdir(in(sub, sizeof sub, "sub"), 0755), 0);
    const char *targets[] = {fifo, sub}, *kinds[] = {"a FIFO", "a directory"};
    for (int i = 0; i < 2; i++) {
        ts_err e = {{0}};
        ts_atomic a;
        int rc = ts_atomic_open(&a, targets[i], &e);
        if (rc == 0) {
            fputs("new\n", a.f);
            ts_atomic_commit(&a, &e);
        }
        cr_expect_eq(rc, -1, "%s was accepted", targets[i]);
        cr_expect(strstr(e.msg, targets[i]) && strstr(e.msg, "not a regular file") &&
                      strstr(e.msg, kinds[i]),
                  "%s", e.msg);
    }
    struct stat st;
    cr_expect(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    cr_expect(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode), "the directory was replaced");
    cr_expect_eq(leftovers(dir, NULL, 0), 0);
}

/* A file without write permission is refused, also as root (no write bit
 * at all), and keeps its content and mode. */
Test(safety_atomic, read_only_file_is_refused)
{
    char ro[512], buf[64];
    put(in(ro, sizeof ro, "ro.csv"), "old\n");
    cr_assert_eq(chmod(ro, 0444), 0);
    ts_err e = {{0}};
    ts_atomic a;
    int rc = ts_atomic_open(&a, ro, &e);
    if (rc == 0) {
        fputs("new\n", a.f);
        ts_atomic_commit(&a, &e);
    }
    cr_expect_eq(rc, -1, "a read-only file was accepted");
    cr_expect(strstr(e.msg, ro) && strstr(e.msg, "not writable"), "%s", e.msg);
    cr_expect_str_eq(slurp(ro, buf, sizeof buf), "old\n");
    struct stat st;
    cr_expect(stat(ro, &st) == 0 && (st.st_mode & 0777) == 0444);
}

/* Another user's file that we may not write is refused even in a directory
 * where we may create files (rename would replace it).  Needs root to make
 * the other user; skipped otherwise (the read-only case covers non-root). */
Test(safety_atomic, other_users_file_is_refused)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to act as another user");
    char f[512], buf[64];
    put(in(f, sizeof f, "root.csv"), "root's\n");
    cr_assert_eq(chmod(f, 0644), 0);
    cr_assert_eq(chmod(dir, 0777), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        ts_err e = {{0}};
        ts_atomic a;
        if (ts_atomic_open(&a, f, &e) == 0) {
            fputs("nobody's\n", a.f);
            ts_atomic_commit(&a, &e);
            _exit(1);
        }
        _exit(strstr(e.msg, f) && strstr(e.msg, "not writable") ? 0 : 2);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "status %#x", st);
    cr_expect_neq(WEXITSTATUS(st), 3, "cannot become user 65534");
    cr_expect_neq(WEXITSTATUS(st), 1, "another user's file was replaced");
    cr_expect_eq(WEXITSTATUS(st), 0, "the message lacks the path or 'not writable'");
    cr_expect_str_eq(slurp(f, buf, sizeof buf), "root's\n");
    cr_expect_eq(leftovers(dir, NULL, 0), 0);
}

/* Replacing a file keeps its permission bits; a new file gets 0666 & ~umask. */
Test(safety_atomic, replacing_keeps_the_mode)
{
    char f[512], g[512], buf[64];
    mode_t old = umask(022);
    put(in(f, sizeof f, "f.csv"), "old\n");
    cr_assert_eq(chmod(f, 0640), 0);
    ts_err e = {{0}};
    ts_atomic a;
    cr_assert_eq(ts_atomic_open(&a, f, &e), 0, "%s", e.msg);
    fputs("new\n", a.f);
    cr_assert_eq(ts_atomic_commit(&a, &e), 0, "%s", e.msg);
    struct stat st;
    cr_assert_eq(stat(f, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0640, "mode %o after the replace", st.st_mode & 0777);
    cr_expect_str_eq(slurp(f, buf, sizeof buf), "new\n");
    umask(077);
    cr_assert_eq(ts_atomic_open(&a, in(g, sizeof g, "g.csv"), &e), 0, "%s", e.msg);
    fputs("g\n", a.f);
    cr_assert_eq(ts_atomic_commit(&a, &e), 0, "%s", e.msg);
    umask(old);
    cr_assert_eq(stat(g, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600, "mode %o of a new file", st.st_mode & 0777);
    cr_expect_eq(leftovers(dir, NULL, 0), 0);
}

/* The temporary is created exclusively: a link planted at its name is not
 * followed, a file there is not truncated, and another name is taken. */
Test(safety_atomic, temporary_is_exclusive)
{
    char victim[512], out[512], planted[600], mine[600], buf[64];
    in(out, sizeof out, "out.csv");
    snprintf(planted, sizeof planted, "%s.tmp.%ld", out, (long)getpid());
    snprintf(mine, sizeof mine, "%s.tmp.%ld.1", out, (long)getpid());
    put(in(victim, sizeof victim, "victim"), "victim\n");
    cr_assert_eq(symlink(victim, planted), 0);
    put(mine, "mine\n");
    ts_err e = {{0}};
    ts_atomic a;
    cr_assert_eq(ts_atomic_open(&a, out, &e), 0, "%s", e.msg);
    cr_expect(strcmp(a.tmp, planted) && strcmp(a.tmp, mine), "reused %s", a.tmp);
    fputs("data\n", a.f);
    cr_assert_eq(ts_atomic_commit(&a, &e), 0, "%s", e.msg);
    expect_link_intact(planted, victim);
    cr_expect_str_eq(slurp(mine, buf, sizeof buf), "mine\n");
    struct stat st;
    cr_expect(lstat(out, &st) == 0 && S_ISREG(st.st_mode), "out.csv is not a regular file");
    cr_expect_str_eq(slurp(out, buf, sizeof buf), "data\n");
}

/* `calib check -o INI` writes through fit_write_ini: a link is refused. */
Test(safety_atomic, fitted_ini_refuses_a_symlink)
{
    char link[512], victim[512];
    make_link("fitted.ini", victim, sizeof victim);
    in(link, sizeof link, "fitted.ini");
    hw_desc hw;
    ts_err e = {{0}};
    cr_assert_eq(hw_load_ini("h200", &hw, &e), 0, "%s", e.msg);
    cr_expect_eq(fit_write_ini(&hw, link, "test", &e), -1, "a symbolic link was accepted");
    cr_expect(strstr(e.msg, link) && strstr(e.msg, "symbolic link"), "%s", e.msg);
    expect_link_intact(link, victim);
}

/* The CLI: `trace gen -o` refuses each kind of target with exit 1 and a
 * message naming the path and why, and leaves the target as it was. */
Test(safety_atomic, trace_gen_refuses_targets, .timeout = 60)
{
    char link[512], victim[512], fifo[512], sub[512], ro[512], err[4096], cmd[2048], buf[64];
    make_link("link.csv", victim, sizeof victim);
    in(link, sizeof link, "link.csv");
    cr_assert_eq(mkfifo(in(fifo, sizeof fifo, "fifo.csv"), 0644), 0);
    cr_assert_eq(mkdir(in(sub, sizeof sub, "dir.csv"), 0755), 0);
    put(in(ro, sizeof ro, "ro.csv"), "old\n");
    cr_assert_eq(chmod(ro, 0444), 0);
    const char *targets[] = {link, fifo, sub, ro};
    const char *why[] = {"a symbolic link", "not a regular file (a FIFO)",
                         "not a regular file (a directory)", "not writable"};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd,
                 "build/tailsim trace gen --dist fixed:5 --prompts 2 --group 2 --seed 1 -o %s",
                 targets[i]);
        int rc = run_cli(cmd, err, sizeof err);
        cr_expect_eq(rc, 1, "%s: exit %d; stderr: %s", targets[i], rc, err);
        cr_expect(strstr(err, targets[i]) && strstr(err, why[i]), "%s: stderr: %s", targets[i],
                  err);
    }
    expect_link_intact(link, victim);
    struct stat st;
    cr_expect(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    cr_expect(lstat(sub, &st) == 0 && S_ISDIR(st.st_mode), "the directory was replaced");
    cr_expect_str_eq(slurp(ro, buf, sizeof buf), "old\n");
    cr_expect_eq(leftovers(dir, NULL, 0), 0);
}

/* A report's image goes through the same check: gantt.png as a link to a
 * file is refused (exit 1), the link and the file stay as they were. */
Test(safety_atomic, report_image_refuses_a_symlink, .timeout = 120)
{
    char victim[512], rep[512], link[600], bin[512], err[4096], cmd[2048], first[1024];
    put(in(victim, sizeof victim, "victim"), "victim\n");
    cr_assert_eq(mkdir(in(rep, sizeof rep, "rep"), 0755), 0);
    snprintf(link, sizeof link, "%s/gantt.png", rep);
    cr_assert_eq(symlink(victim, link), 0);
    fake_gnuplot(0, bin, sizeof bin);
    snprintf(cmd, sizeof cmd, "build/tailsim rollout qwen7b-64gpu --set trace.prompts=8 --db %s/r.db",
             dir);
    int rc = run_cli(cmd, err, sizeof err);
    cr_assert_eq(rc, 0, "rollout: %s", err);
    snprintf(cmd, sizeof cmd, "PATH='%s':\"$PATH\" build/tailsim report --db %s/r.db --run 1 -o %s",
             bin, dir, rep);
    rc = run_cli(cmd, err, sizeof err);
    cr_expect_eq(rc, 1, "exit %d; stderr: %s", rc, err);
    cr_expect(strstr(err, link) && strstr(err, "symbolic link"), "stderr: %s", err);
    expect_link_intact(link, victim);
    cr_expect_eq(leftovers(dir, first, sizeof first), 0, "left %s", first);
}

/* gnuplot's stderr log is an exclusive temporary too: links planted at the
 * old and the new log names are not followed (the old code truncated the
 * file behind the link). */
Test(safety_atomic, gnuplot_log_is_exclusive)
{
    char victim[512], bin[512], path[4096], png[512], planted[2][600], buf[64];
    put(in(victim, sizeof victim, "victim"), "victim\n");
    snprintf(planted[0], sizeof planted[0], "%s/.gnuplot.%ld.log", dir, (long)getpid());
    snprintf(planted[1], sizeof planted[1], "%s/.gnuplot.tmp.%ld", dir, (long)getpid());
    for (int i = 0; i < 2; i++)
        cr_assert_eq(symlink(victim, planted[i]), 0);
    fake_gnuplot(0, bin, sizeof bin);
    const char *old = getenv("PATH");
    snprintf(path, sizeof path, "%s:%s", bin, old ? old : "/usr/bin:/bin");
    cr_assert_eq(setenv("PATH", path, 1), 0);
    ts_err e = {{0}};
    cr_expect_eq(report_gnuplot("none.gp", "none.dat", in(png, sizeof png, "img.png"), "t", dir, &e),
                 0, "%s", e.msg);
    cr_expect_str_eq(slurp(png, buf, sizeof buf), "x");
    for (int i = 0; i < 2; i++)
        expect_link_intact(planted[i], victim);
}

/* ---- signals ----------------------------------------------------------------- */

static int sigs[] = {SIGINT, SIGTERM, SIGHUP};

/* Puts sig's action back to the default and unblocks it (a test runner or
 * a background shell may have left it ignored, which exec keeps). */
static void default_signals(void)
{
    sigset_t s;
    sigemptyset(&s);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        signal(sigs[i], SIG_DFL);
        sigaddset(&s, sigs[i]);
    }
    sigprocmask(SIG_UNBLOCK, &s, NULL);
}

ParameterizedTestParameters(safety_atomic, signal_removes_temporaries)
{
    return cr_make_param_array(int, sigs, sizeof sigs / sizeof sigs[0]);
}

/* A process killed by the signal while writing leaves no temporary and dies
 * of that signal. */
ParameterizedTest(int *sig, safety_atomic, signal_removes_temporaries)
{
    char out[512], first[1024];
    in(out, sizeof out, "out.csv");
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        default_signals();
        ts_err e = {{0}};
        ts_atomic a;
        if (ts_atomic_open(&a, out, &e))
            _exit(3);
        fputs("half\n", a.f);
        fflush(a.f);
        kill(getpid(), *sig);
        _exit(4);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == *sig, "status %#x, expected signal %d", st,
              *sig);
    cr_expect_eq(leftovers(dir, first, sizeof first), 0, "left %s", first);
    cr_expect_neq(access(out, F_OK), 0, "out.csv was written");
}

/* A forked child (a sweep worker) killed by a signal removes only its own
 * temporaries, never its parent's. */
Test(safety_atomic, child_leaves_parent_temporaries)
{
    char out[512], buf[64];
    default_signals();
    ts_err e = {{0}};
    ts_atomic a;
    cr_assert_eq(ts_atomic_open(&a, in(out, sizeof out, "p.csv"), &e), 0, "%s", e.msg);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        kill(getpid(), SIGTERM);
        _exit(4);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM, "status %#x", st);
    cr_expect_eq(access(a.tmp, F_OK), 0, "the child removed the parent's %s", a.tmp);
    fputs("parent\n", a.f);
    cr_assert_eq(ts_atomic_commit(&a, &e), 0, "%s", e.msg);
    cr_expect_str_eq(slurp(out, buf, sizeof buf), "parent\n");
}

static int cli_sigs[] = {SIGINT, SIGTERM};

ParameterizedTestParameters(safety_atomic, paper_interrupted)
{
    return cr_make_param_array(int, cli_sigs, sizeof cli_sigs / sizeof cli_sigs[0]);
}

/* `tailsim paper -o DIR` interrupted while drawing (the image's temporary
 * and gnuplot's log exist; the fake gnuplot waits, to write the image only
 * after tailsim is gone) dies of the signal and leaves no temporary (image or
 * log) in DIR: gnuplot was killed before the temporaries were removed. */
ParameterizedTest(int *sig, safety_atomic, paper_interrupted, .timeout = 180)
{
    char bin[512], out[512], path[4096], first[1024], log[512];
    fake_gnuplot(1, bin, sizeof bin);
    in(out, sizeof out, "out");
    in(log, sizeof log, "paper.log");
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    const char *old = getenv("PATH");
    snprintf(path, sizeof path, "%s:%s", bin, old ? old : "/usr/bin:/bin");
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        default_signals();
        dup2(fd[0], STDIN_FILENO);
        close(fd[0]);
        close(fd[1]);
        if (!freopen(log, "w", stdout) || dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
            _exit(126);
        setenv("PATH", path, 1);
        execl("build/tailsim", "tailsim", "paper", "--quick", "-o", out, (char *)NULL);
        _exit(127);
    }
    close(fd[0]);
    /* wait (up to about 150 s) for the first figure's gnuplot to start */
    char pidfile[512], text[64];
    in(pidfile, sizeof pidfile, "gnuplot.pid");
    int st = 0, gone = 0;
    long gp = 0;
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 15000 && !gp && !gone; i++) {
        gp = atol(slurp(pidfile, text, sizeof text));
        gone = !gp && waitpid(pid, &st, WNOHANG) == pid;
        if (!gp && !gone)
            nanosleep(&nap, NULL);
    }
    if (!gp) {
        if (!gone) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
        close(fd[1]);
        cr_assert_fail("gnuplot was not started (%s)",
                       gone ? "tailsim paper exited first; see its log" : "timed out");
    }
    int before = leftovers(out, NULL, 0);
    cr_assert_eq(kill(pid, *sig), 0);
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    close(fd[1]);
    cr_expect_gt(before, 0, "no temporary under %s while gnuplot ran", out);
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == *sig, "status %#x, expected signal %d", st,
              *sig);
    /* the fake gnuplot, if still alive, now writes its image: wait for it */
    for (int i = 0; i < 1000 && !ended(gp); i++)
        nanosleep(&nap, NULL);
    cr_expect(ended(gp), "the fake gnuplot %ld still runs", gp);
    cr_expect_eq(leftovers(out, first, sizeof first), 0, "left %s", first);
}
