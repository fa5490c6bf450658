#!/bin/sh
# validate/gpu.sh: the one script for a machine with an NVIDIA GPU (an H200
# for the numbers in models/calib/).  From the repository root:
#
#   OUT=/some/dir sh validate/gpu.sh       (OUT defaults to validate/results/local)
#
# Steps, each under its own time limit inside one budget (GPU_SH_SECONDS,
# default 480 s, so that a 540 s slot ends with a margin):
#   setup      device.txt-style facts (nvidia-smi, nvcc, uname) and the binary:
#              `make validate` when the build's -dev headers (gsl, sqlite3,
#              inih, jansson) are present (at most 150 s), else a carried
#              build/tailsim-validate-portable (`make validate-portable` made
#              elsewhere: those libraries and cudart linked in); when the
#              loader cannot find libcublasLt it is looked for on the machine
#              and LD_LIBRARY_PATH set
#   selftest   every kernel against its C reference (at most 90 s)
#   calibrate  --quick with --budget, rewriting calib.csv after every row
#   check      the cost model fitted on half of the CSV's shapes, the other
#              half predicted (CPU only)
#   confirm    the mini rollout replayed on the GPU, predicted with the
#              calibration just measured (through a copy of models/hw/<gpu>.ini
#              and the CSV under the work folder: the working tree's
#              models/calib/ is never touched), with --budget: what is left
#
# $OUT receives at most 8 files, none in a subfolder (the device tool of
# this workplace returns 8 files at most): setup.log, selftest.log,
# calibrate.log, calib.csv, check.txt, confirm.txt, confirm.json and
# summary.txt.  summary.txt grows as the steps finish, so a run cut short
# still leaves one.  Everything else (calib.db, check.json, check-fit.ini,
# the confirm copies) goes to GPU_SH_WORK (default build/gpu-work).  Commit
# $OUT/calib.csv as models/calib/<gpu>.csv (hw_load("<gpu>") then fits the
# hardware model to it) and the summary under validate/results/.
#
# With this workplace's device tool: build here with `make validate-portable`,
# then run `sh validate/gpu.sh` with carry ["build/tailsim-validate-portable"]
# (the tool sets OUT).
#
# Dry run without a GPU: GPU_SH_CSV=FILE uses FILE in place of the
# calibration (it is copied to $OUT/calib.csv) and the existing
# build/tailsim-validate (or GPU_SH_BIN) without building, so that every step
# after calibrate runs on the CPU; tests/test_validate.c does this.
#
# Exit status: 0 when selftest passed, calibration wrote rows (all of them,
# or those measured before its budget ran out) and check ran (whether or not
# the accuracy targets were met: check.txt says), 1 otherwise.
set -u
OUT=${OUT:-validate/results/local}
WORK=${GPU_SH_WORK:-build/gpu-work}
TOTAL=${GPU_SH_SECONDS:-480}
DRY_CSV=${GPU_SH_CSV:-}
t0=$(date +%s)
mkdir -p "$OUT" || { echo "gpu.sh: cannot create OUT=$OUT" >&2; exit 1; }
rm -rf "$WORK" && mkdir -p "$WORK/models/hw" "$WORK/models/calib" ||
    { echo "gpu.sh: cannot create GPU_SH_WORK=$WORK" >&2; exit 1; }
S="$OUT/summary.txt"
: >"$S"
elapsed() { echo $(($(date +%s) - t0)); }
left() { echo $((TOTAL - $(elapsed))); }
say() { echo "[gpu.sh +$(elapsed)s] $*" | tee -a "$S"; }
lim() { m=$1; [ "$2" -lt "$m" ] && m=$2; [ "$m" -lt 5 ] && m=5; echo "$m"; } # the smaller of two, >= 5

# ---- setup: facts about the machine, then the binary ------------------------
L="$OUT/setup.log"
{
    echo "== date"; date -u
    echo "== uname"; uname -a
    echo "== nvidia-smi"; timeout -k 5 20 nvidia-smi
    timeout -k 5 20 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu,memory.used,memory.total --format=csv
    echo "== nvcc"; nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version
    echo "== libc"; ldd --version 2>&1 | head -n 1
    echo "== source"; git rev-parse HEAD 2>/dev/null || echo "no git here"
    git status --short 2>/dev/null | head -n 20
} >"$L" 2>&1
say "device: $(timeout -k 5 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"

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
    if timeout -k 5 150 make -j"$(nproc)" validate >>"$L" 2>&1; then
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
    # most likely the loader cannot find libcublasLt.so.13: look for it
    lib=$(timeout -k 5 60 find /usr/local /usr/lib /usr/lib64 /opt -name 'libcublasLt.so.1[0-9]*' \
          2>/dev/null | head -n 1)
    echo "== $BIN does not start; libcublasLt found at: ${lib:-nowhere}" >>"$L"
    if [ -n "$lib" ]; then
        LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export LD_LIBRARY_PATH
    fi
    if ! "$BIN" --help >/dev/null 2>>"$L"; then
        say "FATAL: $BIN does not start (see setup.log):"
        ldd "$BIN" 2>&1 | tee -a "$L" | grep -i 'not found'
        tail -n 5 "$L"
        exit 1
    fi
    say "$BIN starts with LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
fi

# a binary older than this script (a stale carried copy) lacks --budget
if ! "$BIN" --help 2>/dev/null | grep -q -- '--budget'; then
    say "FATAL: $BIN predates this gpu.sh (its calibrate has no --budget): rebuild it" \
        "(make validate-portable) from this tree and carry it again"
    exit 1
fi

# ---- selftest ---------------------------------------------------------------
timeout -k 10 "$(lim 90 "$(left)")" "$BIN" selftest >"$OUT/selftest.log" 2>&1
st=$?
say "selftest exit $st (0 pass, 1 mismatch, 2 CUDA error, 77 no GPU, 124 out of time):" \
    "$(tail -n 1 "$OUT/selftest.log")"
grep -E '^(FAIL|ERROR)|mismatch at' "$OUT/selftest.log" | head -n 20 | tee -a "$S"

# ---- calibrate ----------------------------------------------------------------
# What confirm and the rest need after it: 150 s.  The budget stops new rows;
# the timeout (20 s later) is for a kernel that never returns.
CSV="$OUT/calib.csv"
cb=$(lim 200 $(($(left) - 150)))
[ "$cb" -lt 30 ] && cb=30
timeout -k 10 $((cb + 20)) "$BIN" calibrate --quick --budget "$cb" --db "$WORK/calib.db" \
    -o "$OUT" >"$OUT/calibrate.log" 2>&1
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
ck=skipped
gpu=
if [ "$rows" -gt 0 ]; then
    timeout -k 5 30 "$BIN" check "$CSV" -o "$WORK/check-fit.ini" >"$OUT/check.txt" 2>&1
    ck=$?
    timeout -k 5 30 "$BIN" check "$CSV" --json >"$WORK/check.json" 2>>"$OUT/check.txt"
    say "check exit $ck (0 targets met, 1 missed, 2 error) on $rows rows; report in check.txt"
    sed -n '/^held-out/,$p' "$OUT/check.txt"
    gpu=$(sed -n '2{s/^"\([^"]*\)".*/\1/p}' "$CSV" | tr 'A-Z' 'a-z' |
          grep -oE '[a-z][0-9]{2,4}[a-z]*' | head -n 1)
    gpu=${gpu:-gpu}
    say "commit calib.csv as models/calib/$gpu.csv: hw_load(\"$gpu\") then fits the hardware model to it"
fi

# ---- confirm: the mini rollout on the GPU ----------------------------------------
cf=skipped
cl=$(($(left) - 25))
if [ "$cl" -lt 60 ]; then
    say "confirm skipped: ${cl}s left"
else
    hw=h200
    how="uncalibrated models/hw/h200.ini (no calibration rows)"
    if [ -n "$gpu" ] && [ -f "models/hw/$gpu.ini" ]; then
        cp "models/hw/$gpu.ini" "$WORK/models/hw/$gpu.ini" &&
            cp "$CSV" "$WORK/models/calib/$gpu.csv" &&
            hw="$WORK/models/hw/$gpu.ini" && how="models/hw/$gpu.ini fitted to calib.csv"
    elif [ -n "$gpu" ]; then
        how="uncalibrated models/hw/h200.ini (no models/hw/$gpu.ini)"
    fi
    say "confirm: predictions from $how; replay budget $((cl - 15))s"
    timeout -k 10 "$cl" "$BIN" confirm --quick --hw "$hw" --budget $((cl - 15)) -o "$OUT" \
        >"$OUT/confirm.txt" 2>&1
    cf=$?
    if [ "$cf" = 2 ] && grep -q 'calibration of' "$OUT/confirm.txt"; then
        # the fit failed: measure anyway, with the INI's own parameters
        cl=$(($(left) - 25))
        say "confirm: the fit to calib.csv failed; again with the uncalibrated INI (${cl}s)"
        if [ "$cl" -ge 60 ]; then
            TAILSIM_NO_CALIB=1 timeout -k 10 "$cl" "$BIN" confirm --quick --hw h200 \
                --budget $((cl - 15)) -o "$OUT" >>"$OUT/confirm.txt" 2>&1
            cf=$?
        fi
    fi
    say "confirm exit $cf (0 targets met, 1 missed, 3 out of time: partial, 77 no GPU, 2 error)"
    tail -n 14 "$OUT/confirm.txt"
fi

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
[ -s "$OUT/check.txt" ] && grep -E '^(median per-op|worst op|all held-out)' "$OUT/check.txt" >>"$S"
[ -s "$OUT/confirm.txt" ] && grep -E '(makespan|speedup|targets:)' "$OUT/confirm.txt" >>"$S"
nfiles=$(find "$OUT" -type f | wc -l)
[ "$nfiles" -gt 8 ] && echo "note: $nfiles files under $OUT (the device tool returns 8)" >>"$S"
echo "selftest exit $st, calibrate exit $ca, check exit $ck, confirm exit $cf, $(elapsed) s" >>"$S"
cat "$S"
[ "$st" = 0 ] && { [ "$ca" = 0 ] || [ "$ca" = 3 ]; } && [ "$rows" -gt 0 ] &&
    { [ "$ck" = 0 ] || [ "$ck" = 1 ]; }
