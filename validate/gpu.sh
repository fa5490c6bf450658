#!/bin/sh
# validate/gpu.sh: the one script for a machine with an NVIDIA GPU (an H200
# for the numbers in models/calib/).  From the repository root:
#
#   OUT=/some/dir sh validate/gpu.sh          the first run: at most 300 s
#   OUT=/other/dir sh validate/gpu.sh --more  the follow-up: at most 420 s
#   sh validate/gpu.sh [--more] --plan        print the plan and exit (1: over its cap)
#
# Made for a 15-minute device window: machine start (1-2 min) + the first run
# (300 s) leaves room for the follow-up on the still-warm machine, or for the
# first run again.  The plan (validate/gpu-lib.sh) gives each step a fixed
# allotment, the most it can take (run under timeout, with calibrate's and
# confirm's --budget inside it); the plan is printed first and the script
# refuses to start when its total exceeds the cap.
#   first run (what the decode tail's calibration needs):
#     setup      90 s  device facts and the binary: `make validate` when the
#                      build's -dev headers (gsl, sqlite3, inih, jansson) are
#                      present, else a carried build/tailsim-validate-portable
#                      (`make validate-portable` made elsewhere); when the
#                      loader cannot find libcublasLt, the exact soname the
#                      binary links (its NEEDED entry) is looked for
#     selftest   40 s  every kernel but the trainer against its C reference
#     calibrate  95 s  calibrate --tail: Qwen2.5-7B at TP 1, decode-sized
#                      GEMMs and the peak, decode attention by batch and KV
#                      length, verify chunks, row ops, verify, the drafter step
#     check      15 s  the cost model fitted on half the rows (CPU)
#     confirm    55 s  a small replay (32 responses up to 2048 tokens),
#                      predicted with the calibration just measured
#     summary     5 s
#   --more: the trainer's selftest, calibrate --quick (every group, 7B at
#     TP 1 and 32B at TP 4), check, confirm --quick (budgeted): 420 s.
# Collectives cannot be measured on one GPU: hw INIs keep their NVLink/IB.
#
# $OUT receives at most 8 files, none in a subfolder (the device tool of
# this workplace returns 8 files at most): setup.log, selftest.log,
# calibrate.log, calib.csv, gemm_algos.csv (cuBLASLt's kernel for every GEMM
# shape calibrate planned: `tailsim calib algos` compares it with the cost
# model's), confirm.txt, confirm.json and summary.txt, which ends with
# check's whole report.  summary.txt grows as the steps finish, so a run cut
# short still leaves one.  Everything else (calib.db, check.txt, check.json,
# check-fit.ini, the confirm copies) goes to GPU_SH_WORK (default
# build/gpu-work).  Commit
# the first run's $OUT/calib.csv as models/calib/<gpu>.csv (hw_load("<gpu>")
# then fits the hardware model to it; after --more, its calib.csv, which
# holds the first run's groups too) and the summaries under
# validate/results/.
#
# With this workplace's device tool: build here with `make validate-portable`,
# then run `sh validate/gpu.sh` with carry ["build/tailsim-validate-portable"]
# (the tool sets OUT).
#
# Dry run without a GPU: GPU_SH_CSV=FILE uses FILE in place of the
# calibration (it is copied to $OUT/calib.csv) and the existing
# build/tailsim-validate (or GPU_SH_BIN) without building, so that every step
# after calibrate runs on the CPU; tests/test_validate.c does this and checks
# the plan's total.
#
# Exit status: 0 when selftest passed, calibration wrote rows (all of them,
# or those measured before its budget ran out) and check ran (whether or not
# the accuracy targets were met: the check report at the end of summary.txt
# says), 1 otherwise (and when the plan exceeds its cap), 2 on a bad argument.
set -u
MODE=first
PLAN_ONLY=0
for a in "$@"; do
    case $a in
    --more) MODE=more ;;
    --plan) PLAN_ONLY=1 ;;
    *) echo "usage: sh validate/gpu.sh [--more] [--plan]" >&2; exit 2 ;;
    esac
done
. "$(dirname "$0")/gpu-lib.sh" || { echo "gpu.sh: cannot read gpu-lib.sh" >&2; exit 1; }
gpu_plan "$MODE" || exit 2
if [ "$PLAN_ONLY" = 1 ]; then
    echo "gpu.sh $MODE run:"
    gpu_plan_print
    exit $?
fi
if [ "$MODE" = more ]; then OUT=${OUT:-validate/results/local-more}; else OUT=${OUT:-validate/results/local}; fi
WORK=${GPU_SH_WORK:-build/gpu-work}
DRY_CSV=${GPU_SH_CSV:-}
t0=$(date +%s)
mkdir -p "$OUT" || { echo "gpu.sh: cannot create OUT=$OUT" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK/models/hw" "$WORK/models/calib" ||
    { echo "gpu.sh: cannot create GPU_SH_WORK=$WORK" >&2; exit 1; }
S="$OUT/summary.txt"
: >"$S"
elapsed() { echo $(($(date +%s) - t0)); }
say() { echo "[gpu.sh +$(elapsed)s] $*" | tee -a "$S"; }
# seconds left of a step that started at $1 with allotment $2, less $3 (>= 5)
until_end() { r=$(($1 + $2 - $(date +%s) - $3)); [ "$r" -lt 5 ] && r=5; echo "$r"; }

# ---- the plan -----------------------------------------------------------------
echo "gpu.sh $MODE run:" | tee -a "$S"
gpu_plan_print | tee -a "$S"
if [ "$PLAN_TOTAL" -gt "$PLAN_CAP" ]; then
    say "FATAL: the plan takes $PLAN_TOTAL s, over its cap of $PLAN_CAP s"
    exit 1
fi

# ---- setup: facts about the machine, then the binary ------------------------
L="$OUT/setup.log"
ts=$(date +%s)
{
    echo "== date"; date -u
    echo "== uname"; uname -a
    echo "== nvidia-smi"; timeout -k 2 8 nvidia-smi
    timeout -k 2 8 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu,memory.used,memory.total --format=csv
    echo "== nvcc"; nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version
    echo "== libc"; ldd --version 2>&1 | head -n 1
    echo "== source"; git rev-parse HEAD 2>/dev/null || echo "no git here"
    git status --short 2>/dev/null | head -n 20
} >"$L" 2>&1
say "device: $(timeout -k 2 8 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"

deps_present() { # the headers `make validate` needs
    printf '#include <gsl/gsl_rng.h>\n#include <sqlite3.h>\n#include <ini.h>\n#include <jansson.h>\n' |
        ${CC:-cc} $(pkg-config --cflags gsl sqlite3 inih jansson 2>/dev/null) -fsyntax-only -x c - \
        >/dev/null 2>&1
}
PORTABLE=build/tailsim-validate-portable
# a copy that lost its mode bits on the way is still the binary
[ -f "$PORTABLE" ] && [ ! -x "$PORTABLE" ] && chmod +x "$PORTABLE"
if [ -n "${GPU_SH_BIN:-}" ] || [ -n "$DRY_CSV" ]; then
    BIN=${GPU_SH_BIN:-build/tailsim-validate}
    say "using $BIN as it is (no build)"
elif deps_present; then
    BIN=build/tailsim-validate
    echo "== make validate" >>"$L"
    if timeout -k 5 "$(until_end "$ts" "$A_setup" 25)" make -j"$(nproc)" validate >>"$L" 2>&1; then
        say "built $BIN"
    elif [ -x "$PORTABLE" ]; then
        BIN=$PORTABLE
        say "make validate failed (see setup.log); using the carried $BIN"
    else
        say "make validate failed and no $PORTABLE was carried; end of setup.log:"
        tail -n 25 "$L"
        exit 1
    fi
elif [ -x "$PORTABLE" ]; then
    BIN=$PORTABLE
    say "no -dev headers for gsl/sqlite3/inih/jansson here: using the carried $BIN"
else
    say "FATAL: this machine lacks the -dev packages that make validate needs, and no" \
        "$PORTABLE was carried: run make validate-portable where they are and carry it"
    exit 1
fi
echo "== $BIN" >>"$L"
ls -l "$BIN" >>"$L" 2>&1
sha256sum "$BIN" >>"$L" 2>&1
if ! "$BIN" --help >/dev/null 2>>"$L"; then
    # most likely the loader cannot find libcublasLt: look for the exact
    # soname the binary links (a .so.12 does not serve a binary built for 13)
    dir=$(gpu_cublas_dir "$BIN" 2>>"$L")
    echo "== $BIN does not start; $(gpu_cublas_soname "$BIN") found in: ${dir:-nowhere}" >>"$L"
    if [ -n "$dir" ]; then
        LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export LD_LIBRARY_PATH
    else
        say "$(tail -n 2 "$L" | head -n 1)"
    fi
    if ! "$BIN" --help >/dev/null 2>>"$L"; then
        say "FATAL: $BIN does not start (see setup.log):"
        ldd "$BIN" 2>&1 | tee -a "$L" | grep -i 'not found'
        tail -n 5 "$L"
        exit 1
    fi
    say "$BIN starts with LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
fi

# a binary older than this script (a stale carried copy) lacks --tail
if ! "$BIN" --help 2>/dev/null | grep -q -- '--tail'; then
    say "FATAL: $BIN predates this gpu.sh (its calibrate has no --tail): rebuild it" \
        "(make validate-portable) from this tree and carry it again"
    exit 1
fi

# ---- selftest ---------------------------------------------------------------
# shellcheck disable=SC2086 # the arguments are a word list
timeout -k 5 $((A_selftest - 5)) "$BIN" selftest $SELFTEST_ARGS >"$OUT/selftest.log" 2>&1
st=$?
say "selftest exit $st (0 pass, 1 mismatch, 2 CUDA error, 77 no GPU, 124 out of time):" \
    "$(tail -n 1 "$OUT/selftest.log")"
grep -E '^(FAIL|ERROR)|mismatch at' "$OUT/selftest.log" | head -n 20 | tee -a "$S"

# ---- calibrate ----------------------------------------------------------------
# The budget stops new rows 25 s before the allotment ends; the timeout (at
# the allotment less 5 s) is for a kernel that never returns.
CSV="$OUT/calib.csv"
cb=$((A_calibrate - 25))
# shellcheck disable=SC2086
timeout -k 5 $((A_calibrate - 5)) "$BIN" calibrate $CALIB_ARGS --budget "$cb" \
    --db "$WORK/calib.db" -o "$OUT" >"$OUT/calibrate.log" 2>&1
ca=$?
say "calibrate exit $ca (0 all rows, 3 budget of ${cb}s spent, 2 error, 77 no GPU," \
    "124 killed): $(tail -n 1 "$OUT/calibrate.log")"
grep -E 'calibrate: |FAILED' "$OUT/calibrate.log" | grep -v ' rows ' | tail -n 8 | tee -a "$S"
if [ -n "$DRY_CSV" ]; then
    cp "$DRY_CSV" "$CSV" && say "dry run: $CSV is a copy of $DRY_CSV, not a measurement"
fi
rm -f "$OUT"/*.tmp.* # a CSV rewrite cut off by the timeout
rows=0
[ -s "$CSV" ] && rows=$(($(grep -c . "$CSV") - 1))

# ---- check (CPU only) -----------------------------------------------------------
# its report goes to $WORK and, whole, to the end of summary.txt: $OUT's eight
# files are taken (gemm_algos.csv has the slot check.txt had)
CHECK="$WORK/check.txt"
ck=skipped
gpu=
if [ "$rows" -gt 0 ]; then
    tc=$(date +%s)
    timeout -k 2 $((A_check - 5)) "$BIN" check "$CSV" -o "$WORK/check-fit.ini" >"$CHECK" 2>&1
    ck=$?
    timeout -k 2 "$(until_end "$tc" "$A_check" 3)" "$BIN" check "$CSV" --json >"$WORK/check.json" \
        2>>"$CHECK"
    say "check exit $ck (0 targets met, 1 missed, 2 error) on $rows rows; report at the end of summary.txt"
    sed -n '/^held-out/,$p' "$CHECK"
    gpu=$(sed -n '2{s/^"\([^"]*\)".*/\1/p}' "$CSV" | tr 'A-Z' 'a-z' |
          grep -oE '[a-z][0-9]{2,4}[a-z]*' | head -n 1)
    gpu=${gpu:-gpu}
    say "commit calib.csv as models/calib/$gpu.csv: hw_load(\"$gpu\") then fits the hardware model to it"
fi

# ---- confirm: the mini rollout on the GPU ----------------------------------------
cf=skipped
hw=h200
how="uncalibrated models/hw/h200.ini (no calibration rows)"
if [ -n "$gpu" ] && [ -f "models/hw/$gpu.ini" ]; then
    cp "models/hw/$gpu.ini" "$WORK/models/hw/$gpu.ini" &&
        cp "$CSV" "$WORK/models/calib/$gpu.csv" &&
        hw="$WORK/models/hw/$gpu.ini" && how="models/hw/$gpu.ini fitted to calib.csv"
elif [ -n "$gpu" ]; then
    how="uncalibrated models/hw/h200.ini (no models/hw/$gpu.ini)"
fi
tc=$(date +%s)
say "confirm: predictions from $how; replay budget $((A_confirm - 25))s"
# shellcheck disable=SC2086
timeout -k 5 $((A_confirm - 5)) "$BIN" confirm $CONFIRM_ARGS --hw "$hw" \
    --budget $((A_confirm - 25)) -o "$OUT" >"$OUT/confirm.txt" 2>&1
cf=$?
cl=$(until_end "$tc" "$A_confirm" 5)
if [ "$cf" = 2 ] && grep -q 'calibration of' "$OUT/confirm.txt" && [ "$cl" -ge 20 ]; then
    # the fit failed before any replay: measure anyway, with the INI's own parameters
    say "confirm: the fit to calib.csv failed; again with the uncalibrated INI (${cl}s)"
    # shellcheck disable=SC2086
    TAILSIM_NO_CALIB=1 timeout -k 2 "$cl" "$BIN" confirm $CONFIRM_ARGS --hw h200 \
        --budget $((cl - 10)) -o "$OUT" >>"$OUT/confirm.txt" 2>&1
    cf=$?
fi
say "confirm exit $cf (0 targets met, 1 missed, 3 out of time: partial, 77 no GPU, 2 error)"
tail -n 14 "$OUT/confirm.txt"

# ---- summary: per op, rows and the best achieved bandwidth and FLOP rate, as
# fractions of the measured copy bandwidth and gemm_peak ----------------------------
if [ "$rows" -gt 0 ]; then
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
    }' "$CSV" >>"$S"
    # training rows: the largest tracked peak memory per op (column 17, peak_bytes)
    awk -F, 'NR > 1 && $4 ~ /^train/ { if ($17 > pk[$4]) pk[$4] = $17 }
        END { for (op in pk) printf "%-24s peak %.2f GiB\n", op, pk[op] / 1073741824 }' \
        "$CSV" | sort >>"$S"
    echo "calib.csv: $rows rows" >>"$S"
fi
[ -s "$CHECK" ] && grep -E '^(median per-op|worst op|all held-out)' "$CHECK" >>"$S"
[ -s "$OUT/confirm.txt" ] && grep -E '(makespan|speedup|targets:)' "$OUT/confirm.txt" >>"$S"
# cuBLASLt's choices: shapes per (tile, split-K); `tailsim calib algos` compares
if [ -s "$OUT/gemm_algos.csv" ]; then
    awk -F, 'NR > 1 { k = "tile " $9 " split-K " $12; if (!(k in n)) o[++m] = k; n[k]++ }
        END { printf "gemm_algos.csv: %d shapes\n", NR - 1
              for (i = 1; i <= m; i++) printf "  %-32s %d shapes\n", o[i], n[o[i]] }' \
        "$OUT/gemm_algos.csv" >>"$S"
else
    echo "gemm_algos.csv: none (calibrate planned no GEMM)" >>"$S"
fi
nfiles=$(find "$OUT" -type f | wc -l)
[ "$nfiles" -gt 8 ] && echo "note: $nfiles files under $OUT (the device tool returns 8)" >>"$S"
echo "selftest exit $st, calibrate exit $ca, check exit $ck, confirm exit $cf, $(elapsed) s of a plan of $PLAN_TOTAL s" >>"$S"
cat "$S"
[ -s "$CHECK" ] && { echo "== check's report (check.txt)"; cat "$CHECK"; } >>"$S"
[ "$st" = 0 ] && { [ "$ca" = 0 ] || [ "$ca" = 3 ]; } && [ "$rows" -gt 0 ] &&
    { [ "$ck" = 0 ] || [ "$ck" = 1 ]; }
