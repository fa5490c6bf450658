/*
 * Discrete-event engine: a binary-heap event queue ordered by (time, sequence
 * number), so events at equal times run in the order they were scheduled and
 * every run is deterministic.  Time is double seconds.
 *
 * Models plug in through handlers of one exact type; the engine passes back
 * the context pointer and the 64-bit argument given at scheduling time.
 * Handlers may schedule and cancel events (including their own kind) freely.
 *
 * Ownership: engine_new() allocates, engine_free() releases (NULL is a no-op).
 */
#ifndef TS_ENGINE_H
#define TS_ENGINE_H

#include <stddef.h>
#include <stdint.h>

typedef struct engine engine;

/* The one handler signature.  `ctx` and `arg` are what engine_schedule got. */
typedef void (*engine_fn)(engine *e, void *ctx, uint64_t arg);

/* Event handle: 0 is never a valid id. */
typedef uint64_t event_id;

/* Returns a new engine at time 0, or NULL on allocation failure. */
engine *engine_new(void);
void engine_free(engine *e);

/* Schedules fn(e, ctx, arg) at absolute time t (t >= engine_now(e), checked).
 * Returns the event's id, or 0 on allocation failure. */
event_id engine_schedule(engine *e, double t, engine_fn fn, void *ctx, uint64_t arg);

/* Removes a pending event (O(1)).  Returns 0, or -1 when the id is not pending
 * (already run, already cancelled, or never issued). */
int engine_cancel(engine *e, event_id id);

/* Runs the earliest event.  Returns 1 when one ran, 0 when the queue is empty. */
int engine_step(engine *e);

/* Runs events until the queue is empty, engine_stop() is called, or the next
 * event lies after `until` (the clock then stays at the last event run).
 * Returns the number of events run by this call. */
uint64_t engine_run(engine *e, double until);

/* Asks engine_run() to return after the current handler. */
void engine_stop(engine *e);

double engine_now(const engine *e);       /* s */
uint64_t engine_events(const engine *e);  /* events run since engine_new() */
size_t engine_pending(const engine *e);   /* events waiting */
/* Time of the earliest pending event; returns 0 and sets *t, or -1 if none. */
int engine_peek(engine *e, double *t);

#endif
