/*
 * Epsilon-greedy bandit over speculative draft configurations, as TLT's
 * adaptive rollout engine can run it (fastrl's
 * third-party/sglang/.../speculative/eagle_mab.py, EpsilonGreedyMAB under
 * MABGroupManager): an arm is a (depth, top-k, verify budget V) strategy;
 * each batch-size group (1..31 one by one, 32..120 by 8, 128..256 by 32, as
 * fastrl groups them) keeps its own window of the last `window` rewards per
 * arm.  A pick explores a uniformly random arm with probability epsilon and
 * otherwise takes the arm with the highest median reward in the window
 * (an arm with no reward yet counts as +infinity, so each is tried once);
 * ties go to the lower arm index.  The reward of a step is accepted tokens
 * x batch / step time (fastrl: accept length x batch size / elapsed).
 *
 * Cost: a pick is O(arms); recording a reward recomputes that arm's median
 * (O(window) expected, quickselect on a copy), so the bandit adds
 * O(window) per speculative step.  Deterministic for its RNG stream.
 */
#ifndef TS_SPEC_BANDIT_H
#define TS_SPEC_BANDIT_H

#include <stdint.h>

#include "common/err.h"
#include "sim/specdec.h"

typedef struct spec_arm {
    int depth;   /* draft steps */
    int topk;    /* candidates per node */
    int V;       /* verify tokens per sequence, root included */
} spec_arm;

/* Parses "d_k_V,d_k_V,..." (fastrl's mab_configs format) into at most
 * SPEC_MAX_ARMS arms, checking each against the acceptance model's limits
 * (V at most 48: the rollout reserves KV for TLT's largest budget).
 * Returns the number of arms, or -1 with e naming the bad entry. */
int spec_arms_parse(const char *s, spec_arm *out, ts_err *e);

typedef struct spec_bandit spec_bandit;

/* A bandit over n arms with exploration epsilon and a reward window of
 * `window` steps, drawing from ts_rng_new(seed, stream).  Returns NULL on
 * allocation failure; free with spec_bandit_free(). */
spec_bandit *spec_bandit_new(int n, double epsilon, int window, uint64_t seed, uint64_t stream);
void spec_bandit_free(spec_bandit *b);
/* The arm to run for a step of `batch` sequences, among the arms whose bit is
 * set in `valid` (fastrl filters arms whose V x batch would not fit; no bit
 * set: all arms).  Cannot fail. */
int spec_bandit_pick(spec_bandit *b, int batch, unsigned valid);
/* Records the reward of arm `arm` at `batch`.  Cannot fail. */
void spec_bandit_record(spec_bandit *b, int batch, int arm, double reward);
/* The current median reward of an arm in batch's group (-1 if none yet). */
double spec_bandit_median(const spec_bandit *b, int batch, int arm);

#endif
