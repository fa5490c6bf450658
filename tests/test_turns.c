/*
 * Multi-turn (agentic) trajectories (issue 20): the reader on the real
 * Search-R1 PolyTrace steps (skipped when $TAILSIM_SHARED/traces is absent)
 * against counts made independently here by scanning the raw text, a small
 * hand-written file read field by field, and a single-turn trace that stays
 * single-turn.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers.h"
#include "traces/trace.h"

/* Occurrences of needle in the file at path; lines into *lines. */
static long count_in_file(const char *path, const char *needle, long *lines)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    static char buf[1 << 20];
    long n = 0;
    *lines = 0;
    while (fgets(buf, sizeof buf, f)) {
        cr_assert(strchr(buf, '\n'), "line longer than the test's buffer");
        (*lines)++;
        for (const char *p = buf; (p = strstr(p, needle)); p += strlen(needle))
            n++;
    }
    fclose(f);
    return n;
}

Test(turns, real_steps_match_an_independent_count)
{
    for (int step = 0; step < 4; step++) {
        char path[512], rel[128];
        snprintf(rel, sizeof rel, "traces/polytrace-search-r1-7b/step_%d.jsonl", step);
        shared_path(path, sizeof path, rel);
        long lines, lines2;
        long calls = count_in_file(path, "\"tool_name\"", &lines);
        long turns = count_in_file(path, "\"completion_tokens\"", &lines2);
        trace *t = NULL;
        ts_err e = {{0}};
        cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
        trace_turn_stats s;
        cr_assert_eq(trace_turn_stats_compute(t, &s, &e), 0);
        cr_assert_eq(s.trajectories, lines);
        cr_assert_eq((long)trace_n_responses(t), lines);
        cr_assert_eq(s.tool_calls, calls, "step %d: %lld calls, counted %ld", step,
                     (long long)s.tool_calls, calls);
        cr_assert_eq(s.turns, turns);
        cr_assert_eq(t->n_prompts, 256u); /* 256 prompts x 8 samples */
        cr_assert(s.max_turns <= 5 && s.max_turns >= 2);
        cr_assert(s.cached_tokens > 0 && s.cached_tokens < s.prompt_tokens);
        if (step == 0) { /* the figures the data's README states */
            cr_assert_eq(lines, 2048);
            cr_assert_eq(calls, 3469);
        }
        trace_free(t);
    }
}

Test(turns, hand_written_record_read_field_by_field)
{
    char dir[] = "/tmp/tailsim-turns-XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    /* two samples of one prompt, then a second prompt; sample 0 calls two tools
     * after turn 0 (their latencies and appends add up) */
    fputs("{\"step\":3,\"prompt_len\":100,\"prompt_group_id\":7,\"turn_count\":2,\"turns\":["
          "{\"turn\":0,\"prompt_tokens\":100,\"cached_tokens\":0,\"completion_tokens\":20,"
          "\"engine_latency_s\":1.5},{\"turn\":1,\"prompt_tokens\":180,\"cached_tokens\":119,"
          "\"completion_tokens\":30}],\"tool_calls\":[{\"turn\":0,\"latency_s\":0.25,"
          "\"append_len\":40},{\"turn\":0,\"latency_s\":0.5,\"append_len\":20}]}\n", f);
    fputs("{\"step\":3,\"prompt_len\":100,\"prompt_group_id\":7,\"turns\":[{\"prompt_tokens\":"
          "100,\"completion_tokens\":9}],\"final_response_len\":9}\n", f);
    fputs("{\"step\":3,\"prompt_len\":50,\"prompt_group_id\":8,\"turns\":[{\"prompt_tokens\":"
          "50,\"completion_tokens\":5}],\"tool_calls\":[{\"turn\":0,\"latency_s\":2,"
          "\"append_len\":11}]}\n", f);
    fclose(f);
    trace *t = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    cr_assert_eq(t->n_prompts, 2u);
    const trace_prompt *p = &t->prompts[0];
    cr_assert_eq(p->step, 3);
    cr_assert_eq(p->prompt_id, 0);
    cr_assert_eq(p->prompt_tokens, 100);
    cr_assert_eq(p->n_resp, 2);
    cr_assert_eq(p->turn0[1], 2);
    cr_assert_eq(p->turn0[2], 3);
    const trace_turn *u = &p->turns[0];
    cr_assert_eq(u->context, 100);
    cr_assert_eq(u->gen, 20);
    cr_assert_eq(u->tools, 2);
    cr_assert_eq(u->append, 60);
    cr_assert_float_eq(u->tool_s, 0.75, 1e-12);
    cr_assert_float_eq(u->engine_s, 1.5, 1e-12);
    cr_assert_eq(p->turns[1].cached, 119);
    cr_assert_eq(p->turns[1].tools, 0);
    cr_assert_float_eq(p->turns[1].engine_s, -1, 0);
    cr_assert_eq(p->resp[0], 180 + 30 - 100); /* what the turns span */
    cr_assert_eq(p->resp[1], 9);              /* final_response_len */
    cr_assert_eq(t->prompts[1].resp[0], 5 + 11); /* a trailing tool result counts */
    cr_assert_eq(t->prompts[1].prompt_id, 1);
    trace_turn_stats s;
    cr_assert_eq(trace_turn_stats_compute(t, &s, &e), 0);
    cr_assert_eq(s.trajectories, 3);
    cr_assert_eq(s.turns, 4);
    cr_assert_eq(s.tool_calls, 3);
    cr_assert_eq(s.tool_turns, 2);
    cr_assert_float_eq(s.tool_s, 2.75, 1e-12);
    cr_assert_eq(s.cached_tokens, 119);
    cr_assert_eq(s.prompt_tokens, 100 + 180 + 100 + 50);
    /* a selected step and a copy keep the turns */
    trace *one = trace_select_step(t, 3, &e);
    cr_assert_not_null(one, "%s", e.msg);
    cr_assert(trace_has_turns(one));
    cr_assert_eq(one->prompts[0].turns[1].cached, 119);
    trace_free(one);
    trace_free(t);
    unlink(path);
    rmdir(dir);
}

Test(turns, single_turn_trace_has_no_turns)
{
    char dir[] = "/tmp/tailsim-turns-XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.jsonl", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{\"step\":0,\"input\":10,\"output\":[5,7]}\n", f);
    fclose(f);
    trace *t = NULL;
    ts_err e = {{0}};
    cr_assert_eq(trace_load(path, &t, &e), 0, "%s", e.msg);
    cr_assert(!trace_has_turns(t));
    cr_assert_null(t->prompts[0].turn0);
    trace_turn_stats s;
    cr_assert_eq(trace_turn_stats_compute(t, &s, &e), 0);
    cr_assert_eq(s.trajectories, 0);
    trace_free(t);
    unlink(path);
    rmdir(dir);
}
