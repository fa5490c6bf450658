#!/usr/bin/env bash
# docs-check: run the tailsim commands that README.md and docs/*.md show.
#
# Usage: bash tools/docs-check.sh [FILE.md...]   (from the repository root;
#        `make docs-check` builds build/tailsim first)
#
# A command is a line of a fenced code block that starts with `$ tailsim ` or
# `$ build/tailsim ` (a trailing backslash continues it on the next line).
# Each runs with build/tailsim, under bash, in a temporary directory that
# links every top-level entry of the repository (so `scenarios/...`,
# `build/tailsim` and the scenario names resolve as from the root, and files
# written by `-o`, `--db` or `trace gen` land in the temporary directory),
# with ../shared linked next to it and TAILSIM_SHARED=../shared.  All the
# commands of one document share that directory, in order, so a `report --db`
# finds the database an earlier line wrote.
#
# Expected exit status: 0, unless the first line the document shows after the
# command starts with `tailsim SUBCOMMAND: ` (the program's error prefix, e.g.
# `tailsim rlstep: step 0: ...: the actor update ... needs ...`): then the
# command must fail (any non-zero status).
#
# Two kinds of setup line also run, so that a walkthrough's inputs exist:
# `$ cat FILES > NAME` (copies an input into the temporary directory), and
# `$ cat NAME` of a file that does not exist there, which writes the lines the
# document shows after it to NAME (the document shows a file the reader
# writes).
#
# Skipped, each with its reason printed:
#   - blocks preceded by a line `<!-- docs-check: skip REASON -->`;
#   - lines with a pipe, or a redirection other than `> /dev/null`;
#   - lines that need ../shared when it is absent: they name `../shared`, a
#     scenario whose INI reads `shared:` data, or a file made by a skipped
#     line (its `-o`, `--db` or `>` argument, or a `cat NAME` file that
#     names one);
#   - `mpirun` lines (they need `make MPI=1`) and `tailsim-validate` (a GPU);
#   - lines naming a placeholder the reader supplies (`YOUR...`).
#
# Exit status: 0 when every command that ran exited as expected, 1 otherwise
# (each failure is named by document and line), 2 on a usage error.
set -u

root=$(pwd)
if [ ! -x "$root/build/tailsim" ] || [ ! -d "$root/scenarios" ]; then
    echo "docs-check: run from the repository root after 'make build/tailsim'" >&2
    exit 2
fi
if [ $# -gt 0 ]; then
    docs=("$@")
else
    docs=(README.md docs/*.md)
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tailsim-docs-check.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
ln -s "$root/build/tailsim" "$tmp/bin/tailsim"
shared_ok=0
if [ -d "$root/../shared" ]; then
    shared_ok=1
fi

# Scenario names (and paths) whose INI reads data from ../shared.
shared_scen=""
for f in "$root"/scenarios/*.ini; do
    if grep -q 'shared:' "$f"; then
        b=$(basename "$f" .ini)
        shared_scen="$shared_scen $b"
    fi
done

# extract FILE: one record per command, fields separated by the 0x1f byte:
#   line, kind (run | cat-to | cat-show | skip), expect (0 | fail),
#   reason (for skip), command, shown output lines (for cat-show, joined by 0x1e)
extract() {
    awk -v US=$'\x1f' -v RS_=$'\x1e' '
    function flush() {
        if (cmd == "") return
        print cline US kind US expect US reason US cmd US shown
        cmd = ""; shown = ""; first = 1
    }
    {
        line = $0
        if (line ~ /^[ \t]*<!-- docs-check: skip/) {
            skipnext = line
            sub(/^[ \t]*<!-- docs-check: skip[ \t]*/, "", skipnext)
            sub(/[ \t]*-->.*$/, "", skipnext)
            if (skipnext == "") skipnext = "marked skip"
            next
        }
        if (line ~ /^[ \t]*```/) {
            if (infence) { flush(); infence = 0; blockskip = "" }
            else { infence = 1; blockskip = skipnext }
            skipnext = ""
            next
        }
        if (line !~ /^[ \t]*$/ && !infence) skipnext = ""
        if (!infence) next
        if (cont) {
            t = line; sub(/^[ \t]+/, "", t)
            cont = (t ~ /\\$/)
            if (cont) sub(/[ \t]*\\$/, "", t)
            cmd = cmd " " t
            next
        }
        if (line ~ /^[ \t]*\$ /) {
            flush()
            t = line; sub(/^[ \t]*\$ /, "", t)
            cont = (t ~ /\\$/)
            if (cont) sub(/[ \t]*\\$/, "", t)
            if (t ~ /^cat [^>|]*> *[A-Za-z0-9_.-]+$/) kind = "cat-to"
            else if (t ~ /^cat [A-Za-z0-9_.-]+$/) kind = "cat-show"
            else if (t ~ /(^|[ \/])tailsim/) kind = "run"
            else { kind = ""; next }
            cmd = t; cline = NR; expect = "0"; reason = ""
            if (blockskip != "") { kind = "skip"; reason = blockskip }
            first = 1; shown = ""
            next
        }
        if (cmd != "") {
            if (first && line ~ /^tailsim [a-z-]+: /) expect = "fail"
            first = 0
            shown = (shown == "" ? line : shown RS_ line)
        }
    }
    END { flush() }
    ' "$1"
}

needs_shared() {   # needs_shared CMD: 0 when CMD needs ../shared
    case "$1" in *../shared*) return 0 ;; esac
    local w words
    read -ra words <<< "$1"
    for w in "${words[@]}"; do
        case " $made_by_skipped " in *" $w "*) return 0 ;; esac
        w=${w##*/}; w=${w%.ini}
        case " $shared_scen " in *" $w "*) return 0 ;; esac
    done
    return 1
}

outputs_of() {   # outputs_of CMD: the files CMD writes (-o X, --db X, > X)
    local prev="" w words
    read -ra words <<< "$1"
    for w in "${words[@]}"; do
        case "$prev" in -o | --db | '>') printf '%s ' "$w" ;; esac
        prev=$w
    done
}

n_run=0 n_setup=0 n_skip=0 n_fail=0
failures=""
for doc in "${docs[@]}"; do
    [ -f "$doc" ] || { echo "docs-check: $doc: no such file" >&2; exit 2; }
    work="$tmp/work-$(echo "$doc" | tr '/.' '__')/repo"
    mkdir -p "$work"
    for e in "$root"/* "$root"/.[!.]*; do
        [ -e "$e" ] && ln -s "$e" "$work/$(basename "$e")"
    done
    if [ "$shared_ok" = 1 ]; then
        ln -s "$root/../shared" "$work/../shared"
    fi
    made_by_skipped=""
    while IFS=$'\x1f' read -r line kind expect reason cmd shown; do
        where="$doc:$line"
        skip=""
        case "$kind" in
        skip) skip="$reason" ;;
        esac
        if [ -z "$skip" ]; then
            case "$cmd" in
            mpirun*) skip="mpirun (needs make MPI=1)" ;;
            *tailsim-validate*) skip="tailsim-validate needs a GPU" ;;
            *YOUR*) skip="a placeholder the reader supplies" ;;
            esac
        fi
        if [ -z "$skip" ] && [ "$kind" = run ]; then
            rest=${cmd//> \/dev\/null/}
            case "$rest" in
            *'|'* | *'>'* | *'<'*) skip="shell pipe or redirection" ;;
            esac
        fi
        if [ -z "$skip" ] && [ "$shared_ok" = 0 ] && needs_shared "$cmd"; then
            skip="needs ../shared, absent"
        fi
        if [ -n "$skip" ]; then
            n_skip=$((n_skip + 1))
            echo "skip  $where: $skip: \$ $cmd"
            made_by_skipped="$made_by_skipped $(outputs_of "$cmd")"
            continue
        fi
        case "$kind" in
        cat-show)
            f=${cmd#cat }
            for w in $made_by_skipped; do
                case "$shown" in *"$w"*)
                    made_by_skipped="$made_by_skipped $f"
                    echo "skip  $where: names $w, made by a skipped line: \$ $cmd"
                    n_skip=$((n_skip + 1))
                    continue 2 ;;
                esac
            done
            if [ ! -e "$work/$f" ]; then
                printf '%s\n' "$shown" | tr $'\x1e' '\n' > "$work/$f"
                echo "write $where: $f ($(wc -l < "$work/$f") lines shown)"
            fi
            continue
            ;;
        esac
        if [ "$kind" = cat-to ]; then
            n_setup=$((n_setup + 1))
        else
            n_run=$((n_run + 1))
        fi
        t0=$(date +%s.%N)
        (cd "$work" && PATH="$tmp/bin:$PATH" TAILSIM_SHARED=../shared \
            bash -c "$cmd" > "$tmp/out" 2> "$tmp/err" < /dev/null)
        rc=$?
        dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        ok=1
        if [ "$expect" = fail ]; then
            [ "$rc" -ne 0 ] || ok=0
        else
            [ "$rc" -eq 0 ] || ok=0
        fi
        if [ "$ok" = 1 ]; then
            echo "ok    $where (exit $rc, ${dt} s): \$ $cmd"
        else
            n_fail=$((n_fail + 1))
            want=$([ "$expect" = fail ] && echo "non-zero" || echo 0)
            echo "FAIL  $where: exit $rc, expected $want: \$ $cmd"
            sed -n '1,5s/^/      /p' "$tmp/err"
            failures="$failures $where"
        fi
    done < <(extract "$doc")
done

echo "docs-check: $n_run commands run, $n_skip skipped, $n_fail failed, $n_setup setup lines run"
if [ "$n_fail" -gt 0 ]; then
    echo "docs-check: failed:$failures"
    exit 1
fi
exit 0
