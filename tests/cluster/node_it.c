/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cluster nodes against a real etcd (started by etcd-client.sh): three hosts
 * publish views, one leads, all apply the same schedule; a job arrives and
 * every host applies it (also a host that does not step, through its wake
 * descriptor, and with a leader that steps only when its input watch says
 * so); the leader crashes (its lease left to expire): a
 * new leader takes over and reschedules without the dead host's job; etcd
 * frozen (SIGSTOP): every host keeps its schedule and says it is stale, then
 * recovers when etcd resumes. argv[1]: endpoints, argv[2]: etcd's pid.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "crux/cluster_node.h"
#include "node_fixture.h"

#define NN 3
static struct host H[NN] = {{.name = "h1", .addr = "10.0.0.1"},
			    {.name = "h2", .addr = "10.0.0.2"},
			    {.name = "h3", .addr = "10.0.0.3"}};

static void step_all(void)
{
	for (int i = 0; i < NN; i++)
		if (H[i].alive)
			(void)crux_cluster_step(H[i].n);
	struct timespec ts = {0, 50000000};
	nanosleep(&ts, NULL);
}

/* Every live host applied the same revision, which has job id at level lvl. */
static bool agreed(const char *id, int lvl)
{
	int64_t rev = -1;
	for (int i = 0; i < NN; i++) {
		if (!H[i].alive)
			continue;
		if (nfx_level_of(&H[i], id) != lvl || (rev >= 0 && H[i].rev != rev))
			return false;
		rev = H[i].rev;
	}
	return true;
}

static double wait_for(const char *id, int lvl, double limit)
{
	double t0 = nfx_now_s();
	while (!agreed(id, lvl)) {
		CHECK(nfx_now_s() - t0 < limit);
		step_all();
	}
	return nfx_now_s() - t0;
}

static int leaders(void)
{
	int n = 0;
	for (int i = 0; i < NN; i++) {
		struct crux_cluster_status s;
		if (!H[i].alive)
			continue;
		crux_cluster_get_status(H[i].n, &s);
		n += s.leader;
	}
	return n;
}

/* A job arrives on h2; only h2 and the leader step. The other hosts apply
 * the new schedule through their wake descriptor, as cruxd does between its
 * passes (crux_cluster_apply_received: no step, no etcd call). */
static double arrival_by_wake(void)
{
	int l = -1;
	for (int i = 0; i < NN; i++) {
		struct crux_cluster_status s;
		crux_cluster_get_status(H[i].n, &s);
		if (s.leader)
			l = i;
		CHECK(crux_cluster_wake_fd(H[i].n) >= 0);
	}
	CHECK(l >= 0);
	nfx_add_job(&H[1], "job-woken", 1);
	double t0 = nfx_now_s();
	while (!agreed("job-woken", 1)) {
		CHECK(nfx_now_s() - t0 < 10);
		(void)crux_cluster_step(H[1].n);
		if (l != 1)
			(void)crux_cluster_step(H[l].n);
		for (int i = 0; i < NN; i++) {
			struct pollfd p = {.fd = crux_cluster_wake_fd(H[i].n), .events = POLLIN};
			if (i != 1 && i != l && poll(&p, 1, 0) > 0)
				crux_cluster_apply_received(H[i].n);
		}
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
	}
	return nfx_now_s() - t0;
}

/* A job arrives on a host that is not the leader; it publishes in its one
 * step (cruxd's pass that saw the job). Nobody steps again on a timer: the
 * leader learns of the change from its input watch (its wake descriptor,
 * crux_cluster_step_due), plans and writes; every host applies on its
 * wake. Without the input watch the leader only saw it at its next pass. */
static double leader_by_wake(void)
{
	int l = -1, h = -1;
	for (int i = 0; i < NN; i++) {
		struct crux_cluster_status s;
		crux_cluster_get_status(H[i].n, &s);
		if (s.leader)
			l = i;
		else if (h < 0)
			h = i;
	}
	CHECK(l >= 0 && h >= 0);
	/* Let the leader's input watch start (its first term's step) and settle. */
	(void)crux_cluster_step(H[l].n);
	struct timespec settle = {0, 300000000};
	nanosleep(&settle, NULL);
	(void)crux_cluster_step(H[l].n);
	nfx_add_job(&H[h], "job-led", 1);
	double t0 = nfx_now_s();
	CHECK(crux_cluster_step(H[h].n) == CRUX_OK);
	/* The leader's lease (2 s) is not renewed meanwhile: the same leader must
	 * do it, well before another could take over. */
	while (!agreed("job-led", 1)) {
		struct pollfd p[NN];
		CHECK(nfx_now_s() - t0 < 1.5);
		for (int i = 0; i < NN; i++)
			p[i] =
			    (struct pollfd){.fd = crux_cluster_wake_fd(H[i].n), .events = POLLIN};
		if (poll(p, NN, 100) <= 0)
			continue;
		for (int i = 0; i < NN; i++) {
			if (crux_cluster_step_due(H[i].n))
				(void)crux_cluster_step(H[i].n);
			crux_cluster_apply_received(H[i].n);
		}
	}
	struct crux_cluster_status s;
	crux_cluster_get_status(H[l].n, &s);
	CHECK(s.leader);
	return nfx_now_s() - t0;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	pid_t etcd = (pid_t)atoi(argv[2]);
	for (int i = 0; i < NN; i++) {
		char err[256];
		struct crux_cluster_cfg c = {.etcd = {.endpoints = argv[1], .timeout_ms = 1000},
					     .cluster = "it",
					     .host = H[i].name,
					     .ttl_s = 2,
					     .plan = nfx_plan,
					     .apply = nfx_apply,
					     .arg = &H[i]};
		if (crux_cluster_open(&c, &H[i].n, err, sizeof(err)) != CRUX_OK) {
			fprintf(stderr, "open: %s\n", err);
			return 1;
		}
		snprintf(H[i].view.name, sizeof(H[i].view.name), "%s", H[i].name);
		CHECK(crux_addr_parse(H[i].addr, &H[i].view.addr) == CRUX_OK);
		H[i].alive = true;
	}
	/* job-a spans h1 and h2 (one rank each: merged 2 ranks -> level 2). */
	nfx_add_job(&H[0], "job-a", 1);
	nfx_add_job(&H[1], "job-a", 1);
	nfx_add_job(&H[2], "local-3", 3);
	printf("first schedule on every host after %.2f s\n", wait_for("job-a", 2, 10));
	CHECK(agreed("local-3", 3));
	CHECK(leaders() == 1);

	nfx_add_job(&H[1], "job-new", 1);
	printf("job arrival -> applied on every host: %.2f s\n", wait_for("job-new", 1, 10));
	printf("apply on arrival, without a step: %.2f s\n", arrival_by_wake());
	printf("the leader plans on its input watch, without a pass: %.2f s\n", leader_by_wake());

	/* The leader crashes; its lease is left to expire. */
	int l = -1;
	for (int i = 0; i < NN; i++) {
		struct crux_cluster_status s;
		crux_cluster_get_status(H[i].n, &s);
		if (s.leader)
			l = i;
	}
	CHECK(l >= 0);
	crux_cluster_abandon(H[l].n);
	H[l].alive = false;
	/* The survivors reschedule without the dead host's ranks. */
	const char *probe = l == 2 ? "job-a" : l == 0 ? "local-3" : "local-3";
	double t0 = nfx_now_s();
	while (
	    !(leaders() == 1 && agreed(probe, l == 2 ? 2 : 3) &&
	      (l == 2 ? nfx_level_of(&H[0], "local-3") < 0 : nfx_level_of(&H[2], "job-a") == 1))) {
		CHECK(nfx_now_s() - t0 < 2 + 6);
		step_all();
	}
	printf("leader %s crashed: new leader and schedule without it after %.2f s\n", H[l].name,
	       nfx_now_s() - t0);

	/* etcd frozen: schedules kept, stale said; then back. */
	int64_t before[NN];
	for (int i = 0; i < NN; i++)
		before[i] = H[i].rev;
	CHECK(kill(etcd, SIGSTOP) == 0);
	t0 = nfx_now_s();
	while (nfx_now_s() - t0 < 2.5)
		step_all();
	for (int i = 0; i < NN; i++) {
		struct crux_cluster_status s;
		if (!H[i].alive)
			continue;
		crux_cluster_get_status(H[i].n, &s);
		CHECK(s.stale);
		CHECK(H[i].rev == before[i] && s.applied_revision == before[i]);
	}
	CHECK(kill(etcd, SIGCONT) == 0);
	int k = l == 0 ? 1 : 0;
	nfx_add_job(&H[k], "after-thaw", 2);
	printf("etcd back: new job applied on every host after %.2f s\n",
	       wait_for("after-thaw", 2, 15));
	for (int i = 0; i < NN; i++) {
		struct crux_cluster_status s;
		if (!H[i].alive)
			continue;
		crux_cluster_get_status(H[i].n, &s);
		CHECK(!s.stale);
	}
	for (int i = 0; i < NN; i++) {
		if (H[i].alive)
			crux_cluster_close(H[i].n);
		crux_jv_free(&H[i].view);
	}
	printf("cluster nodes: all checks passed\n");
	return 0;
}
