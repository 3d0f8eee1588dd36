/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Added cost of chaining (CRUX_PROFILER_NEXT): NCCL's six v5 calls per
 * collective outside a group (GroupApi start, its start-stop state, CollApi
 * start and stop, the launch state, GroupApi stop) made into
 *   alone:   the chained plugin itself (a fixture that asks for GroupApi and
 *            CollApi and keeps its own handles), as NCCL would call it alone;
 *   chained: libnccl-profiler-crux.so with that plugin behind it.
 * Batches alternate in the same process; each run is a fresh pair of
 * communicators and gives the medians of its batches; the result is the
 * median of the runs and their range.
 *
 * Three modes, one per process (run-chain.sh runs all three):
 *   CRUX_PROFILER_NEXT=FIXTURE.so CRUX_PRELOAD=off: the Crux core is off, the
 *      difference is the forwarding of a passive Crux;
 *   CRUX_PROFILER_NEXT=FIXTURE.so: forwarding plus Crux's own profiling;
 *   CRUX_PROFILER_NEXT unset: Crux alone against a do-nothing plugin (its
 *      own profiling cost), so that the forwarding with the core on is the
 *      second figure less this one (goal: <= 20 ns per call).
 *   bench-profiler-chain CRUX.so FIXTURE.so RUNS OUT.json
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crux/clock.h"
#include "crux/nccl_profiler_abi.h"

#define BATCHES	 201
#define COLLS	 1000
#define CALLS	 6 /* per collective */
#define MAX_RUNS 15

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

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
		p->recordEventState(gh, CRUXF_STATE_GROUP_START_API_STOP, NULL);
		c.parentObj = gh;
		p->startEvent(ctx, &ch, &c);
		p->stopEvent(ch);
		p->recordEventState(gh, CRUXF_STATE_GROUP_END_API_START, NULL);
		p->stopEvent(gh);
	}
	return (double)(crux_now_ns() - t0) / COLLS;
}

/* The baseline of the Crux-alone mode: asks for the same events, does nothing. */
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

static const cruxf_profiler_v5_t *table(const char *path, void **lib)
{
	const cruxf_profiler_v5_t *p;

	*lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	p = *lib ? dlsym(*lib, "ncclProfiler_v5") : NULL;
	if (!p)
		fprintf(stderr, "bench-profiler-chain: %s: %s\n", path,
			*lib ? "no ncclProfiler_v5" : dlerror());
	return p;
}

int main(int argc, char **argv)
{
	static double alone[BATCHES], chained[BATCHES];
	double run_alone[MAX_RUNS], run_chained[MAX_RUNS], run_added[MAX_RUNS];
	struct timespec pause = {0, 1000000};
	const cruxf_profiler_v5_t *crux, *next;
	void *lib_c, *lib_n;
	const char *off = getenv("CRUX_PRELOAD");
	int core_on = !(off && !strcmp(off, "off"));
	const char *nx = getenv("CRUX_PROFILER_NEXT");
	int chained_mode = nx && *nx;
	const char *mode = !chained_mode ? "crux-alone"
			   : core_on	 ? "crux-core-on"
					 : "forwarding-only";
	int runs;
	FILE *out;

	if (argc != 5 || (runs = atoi(argv[3])) < 3 || runs > MAX_RUNS) {
		fprintf(stderr,
			"usage: bench-profiler-chain CRUX.so FIXTURE.so RUNS(3..15) OUT.json "
			"(CRUX_PROFILER_NEXT=FIXTURE.so)\n");
		return 2;
	}
	if (chained_mode && strcmp(nx, argv[2])) {
		fprintf(stderr, "bench-profiler-chain: CRUX_PROFILER_NEXT must be %s or unset\n",
			argv[2]);
		return 2;
	}
	if (!(crux = table(argv[1], &lib_c)))
		return 2;
	if (!chained_mode)
		next = &noop; /* Crux alone against a plugin that does nothing */
	else if (!(next = table(argv[2], &lib_n)))
		return 2;
	for (int r = 0; r < runs; r++) {
		void *cc = NULL, *nc = NULL;
		int cm = 0, nm = 0;

		if (crux->init(&cc, 1, &cm, "bench", 1, 2, 0, NULL) != CRUXF_SUCCESS || !cc ||
		    next->init(&nc, 2, &nm, "bench", 1, 2, 0, NULL) != CRUXF_SUCCESS || !nc) {
			fprintf(stderr,
				"bench-profiler-chain: init failed (is CRUX_SHM_DIR set?)\n");
			return 1;
		}
		if (chained_mode && (cm & nm) != nm) {
			fprintf(stderr,
				"bench-profiler-chain: Crux's mask 0x%x lacks the chained "
				"plugin's 0x%x: not chained\n",
				cm, nm);
			return 1;
		}
		batch(next, nc);
		batch(crux, cc);
		for (int i = 0; i < BATCHES; i++) {
			/* Pauses let Crux's background thread drain its ring, as between steps. */
			alone[i] = batch(next, nc);
			nanosleep(&pause, NULL);
			chained[i] = batch(crux, cc);
			nanosleep(&pause, NULL);
		}
		crux->finalize(cc);
		next->finalize(nc);
		qsort(alone, BATCHES, sizeof(double), cmp);
		qsort(chained, BATCHES, sizeof(double), cmp);
		run_alone[r] = alone[BATCHES / 2] / CALLS;
		run_chained[r] = chained[BATCHES / 2] / CALLS;
		run_added[r] = run_chained[r] - run_alone[r];
		printf("run %d: baseline %6.1f ns per call, measured %6.1f ns: added %5.1f ns\n",
		       r + 1, run_alone[r], run_chained[r], run_added[r]);
	}
	double a[MAX_RUNS], c[MAX_RUNS], d[MAX_RUNS];
	memcpy(a, run_alone, sizeof(a));
	memcpy(c, run_chained, sizeof(c));
	memcpy(d, run_added, sizeof(d));
	qsort(a, (size_t)runs, sizeof(double), cmp);
	qsort(c, (size_t)runs, sizeof(double), cmp);
	qsort(d, (size_t)runs, sizeof(double), cmp);
	double ma = a[runs / 2], mc = c[runs / 2], md = d[runs / 2];
	printf("%s: added %.1f ns per call (median of %d runs, range %.1f..%.1f), ratio %.2f\n",
	       mode, md, runs, d[0], d[runs - 1], mc / ma);
	out = fopen(argv[4], "w");
	if (!out) {
		perror(argv[4]);
		return 1;
	}
	fprintf(out,
		"{\"mode\": \"%s\", \"runs\": %d, \"batches_per_run\": %d, "
		"\"collectives_per_batch\": %d, \"calls_per_collective\": %d,\n"
		" \"baseline_ns_per_call\": %.1f, \"measured_ns_per_call\": %.1f, "
		"\"added_ns_per_call\": %.1f,\n"
		" \"added_min_ns\": %.1f, \"added_max_ns\": %.1f, \"ratio\": %.3f,\n"
		" \"baseline\": \"%s\", \"measured\": \"%s\"}",
		mode, runs, BATCHES, COLLS, CALLS, ma, mc, md, d[0], d[runs - 1], mc / ma,
		chained_mode ? "the fixture plugin alone" : "a do-nothing plugin",
		chained_mode ? (core_on ? "Crux (profiling) with the fixture chained"
					: "Crux (core off) with the fixture chained")
			     : "Crux alone (profiling)");
	fclose(out);
	return 0;
}
