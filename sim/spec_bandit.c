/*
 * The epsilon-greedy bandit over draft configurations (see spec_bandit.h).
 * Storage: per batch-size group and arm, a ring of `window` rewards and the
 * cached median of its contents; groups are allocated when first used, so a
 * replica that only ever speculates at small batch holds a few rings.
 */
#include "sim/spec_bandit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "common/util.h"

/* fastrl's groups: 1..31, then 32..120 step 8, then 128..256 step 32 */
#define N_GROUPS (31 + 12 + 5)

typedef struct arm_ring {
    double *r;      /* window rewards (ring) */
    int n, head;    /* filled, next slot */
    double median;  /* of the ring's contents; valid when n > 0 */
} arm_ring;

struct spec_bandit {
    int n_arms, window;
    double epsilon;
    gsl_rng *rng;
    arm_ring *g[N_GROUPS]; /* n_arms rings per group, NULL until used */
    double *scratch;       /* window doubles for the median */
};

static int group_of(int batch)
{
    if (batch < 32)
        return batch < 1 ? 0 : batch - 1;
    if (batch < 128)
        return 31 + (batch - 32) / 8;
    int k = (batch - 128) / 32;
    return 43 + (k < 4 ? k : 4);
}

int spec_arms_parse(const char *s, spec_arm *out, ts_err *e)
{
    char buf[128];
    if (strlen(s) >= sizeof buf)
        return ts_errf(e, "spec arms '%s': longer than %zu characters", s, sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int d, k, v, used = 0;
        if (sscanf(tok, "%d_%d_%d%n", &d, &k, &v, &used) != 3 || tok[used] != '\0')
            return ts_errf(e, "spec arms: '%s' is not depth_topk_V", tok);
        if (d < 1 || d > SPEC_MAX_DEPTH || k < 1 || k > 15 || v < 1 || v > 48)
            return ts_errf(e, "spec arms: '%s' out of range (depth 1..%d, topk 1..15, V 1..48)", tok,
                           SPEC_MAX_DEPTH);
        if (n == SPEC_MAX_ARMS)
            return ts_errf(e, "spec arms: more than %d arms", SPEC_MAX_ARMS);
        out[n++] = (spec_arm){d, k, v};
    }
    if (n == 0)
        return ts_errf(e, "spec arms: empty list");
    return n;
}

spec_bandit *spec_bandit_new(int n, double epsilon, int window, uint64_t seed, uint64_t stream)
{
    if (n < 1 || n > SPEC_MAX_ARMS || window < 1)
        return NULL;
    spec_bandit *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->n_arms = n;
    b->window = window;
    b->epsilon = epsilon;
    b->rng = ts_rng_new(seed, stream);
    b->scratch = malloc((size_t)window * sizeof *b->scratch);
    if (!b->rng || !b->scratch) {
        spec_bandit_free(b);
        return NULL;
    }
    return b;
}

void spec_bandit_free(spec_bandit *b)
{
    if (!b)
        return;
    for (int g = 0; g < N_GROUPS; g++)
        if (b->g[g]) {
            for (int a = 0; a < b->n_arms; a++)
                free(b->g[g][a].r);
            free(b->g[g]);
        }
    free(b->scratch);
    if (b->rng)
        gsl_rng_free(b->rng);
    free(b);
}

int spec_bandit_pick(spec_bandit *b, int batch, unsigned valid)
{
    unsigned all = (1u << b->n_arms) - 1;
    valid &= all;
    if (!valid)
        valid = all;
    int n_valid = 0;
    for (int a = 0; a < b->n_arms; a++)
        n_valid += (valid >> a) & 1;
    if (gsl_rng_uniform(b->rng) < b->epsilon) {
        int k = (int)gsl_rng_uniform_int(b->rng, (unsigned long)n_valid);
        for (int a = 0; a < b->n_arms; a++)
            if (((valid >> a) & 1) && k-- == 0)
                return a;
    }
    const arm_ring *ring = b->g[group_of(batch)];
    int best = -1;
    double best_v = -INFINITY;
    for (int a = 0; a < b->n_arms; a++) {
        if (!((valid >> a) & 1))
            continue;
        double v = ring && ring[a].n > 0 ? ring[a].median : INFINITY;
        if (best < 0 || v > best_v) {
            best_v = v;
            best = a;
        }
    }
    return best;
}

/* k-th smallest of x[0..n) (0-based), rearranging x: Hoare quickselect with
 * the middle element as pivot. */
static double select_kth(double *x, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        double pv = x[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (x[i] < pv)
                i++;
            while (x[j] > pv)
                j--;
            if (i <= j) {
                double t = x[i];
                x[i++] = x[j];
                x[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return x[k];
    }
    return x[k];
}

void spec_bandit_record(spec_bandit *b, int batch, int arm, double reward)
{
    if (arm < 0 || arm >= b->n_arms || !isfinite(reward))
        return;
    int g = group_of(batch);
    if (!b->g[g] && !(b->g[g] = calloc((size_t)b->n_arms, sizeof *b->g[g])))
        return; /* out of memory: the reward is dropped, the bandit still picks */
    arm_ring *r = &b->g[g][arm];
    if (!r->r && !(r->r = malloc((size_t)b->window * sizeof *r->r)))
        return;
    r->r[r->head] = reward;
    r->head = (r->head + 1) % b->window;
    if (r->n < b->window)
        r->n++;
    /* the median as numpy takes it: the middle one, or the mean of the two */
    memcpy(b->scratch, r->r, (size_t)r->n * sizeof *r->r);
    double hi = select_kth(b->scratch, r->n, r->n / 2);
    if (r->n % 2 == 0) {
        double lo = b->scratch[0];
        for (int i = 1; i < r->n / 2; i++)
            lo = b->scratch[i] > lo ? b->scratch[i] : lo;
        r->median = (lo + hi) / 2;
    } else {
        r->median = hi;
    }
}

double spec_bandit_median(const spec_bandit *b, int batch, int arm)
{
    const arm_ring *ring = b->g[group_of(batch)];
    if (arm < 0 || arm >= b->n_arms || !ring || ring[arm].n == 0)
        return -1.0;
    return ring[arm].median;
}
