/* SPDX-License-Identifier: Apache-2.0 */
/* Loading and driving a net plugin through its v12 table, as NCCL does. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "netdrv.h"

uint64_t netdrv_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void *netdrv_load(const char *entry, const cruxn_net_v12_t **v12)
{
	char name[256];
	void *h = dlopen(entry, RTLD_NOW | RTLD_LOCAL);
	size_t len = strlen(entry);

	/* NCCL's second try: bare names that are not lib*.so become libnccl-net-<name>.so. */
	if (!h && !strchr(entry, '/') &&
	    !(strncmp(entry, "lib", 3) == 0 && len > 3 && strcmp(entry + len - 3, ".so") == 0)) {
		snprintf(name, sizeof(name), "libnccl-net-%s.so", entry);
		h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	}
	if (!h) {
		fprintf(stderr, "cannot load net plugin '%s': %s\n", entry, dlerror());
		return NULL;
	}
	*v12 = dlsym(h, CRUXN_SYM_V12);
	return h;
}

static int deadline_passed(uint64_t start, int timeout_ms)
{
	return netdrv_now_ns() - start > (uint64_t)timeout_ms * 1000000ull;
}

int netdrv_connect(const cruxn_net_v12_t *net, void *ctx, int dev, void *handle, void **comm)
{
	uint64_t t0 = netdrv_now_ns();
	*comm = NULL;
	while (!*comm) {
		if (net->connect(ctx, dev, handle, comm, NULL) != CRUXN_SUCCESS)
			return -1;
		if (deadline_passed(t0, 20000))
			return -2;
	}
	return 0;
}

int netdrv_accept(const cruxn_net_v12_t *net, void *lcomm, void **comm)
{
	uint64_t t0 = netdrv_now_ns();
	*comm = NULL;
	while (!*comm) {
		if (net->accept(lcomm, comm, NULL) != CRUXN_SUCCESS)
			return -1;
		if (deadline_passed(t0, 20000))
			return -2;
	}
	return 0;
}

int netdrv_wait(const cruxn_net_v12_t *net, void *req, int *sizes, int timeout_ms)
{
	uint64_t t0 = netdrv_now_ns();
	int done = 0;
	while (!done) {
		if (net->test(req, &done, sizes) != CRUXN_SUCCESS)
			return -1;
		if (!done && deadline_passed(t0, timeout_ms))
			return -2;
	}
	return 0;
}

int netdrv_send(const cruxn_net_v12_t *net, void *comm, void *buf, size_t size, int tag,
		int timeout_ms)
{
	void *req = NULL;
	uint64_t t0 = netdrv_now_ns();
	while (!req) {
		if (net->isend(comm, buf, size, tag, NULL, NULL, &req) != CRUXN_SUCCESS)
			return -1;
		if (!req && deadline_passed(t0, timeout_ms))
			return -2;
	}
	return netdrv_wait(net, req, NULL, timeout_ms);
}

int netdrv_recv(const cruxn_net_v12_t *net, void *comm, void *buf, size_t cap, int tag, size_t *got,
		int timeout_ms)
{
	/* as NCCL does for LL/LL128 receives: completion optional, the plugin may ignore it */
	void *req = (void *)CRUXN_NET_OPTIONAL_RECV_COMPLETION;
	void *data[1] = {buf};
	int tags[1] = {tag};
	int sz = -1, rc;
	uint64_t t0 = netdrv_now_ns();
	do {
		if (net->irecv(comm, 1, data, &cap, tags, NULL, NULL, &req) != CRUXN_SUCCESS)
			return -1;
		if (!req && deadline_passed(t0, timeout_ms))
			return -2;
	} while (!req);
	if (req == (void *)CRUXN_NET_OPTIONAL_RECV_COMPLETION)
		return -3; /* the marker must be replaced by a real request */
	rc = netdrv_wait(net, req, &sz, timeout_ms);
	if (rc == 0 && got)
		*got = (size_t)sz;
	return rc;
}

/* xorshift stream keyed by seed and 8-byte position: any slice can be checked. */
static uint64_t word_at(uint32_t seed, uint64_t idx)
{
	uint64_t x = (idx + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 17 | seed);
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 29;
	return x;
}

void netdrv_fill(void *buf, size_t len, uint32_t seed)
{
	unsigned char *p = buf;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = word_at(seed, i / 8);
		memcpy(p + i, &w, 8);
	}
	if (i < len) {
		uint64_t w = word_at(seed, i / 8);
		memcpy(p + i, &w, len - i);
	}
}

int netdrv_check(const void *buf, size_t len, uint32_t seed)
{
	const unsigned char *p = buf;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = word_at(seed, i / 8);
		if (memcmp(p + i, &w, 8) != 0)
			return -1;
	}
	if (i < len) {
		uint64_t w = word_at(seed, i / 8);
		if (memcmp(p + i, &w, len - i) != 0)
			return -1;
	}
	return 0;
}
