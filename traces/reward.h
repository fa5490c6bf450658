/*
 * Recorded reward times: the reward-timings logs that PolyTrace's rllm
 * collector writes beside its response lengths (reward_timings_step_N.jsonl
 * next to packed_lengths_step_N.jsonl), one JSON object per rollout rank
 * and step:
 *
 *   {"step": 0, "rank": 4, "tp_rank": 0, "dp_rank": 1, "batch_size": 64,
 *    "reward_time_s": 87.06, "response_sum": 703193, "response_mean": ...,
 *    "response_max": 16000, "validate": false}
 *
 * Read: reward_time_s (required; seconds, a number in 0..REWARD_MAX_S),
 * step (required unless the file's name gives it; when both, they must
 * agree), dp_rank (else rank, else 0: the rank that measured it) and
 * validate (a validation record is skipped, as PolyTrace's own replay
 * does).  Other fields are ignored.  A (step, rank) may be recorded once.
 * The records live in the trace they belong to (trace.reward,
 * traces/trace.h): trace_select_step() keeps a step's, trace_append() merges
 * them.  What the simulator makes of them is sim/rlstep.c's business.
 */
#ifndef TS_REWARD_H
#define TS_REWARD_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/lines.h"
#include "traces/trace.h"

#define REWARD_MAX_S 86400.0 /* the longest reward time accepted, s (a day) */

/* Whether a file name is a reward-timings name ("reward_timings*.jsonl").
 * Returns 1 and sets *step to the N of "reward_timings_step_N.jsonl" (-1
 * when the name gives no step), or 0.  Cannot fail. */
int reward_name_step(const char *name, int32_t *step);

/* Whether JSONL line buf (len bytes) is a reward-timings record: a JSON
 * object with a "reward_time_s" field.  Cannot fail (a line that is not
 * JSON is not one). */
int reward_line_is_record(const char *buf, size_t len);

/* Reads reward-timing records from the open reader r (its current line
 * first when `pending`, then every further line; blank lines are skipped)
 * and appends them to t->reward.  name_step: the step the file's name gives
 * (-1: none).  All or nothing: returns 0, or -1 with "file:line: field 'x':
 * problem" and t as it was (a read error, a line that is not one JSON
 * object, a bad field, a (step, rank) twice, no record at all).  Does not
 * close r. */
int reward_read(ts_lines *r, int pending, int32_t name_step, trace *t, ts_err *e);

/* Opens path ("-": standard input) and reward_read()s it into t.  Returns 0
 * or -1 as reward_read. */
int reward_load(const char *path, int32_t name_step, trace *t, ts_err *e);

/* Replaces dst's reward records by a copy of src's (none when src has
 * none).  Returns 0, or -1 on allocation failure with dst as it was. */
int reward_copy(trace *dst, const trace *src, ts_err *e);

/* The spread of t's recorded reward times over ranks (a step's, after
 * trace_select_step()). */
typedef struct reward_summary {
    int ranks;       /* records (ranks), 0 when t has none */
    double min_s;    /* the fastest rank's time, s */
    double median_s; /* median over ranks (mean of the middle two when even), s */
    double max_s;    /* the slowest rank's time, s: the step waits for it */
} reward_summary;

/* Fills *out from t's records (all zero when there are none).  Returns the
 * number of ranks, or -1 on allocation failure. */
int reward_summarize(const trace *t, reward_summary *out, ts_err *e);

/* Looks for a record of t from index `from` on whose step has no prompt in
 * t: returns 1 and sets *bad to the first one's index, 0 when there is none,
 * or -1 on allocation failure.  O((n + r) log n). */
int reward_orphan(const trace *t, size_t from, size_t *bad);

/* The spread over steps of t's per-step reward phase (each step's slowest
 * rank): out->ranks counts the steps with records; min/median/max over
 * them.  Returns that count, or -1 on allocation failure. */
int reward_steps(const trace *t, reward_summary *out, ts_err *e);

/* Looks for a (step, rank) recorded twice in a[0..n): returns 1 and sets
 * *first and *again to the two indices (again the later one), else 0.
 * Returns -1 on allocation failure.  O(n log n). */
int reward_find_twice(const trace_reward *a, size_t n, size_t *first, size_t *again);

#endif
