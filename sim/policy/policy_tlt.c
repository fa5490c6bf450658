/*
 * Policy `tlt`: TLT's adaptive rollout engine and adaptive drafter (Hu et al.,
 * Taming the Long Tail, ASPLOS'26, arXiv 2511.16665; code mit-han-lab/fastrl).
 * A replica decodes plainly while more than 32 requests run and switches
 * speculation on after 10 consecutive decode iterations at or under 32
 * (fastrl: speculative.bs_threshold 32), flushing its KV cache and
 * re-prefilling every remaining request with a quarter of the prefill budget;
 * the verify budget follows the batch size (fastrl's BEG table: 48/32/16/8 at
 * 1 / 2-4 / 5-20 / >= 21).  A replica that has finished trains the drafter
 * (the spot trainer: 4 sequences x 512-token windows per GPU step from the
 * last 2 steps' buffer) until the rollout ends, which keeps the drafter's
 * quality up as the policy drifts.  Each speculative step drafts with
 * EAGLE or with model-free n-gram retrieval, whichever has the better
 * expected goodput for the batch (sim/specdec.h).  The epsilon-greedy
 * bandit over draft configurations (sim/spec_bandit.h) replaces the
 * batch-size table when the scenario sets spec.bandit.
 */
#include <stdio.h>

#include "sim/policy/policy.h"

void policy_apply_tlt(scenario *s)
{
    snprintf(s->spec_mode, sizeof s->spec_mode, "adaptive");
    s->spot = 1;
    s->sp.ngram = 1;
}

const policy policy_tlt = {
    "tlt", "adaptive speculation in the tail + spot-trained drafter",
    "TLT (ASPLOS'26, arXiv 2511.16665), github.com/mit-han-lab/fastrl", policy_apply_tlt, 1, NULL, 0};
