/*
 * What sim/scenario.c (the key table, the reader, --set) and
 * sim/scenario_ini.c (the key listing and the INI writer) share: the one
 * table of scenario keys.  Private to those two files.
 */
#ifndef TS_SCENARIO_IMPL_H
#define TS_SCENARIO_IMPL_H

#include <stddef.h>

#include "sim/scenario.h"

#define OFF(f) offsetof(scenario, f)

typedef enum { K_INT, K_DBL, K_STR, K_BOOL, K_U64 } ktype;

typedef struct key_def {
    const char *section, *key;
    ktype type;
    size_t off;
    double min, max;  /* ranges for numbers; max string length for K_STR */
    const char *help;
} key_def;

/* Every key a scenario accepts, grouped by section (sim/scenario.c). */
extern const key_def scn_keys[];
extern const size_t scn_n_keys;

/* 1 for the keys a scenario must set (they have no default). */
int scn_key_required(const key_def *k);

#endif
