/*
 * The per-GPU timeline of a run as a Chrome / Perfetto trace (the Trace
 * Event Format's JSON object form), for ui.perfetto.dev and chrome://tracing:
 * one process, one track (thread) per GPU, every timeline interval a slice
 * named after its phase, every later RL step's start a global marker.
 * report_write() calls it for DIR/timeline.json.
 */
#ifndef TS_PERFETTO_H
#define TS_PERFETTO_H

#include "common/err.h"
#include "results/result.h"

/* Writes r's timeline to path, atomically (ts_atomic_*):
 *   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}
 * with, in this order, a process_name metadata event (pid 1: "tailsim run
 * ID: COMMAND POLICY (SCENARIO)"); per GPU that has an interval, a
 * thread_name ("GPU g") and a thread_sort_index (g) metadata event on tid
 * g + 1; per interval, sorted by GPU, start, then end (a zero-length slice
 * before the one starting where it ends),
 * a complete event "ph":"X" named after the phase (tl_phase_name), "cat" the
 * state (tl_state_name), "ts" and "dur" in whole microseconds (both ends
 * rounded, so that adjacent intervals stay adjacent), "args" {"gpu",
 * "phase", "state"}; then, for a run of several RL steps, an instant event
 * "ph":"i", "s":"g" named "step k" at each step's start.  otherData holds the
 * run's identity (strings with control characters as spaces, and any byte
 * that is not valid UTF-8 as '?').  A run without a timeline gets the
 * process metadata alone.
 * Returns 0, or -1 naming path (cannot be written) or the interval (a phase
 * or state out of range, a time that is not finite or negative, an end
 * before its start); nothing is left at path on failure. */
int perfetto_write(const run_record *r, const char *path, ts_err *e);

#endif
