/*
 * What `tailsim sweep` (cli/cmd_sweep.c) shares with `tailsim plan`: the
 * progress line drawn on stderr while a grid runs, and the end of an
 * interrupted run.  (Their -j option is parsed by cli/opts.c.)
 */
#ifndef TS_CMD_SWEEP_H
#define TS_CMD_SWEEP_H

#include "sweep/sweep_collect.h"

/* Sets h's progress hook to draw c's progress on stderr: a bar on a
 * terminal, a line every 10% otherwise.  Cannot fail. */
void sweep_progress_attach(sweep_collect *c, sweep_hooks *h);

/* Ends the deferral of the fatal signals (ts_signal_defer()) after c's grid
 * of `total` configurations ran and its store was closed.  When a signal
 * came, first says on stderr "tailsim PROG: interrupted by SIGINT: N of
 * TOTAL configurations saved (run, without a store); sweep K marked
 * interrupted" (or why the sweep's row could not be marked, mark_err; or
 * "nothing written" when no sweep was started), then dies of the signal;
 * otherwise returns.  Cannot fail. */
void sweep_signal_resume(const sweep_collect *c, size_t total, const char *mark_err);

#endif
