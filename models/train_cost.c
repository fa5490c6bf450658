/*
 * Training cost and memory of a micro-batch on a sequence-parallel group.
 *
 * One layer is priced operator by operator with the roofline functions of
 * models/cost.h and models/comm.h (cost_gemm_train: cost_gemm's tile/wave
 * quantization at the training efficiency train_eff,
 * cost_stream for elementwise kernels, comm_alltoall over NVLink or the NIC):
 * each GPU of an SP group of P holds r = tokens / P rows of every
 * activation, so every GEMM has r rows; Ulysses exchanges q, k, v and the
 * output (4 all-to-alls of r x width bf16 per GPU) so that each GPU attends
 * over whole sequences with heads / P heads; ring attention keeps all heads
 * and passes K/V blocks around the group, overlapped with the attention.
 * STDiT may instead use VideoSys' frame split (tc_model.frame_split): a
 * video is sharded by latent frame, so spatial blocks attend locally and
 * each temporal attention is wrapped in two all-to-alls of the r x hidden
 * activation (to a spatial shard and back, as VideoSys' dynamic_switch
 * does); images, a single frame, fall back to Ulysses in the spatial blocks.
 * Padding the frames to a multiple of P is not modelled.
 * The backward of a GEMM (m x k)(k x n) is its two GEMMs dX (m x n)(n x k)
 * and dW (k x m)(m x n); attention's backward is 2.5x its forward (flash
 * attention's five matmuls against two); elementwise kernels move twice
 * their forward bytes.  Attention counts token pairs per sequence from the
 * work sums (decoder: s^2/2, causal; STDiT spatial: T*S^2; temporal:
 * S*T^2) plus half a 128-wide tile per token for the partly filled tiles.
 * Each layer type is priced once and multiplied by its layer count, so a
 * micro-batch costs a few dozen cost-model calls (microseconds).
 *
 * The same code runs in a lower-bound mode (`acc.lb`): every term becomes
 * its linear part with no latency (GEMM FLOPs at peak * train_eff, attention
 * FLOPs at attn_eff, bytes at bandwidth), which is additive over sequences
 * and below every exact term; tc_seq_lower_bound() uses it for the `bound`
 * strategy.  Memory follows the same shapes (see tc_act_bytes()).  All
 * functions are pure and cannot fail once tc_model_init() has succeeded.
 */
#include "models/train_cost.h"

#include <math.h>
#include <string.h>

#include "models/comm.h"
#include "models/cost.h"
#include "models/memory.h"

#define ATTN_TILE_PAD 64.0  /* tokens: half of a 128-wide attention tile */
#define ATTN_BWD 2.5        /* attention backward / forward work */

int tc_model_init(tc_model *tm, const llm_desc *m, int cross_tokens, double act_factor,
                  ts_err *e)
{
    memset(tm, 0, sizeof *tm);
    tm->m = *m;
    tm->arch = m->vocab > 0 ? TC_DECODER : TC_STDIT;
    if (!(act_factor >= 2.0 && act_factor <= 1000.0))
        return ts_errf(e, "activation factor %g outside [2, 1000] bytes per token per hidden unit",
                       act_factor);
    if (cross_tokens < 0)
        return ts_errf(e, "cross_tokens %d is negative", cross_tokens);
    tm->act_factor = act_factor;
    tm->a2a_eff = 1.0;
    tm->frame_split = 0;
    if (tm->arch == TC_STDIT) {
        if (m->layers % 2)
            return ts_errf(e, "model %s: a video transformer (no vocabulary) needs an even layer "
                              "count (spatial + temporal blocks), not %d", m->name, m->layers);
        tm->n_a = tm->n_b = m->layers / 2;
        tm->cross_tokens = cross_tokens;
        /* cross-attention: q, o (h x h) and k, v from the caption (h x h), with biases */
        double h = m->hidden;
        tm->params = llm_params(m) + m->layers * (4.0 * h * h + 4.0 * h);
    } else {
        tm->n_a = m->layers;
        tm->n_b = 0;
        tm->cross_tokens = 0;
        tm->params = llm_params(m);
    }
    return 0;
}

void tc_work_add(tc_work *w, int32_t t, int32_t s, double count)
{
    double T = t, S = s;
    w->n += count;
    w->tokens += count * T * S;
    if (t <= 1) {
        w->img_tokens += count * S;
        w->sq_a += count * S * S;
    } else {
        w->sq_a += count * T * S * S;
        w->sq_b += count * S * T * T;
    }
}

int tc_sp_ok(const tc_model *tm, int sp, int ring)
{
    if (sp < 1)
        return 0;
    if (ring || sp == 1)
        return 1;
    int H = tm->m.heads, KV = tm->m.kv_heads;
    return H % sp == 0 && (KV % sp == 0 || sp % KV == 0);
}

/* ---------------------------------------------------------- accumulator */

typedef struct acc {
    const hw_desc *hw;
    int lb;       /* lower-bound mode: linear terms only */
    int bwd;      /* pricing the backward pass */
    double t;     /* s */
    double comm;  /* s, of t */
} acc;

static void op_gemm1(acc *a, double m, double n, double k)
{
    const hw_desc *hw = a->hw;
    a->t += a->lb ? 2.0 * m * n * k / (hw->peak_flops * cost_train_gemm_eff(hw))
                  : cost_gemm_train(hw, m, n, k);
}

/* A weight GEMM of m rows: forward, or its two backward GEMMs. */
static void op_gemm(acc *a, double m, double n, double k)
{
    if (m <= 0)
        return;
    if (!a->bwd) {
        op_gemm1(a, m, n, k);
    } else {
        op_gemm1(a, m, k, n);
        op_gemm1(a, k, n, m);
    }
}

/* An elementwise kernel moving `bytes` in the forward pass. */
static void op_stream(acc *a, double bytes)
{
    if (bytes <= 0)
        return;
    double b = a->bwd ? 2.0 * bytes : bytes;
    const hw_desc *hw = a->hw;
    a->t += a->lb ? b / (hw->hbm_bw * hw->mem_eff) : cost_stream(hw, b);
}

/* Attention of `flops` reading/writing `bytes` (forward figures), with the
 * SP ring's K/V passes of `ring_bytes` overlapped when ring_p > 1. */
static void op_attn(acc *a, double flops, double bytes, int ring_p, int intra, double ring_bytes)
{
    if (flops <= 0)
        return;
    const hw_desc *hw = a->hw;
    double x = a->bwd ? ATTN_BWD : 1.0;
    double tc = x * flops / (hw->peak_flops * hw->attn_eff);
    if (a->lb) {
        a->t += tc;
        return;
    }
    double tm = x * bytes / (hw->hbm_bw * hw->mem_eff);
    double t = hw->launch_s + (tc > tm ? tc : tm);
    if (ring_p > 1) {
        /* P-1 block passes; the backward also returns dK, dV */
        double c = (ring_p - 1) * comm_p2p(hw, (a->bwd ? 2.0 : 1.0) * ring_bytes, intra);
        a->comm += c;
        t = t > c ? t : c;
    }
    a->t += t;
}

/* Linear part of an all-to-all: f(2b) - f(b) is b times its slope. */
static double a2a_slope(const hw_desc *hw, int p)
{
    return comm_alltoall(hw, 2.0, p) - comm_alltoall(hw, 1.0, p);
}

static void op_a2a(acc *a, double bytes, int p, double eff)
{
    if (p <= 1 || bytes <= 0)
        return;
    bytes /= eff; /* a slower all-to-all moves its bytes at eff x the bandwidth */
    double c = a->lb ? bytes * a2a_slope(a->hw, p) : comm_alltoall(a->hw, bytes, p);
    a->t += c;
    a->comm += c;
}

/* --------------------------------------------------------------- layers */

/* One layer of `type` (0: A, 1: B) in the direction a->bwd, added to *a. */
static void layer(acc *a, const tc_model *tm, int P, int ring, const tc_work *w, int type)
{
    const llm_desc *m = &tm->m;
    const hw_desc *hw = a->hw;
    double h = m->hidden, hd = m->head_dim, H = m->heads, KV = m->kv_heads;
    double q = H * hd, kv = KV * hd, ffn = m->ffn;
    double r = w->tokens / P;
    double act = 2.0 * r * h; /* bytes of one [r, hidden] bf16 tensor */
    int stdit = tm->arch == TC_STDIT;
    int gpn = hw->gpus_per_node > 0 ? hw->gpus_per_node : 1;

    /* self-attention */
    op_stream(a, 2.0 * act);                        /* norm */
    if (stdit)
        op_stream(a, 2.0 * act);                    /* adaLN modulate */
    if (stdit && type == 1)
        op_stream(a, 2.0 * act);                    /* to (B S) T layout */
    op_gemm(a, r, q + 2.0 * kv, h);                 /* QKV */
    if (!stdit || type == 1)
        op_stream(a, 2.0 * 2.0 * r * (q + kv));     /* RoPE on q, k */
    if (stdit)
        op_stream(a, 2.0 * 2.0 * r * (q + kv));     /* q/k RMSNorm */
    /* Ulysses exchanges q, k, v and the output of `ur` rows per GPU: every
     * row, or under frame split the images' rows in the spatial blocks; frame
     * split moves the videos' activation (`fr` rows) into and out of each
     * temporal attention */
    int fsplit = P > 1 && !ring && stdit && tm->frame_split;
    double ur = P > 1 && !ring ? r : 0.0, fr = 0.0;
    if (fsplit) {
        ur = type == 0 ? w->img_tokens / P : 0.0;
        fr = type == 1 ? (w->tokens - w->img_tokens) / P : 0.0;
    }
    if (ur > 0) {
        op_a2a(a, 2.0 * ur * q, P, tm->a2a_eff);
        op_a2a(a, 2.0 * ur * kv, P, tm->a2a_eff);
        op_a2a(a, 2.0 * ur * kv, P, tm->a2a_eff);
    }
    if (fr > 0)
        op_a2a(a, 2.0 * fr * h, P, tm->a2a_eff);
    double sq = type == 0 ? w->sq_a : w->sq_b;
    double pairs = (stdit ? sq : 0.5 * sq) + ATTN_TILE_PAD * w->tokens;
    op_attn(a, 4.0 * hd * H * pairs / P, 2.0 * (2.0 * r * q + 2.0 * r * kv),
            ring ? P : 1, P <= gpn, 2.0 * 2.0 * r * kv);
    if (ur > 0)
        op_a2a(a, 2.0 * ur * q, P, tm->a2a_eff);
    if (fr > 0)
        op_a2a(a, 2.0 * fr * h, P, tm->a2a_eff);
    op_gemm(a, r, h, q);                            /* output projection */
    op_stream(a, 3.0 * act);                        /* residual (gated for STDiT) */
    if (stdit && type == 1)
        op_stream(a, 2.0 * act);                    /* back to (B T) S layout */

    /* cross-attention to the caption (STDiT) */
    if (stdit && tm->cross_tokens > 0) {
        double ct = w->n * tm->cross_tokens;        /* caption rows of this micro-batch */
        op_gemm(a, r, h, h);                        /* q */
        op_gemm(a, ct, 2.0 * h, h);                 /* k, v of the captions */
        op_attn(a, 4.0 * h * r * tm->cross_tokens, 2.0 * (2.0 * r * h + 2.0 * ct * h), 1, 1, 0);
        op_gemm(a, r, h, h);                        /* output projection */
        op_stream(a, 3.0 * act);                    /* residual */
    }

    /* MLP */
    op_stream(a, 2.0 * act);                        /* norm */
    if (stdit)
        op_stream(a, 2.0 * act);                    /* adaLN modulate */
    op_gemm(a, r, m->gated ? 2.0 * ffn : ffn, h);   /* up (and gate) */
    op_stream(a, (m->gated ? 3.0 : 2.0) * r * ffn * 2.0);
    op_gemm(a, r, h, ffn);                          /* down */
    op_stream(a, 3.0 * act);                        /* residual (gated for STDiT) */
}

/* Embedding, final norm, LM head and loss of a decoder (nothing for STDiT,
 * whose patch embedder and final layer are negligible). */
static void head(acc *a, const tc_model *tm, int P, const tc_work *w)
{
    const llm_desc *m = &tm->m;
    if (m->vocab <= 0)
        return;
    double r = w->tokens / P, h = m->hidden, V = m->vocab;
    op_stream(a, 2.0 * 2.0 * r * h);               /* embedding gather */
    op_stream(a, 2.0 * 2.0 * r * h);               /* final norm */
    op_gemm(a, r, V, h);                           /* LM head */
    op_stream(a, r * V * (2.0 + 4.0));             /* softmax cross-entropy */
}

/* Forward time of one layer of each type and of the head, then the
 * backward, into f[2], b[2], hf, hb (s); comm into cf[2], cb[2]. */
typedef struct passes {
    double f[2], b[2], hf, hb, cf[2], cb[2], chf, chb;
} passes;

static void price(const hw_desc *hw, const tc_model *tm, int P, int ring, const tc_work *w, int lb,
                  passes *ps)
{
    memset(ps, 0, sizeof *ps);
    for (int type = 0; type < 2; type++) {
        if ((type == 0 ? tm->n_a : tm->n_b) == 0)
            continue;
        acc f = {hw, lb, 0, 0, 0}, b = {hw, lb, 1, 0, 0};
        layer(&f, tm, P, ring, w, type);
        layer(&b, tm, P, ring, w, type);
        ps->f[type] = f.t;
        ps->b[type] = b.t;
        ps->cf[type] = f.comm;
        ps->cb[type] = b.comm;
    }
    acc f = {hw, lb, 0, 0, 0}, b = {hw, lb, 1, 0, 0};
    head(&f, tm, P, w);
    head(&b, tm, P, w);
    ps->hf = f.t;
    ps->hb = b.t;
}

double tc_microbatch_time(const hw_desc *hw, const tc_model *tm, const tc_par *p,
                          const tc_work *w, tc_breakdown *bd)
{
    if (bd)
        memset(bd, 0, sizeof *bd);
    if (w->tokens <= 0)
        return 0.0;
    int P = p->sp < 1 ? 1 : p->sp;
    passes ps;
    price(hw, tm, P, p->ring, w, 0, &ps);
    double fwd = ps.hf + tm->n_a * ps.f[0] + tm->n_b * ps.f[1];
    double bwd = ps.hb + tm->n_a * ps.b[0] + tm->n_b * ps.b[1];
    double rec = p->ckpt_a * ps.f[0] + p->ckpt_b * ps.f[1];
    if (bd) {
        bd->fwd_s = fwd;
        bd->bwd_s = bwd;
        bd->recompute_s = rec;
        bd->comm_s = tm->n_a * (ps.cf[0] + ps.cb[0]) + tm->n_b * (ps.cf[1] + ps.cb[1]) +
                     p->ckpt_a * ps.cf[0] + p->ckpt_b * ps.cf[1];
    }
    return fwd + bwd + rec;
}

double tc_layer_fwd_time(const hw_desc *hw, const tc_model *tm, const tc_par *p,
                         const tc_work *w, int type)
{
    if (w->tokens <= 0)
        return 0.0;
    acc f = {hw, 0, 0, 0, 0};
    layer(&f, tm, p->sp < 1 ? 1 : p->sp, p->ring, w, type);
    return f.t;
}

/* -------------------------------------------------------------- memory */

/* Bytes kept by one layer that is not checkpointed / that is. */
static double keep_full(const tc_model *tm, double r, double n)
{
    double h = tm->m.hidden;
    double b = mem_act_layer_per_token(&tm->m, tm->act_factor, 0) * r;
    if (tm->arch == TC_STDIT)
        b += n * tm->cross_tokens * 2.0 * h * 2.0; /* caption K, V */
    return b;
}

double tc_act_bytes(const tc_model *tm, const tc_par *p, const tc_work *w)
{
    if (w->tokens <= 0)
        return 0.0;
    int P = p->sp < 1 ? 1 : p->sp;
    double r = w->tokens / P, h = tm->m.hidden;
    double full = keep_full(tm, r, w->n);
    double ck = mem_act_layer_per_token(&tm->m, tm->act_factor, 1) * r;
    int na = tm->n_a, nb = tm->n_b;
    double kept = (na - p->ckpt_a + nb - p->ckpt_b) * full + (p->ckpt_a + p->ckpt_b) * ck;
    double working = (p->ckpt_a + p->ckpt_b) > 0 ? full : 0.0;
    double grads = 2.0 * 2.0 * r * h;
    double extra = 0.0;
    if (tm->m.vocab > 0)
        extra = r * tm->m.vocab * (2.0 + 4.0);           /* bf16 logits, fp32 gradient */
    else
        extra = w->n * tm->cross_tokens * h * 2.0;       /* projected captions */
    return kept + working + grads + extra;
}

double tc_layer_keep_bytes(const tc_model *tm, const tc_par *p, const tc_work *w, int type)
{
    (void)type; /* spatial and temporal blocks keep the same tensors */
    int P = p->sp < 1 ? 1 : p->sp;
    double r = w->tokens / P;
    return keep_full(tm, r, w->n) - mem_act_layer_per_token(&tm->m, tm->act_factor, 1) * r;
}

double tc_states_bytes(const tc_model *tm, int zero_stage, int dp)
{
    return mem_model_states_params(tm->params, zero_stage, dp);
}

double tc_step_sync_time(const hw_desc *hw, const tc_model *tm, int gpus, int zero_stage)
{
    double grad = 2.0 * tm->params; /* bf16 gradients */
    double t;
    if (zero_stage >= 1)
        t = comm_reduce_scatter(hw, grad, gpus) + comm_allgather(hw, grad, gpus);
    else
        t = comm_allreduce(hw, grad, gpus);
    /* Adam on this GPU's share: fp32 master, m, v read and written, the
     * gradient read, the bf16 weight written: 30 bytes per parameter */
    double share = zero_stage >= 1 && gpus > 1 ? tm->params / gpus : tm->params;
    return t + cost_stream(hw, 30.0 * share);
}

double tc_seq_lower_bound(const hw_desc *hw, const tc_model *tm, int sp, int ring, int32_t t,
                          int32_t s, double act_budget)
{
    int P = sp < 1 ? 1 : sp;
    tc_work w = {0};
    tc_work_add(&w, t, s, 1.0);
    /* cheapest recomputation that fits: for each a, the fewest b */
    tc_par p = {P, ring, 0, 0};
    double keep = tc_layer_keep_bytes(tm, &p, &w, 0);
    passes ps;
    price(hw, tm, P, ring, &w, 1, &ps);
    double best = -1.0;
    for (int ca = 0; ca <= tm->n_a; ca++) {
        p.ckpt_a = ca;
        p.ckpt_b = 0;
        double over = tc_act_bytes(tm, &p, &w) - act_budget;
        int cb = 0;
        if (over > 0) {
            if (keep <= 0)
                continue;
            cb = (int)ceil(over / keep - 1e-12);
            if (cb > tm->n_b)
                continue;
            p.ckpt_b = cb;
            /* the working set appears with the first checkpointed layer */
            while (p.ckpt_b <= tm->n_b && tc_act_bytes(tm, &p, &w) > act_budget)
                p.ckpt_b++;
            if (p.ckpt_b > tm->n_b)
                continue;
            cb = p.ckpt_b;
        }
        double rec = ca * ps.f[0] + cb * ps.f[1];
        if (best < 0 || rec < best)
            best = rec;
    }
    if (best < 0)
        return -1.0;
    return ps.hf + ps.hb + tm->n_a * (ps.f[0] + ps.b[0]) + tm->n_b * (ps.f[1] + ps.b[1]) + best;
}
