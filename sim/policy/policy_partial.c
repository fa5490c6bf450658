/*
 * Policy `partial`: APRIL's active partial rollouts (Zhou et al., "APRIL:
 * Active Partial Rollouts in Reinforcement Learning to Tame Long-tail
 * Generation", arXiv 2509.18521; github.com/RLsys-Foundation/APRIL, in
 * THUDM/slime as `--partial-rollout` with `--over-sampling-batch-size`).
 * Each step launches prompts until policy.overprov (1.5 by default, the low
 * end of APRIL's "typically 1.5-2.0") x the step's prompt count are in flight
 * (the unfinished ones carried from earlier steps count), stops the
 * rollout as soon as the step's prompt count of groups is complete (GRPO
 * needs whole groups), trains those (the step's prompt count at most:
 * groups completing in the same iteration beyond it stay in flight) and
 * aborts the rest where they stand: their tokens are kept and the next step
 * resumes them by re-prefilling prompt + tokens so far.  A resumed response
 * mixes tokens of older policies: it trains k - j versions stale for a
 * first token at step j.  Colocated: sync, rollout, training as in verl.
 */
#include <math.h>

#include "sim/policy/policy_carry.h"

/* Tops the groups in flight up to overprov x P; stops at P complete groups
 * and trains those. */
static int partial_begin(carry_state *cs, const scenario *s, int k, int P, int *stop,
                         int *limit, ts_err *e)
{
    int want = (int)ceil(P * s->overprov - 1e-9);
    *stop = *limit = P;
    return carry_launch(cs, k, want > (int)cs->ng ? want - (int)cs->ng : 0, e);
}

static const carry_rounds partial_rounds = {partial_begin, NULL};

static int partial_run(const scenario *s, const hw_desc *hw, const llm_desc *m,
                       trace *const *steps, int n, int full, multistep_result *res,
                       run_record *rec, ts_err *e)
{
    return carry_run_colocated(&partial_rounds, s, hw, m, steps, n, full, res, rec, e);
}

const policy policy_partial = {
    "partial", "APRIL: over-provision, stop when the batch is full, resume the rest next step",
    "APRIL (arXiv 2509.18521), github.com/RLsys-Foundation/APRIL, THUDM/slime --partial-rollout", policy_apply_plain, 0, partial_run, 1};

const policy policy_partial_tlt = {
    "partial+tlt", "partial's rollouts with TLT's adaptive speculation and spot trainer",
    "APRIL (arXiv 2509.18521) + TLT (arXiv 2511.16665); the combination is tailsim's",
    policy_apply_plain_tlt, 0, partial_run, 1};
