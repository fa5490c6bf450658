/*
 * Sweep grids (see grid.h for the file format).  The reader is libinih with
 * a line-counting stream reader (Debian's libinih passes no line numbers to
 * handlers), like the scenario reader.  Each list item is checked by
 * assigning it to a scratch scenario through the scenario key table, so a
 * grid accepts exactly the values a scenario file or --set would.  The
 * cartesian product is only counted here; a configuration is decoded from
 * its index on demand (grid_config), so a million configurations cost no
 * memory.
 */
#include "sweep/grid.h"

#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sim/policy/policy.h"

void grid_init(grid *g, const char *label, const char *scenario)
{
    memset(g, 0, sizeof *g);
    snprintf(g->path, sizeof g->path, "%s", label);
    snprintf(g->scenario, sizeof g->scenario, "%s", scenario);
    snprintf(g->command, sizeof g->command, "rlstep");
    g->steps = 1;
    g->n_configs = 1;
}

void grid_free(grid *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_dims; i++)
        free(g->dim[i].vals);
    g->n_dims = 0;
    g->n_configs = 1;
}

/* Where a message points: "grid.ini:12: " or "--gpus: ". */
static int where(ts_err *e, const grid *g, int line, const char *origin)
{
    if (line > 0)
        return ts_err_prefix(e, "%s:%d: ", g->path, line);
    return ts_err_prefix(e, "%s: ", origin ? origin : g->path);
}

/* Trims spaces and tabs at both ends in place; returns the start. */
static char *trim(char *s)
{
    s += strspn(s, " \t");
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = 0;
    return s;
}

int grid_add_dim(grid *g, const char *section, const char *key, const char *list, int line,
                 const char *origin, ts_err *e)
{
    grid_dim *d = &g->dim[g->n_dims];
    char *buf = NULL;
    scenario scratch;
    memset(&scratch, 0, sizeof scratch);
    for (size_t i = 0; i < g->n_dims; i++)
        if (!strcmp(g->dim[i].section, section) && !strcmp(g->dim[i].key, key)) {
            ts_errf(e, "key '%s.%s' given twice", section, key);
            goto fail;
        }
    if (g->n_dims == GRID_MAX_DIMS) {
        ts_errf(e, "key '%s.%s': more than %d swept keys", section, key, GRID_MAX_DIMS);
        goto fail;
    }
    if (strlen(section) >= sizeof d->section || strlen(key) >= sizeof d->key) {
        ts_errf(e, "unknown key '%s.%s'", section, key);
        goto fail;
    }
    memset(d, 0, sizeof *d);
    snprintf(d->section, sizeof d->section, "%s", section);
    snprintf(d->key, sizeof d->key, "%s", key);
    d->line = line;
    size_t len = strlen(list);
    if (!(buf = malloc(len + 1)) || !(d->vals = calloc(len / 2 + 1, sizeof *d->vals))) {
        ts_errf(e, "key '%s.%s': out of memory", section, key);
        goto fail;
    }
    memcpy(buf, list, len + 1);
    char *t = trim(buf);
    size_t tl = strlen(t);
    if (tl >= 2 && t[0] == '"' && t[tl - 1] == '"') {
        /* one value, verbatim: may hold commas or be empty */
        if (tl - 2 >= SCN_STR) {
            ts_errf(e, "key '%s.%s': value longer than %d characters", section, key, SCN_STR - 1);
            goto fail;
        }
        snprintf(d->vals[0], SCN_STR, "%.*s", (int)(tl - 2), t + 1);
        d->n = 1;
    } else {
        if (!*t) {
            ts_errf(e, "key '%s.%s': empty list (give at least one value)", section, key);
            goto fail;
        }
        for (char *p = t;;) {
            char *comma = strchr(p, ',');
            if (comma)
                *comma = 0;
            char *item = trim(p);
            if (!*item) {
                ts_errf(e, "key '%s.%s': empty item %zu in the list '%s'", section, key,
                        d->n + 1, list);
                goto fail;
            }
            if (strlen(item) >= SCN_STR) {
                ts_errf(e, "key '%s.%s': value longer than %d characters", section, key,
                        SCN_STR - 1);
                goto fail;
            }
            snprintf(d->vals[d->n++], SCN_STR, "%s", item);
            if (!comma)
                break;
            p = comma + 1;
        }
    }
    for (size_t i = 0; i < d->n; i++) {
        if (scenario_set_key(&scratch, section, key, d->vals[i], e))
            goto fail;
        if (!strcmp(section, "policy") && !strcmp(key, "name") && d->vals[i][0] &&
            !policy_find(d->vals[i])) {
            ts_errf(e, "key 'policy.name': unknown policy '%s'", d->vals[i]);
            goto fail;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(d->vals[i], d->vals[j])) {
                ts_errf(e, "key '%s.%s': value '%s' listed twice", section, key, d->vals[i]);
                goto fail;
            }
    }
    if (g->n_configs > GRID_MAX_CONFIGS / d->n) {
        ts_errf(e, "key '%s.%s': the grid would exceed %d configurations", section, key,
                GRID_MAX_CONFIGS);
        goto fail;
    }
    g->n_configs *= d->n;
    g->n_dims++;
    free(buf);
    return 0;
fail:
    free(buf);
    free(d->vals);
    memset(d, 0, sizeof *d);
    return where(e, g, line, origin);
}

typedef struct load_ctx {
    grid *g;
    ts_err *e;
    scenario_ini_lines in; /* its line, cont and failed are the parse's */
} load_ctx;

/* The [sweep] section's own keys. */
static int sweep_key(load_ctx *c, const char *key, const char *value)
{
    grid *g = c->g;
    ts_err *e = c->e;
    if (!strcmp(key, "scenario")) {
        if (!*value || strlen(value) >= sizeof g->scenario)
            return ts_errf(e, "key 'sweep.scenario': expected a scenario name or path");
        snprintf(g->scenario, sizeof g->scenario, "%s", value);
        return 0;
    }
    if (!strcmp(key, "command")) {
        if (strcmp(value, "rlstep") && strcmp(value, "rollout"))
            return ts_errf(e, "key 'sweep.command': '%s' is not rlstep or rollout", value);
        snprintf(g->command, sizeof g->command, "%s", value);
        return 0;
    }
    if (!strcmp(key, "steps")) {
        int64_t v;
        if (ts_parse_i64(value, 1, 100000, &v))
            return ts_errf(e, "key 'sweep.steps': '%s' is not an integer in [1, 100000]", value);
        g->steps = (int)v;
        return 0;
    }
    return ts_errf(e, "unknown key 'sweep.%s' (scenario, command, steps, policy)", key);
}

/* An indented line after a list continues it (inih passes it as the same
 * key again): "seed = 1,2,3" then "  4,5,6" (no trailing comma: an empty
 * item is an error wherever it is).  Re-adds the last dimension
 * with the joined list, so every value is checked again and the count stays
 * right.  Returns 0 or -1. */
static int continue_list(load_ctx *c, const char *section, const char *key, const char *value)
{
    grid *g = c->g;
    grid_dim *d = &g->dim[g->n_dims - 1];
    size_t cap = d->n * SCN_STR + strlen(value) + 2, o = 0;
    char *joined = malloc(cap);
    if (!joined)
        return ts_errf(c->e, "%s:%d: out of memory", g->path, c->in.line);
    for (size_t i = 0; i < d->n; i++) {
        if (strchr(d->vals[i], ',') || !d->vals[i][0]) {
            free(joined);
            return ts_errf(c->e, "%s:%d: key '%s.%s': a quoted value cannot be continued",
                           g->path, c->in.line, section, key);
        }
        o += (size_t)snprintf(joined + o, cap - o, "%s,", d->vals[i]);
    }
    snprintf(joined + o, cap - o, "%s", value);
    g->n_configs /= d->n;
    free(d->vals);
    memset(d, 0, sizeof *d);
    g->n_dims--;
    int rc = grid_add_dim(g, section, key, joined, c->in.line, NULL, c->e);
    free(joined);
    return rc;
}

static int grid_handler(void *user, const char *section, const char *key, const char *value)
{
    load_ctx *c = user;
    if (c->in.failed)
        return 0;
    int rc;
    const char *sec = !strcmp(section, "sweep") && !strcmp(key, "policy") ? "policy" : section;
    const char *k = sec != section ? "name" : key;
    if (c->in.cont && c->g->n_dims && !strcmp(c->g->dim[c->g->n_dims - 1].section, sec) &&
        !strcmp(c->g->dim[c->g->n_dims - 1].key, k)) {
        rc = continue_list(c, sec, k, value);
    } else if (!strcmp(section, "sweep") && !strcmp(key, "policy")) {
        rc = grid_add_dim(c->g, "policy", "name", value, c->in.line, NULL, c->e);
    } else if (!strcmp(section, "sweep")) {
        rc = sweep_key(c, key, value);
        if (rc)
            ts_err_prefix(c->e, "%s:%d: ", c->g->path, c->in.line);
    } else {
        rc = grid_add_dim(c->g, section, key, value, c->in.line, NULL, c->e);
    }
    if (rc) {
        c->in.failed = 1;
        return 0;
    }
    return 1;
}

int grid_load(const char *path, grid *g, ts_err *e)
{
    grid_init(g, path, "");
    FILE *f = fopen(path, "r");
    if (!f)
        return ts_errf(e, "%s: cannot open grid file", path);
    g->from_file = 1;
    load_ctx c = {g, e, {.f = f, .path = g->path, .e = e, .no_long = 1}};
    int rc = ini_parse_stream(scenario_ini_read, &c.in, grid_handler, &c);
    fclose(f);
    if (!c.in.failed && rc > 0)
        ts_errf(e, "%s:%d: syntax error (expected [section] or key = value)", path, rc);
    else if (!c.in.failed && rc < 0)
        ts_errf(e, "%s: cannot read grid file", path);
    else if (!c.in.failed && !g->scenario[0])
        ts_errf(e, "%s: missing required key 'sweep.scenario'", path);
    if (c.in.failed || rc || !g->scenario[0]) {
        grid_free(g);
        return -1;
    }
    return 0;
}

int grid_check_base(const grid *g, ts_err *e)
{
    scenario *s = malloc(sizeof *s);
    if (!s)
        return ts_errf(e, "%s: out of memory", g->path);
    int rc = scenario_load(g->scenario, s, e);
    free(s);
    if (rc && g->from_file)
        return ts_err_prefix(e, "%s: key 'sweep.scenario': ", g->path);
    return rc;
}

void grid_config(const grid *g, size_t config, size_t *idx)
{
    for (size_t i = g->n_dims; i-- > 0;) {
        idx[i] = config % g->dim[i].n;
        config /= g->dim[i].n;
    }
}

size_t grid_config_sets(const grid *g, size_t config, char (*sets)[GRID_SET_MAX])
{
    size_t idx[GRID_MAX_DIMS];
    grid_config(g, config, idx);
    for (size_t i = 0; i < g->n_dims; i++)
        snprintf(sets[i], GRID_SET_MAX, "%s.%s=%s", g->dim[i].section, g->dim[i].key,
                 g->dim[i].vals[idx[i]]);
    return g->n_dims;
}
