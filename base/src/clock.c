/* SPDX-License-Identifier: Apache-2.0 */
/* Condvars on the monotonic clock. */
#include "crux/clock.h"

int crux_cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t ca;
	int rc = pthread_condattr_init(&ca);

	if (rc != 0)
		return rc;
	rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(cond, &ca);
	pthread_condattr_destroy(&ca);
	return rc;
}

int crux_cond_wait_ns(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t rel_ns)
{
	struct timespec until = crux_deadline_ts(rel_ns);

	return pthread_cond_timedwait(cond, mutex, &until);
}
