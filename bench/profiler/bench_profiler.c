/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Added cost per collective of the Crux NCCL profiler plugin's event
 * handlers. A collective outside a group costs NCCL six calls into a v5
 * plugin (GroupApi start, its start-stop state, CollApi start and stop, the
 * launch state, GroupApi stop); this replays them through
 * libnccl-profiler-crux.so (dlopen + ncclProfiler_v5, as NCCL does) and
 * through a plugin that does nothing, same call shape, batches alternating
 * in the same run. The figure is the difference of the medians per
 * collective, and their ratio.
 *   bench-profiler PLUGIN.so OUT.json      (CRUX_TIMING=host, CRUX_SHM_DIR set)
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crux/clock.h"
#include "crux/json.h"
#include "crux/nccl_profiler_abi.h"

#define BATCHES 301
#define COLLS	1000

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The baseline: a v5 plugin that asks for the same events and does nothing. */
static cruxf_result_t noop_init(void **ctx, uint64_t id, int *mask, const char *name, int nn,
				int nr, int r, cruxf_logger_t l)
{
	static int dummy;
	(void)id, (void)name, (void)nn, (void)nr, (void)r, (void)l;
	*ctx = &dummy;
	*mask = CRUXF_EV_GROUP_API | CRUXF_EV_COLL_API | CRUXF_EV_P2P_API;
	return CRUXF_SUCCESS;
}
static cruxf_result_t noop_start(void *ctx, void **h, cruxf_descr_v5_t *d)
{
	(void)ctx, (void)d;
	*h = NULL;
	return CRUXF_SUCCESS;
}
static cruxf_result_t noop_stop(void *h)
{
	(void)h;
	return CRUXF_SUCCESS;
}
static cruxf_result_t noop_state(void *h, int s, cruxf_state_args_t *a)
{
	(void)h, (void)s, (void)a;
	return CRUXF_SUCCESS;
}
static cruxf_result_t noop_fini(void *ctx)
{
	(void)ctx;
	return CRUXF_SUCCESS;
}
static const cruxf_profiler_v5_t noop = {"noop",    noop_init,	noop_start,
					 noop_stop, noop_state, noop_fini};

/* NCCL's six calls for one ncclAllReduce outside a group. */
static double batch(const cruxf_profiler_v5_t *p, void *ctx)
{
	cruxf_descr_v5_t g, c;
	uint64_t t0;

	memset(&g, 0, sizeof(g));
	memset(&c, 0, sizeof(c));
	g.type = CRUXF_EV_GROUP_API;
	c.type = CRUXF_EV_COLL_API;
	c.collApi.func = "AllReduce";
	c.collApi.datatype = "ncclFloat32";
	c.collApi.count = 1 << 20;
	c.collApi.root = -1;
	c.collApi.stream = (void *)0x1;
	t0 = crux_now_ns();
	for (int i = 0; i < COLLS; i++) {
		void *gh = NULL, *ch = NULL;
		p->startEvent(ctx, &gh, &g);
		if (gh)
			p->recordEventState(gh, CRUXF_STATE_GROUP_START_API_STOP, NULL);
		c.parentObj = gh;
		p->startEvent(ctx, &ch, &c);
		if (ch)
			p->stopEvent(ch);
		if (gh) {
			p->recordEventState(gh, CRUXF_STATE_GROUP_END_API_START, NULL);
			p->stopEvent(gh);
		}
	}
	return (double)(crux_now_ns() - t0) / COLLS;
}

int main(int argc, char **argv)
{
	static double base[BATCHES], crux[BATCHES];
	struct timespec pause = {0, 2000000};
	const cruxf_profiler_v5_t *p;
	void *lib, *ctx = NULL, *nctx = NULL;
	int mask = 0, nmask = 0;
	double b, c;
	FILE *out;

	if (argc != 3) {
		fprintf(stderr, "usage: bench-profiler libnccl-profiler-crux.so OUT.json\n");
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	p = lib ? dlsym(lib, "ncclProfiler_v5") : NULL;
	if (!p) {
		fprintf(stderr, "bench-profiler: %s\n", lib ? "no ncclProfiler_v5" : dlerror());
		return 2;
	}
	if (p->init(&ctx, 1, &mask, "bench", 1, 2, 0, NULL) != CRUXF_SUCCESS || !ctx || !mask) {
		fprintf(stderr,
			"bench-profiler: the plugin asked for no events (is CRUX_SHM_DIR set?)\n");
		return 1;
	}
	noop.init(&nctx, 1, &nmask, "bench", 1, 2, 0, NULL);
	batch(&noop, nctx);
	batch(p, ctx);
	for (int i = 0; i < BATCHES; i++) {
		/* Pauses let the background thread drain the ring, as between real steps. */
		base[i] = batch(&noop, nctx);
		nanosleep(&pause, NULL);
		crux[i] = batch(p, ctx);
		nanosleep(&pause, NULL);
	}
	p->finalize(ctx);
	qsort(base, BATCHES, sizeof(double), cmp);
	qsort(crux, BATCHES, sizeof(double), cmp);
	b = base[BATCHES / 2];
	c = crux[BATCHES / 2];
	printf("do-nothing plugin %8.1f ns per collective (median of %d batches of %d)\n", b,
	       BATCHES, COLLS);
	printf("Crux plugin       %8.1f ns\n", c);
	printf("added             %8.1f ns per collective (goal <= 150 ns), crux/noop = %.2f\n",
	       c - b, c / b);
	out = fopen(argv[2], "w");
	if (!out) {
		perror(argv[2]);
		return 1;
	}
	{
		struct crux_json j;

		crux_json_init_lines(&j, out);
		crux_json_obj(&j);
		crux_json_key(&j, "benchmark");
		crux_json_str(&j, "profiler");
		crux_json_key(&j, "what");
		crux_json_str(
		    &j, "NCCL's six v5 profiler calls per collective (GroupApi, CollApi, states) "
			"into libnccl-profiler-crux.so (CRUX_TIMING=host) vs a do-nothing plugin, "
			"same run");
		crux_json_key(&j, "batches");
		crux_json_i64(&j, BATCHES);
		crux_json_key(&j, "collectives_per_batch");
		crux_json_i64(&j, COLLS);
		crux_json_key(&j, "noop_median_ns");
		crux_json_numf(&j, "%.1f", b);
		crux_json_key(&j, "crux_median_ns");
		crux_json_numf(&j, "%.1f", c);
		crux_json_key(&j, "added_median_ns");
		crux_json_numf(&j, "%.1f", c - b);
		crux_json_key(&j, "crux_over_noop");
		crux_json_numf(&j, "%.3f", c / b);
		crux_json_key(&j, "goal_added_ns");
		crux_json_i64(&j, 150);
		crux_json_key(&j, "goal_met");
		crux_json_bool(&j, c - b <= 150);
		crux_json_key(&j, "noop_p10_ns");
		crux_json_numf(&j, "%.1f", base[BATCHES / 10]);
		crux_json_key(&j, "noop_p90_ns");
		crux_json_numf(&j, "%.1f", base[BATCHES * 9 / 10]);
		crux_json_key(&j, "crux_p10_ns");
		crux_json_numf(&j, "%.1f", crux[BATCHES / 10]);
		crux_json_key(&j, "crux_p90_ns");
		crux_json_numf(&j, "%.1f", crux[BATCHES * 9 / 10]);
		crux_json_end_obj(&j);
		crux_json_done(&j);
	}
	fclose(out);
	return 0;
}
