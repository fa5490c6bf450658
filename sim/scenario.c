/*
 * Scenario loading.  One static table describes every key: section, name,
 * type, range and offset into struct scenario; the libinih handler and the
 * --set override both go through it, so a key is validated the same way
 * wherever it comes from.  Defaults follow VeRL/vLLM's (max_num_seqs 256,
 * max_num_batched_tokens 8192, gpu_memory_utilization 0.9).  The file is
 * read through the strict line reader every INI reader shares
 * (common/ini_lines.h: long lines, NUL bytes and indented continuation lines
 * are errors, line numbers are exact); a key given twice, even under a
 * repeated section, is an error naming both lines; a key before any section
 * is refused without quoting it, and a value is quoted only cut and
 * sanitised (ts_quote), since a scenario path may name any file.
 */
#include "sim/scenario.h"

#include <ini.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ini_lines.h"
#include "common/util.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "models/memory.h"
#include "sim/dcp/dcp.h"
#include "sim/rollout.h"
#include "sim/scenario_impl.h"


const key_def scn_keys[] = {
    {"cluster", "gpus", K_INT, OFF(gpus), 1, SCN_MAX_GPUS, "total GPUs"},
    {"cluster", "hw", K_STR, OFF(hw), 0, 64, "hardware name (models/hw/NAME.ini)"},
    {"cluster", "gpus_per_node", K_INT, OFF(gpus_per_node), 0, 64, "GPUs per node (0: from hw)"},
    {"model", "name", K_STR, OFF(model), 0, 64, "LLM name (models/llm/NAME.ini)"},
    {"rollout", "tp", K_INT, OFF(tp), 1, 64, "tensor-parallel size per replica"},
    {"rollout", "max_running", K_INT, OFF(max_running), 1, 65536, "max running requests per replica"},
    {"rollout", "chunk_tokens", K_INT, OFF(chunk_tokens), 16, 1048576, "prefill token budget per iteration"},
    {"rollout", "mem_util", K_DBL, OFF(mem_util), 0.05, 1.0, "fraction of HBM for weights + KV"},
    {"rollout", "reserve_gb", K_DBL, OFF(reserve_gb), 0, 1024, "activation reserve per GPU, GB"},
    {"rollout", "max_response", K_INT, OFF(max_response), 0, TRACE_MAX_TOKENS, "response cap, tokens (0: none)"},
    {"rollout", "tail_threshold", K_INT, OFF(tail_threshold), 1, 65536, "tail = running <= this"},
    {"rollout", "graph_max_bs", K_INT, OFF(graph_max_bs), 0, 65536, "largest CUDA-graph batch (0: SGLang default)"},
    {"rollout", "overlap", K_BOOL, OFF(overlap), 0, 1, "overlap scheduler"},
    {"rollout", "engine", K_STR, OFF(engine), 0, 8, "graph (decode up to graph_max_bs from CUDA graphs, custom all-reduce) | eager (every step eager, NCCL)"},
    {"rollout", "placement", K_STR, OFF(placement), 0, 16, "prompts to replicas: balanced (VeRL's equal chunks) | trace (recorded dp_rank) | round-robin"},
    {"rollout", "keep_kv_during_tool", K_BOOL, OFF(keep_kv_during_tool), 0, 1, "multi-turn: a trajectory keeps its KV while its tool runs (false: it becomes evictable prefix cache)"},
    {"rollout", "tool_concurrency", K_INT, OFF(tool_concurrency), 0, 1 << 20, "multi-turn: tool calls running at once, all replicas (0: unlimited)"},
    {"rollout", "attn", K_STR, OFF(attn), 0, 8, "attention kernel of prefill/chunk/verify: hw (the hardware INI's attn_fa_version) | flat (attn_eff at every length) | fa2 | fa3 (FlashAttention-2/3's published H100 table by length)"},
    {"train", "reward_per_response_s", K_DBL, OFF(reward_per_response_s), 0, 3600, "reward time per response, s"},
    {"train", "reward_step_s", K_DBL, OFF(reward_step_s), 0, 86400, "reward time per step, s"},
    {"train", "micro_batch_tokens", K_INT, OFF(micro_batch_tokens), 256, 16777216, "tokens per micro-batch"},
    {"train", "recompute", K_BOOL, OFF(recompute), 0, 1, "activation checkpointing"},
    {"train", "update_epochs", K_INT, OFF(update_epochs), 1, 64, "actor update passes"},
    {"train", "ref_model", K_BOOL, OFF(ref_model), 0, 1, "reference-policy forward pass"},
    {"train", "sp", K_INT, OFF(train_sp), 1, 1024, "Ulysses SP size of VeRL's training phases"},
    {"train", "mini_batch_prompts", K_INT, OFF(mini_batch_prompts), 0, 1 << 20, "PPO mini-batch in prompts (0: one pass)"},
    {"train", "offload", K_BOOL, OFF(train_offload), 0, 1, "model states on the host, optimizer step on the CPU"},
    {"train", "fsdp_size", K_INT, OFF(train_fsdp_size), 0, SCN_MAX_GPUS, "GPUs the actor's states are sharded over (HSDP; 0: all)"},
    {"train", "mem_cap", K_DBL, OFF(train_mem_cap), 0.05, 1.0, "fraction of HBM the actor update may use"},
    {"train", "strategy", K_STR, OFF(train_strategy), 0, 32, "none | bucket | packed | dcp-intra | dcp-inter | dcp-inter+pac"},
    {"spec", "mode", K_STR, OFF(spec_mode), 0, 16, "off | always | adaptive"},
    {"spec", "patience", K_INT, OFF(spec_patience), 1, 1 << 20, "tail decode iterations before the switch"},
    {"spec", "graph_max_bs", K_INT, OFF(spec_graph_max_bs), 0, 65536, "CUDA-graph limit of a speculative engine"},
    {"spec", "overlap", K_BOOL, OFF(spec_overlap), 0, 1, "overlap scheduler of a speculative engine"},
    {"spec", "depth", K_INT, OFF(sp.depth), 1, SPEC_MAX_DEPTH, "draft depth"},
    {"spec", "topk", K_INT, OFF(sp.topk), 1, 15, "draft top-k"},
    {"spec", "quality", K_DBL, OFF(sp.quality), 0.001, 0.999, "mean top-1 acceptance per position"},
    {"spec", "decay", K_DBL, OFF(sp.decay), 0.01, 1, "acceptance decay per depth"},
    {"spec", "kappa", K_DBL, OFF(sp.kappa), 0, 1e6, "Beta concentration of per-sequence quality"},
    {"spec", "ngram", K_BOOL, OFF(sp.ngram), 0, 1, "draft by n-gram retrieval when its expected goodput is higher"},
    {"spec", "ngram_rep", K_DBL, OFF(sp.ngram_rep), 0, 0.999, "mean per-sequence repetitiveness (n-gram hit chain)"},
    {"spec", "ngram_kappa", K_DBL, OFF(sp.ngram_kappa), 0, 1e6, "Beta concentration of repetitiveness"},
    {"spec", "ngram_max", K_INT, OFF(sp.ngram_max), 1, SPEC_MAX_BUDGET, "longest retrieved continuation, tokens"},
    {"spec", "ngram_lookup_s", K_DBL, OFF(sp.ngram_lookup_s), 0, 0.1, "CPU n-gram lookup per sequence per step, s"},
    {"spec", "bandit", K_BOOL, OFF(sp.bandit), 0, 1, "epsilon-greedy bandit over spec.arms instead of TLT's table"},
    {"spec", "arms", K_STR, OFF(sp.arms), 0, 96, "bandit arms depth_topk_V,... (fastrl mab_configs)"},
    {"spec", "epsilon", K_DBL, OFF(sp.epsilon), 0, 1, "bandit exploration probability"},
    {"spec", "window", K_INT, OFF(sp.window), 1, 1000000, "bandit reward window per arm, steps"},
    {"spec", "spot", K_BOOL, OFF(spot), 0, 1, "spot-train the drafter on finished replicas"},
    {"spec", "q_max", K_DBL, OFF(dp.q_max), 0.001, 0.999, "drafter quality trained to convergence"},
    {"spec", "q_floor", K_DBL, OFF(dp.q_floor), 0.001, 0.999, "quality of a fully stale drafter"},
    {"spec", "drift", K_DBL, OFF(dp.drift), 0, 1, "drafter quality lost per RL step (fraction of q - q_floor)"},
    {"spec", "tau", K_DBL, OFF(dp.tau), 1e-3, 1e12, "drafter GPU-steps per 1/e of the gap to q_max"},
    {"spec", "train_seqs", K_INT, OFF(dp.seqs), 1, 4096, "sequences per GPU per drafter step"},
    {"spec", "train_window", K_INT, OFF(dp.window), 1, 1 << 20, "tokens per drafter training window"},
    {"spec", "train_start_s", K_DBL, OFF(dp.start_s), 0, 3600, "s from a replica's end to its first drafter step"},
    {"policy", "name", K_STR, OFF(policy), 0, 32, "long-tail policy (verl, tlt-base, tlt, ...)"},
    {"policy", "sort_noise", K_DBL, OFF(sort_noise), 0, 10, "sorted: length predictor's lognormal sigma (0: oracle)"},
    {"policy", "overprov", K_DBL, OFF(overprov), 1, 16, "partial: prompts launched per prompt trained"},
    {"policy", "tail_overprov", K_DBL, OFF(tail_overprov), 1, 16, "tailbatch: prompts launched per prompt kept"},
    {"policy", "max_staleness", K_INT, OFF(max_staleness), 1, 1024, "async: max policy versions behind (AReaL eta)"},
    {"policy", "rollout_pool", K_DBL, OFF(rollout_pool), 0.01, 0.99, "async: GPU fraction that rolls out"},
    {"trace", "file", K_STR, OFF(trace_file), 0, SCN_STR, "trace file (shared:PATH for ../shared)"},
    {"trace", "reward_file", K_STR, OFF(trace_reward_file), 0, SCN_STR, "recorded reward timings JSONL (optional; shared:PATH allowed)"},
    {"trace", "step", K_INT, OFF(trace_step), -1, 1 << 30, "step to replay (-1: first)"},
    {"trace", "dist", K_STR, OFF(dist), 0, SCN_STR, "generator distribution"},
    {"trace", "prompts", K_INT, OFF(prompts), 1, 1 << 24, "prompts per step"},
    {"trace", "group", K_INT, OFF(group), 1, 4096, "responses per prompt"},
    {"trace", "cap", K_INT, OFF(cap), 1, TRACE_MAX_TOKENS, "generated length cap, tokens"},
    {"trace", "corr", K_DBL, OFF(corr), 0, 1, "within-group length correlation"},
    {"trace", "prompt_median", K_DBL, OFF(prompt_median), 1, 1 << 20, "median prompt length, tokens"},
    {"trace", "seed", K_U64, OFF(seed), 0, 0, "generator seed"},
    {"trace", "turns", K_STR, OFF(turns), 0, 16, "off | search-r1: generate multi-turn trajectories (the turn_*, tool_*, append_*, gen*_ keys; defaults: the Search-R1 fit)"},
    {"trace", "turn_probs", K_STR, OFF(turn_probs), 0, SCN_STR, "multi-turn: probabilities of 1, 2, ... turns, summing to 1"},
    {"trace", "tool_median", K_DBL, OFF(tool_median), 1e-6, 86400, "multi-turn: tool latency lognormal median, s"},
    {"trace", "tool_sigma", K_DBL, OFF(tool_sigma), 0, 10, "multi-turn: tool latency lognormal sigma"},
    {"trace", "append_median", K_DBL, OFF(append_median), 1e-3, 1 << 20, "multi-turn: tokens a tool result appends, lognormal median"},
    {"trace", "append_sigma", K_DBL, OFF(append_sigma), 0, 10, "multi-turn: appended tokens lognormal sigma"},
    {"trace", "gen0_median", K_DBL, OFF(gen0_median), 1e-3, 1 << 20, "multi-turn: turn 0's generated tokens, lognormal median"},
    {"trace", "gen0_sigma", K_DBL, OFF(gen0_sigma), 0, 10, "multi-turn: turn 0's generated tokens lognormal sigma"},
    {"trace", "gen_median", K_DBL, OFF(gen_median), 1e-3, 1 << 20, "multi-turn: later turns' generated tokens, lognormal median"},
    {"trace", "gen_sigma", K_DBL, OFF(gen_sigma), 0, 10, "multi-turn: later turns' generated tokens lognormal sigma"},
    {"dcp", "strategies", K_STR, OFF(dcp.strategies), 0, SCN_STR, "default strategy list"},
    {"dcp", "sp_sizes", K_STR, OFF(dcp.sp_sizes), 0, 64, "SP sizes the planners may use"},
    {"dcp", "bucket_sp", K_INT, OFF(dcp.bucket_sp), 0, 65536, "SP of bucket/packed (0: auto)"},
    {"dcp", "mem_cap", K_DBL, OFF(dcp.mem_cap), 0.05, 1.0, "fraction of HBM a plan may use"},
    {"dcp", "reserve_gb", K_DBL, OFF(dcp.reserve_gb), 0, 1024, "per-GPU reserve, GB"},
    {"dcp", "zero_stage", K_INT, OFF(dcp.zero_stage), 0, 3, "ZeRO stage"},
    {"dcp", "ring", K_BOOL, OFF(dcp.ring), 0, 1, "ring attention instead of Ulysses"},
    {"dcp", "frame_split", K_BOOL, OFF(dcp.frame_split), 0, 1, "STDiT: VideoSys' frame-split SP instead of Ulysses"},
    {"dcp", "max_gas", K_INT, OFF(dcp.max_gas), 1, 64, "dcp-inter: max accumulation steps"},
    {"dcp", "overshoot", K_DBL, OFF(dcp.overshoot), 1.0, 100.0, "dcp-inter: overshoot penalty"},
    {"dcp", "fill", K_BOOL, OFF(dcp.fill), 0, 1, "dcp-inter: partial micro-batch in each group's slack"},
    {"dcp", "draw", K_STR, OFF(dcp.draw), 0, 16, "dcp-inter: groups draw buckets by share or work left"},
    {"dcp", "xfill", K_BOOL, OFF(dcp.xfill), 0, 1, "dcp-inter: other buckets' micro-batches in a group's slack"},
    {"dcp", "endgame", K_INT, OFF(dcp.endgame), 0, 16, "dcp-inter: last steps packed longest first (0: off)"},
    {"dcp", "ahead", K_DBL, OFF(dcp.ahead), 0, 1000, "dcp-inter: steps early coarse buckets finish"},
    {"dcp", "coarse", K_DBL, OFF(dcp.coarse), 0, 1, "dcp-inter: coarse bucket, micro-batch / step"},
    {"dcp", "tie_tol", K_DBL, OFF(dcp.tie_tol), 0, 0.5, "throughput ties (shortest wins)"},
    {"dcp", "act_factor", K_DBL, OFF(dcp.act_factor), 2.0, 1000.0, "activation bytes/token/layer/hidden"},
    {"dcp", "a2a_eff", K_DBL, OFF(dcp.a2a_eff), 0.01, 1.0, "SP all-to-all bandwidth fraction"},
    {"dcp", "cross_tokens", K_INT, OFF(dcp.cross_tokens), 0, 65536, "caption tokens per sample"},
    {"dcp", "pack_tokens", K_INT, OFF(dcp.pack_tokens), 0, TRACE_MAX_TOKENS, "packed token budget (0: longest)"},
    {"dcp", "file", K_STR, OFF(dcp.file), 0, SCN_STR, "batch trace CSV (shared:PATH allowed)"},
    {"dcp", "dist", K_STR, OFF(dcp.dist), 0, SCN_STR, "video-mix | sft | pretrain | lognormal:M:S | ..."},
    {"dcp", "videos", K_INT, OFF(dcp.videos), 1, 10000000, "video-mix: videos"},
    {"dcp", "image_mix", K_DBL, OFF(dcp.image_mix), 0, 1000, "video-mix: images per video"},
    {"dcp", "zipf_alpha", K_DBL, OFF(dcp.zipf_alpha), 0.01, 100, "video-mix: Zipf exponent"},
    {"dcp", "zipf_offset", K_DBL, OFF(dcp.zipf_offset), 0, 1e6, "video-mix: Zipf rank offset"},
    {"dcp", "seqs", K_INT, OFF(dcp.seqs), 1, 100000000, "1D: sequences"},
    {"dcp", "cap", K_INT, OFF(dcp.cap), 1, TRACE_MAX_TOKENS, "1D: length cap, tokens"},
    {"dcp", "seed", K_U64, OFF(dcp.seed), 0, 0, "DCP generator and planner seed"},
    {"dcp", "steps", K_INT, OFF(dcp.steps), 0, 1 << 30, "default --steps (0: all)"},
    {"dcp", "image_mixing", K_STR, OFF(dcp.image_mixing), 0, 16, "video-mix: exclusive | inclusive images"},
    {"dcp", "zipf_rank", K_STR, OFF(dcp.zipf_rank), 0, 16, "video-mix: Zipf rank by pixels | height x frames"},
    {"dcp", "res_scale", K_DBL, OFF(dcp.res_scale), 0, 100, "video-mix: half-normal res_scale (0: Zipf)"},
    {"dcp", "frame_scale", K_DBL, OFF(dcp.frame_scale), 0, 100, "video-mix: half-normal frame_scale (0: Zipf)"},
};
#define N_KEYS (sizeof scn_keys / sizeof scn_keys[0])
const size_t scn_n_keys = N_KEYS;

void scenario_defaults(scenario *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->hw, sizeof s->hw, "h100");
    s->tp = 1;
    s->max_running = 256;
    s->chunk_tokens = 8192;
    s->mem_util = 0.9;
    s->reserve_gb = 4.0;
    s->tail_threshold = 32;
    s->graph_max_bs = 0;
    s->overlap = 1;
    snprintf(s->placement, sizeof s->placement, "balanced");
    snprintf(s->engine, sizeof s->engine, "graph");
    snprintf(s->attn, sizeof s->attn, "hw");
    s->spec_graph_max_bs = 32; /* fastrl's sglang_rollout.py: cuda_graph_max_bs 32 */
    s->spec_overlap = 0;       /* and disable_overlap_schedule True */
    s->reward_per_response_s = 0.0;
    s->reward_step_s = 0.0;
    s->micro_batch_tokens = 16384;
    s->recompute = 1;
    s->update_epochs = 1;
    s->ref_model = 1;
    s->train_sp = 1;
    s->mini_batch_prompts = 0;
    s->train_offload = 0;
    s->train_mem_cap = 0.9;
    snprintf(s->train_strategy, sizeof s->train_strategy, "none");
    s->trace_step = -1;
    s->sort_noise = 0.0;
    s->overprov = 1.5;
    s->tail_overprov = 1.25;
    s->max_staleness = 2;
    s->rollout_pool = 0.5;
    snprintf(s->spec_mode, sizeof s->spec_mode, "off");
    s->spec_patience = 10;
    spec_params_default(&s->sp);
    drafter_params_default(&s->dp);
    snprintf(s->dist, sizeof s->dist, "mixture");
    s->prompts = 64;
    s->group = 8;
    s->cap = 32768;
    s->corr = 0.5;
    s->prompt_median = 256;
    s->seed = 1;
    {
        gen_turns gt; /* the generator's defaults: one place */
        gen_turns_default(&gt);
        snprintf(s->turns, sizeof s->turns, "off");
        int at = 0;
        for (int k = 0; k < gt.n_probs; k++)
            at += snprintf(s->turn_probs + at, sizeof s->turn_probs - (size_t)at, "%s%.3f",
                           k ? "," : "", gt.probs[k]);
        s->tool_median = gt.tool_median;
        s->tool_sigma = gt.tool_sigma;
        s->append_median = gt.append_median;
        s->append_sigma = gt.append_sigma;
        s->gen0_median = gt.gen0_median;
        s->gen0_sigma = gt.gen0_sigma;
        s->gen_median = gt.gen_median;
        s->gen_sigma = gt.gen_sigma;
    }
    snprintf(s->dcp.strategies, sizeof s->dcp.strategies,
             "bucket,packed,dcp-intra,dcp-inter,dcp-inter+pac,bound");
    /* the planner's keys take dcp_cfg_default()'s values: one table */
    dcp_cfg c;
    dcp_cfg_default(&c);
    size_t len = 0;
    for (int i = 0; i < c.n_sp; i++)
        len += (size_t)snprintf(s->dcp.sp_sizes + len, sizeof s->dcp.sp_sizes - len, "%s%d",
                                i ? "," : "", c.sp[i]);
    s->dcp.bucket_sp = c.bucket_sp;
    s->dcp.mem_cap = c.mem_cap;
    s->dcp.reserve_gb = c.reserve_bytes / 1e9;
    s->dcp.zero_stage = c.zero_stage;
    s->dcp.ring = c.ring;
    s->dcp.max_gas = c.max_gas;
    s->dcp.overshoot = c.overshoot;
    s->dcp.fill = c.fill;
    s->dcp.endgame = c.endgame;
    s->dcp.xfill = c.xfill;
    snprintf(s->dcp.draw, sizeof s->dcp.draw, "%s", c.draw_work ? "work" : "share");
    s->dcp.ahead = c.ahead;
    s->dcp.coarse = c.coarse;
    s->dcp.tie_tol = c.tie_tol;
    s->dcp.pack_tokens = c.pack_tokens;
    s->dcp.seed = c.seed;
    s->dcp.act_factor = 34.0;
    s->dcp.a2a_eff = 1.0;
    snprintf(s->dcp.dist, sizeof s->dcp.dist, "sft");
    s->dcp.videos = 2000;
    s->dcp.image_mix = 1.0;
    s->dcp.zipf_alpha = 3.0;
    s->dcp.zipf_offset = 5.0;
    snprintf(s->dcp.image_mixing, sizeof s->dcp.image_mixing, "exclusive");
    snprintf(s->dcp.zipf_rank, sizeof s->dcp.zipf_rank, "pixels");
    s->dcp.seqs = 4096;
    s->dcp.cap = 65536;
}

/* The names train.strategy takes (sim/rlstep_train.h plans with them). */
static int train_strategy_ok(const char *v)
{
    static const char *const names[] = {"none",      "bucket",    "packed",
                                        "dcp-intra", "dcp-inter", "dcp-inter+pac"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(v, names[i]))
            return 1;
    return 0;
}

/* The key table's row of section.key, or -1. */
static int find_key(const char *section, const char *key)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(scn_keys[i].section, section) && !strcmp(scn_keys[i].key, key))
            return (int)i;
    return -1;
}

int scenario_has_key(const char *section, const char *key)
{
    return find_key(section, key) >= 0;
}

int scenario_has_section(const char *section)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(scn_keys[i].section, section))
            return 1;
    return 0;
}

/* The keys a scenario must set: they have no default. */
int scn_key_required(const key_def *k)
{
    return k->off == OFF(gpus) || k->off == OFF(model);
}

/* 1 when a required key still holds its unset value (0 or ""). */
static int key_unset(const scenario *s, const key_def *k)
{
    const char *p = (const char *)s + k->off;
    return k->type == K_STR ? !p[0] : !*(const int *)p;
}

size_t scenario_key_count(void)
{
    return N_KEYS;
}


/* Levenshtein distance of a and b, or 3 once it exceeds 2 (names are
 * short; only near misses matter). */
static int near_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40 || (la > lb ? la - lb : lb - la) > 2)
        return 3;
    int row[41];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] > 2 ? 3 : row[lb];
}

/* The key nearest to section.key (the same name in another section, or at
 * most two edits away in all, one for a name of four characters or less),
 * or -1. */
static int near_key(const char *section, const char *key)
{
    int best = -1, best_d = strlen(key) > 4 ? 3 : 2; /* short names: one edit */
    for (size_t i = 0; i < N_KEYS; i++) {
        int d = near_distance(scn_keys[i].key, key);
        if (d < 3)
            d += near_distance(scn_keys[i].section, section);
        if (!strcmp(scn_keys[i].key, key))
            d = 1; /* the right name in the wrong section */
        if (d < best_d)
            best = (int)i, best_d = d;
    }
    return best;
}

int scenario_unknown_key(const char *section, const char *key, ts_err *e)
{
    char qs[TS_QUOTE_BUF], qk[TS_QUOTE_BUF], hint[160] = "";
    ts_quote(section, 32, qs, sizeof qs);
    ts_quote(key, 32, qk, sizeof qk);
    int near = near_key(section, key);
    if (near >= 0)
        snprintf(hint, sizeof hint, "did you mean %s.%s? ", scn_keys[near].section, scn_keys[near].key);
    if (scenario_has_section(section))
        return ts_errf(e, "unknown key '%s.%s' (%sthe keys of [%s]: tailsim keys %s)", qs, qk,
                       hint, section, section);
    char list[256];
    size_t len = 0;
    for (size_t i = 0; i < N_KEYS; i++)
        if (!i || strcmp(scn_keys[i].section, scn_keys[i - 1].section))
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
                                    scn_keys[i].section);
    return ts_errf(e, "unknown key '%s.%s': no section [%s] (%ssections: %s; every key: "
                      "tailsim keys)", qs, qk, qs, hint, list);
}

/* Assigns one value.  Returns 0, or -1 with "key 'x': problem" in e.  The
 * value is quoted cut and sanitised (ts_quote), the names of an unknown key
 * too: the line may come from a file that is no scenario at all. */
static int set_key(scenario *s, const char *section, const char *key, const char *val, ts_err *e)
{
    int i = find_key(section, key);
    char q[TS_QUOTE_BUF];
    if (i < 0)
        return scenario_unknown_key(section, key, e);
    const key_def *k = &scn_keys[i];
    char *dst = (char *)s + k->off;
    int64_t iv;
    double dv;
    int bv;
    switch (k->type) {
    case K_INT:
        if (ts_parse_i64(val, (int64_t)k->min, (int64_t)k->max, &iv))
            return ts_errf(e, "key '%s.%s': '%s' is not an integer in [%.0f, %.0f]", section, key,
                           ts_quote(val, TS_QUOTE_MAX, q, sizeof q), k->min, k->max);
        *(int *)dst = (int)iv;
        return 0;
    case K_U64:
        if (ts_parse_i64(val, 0, INT64_MAX, &iv))
            return ts_errf(e, "key '%s.%s': '%s' is not a non-negative integer", section, key,
                           ts_quote(val, TS_QUOTE_MAX, q, sizeof q));
        *(uint64_t *)dst = (uint64_t)iv;
        return 0;
    case K_DBL:
        if (ts_parse_double(val, k->min, k->max, &dv))
            return ts_errf(e, "key '%s.%s': '%s' is not a number in [%g, %g]", section, key,
                           ts_quote(val, TS_QUOTE_MAX, q, sizeof q), k->min, k->max);
        *(double *)dst = dv;
        return 0;
    case K_BOOL:
        if (ts_parse_bool(val, &bv))
            return ts_errf(e, "key '%s.%s': '%s' is not true/false", section, key,
                           ts_quote(val, TS_QUOTE_MAX, q, sizeof q));
        *(int *)dst = bv;
        return 0;
    case K_STR:
        if (strlen(val) >= (size_t)k->max)
            return ts_errf(e, "key '%s.%s': value longer than %d characters", section, key,
                           (int)k->max - 1);
        if (k->off == OFF(train_strategy) && !train_strategy_ok(val))
            return ts_errf(e, "key '%s.%s': '%s' is not none, bucket, packed, dcp-intra, "
                              "dcp-inter or dcp-inter+pac", section, key,
                           ts_quote(val, TS_QUOTE_MAX, q, sizeof q));
        if (k->off == OFF(engine) && strcmp(val, "graph") && strcmp(val, "eager"))
            return ts_errf(e, "key '%s.%s': '%s' is not graph or eager", section, key,
                           ts_quote(val, TS_QUOTE_MAX, q, sizeof q));
        if (k->off == OFF(turns) && strcmp(val, "off") && strcmp(val, "search-r1"))
            return ts_errf(e, "key '%s.%s': '%s' is not off or search-r1", section, key,
                           ts_quote(val, TS_QUOTE_MAX, q, sizeof q));
        gen_turns gt;
        if (k->off == OFF(turn_probs) && gen_parse_turn_probs(val, &gt, e))
            return ts_err_prefix(e, "key '%s.%s': ", section, key);
        rollout_attn at;
        if (k->off == OFF(attn) && rollout_attn_parse(val, &at))
            return ts_errf(e, "key '%s.%s': '%s' is not hw, flat, fa2 or fa3", section, key,
                           ts_quote(val, TS_QUOTE_MAX, q, sizeof q));
        rollout_placement pl;
        if (k->off == OFF(placement) && rollout_placement_parse(val, &pl))
            return ts_errf(e, "key '%s.%s': '%s' is not balanced, trace or round-robin", section,
                           key, ts_quote(val, TS_QUOTE_MAX, q, sizeof q));
        snprintf(dst, (size_t)k->max, "%s", val);
        return 0;
    }
    return ts_errf(e, "key '%s.%s': bad key table row", section, key);
}

typedef struct load_ctx {
    scenario *s;
    ts_ini_lines in;
    int line[N_KEYS]; /* line each key was set on (0: not yet) */
} load_ctx;

static int scn_handler(void *user, const char *section, const char *name, const char *value)
{
    load_ctx *c = user;
    if (c->in.failed)
        return 0;
    ts_err *e = c->in.e;
    if (!*section) {
        ts_errf(e, "%s:%d: a key before any [section] (is this a scenario file?)", c->in.path,
                c->in.line);
        return ts_ini_fail(&c->in);
    }
    int i = find_key(section, name);
    if (i >= 0 && c->line[i]) {
        ts_errf(e, "%s:%d: key '%s.%s' given twice (first on line %d)", c->in.path, c->in.line,
                section, name, c->line[i]);
        return ts_ini_fail(&c->in);
    }
    if (set_key(c->s, section, name, value, e)) {
        ts_err_prefix(e, "%s:%d: ", c->in.path, c->in.line);
        return ts_ini_fail(&c->in);
    }
    c->line[i] = c->in.line;
    return 1;
}

int scenario_load(const char *name, scenario *s, ts_err *e)
{
    char path[SCN_STR];
    if (ts_find_data("scenarios", name, ".ini", path, sizeof path, e))
        return -1;
    scenario_defaults(s);
    snprintf(s->path, sizeof s->path, "%s", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(s->name, sizeof s->name, "%.*s", (int)(strcspn(base, ".")), base);
    snprintf(s->dir, sizeof s->dir, "%.*s", base == path ? 1 : (int)(base - path - 1),
             base == path ? "." : path);
    FILE *f = fopen(path, "r");
    if (!f)
        return ts_errf(e, "%s: cannot open", path);
    load_ctx c = {s, {.f = f, .path = path, .e = e}, {0}};
    int rc = ini_parse_stream(ts_ini_read, &c.in, scn_handler, &c);
    fclose(f);
    if (c.in.failed)
        return -1;
    if (rc > 0)
        return ts_errf(e, "%s:%d: syntax error (expected [section] or key = value)", path, rc);
    if (rc < 0)
        return ts_errf(e, "%s: cannot read", path);
    for (size_t i = 0; i < N_KEYS; i++)
        if (scn_key_required(&scn_keys[i]) && key_unset(s, &scn_keys[i]))
            return ts_errf(e, "%s: missing required key '%s.%s'", path, scn_keys[i].section,
                           scn_keys[i].key);
    return 0;
}

int scenario_parse_set(const char *assignment, char *sec, size_t sn, char *key, size_t kn,
                       int strict, const char **val, ts_err *e)
{
    const char *dot = strchr(assignment, '.');
    const char *eq = strchr(assignment, '=');
    if (!dot || !eq || dot > eq || dot == assignment ||
        (strict && ((size_t)(dot - assignment) >= sn || (size_t)(eq - dot - 1) >= kn)))
        return ts_errf(e, "--set '%s': expected section.key=value", assignment);
    snprintf(sec, sn, "%.*s", (int)(dot - assignment), assignment);
    snprintf(key, kn, "%.*s", (int)(eq - dot - 1), dot + 1);
    *val = eq + 1;
    return 0;
}

int scenario_set(scenario *s, const char *assignment, ts_err *e)
{
    char section[64], key[64];
    const char *val;
    if (scenario_parse_set(assignment, section, sizeof section, key, sizeof key, 0, &val, e))
        return -1;
    if (set_key(s, section, key, val, e))
        return ts_err_prefix(e, "--set: ");
    return 0;
}

int scenario_set_key(scenario *s, const char *section, const char *key, const char *val,
                     ts_err *e)
{
    return set_key(s, section, key, val, e);
}

int scenario_spec_mode(const scenario *s, int *mode, ts_err *e)
{
    static const char *names[] = {"off", "always", "adaptive"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(s->spec_mode, names[i])) {
            *mode = i;
            return 0;
        }
    char q[TS_QUOTE_BUF];
    return ts_errf(e, "%s: key 'spec.mode': '%s' is not off, always or adaptive", s->path,
                   ts_quote(s->spec_mode, TS_QUOTE_MAX, q, sizeof q));
}

host_mode scenario_host_mode(const scenario *s, int speculative)
{
    int graph = strcmp(s->engine, "eager") != 0;
    if (speculative)
        return (host_mode){.on = 1, .graph_max_bs = graph ? s->spec_graph_max_bs : 0,
                           .overlap = s->spec_overlap, .graph = graph};
    int g = s->graph_max_bs > 0 ? s->graph_max_bs : (s->tp >= 4 ? 512 : 256);
    return (host_mode){.on = 1, .graph_max_bs = graph ? g : 0, .overlap = s->overlap,
                       .graph = graph};
}

int scenario_rollout_attn(const scenario *s, const hw_desc *hw, rollout_attn *a, ts_err *e)
{
    char q[TS_QUOTE_BUF];
    if (rollout_attn_parse(s->attn, a))
        return ts_errf(e, "%s: key 'rollout.attn': '%s' is not hw, flat, fa2 or fa3", s->path,
                       ts_quote(s->attn, TS_QUOTE_MAX, q, sizeof q));
    if (rollout_attn_check(hw, *a, e))
        return ts_err_prefix(e, "%s: key 'rollout.attn': ", s->path);
    return 0;
}

int scenario_validate(const scenario *s, ts_err *e)
{
    int mode;
    if (scenario_spec_mode(s, &mode, e))
        return -1;
    if (s->gpus < 1 || s->gpus > SCN_MAX_GPUS)
        return ts_errf(e, "%s: cluster.gpus = %d is not in [1, %d]", s->path, s->gpus,
                       SCN_MAX_GPUS);
    if (s->tp < 1)
        return ts_errf(e, "%s: rollout.tp = %d is below 1", s->path, s->tp);
    if (s->gpus % s->tp)
        return ts_errf(e, "%s: rollout.tp = %d does not divide cluster.gpus = %d",
                       s->path, s->tp, s->gpus);
    if (!s->trace_file[0] && s->cap > TRACE_MAX_TOKENS)
        return ts_errf(e, "%s: trace.cap too large", s->path);
    return 0;
}

int scenario_check_model(const scenario *s, const llm_desc *m, ts_err *e)
{
    int tp = s->tp;
    if (tp < 1 || m->heads % tp)
        return ts_errf(e, "%s: rollout.tp = %d does not divide the %d attention heads of %s "
                          "(its key 'heads'): a TP group splits the heads evenly",
                       s->path, tp, m->heads, m->name);
    if (m->kv_heads % tp && tp % m->kv_heads)
        return ts_errf(e, "%s: rollout.tp = %d neither divides nor is a multiple of the %d KV "
                          "heads of %s (its key 'kv_heads'): a TP group splits or replicates "
                          "them evenly",
                       s->path, tp, m->kv_heads, m->name);
    return 0;
}

int scenario_check_fit(const scenario *s, const hw_desc *hw, const llm_desc *m, ts_err *e)
{
    if (scenario_check_model(s, m, e))
        return -1;
    double kv = mem_kv_capacity(hw, m, s->tp, s->mem_util, s->reserve_gb * 1e9);
    if (kv < 1)
        return ts_errf(e, "%s: model %s does not fit on %d x %s at mem_util %.2f "
                          "(weights %.1f GB per GPU)",
                       s->path, m->name, s->tp, hw->name, s->mem_util,
                       mem_weights(m, s->tp) / 1e9);
    return 0;
}

int scenario_load_models(const scenario *s, hw_desc *hw, llm_desc *m, ts_err *e)
{
    if (hw_load(s->hw, hw, e))
        return ts_err_prefix(e, "%s: key 'cluster.hw': ", s->path);
    if (llm_load(s->model, m, e))
        return ts_err_prefix(e, "%s: key 'model.name': ", s->path);
    return 0;
}

void scenario_resolve_path(const scenario *s, const char *f, char *buf, size_t n)
{
    if (!strncmp(f, "shared:", 7)) {
        const char *sh = getenv("TAILSIM_SHARED");
        if (sh && *sh)
            snprintf(buf, n, "%s/%s", sh, f + 7);
        else
            snprintf(buf, n, "%s/../shared/%s", ts_data_root(), f + 7);
    } else if (f[0] == '/') {
        snprintf(buf, n, "%s", f);
    } else {
        snprintf(buf, n, "%s/%s", s->dir, f);
    }
}

int scenario_trace_path(const scenario *s, char *buf, size_t n)
{
    if (!s->trace_file[0])
        return -1;
    scenario_resolve_path(s, s->trace_file, buf, n);
    return 0;
}

int scenario_gen_params(const scenario *s, gen_params *p, ts_err *e)
{
    gen_params_default(p);
    if (gen_parse_dist(s->dist, p, e))
        return ts_err_prefix(e, "%s: key 'trace.dist': ", s->path);
    p->prompts = s->prompts;
    p->group = s->group;
    p->steps = 1;
    p->cap = s->cap;
    p->corr = s->corr;
    p->seed = s->seed;
    p->prompt_median = s->prompt_median;
    if (!strcmp(s->turns, "off"))
        return 0;
    if (strcmp(s->turns, "search-r1"))
        return ts_errf(e, "%s: key 'trace.turns': '%s' is not off or search-r1", s->path,
                       s->turns);
    gen_turns *t = &p->turns;
    if (gen_parse_turn_probs(s->turn_probs, t, e))
        return ts_err_prefix(e, "%s: key 'trace.turn_probs': ", s->path);
    t->on = 1;
    t->tool_median = s->tool_median;
    t->tool_sigma = s->tool_sigma;
    t->append_median = s->append_median;
    t->append_sigma = s->append_sigma;
    t->gen0_median = s->gen0_median;
    t->gen0_sigma = s->gen0_sigma;
    t->gen_median = s->gen_median;
    t->gen_sigma = s->gen_sigma;
    return 0;
}
