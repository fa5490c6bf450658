/*
 * Speculative decoding costs built on cost_iter() and cost_gemm(), following
 * what SGLang's EAGLE worker (the engine TLT's fastrl ships) runs per
 * speculative iteration (third-party/sglang/.../speculative/eagle_worker.py):
 *
 * Draft (draft_forward): the first draft token's top-k candidates come from
 * the previous draft extend, so a depth-d draft runs d - 1 drafter forwards,
 * each over batch x top-k tokens: the fc layer (2h -> h), one decoder layer of
 * the target's shape (cost_iter on a one-layer copy of the description, whose
 * LM head term is the shared head over the same tokens, logits all-gathered
 * across TP), then softmax and top-k over the full vocabulary for every row.
 *
 * Verify: the target's forward over batch x V tokens (SGLang's
 * speculative_num_draft_tokens V counts the tree's root, the last verified
 * token, so the tree holds V - 1 draft tokens), priced as chunks of V tokens
 * at each sequence's context: the attention reads the same KV as a causal
 * chunk, but under the tree's custom mask it computes all V x (ctx + V)
 * pairs (a causal chunk skips the upper triangle of its V x V block), and
 * the mask itself is built, bit-packed and read by every layer (tree_mask
 * below); plus the LM head over every verified token rather than one row per
 * sequence, and the target's probabilities over the vocabulary for every
 * row (tree speculative sampling reads them).  At large batch b x V tokens
 * make the target's GEMMs compute bound, and the per-row vocabulary work
 * (LM head, logits all-gather, softmax) grows with b x V and b x top-k: this
 * is where speculation stops paying, without any threshold typed in.
 *
 * Draft extend (forward_draft_extend_after_decode): the drafter runs over
 * depth + 1 tokens per sequence (the accepted tokens, padded to a fixed
 * shape for the CUDA graph), LM head and top-k for each sequence's last
 * token, so that the next draft starts from the target's newest hidden
 * state.
 *
 * Sampling (cost_sample): logits are cast to fp32 (read 2 B, write 4 B),
 * softmaxed (read 4 B, write 4 B) and read once more by top-k or the sampler
 * (4 B): 18 bytes of HBM traffic per vocabulary entry per row, replicated on
 * every TP rank after the logits all-gather.  A plain decode step pays it
 * for one row per sequence.
 *
 * Drafter training (TLT's spot trainer) is a training step of the one-layer
 * model plus the fc.
 */
#include "models/cost_spec.h"

#include "models/comm.h"

double cost_sample(const hw_desc *hw, const llm_desc *m, double rows)
{
    if (rows <= 0 || m->vocab <= 0)
        return 0.0;
    return cost_stream(hw, rows * (double)m->vocab * COST_SAMPLE_BYTES);
}

/* ---- draft, verify, draft extend -----------------------------------------
 * Each is written once, over a source of cost_iter()'s values and the LM
 * head and fc GEMMs: the pure functions on (hw, m, tp), or a cost_cache,
 * whose values are the same bit for bit (tests/test_models.c checks).  The
 * public functions below only pick the source. */

typedef struct spec_src {
    const hw_desc *hw;
    const llm_desc *m;
    int tp;                 /* GPUs of the TP group */
    cost_cache *c;          /* the cache of (hw, m, tp), or NULL: the pure functions */
} spec_src;

/* cost_iter() of b on the model with `layers` layers. */
static double src_iter(const spec_src *s, int layers, const cost_batch *b)
{
    if (s->c)
        return cost_iter_cached_n(s->c, layers, b);
    if (layers == s->m->layers)
        return cost_iter(s->hw, s->m, s->tp, b);
    llm_desc one = *s->m;
    one.layers = layers;
    return cost_iter(s->hw, &one, s->tp, b);
}

static double src_head(const spec_src *s, double rows)
{
    return s->c ? cost_cache_head(s->c, rows) : cost_lm_head(s->hw, s->m, s->tp, rows);
}

static double src_fc(const spec_src *s, double tokens)
{
    return s->c ? cost_cache_fc(s->c, tokens) : cost_draft_fc(s->hw, s->m, s->tp, tokens);
}

static double draft(const spec_src *s, int batch, int depth, int topk, double ctx_sum)
{
    if (batch <= 0 || depth <= 1)
        return 0.0;
    double tokens = (double)batch * topk;
    double t = src_fc(s, tokens);
    t += src_iter(s, 1, &(cost_batch){.n_decode = (int)tokens, .decode_ctx_sum = topk * ctx_sum});
    t += cost_sample(s->hw, s->m, tokens);
    return (depth - 1) * t;
}

/* The verify's tree mask (SGLang's TreeMaskMode FULL_MASK, built by
 * build_tree_kernel_efficient in speculative/eagle_utils.py): one bool per
 * (draft token, key) of each sequence, V x (ctx + V) bytes, filled with
 * torch.full and written by the build kernel, then packed to bits
 * (FlashInfer's segment_packbits: read 1 B, write 1/8 B) once per step; every
 * layer's attention reads the packed bits once per TP-local KV head. */
static double tree_mask(const spec_src *s, int batch, double v, double ctx_sum)
{
    double elems = v * ctx_sum + batch * v * v;
    if (elems <= 0)
        return 0.0;
    double kvh = (double)s->m->kv_heads / s->tp;
    if (kvh < 1)
        kvh = 1;
    double t = cost_stream(s->hw, elems) + cost_stream(s->hw, elems * 1.125);
    return t + s->m->layers * kvh * elems / 8.0 / (s->hw->hbm_bw * s->hw->mem_eff);
}

static double verify(const spec_src *s, int batch, int budget, double ctx_sum,
                     const cost_batch *extra)
{
    const llm_desc *m = s->m;
    cost_batch b = extra ? *extra : (cost_batch){0};
    double v = budget;
    b.n_prefill_seqs += batch;
    b.prefill_tokens += batch * budget;
    /* the tree mask is a custom mask: the kernel computes every (draft
     * token, key) pair of the V x (ctx + V) block and masks, no causal
     * tile skipping inside the tree */
    b.prefill_attn += v * ctx_sum + batch * v * v;
    b.prefill_kv_sum += ctx_sum + batch * v;
    double t = src_iter(s, m->layers, &b) + tree_mask(s, batch, v, ctx_sum);
    /* cost_iter priced one logits row per sequence; verify needs one per token */
    if (m->vocab > 0 && budget > 1) {
        t += src_head(s, (double)batch * budget) - src_head(s, batch);
        if (s->tp > 1)
            t += comm_allgather(s->hw, (double)batch * (budget - 1) * m->vocab * 2.0, s->tp);
    }
    return t + cost_sample(s->hw, m, (double)batch * budget);
}

static double draft_extend(const spec_src *s, int batch, int depth, double ctx_sum)
{
    if (batch <= 0 || depth <= 0)
        return 0.0;
    double per = depth + 1.0, tokens = batch * per;
    double t = src_fc(s, tokens);
    t += src_iter(s, 1, &(cost_batch){.n_prefill_seqs = batch,
                                      .prefill_tokens = (int)tokens,
                                      .prefill_attn = per * ctx_sum + tokens * (per + 1) / 2,
                                      .prefill_kv_sum = ctx_sum + tokens});
    return t + cost_sample(s->hw, s->m, batch);
}

/* The source of cache c. */
static spec_src src_cached(cost_cache *c)
{
    return (spec_src){.hw = &c->hw, .m = &c->m, .tp = c->tp, .c = c};
}

double cost_draft(const hw_desc *hw, const llm_desc *m, int tp, int batch, int depth,
                  int topk, double ctx_sum)
{
    return draft(&(spec_src){hw, m, tp, NULL}, batch, depth, topk, ctx_sum);
}

double cost_verify(const hw_desc *hw, const llm_desc *m, int tp, int batch, int budget,
                   double ctx_sum, const cost_batch *extra)
{
    return verify(&(spec_src){hw, m, tp, NULL}, batch, budget, ctx_sum, extra);
}

double cost_draft_extend(const hw_desc *hw, const llm_desc *m, int tp, int batch, int depth,
                         double ctx_sum)
{
    return draft_extend(&(spec_src){hw, m, tp, NULL}, batch, depth, ctx_sum);
}

double cost_draft_cached(cost_cache *c, int batch, int depth, int topk, double ctx_sum)
{
    spec_src s = src_cached(c);
    return draft(&s, batch, depth, topk, ctx_sum);
}

double cost_verify_cached(cost_cache *c, int batch, int budget, double ctx_sum,
                          const cost_batch *extra)
{
    spec_src s = src_cached(c);
    return verify(&s, batch, budget, ctx_sum, extra);
}

double cost_draft_extend_cached(cost_cache *c, int batch, int depth, double ctx_sum)
{
    spec_src s = src_cached(c);
    return draft_extend(&s, batch, depth, ctx_sum);
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
