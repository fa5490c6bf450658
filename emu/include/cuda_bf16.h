/*
 * emu/include/cuda_bf16.h: bfloat16 for the CPU emulator.  The bit pattern
 * (the upper 16 bits of an IEEE float), conversion from float rounding to
 * nearest even with NaN kept a (quiet) NaN, exact conversion to float, and
 * the conversions kernels/ use.  No bf16 arithmetic operators: the kernels
 * convert to float first.
 */
#ifndef EMU_CUDA_BF16_H
#define EMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

#include "cuda_runtime.h"

struct __nv_bfloat16 {
    unsigned short __x;
};
struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a quiet NaN */
        r.__x = (unsigned short)((u >> 16) | 0x40u);
    else
        r.__x = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return r;
}

static inline float __bfloat162float(__nv_bfloat16 h)
{
    uint32_t u = (uint32_t)h.__x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi)
{
    return {__float2bfloat16_rn(lo), __float2bfloat16_rn(hi)};
}

static inline float2 __bfloat1622float2(__nv_bfloat162 h)
{
    return {__bfloat162float(h.x), __bfloat162float(h.y)};
}

#endif
