/*
 * Helpers shared by every module.  Nothing here allocates except the RNG
 * constructor; all parsing is strict (whole string, range-checked, finite).
 */
#define _POSIX_C_SOURCE 200809L
#include "common/util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

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
            *slash = 0; /* directory of the binary (build/ or bench/...) */
            char probe[4200];
            for (int up = 0; up < 3; up++) {
                snprintf(probe, sizeof probe, "%s/models/hw", exe);
                if (file_exists(probe)) {
                    snprintf(root, sizeof root, "%s", exe);
                    return root;
                }
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
        snprintf(buf, bufsz, "%s", name);
        return 0;
    }
    snprintf(buf, bufsz, "%s/%s/%s%s", ts_data_root(), dir, name, ext);
    if (file_exists(buf))
        return 0;
    char alt[4096];
    snprintf(alt, sizeof alt, "%s/%s%s", dir, name, ext);
    if (file_exists(alt)) {
        snprintf(buf, bufsz, "%s", alt);
        return 0;
    }
    return ts_errf(e, "unknown %s '%s' (no file %s)", dir, name, buf);
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

int ts_atomic_open(ts_atomic *a, const char *path, ts_err *e)
{
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    a->f = fopen(a->tmp, "w");
    if (!a->f)
        return ts_errf(e, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

int ts_atomic_commit(ts_atomic *a, ts_err *e)
{
    int bad = ferror(a->f);
    if (fclose(a->f) != 0)
        bad = 1;
    a->f = NULL;
    if (bad) {
        remove(a->tmp);
        return ts_errf(e, "%s: write failed", a->path);
    }
    if (rename(a->tmp, a->path) != 0) {
        int err = errno;
        remove(a->tmp);
        return ts_errf(e, "%s: cannot rename into place: %s", a->path, strerror(err));
    }
    return 0;
}

void ts_atomic_abort(ts_atomic *a)
{
    if (a->f)
        fclose(a->f);
    a->f = NULL;
    remove(a->tmp);
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
