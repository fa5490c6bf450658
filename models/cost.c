/*
 * Cost model: seconds of GPU time for the operations the simulator prices.
 *
 * Everything is a roofline over FLOPs and bytes with the achieved-efficiency
 * parameters of hw_desc; nothing is a table lookup.  A GEMM (gemm_time) is
 * priced the way cuBLAS runs it: as the fastest of a few kernels
 * (hw->gemm_tiles: an output tile and its efficiency relative to gemm_eff),
 * each run unsplit or split-K, each as whole waves of tiles over the SMs (a
 * partly filled last wave costs as much as a full one) plus the split
 * kernels' partial sums and gemm_lat_s of pipeline fill.  Its memory side
 * streams A, B and C once, (m*k + k*n + m*n) * 2 bytes, at hbm_bw *
 * gemm_mem_eff plus a fill that grows with the bytes (so small-batch decode
 * is bound by reading the weights).  The GEMM takes the longer
 * side plus gemm_mix of the shorter (the kernels overlap the two only in
 * part).  Every term, and so the minimum over kernels and splits, never
 * decreases as the token count m grows.  The H100 fit (models/hw/h100.ini)
 * is two kernels, 64x128 and 128x256.
 *
 * Elementwise kernels (norms, RoPE, activation, residual add, embedding
 * gather) are streaming kernels: launch_s plus bytes over the streaming
 * bandwidth (faster while the working set fits the L2), scaled by how well
 * the kernel that serving engines ship uses it, or, with the hw's per-row
 * floor (ew_row_bw_*), no faster than waves of thread blocks each streaming
 * one row (ew_kernels below).  Attention is a roofline of its FLOPs at attn_eff (for
 * chunks and prefill, with attn_fa_version set, FlashAttention's published
 * H100 throughput at the chunk's equivalent causal length) and its KV bytes
 * at mem_eff.
 *
 * cost_iter() is on the simulator's hot path (about a million calls per
 * simulated RL step): it prices one layer in closed form and multiplies by the
 * layer count, with no allocation, no file access and no loops over
 * sequences (a few hundred flops in all).  The rollout calls it through a
 * cost_cache (below), which keeps the terms that depend only on the token
 * count and returns the same value bit for bit.  Attention uses the per-sequence
 * sums the caller passes (sum of contexts, sum of q*ctx), never a mean.  It is
 * GPU time only: no CPU scheduling overhead and no sampling.  All functions
 * are pure and cannot fail; callers pass descriptions that hw_load() and
 * llm_load() validated.
 *
 * The per-op predictors (cost_kernel, cost_attn_decode, cost_attn_chunk,
 * with cost_gemm and cost_stream) are the pieces cost_iter() adds up, with
 * the same arithmetic, so that a measured kernel time can be compared with
 * exactly what the simulator charges for it (models/calib.c maps each row of
 * a calibration CSV to one of them; models/fit.c fits hw_desc's parameters
 * through them).
 *
 * Parameter values live in models/hw/<gpu>.ini, replaced by a fit when
 * models/calib/<gpu>.csv exists; `tailsim calib vidur FILE` checks them
 * against Vidur's measured H100 operator times, `tailsim calib check CSV`
 * against a calibration CSV.
 */
#include "models/cost.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "models/comm.h"

/* The elementwise kernels serving engines ship (Sarathi-Serve's and vLLM's
 * CUDA kernels, bf16), as the Vidur H100 profiles measure them.  Each kernel
 * of T rows (tokens) and B bytes (each input read once, each output written
 * once) takes
 *
 *     launch_s + lat + max(stream, waves x row)
 *
 *   stream = B x (h / l2_gain + (1 - h)) / (hbm_bw x mem_eff x bw) + T x row_s
 *       The bytes at the kind's fraction `bw` of the streaming bandwidth.
 *       When the working set (B x footprint) fits the L2 (the profiles run an op repeatedly,
 *       and in a forward pass its input was just written by the op before),
 *       a fraction h of it comes from L2 at l2_gain times the rate: h = 1 up
 *       to EW_L2_LO x hw->l2_bytes, 0 from l2_bytes on, linear between.  The
 *       per-byte cost never falls as B grows, so the stream never shortens.
 *       row_s: what each row's thread block costs the whole GPU on top of
 *       its bytes (block launch and retirement: short rows stream slower).
 *   waves x row = ceil(T / (EW_ROWS_PER_SM x sms)) x (B / T) / hw->ew_row_bw
 *       The per-row floor: one block walks one row, 1,024-thread blocks fit
 *       two to an SM (2,048 threads), so rows run in waves of 2 x sms, and a
 *       wave takes no less than one row's bytes at one block's rate (the
 *       steps at 264, 528, ... tokens in the profiles' RMSNorm and SiLU*mul).
 *       Absent ew_row_bw (0): no floor.
 *   lat: the kernel's own minimum on top of launch_s (the norm's block
 *       reduction, RoPE's cos/sin lookup, the gather's index load).
 *
 * bw, l2_gain, row_s and lat describe the kernels' code and were fitted,
 * class by class, to the elementwise ops of the two Vidur H100 MLP profiles
 * (../shared/profiles/vidur-h100, Llama-2-7B and CodeLlama-34B, TP 1-8,
 * 1-4096 tokens; Nelder-Mead on the worst per-band MAPE, with launch_s = 1
 * us, EW_L2_LO and EW_ROWS_PER_SM fixed) together with the hw's ew_row_bw_*
 * (models/hw/h100.ini), nothing else.  The residual add is a vectorised
 * kernel, not one block per row: no row cost, no floor; it holds three
 * tensors in L2 (two read, one written) where its byte count has two (one
 * operand is still in L2 from the op that wrote it), its footprint 1.5.
 * They carry over to H200 and A100 unchanged (documented in docs/model.md). */
#define K_ADD COST_K_ADD
#define K_ACT COST_K_ACT
#define K_ROPE COST_K_ROPE
#define K_NORM COST_K_NORM
#define K_GATHER COST_K_GATHER
#define K_COUNT COST_K_COUNT

typedef struct {
    double bw;        /* fraction of hbm_bw * mem_eff streamed */
    double l2_gain;   /* rate from L2 over the rate from HBM (>= 1) */
    double row_s;     /* s per row on top of the bytes */
    double lat;       /* s on top of launch_s */
    double footprint; /* bytes it holds in L2 per byte counted */
} ew_kernel;

static const ew_kernel ew_kernels[K_COUNT] = {
    [K_ADD] = {0.837, 1.191, 0.0, 0.0, 1.5},
    [K_ACT] = {0.710, 1.000, 1.05e-9, 0.0, 1.0},
    [K_ROPE] = {0.598, 1.108, 0.19e-9, 0.71e-6, 1.0},
    [K_NORM] = {0.485, 1.467, 3.05e-9, 0.91e-6, 1.0},
    [K_GATHER] = {0.242, 1.037, 2.87e-9, 1.41e-6, 1.0},
};

#define EW_ROWS_PER_SM 2.0 /* rows (1,024-thread blocks) resident per SM */
#define EW_L2_LO 0.725     /* working set, as a fraction of l2_bytes, below which it all hits */

/* Fraction of a working set of `bytes` served from L2 (see above). */
static double ew_l2_hit(const hw_desc *hw, double bytes)
{
    double hi = hw->l2_bytes, lo = EW_L2_LO * hi;
    if (hi <= 0 || bytes >= hi)
        return 0.0;
    if (bytes <= lo)
        return 1.0;
    return (hi - bytes) / (hi - lo);
}

static double kernel_time(const hw_desc *hw, cost_kernel_kind k, double bytes, double rows)
{
    const ew_kernel *e = &ew_kernels[k];
    double h = ew_l2_hit(hw, bytes * e->footprint);
    double t = bytes * (h / e->l2_gain + (1.0 - h)) / (hw->hbm_bw * hw->mem_eff * e->bw);
    if (rows > 0)
        t += rows * e->row_s;
    double rbw = hw->ew_row_bw[k];
    if (rbw > 0 && rows >= 1) {
        double waves = ceil(rows / (EW_ROWS_PER_SM * hw->sms));
        double t_row = waves * bytes / rows / rbw;
        if (t_row > t)
            t = t_row;
    }
    return hw->launch_s + e->lat + t;
}

double cost_kernel(const hw_desc *hw, cost_kernel_kind kind, double bytes, double rows)
{
    if (bytes <= 0 || (int)kind < 0 || kind >= COST_K_COUNT)
        return 0.0;
    return kernel_time(hw, kind, bytes, rows);
}

double cost_stream(const hw_desc *hw, double bytes)
{
    if (bytes <= 0)
        return 0.0;
    return hw->launch_s + bytes / (hw->hbm_bw * hw->mem_eff);
}

/* The split-K factors a kernel may run with, and the shallowest K slice it
 * splits into (two 64-deep k-blocks).  cuBLAS's split-K kernels cut K into
 * a few slices; which one it runs is part of the kernel choice below. */
static const double gemm_splits[] = {1.0, 2.0, 4.0, 8.0, 16.0};
#define GEMM_SLICE_MIN 128.0

/* Compute side of one GEMM on the kernel of tile tm x tn whose rate is
 * `rate` FLOP/s per SM: the fastest of its split-K variants, each priced as
 * whole waves of (tile, K slice) work units over the SMs, a partly filled
 * last wave costing a full one, plus the partial sums the split kernels move
 * through HBM (gemm_splitk_bytes per output element and slice), plus
 * gemm_half_flops at the kernel's rate (a fixed cost in FLOPs: a slower
 * kernel pays it longer, which is what sets it apart from gemm_lat_s).  For each
 * split the time never decreases as m grows (the waves and the partial sums
 * only grow), and the set of splits depends on k alone, so neither does the
 * fastest.  force > 0 takes that split alone (INFINITY when k does not
 * split so); the split taken goes to *split when not NULL. */
static inline __attribute__((always_inline)) double
gemm_kernel_time(const hw_desc *hw, double m, double n, double k, double tm, double tn,
                 double rate, double red_bw, int force, int *split)
{
    double tiles = ceil(m / tm) * ceil(n / tn);
    double best = INFINITY;
    int best_s = 0;
    double half = hw->gemm_half_flops / (rate * hw->sms);
    for (size_t i = 0; i < sizeof gemm_splits / sizeof gemm_splits[0]; i++) {
        double s = gemm_splits[i], slice = k / s;
        if (s > 1.0 && slice < GEMM_SLICE_MIN)
            break;
        if (force && s != force)
            continue;
        double waves = ceil(tiles * s / hw->sms);
        double t = waves * 2.0 * tm * tn * slice / rate;
        if (s > 1.0 && red_bw > 0)
            t += hw->gemm_splitk_bytes * m * n * s / red_bw;
        if (t < best) {
            best = t;
            best_s = (int)s;
        }
    }
    if (split)
        *split = best_s;
    return best + half;
}

/* cost_gemm() with base compute efficiency `base` (gemm_eff, or train_eff
 * for a training step's GEMMs).  Compute side: the fastest kernel of
 * hw->gemm_tiles (one tile_m x tile_n kernel when the list is empty), each
 * at base x its relative efficiency, plus gemm_lat_s.  Memory side: A, B
 * and C read or written once at hbm_bw x gemm_mem_eff, plus gemm_mem_lat_s
 * (< 0: gemm_lat_s) and the fill that grows with the bytes.  The longer
 * side plus gemm_mix of the shorter, after launch_s.  Both sides and their
 * combination never decrease as m grows.
 *
 * fk >= -1 forces the compute side onto that kernel (an index into
 * gemm_tiles; -1 the tile_m x tile_n one) and fs > 0 onto that split, for
 * cost_gemm_forced(); fk < -1, fs 0: the fastest, as cost_gemm() prices.
 * The kernel and split priced go to *kernel and *split when not NULL.
 * Both functions are always inlined, so that cost_gemm()'s constant
 * arguments (nothing forced, nothing reported) fold away: it runs as fast
 * as it did before cost_gemm_choice() existed. */
static inline __attribute__((always_inline)) double
gemm_time(const hw_desc *hw, double m, double n, double k, double base, int fk, int fs,
          int *kernel, int *split)
{
    double gme = hw->gemm_mem_eff > 0 ? hw->gemm_mem_eff : hw->mem_eff;
    double hbm = hw->hbm_bw * gme;
    double bytes = 2.0 * (m * k + k * n + m * n);
    double t_mem = bytes / hbm + (hw->gemm_mem_lat_s >= 0 ? hw->gemm_mem_lat_s : hw->gemm_lat_s);
    if (hw->gemm_mem_fill_s > 0)
        t_mem += hw->gemm_mem_fill_s * bytes / (bytes + hw->gemm_mem_fill_bytes);

    double sm_rate = hw->peak_flops * base / hw->sms;
    double t_comp;
    int bk = -1, bs = 0;
    if (hw->n_gemm_tiles > 0 && fk != -1) {
        t_comp = INFINITY;
        for (int i = 0; i < hw->n_gemm_tiles; i++) {
            if (fk >= 0 && i != fk)
                continue;
            const hw_gemm_tile *g = &hw->gemm_tiles[i];
            int s;
            double t = gemm_kernel_time(hw, m, n, k, g->m, g->n, sm_rate * g->rel, hbm, fs,
                                        split ? &s : NULL);
            if (t < t_comp) {
                t_comp = t;
                bk = i;
                if (split)
                    bs = s;
            }
        }
    } else {
        t_comp = gemm_kernel_time(hw, m, n, k, hw->tile_m, hw->tile_n, sm_rate, hbm, fs,
                                  split ? &bs : NULL);
    }
    t_comp += hw->gemm_lat_s;
    if (kernel)
        *kernel = bk;
    if (split)
        *split = bs;

    double lo = t_comp < t_mem ? t_comp : t_mem, hi = t_comp < t_mem ? t_mem : t_comp;
    return hw->launch_s + hi + hw->gemm_mix * lo;
}

double cost_gemm(const hw_desc *hw, double m, double n, double k)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return 0.0;
    return gemm_time(hw, m, n, k, hw->gemm_eff, -2, 0, NULL, NULL);
}

double cost_gemm_choice(const hw_desc *hw, double m, double n, double k, int *kernel, int *split)
{
    *kernel = -1;
    *split = 0;
    if (m <= 0 || n <= 0 || k <= 0)
        return 0.0;
    return gemm_time(hw, m, n, k, hw->gemm_eff, -2, 0, kernel, split);
}

double cost_gemm_forced(const hw_desc *hw, double m, double n, double k, int kernel, int split)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return 0.0;
    if (kernel < -1 || kernel >= hw->n_gemm_tiles || (kernel == -1 && hw->n_gemm_tiles > 0) ||
        split < 1)
        return INFINITY;
    return gemm_time(hw, m, n, k, hw->gemm_eff, kernel, split, NULL, NULL);
}

double cost_train_gemm_eff(const hw_desc *hw)
{
    return hw->train_eff > 0 ? hw->train_eff : hw->gemm_eff;
}

double cost_gemm_train(const hw_desc *hw, double m, double n, double k)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return 0.0;
    return gemm_time(hw, m, n, k, cost_train_gemm_eff(hw), -2, 0, NULL, NULL);
}

/* Forward causal attention throughput on H100 SXM5, head dim 128, bf16, as a
 * fraction of its 989 TFLOP/s, at sequence lengths 512, 1k, ..., 16k
 * (FlashAttention-3 paper, Shah et al. 2024, arXiv:2407.08608, Figure 5,
 * causal head dim 128: FlashAttention-2 191, 260, 298, 319, 333, 335 TFLOP/s;
 * FlashAttention-3 292, 423, 521, 579, 602, 616).  Published, not fitted. */
static const double attn_fa_table[2][6] = {
    {0.193, 0.263, 0.301, 0.323, 0.337, 0.339},
    {0.295, 0.428, 0.527, 0.585, 0.609, 0.623},
};

/* Compute efficiency of chunked causal attention with `q` query tokens over
 * `pairs` (query, key) pairs: attn_eff, or with attn_fa_version set the
 * published table at the causal length with as many keys per query, L =
 * 2 x pairs / q (a whole causal sequence of L tokens has L/2), piecewise
 * linear in log2(L) between 512 and 16k and flat outside. */
static double attn_chunk_eff(const hw_desc *hw, double q, double pairs)
{
    if (hw->attn_fa_version < 2 || hw->attn_fa_version > 3 || q <= 0)
        return hw->attn_eff;
    const double *t = attn_fa_table[hw->attn_fa_version - 2];
    double L = 2.0 * pairs / q;
    if (L <= 512.0)
        return t[0];
    if (L >= 16384.0)
        return t[5];
    double x = log2(L) - 9.0; /* 0 at 512, 5 at 16k */
    int i = (int)x;
    double f = x - i;
    return t[i] * (1.0 - f) + t[i + 1] * f;
}

/* Attention over KV read from HBM: memory for `kv_bytes`, compute for `flops`
 * at efficiency `eff` (decode is memory bound, long prefill compute bound). */
static double attn_time(const hw_desc *hw, double flops, double kv_bytes, double eff)
{
    double tc = flops / (hw->peak_flops * eff);
    double tm = kv_bytes / (hw->hbm_bw * hw->mem_eff);
    return hw->launch_s + (tc > tm ? tc : tm);
}

double cost_attn_decode(const hw_desc *hw, double heads, double kv_heads, double head_dim,
                        double batch, double ctx_sum)
{
    if (batch <= 0)
        return 0.0;
    double kv_tok = 2.0 * kv_heads * head_dim * 2.0; /* K+V bytes/token */
    return attn_time(hw, 4.0 * heads * head_dim * ctx_sum,
                     ctx_sum * kv_tok + batch * 2.0 * heads * head_dim * 2.0, hw->attn_eff);
}

double cost_attn_chunk(const hw_desc *hw, double heads, double kv_heads, double head_dim,
                       double q_tokens, double attn_sum, double kv_sum)
{
    if (q_tokens <= 0)
        return 0.0;
    double kv_tok = 2.0 * kv_heads * head_dim * 2.0;
    return attn_time(hw, 4.0 * heads * head_dim * attn_sum,
                     kv_sum * kv_tok + q_tokens * 2.0 * heads * head_dim * 2.0,
                     attn_chunk_eff(hw, q_tokens, attn_sum));
}

double cost_lm_head(const hw_desc *hw, const llm_desc *m, int tp, double rows)
{
    return cost_gemm(hw, rows, (double)m->vocab / tp, m->hidden);
}

double cost_draft_fc(const hw_desc *hw, const llm_desc *m, int tp, double tokens)
{
    return cost_gemm(hw, tokens, (double)m->hidden / tp, 2.0 * m->hidden);
}

/* ---- cost_iter() ------------------------------------------------------------
 * Its terms come in three groups: those that depend only on the token count
 * T (iter_tok_terms: the layer's GEMMs, elementwise kernels and all-reduces,
 * the embedding), those that depend only on the LM head's row count
 * (iter_row_terms: final norm, LM head, logits all-gather), and attention,
 * which depends on the batch's sums.  iter_sum() adds them in one fixed
 * order.  cost_iter() computes the first two groups on the spot; the cache
 * below keeps them per count, so both add the same terms, produced by the
 * same formulas, in the same order. */

/* TP-local query heads and KV heads (KV heads are replicated when tp >
 * kv_heads), as every attention term has them. */
static void iter_heads(const llm_desc *m, int tp, double *heads, double *kvh)
{
    *heads = (double)m->heads / tp;
    *kvh = (double)m->kv_heads / tp;
    if (*kvh < 1)
        *kvh = 1;
}

/* One layer's token-count operators and the embedding gather: each
 * formula once, for iter_tok_terms() and cost_vidur_op(). */
typedef enum {
    LOP_NORM, LOP_QKV, LOP_ROPE, LOP_OPROJ, LOP_ADD, LOP_UP, LOP_ACT, LOP_DOWN, LOP_EMB
} layer_op;

static double layer_op_time(const hw_desc *hw, const llm_desc *m, int tp, layer_op op, double T)
{
    double h = m->hidden, hd = m->head_dim;
    double heads, kvh;
    iter_heads(m, tp, &heads, &kvh);
    double ffn = (double)m->ffn / tp;
    double act = T * h * 2.0; /* bytes of one [T, hidden] bf16 activation */
    switch (op) {
    case LOP_NORM: return kernel_time(hw, K_NORM, 2.0 * act, T);
    case LOP_QKV: return cost_gemm(hw, T, (heads + 2.0 * kvh) * hd, h);
    case LOP_ROPE: return kernel_time(hw, K_ROPE, 2.0 * T * (heads + kvh) * hd * 2.0, T); /* q, k */
    case LOP_OPROJ: return cost_gemm(hw, T, h, heads * hd);
    case LOP_ADD: return kernel_time(hw, K_ADD, 2.0 * act, T);
    case LOP_UP: return cost_gemm(hw, T, m->gated ? 2.0 * ffn : ffn, h);
    case LOP_ACT: return kernel_time(hw, K_ACT, (m->gated ? 3.0 : 2.0) * T * ffn * 2.0, T);
    case LOP_DOWN: return cost_gemm(hw, T, h, ffn);
    case LOP_EMB: return kernel_time(hw, K_GATHER, 2.0 * act, T);
    }
    return 0.0;
}

/* The token-count terms of one layer and the embedding for T >= 1 tokens on
 * a TP group of tp >= 1 GPUs, into e (all fields but the key T and fc).
 * Floating-point addition is not associative, so only the leading terms
 * (input norm, QKV, RoPE: the sum starts there) are stored summed; every
 * later term is stored alone and added one at a time.  An absent all-reduce
 * (tp == 1) is stored as 0.0: adding +0.0 to a positive sum leaves it bit for
 * bit unchanged. */
static void iter_tok_terms(const hw_desc *hw, const llm_desc *m, int tp, double T,
                           cost_cache_tok *e)
{
    double act = T * m->hidden * 2.0; /* bytes of one [T, hidden] bf16 activation */
    double t = 0.0;
    t += layer_op_time(hw, m, tp, LOP_NORM, T); /* input norm */
    t += layer_op_time(hw, m, tp, LOP_QKV, T);
    t += layer_op_time(hw, m, tp, LOP_ROPE, T);
    e->pre = t;
    /* attention goes here (iter_sum) */
    e->post[0] = layer_op_time(hw, m, tp, LOP_OPROJ, T);
    e->post[1] = layer_op_time(hw, m, tp, LOP_ADD, T);  /* residual */
    e->post[2] = layer_op_time(hw, m, tp, LOP_NORM, T); /* post-attn norm */
    e->post[3] = layer_op_time(hw, m, tp, LOP_UP, T);
    e->post[4] = layer_op_time(hw, m, tp, LOP_ACT, T);
    e->post[5] = layer_op_time(hw, m, tp, LOP_DOWN, T);
    e->post[6] = layer_op_time(hw, m, tp, LOP_ADD, T);  /* residual */
    e->post[7] = tp > 1 ? 2.0 * comm_allreduce(hw, act, tp) : 0.0;
    e->ar_graph = tp > 1 ? 2.0 * comm_allreduce_graph(hw, act, tp) : 0.0;
    e->ar_car = tp > 1 ? 2.0 * comm_allreduce_eager_car(hw, act, tp) : 0.0;
    /* embedding (vocab-parallel: gather + all-reduce) */
    e->emb = layer_op_time(hw, m, tp, LOP_EMB, T);
    e->emb_ar = tp > 1 ? comm_allreduce(hw, act, tp) : 0.0;
    e->emb_ar_graph = tp > 1 ? comm_allreduce_graph(hw, act, tp) : 0.0;
    e->emb_ar_car = tp > 1 ? comm_allreduce_eager_car(hw, act, tp) : 0.0;
}

/* The row-count terms for rows >= 1 LM head rows on tp >= 1 GPUs, into e
 * (all fields but the key rows). */
static void iter_row_terms(const hw_desc *hw, const llm_desc *m, int tp, double rows,
                           cost_cache_row *e)
{
    double h = m->hidden;
    e->norm = kernel_time(hw, K_NORM, 2.0 * rows * h * 2.0, rows);
    e->head = cost_lm_head(hw, m, tp, rows);
    e->gather = tp > 1 ? comm_allgather(hw, rows * m->vocab * 2.0, tp) : 0.0; /* logits */
    e->gather_graph = tp > 1 ? comm_allgather_graph(hw, rows * m->vocab * 2.0, tp) : 0.0;
}

/* The layer's two all-reduces and the embedding's under collective mode
 * `graph` (enum cost_coll_mode). */
static double tok_ar(const cost_cache_tok *e, int graph)
{
    return graph == COST_COLL_GRAPH ? e->ar_graph
           : graph == COST_COLL_EAGER_CAR ? e->ar_car : e->post[7];
}

static double tok_emb_ar(const cost_cache_tok *e, int graph)
{
    return graph == COST_COLL_GRAPH ? e->emb_ar_graph
           : graph == COST_COLL_EAGER_CAR ? e->emb_ar_car : e->emb_ar;
}

/* Adds up one forward iteration of b (T >= 1 tokens) over `layers` layers:
 * e holds the token-count terms for T, r the row-count terms for b's LM head
 * rows (NULL when there are none), heads and kvh the TP-local head counts;
 * graph is the collectives' enum cost_coll_mode. */
static double iter_sum(const hw_desc *hw, const llm_desc *m, double heads, double kvh,
                       int layers, const cost_cache_tok *e, const cost_cache_row *r,
                       const cost_batch *b, int graph)
{
    double t = e->pre;
    if (b->n_decode > 0)
        t += cost_attn_decode(hw, heads, kvh, m->head_dim, b->n_decode, b->decode_ctx_sum);
    if (b->prefill_tokens > 0)
        t += cost_attn_chunk(hw, heads, kvh, m->head_dim, b->prefill_tokens, b->prefill_attn,
                             b->prefill_kv_sum);
    for (int i = 0; i < 7; i++)
        t += e->post[i];
    t += tok_ar(e, graph);
    t *= layers;

    if (m->vocab <= 0)
        return t; /* no token embedding or LM head (e.g. a diffusion transformer) */
    t += e->emb;
    t += tok_emb_ar(e, graph);
    if (r) {
        t += r->norm;
        t += r->head;
        t += graph == COST_COLL_GRAPH ? r->gather_graph : r->gather;
    }
    return t;
}

double cost_iter(const hw_desc *hw, const llm_desc *m, int tp, const cost_batch *b)
{
    return cost_iter_mode(hw, m, tp, b, 0);
}

double cost_iter_comm(const hw_desc *hw, const llm_desc *m, int tp, const cost_batch *b,
                      int graph)
{
    double T = (double)b->n_decode + (double)b->prefill_tokens;
    if (T <= 0 || tp <= 1)
        return 0.0;
    cost_cache_tok e;
    iter_tok_terms(hw, m, tp, T, &e);
    double t = m->layers * tok_ar(&e, graph);
    if (m->vocab <= 0)
        return t;
    t += tok_emb_ar(&e, graph);
    double rows = (double)b->n_decode + (double)b->n_prefill_seqs;
    if (rows > 0) {
        cost_cache_row r;
        iter_row_terms(hw, m, tp, rows, &r);
        t += graph == COST_COLL_GRAPH ? r.gather_graph : r.gather;
    }
    return t;
}

double cost_iter_mode(const hw_desc *hw, const llm_desc *m, int tp, const cost_batch *b,
                      int graph)
{
    double T = (double)b->n_decode + (double)b->prefill_tokens;
    if (T <= 0)
        return 0.0;
    if (tp < 1)
        tp = 1;
    double heads, kvh;
    iter_heads(m, tp, &heads, &kvh);
    cost_cache_tok e;
    iter_tok_terms(hw, m, tp, T, &e);
    cost_cache_row r, *rp = NULL;
    double rows = (double)b->n_decode + (double)b->n_prefill_seqs;
    if (rows > 0 && m->vocab > 0) {
        iter_row_terms(hw, m, tp, rows, &r);
        rp = &r;
    }
    return iter_sum(hw, m, heads, kvh, m->layers, &e, rp, b, graph);
}

/* ---- memo of cost_iter() ------------------------------------------------
 * The entries hold the terms iter_tok_terms() and iter_row_terms() compute
 * for cost_iter(), and cost_iter_cached_n() adds them with the same
 * iter_sum(), so it returns cost_iter()'s value bit for bit. */

cost_cache *cost_cache_new(const hw_desc *hw, const llm_desc *m, int tp)
{
    cost_cache *c = calloc(1, sizeof *c); /* all keys 0: empty */
    if (!c)
        return NULL;
    c->hw = *hw;
    c->m = *m;
    c->tp = tp < 1 ? 1 : tp;
    iter_heads(m, c->tp, &c->heads, &c->kvh);
    return c;
}

void cost_cache_free(cost_cache *c)
{
    free(c);
}

void cost_cache_set_graph(cost_cache *c, int graph)
{
    c->graph = graph == COST_COLL_GRAPH || graph == COST_COLL_EAGER_CAR ? graph : COST_COLL_EAGER;
}

/* Slot of count x (a whole number >= 1) in a table. */
static size_t cache_slot(double x)
{
    return (size_t)((uint64_t)x & (COST_CACHE_SLOTS - 1));
}

static void cache_fill_tok(const cost_cache *c, double T, cost_cache_tok *e)
{
    iter_tok_terms(&c->hw, &c->m, c->tp, T, e);
    e->fc = cost_draft_fc(&c->hw, &c->m, c->tp, T);
    e->T = T;
}

static void cache_fill_row(const cost_cache *c, double rows, cost_cache_row *e)
{
    iter_row_terms(&c->hw, &c->m, c->tp, rows, e);
    e->rows = rows;
}

/* The token-count entry for T >= 1, filled on a miss. */
static const cost_cache_tok *cache_tok(cost_cache *c, double T)
{
    cost_cache_tok *e = &c->tok[cache_slot(T)];
    if (e->T != T)
        cache_fill_tok(c, T, e);
    return e;
}

/* The row-count entry for rows >= 1, filled on a miss. */
static const cost_cache_row *cache_row(cost_cache *c, double rows)
{
    cost_cache_row *e = &c->row[cache_slot(rows)];
    if (e->rows != rows)
        cache_fill_row(c, rows, e);
    return e;
}

double cost_iter_cached_n(cost_cache *c, int layers, const cost_batch *b)
{
    double T = (double)b->n_decode + (double)b->prefill_tokens;
    if (T <= 0)
        return 0.0;
    double rows = (double)b->n_decode + (double)b->n_prefill_seqs;
    const cost_cache_row *r = rows > 0 && c->m.vocab > 0 ? cache_row(c, rows) : NULL;
    return iter_sum(&c->hw, &c->m, c->heads, c->kvh, layers, cache_tok(c, T), r, b, c->graph);
}

double cost_iter_cached(cost_cache *c, const cost_batch *b)
{
    return cost_iter_cached_n(c, c->m.layers, b);
}

double cost_cache_head(cost_cache *c, double rows)
{
    return rows > 0 ? cache_row(c, rows)->head : 0.0;
}

double cost_cache_fc(cost_cache *c, double tokens)
{
    return tokens > 0 ? cache_tok(c, tokens)->fc : 0.0;
}

double cost_decode_iter(const hw_desc *hw, const llm_desc *m, int tp, int batch,
                        double ctx_sum)
{
    cost_batch b = {.n_decode = batch, .decode_ctx_sum = ctx_sum};
    return cost_iter(hw, m, tp, &b);
}

double cost_prefill_chunk(const hw_desc *hw, const llm_desc *m, int tp, int tokens,
                          double ctx_before)
{
    double q = tokens;
    cost_batch b = {
        .n_prefill_seqs = tokens > 0 ? 1 : 0,
        .prefill_tokens = tokens,
        .prefill_attn = q * (ctx_before + (q + 1.0) / 2.0),
        .prefill_kv_sum = ctx_before + q,
    };
    return cost_iter(hw, m, tp, &b);
}

/* FLOPs of the GEMMs per token (2 per weight that multiplies an activation:
 * the embedding is a gather, unless tied to the LM head). */
static double gemm_params(const llm_desc *m)
{
    double emb = (double)m->vocab * m->hidden;
    return llm_params(m) - (m->tied ? 0.0 : emb);
}

double cost_train_fwd(const hw_desc *hw, const llm_desc *m, double tokens, double sq_sum)
{
    if (tokens <= 0)
        return 0.0;
    double gemm = 2.0 * gemm_params(m) * tokens;
    double attn = 4.0 * m->layers * (double)m->heads * m->head_dim * sq_sum / 2.0;
    return gemm / (hw->peak_flops * cost_train_gemm_eff(hw)) + attn / (hw->peak_flops * hw->attn_eff);
}

double cost_train_fwd_bwd(const hw_desc *hw, const llm_desc *m, double tokens, double sq_sum,
                          int recompute)
{
    return cost_train_fwd(hw, m, tokens, sq_sum) * (recompute ? 4.0 : 3.0);
}

double cost_vidur_op(const hw_desc *hw, const llm_desc *m, int tp, const char *op, int tokens)
{
    static const struct {
        const char *name;
        layer_op op;
    } ops[] = {
        {"emb", LOP_EMB}, {"input_layernorm", LOP_NORM}, {"attn_pre_proj", LOP_QKV},
        {"attn_rope", LOP_ROPE}, {"attn_post_proj", LOP_OPROJ},
        {"post_attention_layernorm", LOP_NORM}, {"mlp_up_proj", LOP_UP}, {"mlp_act", LOP_ACT},
        {"mlp_down_proj", LOP_DOWN}, {"add", LOP_ADD},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(op, ops[i].name))
            return layer_op_time(hw, m, tp < 1 ? 1 : tp, ops[i].op, tokens);
    return -1.0;
}
