/*
 * Helpers shared by the run-type commands (sim/cmd_run.c: rollout, rlstep;
 * sim/cmd_compare.c: compare).  Drivers only: they may print.
 */
#ifndef TS_CMD_RUN_H
#define TS_CMD_RUN_H

#include <jansson.h>

#include "sim/policy.h"

/* Loads a scenario by name, applies "sec.key=val" overrides and the seed,
 * validates it and loads its hardware and model.  Returns 0 or -1. */
int run_setup(const char *name, const char *const *sets, int n_sets, int have_seed, uint64_t seed,
              scenario *s, hw_desc *hw, llm_desc *m, ts_err *e);

/* Appends to rec every per-step metric averaged over the steps of r; when
 * per_step is not NULL, sets it to a new JSON object of per-step arrays
 * (json_decref it).  Returns 0, or -1 on allocation failure. */
int run_multistep_metrics(run_record *rec, const multistep_result *r, trace *const *steps,
                          int full, json_t **per_step);

/* Run with fewer than CARRY_FAIR_STEPS steps, the policies of the
 * comma-separated list (NULL: every registered one) that carry work across
 * steps (a driver of their own, not lossless: partial, tailbatch, async and
 * their +tlt) are misstated: one step of partial or tailbatch leaves its long
 * responses for later, one of async has nothing to overlap.  Prints a note
 * naming them on stderr, as "<cmd>: note: ...", hint (or NULL) appended to
 * its advice.  Cannot fail. */
#define CARRY_FAIR_STEPS 5
void run_note_carry(const char *cmd, const char *policies, int steps, const char *hint);

#endif
