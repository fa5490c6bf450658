/*
 * Training cost and memory of one micro-batch on a sequence-parallel (SP)
 * group, for the data-centric parallel planners (sim/dcp/dcp.h).  Pure
 * functions: shapes in, seconds and bytes out; nothing is stored.
 *
 * Two architectures: a causal decoder (Llama/Qwen: attention over s^2/2
 * token pairs per sequence, an LM head) and Open-Sora's STDiT3 (a video
 * diffusion transformer: layers alternate spatial blocks, attending within a
 * latent frame, T * S^2 pairs, and temporal blocks, attending across frames
 * at one position, S * T^2 pairs; each block also cross-attends to the
 * caption's text tokens).  Sequence parallelism is DeepSpeed-Ulysses (four
 * all-to-alls per layer forward: q, k, v in, the output back) or, as an
 * option, ring attention (K/V blocks passed around the group, overlapped
 * with the attention).  Checkpointed layers run their forward again in the
 * backward pass; the rest keep their activations.
 */
#ifndef TS_TRAIN_COST_H
#define TS_TRAIN_COST_H

#include <stdint.h>

#include "common/err.h"
#include "models/hw.h"

typedef enum tc_arch { TC_DECODER = 0, TC_STDIT = 1 } tc_arch;

typedef struct tc_model {
    llm_desc m;           /* the description (a copy) */
    tc_arch arch;         /* TC_STDIT when the description has no vocabulary */
    int n_a, n_b;         /* layers of type A and B: decoder all/0; STDiT spatial/temporal */
    int cross_tokens;     /* STDiT: caption tokens each sample cross-attends to */
    double act_factor;    /* activation bytes kept per token per layer per hidden unit
                           * when a layer is not checkpointed (34: Korthikanti et al.) */
    double params;        /* trainable parameters (STDiT: with cross-attention) */
    double a2a_eff;       /* fraction of the collective bandwidth (hw ar_eff) that the SP
                           * all-to-alls reach; 1 after tc_model_init() */
    int frame_split;      /* STDiT, Ulysses mode: 1 = VideoSys' frame-split SP instead (videos
                           * sharded by latent frame, one all-to-all of the activation into and
                           * out of each temporal attention; images, one frame, run Ulysses in
                           * the spatial blocks); 0 after tc_model_init() */
} tc_model;

/* Fills *tm.  STDiT needs an even layer count.  Returns 0, or -1 with a
 * message for an odd STDiT layer count or act_factor outside [2, 1000]. */
int tc_model_init(tc_model *tm, const llm_desc *m, int cross_tokens, double act_factor,
                  ts_err *e);

/* The work of a micro-batch: sums over its sequences, never a mean. */
typedef struct tc_work {
    double n;       /* sequences */
    double tokens;  /* sum of t*s, tokens */
    double sq_a;    /* decoder: sum of s^2; STDiT spatial: sum of t*s^2, token^2 */
    double sq_b;    /* STDiT temporal: sum of s*t^2, token^2 (0 for a decoder) */
    double img_tokens; /* of tokens: one-frame sequences (t <= 1: images, 1D sequences) */
} tc_work;

/* Adds `count` sequences of t latent frames x s tokens (1D: t = 1). */
void tc_work_add(tc_work *w, int32_t t, int32_t s, double count);

/* How a micro-batch runs on its group. */
typedef struct tc_par {
    int sp;         /* GPUs in the SP group (>= 1) */
    int ring;       /* 1: ring attention; 0: Ulysses all-to-all */
    int ckpt_a;     /* checkpointed layers of type A (0..n_a) */
    int ckpt_b;     /* checkpointed layers of type B (0..n_b) */
} tc_par;

/* Whether the model can run at SP size sp: Ulysses splits the heads, so
 * heads and KV heads must divide by sp (KV heads may also be replicated when
 * sp is a multiple of them); ring attention takes any size. */
int tc_sp_ok(const tc_model *tm, int sp, int ring);

typedef struct tc_breakdown {
    double fwd_s;        /* forward, all layers, SP communication included */
    double bwd_s;        /* backward */
    double recompute_s;  /* forward again of the checkpointed layers */
    double comm_s;       /* of the above, SP communication (all-to-all or ring) */
} tc_breakdown;

/* Seconds for the forward, recomputation and backward of micro-batch w on
 * each GPU of the group (all run in lock step).  bd may be NULL.  0 for an
 * empty micro-batch.  Cannot fail. */
double tc_microbatch_time(const hw_desc *hw, const tc_model *tm, const tc_par *p,
                          const tc_work *w, tc_breakdown *bd);

/* Forward seconds of one layer of type 0 (A) or 1 (B), SP communication
 * included: what not checkpointing that layer saves. */
double tc_layer_fwd_time(const hw_desc *hw, const tc_model *tm, const tc_par *p,
                         const tc_work *w, int type);

/* Peak activation bytes per GPU of micro-batch w under p: the kept
 * activations of every layer (act_factor * hidden per token for a layer
 * that is not checkpointed, its 2 * hidden input for one that is; plus the
 * caption K/V for STDiT), the full activations of the layer being recomputed
 * during the backward, activation gradients in flight, and the logits of a
 * decoder.  Cannot fail. */
double tc_act_bytes(const tc_model *tm, const tc_par *p, const tc_work *w);

/* Extra bytes per GPU when one more layer of `type` keeps its activations
 * instead of being checkpointed. */
double tc_layer_keep_bytes(const tc_model *tm, const tc_par *p, const tc_work *w, int type);

/* Model-state bytes per GPU (mixed-precision Adam) under ZeRO stage over
 * dp GPUs (memory.h's accounting with this model's parameter count). */
double tc_states_bytes(const tc_model *tm, int zero_stage, int dp);

/* Gradient synchronisation of one optimizer step over `gpus` GPUs, s:
 * ZeRO >= 1 reduce-scatters the bf16 gradients and all-gathers the updated
 * bf16 weights; ZeRO 0 all-reduces.  Plus the Adam update of this GPU's
 * share of the fp32 states (streamed once).  Cannot fail. */
double tc_step_sync_time(const hw_desc *hw, const tc_model *tm, int gpus, int zero_stage);

/* A lower bound on the seconds each of sp GPUs spends on one sequence of
 * t x s tokens inside any micro-batch at SP size sp: every GEMM at
 * peak_flops * gemm_eff, attention at attn_eff, streams and collectives at
 * their bandwidth with no latency, and the cheapest recomputation that lets
 * the sequence alone fit in act_budget bytes.  Returns a negative value
 * when it cannot fit even fully checkpointed.  The time of a micro-batch is
 * never below the sum of these over its sequences (tests check this). */
double tc_seq_lower_bound(const hw_desc *hw, const tc_model *tm, int sp, int ring,
                          int32_t t, int32_t s, double act_budget);

#endif
