/*
 * `tailsim paper [-o DIR] [--quick] [--bootstrap N]`: runs every shipped
 * paper experiment (cli/paper.c) and writes DIR/index.html and DIR/index.md
 * with each published number against tailsim's, the figures and the result
 * tables (reports/paper_report.c).  Progress goes to stderr, one line per
 * experiment; stdout gets the summary.  `make run` runs this.
 *
 * Phases: paper_cmd_parse (the command line), paper_run and
 * paper_report_write (cli/paper.c, reports/paper_report.c), then
 * paper_cmd_summary.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_errno.h>

#include "common/util.h"
#include "cli/cmd.h"
#include "cli/opts.h"
#include "cli/paper.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tailsim paper [-o DIR] [--quick] [--bootstrap N]\n\n"
            "Runs every shipped paper experiment (TLT speculative decoding, TLT end to end on\n"
            "Qwen2.5-7B and 32B, the PolyTrace DAPO replay under every policy, the DCP video\n"
            "mixes, the 1D case and VideoSys' released DCP configurations) and writes\n"
            "DIR/index.html and DIR/index.md: each published number with its citation next\n"
            "to tailsim's value, the difference and a within-tolerance mark, with the figures\n"
            "and, per released DCP configuration, every strategy against the published numbers.\n\n"
            "  -o DIR          output directory (default reports/out)\n"
            "  --quick         fewer prompts in the TLT end-to-end steps, no bootstrap unless asked\n"
            "  --bootstrap N   resamples of the prompts for the TLT / DAPO speedups\n"
            "                  (default %d; 0 turns it off)\n",
            PAPER_BOOTSTRAP_DEFAULT);
}

static void progress(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "tailsim paper: %s\n", msg);
}

/* Parses the command line into o.  Returns -1 to go on, or the exit status
 * (0 after --help, 2 after a usage error, said on stderr). */
static int paper_cmd_parse(int argc, char **argv, paper_opts *o)
{
    static const struct option lo[] = {{"quick", no_argument, 0, 'q'},
                                       {"bootstrap", required_argument, 0, 'B'},
                                       OPTS_LONG_HELP,
                                       {0, 0, 0, 0}};
    const paper_opts defaults = {"reports/out", 0, -1, progress, NULL};
    *o = defaults;
    opts_common co; /* -o, -h */
    opts_init(&co, "paper", 0);
    int64_t v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "ho:", lo, NULL)) != -1) {
        int t = opts_step(&co, c, optarg, usage);
        if (t == OPTS_STEP_TAKEN)
            continue;
        if (t != OPTS_STEP_OTHER)
            return t;
        switch (c) {
        case 'q': o->quick = 1; break;
        case 'B':
            if (ts_parse_i64(optarg, 0, 10000, &v)) {
                fprintf(stderr, "tailsim paper: --bootstrap '%s': expected an integer in [0, 10000]\n",
                        optarg);
                return 2;
            }
            o->bootstrap = (int)v;
            break;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "tailsim paper: unexpected argument '%s' (try --help)\n", argv[optind]);
        return 2;
    }
    if (co.out)
        o->dir = co.out;
    return -1;
}

/* The closing lines on stdout: how many published numbers tailsim meets,
 * the time since w0 and where the report is. */
static void paper_cmd_summary(const paper_opts *o, const paper_doc *d, double w0)
{
    int ran = 0, within = 0;
    for (size_t i = 0; i < d->n_rows; i++) {
        ran += d->rows[i].ran;
        within += paper_row_within(&d->rows[i]);
    }
    printf("tailsim %s: %d of %zu published numbers within tolerance (%d run); %.1f s\n"
           "report: %s/index.html (and index.md)\n",
           TS_VERSION, within, d->n_rows, ran, ts_wall_s() - w0, o->dir);
}

int cmd_paper(int argc, char **argv)
{
    paper_opts o;
    int prc = paper_cmd_parse(argc, argv, &o);
    if (prc >= 0)
        return prc;
    gsl_set_error_handler_off();
    ts_err e = {{0}};
    paper_doc d;
    double w0 = ts_wall_s();
    if (paper_run(&o, &d, &e))
        goto fail;
    progress(NULL, "drawing the figures and writing the report");
    if (paper_report_write(&d, o.dir, &e)) {
        paper_free(&d);
        goto fail;
    }
    paper_cmd_summary(&o, &d, w0);
    paper_free(&d);
    return 0;
fail:
    fprintf(stderr, "tailsim paper: %s\n", e.msg);
    return 1;
}
