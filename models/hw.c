/*
 * Hardware and LLM descriptions, read from INI files with libinih.
 *
 * hw_load_ini() fills an hw_desc from models/hw/<name>.ini (or a path), llm_load()
 * an llm_desc from models/llm/<name>.ini.  Both are table driven: every key
 * the file may hold has one row below naming its section, its field, its type
 * and its legal range, and whether it is required.  The handler given to
 * libinih checks each key against that table as it is read, so an unknown
 * section or key, a malformed number or a value out of range is reported with
 * the file, the line and the key; after the parse, each required key that
 * never appeared is reported with the file and the key.  Only the first error
 * is kept.  libinih's handler does not receive line numbers (the system
 * library is built without INI_HANDLER_LINENO), so the file is fed through
 * ini_parse_stream() by the strict line reader every INI reader shares
 * (common/ini_lines.h), which counts lines and refuses long lines, NUL
 * bytes and indented (continuation) lines; a key set twice is an error
 * naming both lines.  Errors quote a name or value only cut and sanitised,
 * and a value only under one of our keys: cluster.hw may point anywhere.
 *
 * Applying a calibration on top of the INI is models/hw_calib.c (hw_load());
 * this file reads INIs only and knows nothing of the cost model or the fit.
 *
 * These run once per scenario load, never on the simulator's hot path.  The
 * values themselves live in the INI files, with their sources in comments.
 * llm_params() counts parameters from the description (embedding once when
 * tied, biases and norms included); it cannot fail.
 */
#include "models/hw.h"

#include <ini.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ini_lines.h"
#include "common/util.h"

enum key_type { KT_DOUBLE, KT_INT, KT_BOOL, KT_STRING, KT_TILES };

typedef struct key_spec {
    const char *section;
    const char *key;
    enum key_type type;
    size_t offset;          /* offsetof() the field in the struct */
    size_t size;            /* buffer size, for KT_STRING */
                            /* KT_TILES: hw_desc's gemm_tiles list (hw keys only) */
    double min, max;        /* legal range (numbers) */
    int required;           /* 1: the file must set it */
} key_spec;

#define HW_D(sec, k, lo, hi, req) {sec, #k, KT_DOUBLE, offsetof(hw_desc, k), 0, lo, hi, req}
#define HW_I(sec, k, lo, hi, req) {sec, #k, KT_INT, offsetof(hw_desc, k), 0, lo, hi, req}

static const key_spec hw_keys[] = {
    HW_D("gpu", peak_flops, 1e12, 1e17, 1),
    HW_D("gpu", hbm_bw, 1e11, 1e14, 1),
    HW_D("gpu", hbm_bytes, 1e9, 1e13, 1),
    HW_I("gpu", sms, 1, 4096, 1),
    HW_D("gpu", l2_bytes, 0, 1e10, 0),
    HW_D("interconnect", nvlink_bw, 1e9, 1e14, 1),
    HW_D("interconnect", nvlink_lat, 0, 1e-2, 1),
    HW_D("interconnect", nic_bw, 1e8, 1e13, 1),
    HW_D("interconnect", nic_lat, 0, 1e-2, 1),
    HW_I("interconnect", gpus_per_node, 1, 1024, 1),
    HW_D("efficiency", gemm_eff, 0.01, 1, 0),
    HW_D("efficiency", gemm_half_flops, 0, 1e15, 0),
    HW_D("efficiency", gemm_lat_s, 0, 1e-3, 0),
    HW_D("efficiency", train_eff, 0.01, 1, 0),
    HW_D("efficiency", mem_eff, 0.01, 1, 0),
    HW_D("efficiency", attn_eff, 0.01, 1, 0),
    HW_I("efficiency", attn_fa_version, 2, 3, 0),
    HW_I("efficiency", attn_fa3, 0, 1, 0),
    HW_D("efficiency", launch_s, 0, 1e-3, 0),
    {"efficiency", "ew_row_bw_add", KT_DOUBLE, offsetof(hw_desc, ew_row_bw[0]), 0, 0, 1e14, 0},
    {"efficiency", "ew_row_bw_act", KT_DOUBLE, offsetof(hw_desc, ew_row_bw[1]), 0, 0, 1e14, 0},
    {"efficiency", "ew_row_bw_rope", KT_DOUBLE, offsetof(hw_desc, ew_row_bw[2]), 0, 0, 1e14, 0},
    {"efficiency", "ew_row_bw_norm", KT_DOUBLE, offsetof(hw_desc, ew_row_bw[3]), 0, 0, 1e14, 0},
    {"efficiency", "ew_row_bw_gather", KT_DOUBLE, offsetof(hw_desc, ew_row_bw[4]), 0, 0, 1e14, 0},
    HW_I("efficiency", tile_m, 1, 1024, 0),
    HW_I("efficiency", tile_n, 1, 1024, 0),
    HW_D("efficiency", gemm_mem_eff, 0, 1, 0),
    HW_D("efficiency", gemm_mem_lat_s, 0, 1e-3, 0),
    HW_D("efficiency", gemm_mem_fill_s, 0, 1e-3, 0),
    HW_D("efficiency", gemm_mem_fill_bytes, 1, 1e12, 0),
    {"efficiency", "gemm_tiles", KT_TILES, offsetof(hw_desc, gemm_tiles), 0, 0, 0, 0},
    HW_D("efficiency", gemm_splitk_bytes, 0, 64, 0),
    HW_D("efficiency", gemm_mix, 0, 1, 0),
    HW_D("efficiency", ar_eff, 0.01, 1, 0),
    HW_D("efficiency", coll_lat_s, 0, 1e-2, 0),
    HW_D("efficiency", coll_lat_graph_s, 0, 1e-2, 0),
    HW_D("efficiency", car_lat_s, 0, 1e-2, 0),
    HW_D("efficiency", car_max_bytes, 0, 1e12, 0),
    HW_D("host", eager_launch_s, 0, 1e-3, 0),
    HW_D("host", sched_s, 0, 1, 0),
    HW_D("host", sched_req_s, 0, 1e-2, 0),
    HW_D("host", pcie_bw, 1e8, 1e13, 0),
    HW_D("host", host_mem_bw, 1e9, 1e14, 0),
    HW_D("host", host_bytes, 1e9, 1e15, 0),
    {"efficiency", "calibration", KT_STRING, offsetof(hw_desc, calibration),
     sizeof ((hw_desc *)0)->calibration, 0, 0, 0},
};

#define LLM_I(k, lo, hi) {"model", #k, KT_INT, offsetof(llm_desc, k), 0, lo, hi, 1}
#define LLM_B(k) {"model", #k, KT_BOOL, offsetof(llm_desc, k), 0, 0, 1, 1}

static const key_spec llm_keys[] = {
    LLM_I(layers, 1, 1000),
    LLM_I(hidden, 1, 1 << 20),
    LLM_I(heads, 1, 4096),
    LLM_I(kv_heads, 1, 4096),
    LLM_I(head_dim, 1, 4096),
    LLM_I(ffn, 1, 1 << 22),
    LLM_I(vocab, 0, 1 << 24),
    LLM_B(tied),
    LLM_B(gated),
    LLM_B(qkv_bias),
};

#define MAX_KEYS 48

typedef struct parse_state {
    const char *path;
    const key_spec *keys;
    size_t n_keys;
    void *out;
    int seen[MAX_KEYS];     /* line each key was set on (0: not yet) */
    ts_ini_lines in;        /* the strict line source: line numbers, failure */
} parse_state;

/* Keeps the first error as "PATH:LINE: what"; returns 0 (stop). */
static int fail(parse_state *ps, const char *what)
{
    if (!ps->in.failed)
        ts_errf(ps->in.e, "%s:%d: %s", ps->path, ps->in.line, what);
    return ts_ini_fail(&ps->in);
}

/* Parses a gemm_tiles value, "MxN:REL ..." (one to HW_GEMM_TILES_MAX
 * kernels, M and N in [1, 1024], REL in (0, 1], no shape twice), into hw.
 * Returns 0, or -1 with what (n bytes) saying what is wrong; hw is left
 * unchanged on failure. */
static int parse_tiles(const char *value, hw_desc *hw, char *what, size_t n)
{
    hw_gemm_tile t[HW_GEMM_TILES_MAX];
    int count = 0;
    const char *p = value;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        if (count == HW_GEMM_TILES_MAX) {
            snprintf(what, n, "key 'gemm_tiles': more than %d kernels", HW_GEMM_TILES_MAX);
            return -1;
        }
        char tok[64];
        size_t len = strcspn(p, " \t");
        if (len >= sizeof tok) {
            snprintf(what, n, "key 'gemm_tiles': kernel %d is too long", count + 1);
            return -1;
        }
        memcpy(tok, p, len);
        tok[len] = 0;
        p += len;
        int64_t tm, tn;
        double rel;
        char *x = strchr(tok, 'x'), *c = strchr(tok, ':');
        if (x && c && x < c) {
            *x = 0;
            *c = 0;
        }
        if (!x || !c || x > c || ts_parse_i64(tok, 1, 1024, &tm) ||
            ts_parse_i64(x + 1, 1, 1024, &tn) || ts_parse_double(c + 1, 0, 1, &rel) ||
            !(rel > 0)) {
            snprintf(what, n,
                     "key 'gemm_tiles': kernel %d is not ROWSxCOLS:REL (rows and columns "
                     "1-1024, REL in (0, 1])",
                     count + 1);
            return -1;
        }
        for (int i = 0; i < count; i++)
            if (t[i].m == (int)tm && t[i].n == (int)tn) {
                snprintf(what, n, "key 'gemm_tiles': kernel %d repeats tile %dx%d", count + 1,
                         (int)tm, (int)tn);
                return -1;
            }
        t[count++] = (hw_gemm_tile){(int)tm, (int)tn, rel};
    }
    if (count == 0) {
        snprintf(what, n, "key 'gemm_tiles': no kernel given");
        return -1;
    }
    memcpy(hw->gemm_tiles, t, sizeof t);
    hw->n_gemm_tiles = count;
    return 0;
}

/* Names and values from the file are quoted only through ts_quote(), and a
 * value only once its section and key are ours: the file may be anything
 * (cluster.hw takes a path). */
static int handler(void *user, const char *section, const char *name, const char *value)
{
    parse_state *ps = user;
    char what[256], q[TS_QUOTE_BUF];
    if (ps->in.failed)
        return 0;
    if (!*section)
        return fail(ps, "a key before any [section] (is this a hardware or model INI?)");
    int known_section = 0;
    for (size_t i = 0; i < ps->n_keys; i++) {
        const key_spec *k = &ps->keys[i];
        if (strcmp(section, k->section))
            continue;
        known_section = 1;
        if (strcmp(name, k->key))
            continue;
        if (ps->seen[i]) {
            snprintf(what, sizeof what, "key '%s' set twice (first on line %d)", name,
                     ps->seen[i]);
            return fail(ps, what);
        }
        ps->seen[i] = ps->in.line;
        char *field = (char *)ps->out + k->offset;
        switch (k->type) {
        case KT_DOUBLE: {
            double v;
            if (ts_parse_double(value, -1e300, 1e300, &v)) {
                snprintf(what, sizeof what, "key '%s': '%s' is not a number", name,
                         ts_quote(value, TS_QUOTE_MAX, q, sizeof q));
                return fail(ps, what);
            }
            if (v < k->min || v > k->max) {
                snprintf(what, sizeof what, "key '%s': %g is out of range [%g, %g]", name, v,
                         k->min, k->max);
                return fail(ps, what);
            }
            memcpy(field, &v, sizeof v);
            return 1;
        }
        case KT_INT: {
            int64_t v;
            if (ts_parse_i64(value, INT64_MIN, INT64_MAX, &v)) {
                snprintf(what, sizeof what, "key '%s': '%s' is not an integer", name,
                         ts_quote(value, TS_QUOTE_MAX, q, sizeof q));
                return fail(ps, what);
            }
            if ((double)v < k->min || (double)v > k->max) {
                snprintf(what, sizeof what, "key '%s': %lld is out of range [%g, %g]", name,
                         (long long)v, k->min, k->max);
                return fail(ps, what);
            }
            int iv = (int)v;
            memcpy(field, &iv, sizeof iv);
            return 1;
        }
        case KT_BOOL: {
            int b;
            if (ts_parse_bool(value, &b)) {
                snprintf(what, sizeof what, "key '%s': '%s' is not a boolean (0/1/true/false)",
                         name, ts_quote(value, TS_QUOTE_MAX, q, sizeof q));
                return fail(ps, what);
            }
            memcpy(field, &b, sizeof b);
            return 1;
        }
        case KT_TILES:
            if (parse_tiles(value, ps->out, what, sizeof what))
                return fail(ps, what);
            return 1;
        case KT_STRING:
            if (strlen(value) >= k->size) {
                snprintf(what, sizeof what, "key '%s': value too long", name);
                return fail(ps, what);
            }
            memcpy(field, value, strlen(value) + 1);
            return 1;
        }
    }
    if (!known_section)
        snprintf(what, sizeof what, "unknown section [%s]", ts_quote(section, 32, q, sizeof q));
    else
        snprintf(what, sizeof what, "unknown key '%s' in section [%s]",
                 ts_quote(name, 32, q, sizeof q), section);
    return fail(ps, what);
}

void hw_path_stem(const char *path, char *buf, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t len = strlen(b);
    const char *dot = strrchr(b, '.');
    if (dot && dot != b)
        len = (size_t)(dot - b);
    if (len >= n)
        len = n - 1;
    memcpy(buf, b, len);
    buf[len] = 0;
}

/* Parses <dir>/<name>.ini (or the path `name`) into out; the path read goes
 * to path (PATH_SZ bytes), and, when lines is not NULL, the line each key was
 * set on (0: absent) to lines[i] for keys[i]. */
#define PATH_SZ HW_PATH_SZ
static int parse_file(const char *dir, const char *name, const key_spec *keys, size_t n_keys,
                      void *out, char *name_out, size_t name_sz, char *path, int *lines,
                      ts_err *e)
{
    if (ts_find_data(dir, name, ".ini", path, PATH_SZ, e))
        return -1;
    parse_state ps = {.path = path, .keys = keys, .n_keys = n_keys, .out = out,
                      .in = {.path = path, .e = e}};
    ps.in.f = fopen(path, "r");
    if (!ps.in.f)
        return ts_errf(e, "%s: cannot open file", path);
    int rc = ini_parse_stream(ts_ini_read, &ps.in, handler, &ps);
    fclose(ps.in.f);
    if (ps.in.failed)
        return -1;
    if (rc > 0)
        return ts_errf(e, "%s:%d: syntax error (expected 'key = value' or [section])", path, rc);
    if (rc < 0)
        return ts_errf(e, "%s: cannot parse (out of memory)", path);
    for (size_t i = 0; i < n_keys; i++)
        if (keys[i].required && !ps.seen[i])
            return ts_errf(e, "%s: missing required key '%s' in section [%s]", path, keys[i].key,
                           keys[i].section);
    hw_path_stem(path, name_out, name_sz);
    if (lines)
        memcpy(lines, ps.seen, n_keys * sizeof *lines);
    return 0;
}

/* The line of hw_keys' row for key (0: not set). */
static int key_line(const int *lines, const char *key)
{
    for (size_t i = 0; i < sizeof hw_keys / sizeof hw_keys[0]; i++)
        if (!strcmp(hw_keys[i].key, key))
            return lines[i];
    return 0;
}

/* attn_fa3 against attn_fa_version: absent, it follows the version (an INI
 * that prices prefill with FlashAttention-3 runs it); set to 0 beside version
 * 3 it contradicts it.  Returns 0, or -1 with "PATH:LINE: key ..." in e. */
static int check_attn(hw_desc *d, const char *path, const int *lines, ts_err *e)
{
    if (d->attn_fa3 < 0) {
        d->attn_fa3 = d->attn_fa_version == 3;
        return 0;
    }
    if (d->attn_fa3 == 0 && d->attn_fa_version == 3)
        return ts_errf(e, "%s:%d: key 'attn_fa3': 0 (FlashAttention-3 does not run on this GPU) "
                          "contradicts attn_fa_version = 3 on line %d",
                       path, key_line(lines, "attn_fa3"), key_line(lines, "attn_fa_version"));
    return 0;
}

/* The INI alone: defaults, then the file's keys; the file's path to ini. */
static int load_ini(const char *name, hw_desc *hw, char *ini, ts_err *e)
{
    hw_desc d;
    memset(&d, 0, sizeof d);
    /* Defaults for the efficiency keys: the H100 fit (see models/hw/h100.ini). */
    d.gemm_eff = 0.77;
    d.gemm_half_flops = 0;
    d.gemm_lat_s = 5e-6;
    d.train_eff = 0;           /* gemm_eff */
    d.mem_eff = 0.83;
    d.attn_eff = 0.38;
    d.attn_fa_version = 0;     /* attn_eff at every length */
    d.attn_fa3 = -1;           /* from attn_fa_version (check_attn) */
    d.launch_s = 1.5e-6;
    d.tile_m = 128;
    d.tile_n = 64;
    d.gemm_mem_eff = 0;        /* mem_eff */
    d.gemm_mem_lat_s = -1;     /* gemm_lat_s */
    d.gemm_mem_fill_s = 0;
    d.gemm_mem_fill_bytes = 1e6;
    d.n_gemm_tiles = 0;        /* one tile_m x tile_n kernel */
    d.gemm_splitk_bytes = 0;
    d.gemm_mix = 0;
    d.ar_eff = 0.77;
    d.coll_lat_s = 20e-6;
    d.coll_lat_graph_s = -1;   /* coll_lat_s */
    d.car_lat_s = 0;
    d.car_max_bytes = 0;       /* no custom all-reduce */
    /* host defaults: see models/hw/h100.ini [host] */
    d.eager_launch_s = 10e-6;
    d.sched_s = 0.5e-3;
    d.sched_req_s = 2e-6;
    d.pcie_bw = 50e9;
    d.host_mem_bw = 450e9;
    d.host_bytes = 2.0e12;
    snprintf(d.calibration, sizeof d.calibration, "defaults (uncalibrated)");
    _Static_assert(sizeof hw_keys / sizeof hw_keys[0] <= MAX_KEYS, "raise MAX_KEYS");
    int lines[MAX_KEYS];
    if (parse_file("models/hw", name, hw_keys, sizeof hw_keys / sizeof hw_keys[0], &d,
                   d.name, sizeof d.name, ini, lines, e) ||
        check_attn(&d, ini, lines, e))
        return -1;
    *hw = d;
    return 0;
}



int hw_load_ini(const char *name, hw_desc *hw, ts_err *e)
{
    char ini[PATH_SZ];
    return load_ini(name, hw, ini, e);
}

int hw_load_ini_path(const char *name, hw_desc *hw, char *path, size_t n, ts_err *e)
{
    char ini[PATH_SZ];
    if (load_ini(name, hw, ini, e))
        return -1;
    if (strlen(ini) >= n)
        return ts_errf(e, "%s: path too long", ini);
    memcpy(path, ini, strlen(ini) + 1);
    return 0;
}


int llm_load(const char *name, llm_desc *m, ts_err *e)
{
    llm_desc d;
    memset(&d, 0, sizeof d);
    _Static_assert(sizeof llm_keys / sizeof llm_keys[0] <= MAX_KEYS, "raise MAX_KEYS");
    char path[PATH_SZ];
    if (parse_file("models/llm", name, llm_keys, sizeof llm_keys / sizeof llm_keys[0], &d,
                   d.name, sizeof d.name, path, NULL, e))
        return -1;
    *m = d;
    return 0;
}

double llm_params(const llm_desc *m)
{
    double h = m->hidden, hd = m->head_dim;
    double q = (double)m->heads * hd, kv = (double)m->kv_heads * hd;
    double attn = h * q + 2.0 * h * kv + q * h;
    if (m->qkv_bias)
        attn += q + 2.0 * kv;
    double mlp = (m->gated ? 3.0 : 2.0) * h * m->ffn;
    double norms = 2.0 * h;
    double per_layer = attn + mlp + norms;
    double emb = (double)m->vocab * h;
    double head = m->tied ? 0.0 : emb;
    return m->layers * per_layer + emb + head + h; /* + final norm */
}
