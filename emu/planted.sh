#!/bin/sh
# emu/planted.sh: the planted-bug test of `make kernels-emu`.  For each bug
# below: copies the emulator's rewritten kernel sources ($B/emu/kernels/) to
# $B/emu-bugN/, plants the bug there with sed (kernels/ stays untouched),
# recompiles the files that include the mutated one, links
# $B/emu-bugN/tailsim-validate-emu and runs `selftest --small --only OP` for
# the op that must catch it.  Exit 0 when every bug makes selftest fail,
# 1 when one passes (the tolerances or the test would let it through),
# 2 when a bug cannot be planted or built.
# Environment (set by emu/emu.mk): EMU_CXX, EMU_BASEFLAGS, B, LINK.
set -u
: "${EMU_CXX:?}" "${EMU_BASEFLAGS:?}" "${B:?}" "${LINK:?}"

# file | sed expression | op that must fail | what it is
BUGS='attn.cuh|s/__byte_perm(x0, y0, 0x7632)/__byte_perm(y0, x0, 0x7632)/|chunk_attn|swapped operands of one byte permute (the tensor-core A fragment)
rmsnorm.cu|s/for (int o = 16; o > 0; o >>= 1)/for (int o = 16; o > 1; o >>= 1)/|rmsnorm|off-by-one loop bound: the warp sum skips its last shuffle
train_ops.cu|s/r1 = min(rows, r0 + CS_ROWS)/r1 = min(rows, r0 + CS_ROWS - 1)/|train|off-by-one row bound in the column sum (the bias gradient)
attn.cuh|s/const int p = min(base + 2 \* t + (i \& 1) + 8 \* (i >> 1), ctx - 1)/const int p = min(base + 2 * t + (i \& 1) + 8 * (i \& 1), ctx - 1)/|decode_attn|wrong mma fragment index: the key row of a B fragment element'

n=0 escaped=0
while IFS='|' read -r file expr op what; do
    n=$((n + 1))
    dir=$B/emu-bug$n
    rm -rf "$dir" && mkdir -p "$dir/kernels" || exit 2
    cp "$B"/emu/kernels/*.cu "$B"/emu/kernels/*.cuh "$dir/kernels/" || exit 2
    sed "$expr" "$B/emu/kernels/$file" > "$dir/kernels/$file" || exit 2
    if cmp -s "$B/emu/kernels/$file" "$dir/kernels/$file"; then
        echo "planted bug $n ($file): the mutation matched nothing: $expr" >&2
        exit 2
    fi
    objs=""
    for src in "$dir"/kernels/*.cu; do
        base=$(basename "$src" .cu)
        flags="$EMU_BASEFLAGS -Iemu/include -I$dir -I."
        if $EMU_CXX $flags -x c++ -MM "$src" | grep -q "$dir/kernels/$file"; then
            $EMU_CXX $flags -x c++ -c "$src" -o "$dir/kernels/$base.o" || exit 2
            objs="$objs $dir/kernels/$base.o"
        else
            objs="$objs $B/emu/kernels/$base.o"
        fi
    done
    $EMU_CXX -pthread -o "$dir/tailsim-validate-emu" $objs $LINK || exit 2
    "$dir/tailsim-validate-emu" selftest --small --seed 1 --only "$op" > "$dir/selftest.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then
        echo "planted bug $n PASSED selftest --only $op (it must fail): $file: $what"
        escaped=$((escaped + 1))
    else
        echo "planted bug $n caught (selftest --only $op exit $rc): $file: $what"
        grep -m 2 'mismatch at\|ERROR' "$dir/selftest.log" | sed 's/^/    /'
    fi
done <<EOT
$BUGS
EOT
if [ $escaped -gt 0 ]; then
    echo "emu/planted.sh: $escaped of $n planted bugs passed selftest" >&2
    exit 1
fi
echo "emu/planted.sh: all $n planted bugs fail selftest"
