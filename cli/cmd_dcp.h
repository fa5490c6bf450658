/*
 * The parts of `tailsim dcp` in files of their own (cli/cmd_dcp_dist.c).
 */
#ifndef TS_CMD_DCP_H
#define TS_CMD_DCP_H

#include "sim/dcp/dcp_setup.h"

/* --sweep-dist: runs strategies st[0..ns) but plain bucket (the reference)
 * on the scenario's video mix at every point of dcp_dist_grid and prints
 * the table (json: one JSON object); out: also DIR/dcp_dist.png.  d is the
 * scenario's loaded setup (names for the header).  Returns 0, or -1 with e
 * set (a scenario without a generated video mix, a planner failure, the
 * figure). */
int dcp_cmd_sweep_dist(const scenario *s, const dcp_setup *d, const dcp_strategy *st, int ns,
                       int json, const char *out, ts_err *e);

#endif
