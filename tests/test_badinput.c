/*
 * The catalogue of bad inputs: each case writes its input files into a fresh
 * directory, runs one tailsim command, and checks that it fails with a
 * non-zero exit, that stderr names the file, line and field (or flag) at
 * fault, and that nothing was written where the command would have written.
 * One ParameterizedTest case per entry.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct bad_case {
    const char *name;
    const char *file;     /* input written to $D/<file>, or NULL */
    const char *content;  /* its content (may hold NUL-free binary junk) */
    const char *cmd;      /* run with $D replaced by the case directory */
    int exit_code;        /* expected exit status */
    const char *expect1;  /* substrings stderr must contain ("" = none) */
    const char *expect2;
    const char *absent;   /* a path under $D that must not exist afterwards, or NULL */
} bad_case;

#define SCN_HEAD "[cluster]\ngpus = 8\nhw = h100\n[model]\nname = qwen2.5-7b\n"
#define SCN(body) SCN_HEAD body
#define VID(body) "[cluster]\ngpus = 8\nhw = h200\n[model]\nname = opensora-stdit3\n[dcp]\ndist = video-mix\n" body
#define T "build/tailsim "
#define GRID(body) "[sweep]\nscenario = qwen7b-64gpu\n" body
#define SW T "sweep $D/g.ini --db $D/r.db"

static const bad_case cases[] = {
    /* rollout JSONL */
    {"jsonl_empty", "t.jsonl", "", T "trace stats $D/t.jsonl", 1, "t.jsonl", "no records", NULL},
    {"jsonl_negative_len", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5,-3]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "field 'output'", NULL},
    {"jsonl_zero_len", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[0]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "'output'", NULL},
    {"jsonl_float_len", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5.5]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "'output'", NULL},
    {"jsonl_huge_len", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[9223372036854775807]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "'output'", NULL},
    {"jsonl_overflow_len", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[99999999999999999999999]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "", NULL},
    {"jsonl_nan", "t.jsonl", "{\"step\":0,\"input\":NaN,\"output\":[5]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "", NULL},
    {"jsonl_missing_output", "t.jsonl", "{\"step\":0,\"input\":10}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "'output'", NULL},
    {"jsonl_missing_input", "t.jsonl", "{\"step\":0,\"output\":[3]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "'input'", NULL},
    {"jsonl_truncated_line2", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5]}\n{\"step\":0,\"inp", T "trace stats $D/t.jsonl", 1, "t.jsonl:2", "", NULL},
    {"jsonl_wrong_type", "t.jsonl", "{\"step\":\"zero\",\"input\":10,\"output\":[5]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "'step'", NULL},
    {"jsonl_empty_output", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "'output'", NULL},
    {"binary_junk", "t.bin", "\x7f" "ELF\x01\x02\x03\xff\xfe garbage", T "trace stats $D/t.bin", 1, "t.bin:1", "", NULL},
    {"missing_file", NULL, NULL, T "trace stats $D/none.jsonl", 1, "none.jsonl", "", NULL},
    {"jsonl_missing_brace", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5]\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1: invalid JSON at column 33", "'}' expected", NULL},
    {"jsonl_trailing_junk", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5]} x\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1: invalid JSON at column 36", "one JSON object per line", NULL},
    {"jsonl_duplicate_key", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5],\"step\":1}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1: field 'step'", "given twice", NULL},
    {"jsonl_bad_token_in_field", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5],\"validate\":tru}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1: field 'validate': invalid JSON at column 48", "invalid token", NULL},
    {"trace_stdin_dash", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5]}\n{\"step\":0,\"input\":10,\"output\":[0]}\n", "sh -c '" T "trace stats - < $D/t.jsonl'", 1, "<stdin>:2", "field 'output'", NULL},
    /* plain CSV */
    {"csv_missing_field", "t.csv", "step,prompt_id,prompt_tokens,response_tokens\n0,0,10,5\n0,1,10\n", T "trace stats $D/t.csv", 1, "t.csv:3", "response_tokens", NULL},
    {"csv_extra_field", "t.csv", "step,prompt_id,prompt_tokens,response_tokens\n0,0,10,5,1,9\n", T "trace stats $D/t.csv", 1, "t.csv:2", "", NULL},
    {"csv_negative_prompt", "t.csv", "step,prompt_id,prompt_tokens,response_tokens\n0,0,-10,5\n", T "trace stats $D/t.csv", 1, "t.csv:2", "prompt_tokens", NULL},
    {"csv_not_a_number", "t.csv", "step,prompt_id,prompt_tokens,response_tokens\n0,0,10,abc\n", T "trace stats $D/t.csv", 1, "t.csv:2", "response_tokens", NULL},
    {"csv_header_only", "t.csv", "step,prompt_id,prompt_tokens,response_tokens\n", T "trace stats $D/t.csv", 1, "t.csv", "no records", NULL},
    {"csv_bad_header", "t.csv", "a,b,c\n1,2,3\n", T "trace stats $D/t.csv", 1, "t.csv:1", "", NULL},
    /* Vidur CSV */
    {"vidur_zero_decode", "v.csv", "num_prefill_tokens,num_decode_tokens\n100,0\n", T "trace stats $D/v.csv", 1, "v.csv:2", "num_decode_tokens", NULL},
    {"vidur_fraction", "v.csv", "num_prefill_tokens,num_decode_tokens\n100,54.5\n", T "trace stats $D/v.csv", 1, "v.csv:2", "num_decode_tokens", NULL},
    /* trace gen flags: nothing written */
    {"gen_bad_dist", NULL, NULL, T "trace gen --dist weird --prompts 2 --group 2 --seed 1 -o $D/g.csv", 2, "--dist", "", "g.csv"},
    {"gen_zero_fixed", NULL, NULL, T "trace gen --dist fixed:0 --prompts 2 --group 2 --seed 1 -o $D/g.csv", 2, "fixed", "", "g.csv"},
    {"gen_negative_prompts", NULL, NULL, T "trace gen --dist fixed:5 --prompts -2 --group 2 --seed 1 -o $D/g.csv", 2, "--prompts", "", "g.csv"},
    {"gen_unwritable", NULL, NULL, T "trace gen --dist fixed:5 --prompts 2 --group 2 --seed 1 -o $D/no/dir/g.csv", 1, "g.csv", "", NULL},
    /* scenarios */
    {"scn_unknown_key", "s.ini", SCN("[rollout]\ntp = 2\nbogus = 1\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "rollout.bogus", "r.db"},
    {"scn_negative_gpus", "s.ini", "[cluster]\ngpus = -8\n[model]\nname = qwen2.5-7b\n", T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:2", "cluster.gpus", "r.db"},
    {"scn_zero_gpus", "s.ini", "[cluster]\ngpus = 0\n[model]\nname = qwen2.5-7b\n", T "rollout $D/s.ini", 1, "s.ini:2", "cluster.gpus", NULL},
    {"scn_nan", "s.ini", SCN("[rollout]\nmem_util = nan\n"), T "rollout $D/s.ini", 1, "s.ini:7", "rollout.mem_util", NULL},
    {"scn_overflow", "s.ini", SCN("[rollout]\nmax_running = 99999999999999999999\n"), T "rollout $D/s.ini", 1, "s.ini:7", "rollout.max_running", NULL},
    {"scn_tp_not_dividing", "s.ini", SCN("[rollout]\ntp = 3\n"), T "rollout $D/s.ini --db $D/r.db", 1, "tp = 3", "does not divide", "r.db"},
    {"scn_unknown_model", "s.ini", "[cluster]\ngpus = 8\n[model]\nname = gpt-17\n", T "rollout $D/s.ini", 1, "gpt-17", "unknown", NULL},
    {"scn_unknown_hw", "s.ini", "[cluster]\ngpus = 8\nhw = tpu9\n[model]\nname = qwen2.5-7b\n", T "rollout $D/s.ini", 1, "tpu9", "unknown", NULL},
    {"scn_missing_model", "s.ini", "[cluster]\ngpus = 8\n", T "rollout $D/s.ini", 1, "s.ini", "model.name", NULL},
    {"scn_syntax", "s.ini", SCN("[rollout\ntp = 2\n"), T "rollout $D/s.ini", 1, "s.ini:6", "", NULL},
    {"scn_model_does_not_fit", "s.ini", "[cluster]\ngpus = 8\n[model]\nname = llama-3.1-70b\n[rollout]\ntp = 1\n", T "rollout $D/s.ini --db $D/r.db", 1, "llama-3.1-70b", "does not fit", "r.db"},
    {"scn_kv_below_one_request", "s.ini", SCN("[rollout]\nmem_util = 0.2\nreserve_gb = 0\n[trace]\ndist = fixed:60000\nprompts = 2\ngroup = 1\ncap = 60000\n"), T "rollout $D/s.ini --db $D/r.db", 1, "KV cache capacity", "", "r.db"},
    {"scn_bad_spec_mode", "s.ini", SCN("[spec]\nmode = sometimes\n"), T "rollout $D/s.ini", 1, "spec.mode", "sometimes", NULL},
    {"scn_bad_train_strategy", "s.ini", SCN("[train]\nstrategy = dcp\n"), T "rlstep $D/s.ini", 1, "s.ini:7", "train.strategy", NULL},
    {"scn_train_offload_not_bool", "s.ini", SCN("[train]\noffload = maybe\n"), T "rlstep $D/s.ini", 1, "s.ini:7", "train.offload", NULL},
    {"scn_train_fsdp_negative", "s.ini", SCN("[train]\nfsdp_size = -8\n"), T "rlstep $D/s.ini", 1, "s.ini:7", "train.fsdp_size", NULL},
    {"scn_train_mem_cap_zero", "s.ini", SCN("[train]\nmem_cap = 0\n"), T "rlstep $D/s.ini", 1, "s.ini:7", "train.mem_cap", NULL},
    {"scn_train_update_no_memory", "s.ini", "[cluster]\ngpus = 8\nhw = h100\n[model]\nname = qwen2.5-32b\n[rollout]\ntp = 8\n[trace]\nprompts = 2\n", T "rlstep $D/s.ini --db $D/r.db", 1, "s.ini: train: the actor update", "train.offload = true", "r.db"},
    {"scn_train_offload_with_strategy", "s.ini", SCN("[train]\noffload = true\nstrategy = dcp-inter\n[trace]\nprompts = 2\n"), T "rlstep $D/s.ini --db $D/r.db", 1, "s.ini", "train.offload is not modelled", "r.db"},
    {"memory_unknown_scenario", NULL, NULL, T "memory no-such-scenario", 1, "no-such-scenario", "unknown", NULL},
    {"memory_bad_set", NULL, NULL, T "memory qwen7b-64gpu --set train.mem_cap=2", 1, "train.mem_cap", "", NULL},
    {"memory_bad_gpus", NULL, NULL, T "memory qwen7b-64gpu --gpus 16,x", 2, "--gpus", "GPU counts", NULL},
    {"memory_bad_trace", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5,-3]}\n", T "memory qwen7b-64gpu --trace $D/t.jsonl", 1, "t.jsonl:1", "'output'", NULL},
    {"scn_train_strategy_no_memory", "s.ini", SCN("[train]\nstrategy = dcp-inter\n[dcp]\nmem_cap = 0.05\n[trace]\nprompts = 2\n"), T "rlstep $D/s.ini --db $D/r.db", 1, "train.strategy dcp-inter", "no memory under the cap", "r.db"},
    {"scn_bad_dist", "s.ini", SCN("[trace]\ndist = poisson\n"), T "rollout $D/s.ini", 1, "trace.dist", "", NULL},
    {"set_bad_syntax", "s.ini", SCN(""), T "rollout $D/s.ini --set rollout.tp", 1, "--set", "section.key=value", NULL},
    {"set_unknown_key", "s.ini", SCN(""), T "rollout $D/s.ini --set train.nope=1", 1, "--set", "train.nope", NULL},
    {"set_threshold_zero", "s.ini", SCN(""), T "rollout $D/s.ini --set rollout.tail_threshold=0", 1, "rollout.tail_threshold", "", NULL},
    {"seed_negative", "s.ini", SCN(""), T "rollout $D/s.ini --seed -1", 2, "--seed", "", NULL},
    {"unknown_scenario", NULL, NULL, T "rlstep no-such-scenario", 1, "no-such-scenario", "unknown", NULL},
    {"trace_override_bad", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5,-3]}\n", T "rlstep dapo-32b-polytrace --trace $D/t.jsonl --db $D/r.db", 1, "t.jsonl:1", "'output'", "r.db"},
    /* strict scenario INIs, bounded cluster sizes, TP against the model (issue 21) */
    {"scn_long_line", "s.ini", "[cluster]\ngpus = 8\n; " "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" "gpus = 4\n[model]\nname = qwen2.5-7b\n", T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:3", "longer than 198 characters", "r.db"},
    {"scn_continuation_line", "s.ini", SCN("[rollout]\ntp = 2\n    8\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "indented line", "r.db"},
    {"scn_key_twice", "s.ini", SCN("[rollout]\ntp = 2\ntp = 4\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "key 'rollout.tp' given twice (first on line 7)", "r.db"},
    {"scn_section_twice_key_twice", "s.ini", SCN("[cluster]\ngpus = 16\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:7", "'cluster.gpus' given twice (first on line 2)", "r.db"},
    {"scn_key_before_section", "s.ini", "gpus = 8\n" SCN(""), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:1", "before any [section]", "r.db"},
    {"scn_gpus_too_many", "s.ini", "[cluster]\ngpus = 1048576\n[model]\nname = qwen2.5-7b\n", T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:2", "'cluster.gpus': '1048576' is not an integer in [1, 65536]", "r.db"},
    {"set_gpus_too_many", "s.ini", SCN(""), T "rlstep $D/s.ini --set cluster.gpus=1048576 --db $D/r.db", 1, "--set", "cluster.gpus", "r.db"},
    {"plan_gpus_too_many", NULL, NULL, T "plan qwen7b-64gpu --gpus 8,1048576 --tp 1 -o $D/out", 1, "--gpus", "[1, 65536]", "out"},
    {"scn_fsdp_too_many", "s.ini", SCN("[train]\nfsdp_size = 1048576\n"), T "rlstep $D/s.ini --db $D/r.db", 1, "s.ini:7", "train.fsdp_size", "r.db"},
    {"scn_tp_not_dividing_heads", "s.ini", SCN("[rollout]\ntp = 8\n"), T "rollout $D/s.ini --db $D/r.db", 1, "rollout.tp = 8", "28 attention heads of qwen2.5-7b", "r.db"},
    {"scn_tp_not_dividing_kv_heads", "s.ini", "[cluster]\ngpus = 56\n[model]\nname = qwen2.5-7b\n[rollout]\ntp = 14\n", T "rlstep $D/s.ini --db $D/r.db", 1, "rollout.tp = 14", "4 KV heads", "r.db"},
    {"specdec_tp_not_dividing_heads", NULL, NULL, T "specdec qwen7b-64gpu --set rollout.tp=8", 1, "rollout.tp = 8", "28 attention heads", NULL},
    {"specdec_model_does_not_fit", NULL, NULL, T "specdec qwen7b-64gpu --set model.name=llama-3.1-70b --set rollout.tp=1", 1, "llama-3.1-70b", "does not fit", NULL},
    {"grid_sweep_key_twice", "g.ini", GRID("steps = 1\nsteps = 2\n"), SW, 1, "g.ini:4", "'sweep.steps' given twice (first on line 3)", "r.db"},
    {"grid_scalar_continued", "g.ini", GRID("  qwen32b-64gpu\n"), SW, 1, "g.ini:3", "indented line", "r.db"},
    {"grid_key_before_section", "g.ini", "scenario = qwen7b-64gpu\n" GRID(""), SW, 1, "g.ini:1", "before any [section]", "r.db"},
    /* placement of a trace's prompts on the replicas (issue 17, item 1) */
    {"scn_placement_unknown", "s.ini", SCN("[rollout]\nplacement = dp_rank\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:7", "'rollout.placement': 'dp_rank' is not balanced, trace or round-robin", "r.db"},
    {"set_placement_unknown", "s.ini", SCN(""), T "rlstep $D/s.ini --set rollout.placement=Trace --db $D/r.db", 1, "--set", "rollout.placement", "r.db"},
    {"placement_trace_rank_mismatch", "t.csv", "step,prompt_id,prompt_tokens,response_tokens,dp_rank\n0,0,10,50,0\n0,1,10,60,1\n", T "rlstep qwen7b-64gpu --trace $D/t.csv --set rollout.placement=trace --db $D/r.db", 1, "t.csv: rollout.placement = trace: the trace records 2 rollout ranks", "16 replicas", "r.db"},
    {"placement_trace_no_ranks", "t.csv", "step,prompt_id,prompt_tokens,response_tokens\n0,0,10,50\n0,1,10,60\n", T "rollout qwen7b-64gpu --trace $D/t.csv --set rollout.placement=trace --db $D/r.db", 1, "t.csv", "records no dp_rank", "r.db"},
    {"placement_trace_partly_ranked", "t.jsonl", "{\"step\":0,\"dp_rank\":0,\"input\":10,\"output\":[5]}\n{\"step\":0,\"input\":10,\"output\":[7]}\n", T "compare qwen7b-64gpu --trace $D/t.jsonl --set rollout.placement=trace --set cluster.gpus=4", 1, "t.jsonl", "prompt 1 of the trace has no dp_rank", NULL},
    /* databases */
    {"db_not_a_database", "r.db", "this is not a database, just text\n", T "rlstep dapo-32b-polytrace --set trace.file= --set trace.prompts=4 --db $D/r.db", 1, "r.db", "not a database", NULL},
    {"db_missing_dir", NULL, NULL, T "rlstep dapo-32b-polytrace --set trace.file= --set trace.prompts=4 --db $D/no/dir/r.db", 1, "r.db", "", NULL},
    {"report_no_db", NULL, NULL, T "report --db $D/none.db -o $D/out", 1, "none.db", "", "out"},
    {"report_runs_twice", NULL, NULL, T "report --db $D/none.db --run 3,3 -o $D/out", 2, "--run", "twice", "out"},
    {"report_runs_bad_id", NULL, NULL, T "report --db $D/none.db --run 3,,4 -o $D/out", 2, "--run", "not a run id", "out"},
    {"report_corrupt_db", "r.db", "garbage garbage garbage garbage garbage garbage garbage garbage garbage", T "report --db $D/r.db -o $D/out", 1, "r.db", "not a database", "out/report.md"},
    /* calibration CSV */
    {"calib_not_vidur", "p.csv", "a,b\n1,2\n", T "calib vidur $D/p.csv --hw h100", 1, "p.csv:1", "", NULL},
    {"calib_unknown_hw", "p.csv", "a,b\n1,2\n", T "calib vidur $D/p.csv --hw a100x", 1, "a100x", "", NULL},
    /* sweep grids: validated whole before the database is created */
    {"grid_unknown_key", "g.ini", GRID("[rollout]\nbogus = 1,2\n"), SW, 1, "g.ini:4", "rollout.bogus", "r.db"},
    {"grid_unknown_sweep_key", "g.ini", GRID("jobs = 4\n"), SW, 1, "g.ini:3", "sweep.jobs", "r.db"},
    {"grid_empty_list", "g.ini", GRID("[rollout]\ntp =\n"), SW, 1, "g.ini:4", "empty list", "r.db"},
    {"grid_empty_item", "g.ini", GRID("[rollout]\ntp = 1,,2\n"), SW, 1, "g.ini:4", "empty item 2", "r.db"},
    {"grid_not_numeric", "g.ini", GRID("[trace]\nprompts = 64,many\n"), SW, 1, "g.ini:4", "trace.prompts", "r.db"},
    {"grid_out_of_range", "g.ini", GRID("[rollout]\ntp = 1,128\n"), SW, 1, "g.ini:4", "rollout.tp", "r.db"},
    {"grid_nan", "g.ini", GRID("[rollout]\nmem_util = 0.8,nan\n"), SW, 1, "g.ini:4", "rollout.mem_util", "r.db"},
    {"grid_duplicate_value", "g.ini", GRID("[rollout]\ntp = 2,2\n"), SW, 1, "g.ini:4", "listed twice", "r.db"},
    {"grid_duplicate_key", "g.ini", GRID("policy = verl\n[policy]\nname = tlt\n"), SW, 1, "g.ini:5", "given twice", "r.db"},
    {"grid_unknown_policy", "g.ini", GRID("policy = verl,fastest\n"), SW, 1, "g.ini:3", "fastest", "r.db"},
    {"grid_bad_command", "g.ini", GRID("command = train\n"), SW, 1, "g.ini:3", "sweep.command", "r.db"},
    {"grid_bad_steps", "g.ini", GRID("steps = 0\n"), SW, 1, "g.ini:3", "sweep.steps", "r.db"},
    {"grid_missing_scenario", "g.ini", "[rollout]\ntp = 1,2\n", SW, 1, "g.ini", "sweep.scenario", "r.db"},
    {"grid_unknown_scenario", "g.ini", "[sweep]\nscenario = no-such-scenario\n", SW, 1, "sweep.scenario", "no-such-scenario", "r.db"},
    {"grid_empty_file", "g.ini", "", SW, 1, "g.ini", "sweep.scenario", "r.db"},
    {"grid_binary", "g.ini", "\x7f" "ELF\x01\x02\xff\xfe junk", SW, 1, "g.ini:1", "", "r.db"},
    {"grid_unclosed_section", "g.ini", "[sweep\nscenario = qwen7b-64gpu\n", SW, 1, "g.ini:1", "not closed", "r.db"},
    {"grid_tp_not_dividing", "g.ini", GRID("[cluster]\ngpus = 8\n[rollout]\ntp = 2,3\n"), SW, 1, "config 1 (cluster.gpus=8, rollout.tp=3)", "does not divide", "r.db"},
    {"grid_model_does_not_fit", "g.ini", GRID("[model]\nname = llama-3.1-70b\n[rollout]\ntp = 1,8\n"), SW, 1, "config 0", "does not fit", "r.db"},
    {"grid_missing_file", NULL, NULL, SW, 1, "g.ini", "cannot open", "r.db"},
    {"sweep_jobs_zero", "g.ini", GRID(""), T "sweep $D/g.ini -j 0 --db $D/r.db", 2, "-j", "", "r.db"},
    {"sweep_db_missing_dir", "g.ini", GRID("[trace]\nprompts = 4\n"), T "sweep $D/g.ini --db $D/no/dir/r.db", 1, "r.db", "", NULL},
    {"plan_bad_gpus", NULL, NULL, T "plan qwen7b-64gpu --gpus 32,lots --tp 2 -o $D/out", 1, "--gpus", "cluster.gpus", "out"},
    {"plan_unknown_policy", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --policies verl,warp -o $D/out", 1, "--policies", "warp", "out"},
    {"plan_bad_target", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --target-step 30x -o $D/out", 2, "--target-step", "", "out"},
    {"plan_unknown_strategy", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --train bucket,fastest -o $D/out", 1, "--train", "train.strategy", "out"},
    {"plan_bad_offload", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --offload false,maybe -o $D/out", 1, "--offload", "train.offload", "out"},
    {"plan_vary_unknown_key", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --vary train.nokey=1,2 -o $D/out", 1, "--vary", "train.nokey", "out"},
    {"plan_vary_no_values", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --vary train.sp -o $D/out", 1, "--vary 'train.sp'", "section.key=v1,v2", "out"},
    {"plan_vary_bad_value", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --vary train.sp=4,x -o $D/out", 1, "--vary", "train.sp", "out"},
    {"plan_empty_tp", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --tp , -o $D/out", 1, "--tp", "empty item", "out"},
    {"plan_bad_max_off_policy", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --max-off-policy 40% -o $D/out", 2, "--max-off-policy", "fraction", "out"},
    {"plan_max_off_policy_above_1", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --max-off-policy 1.5 -o $D/out", 2, "--max-off-policy", "[0, 1]", "out"},
    /* compare -o: what the report cannot draw is refused before anything runs */
    {"compare_o_train", NULL, NULL, T "compare qwen7b-64gpu --policies verl,tlt --train bucket -o $D/out", 2, "--train", "-o", "out"},
    {"compare_o_no_gnuplot", NULL, NULL, "PATH=/nonexistent-tailsim-bin " T "compare qwen7b-64gpu --policies verl,tlt -o $D/out", 1, "gnuplot not found", "-o", "out"},
    {"compare_o_not_a_dir", "f", "a file\n", T "compare qwen7b-64gpu --policies verl,tlt -o $D/f/out", 1, "not a directory", "-o", NULL},
    /* rollout/rlstep -o (issue 17, exports): refused before anything runs (no database), or
     * an export that may not be replaced refused by name */
    {"rlstep_o_file", "f", "a file\n", T "rlstep qwen7b-64gpu --db $D/r.db -o $D/f", 1, "-o", "not a directory", "r.db"},
    {"rollout_o_under_file", "f", "a file\n", T "rollout qwen7b-64gpu --db $D/r.db -o $D/f/out", 1, "-o", "not a directory", "r.db"},
    {"rlstep_o_no_gnuplot", NULL, NULL, "PATH=/nonexistent-tailsim-bin " T "rlstep qwen7b-64gpu -o $D/out", 1, "gnuplot not found", "-o", "out"},
    {"rlstep_o_no_value", NULL, NULL, T "rlstep qwen7b-64gpu -o", 2, "requires an argument", "", NULL},
    {"rlstep_o_timeline_symlink", "t", "target\n", "sh -c 'mkdir $D/out && ln -s ../t $D/out/timeline.json && " T "rlstep qwen7b-64gpu --set trace.prompts=8 -o $D/out'", 1, "timeline.json", "symbolic link", "out/report.md"},
    /* standard output that cannot be written: a non-zero exit, never a silent cut */
    {"stdout_full_json", NULL, NULL, "(" T "rollout qwen7b-64gpu --json > /dev/full)", 1, "cannot write standard output", "", NULL},
    {"stdout_full_text", NULL, NULL, "(" T "rollout qwen7b-64gpu > /dev/full)", 1, "cannot write standard output", "", NULL},
    {"stdout_full_sweep_json", "g.ini", GRID("[rollout]\ntp = 2,4\n"), "(" SW " --json > /dev/full)", 1, "cannot write standard output", "", NULL},
    {"stdout_full_trace_stats", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5,7]}\n", "(" T "trace stats $D/t.jsonl > /dev/full)", 1, "cannot write standard output", "", NULL},
    {"stdout_full_help", NULL, NULL, "(" T "help > /dev/full)", 1, "cannot write standard output", "", NULL},
    {"stdout_closed", NULL, NULL, "(" T "version >&-)", 1, "cannot write standard output", "", NULL},
    /* recorded reward times (issue 17, item 2): PolyTrace's reward_timings_step_N.jsonl */
    {"reward_time_negative", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":0,\"reward_time_s\":-1.5}\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "field 'reward_time_s': -1.5 is outside", NULL},
    {"reward_time_string", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":0,\"reward_time_s\":\"77\"}\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "field 'reward_time_s': expected seconds", NULL},
    {"reward_time_huge", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":0,\"reward_time_s\":1e300}\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "field 'reward_time_s'", NULL},
    {"reward_time_missing", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":0,\"input\":10,\"output\":[5]}\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "field 'reward_time_s': missing", NULL},
    {"reward_step_not_the_names", "reward_timings_step_0.jsonl", "{\"step\":3,\"dp_rank\":0,\"reward_time_s\":5}\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "field 'step': 3, but the file is named for step 0", NULL},
    {"reward_step_missing", "r.jsonl", "{\"dp_rank\":0,\"reward_time_s\":5}\n", T "trace stats $D/r.jsonl", 1, "r.jsonl:1", "field 'step': missing", NULL},
    {"reward_rank_twice", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":1,\"reward_time_s\":5}\n{\"step\":0,\"dp_rank\":0,\"reward_time_s\":6}\n{\"step\":0,\"dp_rank\":1,\"reward_time_s\":7}\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:3", "field 'dp_rank': step 0, rank 1 has a reward time already (line 1)", NULL},
    {"reward_rank_negative", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":-1,\"reward_time_s\":5}\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "field 'dp_rank'", NULL},
    {"reward_validate_not_bool", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":0,\"reward_time_s\":5,\"validate\":\"no\"}\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "field 'validate'", NULL},
    {"reward_only_validation", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":0,\"reward_time_s\":5,\"validate\":true}\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl", "only validation records", NULL},
    {"reward_empty", "reward_timings_step_0.jsonl", "", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "no reward records", NULL},
    {"reward_truncated_line2", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":0,\"reward_time_s\":5}\n{\"step\":0,\"reward_ti", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:2", "invalid JSON", NULL},
    {"reward_binary", "reward_timings_step_0.jsonl", "\x7f" "ELF\x01\x02\xff\xfe junk", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "invalid JSON", NULL},
    {"reward_not_an_object", "reward_timings_step_0.jsonl", "[{\"step\":0,\"reward_time_s\":5}]\n", T "trace stats $D/reward_timings_step_0.jsonl", 1, "reward_timings_step_0.jsonl:1", "one JSON object per line", NULL},
    {"reward_given_as_trace", "reward_timings_step_0.jsonl", "{\"step\":0,\"dp_rank\":0,\"reward_time_s\":77.3}\n", T "rlstep dapo-32b-polytrace --trace $D/reward_timings_step_0.jsonl --db $D/r.db", 1, "reward_timings_step_0.jsonl:1: field 'reward_time_s'", "not a response-length trace", "r.db"},
    {"reward_file_key_bad", "r.jsonl", "{\"step\":0,\"dp_rank\":0,\"reward_time_s\":-2}\n", "sh -c 'echo \"{\\\"step\\\":0,\\\"input\\\":10,\\\"output\\\":[5]}\" | " T "rlstep qwen7b-64gpu --trace - --set trace.reward_file=$PWD/$D/r.jsonl --db $D/r.db'", 1, "r.jsonl:1", "field 'reward_time_s'", "r.db"},
    {"reward_file_key_orphan", "r.jsonl", "{\"step\":4,\"dp_rank\":0,\"reward_time_s\":2}\n", "sh -c 'echo \"{\\\"step\\\":0,\\\"input\\\":10,\\\"output\\\":[5]}\" | " T "rlstep qwen7b-64gpu --trace - --set trace.reward_file=$PWD/$D/r.jsonl --db $D/r.db'", 1, "r.jsonl:1: field 'step'", "step 4 has a reward time but no prompts", "r.db"},
    {"reward_file_key_without_trace", "r.jsonl", "{\"step\":0,\"dp_rank\":0,\"reward_time_s\":2}\n", T "rlstep qwen7b-64gpu --set trace.reward_file=$D/r.jsonl --db $D/r.db", 1, "trace.reward_file", "needs a trace", "r.db"},
    {"reward_file_key_missing", NULL, NULL, "sh -c 'echo \"{\\\"step\\\":0,\\\"input\\\":10,\\\"output\\\":[5]}\" | " T "rlstep qwen7b-64gpu --trace - --set trace.reward_file=$PWD/$D/none.jsonl --db $D/r.db'", 1, "none.jsonl", "cannot open", "r.db"},
    /* usage */
    {"unknown_command", NULL, NULL, T "frobnicate", 2, "unknown command", "frobnicate", NULL},
    {"rollout_no_scenario", NULL, NULL, T "rollout", 2, "SCENARIO", "", NULL},
    /* discoverable keys and models (issue 17, items 4 and 9): an unknown key points at
     * `tailsim keys SECTION`, an unknown model, hardware or scenario lists what there is */
    {"keys_set_unknown_key", "s.ini", SCN(""), T "rollout $D/s.ini --set rollout.tpp=2 --db $D/r.db", 1, "--set: unknown key 'rollout.tpp' (did you mean rollout.tp?", "tailsim keys rollout)", "r.db"},
    {"keys_scn_unknown_key", "s.ini", SCN("[rollout]\nbogus = 1\n"), T "rlstep $D/s.ini --db $D/r.db", 1, "s.ini:7: unknown key 'rollout.bogus'", "the keys of [rollout]: tailsim keys rollout", "r.db"},
    {"keys_scn_unknown_section", "s.ini", SCN("[rolout]\ntp = 2\n"), T "rlstep $D/s.ini --db $D/r.db", 1, "s.ini:7: unknown key 'rolout.tp': no section [rolout]", "sections: cluster, model, rollout", "r.db"},
    {"keys_grid_unknown_key", "g.ini", GRID("[rollout]\ntpp = 2,4\n"), SW, 1, "g.ini:4", "tailsim keys rollout", "r.db"},
    {"keys_unknown_section", NULL, NULL, T "keys rollouts", 1, "no section 'rollouts'", "sections: cluster, model, rollout, train, spec, policy, trace, dcp", NULL},
    {"keys_two_sections", NULL, NULL, T "keys rollout train", 2, "at most one SECTION", "", NULL},
    {"keys_bad_flag", NULL, NULL, T "keys --frobnicate", 2, "frobnicate", "usage: tailsim keys", NULL},
    {"models_operand", NULL, NULL, T "models qwen2.5-7b", 2, "no operand", "", NULL},
    {"models_bad_flag", NULL, NULL, T "models --all", 2, "all", "usage: tailsim models", NULL},
    {"models_unknown_model_lists", "s.ini", "[cluster]\ngpus = 8\n[model]\nname = gpt-17\n", T "rollout $D/s.ini --db $D/r.db", 1, "s.ini: key 'model.name': unknown model 'gpt-17'", "available: deepseek-r1-distill-qwen-7b, llama-2-7b,", "r.db"},
    {"models_unknown_hw_lists", "s.ini", "[cluster]\ngpus = 8\nhw = tpu9\n[model]\nname = qwen2.5-7b\n", T "rlstep $D/s.ini --db $D/r.db", 1, "s.ini: key 'cluster.hw': unknown hardware 'tpu9'", "available: a100, h100, h200 (details: tailsim models)", "r.db"},
    {"models_set_unknown_model_lists", NULL, NULL, T "memory qwen7b-64gpu --set model.name=qwen3", 1, "key 'model.name': unknown model 'qwen3'", "qwen2.5-7b", NULL},
    {"models_specdec_unknown_hw_lists", NULL, NULL, T "specdec qwen7b-64gpu --set cluster.hw=b200", 1, "key 'cluster.hw': unknown hardware 'b200'", "available: a100, h100, h200", NULL},
    {"models_dcp_unknown_model_lists", NULL, NULL, T "dcp dcp-llama8b-32xh200 --set model.name=llama-4 --db $D/r.db", 1, "key 'model.name': unknown model 'llama-4'", "llama-3.1-8b", "r.db"},
    {"models_calib_unknown_hw_lists", "v.csv", "num_prefill_tokens,num_decode_tokens\n100,5\n", T "calib vidur $D/v.csv --hw v100", 1, "unknown hardware 'v100'", "available: a100, h100, h200", NULL},
    {"unknown_scenario_lists", NULL, NULL, T "rlstep no-such-scenario --db $D/r.db", 1, "unknown scenario 'no-such-scenario'", "available: bench-32b-128gpu, dapo-32b-polytrace,", "r.db"},
    /* the same core options everywhere (issue 17, item 5): plan --trace/--seed, memory and
     * specdec --seed, dcp -o refused like the other commands' */
    {"plan_trace_missing", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --trace $D/none.jsonl -o $D/out", 1, "--trace '", "none.jsonl': No such file", "out"},
    {"plan_trace_stdin", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --trace - -o $D/out", 1, "--trace -", "standard input cannot be replayed", "out"},
    {"plan_trace_bad_line", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5]}\n{\"step\":0,\"input\":10,\"output\":[-5]}\n", T "plan qwen7b-64gpu --gpus 32 --trace $D/t.jsonl -o $D/out", 1, "t.jsonl:2", "output", "out"},
    {"plan_seed_bad", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --seed -1 -o $D/out", 2, "tailsim plan: --seed '-1'", "non-negative integer", "out"},
    {"plan_seed_and_set_seed", NULL, NULL, T "plan qwen7b-64gpu --gpus 32 --set trace.seed=2 --seed 3 -o $D/out", 1, "trace.seed", "--seed", "out"},
    {"memory_seed_bad", NULL, NULL, T "memory qwen7b-64gpu --seed x", 2, "tailsim memory: --seed 'x'", "non-negative integer", NULL},
    {"specdec_seed_bad", NULL, NULL, T "specdec qwen7b-64gpu --seed 1e3", 2, "tailsim specdec: --seed '1e3'", "non-negative integer", NULL},
    {"dcp_o_not_a_dir", "f", "a file\n", T "dcp dcp-llama8b-32xh200 --db $D/r.db -o $D/f/out", 1, "-o", "not a directory", "r.db"},
    {"dcp_o_no_gnuplot", NULL, NULL, "PATH=/nonexistent-tailsim-bin " T "dcp dcp-llama8b-32xh200 --db $D/r.db -o $D/out", 1, "gnuplot not found", "-o", "r.db"},
    /* stored runs keep their effective scenario (issue 17, item 7): a value the INI
     * cannot hold is refused before anything is saved or drawn */
    {"source_set_not_ini_db", "s.ini", SCN("[trace]\nprompts = 4\n"), T "rollout $D/s.ini --set 'dcp.strategies=;bucket' --db $D/r.db", 1, "s.ini: cannot record the effective scenario", "key 'dcp.strategies'", "r.db"},
    {"source_set_not_ini_out", "s.ini", SCN("[trace]\nprompts = 4\n"), T "rlstep $D/s.ini --set 'dcp.strategies=x ;y' -o $D/out", 1, "cannot record the effective scenario", "key 'dcp.strategies'", "out/report.md"},
    /* VideoSys' released DCP configurations (issue 19): the video-mix generator's image
     * mixing type, Zipf rank key and half-normal scales name the file and key */
    {"dcp_image_mixing_bad", "v.ini", VID("image_mixing = sideways\n"), T "dcp $D/v.ini --db $D/r.db", 1, "v.ini: key 'dcp.image_mixing': 'sideways'", "not exclusive or inclusive", "r.db"},
    {"dcp_zipf_rank_bad", NULL, NULL, T "dcp dcp-videosys-1x8-frac1 --set dcp.zipf_rank=width --db $D/r.db", 1, "key 'dcp.zipf_rank': 'width'", "not pixels or height", "r.db"},
    {"dcp_res_scale_alone", "v.ini", VID("res_scale = 2\n"), T "dcp $D/v.ini --db $D/r.db", 1, "v.ini: key 'dcp.frame_scale'", "go together", "r.db"},
    {"dcp_inclusive_over_one", NULL, NULL, T "dcp dcp-videosys-1x8-frac10 --set dcp.image_mixing=inclusive --db $D/r.db", 1, "dcp-videosys-1x8-frac10.ini: [dcp]: video mix: inclusive", "image_mix in [0, 1]", "r.db"},
    {"dcp_res_scale_range", "v.ini", VID("res_scale = 200\nframe_scale = 1\n"), T "dcp $D/v.ini --db $D/r.db", 1, "v.ini:8", "res_scale", "r.db"},
    {"dcp_sweep_dist_no_video", NULL, NULL, T "dcp dcp-llama8b-32xh200 --sweep-dist -o $D/out", 1, "--sweep-dist", "dcp.dist = video-mix", "out/dcp_dist.png"},
    /* multi-turn (agentic) trajectories (issue 20): the reader names file, line and field */
    {"turns_missing", "t.jsonl", "{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turn_count\":2,\"tool_calls\":[]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "field 'turns': missing", NULL},
    {"turns_empty", "t.jsonl", "{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turns\":[]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "field 'turns'", NULL},
    {"turns_tool_negative_latency", "t.jsonl", "{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turns\":[{\"prompt_tokens\":10,\"cached_tokens\":0,\"completion_tokens\":5},{\"prompt_tokens\":40,\"cached_tokens\":14,\"completion_tokens\":7}],\"tool_calls\":[{\"turn\":0,\"latency_s\":-0.5,\"append_len\":20}]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "field 'tool_calls[0].latency_s': -0.5 s is negative", NULL},
    {"turns_tool_no_such_turn", "t.jsonl", "{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turns\":[{\"prompt_tokens\":10,\"cached_tokens\":0,\"completion_tokens\":5},{\"prompt_tokens\":40,\"cached_tokens\":14,\"completion_tokens\":7}],\"tool_calls\":[{\"turn\":0,\"latency_s\":0.5,\"append_len\":20},{\"turn\":2,\"latency_s\":0.5,\"append_len\":20}]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "field 'tool_calls[1].turn': turn 2 does not exist", NULL},
    {"turns_cached_over_prompt", "t.jsonl", "{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turns\":[{\"prompt_tokens\":10,\"cached_tokens\":0,\"completion_tokens\":5},{\"prompt_tokens\":40,\"cached_tokens\":41,\"completion_tokens\":7}]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "field 'turns[1].cached_tokens': 41 cached tokens exceed the turn's 40 prompt tokens", NULL},
    {"turns_count_mismatch", "t.jsonl", "{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turn_count\":3,\"turns\":[{\"prompt_tokens\":10,\"cached_tokens\":0,\"completion_tokens\":5},{\"prompt_tokens\":40,\"cached_tokens\":14,\"completion_tokens\":7}]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "field 'turn_count': 3", NULL},
    {"turns_zero_completion", "t.jsonl", "{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turns\":[{\"prompt_tokens\":10,\"completion_tokens\":0}]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "field 'turns[0].completion_tokens'", NULL},
    {"turns_group_again", "t.jsonl", "{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turns\":[{\"prompt_tokens\":10,\"cached_tokens\":0,\"completion_tokens\":5}]}\n{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":1,\"turns\":[{\"prompt_tokens\":10,\"cached_tokens\":0,\"completion_tokens\":5}]}\n{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turns\":[{\"prompt_tokens\":10,\"cached_tokens\":0,\"completion_tokens\":5}]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:3", "field 'prompt_group_id'", NULL},
    {"turns_mixed_formats", "t.jsonl", "{\"step\":0,\"input\":10,\"output\":[5]}\n{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turns\":[{\"prompt_tokens\":10,\"cached_tokens\":0,\"completion_tokens\":5}]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:2", "field 'turns': a multi-turn record after single-turn ones", NULL},
    {"turns_tool_missing_append", "t.jsonl", "{\"step\":0,\"prompt_len\":10,\"prompt_group_id\":0,\"turns\":[{\"prompt_tokens\":10,\"cached_tokens\":0,\"completion_tokens\":5},{\"prompt_tokens\":40,\"cached_tokens\":14,\"completion_tokens\":7}],\"tool_calls\":[{\"turn\":0,\"latency_s\":0.5}]}\n", T "trace stats $D/t.jsonl", 1, "t.jsonl:1", "field 'tool_calls[0].append_len': missing", NULL},
    /* the cost model in the tail's regimes (issue 18): engine modes and the new
     * hardware keys name file, line and key */
    {"scn_engine_unknown", "s.ini", SCN("[rollout]\nengine = cuda\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:7", "'rollout.engine': 'cuda' is not graph or eager", "r.db"},
    {"set_engine_unknown", "s.ini", SCN(""), T "rlstep $D/s.ini --set rollout.engine=Graph --db $D/r.db", 1, "--set", "rollout.engine", "r.db"},
    {"hw_car_max_bytes_bad", "g.ini", "[gpu]\npeak_flops = 989e12\nhbm_bw = 3.35e12\nhbm_bytes = 85e9\nsms = 132\n[interconnect]\nnvlink_bw = 450e9\nnvlink_lat = 0.75e-6\nnic_bw = 50e9\nnic_lat = 5e-6\ngpus_per_node = 8\n[efficiency]\ncar_max_bytes = -8\n", T "rollout qwen7b-64gpu --set cluster.hw=$PWD/$D/g.ini --db $D/r.db", 1, "g.ini:13", "car_max_bytes", "r.db"},
    {"hw_gemm_m_eff_bad", "g.ini", "[gpu]\npeak_flops = 989e12\nhbm_bw = 3.35e12\nhbm_bytes = 85e9\nsms = 132\n[interconnect]\nnvlink_bw = 450e9\nnvlink_lat = 0.75e-6\nnic_bw = 50e9\nnic_lat = 5e-6\ngpus_per_node = 8\n[efficiency]\ngemm_m_eff = 2\n", T "rollout qwen7b-64gpu --set cluster.hw=$PWD/$D/g.ini --db $D/r.db", 1, "g.ini:13", "gemm_m_eff", "r.db"},
    /* the multi-turn trace generator (issue 20): trace.turns and its keys
     * name file, line and key */
    {"gen_turns_unknown", "s.ini", SCN("[trace]\nturns = poisson\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:7", "'trace.turns': 'poisson' is not off or search-r1", "r.db"},
    {"gen_turns_probs_sum", "s.ini", SCN("[trace]\nturns = search-r1\nturn_probs = 0.5,0.4\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "'trace.turn_probs': turn probabilities '0.5,0.4' sum to 0.9, not 1", "r.db"},
    {"gen_turns_probs_negative", "s.ini", SCN("[trace]\nturns = search-r1\nturn_probs = 1.2,-0.2\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "entry 1 '1.2' is not a number in [0, 1]", "r.db"},
    {"gen_turns_probs_junk", "s.ini", SCN("[trace]\nturns = search-r1\nturn_probs = half,half\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "entry 1 'half'", "r.db"},
    {"gen_turns_probs_too_many", "s.ini", SCN("[trace]\nturns = search-r1\nturn_probs = " "0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.03,0.04" "\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "at most 32 turns", "r.db"},
    {"gen_turns_negative_median", "s.ini", SCN("[trace]\nturns = search-r1\ntool_median = -0.2\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "trace.tool_median", "r.db"},
    {"gen_turns_zero_gen_median", "s.ini", SCN("[trace]\nturns = search-r1\ngen_median = 0\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "trace.gen_median", "r.db"},
    {"gen_turns_sigma_range", "s.ini", SCN("[trace]\nturns = search-r1\nappend_sigma = 11\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:8", "trace.append_sigma", "r.db"},
    {"set_gen_turns_probs", "s.ini", SCN(""), T "rollout $D/s.ini --set trace.turns=search-r1 --set trace.turn_probs=0.6,0.6 --db $D/r.db", 1, "--set", "trace.turn_probs", "r.db"},
    {"gen_cli_turns_probs", NULL, "", T "trace gen --turns search-r1:0.2,0.2 --prompts 2 --group 2 --seed 1 -o $D/t.jsonl", 2, "--turns 'search-r1:0.2,0.2'", "sum to 0.4, not 1", "t.jsonl"},
    {"gen_cli_turns_unknown", NULL, "", T "trace gen --turns swe --prompts 2 --group 2 --seed 1 -o $D/t.jsonl", 2, "--turns 'swe'", "expected search-r1", "t.jsonl"},
#define HWI "[gpu]\npeak_flops = 989e12\nhbm_bw = 3.35e12\nhbm_bytes = 85e9\nsms = 132\n[interconnect]\nnvlink_bw = 450e9\nnvlink_lat = 0.75e-6\nnic_bw = 50e9\nnic_lat = 5e-6\ngpus_per_node = 8\n[efficiency]\n"
    /* the rollout engine's attention kernel (issue 18 item 3): rollout.attn and
     * the hardware's attn_fa3 name file, line and key */
    {"scn_attn_unknown", "s.ini", SCN("[rollout]\nattn = fa4\n"), T "rollout $D/s.ini --db $D/r.db", 1, "s.ini:7", "'rollout.attn': 'fa4' is not hw, flat, fa2 or fa3", "r.db"},
    {"set_attn_unknown", "s.ini", SCN(""), T "rlstep $D/s.ini --set rollout.attn=FA3 --db $D/r.db", 1, "--set", "rollout.attn", "r.db"},
    {"scn_attn_fa3_a100", "s.ini", "[cluster]\ngpus = 8\nhw = a100\n[model]\nname = qwen2.5-7b\n[rollout]\nattn = fa3\n", T "rlstep $D/s.ini --db $D/r.db", 1, "s.ini: key 'rollout.attn': fa3", "attn_fa3", "r.db"},
    {"specdec_attn_fa3_a100", "s.ini", "[cluster]\ngpus = 8\nhw = a100\n[model]\nname = qwen2.5-7b\n[rollout]\nattn = fa3\n", T "specdec $D/s.ini", 1, "s.ini: key 'rollout.attn': fa3", "attn_fa3", NULL},
    {"set_attn_fa2_a100", "s.ini", SCN(""), T "rollout $D/s.ini --set cluster.hw=a100 --set rollout.attn=fa2 --db $D/r.db", 1, "key 'rollout.attn': fa2", "attn_fa_version", "r.db"},
    {"hw_attn_fa3_contradicts", "g.ini", HWI "attn_fa_version = 3\nattn_fa3 = 0\n", T "rollout qwen7b-64gpu --set cluster.hw=$PWD/$D/g.ini --db $D/r.db", 1, "g.ini:14: key 'attn_fa3'", "attn_fa_version = 3 on line 13", "r.db"},
    {"hw_attn_fa3_range", "g.ini", HWI "attn_fa3 = 2\n", T "rollout qwen7b-64gpu --set cluster.hw=$PWD/$D/g.ini --db $D/r.db", 1, "g.ini:13", "attn_fa3", "r.db"},
    /* the GEMM kernel model (issue 18): gemm_tiles and its companions name
     * file, line and key */
#define HW_EFF "[gpu]\npeak_flops = 989e12\nhbm_bw = 3.35e12\nhbm_bytes = 85e9\nsms = 132\n[interconnect]\nnvlink_bw = 450e9\nnvlink_lat = 0.75e-6\nnic_bw = 50e9\nnic_lat = 5e-6\ngpus_per_node = 8\n[efficiency]\n"
#define HW_RUN T "rollout qwen7b-64gpu --set cluster.hw=$PWD/$D/g.ini --db $D/r.db"
    {"hw_gemm_tiles_no_rel", "g.ini", HW_EFF "gemm_tiles = 64x128 128x256:1\n", HW_RUN, 1, "g.ini:13", "'gemm_tiles': kernel 1 is not ROWSxCOLS:REL", "r.db"},
    {"hw_gemm_tiles_rel_zero", "g.ini", HW_EFF "gemm_tiles = 64x128:0.5 128x256:0\n", HW_RUN, 1, "g.ini:13", "'gemm_tiles': kernel 2 is not ROWSxCOLS:REL", "r.db"},
    {"hw_gemm_tiles_huge", "g.ini", HW_EFF "gemm_tiles = 64x4096:1\n", HW_RUN, 1, "g.ini:13", "'gemm_tiles': kernel 1", "r.db"},
    {"hw_gemm_tiles_repeat", "g.ini", HW_EFF "gemm_tiles = 64x128:1 64x128:0.5\n", HW_RUN, 1, "g.ini:13", "repeats tile 64x128", "r.db"},
    {"hw_gemm_tiles_too_many", "g.ini", HW_EFF "gemm_tiles = 8x8:1 16x16:1 32x32:1 64x64:1 128x128:1\n", HW_RUN, 1, "g.ini:13", "more than 4 kernels", "r.db"},
    {"hw_gemm_tiles_empty", "g.ini", HW_EFF "gemm_tiles =\n", HW_RUN, 1, "g.ini:13", "'gemm_tiles': no kernel given", "r.db"},
    {"hw_gemm_mix_range", "g.ini", HW_EFF "gemm_mix = 1.5\n", HW_RUN, 1, "g.ini:13", "gemm_mix", "r.db"},
    {"hw_gemm_splitk_negative", "g.ini", HW_EFF "gemm_splitk_bytes = -2\n", HW_RUN, 1, "g.ini:13", "gemm_splitk_bytes", "r.db"},
#undef HW_RUN
#undef HW_EFF
};
#undef HWI
#define N_CASES (sizeof cases / sizeof cases[0])

/* The parameters are indices: Criterion runs each case in a fresh process of
 * this binary, where pointers into the table (ASLR) would not be valid. */
static int case_index[N_CASES];

ParameterizedTestParameters(badinput, catalogue)
{
    for (size_t i = 0; i < N_CASES; i++)
        case_index[i] = (int)i;
    return cr_make_param_array(int, case_index, N_CASES);
}

/* Replaces every "$D" in cmd by dir. */
static void expand(const char *cmd, const char *dir, char *out, size_t n)
{
    size_t o = 0;
    for (const char *p = cmd; *p && o + 1 < n; p++) {
        if (p[0] == '$' && p[1] == 'D') {
            o += (size_t)snprintf(out + o, n - o, "%s", dir);
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o < n ? o : n - 1] = 0;
}

ParameterizedTest(int *idx, badinput, catalogue, .timeout = 60)
{
    const bad_case *c = &cases[*idx];
    char dir[256];
    snprintf(dir, sizeof dir, "build/badinput/%s", c->name);
    char cmd[2048], full[4096], path[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    cr_assert_eq(system(cmd), 0);
    if (c->file) {
        snprintf(path, sizeof path, "%s/%s", dir, c->file);
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        fwrite(c->content, 1, strlen(c->content), f);
        fclose(f);
    }
    expand(c->cmd, dir, cmd, sizeof cmd);
    snprintf(full, sizeof full, "%s >%s/stdout 2>%s/stderr </dev/null", cmd, dir, dir);
    int st = system(full);
    cr_assert(WIFEXITED(st), "%s: did not exit normally", c->name);
    snprintf(path, sizeof path, "%s/stderr", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char err[4096] = {0};
    size_t n = fread(err, 1, sizeof err - 1, f);
    err[n] = 0;
    fclose(f);
    cr_assert_eq(WEXITSTATUS(st), c->exit_code, "%s: exit %d, expected %d; stderr: %s", c->name,
                 WEXITSTATUS(st), c->exit_code, err);
    cr_assert(strstr(err, c->expect1), "%s: stderr lacks '%s': %s", c->name, c->expect1, err);
    cr_assert(strstr(err, c->expect2), "%s: stderr lacks '%s': %s", c->name, c->expect2, err);
    cr_assert(n > 0 && strchr(err, '\n'), "%s: no message", c->name);
    cr_assert(!strstr(err, "Segmentation") && !strstr(err, "internal check"), "%s: %s", c->name, err);
    if (c->absent) {
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, c->absent);
        cr_assert_neq(stat(path, &sb), 0, "%s: %s was written", c->name, c->absent);
    }
}
