/*
 * Policy `tlt-base`: speculative decoding (EAGLE, depth 8, top-k 4, verify
 * budget by batch size) from the first token of the rollout, with a drafter
 * that is never trained during RL: its quality drifts down step by step as
 * the policy moves (drafter_next_quality with no training steps).  TLT's
 * paper uses this as the "speculation always on" ablation (Hu et al., Taming
 * the Long Tail, ASPLOS'26, arXiv 2511.16665).  With speculation always on,
 * fastrl's rollout caps the engine at 64 running requests
 * (verl/workers/rollout/sglang_rollout/sglang_rollout.py:
 * max_running_requests = 512 if bs_threshold is set else 64), so this policy
 * does too, when the scenario allows more.  Lossless: speculation never
 * changes what is generated.
 */
#include <stdio.h>

#include "sim/policy/policy.h"

static void tlt_base_apply(scenario *s)
{
    snprintf(s->spec_mode, sizeof s->spec_mode, "always");
    s->spot = 0;
    if (s->max_running > 64)
        s->max_running = 64;
}

const policy policy_tlt_base = {
    "tlt-base", "speculation always on, frozen drafter",
    "TLT ablation (arXiv 2511.16665); SGLang EAGLE", tlt_base_apply, 1, NULL, 0};
