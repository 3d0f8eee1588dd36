/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chain: CRUX_PROFILER_NEXT behind libnccl-profiler-crux.so. Loads the Crux
 * plugin as NCCL does (dlopen, ncclProfiler_v<VERSION>) with
 * CRUX_PROFILER_NEXT set by the caller, and drives two communicators
 * through the event sequence NCCL emits for collectives and sends under
 * that version: API events, the launch's task events, proxy operations,
 * kernel channels (and v7 kernel phases), state records, finalize.
 *
 *   chain PLUGIN VERSION --fixture LIB      a fixture plugin is chained: it must see
 *                                           every call for the types it asked for, with
 *                                           its own contexts, handles and parents, and
 *                                           nothing else; Crux must ask for its own too
 *   chain PLUGIN VERSION --fixture LIB --threads N
 *                                           the same from N threads at once, each on its
 *                                           own communicator as NCCL's callers are
 *                                           (stress: the process-wide handle pairs)
 *   chain PLUGIN VERSION --refused TEXT     CRUX_PROFILER_NEXT is bad: exactly one log
 *                                           line names it and contains TEXT, and Crux
 *                                           profiles on alone (its own mask, a context)
 * Exit 0 when every check passes.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crux/nccl_profiler_abi.h"

struct fixture_stats {
	int version;
	long inits, finalizes, starts, stops, states, live;
	long by_type[16];
	long with_parent, foreign_parent, foreign_handle, foreign_context, unasked, state_sum;
	uint64_t tag_sum;
};

static int version, fails, nlines, lines_naming;
static char last_line[512];
static const char *want_text;
static const cruxf_profiler_v4_t *p4;
static const cruxf_profiler_v5_t *p5;
static const cruxf_profiler_v7_t *p7;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "chain v%d: FAIL: ", version);                             \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			fails++;                                                                   \
		}                                                                                  \
	} while (0)

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	(void)flags, (void)file, (void)line;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	printf("log[%d]: %s\n", level, buf);
	nlines++;
	if (strstr(buf, "CRUX_PROFILER_NEXT")) {
		lines_naming++;
		snprintf(last_line, sizeof(last_line), "%s", buf);
	}
}

static void *start(void *ctx, int mask, uint64_t type, void *parent, const char *func, uint64_t tag)
{
	void *h = NULL;

	if (!(mask & (int)type))
		return NULL; /* NCCL checks the merged mask before it calls */
	if (version == 4) {
		cruxf_descr_v4_t d;
		memset(&d, 0, sizeof(d));
		d.type = (uint8_t)type;
		d.parentObj = parent;
		d.rank = 0;
		if (type == CRUXF_EV_COLL) {
			d.coll.func = func;
			d.coll.datatype = "ncclFloat32";
			d.coll.count = 1024;
			d.coll.root = -1;
		} else if (type == CRUXF_EV_P2P) {
			d.p2p.func = func;
			d.p2p.datatype = "ncclFloat32";
			d.p2p.count = 1024;
			d.p2p.peer = 1;
		}
		p4->startEvent(ctx, &h, &d);
		return h;
	}
	/*
	 * The exact size NCCL's descriptor has for this version: a v5 one is
	 * smaller than ours (no copy-engine members), so anything reading past
	 * it shows under ASan.
	 */
	cruxf_descr_v7_t *d = calloc(1, sizeof(cruxf_descr_v7_t));
	size_t size = version == 7   ? sizeof(cruxf_descr_v7_t)
		      : version == 6 ? sizeof(cruxf_descr_v6_t)
				     : offsetof(cruxf_descr_v5_t, coll) +
					   sizeof(((cruxf_descr_v5_t *)0)->coll);
	void *exact = malloc(size);
	if (!d || !exact)
		abort();
	d->type = type;
	d->parentObj = parent;
	if (type == CRUXF_EV_COLL_API) {
		d->collApi.func = func;
		d->collApi.datatype = "ncclFloat32";
		d->collApi.count = 1024;
		d->collApi.root = -1;
		d->collApi.stream = (void *)0x5;
		d->collApi.userTag = tag;
	} else if (type == CRUXF_EV_P2P_API) {
		d->p2pApi.func = func;
		d->p2pApi.datatype = "ncclFloat32";
		d->p2pApi.count = 1024;
		d->p2pApi.stream = (void *)0x5;
		d->p2pApi.userTag = tag;
	} else if (type == CRUXF_EV_COLL) {
		d->coll.func = func;
		d->coll.datatype = "ncclFloat32";
		d->coll.count = 1024;
		d->coll.userTag = tag;
	} else if (type == CRUXF_EV_KERNEL_PHASE) {
		d->kernelPhase.phaseId = CRUXF_PHASE_COMPUTE;
		d->kernelPhase.phaseName = "compute";
	}
	memcpy(exact, d, size);
	free(d);
	if (version == 7)
		p7->startEvent(ctx, &h, exact);
	else
		p5->startEvent(ctx, &h, exact);
	free(exact);
	return h;
}

static void stop(void *h)
{
	if (h)
		(version == 4 ? p4->stopEvent : version == 7 ? p7->stopEvent : p5->stopEvent)(h);
}

static void state(void *h, int s)
{
	cruxf_state_args_t a;

	memset(&a, 0, sizeof(a));
	if (h)
		(version == 4	? p4->recordEventState
		 : version == 7 ? p7->recordEventState
				: p5->recordEventState)(h, s, &a);
}

/* What the fixture must see per operation (its mask), counted by the driver. */
static long want_starts, want_states, want_parented, want_tags;

static void fixture_counts(int fmask, uint64_t type, bool parented, int nstates, uint64_t tag)
{
	if (!(fmask & (int)type))
		return;
	__atomic_fetch_add(&want_starts, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&want_states, nstates, __ATOMIC_RELAXED);
	__atomic_fetch_add(&want_parented, parented, __ATOMIC_RELAXED);
	__atomic_fetch_add(&want_tags, (long)tag, __ATOMIC_RELAXED);
}

/* One collective as NCCL emits it, and one send (types the fixture did not ask for). */
static void one_collective(void *ctx, int mask, int fmask, uint64_t tag)
{
	if (version == 4) {
		void *g = start(ctx, mask, CRUXF_EV_GROUP, NULL, NULL, 0);
		void *c = start(ctx, mask, CRUXF_EV_COLL, g, "AllReduce", 0);
		void *op = start(ctx, mask, CRUXF_EV_PROXY_OP, c, NULL, 0);
		void *k = start(ctx, mask, CRUXF_EV_KERNEL_CH, c, NULL, 0);
		void *s = start(ctx, mask, CRUXF_EV_P2P, g, "Send", 0);
		state(op, 19);
		state(k, CRUXF_STATE_KERNEL_CH_STOP);
		stop(k);
		stop(op);
		stop(s);
		stop(c);
		stop(g);
		fixture_counts(fmask, CRUXF_EV_GROUP, false, 0, 0);
		fixture_counts(fmask, CRUXF_EV_COLL, true, 0, 0);
		fixture_counts(fmask, CRUXF_EV_PROXY_OP, true, 1, 0);
		fixture_counts(fmask, CRUXF_EV_KERNEL_CH, true, 1, 0);
		fixture_counts(fmask, CRUXF_EV_P2P, true, 0, 0);
		return;
	}
	void *g = start(ctx, mask, CRUXF_EV_GROUP_API, NULL, NULL, 0);
	state(g, CRUXF_STATE_GROUP_START_API_STOP);
	void *ca = start(ctx, mask, CRUXF_EV_COLL_API, g, "AllReduce", tag);
	stop(ca); /* the enqueue ends; the launch comes at ncclGroupEnd */
	void *pa = start(ctx, mask, CRUXF_EV_P2P_API, g, "Send", tag);
	stop(pa);
	state(g, CRUXF_STATE_GROUP_END_API_START);
	/* The launch: the task's parent is its CollApi event, already stopped. */
	void *c = start(ctx, mask, CRUXF_EV_COLL, ca, "AllReduce", tag);
	void *op = start(ctx, mask, CRUXF_EV_PROXY_OP, c, NULL, 0);
	void *k = start(ctx, mask, CRUXF_EV_KERNEL_CH, c, NULL, 0);
	void *ph = version >= 7 ? start(ctx, mask, CRUXF_EV_KERNEL_PHASE, k, NULL, 0) : NULL;
	state(op, 19);
	if (ph) {
		state(ph, CRUXF_STATE_KERNEL_PHASE_STOP);
		stop(ph);
	}
	state(k, CRUXF_STATE_KERNEL_CH_STOP);
	stop(k);
	stop(op);
	stop(c);
	stop(g);
	fixture_counts(fmask, CRUXF_EV_GROUP_API, false, 2, 0);
	fixture_counts(fmask, CRUXF_EV_COLL_API, true, 0, version >= 7 ? tag : 0);
	fixture_counts(fmask, CRUXF_EV_P2P_API, true, 0, version >= 7 ? tag : 0);
	fixture_counts(fmask, CRUXF_EV_COLL, true, 0, 0);
	fixture_counts(fmask, CRUXF_EV_PROXY_OP, true, 1, 0);
	fixture_counts(fmask, CRUXF_EV_KERNEL_CH, true, 1, 0);
	if (version >= 7)
		fixture_counts(fmask, CRUXF_EV_KERNEL_PHASE, true, 1, 0);
}

struct worker {
	pthread_t t;
	void *ctx;
	int mask, fmask, iters;
};

static void *work(void *arg)
{
	struct worker *w = arg;

	for (int it = 0; it < w->iters; it++)
		one_collective(w->ctx, w->mask, w->fmask, (uint64_t)it + 1);
	return NULL;
}

static int init(void **ctx, int *mask, uint64_t id)
{
	*mask = 0x5a5a; /* NCCL's global mask holds the previous init's value */
	if (version == 4)
		return p4->init(ctx, mask, "chain", id, 1, 2, 0, logger);
	if (version == 7)
		return p7->init(ctx, id, mask, "chain", 1, 2, 0, logger);
	return p5->init(ctx, id, mask, "chain", 1, 2, 0, logger);
}

static int finalize(void *ctx)
{
	return (version == 4 ? p4->finalize : version == 7 ? p7->finalize : p5->finalize)(ctx);
}

int main(int argc, char **argv)
{
	const char *fixture = NULL;
	char sym[32], tmpdir[] = "/tmp/crux-chain.XXXXXX";
	void *lib, *ctx[8] = {NULL};
	int mask[8] = {0}, crux_mask, fmask = 0, ncomm;
	void (*stats)(struct fixture_stats *) = NULL;
	struct fixture_stats fs;

	int threads = 0;

	if (argc == 7 && !strcmp(argv[5], "--threads"))
		threads = atoi(argv[6]);
	if ((argc != 5 && !(argc == 7 && threads > 0 && threads <= 8)) ||
	    (strcmp(argv[3], "--fixture") && strcmp(argv[3], "--refused"))) {
		fprintf(stderr, "usage: chain PLUGIN VERSION --fixture LIB [--threads N] | "
				"--refused TEXT\n");
		return 2;
	}
	version = atoi(argv[2]);
	if (!strcmp(argv[3], "--fixture"))
		fixture = argv[4];
	else
		want_text = argv[4];
	if (!getenv("CRUX_SHM_DIR")) {
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			return 2;
		}
		setenv("CRUX_SHM_DIR", tmpdir, 1);
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	snprintf(sym, sizeof(sym), "ncclProfiler_v%d", version);
	if (!lib || !dlsym(lib, sym)) {
		fprintf(stderr, "chain: %s: %s\n", argv[1], lib ? "no such table" : dlerror());
		return 2;
	}
	if (version == 4)
		p4 = dlsym(lib, sym);
	else if (version == 7)
		p7 = dlsym(lib, sym);
	else
		p5 = dlsym(lib, sym);
	crux_mask = version == 4 ? (CRUXF_EV_GROUP | CRUXF_EV_COLL | CRUXF_EV_P2P)
				 : (CRUXF_EV_GROUP_API | CRUXF_EV_COLL_API | CRUXF_EV_P2P_API);

	ncomm = threads ? threads : 2;
	for (int i = 0; i < ncomm; i++) {
		CHECK(init(&ctx[i], &mask[i], 0x77 + (uint64_t)i) == CRUXF_SUCCESS, "init failed");
		CHECK(ctx[i] != NULL, "no context");
		CHECK((mask[i] & crux_mask) == crux_mask,
		      "Crux's own events are not asked for (mask 0x%x)", mask[i]);
	}
	if (fixture) {
		void *fl = dlopen(fixture, RTLD_NOW | RTLD_NOLOAD);
		CHECK(fl != NULL, "the fixture %s was not loaded by the plugin", fixture);
		stats = fl ? (void (*)(struct fixture_stats *))dlsym(fl, "fixture_stats") : NULL;
		if (!stats)
			return 1;
		stats(&fs);
		/* What the fixture asked for, limited to the types NCCL's version has. */
		fmask = mask[0] & ~crux_mask;
		if (fs.version == 4)
			fmask |= CRUXF_EV_GROUP | CRUXF_EV_COLL;
		else
			fmask |= CRUXF_EV_GROUP_API | CRUXF_EV_COLL_API | CRUXF_EV_COLL;
		CHECK(mask[0] & CRUXF_EV_PROXY_OP,
		      "the fixture's ProxyOp is not in the merged mask "
		      "(0x%x)",
		      mask[0]);
		CHECK(fs.inits == ncomm, "fixture inits %ld, want %d", fs.inits, ncomm);
		CHECK(lines_naming == 0, "a chained plugin that works was complained about: %s",
		      last_line);
	} else {
		CHECK(mask[0] == crux_mask, "Crux alone should ask for 0x%x, asked for 0x%x",
		      crux_mask, mask[0]);
		CHECK(lines_naming == 1, "%d log lines name CRUX_PROFILER_NEXT, want exactly 1",
		      lines_naming);
		CHECK(strstr(last_line, want_text) != NULL, "the line '%s' does not say '%s'",
		      last_line, want_text);
	}
	if (threads) {
		struct worker w[8];
		for (int t = 0; t < threads; t++) {
			w[t] = (struct worker){
			    .ctx = ctx[t], .mask = mask[t], .fmask = fmask, .iters = 40000};
			if (pthread_create(&w[t].t, NULL, work, &w[t]))
				abort();
		}
		for (int t = 0; t < threads; t++)
			pthread_join(w[t].t, NULL);
	} else {
		for (int it = 0; it < 200; it++)
			for (int i = 0; i < 2; i++)
				one_collective(ctx[i], mask[i], fmask, (uint64_t)it + 1);
	}
	for (int i = 0; i < ncomm; i++)
		CHECK(finalize(ctx[i]) == CRUXF_SUCCESS, "finalize failed");
	if (fixture) {
		stats(&fs);
		printf("fixture v%d behind Crux v%d: %ld starts, %ld stops, %ld states, %ld with "
		       "parent, tag sum %llu\n",
		       fs.version, version, fs.starts, fs.stops, fs.states, fs.with_parent,
		       (unsigned long long)fs.tag_sum);
		CHECK(fs.finalizes == ncomm, "fixture finalizes %ld, want %d", fs.finalizes, ncomm);
		CHECK(fs.starts == want_starts, "fixture starts %ld, want %ld", fs.starts,
		      want_starts);
		CHECK(fs.stops == want_starts, "fixture stops %ld, want %ld", fs.stops,
		      want_starts);
		CHECK(fs.live == 0, "fixture events left live: %ld", fs.live);
		CHECK(fs.states == want_states, "fixture states %ld, want %ld", fs.states,
		      want_states);
		CHECK(fs.with_parent == want_parented, "fixture parents %ld, want %ld",
		      fs.with_parent, want_parented);
		CHECK(fs.foreign_parent == 0, "fixture got %ld parents that are not its handles",
		      fs.foreign_parent);
		CHECK(fs.foreign_handle == 0, "fixture got %ld handles that are not its own",
		      fs.foreign_handle);
		CHECK(fs.foreign_context == 0, "fixture got %ld contexts that are not its own",
		      fs.foreign_context);
		CHECK(fs.unasked == 0, "fixture got %ld events it did not ask for", fs.unasked);
		if (fs.version == 7)
			CHECK(fs.tag_sum == (uint64_t)want_tags, "fixture tag sum %llu, want %ld",
			      (unsigned long long)fs.tag_sum, want_tags);
	}
	if (!strncmp(getenv("CRUX_SHM_DIR"), "/tmp/crux-chain.", 16)) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", getenv("CRUX_SHM_DIR"));
		if (system(cmd) != 0)
			fprintf(stderr, "chain: could not remove %s\n", getenv("CRUX_SHM_DIR"));
	}
	printf("chain v%d: %s\n", version, fails ? "FAIL" : "PASS");
	return fails ? 1 : 0;
}
