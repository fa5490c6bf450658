/*
 * Seeded trace generators (GSL): lognormal, Gaussian mixture (the Intern-S1
 * math fit by default), and fixed lengths; every length is capped and at
 * least 1 token.  Per-prompt correlation: a prompt draws a latent "difficulty"
 * z_p ~ N(0,1) and each of its G responses uses sqrt(rho)*z_p +
 * sqrt(1-rho)*z_i as its standard-normal draw, so rho=0 gives independent
 * responses and rho=1 identical lengths within a group.
 */
#ifndef TS_GEN_H
#define TS_GEN_H

#include <stdint.h>

#include "traces/trace.h"

typedef enum gen_dist { GEN_LOGNORMAL, GEN_MIXTURE, GEN_FIXED } gen_dist;

#define GEN_MAX_COMP 8
#define GEN_MAX_TURNS 32

/* Multi-turn (agentic) trajectories (traces/gen_turns.c): a turn count from
 * its frequencies; every turn but the last is followed by one tool call of
 * lognormal latency appending lognormal tokens; each turn generates
 * lognormal tokens (turn 0 its own fit).  Defaults (gen_turns_default): the
 * fit to the four recorded Search-R1 steps (docs/agentic.md). */
typedef struct gen_turns {
    int on;                             /* 1: generate multi-turn trajectories */
    int n_probs;                        /* turn counts 1..n_probs (1..GEN_MAX_TURNS) */
    double probs[GEN_MAX_TURNS];        /* probability of k+1 turns, sum 1 */
    double tool_median, tool_sigma;     /* tool latency: median s, log sd */
    double append_median, append_sigma; /* tokens a tool result appends: median, log sd */
    double gen0_median, gen0_sigma;     /* turn 0's generated tokens: median, log sd */
    double gen_median, gen_sigma;       /* later turns' generated tokens: median, log sd */
} gen_turns;

typedef struct gen_params {
    gen_dist dist;
    int32_t prompts;       /* prompts per step (>= 1) */
    int32_t group;         /* responses per prompt (>= 1) */
    int32_t steps;         /* steps (>= 1) */
    int32_t cap;           /* max response length, tokens */
    double corr;           /* within-group correlation rho in [0,1] */
    uint64_t seed;
    /* lognormal: median exp(mu) tokens, shape sigma */
    double ln_mu, ln_sigma;
    /* mixture: components of weight/mean/sd in tokens */
    int n_comp;
    double w[GEN_MAX_COMP], mean[GEN_MAX_COMP], sd[GEN_MAX_COMP];
    /* fixed */
    int32_t fixed_len;
    /* prompt lengths: lognormal with this median and sigma (0: all equal to median) */
    double prompt_median, prompt_sigma;
    int32_t n_ranks;       /* >0: assign dp_rank round-robin over this many ranks; 0: -1 */
    gen_turns turns;       /* turns.on: multi-turn trajectories instead of dist's lengths */
} gen_params;

/* Defaults: Intern-S1 math mixture, 64 prompts x 8, 1 step, cap 32768,
 * rho 0.5, seed 1, prompt median 256. */
void gen_params_default(gen_params *p);

/* Parses a --dist value: "lognormal", "lognormal:MEDIAN:SIGMA", "mixture"
 * (Intern-S1), "mixture:W/M/S,W/M/S,...", "fixed:LEN".  Returns 0 or -1. */
int gen_parse_dist(const char *s, gen_params *p, ts_err *e);

/* The Search-R1 fit, turns off.  Cannot fail. */
void gen_turns_default(gen_turns *t);

/* Parses turn-count probabilities "P1,P2,...,Pn" (n <= GEN_MAX_TURNS, each
 * in [0, 1], summing to 1 within 1e-6) into t.  Returns 0, or -1 with a
 * message (t unchanged). */
int gen_parse_turn_probs(const char *s, gen_turns *t, ts_err *e);

/* Checks t's ranges.  Returns 0, or -1 naming the parameter. */
int gen_turns_check(const gen_turns *t, ts_err *e);

/* The multi-turn part of gen_trace (traces/gen_turns.c): p->turns.on, p
 * already checked.  Returns NULL with a message on allocation failure. */
trace *gen_trace_turns(const gen_params *p, ts_err *e);

/* Generates a trace.  Returns NULL with a message on bad parameters or
 * allocation failure. */
trace *gen_trace(const gen_params *p, ts_err *e);

#endif
