/*
 * Synthetic response-length traces for scenarios without a real log: a
 * lognormal, a Gaussian mixture (default: the Intern-S1 math fit from
 * PolyTrace) or fixed lengths, with per-prompt correlation of group lengths.
 * `tailsim trace gen` and scenario files call gen_trace once; it is not on any
 * hot path (a few erfc calls per response).
 *
 * Correlation is a Gaussian copula, so the marginal of every response is
 * exactly the chosen distribution whatever rho is: prompt p draws
 * z_p ~ N(0,1), response i draws z_i ~ N(0,1) and uses
 * z = sqrt(rho) z_p + sqrt(1-rho) z_i.  Lognormal: length exp(mu + sigma z).
 * Mixture: the quantile of the mixture at Phi(z), found by bisection over
 * integer lengths on the mixture CDF (for z > 0 on the survival function, so
 * the upper tail keeps its precision).  Lengths are rounded to the nearest
 * token and clipped to [1, cap]: mass at or below 1 (including the mixture's
 * negative part) goes to 1, mass above cap goes to cap.
 *
 * Reproducibility: step s draws its response lengths from the RNG stream
 * ts_rng_new(seed, 2s) and its prompt lengths from ts_rng_new(seed, 2s+1),
 * in prompt order, so the same parameters give the same trace bit for bit and
 * adding steps does not change earlier ones.  dp_rank is prompt % n_ranks.
 * Mixture weights are normalised to sum to 1.
 */
#include "traces/gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>

#include "common/util.h"
#include "traces/gen_impl.h"

static const double is1_w[4] = {0.359, 0.373, 0.074, 0.194};
static const double is1_mean[4] = {4959, 9175, 12720, 17655};  /* tokens */
static const double is1_sd[4] = {2192, 3416, 6067, 5267};      /* tokens */

static void set_intern_s1(gen_params *p)
{
    p->n_comp = 4;
    for (int k = 0; k < 4; k++) {
        p->w[k] = is1_w[k];
        p->mean[k] = is1_mean[k];
        p->sd[k] = is1_sd[k];
    }
}

void gen_params_default(gen_params *p)
{
    memset(p, 0, sizeof *p);
    p->dist = GEN_MIXTURE;
    p->prompts = 64;
    p->group = 8;
    p->steps = 1;
    p->cap = 32768;
    p->corr = 0.5;
    p->seed = 1;
    p->ln_mu = log(1024.0);
    p->ln_sigma = 1.0;
    set_intern_s1(p);
    p->fixed_len = 1024;
    p->prompt_median = 256;
    p->prompt_sigma = 0;
    p->n_ranks = 0;
    gen_turns_default(&p->turns);
}

/* Parses "W/M/S,W/M/S,..." into q. */
static int parse_mixture(const char *spec, const char *whole, gen_params *q, ts_err *e)
{
    char buf[1024];
    if (strlen(spec) >= sizeof buf)
        return ts_errf(e, "--dist '%.40s...': too long", whole);
    strcpy(buf, spec);
    q->n_comp = 0;
    char *save = NULL;
    for (char *c = strtok_r(buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        if (q->n_comp == GEN_MAX_COMP)
            return ts_errf(e, "--dist '%s': at most %d mixture components", whole,
                           GEN_MAX_COMP);
        char *s1 = strchr(c, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
        int k = q->n_comp;
        if (!s2 || strchr(s2 + 1, '/'))
            return ts_errf(e, "--dist '%s': component %d: expected WEIGHT/MEAN/SD", whole,
                           k + 1);
        *s1 = *s2 = 0;
        if (ts_parse_double(c, 1e-12, 1e12, &q->w[k]) ||
            ts_parse_double(s1 + 1, -1e9, 1e9, &q->mean[k]) ||
            ts_parse_double(s2 + 1, 1e-9, 1e9, &q->sd[k]))
            return ts_errf(e, "--dist '%s': component %d: expected WEIGHT/MEAN/SD with "
                              "WEIGHT > 0 and SD > 0 (tokens)", whole, k + 1);
        q->n_comp++;
    }
    if (q->n_comp == 0)
        return ts_errf(e, "--dist '%s': no mixture components", whole);
    return 0;
}

int gen_parse_dist(const char *s, gen_params *p, ts_err *e)
{
    gen_params q = *p; /* p changes only on success */
    if (!strcmp(s, "lognormal")) {
        q.dist = GEN_LOGNORMAL;
        q.ln_mu = log(1024.0);
        q.ln_sigma = 1.0;
    } else if (!strncmp(s, "lognormal:", 10)) {
        char buf[128];
        double med, sig;
        if (strlen(s) >= sizeof buf)
            return ts_errf(e, "--dist '%.40s...': too long", s);
        strcpy(buf, s + 10);
        char *colon = strchr(buf, ':');
        if (!colon)
            return ts_errf(e, "--dist '%s': expected lognormal:MEDIAN:SIGMA", s);
        *colon = 0;
        if (ts_parse_double(buf, 1e-3, TRACE_MAX_TOKENS, &med) ||
            ts_parse_double(colon + 1, 0, 10, &sig))
            return ts_errf(e, "--dist '%s': expected lognormal:MEDIAN:SIGMA with MEDIAN in "
                              "(0, %d] tokens and SIGMA in [0, 10]", s, TRACE_MAX_TOKENS);
        q.dist = GEN_LOGNORMAL;
        q.ln_mu = log(med);
        q.ln_sigma = sig;
    } else if (!strcmp(s, "mixture")) {
        q.dist = GEN_MIXTURE;
        set_intern_s1(&q);
    } else if (!strncmp(s, "mixture:", 8)) {
        q.dist = GEN_MIXTURE;
        if (parse_mixture(s + 8, s, &q, e))
            return -1;
    } else if (!strncmp(s, "fixed:", 6)) {
        int64_t len;
        if (ts_parse_i64(s + 6, 1, TRACE_MAX_TOKENS, &len))
            return ts_errf(e, "--dist '%s': expected fixed:LEN with LEN in 1..%d", s,
                           TRACE_MAX_TOKENS);
        q.dist = GEN_FIXED;
        q.fixed_len = (int32_t)len;
    } else {
        return ts_errf(e, "--dist '%s': expected lognormal[:MEDIAN:SIGMA], "
                          "mixture[:W/M/S,...] or fixed:LEN", s);
    }
    *p = q;
    return 0;
}

static int check_params(const gen_params *p, ts_err *e)
{
    if (p->prompts < 1 || p->group < 1 || p->steps < 1)
        return ts_errf(e, "gen: prompts (%d), group (%d) and steps (%d) must be >= 1",
                       p->prompts, p->group, p->steps);
    if ((int64_t)p->prompts * p->steps > INT32_MAX ||
        (int64_t)p->prompts * p->group * p->steps > INT32_MAX)
        return ts_errf(e, "gen: %d steps x %d prompts x %d responses is too large",
                       p->steps, p->prompts, p->group);
    if (p->cap < 1 || p->cap > TRACE_MAX_TOKENS)
        return ts_errf(e, "gen: cap %d outside 1..%d", p->cap, TRACE_MAX_TOKENS);
    if (!(p->corr >= 0 && p->corr <= 1))
        return ts_errf(e, "gen: correlation %g outside [0, 1]", p->corr);
    if (p->n_ranks < 0)
        return ts_errf(e, "gen: ranks %d must be >= 0", p->n_ranks);
    if (!(p->prompt_median >= 0 && p->prompt_median <= TRACE_MAX_TOKENS) ||
        !(p->prompt_sigma >= 0 && p->prompt_sigma <= 10))
        return ts_errf(e, "gen: prompt median %g or sigma %g out of range", p->prompt_median,
                       p->prompt_sigma);
    if (p->turns.on)
        return gen_turns_check(&p->turns, e);
    switch (p->dist) {
    case GEN_LOGNORMAL:
        if (!isfinite(p->ln_mu) || !(p->ln_sigma >= 0 && p->ln_sigma <= 10))
            return ts_errf(e, "gen: lognormal mu %g, sigma %g out of range", p->ln_mu,
                           p->ln_sigma);
        return 0;
    case GEN_MIXTURE:
        if (p->n_comp < 1 || p->n_comp > GEN_MAX_COMP)
            return ts_errf(e, "gen: mixture needs 1..%d components, got %d", GEN_MAX_COMP,
                           p->n_comp);
        for (int k = 0; k < p->n_comp; k++)
            if (!(p->w[k] > 0 && isfinite(p->w[k]) && isfinite(p->mean[k]) &&
                  p->sd[k] > 0 && isfinite(p->sd[k])))
                return ts_errf(e, "gen: mixture component %d needs weight > 0, finite mean "
                                  "and sd > 0", k + 1);
        return 0;
    case GEN_FIXED:
        if (p->fixed_len < 1 || p->fixed_len > TRACE_MAX_TOKENS)
            return ts_errf(e, "gen: fixed length %d outside 1..%d", p->fixed_len,
                           TRACE_MAX_TOKENS);
        return 0;
    }
    return ts_errf(e, "gen: unknown distribution %d", (int)p->dist);
}

/* A mixture with normalised weights, and the copula draw it is inverted at. */
typedef struct mixture {
    int n;
    double w[GEN_MAX_COMP], m[GEN_MAX_COMP], s[GEN_MAX_COMP]; /* -, tokens, tokens */
} mixture;

/* 1 when the mixture's quantile at Phi(z) lies at or below x tokens.  For
 * z <= 0 compares CDFs, for z > 0 survival functions (precise in each tail). */
static int mix_below(const mixture *mx, double z, double target, double x)
{
    double acc = 0;
    if (z <= 0) {
        for (int k = 0; k < mx->n; k++)
            acc += mx->w[k] * gsl_cdf_ugaussian_P((x - mx->m[k]) / mx->s[k]);
        return acc >= target;
    }
    for (int k = 0; k < mx->n; k++)
        acc += mx->w[k] * gsl_cdf_ugaussian_Q((x - mx->m[k]) / mx->s[k]);
    return acc <= target;
}

/* The rounded, clipped mixture quantile: the smallest L in [1, cap] whose
 * rounding interval [L-0.5, L+0.5) reaches the draw. */
static int32_t mix_len(const mixture *mx, double z, int32_t cap)
{
    double target = z <= 0 ? gsl_cdf_ugaussian_P(z) : gsl_cdf_ugaussian_Q(z);
    if (cap == 1 || mix_below(mx, z, target, 1.5))
        return 1;
    if (!mix_below(mx, z, target, cap - 0.5))
        return cap;
    int32_t lo = 1, hi = cap - 1; /* below(lo + .5) false, below(hi + .5) true */
    while (hi - lo > 1) {
        int32_t mid = lo + (hi - lo) / 2;
        if (mix_below(mx, z, target, mid + 0.5))
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

int32_t gen_clip_round(double x, int32_t lo, int32_t cap)
{
    if (!(x < cap)) /* also catches +inf */
        return cap;
    if (!(x >= lo)) /* also catches NaN */
        return lo;
    int32_t v = (int32_t)lround(x);
    return v < lo ? lo : v > cap ? cap : v;
}

int32_t gen_prompt_tokens(const gen_params *p, gsl_rng *rp, int32_t lo)
{
    double pt = p->prompt_median;
    if (p->prompt_sigma > 0)
        pt *= exp(p->prompt_sigma * gsl_ran_gaussian(rp, 1.0));
    return gen_clip_round(pt, lo, TRACE_MAX_TOKENS);
}

trace *gen_trace(const gen_params *p, ts_err *e)
{
    if (check_params(p, e))
        return NULL;
    if (p->turns.on)
        return gen_trace_turns(p, e);
    mixture mx = {.n = p->n_comp};
    if (p->dist == GEN_MIXTURE) {
        double sum = 0;
        for (int k = 0; k < p->n_comp; k++)
            sum += p->w[k];
        for (int k = 0; k < p->n_comp; k++) {
            mx.w[k] = p->w[k] / sum;
            mx.m[k] = p->mean[k];
            mx.s[k] = p->sd[k];
        }
    }
    trace *t = trace_new();
    int32_t *len = malloc((size_t)p->group * sizeof *len);
    gsl_rng *rr = NULL, *rp = NULL;
    if (!t || !len) {
        ts_errf(e, "gen: out of memory");
        goto fail;
    }
    t->cap = (size_t)p->prompts * (size_t)p->steps;
    if (!(t->prompts = malloc(t->cap * sizeof *t->prompts))) {
        t->cap = 0;
        ts_errf(e, "gen: out of memory (%zu prompts)", (size_t)p->prompts * p->steps);
        goto fail;
    }
    double a = sqrt(p->corr), b = sqrt(1 - p->corr);
    for (int32_t s = 0; s < p->steps; s++) {
        rr = ts_rng_new(p->seed, 2 * (uint64_t)s);
        rp = ts_rng_new(p->seed, 2 * (uint64_t)s + 1);
        if (!rr || !rp) {
            ts_errf(e, "gen: cannot allocate an RNG");
            goto fail;
        }
        for (int32_t i = 0; i < p->prompts; i++) {
            int32_t ptok = gen_prompt_tokens(p, rp, 0);
            double zp = gsl_ran_gaussian(rr, 1.0);
            for (int32_t j = 0; j < p->group; j++) {
                double z = a * zp + b * gsl_ran_gaussian(rr, 1.0);
                if (p->dist == GEN_LOGNORMAL)
                    len[j] = gen_clip_round(exp(p->ln_mu + p->ln_sigma * z), 1, p->cap);
                else if (p->dist == GEN_MIXTURE)
                    len[j] = mix_len(&mx, z, p->cap);
                else
                    len[j] = p->fixed_len < p->cap ? p->fixed_len : p->cap;
            }
            int32_t dp = p->n_ranks > 0 ? i % p->n_ranks : -1;
            if (trace_add(t, s, i, dp, ptok, len, p->group, e))
                goto fail;
        }
        gsl_rng_free(rr);
        gsl_rng_free(rp);
        rr = rp = NULL;
    }
    free(len);
    return t;
fail:
    if (rr)
        gsl_rng_free(rr);
    if (rp)
        gsl_rng_free(rp);
    free(len);
    trace_free(t);
    return NULL;
}
