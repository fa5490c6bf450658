/*
 * Event queue: a binary min-heap of (time, sequence number, slot) entries, plus
 * a slot table holding each pending event's handler, context and argument and
 * its current heap position (so cancel is O(log n)).  Event ids combine the
 * slot index with a per-slot generation count, so a stale id (event already
 * run or cancelled, slot reused) is recognised and rejected.
 *
 * Cost: schedule, cancel and step are O(log n) in pending events; the heap
 * keys live inline in the heap array for cache locality.  Every simulated
 * rollout iteration is one schedule + one step, so this is the hottest code
 * in tailsim: bench/bench_engine.c measures it (goal >= 1e7 events/s).
 *
 * Invariants: heap[i] <= heap[2i+1], heap[2i+2] under (t, seq); for every
 * pending slot s, heap[slots[s].pos].slot == s; free slots have pos == -1.
 */
#include "sim/engine.h"

#include <stdlib.h>

#include "common/err.h"

typedef struct heap_ent {
    double t;      /* s */
    uint64_t seq;  /* scheduling order, tie-breaker */
    uint32_t slot;
} heap_ent;

typedef struct slot {
    engine_fn fn;
    void *ctx;
    uint64_t arg;
    int64_t pos;   /* index in heap, -1 when free */
    uint32_t gen;  /* bumped every time the slot is released */
    uint32_t next_free;
} slot;

struct engine {
    heap_ent *heap;
    size_t n, cap;
    slot *slots;
    size_t n_slots, cap_slots;
    uint32_t free_head; /* UINT32_MAX when empty */
    uint64_t seq;
    uint64_t events;
    double now;
    int stop;
};

#define NO_SLOT UINT32_MAX

static inline int ent_less(const heap_ent *a, const heap_ent *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
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

static void sift_up(engine *e, size_t i)
{
    heap_ent x = e->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ent_less(&x, &e->heap[p]))
            break;
        e->heap[i] = e->heap[p];
        e->slots[e->heap[i].slot].pos = (int64_t)i;
        i = p;
    }
    e->heap[i] = x;
    e->slots[x.slot].pos = (int64_t)i;
}

static void sift_down(engine *e, size_t i)
{
    heap_ent x = e->heap[i];
    size_t n = e->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ent_less(&e->heap[c + 1], &e->heap[c]))
            c++;
        if (!ent_less(&e->heap[c], &x))
            break;
        e->heap[i] = e->heap[c];
        e->slots[e->heap[i].slot].pos = (int64_t)i;
        i = c;
    }
    e->heap[i] = x;
    e->slots[x.slot].pos = (int64_t)i;
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
    e->slots[s].pos = -1;
    e->slots[s].gen++;
    if (e->slots[s].gen == 0)
        e->slots[s].gen = 1;
    e->slots[s].next_free = e->free_head;
    e->free_head = s;
}

event_id engine_schedule(engine *e, double t, engine_fn fn, void *ctx, uint64_t arg)
{
    TS_CHECK(t >= e->now && fn != NULL);
    if (e->n == e->cap) {
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
    e->slots[s].fn = fn;
    e->slots[s].ctx = ctx;
    e->slots[s].arg = arg;
    size_t i = e->n++;
    e->heap[i] = (heap_ent){t, e->seq++, s};
    sift_up(e, i);
    return ((uint64_t)e->slots[s].gen << 32) | s;
}

/* Removes heap entry i, restoring the heap property. */
static void heap_remove(engine *e, size_t i)
{
    size_t last = --e->n;
    if (i == last)
        return;
    e->heap[i] = e->heap[last];
    e->slots[e->heap[i].slot].pos = (int64_t)i;
    if (i > 0 && ent_less(&e->heap[i], &e->heap[(i - 1) / 2]))
        sift_up(e, i);
    else
        sift_down(e, i);
}

int engine_cancel(engine *e, event_id id)
{
    uint32_t s = (uint32_t)(id & 0xffffffffu);
    uint32_t gen = (uint32_t)(id >> 32);
    if (id == 0 || s >= e->n_slots || e->slots[s].gen != gen || e->slots[s].pos < 0)
        return -1;
    heap_remove(e, (size_t)e->slots[s].pos);
    slot_release(e, s);
    return 0;
}

int engine_step(engine *e)
{
    if (e->n == 0)
        return 0;
    heap_ent top = e->heap[0];
    slot sl = e->slots[top.slot];
    heap_remove(e, 0);
    slot_release(e, top.slot);
    e->now = top.t;
    e->events++;
    sl.fn(e, sl.ctx, sl.arg);
    return 1;
}

uint64_t engine_run(engine *e, double until)
{
    uint64_t start = e->events;
    e->stop = 0;
    while (e->n > 0 && !e->stop && e->heap[0].t <= until)
        engine_step(e);
    return e->events - start;
}

void engine_stop(engine *e) { e->stop = 1; }
double engine_now(const engine *e) { return e->now; }
uint64_t engine_events(const engine *e) { return e->events; }
size_t engine_pending(const engine *e) { return e->n; }

int engine_peek(const engine *e, double *t)
{
    if (e->n == 0)
        return -1;
    *t = e->heap[0].t;
    return 0;
}
