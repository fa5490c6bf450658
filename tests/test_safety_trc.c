/*
 * Safety of the text readers (issue 21, traces): every input is read once,
 * so pipes, FIFOs, process substitutions and "-" (stdin) load whole; lines
 * are bounded (TS_LINE_MAX) and NUL bytes refused, so /dev/zero or a file
 * with no newline fails at once with a message instead of eating memory;
 * JSON syntax errors give jansson's position and reason and name a field
 * only when the error lies in its value; paths of any length appear whole in
 * messages.  The CLI cases run build/tailsim through sh (bash for process
 * substitution; skipped without it); `timeout` bounds those that used to
 * hang, and outside sanitizer builds `ulimit -v` bounds the memory of those
 * that used to grow without end.  Each test has a fresh temporary directory.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "common/lines.h"
#include "models/calib.h"
#include "models/vidur.h"
#include "tests/helpers.h"
#include "traces/batch.h"
#include "traces/trace.h"

static char tmpdir[256];

static void setup(void)
{
    tmpdir_create(tmpdir, sizeof tmpdir, "safety-trc");
}

static void teardown(void)
{
    tmpdir_remove(tmpdir);
}

TestSuite(safety_trc, .init = setup, .fini = teardown, .timeout = 240);

/* ------------------------------------------------------------- helpers */

/* A memory cap for commands that used to grow without bound (none under
 * AddressSanitizer, which reserves terabytes of address space). */
#if defined(__SANITIZE_ADDRESS__)
#define MEM_CAP ""
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEM_CAP ""
#endif
#endif
#ifndef MEM_CAP
#define MEM_CAP "ulimit -v 2000000; "
#endif

static void path_in(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    cr_assert_eq(fwrite(p, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

static void write_text(const char *path, const char *s)
{
    write_bytes(path, s, strlen(s));
}

/* Runs cmd with sh (stdin from /dev/null unless cmd redirects it), stdout
 * and stderr into *out and *err (free them; either may be NULL).  Returns the
 * exit status, or -1 when the command did not exit normally. */
static int sh_run(const char *cmd, char **out, char **err)
{
    char o[512], e[512];
    path_in(o, sizeof o, "cmd.out");
    path_in(e, sizeof e, "cmd.err");
    size_t n = strlen(cmd) + 2 * sizeof o + 64;
    char *full = malloc(n);
    cr_assert_not_null(full);
    snprintf(full, n, "( %s ) </dev/null >%s 2>%s", cmd, o, e);
    int st = system(full);
    free(full);
    char *so = slurp_file(o), *se = slurp_file(e);
    if (out)
        *out = so;
    else
        free(so);
    if (err)
        *err = se;
    else
        free(se);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Writes a JSONL trace whose line ending exactly at byte 4096 (a '\n' is the
 * 4096th byte: one stdio buffer) is followed by many more records.  Returns
 * the prompts; *responses gets the responses. */
static int write_boundary_trace(const char *path, int *responses)
{
    char *buf = malloc(1 << 16);
    cr_assert_not_null(buf);
    size_t n = 0;
    int prompts = 0, resp = 0;
    while (n < 3900) {
        n += (size_t)sprintf(buf + n, "{\"step\": 0, \"input\": %d, \"output\": [%d, %d, 7]}\n",
                             100 + prompts, 50 + prompts, 3 + prompts);
        prompts++;
        resp += 3;
    }
    /* pad the last record with spaces before its '}' up to byte 4096 */
    size_t pad = 4096 - n;
    memmove(buf + n - 2 + pad, buf + n - 2, 2);
    memset(buf + n - 2, ' ', pad);
    n = 4096;
    cr_assert_eq(buf[4095], '\n');
    cr_assert_eq(buf[4094], '}');
    for (int j = 0; j < 75; j++) {
        n += (size_t)sprintf(buf + n, "{\"step\": 0, \"input\": 9, \"output\": [%d]}\n", j + 1);
        prompts++;
        resp++;
    }
    write_bytes(path, buf, n);
    free(buf);
    *responses = resp;
    return prompts;
}

/* The value of "key": N in a JSON text, or -1. */
static long json_count(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(text, pat);
    return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

/* Makes nested directories under tmpdir until the path is at least `len`
 * characters; writes the path into buf. */
static void long_dir(char *buf, size_t n, size_t len)
{
    snprintf(buf, n, "%s", tmpdir);
    for (int i = 0; strlen(buf) < len; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "/level_%02d_of_a_deeply_nested_tree_of_directories_"
                                 "with_long_names_abcdefghijklmnopqrstuvwxyz", i);
        cr_assert(mkdir(buf, 0755) == 0, "mkdir %s", buf);
    }
}

/* ---------------------------------------- item 3: inputs are read once */

Test(safety_trc, pipe_with_a_line_ending_at_byte_4096_loads_whole)
{
    char f[512], cmd[2048];
    int resp, prompts = write_boundary_trace((path_in(f, sizeof f, "b.jsonl"), f), &resp);
    const char *forms[] = {
        "cat '%s' | build/tailsim trace stats --json -",
        "cat '%s' | build/tailsim trace stats --json /dev/stdin",
        "build/tailsim trace stats --json - < '%s'",
        "build/tailsim trace stats --json '%s'",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        snprintf(cmd, sizeof cmd, forms[i], f);
        char *out, *err;
        int rc = sh_run(cmd, &out, &err);
        cr_expect_eq(rc, 0, "%s: exit %d: %s", cmd, rc, err);
        cr_expect_eq(json_count(out, "prompts"), prompts, "%s: %s", cmd, out);
        cr_expect_eq(json_count(out, "responses"), resp, "%s: %s", cmd, out);
        free(out);
        free(err);
    }
}

Test(safety_trc, trace_flag_takes_a_pipe_a_process_substitution_and_dash)
{
    char f[512], cmd[2048];
    int resp;
    write_boundary_trace((path_in(f, sizeof f, "b.jsonl"), f), &resp);
    const char *forms[] = {
        "cat '%s' | build/tailsim rollout dapo-32b-polytrace --json --no-wall --trace -",
        "bash -c \"build/tailsim rollout dapo-32b-polytrace --json --no-wall "
        "--trace <(cat '%s')\"",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        if (i == 1 && system("bash -c true >/dev/null 2>&1") != 0) {
            cr_log_warn("bash not found: process substitution not tested");
            continue;
        }
        snprintf(cmd, sizeof cmd, forms[i], f);
        char *out, *err;
        int rc = sh_run(cmd, &out, &err);
        cr_expect_eq(rc, 0, "%s: exit %d: %s", cmd, rc, err);
        cr_expect_eq(json_count(out, "responses"), resp, "%s: %s", cmd, out);
        free(out);
        free(err);
    }
}

Test(safety_trc, fifo_loads_whole_and_does_not_hang)
{
    char f[512], fifo[512], cmd[2048];
    int resp, prompts = write_boundary_trace((path_in(f, sizeof f, "b.jsonl"), f), &resp);
    path_in(fifo, sizeof fifo, "trace.fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    /* the writer opens the FIFO in its own timed shell, so it cannot outlive
     * a reader that never opens it */
    snprintf(cmd, sizeof cmd,
             "timeout 30 sh -c \"cat '%s' > '%s'\" & "
             "timeout 30 build/tailsim trace stats --json '%s'; rc=$?; wait; exit $rc",
             f, fifo, fifo);
    char *out, *err;
    int rc = sh_run(cmd, &out, &err);
    cr_expect_eq(rc, 0, "exit %d (124: timed out): %s", rc, err);
    cr_expect_eq(json_count(out, "prompts"), prompts, "%s", out);
    free(out);
    free(err);
}

/* The library readers read stdin for "-" and name it "<stdin>". */
Test(safety_trc, dash_is_stdin_for_the_trace_and_batch_readers)
{
    char f[512];
    int resp, prompts = write_boundary_trace((path_in(f, sizeof f, "b.jsonl"), f), &resp);
    ts_err e = {{0}};
    trace *t = NULL;
    cr_assert_not_null(freopen(f, "r", stdin));
    cr_assert_eq(trace_load("-", &t, &e), 0, "%s", e.msg);
    cr_expect_eq(t->n_prompts, (size_t)prompts);
    cr_expect_eq(trace_n_responses(t), (size_t)resp);
    trace_free(t);

    path_in(f, sizeof f, "bad.jsonl");
    write_text(f, "{\"step\":0,\"input\":1,\"output\":[2]}\n{\"step\":0,\"input\":1,\"output\":[0]}\n");
    cr_assert_not_null(freopen(f, "r", stdin));
    t = NULL;
    cr_assert_eq(trace_load("-", &t, &e), -1);
    cr_expect_null(t);
    cr_expect(strstr(e.msg, "<stdin>:2: field 'output'"), "%s", e.msg);

    path_in(f, sizeof f, "batch.csv");
    write_text(f, "tokens\n100\n200\n300\n");
    cr_assert_not_null(freopen(f, "r", stdin));
    btrace *b = NULL;
    cr_assert_eq(btrace_load("-", &b, &e), 0, "%s", e.msg);
    cr_expect_eq(b->n, 3);
    btrace_free(b);
}

/* ---------------------------------------- item 8: memory is bounded */

/* Every line reader stops at a line of TS_LINE_MAX + 1 bytes with no newline,
 * naming the file and line; a line of exactly TS_LINE_MAX bytes is read. */
Test(safety_trc, line_longer_than_the_limit_is_an_error_in_every_reader)
{
    size_t n = (size_t)TS_LINE_MAX + 1;
    char *big = malloc(n);
    cr_assert_not_null(big);
    memset(big, 'x', n);
    char f[512], want[600];
    path_in(f, sizeof f, "long.txt");
    write_bytes(f, big, n);
    snprintf(want, sizeof want, "%s:1: line longer than %ld bytes", f, TS_LINE_MAX);
    ts_err e = {{0}};
    trace *t = NULL;
    btrace *b = NULL;
    vidur_table vt;
    calib_row *rows = NULL;
    size_t nrows = 0;
    cr_expect_eq(trace_load(f, &t, &e), -1);
    cr_expect(strstr(e.msg, want), "trace_load: %s", e.msg);
    cr_expect_eq(trace_load_csv(f, &t, &e), -1);
    cr_expect(strstr(e.msg, want), "trace_load_csv: %s", e.msg);
    cr_expect_eq(btrace_load(f, &b, &e), -1);
    cr_expect(strstr(e.msg, want), "btrace_load: %s", e.msg);
    cr_expect_eq(vidur_load(f, "median", &vt, &e), -1);
    cr_expect(strstr(e.msg, want), "vidur_load: %s", e.msg);
    cr_expect_eq(calib_csv_load(f, &rows, &nrows, &e), -1);
    cr_expect(strstr(e.msg, want), "calib_csv_load: %s", e.msg);
    cr_expect_null(t);
    cr_expect_null(b);
    cr_expect_null(rows);

    /* the same through the CLI, in bounded memory */
    char cmd[1200], *err;
    snprintf(cmd, sizeof cmd, MEM_CAP "build/tailsim trace stats '%s'", f);
    cr_expect_eq(sh_run(cmd, NULL, &err), 1);
    cr_expect(strstr(err, want), "%s", err);
    free(err);

    /* exactly the limit: a valid record padded with spaces, then a second line */
    const char *rec = "{\"step\":0,\"input\":1,\"output\":[2]";
    memcpy(big, rec, strlen(rec));
    memset(big + strlen(rec), ' ', (size_t)TS_LINE_MAX - strlen(rec) - 1);
    big[TS_LINE_MAX - 1] = '}';
    big[TS_LINE_MAX] = '\n';
    FILE *fp = fopen(f, "wb");
    cr_assert_not_null(fp);
    cr_assert_eq(fwrite(big, 1, n, fp), n);
    fputs("{\"step\":0,\"input\":1,\"output\":[3]}\n", fp);
    cr_assert_eq(fclose(fp), 0);
    free(big);
    cr_assert_eq(trace_load(f, &t, &e), 0, "%.300s", e.msg);
    cr_expect_eq(t->n_prompts, 2);
    trace_free(t);
}

/* /dev/zero, and an endless stream with no newline, fail at once. */
Test(safety_trc, endless_inputs_fail_quickly_with_a_message)
{
    char *err;
    int rc = sh_run(MEM_CAP "timeout 60 build/tailsim trace stats /dev/zero", NULL, &err);
    cr_expect_eq(rc, 1, "exit %d (124: timed out): %s", rc, err);
    cr_expect(strstr(err, "/dev/zero:1: binary data (a NUL byte at column 1)"), "%s", err);
    free(err);
    rc = sh_run(MEM_CAP "yes 0123456789 | tr -d '\\n' | timeout 60 build/tailsim trace stats -",
                NULL, &err);
    cr_expect_eq(rc, 1, "exit %d (124: timed out): %s", rc, err);
    cr_expect(strstr(err, "<stdin>:1: line longer than"), "%s", err);
    free(err);
    rc = sh_run(MEM_CAP "timeout 60 build/tailsim dcp qwen7b-64gpu --trace /dev/zero", NULL,
                &err);
    cr_expect_eq(rc, 1, "exit %d (124: timed out): %s", rc, err);
    cr_expect(strstr(err, "/dev/zero:1: binary data"), "%s", err);
    free(err);
}

/* NUL bytes are refused by the CSV readers that used to cut the line there. */
Test(safety_trc, nul_byte_is_an_error_in_the_profile_readers)
{
    char f[512], want[600];
    path_in(f, sizeof f, "nul.csv");
    snprintf(want, sizeof want, "%s:1: binary data (a NUL byte at column 5)", f);
    write_bytes(f, "abc,\0def\n", 9);
    ts_err e = {{0}};
    vidur_table vt;
    calib_row *rows = NULL;
    size_t n = 0;
    cr_expect_eq(vidur_load(f, "median", &vt, &e), -1);
    cr_expect(strstr(e.msg, want), "vidur_load: %s", e.msg);
    cr_expect_eq(calib_csv_load(f, &rows, &n, &e), -1);
    cr_expect(strstr(e.msg, want), "calib_csv_load: %s", e.msg);
    cr_expect_null(rows);
}

/* ------------------------------------- item 9: precise JSON errors */

typedef struct json_case {
    char line[120];  /* the record on line 2 (line 1 is valid) */
    char want[100];  /* substring of the message after "FILE:2: " */
    int field;       /* 1: a field is named (the one in want); 0: none may be */
} json_case;

ParameterizedTestParameters(safety_trc, json_errors)
{
    static json_case cases[] = {
        {"{\"step\":0,\"input\":10,\"output\":[5]", "invalid JSON at column 33: '}' expected", 0},
        {"{\"step\":0,\"input\":10,\"output\":[5]}}", "invalid JSON at column 35: end of file "
                                                    "expected", 0},
        {"{\"step\":0,\"input\":10,\"output\":[5]} x", "invalid JSON at column 36", 0},
        {"{\"step\":0,\"input\":10 \"output\":[5]}", "invalid JSON at column 29: '}' expected", 0},
        {"{\"step\":0,\"input\":10,\"output\":[5],}", "invalid JSON at column 35", 0},
        {"{\"step\":0,\"input\":10,\"output\" [5]}", "invalid JSON at column 31: ':' expected", 0},
        {"{\"step\":0,\"inp", "invalid JSON at column 14", 0},
        {"[1,2", "invalid JSON at column 4", 0},
        {"{\"step\":0,\"input\":10,\"output\":[5,,6]}", "field 'output': invalid JSON at column 34", 1},
        {"{\"step\":0,\"input\":10,\"output\":[5", "field 'output': invalid JSON at column 32", 1},
        {"{\"step\":0,\"input\":10,\"output\":[NaN]}", "field 'output': invalid JSON at column 34", 1},
        {"{\"step\":0,\"input\":1x0,\"output\":[5]}", "field 'input': invalid JSON at column 20", 1},
        {"{\"step\":0,\"input\":,\"output\":[5]}", "field 'input': invalid JSON at column 19", 1},
        {"{\"step\":0,\"input\":1,\"output\":[5],\"ok\":tru}", "field 'ok': invalid JSON at "
                                                          "column 41: invalid token", 1},
        {"{\"step\":0,\"input\":1,\"output\":[5],\"step\":1}", "field 'step': given twice", 1},
        {"{\"step\":0,\"input\":10}", "field 'output': missing", 1},
        {"{\"step\":0,\"input\":\"10\",\"output\":[5]}", "field 'input': expected an integer", 1},
    };
    return cr_make_param_array(json_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(json_case *c, safety_trc, json_errors)
{
    char f[512], text[300], where[800];
    path_in(f, sizeof f, "e.jsonl");
    snprintf(text, sizeof text, "{\"step\":0,\"input\":1,\"output\":[2]}\n%s\n", c->line);
    write_text(f, text);
    ts_err e = {{0}};
    trace *t = NULL;
    cr_assert_eq(trace_load(f, &t, &e), -1, "%s: loaded", c->line);
    cr_assert_null(t);
    snprintf(where, sizeof where, "%s:2: %s", f, c->want);
    cr_expect(strstr(e.msg, where), "%s: '%s' lacks '%s'", c->line, e.msg, where);
    if (!c->field)
        cr_expect(!strstr(e.msg, "field '"), "%s: names a field: %s", c->line, e.msg);
}

/* --------------------------------- item 9: long paths appear whole */

Test(safety_trc, messages_keep_long_paths_whole_or_mark_the_cut)
{
    ts_err e = {{0}};
    char path[700];
    memset(path, 'p', sizeof path - 1);
    path[sizeof path - 1] = 0;
    ts_errf(&e, "%s:12: field 'x': bad", path);
    cr_expect_eq(strlen(e.msg), strlen(path) + strlen(":12: field 'x': bad"));
    ts_err_prefix(&e, "%s: ", path);
    cr_expect_eq(strlen(e.msg), 2 * strlen(path) + strlen(": :12: field 'x': bad"));

    char *huge = malloc(3 * TS_ERR_MAX);
    cr_assert_not_null(huge);
    memset(huge, 'h', 3 * TS_ERR_MAX - 1);
    huge[3 * TS_ERR_MAX - 1] = 0;
    ts_errf(&e, "%s", huge);
    cr_expect_eq(strlen(e.msg), TS_ERR_MAX - 1);
    cr_expect_str_eq(e.msg + TS_ERR_MAX - 1 - strlen(TS_ERR_CUT), TS_ERR_CUT);
    ts_errf(&e, "%.*s", TS_ERR_MAX - 100, huge);
    ts_err_prefix(&e, "%s: ", path);
    cr_expect_eq(strlen(e.msg), TS_ERR_MAX - 1);
    cr_expect_str_eq(e.msg + TS_ERR_MAX - 1 - strlen(TS_ERR_CUT), TS_ERR_CUT);
    cr_expect_eq(strncmp(e.msg, path, strlen(path)), 0);
    free(huge);
}

Test(safety_trc, long_trace_paths_appear_whole_in_messages)
{
    char dir[1200], f[1400], cmd[3200], want[1500], *err;
    long_dir(dir, sizeof dir, 600);
    snprintf(f, sizeof f, "%s/none.jsonl", dir);
    snprintf(cmd, sizeof cmd, "build/tailsim trace stats '%s'", f);
    cr_expect_eq(sh_run(cmd, NULL, &err), 1);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", f);
    cr_expect(strstr(err, want), "%s", err);
    free(err);

    snprintf(f, sizeof f, "%s/t.jsonl", dir);
    write_text(f, "{\"step\":0,\"input\":1,\"output\":[2]}\n{\"step\":0,\"input\":1,\"output\":[-2]}\n");
    snprintf(cmd, sizeof cmd, "build/tailsim trace stats '%s'", f);
    cr_expect_eq(sh_run(cmd, NULL, &err), 1);
    snprintf(want, sizeof want, "%s:2: field 'output'", f);
    cr_expect(strstr(err, want), "%s", err);
    free(err);

    /* a scenario at such a path: refused naming the whole path, not cut */
    snprintf(f, sizeof f, "%s/s.ini", dir);
    write_text(f, "[cluster]\ngpus = 8\n[model]\nname = qwen2.5-7b\n");
    snprintf(cmd, sizeof cmd, "build/tailsim rollout '%s'", f);
    cr_expect_eq(sh_run(cmd, NULL, &err), 1);
    cr_expect(strstr(err, f), "%s", err);
    cr_expect(strstr(err, "path longer than"), "%s", err);
    free(err);
}

/* A directory of step files deeper than 2048 characters: each file's path is
 * built whole. */
Test(safety_trc, step_files_of_a_deep_directory_are_opened_by_their_whole_path)
{
    char dir[2600], f[2700], cmd[5600], want[2800], *err;
    long_dir(dir, sizeof dir, 2100);
    snprintf(f, sizeof f, "%s/step_0.jsonl", dir);
    write_text(f, "{\"step\":0,\"input\":1,\"output\":[2]}\n{\"step\":0,\"input\":1,\"output\":[0]}\n");
    snprintf(cmd, sizeof cmd, "build/tailsim rollout dapo-32b-polytrace --trace '%s'", dir);
    cr_expect_eq(sh_run(cmd, NULL, &err), 1);
    snprintf(want, sizeof want, "%s:2: field 'output'", f);
    cr_expect(strstr(err, want), "%.300s", err);
    free(err);
}

/* A long bad value in a calibration row is cut visibly ("..."), not silently. */
Test(safety_trc, calibration_message_marks_a_cut_value)
{
    char f[512], row[1200];
    path_in(f, sizeof f, "c.csv");
    char x[301];
    memset(x, '7', 300);
    x[300] = 'x';
    snprintf(row, sizeof row, "%s\nh100,%.301s,1,gemm,1,1,1,0,0,0,0,1,1,1,1,1,1\n",
             CALIB_CSV_HEADER, x);
    write_text(f, row);
    ts_err e = {{0}};
    calib_row *rows = NULL;
    size_t n = 0;
    cr_assert_eq(calib_csv_load(f, &rows, &n, &e), -1);
    cr_expect(strstr(e.msg, ":2: column 2"), "%s", e.msg);
    cr_expect(strstr(e.msg, "777" TS_ERR_CUT), "%s", e.msg);
}
