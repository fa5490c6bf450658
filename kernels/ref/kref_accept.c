/*
 * Reference greedy verification for speculative decoding: the argmax of the
 * target model's logits at each verified position, and the chain acceptance
 * rule (accept the longest prefix of draft tokens that equals the target's
 * choices, then emit the target's next choice as the bonus token).  Defines
 * kernels/accept.cu.  O(rows * vocab) and O(b * V); cannot fail.
 */
#include "kernels/ref/kref.h"

#include <math.h>

void kref_argmax(const float *logits, int rows, int vocab, int *out)
{
    for (int r = 0; r < rows; r++) {
        const float *x = logits + (size_t)r * vocab;
        int best_i = -1;
        float best = 0.0f;
        for (int i = 0; i < vocab; i++) {
            if (isnan(x[i]))
                continue;
            if (best_i < 0 || x[i] > best) {
                best = x[i];
                best_i = i;
            }
        }
        out[r] = best_i < 0 ? 0 : best_i;
    }
}

void kref_greedy_accept(const int *draft, const int *target, int b, int V,
                        int *n_accept, int *out_tokens)
{
    for (int i = 0; i < b; i++) {
        const int *d = draft + (size_t)i * V;
        const int *t = target + (size_t)i * (V + 1);
        int a = 0;
        while (a < V && d[a] == t[a])
            a++;
        n_accept[i] = a;
        for (int j = 0; j <= V; j++)
            out_tokens[(size_t)i * (V + 1) + j] = j <= a ? t[j] : -1;
    }
}
