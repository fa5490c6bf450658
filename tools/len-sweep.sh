#!/bin/sh
# tools/len-sweep.sh SCENARIO.ini [DIST ...]: how TLT's speedup depends on the
# response-length distribution.  For each generator distribution DIST (a
# trace.dist value: mixture, lognormal:MEDIAN:SIGMA, fixed:LEN; default: the
# sweep of docs/paper-tlt.md "TLT speedup and the length distribution") it replays one
# step of SCENARIO with `--set trace.dist=DIST` under verl, tlt-base and tlt,
# and prints the generated lengths' mean, p99 and max/p87.5 (p87.5: where a
# replica of 256 responses is down to 32 running), verl's tail_fraction (share
# of replica time at <= 32 running) and rollout share of the step, and the step
# and rollout speedups of tlt-base and tlt over verl.
# SCENARIO.ini is a path (its [trace] generator keys are read from it);
# PROMPTS=N in the environment replaces its trace.prompts.
# Needs jq; run from the repository root after make build/tailsim.
set -e
sc=$1; shift
# default: the mixture; lognormals of the mixture's mean (9450, medians
# 9450 / exp(sigma^2 / 2)) and of mean 2000; the PolyTrace DAPO fit (median
# 465, sigma 0.758: scenarios/qwen7b-64gpu-qwenlens.ini) and its shape at 4x
[ $# -gt 0 ] || set -- mixture lognormal:9159:0.25 lognormal:8340:0.5 lognormal:7133:0.75 \
  lognormal:5732:1.0 lognormal:1912:0.3 lognormal:1452:0.8 lognormal:465:0.758 \
  lognormal:1860:0.758
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
get() { sed -n "s/^$1 *= *//p" "$sc" | head -1; }
prompts=${PROMPTS:-$(get prompts)}; group=$(get group); cap=$(get cap); corr=$(get corr)
pmed=$(get prompt_median); seed=$(get seed)
printf '%-21s %6s %6s %9s %6s %6s %8s %8s %8s %8s\n' lengths mean p99 max/p87.5 tail \
  ro_shr base_stp tlt_stp base_ro tlt_ro
for d in "$@"; do
  build/tailsim trace gen --dist "$d" --prompts "$prompts" --group "$group" --cap "$cap" \
    --corr "$corr" --prompt-median "$pmed" --seed "$seed" -o "$tmp/t.csv" >/dev/null
  st=$(build/tailsim trace stats "$tmp/t.csv" --json | jq -r '"\(.mean) \(.p99) \(.max)"')
  p875=$(tail -n +2 "$tmp/t.csv" | cut -d, -f4 | sort -n |
         awk '{a[NR]=$1} END {h=(NR-1)*0.875; i=int(h); print a[i+1]+(h-i)*(a[i+2]-a[i+1])}')
  build/tailsim compare "$sc" --policies verl,tlt-base,tlt --set trace.dist="$d" \
    --set trace.prompts="$prompts" --json |
  jq -r '[.policies[0].tail_fraction, .policies[0].rollout_s / .policies[0].step_s,
          .policies[1].speedup, .policies[2].speedup,
          .policies[1].rollout_speedup, .policies[2].rollout_speedup] | @tsv' |
  awk -v d="$d" -v st="$st" -v p="$p875" 'BEGIN {split(st, s, " ")}
    {printf "%-21s %6.0f %6.0f %9.2f %6.3f %6.2f %7.2fx %7.2fx %7.2fx %7.2fx\n",
            d, s[1], s[2], s[3] / p, $1, $2, $3, $4, $5, $6}'
done
