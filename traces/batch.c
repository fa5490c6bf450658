/*
 * Training-batch traces: the container, Open-Sora's latent shape of a video,
 * the CSV reader and writer, the generators (DCP's Zipf video mix and 1D
 * long-tail length mixes) and the bucketing the DCP planners use.
 *
 * The reader is strict: the header fixes the kind and the columns, every
 * field must be an integer in range, and the first bad record stops the load
 * with "file:line: field 'x': problem" and no trace.  Generators are seeded
 * and reproducible bit for bit: the video mix has deterministic counts per
 * bucket (VideoSys' rounding) and only its data order is random; 1D lengths
 * come from one RNG stream per trace.  Bucketing is exact for 2D (one bucket
 * per shape) and geometric for 1D (four buckets per octave of length, each
 * represented by its longest member, so a planner that sizes micro-batches
 * by the representative never overshoots memory).  Nothing here is on a hot
 * path: each function runs once per trace.
 */
#include "traces/batch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "common/lines.h"
#include "common/util.h"
#include "traces/gen.h"

btrace *btrace_new(bt_kind kind)
{
    btrace *b = calloc(1, sizeof *b);
    if (b)
        b->kind = kind;
    return b;
}

void btrace_free(btrace *b)
{
    if (!b)
        return;
    free(b->seq);
    free(b->buckets);
    free(b);
}

void bt_latent(int32_t frames, int32_t height, int32_t width, int32_t *t, int32_t *s)
{
    int32_t full = frames / 17, rem = frames % 17;
    int32_t lt = full * 5 + (rem + 3) / 4;
    if (lt < 1)
        lt = 1;
    int32_t lh = (height + 7) / 8, lw = (width + 7) / 8;
    *t = lt;
    *s = ((lh + 1) / 2) * ((lw + 1) / 2);
}

static int push(btrace *b, const bt_seq *q, ts_err *e)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        bt_seq *p = realloc(b->seq, nc * sizeof *p);
        if (!p)
            return ts_errf(e, "out of memory (%zu sequences)", nc);
        b->seq = p;
        b->cap = nc;
    }
    b->seq[b->n++] = *q;
    free(b->buckets); /* any bucketing is stale now */
    b->buckets = NULL;
    b->n_buckets = 0;
    return 0;
}

int btrace_add_1d(btrace *b, int32_t tokens, ts_err *e)
{
    if (b->kind != BT_1D)
        return ts_errf(e, "a 1D sequence added to a 2D (video) trace");
    if (tokens < 1 || tokens > BT_MAX_TOKENS)
        return ts_errf(e, "sequence length %d outside [1, %d]", tokens, BT_MAX_TOKENS);
    bt_seq q = {.t = 1, .s = tokens, .bucket = -1};
    return push(b, &q, e);
}

int btrace_add_video(btrace *b, int32_t frames, int32_t height, int32_t width, ts_err *e)
{
    if (b->kind != BT_2D)
        return ts_errf(e, "a video added to a 1D trace");
    if (frames < 1 || frames > BT_MAX_FRAMES || height < 1 || height > BT_MAX_PIXELS ||
        width < 1 || width > BT_MAX_PIXELS)
        return ts_errf(e, "video %dx%dx%d outside [1, %d] frames x [1, %d] pixels", frames,
                       height, width, BT_MAX_FRAMES, BT_MAX_PIXELS);
    bt_seq q = {.frames = frames, .height = height, .width = width, .bucket = -1};
    bt_latent(frames, height, width, &q.t, &q.s);
    if ((int64_t)q.t * q.s > BT_MAX_TOKENS)
        return ts_errf(e, "video %dx%dx%d has %lld latent tokens (limit %d)", frames, height,
                       width, (long long)q.t * q.s, BT_MAX_TOKENS);
    return push(b, &q, e);
}

int64_t btrace_tokens(const btrace *b)
{
    int64_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        n += bt_tokens(&b->seq[i]);
    return n;
}

/* ------------------------------------------------------------------ CSV */

/* Trims spaces, tabs and a trailing CR in place; returns the start. */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = 0;
    return s;
}

/* Splits s at commas into at most max fields (trimmed).  Returns the count,
 * or max + 1 when there are more. */
static int split(char *s, char **f, int max)
{
    int n = 0;
    for (;;) {
        char *c = strchr(s, ',');
        if (c)
            *c = 0;
        if (n == max)
            return max + 1;
        f[n++] = trim(s);
        if (!c)
            return n;
        s = c + 1;
    }
}

int btrace_load(const char *path, btrace **out, ts_err *e)
{
    static const char *const cols2[3] = {"frames", "height", "width"};
    static const int64_t max2[3] = {BT_MAX_FRAMES, BT_MAX_PIXELS, BT_MAX_PIXELS};
    ts_lines in;
    if (ts_lines_open(&in, path, TS_LINES_STDIN, e))
        return -1;
    path = in.path; /* "<stdin>" for "-" */
    btrace *b = NULL;
    int ncol = 0, rc = -1, got;
    while ((got = ts_lines_next(&in, e)) > 0) {
        long lineno = in.lineno;
        char *s = trim(in.buf);
        if (lineno == 1 && !strncmp(s, "\xEF\xBB\xBF", 3)) /* no read past a short line */
            s += 3;
        if (!*s || *s == '#')
            continue;
        char *fld[4];
        int n = split(s, fld, 3);
        if (!b) { /* the header */
            if (n == 1 && !strcmp(fld[0], "tokens")) {
                b = btrace_new(BT_1D);
                ncol = 1;
            } else if (n == 3 && !strcmp(fld[0], cols2[0]) && !strcmp(fld[1], cols2[1]) &&
                       !strcmp(fld[2], cols2[2])) {
                b = btrace_new(BT_2D);
                ncol = 3;
            } else {
                ts_errf(e, "%s:%ld: header: expected 'tokens' (1D) or 'frames,height,width' "
                           "(2D video)", path, lineno);
                goto done;
            }
            if (!b) {
                ts_errf(e, "out of memory");
                goto done;
            }
            continue;
        }
        if (n != ncol) {
            ts_errf(e, "%s:%ld: expected %d field%s, found %s%d", path, lineno, ncol,
                    ncol > 1 ? "s" : "", n > ncol ? "more than " : "", n > ncol ? ncol : n);
            goto done;
        }
        int64_t v[3];
        for (int k = 0; k < ncol; k++) {
            const char *name = ncol == 1 ? "tokens" : cols2[k];
            int64_t hi = ncol == 1 ? BT_MAX_TOKENS : max2[k];
            if (ts_parse_i64(fld[k], 1, hi, &v[k])) {
                char q[TS_QUOTE_BUF];
                ts_errf(e, "%s:%ld: field '%s': '%s' is not an integer in [1, %lld]", path,
                        lineno, name, ts_quote(fld[k], TS_QUOTE_MAX, q, sizeof q),
                        (long long)hi);
                goto done;
            }
        }
        int r = ncol == 1 ? btrace_add_1d(b, (int32_t)v[0], e)
                          : btrace_add_video(b, (int32_t)v[0], (int32_t)v[1], (int32_t)v[2], e);
        if (r) {
            ts_err_prefix(e, "%s:%ld: field '%s': ", path, lineno,
                          ncol == 1 ? "tokens" : "frames");
            goto done;
        }
    }
    if (got < 0)
        goto done;
    if (!b) {
        ts_errf(e, "%s:%ld: empty batch trace (no header)", path, in.lineno);
        goto done;
    }
    if (b->n == 0) {
        ts_errf(e, "%s:%ld: no sequences after the header", path, in.lineno);
        goto done;
    }
    *out = b;
    b = NULL;
    rc = 0;
done:
    btrace_free(b);
    ts_lines_close(&in);
    return rc;
}

int btrace_write_csv(const btrace *b, const char *path, ts_err *e)
{
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    fputs(b->kind == BT_1D ? "tokens\n" : "frames,height,width\n", a.f);
    for (size_t i = 0; i < b->n; i++) {
        const bt_seq *q = &b->seq[i];
        if (b->kind == BT_1D)
            fprintf(a.f, "%d\n", q->s);
        else
            fprintf(a.f, "%d,%d,%d\n", q->frames, q->height, q->width);
    }
    return ts_atomic_commit(&a, e);
}

btrace *btrace_from_rollout(const trace *t, ts_err *e)
{
    btrace *b = btrace_new(BT_1D);
    if (!b) {
        ts_errf(e, "out of memory");
        return NULL;
    }
    for (size_t p = 0; p < t->n_prompts; p++) {
        const trace_prompt *tp = &t->prompts[p];
        for (int32_t r = 0; r < tp->n_resp; r++) {
            int64_t len = (int64_t)tp->prompt_tokens + tp->resp[r];
            if (len > BT_MAX_TOKENS)
                len = BT_MAX_TOKENS;
            if (btrace_add_1d(b, (int32_t)len, e)) {
                btrace_free(b);
                return NULL;
            }
        }
    }
    if (b->n == 0) {
        btrace_free(b);
        ts_errf(e, "rollout trace has no responses");
        return NULL;
    }
    return b;
}

/* ----------------------------------------------------------- generators */

typedef struct shape {
    int32_t frames, height, width;
} shape;

static int shape_pixels_cmp(const void *x, const void *y)
{
    const shape *a = x, *b = y;
    double pa = (double)a->frames * a->height * a->width;
    double pb = (double)b->frames * b->height * b->width;
    return (pa > pb) - (pa < pb);
}

/* Zipf counts over n ranks summing to total (VideoSys' rounding). */
static void zipf_counts(int n, int64_t total, double alpha, double offset, int64_t *cnt)
{
    double w[32], sum = 0;
    for (int r = 0; r < n; r++) {
        w[r] = 1.0 / pow(r + 1 + offset, alpha);
        sum += w[r];
    }
    int64_t acc = 0;
    for (int r = 0; r < n; r++) {
        cnt[r] = (int64_t)nearbyint((double)total * w[r] / sum);
        acc += cnt[r];
    }
    cnt[0] += total - acc;
    if (cnt[0] < 0)
        cnt[0] = 0;
}

static void shuffle(btrace *b, gsl_rng *r)
{
    for (size_t i = b->n; i > 1; i--) {
        size_t j = (size_t)gsl_rng_uniform_int(r, (unsigned long)i);
        bt_seq tmp = b->seq[i - 1];
        b->seq[i - 1] = b->seq[j];
        b->seq[j] = tmp;
    }
}

/* VideoSys' rank key: frames x COMMON_AR[name][0], the height.  Ties keep
 * bucket_config order (lower resolution first): qsort is not stable, so the
 * resolution breaks them. */
static int shape_height_cmp(const void *x, const void *y)
{
    const shape *a = x, *b = y;
    double pa = (double)a->frames * a->height, pb = (double)b->frames * b->height;
    if (pa != pb)
        return (pa > pb) - (pa < pb);
    return (a->height > b->height) - (a->height < b->height);
}

/* VideoSys' half_normal_pdf at x >= 0 up to its constant factor, which
 * the normalisation over the buckets cancels. */
static double half_normal(double x) { return exp(-0.5 * x * x); }

/* VideoSys' res_scale/frame_scale mode: counts over 5 heights x 5 frame
 * counts (images included), into sh[25]/cnt[25]. */
static void half_normal_counts(const bt_video_mix *p, const int32_t res[5][2], shape sh[25],
                               int64_t cnt[25])
{
    static const int32_t fr[5] = {1, 51, 102, 204, 408};
    double w[25], tot = 0;
    for (int r = 0; r < 5; r++)
        for (int f = 0; f < 5; f++) {
            int k = r * 5 + f;
            sh[k] = (shape){fr[f], res[r][0], res[r][1]};
            w[k] = half_normal(res[r][0] / 720.0 * p->res_scale) *
                   half_normal(sqrt(sqrt(fr[f] / 408.0)) * p->frame_scale);
            tot += w[k];
        }
    for (int k = 0; k < 25; k++)
        cnt[k] = (int64_t)floor(w[k] / tot * p->videos);
}

/* The Zipf counts of the exclusive or inclusive mode, into vid[20]/cv[20]
 * and img[5]/ci[5]. */
static void zipf_mix_counts(const bt_video_mix *p, const int32_t res[5][2], shape vid[20],
                            int64_t cv[20], shape img[5], int64_t ci[5])
{
    static const int32_t nframes[4] = {51, 102, 204, 408};
    for (int r = 0; r < 5; r++) {
        for (int f = 0; f < 4; f++)
            vid[r * 4 + f] = (shape){nframes[f], res[r][0], res[r][1]};
        img[r] = (shape){1, res[r][0], res[r][1]};
    }
    qsort(vid, 20, sizeof vid[0], p->rank_height ? shape_height_cmp : shape_pixels_cmp);
    qsort(img, 5, sizeof img[0], shape_pixels_cmp);
    int64_t n_img, n_vid = p->videos;
    if (p->inclusive) {
        n_img = (int64_t)floor(p->image_mix * p->videos);
        n_vid = p->videos - n_img;
    } else {
        n_img = (int64_t)nearbyint(p->image_mix * p->videos);
    }
    zipf_counts(20, n_vid, p->alpha, p->offset, cv);
    zipf_counts(5, n_img, p->alpha, p->offset, ci);
}

static int add_shapes(btrace *b, const shape *sh, const int64_t *cnt, int n, ts_err *e)
{
    for (int k = 0; k < n; k++)
        for (int64_t i = 0; i < cnt[k]; i++)
            if (btrace_add_video(b, sh[k].frames, sh[k].height, sh[k].width, e))
                return -1;
    return 0;
}

btrace *bt_gen_video_mix(const bt_video_mix *p, ts_err *e)
{
    static const int32_t res[5][2] = {
        {144, 256}, {240, 426}, {360, 640}, {480, 854}, {720, 1280}};
    if (p->videos < 1 || p->videos > 10000000 || !(p->image_mix >= 0 && p->image_mix <= 1000) ||
        !(p->alpha > 0 && p->alpha <= 100) || !(p->offset >= 0 && p->offset <= 1e6)) {
        ts_errf(e, "video mix: need videos in [1, 1e7], image_mix in [0, 1000], alpha in "
                   "(0, 100], offset in [0, 1e6]");
        return NULL;
    }
    if (p->inclusive && p->image_mix > 1) {
        ts_errf(e, "video mix: inclusive image mixing needs image_mix in [0, 1] (the share "
                   "of images), got %g", p->image_mix);
        return NULL;
    }
    int hn = p->res_scale > 0 || p->frame_scale > 0;
    if (hn && !(p->res_scale > 0 && p->frame_scale > 0 && p->res_scale <= 100 &&
                p->frame_scale <= 100)) {
        ts_errf(e, "video mix: res_scale and frame_scale go together, both in (0, 100]");
        return NULL;
    }
    shape vid[25], img[5];
    int64_t cv[25], ci[5] = {0};
    if (hn)
        half_normal_counts(p, res, vid, cv);
    else
        zipf_mix_counts(p, res, vid, cv, img, ci);
    btrace *b = btrace_new(BT_2D);
    gsl_rng *r = ts_rng_new(p->seed, 0);
    if (!b || !r) {
        ts_errf(e, "out of memory");
        goto fail;
    }
    if ((!hn && add_shapes(b, img, ci, 5, e)) || add_shapes(b, vid, cv, hn ? 25 : 20, e))
        goto fail;
    if (b->n == 0) {
        ts_errf(e, "video mix: the parameters give no samples");
        goto fail;
    }
    shuffle(b, r);
    gsl_rng_free(r);
    return b;
fail:
    gsl_rng_free(r);
    btrace_free(b);
    return NULL;
}

int64_t bt_videosys_positions(const bt_seq *q)
{
    if (q->frames <= 0)
        return bt_tokens(q);
    int64_t t = q->frames > 1 ? (int64_t)q->frames * 5 / 17 : 1;
    return t * (q->height / 8) * (q->width / 8);
}

int64_t btrace_videosys_positions(const btrace *b)
{
    int64_t n = 0;
    for (size_t i = 0; i < b->n; i++)
        n += bt_videosys_positions(&b->seq[i]);
    return n;
}

typedef struct lncomp {
    double w, median, sigma;
} lncomp;

static btrace *gen_lognormal_mix(const lncomp *c, int nc, int32_t n, int32_t cap, uint64_t seed,
                                 ts_err *e)
{
    btrace *b = btrace_new(BT_1D);
    gsl_rng *r = ts_rng_new(seed, 0);
    if (!b || !r) {
        ts_errf(e, "out of memory");
        goto fail;
    }
    double wsum = 0;
    for (int k = 0; k < nc; k++)
        wsum += c[k].w;
    for (int32_t i = 0; i < n; i++) {
        double u = gsl_rng_uniform(r) * wsum;
        int k = 0;
        while (k < nc - 1 && u >= c[k].w) {
            u -= c[k].w;
            k++;
        }
        double x = gsl_ran_lognormal(r, log(c[k].median), c[k].sigma);
        double len = nearbyint(x);
        if (!(len >= 1))
            len = 1;
        if (len > cap)
            len = cap;
        if (btrace_add_1d(b, (int32_t)len, e))
            goto fail;
    }
    gsl_rng_free(r);
    return b;
fail:
    gsl_rng_free(r);
    btrace_free(b);
    return NULL;
}

btrace *bt_gen_1d(const char *dist, int32_t n, int32_t cap, uint64_t seed, ts_err *e)
{
    if (n < 1 || n > 100000000 || cap < 1 || cap > BT_MAX_TOKENS) {
        ts_errf(e, "1D batch trace: need sequences in [1, 1e8] and cap in [1, %d]",
                BT_MAX_TOKENS);
        return NULL;
    }
    static const lncomp sft[3] = {{0.60, 600, 0.9}, {0.30, 3000, 0.7}, {0.10, 16000, 0.6}};
    static const lncomp pre[1] = {{1.0, 2000, 1.3}};
    if (!strcmp(dist, "sft"))
        return gen_lognormal_mix(sft, 3, n, cap, seed, e);
    if (!strcmp(dist, "pretrain"))
        return gen_lognormal_mix(pre, 1, n, cap, seed, e);
    gen_params p;
    gen_params_default(&p);
    if (gen_parse_dist(dist, &p, e))
        return NULL;
    p.prompts = n;
    p.group = 1;
    p.steps = 1;
    p.cap = cap;
    p.corr = 0;
    p.seed = seed;
    p.prompt_median = 0;
    trace *t = gen_trace(&p, e);
    if (!t)
        return NULL;
    btrace *b = btrace_new(BT_1D);
    if (!b)
        ts_errf(e, "out of memory");
    for (size_t i = 0; b && i < t->n_prompts; i++)
        if (btrace_add_1d(b, t->prompts[i].resp[0], e)) {
            btrace_free(b);
            b = NULL;
        }
    trace_free(t);
    return b;
}

/* ------------------------------------------------------------ bucketing */

/* 1D bucket index of a length: quarter octaves above 64 tokens. */
static int32_t len_bin(int32_t len)
{
    if (len <= 64)
        return 0;
    return 1 + (int32_t)floor(4.0 * log2((double)len / 64.0) + 1e-9);
}

typedef struct bkey {
    int64_t tokens;
    int32_t a, b, c; /* 2D: frames, height, width; 1D: bin, 0, 0 */
    size_t i;
} bkey;

static int bkey_cmp(const void *x, const void *y)
{
    const bkey *p = x, *q = y;
    if (p->a != q->a || p->b != q->b || p->c != q->c) {
        /* order buckets by representative size: 2D by tokens then shape, 1D by bin */
        if (p->b || q->b) {
            int64_t tp = p->tokens, tq = q->tokens;
            if (tp != tq)
                return (tp > tq) - (tp < tq);
        }
        if (p->a != q->a)
            return (p->a > q->a) - (p->a < q->a);
        if (p->b != q->b)
            return (p->b > q->b) - (p->b < q->b);
        return (p->c > q->c) - (p->c < q->c);
    }
    return (p->i > q->i) - (p->i < q->i);
}

int bt_bucketize(btrace *b, ts_err *e)
{
    if (b->n == 0)
        return ts_errf(e, "empty batch trace");
    bkey *k = malloc(b->n * sizeof *k);
    bt_bucket *bk = NULL;
    if (!k)
        return ts_errf(e, "out of memory");
    for (size_t i = 0; i < b->n; i++) {
        const bt_seq *q = &b->seq[i];
        k[i] = b->kind == BT_2D
                   ? (bkey){bt_tokens(q), q->frames, q->height, q->width, i}
                   : (bkey){0, len_bin(q->s), 0, 0, i};
    }
    qsort(k, b->n, sizeof *k, bkey_cmp);
    size_t nb = 0;
    for (size_t i = 0; i < b->n; i++)
        if (i == 0 || k[i].a != k[i - 1].a || k[i].b != k[i - 1].b || k[i].c != k[i - 1].c)
            nb++;
    bk = calloc(nb, sizeof *bk);
    if (!bk) {
        free(k);
        return ts_errf(e, "out of memory");
    }
    int32_t cur = -1;
    for (size_t i = 0; i < b->n; i++) {
        if (i == 0 || k[i].a != k[i - 1].a || k[i].b != k[i - 1].b || k[i].c != k[i - 1].c) {
            cur++;
            bk[cur].lo = INT32_MAX;
        }
        bt_seq *q = &b->seq[k[i].i];
        bt_bucket *u = &bk[cur];
        q->bucket = cur;
        int32_t tok = (int32_t)bt_tokens(q);
        if (tok > u->hi) {
            u->hi = tok;
            u->t = q->t;
            u->s = q->s;
            u->frames = q->frames;
            u->height = q->height;
            u->width = q->width;
        }
        if (tok < u->lo)
            u->lo = tok;
        u->count++;
    }
    free(k);
    free(b->buckets);
    b->buckets = bk;
    b->n_buckets = (int32_t)nb;
    return 0;
}

const char *bt_bucket_name(const btrace *b, int32_t bucket, char *buf, size_t n)
{
    const bt_bucket *u = &b->buckets[bucket];
    if (b->kind == BT_2D) {
        if (u->frames == 1)
            snprintf(buf, n, "img %dx%d", u->height, u->width);
        else
            snprintf(buf, n, "%dx%dx%df", u->height, u->width, u->frames);
    } else {
        snprintf(buf, n, "%d-%dtok", u->lo, u->hi);
    }
    return buf;
}
