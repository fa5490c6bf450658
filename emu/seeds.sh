#!/bin/sh
# emu/seeds.sh BIN N [FIRST]: runs `BIN selftest --small` on seeds FIRST..
# FIRST+N-1 (FIRST defaults to 1), keeps each seed's log in
# build/emu/seeds/, and prints per compared quantity the worst error over all
# seeds as a fraction of its tolerance (1.00 = at the tolerance).  Exits 1
# when any seed fails (naming the seeds), 2 when a run errs.
set -u
bin=$1 n=$2 first=${3:-1}
dir=build/emu/seeds
mkdir -p "$dir" || exit 2
failed="" errs=""
s=$first
while [ "$s" -lt $((first + n)) ]; do
    "$bin" selftest --small --seed "$s" > "$dir/seed-$s.log" 2>&1
    rc=$?
    [ $rc = 1 ] && failed="$failed $s"
    [ $rc != 0 ] && [ $rc != 1 ] && errs="$errs $s"
    s=$((s + 1))
done
echo "== worst error / tolerance over seeds $first..$((first + n - 1)), per compared quantity"
s=$first logs=""
while [ "$s" -lt $((first + n)) ]; do logs="$logs $dir/seed-$s.log"; s=$((s + 1)); done
# shellcheck disable=SC2086
cat $logs | sed -n 's/^  \(.*\): [0-9]* values, [0-9]* mismatches, worst error \([0-9.]*\) of tolerance$/\2 \1/p' |
    awk '{ r = $1; $1 = ""; k = substr($0, 2); if (!(k in w) || r > w[k]) w[k] = r }
         END { for (k in w) printf "  %5.2f  %s\n", w[k], k }' | sort -k2
if [ -n "$errs" ]; then
    echo "emu/seeds.sh: selftest errors on seeds:$errs (logs in $dir)" >&2
    exit 2
fi
if [ -n "$failed" ]; then
    echo "emu/seeds.sh: selftest FAILED on seeds:$failed (logs in $dir)" >&2
    exit 1
fi
echo "emu/seeds.sh: selftest --small passed on all $n seeds"
