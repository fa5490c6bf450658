/*
 * The progress line of long CLI work (cli/progress.h): compare's policies
 * and bootstrap resamples, rollout/rlstep's steps, dcp's strategies.  Drawn
 * on stderr only when stderr is a terminal (isatty), throttled by the wall
 * clock to ~10 redraws a second (a step of a few milliseconds would
 * otherwise flood the terminal), and cleared at the end.  Off a terminal it
 * writes nothing, so outputs and tests are byte-identical with or without
 * it.  Only prints to stderr.
 */
#include "cli/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "common/util.h"

#define PROGRESS_EVERY_S 0.1 /* seconds between redraws */

void progress_start(progress *p, const char *label)
{
    p->on = isatty(STDERR_FILENO) == 1;
    p->label = label;
    p->what = NULL;
    p->t0 = p->on ? ts_wall_s() : 0;
    p->last = -1;
    p->drawn = 0;
}

void progress_step(progress *p, const char *what, long done, long total)
{
    if (!p->on)
        return;
    double now = ts_wall_s();
    if (p->drawn && done != total && now - p->last < PROGRESS_EVERY_S)
        return;
    p->last = now;
    fprintf(stderr, "\r\033[K%s: %s%s%ld/%ld (%.0f%%)  %.1f s", p->label, what ? what : "",
            what ? " " : "", done, total, total > 0 ? 100.0 * (double)done / (double)total : 0.0,
            now - p->t0);
    fflush(stderr);
    p->drawn = 1;
}

void progress_cb(void *ctx, int done, int total)
{
    progress *p = ctx;
    progress_step(p, p->what, done, total);
}

void progress_end(progress *p)
{
    if (p->on && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->drawn = 0;
}
