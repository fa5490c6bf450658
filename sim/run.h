/*
 * Run setup and multi-step metrics (sim/run.c): what every command that runs
 * RL steps shares, in the library so that the sweep runner, the bootstrap and
 * the paper experiments need no CLI file.
 */
#ifndef TS_RUN_H
#define TS_RUN_H

#include <jansson.h>

#include "sim/policy/policy.h"

/* Loads a scenario by name, applies "sec.key=val" overrides and the seed,
 * validates it, loads its hardware and model and checks the TP against the
 * model's heads (scenario_check_model; whether the model fits is the
 * rollout's check, scenario_check_fit).  Returns 0 or -1. */
int run_setup(const char *name, const char *const *sets, int n_sets, int have_seed, uint64_t seed,
              scenario *s, hw_desc *hw, llm_desc *m, ts_err *e);

/* Appends to rec every per-step metric averaged over the steps of r; when
 * per_step is not NULL, sets it to a new JSON object of per-step arrays
 * (json_decref it).  Returns 0, or -1 on allocation failure. */
int run_multistep_metrics(run_record *rec, const multistep_result *r, trace *const *steps,
                          int full, json_t **per_step);

#endif
