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

/* The hash of n trace steps as simulated, into buf (32 bytes):
 * "fnv1a64:" and 16 hex digits of the 64-bit FNV-1a hash of their numbers
 * (per step its prompt count; per prompt its step, id, dp_rank, prompt
 * tokens, group size and response lengths; per recorded reward time its
 * step, rank and the double's bits; integers as 4 or 8 little-endian
 * bytes).  The numbers, not the file's bytes: a reader reads its input once
 * (standard input, a directory of step files), and the numbers are what
 * decides the results; a file reformatted with the same numbers hashes the
 * same.  Cannot fail. */
void run_trace_hash(trace *const *steps, int n, char *buf);

/* Records in rec what the run ran on (run_set_source()): the effective
 * scenario s as INI (scenario_to_ini()), the n_sets overrides as a JSON
 * array, the steps, the trace's path (trace_override as given, else the
 * scenario's trace.file resolved, else "" for a generated trace) and
 * run_trace_hash() of the n_tr steps (none: no hash).  Returns 0, or -1
 * with e filled (a scenario value INI cannot hold, out of memory). */
int run_record_source(run_record *rec, const scenario *s, const char *const *sets, int n_sets,
                      int steps, const char *trace_override, trace *const *tr, int n_tr,
                      ts_err *e);

#endif
