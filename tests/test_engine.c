/*
 * Engine tests: the heap against a brute-force reference (a flat array
 * scanned for the minimum) on seeded random schedules of schedule / cancel /
 * step, with many equal times so FIFO tie-breaking is exercised; stale-id
 * rejection; handlers that schedule; determinism of a self-driving model.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "common/util.h"
#include "sim/engine.h"

typedef struct ref_ev {
    double t;
    uint64_t seq;
    uint64_t tag;
    event_id id;
    int live;
} ref_ev;

static uint64_t last_tag;
static int fired;

static void record(engine *e, void *ctx, uint64_t arg)
{
    (void)e;
    (void)ctx;
    last_tag = arg;
    fired++;
}

TestSuite(engine);

static void run_reference_check(uint64_t seed, int n_ops)
{
    engine *e = engine_new();
    cr_assert_not_null(e);
    gsl_rng *r = ts_rng_new(seed, 0);
    ref_ev *ref = calloc((size_t)n_ops, sizeof *ref);
    size_t n_ref = 0;
    uint64_t seq = 0;
    for (int op = 0; op < n_ops; op++) {
        double u = gsl_rng_uniform(r);
        if (u < 0.5) { /* schedule, integer delays so ties are common */
            double t = engine_now(e) + (double)gsl_rng_uniform_int(r, 4);
            event_id id = engine_schedule(e, t, record, NULL, (uint64_t)op);
            cr_assert_neq(id, 0);
            ref[n_ref++] = (ref_ev){t, seq++, (uint64_t)op, id, 1};
        } else if (u < 0.7) { /* cancel a random live or dead event */
            if (n_ref == 0)
                continue;
            size_t k = gsl_rng_uniform_int(r, n_ref);
            int rc = engine_cancel(e, ref[k].id);
            cr_assert_eq(rc, ref[k].live ? 0 : -1, "cancel of event %zu: rc %d, live %d", k, rc, ref[k].live);
            ref[k].live = 0;
        } else { /* step: must pop the reference minimum */
            ssize_t best = -1;
            for (size_t k = 0; k < n_ref; k++)
                if (ref[k].live && (best < 0 || ref[k].t < ref[best].t ||
                                    (ref[k].t == ref[best].t && ref[k].seq < ref[best].seq)))
                    best = (ssize_t)k;
            int ran = engine_step(e);
            if (best < 0) {
                cr_assert_eq(ran, 0);
                continue;
            }
            cr_assert_eq(ran, 1);
            cr_assert_eq(last_tag, ref[best].tag, "op %d: popped %lu, expected %lu", op,
                         (unsigned long)last_tag, (unsigned long)ref[best].tag);
            cr_assert_eq(engine_now(e), ref[best].t);
            ref[best].live = 0;
            /* a run event can no longer be cancelled */
            cr_assert_eq(engine_cancel(e, ref[best].id), -1);
        }
        size_t live = 0;
        for (size_t k = 0; k < n_ref; k++)
            live += (size_t)ref[k].live;
        cr_assert_eq(engine_pending(e), live);
    }
    free(ref);
    gsl_rng_free(r);
    engine_free(e);
}

Test(engine, matches_bruteforce_reference)
{
    for (uint64_t seed = 1; seed <= 20; seed++)
        run_reference_check(seed, 3000);
}

Test(engine, invalid_ids_rejected)
{
    engine *e = engine_new();
    cr_assert_eq(engine_cancel(e, 0), -1);
    cr_assert_eq(engine_cancel(e, 12345), -1);
    event_id a = engine_schedule(e, 1.0, record, NULL, 1);
    cr_assert_eq(engine_cancel(e, a), 0);
    cr_assert_eq(engine_cancel(e, a), -1);
    /* the slot is reused with a new generation: the old id stays dead */
    event_id b = engine_schedule(e, 2.0, record, NULL, 2);
    cr_assert_neq(a, b);
    cr_assert_eq(engine_cancel(e, a), -1);
    cr_assert_eq(engine_pending(e), 1);
    engine_free(e);
}

Test(engine, fifo_among_equal_times)
{
    engine *e = engine_new();
    for (uint64_t k = 0; k < 100; k++)
        engine_schedule(e, 5.0, record, NULL, k);
    for (uint64_t k = 0; k < 100; k++) {
        cr_assert_eq(engine_step(e), 1);
        cr_assert_eq(last_tag, k);
    }
    cr_assert_eq(engine_step(e), 0);
    cr_assert_eq(engine_events(e), 100);
    engine_free(e);
}

/* A self-driving model: each event schedules 0-2 successors at random delays
 * drawn from its own RNG; the trace hash must not depend on anything else. */
typedef struct chain {
    gsl_rng *r;
    uint64_t hash;
    int budget;
} chain;

static void chain_fn(engine *e, void *ctx, uint64_t arg)
{
    chain *c = ctx;
    c->hash = ts_splitmix64(c->hash ^ arg ^ (uint64_t)(engine_now(e) * 1e6));
    int kids = (int)gsl_rng_uniform_int(c->r, 3);
    for (int k = 0; k < kids && c->budget > 0; k++, c->budget--)
        engine_schedule(e, engine_now(e) + gsl_rng_uniform(c->r), chain_fn, c,
                        arg * 3 + (uint64_t)k);
}

static uint64_t chain_run(uint64_t seed, uint64_t *events)
{
    engine *e = engine_new();
    chain c = {ts_rng_new(seed, 7), 0, 20000};
    for (int k = 0; k < 10; k++)
        engine_schedule(e, 0.0, chain_fn, &c, (uint64_t)k);
    engine_run(e, 1e30);
    *events = engine_events(e);
    gsl_rng_free(c.r);
    engine_free(e);
    return c.hash;
}

Test(engine, deterministic_for_a_seed)
{
    uint64_t ev1, ev2, ev3;
    uint64_t h1 = chain_run(42, &ev1), h2 = chain_run(42, &ev2), h3 = chain_run(43, &ev3);
    cr_assert_eq(h1, h2);
    cr_assert_eq(ev1, ev2);
    cr_assert_gt(ev1, 1000);
    cr_assert_neq(h1, h3);
}

Test(engine, run_until_stops_at_horizon)
{
    engine *e = engine_new();
    fired = 0;
    for (int k = 1; k <= 10; k++)
        engine_schedule(e, (double)k, record, NULL, (uint64_t)k);
    cr_assert_eq(engine_run(e, 4.5), 4);
    cr_assert_eq(engine_now(e), 4.0);
    double t;
    cr_assert_eq(engine_peek(e, &t), 0);
    cr_assert_eq(t, 5.0);
    cr_assert_eq(engine_run(e, 1e9), 6);
    cr_assert_eq(fired, 10);
    engine_free(e);
}
