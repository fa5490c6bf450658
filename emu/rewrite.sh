#!/bin/sh
# emu/rewrite.sh SRC DST: copies a kernel source for the CPU emulator,
# rewriting each launch `name<<<g, b[, smem, stream]>>>(args)` (name possibly
# a template instance, `k<2>`) into `emu_launch(name, "name", g, b...)(args)`
# (emu/include/cuda_runtime.h).  Nothing else changes.  Fails, writing
# nothing, when a `<<<` is left (a launch split over lines).
set -eu
src=$1 dst=$2
tmp="$dst.tmp.$$"
sed 's/\([A-Za-z_][A-Za-z_0-9]*\(<[^<>]*>\)\{0,1\}\)<<<\(.*\)>>>(/emu_launch(\1, "\1", \3)(/' \
    "$src" > "$tmp"
if grep -n '<<<' "$tmp" >&2; then
    echo "emu/rewrite.sh: $src: a launch left unrewritten (above)" >&2
    rm -f "$tmp"
    exit 1
fi
mv "$tmp" "$dst"
