/*
 * Policy `verl`: VeRL's synchronous GRPO step with its colocated hybrid
 * engine (Sheng et al., HybridFlow, EuroSys'25; github.com/volcengine/verl):
 * every replica decodes plainly until its last response ends and then waits
 * for the slowest one.  The baseline every other policy is compared with.
 */
#include "sim/policy/policy.h"

const policy policy_verl = {
    "verl", "synchronous baseline: plain decoding, idle tail",
    "VeRL / HybridFlow (EuroSys'25), github.com/volcengine/verl", policy_apply_plain, 1, NULL, 0};
