/*
 * `tailsim memory SCENARIO [--gpus LIST] [--trace FILE] [--set SEC.KEY=VAL]
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
#include "sim/policy/policy.h"
#include "sim/rlstep.h"
#include "sim/rlstep_mem.h"
#include "sim/rlstep_train.h"
#include "sim/scenario.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim memory SCENARIO [--gpus LIST] [--trace FILE] [--set SEC.KEY=VAL]\n"
            "                      [--json]\n\n"
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
            "  --set SEC.KEY=VAL   a scenario override (repeatable)\n"
            "  --json              print one JSON object\n"
            "  -h, --help          this text\n");
}

#define GB(x) ((x) / 1e9)

static void add_gb(json_t *o, const char *k, double bytes)
{
    json_object_set_new(o, k, json_real(GB(bytes)));
}

/* The rollout side, per GPU of a replica. */
static json_t *rollout_side(const scenario *s, const hw_desc *hw, const llm_desc *m, int json)
{
    double w = mem_weights(m, s->tp), reserve = s->reserve_gb * 1e9;
    double budget = hw->hbm_bytes * s->mem_util, kv = budget - w - reserve;
    double per_tok = mem_kv_per_token(m, s->tp), tokens = kv > 0 ? kv / per_tok : 0;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "tp", json_integer(s->tp));
        json_object_set_new(o, "replicas", json_integer(s->gpus / s->tp));
        json_object_set_new(o, "mem_util", json_real(s->mem_util));
        add_gb(o, "budget_gb", budget);
        add_gb(o, "weights_gb", w);
        add_gb(o, "reserve_gb", reserve);
        add_gb(o, "kv_gb", kv > 0 ? kv : 0);
        json_object_set_new(o, "kv_bytes_per_token", json_real(per_tok));
        json_object_set_new(o, "kv_tokens_per_replica", json_real(tokens));
        json_object_set_new(o, "fits", json_boolean(kv >= 1 * per_tok));
        return o;
    }
    int reps = s->gpus / s->tp;
    printf("rollout, per GPU (TP %d: %d replica%s; rollout.mem_util %.2f x %.1f GB = %.1f GB)\n",
           s->tp, reps, reps == 1 ? "" : "s", s->mem_util, GB(hw->hbm_bytes), GB(budget));
    printf("  %-20s %8.1f GB\n", "weights", GB(w));
    printf("  %-20s %8.1f GB  rollout.reserve_gb\n", "reserve", GB(reserve));
    if (kv >= per_tok)
        printf("  %-20s %8.1f GB  %.0f tokens per replica (%.0f bytes a token per GPU)\n",
               "KV cache", GB(kv), tokens, per_tok);
    else
        printf("  %-20s %8s     does NOT fit: the weights and reserve leave no KV cache "
               "(lower rollout.reserve_gb, raise rollout.mem_util or rollout.tp)\n",
               "KV cache", "-");
    return NULL;
}

/* The training side: the actor update's peak per GPU. */
static json_t *train_side(const scenario *s, const hw_desc *hw, const llm_desc *m,
                          double longest, int json)
{
    const char *trainer = s->mini_batch_prompts > 0 ? "verl" : "plain";
    double tokens = train_mem_tokens(s, longest), cap = s->train_mem_cap * hw->hbm_bytes;
    train_mem tm;
    train_mem_eval(s, hw, m, s->gpus, tokens, &tm);
    const mem_train *n = &tm.need;
    int f = tm.group;
    int fits = n->total <= cap, host_fits = n->host <= hw->host_bytes;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "trainer", json_string(trainer));
        json_object_set_new(o, "tokens_per_gpu", json_real(tokens));
        json_object_set_new(o, "fsdp_group", json_integer(f));
        json_object_set_new(o, "mem_cap", json_real(s->train_mem_cap));
        add_gb(o, "cap_gb", cap);
        add_gb(o, "states_gb", n->states);
        add_gb(o, "gathered_gb", n->gathered);
        add_gb(o, "kept_gb", n->kept);
        add_gb(o, "layer_gb", n->layer);
        add_gb(o, "logits_gb", n->logits);
        add_gb(o, "total_gb", n->total);
        json_object_set_new(o, "offload", json_boolean(s->train_offload));
        add_gb(o, "host_gb_per_node", n->host);
        add_gb(o, "host_cap_gb", hw->host_bytes);
        json_object_set_new(o, "fits", json_boolean(fits && host_fits));
        return o;
    }
    printf("\nactor update, per GPU (%s trainer, %.0f tokens per GPU; train.mem_cap %.2f = "
           "%.1f GB)\n",
           s->mini_batch_prompts > 0 ? "VeRL's" : "the plain", tokens, s->train_mem_cap, GB(cap));
    if (s->train_offload)
        printf("  %-20s %8.1f GB  in host memory (train.offload): %.1f GB per node of %.0f%s\n",
               "model states", 0.0, GB(n->host), GB(hw->host_bytes),
               host_fits ? "" : ", does NOT fit");
    else
        printf("  %-20s %8.1f GB  fp32 parameters, gradients, Adam m and v over %d GPUs%s\n",
               "model states", GB(n->states), f, f < s->gpus ? " (train.fsdp_size)" : "");
    printf("  %-20s %8.1f GB\n", "gathered weights", GB(n->gathered));
    printf("  %-20s %8.1f GB%s\n", "kept activations", GB(n->kept),
           s->recompute ? "" : "  (train.recompute off: every layer keeps its activations)");
    printf("  %-20s %8.1f GB\n", "one layer", GB(n->layer));
    printf("  %-20s %8.1f GB\n", "logits", GB(n->logits));
    if (fits)
        printf("  %-20s %8.1f GB  fits (%.1f GB to spare)\n", "total", GB(n->total),
               GB(cap - n->total));
    else {
        char hint[192];
        train_mem_hint(s, tokens, hint, sizeof hint);
        printf("  %-20s %8.1f GB  does NOT fit: %.1f GB over; %s\n", "total", GB(n->total),
               GB(n->total - cap), hint);
    }
    return NULL;
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

/* The DCP side as JSON (json) or printed. */
static json_t *dcp_side(const scenario *s, const hw_desc *hw, const dcp_result *r, int json)
{
    double cap = s->dcp.mem_cap * hw->hbm_bytes;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "trainer", json_string(s->train_strategy));
        json_object_set_new(o, "mem_cap", json_real(s->dcp.mem_cap));
        add_gb(o, "cap_gb", cap);
        add_gb(o, "total_gb", r->peak_mem_bytes);
        json_object_set_new(o, "fits", json_boolean(r->feasible));
        return o;
    }
    printf("\nactor update, per GPU (planned by train.strategy %s; dcp.mem_cap %.2f = %.1f GB)\n",
           s->train_strategy, s->dcp.mem_cap, GB(cap));
    printf("  %-20s %8.1f GB  %s\n", "largest micro-batch", GB(r->peak_mem_bytes),
           r->feasible ? "fits (states included; the plan sized it under the cap)"
                       : "does NOT fit under dcp.mem_cap");
    return NULL;
}

/* The update at each GPU count of `list` (--gpus): the states' share, the
 * peak and whether it fits; a count the scenario cannot run at (TP or
 * train.fsdp_size not dividing it) gets its reason.  Into `arr` (JSON) or
 * printed. */
static void by_gpus(const scenario *base, const hw_desc *hw, const llm_desc *m, double longest,
                    const int *list, int n, json_t *arr)
{
    double cap = base->train_mem_cap * hw->hbm_bytes;
    if (!arr)
        printf("\nactor update by GPU count (train.mem_cap %.2f = %.1f GB)\n"
               "  %6s %6s %10s %10s %10s  %s\n",
               base->train_mem_cap, GB(cap), "gpus", "shard", "states_GB", "update_GB",
               base->train_offload ? "host_GB" : "", "fits");
    for (int i = 0; i < n; i++) {
        scenario s = *base;
        s.gpus = list[i];
        ts_err e = {{0}};
        int f = -1;
        if (scenario_validate(&s, &e) == 0)
            f = train_fsdp_group(&s, s.gpus, &e);
        train_mem tm;
        if (f > 0)
            train_mem_eval(&s, hw, m, s.gpus, train_mem_tokens(&s, longest), &tm);
        int fits = f > 0 && tm.need.total <= cap && tm.need.host <= hw->host_bytes;
        if (arr) {
            json_t *o = json_object();
            json_object_set_new(o, "gpus", json_integer(list[i]));
            if (f > 0) {
                json_object_set_new(o, "fsdp_group", json_integer(f));
                add_gb(o, "states_gb", tm.need.states);
                add_gb(o, "total_gb", tm.need.total);
                add_gb(o, "host_gb_per_node", tm.need.host);
            } else {
                json_object_set_new(o, "reason", json_string(e.msg));
            }
            json_object_set_new(o, "fits", json_boolean(fits));
            json_array_append_new(arr, o);
            continue;
        }
        if (f < 0) {
            const char *why = strstr(e.msg, ".ini: "); /* the scenario's path, said above */
            printf("  %6d  cannot run: %s\n", list[i], why ? why + 6 : e.msg);
            continue;
        }
        char host[32] = "";
        if (s.train_offload)
            snprintf(host, sizeof host, "%.1f", GB(tm.need.host));
        printf("  %6d %6d %10.1f %10.1f %10s  %s\n", list[i], f, GB(tm.need.states),
               GB(tm.need.total), host, fits ? "yes" : "no");
    }
}

int cmd_memory(int argc, char **argv)
{
    static const struct option lo[] = {{"trace", required_argument, 0, 't'},
                                       {"gpus", required_argument, 0, 'g'},
                                       {"set", required_argument, 0, 'S'},
                                       {"json", no_argument, 0, 'j'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *sets[32], *trace_file = NULL;
    int nsets = 0, json = 0, c, gl[64], ng = 0;
    int64_t v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 't': trace_file = optarg; break;
        case 'g': {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", optarg);
            ng = 0;
            for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                if (ng == 64 || ts_parse_i64(tok, 1, 1048576, &v)) {
                    fprintf(stderr, "tailsim memory: --gpus '%s': expected up to 64 GPU counts "
                                    "in [1, 1048576], comma-separated\n", optarg);
                    return 2;
                }
                gl[ng++] = (int)v;
            }
            if (!ng) {
                fprintf(stderr, "tailsim memory: --gpus '%s': no GPU count\n", optarg);
                return 2;
            }
            break;
        }
        case 'S':
            if (nsets == 32) {
                fprintf(stderr, "tailsim memory: too many --set options\n");
                return 2;
            }
            sets[nsets++] = optarg;
            break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    scenario s;
    hw_desc hw;
    llm_desc m;
    trace *t = NULL;
    json_t *o = NULL;
    int rc = 1;
    if (run_setup(argv[optind], sets, nsets, 0, 0, &s, &hw, &m, &e))
        goto done;
    int dcp = strcmp(s.train_strategy, "none") != 0;
    if ((!dcp && train_fsdp_group(&s, s.gpus, &e) < 0) ||
        policy_load_steps(&s, trace_file, 1, &t, &e))
        goto done;
    double longest = rlstep_longest(&s, t);
    dcp_result dr;
    if (dcp && dcp_peak(&s, &hw, &m, t, &dr, &e))
        goto done; /* before anything is printed */
    int gpn = hw.gpus_per_node; /* run_setup applied cluster.gpus_per_node */
    if (json) {
        o = json_object();
        json_object_set_new(o, "command", json_string("memory"));
        json_object_set_new(o, "scenario", json_string(s.name));
        json_object_set_new(o, "model", json_string(m.name));
        json_object_set_new(o, "params", json_real(llm_params(&m)));
        json_object_set_new(o, "hw", json_string(hw.name));
        add_gb(o, "hbm_gb", hw.hbm_bytes);
        json_object_set_new(o, "gpus", json_integer(s.gpus));
        json_object_set_new(o, "gpus_per_node", json_integer(gpn));
        json_object_set_new(o, "longest_tokens", json_real(longest));
        json_object_set_new(o, "rollout", rollout_side(&s, &hw, &m, 1));
        if (dcp) {
            json_object_set_new(o, "train", dcp_side(&s, &hw, &dr, 1));
        } else {
            json_object_set_new(o, "train", train_side(&s, &hw, &m, longest, 1));
            if (ng) {
                json_t *arr = json_array();
                by_gpus(&s, &hw, &m, longest, gl, ng, arr);
                json_object_set_new(o, "by_gpus", arr);
            }
        }
        if (cmd_print_json(o, 6, &e))
            goto done;
    } else {
        printf("memory  scenario %s  model %s (%.1fB parameters)  hw %s (%.1f GB)  gpus %d "
               "(%d per node)\n",
               s.name, m.name, llm_params(&m) / 1e9, hw.name, GB(hw.hbm_bytes), s.gpus, gpn);
        printf("longest sequence of the first step: %.0f tokens\n\n", longest);
        rollout_side(&s, &hw, &m, 0);
        if (dcp) {
            dcp_side(&s, &hw, &dr, 0);
        } else {
            train_side(&s, &hw, &m, longest, 0);
            if (ng)
                by_gpus(&s, &hw, &m, longest, gl, ng, NULL);
        }
    }
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "tailsim memory: %s\n", e.msg);
    json_decref(o);
    trace_free(t);
    return rc;
}
