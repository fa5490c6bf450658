/*
 * Shared machinery of the policies that carry prompts across RL steps
 * (partial, tailbatch, async): a prompt stream, the groups in flight with
 * each response's progress, rollout segments that stop once enough groups
 * are complete, and the accounting of what trains how stale.  Private to
 * sim/policy_*.c.
 */
#ifndef TS_POLICY_CARRY_H
#define TS_POLICY_CARRY_H

#include "sim/policy.h"

typedef struct carry_group {
    const trace_prompt *p; /* the prompt and its trace lengths (owned by the step traces) */
    int32_t *gen;          /* tokens each response has, n_resp entries */
    int32_t *first;        /* step of each response's first token (-1: none yet) */
    int launched;          /* step it was launched at */
    int active;            /* 1: runs in the next segment */
    int must;              /* 1: the next segment waits for it to complete */
    int deferred;          /* policy's mark (tailbatch: waits for a long round) */
    int done_step;         /* step it completed in (-1: not complete) */
    double done_at;        /* when, s from the start of that step's rollout */
} carry_group;

typedef struct carry_state {
    trace *const *steps;   /* the stream: steps[0]'s prompts, steps[1]'s, ...,
                            * then steps[0]'s again (same length distribution) */
    int n_steps;
    int max_response;      /* cap applied to trace lengths (0: none) */
    int lag;               /* a token generated at step j comes from policy version
                            * max(0, j - lag); a sample trained at step k is
                            * k - that version stale */
    size_t next;           /* stream position (prompts launched so far) */
    carry_group *g;        /* groups in flight, launch order */
    size_t ng, cap;
    multistep_result *res; /* where the accounting goes */
    int64_t trained_resp;  /* responses trained */
    double stale_sum;      /* their staleness, summed */
    int64_t offpol;        /* those with staleness > 0 */
} carry_state;

/* Starts an empty state on the stream of steps.  Cannot fail. */
void carry_init(carry_state *cs, trace *const *steps, int n, int max_response, int lag,
                multistep_result *res);
/* Frees the groups in flight (counting them pending in res).  Cannot fail. */
void carry_finish(carry_state *cs);

/* Launches the next `count` prompts of the stream at step k (active).
 * Returns 0, or -1 on allocation failure. */
int carry_launch(carry_state *cs, int k, int count, ts_err *e);

/* Rolls out, at step k under scenario s, the unfinished responses of the
 * active groups, each resuming from its progress, until `stop` groups in
 * flight are complete (those complete already count; at least one more) and
 * every `must` group too (stop 0: to the end).  Updates each response's
 * progress.  Fills res (rollout only) and the timeline into rec (rollout
 * phase from 0).  Returns 0 or -1. */
int carry_rollout(carry_state *cs, const scenario *s, const hw_desc *hw, const llm_desc *m,
                  int k, int stop, rlstep_result *res, run_record *rec, ts_err *e);

/* Removes complete groups from flight into *out (a new trace of their
 * prompts, trace lengths, for training), counting each response trained at
 * step k with its staleness: every `must` one, then the earliest completed
 * up to `limit` groups in all (limit 0: every complete group); the other
 * complete groups stay in flight for a later batch.  Returns 0, or -1 on
 * allocation failure. */
int carry_take_done(carry_state *cs, int k, int limit, trace **out, ts_err *e);

/* Throws away group i's progress: it will start over. */
void carry_restart(carry_state *cs, size_t i);

/* A colocated step on all of s->gpus: weight sync, carry_rollout, then (when
 * full) the training phases on the groups carry_take_done(limit) takes.  Fills res like
 * rlstep_run (timeline from 0 into rec).  Returns 0 or -1. */
int carry_step(carry_state *cs, const scenario *s, const hw_desc *hw, const llm_desc *m, int k,
               int stop, int limit, int full, rlstep_result *res, run_record *rec, ts_err *e);

/* Sets the off-policy fraction and mean staleness of cs->res.  Cannot fail. */
void carry_summarize(carry_state *cs);

#endif
