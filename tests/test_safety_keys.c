/*
 * Discoverable keys and models, and an installed tailsim (issue 17, items 4
 * and 9).  `tailsim keys` must list exactly the keys the scenario reader
 * accepts, each with a default that --set takes back as the very value a
 * scenario gets without the key; an unknown key's message must point at a
 * command that exists and lists that section; `tailsim models` must list
 * every model and hardware INI under the data root with the numbers the
 * loaders read, and refuse (exit 1, nothing on stdout) a description that
 * does not load; `make install PREFIX=...` must give a binary that finds
 * its data from any directory and simulates as the build tree's does.
 * Single-command cases (unknown keys, sections, models, hardware,
 * scenarios; bad flags) are in the bad-input catalogue, tests/test_badinput.c.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "models/hw.h"
#include "models/hw_calib.h"
#include "sim/scenario.h"
#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "safety-keys");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(safety_keys, .init = setup, .fini = teardown);

/* Runs cmd through the shell with stdout to dir/out and stderr to dir/err;
 * returns the exit status, the two outputs in out/err (free them). */
static int run_split(const char *cmd, char **out, char **err)
{
    char full[8192], path[512];
    snprintf(full, sizeof full, "( %s ) >%s/out 2>%s/err </dev/null", cmd, dir, dir);
    int st = system(full);
    cr_assert(WIFEXITED(st), "%s: did not exit", cmd);
    const char *names[2] = {"out", "err"};
    char **dst[2] = {out, err};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f);
        size_t cap = 1 << 16, n = 0, k;
        char *b = malloc(cap);
        while ((k = fread(b + n, 1, cap - n - 1, f)) > 0)
            if ((n += k) + 1 == cap)
                b = realloc(b, cap *= 2);
        b[n] = 0;
        fclose(f);
        *dst[i] = b;
    }
    return WEXITSTATUS(st);
}

Test(safety_keys, every_listed_default_sets_back_the_default)
{
    /* "section.key=DEFAULT" through --set's path, for every row: each is
     * accepted, and together they leave a fresh scenario exactly as it was
     * (a default shown wrongly, or cut, would change a byte) */
    scenario fresh, s;
    scenario_defaults(&fresh);
    scenario_defaults(&s);
    size_t n = scenario_key_count();
    cr_assert_gt(n, 90, "the key table has %zu rows", n);
    for (size_t i = 0; i < n; i++) {
        scn_key_info k;
        cr_assert_eq(scenario_key_info(i, &k), 0);
        cr_assert(scenario_has_key(k.section, k.key), "%s.%s", k.section, k.key);
        if (k.required) {
            cr_expect_str_empty(k.def, "%s.%s", k.section, k.key);
            continue;
        }
        char set[600];
        ts_err e = {{0}};
        snprintf(set, sizeof set, "%s.%s=%s", k.section, k.key, k.def);
        cr_expect_eq(scenario_set(&s, set, &e), 0, "--set %s: %s", set, e.msg);
        cr_expect(memcmp(&s, &fresh, sizeof s) == 0, "--set %s changed the scenario", set);
    }
    scn_key_info k;
    cr_expect_eq(scenario_key_info(n, &k), -1);
}

Test(safety_keys, listed_defaults_are_what_a_scenario_gets)
{
    /* a scenario that sets only the required keys runs on the listed
     * defaults: compare each key against a value set explicitly */
    char path[512];
    snprintf(path, sizeof path, "%s/min.ini", dir);
    write_aside(path, "[cluster]\ngpus = 8\n[model]\nname = qwen2.5-7b\n");
    scenario s, t;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(path, &s, &e), 0, "%s", e.msg);
    t = s;
    for (size_t i = 0; i < scenario_key_count(); i++) {
        scn_key_info k;
        scenario_key_info(i, &k);
        if (k.required)
            continue;
        char set[600];
        snprintf(set, sizeof set, "%s.%s=%s", k.section, k.key, k.def);
        cr_assert_eq(scenario_set(&t, set, &e), 0, "%s", e.msg);
    }
    cr_expect(memcmp(&s, &t, sizeof s) == 0, "a listed default differs from the loaded one");
    /* the required keys are required */
    for (size_t i = 0; i < scenario_key_count(); i++) {
        scn_key_info k;
        scenario_key_info(i, &k);
        if (!k.required)
            continue;
        const char *ini = !strcmp(k.section, "cluster") ? "[model]\nname = qwen2.5-7b\n"
                                                        : "[cluster]\ngpus = 8\n";
        write_aside(path, ini);
        cr_expect_eq(scenario_load(path, &s, &e), -1, "%s.%s", k.section, k.key);
        char want[160];
        snprintf(want, sizeof want, "missing required key '%s.%s'", k.section, k.key);
        cr_expect(strstr(e.msg, want), "%s", e.msg);
    }
}

Test(safety_keys, keys_json_is_the_table)
{
    char *out = run_capture("build/tailsim keys --json");
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    cr_assert_not_null(root, "not JSON: %s", je.text);
    json_t *arr = json_object_get(root, "keys");
    cr_assert(json_is_array(arr));
    size_t n = scenario_key_count();
    cr_assert_eq(json_array_size(arr), n, "%zu keys listed, the table has %zu",
                 json_array_size(arr), n);
    for (size_t i = 0; i < n; i++) {
        scn_key_info k;
        scenario_key_info(i, &k);
        json_t *j = json_array_get(arr, i);
        char name[160];
        snprintf(name, sizeof name, "%s.%s", k.section, k.key);
        cr_expect_str_eq(json_string_value(json_object_get(j, "name")), name);
        cr_expect_str_eq(json_string_value(json_object_get(j, "type")), k.type_name, "%s", name);
        cr_expect_str_eq(json_string_value(json_object_get(j, "default_text")), k.def, "%s", name);
        cr_expect_str_eq(json_string_value(json_object_get(j, "help")), k.help, "%s", name);
        json_t *d = json_object_get(j, "default");
        switch (k.type) {
        case SCN_KEY_INT:
        case SCN_KEY_U64:
            if (k.required)
                cr_expect(json_is_null(d), "%s", name);
            else
                cr_expect_eq(json_integer_value(d), strtoll(k.def, NULL, 10), "%s", name);
            break;
        case SCN_KEY_REAL: cr_expect_eq(json_real_value(d), strtod(k.def, NULL), "%s", name); break;
        case SCN_KEY_BOOL: cr_expect_eq(json_is_true(d), !strcmp(k.def, "true"), "%s", name); break;
        case SCN_KEY_STR:
            if (k.required)
                cr_expect(json_is_null(d), "%s", name);
            else
                cr_expect_str_eq(json_string_value(d), k.def, "%s", name);
            break;
        }
        /* a key the reader would not take is not listed */
        cr_expect(scenario_has_key(k.section, k.key), "%s", name);
    }
    json_decref(root);
    free(out);
}

Test(safety_keys, keys_text_lists_each_key_once_and_sections_alone)
{
    char *all = run_capture("build/tailsim keys");
    for (size_t i = 0; i < scenario_key_count(); i++) {
        scn_key_info k;
        scenario_key_info(i, &k);
        char name[170];
        snprintf(name, sizeof name, "  %s.%s ", k.section, k.key);
        const char *p = strstr(all, name);
        cr_expect(p, "'%s' missing from tailsim keys", name);
        if (p)
            cr_expect(!strstr(p + 1, name), "'%s' listed twice", name);
        /* the section alone lists it, and only its section's keys */
        char cmd[128];
        snprintf(cmd, sizeof cmd, "build/tailsim keys %s", k.section);
        char *sec = run_capture(cmd);
        cr_expect(strstr(sec, name), "'%s' missing from %s", name, cmd);
        for (size_t j = 0; j < scenario_key_count(); j++) {
            scn_key_info o;
            scenario_key_info(j, &o);
            snprintf(name, sizeof name, "  %s.%s ", o.section, o.key);
            cr_expect(!strcmp(o.section, k.section) == !!strstr(sec, name), "%s: %s", cmd, name);
        }
        free(sec);
    }
    free(all);
}

Test(safety_keys, unknown_key_points_at_a_command_that_lists_its_section)
{
    /* in every section: the message names `tailsim keys SECTION`, never the
     * --help-keys that never existed, and that command lists the section */
    const char *sections[] = {"cluster", "model", "rollout", "train", "spec", "policy",
                              "trace", "dcp"};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        scenario s;
        scenario_defaults(&s);
        ts_err e = {{0}};
        char set[128], want[64];
        snprintf(set, sizeof set, "%s.no_such_key_here=1", sections[i]);
        cr_expect_eq(scenario_set(&s, set, &e), -1, "%s", set);
        snprintf(want, sizeof want, "tailsim keys %s)", sections[i]);
        cr_expect(strstr(e.msg, want), "%s", e.msg);
        cr_expect(!strstr(e.msg, "--help-keys"), "%s", e.msg);
        char cmd[128], *out, *err;
        snprintf(cmd, sizeof cmd, "build/tailsim keys %s", sections[i]);
        cr_expect_eq(run_split(cmd, &out, &err), 0, "%s: %s", cmd, err);
        free(out);
        free(err);
    }
    /* an unknown section lists the sections; a near miss is suggested */
    scenario s;
    scenario_defaults(&s);
    ts_err e = {{0}};
    cr_expect_eq(scenario_set(&s, "rolout.tp=2", &e), -1);
    cr_expect(strstr(e.msg, "no section [rolout]") && strstr(e.msg, "did you mean rollout.tp?") &&
                  strstr(e.msg, "sections: cluster, model, rollout, train, spec, policy, trace, dcp"),
              "%s", e.msg);
    cr_expect_eq(scenario_set(&s, "rollout.reward_step_s=2", &e), -1);
    cr_expect(strstr(e.msg, "did you mean train.reward_step_s?"), "%s", e.msg);
}

/* The names of dir's *.ini under the data root, as `ls` would sort them. */
static char *ls_names(const char *sub)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cd '%s/%s' && ls *.ini | sed 's/\\.ini$//'", ts_data_root(), sub);
    return run_capture(cmd);
}

Test(safety_keys, models_lists_every_description_with_its_numbers)
{
    char *out = run_capture("build/tailsim models --json");
    json_error_t je;
    json_t *root = json_loads(out, 0, &je);
    cr_assert_not_null(root, "not JSON: %s", je.text);
    const char *kinds[2] = {"models/llm", "models/hw"};
    const char *keys[2] = {"models", "hardware"};
    for (int kind = 0; kind < 2; kind++) {
        char *names = ls_names(kinds[kind]);
        json_t *arr = json_object_get(root, keys[kind]);
        size_t i = 0;
        for (char *nm = strtok(names, "\n"); nm; nm = strtok(NULL, "\n"), i++) {
            json_t *j = json_array_get(arr, i);
            cr_assert_not_null(j, "%s: %s not listed", keys[kind], nm);
            cr_expect_str_eq(json_string_value(json_object_get(j, "name")), nm);
            ts_err e = {{0}};
            if (kind == 0) {
                llm_desc m;
                cr_assert_eq(llm_load(nm, &m, &e), 0, "%s", e.msg);
                cr_expect_eq(json_integer_value(json_object_get(j, "layers")), m.layers, "%s", nm);
                cr_expect_eq(json_integer_value(json_object_get(j, "hidden")), m.hidden, "%s", nm);
                cr_expect_eq(json_integer_value(json_object_get(j, "heads")), m.heads, "%s", nm);
                cr_expect_eq(json_integer_value(json_object_get(j, "kv_heads")), m.kv_heads, "%s", nm);
                double p = json_real_value(json_object_get(j, "params"));
                cr_expect(p > 0.999 * llm_params(&m) && p < 1.001 * llm_params(&m), "%s", nm);
            } else {
                hw_desc h;
                cr_assert_eq(hw_load(nm, &h, &e), 0, "%s", e.msg);
                double hbm = json_real_value(json_object_get(j, "hbm_bytes"));
                double pk = json_real_value(json_object_get(j, "peak_flops"));
                double bw = json_real_value(json_object_get(j, "hbm_bw"));
                cr_expect(hbm > 0.999 * h.hbm_bytes && hbm < 1.001 * h.hbm_bytes, "%s", nm);
                cr_expect(pk > 0.999 * h.peak_flops && pk < 1.001 * h.peak_flops, "%s", nm);
                cr_expect(bw > 0.999 * h.hbm_bw && bw < 1.001 * h.hbm_bw, "%s", nm);
            }
        }
        cr_expect_eq(json_array_size(arr), i, "%s: %zu listed, %zu files", keys[kind],
                     json_array_size(arr), i);
        free(names);
    }
    json_decref(root);
    free(out);
    /* the text shows every name too */
    char *text = run_capture("build/tailsim models");
    cr_expect(strstr(text, "qwen2.5-7b") && strstr(text, "llama-3.1-70b") &&
                  strstr(text, "h100") && strstr(text, "h200"), "%s", text);
    free(text);
}

Test(safety_keys, models_refuses_a_description_that_does_not_load)
{
    /* a data root of its own: one good model, one with an unknown key */
    char cmd[2048], *out, *err;
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/root/models/llm %s/root/models/hw && cp '%s/models/llm/qwen2.5-7b.ini' "
             "%s/root/models/llm/ && cp '%s/models/hw/h100.ini' %s/root/models/hw/ && "
             "printf '[model]\\nlayers = 2\\nwings = 2\\n' > %s/root/models/llm/broken.ini",
             dir, dir, ts_data_root(), dir, ts_data_root(), dir, dir);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "TAILSIM_DATA=%s/root build/tailsim models", dir);
    cr_expect_eq(run_split(cmd, &out, &err), 1, "%s", err);
    cr_expect(strstr(err, "broken.ini:3") && strstr(err, "unknown key 'wings'"), "%s", err);
    cr_expect_str_empty(out, "half a listing on stdout: %s", out);
    free(out);
    free(err);
    /* without it, the root lists what it holds */
    snprintf(cmd, sizeof cmd, "rm %s/root/models/llm/broken.ini && TAILSIM_DATA=%s/root "
             "build/tailsim models --json", dir, dir);
    cr_expect_eq(run_split(cmd, &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "\"qwen2.5-7b\"") && !strstr(out, "llama"), "%s", out);
    free(out);
    free(err);
    /* and an unknown model names what there is in this root */
    snprintf(cmd, sizeof cmd, "TAILSIM_DATA=%s/root build/tailsim memory '%s/scenarios/"
             "qwen7b-64gpu.ini' --set model.name=qwen9", dir, ts_data_root());
    cr_expect_eq(run_split(cmd, &out, &err), 1, "%s", err);
    cr_expect(strstr(err, "key 'model.name': unknown model 'qwen9'") &&
                  strstr(err, "available: qwen2.5-7b (details: tailsim models)"), "%s", err);
    free(out);
    free(err);
}

Test(safety_keys, installed_binary_finds_its_data_from_anywhere, .timeout = 240)
{
    /* make install into a temporary PREFIX (without rebuilding: -o keeps
     * this build's binary, sanitizers and all), then run it from a directory
     * that holds nothing, with no TAILSIM_DATA: it must find scenarios,
     * models and gnuplot scripts in PREFIX/share/tailsim and simulate exactly
     * as the build tree's binary does */
    char cmd[4096], *out, *err;
    snprintf(cmd, sizeof cmd,
             "env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -o build/tailsim install "
             "PREFIX=%s/p", dir);
    cr_assert_eq(run_split(cmd, &out, &err), 0, "make install: %s", err);
    free(out);
    free(err);
    struct stat sb;
    snprintf(cmd, sizeof cmd, "%s/p/share/tailsim/reports/report.c", dir);
    cr_expect_neq(stat(cmd, &sb), 0, "sources installed as data");
    snprintf(cmd, sizeof cmd, "mkdir -p %s/elsewhere && cd %s/elsewhere && env -u TAILSIM_DATA "
             "%s/p/bin/tailsim rlstep qwen7b-64gpu --no-wall --json", dir, dir, dir);
    cr_assert_eq(run_split(cmd, &out, &err), 0, "installed rlstep: %s", err);
    char *ref = run_capture("build/tailsim rlstep qwen7b-64gpu --no-wall --json");
    cr_expect_str_eq(out, ref, "the installed binary simulates differently");
    free(ref);
    free(out);
    free(err);
    /* its data root is PREFIX/share/tailsim */
    snprintf(cmd, sizeof cmd, "cd %s/elsewhere && env -u TAILSIM_DATA %s/p/bin/tailsim models "
             "--json", dir, dir);
    cr_assert_eq(run_split(cmd, &out, &err), 0, "%s", err);
    char want[600];
    snprintf(want, sizeof want, "\"data_root\": \"%s/p/share/tailsim\"", dir);
    cr_expect(strstr(out, want), "%s", out);
    free(out);
    free(err);
    /* a staged install (DESTDIR) runs where it was staged */
    snprintf(cmd, sizeof cmd,
             "env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make -s -o build/tailsim install "
             "DESTDIR=%s/stage PREFIX=/opt/ts && cd %s/elsewhere && env -u TAILSIM_DATA "
             "%s/stage/opt/ts/bin/tailsim keys rollout", dir, dir, dir);
    cr_expect_eq(run_split(cmd, &out, &err), 0, "staged install: %s", err);
    cr_expect(strstr(out, "rollout.tp "), "%s", out);
    free(out);
    free(err);
    /* and draws with the installed gnuplot scripts */
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    snprintf(cmd, sizeof cmd, "cd %s/elsewhere && env -u TAILSIM_DATA %s/p/bin/tailsim rlstep "
             "qwen7b-64gpu --db r.db && env -u TAILSIM_DATA %s/p/bin/tailsim report --db r.db "
             "-o out", dir, dir, dir);
    cr_expect_eq(run_split(cmd, &out, &err), 0, "installed report: %s", err);
    snprintf(cmd, sizeof cmd, "%s/elsewhere/out/gantt.png", dir);
    cr_expect_eq(stat(cmd, &sb), 0, "no %s", cmd);
    free(out);
    free(err);
}
