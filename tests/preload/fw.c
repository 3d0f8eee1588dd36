/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A miniature "framework" library (like libtorch_cuda.so): linked against
 * libnccl.so.2 and calling it through the PLT, so an LD_PRELOAD'ed library
 * can interpose. Training loops with a known timing, for the preload tests.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crux/nccl_api.h"

#define FW_EXPORT __attribute__((visibility("default")))

typedef void (*kernel_fn)(const char *name, uint64_t start, uint64_t end);
typedef void (*mark_fn)(void);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static kernel_fn fake_kernel(void)
{
	const char *lib = getenv("CRUX_CUPTI_LIB");
	void *h = lib ? dlopen(lib, RTLD_LAZY | RTLD_NOLOAD) : NULL;

	return h ? (kernel_fn)dlsym(h, "fakecupti_kernel") : NULL;
}

/* "Compute": sleep, reported as one compute kernel when the fake CUPTI listens. */
static uint64_t compute(double ms, kernel_fn k)
{
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(ms * 1e6);
	struct timespec until = {(time_t)(end / 1000000000ull), (long)(end % 1000000000ull)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
	end = now_ns();
	if (k)
		k("_Z11sgemm_kernelPfS_S_", t0, end);
	return end - t0;
}

/* A call whose duration counts as communication of iteration 'it'. */
#define TIMED(it, call)                                                                            \
	do {                                                                                       \
		uint64_t a_ = now_ns();                                                            \
		CHECK(call);                                                                       \
		(it)->comm += now_ns() - a_;                                                       \
	} while (0)

#define CHECK(call)                                                                                \
	do {                                                                                       \
		ncclResult_t r_ = (call);                                                          \
		if (r_ != ncclSuccess) {                                                           \
			fprintf(stderr, "fw: %s failed: %d\n", #call, (int)r_);                    \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static ncclComm_t world(int nranks, int rank)
{
	ncclUniqueId id;
	ncclComm_t c = NULL;

	ncclGetUniqueId(&id);
	if (ncclCommInitRank(&c, nranks, id, rank) != ncclSuccess)
		return NULL;
	return c;
}

/*
 * Ground truth, per iteration, as this program saw it: when it started and
 * ended, compute and communication time, compute during communication.
 * Written to $FW_TRUTH at the end of a scenario: "start end compute comm overlap" (ns).
 */
struct truth {
	uint64_t start, end, compute, comm, overlap;
};

#define MAX_TRUTH 4096
static struct truth truth[MAX_TRUTH];
static int ntruth;

static void truth_write(void)
{
	const char *path = getenv("FW_TRUTH");
	FILE *f;

	if (!path || !(f = fopen(path, "a")))
		return;
	for (int i = 0; i < ntruth; i++)
		fprintf(f, "%llu %llu %llu %llu %llu\n", (unsigned long long)truth[i].start,
			(unsigned long long)truth[i].end, (unsigned long long)truth[i].compute,
			(unsigned long long)truth[i].comm, (unsigned long long)truth[i].overlap);
	fclose(f);
	ntruth = 0;
}

static struct truth *truth_next(void)
{
	struct truth *t = &truth[ntruth < MAX_TRUTH - 1 ? ntruth++ : ntruth];

	memset(t, 0, sizeof(*t));
	t->start = now_ns();
	return t;
}

static float buf[4];
static cudaStream_t stream = (cudaStream_t)0x1234;

/*
 * DDP: first iteration allreduces buckets in a different order and size (the
 * bucket rebuild), then 3 buckets per iteration after compute_ms of compute.
 * With 'overlap', compute kernels also run during the second half of each
 * allreduce.
 */
static int ddp(int iters, double compute_ms, int overlap, int loss_every)
{
	static const size_t buckets[3] = {1u << 20, 1u << 20, 1u << 18};
	ncclComm_t c = world(8, 3);
	kernel_fn k = fake_kernel(); /* after the first communicator brought CUPTI in */

	if (!c)
		return 1;
	(void)compute(compute_ms, k);
	CHECK(ncclAllReduce(buf, buf, 3u << 19, ncclFloat32, ncclSum, c, stream));
	CHECK(ncclAllReduce(buf, buf, 3u << 18, ncclFloat32, ncclSum, c, stream));
	for (int i = 0; i < iters; i++) {
		struct truth *it = truth_next();

		it->compute = compute(compute_ms, k);
		for (int b = 0; b < 3; b++) {
			uint64_t t0 = now_ns(), t1;

			CHECK(ncclAllReduce(buf, buf, buckets[b], ncclFloat32, ncclSum, c, stream));
			t1 = now_ns();
			it->comm += t1 - t0;
			if (overlap && k) {
				k("_Z13elementwise_kPf", t0 + (t1 - t0) / 2, t1);
				it->overlap += t1 - (t0 + (t1 - t0) / 2);
			}
		}
		if (loss_every && i % loss_every == loss_every - 1)
			TIMED(it, ncclAllReduce(buf, buf, 1, ncclFloat32, ncclAvg, c, stream));
		it->end = now_ns();
		it->compute += it->overlap;
	}
	truth_write();
	CHECK(ncclCommDestroy(c));
	return 0;
}

/* Pipeline stage 1 of 3: grouped send/recv of activations and gradients. */
static int pipeline(int iters, double compute_ms)
{
	ncclComm_t c = world(3, 1);
	kernel_fn k = fake_kernel();

	if (!c)
		return 1;
	for (int i = 0; i < iters; i++) {
		struct truth *it = truth_next();

		TIMED(it, ncclGroupStart());
		TIMED(it, ncclRecv(buf, 1u << 20, ncclFloat16, 0, c, stream));
		TIMED(it, ncclGroupEnd());
		it->compute += compute(compute_ms / 2, k);
		TIMED(it, ncclGroupStart());
		TIMED(it, ncclSend(buf, 1u << 20, ncclFloat16, 2, c, stream));
		TIMED(it, ncclRecv(buf, 1u << 20, ncclFloat16, 2, c, stream));
		TIMED(it, ncclGroupEnd());
		it->compute += compute(compute_ms / 2, k);
		TIMED(it, ncclSend(buf, 1u << 20, ncclFloat16, 0, c, stream));
		it->end = now_ns();
	}
	truth_write();
	CHECK(ncclCommDestroy(c));
	return 0;
}

/* Irregular call pattern; crux_iteration_mark() says where iterations start. */
static int marked(int iters, double compute_ms)
{
	mark_fn mark = (mark_fn)dlsym(RTLD_DEFAULT, "crux_iteration_mark");
	ncclComm_t c = world(2, 0);

	if (!c || !mark)
		return 1;
	for (int i = 0; i < iters; i++) {
		struct truth *it = truth_next();

		mark();
		it->compute = compute(compute_ms, NULL);
		for (int j = 0; j <= (i * 7) % 3; j++)
			TIMED(it, ncclAllReduce(buf, buf, 1000 + (size_t)j, ncclFloat32, ncclSum, c,
						stream));
		it->end = now_ns();
	}
	truth_write();
	CHECK(ncclCommDestroy(c));
	return 0;
}

/* Errors from NCCL reach the caller unchanged; communicator calls of every kind. */
static int errors(void)
{
	ncclComm_t c = NULL, all[2] = {NULL, NULL}, sub = NULL, shr = NULL;
	ncclUniqueId id;
	ncclConfig_t cfg = CRUX_NCCL_CONFIG_INITIALIZER;
	int excl = 1;

	memset(&id, 0, sizeof(id));
	if (ncclCommInitRank(&c, 2, id, 5) != ncclInvalidArgument)
		return 10;
	CHECK(ncclCommInitRankConfig(&c, 4, id, 1, &cfg));
	if (ncclAllReduce(buf, buf, 4, ncclNumTypes, ncclSum, c, stream) != ncclInvalidArgument)
		return 11;
	if (ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, NULL, stream) != ncclInvalidArgument)
		return 12;
	if (ncclSend(buf, 4, ncclFloat32, 9, c, stream) != ncclInvalidArgument)
		return 13;
	if (ncclGroupEnd() != ncclInvalidUsage)
		return 14;
	CHECK(ncclCommInitAll(all, 2, NULL));
	CHECK(ncclCommSplit(c, 0, 1, &sub, NULL));
	CHECK(ncclCommShrink(c, &excl, 1, &shr, NULL, 0));
	CHECK(ncclBcast(buf, 4, ncclFloat32, 0, sub, stream));
	CHECK(ncclBroadcast(buf, buf, 4, ncclFloat32, 0, sub, stream));
	CHECK(ncclReduce(buf, buf, 4, ncclFloat32, ncclMax, 0, shr, stream));
	CHECK(ncclAllGather(buf, buf, 1, ncclFloat32, c, stream));
	CHECK(ncclReduceScatter(buf, buf, 1, ncclFloat32, ncclSum, c, stream));
	CHECK(ncclAlltoAll(buf, buf, 1, ncclFloat32, c, stream));
	CHECK(ncclGather(buf, buf, 1, ncclFloat32, 0, c, stream));
	CHECK(ncclScatter(buf, buf, 1, ncclFloat32, 0, c, stream));
	CHECK(ncclCommFinalize(c));
	CHECK(ncclCommAbort(all[0]));
	CHECK(ncclCommDestroy(all[1]));
	CHECK(ncclCommDestroy(sub));
	CHECK(ncclCommDestroy(shr));
	CHECK(ncclCommDestroy(c));
	if (ncclCommDestroy(NULL) != ncclInvalidArgument)
		return 15;
	return 0;
}

/* Train, fork a child that trains on its own communicator, train again. */
static int forked(int iters, double compute_ms)
{
	int status = 0;
	pid_t pid;

	if (ddp(iters, compute_ms, 0, 0))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0)
		exit(ddp(iters, compute_ms, 0,
			 0)); /* exit, not _exit: the preload's destructor publishes */
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 2;
	return ddp(iters, compute_ms, 0, 0);
}

FW_EXPORT int fw_run(const char *scenario, int iters, double compute_ms)
{
	if (strcmp(scenario, "ddp") == 0)
		return ddp(iters, compute_ms, 0, 0);
	if (strcmp(scenario, "ddp-overlap") == 0)
		return ddp(iters, compute_ms, 1, 0);
	if (strcmp(scenario, "ddp-loss") == 0)
		return ddp(iters, compute_ms, 0, 10);
	if (strcmp(scenario, "pipeline") == 0)
		return pipeline(iters, compute_ms);
	if (strcmp(scenario, "mark") == 0)
		return marked(iters, compute_ms);
	if (strcmp(scenario, "errors") == 0)
		return errors();
	if (strcmp(scenario, "fork") == 0)
		return forked(iters, compute_ms);
	fprintf(stderr, "fw: unknown scenario %s\n", scenario);
	return 2;
}
