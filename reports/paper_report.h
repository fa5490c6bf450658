/*
 * The paper-reproduction report (`tailsim paper`) and the report of one
 * comparison (`tailsim compare -o`): what the experiments produced, as plain
 * data, and the writer that turns it into DIR/index.md, DIR/index.html
 * (self-contained: inline CSS, every PNG embedded as a data: URI), the speedup-bar figures
 * and the line figures (.dat files drawn by the static scripts
 * reports/paper_bars.gp and reports/paper_xy.gp).  The experiments
 * themselves run in cli/paper.c; this module knows nothing of the simulator.
 */
#ifndef TS_PAPER_REPORT_H
#define TS_PAPER_REPORT_H

#include <stddef.h>

#include "common/err.h"

/* One published number against tailsim's value. */
typedef struct paper_row {
    const char *section;   /* "TLT end to end", ... */
    const char *what;      /* the quantity, with its setup */
    const char *cite;      /* paper and where in it */
    const char *published; /* as the paper states it: "3.65x", "2.0-2.1x", "<= 2.44x" */
    double lo, hi;         /* the published value (lo == hi) or range; lo = 0 for "up to" */
    double tol;            /* relative tolerance of the within mark */
    const char *unit;      /* "x", "%" or "" */
    const char *note;      /* "fitted", "" */
    const char *bar;       /* label in the speedup-bar figure, NULL: not drawn */
    int ran;               /* 1: sim holds tailsim's value */
    double sim;            /* tailsim's value, in the unit */
    double sim_lo, sim_hi; /* bootstrap 5-95% range; NAN when none */
    char why[160];         /* when !ran: why not */
} paper_row;

/* Difference of tailsim's value from the published one, in % of it: 0 inside
 * a range (or under an "up to" bound), else the distance to the nearest end
 * over that end.  Cannot fail. */
double paper_row_diff(const paper_row *r);
/* 1 when |paper_row_diff| <= tol. */
int paper_row_within(const paper_row *r);

#define PAPER_MAX_COLS 12
#define PAPER_CELL 48
/* A table of results as strings (first row: the header). */
typedef struct paper_table {
    char title[160];
    char note[1400];
    int ncol, nrow;                               /* nrow counts the header */
    char (*cell)[PAPER_MAX_COLS][PAPER_CELL];     /* nrow rows */
} paper_table;

/* A line figure: series of (x, y) points drawn by reports/paper_xy.gp. */
#define PAPER_MAX_SERIES 8
#define PAPER_MAX_POINTS 16
typedef struct paper_series {
    char name[48];
    int kind;              /* 0 tailsim curve, 1 published value, 2 reference line */
    int n;
    double x[PAPER_MAX_POINTS], y[PAPER_MAX_POINTS];
} paper_series;
typedef struct paper_plot {
    char file[48];         /* PNG name; the .dat gets the same stem */
    char title[160], xlabel[64], ylabel[64];
    int logx;              /* 1: log2 x axis */
    int ns;
    paper_series s[PAPER_MAX_SERIES];
} paper_plot;

/* A figure already drawn (by report_write, dcp_report_write) or to draw. */
typedef struct paper_fig {
    char section[48];
    char path[128];        /* relative to DIR */
    char caption[200];
    int wide;              /* 1: drawn full width and linked to its full-size file (a
                            * Gantt chart, whose time axis needs the width) */
} paper_fig;

/* A pair of bars under one label (reports/paper_bars.gp): published vs
 * tailsim in the paper report, step vs rollout speedup per policy in a
 * comparison's. */
typedef struct paper_bar {
    char label[48];
    double a, a_lo, a_hi;  /* first bar and its error bar (a_lo = a_hi = a: none) */
    double b, b_lo, b_hi;  /* second bar, the same */
    int a_bound;           /* 1: a is an "up to" bound (a_lo 0, a = a_hi): drawn as a
                            * marker on a whisker from 0, not as a bar */
} paper_bar;

/* The colours of the two bars and the names the page's caption gives them
 * (one table, so the caption and the figure agree). */
typedef struct paper_colour {
    const char *name;      /* "grey" */
    const char *rgb;       /* "#9a9a9a", as paper_bars.gp takes it */
} paper_colour;
/* The paper report's published (a) and tailsim (b) bars; a comparison's
 * RL-step (a) and rollout (b) bars. */
extern const paper_colour paper_bars_colour[2], paper_speedup_colour[2];

#define PAPER_MAX_FIGS 64
#define PAPER_MAX_TABLES 16
#define PAPER_MAX_PLOTS 8
#define PAPER_MAX_SPEEDUPS 16
typedef struct paper_doc {
    char title[160];        /* page title; "" -> the paper report's */
    char meta[400];         /* line under the title; "" -> the paper report's (version,
                             * calibration, seeds, bootstrap) */
    const char *terminal;   /* text shown verbatim under "Terminal output" (not owned), or NULL */
    const char *terminal_title; /* heading of terminal (not owned); NULL: "Terminal output" */
    char version[32];
    char calibration[256];  /* every hardware description's calibration, "; "-joined */
    unsigned long long seed;/* the scenarios' own seeds unless overridden; stated per table */
    int quick, bootstrap;
    char setup[400];        /* how the run differed from the paper setups (quick) */
    double wall_s;          /* time the experiments took */
    paper_row *rows;
    size_t n_rows;
    paper_table tables[PAPER_MAX_TABLES];
    int n_tables;
    paper_plot plots[PAPER_MAX_PLOTS];
    int n_plots;
    paper_fig figs[PAPER_MAX_FIGS];
    int n_figs;
    paper_bar speedups[PAPER_MAX_SPEEDUPS]; /* per policy: step (a) and rollout (b) speedup
                             * over speedup_ref, drawn as speedup.png; a comparison only */
    int n_speedups;
    char speedup_ref[48];   /* the policy the speedups are over */
    const char *refs[4];    /* the papers the rows cite, static strings */
    int n_refs;
    char missing[8][200];   /* experiments not run, with why */
    int n_missing;
} paper_doc;

/* Adds a table of nrow x ncol cells (header included), all "".  Returns it,
 * or NULL with a message when full or out of memory. */
paper_table *paper_doc_table(paper_doc *d, const char *title, int nrow, int ncol, ts_err *e);
/* Adds a figure entry.  Returns 0, or -1 when full. */
int paper_doc_fig(paper_doc *d, const char *section, const char *path, const char *caption,
                  ts_err *e);
/* Frees the tables' cells (not rows: the caller owns them). */
void paper_doc_free(paper_doc *d);

/* Writes DIR/bars.dat + bars.png (published vs tailsim for every row with a
 * bar label that ran; nothing when there are no rows), DIR/speedup.dat +
 * speedup.png (when d->n_speedups), every plot's .dat + .png, then
 * DIR/index.md and DIR/index.html (with no rows: no published-numbers
 * section).  DIR must exist.  Returns 0, or -1 naming the file or script
 * that failed. */
int paper_report_write(const paper_doc *d, const char *dir, ts_err *e);

/* Writes d's page alone to path (atomically): index.html's text without the
 * published-numbers bars, for a page whose figures were drawn elsewhere (one
 * run's, by report_write()).  Returns 0, or -1 naming path. */
int paper_report_write_html(const paper_doc *d, const char *path, ts_err *e);

#endif
