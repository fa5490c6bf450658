/*
 * From a scenario's [cluster], [model] and [dcp] sections to what the DCP
 * planners need: hardware, the training cost model, the bucketized batch
 * trace and the planner configuration.  Used by `tailsim dcp`, its tests and
 * its benchmark so that all three read a scenario the same way.
 */
#ifndef TS_DCP_SETUP_H
#define TS_DCP_SETUP_H

#include "sim/dcp/dcp.h"
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

/* The GPU counts of the imbalance-vs-GPUs study (`tailsim dcp --scale`, the
 * paper's DCP figure). */
#define DCP_SCALE_N 5
extern const int dcp_scale_gpus[DCP_SCALE_N];

/* Plans and simulates strategies st[0..ns) on d's trace at each GPU count of
 * dcp_scale_gpus[] (one pass, no timeline): imb[k][i] the simulated
 * imbalance, imbp[k][i] VideoSys' sampler estimate (dcp_result's
 * imbalance and imbalance_plan); NAN for the bound.  Returns 0, or -1 with
 * the error prefixed by the GPU count. */
int dcp_setup_scale(const dcp_setup *d, const dcp_strategy *st, int ns,
                    double imb[DCP_SCALE_N][DCP_MAX_STRATEGIES],
                    double imbp[DCP_SCALE_N][DCP_MAX_STRATEGIES], ts_err *e);

/* Adds one strategy's result to rec as "<strategy>.<metric>" (steps, step_s,
 * time_s, tokens_per_s, speedup, imbalance, imbalance_plan, idle_fraction,
 * peak_mem_gb, feasible, mean_gas).  Returns 0, or non-zero on allocation
 * failure (like run_add_metric). */
int dcp_result_add_metrics(run_record *rec, const dcp_result *r, double speedup);

/* Adds imb (from dcp_setup_scale) to rec as "g<N>.<strategy>.imbalance",
 * GPU count outer, strategies in order, NAN entries left out.  Returns 0, or
 * non-zero on allocation failure (like run_add_metric). */
int dcp_scale_add_metrics(run_record *rec, const dcp_strategy *st, int ns,
                          double imb[DCP_SCALE_N][DCP_MAX_STRATEGIES]);

/* Frees the trace; NULL and a zeroed setup are no-ops. */
void dcp_setup_free(dcp_setup *d);

#endif
