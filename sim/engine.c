/*
 * Event queue: a binary min-heap of (time, sequence number, slot, generation)
 * entries plus a slot table holding each pending event's handler, context and
 * argument.  Event ids combine the slot index with the slot's generation, which
 * is bumped whenever the slot is released, so a stale id (event already run or
 * cancelled, slot reused) is recognised and rejected.
 *
 * Cancellation is lazy: engine_cancel() releases the slot at once (O(1)) and
 * leaves the heap entry behind; an entry whose generation no longer matches
 * its slot is dropped when it reaches the top.  Sifts therefore touch only
 * the heap array, never the slot table, which keeps them cache-friendly.
 *
 * While a handler runs, its own entry stays at the top of the heap
 * (top_stale): the first event the handler schedules takes that place with
 * one sift-down instead of a removal plus an insertion; engine_step() removes
 * the entry itself when the handler scheduled nothing.
 *
 * Cost: schedule and step O(log n), cancel O(1).  Every simulated rollout
 * iteration is one schedule + one step, so this is the hottest code in
 * tailsim: bench/bench_engine.c measures it (goal >= 1e7 events/s).
 *
 * Invariants: heap[i] <= heap[2i+1], heap[2i+2] under (t, seq); live ==
 * number of heap entries whose generation matches their slot's.
 */
#include "sim/engine.h"

#include <stdlib.h>

#include "common/err.h"

typedef struct heap_ent {
    double t;      /* s */
    uint64_t seq;  /* scheduling order, tie-breaker */
    uint32_t slot;
    uint32_t gen;  /* slot generation when scheduled */
} heap_ent;

typedef struct slot {
    engine_fn fn;
    void *ctx;
    uint64_t arg;
    uint32_t gen;       /* bumped every time the slot is released */
    uint32_t next_free;
} slot;

struct engine {
    heap_ent *heap;
    size_t n, cap;       /* heap entries, live or dead */
    size_t live;         /* pending events */
    slot *slots;
    size_t n_slots, cap_slots;
    uint32_t free_head;  /* NO_SLOT when empty */
    uint64_t seq;
    uint64_t events;
    double now;
    int stop;
    int top_stale;       /* heap[0] is the event now running, not yet removed */
};

#define NO_SLOT UINT32_MAX

static inline int ent_less(const heap_ent *a, const heap_ent *b)
{
    return (a->t < b->t) | ((a->t == b->t) & (a->seq < b->seq));
}

static inline int ent_live(const engine *e, const heap_ent *h)
{
    return e->slots[h->slot].gen == h->gen;
}

engine *engine_new(void)
{
    engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->free_head = NO_SLOT;
    return e;
}

void engine_free(engine *e)
{
    if (!e)
        return;
    free(e->heap);
    free(e->slots);
    free(e);
}

static void sift_up(heap_ent *h, size_t i)
{
    heap_ent x = h[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ent_less(&x, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

/* Branch-light sift-down: the child choice is computed, not branched on,
 * because with random event times it is unpredictable.  Needs h[n] to be
 * readable (the heap array always has one spare entry, see ensure_cap). */
static void sift_down(heap_ent *h, size_t n, size_t i)
{
    heap_ent x = h[i];
    h[n] = (heap_ent){1e308, UINT64_MAX, 0, 0}; /* sentinel: never less */
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        c += (size_t)ent_less(&h[c + 1], &h[c]);
        if (!ent_less(&h[c], &x))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static void pop_top(engine *e)
{
    e->heap[0] = e->heap[--e->n];
    if (e->n > 1)
        sift_down(e->heap, e->n, 0);
}

/* Removes the running event's entry if a handler left it at the top, then
 * drops cancelled entries from the top, so heap[0] (if any) is live. */
static void settle(engine *e)
{
    if (e->top_stale) {
        e->top_stale = 0;
        pop_top(e);
    }
    while (e->n > 0 && !ent_live(e, &e->heap[0]))
        pop_top(e);
}

static uint32_t slot_alloc(engine *e)
{
    if (e->free_head != NO_SLOT) {
        uint32_t s = e->free_head;
        e->free_head = e->slots[s].next_free;
        return s;
    }
    if (e->n_slots == e->cap_slots) {
        size_t nc = e->cap_slots ? 2 * e->cap_slots : 64;
        if (nc >= NO_SLOT)
            return NO_SLOT;
        slot *ns = realloc(e->slots, nc * sizeof *ns);
        if (!ns)
            return NO_SLOT;
        e->slots = ns;
        e->cap_slots = nc;
    }
    uint32_t s = (uint32_t)e->n_slots++;
    e->slots[s].gen = 1;
    return s;
}

static void slot_release(engine *e, uint32_t s)
{
    if (++e->slots[s].gen == 0)
        e->slots[s].gen = 1;
    e->slots[s].next_free = e->free_head;
    e->free_head = s;
}

event_id engine_schedule(engine *e, double t, engine_fn fn, void *ctx, uint64_t arg)
{
    TS_CHECK(t >= e->now && fn != NULL);
    if (e->n + 1 >= e->cap) { /* keep one spare entry for the sentinel */
        size_t nc = e->cap ? 2 * e->cap : 64;
        heap_ent *nh = realloc(e->heap, nc * sizeof *nh);
        if (!nh)
            return 0;
        e->heap = nh;
        e->cap = nc;
    }
    uint32_t s = slot_alloc(e);
    if (s == NO_SLOT)
        return 0;
    slot *sl = &e->slots[s];
    sl->fn = fn;
    sl->ctx = ctx;
    sl->arg = arg;
    heap_ent h = {t, e->seq++, s, sl->gen};
    if (e->top_stale) { /* take the running event's place */
        e->top_stale = 0;
        e->heap[0] = h;
        sift_down(e->heap, e->n, 0);
    } else {
        e->heap[e->n] = h;
        sift_up(e->heap, e->n++);
    }
    e->live++;
    return ((uint64_t)sl->gen << 32) | s;
}

int engine_cancel(engine *e, event_id id)
{
    uint32_t s = (uint32_t)(id & 0xffffffffu);
    uint32_t gen = (uint32_t)(id >> 32);
    if (id == 0 || s >= e->n_slots || e->slots[s].gen != gen)
        return -1;
    /* a released slot's gen has moved on; a pending one matches exactly */
    slot_release(e, s);
    e->live--;
    return 0;
}

int engine_step(engine *e)
{
    settle(e);
    if (e->n == 0)
        return 0;
    heap_ent top = e->heap[0];
    slot sl = e->slots[top.slot];
    slot_release(e, top.slot);
    e->live--;
    e->top_stale = 1;
    e->now = top.t;
    e->events++;
    sl.fn(e, sl.ctx, sl.arg);
    settle(e);
    return 1;
}

uint64_t engine_run(engine *e, double until)
{
    uint64_t start = e->events;
    e->stop = 0;
    settle(e);
    while (e->n > 0 && !e->stop && e->heap[0].t <= until)
        engine_step(e);
    return e->events - start;
}

void engine_stop(engine *e) { e->stop = 1; }
double engine_now(const engine *e) { return e->now; }
uint64_t engine_events(const engine *e) { return e->events; }
size_t engine_pending(const engine *e) { return e->live; }

int engine_peek(engine *e, double *t)
{
    settle(e);
    if (e->n == 0)
        return -1;
    *t = e->heap[0].t;
    return 0;
}
