/*
 * `tailsim-validate confirm`: a mini rollout on the GPU with the real
 * kernels, run as the baseline and with tail speculative decoding, against
 * tailsim's prediction of both makespans and of the speedup.
 */
#ifndef TS_CONFIRM_H
#define TS_CONFIRM_H

int val_confirm(int argc, char **argv);

#endif
