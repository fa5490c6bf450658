/*
 * What `tailsim sweep` (cli/cmd_sweep.c) shares with `tailsim plan`: the -j
 * option and the progress line drawn on stderr while a grid runs.
 */
#ifndef TS_CMD_SWEEP_H
#define TS_CMD_SWEEP_H

#include "sweep/sweep_collect.h"

/* Parses -j / --jobs N into *jobs (1..256).  Returns 0 or prints and -1. */
int sweep_parse_jobs(const char *prog, const char *arg, int *jobs);

/* Sets h's progress hook to draw c's progress on stderr: a bar on a
 * terminal, a line every 10% otherwise.  Cannot fail. */
void sweep_progress_attach(sweep_collect *c, sweep_hooks *h);

#endif
