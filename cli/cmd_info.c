/*
 * `tailsim keys [SECTION] [--json]` and `tailsim models [--json]`: what a
 * user may put in a scenario, without reading the source.
 *
 * `keys` prints every scenario key with its type, default, range and one
 * line of meaning, read from the key table the scenario reader and --set
 * validate against (sim/scenario.h, scenario_key_info()): one source, so the
 * list cannot drift from what the reader accepts, and the defaults are a
 * fresh scenario's (scenario_defaults()), formatted so that
 * `--set SECTION.KEY=DEFAULT` sets exactly that value.  A SECTION keeps only
 * that section's keys; an unknown one is an error listing the sections.
 *
 * `models` loads every description under the data root, models/llm/NAME.ini
 * (layers, hidden size, heads, parameters) and models/hw/NAME.ini (HBM, peak
 * FLOP/s, bandwidths, with the calibration hw_load() applies), and prints
 * them.  Everything is loaded before anything is printed: a description
 * that does not load is the command's error (exit 1, file, line and key in
 * the message) and nothing reaches standard output.
 *
 * Each runs in phases: *_parse (the command line), *_run (collects, prints
 * nothing), then *_emit_json or *_emit_text.  Exit status: 0, 1 on bad
 * input (an unknown section, a description that does not load), 2 on usage
 * errors.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "cli/cmd.h"
#include "cli/opts.h"
#include "sim/scenario.h"

/* --- tailsim keys ---------------------------------------------------------- */

typedef struct keys_out {
    scn_key_info *k;  /* the listed keys, n of them (free) */
    size_t n;
} keys_out;

static void keys_usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim keys [SECTION] [--json]\n\n"
            "Every scenario key with its type, default, range and meaning: what a\n"
            "scenario INI may set under [SECTION] as KEY = VALUE, and what\n"
            "--set SECTION.KEY=VALUE overrides in rollout, rlstep, memory, specdec,\n"
            "compare, dcp and plan (and a sweep grid sweeps).  The list is the key\n"
            "table the scenario reader checks against; a key not listed is an error.\n"
            "The defaults are those of a scenario that does not set the key;\n"
            "cluster.gpus and model.name have none (a scenario must set them).\n\n"
            "  SECTION     only this section's keys: cluster, model, rollout, train,\n"
            "              spec, policy, trace or dcp\n"
            "  --json      print one JSON object: {\"keys\": [{section, key, name, type,\n"
            "              required, default, default_text, min, max, range, help}]}\n"
            "  -h, --help  this text\n");
}

/* Parses the command line: the optional SECTION into *section.  Returns -1
 * to go on, or the exit status (0 after --help, 2 after a usage error). */
static int keys_parse(int argc, char **argv, opts_common *co, const char **section)
{
    static const struct option lo[] = {OPTS_LONG_JSON, OPTS_LONG_HELP, {0, 0, 0, 0}};
    opts_init(co, "keys", 0);
    *section = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        int t = opts_step(co, c, optarg, keys_usage);
        if (t == OPTS_STEP_OTHER) {
            keys_usage(stderr);
            return 2;
        }
        if (t != OPTS_STEP_TAKEN)
            return t;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "tailsim keys: expected at most one SECTION (try --help)\n");
        return 2;
    }
    if (optind < argc)
        *section = argv[optind];
    return -1;
}

/* The keys of section (every key when NULL) into out.  Returns 0, or -1
 * with e set (an unknown section, or out of memory). */
static int keys_run(const char *section, keys_out *out, ts_err *e)
{
    size_t total = scenario_key_count();
    out->n = 0;
    out->k = calloc(total, sizeof *out->k);
    if (!out->k)
        return ts_errf(e, "out of memory");
    for (size_t i = 0; i < total; i++)
        if (scenario_key_info(i, &out->k[i]))
            return ts_errf(e, "key table row %zu cannot be read", i);
    for (size_t i = 0; i < total; i++) /* keep section's rows, in order */
        if (!section || !strcmp(section, out->k[i].section))
            out->k[out->n++] = out->k[i];
    if (out->n)
        return 0;
    char q[TS_QUOTE_BUF], list[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < total; i++) /* the table is grouped by section */
        if (!i || strcmp(out->k[i].section, out->k[i - 1].section))
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "",
                                    out->k[i].section);
    return ts_errf(e, "no section '%s' in a scenario (sections: %s)",
                   ts_quote(section, 32, q, sizeof q), list);
}

/* A key's default as a JSON value of its type (null when it has none). */
static json_t *keys_json_default(const scn_key_info *k)
{
    if (k->required)
        return json_null();
    switch (k->type) {
    case SCN_KEY_INT:
    case SCN_KEY_U64: return json_integer((json_int_t)strtoll(k->def, NULL, 10));
    case SCN_KEY_REAL: return json_real(strtod(k->def, NULL));
    case SCN_KEY_BOOL: return json_boolean(!strcmp(k->def, "true"));
    case SCN_KEY_STR: return json_string(k->def);
    }
    return json_null();
}

static int keys_emit_json(const keys_out *o, ts_err *e)
{
    json_t *root = json_object(), *arr = json_array();
    if (!root || !arr) {
        json_decref(root);
        json_decref(arr);
        return ts_errf(e, "out of memory");
    }
    json_object_set_new(root, "keys", arr);
    for (size_t i = 0; i < o->n; i++) {
        const scn_key_info *k = &o->k[i];
        char name[160];
        snprintf(name, sizeof name, "%s.%s", k->section, k->key);
        json_t *j = json_object();
        json_object_set_new(j, "section", json_string(k->section));
        json_object_set_new(j, "key", json_string(k->key));
        json_object_set_new(j, "name", json_string(name));
        json_object_set_new(j, "type", json_string(k->type_name));
        json_object_set_new(j, "required", json_boolean(k->required));
        json_object_set_new(j, "default", keys_json_default(k));
        json_object_set_new(j, "default_text", json_string(k->def));
        if (k->type == SCN_KEY_INT || k->type == SCN_KEY_U64) {
            json_object_set_new(j, "min", json_integer((json_int_t)k->min));
            json_object_set_new(j, "max", k->type == SCN_KEY_U64 ? json_integer(INT64_MAX)
                                                                 : json_integer((json_int_t)k->max));
        } else if (k->type == SCN_KEY_REAL) {
            json_object_set_new(j, "min", json_real(k->min));
            json_object_set_new(j, "max", json_real(k->max));
        } else if (k->type == SCN_KEY_STR) {
            json_object_set_new(j, "max_length", json_integer((json_int_t)k->max - 1));
        }
        json_object_set_new(j, "range", json_string(k->range));
        json_object_set_new(j, "help", json_string(k->help));
        json_array_append_new(arr, j);
    }
    int rc = cmd_print_json(root, 15, e);
    json_decref(root);
    return rc;
}

static void keys_emit_text(const keys_out *o)
{
    printf("Scenario keys: in a scenario INI as KEY = VALUE under [SECTION], or\n"
           "--set SECTION.KEY=VALUE.  Default: what a scenario that does not set the key gets.\n");
    for (size_t i = 0; i < o->n; i++) {
        const scn_key_info *k = &o->k[i];
        if (!i || strcmp(k->section, o->k[i - 1].section))
            printf("\n[%s]\n  %-28s %-6s %-12s %-21s %s\n", k->section, "key", "type",
                   "default", "range", "meaning");
        char name[160], def[SCN_STR + 8];
        snprintf(name, sizeof name, "%s.%s", k->section, k->key);
        if (k->required)
            snprintf(def, sizeof def, "(required)");
        else if (k->type == SCN_KEY_STR && !k->def[0])
            snprintf(def, sizeof def, "\"\"");
        else
            snprintf(def, sizeof def, "%s", k->def);
        printf("  %-28s %-6s %-12s %-21s %s\n", name, k->type_name, def, k->range, k->help);
    }
}

int cmd_keys(int argc, char **argv)
{
    opts_common co;
    const char *section;
    int rc = keys_parse(argc, argv, &co, &section);
    if (rc >= 0)
        return rc;
    keys_out o = {0};
    ts_err e = {{0}};
    if (keys_run(section, &o, &e)) {
        free(o.k);
        fprintf(stderr, "tailsim keys: %s\n", e.msg);
        return 1;
    }
    rc = 0;
    if (co.json) {
        if (keys_emit_json(&o, &e)) {
            fprintf(stderr, "tailsim keys: %s\n", e.msg);
            rc = 1;
        }
    } else {
        keys_emit_text(&o);
    }
    free(o.k);
    return rc;
}

/* --- tailsim models ---------------------------------------------------------- */

typedef struct models_out {
    llm_desc *m;      /* every models/llm/NAME.ini, by name (free) */
    size_t nm;
    hw_desc *hw;      /* every models/hw/NAME.ini, by name (free) */
    size_t nh;
} models_out;

static void models_usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim models [--json]\n\n"
            "Every model (models/llm/NAME.ini: model.name = NAME) and every hardware\n"
            "description (models/hw/NAME.ini: cluster.hw = NAME) under the data\n"
            "directory, with the numbers the simulator uses: a model's layers, hidden\n"
            "size, heads, KV heads and parameters; a GPU's HBM, dense bf16 peak FLOP/s,\n"
            "HBM and link bandwidths and calibration.  A description that does not load\n"
            "is an error (exit 1).  The data directory is $TAILSIM_DATA, else the build\n"
            "or install tree of this binary (PREFIX/share/tailsim).\n\n"
            "  --json      print one JSON object: {\"data_root\", \"models\": [...],\n"
            "              \"hardware\": [...]} with every field of each description\n"
            "  -h, --help  this text\n");
}

static int models_parse(int argc, char **argv, opts_common *co)
{
    static const struct option lo[] = {OPTS_LONG_JSON, OPTS_LONG_HELP, {0, 0, 0, 0}};
    opts_init(co, "models", 0);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        int t = opts_step(co, c, optarg, models_usage);
        if (t == OPTS_STEP_OTHER) {
            models_usage(stderr);
            return 2;
        }
        if (t != OPTS_STEP_TAKEN)
            return t;
    }
    if (optind < argc) {
        fprintf(stderr, "tailsim models: no operand expected (try --help)\n");
        return 2;
    }
    return -1;
}

static void models_free(models_out *o)
{
    free(o->m);
    free(o->hw);
}

/* Loads every description into o.  Returns 0, or -1 with e set (a
 * directory that cannot be read, a description that does not load). */
static int models_run(models_out *o, ts_err *e)
{
    char **names;
    size_t n;
    memset(o, 0, sizeof *o);
    if (ts_data_list("models/llm", ".ini", &names, &n, e))
        return -1;
    o->m = calloc(n ? n : 1, sizeof *o->m);
    if (!o->m) {
        ts_data_list_free(names, n);
        return ts_errf(e, "out of memory");
    }
    for (; o->nm < n; o->nm++)
        if (llm_load(names[o->nm], &o->m[o->nm], e)) {
            ts_data_list_free(names, n);
            return -1;
        }
    ts_data_list_free(names, n);
    if (ts_data_list("models/hw", ".ini", &names, &n, e))
        return -1;
    o->hw = calloc(n ? n : 1, sizeof *o->hw);
    if (!o->hw) {
        ts_data_list_free(names, n);
        return ts_errf(e, "out of memory");
    }
    for (; o->nh < n; o->nh++)
        if (hw_load(names[o->nh], &o->hw[o->nh], e)) {
            ts_data_list_free(names, n);
            return -1;
        }
    ts_data_list_free(names, n);
    return 0;
}

static int models_emit_json(const models_out *o, ts_err *e)
{
    json_t *root = json_object(), *ms = json_array(), *hs = json_array();
    if (!root || !ms || !hs) {
        json_decref(root);
        json_decref(ms);
        json_decref(hs);
        return ts_errf(e, "out of memory");
    }
    json_object_set_new(root, "data_root", json_string(ts_data_root()));
    json_object_set_new(root, "models", ms);
    json_object_set_new(root, "hardware", hs);
    for (size_t i = 0; i < o->nm; i++) {
        const llm_desc *m = &o->m[i];
        json_t *j = json_object();
        json_object_set_new(j, "name", json_string(m->name));
        json_object_set_new(j, "layers", json_integer(m->layers));
        json_object_set_new(j, "hidden", json_integer(m->hidden));
        json_object_set_new(j, "heads", json_integer(m->heads));
        json_object_set_new(j, "kv_heads", json_integer(m->kv_heads));
        json_object_set_new(j, "head_dim", json_integer(m->head_dim));
        json_object_set_new(j, "ffn", json_integer(m->ffn));
        json_object_set_new(j, "vocab", json_integer(m->vocab));
        json_object_set_new(j, "tied", json_boolean(m->tied));
        json_object_set_new(j, "gated", json_boolean(m->gated));
        json_object_set_new(j, "qkv_bias", json_boolean(m->qkv_bias));
        json_object_set_new(j, "params", json_real(llm_params(m)));
        json_array_append_new(ms, j);
    }
    for (size_t i = 0; i < o->nh; i++) {
        const hw_desc *h = &o->hw[i];
        json_t *j = json_object();
        json_object_set_new(j, "name", json_string(h->name));
        json_object_set_new(j, "hbm_bytes", json_real(h->hbm_bytes));
        json_object_set_new(j, "peak_flops", json_real(h->peak_flops));
        json_object_set_new(j, "hbm_bw", json_real(h->hbm_bw));
        json_object_set_new(j, "nvlink_bw", json_real(h->nvlink_bw));
        json_object_set_new(j, "nic_bw", json_real(h->nic_bw));
        json_object_set_new(j, "gpus_per_node", json_integer(h->gpus_per_node));
        json_object_set_new(j, "sms", json_integer(h->sms));
        json_object_set_new(j, "calibration", json_string(h->calibration));
        json_array_append_new(hs, j);
    }
    int rc = cmd_print_json(root, 6, e);
    json_decref(root);
    return rc;
}

static void models_emit_text(const models_out *o)
{
    char n[64], c[4200];
    printf("Models (model.name = NAME; %s/models/llm/NAME.ini):\n", cmd_flat(ts_data_root(), c, sizeof c));
    printf("  %-28s %6s %7s %5s %8s %8s %6s %7s %8s\n", "name", "layers", "hidden", "heads",
           "kv_heads", "head_dim", "ffn", "vocab", "params");
    for (size_t i = 0; i < o->nm; i++) {
        const llm_desc *m = &o->m[i];
        printf("  %-28s %6d %7d %5d %8d %8d %6d %7d %7.2fB\n", cmd_flat(m->name, n, sizeof n),
               m->layers, m->hidden, m->heads, m->kv_heads, m->head_dim, m->ffn, m->vocab,
               llm_params(m) / 1e9);
    }
    printf("\nHardware (cluster.hw = NAME; %s/models/hw/NAME.ini), per GPU:\n",
           cmd_flat(ts_data_root(), c, sizeof c));
    printf("  %-10s %7s %12s %8s %11s %8s %9s  %s\n", "name", "HBM GB", "peak TFLOP/s",
           "HBM TB/s", "NVLink GB/s", "NIC GB/s", "GPUs/node", "calibration");
    for (size_t i = 0; i < o->nh; i++) {
        const hw_desc *h = &o->hw[i];
        printf("  %-10s %7.1f %12.0f %8.2f %11.0f %8.0f %9d  %s\n", cmd_flat(h->name, n, sizeof n),
               h->hbm_bytes / 1e9, h->peak_flops / 1e12, h->hbm_bw / 1e12, h->nvlink_bw / 1e9,
               h->nic_bw / 1e9, h->gpus_per_node, cmd_flat(h->calibration, c, sizeof c));
    }
    printf("\npeak: dense bf16; NVLink: per direction; NIC: per GPU across nodes.\n");
}

int cmd_models(int argc, char **argv)
{
    opts_common co;
    int rc = models_parse(argc, argv, &co);
    if (rc >= 0)
        return rc;
    models_out o;
    ts_err e = {{0}};
    if (models_run(&o, &e)) {
        models_free(&o);
        fprintf(stderr, "tailsim models: %s\n", e.msg);
        return 1;
    }
    rc = 0;
    if (co.json) {
        if (models_emit_json(&o, &e)) {
            fprintf(stderr, "tailsim models: %s\n", e.msg);
            rc = 1;
        }
    } else {
        models_emit_text(&o);
    }
    models_free(&o);
    return rc;
}
