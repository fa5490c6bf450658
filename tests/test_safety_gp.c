/*
 * Nothing reaches gnuplot as a command, and no name breaks a report file
 * (issue 21, items 1 and 9).
 *
 * gnuplot runs a data or script name that starts with '<' as a shell
 * command and pipes its output into one named '|cmd'; "$name" is a
 * datablock.  The CLI cases run every command that draws (compare -o, plan
 * -o, report of an RL step, of a DCP run and of several runs, paper -o) in a
 * fresh directory with such an output directory ("<touch PWNED;x",
 * "|touch PWNED;x", "$x") and, where the command takes one, a scenario file
 * named so (the name goes into titles and .dat files); each must succeed
 * with its files under the literal directory name, and no PWNED may appear.
 *
 * The writer cases give report_write, plan_plot, dcp_report_write and
 * paper_report_write names holding a newline, a carriage return, a tab, '"',
 * '|', '[', ']', '<' and a Markdown fence: no line of a written file may
 * start inside a name, every .dat line keeps its quotes paired, every
 * Markdown table row keeps its header's cells, an HTML attribute stays one
 * attribute, and link targets stay one URL.  Tests that draw skip without
 * gnuplot.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reports/dcp_report.h"
#include "reports/paper_report.h"
#include "reports/plan_report.h"
#include "reports/report.h"
#include "results/result.h"
#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "safety-gp");
}

static void teardown(void)
{
    tmpdir_remove(dir);
}

TestSuite(safety_gp, .init = setup, .fini = teardown, .timeout = 120);

/* ---- item 1: no command through gnuplot --------------------------------- */

/* The planted names: each would run `touch PWNED` (or read a datablock)
 * if it reached gnuplot as it is. */
static const char *const forms[] = {"<touch PWNED;x", "|touch PWNED;x", "$x"};

typedef struct gp_case {
    const char *name;
    int nforms;        /* the first nforms of forms[] */
    const char *cmd;   /* sh -c text: "$T" tailsim, "$R" the repository, "$O" the form */
    const char *files[4]; /* what the command must write under out */
} gp_case;

#define SMALL "--set trace.prompts=8"
#define QWEN "\"$R/scenarios/qwen7b-64gpu.ini\""
#define DCPS "\"$R/scenarios/dcp-llama8b-32xh200.ini\""

static const gp_case gp_cases[] = {
    {"compare", 3, "cp " QWEN " \"./$O.ini\" && \"$T\" compare \"./$O.ini\" --policies verl,tlt "
     SMALL " -o \"$O\"", {"index.md", "speedup.png", "compare-tlt/gantt.png", "specdec_depth.png"}},
    {"plan", 3, "cp " QWEN " \"./$O.ini\" && \"$T\" plan \"./$O.ini\" --gpus 64 --tp 4 " SMALL
     " -o \"$O\"", {"plan.dat", "plan_front.png"}},
    {"report", 3, "cp " QWEN " \"./$O.ini\" && \"$T\" rlstep \"./$O.ini\" " SMALL " --db r.db && "
     "\"$T\" report --db r.db -o \"$O\"", {"report.md", "gantt.png", "cdf.png"}},
    {"report_dcp", 3, "cp " DCPS " \"./$O.ini\" && \"$T\" dcp \"./$O.ini\" --scale "
     "--set dcp.seqs=512 --db r.db && \"$T\" report --db r.db -o \"$O\"",
     {"dcp.md", "dcp_imbalance.png", "gantt.png"}},
    {"report_runs", 3, "cp " QWEN " \"./$O.ini\" && \"$T\" rlstep \"./$O.ini\" " SMALL
     " --db r.db && \"$T\" rlstep qwen7b-64gpu " SMALL " --policy tlt --db r.db && "
     "\"$T\" report --db r.db --run 1,2 -o \"$O\"", {"index.md", "speedup.png", "run-1/gantt.png"}},
    /* the paper report (fixed scenarios) is the slowest: the two command forms */
    {"paper", 2, "\"$T\" paper --quick --bootstrap 0 -o \"$O\"",
     {"index.md", "index.html", "specdec_depth.png"}},
};

#define N_GP_CASES (sizeof gp_cases / sizeof gp_cases[0])

/* Criterion copies the parameters into each test's process: indices, not
 * pointers (the strings they point to would move). */
ParameterizedTestParameters(safety_gp, nothing_runs_through_gnuplot)
{
    static int idx[N_GP_CASES];
    for (size_t i = 0; i < N_GP_CASES; i++)
        idx[i] = (int)i;
    return cr_make_param_array(int, idx, N_GP_CASES);
}

ParameterizedTest(int *ci, safety_gp, nothing_runs_through_gnuplot)
{
    const gp_case *c = &gp_cases[*ci];
    if (!have_gnuplot())
        cr_skip_test("gnuplot not on PATH");
    char root[1024], cmd[8192], path[1024];
    cr_assert_not_null(getcwd(root, sizeof root));
    struct stat st;
    for (int k = 0; k < c->nforms; k++) {
        /* a fresh directory per form: the command's own files only */
        char sub[300];
        snprintf(sub, sizeof sub, "%s/%d", dir, k);
        cr_assert_eq(mkdir(sub, 0700), 0);
        /* the form goes through the environment, so the shell running the
         * command line never interprets it; gnuplot is what is tested */
        snprintf(cmd, sizeof cmd,
                 "cd '%s' && T='%s/build/tailsim' R='%s' O='%s' sh -c '%s' >out.txt 2>err.txt",
                 sub, root, root, forms[k], c->cmd);
        int rc = system(cmd);
        snprintf(path, sizeof path, "%s/PWNED", sub);
        cr_assert_neq(stat(path, &st), 0, "%s with '%s': gnuplot ran the planted command",
                      c->name, forms[k]);
        snprintf(path, sizeof path, "%s/err.txt", sub);
        FILE *f = fopen(path, "r");
        char err[512] = "";
        if (f) {
            size_t n = fread(err, 1, sizeof err - 1, f);
            err[n] = 0;
            fclose(f);
        }
        cr_assert_eq(rc, 0, "%s with '%s' failed: %s", c->name, forms[k], err);
        for (int i = 0; i < 4 && c->files[i]; i++) {
            snprintf(path, sizeof path, "%s/%s/%s", sub, forms[k], c->files[i]);
            cr_assert(stat(path, &st) == 0 && st.st_size > 0, "%s with '%s': no %s", c->name,
                      forms[k], path);
        }
    }
}
