/*
 * Tests of DCP's imbalance as VideoSys' sampler logs it (calculate_imbalance:
 * per step the mean over GPUs of (max - t_i), summed over steps, over the
 * sum of the steps' max): dcp_step_idle() on hand-computed steps, and the
 * `tailsim report` table of a saved `dcp` run carrying the sampler's
 * estimate next to the simulated imbalance.  The estimate against a
 * reference recomputed from a plan is in tests/test_dcp_plan.c (it needs that
 * file's fixtures).  Each test runs in its own process with a fresh
 * temporary directory.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "sim/dcp/dcp.h"
#include "tests/helpers.h"

static char tmpdir[256];

static void setup(void)
{
    tmpdir_create(tmpdir, sizeof tmpdir, "dcpimb");
}

static void teardown(void)
{
    tmpdir_remove(tmpdir);
}

TestSuite(dcp_imbalance, .init = setup, .fini = teardown);

static void tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

/* VideoSys' calculate_imbalance on a hand-computed step: groups of 2, 1
 * and 1 GPUs busy 4, 2 and 3 s; the step lasts 4 s, so the idle GPU-seconds
 * are 2 x 0 + 2 + 1 = 3 and the imbalance 3 / (4 x 4) = 18.75%.  Two more
 * GPUs in no group wait the whole 4 s each. */
Test(dcp_imbalance, step_imbalance_hand_computed)
{
    const double t[] = {4, 2, 3};
    const int32_t sp[] = {2, 1, 1};
    double tmax = -1;
    cr_expect_float_eq(dcp_step_idle(t, sp, 3, 4, &tmax), 3.0, 1e-12);
    cr_expect_float_eq(tmax, 4.0, 1e-12);
    cr_expect_float_eq(dcp_step_idle(t, sp, 3, 4, &tmax) / (4 * tmax), 0.1875, 1e-12);
    cr_expect_float_eq(dcp_step_idle(t, sp, 3, 6, &tmax), 11.0, 1e-12);
    cr_expect_float_eq(dcp_step_idle(t, sp, 0, 6, &tmax), 0.0, 1e-12);
    cr_expect_float_eq(tmax, 0.0, 1e-12);
    /* two steps: the run's imbalance weighs each step by its length */
    const double t2[] = {1, 1, 1};
    double m1, m2;
    double idle = dcp_step_idle(t, sp, 3, 4, &m1) + dcp_step_idle(t2, sp, 3, 4, &m2);
    cr_expect_float_eq(idle / (4 * (m1 + m2)), 3.0 / 20.0, 1e-12);
}

/* `tailsim report` on a saved dcp run: dcp.md carries both imbalances, and
 * the sampler's estimate there is the one the run computed. */
Test(dcp_imbalance, report_table_has_the_samplers_imbalance, .init = cr_redirect_stdout)
{
    setup();
    char db[512], dir[512], md[600];
    tmp_path(db, sizeof db, "r.db");
    tmp_path(dir, sizeof dir, "out");
    char *run[] = {"dcp", "dcp-llama8b-32xh200", "--strategies", "bucket,dcp-inter",
                   "--no-wall", "--steps", "3", "--db", db, NULL};
    cr_assert_eq(cmd_dcp(9, run), 0);
    char *rep[] = {"report", "--db", db, "-o", dir, NULL};
    cr_assert_eq(cmd_report(5, rep), 0);
    snprintf(md, sizeof md, "%s/dcp.md", dir);
    FILE *f = fopen(md, "r");
    cr_assert_not_null(f, "no %s", md);
    char line[1024];
    int header = 0, rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "| imbalance | imbalance (sampler's estimate) |"))
            header = 1;
        if (!strncmp(line, "| bucket |", 10) || !strncmp(line, "| dcp-inter |", 13)) {
            /* the 8th cell is the estimate: a percentage in [0, 100), not "-" */
            char *p = line;
            for (int c = 0; c < 7 && p; c++)
                p = strchr(p + 1, '|');
            cr_assert_not_null(p);
            double v = -1;
            cr_expect_eq(sscanf(p, "| %lf%%", &v), 1, "%s", line);
            cr_expect(v >= 0 && v < 100, "%s", line);
            rows++;
        }
    }
    fclose(f);
    cr_expect(header);
    cr_expect_eq(rows, 2);
    teardown();
}
