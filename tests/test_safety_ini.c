/*
 * Safety of the INI readers and of the sizes they admit (issue 21): the
 * scenario, sweep grid, hardware and LLM readers share one strict line
 * source (common/ini_lines.h), so each refuses, naming file and line, what
 * libinih alone would read silently: a line over 198 characters (whose
 * tail libinih parses as a line of its own), an indented line (libinih
 * appends it to the value above), a NUL byte (libinih stops the line
 * there) and a key given twice (the last one won).  A grid's long list on
 * indented lines reads in linear time.  cluster.gpus is bounded before
 * anything is allocated per GPU; rollout.tp must divide the model's heads;
 * specdec refuses a model that does not fit as rollout does.  No message
 * echoes a raw line, a value of a key that is not ours, or a control byte.
 * The single-command cases live in tests/test_badinput.c; here are those
 * that need NUL bytes, library calls or several steps.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sim/run.h"
#include "sweep/grid.h"
#include "tests/helpers.h"

static char dir[256];

static void setup(void)
{
    tmpdir_create(dir, sizeof dir, "safety-ini");
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        cr_log_warn("cannot remove %s", dir);
}

TestSuite(safety_ini, .init = setup, .fini = teardown);

/* Writes n bytes (NULs allowed) to dir/name; the path goes to path. */
static void put(const char *name, const char *data, size_t n, char *path, size_t pn)
{
    snprintf(path, pn, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

static void put_str(const char *name, const char *text, char *path, size_t pn)
{
    put(name, text, strlen(text), path, pn);
}

/* The message names the file and line "NAME:LINE" and holds `what`. */
static void expect_at(const ts_err *e, const char *name, int line, const char *what)
{
    char at[128];
    snprintf(at, sizeof at, "%s:%d: ", name, line);
    cr_expect(strstr(e->msg, at), "message lacks '%s': %s", at, e->msg);
    cr_expect(strstr(e->msg, what), "message lacks '%s': %s", what, e->msg);
}

/* Every byte of a message is printable ASCII: no terminal escapes. */
static void expect_printable(const ts_err *e)
{
    for (const char *p = e->msg; *p; p++)
        cr_expect((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f,
                  "control byte 0x%02x in message: %s", (unsigned char)*p, e->msg);
}

#define HEAD "[cluster]\ngpus = 8\nhw = h100\n[model]\nname = qwen2.5-7b\n"

/* A minimal hardware description: every required key, nothing else. */
#define HW_MIN                                                                              \
    "[gpu]\npeak_flops = 989e12\nhbm_bw = 3.35e12\nhbm_bytes = 85.52e9\nsms = 132\n"        \
    "[interconnect]\nnvlink_bw = 450e9\nnvlink_lat = 0.75e-6\nnic_bw = 50e9\n"              \
    "nic_lat = 5e-6\ngpus_per_node = 8\n"

#define LLM_MIN                                                                             \
    "[model]\nlayers = 28\nhidden = 3584\nheads = 28\nkv_heads = 4\nhead_dim = 128\n"       \
    "ffn = 18944\nvocab = 152064\ntied = 0\ngated = 1\nqkv_bias = 1\n"

/* ------------------------------------------------------------ item 1: lines */

/* A comment longer than libinih's buffer used to end in a key of its own:
 * "; xxx...gpus = 4" set cluster.gpus. */
Test(safety_ini, scenario_long_line_is_an_error)
{
    char text[1024], path[512], pad[300];
    memset(pad, 'x', 197); /* libinih's 200-byte buffer ends right before "gpus" */
    pad[197] = 0;
    snprintf(text, sizeof text, "[cluster]\ngpus = 8\n; %sgpus = 4\n[model]\nname = qwen2.5-7b\n",
             pad);
    put_str("long.ini", text, path, sizeof path);
    scenario s;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(path, &s, &e), -1, "a 207-character line was read (gpus %d)",
                 s.gpus);
    expect_at(&e, "long.ini", 3, "longer than 198 characters");
    /* 198 characters are fine, 199 are not */
    memset(pad, 'x', 196);
    pad[196] = 0;
    snprintf(text, sizeof text, HEAD "; %s\n", pad);
    put_str("ok198.ini", text, path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), 0, "%s", e.msg);
    snprintf(text, sizeof text, HEAD "; %sx\n", pad);
    put_str("bad199.ini", text, path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), -1);
    expect_at(&e, "bad199.ini", 6, "longer than 198");
}

/* "tp = 2" then "    8" ran TP 8 (libinih appended the line to the value). */
Test(safety_ini, scenario_continuation_is_an_error)
{
    char path[512];
    put_str("cont.ini", HEAD "[rollout]\ntp = 2\n    8\n", path, sizeof path);
    scenario s;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(path, &s, &e), -1, "continued value read as tp = %d", s.tp);
    expect_at(&e, "cont.ini", 8, "indented line");
    /* an indented section header after a key is a continuation too */
    put_str("cont2.ini", HEAD "[rollout]\ntp = 2\n  [train]\n", path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), -1);
    expect_at(&e, "cont2.ini", 8, "indented line");
    /* indentation that continues nothing (right after a section) stays legal,
     * as do indented comments and blank lines */
    put_str("indent.ini", HEAD "[rollout]\n  tp = 2\n   ; note\n  \n", path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(s.tp, 2);
}

/* A key given twice: the last one won silently. */
Test(safety_ini, scenario_duplicate_key_names_both_lines)
{
    char path[512];
    put_str("dup.ini", HEAD "[rollout]\ntp = 2\nmem_util = 0.8\ntp = 4\n", path, sizeof path);
    scenario s;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(path, &s, &e), -1, "tp given twice was read as %d", s.tp);
    expect_at(&e, "dup.ini", 9, "key 'rollout.tp' given twice (first on line 7)");
    /* the same through a repeated section */
    put_str("dup2.ini", HEAD "[cluster]\ngpus = 16\n", path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), -1, "gpus given twice was read as %d", s.gpus);
    expect_at(&e, "dup2.ini", 7, "first on line 2");
}

/* A NUL byte cut the line: "gpus = 8<NUL>0" read as 8. */
Test(safety_ini, scenario_nul_byte_is_an_error)
{
    static const char text[] = "[cluster]\ngpus = 8\0" "0\nhw = h100\n[model]\nname = qwen2.5-7b\n";
    char path[512];
    put("nul.ini", text, sizeof text - 1, path, sizeof path);
    scenario s;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(path, &s, &e), -1, "a NUL byte was read past (gpus %d)", s.gpus);
    expect_at(&e, "nul.ini", 2, "NUL byte");
}

/* Line numbers stay right after long comments and CRLF line ends. */
Test(safety_ini, scenario_line_numbers)
{
    char text[1024], path[512], pad[200];
    memset(pad, 'y', 190);
    pad[190] = 0;
    snprintf(text, sizeof text, "; %s\r\n" HEAD "[rollout]\r\n\r\ntp = x\r\n", pad);
    put_str("crlf.ini", text, path, sizeof path);
    scenario s;
    ts_err e = {{0}};
    cr_assert_eq(scenario_load(path, &s, &e), -1);
    expect_at(&e, "crlf.ini", 9, "rollout.tp");
    put_str("nosec.ini", "gpus = 8\n" HEAD, path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), -1);
    expect_at(&e, "nosec.ini", 1, "before any [section]");
}

/* The hardware and LLM readers are as strict (the same line source). */
Test(safety_ini, hw_and_llm_inis_are_strict)
{
    char path[512];
    hw_desc hw;
    llm_desc m;
    ts_err e = {{0}};
    put_str("ok.ini", HW_MIN, path, sizeof path);
    cr_assert_eq(hw_load_ini(path, &hw, &e), 0, "%s", e.msg);
    put_str("dup.ini", HW_MIN "[gpu]\nsms = 100\n", path, sizeof path);
    cr_assert_eq(hw_load_ini(path, &hw, &e), -1, "sms given twice read as %d", hw.sms);
    expect_at(&e, "dup.ini", 13, "key 'sms' set twice (first on line 5)");
    put_str("cont.ini", HW_MIN "  5\n", path, sizeof path);
    cr_assert_eq(hw_load_ini(path, &hw, &e), -1);
    expect_at(&e, "cont.ini", 12, "indented line");
    static const char nul[] = "[gpu]\npeak_flops = 989e12\0junk\n";
    put("nul.ini", nul, sizeof nul - 1, path, sizeof path);
    cr_assert_eq(hw_load_ini(path, &hw, &e), -1);
    expect_at(&e, "nul.ini", 2, "NUL byte");
    char text[2048], pad[260];
    memset(pad, 'z', 250);
    pad[250] = 0;
    snprintf(text, sizeof text, "; %s\n" HW_MIN, pad);
    put_str("long.ini", text, path, sizeof path);
    cr_assert_eq(hw_load_ini(path, &hw, &e), -1);
    expect_at(&e, "long.ini", 1, "longer than 198");
    put_str("llm.ini", LLM_MIN "heads = 32\n", path, sizeof path);
    cr_assert_eq(llm_load(path, &m, &e), -1, "heads given twice read as %d", m.heads);
    expect_at(&e, "llm.ini", 12, "first on line 4");
}

/* The grid reader: keys of [sweep] given twice, an indented line under a
 * key that is not a list, NUL bytes. */
Test(safety_ini, grid_is_strict)
{
    char path[512];
    grid g;
    ts_err e = {{0}};
    put_str("steps.ini", "[sweep]\nscenario = qwen7b-64gpu\nsteps = 1\nsteps = 2\n", path,
             sizeof path);
    cr_assert_eq(grid_load(path, &g, &e), -1, "steps given twice read as %d", g.steps);
    expect_at(&e, "steps.ini", 4, "key 'sweep.steps' given twice (first on line 3)");
    put_str("scn.ini", "[sweep]\nscenario = qwen7b-64gpu\n  qwen32b-64gpu\n", path, sizeof path);
    cr_assert_eq(grid_load(path, &g, &e), -1, "scenario continued read as %s", g.scenario);
    expect_at(&e, "scn.ini", 3, "indented line");
    put_str("dim.ini", "[sweep]\nscenario = qwen7b-64gpu\n[rollout]\ntp = 1,2\n"
                       "[trace]\nprompts = 4\n[rollout]\ntp = 4\n", path, sizeof path);
    cr_assert_eq(grid_load(path, &g, &e), -1);
    expect_at(&e, "dim.ini", 8, "given twice (first on line 4)");
    static const char nul[] = "[sweep]\nscenario = qwen7b-64gpu\n[rollout]\ntp = 1,2\0,4\n";
    put("nul.ini", nul, sizeof nul - 1, path, sizeof path);
    cr_assert_eq(grid_load(path, &g, &e), -1, "NUL read past: %zu configurations", g.n_configs);
    expect_at(&e, "nul.ini", 4, "NUL byte");
    cr_assert_eq(g.n_dims, 0, "a failed load leaves nothing allocated");
    /* a list still continues on indented lines, with the right line numbers */
    put_str("cont.ini", "[sweep]\nscenario = qwen7b-64gpu\n[trace]\nseed = 1,2\n  3,4\n  5,x\n",
            path, sizeof path);
    cr_assert_eq(grid_load(path, &g, &e), -1);
    expect_at(&e, "cont.ini", 6, "trace.seed");
}

/* ------------------------------------------------- item 2: linear grid lists */

/* 20,000 values on 2,000 indented lines: the reader re-read and re-checked
 * the whole list at every line (about cubic: 10,000 values took 18 s, these
 * would take minutes); linear, it takes well under a second.  The timeout is
 * the bound, generous for sanitizer builds. */
Test(safety_ini, grid_long_continued_list_is_linear, .timeout = 60)
{
    enum { N = 20000, PER_LINE = 10 };
    size_t cap = (size_t)N * 8 + 256, o = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    o += (size_t)snprintf(text + o, cap - o, "[sweep]\nscenario = qwen7b-64gpu\n[trace]\nseed = ");
    for (int i = 1; i <= N; i++)
        o += (size_t)snprintf(text + o, cap - o, "%s%d%s", i % PER_LINE == 1 && i > 1 ? "  " : "",
                              i, i == N ? "\n" : i % PER_LINE == 0 ? "\n" : ",");
    char path[512];
    put_str("big.ini", text, path, sizeof path);
    free(text);
    grid g;
    ts_err e = {{0}};
    cr_assert_eq(grid_load(path, &g, &e), 0, "%s", e.msg);
    cr_assert_eq(g.n_dims, 1);
    cr_assert_eq(g.dim[0].n, (size_t)N);
    cr_assert_eq(g.n_configs, (size_t)N);
    cr_assert_str_eq(g.dim[0].vals[N - 1], "20000");
    grid_free(&g);
    /* a duplicate far down the list is still found, on its line */
    put_str("dupl.ini", "[sweep]\nscenario = qwen7b-64gpu\n[trace]\nseed = 1,2\n  3\n  4,2\n",
            path, sizeof path);
    cr_assert_eq(grid_load(path, &g, &e), -1);
    expect_at(&e, "dupl.ini", 6, "value '2' listed twice");
}

/* ------------------------------------------------ item 3: bounded cluster sizes */

Test(safety_ini, cluster_size_is_bounded)
{
    char path[512];
    scenario s;
    ts_err e = {{0}};
    put_str("max.ini", "[cluster]\ngpus = 65536\n[model]\nname = qwen2.5-7b\n", path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_validate(&s, &e), 0, "%s", e.msg);
    put_str("big.ini", "[cluster]\ngpus = 1048576\n[model]\nname = qwen2.5-7b\n", path,
            sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), -1, "1,048,576 GPUs accepted");
    expect_at(&e, "big.ini", 2, "key 'cluster.gpus'");
    cr_expect(strstr(e.msg, "65536"), "the maximum is said: %s", e.msg);
    put_str("max.ini", "[cluster]\ngpus = 65536\n[model]\nname = qwen2.5-7b\n", path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "cluster.gpus=65537", &e), -1);
    cr_expect(strstr(e.msg, "cluster.gpus"), "%s", e.msg);
    cr_assert_eq(scenario_set(&s, "train.fsdp_size=1048576", &e), -1);
    cr_expect(strstr(e.msg, "train.fsdp_size"), "%s", e.msg);
    /* set directly (memory --gpus does): validation bounds it too */
    s.gpus = 1 << 20;
    cr_assert_eq(scenario_validate(&s, &e), -1);
    cr_expect(strstr(e.msg, "cluster.gpus") && strstr(e.msg, "65536"), "%s", e.msg);
}

/* ----------------------------------------- item 4: TP against the model's heads */

Test(safety_ini, tp_must_divide_heads)
{
    scenario s;
    hw_desc hw;
    llm_desc m;
    ts_err e = {{0}};
    const char *tp8[] = {"rollout.tp=8"};
    cr_assert_eq(run_setup("qwen7b-64gpu", tp8, 1, 0, 0, &s, &hw, &m, &e), -1,
                 "TP 8 over Qwen2.5-7B's 28 heads accepted");
    cr_expect(strstr(e.msg, "rollout.tp = 8") && strstr(e.msg, "28 attention heads") &&
                  strstr(e.msg, "qwen2.5-7b"),
              "%s", e.msg);
    /* 14 divides the 28 heads but neither divides nor is a multiple of 4 KV heads */
    const char *tp14[] = {"cluster.gpus=56", "rollout.tp=14"};
    cr_assert_eq(run_setup("qwen7b-64gpu", tp14, 2, 0, 0, &s, &hw, &m, &e), -1);
    cr_expect(strstr(e.msg, "rollout.tp = 14") && strstr(e.msg, "4 KV heads"), "%s", e.msg);
    /* 28: one head per GPU, the 4 KV heads replicated 7 ways */
    const char *tp28[] = {"cluster.gpus=56", "rollout.tp=28"};
    cr_assert_eq(run_setup("qwen7b-64gpu", tp28, 2, 0, 0, &s, &hw, &m, &e), 0, "%s", e.msg);
    cr_assert_eq(scenario_check_fit(&s, &hw, &m, &e), 0, "%s", e.msg);
    /* the fit check refuses TP 8 too, for callers that skip run_setup */
    s.tp = 8;
    s.gpus = 64;
    cr_assert_eq(scenario_check_fit(&s, &hw, &m, &e), -1);
    cr_expect(strstr(e.msg, "28 attention heads"), "%s", e.msg);
}

/* plan lists such a configuration as one that cannot run, with the reason. */
Test(safety_ini, plan_skips_tp_not_dividing_heads, .timeout = 120)
{
    char *out = run_capture("build/tailsim plan qwen7b-64gpu --gpus 16 --tp 4,8 --policies verl "
                            "--set trace.prompts=8 2>&1");
    cr_expect(strstr(out, "rollout.tp = 8 does not divide the 28 attention heads"), "%s", out);
    free(out);
}

/* specdec printed a negative KV cache and speedups for a model that does
 * not fit; now it refuses as rollout does, before printing anything. */
Test(safety_ini, specdec_refuses_what_rollout_refuses)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "build/tailsim specdec qwen7b-64gpu --set model.name=llama-3.1-70b "
             "--set rollout.tp=1 >%s/out 2>%s/err; echo $? >%s/rc",
             dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
    char path[512], buf[4096];
    snprintf(path, sizeof path, "%s/rc", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    int rc = -1;
    cr_assert_eq(fscanf(f, "%d", &rc), 1);
    fclose(f);
    cr_expect_eq(rc, 1, "specdec exit %d for a model that does not fit", rc);
    snprintf(path, sizeof path, "%s/out", dir);
    f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cr_expect_eq(n, 0, "specdec printed for a model that does not fit: %s", buf);
    snprintf(path, sizeof path, "%s/err", dir);
    f = fopen(path, "r");
    cr_assert_not_null(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cr_expect(strstr(buf, "llama-3.1-70b does not fit"), "%s", buf);
}

/* --------------------------------------------- item 5: no content in messages */

/* cluster.hw (or model.name) pointed at a file that is no INI of ours: the
 * message names file and line, never what the line holds. */
Test(safety_ini, hw_errors_do_not_echo_foreign_files)
{
    char path[512], pad[260], text[1024];
    hw_desc hw;
    llm_desc m;
    ts_err e = {{0}};
    put_str("shadow", "root:$6$SECRETHASH:19000:0:99999:7:::\ndaemon:*:19000::\n", path,
            sizeof path);
    cr_assert_eq(hw_load_ini(path, &hw, &e), -1);
    cr_expect(strstr(e.msg, "shadow:1: ") && !strstr(e.msg, "root") && !strstr(e.msg, "SECRET"),
              "%s", e.msg);
    cr_assert_eq(llm_load(path, &m, &e), -1);
    cr_expect(!strstr(e.msg, "root") && !strstr(e.msg, "SECRET"), "%s", e.msg);
    /* a long line: its tail used to become a "key" quoted in the message */
    memset(pad, 'p', 210);
    pad[210] = 0;
    snprintf(text, sizeof text, "[gpu]\nnote %sSECRET: token\n", pad);
    put_str("long.txt", text, path, sizeof path);
    cr_assert_eq(hw_load_ini(path, &hw, &e), -1);
    cr_expect(!strstr(e.msg, "SECRET"), "%s", e.msg);
    /* an unknown section is named, cut and sanitised; its key is not */
    put_str("creds", "[default]\naws_secret_access_key = SECRETVALUE\n", path, sizeof path);
    cr_assert_eq(hw_load_ini(path, &hw, &e), -1);
    cr_expect(strstr(e.msg, "[default]") && !strstr(e.msg, "SECRET") &&
                  !strstr(e.msg, "aws_secret"),
              "%s", e.msg);
    /* a value under one of our keys is quoted, but cut and without control bytes */
    put_str("esc.ini", "[gpu]\nsms = \x1b[2J\x1b[31mRED0123456789012345678901234567890123456789\n",
            path, sizeof path);
    cr_assert_eq(hw_load_ini(path, &hw, &e), -1);
    expect_printable(&e);
    cr_expect(!strstr(e.msg, "RED0123456789012345678901234567890123456789"), "not cut: %s",
              e.msg);
}

Test(safety_ini, scenario_and_grid_errors_do_not_echo)
{
    char path[512], text[512];
    scenario s;
    grid g;
    ts_err e = {{0}};
    put_str("shadow.ini", "root:$6$SECRETHASH:19000:0:99999:7:::\n", path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), -1);
    cr_expect(!strstr(e.msg, "root") && !strstr(e.msg, "SECRET"), "%s", e.msg);
    cr_assert_eq(grid_load(path, &g, &e), -1);
    cr_expect(!strstr(e.msg, "root") && !strstr(e.msg, "SECRET"), "%s", e.msg);
    /* a list under an unknown key was quoted whole ("empty item 2 in the list '...'") */
    put_str("g.ini", "[sweep]\nscenario = qwen7b-64gpu\n[auth]\ntoken = SECRET,,x\n", path,
            sizeof path);
    cr_assert_eq(grid_load(path, &g, &e), -1);
    expect_at(&e, "g.ini", 4, "unknown key 'auth.token'");
    cr_expect(!strstr(e.msg, "SECRET"), "%s", e.msg);
    /* values of our keys: control bytes replaced, cut to 40 characters */
    snprintf(text, sizeof text, HEAD "[rollout]\nmax_running = \x1b]0;title\x07%s\n",
             "0123456789012345678901234567890123456789LEAK");
    put_str("esc.ini", text, path, sizeof path);
    cr_assert_eq(scenario_load(path, &s, &e), -1);
    expect_at(&e, "esc.ini", 7, "rollout.max_running");
    expect_printable(&e);
    cr_expect(!strstr(e.msg, "LEAK"), "value not cut: %s", e.msg);
    put_str("gesc.ini", "[sweep]\nscenario = qwen7b-64gpu\ncommand = \x1b[31mred\n", path,
            sizeof path);
    cr_assert_eq(grid_load(path, &g, &e), -1);
    expect_printable(&e);
}

/* The trace readers: jansson's "near 'TOKEN'" and CSV fields with control
 * bytes are not echoed. */
Test(safety_ini, trace_errors_do_not_echo)
{
    char path[512];
    trace *t = NULL;
    ts_err e = {{0}};
    put_str("t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5],\"x\": SECRETVALUE}\n", path,
            sizeof path);
    cr_assert_eq(trace_load(path, &t, &e), -1);
    expect_at(&e, "t.jsonl", 1, "invalid JSON at column");
    cr_expect(!strstr(e.msg, "SECRET"), "%s", e.msg);
    put_str("t.csv", "step,prompt_id,prompt_tokens,response_tokens\n0,0,10,\x1b[31m5\n", path,
            sizeof path);
    cr_assert_eq(trace_load(path, &t, &e), -1);
    expect_at(&e, "t.csv", 2, "response_tokens");
    expect_printable(&e);
}

/* ts_quote: cut, marked, sanitised. */
Test(safety_ini, quote_cuts_and_sanitises)
{
    char b[TS_QUOTE_BUF];
    cr_assert_str_eq(ts_quote("abc", 40, b, sizeof b), "abc");
    cr_assert_str_eq(ts_quote("a\x1b[1mb'c\n", 40, b, sizeof b), "a?[1mb?c?");
    cr_assert_str_eq(ts_quote("0123456789", 4, b, sizeof b), "0123...");
    cr_assert_str_eq(ts_quote("", 4, b, sizeof b), "");
    char small[4];
    cr_assert_str_eq(ts_quote("abcdef", 40, small, sizeof small), "abc");
}
