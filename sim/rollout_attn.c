/*
 * The rollout engine's attention kernel (rollout.attn, issue 18 item 3):
 * which of the cost model's attention-efficiency rules prices the engine's
 * prefill, chunk and speculative-verify attention.
 *
 * The hardware INI names the kernel its serving engines use by default
 * (attn_fa_version: FlashAttention-2's or -3's published H100 throughput by
 * equivalent causal length, models/cost.c; absent, attn_eff at every length).
 * An engine may run another one: SGLang on Hopper can take FlashAttention-3
 * as its attention backend, verl's vLLM rollout runs FlashAttention-2.  So a
 * rollout gets its own copy of the hardware description with
 * attn_fa_version set from the key (rollout_attn_apply), and everything that
 * prices the engine's iterations (sim/rollout_run.c's cost cache, `tailsim
 * specdec`) uses that copy; the trainer's phases keep the hardware's (their
 * attention runs at attn_eff, models/train_cost.c, whatever the version).
 *
 * A kernel the GPU cannot run is an error, never a silent result
 * (rollout_attn_check): fa3 needs attn_fa3 = 1 in the hardware INI
 * (FlashAttention-3 is Hopper-only), and fa2/fa3 need the INI to declare the
 * published tables apply (attn_fa_version set), since they are H100's: on
 * A100, FlashAttention-2 reaches 50-73% of peak where H100's table says
 * 19-34%, and the A100 INI's attn_eff already is FlashAttention-2's figure.
 * Pure functions; nothing here is on the hot path.
 */
#include "sim/rollout.h"

#include <string.h>

static const char *const attn_names[] = {"hw", "flat", "fa2", "fa3"};

int rollout_attn_parse(const char *name, rollout_attn *a)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, attn_names[i])) {
            *a = (rollout_attn)i;
            return 0;
        }
    return -1;
}

const char *rollout_attn_name(rollout_attn a)
{
    return (unsigned)a < 4 ? attn_names[a] : "?";
}

int rollout_attn_check(const hw_desc *hw, rollout_attn a, ts_err *e)
{
    if (a == ROLLOUT_ATTN_FA3 && hw->attn_fa3 != 1)
        return ts_errf(e, "fa3: FlashAttention-3 does not run on %s (its hardware INI's "
                          "attn_fa3 is %s; FlashAttention-3 needs Hopper, sm_90): use hw, "
                          "flat%s", hw->name, hw->attn_fa3 == 0 ? "0" : "unset",
                       hw->attn_fa_version >= 2 ? " or fa2" : "");
    if ((a == ROLLOUT_ATTN_FA2 || a == ROLLOUT_ATTN_FA3) && hw->attn_fa_version < 2)
        return ts_errf(e, "%s: %s has no FlashAttention table (its hardware INI leaves "
                          "attn_fa_version unset: the published tables are H100's, and its "
                          "attn_eff is its FlashAttention figure): use hw or flat",
                       rollout_attn_name(a), hw->name);
    if ((unsigned)a > ROLLOUT_ATTN_FA3)
        return ts_errf(e, "attention kernel %d is not hw, flat, fa2 or fa3", (int)a);
    return 0;
}

void rollout_attn_apply(const hw_desc *hw, rollout_attn a, hw_desc *out)
{
    hw_desc h = *hw;
    if (a == ROLLOUT_ATTN_FLAT)
        h.attn_fa_version = 0;
    else if (a == ROLLOUT_ATTN_FA2)
        h.attn_fa_version = 2;
    else if (a == ROLLOUT_ATTN_FA3)
        h.attn_fa_version = 3;
    *out = h;
}
