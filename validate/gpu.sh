#!/bin/sh
# validate/gpu.sh: the one script for a machine with an NVIDIA GPU (an H200
# for the numbers in models/calib/).  From the repository root:
#
#   OUT=/some/dir sh validate/gpu.sh       (OUT defaults to validate/results/local)
#
# It builds build/tailsim-validate (make validate), runs `selftest` (every
# kernel against its C reference), `calibrate --quick -o $OUT/calib` and
# `check` on the CSV it wrote (fit on half the shapes, predicted vs measured
# on the other half), and leaves everything under $OUT: device.txt
# (nvidia-smi), build.log, selftest.log, calibrate.log, calib/calib.csv,
# calib/calib.db, check.txt, check.json, check-fit.ini (the fit on all rows
# as a hardware INI), models/calib/<gpu>.csv (the CSV where the repository
# keeps it: commit it as models/calib/<gpu>.csv and hw_load() fits the
# hardware model to it), confirm.txt and confirm/confirm.json (a mini
# rollout replayed on the GPU, baseline and tail speculation, against
# tailsim's prediction with the calibration just measured) and summary.txt
# (also printed last).  Each step has a time limit (build 120 s, selftest
# 60 s, calibrate 170 s, check 20 s, confirm what is left of 465 s) so the
# whole run ends within 8 minutes.
#
# On a machine whose image lacks the -dev packages (gsl, sqlite3, inih,
# jansson) `make validate` fails; then a build/tailsim-validate-portable made
# elsewhere with `make validate-portable` (those libraries linked statically)
# is used if it was copied along (with this workplace's device tool: build it
# here, then run `sh validate/gpu.sh` with carry ["build/tailsim-validate-portable"];
# the tool sets OUT).  Exit status: 0 when selftest passed, calibration
# wrote its rows and check ran (whether or not the accuracy targets were met:
# check.txt says), 1 otherwise.
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
if timeout 120 make -j"$(nproc)" validate >"$OUT/build.log" 2>&1; then
    say "built $BIN"
elif [ -x build/tailsim-validate-portable ]; then
    BIN=build/tailsim-validate-portable
    say "make validate failed (see build.log); using the carried $BIN"
else
    say "make validate failed and no portable binary was carried; end of build.log:"
    tail -n 25 "$OUT/build.log"
    exit 1
fi

timeout 60 "$BIN" selftest >"$OUT/selftest.log" 2>&1
st=$?
say "selftest exit $st: $(tail -n 1 "$OUT/selftest.log")"
grep -E '^(FAIL|ERROR)|mismatch at' "$OUT/selftest.log" | head -n 20

timeout 170 "$BIN" calibrate --quick -o "$OUT/calib" >"$OUT/calibrate.log" 2>&1
ca=$?
say "calibrate exit $ca: $(tail -n 1 "$OUT/calibrate.log")"
[ "$ca" = 0 ] || grep -i 'calibrate:' "$OUT/calibrate.log" | tail -n 5

# check: the cost model fitted to half of the shapes, the other half
# predicted (runs on the CPU only; never touches the GPU).
ck=skipped
if [ -s "$OUT/calib/calib.csv" ]; then
    timeout 20 "$BIN" check "$OUT/calib/calib.csv" -o "$OUT/check-fit.ini" >"$OUT/check.txt" 2>&1
    ck=$?
    timeout 20 "$BIN" check "$OUT/calib/calib.csv" --json >"$OUT/check.json" 2>>"$OUT/check.txt"
    say "check exit $ck (0: targets met, 1: missed, 2: error); report in check.txt, check.json"
    sed -n '/^held-out/,$p' "$OUT/check.txt"
    gpu=$(sed -n '2{s/^"\([^"]*\)".*/\1/p}' "$OUT/calib/calib.csv" | tr 'A-Z' 'a-z' |
          grep -oE '[a-z][0-9]{2,4}[a-z]*' | head -n 1)
    gpu=${gpu:-gpu}
    mkdir -p "$OUT/models/calib" && cp "$OUT/calib/calib.csv" "$OUT/models/calib/$gpu.csv"
    say "commit $OUT/calib/calib.csv as models/calib/$gpu.csv (copy at $OUT/models/calib/$gpu.csv):" \
        "hw_load(\"$gpu\") then fits the hardware model to it"
fi

# confirm: the mini rollout on the GPU, predicted with the calibration just
# measured (copied where hw_load finds it, in this working copy only).
cf=skipped
left=$((465 - ($(date +%s) - t0)))
if [ -s "$OUT/calib/calib.csv" ] && [ "$left" -gt 45 ]; then
    mkdir -p models/calib && cp "$OUT/calib/calib.csv" "models/calib/${gpu:-h200}.csv"
    timeout "$left" "$BIN" confirm --quick --hw "${gpu:-h200}" -o "$OUT/confirm" >"$OUT/confirm.txt" 2>&1
    cf=$?
    say "confirm exit $cf (0: targets met, 1: missed, 124: out of time, 2: error); report in confirm.txt"
    tail -n 14 "$OUT/confirm.txt"
else
    say "confirm skipped (${left}s left or no calibration)"
fi

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
    # training rows: the largest tracked peak memory per op (column 17, peak_bytes)
    awk -F, 'NR > 1 && $4 ~ /^train/ { if ($17 > pk[$4]) pk[$4] = $17 }
        END { for (op in pk) printf "%-24s peak %.2f GiB\n", op, pk[op] / 1073741824 }' \
        "$OUT/calib/calib.csv" | sort >>"$OUT/summary.txt"
    grep -c . "$OUT/calib/calib.csv" | awk '{ print "calib.csv: " $1 - 1 " rows" }' >>"$OUT/summary.txt"
fi
if [ -s "$OUT/check.txt" ]; then
    grep -E '^(median per-op|worst op|all held-out)' "$OUT/check.txt" >>"$OUT/summary.txt"
    [ -n "${gpu:-}" ] && echo "commit $OUT/calib/calib.csv as models/calib/$gpu.csv" >>"$OUT/summary.txt"
fi
[ -s "$OUT/confirm.txt" ] && grep -E '(makespan|speedup|targets:)' "$OUT/confirm.txt" >>"$OUT/summary.txt"
echo "selftest exit $st, calibrate exit $ca, check exit $ck, confirm exit $cf, $(($(date +%s) - t0)) s" >>"$OUT/summary.txt"
cat "$OUT/summary.txt"
[ "$st" = 0 ] && [ "$ca" = 0 ] && { [ "$ck" = 0 ] || [ "$ck" = 1 ]; }
