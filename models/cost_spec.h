/*
 * Cost of speculative decoding's two parts, from the cost model: the EAGLE
 * drafter's steps (fc 2h -> h, one decoder layer, the shared LM head) and the
 * target's verification of V draft tokens per sequence.  Pure functions, s.
 */
#ifndef TS_COST_SPEC_H
#define TS_COST_SPEC_H

#include "models/cost.h"

/* `depth` drafter steps for `batch` sequences whose contexts sum to ctx_sum:
 * the first step runs one token per sequence, each later one top-k tokens per
 * sequence (the expanded frontier), every token attending to its sequence's
 * context. */
double cost_draft(const hw_desc *hw, const llm_desc *m, int tp, int batch, int depth,
                  int topk, double ctx_sum);

/* The target verifying `budget` draft tokens for each of `batch` sequences,
 * plus `extra` (prefill chunks sharing the forward pass; may be NULL): one
 * forward pass with a logits row per verified token.  ctx_sum is the sum of
 * the sequences' contexts before the draft. */
double cost_verify(const hw_desc *hw, const llm_desc *m, int tp, int batch, int budget,
                   double ctx_sum, const cost_batch *extra);

/* EAGLE's draft extend after a verify: the drafter (fc + one layer + the
 * shared LM head for each sequence's last token) runs over the tokens just
 * accepted, `tokens` in all over `batch` sequences, to produce the hidden
 * states the next draft starts from (SGLang's forward_draft_extend_after_decode). */
double cost_draft_extend(const hw_desc *hw, const llm_desc *m, int tp, int batch, double tokens,
                         double ctx_sum);

/* One drafter training step on one GPU: forward + backward of the fc layer and
 * the decoder layer over `seqs` windows of `window` tokens, with the loss
 * through the frozen LM head (its weight gradient is not needed but its
 * input gradient is: priced as a full LM-head backward, a small overestimate). */
double cost_draft_train_step(const hw_desc *hw, const llm_desc *m, int seqs, int window);

#endif
