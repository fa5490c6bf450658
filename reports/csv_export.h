/*
 * Plain CSV exports of a run for spreadsheets, pandas and R:
 * DIR/responses.csv (one row per response) and DIR/phases.csv (one row per
 * RL step and phase).  report_write() calls both.
 */
#ifndef TS_CSV_EXPORT_H
#define TS_CSV_EXPORT_H

#include "common/err.h"
#include "results/result.h"

/* Writes r's responses to path, atomically: the header
 *   response,replica,prompt_tokens,length_tokens,finish_s
 * then one row per response in the record's order (response: its index
 * there, from 0; replica: the rollout replica, a TP group, that served it;
 * finish_s: seconds from the start of its step's rollout).  The record
 * keeps neither the prompt a response answers nor its start time, so
 * neither is a column.  A run without responses gets the header alone.
 * Returns 0, or -1 naming path (cannot be written). */
int csv_write_responses(const run_record *r, const char *path, ts_err *e);

/* Writes r's per-phase totals to path, atomically: the header
 *   step,phase,start_s,end_s,busy_gpu_s,idle_gpu_s,train_gpu_s
 * then, per RL step (1, 2, ...; a run of one step is step 1) and per phase
 * in order (sync, rollout, reward, old_logp, ref, update) that has an
 * interval in that step, the phase's first start and last end (s from the
 * start of the run) and the GPU-seconds its intervals spent busy, idle and
 * training the drafter.  An interval belongs to the latest step that starts
 * at or before it (r->step_t0), so the rows' GPU-seconds add up to the
 * whole timeline's.  phase is the name (tl_phase_name), never the integer.
 * Returns 0, or -1 naming path (cannot be written), an interval whose
 * phase or state is out of range, or a step that starts before the one
 * before it. */
int csv_write_phases(const run_record *r, const char *path, ts_err *e);

#endif
