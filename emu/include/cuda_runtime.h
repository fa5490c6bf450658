/*
 * emu/include/cuda_runtime.h: the part of the CUDA runtime that kernels/ and
 * validate/ use, for the CPU emulator (`make kernels-emu`).  Put first on the
 * include path, it lets the kernel sources compile unchanged as C++17 with g++;
 * emu/rewrite.sh turns `k<<<g, b>>>(args)` into `emu_launch(k, "k", g, b)(args)`.
 *
 * The model (what is emulated, what is not):
 *  - A launch runs to completion before it returns (no asynchrony, no overlap;
 *    streams and events are host-clock stamps).  Blocks run one after another
 *    on up to EMU_WORKERS OS threads (environment, default 2); each CUDA
 *    thread of a block is a fiber with its own stack (emu/emu_sched.cc).
 *  - __syncthreads() waits for every live (not exited) thread of the block;
 *    warp collectives (__shfl*_sync, __syncwarp, the mma) wait for every live
 *    lane of the warp (masks other than the full one are not modelled) and
 *    must be reached by all lanes in the same order: a collective reached by
 *    some lanes at a __syncthreads of the others, or a barrier that can never
 *    complete, is a deadlock that stops the launch with an error naming the
 *    kernel (cudaErrorLaunchFailure, sticky like a device fault).
 *  - __shared__ is static thread_local: one OS thread runs one block at a time.
 *    Dynamic shared memory (extern __shared__) is not supported (no kernel
 *    uses it; it would not compile); a launch may still name a size <= 48 KiB.
 *  - No memory model: the fibers of a block interleave only at barriers, so a
 *    data race that a GPU would expose (a missing __syncthreads) may pass here.
 *  - __expf/rsqrtf/sincosf are the C library's (correctly rounded or nearly),
 *    not the GPU's approximations; mma.m16n8k16 sums its 16 products in fp32
 *    in k order (emu_mma_m16n8k16), the tensor core's order is unspecified.
 *  - Device memory is host memory: a wrong pointer faults the process
 *    instead of returning cudaErrorIllegalAddress.
 */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <tuple>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __constant__
#define TS_EMU 1

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
static inline float2 make_float2(float a, float b) { return {a, b}; }
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }

/* the built-in variables: set by the scheduler whenever it switches fibers */
extern thread_local uint3 threadIdx, blockIdx;
extern thread_local dim3 blockDim, gridDim;

/* ---- device functions ---------------------------------------------------- */
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline size_t min(size_t a, size_t b) { return a < b ? a : b; }
static inline size_t max(size_t a, size_t b) { return a > b ? a : b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
#define __expf expf /* glibc declares its own __expf, __logf */
#define __logf logf
static inline float __fdividef(float a, float b) { return a / b; }
template <typename T> static inline T __ldg(const T *p) { return *p; }

/* byte k of the 8-byte {y, x} (x the low 4 bytes) for each selector nibble */
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s)
{
    const uint64_t v = ((uint64_t)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; i++)
        r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}

float atomicAdd(float *p, float v);
int atomicAdd(int *p, int v);
unsigned atomicAdd(unsigned *p, unsigned v);

/* ---- barriers and warp collectives (emu/emu_sched.cc) --------------------- */
void __syncthreads(void);
void __syncwarp(unsigned mask = 0xffffffffu);
/* the warp exchange under the shuffles: every live lane puts 8 bytes in,
 * returns the 8 bytes that lane src (of this warp) put in */
uint64_t emu_warp_exchange(uint64_t mine, int src);
/* D += A B for the warp's m16n8k16 fragments (cuda_common.cuh's layout) */
void emu_mma_m16n8k16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
int emu_lane(void);

template <typename T> static inline T emu_shfl(T v, int src)
{
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    uint64_t m = 0;
    memcpy(&m, &v, sizeof v);
    m = emu_warp_exchange(m, src);
    memcpy(&v, &m, sizeof v);
    return v;
}
template <typename T> static inline T __shfl_sync(unsigned, T v, int src, int w = 32)
{
    return emu_shfl(v, (emu_lane() & ~(w - 1)) + (src & (w - 1)));
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int m, int w = 32)
{
    int l = emu_lane(), s = l ^ m;
    return emu_shfl(v, (s & ~(w - 1)) == (l & ~(w - 1)) ? s : l);
}
template <typename T> static inline T __shfl_down_sync(unsigned, T v, unsigned d, int w = 32)
{
    int l = emu_lane(), s = l + (int)d;
    return emu_shfl(v, (s & ~(w - 1)) == (l & ~(w - 1)) ? s : l);
}
template <typename T> static inline T __shfl_up_sync(unsigned, T v, unsigned d, int w = 32)
{
    int l = emu_lane(), s = l - (int)d;
    return emu_shfl(v, s >= (l & ~(w - 1)) ? s : l);
}

/* ---- runtime API (emu/emu_runtime.cc) ------------------------------------- */
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100,
    cudaErrorLaunchFailure = 719,
} cudaError_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
    cudaMemcpyDeviceToDevice, cudaMemcpyDefault
};
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrL2CacheSize = 38 };
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
struct cudaDeviceProp {
    char name[256];
    int major, minor, multiProcessorCount, l2CacheSize;
    size_t totalGlobalMem;
};
typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;

#define EMU_DEVICE_NAME "tailsim CPU emulator"

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int d);
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int d);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k,
                            cudaStream_t s = 0);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s = 0);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
template <typename T>
static inline cudaError_t cudaMemcpyToSymbol(T &sym, const void *src, size_t n,
                                             size_t off = 0,
                                             cudaMemcpyKind k = cudaMemcpyHostToDevice)
{
    (void)k;
    if (off + n > sizeof sym)
        return cudaErrorInvalidValue;
    memcpy((char *)&sym + off, src, n);
    return cudaSuccess;
}

/* ---- launches ------------------------------------------------------------ */
/* the type-erased body of one launch: runs the kernel for the current thread */
struct emu_body {
    virtual void run() = 0;
    virtual ~emu_body() {}
};
/* Runs the whole grid (every block, every thread a fiber); sets the sticky or
 * the launch error on a bad configuration or a deadlock. */
void emu_run_grid(const char *name, dim3 g, dim3 b, size_t smem, emu_body *body);

template <typename... P> struct emu_launcher {
    void (*k)(P...);
    const char *name;
    dim3 g, b;
    size_t smem;
    template <typename... A> void operator()(A &&...args)
    {
        struct body : emu_body {
            void (*k)(P...);
            std::tuple<typename std::decay<P>::type...> a;
            body(void (*f)(P...), A &&...x) : k(f), a(std::forward<A>(x)...) {}
            void run() override { std::apply(k, a); }
        } bd(k, std::forward<A>(args)...);
        emu_run_grid(name, g, b, smem, &bd);
    }
};
template <typename... P>
static inline emu_launcher<P...> emu_launch(void (*k)(P...), const char *name, dim3 g,
                                            dim3 b, size_t smem = 0, cudaStream_t = 0)
{
    return emu_launcher<P...>{k, name, g, b, smem};
}

#endif
