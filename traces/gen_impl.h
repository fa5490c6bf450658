/*
 * What traces/gen.c (single-turn traces) and traces/gen_turns.c (multi-turn
 * trajectories) share: the rounding of a draw to a token count and the
 * prompt-length draw, so that both generators treat a step's prompts alike.
 * Private to those two files.
 */
#ifndef TS_GEN_IMPL_H
#define TS_GEN_IMPL_H

#include <gsl/gsl_rng.h>
#include <stdint.h>

#include "traces/gen.h"

/* x rounded to the nearest integer and clipped to [lo, cap]; +inf gives
 * cap, NaN gives lo. */
int32_t gen_clip_round(double x, int32_t lo, int32_t cap);

/* One prompt's tokens: p->prompt_median, times exp(prompt_sigma z) with z
 * drawn from rp when prompt_sigma > 0, rounded and clipped to
 * [lo, TRACE_MAX_TOKENS]. */
int32_t gen_prompt_tokens(const gen_params *p, gsl_rng *rp, int32_t lo);

#endif
