/*
 * `tailsim-validate check`: the hold-out check of the cost model against a
 * calibration CSV (validate/check.c).  Kept apart from validate.h because
 * check.c uses models/calib.h's calib_row, which validate.h also names.
 */
#ifndef TS_VALIDATE_CHECK_H
#define TS_VALIDATE_CHECK_H

/* `check CSV [--json] [--hw NAME|PATH] [-o FILE.ini]`; argv[0] is "check".
 * Never touches CUDA.  Returns the exit status: 0 targets met, 1 targets
 * missed, 2 usage or input error. */
int val_check(int argc, char **argv);

#endif
