/*
 * Hardware descriptions with their calibration applied (models/hw_calib.c):
 * the loader every simulation uses.  Above models/hw.h (INIs only) and the
 * fit (models/fit.h).
 */
#ifndef TS_HW_CALIB_H
#define TS_HW_CALIB_H

#include "common/err.h"
#include "models/hw.h"

/* Loads "h100", "h200" (models/hw/<name>.ini) or a path with
 * hw_load_ini(), then fits its efficiency parameters to the calibration CSV
 * next to it when there is one (see hw_calib_path()); a bad CSV or a failed
 * fit is an error naming the INI.  Returns 0 or -1. */
int hw_load(const char *name, hw_desc *hw, ts_err *e);

/* Path of the calibration CSV hw_load() would use for an INI at ini_path
 * (<dir of the INI>/../calib/<stem>.csv) into buf; returns 1 when that file
 * exists and calibration is not disabled by TAILSIM_NO_CALIB (set and not
 * "0"), else 0.  */
int hw_calib_path(const char *ini_path, char *buf, size_t n);

#endif
