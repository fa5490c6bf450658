#!/bin/sh
# validate/gpu.sh: the one script for a machine with an NVIDIA GPU (an H200
# for the numbers in models/calib/).  From the repository root:
#
#   OUT=/some/dir sh validate/gpu.sh       (OUT defaults to validate/results/local)
#
# It builds build/tailsim-validate (make validate), runs `selftest` (every
# kernel against its C reference) and `calibrate --quick -o $OUT/calib`, and
# leaves everything under $OUT: device.txt (nvidia-smi), build.log,
# selftest.log, calibrate.log, calib/calib.csv, calib/calib.db and
# summary.txt (also printed last).  Each step has a time limit (build 150 s,
# selftest 90 s, calibrate 200 s) so the whole run ends within 8 minutes.
# `check` and `confirm` are not implemented yet; they will be added here.
#
# On a machine whose image lacks the -dev packages (gsl, sqlite3, inih,
# jansson) `make validate` fails; then a build/tailsim-validate-portable made
# elsewhere with `make validate-portable` (those libraries linked statically)
# is used if it was copied along (with this workplace's device tool: build it
# here, then run `sh validate/gpu.sh` with carry ["build/tailsim-validate-portable"];
# the tool sets OUT).  Exit status: 0 when selftest passed and calibration
# wrote its rows, 1 otherwise.
set -u
OUT=${OUT:-validate/results/local}
mkdir -p "$OUT/calib" || exit 1
t0=$(date +%s)
say() { echo "[gpu.sh +$(($(date +%s) - t0))s] $*"; }

{
    nvidia-smi
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv
    nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version
} >"$OUT/device.txt" 2>&1
say "device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"

BIN=build/tailsim-validate
if timeout 150 make -j"$(nproc)" validate >"$OUT/build.log" 2>&1; then
    say "built $BIN"
elif [ -x build/tailsim-validate-portable ]; then
    BIN=build/tailsim-validate-portable
    say "make validate failed (see build.log); using the carried $BIN"
else
    say "make validate failed and no portable binary was carried; end of build.log:"
    tail -n 25 "$OUT/build.log"
    exit 1
fi

timeout 90 "$BIN" selftest >"$OUT/selftest.log" 2>&1
st=$?
say "selftest exit $st: $(tail -n 1 "$OUT/selftest.log")"
grep -E '^(FAIL|ERROR)|mismatch at' "$OUT/selftest.log" | head -n 20

timeout 200 "$BIN" calibrate --quick -o "$OUT/calib" >"$OUT/calibrate.log" 2>&1
ca=$?
say "calibrate exit $ca: $(tail -n 1 "$OUT/calibrate.log")"
[ "$ca" = 0 ] || grep -i 'calibrate:' "$OUT/calibrate.log" | tail -n 5

# Summary: per op, rows and the best achieved bandwidth and FLOP rate, as
# fractions of the measured copy bandwidth and gemm_peak.
if [ -s "$OUT/calib/calib.csv" ]; then
    awk -F, 'NR > 1 {
        s = $12 * 1e-6; bw = $16 / s; fl = $15 / s; op = $4
        if (op == "copy") cbw = bw
        if (op == "gemm_peak") pf = fl
        n[op]++; if (bw > mbw[op]) mbw[op] = bw; if (fl > mfl[op]) mfl[op] = fl
        if (!(op in seen)) { seen[op] = 1; order[++k] = op }
    } END {
        printf "%-14s %5s %10s %6s %12s %6s\n", "op", "rows", "best GB/s", "%copy", "best TFLOP/s", "%peak"
        for (i = 1; i <= k; i++) { op = order[i]
            printf "%-14s %5d %10.0f %6.0f %12.1f %6.0f\n", op, n[op], mbw[op] * 1e-9,
                   cbw ? 100 * mbw[op] / cbw : 0, mfl[op] * 1e-12, pf ? 100 * mfl[op] / pf : 0 }
    }' "$OUT/calib/calib.csv" >"$OUT/summary.txt"
    grep -c . "$OUT/calib/calib.csv" | awk '{ print "calib.csv: " $1 - 1 " rows" }' >>"$OUT/summary.txt"
fi
echo "selftest exit $st, calibrate exit $ca, $(($(date +%s) - t0)) s" >>"$OUT/summary.txt"
cat "$OUT/summary.txt"
[ "$st" = 0 ] && [ "$ca" = 0 ]
