/*
 * `tailsim specdec SCENARIO`: the speculative-decoding microbenchmark of the
 * cost and acceptance models.  For each batch size and context it prices one
 * plain decode iteration and one speculative iteration (draft depth steps +
 * verify of V tokens per sequence, V from TLT's batch-size table), takes the
 * expected accepted length of the scenario's drafter (averaged over the Beta
 * spread of sequence qualities), and prints tokens/s of both and the speedup.
 * Where the speedup falls below 1 is the crossover that justifies switching
 * speculation on only in the tail.  A row whose batch x (context + V) tokens
 * exceed one replica's KV cache (the scenario's memory model) is marked: no
 * engine runs that batch at that context.  With spec.ngram set, the n-gram
 * drafter's expected tokens per verify and speedup (mean repetitiveness,
 * averaged over its Beta spread) are printed too.  Both columns include the
 * host time of the speculative engine (models/cost_host.c): eager launches
 * above spec.graph_max_bs and scheduling exposed without the overlap
 * scheduler.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "models/cost_host.h"
#include "models/cost_spec.h"
#include "models/hw_calib.h"
#include "models/memory.h"
#include "cli/cmd.h"
#include "sim/scenario.h"
#include "sim/specdec.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tailsim specdec SCENARIO [--batch 1,2,4,...] [--ctx 1024,8192,...] "
               "[--set SEC.KEY=VAL] [--json]\n\n"
               "Plain vs speculative decoding throughput of one replica of SCENARIO, per batch size\n"
               "and context length, from the cost model and the acceptance model ([spec] keys).\n");
}

/* Parses "a,b,c" into at most max positive integers.  Returns the count or -1. */
static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int64_t v;
        if (n == max || ts_parse_i64(tok, 1, 1 << 24, &v))
            return -1;
        out[n++] = (int)v;
    }
    return n;
}

/* E[tokens per n-gram verify] at budget V averaged over repetitiveness draws. */
static double mean_ngram(const spec_params *p, int V, uint64_t seed)
{
    gsl_rng *r = ts_rng_new(seed, 2000); /* the same draws for every V */
    if (!r)
        return 0;
    double s = 0;
    const int n = 2000;
    for (int k = 0; k < n; k++)
        s += ngram_expected(p, ngram_draw_rep(p, r), V);
    gsl_rng_free(r);
    return s / n;
}

int cmd_specdec(int argc, char **argv)
{
    static const struct option lo[] = {{"batch", required_argument, 0, 'b'}, {"ctx", required_argument, 0, 'c'},
                                       {"set", required_argument, 0, 'S'},   {"json", no_argument, 0, 'j'},
                                       {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    int batches[64] = {1, 2, 4, 8, 16, 32, 64, 128, 256}, nb = 9;
    int ctxs[64] = {2048, 8192, 32768}, nc = 3;
    const char *sets[32];
    int nsets = 0, json = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case 'b':
            if ((nb = parse_list(optarg, batches, 64)) < 0) {
                fprintf(stderr, "tailsim specdec: --batch '%s': expected positive integers, comma-separated\n", optarg);
                return 2;
            }
            break;
        case 'c':
            if ((nc = parse_list(optarg, ctxs, 64)) < 0) {
                fprintf(stderr, "tailsim specdec: --ctx '%s': expected positive integers, comma-separated\n", optarg);
                return 2;
            }
            break;
        case 'S':
            if (nsets == 32) {
                fprintf(stderr, "tailsim specdec: too many --set options\n");
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
    if (scenario_load(argv[optind], &s, &e))
        goto fail;
    for (int i = 0; i < nsets; i++)
        if (scenario_set(&s, sets[i], &e))
            goto fail;
    if (scenario_validate(&s, &e) || hw_load(s.hw, &hw, &e) || llm_load(s.model, &m, &e) ||
        scenario_check_fit(&s, &hw, &m, &e) || spec_params_check(&s.sp, &e))
        goto fail;
    double kv_cap = mem_kv_capacity(&hw, &m, s.tp, s.mem_util, s.reserve_gb * 1e9);
    int ng = s.sp.ngram;
    /* both columns on the speculative engine's host settings (CUDA graphs up
     * to spec.graph_max_bs, overlap scheduler per spec.overlap): the choice
     * TLT's threshold makes inside one engine */
    host_mode host = scenario_host_mode(&s, 1);
    json_t *rows = json_array();
    if (!json) {
        printf("specdec  scenario %s  model %s  hw %s  TP %d  depth %d  top-k %d  quality %.2f\n"
               "calibration: %s\nKV cache per replica: %.0f tokens (fits: batch x (ctx + V) within it)\n\n"
               "%6s %7s %4s %7s %12s %12s %8s %5s",
               s.name, m.name, hw.name, s.tp, s.sp.depth, s.sp.topk, s.sp.quality, hw.calibration,
               kv_cap, "batch", "ctx", "V", "accept", "plain tok/s", "spec tok/s", "speedup", "fits");
        if (ng)
            printf(" %8s %8s", "ng_acc", "ng_spd");
        printf("\n");
    }
    for (int ci = 0; ci < nc; ci++)
        for (int bi = 0; bi < nb; bi++) {
            int b = batches[bi];
            double ctx_sum = (double)b * ctxs[ci];
            spec_point sp;
            spec_point_eval(&s.sp, &hw, &host, &m, s.tp, b, ctx_sum, s.seed, &sp);
            int V = sp.V;
            double acc = sp.accept, plain = sp.plain, spec = sp.spec;
            int fits = (double)b * (ctxs[ci] + V) <= kv_cap;
            double ng_acc = ng ? mean_ngram(&s.sp, V, s.seed) : 0;
            double ng_spd = ng ? b * ng_acc /
                                     cost_host_step(&hw, &host, b, 1, cost_spec_kernels(&m, s.tp, 1),
                                                    ngram_iter_cost(&s.sp, &hw, &m, s.tp, b, V, ctx_sum, NULL)) /
                                     plain
                               : 0;
            if (json) {
                json_t *o = json_object();
                json_object_set_new(o, "batch", json_integer(b));
                json_object_set_new(o, "ctx", json_integer(ctxs[ci]));
                json_object_set_new(o, "budget", json_integer(V));
                json_object_set_new(o, "accept_len", json_real(acc));
                json_object_set_new(o, "plain_tokens_per_s", json_real(plain));
                json_object_set_new(o, "spec_tokens_per_s", json_real(spec));
                json_object_set_new(o, "speedup", json_real(spec / plain));
                json_object_set_new(o, "fits_kv", json_boolean(fits));
                if (ng) {
                    json_object_set_new(o, "ngram_accept_len", json_real(ng_acc));
                    json_object_set_new(o, "ngram_speedup", json_real(ng_spd));
                }
                json_array_append_new(rows, o);
            } else {
                printf("%6d %7d %4d %7.2f %12.0f %12.0f %8.2f %5s", b, ctxs[ci], V, acc, plain, spec,
                       spec / plain, fits ? "yes" : "no");
                if (ng)
                    printf(" %8.2f %8.2f", ng_acc, ng_spd);
                printf("\n");
            }
        }
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "scenario", json_string(s.name));
        json_object_set_new(o, "model", json_string(m.name));
        json_object_set_new(o, "hw", json_string(hw.name));
        json_object_set_new(o, "calibration", json_string(hw.calibration));
        json_object_set_new(o, "kv_tokens_per_replica", json_real(kv_cap));
        json_object_set_new(o, "rows", rows);
        int jr = cmd_print_json(o, 8, &e);
        json_decref(o);
        if (jr)
            goto fail;
    } else {
        json_decref(rows);
    }
    return 0;
fail:
    fprintf(stderr, "tailsim specdec: %s\n", e.msg);
    return 1;
}
