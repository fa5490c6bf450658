/*
 * Paper-report tests: the difference and within mark of a published point,
 * range and "up to" bound; `tailsim paper --quick` writes index.md and
 * index.html with a row for every published number (by its quantity text),
 * and every image either file links exists and is not empty.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "reports/paper_report.h"
#include "sim/paper.h"
#include "tests/helpers.h"

static const char *out = "build/test-paper";

static paper_row row(double lo, double hi, double tol, double sim)
{
    paper_row r = {0};
    r.lo = lo;
    r.hi = hi;
    r.tol = tol;
    r.sim = sim;
    r.ran = 1;
    return r;
}

Test(paper, diff_of_point_range_and_bound)
{
    paper_row p = row(1.7, 1.7, 0.10, 1.87);
    cr_assert_float_eq(paper_row_diff(&p), 10.0, 1e-9);
    cr_assert(paper_row_within(&p));
    p.sim = 1.53;
    cr_assert_float_eq(paper_row_diff(&p), -10.0, 1e-9);
    p.sim = 1.5;
    cr_assert(!paper_row_within(&p));
    paper_row r = row(1.68, 2.70, 0.15, 2.0);
    cr_assert_eq(paper_row_diff(&r), 0.0);
    r.sim = 1.68 * 0.9;
    cr_assert_float_eq(paper_row_diff(&r), -10.0, 1e-9);
    r.sim = 2.70 * 1.2;
    cr_assert_float_eq(paper_row_diff(&r), 20.0, 1e-9);
    cr_assert(!paper_row_within(&r));
    paper_row b = row(0, 2.44, 0.10, 1.2);
    cr_assert_eq(paper_row_diff(&b), 0.0);
    b.sim = 2.44 * 1.05;
    cr_assert(paper_row_within(&b));
    b.ran = 0;
    cr_assert(!paper_row_within(&b), "a row that did not run is never within");
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s missing", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* Every "pre<name>.png" link in text names a non-empty file under out/. */
static int check_images(const char *text, const char *pre)
{
    int n = 0;
    for (const char *p = strstr(text, pre); p; p = strstr(p + 1, pre)) {
        const char *s = p + strlen(pre), *end = strstr(s, ".png");
        cr_assert_not_null(end);
        char path[512];
        snprintf(path, sizeof path, "%s/%.*s.png", out, (int)(end - s), s);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0, "linked image %s missing", path);
        cr_assert_gt(st.st_size, 1000, "image %s is empty", path);
        n++;
    }
    return n;
}

Test(paper, quick_report_has_every_row_and_figure, .timeout = 300)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s && build/tailsim paper --quick --bootstrap 2 -o %s 2>/dev/null",
             out, out);
    char *so = run_capture(cmd);
    cr_assert(strstr(so, "published numbers within tolerance"), "%s", so);
    free(so);
    char path[512];
    snprintf(path, sizeof path, "%s/index.md", out);
    char *md = slurp(path);
    snprintf(path, sizeof path, "%s/index.html", out);
    char *html = slurp(path);
    size_t n;
    const paper_row *pub = paper_published(&n);
    cr_assert_geq(n, 16);
    for (size_t i = 0; i < n; i++) {
        cr_assert(strstr(md, pub[i].what), "index.md has no row for '%s'", pub[i].what);
        cr_assert(strstr(html, pub[i].what), "index.html has no row for '%s'", pub[i].what);
    }
    /* figures: speedup bars, the three speculative-decoding plots, a Gantt
     * chart per policy, length CDFs and the DCP imbalance figure */
    int nm = check_images(md, "](");
    int nh = check_images(html, "src=\"");
    cr_assert_eq(nm, nh, "index.md links %d images, index.html %d", nm, nh);
    cr_assert_geq(nm, 4 + 6 + 2 + 1, "only %d images", nm);
    cr_assert(strstr(md, "bars.png") && strstr(md, "dcp-mix1/dcp_imbalance.png") &&
              strstr(md, "tlt-7b-tlt/gantt.png") && strstr(md, "specdec_depth.png"));
    /* the run states version, calibration and bootstrap */
    cr_assert(strstr(md, "calibration: ") && strstr(md, "bootstrap: 2 resamples"));
    cr_assert(strstr(html, "<style>") && !strstr(html, "<link"), "HTML is self-contained");
    free(md);
    free(html);
}
