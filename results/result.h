/*
 * A finished run as the store keeps it and the report reads it: identity
 * (command, scenario, seed, calibration, version), scalar metrics in order,
 * the per-GPU timeline, and each response's outcome.  Built by the command
 * that ran the simulation, saved by store_save_run(), read back by
 * store_load_run().  Owns all its arrays; free with run_record_free().
 */
#ifndef TS_RESULT_H
#define TS_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum tl_state { TL_BUSY = 0, TL_IDLE = 1, TL_TRAIN = 2 };
enum tl_phase {
    PH_SYNC = 0, PH_ROLLOUT, PH_REWARD, PH_OLD_LOGP, PH_REF, PH_UPDATE, PH_COUNT
};
extern const char *const tl_state_name[3];  /* "busy", "idle", "train" */
extern const char *const tl_phase_name[PH_COUNT];

typedef struct tl_interval {
    int32_t gpu;     /* global GPU index */
    int32_t phase;   /* enum tl_phase */
    int32_t state;   /* enum tl_state */
    double t0, t1;   /* s from the start of the step */
} tl_interval;

/* What a trajectory of a multi-turn rollout was doing (issue 20): waiting
 * in its replica's queue, generating (admitted: prefill and decode, until
 * its turn's last token), waiting for a tool slot, or in its tool call. */
enum tj_kind { TJ_QUEUE = 0, TJ_GEN, TJ_TOOL_QUEUE, TJ_TOOL, TJ_COUNT };
extern const char *const tj_kind_name[TJ_COUNT]; /* "queue", "generate", "tool_queue", "tool" */

/* An interval of one trajectory.  Only a few trajectories are kept: the
 * ones that finished last (rank 0 is the critical path), see
 * ROLLOUT_TRAJ_TRACKS in sim/rollout.h. */
typedef struct traj_interval {
    int32_t rank;    /* 0: finished last (the critical path), 1: next, ... */
    int32_t resp;    /* response index in the trace */
    int32_t turn;    /* 0-based */
    int32_t kind;    /* enum tj_kind */
    double t0, t1;   /* s from the start of the run */
} traj_interval;

typedef struct resp_outcome {
    int32_t replica;       /* rollout replica that served it */
    int32_t prompt_tokens; /* tokens */
    int32_t length;        /* response tokens */
    double finish_s;       /* s from the start of the rollout */
} resp_outcome;

typedef struct metric {
    char key[48];
    double value;
} metric;

typedef struct run_record {
    int64_t id;             /* set by the store */
    char command[32];       /* "rollout", "rlstep", ... */
    char policy[32];        /* the policy that ran ("" when none: the scenario's own
                             * [spec] keys, or a command without one) */
    char scenario[256];     /* scenario name */
    char calibration[128];
    char version[32];
    char created[32];       /* ISO-8601 UTC, set by the store */
    uint64_t seed;
    int32_t gpus, replicas, tp;
    metric *metrics; size_t n_metrics, cap_metrics;
    tl_interval *tl; size_t n_tl, cap_tl;
    resp_outcome *resp; size_t n_resp, cap_resp;
    /* Multi-turn runs: the per-trajectory intervals of the trajectories that
     * finished last (schema version 8; empty otherwise). */
    traj_interval *tj; size_t n_tj, cap_tj;
    /* Start of each RL step on the timeline, s, for a run of several
     * (policy_run fills it; empty for one step).  The report draws the
     * first step's phases and a line at every later step's start; the
     * store keeps them (table `steps`). */
    double *step_t0; size_t n_steps, cap_steps;
    /* What the run ran on, so that stored runs can be told apart and rerun
     * (schema version 6; unknown for older runs).  Set by run_set_source(). */
    char *scenario_ini;     /* the effective scenario as INI text (every key, after the
                             * file and the overrides), owned; NULL: unknown */
    char *overrides;        /* the --set overrides as given, a JSON array of strings,
                             * owned; NULL: unknown */
    int32_t steps;          /* RL steps simulated (--steps), 0: unknown */
    char trace_path[1024];  /* the trace file (--trace as given, else trace.file resolved);
                             * "": a generated trace, or unknown */
    char trace_hash[32];    /* "fnv1a64:" and 16 hex digits over the trace's numbers as
                             * simulated (run_trace_hash()); "": unknown */
} run_record;

/* Returns a zeroed record, or NULL on allocation failure. */
run_record *run_record_new(void);
void run_record_free(run_record *r);
/* Sets r's identity: command, scenario and calibration (cut to their fields'
 * sizes), the version (TS_VERSION), seed and the GPUs, replicas and TP of
 * the run.  Cannot fail. */
void run_set_identity(run_record *r, const char *command, const char *scenario,
                      const char *calibration, uint64_t seed, int32_t gpus, int32_t replicas,
                      int32_t tp);
/* Sets r->policy (cut to the field; NULL: ""). Cannot fail. */
void run_set_policy(run_record *r, const char *policy);
/* Sets what r ran on (see the fields): copies ini and overrides (NULL
 * keeps the field NULL), cuts trace_path and trace_hash (NULL: "") to their
 * fields.  Returns 0, or -1 on allocation failure (r unchanged). */
int run_set_source(run_record *r, const char *ini, const char *overrides, int32_t steps,
                   const char *trace_path, const char *trace_hash);
/* Appenders: return 0, or -1 on allocation failure. */
int run_add_metric(run_record *r, const char *key, double value);
int run_add_interval(run_record *r, int32_t gpu, int32_t phase, int32_t state,
                     double t0, double t1);
int run_add_response(run_record *r, int32_t replica, int32_t prompt_tokens,
                     int32_t length, double finish_s);
int run_add_step(run_record *r, double t0);
int run_add_traj(run_record *r, const traj_interval *iv);
/* Looks a metric up; returns 0 and sets *v, or -1 when absent. */
int run_get_metric(const run_record *r, const char *key, double *v);

#endif
