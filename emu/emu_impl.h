/*
 * emu/emu_impl.h: what the emulator's own files share (not for kernels/):
 * the error state of the runtime (emu_runtime.cc) that the scheduler
 * (emu_sched.cc) and the cuBLASLt stand-in (emu_cublaslt.cc) set.
 */
#ifndef EMU_IMPL_H
#define EMU_IMPL_H

#include "cuda_runtime.h"

/* Records e as the last error (returned and cleared by cudaGetLastError);
 * sticky: also returned by every later synchronising call, like a device
 * fault.  fmt (printf style) is the detail cudaGetErrorString(e) returns. */
void emu_set_error(cudaError_t e, int sticky, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The sticky error, cudaSuccess when none. */
cudaError_t emu_sticky_error(void);

#endif
