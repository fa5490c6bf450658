/*
 * Sweep grids (see grid.h for the file format).  The reader is libinih fed
 * by the strict line reader every INI reader shares (common/ini_lines.h:
 * line numbers, long lines, NUL bytes, unclosed sections), here with
 * continuation lines allowed, since a long list may go on over indented
 * lines.  Each list item is checked by assigning it to a scratch scenario
 * through the scenario key table, so a grid accepts exactly the values a
 * scenario file or --set would; a key (of [sweep] or a swept one) given
 * twice is an error naming both lines.  Values are checked once each and
 * duplicates found through a hash set, so reading a list is linear in its
 * length however many lines it spans.  The cartesian product is only
 * counted here; a configuration is decoded from its index on demand
 * (grid_config), so a million configurations cost no memory.
 */
#include "sweep/grid.h"

#include <ini.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ini_lines.h"
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
    for (size_t i = 0; i < g->n_dims; i++) {
        free(g->dim[i].vals);
        memset(&g->dim[i], 0, sizeof g->dim[i]);
    }
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

/* A dimension's values as an open-addressing hash set (index + 1 into
 * d->vals; 0: empty slot), so that a duplicate is found in O(1) and a list
 * of n values, however many lines it spans, is read in O(n). */
typedef struct vset {
    size_t *slot;
    size_t cap; /* a power of two, at least twice the values */
} vset;

static void vset_free(vset *vs)
{
    free(vs->slot);
    vs->slot = NULL;
    vs->cap = 0;
}

static size_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

/* Adds value i of d (values 0..i-1 already in the set).  Returns 0, 1 when
 * an equal value is there already (its index in *dup), -1 out of memory. */
static int vset_add(vset *vs, const grid_dim *d, size_t i, size_t *dup)
{
    if (2 * (i + 1) > vs->cap) {
        size_t nc = vs->cap ? 2 * vs->cap : 16;
        size_t *ns = calloc(nc, sizeof *ns);
        if (!ns)
            return -1;
        free(vs->slot);
        vs->slot = ns;
        vs->cap = nc;
        for (size_t j = 0; j < i; j++) {
            size_t h = hash_str(d->vals[j]) & (nc - 1);
            while (ns[h])
                h = (h + 1) & (nc - 1);
            ns[h] = j + 1;
        }
    }
    size_t h = hash_str(d->vals[i]) & (vs->cap - 1);
    for (; vs->slot[h]; h = (h + 1) & (vs->cap - 1))
        if (!strcmp(d->vals[vs->slot[h] - 1], d->vals[i])) {
            *dup = vs->slot[h] - 1;
            return 1;
        }
    vs->slot[h] = i + 1;
    return 0;
}

/* Appends one value to d after checking it (the scenario key table, the
 * policy registry, duplicates); other is the product of the other
 * dimensions' sizes.  Returns 0 or -1 (unprefixed message). */
static int dim_push(grid_dim *d, const char *item, size_t other, vset *vs, ts_err *e)
{
    char q[TS_QUOTE_BUF];
    scenario scratch;
    if (strlen(item) >= SCN_STR)
        return ts_errf(e, "key '%s.%s': value longer than %d characters", d->section, d->key,
                       SCN_STR - 1);
    if (other * (d->n + 1) > GRID_MAX_CONFIGS)
        return ts_errf(e, "key '%s.%s': the grid would exceed %d configurations", d->section,
                       d->key, GRID_MAX_CONFIGS);
    memset(&scratch, 0, sizeof scratch);
    if (scenario_set_key(&scratch, d->section, d->key, item, e))
        return -1;
    if (!strcmp(d->section, "policy") && !strcmp(d->key, "name") && item[0] &&
        !policy_find(item))
        return ts_errf(e, "key 'policy.name': unknown policy '%s'",
                       ts_quote(item, TS_QUOTE_MAX, q, sizeof q));
    if (d->n == d->cap) {
        size_t nc = d->cap ? 2 * d->cap : 8;
        char(*nv)[SCN_STR] = realloc(d->vals, nc * sizeof *nv);
        if (!nv)
            return ts_errf(e, "key '%s.%s': out of memory", d->section, d->key);
        d->vals = nv;
        d->cap = nc;
    }
    snprintf(d->vals[d->n], SCN_STR, "%s", item);
    size_t dup;
    int r = vset_add(vs, d, d->n, &dup);
    if (r < 0)
        return ts_errf(e, "key '%s.%s': out of memory", d->section, d->key);
    if (r > 0)
        return ts_errf(e, "key '%s.%s': value '%s' listed twice", d->section, d->key,
                       ts_quote(item, TS_QUOTE_MAX, q, sizeof q));
    d->n++;
    return 0;
}

/* Appends the comma-separated items of t (modified) to d.  Returns 0 or -1. */
static int dim_append(grid_dim *d, char *t, size_t other, vset *vs, ts_err *e)
{
    for (char *p = t;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = 0;
        char *item = trim(p);
        if (!*item)
            return ts_errf(e, "key '%s.%s': empty item %zu in the list", d->section, d->key,
                           d->n + 1);
        if (dim_push(d, item, other, vs, e))
            return -1;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

/* grid_add_dim() keeping the value set in vs (freed first) for continuation
 * lines, and telling in *quoted whether the value was one quoted string. */
static int add_dim(grid *g, const char *section, const char *key, const char *list, int line,
                   const char *origin, vset *vs, int *quoted, ts_err *e)
{
    grid_dim *d = &g->dim[g->n_dims];
    char *buf = NULL;
    vset_free(vs);
    *quoted = 0;
    if (!scenario_has_key(section, key)) {
        scenario_unknown_key(section, key, e);
        return where(e, g, line, origin);
    }
    for (size_t i = 0; i < g->n_dims; i++)
        if (!strcmp(g->dim[i].section, section) && !strcmp(g->dim[i].key, key)) {
            if (line > 0 && g->dim[i].line > 0)
                ts_errf(e, "key '%s.%s' given twice (first on line %d)", section, key,
                        g->dim[i].line);
            else
                ts_errf(e, "key '%s.%s' given twice", section, key);
            return where(e, g, line, origin);
        }
    if (g->n_dims == GRID_MAX_DIMS) {
        ts_errf(e, "key '%s.%s': more than %d swept keys", section, key, GRID_MAX_DIMS);
        return where(e, g, line, origin);
    }
    memset(d, 0, sizeof *d);
    snprintf(d->section, sizeof d->section, "%s", section);
    snprintf(d->key, sizeof d->key, "%s", key);
    d->line = line;
    size_t len = strlen(list);
    if (!(buf = malloc(len + 1))) {
        ts_errf(e, "key '%s.%s': out of memory", section, key);
        goto fail;
    }
    memcpy(buf, list, len + 1);
    char *t = trim(buf);
    size_t tl = strlen(t);
    if (tl >= 2 && t[0] == '"' && t[tl - 1] == '"') {
        /* one value, verbatim: may hold commas or be empty */
        t[tl - 1] = 0;
        *quoted = 1;
        if (dim_push(d, t + 1, g->n_configs, vs, e))
            goto fail;
    } else if (!*t) {
        ts_errf(e, "key '%s.%s': empty list (give at least one value)", section, key);
        goto fail;
    } else if (dim_append(d, t, g->n_configs, vs, e)) {
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
    vset_free(vs);
    return where(e, g, line, origin);
}

int grid_add_dim(grid *g, const char *section, const char *key, const char *list, int line,
                 const char *origin, ts_err *e)
{
    vset vs = {NULL, 0};
    int quoted;
    int rc = add_dim(g, section, key, list, line, origin, &vs, &quoted, e);
    vset_free(&vs);
    return rc;
}

typedef struct load_ctx {
    grid *g;
    ts_err *e;
    ts_ini_lines in;  /* its line, cont and failed are the parse's */
    vset vs;          /* the last dimension's values, for its continuation lines */
    int last_quoted;  /* the last dimension is one quoted value */
    int sweep_line[3]; /* line of sweep.scenario, command, steps (0: not given) */
} load_ctx;

/* The [sweep] section's own keys.  Returns 0 or -1 (unprefixed). */
static int sweep_key(load_ctx *c, const char *key, const char *value)
{
    static const char *const names[] = {"scenario", "command", "steps"};
    grid *g = c->g;
    ts_err *e = c->e;
    char q[TS_QUOTE_BUF];
    int k = 0;
    while (k < 3 && strcmp(key, names[k]))
        k++;
    if (k == 3)
        return ts_errf(e, "unknown key 'sweep.%s' (scenario, command, steps, policy)",
                       ts_quote(key, 32, q, sizeof q));
    if (c->sweep_line[k])
        return ts_errf(e, "key 'sweep.%s' given twice (first on line %d)", key,
                       c->sweep_line[k]);
    c->sweep_line[k] = c->in.line;
    if (k == 0) {
        if (!*value || strlen(value) >= sizeof g->scenario)
            return ts_errf(e, "key 'sweep.scenario': expected a scenario name or path");
        snprintf(g->scenario, sizeof g->scenario, "%s", value);
        return 0;
    }
    if (k == 1) {
        if (strcmp(value, "rlstep") && strcmp(value, "rollout"))
            return ts_errf(e, "key 'sweep.command': '%s' is not rlstep or rollout",
                           ts_quote(value, TS_QUOTE_MAX, q, sizeof q));
        snprintf(g->command, sizeof g->command, "%s", value);
        return 0;
    }
    int64_t v;
    if (ts_parse_i64(value, 1, 100000, &v))
        return ts_errf(e, "key 'sweep.steps': '%s' is not an integer in [1, 100000]",
                       ts_quote(value, TS_QUOTE_MAX, q, sizeof q));
    g->steps = (int)v;
    return 0;
}

/* An indented line after a list continues it (inih passes it as the same
 * key again): "seed = 1,2,3" then "  4,5,6" (no trailing comma: an empty
 * item is an error wherever it is).  Only the new values are checked, each
 * in O(1) (the dimension's value set), so a list of n values on any number
 * of lines reads in O(n).  Returns 0 or -1. */
static int continue_list(load_ctx *c, const char *value)
{
    grid *g = c->g;
    grid_dim *d = &g->dim[g->n_dims - 1];
    if (c->last_quoted)
        return ts_errf(c->e, "%s:%d: key '%s.%s': a quoted value cannot be continued", g->path,
                       c->in.line, d->section, d->key);
    size_t len = strlen(value);
    char *buf = malloc(len + 1);
    if (!buf)
        return ts_errf(c->e, "%s:%d: out of memory", g->path, c->in.line);
    memcpy(buf, value, len + 1);
    g->n_configs /= d->n;
    int rc = dim_append(d, trim(buf), g->n_configs, &c->vs, c->e);
    g->n_configs *= d->n;
    free(buf);
    return rc ? where(c->e, g, c->in.line, NULL) : 0;
}

static int grid_handler(void *user, const char *section, const char *key, const char *value)
{
    load_ctx *c = user;
    grid *g = c->g;
    char qk[TS_QUOTE_BUF];
    if (c->in.failed)
        return 0;
    int rc;
    const char *sec = !strcmp(section, "sweep") && !strcmp(key, "policy") ? "policy" : section;
    const char *k = sec != section ? "name" : key;
    if (!*section) {
        rc = ts_errf(c->e, "%s:%d: a key before any [section] (is this a grid file?)", g->path,
                     c->in.line);
    } else if (c->in.cont) {
        /* libinih passes the key of the line above: a list's, or a [sweep] key's */
        if (g->n_dims && !strcmp(g->dim[g->n_dims - 1].section, sec) &&
            !strcmp(g->dim[g->n_dims - 1].key, k))
            rc = continue_list(c, value);
        else
            rc = ts_errf(c->e, "%s:%d: indented line: only a list continues on indented lines, "
                               "and 'sweep.%s' is not one", g->path, c->in.line,
                         ts_quote(key, 32, qk, sizeof qk));
    } else if (!strcmp(section, "sweep") && strcmp(key, "policy")) {
        rc = sweep_key(c, key, value);
        if (rc)
            ts_err_prefix(c->e, "%s:%d: ", g->path, c->in.line);
    } else {
        rc = add_dim(g, sec, k, value, c->in.line, NULL, &c->vs, &c->last_quoted, c->e);
    }
    return rc ? ts_ini_fail(&c->in) : 1;
}

int grid_load(const char *path, grid *g, ts_err *e)
{
    grid_init(g, path, "");
    FILE *f = fopen(path, "r");
    if (!f)
        return ts_errf(e, "%s: cannot open grid file", path);
    g->from_file = 1;
    load_ctx c = {g, e, {.f = f, .path = g->path, .e = e, .allow_cont = 1}, {NULL, 0}, 0, {0}};
    int rc = ini_parse_stream(ts_ini_read, &c.in, grid_handler, &c);
    fclose(f);
    vset_free(&c.vs);
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
