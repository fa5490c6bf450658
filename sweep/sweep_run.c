/*
 * The sweep runner (see sweep_run.h).  A configuration is the base scenario
 * with the grid's "section.key=value" assignments applied through the same
 * --set path as `tailsim rlstep --set` (run_setup), so a key added to the
 * scenario table is sweepable at once.  Each configuration is simulated
 * exactly as `tailsim rlstep --steps N --no-wall` would (policy_run, then
 * run_multistep_metrics), so a sweep row and a single run agree.
 *
 * Local transport: `jobs` forked workers take configuration indices from a
 * shared atomic counter (dynamic load balance) and write each packed result,
 * length-prefixed, to their own pipe; the parent polls the pipes and calls
 * the hooks.  Workers never touch the parent's database connection or stdio
 * and leave with _exit().  Which worker ran a configuration never changes
 * its result: a run depends on its inputs and seed only.
 *
 * Interruption: when the caller defers the fatal signals (ts_signal_defer())
 * and one comes, the runner hands no further result to the hooks: the
 * serial path stops after the configuration it is simulating, the pool
 * stops at once (poll() fails with EINTR, or returns and the flag is seen),
 * kills (SIGTERM) and reaps its workers, which are never deferred, and
 * SWEEP_INTERRUPTED comes back.  Every result handed over before stays
 * with the collector (each was saved in its own transaction).
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "sweep/sweep_run.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "sim/run.h"
#include "sim/policy/policy.h"
#include "sim/rlstep.h"

sweep_remote_fn sweep_remote = NULL;

/* Describes a configuration in messages: "config 3 (rollout.tp=2, ...)". */
static int config_prefix(const grid *g, size_t config, ts_err *e)
{
    char sets[GRID_MAX_DIMS][GRID_SET_MAX];
    size_t n = grid_config_sets(g, config, sets);
    char buf[TS_ERR_MAX / 2];
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && o + 1 < sizeof buf; i++)
        o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? ", " : "", sets[i]);
    return ts_err_prefix(e, "%s: config %zu (%s): ", g->path, config, buf);
}

/* Loads configuration `config`: scenario, hardware, model, policy (NULL: the
 * scenario's [spec] keys as given).  Returns 0 or -1 (unprefixed). */
static int config_setup(const grid *g, size_t config, scenario *s, hw_desc *hw, llm_desc *m,
                        const policy **pol, ts_err *e)
{
    char sets[GRID_MAX_DIMS][GRID_SET_MAX];
    const char *setp[GRID_MAX_DIMS];
    size_t n = grid_config_sets(g, config, sets);
    for (size_t i = 0; i < n; i++)
        setp[i] = sets[i];
    if (run_setup(g->scenario, setp, (int)n, 0, 0, s, hw, m, e))
        return -1;
    *pol = NULL;
    if (s->policy[0] && !(*pol = policy_find(s->policy)))
        return ts_errf(e, "unknown policy '%s'", s->policy);
    rollout_cfg cfg;
    return rlstep_rollout_cfg(s, hw, m, &cfg, e);
}

int sweep_config_check(const grid *g, size_t config, ts_err *e)
{
    scenario *s = malloc(sizeof *s);
    hw_desc hw;
    llm_desc m;
    const policy *pol;
    if (!s)
        return ts_errf(e, "%s: out of memory", g->path);
    int rc = config_setup(g, config, s, &hw, &m, &pol, e);
    free(s);
    return rc ? config_prefix(g, config, e) : 0;
}

void sweep_result_clear(sweep_result *r)
{
    run_record_free(r->rec);
    r->rec = NULL;
}

int sweep_config_run(const grid *g, size_t config, sweep_result *out)
{
    memset(out, 0, sizeof *out);
    out->config = config;
    ts_err e = {{0}};
    int rc = 0, full = !strcmp(g->command, "rlstep");
    scenario *s = malloc(sizeof *s);
    hw_desc hw;
    llm_desc m;
    const policy *pol;
    multistep_result res;
    memset(&res, 0, sizeof res);
    trace **steps = calloc((size_t)g->steps, sizeof *steps);
    run_record *rec = run_record_new();
    if (!s || !steps || !rec) {
        rc = -1;
        goto cleanup;
    }
    if (config_setup(g, config, s, &hw, &m, &pol, &e) ||
        policy_load_steps(s, NULL, g->steps, steps, &e) ||
        policy_run(s, pol, &hw, &m, steps, g->steps, full, &res, NULL, &e))
        goto failed;
    run_set_identity(rec, g->command, s->name, hw.calibration, s->seed, res.step[0].gpus,
                     res.step[0].replicas, res.step[0].tp);
    run_set_policy(rec, pol ? pol->name : NULL);
    run_trace_hash(steps, g->steps, rec->trace_hash); /* the collector adds the rest */
    if (run_multistep_metrics(rec, &res, steps, full, NULL)) {
        rc = -1;
        goto cleanup;
    }
    out->ok = 1;
    out->rec = rec;
    rec = NULL;
    goto cleanup;
failed:
    config_prefix(g, config, &e);
    snprintf(out->err, sizeof out->err, "%s", e.msg);
cleanup:
    multistep_result_free(&res);
    if (steps)
        for (int k = 0; k < g->steps; k++)
            trace_free(steps[k]);
    free(steps);
    free(s);
    run_record_free(rec);
    return rc;
}

char *sweep_config_params(const grid *g, size_t config)
{
    size_t idx[GRID_MAX_DIMS];
    grid_config(g, config, idx);
    json_t *o = json_object();
    char *txt = NULL;
    for (size_t i = 0; o && i < g->n_dims; i++) {
        char k[128];
        snprintf(k, sizeof k, "%s.%s", g->dim[i].section, g->dim[i].key);
        if (json_object_set_new(o, k, json_string(g->dim[i].vals[idx[i]])))
            goto cleanup;
    }
    if (o)
        txt = json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT);
cleanup:
    json_decref(o);
    return txt;
}

/* --- packing: fixed header, then the identity and the metrics ------------ */

typedef struct pack_head {
    uint64_t config;
    int32_t ok, gpus, replicas, tp;
    uint64_t seed;
    uint32_t n_metrics;
    char err[TS_ERR_MAX];
    char command[32], scenario[256], calibration[128], version[32], policy[32];
    char trace_hash[32];
} pack_head;

int sweep_result_pack(const sweep_result *r, unsigned char **buf, size_t *n)
{
    pack_head h;
    memset(&h, 0, sizeof h);
    h.config = r->config;
    h.ok = r->ok;
    memcpy(h.err, r->err, sizeof h.err);
    size_t nm = 0;
    if (r->ok && r->rec) {
        const run_record *rec = r->rec;
        h.gpus = rec->gpus;
        h.replicas = rec->replicas;
        h.tp = rec->tp;
        h.seed = rec->seed;
        nm = rec->n_metrics;
        h.n_metrics = (uint32_t)nm;
        memcpy(h.command, rec->command, sizeof h.command);
        memcpy(h.scenario, rec->scenario, sizeof h.scenario);
        memcpy(h.calibration, rec->calibration, sizeof h.calibration);
        memcpy(h.version, rec->version, sizeof h.version);
        memcpy(h.policy, rec->policy, sizeof h.policy);
        memcpy(h.trace_hash, rec->trace_hash, sizeof h.trace_hash);
    }
    *n = sizeof h + nm * sizeof(metric);
    if (!(*buf = malloc(*n)))
        return -1;
    memcpy(*buf, &h, sizeof h);
    if (nm)
        memcpy(*buf + sizeof h, r->rec->metrics, nm * sizeof(metric));
    return 0;
}

int sweep_result_unpack(const unsigned char *buf, size_t n, sweep_result *r, ts_err *e)
{
    pack_head h;
    memset(r, 0, sizeof *r);
    if (n < sizeof h)
        return ts_errf(e, "sweep result message of %zu bytes is truncated", n);
    memcpy(&h, buf, sizeof h);
    if (n != sizeof h + (size_t)h.n_metrics * sizeof(metric) || (!h.ok && h.n_metrics))
        return ts_errf(e, "sweep result message of %zu bytes has a bad length", n);
    r->config = (size_t)h.config;
    r->ok = h.ok != 0;
    memcpy(r->err, h.err, sizeof r->err);
    r->err[sizeof r->err - 1] = 0;
    if (!r->ok)
        return 0;
    if (!(r->rec = run_record_new()))
        return ts_errf(e, "out of memory");
    run_record *rec = r->rec;
    rec->gpus = h.gpus;
    rec->replicas = h.replicas;
    rec->tp = h.tp;
    rec->seed = h.seed;
    memcpy(rec->command, h.command, sizeof rec->command);
    memcpy(rec->scenario, h.scenario, sizeof rec->scenario);
    memcpy(rec->calibration, h.calibration, sizeof rec->calibration);
    memcpy(rec->version, h.version, sizeof rec->version);
    memcpy(rec->policy, h.policy, sizeof rec->policy);
    rec->policy[sizeof rec->policy - 1] = 0;
    memcpy(rec->trace_hash, h.trace_hash, sizeof rec->trace_hash);
    rec->trace_hash[sizeof rec->trace_hash - 1] = 0;
    rec->command[sizeof rec->command - 1] = rec->scenario[sizeof rec->scenario - 1] = 0;
    rec->calibration[sizeof rec->calibration - 1] = rec->version[sizeof rec->version - 1] = 0;
    for (uint32_t i = 0; i < h.n_metrics; i++) {
        metric m;
        memcpy(&m, buf + sizeof h + i * sizeof m, sizeof m);
        m.key[sizeof m.key - 1] = 0;
        if (run_add_metric(rec, m.key, m.value)) {
            sweep_result_clear(r);
            return ts_errf(e, "out of memory");
        }
    }
    return 0;
}

/* --- the local transport ------------------------------------------------- */

/* SWEEP_INTERRUPTED with e set when a deferred signal came, else 0. */
static int interrupted(const grid *g, ts_err *e)
{
    int sig = ts_signal_pending();
    if (!sig)
        return 0;
    ts_errf(e, "%s: interrupted by signal %d (%s)", g->path, sig, ts_signal_name(sig));
    return SWEEP_INTERRUPTED;
}

static size_t count_mask(const grid *g, const unsigned char *mask)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_configs; i++)
        n += !mask || mask[i];
    return n;
}

/* Hands one result to the collector's hooks.  Returns 0 or -1. */
static int deliver(const sweep_hooks *h, sweep_result *r, size_t *done, size_t total, ts_err *e)
{
    int rc = h->result ? h->result(h->ctx, r, e) : 0;
    sweep_result_clear(r);
    if (rc)
        return -1;
    ++*done;
    if (h->progress)
        h->progress(h->ctx, *done, total);
    return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads exactly n bytes; returns 1, 0 at a clean EOF before any byte, -1 on error. */
static int read_all(int fd, void *p, size_t n)
{
    unsigned char *b = p;
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, b + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            return got ? -1 : 0;
        got += (size_t)k;
    }
    return 1;
}

/* A worker: takes indices from the shared counter until the grid is done. */
static void worker(const grid *g, const unsigned char *mask, _Atomic size_t *next, int fd)
{
    for (;;) {
        size_t i = atomic_fetch_add(next, 1);
        if (i >= g->n_configs)
            _exit(0);
        if (mask && !mask[i])
            continue;
        sweep_result r;
        unsigned char *buf = NULL;
        size_t n = 0;
        if (sweep_config_run(g, i, &r) || sweep_result_pack(&r, &buf, &n))
            _exit(3);
        sweep_result_clear(&r);
        uint64_t len = n;
        if (write_all(fd, &len, sizeof len) || write_all(fd, buf, n))
            _exit(4);
        free(buf);
    }
}

/* Runs the configurations in this process, in index order, until a
 * deferred signal comes (a configuration that finishes after it is dropped).
 * Returns 0, -1 or SWEEP_INTERRUPTED with e set. */
static int run_serial(const grid *g, const unsigned char *mask, const sweep_hooks *h,
                      size_t total, ts_err *e)
{
    size_t done = 0;
    for (size_t i = 0; i < g->n_configs; i++) {
        if (mask && !mask[i])
            continue;
        if (interrupted(g, e))
            return SWEEP_INTERRUPTED;
        sweep_result r;
        if (sweep_config_run(g, i, &r))
            return ts_errf(e, "%s: out of memory running config %zu", g->path, i);
        if (interrupted(g, e)) {
            sweep_result_clear(&r);
            return SWEEP_INTERRUPTED;
        }
        if (deliver(h, &r, &done, total, e))
            return -1;
    }
    return 0;
}

/* The forked workers of a local sweep. */
typedef struct pool {
    const grid *g;
    int jobs, nw;           /* workers wanted, started */
    pid_t *pid;             /* jobs: their process ids */
    struct pollfd *pf;      /* jobs: the read ends of their pipes (fd -1: closed) */
    _Atomic size_t *next;   /* shared with them: the next configuration index */
} pool;

/* Forks w->jobs workers over the configurations of mask, each writing to
 * its own pipe.  Returns 0, or -1 with e set; pool_stop() reaps the
 * workers started (w->nw) and frees the pool. */
static int pool_start(pool *w, const unsigned char *mask, ts_err *e)
{
    const grid *g = w->g;
    w->pid = calloc((size_t)w->jobs, sizeof *w->pid);
    w->pf = calloc((size_t)w->jobs, sizeof *w->pf);
    w->next = mmap(NULL, sizeof *w->next, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (!w->pid || !w->pf || w->next == MAP_FAILED)
        return ts_errf(e, "%s: cannot set up %d workers: %s", g->path, w->jobs, strerror(errno));
    atomic_init(w->next, 0);
    fflush(NULL);
    for (; w->nw < w->jobs; w->nw++) {
        int fd[2], k = w->nw;
        if (pipe(fd))
            return ts_errf(e, "%s: pipe: %s", g->path, strerror(errno));
        w->pid[k] = fork();
        if (w->pid[k] < 0) {
            close(fd[0]);
            close(fd[1]);
            return ts_errf(e, "%s: fork: %s", g->path, strerror(errno));
        }
        if (w->pid[k] == 0) {
            for (int x = 0; x < k; x++)
                close(w->pf[x].fd);
            close(fd[0]);
            worker(g, mask, w->next, fd[1]);
        }
        close(fd[1]);
        w->pf[k].fd = fd[0];
        w->pf[k].events = POLLIN;
    }
    return 0;
}

/* Takes what worker k's pipe holds: one result, handed to the hooks, or
 * the end of its output (the pipe is closed).  Returns 0 for a result, 1
 * at the end, -1 with e set (a broken message, a hook's error), or
 * SWEEP_INTERRUPTED for a broken message after a deferred signal (the
 * worker died of it: a terminal's Ctrl-C reaches the whole group). */
static int pool_take(pool *w, int k, const sweep_hooks *h, size_t *done, size_t total,
                     ts_err *e)
{
    const grid *g = w->g;
    uint64_t len = 0;
    int got = read_all(w->pf[k].fd, &len, sizeof len);
    if (got == 0) {
        close(w->pf[k].fd);
        w->pf[k].fd = -1;
        return 1;
    }
    unsigned char *buf = got > 0 && len < (1u << 24) ? malloc(len) : NULL;
    sweep_result r;
    if (!buf || read_all(w->pf[k].fd, buf, len) != 1) {
        free(buf);
        if (interrupted(g, e))
            return SWEEP_INTERRUPTED;
        return ts_errf(e, "%s: worker %d sent a broken message", g->path, k);
    }
    int bad = sweep_result_unpack(buf, len, &r, e);
    free(buf);
    if (bad)
        return ts_err_prefix(e, "%s: worker %d: ", g->path, k);
    return deliver(h, &r, done, total, e);
}

/* Polls the workers' pipes until every worker has closed its own, handing
 * the results to the hooks, or until a deferred signal comes (the handler's
 * return makes poll() fail with EINTR).  Returns 0, -1 or SWEEP_INTERRUPTED
 * with e set. */
static int pool_collect(pool *w, const sweep_hooks *h, size_t *done, size_t total, ts_err *e)
{
    int open_fds = w->nw;
    while (open_fds > 0) {
        if (interrupted(w->g, e))
            return SWEEP_INTERRUPTED;
        if (poll(w->pf, (nfds_t)w->nw, -1) < 0) {
            if (errno == EINTR)
                continue;
            return ts_errf(e, "%s: poll: %s", w->g->path, strerror(errno));
        }
        for (int k = 0; k < w->nw; k++) {
            if (w->pf[k].fd < 0 || !(w->pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (interrupted(w->g, e))
                return SWEEP_INTERRUPTED;
            int rc = pool_take(w, k, h, done, total, e);
            if (rc < 0)
                return rc;
            open_fds -= rc;
        }
    }
    return 0;
}

/* Closes the pipes, stops the workers (SIGTERM) when rc is an error or an
 * interruption, reaps them and frees the pool.  Returns rc, or -1 with e
 * set when rc was 0 but a worker failed or fewer than total results came
 * back (done): SWEEP_INTERRUPTED instead when a deferred signal came (the
 * workers died of it first). */
static int pool_stop(pool *w, int rc, size_t done, size_t total, ts_err *e)
{
    const grid *g = w->g;
    const int rc_in = rc;
    for (int k = 0; k < w->nw; k++) {
        if (w->pf[k].fd >= 0)
            close(w->pf[k].fd);
        if (rc)
            kill(w->pid[k], SIGTERM);
    }
    for (int k = 0; k < w->nw; k++) {
        int st = 0;
        while (waitpid(w->pid[k], &st, 0) < 0 && errno == EINTR)
            ;
        if (rc == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            if (WIFSIGNALED(st))
                ts_errf(e, "%s: worker %d killed by signal %d", g->path, k, WTERMSIG(st));
            else
                ts_errf(e, "%s: worker %d failed (exit %d: out of memory or a broken pipe)",
                        g->path, k, WEXITSTATUS(st));
            rc = -1;
        }
    }
    if (rc == 0 && done != total)
        rc = ts_errf(e, "%s: %zu of %zu configurations came back", g->path, done, total);
    if (rc && !rc_in && interrupted(g, e))
        rc = SWEEP_INTERRUPTED;
    if (w->next && w->next != MAP_FAILED)
        munmap((void *)w->next, sizeof *w->next);
    free(w->pid);
    free(w->pf);
    return rc;
}

int sweep_run_local(const grid *g, int jobs, const unsigned char *mask, const sweep_hooks *h,
                    ts_err *e)
{
    size_t total = count_mask(g, mask), done = 0;
    if (h->begin && h->begin(h->ctx, e))
        return -1;
    if (jobs > (int)total)
        jobs = total ? (int)total : 1;
    if (jobs <= 1)
        return run_serial(g, mask, h, total, e);
    if (interrupted(g, e))
        return SWEEP_INTERRUPTED;
    pool w = {.g = g, .jobs = jobs, .next = MAP_FAILED};
    int rc = pool_start(&w, mask, e) ? -1 : pool_collect(&w, h, &done, total, e);
    return pool_stop(&w, rc, done, total, e);
}

int sweep_exec(const grid *g, int jobs, const unsigned char *mask, const sweep_hooks *h,
               int *collector, ts_err *e)
{
    if (sweep_remote)
        return sweep_remote(g, mask, h, collector, e);
    *collector = 1;
    return sweep_run_local(g, jobs, mask, h, e);
}
