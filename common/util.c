/*
 * Helpers shared by every module.  Nothing here allocates except the RNG
 * constructor; all parsing is strict (whole string, range-checked, finite).
 * Output files are written only through ts_atomic_* (see the section below):
 * nothing but a regular file we may write is ever replaced, and the
 * temporaries are exclusive and removed when a signal kills the process,
 * which a caller may defer until it has ended its work (ts_signal_defer()).
 */
#define _POSIX_C_SOURCE 200809L
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int ts_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s)
        return -1;
    while (*end == ' ' || *end == '\t' || *end == '\r')
        end++;
    if (*end)
        return -1;
    if (v < min || v > max)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int ts_parse_double(const char *s, double min, double max, double *out)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v))
        return -1;
    while (*end == ' ' || *end == '\t' || *end == '\r')
        end++;
    if (*end)
        return -1;
    if (v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int ts_parse_bool(const char *s, int *out)
{
    if (!s)
        return -1;
    if (!strcasecmp(s, "true") || !strcmp(s, "1") || !strcasecmp(s, "yes")) {
        *out = 1;
        return 0;
    }
    if (!strcasecmp(s, "false") || !strcmp(s, "0") || !strcasecmp(s, "no")) {
        *out = 0;
        return 0;
    }
    return -1;
}

const char *ts_quote(const char *s, size_t max, char *buf, size_t n)
{
    if (!n)
        return buf;
    size_t o = 0, i = 0;
    for (; s && s[i] && i < max && o + 1 < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        buf[o++] = ch >= 0x20 && ch < 0x7f && ch != '\'' ? (char)ch : '?';
    }
    if (s && s[i])
        for (int k = 0; k < 3 && o + 1 < n; k++)
            buf[o++] = '.';
    buf[o] = 0;
    return buf;
}

static int file_exists(const char *p)
{
    return access(p, R_OK) == 0;
}

const char *ts_data_root(void)
{
    static char root[4096];
    if (root[0])
        return root;
    const char *env = getenv("TAILSIM_DATA");
    if (env && *env) {
        snprintf(root, sizeof root, "%s", env);
        return root;
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0; /* directory of the binary (build/, bench/..., PREFIX/bin) */
            char probe[4200];
            for (int up = 0; up < 3; up++) {
                snprintf(probe, sizeof probe, "%s/models/hw", exe);
                if (file_exists(probe)) { /* the build tree */
                    snprintf(root, sizeof root, "%s", exe);
                    return root;
                }
                snprintf(probe, sizeof probe, "%s/share/tailsim/models/hw", exe);
                if (file_exists(probe) && /* an installed tree (make install), never cut */
                    snprintf(root, sizeof root, "%s/share/tailsim", exe) < (int)sizeof root)
                    return root;
                root[0] = 0;
                slash = strrchr(exe, '/');
                if (!slash)
                    break;
                *slash = 0;
            }
        }
    }
    snprintf(root, sizeof root, ".");
    return root;
}

int ts_find_data(const char *dir, const char *name, const char *ext,
                 char *buf, size_t bufsz, ts_err *e)
{
    size_t nl = strlen(name), el = strlen(ext);
    int is_path = strchr(name, '/') != NULL || (nl > el && !strcmp(name + nl - el, ext));
    if (is_path) {
        if (!file_exists(name))
            return ts_errf(e, "%s: cannot read file", name);
        if (nl >= bufsz) /* never a cut path: it would name another file */
            return ts_errf(e, "%s: path longer than %zu characters", name, bufsz - 1);
        snprintf(buf, bufsz, "%s", name);
        return 0;
    }
    int n = snprintf(buf, bufsz, "%s/%s/%s%s", ts_data_root(), dir, name, ext);
    if (n >= 0 && (size_t)n < bufsz && file_exists(buf))
        return 0;
    char alt[4096];
    n = snprintf(alt, sizeof alt, "%s/%s%s", dir, name, ext);
    if (n >= 0 && (size_t)n < bufsz && (size_t)n < sizeof alt && file_exists(alt)) {
        snprintf(buf, bufsz, "%s", alt);
        return 0;
    }
    /* what the user may pick instead, named as the scenario keys name it */
    const char *what = !strcmp(dir, "models/llm") ? "model"
                       : !strcmp(dir, "models/hw") ? "hardware"
                       : !strcmp(dir, "scenarios") ? "scenario"
                                                   : dir;
    ts_errf(e, "unknown %s '%s' (no file %s/%s/%s%s)", what, name, ts_data_root(), dir, name,
            ext);
    char **names;
    size_t k;
    ts_err le = {{0}};
    if (ts_data_list(dir, ext, &names, &k, &le) == 0 && k > 0) {
        size_t len = strlen(e->msg);
        len += (size_t)snprintf(e->msg + len, sizeof e->msg - len, "; available:");
        for (size_t i = 0; i < k && len < sizeof e->msg; i++)
            len += (size_t)snprintf(e->msg + len, sizeof e->msg - len, "%s %s", i ? "," : "",
                                    names[i]);
        ts_data_list_free(names, k);
        if (strcmp(what, dir) && strcmp(what, "scenario") && len < sizeof e->msg)
            snprintf(e->msg + len, sizeof e->msg - len, " (details: tailsim models)");
    }
    return -1;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void ts_data_list_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

int ts_data_list(const char *dir, const char *ext, char ***names, size_t *n, ts_err *e)
{
    char path[4200];
    *names = NULL;
    *n = 0;
    if (snprintf(path, sizeof path, "%s/%s", ts_data_root(), dir) >= (int)sizeof path)
        return ts_errf(e, "%s: data directory path too long", ts_data_root());
    DIR *d = opendir(path);
    if (!d)
        return ts_errf(e, "%s: cannot read the directory: %s", path, strerror(errno));
    char **v = NULL;
    size_t k = 0, cap = 0, el = strlen(ext);
    struct dirent *ent;
    while ((ent = readdir(d))) {
        const char *nm = ent->d_name;
        size_t nl = strlen(nm);
        if (nm[0] == '.' || nl <= el || strcmp(nm + nl - el, ext))
            continue;
        char file[4600];
        struct stat sb;
        snprintf(file, sizeof file, "%s/%s", path, nm);
        if (stat(file, &sb) || !S_ISREG(sb.st_mode))
            continue;
        if (k == cap) {
            size_t nc = cap ? 2 * cap : 16;
            char **nv = realloc(v, nc * sizeof *nv);
            if (!nv)
                goto oom;
            v = nv, cap = nc;
        }
        if (!(v[k] = malloc(nl - el + 1)))
            goto oom;
        memcpy(v[k], nm, nl - el);
        v[k++][nl - el] = 0;
    }
    closedir(d);
    if (k)
        qsort(v, k, sizeof *v, cmp_names);
    else
        free(v), v = NULL;
    *names = v;
    *n = k;
    return 0;
oom:
    closedir(d);
    ts_data_list_free(v, k);
    return ts_errf(e, "%s: out of memory listing the directory", path);
}

uint64_t ts_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

gsl_rng *ts_rng_new(uint64_t seed, uint64_t stream)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!r)
        return NULL;
    uint64_t s = ts_splitmix64(seed ^ ts_splitmix64(stream + 0x5bd1e995ULL));
    /* mt19937 takes 32 bits of seed: streams are distinct with high
     * probability up to ~10^4 per run, which is all tailsim uses */
    gsl_rng_set(r, (unsigned long)(s & 0xffffffffUL));
    return r;
}

/* ---- output targets, temporary files and atomic replacement ---------------
 *
 * Every output file goes through ts_atomic_*: the target is checked (lstat,
 * never followed), the content goes to a temporary created with O_EXCL beside
 * it, and a rename puts it in place.  The live temporaries sit in a fixed
 * array that the SIGINT/SIGTERM/SIGHUP/SIGPIPE handler walks with
 * async-signal-safe calls only (getpid, kill, waitpid, unlink, signal,
 * raise); the helper
 * programs that write into temporaries (gnuplot) sit in a second array and
 * are killed and reaped first.  Both arrays are changed only with those
 * signals blocked, so the handler never sees a half-written slot. */

#define TMP_SLOTS 32
#define TMP_PATH 4160

static struct tmp_slot {
    volatile sig_atomic_t used; /* 1 while path names a live temporary */
    pid_t pid;                  /* the process that created it */
    char path[TMP_PATH];
} tmp_slots[TMP_SLOTS];

static const int tmp_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
#define N_TMP_SIGS (int)(sizeof tmp_sigs / sizeof tmp_sigs[0])
static int tmp_installed;

#define CHILD_SLOTS 8

static struct child_slot {
    volatile sig_atomic_t used; /* 1 while pid is a running child of owner */
    pid_t owner;
    pid_t pid;
} child_slots[CHILD_SLOTS];

/* The deferral (ts_signal_defer()): while defer_on is set in the process
 * defer_pid, the handler only records the first signal in defer_sig.
 * defer_pid is written (signals blocked) before defer_on is set, and a
 * forked child, whose pid differs, is never deferred: it dies at once. */
static volatile sig_atomic_t defer_on, defer_sig;
static volatile pid_t defer_pid;

/* Kills and reaps this process's helper children (so that none writes a
 * temporary after its removal), removes its temporaries, then dies of sig
 * with its default action (the signal stays blocked until the handler
 * returns).  While this process defers signals, it only records sig. */
static void tmp_on_signal(int sig)
{
    pid_t me = getpid();
    if (defer_on && defer_pid == me) {
        if (!defer_sig)
            defer_sig = sig;
        return;
    }
    for (int i = 0; i < CHILD_SLOTS; i++)
        if (child_slots[i].used && child_slots[i].owner == me) {
            kill(child_slots[i].pid, SIGKILL);
            while (waitpid(child_slots[i].pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
    for (int i = 0; i < TMP_SLOTS; i++)
        if (tmp_slots[i].used && tmp_slots[i].pid == me)
            unlink(tmp_slots[i].path);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void tmp_block(sigset_t *old)
{
    sigset_t s;
    sigemptyset(&s);
    for (int i = 0; i < N_TMP_SIGS; i++)
        sigaddset(&s, tmp_sigs[i]);
    sigprocmask(SIG_BLOCK, &s, old);
}

static void tmp_unblock(const sigset_t *old)
{
    sigprocmask(SIG_SETMASK, old, NULL);
}

/* Installs the handler for each signal whose action is still the default
 * (an ignored signal kills nothing; someone else's handler is left alone). */
static void tmp_install(void)
{
    if (tmp_installed)
        return;
    tmp_installed = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tmp_on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_TMP_SIGS; i++)
        sigaddset(&sa.sa_mask, tmp_sigs[i]);
    for (int i = 0; i < N_TMP_SIGS; i++) {
        struct sigaction cur;
        if (sigaction(tmp_sigs[i], NULL, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
            cur.sa_handler == SIG_DFL)
            sigaction(tmp_sigs[i], &sa, NULL);
    }
}

/* Clears the slot holding this process's tmp (signals blocked by the caller). */
static void tmp_forget(const char *tmp)
{
    pid_t me = getpid();
    for (int i = 0; i < TMP_SLOTS; i++)
        if (tmp_slots[i].used && tmp_slots[i].pid == me && !strcmp(tmp_slots[i].path, tmp)) {
            tmp_slots[i].used = 0;
            return;
        }
}

int ts_tmp_open(const char *base, unsigned mode, char *tmp, size_t cap, ts_err *e)
{
    if (cap > TMP_PATH)
        cap = TMP_PATH;
    if (cap)
        tmp[0] = 0;
    sigset_t old;
    tmp_block(&old);
    tmp_install();
    int slot = -1;
    for (int i = 0; i < TMP_SLOTS && slot < 0; i++)
        if (!tmp_slots[i].used)
            slot = i;
    if (slot < 0) {
        tmp_unblock(&old);
        return ts_errf(e, "%s: cannot write: more than %d temporary files open at once", base,
                       TMP_SLOTS);
    }
    long pid = (long)getpid();
    int fd = -1, err = EEXIST;
    for (int k = 0; k < 100 && fd < 0 && err == EEXIST; k++) {
        int n = k ? snprintf(tmp, cap, "%s.tmp.%ld.%d", base, pid, k)
                  : snprintf(tmp, cap, "%s.tmp.%ld", base, pid);
        if (n < 0 || (size_t)n >= cap) {
            err = ENAMETOOLONG;
            break;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)(mode & 0777));
        err = fd < 0 ? errno : 0;
    }
    if (fd >= 0) {
        memcpy(tmp_slots[slot].path, tmp, strlen(tmp) + 1);
        tmp_slots[slot].pid = (pid_t)pid;
        atomic_signal_fence(memory_order_seq_cst); /* the slot before its flag */
        tmp_slots[slot].used = 1;
    }
    tmp_unblock(&old);
    if (fd < 0) {
        if (cap)
            tmp[0] = 0;
        return ts_errf(e, "%s: cannot write: %s", base,
                       err == EEXIST ? "no free temporary name beside it" : strerror(err));
    }
    return fd;
}

void ts_tmp_remove(const char *tmp)
{
    if (!tmp || !tmp[0])
        return;
    sigset_t old;
    tmp_block(&old);
    unlink(tmp);
    tmp_forget(tmp);
    tmp_unblock(&old);
}

void ts_tmp_keep(const char *tmp)
{
    if (!tmp || !tmp[0])
        return;
    sigset_t old;
    tmp_block(&old);
    tmp_forget(tmp);
    tmp_unblock(&old);
}

int ts_spawn(const char *file, char *const argv[], int err_fd, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int err = posix_spawn_file_actions_init(&fa);
    if (err)
        return err;
    err = posix_spawnattr_init(&at);
    if (err) {
        posix_spawn_file_actions_destroy(&fa);
        return err;
    }
    sigset_t old;
    tmp_block(&old);
    tmp_install();
    int slot = -1;
    for (int i = 0; i < CHILD_SLOTS && slot < 0; i++)
        if (!child_slots[i].used)
            slot = i;
    err = slot < 0 ? EAGAIN : 0;
    if (!err)
        err = posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    if (!err && err_fd >= 0)
        err = posix_spawn_file_actions_adddup2(&fa, err_fd, STDERR_FILENO);
    /* the child starts with the mask this process had before the block */
    if (!err)
        err = posix_spawnattr_setsigmask(&at, &old);
    if (!err)
        err = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    if (!err)
        err = posix_spawnp(pid, file, &fa, &at, argv, environ);
    if (!err) {
        child_slots[slot].owner = getpid();
        child_slots[slot].pid = *pid;
        atomic_signal_fence(memory_order_seq_cst);
        child_slots[slot].used = 1;
    }
    tmp_unblock(&old);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return err;
}

int ts_child_wait(pid_t pid, int *status)
{
    /* wait without reaping, then reap and forget with the signals blocked:
     * the handler never kills a pid that may already name another process */
    siginfo_t info;
    int rc;
    while ((rc = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT)) < 0 && errno == EINTR)
        ;
    sigset_t old;
    tmp_block(&old);
    pid_t w = -1;
    if (rc == 0)
        while ((w = waitpid(pid, status, 0)) < 0 && errno == EINTR)
            ;
    int err = errno;
    pid_t me = getpid();
    for (int i = 0; i < CHILD_SLOTS; i++)
        if (child_slots[i].used && child_slots[i].owner == me && child_slots[i].pid == pid)
            child_slots[i].used = 0;
    tmp_unblock(&old);
    errno = err;
    return w < 0 ? -1 : 0;
}

/* ---- deferring the fatal signals ------------------------------------------
 *
 * A caller that must finish a step (the sweep collector marking its sweep)
 * defers SIGINT/SIGTERM/SIGHUP/SIGPIPE: the handler above records the
 * signal and returns (a blocking call then fails with EINTR, a write to a
 * closed pipe with EPIPE), the caller polls
 * ts_signal_pending() and ends its work, and ts_signal_resume() does what
 * the handler would have done.  The flags are changed with the signals
 * blocked, so the handler sees either state whole. */

void ts_signal_defer(void)
{
    sigset_t old;
    tmp_block(&old);
    tmp_install();
    if (!defer_on || defer_pid != getpid()) {
        defer_pid = getpid();
        defer_sig = 0;
        atomic_signal_fence(memory_order_seq_cst); /* the owner before the flag */
        defer_on = 1;
    }
    tmp_unblock(&old);
}

int ts_signal_pending(void)
{
    return defer_on && defer_pid == getpid() ? (int)defer_sig : 0;
}

void ts_signal_resume(void)
{
    sigset_t old;
    tmp_block(&old);
    int sig = ts_signal_pending();
    if (defer_pid == getpid()) {
        defer_on = 0;
        defer_sig = 0;
    }
    if (sig) {
        /* the handler's work, then its raise(): the signal stays pending
         * (blocked) until the mask is restored without it */
        tmp_on_signal(sig);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, sig);
        sigprocmask(SIG_UNBLOCK, &s, NULL);
    }
    tmp_unblock(&old);
}

const char *ts_signal_name(int sig)
{
    switch (sig) {
    case SIGINT:
        return "SIGINT";
    case SIGTERM:
        return "SIGTERM";
    case SIGHUP:
        return "SIGHUP";
    case SIGPIPE:
        return "SIGPIPE";
    default:
        return "a signal";
    }
}

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "a special file";
}

/* ts_output_check(), also returning whether path exists and its lstat. */
static int output_check(const char *path, struct stat *st, int *exists, ts_err *e)
{
    *exists = 0;
    if (lstat(path, st) != 0) {
        if (errno == ENOENT)
            return 0;
        return ts_errf(e, "%s: cannot write: %s", path, strerror(errno));
    }
    *exists = 1;
    if (S_ISLNK(st->st_mode))
        return ts_errf(e, "%s: a symbolic link; refusing to replace it (name the file itself)",
                       path);
    if (!S_ISREG(st->st_mode))
        return ts_errf(e, "%s: not a regular file (%s); refusing to replace it", path,
                       file_kind(st->st_mode));
    int writable = geteuid() == 0 ? (st->st_mode & 0222) != 0
                                  : faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
    if (!writable)
        return ts_errf(e, "%s: not writable (no write permission); refusing to replace it", path);
    return 0;
}

int ts_output_check(const char *path, ts_err *e)
{
    struct stat st;
    int exists;
    return output_check(path, &st, &exists, e);
}

int ts_atomic_open(ts_atomic *a, const char *path, ts_err *e)
{
    a->f = NULL;
    a->tmp[0] = 0;
    if (snprintf(a->path, sizeof a->path, "%s", path) >= (int)sizeof a->path)
        return ts_errf(e, "%s: cannot write: path too long", path);
    struct stat st;
    int exists;
    if (output_check(path, &st, &exists, e))
        return -1;
    int fd = ts_tmp_open(path, 0666, a->tmp, sizeof a->tmp, e);
    if (fd < 0)
        return -1;
    /* replacing a file keeps its permission bits (not set-id or sticky) */
    if ((exists && fchmod(fd, st.st_mode & 0777) != 0) || !(a->f = fdopen(fd, "w"))) {
        int err = errno;
        close(fd);
        ts_tmp_remove(a->tmp);
        a->tmp[0] = 0;
        return ts_errf(e, "%s: cannot write: %s", path, strerror(err));
    }
    return 0;
}

int ts_atomic_commit(ts_atomic *a, ts_err *e)
{
    if (!a->f)
        return ts_errf(e, "%s: write failed (not open)", a->path);
    int bad = ferror(a->f);
    if (fclose(a->f) != 0)
        bad = 1;
    a->f = NULL;
    if (bad) {
        ts_tmp_remove(a->tmp);
        a->tmp[0] = 0;
        return ts_errf(e, "%s: write failed", a->path);
    }
    /* the target again: a long run may have given it time to change */
    if (ts_output_check(a->path, e)) {
        ts_tmp_remove(a->tmp);
        a->tmp[0] = 0;
        return -1;
    }
    if (rename(a->tmp, a->path) != 0) {
        int err = errno;
        ts_tmp_remove(a->tmp);
        a->tmp[0] = 0;
        return ts_errf(e, "%s: cannot rename into place: %s", a->path, strerror(err));
    }
    ts_tmp_keep(a->tmp);
    a->tmp[0] = 0;
    return 0;
}

void ts_atomic_abort(ts_atomic *a)
{
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    ts_tmp_remove(a->tmp);
    a->tmp[0] = 0;
}

double ts_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ts_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
