/*
 * Speculative decoding costs built on cost_iter() and cost_gemm().
 *
 * Drafter (EAGLE): per step, the fc layer (2h -> h) over the step's tokens,
 * one decoder layer of the target's shape (cost_iter on a one-layer copy of
 * the description, whose LM head term is the shared head over the same
 * tokens).  Step 1 drafts one token per sequence, steps 2..depth the top-k
 * frontier of each.
 *
 * Verify: the target's forward over batch x budget tokens, priced as chunks
 * of `budget` tokens at each sequence's context (tree attention reads the same
 * KV as a causal chunk), plus the LM head over every verified token rather
 * than one row per sequence.
 *
 * Draft extend: after each verify, EAGLE feeds the accepted tokens back
 * through the drafter (one layer, fc, LM head for the last token of each
 * sequence) so that the next draft starts from the target's newest hidden
 * state.  Drafter training (TLT's spot trainer) is a training step of the
 * one-layer model plus the fc.
 */
#include "models/cost_spec.h"

#include "models/comm.h"

double cost_draft(const hw_desc *hw, const llm_desc *m, int tp, int batch, int depth,
                  int topk, double ctx_sum)
{
    if (batch <= 0 || depth <= 0)
        return 0.0;
    llm_desc one = *m;
    one.layers = 1;
    double t = 0.0;
    for (int s = 1; s <= depth; s++) {
        int width = s == 1 ? 1 : topk;
        double tokens = (double)batch * width;
        t += cost_gemm(hw, tokens, (double)m->hidden / tp, 2.0 * m->hidden);
        t += cost_iter(hw, &one, tp, &(cost_batch){.n_decode = (int)tokens,
                                                   .decode_ctx_sum = width * ctx_sum});
    }
    return t;
}

double cost_verify(const hw_desc *hw, const llm_desc *m, int tp, int batch, int budget,
                   double ctx_sum, const cost_batch *extra)
{
    cost_batch b = extra ? *extra : (cost_batch){0};
    double v = budget;
    b.n_prefill_seqs += batch;
    b.prefill_tokens += batch * budget;
    b.prefill_attn += v * ctx_sum + batch * v * (v + 1) / 2;
    b.prefill_kv_sum += ctx_sum + batch * v;
    double t = cost_iter(hw, m, tp, &b);
    /* cost_iter priced one logits row per sequence; verify needs one per token */
    if (m->vocab > 0 && budget > 1) {
        double vt = (double)m->vocab / tp;
        t += cost_gemm(hw, (double)batch * budget, vt, m->hidden) - cost_gemm(hw, batch, vt, m->hidden);
        if (tp > 1)
            t += comm_allgather(hw, (double)batch * (budget - 1) * m->vocab * 2.0, tp);
    }
    return t;
}

double cost_draft_extend(const hw_desc *hw, const llm_desc *m, int tp, int batch, double tokens,
                         double ctx_sum)
{
    if (batch <= 0 || tokens <= 0)
        return 0.0;
    llm_desc one = *m;
    one.layers = 1;
    double per = tokens / batch;
    double t = cost_gemm(hw, tokens, (double)m->hidden / tp, 2.0 * m->hidden);
    t += cost_iter(hw, &one, tp, &(cost_batch){.n_prefill_seqs = batch,
                                               .prefill_tokens = (int)(tokens + 0.5),
                                               .prefill_attn = per * ctx_sum + tokens * (per + 1) / 2,
                                               .prefill_kv_sum = ctx_sum + tokens});
    return t;
}

double cost_draft_train_step(const hw_desc *hw, const llm_desc *m, int seqs, int window)
{
    if (seqs <= 0 || window <= 0)
        return 0.0;
    llm_desc one = *m;
    one.layers = 1;
    double tokens = (double)seqs * window;
    /* fc 2h -> h: forward, input and weight gradients */
    double t = 3.0 * cost_gemm(hw, tokens, m->hidden, 2.0 * m->hidden);
    t += cost_train_fwd_bwd(hw, &one, tokens, (double)seqs * window * window, 0);
    return t;
}
