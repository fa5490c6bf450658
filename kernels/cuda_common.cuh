/*
 * Shared by every .cu file under kernels/: the CUDA error macros, bf16
 * vector helpers and the tensor-core instruction wrappers.
 *
 * Errors follow llm.c's cudaCheck, but return instead of exiting (launchers
 * are library code): CUDA_CHECK(call) records "file:line: call: message" in
 * the per-thread buffer behind kt_error() and makes the enclosing function
 * return -1; after every kernel launch write CUDA_CHECK(cudaGetLastError()).
 * KT_REQUIRE(cond, fmt, ...) does the same for bad arguments.
 */
#ifndef TS_CUDA_COMMON_CUH
#define TS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* Formats the error message (printf style, prefixed by file:line) and
 * returns -1.  Defined in devutil.cu. */
extern "C" int kt_seterr(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Counts one cuBLASLt heuristic query (a plan-cache miss); blas.cu calls it
 * and devutil.cu tells kt_plan_queries_timed() whether a timed interval was
 * open.  Cannot fail. */
void kt_note_plan_query(void);

/* A test hook: 1 when the environment sets KT_TEST_SKIP_PREPLAN (to
 * anything but "" or "0"), and then step and draft planning leave out the
 * cuBLASLt plans of their GEMMs, so that the forward pass queries the
 * heuristic inside confirm's timed intervals.  It plants the violation
 * tests/test_confirm_emu.c must catch; nothing else sets it.  Read once;
 * cannot fail. */
int kt_test_skip_preplan(void);

#define CUDA_CHECK(call)                                                      \
    do {                                                                      \
        cudaError_t kt_e_ = (call);                                           \
        if (kt_e_ != cudaSuccess)                                             \
            return kt_seterr(__FILE__, __LINE__, "%s: %s (%s)", #call,        \
                             cudaGetErrorString(kt_e_), cudaGetErrorName(kt_e_)); \
    } while (0)

#define KT_REQUIRE(cond, ...)                                                 \
    do {                                                                      \
        if (!(cond))                                                          \
            return kt_seterr(__FILE__, __LINE__, __VA_ARGS__);                \
    } while (0)

typedef __nv_bfloat16 bf16;
typedef __nv_bfloat162 bf162;

#define KT_FULL_MASK 0xffffffffu

static inline unsigned kt_ceil_div(size_t a, size_t b)
{
    return (unsigned)((a + b - 1) / b);
}

/* 8 bf16 in a 16-byte vector <-> 8 floats. */
__device__ __forceinline__ void kt_unpack8(const uint4 &u, float f[8])
{
    const bf162 *h = reinterpret_cast<const bf162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 t = __bfloat1622float2(h[i]);
        f[2 * i] = t.x;
        f[2 * i + 1] = t.y;
    }
}

__device__ __forceinline__ uint4 kt_pack8(const float f[8])
{
    uint4 u;
    bf162 *h = reinterpret_cast<bf162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++)
        h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    return u;
}

/* Two floats -> one register of two bf16, lo in the low half. */
__device__ __forceinline__ uint32_t kt_pack2(float lo, float hi)
{
    bf162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&h);
}

/* D += A(16x16, row) * B(16x8, col), bf16 in, fp32 accumulate (mma.sync,
 * sm_80+).  Fragment layouts (g = lane/4, t = lane%4):
 *   a0 (row g, k 2t..2t+1)   a1 (row g+8, k 2t..)   a2 (row g, k 2t+8..)
 *   a3 (row g+8, k 2t+8..);  b0 (k 2t..2t+1, col g)  b1 (k 2t+8.., col g);
 *   d0,d1 (row g, cols 2t, 2t+1)   d2,d3 (row g+8, cols 2t, 2t+1).
 * Within a register the lower k (or col) index is the low 16 bits. */
__device__ __forceinline__ void kt_mma_16816(float d[4], const uint32_t a[4],
                                             uint32_t b0, uint32_t b1)
{
#ifdef TS_EMU /* the CPU emulator (emu/): the warp's lanes meet, D += A B in fp32 */
    emu_mma_m16n8k16(d, a, b0, b1);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

#endif
