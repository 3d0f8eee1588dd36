/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU test double of CUPTI's activity API. Test programs (and the NCCL
 * double) report "kernels" with fakecupti_kernel(); cuptiActivityFlushAll
 * hands them to the registered buffer callbacks as concurrent-kernel records
 * laid out as CUPTI lays them out. Timestamps are shifted by a constant so
 * the client must map CUPTI time to its own clock.
 * FAKECUPTI_BUSY=1 makes cuptiSubscribe report another subscriber.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Record layout: fake_cupti_rec.c (NVIDIA's struct where the headers exist). */
size_t fakecupti_record_size(void);
void fakecupti_fill(void *dst, const char *name, uint64_t start, uint64_t end);

#define FAKE_EXPORT   __attribute__((visibility("default")))
#define FAKE_SHIFT_NS 1000000000000ull
#define FAKE_MAX      65536

typedef void (*req_fn)(uint8_t **buffer, size_t *size, size_t *max);
typedef void (*done_fn)(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);

struct pending {
	const char *name;
	uint64_t start;
	uint64_t end;
};

/* The double's state. */
static struct {
	pthread_mutex_t lock;
	req_fn req;
	done_fn done;
	int enabled;
	int subscribed;
	struct pending k[FAKE_MAX];
	size_t n;
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Report a kernel that ran from start to end (host CLOCK_MONOTONIC ns). */
FAKE_EXPORT void fakecupti_kernel(const char *name, uint64_t start, uint64_t end)
{
	pthread_mutex_lock(&fake.lock);
	if (fake.enabled && fake.n < FAKE_MAX)
		fake.k[fake.n++] =
		    (struct pending){name, start + FAKE_SHIFT_NS, end + FAKE_SHIFT_NS};
	pthread_mutex_unlock(&fake.lock);
}

FAKE_EXPORT int cuptiSubscribe(void **sub, void *cb, void *ud)
{
	const char *busy = getenv("FAKECUPTI_BUSY");

	(void)cb;
	(void)ud;
	if (busy && strcmp(busy, "1") == 0)
		return 39; /* CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED */
	if (fake.subscribed)
		return 39;
	fake.subscribed = 1;
	*sub = &fake;
	return 0;
}

FAKE_EXPORT int cuptiUnsubscribe(void *sub)
{
	(void)sub;
	fake.subscribed = 0;
	return 0;
}

FAKE_EXPORT int cuptiActivityRegisterCallbacks(req_fn req, done_fn done)
{
	fake.req = req;
	fake.done = done;
	return 0;
}

FAKE_EXPORT int cuptiActivityEnable(int kind)
{
	if (kind != 10)
		return 1; /* CUPTI_ERROR_INVALID_PARAMETER */
	fake.enabled = 1;
	return 0;
}

FAKE_EXPORT int cuptiActivityDisable(int kind)
{
	(void)kind;
	fake.enabled = 0;
	return 0;
}

FAKE_EXPORT int cuptiGetTimestamp(uint64_t *ts)
{
	*ts = now_ns() + FAKE_SHIFT_NS;
	return 0;
}

FAKE_EXPORT int cuptiGetResultString(int r, const char **s)
{
	*s = r == 39 ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" : "fake CUPTI error";
	return 0;
}

FAKE_EXPORT int cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **rec)
{
	uint8_t *next = *rec ? (uint8_t *)*rec + fakecupti_record_size() : buffer;

	if (next + fakecupti_record_size() > buffer + valid)
		return 12; /* CUPTI_ERROR_MAX_LIMIT_REACHED */
	*rec = next;
	return 0;
}

FAKE_EXPORT int cuptiActivityFlushAll(uint32_t flag)
{
	(void)flag;
	if (!fake.req || !fake.done)
		return 0;
	pthread_mutex_lock(&fake.lock);
	while (fake.n) {
		uint8_t *buf = NULL;
		size_t size = 0, max = 0, used = 0, i = 0;

		fake.req(&buf, &size, &max);
		if (!buf)
			break;
		for (; i < fake.n && used + fakecupti_record_size() <= size; i++) {
			fakecupti_fill(buf + used, fake.k[i].name, fake.k[i].start, fake.k[i].end);
			used += fakecupti_record_size();
		}
		memmove(fake.k, fake.k + i, (fake.n - i) * sizeof(fake.k[0]));
		fake.n -= i;
		pthread_mutex_unlock(&fake.lock);
		fake.done(NULL, 0, buf, size, used);
		pthread_mutex_lock(&fake.lock);
	}
	pthread_mutex_unlock(&fake.lock);
	return 0;
}
