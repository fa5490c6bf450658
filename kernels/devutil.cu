/*
 * Device plumbing for the validation program: the error buffer behind
 * kt_error(), opening the device, clocks through NVML, memory and copies,
 * device-side random fill, the timing harness (CUDA events, L2 flushed before
 * every repeat) and the host helpers the per-op selftests share (a seeded RNG,
 * bf16 conversions, the tolerance comparison).  Not an op, so it has no
 * "C reference" section; every other kernel file builds on it.
 *
 * Build: part of `make validate` (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 * -gencode=arch=compute_90,code=compute_90).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_common.cuh"
#include "kernels/ref/kref.h"

/* ---- errors -------------------------------------------------------------- */

static thread_local char kt_errbuf[512];

extern "C" int kt_seterr(const char *file, int line, const char *fmt, ...)
{
    int n = snprintf(kt_errbuf, sizeof kt_errbuf, "%s:%d: ", file, line);
    if (n < 0 || (size_t)n >= sizeof kt_errbuf)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kt_errbuf + n, sizeof kt_errbuf - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

extern "C" const char *kt_error(void)
{
    return kt_errbuf;
}

/* ---- device -------------------------------------------------------------- */

extern "C" int kt_device_open(kt_device *d)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        kt_seterr(__FILE__, __LINE__, "cudaGetDeviceCount: %s",
                  e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
        (void)cudaGetLastError(); /* clear the sticky-free error */
        return 0;
    }
    CUDA_CHECK(cudaSetDevice(0));
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", p.name);
    d->cc_major = p.major;
    d->cc_minor = p.minor;
    d->sms = p.multiProcessorCount;
    d->l2_bytes = (size_t)p.l2CacheSize;
    d->mem_bytes = p.totalGlobalMem;
    return 1;
}

/* NVML through dlopen, so that the program links without the driver. */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_by_bus_fn)(const char *, void **);
typedef int (*nvml_clock_fn)(void *, int, unsigned *);

extern "C" int kt_clocks(int *sm_mhz, int *mem_mhz)
{
    static int state; /* 0 untried, 1 ready, -1 unavailable */
    static void *dev;
    static nvml_clock_fn get_clock;
    *sm_mhz = *mem_mhz = 0;
    if (state == 0) {
        state = -1;
        void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
        if (!lib)
            return kt_seterr(__FILE__, __LINE__, "NVML: %s", dlerror());
        nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
        nvml_by_bus_fn by_bus =
            (nvml_by_bus_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
        get_clock = (nvml_clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo");
        char bus[64];
        if (!init || !by_bus || !get_clock || init() != 0 ||
            cudaDeviceGetPCIBusId(bus, sizeof bus, 0) != cudaSuccess ||
            by_bus(bus, &dev) != 0)
            return kt_seterr(__FILE__, __LINE__, "NVML: cannot open the device");
        state = 1;
    }
    if (state < 0)
        return -1;
    unsigned sm = 0, mem = 0;
    /* NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 */
    if (get_clock(dev, 1, &sm) != 0 || get_clock(dev, 2, &mem) != 0)
        return kt_seterr(__FILE__, __LINE__, "NVML: nvmlDeviceGetClockInfo failed");
    *sm_mhz = (int)sm;
    *mem_mhz = (int)mem;
    return 0;
}

/* ---- memory -------------------------------------------------------------- */

/* cudaMalloc and cudaFree calls made through kt_malloc, kt_free and the
 * block cache (kt_device_alloc_calls); single-threaded host, as above. */
static long long alloc_calls;

static int malloc_checked(void **p, size_t bytes, int pinned)
{
    if (pinned) {
        CUDA_CHECK(cudaMallocHost(p, bytes ? bytes : 1));
    } else {
        alloc_calls++;
        CUDA_CHECK(cudaMalloc(p, bytes ? bytes : 1));
    }
    return 0;
}

/* Device memory, or pinned host memory; NULL with the error set. */
static void *alloc_or_null(size_t bytes, int pinned)
{
    void *p = NULL;
    if (malloc_checked(&p, bytes, pinned)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kt_errbuf);
        kt_seterr(__FILE__, __LINE__, "allocating %zu %sbytes: %s", bytes,
                  pinned ? "pinned host " : "", msg);
        return NULL;
    }
    return p;
}

extern "C" void *kt_malloc(size_t bytes)
{
    return alloc_or_null(bytes, 0);
}

extern "C" void kt_free(void *d)
{
    if (d) {
        alloc_calls++;
        (void)cudaFree(d);
    }
}

extern "C" long long kt_device_alloc_calls(void) { return alloc_calls; }

/* The block cache behind kt_scratch_get/put: every block it ever allocated,
 * free or lent out.  A few dozen at most (one or two per live step plan), so
 * lookups are linear. */
typedef struct scratch_blk {
    void *p;
    size_t bytes;   /* allocated size: a power of two >= 4 KiB */
    int lent;       /* 1 between kt_scratch_get and kt_scratch_put */
} scratch_blk;
static scratch_blk *scratch;
static int scratch_n, scratch_cap;

/* Returns the cached blocks nobody holds to CUDA (after a failed
 * allocation, and at kt_close). */
static void scratch_trim(void)
{
    int k = 0;
    for (int i = 0; i < scratch_n; i++) {
        if (scratch[i].lent)
            scratch[k++] = scratch[i];
        else
            kt_free(scratch[i].p);
    }
    scratch_n = k;
}

extern "C" void *kt_scratch_get(size_t bytes)
{
    int best = -1;
    for (int i = 0; i < scratch_n; i++)
        if (!scratch[i].lent && scratch[i].bytes >= bytes &&
            (best < 0 || scratch[i].bytes < scratch[best].bytes))
            best = i;
    if (best >= 0) {
        scratch[best].lent = 1;
        return scratch[best].p;
    }
    if (scratch_n == scratch_cap) {
        int cap = scratch_cap ? 2 * scratch_cap : 32;
        scratch_blk *nb = (scratch_blk *)realloc(scratch, cap * sizeof *nb);
        if (!nb) {
            kt_seterr(__FILE__, __LINE__, "block cache: out of host memory");
            return NULL;
        }
        scratch = nb;
        scratch_cap = cap;
    }
    size_t sz = 4096;
    while (sz < bytes)
        sz *= 2;
    void *p = kt_malloc(sz);
    if (!p) { /* the idle blocks may be what is missing */
        scratch_trim();
        p = kt_malloc(sz);
        if (!p)
            return NULL;
    }
    scratch[scratch_n].p = p;
    scratch[scratch_n].bytes = sz;
    scratch[scratch_n++].lent = 1;
    return p;
}

extern "C" void kt_scratch_put(void *d)
{
    if (!d)
        return;
    for (int i = 0; i < scratch_n; i++)
        if (scratch[i].p == d) {
            scratch[i].lent = 0;
            return;
        }
    kt_free(d); /* not from the cache: cannot happen, but do not leak it */
}

extern "C" void *kt_host_malloc(size_t bytes)
{
    return alloc_or_null(bytes, 1);
}

extern "C" void kt_host_free(void *h)
{
    if (h)
        (void)cudaFreeHost(h);
}

extern "C" int kt_copy_h2d(void *d_dst, const void *h_src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(d_dst, h_src, bytes, cudaMemcpyHostToDevice, 0));
    return 0;
}

extern "C" int kt_copy_d2h(void *h_dst, const void *d_src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(h_dst, d_src, bytes, cudaMemcpyDeviceToHost, 0));
    return 0;
}

extern "C" int kt_upload(void *d_dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(d_dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}

extern "C" int kt_download(void *dst, const void *d_src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, d_src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

extern "C" int kt_sync(void)
{
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int kt_copy(void *d_dst, const void *d_src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(d_dst, d_src, bytes, cudaMemcpyDeviceToDevice, 0));
    return 0;
}

extern "C" int kt_upload_bf16(kt_bf16 *d_dst, const float *src, size_t n)
{
    kt_bf16 *h = (kt_bf16 *)malloc((n ? n : 1) * sizeof *h);
    KT_REQUIRE(h, "out of host memory for %zu bf16 values", n);
    for (size_t i = 0; i < n; i++)
        h[i] = kref_f2bf(src[i]);
    int rc = kt_upload(d_dst, h, n * sizeof *h);
    free(h);
    return rc;
}

extern "C" int kt_download_bf16(float *dst, const kt_bf16 *d_src, size_t n)
{
    kt_bf16 *h = (kt_bf16 *)malloc((n ? n : 1) * sizeof *h);
    KT_REQUIRE(h, "out of host memory for %zu bf16 values", n);
    int rc = kt_download(h, d_src, n * sizeof *h);
    for (size_t i = 0; rc == 0 && i < n; i++)
        dst[i] = kref_bf2f(h[i]);
    free(h);
    return rc;
}

/* ---- kernels: random fill and L2 flush ----------------------------------- */

__host__ __device__ static inline uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__global__ void fill_bf16_kernel(bf16 *p, size_t n, uint64_t seed, float scale)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint64_t h = splitmix64(seed ^ splitmix64(i));
        /* odd numerator over 2^24: never exactly zero */
        float u = (float)((int64_t)((h >> 40) * 2 + 1) - (1ll << 24)) * 0x1p-24f;
        p[i] = __float2bfloat16_rn(u * scale);
    }
}

__global__ void flush_kernel(uint4 *p, size_t n, unsigned salt)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = make_uint4(salt, (unsigned)i, salt, (unsigned)i);
}

extern "C" int kt_fill_bf16(kt_bf16 *d, size_t n, uint64_t seed, float scale)
{
    if (n == 0)
        return 0;
    unsigned blocks = kt_ceil_div(n, 256);
    if (blocks > 65536)
        blocks = 65536;
    fill_bf16_kernel<<<blocks, 256>>>((bf16 *)d, n, seed, scale);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

/* ---- timing -------------------------------------------------------------- */

static uint4 *flush_buf;
static size_t flush_n;

/* The timed interval of kt_time (open between the first and the last event
 * record of the timed repeats) and the plan queries counted by blas.cu.  The
 * validation program is single-threaded on the host. */
static int timing_open;
static long long plan_queries, plan_queries_timed;

void kt_note_plan_query(void)
{
    plan_queries++;
    if (timing_open)
        plan_queries_timed++;
}

int kt_test_skip_preplan(void)
{
    static int skip = -1;
    if (skip < 0) {
        const char *v = getenv("KT_TEST_SKIP_PREPLAN");
        skip = v && *v && strcmp(v, "0") != 0;
    }
    return skip;
}

extern "C" long long kt_plan_queries(void) { return plan_queries; }
extern "C" long long kt_plan_queries_timed(void) { return plan_queries_timed; }

static int flush_l2(unsigned salt)
{
    if (!flush_buf) {
        int dev = 0, l2 = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        size_t bytes = 3 * (size_t)(l2 > (16 << 20) ? l2 : (16 << 20));
        alloc_calls++;
        CUDA_CHECK(cudaMalloc((void **)&flush_buf, bytes));
        flush_n = bytes / sizeof(uint4);
    }
    flush_kernel<<<1024, 256>>>(flush_buf, flush_n, salt);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" void kt_close(void)
{
    kt_free(flush_buf);
    flush_buf = NULL;
    flush_n = 0;
    scratch_trim();
    if (scratch_n == 0) {
        free(scratch);
        scratch = NULL;
        scratch_cap = 0;
    }
}

extern "C" int kt_time(kt_launch_fn fn, void *ctx, int warmup, int reps, float *us)
{
    KT_REQUIRE(reps >= 1 && reps <= 1000, "kt_time: reps %d not in 1..1000", reps);
    for (int i = 0; i < warmup; i++)
        if (fn(ctx))
            return -1;
    cudaEvent_t ev[2000];
    int made = 0, rc = -1;
    for (; made < 2 * reps; made++)
        if (cudaEventCreate(&ev[made]) != cudaSuccess) {
            kt_seterr(__FILE__, __LINE__, "cudaEventCreate failed");
            goto cleanup;
        }
    timing_open = 1; /* until the last event is recorded (or an error) */
    for (int r = 0; r < reps; r++) {
        if (flush_l2((unsigned)r + 1))
            goto cleanup;
        if (cudaEventRecord(ev[2 * r], 0) != cudaSuccess) {
            kt_seterr(__FILE__, __LINE__, "cudaEventRecord failed");
            goto cleanup;
        }
        if (fn(ctx)) /* fn set the message */
            goto cleanup;
        if (cudaEventRecord(ev[2 * r + 1], 0) != cudaSuccess) {
            kt_seterr(__FILE__, __LINE__, "cudaEventRecord failed");
            goto cleanup;
        }
    }
    timing_open = 0;
    {
        /* the error of any launch above shows here: report the one returned
         * (cudaGetLastError() may hold nothing for an asynchronous fault) */
        cudaError_t se = cudaEventSynchronize(ev[2 * reps - 1]);
        if (se != cudaSuccess) {
            kt_seterr(__FILE__, __LINE__, "cudaEventSynchronize: %s (%s)",
                      cudaGetErrorString(se), cudaGetErrorName(se));
            goto cleanup;
        }
    }
    for (int r = 0; r < reps; r++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]) != cudaSuccess) {
            kt_seterr(__FILE__, __LINE__, "cudaEventElapsedTime failed");
            goto cleanup;
        }
        us[r] = ms * 1000.0f;
    }
    rc = 0;
cleanup:
    timing_open = 0;
    for (int i = 0; i < made; i++)
        (void)cudaEventDestroy(ev[i]);
    return rc;
}

/* ---- host helpers for selftests ------------------------------------------ */

extern "C" void kt_rng_seed(kt_rng *r, uint64_t seed)
{
    r->s = splitmix64(seed);
}

extern "C" uint64_t kt_rng_next(kt_rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    return splitmix64(r->s);
}

extern "C" int kt_rng_int(kt_rng *r, int lo, int hi)
{
    return lo + (int)(kt_rng_next(r) % (uint64_t)(hi - lo + 1));
}

extern "C" void kt_rand_bf16(kt_rng *r, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t h = kt_rng_next(r);
        double u = (double)((int64_t)((h >> 40) * 2 + 1) - (1ll << 24)) * 0x1p-24;
        x[i] = kref_bf16_round((float)(u * scale));
    }
}

extern "C" size_t kt_compare(FILE *log, const char *what, const float *ref,
                             const float *got, size_t n, double abs_tol, double eps)
{
    size_t bad = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]);
        double tol = abs_tol + fabs(ref[i]) * eps;
        if (!(err <= tol)) { /* NaN fails too */
            if (bad < 5)
                fprintf(log, "  %s: mismatch at %zu: ref %.6g got %.6g (tol %.3g)\n",
                        what, i, (double)ref[i], (double)got[i], tol);
            bad++;
        }
        if (err / (tol > 0 ? tol : 1.0) > worst)
            worst = err / (tol > 0 ? tol : 1.0);
    }
    fprintf(log, "  %s: %zu values, %zu mismatches, worst error %.2f of tolerance\n",
            what, n, bad, worst);
    return bad;
}

extern "C" double kt_rms(const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return n ? sqrt(s / n) : 0.0;
}

extern "C" double kt_tol(double rms, int stages, double k)
{
    return KT_TOL_Z * rms * (KREF_BF16_EPS * sqrt((double)stages) + 0x1p-24 * k);
}

static int selftest_small;

extern "C" void kt_selftest_set_small(int on)
{
    selftest_small = on != 0;
}

extern "C" int kt_selftest_small(void)
{
    return selftest_small;
}
