/*
 * The scenario keys as a user reads them: scenario_key_info() (one key's
 * type, default, range and meaning, for `tailsim keys`) and
 * scenario_to_ini() (the effective scenario as INI text, every key, which
 * a stored run keeps).  Both walk the one key table (sim/scenario_impl.h)
 * the reader validates against, so the listing, the writer and the reader
 * cannot disagree on a key.
 */
#define _DEFAULT_SOURCE /* realpath */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sim/scenario.h"
#include "sim/scenario_impl.h"

/* v formatted as %g does, with more significant digits when six do not
 * read back as v (never fewer: 20 stays "20", not "2e+01"). */
static void format_real(double v, char *buf, size_t n)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

int scenario_key_info(size_t i, scn_key_info *out)
{
    static const char *const type_names[] = {"int", "real", "string", "bool", "u64"};
    static const scn_key_type types[] = {SCN_KEY_INT, SCN_KEY_REAL, SCN_KEY_STR, SCN_KEY_BOOL,
                                         SCN_KEY_U64};
    if (i >= scn_n_keys)
        return -1;
    const key_def *k = &scn_keys[i];
    scenario d;
    scenario_defaults(&d);
    const char *p = (const char *)&d + k->off;
    char lo[32], hi[32];
    memset(out, 0, sizeof *out);
    out->section = k->section;
    out->key = k->key;
    out->type = types[k->type];
    out->type_name = type_names[k->type];
    out->min = k->min;
    out->max = k->max;
    out->required = scn_key_required(k);
    out->help = k->help;
    switch (k->type) {
    case K_INT:
        snprintf(out->def, sizeof out->def, "%d", *(const int *)p);
        snprintf(out->range, sizeof out->range, "[%.0f, %.0f]", k->min, k->max);
        break;
    case K_DBL:
        format_real(*(const double *)p, out->def, sizeof out->def);
        format_real(k->min, lo, sizeof lo);
        format_real(k->max, hi, sizeof hi);
        snprintf(out->range, sizeof out->range, "[%s, %s]", lo, hi);
        break;
    case K_BOOL:
        snprintf(out->def, sizeof out->def, "%s", *(const int *)p ? "true" : "false");
        snprintf(out->range, sizeof out->range, "true/false");
        break;
    case K_U64:
        snprintf(out->def, sizeof out->def, "%llu", (unsigned long long)*(const uint64_t *)p);
        out->min = 0;
        out->max = (double)INT64_MAX;
        snprintf(out->range, sizeof out->range, "[0, 2^63-1]");
        break;
    case K_STR:
        snprintf(out->def, sizeof out->def, "%s", p);
        snprintf(out->range, sizeof out->range, "up to %d characters", (int)k->max - 1);
        break;
    }
    if (out->required)
        out->def[0] = 0;
    return 0;
}

/* 1 when the INI reader reads v back as v: no control character, no
 * leading or trailing blank, no ';' that starts an inline comment (at the
 * start or after a blank). */
static int ini_value_ok(const char *v)
{
    size_t n = strlen(v);
    if (n && (v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' || v[n - 1] == '\t'))
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c < 0x20 || c == 0x7f)
            return 0;
        if (c == ';' && (i == 0 || v[i - 1] == ' ' || v[i - 1] == '\t'))
            return 0;
    }
    return 1;
}

/* 1 for the keys whose value names a file resolved against the scenario's
 * directory. */
static int key_is_file(const key_def *k)
{
    return k->off == OFF(trace_file) || k->off == OFF(trace_reward_file) ||
           k->off == OFF(dcp.file);
}

char *scenario_to_ini(const scenario *s, ts_err *e)
{
    size_t cap = 8192, len = 0;
    char *out = malloc(cap);
    if (!out) {
        ts_errf(e, "out of memory writing the scenario");
        return NULL;
    }
    out[0] = 0;
    for (size_t i = 0; i < scn_n_keys; i++) {
        const key_def *k = &scn_keys[i];
        const char *p = (const char *)s + k->off;
        char val[2 * SCN_STR + 8], line[2 * SCN_STR + 128];
        switch (k->type) {
        case K_INT:
            snprintf(val, sizeof val, "%d", *(const int *)p);
            break;
        case K_DBL:
            format_real(*(const double *)p, val, sizeof val);
            break;
        case K_BOOL:
            snprintf(val, sizeof val, "%s", *(const int *)p ? "true" : "false");
            break;
        case K_U64:
            snprintf(val, sizeof val, "%llu", (unsigned long long)*(const uint64_t *)p);
            break;
        case K_STR:
            snprintf(val, sizeof val, "%.*s", (int)k->max, p);
            if (key_is_file(k) && val[0] && val[0] != '/' && strncmp(val, "shared:", 7)) {
                char dir[4096];
                if (!realpath(s->dir, dir))
                    snprintf(dir, sizeof dir, "%s", s->dir);
                snprintf(val, sizeof val, "%.*s/%.*s", SCN_STR, dir, SCN_STR, p);
                if (strlen(val) >= (size_t)k->max) {
                    ts_errf(e, "key '%s.%s': the resolved path is longer than %d characters",
                            k->section, k->key, (int)k->max - 1);
                    goto fail;
                }
            }
            if (!ini_value_ok(val)) {
                ts_errf(e, "key '%s.%s': its value cannot be written as INI (a control "
                           "character, a leading or trailing blank, or a ';' comment)",
                        k->section, k->key);
                goto fail;
            }
            break;
        }
        int head = !i || strcmp(k->section, scn_keys[i - 1].section);
        int kl = snprintf(line, sizeof line, "%s = %s\n", k->key, val);
        if (kl - 1 > 198) {
            ts_errf(e, "key '%s.%s': the line would be longer than 198 characters", k->section,
                    k->key);
            goto fail;
        }
        char sec[48];
        int sl = head ? snprintf(sec, sizeof sec, "%s[%s]\n", i ? "\n" : "", k->section) : 0;
        if (len + (size_t)sl + (size_t)kl + 1 > cap) {
            char *grown = realloc(out, cap * 2);
            if (!grown) {
                ts_errf(e, "out of memory writing the scenario");
                goto fail;
            }
            out = grown;
            cap *= 2;
        }
        if (head)
            len += (size_t)snprintf(out + len, cap - len, "%s", sec);
        len += (size_t)snprintf(out + len, cap - len, "%s", line);
    }
    return out;
fail:
    free(out);
    return NULL;
}
