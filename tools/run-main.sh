#!/bin/sh
# The main job behind `make run`: the paper-reproduction report.  Runs every
# shipped paper experiment (TLT speculative decoding and end to end, the
# PolyTrace DAPO replay under every policy, the DCP mixes and the 1D case)
# and writes reports/out/index.html and index.md with the figures; progress
# goes to stderr.
set -eu
out=reports/out
mkdir -p "$out"
build/tailsim paper -o "$out"
