/*
 * Scenarios: INI files (libinih) with sections [cluster], [model], [rollout],
 * [train], [trace].  Every key has a type and range; unknown sections/keys
 * and out-of-range values are errors naming file, line and key.  Overrides
 * given as "section.key=value" (--set) go through the same table.  The file
 * is read strictly (common/ini_lines.h): a line longer than 198 characters,
 * a NUL byte, an indented (continuation) line or a key given twice is an
 * error, never a silent reading.
 */
#ifndef TS_SCENARIO_H
#define TS_SCENARIO_H

#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "models/hw.h"
#include "sim/rollout.h"
#include "sim/specdec.h"
#include "models/cost_host.h"
#include "traces/gen.h"

#define SCN_STR 256
/* The largest cluster.gpus (and train.fsdp_size): a run allocates per GPU
 * and per replica (a replica's state, its RNG), so sizes are bounded before
 * anything is allocated; 65536 is beyond any cluster the models describe. */
#define SCN_MAX_GPUS 65536

/* [dcp]: data-centric parallel training (`tailsim dcp`, sim/dcp/dcp.h). */
typedef struct scn_dcp {
    char strategies[SCN_STR]; /* default --strategies list */
    char sp_sizes[64];        /* SP sizes the planners may use, e.g. "1,2,4,8" */
    int bucket_sp;            /* fixed SP of bucket/packed (0: smallest fitting the longest) */
    double mem_cap;           /* fraction of HBM a plan may use */
    double reserve_gb;        /* per-GPU reserve (context, workspaces), GB */
    int zero_stage;           /* ZeRO stage 0..3 of the optimizer states */
    int ring;                 /* 1: ring attention instead of Ulysses */
    int frame_split;          /* STDiT: 1 = VideoSys' frame-split SP instead of Ulysses */
    int max_gas;              /* dcp-inter: most accumulation steps per group */
    double overshoot;         /* dcp-inter: penalty on overshooting the target time */
    int fill;                 /* dcp-inter: fill a group's slack with a partial micro-batch */
    char draw[16];            /* dcp-inter: how groups pick buckets: share | work */
    int xfill;                /* dcp-inter: other buckets' micro-batches in a group's last slack */
    int endgame;              /* dcp-inter: what is left packed into at most this many steps */
    double ahead;             /* dcp-inter: steps early the coarse buckets are to finish */
    double coarse;            /* dcp-inter: coarse = micro-batch over this fraction of the step */
    double tie_tol;           /* dcp-intra/inter: throughput ties, fraction */
    double act_factor;        /* activation bytes per token per layer per hidden unit */
    double a2a_eff;           /* SP all-to-all bandwidth, fraction of the collectives' */
    int cross_tokens;         /* video: caption tokens per sample (cross-attention) */
    int pack_tokens;          /* packed: token budget per micro-batch (0: the longest) */
    char file[SCN_STR];       /* batch trace CSV ("" -> generate; shared:PATH allowed) */
    char dist[SCN_STR];       /* generator: video-mix | sft | pretrain | gen.h syntax */
    int videos;               /* video-mix: videos */
    double image_mix;         /* video-mix: images per video */
    double zipf_alpha;        /* video-mix: Zipf exponent */
    double zipf_offset;       /* video-mix: Zipf rank offset */
    int seqs;                 /* 1D: sequences */
    int cap;                  /* 1D: length cap, tokens */
    uint64_t seed;            /* generator and planner seed */
    int steps;                /* default --steps (0: the whole trace) */
    char image_mixing[16];    /* video-mix: exclusive | inclusive (VideoSys' image_mixing_type) */
    char zipf_rank[16];       /* video-mix: Zipf rank key, pixels | height (VideoSys' code) */
    double res_scale;         /* video-mix: VideoSys' half-normal res_scale (0: Zipf) */
    double frame_scale;       /* video-mix: VideoSys' half-normal frame_scale (0: Zipf) */
} scn_dcp;

typedef struct scenario {
    char name[128];          /* file name without directory and .ini */
    char path[SCN_STR];      /* the file it came from */
    char dir[SCN_STR];       /* its directory, for relative trace paths */
    /* [cluster] */
    int gpus;                /* total GPUs */
    char hw[64];             /* hardware description name, e.g. h100 */
    int gpus_per_node;       /* 0: take the hardware file's */
    /* [model] */
    char model[64];          /* LLM description name */
    /* [rollout] */
    int tp;                  /* tensor-parallel size of a replica */
    int max_running;         /* max running requests per replica */
    int chunk_tokens;        /* prefill token budget per iteration */
    double mem_util;         /* fraction of HBM the engine may use */
    double reserve_gb;       /* activations/workspace reserve per GPU, GB */
    int max_response;        /* response cap, tokens (0: none) */
    int tail_threshold;      /* "tail" = at most this many running requests */
    int graph_max_bs;        /* largest CUDA-graph batch (0: SGLang's default for tp) */
    int overlap;             /* 1: overlap scheduler on */
    char placement[16];      /* prompts to replicas: balanced | trace | round-robin
                              * (sim/rollout.h rollout_placement) */
    int keep_kv_during_tool; /* multi-turn: 1 keeps a trajectory's KV during its tool call */
    int tool_concurrency;    /* multi-turn: tool calls at once, all replicas (0: unlimited) */
    char engine[8];          /* graph: decode steps up to graph_max_bs replay CUDA graphs
                              * (custom all-reduce); eager: every step eager (issue 18) */
    char attn[8];            /* the engine's attention kernel: hw | flat | fa2 | fa3
                              * (sim/rollout.h rollout_attn; issue 18) */
    /* [train] */
    double reward_per_response_s; /* reward time per response, s */
    double reward_step_s;    /* fixed reward time per step, s */
    int micro_batch_tokens;  /* tokens per training micro-batch */
    int recompute;           /* activation checkpointing in the update */
    int update_epochs;       /* passes of the actor update over the batch */
    int ref_model;           /* 1: a reference-policy forward pass (KL) */
    int train_sp;            /* Ulysses SP size of the VeRL training phases */
    int mini_batch_prompts;  /* PPO mini-batch, prompts (0: one update pass, no VeRL model) */
    int train_offload;       /* 1: model states on the host (FSDP2 CPUOffloadPolicy) */
    int train_fsdp_size;     /* GPUs the states are sharded over (HSDP); 0: all of them */
    double train_mem_cap;    /* fraction of HBM the actor update may use */
    char train_strategy[32]; /* none (plain DP) | bucket | packed | dcp-intra | dcp-inter |
                              * dcp-inter+pac: the DCP planner of the training phases */
    /* [spec] */
    char spec_mode[16];      /* off | always | adaptive */
    int spec_patience;       /* adaptive switch: tail decode iterations */
    int spec_graph_max_bs;   /* engine-wide CUDA-graph limit when speculation is enabled */
    int spec_overlap;        /* engine-wide overlap scheduler when speculation is enabled */
    spec_params sp;          /* acceptance model */
    int spot;                /* TLT's spot trainer on finished replicas */
    drafter_params dp;       /* drafter quality dynamics and spot-trainer batch */
    /* [policy] */
    char policy[32];         /* long-tail policy (sim/policy/policy.h); "" = the [spec] keys as given */
    double sort_noise;       /* sorted: lognormal sigma of the length predictor (0: oracle) */
    double overprov;         /* partial: prompts launched per prompt trained */
    double tail_overprov;    /* tailbatch: prompts launched per prompt kept, short rounds */
    int max_staleness;       /* async: most policy versions a trained sample may lag */
    double rollout_pool;     /* async: fraction of the GPUs in the rollout pool */
    /* [trace] */
    char trace_file[SCN_STR];/* "" -> generate; "shared:PATH" -> $TAILSIM_SHARED/PATH */
    char trace_reward_file[SCN_STR]; /* recorded reward timings (traces/reward.h), "" -> none;
                              * resolved as trace_file */
    int trace_step;          /* step to replay, -1: the first */
    char dist[SCN_STR];      /* generator distribution (gen_parse_dist syntax) */
    int prompts, group, cap;
    double corr;
    double prompt_median;
    uint64_t seed;
    char turns[16];          /* off | search-r1: multi-turn trajectories (traces/gen.h) */
    char turn_probs[SCN_STR];/* turn-count probabilities P1,P2,... (sum 1) */
    double tool_median, tool_sigma;     /* tool latency lognormal: s, log sd */
    double append_median, append_sigma; /* appended tokens lognormal: tokens, log sd */
    double gen0_median, gen0_sigma;     /* turn 0's generated tokens lognormal */
    double gen_median, gen_sigma;       /* later turns' generated tokens lognormal */
    /* [dcp] */
    scn_dcp dcp;
} scenario;

/* A trace length under the scenario's rollout.max_response cap (0: none).
 * Cannot fail. */
static inline int32_t scenario_cap_response(const scenario *s, int32_t len)
{
    return s->max_response > 0 && len > s->max_response ? s->max_response : len;
}

/* Loads a scenario by name (scenarios/<name>.ini) or path, applying defaults
 * first.  Returns 0 or -1 with file, line and key of the problem. */
int scenario_load(const char *name, scenario *s, ts_err *e);

/* 1 when section.key is a scenario key, else 0.  Cannot fail. */
int scenario_has_key(const char *section, const char *key);

/* Sets *s to a scenario of nothing but defaults, as scenario_load() starts
 * from (cluster.gpus 0 and model.name "", the two required keys, unset).
 * Cannot fail. */
void scenario_defaults(scenario *s);

/* The type of a scenario key: how its value is read and its default shown. */
typedef enum scn_key_type {
    SCN_KEY_INT,  /* an integer in [min, max] */
    SCN_KEY_REAL, /* a finite number in [min, max] */
    SCN_KEY_STR,  /* a string of at most max - 1 characters */
    SCN_KEY_BOOL, /* true/false (also 1/0, yes/no) */
    SCN_KEY_U64,  /* a non-negative integer up to 2^63 - 1 (seeds) */
} scn_key_type;

/* One row of the key table the scenario reader and --set validate against,
 * as `tailsim keys` shows it.  The strings are static (the table's own) or
 * held in the struct; nothing to free. */
typedef struct scn_key_info {
    const char *section, *key;
    scn_key_type type;
    const char *type_name; /* "int", "real", "string", "bool", "u64" */
    double min, max;       /* numbers: the accepted range; strings: max - 1 characters */
    int required;          /* 1: the scenario must set it (no default) */
    char def[SCN_STR + 2]; /* the default of a fresh scenario, formatted so that
                            * "section.key=DEF" sets exactly that value ("" for a
                            * required key or an empty string) */
    char range[80];        /* the range in words: "[1, 64]", "true/false",
                            * "up to 63 characters", "[0, 2^63-1]" */
    const char *help;      /* one line: what the key means */
} scn_key_info;

/* The number of scenario keys (rows of the key table).  Cannot fail. */
size_t scenario_key_count(void);

/* Row i (0 <= i < scenario_key_count(), in the table's order: by section,
 * cluster model rollout train spec policy trace dcp) into *out, its default
 * taken from scenario_defaults().  Returns 0, or -1 when i is out of range
 * (out untouched). */
int scenario_key_info(size_t i, scn_key_info *out);

/* 1 when some scenario key lives in [section], else 0.  Cannot fail. */
int scenario_has_section(const char *section);

/* Applies one "section.key=value" override.  Returns 0 or -1. */
int scenario_set(scenario *s, const char *assignment, ts_err *e);

/* Splits a "section.key=value" override (as --set gives it) without
 * applying it: the section into sec (sn bytes), the key into key (kn bytes),
 * *val to the value (a pointer into assignment).  A name longer than its
 * buffer is an error when strict is 1, else cut short (the key table then
 * rejects it).  Returns 0, or -1 with "--set 'A': expected section.key=value". */
int scenario_parse_set(const char *assignment, char *sec, size_t sn, char *key, size_t kn,
                       int strict, const char **val, ts_err *e);

/* The error of a section.key that is no scenario key, into e: "unknown key
 * 'S.K' (the keys of [S]: tailsim keys S)", or, when no key lives in [S],
 * the sections there are.  Names are quoted cut and sanitised.  Returns -1. */
int scenario_unknown_key(const char *section, const char *key, ts_err *e);

/* Assigns one key through the key table (as the INI reader and --set do).
 * Returns 0, or -1 with "key 'section.key': problem" (or "unknown key") in e;
 * the caller adds the file and line. */
int scenario_set_key(scenario *s, const char *section, const char *key, const char *val,
                     ts_err *e);

/* The [spec] mode as an index: 0 off, 1 always, 2 adaptive (enum spec_mode).
 * Returns 0, or -1 for an unknown name. */
int scenario_spec_mode(const scenario *s, int *mode, ts_err *e);

/* How the rollout engine runs its steps on the host: with speculation enabled
 * (spec.mode not off) the [spec] graph_max_bs and overlap for the whole
 * engine, as fastrl configures SGLang; otherwise the [rollout] ones, where
 * graph_max_bs 0 means SGLang's default on an 80 GB GPU (512 at TP >= 4, 256
 * below).  `speculative` selects which, whatever spec.mode says.  Cannot fail. */
host_mode scenario_host_mode(const scenario *s, int speculative);

/* The rollout engine's attention kernel (rollout.attn) into *a, checked
 * against the hardware it runs on (rollout_attn_check).  Returns 0, or -1
 * with e naming the scenario and the key: an unknown name, fa3 on a GPU
 * without FlashAttention-3 (attn_fa3), fa2/fa3 on one without the published
 * table (attn_fa_version unset). */
int scenario_rollout_attn(const scenario *s, const hw_desc *hw, rollout_attn *a, ts_err *e);

/* Cross-field checks (GPUs within [1, SCN_MAX_GPUS], TP divides GPUs, ...).
 * Returns 0 or -1. */
int scenario_validate(const scenario *s, ts_err *e);

/* The scenario against its model: rollout.tp must divide the model's
 * attention heads, and divide or be a multiple of its KV heads (as vLLM and
 * SGLang require).  Returns 0, or -1 naming rollout.tp and the heads. */
int scenario_check_model(const scenario *s, const llm_desc *m, ts_err *e);

/* The rollout's shared model-fit check: scenario_check_model(), then the
 * weights must leave KV cache for at least one token per replica on hw at
 * rollout.mem_util.  Every command that rolls out (rollout, rlstep, sweep
 * and plan's configuration check, specdec) calls it before any work.
 * Returns 0, or -1 with "PATH: model M does not fit on ..." in e. */
int scenario_check_fit(const scenario *s, const hw_desc *hw, const llm_desc *m, ts_err *e);

/* The scenario's hardware (cluster.hw, with its calibration: hw_load()) and
 * model (model.name) into hw and m; cluster.gpus_per_node is not applied.
 * Returns 0, or -1 with "PATH: key 'model.name': " before the loader's
 * message ("unknown model 'X' (...); available: ...", or the INI's own
 * error), so that the message names the key that chose the file. */
int scenario_load_models(const scenario *s, hw_desc *hw, llm_desc *m, ts_err *e);

/* Resolves the trace file path (shared: prefix, relative to the scenario's
 * directory) into buf.  Returns 0, or -1 when the scenario generates its trace. */
int scenario_trace_path(const scenario *s, char *buf, size_t n);

/* Resolves a file key's value f into buf (n bytes): "shared:PATH" under
 * $TAILSIM_SHARED (or ../shared beside the data root), an absolute path as
 * it is, anything else relative to the scenario's directory.  The one
 * resolver of trace.file and dcp.file.  Cannot fail (cut to n). */
void scenario_resolve_path(const scenario *s, const char *f, char *buf, size_t n);

/* The effective scenario s as INI text a user can rerun: every key of the
 * key table with its value, in the table's order, one [section] header per
 * section, numbers formatted so that they read back exactly.  A relative
 * file key (trace.file, trace.reward_file, dcp.file) is written resolved
 * against the scenario's directory (made absolute when it exists), so that
 * the text loads the same trace from anywhere; "shared:" and absolute paths
 * are kept as given.  Loading the text (scenario_load() of a file holding it)
 * gives back every field of s but name, path and dir.  Returns a new
 * NUL-terminated string (free() it), or NULL with e filled: out of memory,
 * or a value the INI reader could not read back (a control character,
 * leading or trailing blanks, an inline-comment ';', a line over 198
 * characters), naming the key. */
char *scenario_to_ini(const scenario *s, ts_err *e);

/* Generator parameters equivalent to the [trace] section. */
int scenario_gen_params(const scenario *s, gen_params *p, ts_err *e);

#endif
