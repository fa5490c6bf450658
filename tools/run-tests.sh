#!/bin/sh
# Runs every test binary given on the command line from the repository root
# and prints one closing line: "N passed, N failed".  Exit status is non-zero
# when any suite fails.  TAILSIM_SHARED (default ../shared) points the tests
# at the real traces and profiles; suites that need them skip when absent.
set -u
: "${TAILSIM_SHARED:=../shared}"
export TAILSIM_SHARED
# sanitizer builds: report leaks, but not Criterion's own one-off allocations
LSAN_OPTIONS="suppressions=$(pwd)/tools/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export LSAN_OPTIONS
pass=0; fail=0
for t in "$@"; do
    echo "== $t"
    if "$t" --jobs=2; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
