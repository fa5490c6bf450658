/*
 * Internals of the decoder model shared by layer.cu (which defines them),
 * drafter.cu and train.cu: the model, KV-cache and step structures, the
 * small row kernels' launchers (kl_*), and the layer and head runners.  Not
 * part of the C interface (kernels.h).
 *
 * Memory: every tensor is a 256-byte aligned slice of one allocation (the
 * weights, the KV cache, the workspace), so cuBLASLt may pick its fastest
 * kernels.  Work buffers hold T rows (new tokens of the largest step
 * planned) or R rows (logit rows).
 */
#ifndef TS_LAYER_CUH
#define TS_LAYER_CUH

#include "kernels/cuda_common.cuh"

struct kl_layer {
    kt_bf16 *ln1, *wqkv, *bqkv, *wo, *ln2, *wgu, *wdown; /* bqkv NULL: no bias */
};

struct kl_work {
    size_t T, R;  /* capacity in rows */
    void *buf;
    size_t bytes;
    kt_bf16 *x, *h, *qkv, *q, *kn, *ao, *t, *gu, *act; /* T rows */
    kt_bf16 *sel, *hn, *logits;                         /* R rows */
};

struct kt_model {
    kt_model_shape s;
    int nqkv;           /* (heads + 2 kv_heads) head_dim */
    void *wbuf;
    size_t wbytes, layer_bytes;
    kl_layer *layer;    /* [layers] */
    kt_bf16 *embed, *final_norm, *lm_head; /* NULL when vocab == 0 */
    kt_gemm *g_qkv, *g_o, *g_gu, *g_down, *g_head;
    kl_work w;
};

struct kt_kv {
    int layers, b, kvw; /* kvw = kv_heads * head_dim */
    int *cap, *len;     /* host [b] */
    long long *off;     /* host [b]: first row of each sequence */
    size_t rows;        /* sum cap */
    kt_bf16 *buf;       /* [layers][2][rows][kvw] */
};

struct kt_step {
    kt_model *m;
    kt_kv *kv;
    int b, T, R, decode, spent;
    int *seqs, *q_len;  /* host [b] */
    double ctx_sum;
    kt_attn *attn;
    int *d_pos, *d_krow, *d_lrow; /* [T] RoPE positions, [T] cache rows, [R] logit rows */
};

static inline size_t kl_align(size_t bytes)
{
    return (bytes + 255) & ~(size_t)255;
}

static inline kt_bf16 *kl_kv_k(const kt_kv *kv, int l)
{
    return kv->buf + (size_t)(2 * l) * kv->rows * kv->kvw;
}

static inline kt_bf16 *kl_kv_v(const kt_kv *kv, int l)
{
    return kv->buf + (size_t)(2 * l + 1) * kv->rows * kv->kvw;
}

/* qkv [T, nqkv] (+ bias) -> q [T, heads*hd]; k to k_dst rows k_rows[t] (NULL:
 * row t) and v likewise, each row kv_heads*hd wide. */
int kl_qkv_split(const kt_bf16 *qkv, const kt_bf16 *bias, int T, int heads, int kv_heads,
                 int hd, kt_bf16 *q, kt_bf16 *k_dst, const int *k_rows, kt_bf16 *v_dst,
                 const int *v_rows);
/* dst[dst_rows[r]] = src[src_rows[r]] for r < n, rows of w bf16 (NULL row
 * maps: identity); w a multiple of 8. */
int kl_copy_rows(const kt_bf16 *src, const int *src_rows, kt_bf16 *dst, const int *dst_rows,
                 int n, int w);
/* out = a + b elementwise over n bf16 (n a multiple of 8; out may be a). */
int kl_add(kt_bf16 *out, const kt_bf16 *a, const kt_bf16 *b, size_t n);

/* Grows m's workspace to T token rows and R logit rows (host work). */
int kl_reserve(kt_model *m, size_t T, size_t R);
/* Plans a step whose sequences have extra[i] cached rows beyond their
 * kt_kv_len (draft rows; NULL: none) and explicit RoPE positions pos [T]
 * (NULL: cache position).  logits: 0 none, 1 last token, 2 all tokens;
 * n_logits (NULL: use logits) the last n_logits[i] tokens of sequence i.
 * Plans m's GEMMs for the step's shapes too (kt_gemm_plan). */
kt_step *kl_step_plan(kt_model *m, kt_kv *kv, const int *seqs, const int *q_len, int b,
                      const int *extra, const int *pos, int logits, const int *n_logits);
/* Layer l of m on x [st->T, hidden] in place, with cache layer kv_layer of
 * st->kv (m and the cache may differ from st->m: the drafter). */
int kl_layer_run(kt_model *m, int l, const kt_step *st, int kv_layer, kt_bf16 *x);
/* RMSNorm(norm) and LM head over rows d_rows [R] of x: logits [R, vocab];
 * sel and hn are [R, hidden] scratch. */
int kl_head(const kt_model_shape *s, const kt_bf16 *x, const int *d_rows, int R,
            const kt_bf16 *norm, const kt_bf16 *head, kt_gemm *g, kt_bf16 *sel,
            kt_bf16 *hn, kt_bf16 *logits);
/* The weights of m's layer l as floats (for references; host arrays of the
 * kref_layer_w shapes, malloc'ed into *buf, which the caller frees). */
int kl_download_layer(const kt_model *m, const kl_layer *L, float **buf, float *ptrs[7]);

/* Selftest tolerances (kt_tol): the bf16 roundings of one layer's forward
 * pass, as kref_layer_forward does them: ln1, QKV GEMM, bias, RoPE, the
 * softmax weights (GPU only), attention output, O GEMM, residual, ln2,
 * gate_up GEMM, SwiGLU, down GEMM, residual.  Cached K has KL_K_STAGES of
 * its layer's before it (ln1, QKV, bias; V one fewer), the logits two more
 * than the stack's residual stream (its last rounding, the final norm). */
#define KL_LAYER_STAGES 13
#define KL_K_STAGES 3

#endif
