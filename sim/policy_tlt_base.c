/*
 * Policy `tlt-base`: speculative decoding (EAGLE, depth 8, top-k 4, verify
 * budget by batch size) from the first token of the rollout, with a drafter
 * that is never trained during RL: its quality drifts down step by step as
 * the policy moves (drafter_next_quality with no training steps).  TLT's
 * paper uses this as the "speculation always on" ablation (Hu et al., Taming
 * the Long Tail, ASPLOS'26, arXiv 2511.16665).  Lossless: speculation never
 * changes what is generated.
 */
#include <stdio.h>

#include "sim/policy.h"

static void tlt_base_apply(scenario *s)
{
    snprintf(s->spec_mode, sizeof s->spec_mode, "always");
    s->spot = 0;
}

const policy policy_tlt_base = {
    "tlt-base", "speculation always on, frozen drafter",
    "TLT ablation (arXiv 2511.16665); SGLang EAGLE", tlt_base_apply, 1};
