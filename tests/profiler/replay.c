/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay: loads libnccl-profiler-crux.so as NCCL does (dlopen, then the
 * ncclProfiler_vN symbol of the version asked for) and replays a recorded
 * event sequence: the events NCCL emits for a training step's calls, with
 * the step's compute and communication as real time spent. It measures what
 * it actually spent (the truth) and checks the profile record the plugin
 * publishes against it.
 *
 *   replay PLUGIN VERSION TRACE [--preload LIB [--preload-first]]
 *
 * Trace lines (see tests/profiler/traces/):
 *   comm ID RANK NRANKS            create a communicator (init)
 *   iterations N                   repeat the body N times
 *   body                           the lines after this one form one iteration
 *   compute MS                     time outside NCCL
 *   call ID FUNC COUNT DTYPE MS    one call in an implicit group; MS of communication
 *   group ID                       ncclGroupStart
 *   add ID FUNC COUNT DTYPE [PEER] a call queued in the open group
 *   launch ID MS                   ncclGroupEnd: the group runs for MS
 *   mark                           crux_iteration_mark() through the preload (if loaded)
 *   tag N                          v7: the user tag of the calls that follow (0: untagged)
 *   steptag                        v7: the user tag of the calls that follow is the
 *                                  iteration's number + 1 (a framework's step counter)
 *   reservedsteptag                v7: the same with the top bit set (NCCL's reserved
 *                                  tags): must not be taken for marks
 *
 * --preload LIB loads libcrux-preload.so first (RTLD_GLOBAL, as LD_PRELOAD
 * would make it visible). With --preload-first the preload claims the
 * process before NCCL initialises the plugin: the plugin must then stay
 * passive and publish nothing. Exit 0 when every check passes.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crux/nccl_profiler_abi.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"

#define MAX_COMMS 8
#define MAX_LINES 256

static int version;
static const cruxf_profiler_v5_t *p5; /* v5 and v6 */
static const cruxf_profiler_v7_t *p7;
static const cruxf_profiler_v4_t *p4;
static uint64_t user_tag;	   /* v7: the tag calls carry now */
static bool step_tags, const_tags; /* the trace tags each step / one tag throughout */
static void *ctxs[MAX_COMMS];
static int masks[MAX_COMMS];
static void *open_group[MAX_COMMS];
/* The truth per iteration: when it ended (CLOCK_MONOTONIC), compute, communication. */
#define MAX_ITERS 1024
static double it_end[MAX_ITERS], it_comp[MAX_ITERS], it_comm[MAX_ITERS];
static int fails;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "replay: FAIL: " __VA_ARGS__);                             \
			fputc('\n', stderr);                                                       \
			fails++;                                                                   \
		}                                                                                  \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spend ms of wall time; returns what was spent. */
static double spend(double ms)
{
	double t0 = now_s(), until = t0 + ms / 1e3;
	struct timespec ts;

	while (now_s() < until - 0.0005) {
		double left = until - now_s() - 0.0004;

		ts.tv_sec = 0;
		ts.tv_nsec = left > 0 ? (long)(left * 1e9) : 0;
		nanosleep(&ts, NULL);
	}
	while (now_s() < until)
		;
	return now_s() - t0;
}

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
	(void)level;
	(void)flags;
	(void)file;
	(void)line;
	(void)fmt;
}

static void *start(int id, uint64_t type, void *parent, const char *func, size_t count,
		   const char *dtype, int peer)
{
	void *h = NULL;

	if (version >= 5) {
		/* A v7 descriptor: v5 and v6 read the same members at the same offsets. */
		cruxf_descr_v7_t d;

		memset(&d, 0, sizeof(d));
		d.type = type;
		d.parentObj = parent;
		if (type == CRUXF_EV_COLL_API) {
			d.collApi.func = func;
			d.collApi.count = count;
			d.collApi.datatype = dtype;
			d.collApi.root = peer;
			d.collApi.stream = (void *)0x5157;
			d.collApi.userTag = version >= 7 ? user_tag : 0;
		} else if (type == CRUXF_EV_P2P_API) {
			d.p2pApi.func = func;
			d.p2pApi.count = count;
			d.p2pApi.datatype = dtype;
			d.p2pApi.stream = (void *)0x5157;
			d.p2pApi.userTag = version >= 7 ? user_tag : 0;
		}
		if (!(masks[id] & (int)type))
			return NULL;
		if (version >= 7)
			p7->startEvent(ctxs[id], &h, &d);
		else
			p5->startEvent(ctxs[id], &h, (cruxf_descr_v5_t *)&d);
	} else {
		cruxf_descr_v4_t d;

		memset(&d, 0, sizeof(d));
		d.type = (uint8_t)type;
		d.parentObj = parent;
		if (type == CRUXF_EV_COLL) {
			d.coll.func = func;
			d.coll.count = count;
			d.coll.datatype = dtype;
			d.coll.root = peer;
		} else if (type == CRUXF_EV_P2P) {
			d.p2p.func = func;
			d.p2p.count = count;
			d.p2p.datatype = dtype;
			d.p2p.peer = peer;
		}
		if (masks[id] & (int)type)
			p4->startEvent(ctxs[id], &h, &d);
	}
	return h;
}

static void stop(void *h)
{
	if (h)
		(version >= 7 ? p7->stopEvent : version >= 5 ? p5->stopEvent : p4->stopEvent)(h);
}

static void state(void *h, int s)
{
	if (h)
		(version >= 7	? p7->recordEventState
		 : version >= 5 ? p5->recordEventState
				: p4->recordEventState)(h, s, NULL);
}

/* NCCL passes static strings (ncclFuncToString, ncclDatatypeToString): one pointer per name. */
static const char *intern(const char *name)
{
	static char *names[64];
	static int n;

	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return names[i];
	if (n == 64 || !(names[n] = strdup(name)))
		abort();
	return names[n++];
}

static bool is_p2p(const char *f)
{
	return !strcmp(f, "Send") || !strcmp(f, "Recv");
}

/*
 * One call as NCCL emits its events. v5+: GroupApi (outermost), CollApi or
 * P2pApi around the enqueue, the launch state, GroupApi stop. v4: a Group
 * around the launch with its Coll/P2p tasks.
 */
static void group_begin(int id)
{
	if (version >= 5) {
		open_group[id] = start(id, CRUXF_EV_GROUP_API, NULL, NULL, 0, NULL, -1);
		state(open_group[id], CRUXF_STATE_GROUP_START_API_STOP);
	} else {
		open_group[id] = NULL; /* v4 groups exist only at launch */
	}
}

struct queued {
	const char *func, *dtype;
	size_t count;
	int peer;
};
static struct queued q[MAX_COMMS][64];
static int nq[MAX_COMMS];

static void group_add(int id, const char *func, size_t count, const char *dtype, int peer)
{
	if (version >= 5) {
		void *h = start(id, is_p2p(func) ? CRUXF_EV_P2P_API : CRUXF_EV_COLL_API,
				open_group[id], func, count, dtype, peer);
		stop(h);
	} else if (nq[id] < 64) {
		struct queued *e = &q[id][nq[id]++];
		e->func = func;
		e->dtype = dtype;
		e->count = count;
		e->peer = peer;
	}
}

static double group_launch(int id, double ms)
{
	double spent;

	if (version >= 5) {
		state(open_group[id], CRUXF_STATE_GROUP_END_API_START);
		spent = spend(ms);
		stop(open_group[id]);
	} else {
		void *g = start(id, CRUXF_EV_GROUP, NULL, NULL, 0, NULL, -1);
		for (int i = 0; i < nq[id]; i++)
			stop(start(id, is_p2p(q[id][i].func) ? CRUXF_EV_P2P : CRUXF_EV_COLL, g,
				   q[id][i].func, q[id][i].count, q[id][i].dtype, q[id][i].peer));
		nq[id] = 0;
		spent = spend(ms);
		stop(g);
	}
	open_group[id] = NULL;
	return spent;
}

static int find_record(void *arg, const struct crux_prof_snapshot *s)
{
	struct crux_prof_snapshot *out = arg;

	if (s->pid == getpid())
		*out = *s;
	return 0;
}

int main(int argc, char **argv)
{
	char lines[MAX_LINES][160], sym[32];
	int nlines = 0, body = -1, iters = 1;
	const char *preload = NULL;
	bool preload_first = false;
	void (*mark)(void) = NULL;
	FILE *f;
	struct crux_prof_snapshot s;

	memset(&s, 0, sizeof(s));

	if (argc < 4) {
		fprintf(stderr,
			"usage: replay PLUGIN VERSION TRACE [--preload LIB [--preload-first]]\n");
		return 2;
	}
	version = atoi(argv[2]);
	for (int i = 4; i < argc; i++) {
		if (!strcmp(argv[i], "--preload") && i + 1 < argc)
			preload = argv[++i];
		else if (!strcmp(argv[i], "--preload-first"))
			preload_first = true;
	}
	if (preload) {
		void *pl = dlopen(preload, RTLD_NOW | RTLD_GLOBAL);
		if (!pl) {
			fprintf(stderr, "replay: %s\n", dlerror());
			return 2;
		}
		mark = (void (*)(void))dlsym(pl, "crux_iteration_mark");
		if (preload_first) {
			int (*claim)(int, void (*)(void)) =
			    (int (*)(int, void (*)(void)))dlsym(pl, "crux_profile_claim");
			CHECK(claim && claim(1, NULL) == 1, "the preload could not claim first");
		}
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "replay: %s\n", dlerror());
		return 2;
	}
	snprintf(sym, sizeof(sym), "ncclProfiler_v%d", version);
	if (version >= 7)
		p7 = dlsym(lib, sym);
	else if (version >= 5)
		p5 = dlsym(lib, sym);
	else
		p4 = dlsym(lib, sym);
	if (!p7 && !p5 && !p4) {
		fprintf(stderr, "replay: %s not exported\n", sym);
		return 2;
	}
	/* A private record directory unless the caller named one. */
	char tmpdir[] = "/tmp/crux-replay.XXXXXX";
	bool own_dir = false;
	if (!getenv("CRUX_SHM_DIR")) {
		if (!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			return 2;
		}
		setenv("CRUX_SHM_DIR", tmpdir, 1);
		own_dir = true;
	}
	f = fopen(argv[3], "r");
	if (!f) {
		perror(argv[3]);
		return 2;
	}
	while (nlines < MAX_LINES && fgets(lines[nlines], sizeof(lines[0]), f)) {
		char *l = lines[nlines];
		l[strcspn(l, "\n#")] = '\0';
		if (l[strspn(l, " \t")] == '\0')
			continue;
		if (!strncmp(l, "body", 4))
			body = nlines;
		else
			nlines++;
	}
	fclose(f);
	if (body < 0) {
		fprintf(stderr, "replay: %s has no 'body' line\n", argv[3]);
		return 2;
	}
	/* Set-up lines before the body: communicators, iteration count. */
	for (int i = 0; i < body; i++) {
		int id, rank, n;
		if (sscanf(lines[i], "comm %d %d %d", &id, &rank, &n) == 3 && id >= 0 &&
		    id < MAX_COMMS) {
			if (version >= 7)
				p7->init(&ctxs[id], 0x1234 + (uint64_t)id, &masks[id], "replay", 1,
					 n, rank, logger);
			else if (version >= 5)
				p5->init(&ctxs[id], 0x1234 + (uint64_t)id, &masks[id], "replay", 1,
					 n, rank, logger);
			else
				p4->init(&ctxs[id], &masks[id], "replay", 0x1234, 1, n, rank,
					 logger);
		} else if (sscanf(lines[i], "iterations %d", &n) == 1) {
			iters = n;
		}
	}
	if (preload_first) {
		CHECK(masks[0] == 0 && ctxs[0] == NULL,
		      "the preload claimed first, yet the plugin asked for events (mask 0x%x)",
		      masks[0]);
	} else {
		CHECK(masks[0] != 0 && ctxs[0] != NULL, "the plugin asked for no events");
	}
	for (int it = 0; it < iters; it++) {
		double c_it = 0, m_it = 0, t_start = now_s();
		for (int i = body; i < nlines; i++) {
			char fn[32], dt[32];
			int id, peer = -1;
			size_t count;
			double ms;
			const char *l = lines[i];

			if (sscanf(l, "compute %lf", &ms) == 1) {
				c_it += spend(ms);
			} else if (sscanf(l, "call %d %31s %zu %31s %lf", &id, fn, &count, dt,
					  &ms) == 5) {
				group_begin(id);
				group_add(id, intern(fn), count, intern(dt), -1);
				m_it += group_launch(id, ms);
			} else if (sscanf(l, "group %d", &id) == 1) {
				group_begin(id);
			} else if (sscanf(l, "add %d %31s %zu %31s %d", &id, fn, &count, dt,
					  &peer) >= 4) {
				group_add(id, intern(fn), count, intern(dt), peer);
			} else if (sscanf(l, "launch %d %lf", &id, &ms) == 2) {
				m_it += group_launch(id, ms);
			} else if (!strncmp(l, "reservedsteptag", 15)) {
				user_tag = (1ull << 63) | ((uint64_t)it + 1);
				const_tags = true; /* as good as no tag: the detector's */
			} else if (!strncmp(l, "steptag", 7)) {
				user_tag = (uint64_t)it + 1;
				step_tags = true;
			} else if (sscanf(l, "tag %zu", &count) == 1) {
				user_tag = count;
				const_tags = true;
			} else if (!strncmp(l, "mark", 4)) {
				if (mark)
					mark();
			}
		}
		/*
		 * Everything outside NCCL is compute to the profiler, this driver's
		 * own work between steps included: the truth is the step's wall time
		 * minus the communication it spent.
		 */
		(void)c_it;
		if (it > 0 && it - 1 < MAX_ITERS)
			it_comp[it - 1] += t_start - it_end[it - 1];
		if (it < MAX_ITERS) {
			it_end[it] = now_s();
			it_comp[it] = it_end[it] - t_start - m_it;
			it_comm[it] = m_it;
		}
		/* The first iterations warm up the detector; the record is read after them. */
		if (it >= iters / 3) {
			/* The newest window that saw iterations (the record holds one window). */
			struct crux_prof_snapshot now;
			memset(&now, 0, sizeof(now));
			crux_prof_scan(getenv("CRUX_SHM_DIR"), 0, find_record, &now, NULL);
			/* Prefer the fullest window: jitter weighs least there. */
			if (now.has_compute &&
			    (!s.has_compute || now.compute.iterations >= s.compute.iterations))
				s = now;
		}
	}
	if (preload_first) {
		CHECK(!s.has_compute || !(s.compute.flags & CRUX_PROF_F_SRC_PROFILER),
		      "the plugin published although the preload claimed the process");
	} else {
		/* The truth over the iterations that ended inside the record's window. */
		double w1 = (double)s.compute.window_end_ns / 1e9, w0 = w1 - s.compute.window_s;
		double c = 0, m = 0, t;
		int n = 0;
		for (int i = 0; i < iters && i < MAX_ITERS; i++)
			if (it_end[i] > w0 + 1e-4 && it_end[i] <= w1 + 1e-4) {
				c += it_comp[i];
				m += it_comm[i];
				n++;
			}
		if (n) {
			c /= n;
			m /= n;
		}
		t = c + m;
		CHECK(s.has_compute, "no profile record published for pid %d", (int)getpid());
		CHECK(s.compute.flags & CRUX_PROF_F_SRC_PROFILER,
		      "record not marked as the plugin's");
		CHECK(s.compute.iterations > 0, "no iteration detected");
		printf("replay v%d %s: truth compute %.3f ms comm %.3f ms iter %.3f ms | profile "
		       "compute %.3f comm %.3f iter %.3f (%llu iterations, flags 0x%x)\n",
		       version, argv[3], c * 1e3, m * 1e3, t * 1e3, s.compute.compute_s * 1e3,
		       s.compute.comm_s * 1e3, s.compute.iter_time_s * 1e3,
		       (unsigned long long)s.compute.iterations, s.compute.flags);
		CHECK(fabs(s.compute.iter_time_s - t) <= 0.05 * t + 5e-4,
		      "iteration %.3f ms vs %.3f", s.compute.iter_time_s * 1e3, t * 1e3);
		CHECK(fabs(s.compute.comm_s - m) <= 0.05 * m + 5e-4,
		      "communication %.3f ms vs %.3f", s.compute.comm_s * 1e3, m * 1e3);
		CHECK(fabs(s.compute.compute_s - c) <= 0.05 * c + 5e-4, "compute %.3f ms vs %.3f",
		      s.compute.compute_s * 1e3, c * 1e3);
		if (mark)
			CHECK(s.compute.flags & CRUX_PROF_F_ITER_MARKED,
			      "crux_iteration_mark() did not reach the plugin");
		/* v7: step tags are the marks; one unchanging tag leaves the detector in charge. */
		if (version >= 7 && step_tags && !getenv("CRUX_ITERATION_MARK"))
			CHECK(s.compute.flags & CRUX_PROF_F_ITER_MARKED,
			      "the step tags did not mark the iterations");
		if (version >= 7 && const_tags && !step_tags && !mark)
			CHECK(!(s.compute.flags & CRUX_PROF_F_ITER_MARKED),
			      "tags that name no steps (unchanging or NCCL's reserved) were taken "
			      "for marks");
	}
	for (int id = 0; id < MAX_COMMS; id++)
		if (ctxs[id])
			(version >= 7	? p7->finalize
			 : version >= 5 ? p5->finalize
					: p4->finalize)(ctxs[id]);
	if (own_dir) {
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "replay: could not remove %s\n", tmpdir);
	}
	return fails ? 1 : 0;
}
