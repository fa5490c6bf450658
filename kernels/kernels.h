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

/* The name the CPU emulator (emu/, make kernels-emu) gives its device: its
 * timings are not a GPU's, so calibrate refuses it. */
#define KT_EMU_DEVICE_NAME "tailsim CPU emulator"

/* Opens device 0.  Returns 1 with d filled, 0 when there is no usable CUDA
 * device or driver (kt_error() says why), -1 on any other failure. */
int kt_device_open(kt_device *d);

/* Frees what the kt_* functions keep between calls (the L2 flush buffer,
 * the idle blocks of kt_scratch_get's cache).
 * Call once at the end; cannot fail. */
void kt_close(void);

/* Current SM and memory clocks in MHz, read through NVML (loaded at run
 * time).  Returns 0, or -1 with both set to 0 when NVML is unavailable. */
int kt_clocks(int *sm_mhz, int *mem_mhz);

void *kt_malloc(size_t bytes);  /* cudaMalloc; NULL on failure */
void kt_free(void *d);          /* NULL is a no-op */
int kt_upload(void *d_dst, const void *src, size_t bytes);
int kt_download(void *dst, const void *d_src, size_t bytes);
/* A device block of at least bytes from a cache that keeps the blocks it
 * hands out: kt_scratch_put() returns one to the cache (not to CUDA), and
 * the next kt_scratch_get() takes the smallest idle block that fits,
 * allocating (a power of two >= 4 KiB, so that growth is rare) only when
 * none does.  Step and attention plans take their device arrays from it, so
 * that planning allocates nothing once the largest shapes have been seen.
 * NULL on failure (idle blocks are released and the allocation retried
 * first).  kt_close() releases the idle blocks; put NULL is a no-op. */
void *kt_scratch_get(size_t bytes);
void kt_scratch_put(void *d);
/* cudaMalloc and cudaFree calls made so far (kt_malloc, kt_free, the block
 * cache, the L2 flush buffer; pinned host memory not counted): confirm
 * reports those its replay made after the warm-up.  Cannot fail. */
long long kt_device_alloc_calls(void);
int kt_sync(void);              /* waits for the device; reports async errors */
/* Device-to-device copy on the default stream (asynchronous). */
int kt_copy(void *d_dst, const void *d_src, size_t bytes);
/* Pinned (page-locked) host memory, cudaMallocHost; NULL on failure. */
void *kt_host_malloc(size_t bytes);
void kt_host_free(void *h);          /* NULL is a no-op */
/* Host <-> device copies on the default stream (asynchronous, at the host
 * link's full rate when the host buffer is pinned). */
int kt_copy_h2d(void *d_dst, const void *h_src, size_t bytes);
int kt_copy_d2h(void *h_dst, const void *d_src, size_t bytes);

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
/* cuBLASLt heuristic queries (plan-cache misses of blas.cu) made since the
 * program started: all of them, and those made while a timed interval was
 * open (kt_time's timed repeats, between the first and the last event
 * record; warm-up runs are not timed).  A timed interval with a query in it
 * measured host work as GPU time: confirm treats a non-zero count as a
 * failed measurement.  Cannot fail. */
long long kt_plan_queries(void);
long long kt_plan_queries_timed(void);

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
/* The absolute part of every selftest tolerance, from error propagation
 * (docs/validation.md, "Selftest tolerances"); compare with
 * kt_compare(..., kt_tol(rms, stages, k), KREF_BF16_EPS):
 *   KT_TOL_Z * rms * (eps(bf16) * sqrt(stages) + 2^-24 * k)
 * rms: of the reference values compared; stages: the bf16 roundings on the
 * path from the (bf16) inputs to the compared value, not counting its own
 * (the relative term eps |ref| covers that one), where GPU and reference may
 * round differently or the GPU alone rounds; k: the fp32 error growth of the
 * path, the longest sum (terms added in fp32), or for RoPE the largest angle
 * in radians.  Returns the tolerance; cannot fail. */
#define KT_TOL_Z 2.0
double kt_tol(double rms, int stages, double k);
/* Selftest shapes: 0 (the default) the full shapes, 1 small shapes that
 * cover the same code paths (selftest --small, for the CPU emulator).
 * kt_selftest_small reads the setting; neither can fail. */
void kt_selftest_set_small(int on);
int kt_selftest_small(void);

/* ---- GEMM (gemm_lt.cu, over blas.cu's cuBLASLt wrapper) ----------------- */

/* Each kt_gemm owns a cuBLASLt handle, a 32 MiB workspace and a plan cache. */
typedef struct kt_gemm kt_gemm;
kt_gemm *kt_gemm_new(void);
void kt_gemm_free(kt_gemm *g);
/* Chooses cuBLASLt's algorithm for C[m,n] = A[m,k] · W[n,k]^T (host work:
 * call it outside timed regions; a shape planned before is a cache hit). */
int kt_gemm_plan(kt_gemm *g, int m, int n, int k);
/* Runs the planned shape: bf16 in and out, fp32 accumulation. */
int kt_gemm_run(kt_gemm *g, const kt_bf16 *d_A, const kt_bf16 *d_W, kt_bf16 *d_C);
int kt_gemm_selftest(uint64_t seed, FILE *log);

/* ---- cuBLASLt's choices (blas.cu) ---------------------------------------- */

/* The algorithm cuBLASLt's heuristic returned for one product shape, as its
 * configuration attributes (cublasLtMatmulAlgoConfigGetAttribute) say. */
typedef struct kt_blas_algo {
    int m, n, k, batch;  /* row-major D[m, n] = op(A)[m, k] op(B)[k, n], batch products
                          * (kt_gemm: m tokens, n outputs, k inputs) */
    int ta, tb;          /* 1: A (B) is stored transposed */
    int algo_id;         /* CUBLASLT_ALGO_CONFIG_ID; < 0 only from the CPU emulator's
                          * stand-in, which has no kernels to choose among */
    int tile_id;         /* CUBLASLT_ALGO_CONFIG_TILE_ID, raw (cublasLtMatmulTile_t) */
    /* tile_id as "ROWSxCOLS" of cuBLASLt's column-major output D^T (n x m): ROWS
     * run along n, COLS along m; "undefined" (id 0), "id:N" (an id the table
     * kernels/blas_tiles.cuh lacks), "?" (unreadable), "emu" (algo_id < 0) */
    char tile[24];
    int stages_id;       /* CUBLASLT_ALGO_CONFIG_STAGES_ID, raw */
    int splitk;          /* CUBLASLT_ALGO_CONFIG_SPLITK_NUM: 1 unsplit */
    int reduction;       /* CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, raw */
    int swizzle;         /* CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING */
    int cluster;         /* CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, raw; -1 when the
                          * headers lack it (cuBLAS < 12) */
    /* each raw value is -1 when cuBLASLt did not answer for it */
} kt_blas_algo;

/* The choice of every distinct shape (m, n, k, batch, ta, tb) planned since
 * the program started, by any GEMM (kt_gemm, the layers, the trainer's
 * backward), in the order first planned; a shape planned again (other
 * leading dimensions, alignment, output type or beta) keeps its first
 * record.  Copies the first min(count, max) records into out (NULL when max
 * is 0) and returns the count.  Records are made when a plan is made (a
 * plan-cache miss, host work that kt_plan_queries counts), never on a hit,
 * so timed runs do no more than before.  Cannot fail; not thread-safe (nor
 * is planning). */
size_t kt_blas_algos(kt_blas_algo *out, size_t max);

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


/* ---- decoder layer and stack (layer.cu) ---------------------------------- */

/* TP-local shapes of a Qwen2.5-style decoder (the model's heads, kv_heads,
 * ffn and vocab divided by the tensor-parallel degree; hidden whole).  No
 * all-reduce is run: one GPU computes its slice, the cost model prices the
 * communication separately.  Needs hidden, ffn, vocab multiples of 8, hd a
 * multiple of 16 (128 for the tensor-core attention), heads a multiple of
 * kv_heads with G = heads / kv_heads <= 16.  vocab 0: no embedding, final
 * norm or LM head (a bare stack, as the drafter and the trainer use). */
typedef struct kt_model_shape {
    int layers;
    int hidden, heads, kv_heads, head_dim, ffn, vocab;
    int qkv_bias;      /* 1: the QKV projection has a bias (Qwen2) */
    float rms_eps;     /* 1e-6 for Qwen2.5 */
    double rope_theta; /* 1e6 for Qwen2.5 */
} kt_model_shape;

typedef struct kt_model kt_model;
/* Allocates the weights once and fills them from seed: linear weights
 * U(-a, a) with a = sqrt(3 / fan_in) (unit gain), biases U(-0.5, 0.5), norm
 * weights and the embedding U(-1, 1); never zero.  Also owns the cuBLASLt
 * handles and an activation workspace that grows with the largest step
 * planned.  NULL on failure. */
kt_model *kt_model_new(const kt_model_shape *s, uint64_t seed);
void kt_model_free(kt_model *m);
size_t kt_model_weight_bytes(const kt_model *m);   /* bytes of weights */
size_t kt_model_layer_bytes(const kt_model *m);    /* one layer's weights */
size_t kt_model_work_bytes(const kt_model *m);     /* activation workspace now */
/* Grows m's activation workspace (never shrinks it) to hold a step of
 * tokens new tokens and logit_rows logit rows, so that planning steps up to
 * that size allocates no workspace (host work: one cudaFree + cudaMalloc
 * when it grows).  0, or -1 (kt_error() says why: negative sizes, out of
 * device memory, the old workspace then freed). */
int kt_model_reserve(kt_model *m, int tokens, int logit_rows);

/* The KV cache of b sequences for every layer of m: sequence i owns cap[i]
 * token rows (K and V [rows, kv_heads, head_dim] per layer), filled with
 * random values at creation so that any length can stand for a context that
 * was never prefilled.  Lengths start at 0.  NULL on failure. */
typedef struct kt_kv kt_kv;
kt_kv *kt_kv_new(const kt_model *m, int b, const int *cap);
void kt_kv_free(kt_kv *kv);
size_t kt_kv_bytes(const kt_kv *kv);
int kt_kv_len(const kt_kv *kv, int seq);
/* Sets the cached length of seq (0..cap): truncating drops tokens (draft
 * rollback); growing declares the random rows to be context. */
int kt_kv_set_len(kt_kv *kv, int seq, int len);

/* One forward step over sequences seqs[0..b-1] of kv, q_len[i] >= 0 new
 * tokens each (q_len NULL: decode, one token each, with the decode
 * attention kernel), at positions kt_kv_len(seq) ..  Logits: for the last
 * new token of each sequence with q_len > 0, or for every new token when
 * all_logits (verification of V draft tokens).  Planning is host work
 * (attention plan, uploads, growing the workspace): keep it out of timed
 * regions.  A step stays valid until a length of one of its sequences
 * changes; it uses the model's workspace, so run steps of one model one at
 * a time.  NULL on failure (bad shape, capacity exceeded). */
typedef struct kt_step kt_step;
kt_step *kt_step_plan(kt_model *m, kt_kv *kv, const int *seqs, const int *q_len, int b,
                      int all_logits);
/* kt_step_plan with n_logits[i] logit rows for sequence i (its last
 * n_logits[i] new tokens, 0..q_len[i]; q_len NULL: decode, 0 or 1), as a
 * speculative step with prefill chunks needs (every verified token, the
 * last token of each chunk).  Plans every GEMM shape the step will run, so
 * that kt_step_forward queries no cuBLASLt heuristic.  NULL on failure. */
kt_step *kt_step_plan_rows(kt_model *m, kt_kv *kv, const int *seqs, const int *q_len, int b,
                           const int *n_logits);
void kt_step_free(kt_step *st);
int kt_step_tokens(const kt_step *st);      /* new tokens T = sum q_len */
int kt_step_logit_rows(const kt_step *st);  /* rows of logits */
double kt_step_ctx_sum(const kt_step *st);  /* attended context tokens, after the append */
/* Full forward: embed d_tokens [T] (ids in [0, vocab)), every layer
 * (appending K/V at the new positions; lengths unchanged), final norm and LM
 * head over the logit rows.  d_logits [rows, vocab] and d_argmax [rows] may
 * each be NULL (the logits then stay in the workspace). */
int kt_step_forward(kt_step *st, const int *d_tokens, kt_bf16 *d_logits, int *d_argmax);
/* The residual stream [T, hidden] in the workspace: after kt_step_forward,
 * the last layer's output before the final norm (EAGLE's feature). */
kt_bf16 *kt_step_hidden(kt_step *st);
/* Layer l alone, in place on kt_step_hidden() (timing one layer). */
int kt_step_layer(kt_step *st, int l);
/* lengths += q_len for the step's sequences; the step is spent. */
int kt_step_commit(kt_step *st);
/* Plan, forward, commit, free: one call per step. */
int kt_forward_decode(kt_model *m, kt_kv *kv, const int *seqs, int b, const int *d_tokens,
                      kt_bf16 *d_logits, int *d_argmax);
int kt_forward_chunk(kt_model *m, kt_kv *kv, const int *seqs, const int *q_len, int b,
                     const int *d_tokens, int all_logits, kt_bf16 *d_logits, int *d_argmax);
int kt_layer_selftest(uint64_t seed, FILE *log);

/* ---- EAGLE drafter (drafter.cu) ------------------------------------------ */

/* fc (2 hidden -> hidden) over [embedding(token) ; feature], one decoder
 * layer of the target's shape (own weights, own one-layer KV cache), own
 * final norm, and the target's embedding and LM head (shared, not copied).
 * A draft of depth d and width k is a beam tree: step 0 runs the root (last
 * accepted token, target hidden state) and keeps its top-k tokens; each
 * later step runs the k frontier nodes of every sequence, takes each node's
 * top-k, and keeps the k best paths by cumulative log-probability.  k = 1
 * is a chain.  See drafter.cu for the attention mask of tree nodes. */
typedef struct kt_drafter kt_drafter;
kt_drafter *kt_drafter_new(kt_model *target, uint64_t seed);
void kt_drafter_free(kt_drafter *d);
/* The drafter's one-layer cache for b sequences of capacity cap[i] (leave
 * room for 1 + (depth - 1) * topk draft rows beyond the prefix). */
kt_kv *kt_drafter_kv_new(kt_drafter *d, int b, const int *cap);
/* Grows the workspace of d's layer for drafts of up to b sequences of top-k
 * topk (b * topk rows a step), as kt_model_reserve does.  0, or -1
 * (kt_error()). */
int kt_drafter_reserve(kt_drafter *d, int b, int topk);

typedef struct kt_draft kt_draft;
/* Plans a draft over seqs[0..b-1] of kv (prefix lengths as they are now).
 * Host work.  depth >= 1, 1 <= topk <= 8. */
kt_draft *kt_draft_plan(kt_drafter *d, kt_kv *kv, const int *seqs, int b, int depth,
                        int topk);
void kt_draft_free(kt_draft *p);
/* Sets the root inputs: d_tokens [b], d_hidden [b, hidden] (device). */
int kt_draft_input(kt_draft *p, const int *d_tokens, const kt_bf16 *d_hidden);
/* Runs draft step t (0 <= t < depth); steps must first run in order once,
 * after which any step may be repeated (timing). */
int kt_draft_step(kt_draft *p, int t);
/* Runs all steps.  Outputs (device, [b, depth, topk]): tokens, parent
 * index within the previous depth's topk (0 at depth 0), cumulative
 * log-probability.  Any may be NULL.  The cache keeps the draft rows until
 * kt_kv_set_len() rolls each sequence back. */
int kt_draft_run(kt_draft *p, int *d_tokens, int *d_parents, float *d_scores);
int kt_drafter_selftest(uint64_t seed, FILE *log);

/* ---- training forward and backward of a layer stack (train.cu) ----------- */

/* A trainer for m's layers (m's weights; embedding and LM head unused) on
 * micro-batches of n packed sequences of lens[i] tokens (causal within each,
 * positions 0..len-1, each len <= KT_TRAIN_MAX_LEN: the attention backward
 * materialises the softmax).  recompute 0 keeps every layer's activations
 * for the backward; 1 keeps only each layer's input and recomputes the
 * layer's forward during the backward (activation checkpointing).  Weight
 * gradients are fp32 and accumulate across backward calls.  Every device
 * allocation is tracked.  NULL on failure. */
#define KT_TRAIN_MAX_LEN 8192
typedef struct kt_train kt_train;
kt_train *kt_train_new(kt_model *m, const int *lens, int n, int recompute);
void kt_train_free(kt_train *t);
int kt_train_tokens(const kt_train *t);
/* d_x [T, hidden] -> d_y [T, hidden] (d_y may be NULL). */
int kt_train_forward(kt_train *t, const kt_bf16 *d_x, kt_bf16 *d_y);
/* From d_dy = dL/dy [T, hidden]: weight gradients += , d_dx = dL/dx (may be
 * NULL).  Needs a kt_train_forward of the same micro-batch first. */
int kt_train_backward(kt_train *t, const kt_bf16 *d_dy, kt_bf16 *d_dx);
int kt_train_zero_grads(kt_train *t);
typedef struct kt_train_mem {
    size_t weights;      /* the layers' weights (owned by the model) */
    size_t grads;        /* fp32 weight gradients */
    size_t activations;  /* saved for the backward */
    size_t scratch;      /* transient buffers, attention scratch, cuBLASLt */
    size_t total;        /* weights + the rest: the tracked peak */
    size_t device_used;  /* cudaMemGetInfo: device memory in use now */
} kt_train_mem;
void kt_train_memory(const kt_train *t, kt_train_mem *mem);
/* FLOPs of one forward (fwd) and one forward + backward (recompute adds a
 * second forward), counting the full causal score matrices computed. */
double kt_train_flops(const kt_train *t, int backward);
int kt_train_selftest(uint64_t seed, FILE *log);

#ifdef __cplusplus
}
#endif

#endif
