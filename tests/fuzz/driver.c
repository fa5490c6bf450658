/*
 * libFuzzer entry point for one target, chosen at build time with
 * -DFUZZ_TARGET=fuzz_trace (or fuzz_scenario, fuzz_vidur, fuzz_batch,
 * fuzz_calib, fuzz_grid, fuzz_dcpplan).  Built and run by
 * `make fuzz` with clang's -fsanitize=fuzzer,address,undefined.
 */
#include "tests/fuzz/targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return FUZZ_TARGET(data, size);
}
