/*
 * Vidur profiling CSVs: strict reader and cost-model evaluation.
 *
 * Vidur (github.com/microsoft/vidur, data/profiling/) ships per-operator times
 * of one transformer layer measured on H100 with Sarathi-Serve, one row per
 * (architecture, num_tokens, TP size), with columns
 * time_stats.<op>.{min,max,mean,median,std} in milliseconds, and NCCL
 * all-reduce times by size and number of workers.  vidur_load() reads such a
 * file into rows: the header decides which columns matter (the chosen stat of
 * every known op, and the key columns of the profile kind); every data line
 * must have exactly the header's field count, and every column that matters
 * must parse as a number in range.  The first bad field is reported with file,
 * line and column name, and nothing partial is returned.  Unquoted CSV only
 * (Vidur writes no quotes); a quote character is an error.
 *
 * The loader also reads every known op's .min and .max columns to find the
 * timing resolution the samples were recorded at: the largest step of
 * vidur_res_steps_ms (1 ms to 1 ns) that every non-zero value is a multiple
 * of, to within floating-point noise.  Vidur's files record whole
 * microseconds (PyTorch's profiler truncates each kernel's duration to
 * them), so a 1-token kernel of 1-3 us carries up to a step's error in its
 * measured time alone.
 *
 * vidur_evaluate() predicts each measured op of each row, taking the
 * architecture from the row's own columns (head_dim = n_embd / n_head), with
 * cost_vidur_op() and comm_allreduce(), and accumulates absolute percentage
 * errors per op and token band; besides each MAPE, the MAPE beyond the
 * resolution: each error less one step (vidur_err_beyond(), docs/model.md
 * says why one step rather than half).  Runs once per `tailsim calib` or
 * test; allocation is one growing array of rows.
 */
#include "models/vidur.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/lines.h"
#include "common/util.h"
#include "models/comm.h"
#include "models/cost.h"

const char *const vidur_op_names[VOP_COUNT] = {
    "emb", "input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
    "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add",
    "all_reduce",
};

const int vidur_band_hi[VIDUR_BANDS] = {32, 256, 1024, 4096};

const double vidur_res_steps_ms[VIDUR_RES_STEPS] = {1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6};

/* Index in vidur_res_steps_ms of the coarsest step ms (> 0) is a multiple
 * of, or VIDUR_RES_STEPS when it is a multiple of none.  A multiple: within
 * 1e-6 of a step, plus the rounding of parsing and dividing (a few ulps of
 * the quotient), and at least one step (a value under half a step is not a
 * multiple of it, however close to 0).  Cannot fail. */
static int res_step_of(double ms)
{
    for (int k = 0; k < VIDUR_RES_STEPS; k++) {
        double q = ms / vidur_res_steps_ms[k];
        if (q >= 0.5 && fabs(q - nearbyint(q)) < 1e-6 + 4 * DBL_EPSILON * q)
            return k;
    }
    return VIDUR_RES_STEPS;
}

double vidur_err_beyond(double pred, double meas, double allow)
{
    double d = fabs(pred - meas) - allow;
    return d > 0 ? d / meas * 100.0 : 0.0;
}

int vidur_band_of(int tokens)
{
    for (int b = 0; b < VIDUR_BANDS - 1; b++)
        if (tokens <= vidur_band_hi[b])
            return b;
    return VIDUR_BANDS - 1;
}

/* Adds one signed percentage error, and the error beyond the resolution
 * (err_res, >= 0), to a band's running sums (mape, bias and mape_res hold
 * sums until band_finish()). */
static void band_add(vidur_band_stat *s, double err, double err_res)
{
    s->n++;
    s->mape += fabs(err);
    s->bias += err;
    s->mape_res += err_res;
}

static void band_finish(vidur_band_stat *s)
{
    if (s->n) {
        s->mape /= s->n;
        s->bias /= s->n;
        s->mape_res /= s->n;
    }
}

int vidur_op_is_gemm(int op)
{
    return op == VOP_PRE_PROJ || op == VOP_POST_PROJ || op == VOP_UP_PROJ || op == VOP_DOWN_PROJ;
}

/* Key columns. */
enum {
    C_N_HEAD, C_N_KV_HEAD, C_N_EMBD, C_N_EXPANDED, C_VOCAB, C_GATED, C_TOKENS, C_TP,
    C_SIZE, C_WORKERS, C_COUNT
};
static const char *const key_names[C_COUNT] = {
    "n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp",
    "num_tokens", "num_tensor_parallel_workers", "size", "num_workers",
};

void vidur_free(vidur_table *t)
{
    if (!t)
        return;
    free(t->rows);
    memset(t, 0, sizeof *t);
}

/* Splits `line` in place at commas; returns the field count (up to max), or
 * -1 when there are more than max fields. */
static int split_csv(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max)
            return -1;
        f[n++] = p;
        char *c = strchr(p, ',');
        if (!c)
            break;
        *c = 0;
        p = c + 1;
    }
    return n;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
}

#define MAX_FIELDS 256

/* What a file's header says: its columns, and which of them matter. */
typedef struct vcols {
    char *header;               /* the header line, split in place into hdr */
    char *hdr[MAX_FIELDS];      /* column names */
    int n_cols;
    int op_col[VOP_COUNT];      /* column of each op's statistic (-1: absent) */
    int key_col[C_COUNT];       /* column of each key (-1: absent) */
    int mlp_ops;                /* known ops other than all_reduce present */
    int res_col[2 * VOP_COUNT]; /* the known ops' .min and .max columns */
    int n_res;
} vcols;

/* Reads the header line (chomped) of path: the column of each known op's
 * statistic stat, of each key column, and in t->has which ops the file
 * has.  Returns 0, or -1 with e set: a quoted column, too many columns, no
 * known op, a key column the ops need is missing, allocation failure.
 * h->header is the caller's to free. */
static int read_header(vcols *h, const char *line, const char *path, const char *stat,
                       vidur_table *t, ts_err *e)
{
    for (int i = 0; i < VOP_COUNT; i++)
        h->op_col[i] = -1;
    for (int i = 0; i < C_COUNT; i++)
        h->key_col[i] = -1;
    if (!(h->header = strdup(line)))
        return ts_errf(e, "%s: out of memory", path);
    h->n_cols = split_csv(h->header, h->hdr, MAX_FIELDS);
    if (h->n_cols < 0)
        return ts_errf(e, "%s:1: more than %d columns", path, MAX_FIELDS);
    for (int c = 0; c < h->n_cols; c++) {
        if (strchr(h->hdr[c], '"'))
            return ts_errf(e, "%s:1: column %d: quoted fields are not supported", path, c + 1);
        for (int k = 0; k < C_COUNT; k++)
            if (!strcmp(h->hdr[c], key_names[k]))
                h->key_col[k] = c;
        for (int o = 0; o < VOP_COUNT; o++) {
            char want[96], lo[96], hi[96];
            snprintf(want, sizeof want, "time_stats.%s.%s", vidur_op_names[o], stat);
            snprintf(lo, sizeof lo, "time_stats.%s.min", vidur_op_names[o]);
            snprintf(hi, sizeof hi, "time_stats.%s.max", vidur_op_names[o]);
            if (!strcmp(h->hdr[c], want))
                h->op_col[o] = c;
            if ((!strcmp(h->hdr[c], lo) || !strcmp(h->hdr[c], hi)) && h->n_res < 2 * VOP_COUNT)
                h->res_col[h->n_res++] = c;
        }
    }
    int n_ops = 0;
    for (int o = 0; o < VOP_COUNT; o++) {
        t->has[o] = h->op_col[o] >= 0;
        n_ops += t->has[o];
        h->mlp_ops += t->has[o] && o != VOP_ALL_REDUCE;
    }
    if (n_ops == 0)
        return ts_errf(e, "%s:1: no time_stats.<op>.%s column for a known op", path, stat);
    for (int k = 0; k < C_COUNT; k++) {
        int needed = (k <= C_TP && h->mlp_ops) || (k >= C_SIZE && t->has[VOP_ALL_REDUCE]);
        if (needed && h->key_col[k] < 0)
            return ts_errf(e, "%s:1: missing column '%s'", path, key_names[k]);
    }
    return 0;
}

/* Parses the key columns of a data line's fields into v (absent ones stay
 * 0).  Returns 0, or -1 with e set naming the column. */
static int row_keys(const vcols *h, char **fields, const char *path, int lineno, int64_t *v,
                    ts_err *e)
{
    for (int k = 0; k < C_COUNT; k++) {
        if (h->key_col[k] < 0)
            continue;
        const char *s = fields[h->key_col[k]];
        int bad;
        if (k == C_GATED) {
            int b = 0;
            bad = ts_parse_bool(s, &b);
            v[k] = b;
        } else {
            int64_t lo = (k == C_VOCAB) ? 0 : 1;
            bad = ts_parse_i64(s, lo, (int64_t)1 << 40, &v[k]);
        }
        if (bad) {
            char q[TS_QUOTE_BUF];
            return ts_errf(e, "%s:%d: column '%s': bad value '%s'", path, lineno, key_names[k],
                           ts_quote(s, TS_QUOTE_MAX, q, sizeof q));
        }
    }
    return 0;
}

/* The row's architecture and shape (MLP ops) and all-reduce size and
 * workers from its key values v.  Returns 0, or -1 with e set: heads that
 * do not divide, values out of range. */
static int row_arch(const vcols *h, const vidur_table *t, const int64_t *v, const char *path,
                    int lineno, vidur_row *r, ts_err *e)
{
    if (h->mlp_ops) {
        if (v[C_N_EMBD] % v[C_N_HEAD] || v[C_N_HEAD] % v[C_N_KV_HEAD])
            return ts_errf(e, "%s:%d: column 'n_embd': %lld not divisible by n_head %lld "
                           "(or n_head by n_kv_head)", path, lineno, (long long)v[C_N_EMBD],
                           (long long)v[C_N_HEAD]);
        if (v[C_N_HEAD] > 4096 || v[C_N_EMBD] > (1 << 20) || v[C_N_EXPANDED] > (1 << 22) ||
            v[C_VOCAB] > (1 << 24) || v[C_TOKENS] > (1 << 24) || v[C_TP] > 4096)
            return ts_errf(e, "%s:%d: architecture value out of range", path, lineno);
        llm_desc *a = &r->arch;
        snprintf(a->name, sizeof a->name, "vidur-row");
        a->layers = 1;
        a->heads = (int)v[C_N_HEAD];
        a->kv_heads = (int)v[C_N_KV_HEAD];
        a->hidden = (int)v[C_N_EMBD];
        a->head_dim = (int)(v[C_N_EMBD] / v[C_N_HEAD]);
        a->ffn = (int)v[C_N_EXPANDED];
        a->vocab = (int)v[C_VOCAB];
        a->gated = (int)v[C_GATED];
        r->tokens = (int)v[C_TOKENS];
        r->tp = (int)v[C_TP];
    }
    if (t->has[VOP_ALL_REDUCE]) {
        r->size = (double)v[C_SIZE];
        r->workers = (int)v[C_WORKERS];
    }
    return 0;
}

/* Parses a time field (ms) of column col into *ms.  Returns 0, or -1 with
 * e set naming the column. */
static int read_time(const vcols *h, char **fields, int col, const char *path, int lineno,
                     double *ms, ts_err *e)
{
    if (ts_parse_double(fields[col], 0.0, 1e9, ms)) {
        char q[TS_QUOTE_BUF];
        return ts_errf(e, "%s:%d: column '%s': '%s' is not a time in ms", path, lineno,
                       h->hdr[col], ts_quote(fields[col], TS_QUOTE_MAX, q, sizeof q));
    }
    return 0;
}

/* Parses data line lineno of path (chomped, split in place) into *r, and
 * raises *res_k to the step index (res_step_of) of its .min and .max
 * values.  Returns 0, or -1 with e set: an empty or quoted line, a field
 * count unlike the header's, a bad time or key value. */
static int read_row(const vcols *h, const vidur_table *t, char *line, const char *path,
                    int lineno, vidur_row *r, int *res_k, ts_err *e)
{
    char *fields[MAX_FIELDS];
    if (!line[0])
        return ts_errf(e, "%s:%d: empty line", path, lineno);
    if (strchr(line, '"'))
        return ts_errf(e, "%s:%d: quoted fields are not supported", path, lineno);
    int nf = split_csv(line, fields, MAX_FIELDS);
    if (nf != h->n_cols)
        return ts_errf(e, "%s:%d: %d fields, the header has %d", path, lineno,
                       nf < 0 ? MAX_FIELDS + 1 : nf, h->n_cols);
    memset(r, 0, sizeof *r);
    r->line = lineno;
    for (int o = 0; o < VOP_COUNT; o++) {
        r->ms[o] = -1.0;
        if (h->op_col[o] >= 0 && read_time(h, fields, h->op_col[o], path, lineno, &r->ms[o], e))
            return -1;
    }
    for (int i = 0; i < h->n_res; i++) {
        double ms;
        if (read_time(h, fields, h->res_col[i], path, lineno, &ms, e))
            return -1;
        int k = ms > 0 ? res_step_of(ms) : -1; /* 0 is a multiple of every step */
        if (k > *res_k)
            *res_k = k;
    }
    int64_t v[C_COUNT] = {0};
    if (row_keys(h, fields, path, lineno, v, e))
        return -1;
    return row_arch(h, t, v, path, lineno, r, e);
}

/* Appends r to t's rows, doubling the array (*cap rows) when full.  Returns
 * 0, or -1 with e set (allocation failure). */
static int rows_push(vidur_table *t, size_t *cap, const vidur_row *r, const char *path,
                     int lineno, ts_err *e)
{
    if (t->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 1024;
        vidur_row *nr = realloc(t->rows, nc * sizeof *nr);
        if (!nr)
            return ts_errf(e, "%s:%d: out of memory", path, lineno);
        t->rows = nr;
        *cap = nc;
    }
    t->rows[t->n++] = *r;
    return 0;
}

int vidur_load(const char *path, const char *stat, vidur_table *out, ts_err *e)
{
    static const char *const stats[] = {"median", "mean", "min", "max"};
    int stat_ok = 0;
    for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++)
        stat_ok |= !strcmp(stat, stats[i]);
    if (!stat_ok)
        return ts_errf(e, "unknown statistic '%s' (median, mean, min or max)", stat);

    memset(out, 0, sizeof *out);
    ts_lines in;
    if (ts_lines_open(&in, path, 0, e))
        return -1;

    int rc = -1, got, res_k = -1; /* the finest step index any value needs */
    char *line;
    size_t rows_cap = 0;
    vcols h = {0};
    vidur_table t = {0};
    if ((got = ts_lines_next(&in, e)) <= 0) {
        if (got == 0)
            ts_errf(e, "%s:1: empty file (expected a header line)", path);
        goto cleanup;
    }
    line = in.buf;
    chomp(line);
    if (read_header(&h, line, path, stat, &t, e))
        goto cleanup;
    while ((got = ts_lines_next(&in, e)) > 0) {
        if (in.lineno > INT32_MAX) {
            ts_errf(e, "%s:%ld: too many lines", path, in.lineno);
            goto cleanup;
        }
        int lineno = (int)in.lineno;
        vidur_row r;
        line = in.buf;
        chomp(line);
        if (read_row(&h, &t, line, path, lineno, &r, &res_k, e) ||
            rows_push(&t, &rows_cap, &r, path, lineno, e))
            goto cleanup;
    }
    if (got < 0)
        goto cleanup;
    if (t.n == 0) {
        ts_errf(e, "%s:2: no data rows", path);
        goto cleanup;
    }
    t.res_ms = res_k >= 0 && res_k < VIDUR_RES_STEPS ? vidur_res_steps_ms[res_k] : 0.0;
    *out = t;
    t.rows = NULL;
    rc = 0;
cleanup:
    free(t.rows);
    free(h.header);
    ts_lines_close(&in);
    return rc;
}

double vidur_predict(const vidur_row *row, int op, const hw_desc *hw)
{
    if (op < 0 || op >= VOP_COUNT)
        return -1.0;
    if (op == VOP_ALL_REDUCE)
        return comm_allreduce(hw, row->size, row->workers);
    return cost_vidur_op(hw, &row->arch, row->tp, vidur_op_names[op], row->tokens);
}

/* Running sums of vidur_evaluate_at(): per op, over the GEMM ops, over all
 * ops, and of the layer sums. */
typedef struct eval_sums {
    double ape[VOP_COUNT], ape_res[VOP_COUNT];
    double gemm, all;
    int gemm_n, all_n;
    double layer, layer_res, layer_bias;
} eval_sums;

/* Adds one prediction of op o at CSV line `line` (err: signed %, err_res:
 * beyond the resolution, %) to the op's stat and the sums. */
static void op_add(vidur_report *r, eval_sums *u, int o, int line, double err, double err_res)
{
    double ape = fabs(err);
    vidur_op_stat *s = &r->ops[o];
    s->n++;
    u->ape[o] += ape;
    u->ape_res[o] += err_res;
    if (ape > s->worst) {
        s->worst = ape;
        s->worst_line = line;
    }
    u->all += ape;
    u->all_n++;
    if (vidur_op_is_gemm(o)) {
        u->gemm += ape;
        u->gemm_n++;
    }
}

/* Predicts every op of one row into r and u, and its layer sum (the ops but
 * the embedding, when every op of the file was predicted), allowing res_ms
 * per op summed. */
static void eval_row(const vidur_table *t, const vidur_row *row, const hw_desc *hw,
                     double res_ms, vidur_report *r, eval_sums *u)
{
    double meas_ms = 0, pred_ms = 0;
    int whole = !t->has[VOP_ALL_REDUCE], summed = 0;
    int band = vidur_band_of(row->tokens > 0 ? row->tokens : 1);
    for (int o = 0; o < VOP_COUNT; o++) {
        if (!t->has[o])
            continue;
        if (row->ms[o] <= 0) {
            whole = 0;
            continue; /* a zero time has no percentage error */
        }
        double pred_s = vidur_predict(row, o, hw);
        if (pred_s < 0) {
            whole = 0;
            continue;
        }
        if (o != VOP_EMB) { /* the embedding runs once a forward, not per layer */
            meas_ms += row->ms[o];
            pred_ms += pred_s * 1e3;
            summed++;
        }
        double err = (pred_s * 1e3 - row->ms[o]) / row->ms[o] * 100.0;
        double err_res = vidur_err_beyond(pred_s * 1e3, row->ms[o], res_ms);
        if (o != VOP_ALL_REDUCE)
            band_add(&r->bands[o][band], err, err_res);
        op_add(r, u, o, row->line, err, err_res);
    }
    if (!whole || meas_ms <= 0)
        return;
    double err = (pred_ms - meas_ms) / meas_ms * 100.0;
    double err_res = vidur_err_beyond(pred_ms, meas_ms, summed * res_ms);
    vidur_op_stat *s = &r->layer;
    s->n++;
    u->layer += fabs(err);
    u->layer_res += err_res;
    u->layer_bias += err;
    band_add(&r->bands[VOP_COUNT][band], err, err_res);
    if (fabs(err) > s->worst) {
        s->worst = fabs(err);
        s->worst_line = row->line;
    }
}

void vidur_evaluate_at(const vidur_table *t, const hw_desc *hw, double res_ms, vidur_report *r)
{
    memset(r, 0, sizeof *r);
    r->rows = t->n;
    r->res_ms = res_ms > 0 ? res_ms : 0.0;
    for (int o = 0; o < VOP_ALL_REDUCE; o++)
        r->layer_ops += o != VOP_EMB && t->has[o] && !t->has[VOP_ALL_REDUCE];
    eval_sums u = {0};
    for (size_t i = 0; i < t->n; i++)
        eval_row(t, &t->rows[i], hw, r->res_ms, r, &u);
    if (r->layer.n) {
        r->layer.mape = u.layer / r->layer.n;
        r->layer.mape_res = u.layer_res / r->layer.n;
        r->layer_bias = u.layer_bias / r->layer.n;
    }
    for (int o = 0; o < VOP_COUNT; o++) {
        if (r->ops[o].n) {
            r->ops[o].mape = u.ape[o] / r->ops[o].n;
            r->ops[o].mape_res = u.ape_res[o] / r->ops[o].n;
        }
    }
    for (int o = 0; o <= VOP_COUNT; o++)
        for (int b = 0; b < VIDUR_BANDS; b++)
            band_finish(&r->bands[o][b]);
    r->gemm_mape = u.gemm_n ? u.gemm / u.gemm_n : 0.0;
    r->overall_mape = u.all_n ? u.all / u.all_n : 0.0;
}

void vidur_evaluate(const vidur_table *t, const hw_desc *hw, vidur_report *r)
{
    vidur_evaluate_at(t, hw, t->res_ms, r);
}
