/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU test double of NCCL (built as libnccl.so.2 in the build tree): the API
 * subset frameworks use, with NCCL's signatures and argument checks, whose
 * calls take the time a script gives instead of moving data:
 *   FAKENCCL_SCRIPT="allreduce=2ms,allgather=1ms,send=500us,..."
 * (durations with ns/us/ms/s; ops not named take no time). Grouped calls run
 * at the outermost ncclGroupEnd. When the fake CUPTI library is loaded
 * (CRUX_CUPTI_LIB), every call also reports an NCCL "kernel" to it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "crux/nccl_api.h"

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_OPS    10

struct ncclComm {
	uint32_t magic;
	int rank;
	int nranks;
};

#define COMM_MAGIC 0x66616b65u

static const char *const op_names[FAKE_OPS] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce",
    "alltoall",	 "gather",    "scatter",       "send",	    "recv",
};

static const char *const kernel_names[FAKE_OPS] = {
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    "_Z33ncclDevKernel_AllGather_RING_LL128v",
    "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL",
    "ncclDevKernel_Broadcast_RING_LL",
    "ncclDevKernel_Reduce_Sum_f32_RING_LL",
    "ncclDevKernel_SendRecv",
    "ncclDevKernel_SendRecv",
    "ncclDevKernel_SendRecv",
    "ncclDevKernel_SendRecv",
    "ncclDevKernel_SendRecv",
};

/* The double's own state (a test double: one context, no locking needed). */
static struct {
	int parsed;
	uint64_t dur_ns[FAKE_OPS];
	int group;
	uint64_t group_ns;
	int group_op;
	void (*kernel)(const char *name, uint64_t start, uint64_t end);
} fake;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void parse_script(void)
{
	const char *s = getenv("FAKENCCL_SCRIPT");
	const char *lib = getenv("CRUX_CUPTI_LIB");
	char buf[512], *save = NULL, *tok;

	fake.parsed = 1;
	if (lib && *lib) {
		void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);

		if (h)
			*(void **)&fake.kernel = dlsym(h, "fakecupti_kernel");
	}
	if (!s)
		return;
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		double v;
		uint64_t unit = 1000000; /* ms by default */

		if (!eq)
			continue;
		*eq = '\0';
		v = strtod(eq + 1, &end);
		if (strcmp(end, "ns") == 0)
			unit = 1;
		else if (strcmp(end, "us") == 0)
			unit = 1000;
		else if (strcmp(end, "s") == 0)
			unit = 1000000000;
		for (int i = 0; i < FAKE_OPS; i++) {
			if (strcasecmp(tok, op_names[i]) == 0)
				fake.dur_ns[i] = (uint64_t)(v * (double)unit);
		}
	}
}

static void work(uint64_t ns, int op)
{
	uint64_t t0 = now_ns();
	struct timespec until;
	uint64_t end = t0 + ns;

	if (!ns)
		return;
	until.tv_sec = (time_t)(end / 1000000000ull);
	until.tv_nsec = (long)(end % 1000000000ull);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
	if (fake.kernel)
		fake.kernel(kernel_names[op], t0, now_ns());
}

static ncclResult_t run(int op, ncclComm_t comm, ncclDataType_t dt, int red, int peer)
{
	if (!fake.parsed)
		parse_script();
	if (!comm || comm->magic != COMM_MAGIC)
		return ncclInvalidArgument;
	if ((int)dt < 0 || dt >= ncclNumTypes || red < 0 || red >= ncclNumOps)
		return ncclInvalidArgument;
	if (peer != -1 && (peer < 0 || peer >= comm->nranks))
		return ncclInvalidArgument;
	if (fake.group) {
		fake.group_ns += fake.dur_ns[op];
		fake.group_op = op;
		return ncclSuccess;
	}
	work(fake.dur_ns[op], op);
	return ncclSuccess;
}

static ncclResult_t new_comm(ncclComm_t *out, int nranks, int rank)
{
	struct ncclComm *c;

	if (!out || nranks < 1 || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->magic = COMM_MAGIC;
	c->rank = rank;
	c->nranks = nranks;
	*out = c;
	return ncclSuccess;
}

/* NCCL exports every entry point twice: pnccl* and a weak nccl* alias. */
#define BOTH(ret, name, params)                                                                    \
	FAKE_EXPORT ret name params __attribute__((weak, alias("p" #name)));                       \
	FAKE_EXPORT ret p##name params

BOTH(ncclResult_t, ncclGetVersion, (int *version))
{
	if (!version)
		return ncclInvalidArgument;
	*version = CRUX_NCCL_API_VERSION_CODE;
	return ncclSuccess;
}

BOTH(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id))
{
	if (!id)
		return ncclInvalidArgument;
	memset(id, 0, sizeof(*id));
	snprintf(id->internal, sizeof(id->internal), "fake-nccl");
	return ncclSuccess;
}

BOTH(const char *, ncclGetErrorString, (ncclResult_t r))
{
	switch (r) {
	case ncclSuccess:
		return "no error";
	case ncclInvalidArgument:
		return "invalid argument";
	case ncclInvalidUsage:
		return "invalid usage";
	case ncclSystemError:
		return "unhandled system error";
	default:
		return "unknown result code";
	}
}

BOTH(const char *, ncclGetLastError, (ncclComm_t comm))
{
	(void)comm;
	return "";
}

BOTH(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *err))
{
	if (!comm || !err)
		return ncclInvalidArgument;
	*err = ncclSuccess;
	return ncclSuccess;
}

BOTH(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count))
{
	if (!comm || !count)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}

BOTH(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank))
{
	if (!comm || !rank)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}

BOTH(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device))
{
	if (!comm || !device)
		return ncclInvalidArgument;
	*device = 0;
	return ncclSuccess;
}

BOTH(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank))
{
	(void)id;
	return new_comm(comm, nranks, rank);
}

BOTH(ncclResult_t, ncclCommInitRankConfig,
     (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config))
{
	(void)id;
	if (config && config->magic != NCCL_CONFIG_MAGIC)
		return ncclInvalidArgument;
	return new_comm(comm, nranks, rank);
}

BOTH(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int *devlist))
{
	(void)devlist;
	if (!comm || ndev < 1)
		return ncclInvalidArgument;
	for (int i = 0; i < ndev; i++) {
		ncclUniqueId id;
		ncclResult_t r;

		/* Through the exported name, as NCCL does: the preload must not count it twice. */
		memset(&id, 0, sizeof(id));
		r = ncclCommInitRank(&comm[i], ndev, id, i);

		if (r != ncclSuccess)
			return r;
	}
	return ncclSuccess;
}

BOTH(ncclResult_t, ncclCommInitRankScalable,
     (ncclComm_t * comm, int nranks, int rank, int nid, ncclUniqueId *ids, ncclConfig_t *config))
{
	(void)config;
	if (nid < 1 || !ids)
		return ncclInvalidArgument;
	return new_comm(comm, nranks, rank);
}

BOTH(ncclResult_t, ncclCommSplit,
     (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config))
{
	(void)key;
	(void)config;
	if (!comm || comm->magic != COMM_MAGIC || !newcomm)
		return ncclInvalidArgument;
	if (color == NCCL_SPLIT_NOCOLOR) {
		*newcomm = NULL;
		return ncclSuccess;
	}
	/* One process stands for the group: it keeps its rank in a half-size comm. */
	return new_comm(newcomm, comm->nranks > 1 ? comm->nranks / 2 : 1,
			comm->nranks > 1 ? comm->rank % (comm->nranks / 2) : 0);
}

BOTH(ncclResult_t, ncclCommShrink,
     (ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm, ncclConfig_t *config,
      int flags))
{
	(void)exclude;
	(void)config;
	(void)flags;
	if (!comm || comm->magic != COMM_MAGIC || !newcomm || nexclude < 0 ||
	    nexclude >= comm->nranks)
		return ncclInvalidArgument;
	return new_comm(newcomm, comm->nranks - nexclude, 0);
}

BOTH(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
{
	return comm && comm->magic == COMM_MAGIC ? ncclSuccess : ncclInvalidArgument;
}

BOTH(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
{
	if (!comm || comm->magic != COMM_MAGIC)
		return ncclInvalidArgument;
	comm->magic = 0;
	free(comm);
	return ncclSuccess;
}

BOTH(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
{
	return ncclCommDestroy(comm);
}

BOTH(ncclResult_t, ncclAllReduce,
     (const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm,
      cudaStream_t st))
{
	(void)s, (void)r, (void)n, (void)st;
	return run(0, comm, dt, (int)op, -1);
}

BOTH(ncclResult_t, ncclAllGather,
     (const void *s, void *r, size_t n, ncclDataType_t dt, ncclComm_t comm, cudaStream_t st))
{
	(void)s, (void)r, (void)n, (void)st;
	return run(1, comm, dt, 0, -1);
}

BOTH(ncclResult_t, ncclReduceScatter,
     (const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm,
      cudaStream_t st))
{
	(void)s, (void)r, (void)n, (void)st;
	return run(2, comm, dt, (int)op, -1);
}

BOTH(ncclResult_t, ncclBroadcast,
     (const void *s, void *r, size_t n, ncclDataType_t dt, int root, ncclComm_t comm,
      cudaStream_t st))
{
	(void)s, (void)r, (void)n, (void)st;
	return run(3, comm, dt, 0, root);
}

BOTH(ncclResult_t, ncclReduce,
     (const void *s, void *r, size_t n, ncclDataType_t dt, ncclRedOp_t op, int root,
      ncclComm_t comm, cudaStream_t st))
{
	(void)s, (void)r, (void)n, (void)st;
	return run(4, comm, dt, (int)op, root);
}

BOTH(ncclResult_t, ncclAlltoAll,
     (const void *s, void *r, size_t n, ncclDataType_t dt, ncclComm_t comm, cudaStream_t st))
{
	(void)s, (void)r, (void)n, (void)st;
	return run(5, comm, dt, 0, -1);
}

/* These three come without a pnccl* name: the preload must fall back to nccl*. */
FAKE_EXPORT ncclResult_t ncclBcast(void *b, size_t n, ncclDataType_t dt, int root, ncclComm_t comm,
				   cudaStream_t st)
{
	(void)b, (void)n, (void)st;
	return run(3, comm, dt, 0, root);
}

FAKE_EXPORT ncclResult_t ncclGather(const void *s, void *r, size_t n, ncclDataType_t dt, int root,
				    ncclComm_t comm, cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)st;
	return run(6, comm, dt, 0, root);
}

FAKE_EXPORT ncclResult_t ncclScatter(const void *s, void *r, size_t n, ncclDataType_t dt, int root,
				     ncclComm_t comm, cudaStream_t st)
{
	(void)s, (void)r, (void)n, (void)st;
	return run(7, comm, dt, 0, root);
}

BOTH(ncclResult_t, ncclSend,
     (const void *s, size_t n, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t st))
{
	(void)s, (void)n, (void)st;
	return run(8, comm, dt, 0, peer);
}

BOTH(ncclResult_t, ncclRecv,
     (void *r, size_t n, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t st))
{
	(void)r, (void)n, (void)st;
	return run(9, comm, dt, 0, peer);
}

BOTH(ncclResult_t, ncclGroupStart, (void))
{
	if (!fake.parsed)
		parse_script();
	if (fake.group++ == 0)
		fake.group_ns = 0;
	return ncclSuccess;
}

BOTH(ncclResult_t, ncclGroupEnd, (void))
{
	if (fake.group <= 0)
		return ncclInvalidUsage;
	if (--fake.group == 0)
		work(fake.group_ns, fake.group_op);
	return ncclSuccess;
}
