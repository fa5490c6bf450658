/*
 * emu/emu_runtime.cc: the CUDA runtime API of the CPU emulator.  One device,
 * EMU_DEVICE_NAME; device memory is 256-byte aligned host memory; every copy
 * is memcpy, every call synchronous (streams are accepted and ignored);
 * events read the host's monotonic clock when recorded.  Errors follow CUDA:
 * cudaGetLastError returns and clears the last one; a sticky error (a
 * failed launch) is returned by every later synchronising call.
 */
#include <mutex>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "emu/emu_impl.h"

static std::mutex g_mu;
static cudaError_t g_last = cudaSuccess, g_sticky = cudaSuccess;
static char g_detail[512];

void emu_set_error(cudaError_t e, int sticky, const char *fmt, ...)
{
    std::lock_guard<std::mutex> lk(g_mu);
    g_last = e;
    if (sticky)
        g_sticky = e;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_detail, sizeof g_detail, fmt, ap);
    va_end(ap);
}

cudaError_t emu_sticky_error(void)
{
    std::lock_guard<std::mutex> lk(g_mu);
    return g_sticky;
}

/* the sticky error, or e */
static cudaError_t ret(cudaError_t e)
{
    cudaError_t s = emu_sticky_error();
    return s != cudaSuccess ? s : e;
}

cudaError_t cudaGetLastError(void)
{
    std::lock_guard<std::mutex> lk(g_mu);
    cudaError_t e = g_sticky != cudaSuccess ? g_sticky : g_last;
    g_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    std::lock_guard<std::mutex> lk(g_mu);
    return g_sticky != cudaSuccess ? g_sticky : g_last;
}

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

/* the detail of the last error set for e (the kernel, why), else its name */
const char *cudaGetErrorString(cudaError_t e)
{
    static thread_local char buf[512];
    std::lock_guard<std::mutex> lk(g_mu);
    if (e != cudaSuccess && (e == g_last || e == g_sticky) && g_detail[0])
        snprintf(buf, sizeof buf, "%s", g_detail);
    else
        snprintf(buf, sizeof buf, "%s", e == cudaSuccess ? "no error" : cudaGetErrorName(e));
    return buf;
}

/* ---- device -------------------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    return d == 0 ? ret(cudaSuccess) : cudaErrorInvalidValue;
}

cudaError_t cudaGetDevice(int *d)
{
    *d = 0;
    return ret(cudaSuccess);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
    if (d != 0)
        return cudaErrorInvalidValue;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", EMU_DEVICE_NAME);
    p->major = 9; /* what the kernels are written for (sm_90) */
    p->minor = 0;
    p->multiProcessorCount = 2;
    p->l2CacheSize = 1 << 20;
    p->totalGlobalMem = (size_t)8 << 30;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int d)
{
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess)
        return cudaErrorInvalidValue;
    if (a == cudaDevAttrMultiProcessorCount)
        *v = p.multiProcessorCount;
    else if (a == cudaDevAttrL2CacheSize)
        *v = p.l2CacheSize;
    else
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d)
{
    if (d != 0 || len < 1)
        return cudaErrorInvalidValue;
    snprintf(bus, (size_t)len, "emu");
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    *free_b = *total_b = (size_t)8 << 30;
    return ret(cudaSuccess);
}

/* ---- memory -------------------------------------------------------------- */

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    *p = NULL;
    if (posix_memalign(p, 256, bytes ? (bytes + 255) / 256 * 256 : 256)) {
        *p = NULL;
        emu_set_error(cudaErrorMemoryAllocation, 0, "emu: out of memory (%zu bytes)", bytes);
        return cudaErrorMemoryAllocation;
    }
    return ret(cudaSuccess);
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    return cudaMalloc(p, bytes);
}

cudaError_t cudaFree(void *p)
{
    free(p);
    return ret(cudaSuccess);
}

cudaError_t cudaFreeHost(void *p)
{
    return cudaFree(p);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind)
{
    if (emu_sticky_error() != cudaSuccess)
        return emu_sticky_error();
    if (n)
        memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t)
{
    return cudaMemcpy(dst, src, n, k);
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
    if (emu_sticky_error() != cudaSuccess)
        return emu_sticky_error();
    memset(p, v, n);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t)
{
    return cudaMemset(p, v, n);
}

cudaError_t cudaDeviceSynchronize(void)
{
    return ret(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t)
{
    return ret(cudaSuccess);
}

/* ---- events: host clock stamps ------------------------------------------- */

struct emu_event {
    double ms;
    int recorded;
};

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    *e = (emu_event *)calloc(1, sizeof(emu_event));
    return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->ms = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
    e->recorded = 1;
    return ret(cudaSuccess);
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    return e->recorded ? ret(cudaSuccess) : cudaErrorInvalidValue;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a->recorded || !b->recorded)
        return cudaErrorInvalidValue;
    *ms = (float)(b->ms - a->ms);
    return ret(cudaSuccess);
}
