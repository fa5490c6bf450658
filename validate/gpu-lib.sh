# validate/gpu-lib.sh: helpers of validate/gpu.sh, sourced by it (and by
# tests/test_validate.c, which checks them without a GPU).  POSIX sh.
#
#   gpu_plan MODE          sets the plan of a run: MODE "first" (the first
#                          run of a device window, at most 300 s) or "more"
#                          (the follow-up); PLAN_STEPS, A_<step> (seconds
#                          allotted), PLAN_CAP, the steps' arguments
#   gpu_plan_print         prints the plan, one step a line with its allotted
#                          seconds, then "plan total: N s (cap C s)"; returns 1
#                          when the total exceeds the cap
#   gpu_cublas_soname BIN  the libcublasLt soname BIN links (its NEEDED entry,
#                          read with readelf or objdump), or nothing
#   gpu_cublas_dir BIN     the folder holding a file named exactly that soname
#                          under GPU_SH_LIBROOTS (default /usr/local /usr/lib
#                          /usr/lib64 /opt), or nothing with the reason on
#                          stderr
#
# A step's allotment is the most it can take: gpu.sh runs it under
# `timeout -k 5` of its allotment less 5 s, and gives calibrate and confirm
# --budget values inside it, so the plan's total bounds the run's device
# time (the machine's start-up aside).

gpu_plan() {
    case $1 in
    first)
        PLAN_CAP=300
        PLAN_STEPS="setup selftest calibrate check confirm summary"
        A_setup=90      # facts, then make validate (or the carried binary)
        A_selftest=40   # every kernel but the trainer
        A_calibrate=95  # calibrate --tail: the decode tail's ops, 7B at TP 1
        A_check=15      # the fit (CPU)
        A_confirm=55    # a small replay: 32 responses up to 2048 tokens
        A_summary=5
        SELFTEST_ARGS="--only gemm,decode_attn,chunk_attn,rmsnorm,rope,swiglu,embed,accept,layer,drafter"
        CALIB_ARGS="--tail"
        CONFIRM_ARGS="--responses 32 --max-len 2048"
        ;;
    more)
        PLAN_CAP=420
        PLAN_STEPS="setup selftest calibrate check confirm summary"
        A_setup=60      # the build is still there on a warm machine
        A_selftest=60   # the trainer's selftest
        A_calibrate=180 # calibrate --quick: every group, 7B at TP 1 and 32B at TP 4
        A_check=15
        A_confirm=100   # confirm --quick, as far as its budget goes
        A_summary=5
        SELFTEST_ARGS="--only train"
        CALIB_ARGS="--quick"
        CONFIRM_ARGS="--quick"
        ;;
    *)
        echo "gpu_plan: unknown mode '$1'" >&2
        return 2
        ;;
    esac
    PLAN_TOTAL=0
    for s in $PLAN_STEPS; do
        eval "a=\$A_$s"
        PLAN_TOTAL=$((PLAN_TOTAL + a))
    done
}

gpu_plan_print() {
    for s in $PLAN_STEPS; do
        eval "a=\$A_$s"
        case $s in
        setup) what="device facts, then make validate (or the carried binary)" ;;
        selftest) what="selftest $SELFTEST_ARGS" ;;
        calibrate) what="calibrate $CALIB_ARGS --budget $((a - 25))" ;;
        check) what="check calib.csv (CPU)" ;;
        confirm) what="confirm $CONFIRM_ARGS --budget $((a - 25))" ;;
        *) what="summary.txt" ;;
        esac
        printf 'plan  %-10s %4d s  %s\n' "$s" "$a" "$what"
    done
    echo "plan total: $PLAN_TOTAL s (cap $PLAN_CAP s)"
    [ "$PLAN_TOTAL" -le "$PLAN_CAP" ]
}

gpu_cublas_soname() {
    { readelf -d "$1" 2>/dev/null || objdump -p "$1" 2>/dev/null; } |
        grep -o 'libcublasLt\.so[.0-9]*' | head -n 1
}

gpu_cublas_dir() {
    need=$(gpu_cublas_soname "$1")
    if [ -z "$need" ]; then
        echo "no libcublasLt among the NEEDED entries of $1 (or no readelf/objdump to read them)" >&2
        return 1
    fi
    # shellcheck disable=SC2086 # the roots are a word list
    lib=$(timeout -k 2 10 find ${GPU_SH_LIBROOTS:-/usr/local /usr/lib /usr/lib64 /opt} \
          -name "$need" \( -type f -o -type l \) 2>/dev/null | head -n 1)
    if [ -z "$lib" ]; then
        echo "$1 links $need: no file of that name under ${GPU_SH_LIBROOTS:-/usr/local /usr/lib /usr/lib64 /opt}" >&2
        return 1
    fi
    dirname "$lib"
}
