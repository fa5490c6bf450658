/*
 * Synthetic multi-turn (agentic) trajectories: what `trace.turns =
 * search-r1` and `tailsim trace gen --turns search-r1` generate, for a
 * Search-R1-like step of any size without the recording.  gen_trace calls
 * gen_trace_turns once when gen_params.turns.on; it is not on a hot path.
 *
 * The model, fitted to the four recorded Search-R1 steps (docs/agentic.md;
 * maximum likelihood: empirical turn-count frequencies, lognormal fits by the
 * mean and standard deviation of the logs): a trajectory draws its turn
 * count n from the frequencies; turn k generates exp(mu_k + sigma_k z)
 * tokens (turn 0 its own fit, later turns one shared fit); every turn but the
 * last is followed by one tool call of latency tool_median * exp(tool_sigma
 * z) seconds whose result appends append_median * exp(append_sigma z)
 * tokens; the last turn makes no call.  Turn k starts from the context
 * prompt + the generated and appended tokens of the turns before it.  Draws
 * are independent (trace.corr is not used: the recorded turn counts and
 * lengths of a group show no strong within-group pull worth a copula here);
 * generated tokens are rounded and clipped to [1, cap], appended ones to
 * [0, cap]; the response (trace_prompt.resp) is the turns' span, the last
 * context + its generation - the prompt, as the reader computes it.  No
 * prefix-cache hits are recorded (cached 0) and no engine latency (-1): the
 * simulator computes both its own.
 *
 * Reproducibility: as gen.c, step s draws its trajectories from stream
 * ts_rng_new(seed, 2s) (per trajectory: one uniform for the count, then per
 * turn a normal for its length and, when a call follows, one for the
 * latency and one for the append) and its prompt lengths from stream 2s+1.
 */
#include "traces/gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "common/util.h"
#include "traces/gen_impl.h"

static const double sr1_probs[5] = {0.071, 0.430, 0.343, 0.106, 0.050};

void gen_turns_default(gen_turns *t)
{
    memset(t, 0, sizeof *t);
    t->n_probs = 5;
    memcpy(t->probs, sr1_probs, sizeof sr1_probs);
    t->tool_median = 0.183;
    t->tool_sigma = 1.35;
    t->append_median = 562;
    t->append_sigma = 0.29;
    t->gen0_median = 42;
    t->gen0_sigma = 0.48;
    t->gen_median = 71;
    t->gen_sigma = 0.71;
}

int gen_parse_turn_probs(const char *s, gen_turns *t, ts_err *e)
{
    char buf[1024];
    if (strlen(s) >= sizeof buf)
        return ts_errf(e, "turn probabilities '%.40s...': too long", s);
    strcpy(buf, s);
    double pr[GEN_MAX_TURNS], sum = 0;
    int n = 0;
    char *save = NULL;
    for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        if (n == GEN_MAX_TURNS)
            return ts_errf(e, "turn probabilities '%s': at most %d turns", s, GEN_MAX_TURNS);
        if (ts_parse_double(c, 0, 1, &pr[n]))
            return ts_errf(e, "turn probabilities '%s': entry %d '%s' is not a number in "
                              "[0, 1]", s, n + 1, c);
        sum += pr[n++];
    }
    if (n == 0)
        return ts_errf(e, "turn probabilities '%s': expected P1,P2,... (of 1, 2, ... turns)", s);
    if (fabs(sum - 1) > 1e-6)
        return ts_errf(e, "turn probabilities '%s' sum to %.9g, not 1", s, sum);
    t->n_probs = n;
    memcpy(t->probs, pr, (size_t)n * sizeof *pr);
    return 0;
}

int gen_turns_check(const gen_turns *t, ts_err *e)
{
    if (t->n_probs < 1 || t->n_probs > GEN_MAX_TURNS)
        return ts_errf(e, "gen: %d turn-count probabilities (1..%d)", t->n_probs,
                       GEN_MAX_TURNS);
    double sum = 0;
    for (int k = 0; k < t->n_probs; k++) {
        if (!(t->probs[k] >= 0 && t->probs[k] <= 1))
            return ts_errf(e, "gen: probability of %d turns %g outside [0, 1]", k + 1,
                           t->probs[k]);
        sum += t->probs[k];
    }
    if (fabs(sum - 1) > 1e-6)
        return ts_errf(e, "gen: turn-count probabilities sum to %.9g, not 1", sum);
    const struct { const char *name; double med, sig; } ln[4] = {
        {"tool latency", t->tool_median, t->tool_sigma},
        {"append", t->append_median, t->append_sigma},
        {"turn-0 generation", t->gen0_median, t->gen0_sigma},
        {"generation", t->gen_median, t->gen_sigma},
    };
    for (int k = 0; k < 4; k++)
        if (!(ln[k].med > 0 && ln[k].med <= TRACE_MAX_TOKENS) ||
            !(ln[k].sig >= 0 && ln[k].sig <= 10))
            return ts_errf(e, "gen: %s median %g (must be > 0) or sigma %g (0..10) out of "
                              "range", ln[k].name, ln[k].med, ln[k].sig);
    return 0;
}

/* Draws one trajectory from prompt tokens into tt (n turns, returned), its
 * response length into *resp.  Returns -1 when its context outgrows
 * TRACE_MAX_TOKENS. */
static int draw_traj(const gen_turns *g, int32_t cap, int32_t prompt, gsl_rng *r,
                     trace_turn *tt, int32_t *resp)
{
    double u = gsl_rng_uniform(r), acc = 0;
    int n = g->n_probs;
    for (int k = 0; k < g->n_probs; k++) {
        acc += g->probs[k];
        if (u < acc && g->probs[k] > 0) {
            n = k + 1;
            break;
        }
    }
    while (n > 1 && g->probs[n - 1] == 0) /* rounding left u past the last nonzero */
        n--;
    int64_t ctx = prompt;
    for (int k = 0; k < n; k++) {
        double med = k ? g->gen_median : g->gen0_median, sig = k ? g->gen_sigma : g->gen0_sigma;
        trace_turn *t = &tt[k];
        *t = (trace_turn){.context = (int32_t)ctx, .engine_s = -1};
        t->gen = gen_clip_round(med * exp(sig * gsl_ran_gaussian(r, 1.0)), 1, cap);
        if (k < n - 1) {
            t->tools = 1;
            t->tool_s = g->tool_median * exp(g->tool_sigma * gsl_ran_gaussian(r, 1.0));
            t->append = gen_clip_round(g->append_median *
                                   exp(g->append_sigma * gsl_ran_gaussian(r, 1.0)), 0, cap);
        }
        ctx += t->gen + t->append;
        if (ctx > TRACE_MAX_TOKENS)
            return -1;
    }
    *resp = (int32_t)(ctx - prompt);
    return n;
}

trace *gen_trace_turns(const gen_params *p, ts_err *e)
{
    const gen_turns *g = &p->turns;
    trace *t = trace_new();
    int32_t *resp = malloc((size_t)p->group * sizeof *resp);
    int32_t *nt = malloc((size_t)p->group * sizeof *nt);
    trace_turn *tt = malloc((size_t)p->group * GEN_MAX_TURNS * sizeof *tt);
    gsl_rng *rr = NULL, *rp = NULL;
    if (!t || !resp || !nt || !tt) {
        ts_errf(e, "gen: out of memory");
        goto fail;
    }
    for (int32_t s = 0; s < p->steps; s++) {
        rr = ts_rng_new(p->seed, 2 * (uint64_t)s);
        rp = ts_rng_new(p->seed, 2 * (uint64_t)s + 1);
        if (!rr || !rp) {
            ts_errf(e, "gen: cannot allocate an RNG");
            goto fail;
        }
        for (int32_t i = 0; i < p->prompts; i++) {
            int32_t ptok = gen_prompt_tokens(p, rp, 1);
            size_t at = 0;
            for (int32_t j = 0; j < p->group; j++) {
                int n = draw_traj(g, p->cap, ptok, rr, tt + at, &resp[j]);
                if (n < 0) {
                    ts_errf(e, "gen: a trajectory's context passes %d tokens (lower trace.cap "
                               "or the medians)", TRACE_MAX_TOKENS);
                    goto fail;
                }
                nt[j] = n;
                at += (size_t)n;
            }
            int32_t dp = p->n_ranks > 0 ? i % p->n_ranks : -1;
            if (trace_add_turns(t, s, i, dp, ptok, resp, p->group, nt, tt, e))
                goto fail;
        }
        gsl_rng_free(rr);
        gsl_rng_free(rp);
        rr = rp = NULL;
    }
    free(resp);
    free(nt);
    free(tt);
    return t;
fail:
    if (rr)
        gsl_rng_free(rr);
    if (rp)
        gsl_rng_free(rp);
    free(resp);
    free(nt);
    free(tt);
    trace_free(t);
    return NULL;
}
