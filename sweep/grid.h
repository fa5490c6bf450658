/*
 * Sweep grids: a base scenario plus scenario keys whose values are lists.
 * Every combination of the lists (the cartesian product) is one
 * configuration, numbered by a stable index: dimensions in the order they
 * were given, the last one varying fastest, like nested loops.
 *
 * Grid file format (INI, libinih):
 *
 *   [sweep]
 *   scenario = qwen7b-64gpu     ; required: name under scenarios/ or a path
 *   command  = rlstep           ; rlstep (default) | rollout
 *   steps    = 1                ; RL steps replayed per configuration
 *   policy   = verl,tlt         ; a list: the same as [policy] name = verl,tlt
 *
 *   [rollout]                   ; any other section: scenario keys
 *   tp = 1,2,4                  ; comma-separated values, each a configuration
 *   [trace]
 *   prompts = 64,128
 *   dist = "lognormal:8:1"      ; a double-quoted value is one value, verbatim
 *   seed = 1,2,3,4              ; a long list continues on indented lines
 *       5,6,7,8                 ; (the same list; no trailing commas)
 *
 * Every key and every value goes through the scenario key table before
 * anything runs; errors name the grid file, line and key.
 */
#ifndef TS_GRID_H
#define TS_GRID_H

#include <stddef.h>

#include "common/err.h"
#include "sim/scenario.h"

#define GRID_MAX_DIMS 32
#define GRID_MAX_CONFIGS 1000000

typedef struct grid_dim {
    char section[32];
    char key[48];
    char (*vals)[SCN_STR]; /* n values, as given (quotes removed) */
    size_t n;
    size_t cap;            /* values allocated */
    int line;              /* line of the grid file (0: not from a file) */
} grid_dim;

typedef struct grid {
    char path[SCN_STR];     /* the grid file, or a label ("plan") */
    char scenario[SCN_STR]; /* base scenario name or path */
    char command[16];       /* "rlstep" | "rollout" */
    int steps;              /* RL steps per configuration */
    grid_dim dim[GRID_MAX_DIMS];
    size_t n_dims;
    size_t n_configs;       /* product of the dimensions' sizes (1 with none) */
    int from_file;          /* 1: read by grid_load (path is a file) */
} grid;

/* An empty grid over `scenario` (command rlstep, 1 step), labelled `label`
 * in messages.  Cannot fail. */
void grid_init(grid *g, const char *label, const char *scenario);

/* Adds a dimension: section.key takes each value of the comma-separated
 * `list` in turn; `line` and `origin` (e.g. "--gpus") name where it came from
 * in messages.  Checks the key and every value against the scenario key
 * table (policy.name also against the policy registry).  Returns 0, or -1
 * (unknown key, duplicate, empty list or item, bad value, too many configs). */
int grid_add_dim(grid *g, const char *section, const char *key, const char *list, int line,
                 const char *origin, ts_err *e);

/* Reads a grid file.  Returns 0 (free with grid_free) or -1 naming the file,
 * line and key; nothing is left allocated on failure. */
int grid_load(const char *path, grid *g, ts_err *e);

/* Checks the base scenario loads (named by the [sweep] scenario line).
 * Returns 0 or -1. */
int grid_check_base(const grid *g, ts_err *e);

void grid_free(grid *g); /* frees the value lists; NULL is a no-op */

/* The value index of every dimension in configuration `config`
 * (< n_configs) into idx[n_dims].  Cannot fail. */
void grid_config(const grid *g, size_t config, size_t *idx);

/* "section.key=value" assignments of a configuration, for scenario_set(),
 * into sets[n_dims] (each SCN_STR + 96 bytes).  Returns n_dims. */
#define GRID_SET_MAX (SCN_STR + 96)
size_t grid_config_sets(const grid *g, size_t config, char (*sets)[GRID_SET_MAX]);

#endif
