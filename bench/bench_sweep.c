/*
 * Sweep throughput: runs bench/grid-1000.ini (1,000 RL-step configurations
 * of the Qwen2.5-7B / 64 H100 setup, 64 prompts x 8 responses each) with 2
 * forked workers, saving every configuration to a fresh SQLite database
 * (build/bench/sweep.db) exactly as `tailsim sweep -j 2` does, and reports
 * configurations per second.  Goal: 1,000 configurations in under 2 minutes
 * of wall time on 2 cores.  Wall time depends on what else the machine runs;
 * the CPU seconds per configuration are printed too.
 */
#define _DEFAULT_SOURCE /* getrusage */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "results/store.h"
#include "sweep/sweep_run.h"

typedef struct ctx {
    const grid *g;
    store *st;
    int64_t sweep_id;
    size_t failed;
} ctx;

static int begin(void *p, ts_err *e)
{
    ctx *c = p;
    remove("build/bench/sweep.db");
    remove("build/bench/sweep.db-wal");
    remove("build/bench/sweep.db-shm");
    return store_open("build/bench/sweep.db", &c->st, e) ||
           store_sweep_begin(c->st, c->g->path, c->g->scenario, c->g->command, c->g->n_configs,
                             &c->sweep_id, e);
}

static int result(void *p, sweep_result *r, ts_err *e)
{
    ctx *c = p;
    char *params = sweep_config_params(c->g, r->config);
    if (!params)
        return ts_errf(e, "out of memory");
    int rc = store_save_sweep_run(c->st, c->sweep_id, r->config, params, r->ok ? r->rec : NULL,
                                  r->err, e);
    c->failed += !r->ok;
    free(params);
    return rc;
}

int main(void)
{
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    grid g;
    ctx c = {&g, NULL, 0, 0};
    sweep_hooks h = {&c, begin, result, NULL};
    if (grid_load("bench/grid-1000.ini", &g, &e) || grid_check_base(&g, &e)) {
        fprintf(stderr, "bench_sweep: %s\n", e.msg);
        return 1;
    }
    for (size_t i = 0; i < g.n_configs; i++)
        if (sweep_config_check(&g, i, &e)) {
            fprintf(stderr, "bench_sweep: %s\n", e.msg);
            return 1;
        }
    double w0 = ts_wall_s();
    int rc = sweep_run_local(&g, 2, NULL, &h, &e);
    double wall = ts_wall_s() - w0;
    if (c.st)
        store_sweep_end(c.st, c.sweep_id,
                        rc == 0 && !c.failed ? STORE_SWEEP_DONE : STORE_SWEEP_FAILED, &e);
    store_close(c.st);
    if (rc) {
        fprintf(stderr, "bench_sweep: %s\n", e.msg);
        return 1;
    }
    printf("sweep bench/grid-1000.ini -j 2: %zu RL-step configurations (%zu failed) in %.1f s "
           "wall: %.2f configs/s\n", g.n_configs, c.failed, wall, (double)g.n_configs / wall);
    struct rusage ru;
    double cpu = 0;
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0)
        cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
              (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    printf("  workers' CPU: %.1f s, %.3f s per configuration (%.1f s of wall on 2 idle cores)\n",
           cpu, cpu / (double)g.n_configs, cpu / 2);
    double load[1] = {0};
    if (getloadavg(load, 1) != 1)
        load[0] = 0;
    printf("  goal: 1,000 configurations in under 120 s on 2 cores: %s in wall time "
           "(load average %.1f), %s in CPU time\n", wall < 120 ? "met" : "NOT met", load[0],
           cpu / 2 < 120 ? "met" : "NOT met");
    grid_free(&g);
    return c.failed ? 1 : 0;
}
