/*
 * What `tailsim sweep` (cli/cmd_sweep.c) shares with `tailsim plan`: the
 * progress line drawn on stderr while a grid runs.  (Their -j option is
 * parsed by cli/opts.c.)
 */
#ifndef TS_CMD_SWEEP_H
#define TS_CMD_SWEEP_H

#include "sweep/sweep_collect.h"

/* Sets h's progress hook to draw c's progress on stderr: a bar on a
 * terminal, a line every 10% otherwise.  Cannot fail. */
void sweep_progress_attach(sweep_collect *c, sweep_hooks *h);

#endif
