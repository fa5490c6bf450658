#!/bin/sh
# The include rules of docs/ARCHITECTURE.md, checked over every #include "..."
# of the tree (run by `make check`).  Each room (a top-level folder; sim/ with
# its sim/policy/ and sim/dcp/) may include its own headers and those of the
# rooms listed for it below, nothing else; system headers (<...>) are free.
# Library rooms also must not write to stdout (only the programs print).
#
#   sh tools/check-includes.sh [ROOT]     check the tree at ROOT (default .)
#   sh tools/check-includes.sh --self-test
#                                         plant violations in a scratch tree
#                                         and check that each one is caught
#
# Exit status 0 when every rule holds, 1 with one line per violation
# ("file:line: room may not include path (rule)").
set -u

# room -> rooms it may include (besides itself)
allowed() {
    case "$1" in
    common)   echo "" ;;
    traces)   echo "common" ;;
    models)   echo "common" ;;
    results)  echo "common" ;;
    sim)      echo "common traces models results" ;;
    sweep)    echo "common traces models results sim" ;;
    reports)  echo "common results" ;;
    cli)      echo "common traces models results sim sweep reports" ;;
    kernels)  echo "" ;;
    emu)      echo "kernels/cuda_common.cuh" ;;
    validate) echo "common traces models results sim kernels cli/cmd.h" ;;
    bench)    echo "common traces models results sim sweep" ;;
    tools)    echo "common models" ;;
    tests)    echo "*" ;;
    *)        echo "?" ;;
    esac
}

# the room of a path: its top-level folder
room_of() { echo "${1%%/*}"; }

check_tree() {
    root=$1
    bad=0
    out=$(mktemp) || exit 2
    (cd "$root" && find common traces models results sim sweep reports cli kernels validate \
        emu bench tools tests -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
        -o -name '*.cc' \) \
        2>/dev/null | LC_ALL=C sort) > "$out"
    while IFS= read -r f; do
        src=$(room_of "$f")
        ok=$(allowed "$src")
        grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$root/$f" |
        sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' |
        while read -r line inc; do
            case "$inc" in */*) ;; *) continue ;; esac   # same-folder include
            dst=$(room_of "$inc")
            [ "$dst" = "$src" ] && {
                # inside sim/: the planner (sim/dcp/) knows nothing of the policies
                case "$f:$inc" in
                sim/dcp/*:sim/policy/*)
                    echo "$f:$line: sim/dcp may not include $inc (the DCP planner knows no policy)" ;;
                esac
                continue; }
            [ "$ok" = "*" ] && continue
            hit=0
            for r in $ok; do
                [ "$r" = "$dst" ] && hit=1
                [ "$r" = "$inc" ] && hit=1
            done
            [ $hit = 1 ] || echo "$f:$line: $src may not include $inc ($src may use: ${ok:-nothing outside itself})"
        done
        case "$src" in
        common|traces|models|results|sim|sweep|reports)
            grep -n '\bprintf[[:space:]]*(\|\bputs[[:space:]]*(\|\bputchar[[:space:]]*(\|\bstdout\b' "$root/$f" |
            grep -v '^[0-9]*:[[:space:]]*\(/\*\|\*\)' |
            sed "s|^\([0-9]*\):.*|$f:\1: $src is library code and may not write to stdout|" ;;
        esac
    done < "$out" > "$out.v"
    rm -f "$out"
    if [ -s "$out.v" ]; then
        cat "$out.v"
        echo "check-includes: $(wc -l < "$out.v") violation(s) of the rules in docs/ARCHITECTURE.md" >&2
        rm -f "$out.v"
        return 1
    fi
    rm -f "$out.v"
    return 0
}

self_test() {
    t=$(mktemp -d) || exit 2
    trap 'rm -rf "$t"' EXIT
    mkdir -p "$t/sim/dcp" "$t/reports" "$t/models" "$t/cli" "$t/validate"
    printf '#include "cli/cmd.h"\n' > "$t/sim/a.c"
    printf '#include "sim/rollout.h"\n' > "$t/reports/b.c"
    printf '#include "sim/policy/policy.h"\n' > "$t/sim/dcp/c.c"
    printf '#include "models/hw.h"\nvoid f(void) { printf("x"); }\n' > "$t/models/d.c"
    printf '#include "sim/run.h"\n#include "reports/report.h"\n' > "$t/cli/ok.c"
    printf '#include "cli/cmd.h"\n#include "cli/opts.h"\n' > "$t/validate/e.c"
    got=$(check_tree "$t" 2>/dev/null)
    rc=$?
    fail=0
    for want in 'sim/a.c:1: sim may not include cli/cmd.h' \
                'reports/b.c:1: reports may not include sim/rollout.h' \
                'sim/dcp/c.c:1: sim/dcp may not include sim/policy/policy.h' \
                'models/d.c:2: models is library code' \
                'validate/e.c:2: validate may not include cli/opts.h'; do
        case "$got" in *"$want"*) ;; *) echo "self-test: not caught: $want"; fail=1 ;; esac
    done
    case "$got" in *cli/ok.c*|*validate/e.c:1:*) echo "self-test: false alarm:"; echo "$got"; fail=1 ;; esac
    [ $rc = 1 ] || { echo "self-test: exit status $rc, expected 1"; fail=1; }
    [ $fail = 0 ] && echo "check-includes self-test: 5 planted violations caught, none false"
    return $fail
}

if [ "${1:-}" = --self-test ]; then
    self_test
    exit $?
fi
check_tree "${1:-.}" && echo "check-includes: every #include follows the rules"
