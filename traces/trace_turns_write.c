/*
 * The multi-turn JSONL writer: what `tailsim trace gen --turns ...` writes,
 * in the format traces/trace_turns.c reads (one trajectory a line:
 * "step", "prompt_len", "prompt_group_id", "turns", "tool_calls",
 * "turn_count", "final_response_len").  Latencies are written with 17
 * significant digits, so a trace reads back bit for bit.  Output goes
 * through ts_atomic (a temporary renamed over the path): readers never see
 * half a file.
 */
#include "traces/trace.h"

#include <stdio.h>

#include "common/util.h"

/* Writes response j of prompt p as one line. */
static void write_traj(FILE *f, const trace_prompt *p, int32_t j)
{
    const trace_turn *tt = p->turns + p->turn0[j];
    int32_t n = p->turn0[j + 1] - p->turn0[j];
    fprintf(f, "{\"step\":%d,\"prompt_len\":%d,\"prompt_group_id\":%d,\"turns\":[", p->step,
            p->prompt_tokens, p->prompt_id);
    for (int32_t k = 0; k < n; k++) {
        fprintf(f, "%s{\"prompt_tokens\":%d,\"cached_tokens\":%d,\"completion_tokens\":%d",
                k ? "," : "", tt[k].context, tt[k].cached, tt[k].gen);
        if (tt[k].engine_s >= 0)
            fprintf(f, ",\"engine_latency_s\":%.17g", tt[k].engine_s);
        fputc('}', f);
    }
    fputs("],\"tool_calls\":[", f);
    int first = 1;
    for (int32_t k = 0; k < n; k++)
        if (tt[k].tools > 0) {
            fprintf(f, "%s{\"turn\":%d,\"latency_s\":%.17g,\"append_len\":%d}", first ? "" : ",",
                    k, tt[k].tool_s, tt[k].append);
            first = 0;
        }
    fprintf(f, "],\"turn_count\":%d,\"final_response_len\":%d}\n", n, p->resp[j]);
}

int trace_write_turns_jsonl(const trace *t, const char *path, ts_err *e)
{
    if (t->n_prompts == 0)
        return ts_errf(e, "%s: cannot write an empty trace", path);
    for (size_t i = 0; i < t->n_prompts; i++)
        if (!t->prompts[i].turns)
            return ts_errf(e, "%s: cannot write prompt %zu as multi-turn JSONL: it has no "
                              "turns", path, i);
    ts_atomic a;
    if (ts_atomic_open(&a, path, e))
        return -1;
    for (size_t i = 0; i < t->n_prompts && !ferror(a.f); i++)
        for (int32_t j = 0; j < t->prompts[i].n_resp; j++)
            write_traj(a.f, &t->prompts[i], j);
    return ts_atomic_commit(&a, e);
}
