/*
 * From a scenario's [cluster], [model] and [dcp] sections to what the DCP
 * planners need: hardware, the training cost model, the bucketized batch
 * trace and the planner configuration.  Used by `tailsim dcp`, its tests and
 * its benchmark so that all three read a scenario the same way.
 */
#ifndef TS_DCP_SETUP_H
#define TS_DCP_SETUP_H

#include "sim/dcp.h"
#include "sim/scenario.h"

typedef struct dcp_setup {
    hw_desc hw;          /* gpus_per_node from the scenario when it sets one */
    llm_desc m;
    tc_model tm;
    btrace *bt;          /* owned, bucketized */
    dcp_cfg cfg;
    dcp_strategy strat[DCP_MAX_STRATEGIES]; /* the scenario's default list */
    int n_strat;
    char trace_desc[1400]; /* "video-mix: 2000 videos x image_mix 1 (seed 1)" or the file */
} dcp_setup;

/* Loads hardware and model, reads or generates the batch trace (trace_file
 * overrides dcp.file; NULL: the scenario's), bucketizes it and fills the
 * configuration.  Checks that a 2D (video) trace goes with a video model and
 * a 1D trace with a decoder.  Returns 0, or -1 with a message naming the
 * scenario file and key or the trace's file, line and field; on failure
 * nothing is left to free. */
int dcp_setup_load(const scenario *s, const char *trace_file, dcp_setup *d, ts_err *e);

/* The planner configuration of a scenario's [dcp] keys, for cluster.gpus
 * GPUs (also used by the RL step's training phases, sim/rlstep_train.h).
 * Returns 0, or -1 naming the scenario file and key (SP sizes that do not
 * parse, a bucket SP size not among them). */
int dcp_setup_cfg(const scenario *s, dcp_cfg *cfg, ts_err *e);

/* Frees the trace; NULL and a zeroed setup are no-ops. */
void dcp_setup_free(dcp_setup *d);

#endif
