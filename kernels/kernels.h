/*
 * C interface of the CUDA kernels (the .cu files under kernels/), for the
 * validation program (validate/), which is plain C11 and never includes a
 * CUDA header.  Pointers named d_* are device memory; bf16 tensors are
 * passed as kt_bf16 (the bit pattern, uint16_t).  Everything runs on the
 * default stream of device 0.
 *
 * Errors: every function returning int returns 0 on success and -1 on
 * failure, and every function returning a pointer returns NULL on failure;
 * kt_error() then holds one line naming the CUDA call, file and line that
 * failed.  No function exits.  Objects made by kt_*_new / kt_attn_plan are
 * freed by the matching kt_*_free, which accepts NULL.
 *
 * Shapes and layouts are those of the C references (kernels/ref/kref.h).
 * Each op also has kt_<op>_selftest(seed, log): it runs the kernel on seeded
 * random data, compares with the reference (tolerance abs + |ref| * eps(bf16))
 * and prints the first few mismatches to log.  It returns 0 when all values
 * pass, 1 on a mismatch and -1 on a CUDA error.
 */
#ifndef TS_KERNELS_H
#define TS_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t kt_bf16;

/* ---- device, memory, errors (devutil.cu) -------------------------------- */

const char *kt_error(void); /* last error message, "" when none */

typedef struct kt_device {
    char name[256];
    int cc_major, cc_minor;
    int sms;                /* streaming multiprocessors */
    size_t l2_bytes;        /* L2 cache, bytes */
    size_t mem_bytes;       /* device memory, bytes */
} kt_device;

/* Opens device 0.  Returns 1 with d filled, 0 when there is no usable CUDA
 * device or driver (kt_error() says why), -1 on any other failure. */
int kt_device_open(kt_device *d);

/* Frees what the kt_* functions keep between calls (the L2 flush buffer).
 * Call once at the end; cannot fail. */
void kt_close(void);

/* Current SM and memory clocks in MHz, read through NVML (loaded at run
 * time).  Returns 0, or -1 with both set to 0 when NVML is unavailable. */
int kt_clocks(int *sm_mhz, int *mem_mhz);

void *kt_malloc(size_t bytes);  /* cudaMalloc; NULL on failure */
void kt_free(void *d);          /* NULL is a no-op */
int kt_upload(void *d_dst, const void *src, size_t bytes);
int kt_download(void *dst, const void *d_src, size_t bytes);
int kt_sync(void);              /* waits for the device; reports async errors */
/* Device-to-device copy on the default stream (asynchronous). */
int kt_copy(void *d_dst, const void *d_src, size_t bytes);

/* Fills n bf16 values with U(-scale, scale), never zero, from (seed, index)
 * on the device: the same seed gives the same data. */
int kt_fill_bf16(kt_bf16 *d, size_t n, uint64_t seed, float scale);

/* Host <-> device copies converting float <-> bf16 (round to nearest even). */
int kt_upload_bf16(kt_bf16 *d_dst, const float *src, size_t n);
int kt_download_bf16(float *dst, const kt_bf16 *d_src, size_t n);

/* ---- timing (devutil.cu) ------------------------------------------------- */

/* A launch callback: enqueues the op on the default stream, 0 or -1. */
typedef int (*kt_launch_fn)(void *ctx);

/* Runs fn warmup times, then reps times, each rep preceded by a write of a
 * buffer three times the L2 size (so every rep starts with a cold L2), and
 * timed alone between two CUDA events.  us[0..reps-1] receive microseconds. */
int kt_time(kt_launch_fn fn, void *ctx, int warmup, int reps, float *us);

/* ---- host helpers for selftests (devutil.cu) ----------------------------- */

typedef struct kt_rng {
    uint64_t s;
} kt_rng;
void kt_rng_seed(kt_rng *r, uint64_t seed);
uint64_t kt_rng_next(kt_rng *r);
int kt_rng_int(kt_rng *r, int lo, int hi); /* uniform in [lo, hi] */
/* n floats from U(-scale, scale), never zero, rounded to bf16. */
void kt_rand_bf16(kt_rng *r, float *x, size_t n, float scale);
/* Counts |got - ref| > abs_tol + |ref| * eps (NaN always counts) and prints
 * the first five with index and both values, then a summary line. */
size_t kt_compare(FILE *log, const char *what, const float *ref,
                  const float *got, size_t n, double abs_tol, double eps);
/* Root mean square of x: the natural abs tolerance scale of an output. */
double kt_rms(const float *x, size_t n);

/* ---- GEMM (gemm_lt.cu) --------------------------------------------------- */

typedef struct kt_gemm kt_gemm;
kt_gemm *kt_gemm_new(void);
void kt_gemm_free(kt_gemm *g);
/* Chooses cuBLASLt's algorithm for C[m,n] = A[m,k] · W[n,k]^T (host work:
 * call it outside timed regions). */
int kt_gemm_plan(kt_gemm *g, int m, int n, int k);
/* Runs the planned shape: bf16 in and out, fp32 accumulation. */
int kt_gemm_run(kt_gemm *g, const kt_bf16 *d_A, const kt_bf16 *d_W, kt_bf16 *d_C);
int kt_gemm_selftest(uint64_t seed, FILE *log);

/* ---- attention (decode_attn.cu, chunk_attn.cu) --------------------------- */

/* A ragged batch and its work plan (split-K items, partial buffers).  ctx and
 * q_len are host arrays of b entries; q_len NULL means decode (one query per
 * sequence).  split_len: KV tokens per split, a multiple of 16, or 0 to
 * choose from the shape.  Fails on bad shapes (see kref.h). */
typedef struct kt_attn kt_attn;
kt_attn *kt_attn_plan(const int *ctx, const int *q_len, int b, int heads,
                      int kv_heads, int hd, int split_len);
void kt_attn_free(kt_attn *p);
/* Sizes of the tensors a plan expects: query rows (sum q_len) and KV rows
 * (sum ctx); and the number of (query, key) pairs attended, for FLOP counts. */
size_t kt_attn_q_rows(const kt_attn *p);
size_t kt_attn_kv_rows(const kt_attn *p);
double kt_attn_pairs(const kt_attn *p);

/* version 0 = best, 1 = simple reference-like kernel, 2 = split-K tensor
 * core kernel (hd 128 only). */
int kt_decode_attn(const kt_attn *p, const kt_bf16 *d_q, const kt_bf16 *d_k,
                   const kt_bf16 *d_v, kt_bf16 *d_out, int version);
int kt_decode_attn_selftest(uint64_t seed, FILE *log);
int kt_chunk_attn(const kt_attn *p, const kt_bf16 *d_q, const kt_bf16 *d_k,
                  const kt_bf16 *d_v, kt_bf16 *d_out, int version);
int kt_chunk_attn_selftest(uint64_t seed, FILE *log);

/* ---- row-wise ops -------------------------------------------------------- */

/* dim must be a multiple of 8 (16-byte rows). */
int kt_rmsnorm(const kt_bf16 *d_x, const kt_bf16 *d_w, kt_bf16 *d_out, int rows,
               int dim, float eps);
int kt_rmsnorm_selftest(uint64_t seed, FILE *log);

/* In place on d_x [tokens, heads, hd]; d_pos [tokens] on the device;
 * hd a multiple of 16. */
int kt_rope(kt_bf16 *d_x, const int *d_pos, int tokens, int heads, int hd,
            double theta);
int kt_rope_selftest(uint64_t seed, FILE *log);

/* ffn must be a multiple of 8. */
int kt_swiglu(const kt_bf16 *d_gate_up, kt_bf16 *d_out, int rows, int ffn);
int kt_swiglu_selftest(uint64_t seed, FILE *log);

/* dim a multiple of 8; ids outside [0, vocab) give a zero row. */
int kt_embed(const kt_bf16 *d_table, int vocab, int dim, const int *d_ids,
             int n, kt_bf16 *d_out);
int kt_embed_selftest(uint64_t seed, FILE *log);

/* ---- greedy verification (accept.cu) ------------------------------------- */

/* d_argmax[r] = argmax of logits row r (see kref_argmax); vocab % 8 == 0. */
int kt_argmax(const kt_bf16 *d_logits, int rows, int vocab, int *d_argmax);
/* d_target = argmax rows [b, V+1]; writes d_n_accept [b], d_out [b, V+1]. */
int kt_greedy_accept(const int *d_draft, const int *d_target, int b, int V,
                     int *d_n_accept, int *d_out);
int kt_accept_selftest(uint64_t seed, FILE *log);

#ifdef __cplusplus
}
#endif

#endif
