/*
 * Reference attention over a ragged batch of sequences with a packed KV
 * cache and grouped-query heads: decode (one query per sequence) and causal
 * chunk attention (a chunk of queries per sequence: a prefill chunk, or the V
 * draft tokens a speculative step verifies).  They define what
 * kernels/decode_attn.cu and kernels/chunk_attn.cu compute.
 *
 * Every query row is attended independently with a two-pass softmax in
 * double: scores s_p = q·k_p / sqrt(hd) for the visible positions p, then
 * out = sum_p exp(s_p - max) v_p / sum_p exp(s_p - max).  Cost is
 * O(heads * hd * visible keys) per query; the reference is meant for the
 * small shapes of tests and selftests.  Layouts are described in kref.h.
 */
#include "kernels/ref/kref.h"

#include <math.h>
#include <stdlib.h>

/* Attends one query row to the first n_keys rows of a KV head.  k and v point
 * at position 0 of that head; consecutive positions are kv_stride floats
 * apart.  Uses the caller's scratch of n_keys doubles. */
static void attend_row(const float *q, const float *k, const float *v,
                       size_t kv_stride, int n_keys, int hd, double *scores,
                       float *out)
{
    double scale = 1.0 / sqrt((double)hd);
    double mx = -INFINITY;
    for (int p = 0; p < n_keys; p++) {
        const float *kp = k + (size_t)p * kv_stride;
        double s = 0.0;
        for (int d = 0; d < hd; d++)
            s += (double)q[d] * kp[d];
        scores[p] = s * scale;
        if (scores[p] > mx)
            mx = scores[p];
    }
    double sum = 0.0;
    for (int p = 0; p < n_keys; p++) {
        scores[p] = exp(scores[p] - mx);
        sum += scores[p];
    }
    for (int d = 0; d < hd; d++) {
        double acc = 0.0;
        for (int p = 0; p < n_keys; p++)
            acc += scores[p] * v[(size_t)p * kv_stride + d];
        out[d] = (float)(acc / sum);
    }
}

static int check_heads(int b, int heads, int kv_heads, int hd)
{
    if (b < 1 || heads < 1 || kv_heads < 1 || hd < 1 || heads % kv_heads)
        return -1;
    return 0;
}

int kref_chunk_attn(const float *q, const float *k, const float *v,
                    const int *ctx, const int *q_len, int b, int heads,
                    int kv_heads, int hd, float *out)
{
    if (check_heads(b, heads, kv_heads, hd))
        return -1;
    int max_ctx = 0;
    for (int i = 0; i < b; i++) {
        if (ctx[i] < 1 || q_len[i] < 0 || q_len[i] > ctx[i])
            return -1;
        if (ctx[i] > max_ctx)
            max_ctx = ctx[i];
    }
    double *scores = malloc((size_t)max_ctx * sizeof *scores);
    if (!scores)
        return -1;
    int group = heads / kv_heads;
    size_t kv_stride = (size_t)kv_heads * hd;
    size_t kv_base = 0, q_base = 0; /* first KV row, first query row of seq i */
    for (int i = 0; i < b; i++) {
        for (int j = 0; j < q_len[i]; j++) {
            int visible = ctx[i] - q_len[i] + j + 1;
            for (int h = 0; h < heads; h++) {
                size_t qi = ((q_base + j) * heads + h) * hd;
                size_t ki = kv_base * kv_stride + (size_t)(h / group) * hd;
                attend_row(q + qi, k + ki, v + ki, kv_stride, visible, hd,
                           scores, out + qi);
            }
        }
        kv_base += ctx[i];
        q_base += q_len[i];
    }
    free(scores);
    return 0;
}

int kref_decode_attn(const float *q, const float *k, const float *v,
                     const int *ctx, int b, int heads, int kv_heads, int hd,
                     float *out)
{
    if (check_heads(b, heads, kv_heads, hd))
        return -1;
    int max_ctx = 0;
    for (int i = 0; i < b; i++) {
        if (ctx[i] < 1)
            return -1;
        if (ctx[i] > max_ctx)
            max_ctx = ctx[i];
    }
    double *scores = malloc((size_t)max_ctx * sizeof *scores);
    if (!scores)
        return -1;
    int group = heads / kv_heads;
    size_t kv_stride = (size_t)kv_heads * hd;
    size_t kv_base = 0;
    for (int i = 0; i < b; i++) {
        for (int h = 0; h < heads; h++) {
            size_t qi = ((size_t)i * heads + h) * hd;
            size_t ki = kv_base * kv_stride + (size_t)(h / group) * hd;
            attend_row(q + qi, k + ki, v + ki, kv_stride, ctx[i], hd, scores,
                       out + qi);
        }
        kv_base += ctx[i];
    }
    free(scores);
    return 0;
}
