/*
 * `tailsim memory SCENARIO [--gpus LIST] [--trace FILE] [--seed S] [--set SEC.KEY=VAL]
 * [--json]`: what one GPU holds, before anything is simulated.  The rollout
 * side: the replica's weights, the activation reserve and the KV cache that
 * rollout.mem_util leaves (models/memory.c), with the replica's capacity in
 * tokens.  The training side: the actor update's peak term by term, the same
 * figure the plain and VeRL trainers check against train.mem_cap
 * (sim/rlstep_mem.c), from the largest micro-batch the scenario's first step
 * makes (its longest sequence against the token budget), and with
 * train.offload the host memory the states take per node; with --gpus, the
 * same update at each GPU count.  A configuration that does not fit is
 * reported, not refused: the exit status is 0 whenever the report was
 * printed; bad input exits 1, bad usage 2.  Under a DCP train.strategy the
 * step's responses are planned by that strategy (sim/rlstep_train.c) and the
 * plan's largest micro-batch memory, states included, is reported against
 * dcp.mem_cap.
 *
 * Phases: memory_parse (the command line), memory_run (the scenario, its
 * first step and, under DCP, the plan's peak; prints nothing), then
 * memory_emit_json or memory_emit_text.  Each side (rollout, update, update
 * by GPU count) is worked out once and then written as JSON or as text.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "models/memory.h"
#include "cli/cmd.h"
#include "cli/cmd_run.h"
#include "cli/opts.h"
#include "sim/policy/policy.h"
#include "sim/rlstep.h"
#include "sim/rlstep_mem.h"
#include "sim/rlstep_train.h"
#include "sim/scenario.h"

#define MEMORY_MAX_SETS 32 /* --set options */
#define MEMORY_MAX_GPUS 64 /* --gpus values */

typedef struct memory_opts {
    opts_common co;             /* --set, --trace, --seed, --json */
    const char *scenario;
    int gpus[MEMORY_MAX_GPUS];  /* --gpus, ng of them */
    int ng;
} memory_opts;

/* The scenario and what sizes the update, for the emitters. */
typedef struct memory_out {
    scenario s;
    hw_desc hw;
    llm_desc m;
    trace *t;                   /* the first step (or --trace) */
    double longest;             /* its longest sequence, tokens */
    int dcp;                    /* 1: a DCP train.strategy, planned into dr */
    dcp_result dr;
} memory_out;

/* The rollout side, per GPU of a replica. */
typedef struct memory_rollout {
    double w, reserve, budget;  /* weights, reserve, rollout.mem_util's share: bytes */
    double kv;                  /* what the KV cache gets, bytes (negative: nothing) */
    double per_tok;             /* KV bytes a token per GPU */
    double tokens;              /* the replica's KV capacity, tokens */
} memory_rollout;

/* The actor update, per GPU. */
typedef struct memory_train {
    const char *trainer;        /* "verl" or "plain" */
    double tokens;              /* tokens per GPU of the largest micro-batch */
    double cap;                 /* train.mem_cap of the HBM, bytes */
    train_mem tm;               /* the peak term by term, and the shard group */
    int fits, host_fits;        /* under cap; states within host memory */
} memory_train;

/* The update at one GPU count of --gpus. */
typedef struct memory_gpus {
    int gpus;
    int f;                      /* the shard group; -1: cannot run there (why in e) */
    ts_err e;
    train_mem tm;               /* when f > 0 */
    int fits;
} memory_gpus;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim memory SCENARIO [--gpus LIST] [--trace FILE] [--set SEC.KEY=VAL]\n"
            "                      [--seed S] [--json]\n\n"
            "What one GPU of SCENARIO holds: the rollout replica's weights, reserve and KV\n"
            "cache (rollout.mem_util), and the actor update's peak term by term (model states,\n"
            "gathered weights, kept activations, one layer, logits) against train.mem_cap,\n"
            "with train.offload's host memory per node (under a DCP train.strategy, its\n"
            "plan's largest micro-batch against dcp.mem_cap).  Nothing is simulated; the\n"
            "micro-batches come from the scenario's first step (or --trace FILE).  A\n"
            "configuration that does not fit is reported with exit status 0.\n\n"
            "options:\n"
            "  --gpus LIST         also the actor update at each of these GPU counts, e.g.\n"
            "                      8,16,32,64 (not under a DCP train.strategy)\n"
            "  --trace FILE        the batch to size the micro-batches by (JSONL or CSV)\n"
            "  --seed S            seed of the generated trace (overrides trace.seed)\n"
            "  --set SEC.KEY=VAL   a scenario override (repeatable)\n"
            "  --json              print one JSON object\n"
            "  -h, --help          this text\n");
}

/* Parses the command line into o.  Returns -1 to go on, or the exit status
 * (0 after --help, 2 after a usage error, said on stderr). */
static int memory_parse(int argc, char **argv, memory_opts *o)
{
    static const struct option lo[] = {OPTS_LONG_TRACE,
                                       {"gpus", required_argument, 0, 'g'},
                                       OPTS_LONG_SEED,
                                       OPTS_LONG_SET,
                                       OPTS_LONG_JSON,
                                       OPTS_LONG_HELP,
                                       {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    opts_init(&o->co, "memory", MEMORY_MAX_SETS);
    int c;
    int64_t v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        int t = opts_step(&o->co, c, optarg, usage);
        if (t == OPTS_STEP_TAKEN)
            continue;
        if (t != OPTS_STEP_OTHER)
            return t;
        if (c != 'g') {
            usage(stderr);
            return 2;
        }
        char buf[512];
        snprintf(buf, sizeof buf, "%s", optarg);
        o->ng = 0;
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (o->ng == MEMORY_MAX_GPUS || ts_parse_i64(tok, 1, 1048576, &v)) {
                fprintf(stderr, "tailsim memory: --gpus '%s': expected up to 64 GPU counts "
                                "in [1, 1048576], comma-separated\n", optarg);
                return 2;
            }
            o->gpus[o->ng++] = (int)v;
        }
        if (!o->ng) {
            fprintf(stderr, "tailsim memory: --gpus '%s': no GPU count\n", optarg);
            return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    o->scenario = argv[optind];
    return -1;
}

/* The update under a DCP train.strategy: the plan of the step's responses
 * and its largest micro-batch memory per GPU (r->peak_mem_bytes, r->feasible).
 * Returns 0, or -1 with e set. */
static int dcp_peak(const scenario *s, const hw_desc *hw, const llm_desc *m, const trace *t,
                    dcp_result *r, ts_err *e)
{
    rlstep_train rt;
    if (rlstep_train_init(&rt, s, hw, m, t, e))
        return -1;
    int rc = dcp_simulate(&rt.ctx, &rt.plan, 0, r, NULL, 0, 0, e);
    rlstep_train_free(&rt);
    return rc;
}

/* Loads o's scenario and its first step into r (zeroed first; free with
 * memory_out_free() whatever this returns) and, under a DCP
 * train.strategy, plans the update.  Prints nothing.  Returns 0, or -1 with
 * e set. */
static int memory_run(const memory_opts *o, memory_out *r, ts_err *e)
{
    memset(r, 0, sizeof *r);
    if (run_setup(o->scenario, o->co.sets, o->co.n_sets, o->co.have_seed, o->co.seed, &r->s, &r->hw, &r->m, e))
        return -1;
    r->dcp = strcmp(r->s.train_strategy, "none") != 0;
    if ((!r->dcp && train_fsdp_group(&r->s, r->s.gpus, e) < 0) ||
        policy_load_steps(&r->s, o->co.trace, 1, &r->t, e))
        return -1;
    r->longest = rlstep_longest(&r->s, r->t);
    if (r->dcp && dcp_peak(&r->s, &r->hw, &r->m, r->t, &r->dr, e))
        return -1;
    return 0;
}

static void memory_out_free(memory_out *r)
{
    trace_free(r->t);
}

#define GB(x) ((x) / 1e9)

static void add_gb(json_t *o, const char *k, double bytes)
{
    json_object_set_new(o, k, json_real(GB(bytes)));
}

static void memory_rollout_eval(const memory_out *r, memory_rollout *x)
{
    const scenario *s = &r->s;
    x->w = mem_weights(&r->m, s->tp);
    x->reserve = s->reserve_gb * 1e9;
    x->budget = r->hw.hbm_bytes * s->mem_util;
    x->kv = x->budget - x->w - x->reserve;
    x->per_tok = mem_kv_per_token(&r->m, s->tp);
    x->tokens = x->kv > 0 ? x->kv / x->per_tok : 0;
}

static json_t *memory_rollout_json(const memory_out *r)
{
    const scenario *s = &r->s;
    memory_rollout x;
    memory_rollout_eval(r, &x);
    json_t *o = json_object();
    json_object_set_new(o, "tp", json_integer(s->tp));
    json_object_set_new(o, "replicas", json_integer(s->gpus / s->tp));
    json_object_set_new(o, "mem_util", json_real(s->mem_util));
    add_gb(o, "budget_gb", x.budget);
    add_gb(o, "weights_gb", x.w);
    add_gb(o, "reserve_gb", x.reserve);
    add_gb(o, "kv_gb", x.kv > 0 ? x.kv : 0);
    json_object_set_new(o, "kv_bytes_per_token", json_real(x.per_tok));
    json_object_set_new(o, "kv_tokens_per_replica", json_real(x.tokens));
    json_object_set_new(o, "fits", json_boolean(x.kv >= 1 * x.per_tok));
    return o;
}

static void memory_rollout_text(const memory_out *r)
{
    const scenario *s = &r->s;
    memory_rollout x;
    memory_rollout_eval(r, &x);
    int reps = s->gpus / s->tp;
    printf("rollout, per GPU (TP %d: %d replica%s; rollout.mem_util %.2f x %.1f GB = %.1f GB)\n",
           s->tp, reps, reps == 1 ? "" : "s", s->mem_util, GB(r->hw.hbm_bytes), GB(x.budget));
    printf("  %-20s %8.1f GB\n", "weights", GB(x.w));
    printf("  %-20s %8.1f GB  rollout.reserve_gb\n", "reserve", GB(x.reserve));
    if (x.kv >= x.per_tok)
        printf("  %-20s %8.1f GB  %.0f tokens per replica (%.0f bytes a token per GPU)\n",
               "KV cache", GB(x.kv), x.tokens, x.per_tok);
    else
        printf("  %-20s %8s     does NOT fit: the weights and reserve leave no KV cache "
               "(lower rollout.reserve_gb, raise rollout.mem_util or rollout.tp)\n",
               "KV cache", "-");
}

static void memory_train_eval(const memory_out *r, memory_train *x)
{
    const scenario *s = &r->s;
    x->trainer = s->mini_batch_prompts > 0 ? "verl" : "plain";
    x->tokens = train_mem_tokens(s, r->longest);
    x->cap = s->train_mem_cap * r->hw.hbm_bytes;
    train_mem_eval(s, &r->hw, &r->m, s->gpus, x->tokens, &x->tm);
    x->fits = x->tm.need.total <= x->cap;
    x->host_fits = x->tm.need.host <= r->hw.host_bytes;
}

static json_t *memory_train_json(const memory_out *r)
{
    memory_train x;
    memory_train_eval(r, &x);
    const mem_train *n = &x.tm.need;
    json_t *o = json_object();
    json_object_set_new(o, "trainer", json_string(x.trainer));
    json_object_set_new(o, "tokens_per_gpu", json_real(x.tokens));
    json_object_set_new(o, "fsdp_group", json_integer(x.tm.group));
    json_object_set_new(o, "mem_cap", json_real(r->s.train_mem_cap));
    add_gb(o, "cap_gb", x.cap);
    add_gb(o, "states_gb", n->states);
    add_gb(o, "gathered_gb", n->gathered);
    add_gb(o, "kept_gb", n->kept);
    add_gb(o, "layer_gb", n->layer);
    add_gb(o, "logits_gb", n->logits);
    add_gb(o, "total_gb", n->total);
    json_object_set_new(o, "offload", json_boolean(r->s.train_offload));
    add_gb(o, "host_gb_per_node", n->host);
    add_gb(o, "host_cap_gb", r->hw.host_bytes);
    json_object_set_new(o, "fits", json_boolean(x.fits && x.host_fits));
    return o;
}

static void memory_train_text(const memory_out *r)
{
    const scenario *s = &r->s;
    memory_train x;
    memory_train_eval(r, &x);
    const mem_train *n = &x.tm.need;
    int f = x.tm.group;
    printf("\nactor update, per GPU (%s trainer, %.0f tokens per GPU; train.mem_cap %.2f = "
           "%.1f GB)\n",
           s->mini_batch_prompts > 0 ? "VeRL's" : "the plain", x.tokens, s->train_mem_cap,
           GB(x.cap));
    if (s->train_offload)
        printf("  %-20s %8.1f GB  in host memory (train.offload): %.1f GB per node of %.0f%s\n",
               "model states", 0.0, GB(n->host), GB(r->hw.host_bytes),
               x.host_fits ? "" : ", does NOT fit");
    else
        printf("  %-20s %8.1f GB  fp32 parameters, gradients, Adam m and v over %d GPUs%s\n",
               "model states", GB(n->states), f, f < s->gpus ? " (train.fsdp_size)" : "");
    printf("  %-20s %8.1f GB\n", "gathered weights", GB(n->gathered));
    printf("  %-20s %8.1f GB%s\n", "kept activations", GB(n->kept),
           s->recompute ? "" : "  (train.recompute off: every layer keeps its activations)");
    printf("  %-20s %8.1f GB\n", "one layer", GB(n->layer));
    printf("  %-20s %8.1f GB\n", "logits", GB(n->logits));
    if (x.fits) {
        printf("  %-20s %8.1f GB  fits (%.1f GB to spare)\n", "total", GB(n->total),
               GB(x.cap - n->total));
    } else {
        char hint[192];
        train_mem_hint(s, x.tokens, hint, sizeof hint);
        printf("  %-20s %8.1f GB  does NOT fit: %.1f GB over; %s\n", "total", GB(n->total),
               GB(n->total - x.cap), hint);
    }
}

/* The update under a DCP train.strategy: its plan's largest micro-batch. */
static json_t *memory_dcp_json(const memory_out *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "trainer", json_string(r->s.train_strategy));
    json_object_set_new(o, "mem_cap", json_real(r->s.dcp.mem_cap));
    add_gb(o, "cap_gb", r->s.dcp.mem_cap * r->hw.hbm_bytes);
    add_gb(o, "total_gb", r->dr.peak_mem_bytes);
    json_object_set_new(o, "fits", json_boolean(r->dr.feasible));
    return o;
}

static void memory_dcp_text(const memory_out *r)
{
    printf("\nactor update, per GPU (planned by train.strategy %s; dcp.mem_cap %.2f = %.1f GB)\n",
           r->s.train_strategy, r->s.dcp.mem_cap, GB(r->s.dcp.mem_cap * r->hw.hbm_bytes));
    printf("  %-20s %8.1f GB  %s\n", "largest micro-batch", GB(r->dr.peak_mem_bytes),
           r->dr.feasible ? "fits (states included; the plan sized it under the cap)"
                          : "does NOT fit under dcp.mem_cap");
}

/* The update at `gpus` GPUs: the states' share, the peak and whether it
 * fits; a count the scenario cannot run at (TP or train.fsdp_size not
 * dividing it) gets its reason. */
static void memory_gpus_eval(const memory_out *r, int gpus, memory_gpus *x)
{
    scenario s = r->s;
    s.gpus = gpus;
    memset(x, 0, sizeof *x);
    x->gpus = gpus;
    x->f = -1;
    if (scenario_validate(&s, &x->e) == 0)
        x->f = train_fsdp_group(&s, s.gpus, &x->e);
    if (x->f > 0)
        train_mem_eval(&s, &r->hw, &r->m, s.gpus, train_mem_tokens(&s, r->longest), &x->tm);
    x->fits = x->f > 0 && x->tm.need.total <= r->s.train_mem_cap * r->hw.hbm_bytes &&
              x->tm.need.host <= r->hw.host_bytes;
}

static json_t *memory_gpus_json(const memory_opts *o, const memory_out *r)
{
    json_t *arr = json_array();
    for (int i = 0; i < o->ng; i++) {
        memory_gpus x;
        memory_gpus_eval(r, o->gpus[i], &x);
        json_t *g = json_object();
        json_object_set_new(g, "gpus", json_integer(x.gpus));
        if (x.f > 0) {
            json_object_set_new(g, "fsdp_group", json_integer(x.f));
            add_gb(g, "states_gb", x.tm.need.states);
            add_gb(g, "total_gb", x.tm.need.total);
            add_gb(g, "host_gb_per_node", x.tm.need.host);
        } else {
            json_object_set_new(g, "reason", json_string(x.e.msg));
        }
        json_object_set_new(g, "fits", json_boolean(x.fits));
        json_array_append_new(arr, g);
    }
    return arr;
}

static void memory_gpus_text(const memory_opts *o, const memory_out *r)
{
    const scenario *s = &r->s;
    printf("\nactor update by GPU count (train.mem_cap %.2f = %.1f GB)\n"
           "  %6s %6s %10s %10s %10s  %s\n",
           s->train_mem_cap, GB(s->train_mem_cap * r->hw.hbm_bytes), "gpus", "shard",
           "states_GB", "update_GB", s->train_offload ? "host_GB" : "", "fits");
    for (int i = 0; i < o->ng; i++) {
        memory_gpus x;
        memory_gpus_eval(r, o->gpus[i], &x);
        if (x.f < 0) {
            const char *why = strstr(x.e.msg, ".ini: "); /* the scenario's path, said above */
            printf("  %6d  cannot run: %s\n", x.gpus, why ? why + 6 : x.e.msg);
            continue;
        }
        char host[32] = "";
        if (s->train_offload)
            snprintf(host, sizeof host, "%.1f", GB(x.tm.need.host));
        printf("  %6d %6d %10.1f %10.1f %10s  %s\n", x.gpus, x.f, GB(x.tm.need.states),
               GB(x.tm.need.total), host, x.fits ? "yes" : "no");
    }
}

/* Prints r as one JSON object.  Returns 0, or -1 with e set. */
static int memory_emit_json(const memory_opts *o, const memory_out *r, ts_err *e)
{
    json_t *out = json_object();
    json_object_set_new(out, "command", json_string("memory"));
    json_object_set_new(out, "scenario", json_string(r->s.name));
    json_object_set_new(out, "model", json_string(r->m.name));
    json_object_set_new(out, "params", json_real(llm_params(&r->m)));
    json_object_set_new(out, "hw", json_string(r->hw.name));
    add_gb(out, "hbm_gb", r->hw.hbm_bytes);
    json_object_set_new(out, "gpus", json_integer(r->s.gpus));
    /* run_setup applied cluster.gpus_per_node */
    json_object_set_new(out, "gpus_per_node", json_integer(r->hw.gpus_per_node));
    json_object_set_new(out, "longest_tokens", json_real(r->longest));
    json_object_set_new(out, "rollout", memory_rollout_json(r));
    if (r->dcp) {
        json_object_set_new(out, "train", memory_dcp_json(r));
    } else {
        json_object_set_new(out, "train", memory_train_json(r));
        if (o->ng)
            json_object_set_new(out, "by_gpus", memory_gpus_json(o, r));
    }
    int rc = cmd_print_json(out, 6, e);
    json_decref(out);
    return rc;
}

/* Prints r as text.  Cannot fail. */
static void memory_emit_text(const memory_opts *o, const memory_out *r)
{
    char n1[256], n2[64], n3[64];
    printf("memory  scenario %s  model %s (%.1fB parameters)  hw %s (%.1f GB)  gpus %d "
           "(%d per node)\n",
           cmd_flat(r->s.name, n1, sizeof n1), cmd_flat(r->m.name, n2, sizeof n2),
           llm_params(&r->m) / 1e9, cmd_flat(r->hw.name, n3, sizeof n3), GB(r->hw.hbm_bytes),
           r->s.gpus, r->hw.gpus_per_node);
    printf("longest sequence of the first step: %.0f tokens\n\n", r->longest);
    memory_rollout_text(r);
    if (r->dcp) {
        memory_dcp_text(r);
    } else {
        memory_train_text(r);
        if (o->ng)
            memory_gpus_text(o, r);
    }
}

int cmd_memory(int argc, char **argv)
{
    memory_opts o;
    int prc = memory_parse(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    memory_out r;
    int rc = 1;
    if (memory_run(&o, &r, &e))
        goto done; /* before anything is printed */
    if (o.co.json) {
        if (memory_emit_json(&o, &r, &e))
            goto done;
    } else {
        memory_emit_text(&o, &r);
    }
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "tailsim memory: %s\n", e.msg);
    memory_out_free(&r);
    return rc;
}
