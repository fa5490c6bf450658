/*
 * dcp-inter (sim/dcp/dcp_inter.c): keeps each bucket's best configuration and
 * balances the groups of a step with per-group gradient accumulation counts.
 * Private to sim/dcp/: dcp_plan.c's dispatch calls it.
 */
#ifndef TS_DCP_INTER_H
#define TS_DCP_INTER_H

#include "sim/dcp/dcp.h"

/* Plans dcp-inter for strategy s into p (dcp_plan_make()'s contract).
 * Returns 0, or -1 with e set. */
int dcp_plan_inter(const dcp_ctx *c, const dcp_strategy *s, dcp_plan *p, ts_err *e);

#endif
