/*
 * A progress line for long CLI work (cli/progress.c): one line on stderr,
 * redrawn in place ("\r...") at most ~10 times a second, and only when
 * stderr is a terminal; otherwise (a pipe, a file, a test) nothing at all,
 * so that what a command writes stays byte-identical.  Never on stdout.
 * The library stays silent: where the loop is in the library it reports
 * through a callback (boot_compare's, policy_run_progress's), and
 * progress_cb() is one that draws here.
 */
#ifndef TS_PROGRESS_H
#define TS_PROGRESS_H

typedef struct progress {
    int on;             /* 1: stderr is a terminal (else every call does nothing) */
    const char *label;  /* the line's prefix ("tailsim compare"), kept, not copied */
    const char *what;   /* what is counted ("bootstrap"), kept, not copied; may be NULL */
    double t0, last;    /* wall seconds at progress_start and at the last draw */
    int drawn;          /* 1: a line stands on the terminal */
} progress;

/* Starts p for label (kept, not copied): on when stderr is a terminal.
 * Cannot fail. */
void progress_start(progress *p, const char *label);

/* Says that `done` of `total` units of what (kept, not copied; NULL: none)
 * are done: "\rLABEL: WHAT DONE/TOTAL (PCT%)  ELAPSED s", drawn when 0.1 s
 * passed since the last draw, or at the first or last unit.  Cannot fail. */
void progress_step(progress *p, const char *what, long done, long total);

/* A callback of the library's loops (ctx: a progress whose `what` says what
 * is counted): progress_step(ctx, ctx->what, done, total).  Cannot fail. */
void progress_cb(void *ctx, int done, int total);

/* Clears the line, if one was drawn, so that what follows starts on a
 * clean line.  Cannot fail; progress_end of a stopped p does nothing. */
void progress_end(progress *p);

#endif
