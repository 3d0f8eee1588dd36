/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decision change -> first message on the new lane, verbs transport over the
 * software RDMA device (run with its firmware-latency mode on: QP create and
 * modify 0.1-1 ms each, as mlx5). One process holds a send and a receive
 * connection; the decision cycles through the classes of levels 0..3 (more
 * than the warm lanes keep), one change every IDLE_MS. Per change: from the
 * moment the sender takes the new decision at a message boundary until that
 * message (the first on the new lane) completed at both ends; beside it the
 * same 8-byte message without a change (the last one before each change).
 * Prints "switch_us P50 P99 MAX QPS_CREATED_PER_CHANGE" and
 * "steady_us P50 P99 MAX".
 * usage: cruxn-bench-laneswitch CHANGES IDLE_MS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "verbs/vx_transport.h"

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what)
{
	fprintf(stderr, "cruxn-bench-laneswitch: %s\n", what);
	exit(1);
}

static int wait_done(void *req)
{
	int done = 0;
	for (long i = 0; !done && i < 10000000; i++)
		if (cruxn_test(req, &done, NULL) != CRUXN_SUCCESS)
			return -1;
	return done ? 0 : -1;
}

/* one message; the receiver's side is tested meanwhile (it answers lane set-up) */
static int one(void *sc, void *rc, void *smr, void *rmr, char *sb, char *rb, size_t n)
{
	void *sreq = NULL, *rreq, *d = rb;
	size_t cap = n;
	int done = 0;
	if (cruxn_irecv(rc, 1, &d, &cap, NULL, &rmr, &rreq) != CRUXN_SUCCESS)
		return -1;
	while (!sreq) {
		if (cruxn_isend(sc, sb, n, 0, smr, &sreq) != CRUXN_SUCCESS)
			return -1;
		if (!sreq && cruxn_test(rreq, &done, NULL) != CRUXN_SUCCESS)
			return -1;
	}
	return wait_done(sreq) || wait_done(rreq) ? -1 : 0;
}

int main(int argc, char **argv)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	static char sb[4096], rb[4096];
	void *lc, *sc = NULL, *rc = NULL, *smr, *rmr;
	struct cruxn_class cls[4];
	int changes = argc > 1 ? atoi(argv[1]) : 100, idle_ms = argc > 2 ? atoi(argv[2]) : 30;

	if (changes < 1 || idle_ms < 0)
		die("usage: cruxn-bench-laneswitch CHANGES IDLE_MS");
	if (cruxn_init(NULL) != CRUXN_SUCCESS || cruxn_ctx.ops != &cruxn_verbs_ops)
		die("the verbs transport did not start (CRUX_TRANSPORT=verbs, CRUX_IBVERBS_LIB)");
	if (cruxn_tag_level_classes(cls, 4, true) != 4)
		die("fewer than 4 levels");
	if (cruxn_listen(0, handle, &lc) != CRUXN_SUCCESS)
		die("listen");
	for (int i = 0; (!sc || !rc) && i < 10000; i++) {
		if (!sc && cruxn_connect(0, -1, handle, &sc) != CRUXN_SUCCESS)
			die("connect");
		if (!rc && cruxn_accept(lc, &rc) != CRUXN_SUCCESS)
			die("accept");
		if (!sc || !rc)
			usleep(1000);
	}
	if (!sc || !rc)
		die("no connection");
	if (cruxn_reg_mr(sc, sb, sizeof(sb), CRUXN_PTR_HOST, &smr) != CRUXN_SUCCESS ||
	    cruxn_reg_mr(rc, rb, sizeof(rb), CRUXN_PTR_HOST, &rmr) != CRUXN_SUCCESS)
		die("regMr");
	struct vx_comm *s = sc;
	double *lat = calloc((size_t)changes, sizeof(*lat)),
	       *st = calloc((size_t)changes, sizeof(*st));
	unsigned long qps = 0;
	if (!lat || !st)
		die("out of memory");
	for (int k = 0; k < changes + 4; k++) {
		/* idle between decisions: both ends progress (lanes ahead are built now) */
		double until = now_us() + idle_ms * 1000.0, steady = 0;
		do {
			usleep(1000);
			double a = now_us();
			if (one(sc, rc, smr, rmr, sb, rb, 8))
				die("message failed");
			steady = now_us() - a;
		} while (now_us() < until);
		unsigned before = s->next_lane;
		s->b.tag.cls = cls[k % 4];
		double t0 = now_us();
		s->b.ops->boundary(&s->b, true, false);
		if (one(sc, rc, smr, rmr, sb, rb, 8))
			die("message failed");
		double t1 = now_us();
		if (s->cur->cls.tos != cls[k % 4].tos)
			die("the message did not go on the new lane");
		if (k >= 4) { /* the first cycle builds the lanes every arm needs once */
			lat[k - 4] = t1 - t0;
			st[k - 4] = steady;
			qps += (s->next_lane - before) * (unsigned long)s->nqps;
		}
	}
	qsort(lat, (size_t)changes, sizeof(*lat), cmp);
	size_t i99 = (size_t)(0.99 * (changes - 1) + 0.5);
	qsort(st, (size_t)changes, sizeof(*st), cmp);
	printf("switch_us %.1f %.1f %.1f %.2f\n", lat[changes / 2], lat[i99], lat[changes - 1],
	       (double)qps / changes);
	printf("steady_us %.1f %.1f %.1f\n", st[changes / 2], st[i99], st[changes - 1]);
	cruxn_dereg_mr(sc, smr);
	cruxn_dereg_mr(rc, rmr);
	cruxn_close_send(sc);
	cruxn_close_recv(rc);
	cruxn_close_listen(lc);
	cruxn_finalize();
	free(lat);
	free(st);
	return 0;
}
