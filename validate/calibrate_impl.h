/*
 * Private to validate/calibrate.c and validate/calib_sweeps.c: the sweeps of
 * the simple ops (calib_sweeps.c) that the driver's group table
 * (calibrate.c) runs, and the array-length macro both use.  Each sweep
 * returns 0, or -1 with c->err set.
 */
#ifndef TS_VALIDATE_CALIBRATE_IMPL_H
#define TS_VALIDATE_CALIBRATE_IMPL_H

#include "validate/validate.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

int sweep_copy(calib *c);       /* copy: the 1 GiB device copy ceiling */
int sweep_host(calib *c);       /* h2d, d2h: the pinned host link */
int sweep_gemm(calib *c);       /* gemm_peak, then gemm at every shape */
int sweep_attn(calib *c, int chunk); /* decode_attn (0) or chunk_attn (1) */
int sweep_rows(calib *c);       /* rmsnorm, rope, swiglu, embed */
int sweep_verify(calib *c);     /* verify_accept */

#endif
