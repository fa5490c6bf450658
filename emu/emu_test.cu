/*
 * emu/emu_test.cu: the CPU emulator's own checks (build/emu/emu-test, run by
 * `make emu-quick` and `make kernels-emu`): the semantics the kernels rely
 * on, each against a value worked out by hand or on the host.
 *   - __byte_perm's selector (PTX prmt: nibble i picks byte i of the result
 *     from the 8 bytes {b, a}, a the low 4);
 *   - bf16 rounding to nearest even, NaN and infinity kept;
 *   - __shfl_xor_sync / __shfl_sync / __shfl_down_sync over a warp;
 *   - __syncthreads with shared memory across warps;
 *   - kt_mma_16816 (the emulator's mma.m16n8k16) against a host product,
 *     operands scattered by the fragment layout of cuda_common.cuh;
 *   - a launch of 2048 threads fails with cudaErrorInvalidConfiguration
 *     and leaves no sticky error;
 *   - a deadlock (half a warp at __syncthreads, half at a shuffle) stops
 *     the launch with cudaErrorLaunchFailure naming the kernel (last: the
 *     error is sticky).
 * Prints one line per failed check; exit 0 when all pass, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_common.cuh"

static int failures;

static void expect(int ok, const char *what)
{
    if (!ok) {
        printf("emu-test: FAILED: %s\n", what);
        failures++;
    }
}

__global__ void shfl_kernel(float *out)
{
    const int l = threadIdx.x;
    float v = (float)l;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(KT_FULL_MASK, v, o);
    out[l] = v;                                          /* 496 everywhere */
    out[32 + l] = __shfl_sync(KT_FULL_MASK, (float)l, 7); /* 7 */
    out[64 + l] = __shfl_down_sync(KT_FULL_MASK, (float)l, 3); /* l + 3, or l */
}

__global__ void reverse_kernel(int *out)
{
    __shared__ int s[256];
    s[threadIdx.x] = (int)threadIdx.x * 3 + (int)blockIdx.x;
    __syncthreads();
    out[blockIdx.x * 256 + threadIdx.x] = s[255 - threadIdx.x];
}

/* A (16x16) row-major and B (16x8) as B[k][n], as bf16 bits; D (16x8) */
__global__ void mma_kernel(const uint16_t *A, const uint16_t *B, float *D)
{
    const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    uint32_t a[4];
    for (int r = 0; r < 4; r++) {
        const int row = g + 8 * (r & 1), k = 2 * t + 8 * (r >> 1);
        a[r] = A[row * 16 + k] | (uint32_t)A[row * 16 + k + 1] << 16;
    }
    const uint32_t b0 = B[(2 * t) * 8 + g] | (uint32_t)B[(2 * t + 1) * 8 + g] << 16;
    const uint32_t b1 = B[(2 * t + 8) * 8 + g] | (uint32_t)B[(2 * t + 9) * 8 + g] << 16;
    float d[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    kt_mma_16816(d, a, b0, b1);
    for (int i = 0; i < 4; i++)
        D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = d[i];
}

__global__ void deadlock_kernel(float *out)
{
    if (threadIdx.x < 16)
        __syncthreads();
    else
        out[threadIdx.x] = __shfl_xor_sync(KT_FULL_MASK, 1.0f, 1);
}

static float bits2f(uint16_t h)
{
    __nv_bfloat16 b;
    b.__x = h;
    return __bfloat162float(b);
}

static void check_scalar(void)
{
    expect(__byte_perm(0x33221100u, 0x77665544u, 0x5410) == 0x55441100u, "__byte_perm 0x5410");
    expect(__byte_perm(0x33221100u, 0x77665544u, 0x7632) == 0x77663322u, "__byte_perm 0x7632");
    expect(__float2bfloat16_rn(1.0f + 0x1p-8f).__x == 0x3f80, "bf16 tie rounds to even (down)");
    expect(__float2bfloat16_rn(1.0f + 3 * 0x1p-8f).__x == 0x3f82, "bf16 tie rounds to even (up)");
    expect(__float2bfloat16_rn(1.0f + 0x1p-8f + 0x1p-20f).__x == 0x3f81, "bf16 above a tie");
    expect(__float2bfloat16_rn(INFINITY).__x == 0x7f80, "bf16 infinity");
    expect(isnan(__bfloat162float(__float2bfloat16_rn(NAN))), "bf16 NaN stays NaN");
}

static void check_kernels(void)
{
    float *f = NULL;
    int *r = NULL;
    cudaMalloc((void **)&f, 128 * sizeof(float));
    cudaMalloc((void **)&r, 2 * 256 * sizeof(int));
    shfl_kernel<<<1, 32>>>(f);
    int ok = cudaGetLastError() == cudaSuccess;
    for (int l = 0; l < 32; l++)
        ok = ok && f[l] == 496.0f && f[32 + l] == 7.0f && f[64 + l] == (l + 3 < 32 ? l + 3 : l);
    expect(ok, "warp shuffles (xor sum, broadcast, down)");
    reverse_kernel<<<2, 256>>>(r);
    ok = cudaGetLastError() == cudaSuccess;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 256; i++)
            ok = ok && r[b * 256 + i] == (255 - i) * 3 + b;
    expect(ok, "__syncthreads and __shared__ across 8 warps and 2 blocks");
    cudaFree(f);
    cudaFree(r);
}

static void check_mma(void)
{
    uint16_t A[256], B[128];
    float D[128];
    uint64_t s = 12345;
    for (int i = 0; i < 256 + 128; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float v = (float)((int)(s >> 40) % 255 - 127) / 64.0f; /* exact in bf16 */
        (i < 256 ? A[i] : B[i - 256]) = __float2bfloat16_rn(v).__x;
    }
    mma_kernel<<<1, 32>>>(A, B, D);
    int ok = cudaGetLastError() == cudaSuccess;
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 8; n++) {
            double want = 1.0;
            for (int k = 0; k < 16; k++)
                want += (double)bits2f(A[m * 16 + k]) * bits2f(B[k * 8 + n]);
            ok = ok && D[m * 8 + n] == (float)want; /* exact: few bits per term */
        }
    expect(ok, "mma.m16n8k16 against the host product");
}

static void check_errors(void)
{
    float *f = NULL;
    cudaMalloc((void **)&f, 64 * sizeof(float));
    shfl_kernel<<<1, 2048>>>(f);
    expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "2048 threads: bad configuration");
    expect(cudaDeviceSynchronize() == cudaSuccess, "a bad configuration is not sticky");
    deadlock_kernel<<<1, 32>>>(f);
    const cudaError_t e = cudaGetLastError();
    expect(e == cudaErrorLaunchFailure, "deadlock: launch failure");
    expect(strstr(cudaGetErrorString(e), "deadlock_kernel") != NULL, "deadlock: names the kernel");
    expect(cudaDeviceSynchronize() == cudaErrorLaunchFailure, "deadlock: the error is sticky");
    cudaFree(f);
}

int main(void)
{
    check_scalar();
    check_kernels();
    check_mma();
    check_errors(); /* last: leaves the sticky error */
    printf("emu-test: %s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
