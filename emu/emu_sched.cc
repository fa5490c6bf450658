/*
 * emu/emu_sched.cc: the emulator's scheduler.  A launch runs every block of
 * the grid; blocks are shared out to EMU_WORKERS OS threads (environment
 * variable, 1..8, default 2), each running one block at a time, so that
 * __shared__ (static thread_local) is per block.  Within a block every CUDA
 * thread is a fiber on its own stack (128 KiB, a guard page below it),
 * switched by a small x86-64 routine (callee-saved registers, MXCSR and the
 * x87 control word: what the System V ABI preserves across a call).
 *
 * A fiber runs until it waits at a barrier or exits.  __syncthreads() waits
 * for every live thread of the block; a warp collective (shuffle, syncwarp,
 * mma) writes its lane's words into the warp's slots, waits for every live
 * lane of the warp, then reads any lane's slot.  Slots alternate between two
 * sets, so that one barrier per collective suffices: a lane can reuse a set
 * only after every lane passed the barrier of the collective in between.
 * The last thread to arrive (or to exit) releases a barrier.  A sweep over
 * the block that finds no runnable fiber while some are alive is a deadlock:
 * the launch stops with cudaErrorLaunchFailure naming the kernel and block.
 */
#include <atomic>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <thread>
#include <vector>

#include "emu/emu_impl.h"

#if !defined(__x86_64__)
#error "emu: the fiber switch (emu_switch) is written for x86-64 only"
#endif

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

/* emu_switch(save, to): saves the caller's context on its stack, stores
 * the stack pointer in *save, continues the context whose pointer is to. */
extern "C" void emu_switch(void **save, void *to);
asm(".text\n.globl emu_switch\n.type emu_switch,@function\nemu_switch:\n"
    " pushq %rbp\n pushq %rbx\n pushq %r12\n pushq %r13\n pushq %r14\n pushq %r15\n"
    " subq $8, %rsp\n stmxcsr (%rsp)\n fnstcw 4(%rsp)\n"
    " movq %rsp, (%rdi)\n movq %rsi, %rsp\n"
    " ldmxcsr (%rsp)\n fldcw 4(%rsp)\n addq $8, %rsp\n"
    " popq %r15\n popq %r14\n popq %r13\n popq %r12\n popq %rbx\n popq %rbp\n ret\n"
    ".size emu_switch, .-emu_switch\n");

enum { F_RUN, F_BLOCKWAIT, F_WARPWAIT, F_DONE };
#define EMU_STACK (128u << 10)
#define EMU_MAX_THREADS 1024
#define EMU_MAX_WORKERS 8
#define EMU_SLOT_WORDS 8

struct emu_fiber {
    void *sp;
    int state;
    unsigned gen; /* warp collectives this lane has reached */
};
struct emu_warp {
    int live, waiting;
    uint32_t slot[2][32][EMU_SLOT_WORDS];
};
struct emu_block {
    emu_body *body;
    int n, live, bwait, cur;
    emu_fiber f[EMU_MAX_THREADS];
    emu_warp w[EMU_MAX_THREADS / 32];
    void *sched_sp;
    const char *fail; /* why the block stopped, NULL while fine */
};

static thread_local emu_block *g_blk;
static char *g_stacks[EMU_MAX_WORKERS];

/* ---- fibers -------------------------------------------------------------- */

static void fiber_yield(void)
{
    emu_block *b = g_blk;
    emu_switch(&b->f[b->cur].sp, b->sched_sp);
}

static void release_warp(emu_block *b, int w)
{
    unsigned gen = 0;
    int seen = 0;
    for (int i = 32 * w; i < b->n && i < 32 * w + 32; i++) {
        emu_fiber *f = &b->f[i];
        if (f->state != F_WARPWAIT)
            continue;
        if (seen++ && f->gen != gen)
            b->fail = "lanes of a warp met at different warp collectives";
        gen = f->gen;
        f->state = F_RUN;
    }
    b->w[w].waiting = 0;
}

static void release_block(emu_block *b)
{
    for (int i = 0; i < b->n; i++)
        if (b->f[i].state == F_BLOCKWAIT)
            b->f[i].state = F_RUN;
    b->bwait = 0;
}

static void fiber_entry(void)
{
    emu_block *b = g_blk;
    b->body->run();
    b = g_blk;
    emu_fiber *f = &b->f[b->cur];
    emu_warp *w = &b->w[b->cur / 32];
    f->state = F_DONE;
    b->live--;
    w->live--;
    if (w->waiting > 0 && w->waiting == w->live)
        release_warp(b, b->cur / 32);
    if (b->bwait > 0 && b->bwait == b->live)
        release_block(b);
    emu_switch(&f->sp, b->sched_sp); /* never comes back */
    abort();
}

/* A fresh context on the stack below top: emu_switch to it enters
 * fiber_entry with the stack aligned as after a call. */
static void *fiber_init(char *top)
{
    uint64_t *sp = (uint64_t *)((uintptr_t)top & ~(uintptr_t)15);
    *--sp = 0;
    *--sp = (uint64_t)(uintptr_t)fiber_entry;
    for (int i = 0; i < 6; i++)
        *--sp = 0;
    --sp;
    const uint32_t ctl[2] = {0x1f80u, 0x037fu}; /* MXCSR, x87 control word: defaults */
    memcpy(sp, ctl, sizeof ctl);
    return sp;
}

/* ---- barriers ------------------------------------------------------------ */

void __syncthreads(void)
{
    emu_block *b = g_blk;
    b->f[b->cur].state = F_BLOCKWAIT;
    if (++b->bwait == b->live)
        release_block(b);
    else
        fiber_yield();
}

/* Puts nwords of this lane into the warp's slots, waits for the warp;
 * returns the 32 lanes' slots of this collective. */
static uint32_t (*warp_collective(const uint32_t *in, int nwords))[EMU_SLOT_WORDS]
{
    emu_block *b = g_blk;
    const int lane = b->cur % 32, wi = b->cur / 32;
    emu_fiber *f = &b->f[b->cur];
    emu_warp *w = &b->w[wi];
    uint32_t(*slots)[EMU_SLOT_WORDS] = w->slot[f->gen & 1];
    memcpy(slots[lane], in, (size_t)nwords * 4);
    f->gen++;
    f->state = F_WARPWAIT;
    if (++w->waiting == w->live)
        release_warp(b, wi);
    else
        fiber_yield();
    return slots;
}

int emu_lane(void)
{
    return g_blk->cur % 32;
}

void __syncwarp(unsigned)
{
    uint32_t z = 0;
    (void)warp_collective(&z, 1);
}

uint64_t emu_warp_exchange(uint64_t mine, int src)
{
    uint32_t in[2];
    memcpy(in, &mine, 8);
    uint32_t(*s)[EMU_SLOT_WORDS] = warp_collective(in, 2);
    uint64_t r;
    memcpy(&r, s[src & 31], 8);
    return r;
}

static float bf_half(uint32_t reg, int hi)
{
    uint32_t u = (hi ? reg >> 16 : reg & 0xffffu) << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* PTX ISA, mma.m16n8k16 with .bf16 (g = lane / 4, t = lane % 4):
 * A (16x16, row): a0..a7 in 4 registers; row g for a0,a1,a4,a5 and g+8 for
 * a2,a3,a6,a7; column 2t + (i & 1) for i < 4, + 8 for i >= 4.
 * B (16x8, col): b0..b3 in 2 registers; row 2t + (i & 1) (+ 8 for i >= 2),
 * column g.  C/D (16x8): c0,c1 row g, c2,c3 row g+8; column 2t + (i & 1). */
void emu_mma_m16n8k16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    const uint32_t in[6] = {a[0], a[1], a[2], a[3], b0, b1};
    uint32_t(*s)[EMU_SLOT_WORDS] = warp_collective(in, 6);
    const int lane = emu_lane(), g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; i++) {
        const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
        float acc = d[i];
        for (int k = 0; k < 16; k++) {
            const int al = (row & 7) * 4 + (k & 7) / 2, ar = (row >> 3) + 2 * (k >> 3);
            const int bl = col * 4 + (k & 7) / 2, br = 4 + (k >> 3);
            acc += bf_half(s[al][ar], k & 1) * bf_half(s[bl][br], k & 1);
        }
        d[i] = acc;
    }
}

/* ---- blocks and grids ---------------------------------------------------- */

static void set_builtins(int i)
{
    threadIdx.x = (unsigned)i % blockDim.x;
    threadIdx.y = (unsigned)i / blockDim.x % blockDim.y;
    threadIdx.z = (unsigned)i / (blockDim.x * blockDim.y);
}

/* Runs the current block (blockIdx set) on the stacks at stacks; returns
 * NULL, or why it stopped. */
static const char *run_block(emu_block *b, char *stacks)
{
    b->live = b->n;
    b->bwait = 0;
    b->fail = NULL;
    for (int i = 0; i < b->n; i++) {
        b->f[i].sp = fiber_init(stacks + (size_t)(i + 1) * EMU_STACK);
        b->f[i].state = F_RUN;
        b->f[i].gen = 0;
    }
    for (int w = 0; w < (b->n + 31) / 32; w++) {
        b->w[w].live = b->n - 32 * w < 32 ? b->n - 32 * w : 32;
        b->w[w].waiting = 0;
    }
    g_blk = b;
    while (b->live > 0) {
        int ran = 0;
        for (int i = 0; i < b->n && !b->fail; i++) {
            if (b->f[i].state != F_RUN)
                continue;
            b->cur = i;
            set_builtins(i);
            emu_switch(&b->sched_sp, b->f[i].sp);
            ran = 1;
        }
        if (b->fail)
            return b->fail;
        if (!ran && b->live > 0)
            return "deadlock: a barrier that can never complete (threads wait at "
                   "__syncthreads and at a warp collective, or the warp's lanes diverged)";
    }
    return NULL;
}

static char *worker_stacks(int w)
{
    if (g_stacks[w])
        return g_stacks[w];
    size_t bytes = (size_t)EMU_MAX_THREADS * EMU_STACK;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    for (int i = 0; i < EMU_MAX_THREADS; i++) /* a guard page under each stack */
        mprotect((char *)p + (size_t)i * EMU_STACK, 4096, PROT_NONE);
    return g_stacks[w] = (char *)p;
}

struct grid_run {
    const char *name;
    dim3 g, b;
    emu_body *body;
    std::atomic<long long> next{0};
    std::atomic<int> failed{0};
};

static void grid_worker(grid_run *r, int w)
{
    char *stacks = worker_stacks(w);
    emu_block *blk = (emu_block *)malloc(sizeof(emu_block));
    if (!stacks || !blk) {
        free(blk);
        if (!r->failed.exchange(1))
            emu_set_error(cudaErrorMemoryAllocation, 1, "emu: no memory for fiber stacks");
        return;
    }
    blk->body = r->body;
    blk->n = (int)(r->b.x * r->b.y * r->b.z);
    blockDim = r->b;
    gridDim = r->g;
    const long long total = (long long)r->g.x * r->g.y * r->g.z;
    for (long long i; !r->failed && (i = r->next++) < total;) {
        blockIdx.x = (unsigned)(i % r->g.x);
        blockIdx.y = (unsigned)(i / r->g.x % r->g.y);
        blockIdx.z = (unsigned)(i / ((long long)r->g.x * r->g.y));
        const char *why = run_block(blk, stacks);
        if (why && !r->failed.exchange(1))
            emu_set_error(cudaErrorLaunchFailure, 1, "emu: kernel %s, block (%u,%u,%u): %s",
                          r->name, blockIdx.x, blockIdx.y, blockIdx.z, why);
    }
    free(blk);
}

static int workers(void)
{
    static int n;
    if (!n) {
        const char *e = getenv("EMU_WORKERS");
        int v = e ? atoi(e) : 2;
        n = v < 1 ? 1 : v > EMU_MAX_WORKERS ? EMU_MAX_WORKERS : v;
    }
    return n;
}

void emu_run_grid(const char *name, dim3 g, dim3 b, size_t smem, emu_body *body)
{
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (threads == 0 || threads > EMU_MAX_THREADS || b.z > 64 || g.x == 0 || g.y == 0 ||
        g.z == 0 || g.y > 65535 || g.z > 65535 || g.x > 0x7fffffffu) {
        emu_set_error(cudaErrorInvalidConfiguration, 0,
                      "emu: kernel %s: bad launch configuration grid (%u,%u,%u) block (%u,%u,%u)",
                      name, g.x, g.y, g.z, b.x, b.y, b.z);
        return;
    }
    if (smem > 48 * 1024) {
        emu_set_error(cudaErrorInvalidValue, 0, "emu: kernel %s: %zu bytes of dynamic shared "
                      "memory (48 KiB without opt-in)", name, smem);
        return;
    }
    if (emu_sticky_error() != cudaSuccess)
        return;
    grid_run r;
    r.name = name;
    r.g = g;
    r.b = b;
    r.body = body;
    const long long total = (long long)g.x * g.y * g.z;
    int nw = workers() < total ? workers() : (int)total;
    if (nw <= 1) {
        grid_worker(&r, 0);
        return;
    }
    std::vector<std::thread> t;
    for (int w = 0; w < nw; w++)
        t.emplace_back(grid_worker, &r, w);
    for (auto &x : t)
        x.join();
}

/* ---- atomics ------------------------------------------------------------- */

float atomicAdd(float *p, float v)
{
    uint32_t *u = (uint32_t *)p, old = __atomic_load_n(u, __ATOMIC_RELAXED), nu;
    float f;
    do {
        memcpy(&f, &old, 4);
        f += v;
        memcpy(&nu, &f, 4);
    } while (!__atomic_compare_exchange_n(u, &old, nu, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    memcpy(&f, &old, 4);
    return f;
}

int atomicAdd(int *p, int v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

unsigned atomicAdd(unsigned *p, unsigned v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
