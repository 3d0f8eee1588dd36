/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one monotonic clock of Crux, and deadlines on it. The reads are inline
 * so that the plugin's hot path pays for the vDSO read only, never for a call
 * across libraries. Condvars that wait for a deadline are made on the same
 * clock (crux_cond_init_monotonic), so a wall-clock step (NTP, settimeofday)
 * neither stretches nor cuts a wait.
 */
#ifndef CRUX_CLOCK_H
#define CRUX_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

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

/* The CLOCK_MONOTONIC instant 'rel_ns' from now, as pthread_cond_timedwait takes it. */
static inline struct timespec crux_deadline_ts(uint64_t rel_ns)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + rel_ns;
	ts.tv_sec += (time_t)(ns / 1000000000ull);
	ts.tv_nsec = (long)(ns % 1000000000ull);
	return ts;
}

/* pthread_cond_init with CLOCK_MONOTONIC; returns pthread_cond_init's result. */
int crux_cond_init_monotonic(pthread_cond_t *cond);

/*
 * Waits on cond (made by crux_cond_init_monotonic, mutex held) until
 * signalled or 'rel_ns' from now; returns pthread_cond_timedwait's result
 * (ETIMEDOUT when the deadline passed).
 */
int crux_cond_wait_ns(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t rel_ns);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_CLOCK_H */
