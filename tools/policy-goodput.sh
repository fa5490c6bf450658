#!/bin/sh
# tools/policy-goodput.sh SCENARIO STEPS [--set ...]: per policy, the mean step
# time and the trained tokens per second over STEPS steps (the fair speed of
# policies that train other samples than the synchronous step), its ratio to
# verl's, the off-policy fraction of the samples and of the tokens, and the
# mean staleness.  Needs jq; run from
# the repository root after make build/tailsim.
set -e
sc=$1; n=$2; shift 2
printf '%-10s %8s %10s %8s %7s %7s %6s\n' policy step_s trained_t/s vs_verl offpol offtok stale
for p in verl tlt-base tlt sorted partial tailbatch async; do
  build/tailsim rlstep "$sc" --policy $p --steps "$n" --json --no-wall "$@" |
  jq -r --arg p $p '[$p, .step_s, .trained_tokens_per_s, .off_policy_fraction, .off_policy_tokens, .mean_staleness] | @tsv'
done | awk -F'\t' 'NR==1{b=$3} {printf "%-10s %8.2f %10.0f %8.3f %7.3f %7.3f %6.2f\n", $1, $2, $3, $3/b, $4, $5, $6}'
