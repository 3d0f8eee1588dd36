/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Added cost of an intercepted NCCL call. Run under
 * LD_PRELOAD=libcrux-preload.so with a zero-work CPU NCCL double linked in:
 * ncclAllReduce then reaches the preload's wrapper, while the double's own
 * entry point (looked up in libnccl.so.2) is the direct call. Batches of
 * each alternate in the same run; the figure is the difference of the
 * medians, per call, and their ratio.
 *   bench-preload OUT.json
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crux/json.h"
#include "crux/nccl_api.h"

#define BATCHES 301
#define CALLS	1000

typedef ncclResult_t (*allreduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
				     ncclComm_t, cudaStream_t);

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double batch(allreduce_fn f, ncclComm_t comm, float *buf)
{
	uint64_t t0 = now_ns();

	for (int i = 0; i < CALLS; i++) {
		if (f(buf, buf, 1024, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
			abort();
	}
	return (double)(now_ns() - t0) / CALLS;
}

int main(int argc, char **argv)
{
	static double direct[BATCHES], wrapped[BATCHES];
	allreduce_fn real, wrap = ncclAllReduce;
	struct timespec pause = {0, 2000000};
	ncclComm_t comm = NULL;
	ncclUniqueId id;
	float buf[1024];
	void *lib;
	FILE *out;
	double d, w;

	if (argc != 2) {
		fprintf(stderr, "usage: LD_PRELOAD=libcrux-preload.so bench-preload OUT.json\n");
		return 2;
	}
	if (!dlsym(RTLD_DEFAULT, "crux_iteration_mark")) {
		fprintf(stderr, "bench-preload: run it under LD_PRELOAD=libcrux-preload.so\n");
		return 2;
	}
	lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
	real = lib ? (allreduce_fn)dlsym(lib, "pncclAllReduce") : NULL;
	if (!real || (void *)real == (void *)wrap) {
		fprintf(stderr, "bench-preload: cannot find the NCCL double's own ncclAllReduce\n");
		return 2;
	}
	memset(&id, 0, sizeof(id));
	memset(buf, 0, sizeof(buf));
	if (ncclCommInitRank(&comm, 2, id, 0) != ncclSuccess)
		return 1;
	/* Warm up both paths (lazy symbol resolution, caches). */
	batch(real, comm, buf);
	batch(wrap, comm, buf);
	for (int b = 0; b < BATCHES; b++) {
		/* Pauses let the background thread drain the ring, as in real use. */
		direct[b] = batch(real, comm, buf);
		nanosleep(&pause, NULL);
		wrapped[b] = batch(wrap, comm, buf);
		nanosleep(&pause, NULL);
	}
	qsort(direct, BATCHES, sizeof(double), cmp);
	qsort(wrapped, BATCHES, sizeof(double), cmp);
	d = direct[BATCHES / 2];
	w = wrapped[BATCHES / 2];
	printf("direct call     %8.1f ns (median of %d batches of %d calls)\n", d, BATCHES, CALLS);
	printf("intercepted     %8.1f ns\n", w);
	printf("added per call  %8.1f ns (goal <= 150 ns), intercepted/direct = %.2f\n", w - d,
	       w / d);
	out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	{
		struct crux_json j;

		crux_json_init_lines(&j, out);
		crux_json_obj(&j);
		crux_json_key(&j, "benchmark");
		crux_json_str(&j, "preload");
		crux_json_key(&j, "what");
		crux_json_str(
		    &j, "ncclAllReduce through libcrux-preload.so (CRUX_TIMING=host) vs the same "
			"NCCL double called directly");
		crux_json_key(&j, "batches");
		crux_json_i64(&j, BATCHES);
		crux_json_key(&j, "calls_per_batch");
		crux_json_i64(&j, CALLS);
		crux_json_key(&j, "direct_median_ns");
		crux_json_numf(&j, "%.1f", d);
		crux_json_key(&j, "intercepted_median_ns");
		crux_json_numf(&j, "%.1f", w);
		crux_json_key(&j, "added_median_ns");
		crux_json_numf(&j, "%.1f", w - d);
		crux_json_key(&j, "intercepted_over_direct");
		crux_json_numf(&j, "%.3f", w / d);
		crux_json_key(&j, "goal_added_ns");
		crux_json_i64(&j, 150);
		crux_json_key(&j, "goal_met");
		crux_json_bool(&j, w - d <= 150);
		crux_json_key(&j, "direct_p10_ns");
		crux_json_numf(&j, "%.1f", direct[BATCHES / 10]);
		crux_json_key(&j, "direct_p90_ns");
		crux_json_numf(&j, "%.1f", direct[BATCHES * 9 / 10]);
		crux_json_key(&j, "intercepted_p10_ns");
		crux_json_numf(&j, "%.1f", wrapped[BATCHES / 10]);
		crux_json_key(&j, "intercepted_p90_ns");
		crux_json_numf(&j, "%.1f", wrapped[BATCHES * 9 / 10]);
		crux_json_end_obj(&j);
		crux_json_done(&j);
	}
	fclose(out);
	ncclCommDestroy(comm);
	return 0;
}
