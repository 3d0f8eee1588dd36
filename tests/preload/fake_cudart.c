/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU test double of the CUDA runtime's event API: an event records the host
 * clock when "recorded", as if the stream were the calling thread (true of
 * the CPU NCCL double, whose calls block for their scripted time).
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

struct CUevent_st {
	uint64_t t;
	int recorded;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

FAKE_EXPORT int cudaEventCreateWithFlags(struct CUevent_st **ev, unsigned int flags)
{
	(void)flags;
	if (!ev)
		return 1; /* cudaErrorInvalidValue */
	*ev = calloc(1, sizeof(**ev));
	return *ev ? 0 : 2; /* cudaErrorMemoryAllocation */
}

FAKE_EXPORT int cudaEventRecord(struct CUevent_st *ev, void *stream)
{
	(void)stream;
	if (!ev)
		return 400; /* cudaErrorInvalidResourceHandle */
	ev->t = now_ns();
	ev->recorded = 1;
	return 0;
}

FAKE_EXPORT int cudaEventQuery(struct CUevent_st *ev)
{
	if (!ev)
		return 400;
	return ev->recorded ? 0 : 600; /* cudaErrorNotReady */
}

FAKE_EXPORT int cudaEventElapsedTime(float *ms, struct CUevent_st *a, struct CUevent_st *b)
{
	if (!ms || !a || !b || !a->recorded || !b->recorded)
		return 600;
	*ms = (float)(((double)b->t - (double)a->t) / 1e6);
	return 0;
}

FAKE_EXPORT int cudaEventDestroy(struct CUevent_st *ev)
{
	free(ev);
	return 0;
}
