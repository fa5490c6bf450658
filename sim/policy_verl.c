/*
 * Policy `verl`: VeRL's synchronous GRPO step with its colocated hybrid
 * engine (Sheng et al., HybridFlow, EuroSys'25; github.com/volcengine/verl):
 * every replica decodes plainly until its last response ends and then waits
 * for the slowest one.  The baseline every other policy is compared with.
 */
#include <stdio.h>

#include "sim/policy.h"

static void verl_apply(scenario *s)
{
    snprintf(s->spec_mode, sizeof s->spec_mode, "off");
    s->spot = 0;
}

const policy policy_verl = {
    "verl", "synchronous baseline: plain decoding, idle tail",
    "VeRL / HybridFlow (EuroSys'25), github.com/volcengine/verl", verl_apply, 1};
