/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one monotonic clock of Crux. Inline so that the plugin's hot path
 * pays for the vDSO read only, never for a call across libraries.
 */
#ifndef CRUX_CLOCK_H
#define CRUX_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds (vDSO; no system call). */
static inline uint64_t crux_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC_COARSE in nanoseconds: tick resolution, cheaper still. */
static inline uint64_t crux_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
