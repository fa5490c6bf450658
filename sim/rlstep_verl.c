/*
 * The training phases of a synchronous RL step as VeRL's FSDP workers run
 * them (verl/workers/fsdp_workers.py, verl/workers/actor/dp_actor.py), with
 * the settings of fastrl's run scripts (examples/grpo_7B.sh,
 * examples/grpo_32B_multi_nodes.sh):
 *
 * - The GPUs form data-parallel ranks of train.sp GPUs each (Ulysses
 *   sequence parallelism, ulysses_sequence_parallel_size 4 on 7B, 8 on 32B);
 *   each sequence runs on its rank's sp GPUs in lock step, priced by the DCP
 *   training cost (models/train_cost.c: compute split over the group, four
 *   all-to-alls per layer forward).
 * - The trainer balances the batch over the ranks before training
 *   (trainer.balance_batch, on by default: equal counts, balanced token
 *   sums; here greedy longest-first into the lightest rank with room).
 * - Micro-batches are formed by token budget (use_dynamic_bsz): a rank
 *   packs its sequences into the fewest micro-batches of at most
 *   train.micro_batch_tokens x sp tokens (ppo_max_token_len_per_gpu x the
 *   SP size), balanced by tokens.
 * - FSDP shards the parameters over all GPUs (fsdp_size -1; train.fsdp_size
 *   shards them over groups of that many and replicates across the groups,
 *   HSDP, adding an all-reduce of each gradient shard across the replicas):
 *   every micro-batch all-gathers the bf16 weights for its forward, again for
 *   its backward (reshard_after_forward), and reduce-scatters fp32 gradients;
 *   prefetching overlaps this with compute, so a micro-batch takes the
 *   larger of the two.
 * - Old log-prob and reference are forward passes over each rank's whole
 *   share; the phase ends with the slowest rank.
 * - The update walks each rank's share in PPO mini-batches of
 *   train.mini_batch_prompts prompts x their responses / ranks
 *   (ppo_mini_batch_size 4 on 7B, 8 on 32B): every mini-batch ends in an
 *   optimizer step, a barrier, so each costs its slowest rank, and
 *   train.update_epochs passes repeat it.
 * Parameter and optimizer offload between phases (param_offload,
 * optimizer_offload) move each GPU's 1/gpus shard once per phase; not priced
 * (well under a second).  The update's memory is checked, and keeping the
 * states in host memory through the update (train.offload) is priced, by
 * sim/rlstep_mem.c.
 */
#include "sim/rlstep_verl.h"

#include <math.h>
#include <stdlib.h>

#include "models/comm.h"
#include "models/memory.h"
#include "models/train_cost.h"
#include "sim/rlstep_mem.h"

typedef struct verl_ctx {
    const hw_desc *hw;
    tc_model tm;
    tc_par par;
    double budget;          /* tokens per micro-batch of a rank */
    double ag_s, rs_s;      /* FSDP weight all-gather, gradient reduce-scatter, s */
    double host_s;          /* train.offload: host copies of a forward micro-batch, s */
    train_mem mem;          /* the update's memory and offload costs */
    double *bin;            /* scratch: tokens per micro-batch */
    int32_t *sort;          /* scratch: merge sort buffer (one per response) */
    tc_work *w;             /* scratch: work per micro-batch */
    int sp, gpus, dp;       /* GPUs per rank, GPUs, data-parallel ranks */
    size_t n;               /* responses */
    double *L;              /* n: tokens of each response (prompt + response) */
    int32_t *order;         /* n: responses longest first */
    int32_t *rank;          /* n: each response's rank */
    int32_t *shard;         /* n: each rank's responses in trace order, ranks one after another */
    int32_t *tmp;           /* n: scratch for rank_time() */
    int32_t *cnt;           /* dp: responses per rank */
    double *tok;            /* dp: tokens per rank */
    double *busy;           /* dp: each rank's busy time in a phase, s */
} verl_ctx;

static int by_len_desc(const void *a, const void *b, void *lens)
{
    const double *L = lens;
    double x = L[*(const int32_t *)a], y = L[*(const int32_t *)b];
    if (x != y)
        return x < y ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* Sorts idx[0..n) by length descending, index ascending on ties: a strict
 * total order on distinct indices, so the result is the one sorted order
 * whatever the algorithm.  Insertion sort for short runs (a rank's
 * micro-batch share), bottom-up merge sort through scratch[0..n) above that
 * (the whole step's responses: insertion was O(n^2) there). */
static void sort_idx(int32_t *idx, size_t n, const double *L, int32_t *scratch)
{
    enum { RUN = 32 };
    for (size_t lo = 0; lo < n; lo += RUN) {
        size_t hi = lo + RUN < n ? lo + RUN : n;
        for (size_t i = lo + 1; i < hi; i++) {
            int32_t v = idx[i];
            size_t j = i;
            while (j > lo && by_len_desc(&idx[j - 1], &v, (void *)L) > 0) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = v;
        }
    }
    int32_t *src = idx, *dst = scratch;
    for (size_t w = RUN; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi)
                dst[o++] = by_len_desc(&src[b], &src[a], (void *)L) < 0 ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < hi)
                dst[o++] = src[b++];
        }
        int32_t *x = src;
        src = dst;
        dst = x;
    }
    if (src != idx)
        for (size_t i = 0; i < n; i++)
            idx[i] = src[i];
}

/* Time on one rank of the sequences seq[0..k) (lengths L): packed into the
 * fewest balanced micro-batches within the token budget; forward only
 * (bwd 0) or forward, recomputation and backward (bwd 1). */
static double rank_time(verl_ctx *c, const int32_t *seq, int k, const double *L, int bwd,
                        int32_t *tmp)
{
    if (k <= 0)
        return 0.0;
    double sum = 0;
    for (int i = 0; i < k; i++) {
        sum += L[seq[i]];
        tmp[i] = seq[i];
    }
    int nb = (int)ceil(sum / c->budget);
    if (nb < 1)
        nb = 1;
    if (nb > k)
        nb = k;
    sort_idx(tmp, (size_t)k, L, c->sort);
    for (;;) {
        for (int b = 0; b < nb; b++) {
            c->bin[b] = 0;
            c->w[b] = (tc_work){0};
        }
        int over = 0;
        for (int i = 0; i < k; i++) {
            int best = 0;
            for (int b = 1; b < nb; b++)
                if (c->bin[b] < c->bin[best])
                    best = b;
            c->bin[best] += L[tmp[i]];
            tc_work_add(&c->w[best], 1, (int32_t)L[tmp[i]], 1);
            over |= c->bin[best] > c->budget && c->w[best].n > 1;
        }
        if (!over || nb == k)
            break;
        nb++;
    }
    double t = 0, comm = bwd ? 2 * c->ag_s + c->rs_s : c->ag_s;
    comm = fmax(comm, bwd ? c->mem.bwd_s : c->host_s);
    for (int b = 0; b < nb; b++) {
        tc_breakdown bd;
        double full = tc_microbatch_time(c->hw, &c->tm, &c->par, &c->w[b], &bd);
        t += fmax(bwd ? full : bd.fwd_s, comm);
    }
    return t;
}

static int add_busy(run_record *rec, int gpus, int sp, int phase, double t0, const double *busy,
                    double len)
{
    if (!rec)
        return 0;
    for (int g = 0; g < gpus; g++) {
        double b = busy[g / sp];
        if (b > 0 && run_add_interval(rec, g, phase, TL_BUSY, t0, t0 + b))
            return -1;
        if (b < len && run_add_interval(rec, g, phase, TL_IDLE, t0 + b, t0 + len))
            return -1;
    }
    return 0;
}

/* Checks the scenario's VeRL trainer against t and sets up c's model,
 * parallelism and token budget; *mini gets the responses per rank of a PPO
 * mini-batch.  Returns 0, or -1 with e set. */
static int verl_init(verl_ctx *c, const scenario *s, const llm_desc *m, const trace *t,
                     int *mini, ts_err *e)
{
    int sp = s->train_sp, gpus = s->gpus;
    if (sp < 1 || gpus % sp)
        return ts_errf(e, "%s: train.sp = %d does not divide cluster.gpus = %d", s->path, sp, gpus);
    int dp = gpus / sp;
    size_t n = trace_n_responses(t);
    if (n == 0 || t->n_prompts == 0)
        return ts_errf(e, "%s: no responses to train on", s->path);
    double per_prompt = (double)n / (double)t->n_prompts;
    *mini = (int)floor(s->mini_batch_prompts * per_prompt / dp + 1e-9);
    if (*mini < 1)
        return ts_errf(e, "%s: train.mini_batch_prompts = %d gives less than one response "
                          "per data-parallel rank (%d ranks)", s->path, s->mini_batch_prompts, dp);
    /* the [dcp] section's activation count and all-to-all efficiency, as the
     * DCP trainer uses them (defaults 34 and 1: a GPT layer, full bandwidth) */
    if (tc_model_init(&c->tm, m, 0, s->dcp.act_factor, e))
        return ts_err_prefix(e, "%s: [dcp]: ", s->path);
    c->tm.a2a_eff = s->dcp.a2a_eff;
    if (!tc_sp_ok(&c->tm, sp, 0))
        return ts_errf(e, "%s: train.sp = %d does not divide the heads of %s", s->path, sp, m->name);
    c->par = (tc_par){.sp = sp, .ring = 0, .ckpt_a = s->recompute ? c->tm.n_a : 0};
    c->budget = (double)s->micro_batch_tokens * sp;
    c->sp = sp;
    c->gpus = gpus;
    c->dp = dp;
    c->n = n;
    return 0;
}

/* Allocates c's per-response and per-rank arrays.  Returns 0, or -1 with e
 * set; verl_free() frees what was allocated. */
static int verl_alloc(verl_ctx *c, ts_err *e)
{
    size_t n = c->n, dp = (size_t)c->dp;
    c->L = malloc(n * sizeof *c->L);
    c->tok = calloc(dp, sizeof *c->tok);
    c->busy = calloc(dp, sizeof *c->busy);
    c->order = malloc(n * sizeof *c->order);
    c->rank = malloc(n * sizeof *c->rank);
    c->cnt = calloc(dp, sizeof *c->cnt);
    c->shard = malloc(n * sizeof *c->shard);
    c->tmp = malloc(n * sizeof *c->tmp);
    c->bin = malloc(n * sizeof *c->bin);
    c->sort = malloc(n * sizeof *c->sort);
    c->w = malloc(n * sizeof *c->w);
    if (!c->L || !c->tok || !c->busy || !c->order || !c->rank || !c->cnt || !c->shard ||
        !c->tmp || !c->bin || !c->sort || !c->w)
        return ts_errf(e, "out of memory");
    return 0;
}

/* Frees c's arrays.  Cannot fail. */
static void verl_free(verl_ctx *c)
{
    free(c->L);
    free(c->tok);
    free(c->busy);
    free(c->order);
    free(c->rank);
    free(c->cnt);
    free(c->shard);
    free(c->tmp);
    free(c->bin);
    free(c->sort);
    free(c->w);
}

/* Each response's tokens (prompt + response, capped) in c->L, and c->order
 * the identity.  Cannot fail. */
static void verl_lengths(verl_ctx *c, const scenario *s, const trace *t)
{
    size_t k = 0;
    for (size_t i = 0; i < t->n_prompts; i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++, k++) {
            int32_t len = scenario_cap_response(s, t->prompts[i].resp[j]);
            c->L[k] = (double)t->prompts[i].prompt_tokens + len;
            c->order[k] = (int32_t)k;
        }
}

/* The update's memory (res->train_mem_gb) and offload costs, and the FSDP
 * traffic per micro-batch inside the shard group (and across replicas under
 * HSDP), with c->order longest first.  Returns 0, or -1 with e set (the
 * update does not fit). */
static int verl_fsdp(verl_ctx *c, const scenario *s, const llm_desc *m, rlstep_result *res,
                     ts_err *e)
{
    /* memory: a GPU holds its 1/sp of a micro-batch, the budget or one
     * longer sequence */
    if (train_mem_plan(s, c->hw, m, c->gpus, train_mem_tokens(s, c->L[c->order[0]]), &c->mem, e))
        return -1;
    res->train_mem_gb = c->mem.need.total / 1e9;
    /* FSDP traffic inside the shard group (and across replicas under HSDP) */
    int f = c->mem.group;
    double W = mem_weights(m, 1);
    c->ag_s = comm_allgather(c->hw, W, f);
    c->rs_s = comm_reduce_scatter(c->hw, 2.0 * W, f) +
              train_hsdp_allreduce(s, c->hw, 2.0 * W, c->gpus, f);
    return 0;
}

/* Balances the responses over the ranks (c->order, longest first, into the
 * lightest rank that has room: equal counts) and lays out each rank's
 * share in c->shard.  Cannot fail. */
static void verl_balance(verl_ctx *c)
{
    size_t n = c->n;
    int dp = c->dp;
    int32_t cap = (int32_t)((n + (size_t)dp - 1) / (size_t)dp);
    for (size_t i = 0; i < n; i++) {
        int best = -1;
        for (int r = 0; r < dp; r++)
            if (c->cnt[r] < cap && (best < 0 || c->tok[r] < c->tok[best]))
                best = r;
        c->rank[c->order[i]] = best;
        c->cnt[best]++;
        c->tok[best] += c->L[c->order[i]];
    }
    /* each rank's share in trace order, ranks one after another */
    size_t off = 0;
    for (int r = 0; r < dp; r++)
        for (size_t i = 0; i < n; i++)
            if (c->rank[i] == r)
                c->shard[off++] = (int32_t)i;
}

/* Old log-prob and reference (when s has a reference model): forward passes
 * over each rank's whole share from *now, which advances past them; the
 * phases and their timeline into res and rec.  Returns 0, or -1 with e set
 * (allocation failure). */
static int verl_forward(verl_ctx *c, const scenario *s, run_record *rec, double *now,
                        rlstep_result *res, ts_err *e)
{
    for (int ph = PH_OLD_LOGP; ph <= PH_REF; ph++) {
        res->phase_t0[ph] = *now;
        res->phase_s[ph] = 0;
        if (ph == PH_REF && !s->ref_model)
            continue;
        double len = 0;
        size_t off = 0;
        c->host_s = ph == PH_REF ? c->mem.ref_s : c->mem.fwd_s;
        for (int r = 0; r < c->dp; r++) {
            c->busy[r] = rank_time(c, c->shard + off, c->cnt[r], c->L, 0, c->tmp);
            off += (size_t)c->cnt[r];
            len = fmax(len, c->busy[r]);
        }
        res->phase_s[ph] = len;
        if (add_busy(rec, c->gpus, c->sp, ph, *now, c->busy, len))
            return ts_errf(e, "out of memory for the timeline");
        *now += len;
    }
    return 0;
}

/* The update from now: PPO mini-batches of `mini` responses per rank, each
 * ending in an optimizer step on every rank, train.update_epochs passes; the
 * phase, its imbalance, its timeline and the step's end into res and rec.
 * Returns 0, or -1 with e set (allocation failure). */
static int verl_update(verl_ctx *c, const scenario *s, run_record *rec, double now, int mini,
                       rlstep_result *res, ts_err *e)
{
    int dp = c->dp;
    double len = 0, sum = 0;
    for (int r = 0; r < dp; r++)
        c->busy[r] = 0;
    int32_t most = 0;
    for (int r = 0; r < dp; r++)
        most = c->cnt[r] > most ? c->cnt[r] : most;
    for (int32_t j = 0; j < most; j += mini) {
        double slow = 0;
        size_t off = 0;
        for (int r = 0; r < dp; r++) {
            int32_t take = c->cnt[r] - j < mini ? c->cnt[r] - j : mini;
            double tr = take > 0 ? rank_time(c, c->shard + off + j, take, c->L, 1, c->tmp) : 0;
            c->busy[r] += tr + c->mem.opt_s;
            slow = fmax(slow, tr);
            off += (size_t)c->cnt[r];
        }
        len += slow + c->mem.opt_s; /* train.offload: the step on the host CPUs */
    }
    for (int r = 0; r < dp; r++) {
        c->busy[r] *= s->update_epochs;
        sum += c->busy[r];
    }
    len *= s->update_epochs;
    res->train_imbalance = len > 0 ? (len - sum / dp) / len : 0;
    res->phase_t0[PH_UPDATE] = now;
    res->phase_s[PH_UPDATE] = len;
    if (add_busy(rec, c->gpus, c->sp, PH_UPDATE, now, c->busy, len))
        return ts_errf(e, "out of memory for the timeline");
    res->step_s = now + len;
    return 0;
}

int rlstep_verl_phases(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                       double now, rlstep_result *res, run_record *rec, ts_err *e)
{
    verl_ctx c = {.hw = hw};
    int mini = 0;
    if (verl_init(&c, s, m, t, &mini, e))
        return -1;
    int rc = -1;
    if (verl_alloc(&c, e))
        goto done;
    verl_lengths(&c, s, t);
    /* balance: longest first into the lightest rank that has room */
    sort_idx(c.order, c.n, c.L, c.sort);
    if (verl_fsdp(&c, s, m, res, e))
        goto done;
    verl_balance(&c);
    if (verl_forward(&c, s, rec, &now, res, e) || verl_update(&c, s, rec, now, mini, res, e))
        goto done;
    rc = 0;
done:
    verl_free(&c);
    return rc;
}
