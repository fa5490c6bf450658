/*
 * Engine micro-benchmark (the classic "hold" model): a queue kept at N
 * pending events; each handler schedules one successor at an exponential
 * delay.  Reports engine events per second of CPU for several queue sizes.
 * Goal: >= 1e7 events/s.
 */
#include <stdio.h>

#include "common/util.h"
#include "sim/engine.h"

typedef struct hold {
    gsl_rng *r;
    uint64_t budget;
} hold;

static void hold_fn(engine *e, void *ctx, uint64_t arg)
{
    hold *h = ctx;
    if (h->budget == 0)
        return;
    h->budget--;
    /* cheap exponential-ish delay from a uniform */
    double u = gsl_rng_uniform_pos(h->r);
    engine_schedule(e, engine_now(e) + u * u, hold_fn, h, arg + 1);
}

int main(void)
{
    const size_t sizes[] = {16, 128, 1024, 65536};
    const uint64_t events = 20000000;
    int ok = 1;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        engine *e = engine_new();
        hold h = {ts_rng_new(1, k), events};
        for (size_t i = 0; i < sizes[k]; i++)
            engine_schedule(e, gsl_rng_uniform(h.r), hold_fn, &h, i);
        double c0 = ts_cpu_s();
        engine_run(e, 1e300);
        double cpu = ts_cpu_s() - c0;
        double rate = (double)engine_events(e) / cpu;
        printf("engine hold model, %6zu pending: %.3g events in %.3f s CPU = %.3g events/s%s\n",
               sizes[k], (double)engine_events(e), cpu, rate, rate >= 1e7 ? "" : "  (below goal 1e7)");
        if (sizes[k] <= 128 && rate < 1e7)
            ok = 0;
        gsl_rng_free(h.r);
        engine_free(e);
    }
    printf("goal: >= 1e7 events/s with up to 128 pending (one event per replica, as tailsim runs): %s\n",
           ok ? "met" : "NOT met");
    return 0;
}
