/*
 * Response-length traces: steps -> prompts -> responses.
 *
 * A trace is a flat array of prompts; each prompt belongs to an RL step, has a
 * prompt length, G response lengths (its group), and optionally the
 * data-parallel rank that served it.  Traces know nothing of the simulator.
 *
 * Ownership: a trace owns its prompts and their response arrays; free it with
 * trace_free() (NULL is a no-op).  Loaders load everything or nothing: on the
 * first bad record they return -1 with "file:line: field 'x': problem" in the
 * error and no trace.
 */
#ifndef TS_TRACE_H
#define TS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define TRACE_MAX_TOKENS 16777216 /* 16M tokens: any longer length is rejected */

/* One generation turn of a multi-turn (agentic) response, and the tool
 * call(s) that follow it.  A single-turn response has no turns. */
typedef struct trace_turn {
    int32_t context;       /* tokens in context when the turn starts: the prompt, earlier
                            * turns and tool results (>= 1) */
    int32_t cached;        /* of them, prefix-cache hits the engine recorded (0..context) */
    int32_t gen;           /* tokens the turn generates (>= 1) */
    int32_t tools;         /* tool calls after the turn (0: none) */
    int32_t append;        /* tokens those calls' results append to the context (>= 0) */
    double tool_s;         /* those calls' latency, summed (run one after another), s */
    double engine_s;       /* the engine's recorded latency of the turn, queueing
                            * included, s (-1: not recorded) */
} trace_turn;

typedef struct trace_prompt {
    int32_t step;          /* RL step index (>= 0) */
    int32_t prompt_id;     /* id within the step (>= 0) */
    int32_t dp_rank;       /* rollout data-parallel rank that served it, -1 if unknown */
    int32_t prompt_tokens; /* prompt length, tokens (>= 0) */
    int32_t n_resp;        /* responses in the group (>= 1) */
    int32_t *resp;         /* response lengths, tokens (>= 1 each), n_resp entries; of a
                            * multi-turn response the whole trained response: its turns'
                            * tokens and the tool results between them */
    int32_t *turn0;        /* multi-turn: n_resp + 1 offsets, response j's turns are
                            * turns[turn0[j] .. turn0[j+1]); NULL: single-turn */
    trace_turn *turns;     /* multi-turn: turn0[n_resp] entries; NULL: single-turn */
} trace_prompt;

/* One rollout rank's recorded reward time for one RL step (PolyTrace's
 * reward_timings_step_*.jsonl; read by traces/reward.h). */
typedef struct trace_reward {
    int32_t step;   /* RL step (>= 0) */
    int32_t rank;   /* rollout data-parallel rank that measured it (>= 0) */
    double time_s;  /* the rank's measured reward time for the step, s (0..86400) */
    long line;      /* line of the record in its file (for messages) */
} trace_reward;

typedef struct trace {
    trace_prompt *prompts; /* n_prompts entries, in file order */
    size_t n_prompts;
    size_t cap;
    trace_reward *reward;  /* recorded reward times, n_reward entries (NULL when none);
                            * (step, rank) unique; see traces/reward.h */
    size_t n_reward;
} trace;

/* Returns an empty trace, or NULL on allocation failure. */
trace *trace_new(void);
void trace_free(trace *t);

/* Appends a prompt, copying `resp`.  Returns 0, or -1 on allocation failure. */
int trace_add(trace *t, int32_t step, int32_t prompt_id, int32_t dp_rank,
              int32_t prompt_tokens, const int32_t *resp, int32_t n_resp, ts_err *e);

/* Appends a prompt whose responses have turns: response j has n_turns[j]
 * (>= 1) consecutive entries of turns.  Copies everything.  Returns 0, or -1
 * on allocation failure or a turn outside the trace_turn ranges. */
int trace_add_turns(trace *t, int32_t step, int32_t prompt_id, int32_t dp_rank,
                    int32_t prompt_tokens, const int32_t *resp, int32_t n_resp,
                    const int32_t *n_turns, const trace_turn *turns, ts_err *e);

/* Appends a copy of prompt p (its turns too) to t.  Returns 0, or -1 on
 * allocation failure. */
int trace_add_prompt(trace *t, const trace_prompt *p, ts_err *e);

/* 1 when any prompt of t has turns (a multi-turn trace), else 0.  Cannot fail. */
int trace_has_turns(const trace *t);

/* Appends every prompt and recorded reward time of src to dst (used to
 * concatenate several files).  All or nothing: returns 0, or -1 on
 * allocation failure or a (step, rank) reward record that dst already holds
 * (the message names the step, the rank and both lines), with dst as it
 * was. */
int trace_append(trace *dst, const trace *src, ts_err *e);

/* Total responses and response tokens. */
size_t trace_n_responses(const trace *t);
int64_t trace_n_tokens(const trace *t);

/* Readers.  Format is chosen from the content: JSONL (a line starting with
 * '{'), plain CSV (header step,prompt_id,prompt_tokens,response_tokens), or a
 * Vidur request CSV (header with num_prefill_tokens,num_decode_tokens; each
 * request becomes a prompt with one response, step 0).  Each reads its input
 * once, front to back, so a pipe, a FIFO or "-" (stdin) loads whole; lines
 * are at most TS_LINE_MAX bytes and hold no NUL byte (common/lines.h).  A
 * JSONL line that is not JSON is reported with jansson's column and reason,
 * naming a field only when the error lies in its value.  Returns 0 and sets
 * *out, or -1 with the file, line and field of the first bad record. */
int trace_load(const char *path, trace **out, ts_err *e);
/* trace_load, or, when path is a directory, every *.jsonl / *.csv in it in
 * name order as one trace, its reward-timings files (by name or content)
 * giving the steps' recorded reward times (traces/trace_dir.c).  Returns 0
 * and sets *out, or -1 with the file, line and field at fault. */
int trace_load_path(const char *path, trace **out, ts_err *e);
/* One file as trace_load_path reads a directory's: a reward-timings file
 * (reward_timings*.jsonl, or a first record with reward_time_s) gives a
 * trace of reward records only, any other file trace_load's trace.  Returns
 * 0 and sets *out, or -1. */
int trace_load_part(const char *path, trace **out, ts_err *e);
/* trace_load, except that a JSONL input whose first record has a
 * "reward_time_s" field is read as reward timings (traces/reward.h): *out
 * then holds no prompts, only its reward records.  name_step is the step
 * the file's name gives (-1: none), passed to the reward reader.  (Plain
 * trace_load refuses such a file, naming the field.) */
int trace_load_any(const char *path, int32_t name_step, trace **out, ts_err *e);
int trace_load_jsonl(const char *path, trace **out, ts_err *e);
int trace_load_csv(const char *path, trace **out, ts_err *e);
int trace_load_vidur(const char *path, trace **out, ts_err *e);

/* Writes the plain CSV format atomically (temporary file + rename).  Every
 * response becomes one row; dp_rank is written as a fifth column when any
 * prompt has one.  Returns 0 or -1. */
int trace_write_csv(const trace *t, const char *path, ts_err *e);

/* Writes a multi-turn trace as the multi-turn JSONL trace_load reads
 * (traces/trace_turns_write.c), atomically: one trajectory a line, its
 * prompt's group consecutive (prompt_group_id = prompt_id); a turn followed
 * by several calls is written as one call carrying their summed latency and
 * appended tokens (it reads back the same).  Returns 0, or -1 on a trace
 * without turns, an empty trace or a write error. */
int trace_write_turns_jsonl(const trace *t, const char *path, ts_err *e);

/* A new trace holding only the prompts of one step (step < 0: the first step
 * present) and that step's recorded reward times.  Returns NULL with a
 * message when the step is absent. */
trace *trace_select_step(const trace *t, int32_t step, ts_err *e);

/* Statistics over all response lengths of a trace. */
typedef struct trace_stats {
    int64_t steps;        /* distinct steps */
    int64_t prompts;
    int64_t responses;
    int64_t tokens;       /* sum of response lengths */
    double mean;          /* tokens */
    double p50, p90, p99; /* tokens, linear interpolation between order statistics */
    int64_t max;          /* tokens */
    double max_over_p50;
    double prompt_mean;   /* mean prompt length, tokens */
    int64_t at_max;       /* responses exactly max tokens long */
    double at_max_fraction; /* at_max / responses */
    int capped;           /* 1: the trace looks truncated at max (TRACE_CAPPED_*) */
} trace_stats;

/* A trace looks truncated at its maximum length (a generation cap) when at
 * least TRACE_CAPPED_MIN responses, and at least TRACE_CAPPED_FRACTION of
 * them, are exactly that long: natural lengths rarely tie at the top. */
#define TRACE_CAPPED_MIN 5
#define TRACE_CAPPED_FRACTION 0.01

/* Fills *s.  Returns 0, or -1 on allocation failure or an empty trace. */
int trace_stats_compute(const trace *t, trace_stats *s, ts_err *e);

/* Statistics over the turns of a multi-turn trace (all zero for a
 * single-turn one). */
typedef struct trace_turn_stats {
    int64_t trajectories;   /* responses with turns */
    int64_t turns;
    int32_t max_turns;      /* of one trajectory */
    double mean_turns;      /* turns per trajectory */
    int64_t tool_calls;     /* every call (several may follow one turn) */
    int64_t tool_turns;     /* turns followed by at least one call */
    double tool_s;          /* their summed latency, s */
    double tool_mean_s, tool_p50_s, tool_p99_s, tool_max_s; /* per tool turn, s */
    int64_t prompt_tokens;  /* sum over turns of the context each starts from */
    int64_t cached_tokens;  /* of them, recorded prefix-cache hits */
    double cached_fraction; /* cached_tokens / prompt_tokens */
    int64_t gen_tokens;     /* generated over all turns */
    int64_t append_tokens;  /* appended by tool results */
    int64_t engine_turns;   /* turns with a recorded engine latency */
    double engine_mean_s;   /* their mean engine latency, s */
} trace_turn_stats;

/* Fills *s (traces/trace_turns.c).  Returns 0, or -1 on allocation failure. */
int trace_turn_stats_compute(const trace *t, trace_turn_stats *s, ts_err *e);

/* What a response cap of cap tokens (0: none) cuts from t: the responses
 * longer than cap into *responses, the tokens beyond it into *tokens.
 * Cannot fail. */
void trace_truncation(const trace *t, int32_t cap, int64_t *responses, int64_t *tokens);

#endif
