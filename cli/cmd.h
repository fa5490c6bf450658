/*
 * Subcommands of the tailsim CLI.  Each takes the arguments after its name
 * (argv[0] is the subcommand name) and returns the process exit status:
 * 0 success, 1 runtime/input error (message already printed to stderr),
 * 2 usage error.  Each prints its own --help.
 */
#ifndef TS_CMD_H
#define TS_CMD_H

#include "common/err.h"

int cmd_trace(int argc, char **argv);   /* trace stats | trace gen   (cli/cmd_trace.c)  */
int cmd_calib(int argc, char **argv);   /* calib vidur               (cli/cmd_calib.c)  */
int cmd_rollout(int argc, char **argv); /* rollout SCENARIO          (cli/cmd_run.c)    */
int cmd_rlstep(int argc, char **argv);  /* rlstep SCENARIO           (cli/cmd_run.c)    */
int cmd_report(int argc, char **argv);  /* report --run ID -o DIR    (cli/cmd_report.c) */
int cmd_specdec(int argc, char **argv); /* specdec SCENARIO          (cli/cmd_specdec.c) */
int cmd_dcp(int argc, char **argv);     /* dcp SCENARIO              (cli/cmd_dcp.c)    */
int cmd_compare(int argc, char **argv); /* compare SCENARIO          (cli/cmd_compare.c) */
int cmd_sweep(int argc, char **argv);   /* sweep GRID.ini            (cli/cmd_sweep.c)  */
int cmd_plan(int argc, char **argv);    /* plan SCENARIO --gpus ...  (cli/cmd_plan.c)   */
int cmd_paper(int argc, char **argv);   /* paper [-o DIR]            (cli/cmd_paper.c)  */
int cmd_memory(int argc, char **argv);  /* memory SCENARIO           (cli/cmd_memory.c) */
int cmd_keys(int argc, char **argv);    /* keys [SECTION]            (cli/cmd_info.c)   */
int cmd_models(int argc, char **argv);  /* models                    (cli/cmd_info.c)   */

/* Prints o to stdout as indented JSON with reals to `precision` digits (the
 * one format of every command's --json).  Does not take o's reference.
 * Returns 0, or -1 with e set on allocation failure. */
struct json_t;
int cmd_print_json(const struct json_t *o, int precision, ts_err *e);

/* Adds a run's identity to o in the order of the --json headers: command,
 * scenario, model, hw, calibration, version and seed (all but model and hw
 * from rec).  A key jansson cannot add is left out, as everywhere in the
 * JSON output.  Cannot fail. */
struct run_record;
void cmd_json_identity(struct json_t *o, const struct run_record *rec, const char *model,
                       const char *hw);

/* A name as the terminal may show it on one line: s (cut to n - 1 bytes)
 * with every control character (0x01-0x1f, 0x7f) as a space, into buf
 * (s may be buf itself).
 * Names come from files and flags (a scenario file's name, a --vary value),
 * so a newline in one must not start a line of its own in a table.
 * Returns buf; cannot fail. */
const char *cmd_flat(const char *s, char *buf, size_t n);

/* The calibration check shared by `tailsim calib check` and
 * `tailsim-validate check` (argv[0] is "check"; prog names the command in
 * messages).  strict 0: exit 0 when the report was printed, 1 on bad input,
 * 2 on usage errors; strict 1: exit 0 when the accuracy targets are met, 1
 * when missed, 2 on any error. */
int calib_check_main(int argc, char **argv, const char *prog, int strict);

/* `tailsim calib algos FILE [--hw NAME] [--json]` (cli/cmd_calib_algos.c;
 * argv[0] is "algos"): cuBLASLt's kernel per GEMM shape against the cost
 * model's.  0, 1 on bad input, 2 on usage errors. */
int calib_algos_main(int argc, char **argv);

#endif
