/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What libcrux-preload.so offers to application code besides the NCCL
 * entry points it wraps.
 */
#ifndef CRUX_PRELOAD_H
#define CRUX_PRELOAD_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Say that a training iteration starts now. Once called, these marks replace
 * the automatic iteration detection for this process. Look it up with
 * dlsym(RTLD_DEFAULT, "crux_iteration_mark") so the program still runs
 * without the preload (ctypes.CDLL(None).crux_iteration_mark in Python).
 */
void crux_iteration_mark(void);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_PRELOAD_H */
