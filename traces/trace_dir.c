/*
 * A trace given as a path that may be a directory: PolyTrace-style logs come
 * as one file per RL step (step_N.jsonl, packed_lengths_step_N.jsonl) with,
 * for rllm, the steps' recorded reward times beside them
 * (reward_timings_step_N.jsonl, traces/reward.h).  trace_load_path() loads a
 * file with trace_load(), or every *.jsonl / *.csv of a directory, in name
 * order (shorter names first, so step_2 comes before step_10), into one
 * trace.  A reward-timings file, known by its name (reward_timings*.jsonl,
 * paired with the step its name gives) or by its content (a first record
 * with reward_time_s), adds its records to the trace's reward times and is
 * never read as response lengths; every record's step must have prompts in
 * the directory's trace files.  Each file is opened once and read front to
 * back; the load is all or nothing.  Runs once per command.
 */
#include "traces/trace.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "traces/reward.h"

static int by_name(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    size_t lx = strlen(x), ly = strlen(y);
    return lx != ly ? (lx > ly) - (lx < ly) : strcmp(x, y);
}

int trace_load_part(const char *path, trace **out, ts_err *e)
{
    const char *base = strrchr(path, '/');
    int32_t ns;
    if (!reward_name_step(base ? base + 1 : path, &ns))
        return trace_load_any(path, -1, out, e);
    trace *t = trace_new(); /* named so: read as reward timings only */
    if (!t)
        return ts_errf(e, "%s: out of memory", path);
    if (reward_load(path, ns, t, e)) {
        trace_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

/* Loads file `name` of directory dir (trace_load_part) and appends it to
 * all.  Returns 0 or -1. */
static int load_one(const char *dir, const char *name, trace *all, ts_err *e)
{
    size_t pl = strlen(dir) + strlen(name) + 2; /* whole, however long */
    char *path = malloc(pl);
    trace *one = NULL;
    if (!path)
        return ts_errf(e, "%s: out of memory", dir);
    snprintf(path, pl, "%s/%s", dir, name);
    int rc = trace_load_part(path, &one, e);
    if (rc == 0 && (rc = trace_append(all, one, e)))
        ts_err_prefix(e, "%s: ", path);
    trace_free(one);
    free(path);
    return rc;
}

static int load_dir(const char *dir, trace **out, ts_err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return ts_errf(e, "%s: cannot open the directory", dir);
    char **names = NULL;
    size_t nn = 0, cap = 0, *r0 = NULL, bad;
    int rc = -1;
    trace *all = trace_new();
    struct dirent *de;
    while (all && (de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (!(l > 6 && !strcmp(de->d_name + l - 6, ".jsonl")) &&
            !(l > 4 && !strcmp(de->d_name + l - 4, ".csv")))
            continue;
        if (nn == cap) {
            char **nb = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof *nb);
            if (!nb)
                goto done;
            names = nb;
        }
        if (!(names[nn] = strdup(de->d_name)))
            goto done;
        nn++;
    }
    if (!all || !(r0 = malloc((nn + 1) * sizeof *r0)))
        goto done;
    if (nn == 0) {
        ts_errf(e, "%s: no .jsonl or .csv trace in the directory", dir);
        goto done;
    }
    qsort(names, nn, sizeof *names, by_name);
    for (size_t i = 0; i < nn; i++) {
        r0[i] = all->n_reward; /* file i's records start here */
        if (load_one(dir, names[i], all, e))
            goto done;
    }
    if (all->n_prompts == 0) {
        ts_errf(e, "%s: only reward timings in the directory, no response-length trace", dir);
        goto done;
    }
    int orphan = reward_orphan(all, 0, &bad);
    if (orphan < 0)
        goto done;
    if (orphan) {
        size_t f = nn - 1; /* the file it came from */
        while (f > 0 && r0[f] > bad)
            f--;
        ts_errf(e, "%s/%s:%ld: field 'step': step %d has a reward time but no prompts in the "
                   "directory's trace files", dir, names[f], all->reward[bad].line,
                all->reward[bad].step);
        goto done;
    }
    *out = all;
    all = NULL;
    rc = 0;
done:
    if (rc && !e->msg[0])
        ts_errf(e, "%s: out of memory", dir);
    for (size_t i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    free(r0);
    trace_free(all);
    closedir(d);
    return rc;
}

int trace_load_path(const char *path, trace **out, ts_err *e)
{
    struct stat st;
    if (strcmp(path, "-") && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return load_dir(path, out, e);
    return trace_load(path, out, e);
}
