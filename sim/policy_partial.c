/*
 * Policy `partial`: APRIL's active partial rollouts (Zhou et al., "APRIL:
 * Active Partial Rollouts in Reinforcement Learning to Tame Long-tail
 * Generation", arXiv 2509.18521; github.com/RLsys-Foundation/APRIL, in
 * THUDM/slime as `--partial-rollout` with `--over-sampling-batch-size`).
 * Each step launches prompts until policy.overprov (1.5 by default, the low
 * end of APRIL's "typically 1.5-2.0") x the step's prompt count are in flight
 * (the unfinished ones carried from earlier steps count), stops the
 * rollout as soon as the step's prompt count of groups is complete (GRPO
 * needs whole groups), trains those (ties at the stop included) and aborts
 * the rest where they stand: their tokens are kept and the next step
 * resumes them by re-prefilling prompt + tokens so far.  A resumed response
 * mixes tokens of older policies: it trains k - j versions stale for a
 * first token at step j.  Colocated: sync, rollout, training as in verl.
 */
#include <math.h>
#include <stdio.h>

#include "sim/policy_carry.h"

static void partial_apply(scenario *s)
{
    snprintf(s->spec_mode, sizeof s->spec_mode, "off");
    s->spot = 0;
}

static int partial_run(const scenario *s, const hw_desc *hw, const llm_desc *m,
                       trace *const *steps, int n, int full, multistep_result *res,
                       run_record *rec, ts_err *e)
{
    carry_state cs;
    carry_init(&cs, steps, n, s->max_response, 0, res);
    scenario sk = *s;
    double t0 = 0;
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        int P = (int)steps[k]->n_prompts;
        int want = (int)ceil(P * s->overprov - 1e-9);
        sk.seed = s->seed + (uint64_t)k;
        size_t first = rec ? rec->n_tl : 0;
        rc = carry_launch(&cs, k, want > (int)cs.ng ? want - (int)cs.ng : 0, e);
        if (!rc)
            rc = carry_step(&cs, &sk, hw, m, k, P, P, full, &res->step[k], rec, e);
        if (rc) {
            ts_err_prefix(e, "step %d: ", k);
            break;
        }
        policy_shift_record(rec, first, t0, 0);
        res->t0[k] = t0;
        t0 += res->step[k].step_s;
    }
    carry_summarize(&cs);
    carry_finish(&cs);
    return rc;
}

const policy policy_partial = {
    "partial", "APRIL: over-provision, stop when the batch is full, resume the rest next step",
    "APRIL (arXiv 2509.18521), github.com/RLsys-Foundation/APRIL, THUDM/slime --partial-rollout", partial_apply, 0};
const policy_driver policy_partial_driver = {&policy_partial, partial_run};
