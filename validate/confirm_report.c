/*
 * confirm's verdict, table and confirm.json (plain C, no CUDA, so that
 * tests/test_confirm.c drives it with simulated outcomes on the CPU).
 *
 * Each part (the baseline replay, the speculative replay) has a status: ok,
 * out of time (--budget), error (with its message) or not run.  Whatever a
 * part measured before it stopped is kept: the table compares the
 * iterations replayed with the same iterations' predictions, and
 * confirm.json carries every replayed iteration's predicted and measured
 * time with each part's status, so that a run that failed half-way still
 * leaves its measurements.  A part that queried cuBLASLt's heuristic inside
 * a timed interval measured host work as GPU time: it is reported loudly
 * and counts as failed.
 *
 * Measured times are GPU time between CUDA events; the predictions are the
 * cost model's GPU time (confirm leaves the simulator's host model off).
 * Host time (planning each iteration: attention plans, uploads) is reported
 * beside them and not compared: serving engines overlap it with the GPU.
 */
#include "validate/confirm_impl.h"

#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

const char *conf_status_name(part_status s)
{
    switch (s) {
    case PART_OK: return "ok";
    case PART_OUT_OF_TIME: return "out of time";
    case PART_ERROR: return "error";
    default: return "not run";
    }
}

static double pct(double meas, double pred) { return pred > 0 ? 100.0 * (meas - pred) / pred : 0.0; }

void conf_judge(const conf_result *r, conf_verdict *v)
{
    const replay_stats *rb = r->rb, *rs = r->rs;
    memset(v, 0, sizeof *v);
    v->complete = rb->status == PART_OK && rs->status == PART_OK;
    v->valid = rb->queries_timed == 0 && rs->queries_timed == 0;
    v->sp_pred = r->spec->makespan > 0 ? r->base->makespan / r->spec->makespan : 0;
    v->sp_meas = v->complete && rs->measured > 0 ? rb->measured / rs->measured : 0;
    v->eb = rb->done ? pct(rb->measured, rb->predicted) : 0;
    v->es = rs->done ? pct(rs->measured, rs->predicted) : 0;
    v->esp = v->complete ? pct(v->sp_meas, v->sp_pred) : 0;
    v->ok = v->complete && v->valid && fabs(v->eb) <= 10 && fabs(v->es) <= 10 &&
            fabs(v->esp) <= 5;
}

/* One part's table row and, when it did not finish, why. */
static void print_part(FILE *f, const char *name, const run_pred *p, const replay_stats *s,
                       double err)
{
    fprintf(f, "%-22s %10.3f s %10.3f s %+7.1f%%  %9.3f s  %zu/%zu iterations, %s", name,
            s->predicted, s->measured, err, s->host_s, s->done, p->log.n,
            conf_status_name(s->status));
    if (s->status == PART_ERROR || (s->status == PART_NOT_RUN && s->msg[0]))
        fprintf(f, ": %s", s->msg);
    fprintf(f, "\n");
    if (s->queries_timed)
        fprintf(f, "  !! %s: %lld cuBLASLt heuristic queries inside timed intervals: host work "
                   "measured as GPU time; this part's measurement is INVALID\n",
                name, s->queries_timed);
}

void conf_print(FILE *f, const conf_result *r, const conf_verdict *v)
{
    const replay_stats *rb = r->rb, *rs = r->rs;
    const char *kinds[3] = {"decode", "mixed", "speculative"};
    fprintf(f, "\n%-22s %12s %12s %8s %11s  %s\n", "", "predicted", "measured", "error",
            "host", "status");
    print_part(f, "baseline makespan", r->base, rb, v->eb);
    print_part(f, "speculative makespan", r->spec, rs, v->es);
    if (v->complete)
        fprintf(f, "%-22s %11.3fx %11.3fx %+7.1f%%\n", "speedup", v->sp_pred, v->sp_meas, v->esp);
    fprintf(f, "(measured: GPU time between CUDA events; host: planning outside the timed "
               "intervals, not compared: the predictions are GPU time only)\n");
    fprintf(f, "device allocations (cudaMalloc + cudaFree) after the warm-up: baseline %lld, "
               "speculative %lld\n", rb->alloc_calls, rs->alloc_calls);
    fprintf(f, "\nper-iteration mean |error| by kind (both runs):\n");
    for (int k = 0; k < 3; k++) {
        int n = rb->n[k] + rs->n[k];
        if (n)
            fprintf(f, "  %-12s %7d iterations  %6.1f%%\n", kinds[k], n,
                    100.0 * (rb->err_abs[k] + rs->err_abs[k]) / n);
    }
    if (!v->valid)
        fprintf(f, "\ntargets: not evaluated: cuBLASLt queried inside timed intervals "
                   "(see above)\n");
    else if (v->complete)
        fprintf(f, "\ntargets: makespan within 10%% (goal 5%%), speedup within 5%%: %s\n",
                v->ok ? "met" : "NOT met");
    else
        fprintf(f, "\ntargets: not evaluated: %zu of %zu iterations replayed (baseline %s, "
                   "speculative %s); the rows above compare the iterations replayed\n",
                rb->done + rs->done, r->base->log.n + r->spec->log.n,
                conf_status_name(rb->status), conf_status_name(rs->status));
}

/* A JSON array of n values: x[i] (x non-NULL) or the log's predictions. */
static json_t *json_times(const double *x, const it_log *l, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real(x ? x[i] : l->it[i].dt))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* {"decode": n, "mixed": n, "speculative": n}: the iterations replayed of
 * each kind; NULL on allocation failure. */
static json_t *json_kinds(const replay_stats *s)
{
    json_t *o = json_object();
    if (o && (json_object_set_new(o, "decode", json_integer(s->n[0])) ||
              json_object_set_new(o, "mixed", json_integer(s->n[1])) ||
              json_object_set_new(o, "speculative", json_integer(s->n[2])))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The part's object: status, message, totals, iterations; NULL on
 * allocation failure. */
static json_t *json_part(const run_pred *p, const replay_stats *s)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad = json_object_set_new(o, "status", json_string(conf_status_name(s->status))) ||
              json_object_set_new(o, "message", json_string(s->msg)) ||
              json_object_set_new(o, "iterations", json_integer((json_int_t)p->log.n)) ||
              json_object_set_new(o, "replayed", json_integer((json_int_t)s->done)) ||
              json_object_set_new(o, "replayed_by_kind", json_kinds(s)) ||
              json_object_set_new(o, "predicted_makespan_s", json_real(p->makespan)) ||
              json_object_set_new(o, "predicted_replayed_s", json_real(s->predicted)) ||
              json_object_set_new(o, "measured_replayed_s", json_real(s->measured)) ||
              json_object_set_new(o, "host_s", json_real(s->host_s)) ||
              json_object_set_new(o, "plan_queries_timed", json_integer(s->queries_timed)) ||
              json_object_set_new(o, "device_alloc_calls", json_integer(s->alloc_calls)) ||
              json_object_set_new(o, "iter_predicted_s", json_times(NULL, &p->log, s->done)) ||
              json_object_set_new(o, "iter_measured_s", json_times(s->iter_s, NULL, s->done));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The whole document; NULL on allocation failure. */
static json_t *json_doc(const conf_result *r, const conf_verdict *v)
{
    json_t *j = json_object();
    if (!j)
        return NULL;
    int bad = json_object_set_new(j, "device", json_string(r->device ? r->device : "")) ||
              json_object_set_new(j, "calibration", json_string(r->calibration ? r->calibration : "")) ||
              json_object_set_new(j, "responses", json_integer(r->responses)) ||
              json_object_set_new(j, "layers", json_integer(r->layers)) ||
              json_object_set_new(j, "seed", json_integer((json_int_t)r->seed)) ||
              json_object_set_new(j, "complete", json_boolean(v->complete)) ||
              json_object_set_new(j, "valid", json_boolean(v->valid)) ||
              json_object_set_new(j, "predicted_speedup", json_real(v->sp_pred)) ||
              json_object_set_new(j, "measured_speedup", json_real(v->sp_meas)) ||
              json_object_set_new(j, "targets_met", json_boolean(v->ok)) ||
              json_object_set_new(j, "baseline", json_part(r->base, r->rb)) ||
              json_object_set_new(j, "speculative", json_part(r->spec, r->rs));
    if (bad) {
        json_decref(j);
        return NULL;
    }
    return j;
}

int conf_write_json(const char *dir, const conf_result *r, const conf_verdict *v, ts_err *e)
{
    struct stat sb;
    if (mkdir(dir, 0777) && !(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return ts_errf(e, "%s: cannot create the output folder", dir);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/confirm.json", dir) >= (int)sizeof path)
        return ts_errf(e, "%s: path too long", dir);
    json_t *j = json_doc(r, v);
    if (!j)
        return ts_errf(e, "%s: out of memory building the document", path);
    ts_atomic a;
    int rc = -1;
    if (ts_atomic_open(&a, path, e) == 0) {
        if (json_dumpf(j, a.f, JSON_INDENT(1) | JSON_REAL_PRECISION(8)) || fputc('\n', a.f) == EOF) {
            ts_atomic_abort(&a);
            ts_errf(e, "%s: write failed", path);
        } else {
            rc = ts_atomic_commit(&a, e);
        }
    }
    json_decref(j);
    return rc;
}

int conf_exit_status(const conf_result *r, const conf_verdict *v)
{
    if (r->rb->status == PART_ERROR || r->rs->status == PART_ERROR || !v->valid)
        return 2;
    if (!v->complete)
        return 3;
    return v->ok ? 0 : 1;
}
