/*
 * Helpers shared by the run-type commands (cli/cmd_run.c: rollout, rlstep;
 * cli/cmd_compare.c: compare).  Drivers only: they may print.
 */
#ifndef TS_CMD_RUN_H
#define TS_CMD_RUN_H

#include <jansson.h>

#include "sim/run.h"

/* Run with fewer than CARRY_FAIR_STEPS steps, the policies of the
 * comma-separated list (NULL: every registered one) that carry work across
 * steps (a driver of their own, not lossless: partial, tailbatch, async and
 * their +tlt) are misstated: one step of partial or tailbatch leaves its long
 * responses for later, one of async has nothing to overlap.  Prints a note
 * naming them on stderr, as "<cmd>: note: ...", hint (or NULL) appended to
 * its advice.  Cannot fail. */
#define CARRY_FAIR_STEPS 5
void run_note_carry(const char *cmd, const char *policies, int steps, const char *hint);

/* Notes on stderr, as "<cmd>: note: ...", how many responses and tokens of
 * the n steps rollout.max_response cuts (nothing when it cuts none).
 * Cannot fail. */
void run_note_truncation(const char *cmd, const scenario *s, trace *const *steps, int n);

/* The name the messages give the trace of a run: the --trace override
 * (NULL: none), else the scenario's trace.file resolved, else "the generated
 * trace", written into buf (n bytes).  Returns buf.  Cannot fail. */
const char *run_trace_name(const scenario *s, const char *override, char *buf, size_t n);

/* policy_check_placement() of the loaded steps under each policy of list
 * (np entries; NULL entries: the scenario's own keys), the error naming the
 * trace (run_trace_name).  Returns 0, or -1 with e set. */
int run_check_placement(const scenario *s, const char *override, const policy *const *list,
                        int np, trace *const *steps, int n, ts_err *e);

#endif
