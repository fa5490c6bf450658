#!/bin/sh
# The main job behind `make run`: simulate the shipped 64-GPU Qwen2.5-7B
# scenario on its generated trace, save it to a fresh results database and
# write its report (Gantt chart, length CDF, tables) to reports/out/.
set -eu
out=reports/out
mkdir -p "$out"
rm -f "$out/tailsim.db" "$out/tailsim.db-wal" "$out/tailsim.db-shm"
build/tailsim rlstep qwen7b-64gpu --db "$out/tailsim.db" | tee "$out/rlstep.txt"
build/tailsim report --db "$out/tailsim.db" -o "$out"
echo "report: $out/report.md"
