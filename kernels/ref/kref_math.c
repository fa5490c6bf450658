/*
 * Reference implementations of the dense and row-wise operations of a
 * decoder layer: bf16 rounding, GEMM, RMSNorm, RoPE, SwiGLU and the embedding
 * gather.  They define what kernels/gemm_lt.cu, rmsnorm.cu, rope.cu,
 * swiglu.cu and embed.cu compute.  Sums are accumulated in double so that the
 * reference is more precise than any kernel it judges; loops are the obvious
 * ones, O(m n k) for the GEMM.  Nothing allocates; see kref.h for layouts.
 */
#include "kernels/ref/kref.h"

#include <math.h>
#include <string.h>

uint16_t kref_f2bf(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
        return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep it quiet */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb; /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float kref_bf2f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

float kref_bf16_round(float x)
{
    return kref_bf2f(kref_f2bf(x));
}

void kref_round_bf16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = kref_bf16_round(x[i]);
}

void kref_gemm_nt(const float *A, const float *B, float *C, int m, int n, int k)
{
    for (int i = 0; i < m; i++) {
        const float *a = A + (size_t)i * k;
        for (int j = 0; j < n; j++) {
            const float *b = B + (size_t)j * k;
            double s = 0.0;
            for (int l = 0; l < k; l++)
                s += (double)a[l] * b[l];
            C[(size_t)i * n + j] = (float)s;
        }
    }
}

void kref_gemm_nn(const float *A, const float *B, float *C, int m, int n, int k)
{
    for (int i = 0; i < m; i++) {
        const float *a = A + (size_t)i * k;
        for (int j = 0; j < n; j++) {
            double s = 0.0;
            for (int l = 0; l < k; l++)
                s += (double)a[l] * B[(size_t)l * n + j];
            C[(size_t)i * n + j] = (float)s;
        }
    }
}

void kref_rmsnorm(const float *x, const float *w, float *out, int rows, int dim,
                  float eps)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        double ss = 0.0;
        for (int i = 0; i < dim; i++)
            ss += (double)xr[i] * xr[i];
        double inv = 1.0 / sqrt(ss / dim + (double)eps);
        for (int i = 0; i < dim; i++)
            out[(size_t)r * dim + i] = (float)(xr[i] * inv * w[i]);
    }
}

void kref_rope(float *x, const int *pos, int tokens, int heads, int hd,
               double theta)
{
    int half = hd / 2;
    for (int t = 0; t < tokens; t++) {
        for (int h = 0; h < heads; h++) {
            float *v = x + ((size_t)t * heads + h) * hd;
            for (int i = 0; i < half; i++) {
                double inv_freq = pow(theta, -2.0 * i / hd);
                double a = (double)pos[t] * inv_freq;
                double c = cos(a), s = sin(a);
                double x1 = v[i], x2 = v[i + half];
                v[i] = (float)(x1 * c - x2 * s);
                v[i + half] = (float)(x2 * c + x1 * s);
            }
        }
    }
}

void kref_swiglu(const float *gate_up, float *out, int rows, int ffn)
{
    for (int r = 0; r < rows; r++) {
        const float *g = gate_up + (size_t)r * 2 * ffn;
        const float *u = g + ffn;
        for (int i = 0; i < ffn; i++) {
            double gi = g[i];
            out[(size_t)r * ffn + i] = (float)(gi / (1.0 + exp(-gi)) * u[i]);
        }
    }
}

int kref_embed(const float *table, int vocab, int dim, const int *ids, int n,
               float *out)
{
    for (int t = 0; t < n; t++)
        if (ids[t] < 0 || ids[t] >= vocab)
            return -1;
    for (int t = 0; t < n; t++)
        memcpy(out + (size_t)t * dim, table + (size_t)ids[t] * dim,
               (size_t)dim * sizeof *out);
    return 0;
}
