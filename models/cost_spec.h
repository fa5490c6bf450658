/*
 * Cost of speculative decoding's two parts, from the cost model: the EAGLE
 * drafter's steps (fc 2h -> h, one decoder layer, the shared LM head) and the
 * target's verification of V draft tokens per sequence.  Pure functions, s.
 */
#ifndef TS_COST_SPEC_H
#define TS_COST_SPEC_H

#include "models/cost.h"

/* HBM bytes per vocabulary entry per logits row for casting, softmax and
 * top-k or sampling (see cost_spec.c). */
#define COST_SAMPLE_BYTES 18.0

/* Softmax and top-k / sampling over the full vocabulary for `rows` logits
 * rows, s (0 for a model without vocabulary).  Cannot fail. */
double cost_sample(const hw_desc *hw, const llm_desc *m, double rows);

/* The drafter forwards of a depth-`depth` draft for `batch` sequences whose
 * contexts sum to ctx_sum: depth - 1 forwards of top-k tokens per sequence
 * (the first draft token's candidates come from the previous draft extend),
 * every token attending to its sequence's context, each followed by softmax
 * and top-k over the vocabulary.  0 for depth <= 1. */
double cost_draft(const hw_desc *hw, const llm_desc *m, int tp, int batch, int depth,
                  int topk, double ctx_sum);

/* The target verifying `budget` draft tokens for each of `batch` sequences,
 * plus `extra` (prefill chunks sharing the forward pass; may be NULL): one
 * forward pass with a logits row per verified token, the attention over
 * every pair of the tree's custom mask, the mask's build and reads, and the
 * target's probabilities for every row.  ctx_sum is the sum of
 * the sequences' contexts before the draft. */
double cost_verify(const hw_desc *hw, const llm_desc *m, int tp, int batch, int budget,
                   double ctx_sum, const cost_batch *extra);

/* EAGLE's draft extend after a verify: the drafter (fc + one layer + the
 * shared LM head and top-k for each sequence's last token) runs over depth + 1
 * tokens per sequence (the accepted ones, padded to the CUDA graph's fixed
 * shape) to produce the hidden states the next draft starts from (SGLang's
 * forward_draft_extend_after_decode). */
double cost_draft_extend(const hw_desc *hw, const llm_desc *m, int tp, int batch, int depth,
                         double ctx_sum);

/* cost_draft, cost_verify and cost_draft_extend on the (hw, model, tp) of
 * cache c (models/cost.h): the same values bit for bit, with the terms that
 * depend only on token and row counts taken from (and filled into) c.
 * Cannot fail. */
double cost_draft_cached(cost_cache *c, int batch, int depth, int topk, double ctx_sum);
double cost_verify_cached(cost_cache *c, int batch, int budget, double ctx_sum,
                          const cost_batch *extra);
double cost_draft_extend_cached(cost_cache *c, int batch, int depth, double ctx_sum);

/* One drafter training step on one GPU: forward + backward of the fc layer and
 * the decoder layer over `seqs` windows of `window` tokens, with the loss
 * through the frozen LM head (its weight gradient is not needed but its
 * input gradient is: priced as a full LM-head backward, a small overestimate). */
double cost_draft_train_step(const hw_desc *hw, const llm_desc *m, int seqs, int window);

#endif
