/*
 * The report pages' figures (reports/report_html.c, reports/paper_report.c,
 * the static scripts): base64 against RFC 4648's vectors, a page's images
 * embedded as data: URIs (and an image over the bound linked instead), the
 * speedup chart's caption naming the colours its script is given, an "up
 * to" bound drawn as a marker, the Gantt chart's phase names laid out so
 * that none overlaps, and a near p99 label moved off the max's.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base64.h"
#include "reports/paper_report.h"
#include "reports/report.h"
#include "reports/report_html.h"
#include "results/result.h"
#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "report-html");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(report_html, .init = setup, .fini = teardown);

/* The text fn writes to a memory stream. */
static char *encode(const char *in)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_not_null(f);
    cr_assert_eq(ts_base64_write(f, (const unsigned char *)in, strlen(in)), 0);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(n, ts_base64_len(strlen(in)));
    return buf;
}

Test(report_html, base64_rfc4648_vectors)
{
    const char *v[][2] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                          {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
                          {"foobar", "Zm9vYmFy"}, {"\xff\xfe\x80", "//6A"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char *s = encode(v[i][0]);
        cr_assert_str_eq(s, v[i][1], "base64(\"%s\")", v[i][0]);
        free(s);
    }
}

/* Writes dir/name: a PNG signature then n - 8 bytes. */
static void write_png(const char *name, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite("\x89PNG\r\n\x1a\n", 1, 8, f), 8);
    for (size_t i = 8; i < n; i++)
        fputc((int)(i * 7 % 251), f);
    cr_assert_eq(fclose(f), 0);
}

/* report_html_img()'s output for dir/name into a string. */
static char *img(const char *name, int flags, int *rc)
{
    char *buf = NULL;
    size_t n = 0;
    ts_err e = {""};
    FILE *f = open_memstream(&buf, &n);
    cr_assert_not_null(f);
    *rc = report_html_img(f, dir, name, "alt \"x\"", flags, &e);
    cr_assert_eq(fclose(f), 0);
    return buf;
}

Test(report_html, an_image_is_embedded_unless_over_the_bound)
{
    int rc;
    write_png("small.png", 1000);
    char *s = img("small.png", REPORT_IMG_LINK, &rc);
    cr_assert_eq(rc, 0);
    cr_assert(!strncmp(s, "<a href=\"small.png\" title=\"full size\"><img src=\"data:image/png;base64,"
                          "iVBORw0KGgo", 80), "%s", s);
    cr_assert(strstr(s, "\" alt=\"alt &quot;x&quot;\"></a>"), "%.100s", s + strlen(s) - 100);
    cr_assert_eq(html_embedded_images("small", s), 1);
    free(s);
    /* over the bound: linked, and the page says so */
    write_png("big.png", (size_t)REPORT_EMBED_MAX + 1);
    s = img("big.png", 0, &rc);
    cr_assert_eq(rc, 0);
    cr_assert_null(strstr(s, "<img"), "%.200s", s);
    cr_assert(strstr(s, "<a href=\"big.png\">big.png</a>") && strstr(s, "linked, not embedded"),
              "%s", s);
    free(s);
    /* a missing image or one that is no PNG is an error naming it */
    ts_err e = {""};
    FILE *f = fopen("/dev/null", "w");
    cr_assert_eq(report_html_img(f, dir, "none.png", "", 0, &e), -1);
    cr_assert(strstr(e.msg, "none.png"), "%s", e.msg);
    char p[512];
    snprintf(p, sizeof p, "%s/text.png", dir);
    write_aside(p, "not an image\n");
    cr_assert_eq(report_html_img(f, dir, "text.png", "", 0, &e), -1);
    cr_assert(strstr(e.msg, "not a PNG"), "%s", e.msg);
    fclose(f);
}

/* The two bar colours of bars.dat's spec comment, "... |#aaaaaa|#bbbbbb)". */
static void spec_colours(const char *dat, char a[8], char b[8])
{
    const char *nl = strchr(dat, '\n');
    cr_assert_not_null(nl);
    cr_assert(nl - dat > 17 && nl[-1] == ')' && nl[-17] == '|' && nl[-9] == '|', "%.*s",
              (int)(nl - dat), dat);
    memcpy(a, nl - 16, 7), a[7] = 0;
    memcpy(b, nl - 8, 7), b[7] = 0;
}

/* The colour that name means in the captions. */
static const char *rgb_of(const char *name)
{
    static const char *const t[][2] = {{"grey", "#9a9a9a"}, {"blue", "#3b6fb6"},
                                       {"green", "#2e9e4f"}};
    for (size_t i = 0; i < 3; i++)
        if (!strcmp(name, t[i][0]))
            return t[i][1];
    return "?";
}

Test(report_html, bar_captions_name_the_colours_drawn_and_bounds_are_markers, .timeout = 60)
{
    if (!have_gnuplot())
        cr_skip_test("no gnuplot");
    paper_doc *d = calloc(1, sizeof *d);
    cr_assert_not_null(d);
    paper_row rows[2] = {
        {"s", "a value", "c", "2.0x", 2.0, 2.0, 0.1, "x", "", "value", 1, 1.9, NAN, NAN, ""},
        {"s", "a bound", "c", "<= 2.44x", 0, 2.44, 0.1, "x", "bound", "bound", 1, 1.7, NAN, NAN,
         ""}};
    d->rows = rows;
    d->n_rows = 2;
    d->n_speedups = 1;
    snprintf(d->speedups[0].label, sizeof d->speedups[0].label, "tlt");
    d->speedups[0].a = d->speedups[0].a_lo = d->speedups[0].a_hi = 1.5;
    d->speedups[0].b = d->speedups[0].b_lo = d->speedups[0].b_hi = 1.4;
    snprintf(d->speedup_ref, sizeof d->speedup_ref, "verl");
    ts_err e = {""};
    cr_assert_eq(paper_report_write(d, dir, &e), 0, "%s", e.msg);
    char p[512];
    snprintf(p, sizeof p, "%s/index.html", dir);
    char *html = slurp_file(p);
    cr_assert_eq(html_embedded_images(p, html), 2);
    /* bars.png: the caption's first two colour names are the script's colours */
    char a[8], b[8];
    snprintf(p, sizeof p, "%s/bars.dat", dir);
    char *dat = slurp_file(p);
    spec_colours(dat, a, b);
    const char *cap = strstr(html, "<figcaption>Every published speedup (");
    cr_assert_not_null(cap, "%s", html);
    char n1[16], n2[16];
    cr_assert_eq(sscanf(cap, "<figcaption>Every published speedup (%15[a-z];", n1), 1);
    const char *t = strstr(cap, "next to tailsim's (");
    cr_assert_not_null(t);
    cr_assert_eq(sscanf(t, "next to tailsim's (%15[a-z];", n2), 1);
    cr_assert_str_eq(rgb_of(n1), a, "caption says %s, the script draws %s", n1, a);
    cr_assert_str_eq(rgb_of(n2), b, "caption says %s, the script draws %s", n2, b);
    /* the bound row is marked as one (drawn as a marker), the value row not */
    cr_assert(strstr(dat, "\"value\" 2 2 2 1.9 1.9 1.9 0\n"), "%s", dat);
    cr_assert(strstr(dat, "\"bound\" 2.44 0 2.44 1.7 1.7 1.7 1\n"), "%s", dat);
    free(dat);
    /* speedup.png: the same for the comparison's colours */
    snprintf(p, sizeof p, "%s/speedup.dat", dir);
    dat = slurp_file(p);
    spec_colours(dat, a, b);
    cap = strstr(html, "<figcaption>RL-step (");
    cr_assert_not_null(cap);
    cr_assert_eq(sscanf(cap, "<figcaption>RL-step (%15[a-z]) and rollout (%15[a-z])", n1, n2), 2);
    cr_assert_str_eq(rgb_of(n1), a, "caption says %s, the script draws %s", n1, a);
    cr_assert_str_eq(rgb_of(n2), b, "caption says %s, the script draws %s", n2, b);
    free(dat);
    free(html);
    /* the script takes its colours from the spec, and draws a bound as no bar */
    char gp[4096];
    cr_assert_eq(report_script("paper_bars", gp, sizeof gp, &e), 0, "%s", e.msg);
    char *src = slurp_file(gp);
    cr_assert(strstr(src, "with boxes lc rgb ca ") && strstr(src, "with boxes lc rgb cb ") &&
                  strstr(src, "bar(v, bound) = (bound > 0) ? NaN : v"),
              "paper_bars.gp");
    free(src);
    free(d);
}

/* The label_level of phase name in gantt.dat's block 1 (-1: absent). */
static int level_of(const char *dat, const char *name)
{
    const char *b1 = strstr(dat, "# block 1");
    cr_assert_not_null(b1);
    char key[32];
    snprintf(key, sizeof key, " %s ", name);
    const char *l = strstr(b1, key);
    if (!l)
        return -1;
    double t0, t1;
    int lev;
    cr_assert_eq(sscanf(l + strlen(key), "%lf %lf %d", &t0, &t1, &lev), 3, "%s", l);
    return lev;
}

/* The side column of cdf.dat's block 1 for label name. */
static int side_of(const char *dat, const char *name)
{
    const char *b1 = strstr(dat, "# block 1");
    cr_assert_not_null(b1);
    char key[16];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *l = strstr(b1, key);
    cr_assert_not_null(l, "%s", b1);
    int x, side;
    double fr;
    cr_assert_eq(sscanf(l + strlen(key), "%d %lf %d", &x, &fr, &side), 3, "%s", l);
    return side;
}

/* One RL step on 4 GPUs whose reward, old_logp and ref phases are seconds
 * long against a 150 s step (their names would overlap), and 100 responses
 * of which the longest 5 sit at a 16,000-token cap (p99 next to the max). */
Test(report_html, phase_names_and_percentile_labels_do_not_overlap, .timeout = 60)
{
    if (!have_gnuplot())
        cr_skip_test("no gnuplot");
    run_record *r = run_record_new();
    cr_assert_not_null(r);
    run_set_identity(r, "rlstep", "names", "", 1, 4, 4, 1);
    static const double t[] = {0, 0.1, 100, 101, 103, 105, 150};
    for (int g = 0; g < 4; g++)
        for (int p = 0; p < PH_COUNT; p++)
            cr_assert_eq(run_add_interval(r, g, p, TL_BUSY, t[p], t[p + 1]), 0);
    cr_assert_eq(run_add_step(r, 0.0), 0);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(run_add_response(r, i % 4, 100, i < 95 ? 100 + 100 * i : 16000, 1.0), 0);
    ts_err e = {""};
    cr_assert_eq(report_write_axis(r, dir, 300, &e), 0, "%s", e.msg);
    char p[512];
    snprintf(p, sizeof p, "%s/gantt.dat", dir);
    char *dat = slurp_file(p);
    int rw = level_of(dat, "reward"), ol = level_of(dat, "old_logp"), rf = level_of(dat, "ref");
    cr_assert(rw >= 0 && ol >= 0 && rf >= 0, "%s", dat);
    cr_assert(rw != ol && ol != rf && rw != rf, "reward %d, old_logp %d, ref %d share a height",
              rw, ol, rf);
    cr_assert_eq(level_of(dat, "rollout"), 0);
    cr_assert_eq(level_of(dat, "update"), 0, "a wide phase's name stays next to the chart");
    free(dat);
    snprintf(p, sizeof p, "%s/cdf.dat", dir);
    dat = slurp_file(p);
    cr_assert_eq(side_of(dat, "p99"), 1, "p99 at the cap keeps its label on the max's: %s", dat);
    cr_assert_eq(side_of(dat, "p50"), 0);
    cr_assert_eq(side_of(dat, "max"), 0);
    free(dat);
    snprintf(p, sizeof p, "%s/index.html", dir);
    char *html = slurp_file(p);
    cr_assert_eq(html_embedded_images(p, html), 2);
    free(html);
    run_record_free(r);
}
