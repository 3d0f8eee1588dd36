/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cluster nodes under faults on etcd's side (started by node-faults.sh):
 * three hosts in one process, lease TTL 2 s, and an operator writing etcd
 * directly, as etcdctl would:
 *   - an override changed on a host while etcd is frozen, then withdrawn,
 *     leaves another host's override of that job in etcd;
 *   - a well-formed schedule with a stale term is applied by no host, and
 *     the leader writes its own again; so for a value that is not a schedule;
 *   - a host's record deleted, or overwritten without a lease: republished;
 *   - the leader key deleted: the leader stops leading at once (no write
 *     needed to notice), one leader again;
 *   - the leader key overwritten by a plain put (no lease): the leader stops,
 *     the key is replaced by one on a lease, one leader again;
 *   - h3 reaches etcd through a TCP proxy (tcp_proxy.c): its open
 *     connections silently dropped (no RST), its watch is found dead by its
 *     deadline and restarted, and a new job reaches it; blackholed, h3 says
 *     it is stale (the others do not); healed, it catches up;
 *   - etcd restarted empty on the same endpoint (argv[3]: a script that does
 *     it): every host says it resynchronised, republishes, and applies the
 *     new leader's schedule; a new job reaches every host.
 * argv[1]: endpoints, argv[2]: etcd's pid, argv[3]: the restart script,
 * argv[4]: the proxy's endpoint (h3's), argv[5]: the proxy's pid.
 */
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
static struct crux_etcd *E; /* the operator's etcdctl */

static void step_all(void)
{
	for (int i = 0; i < NN; i++)
		(void)crux_cluster_step(H[i].n);
	struct timespec ts = {0, 50000000};
	nanosleep(&ts, NULL);
}

static void run_for(double s)
{
	double t0 = nfx_now_s();
	while (nfx_now_s() - t0 < s)
		step_all();
}

static bool agreed(const char *id, int lvl)
{
	for (int i = 0; i < NN; i++)
		if (nfx_level_of(&H[i], id) != lvl || H[i].rev != H[0].rev)
			return false;
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

static int leaders(int *which)
{
	int n = 0;
	for (int i = 0; i < NN; i++) {
		struct crux_cluster_status s;
		crux_cluster_get_status(H[i].n, &s);
		if (s.leader) {
			n++;
			if (which)
				*which = i;
		}
	}
	return n;
}

static bool get1(const char *key, struct crux_etcd_kv *out, char *val, size_t cap)
{
	struct crux_etcd_range r;
	CHECK(crux_etcd_get(E, key, strlen(key), false, &r) == CRUX_OK);
	bool found = r.n == 1;
	if (found) {
		*out = r.kvs[0];
		/* Bytes, not text: the leader's schedule is packed (zlib). */
		size_t n = r.kvs[0].value_len < cap - 1 ? r.kvs[0].value_len : cap - 1;
		memcpy(val, r.kvs[0].value, n);
		val[n] = '\0';
		out->value_len = n;
		out->key = out->value = NULL;
	}
	crux_etcd_range_free(&r);
	return found;
}

/* The schedule key holds a schedule of the current leader's term. */
static bool schedule_is_leaders(void)
{
	struct crux_etcd_kv kv, lk;
	static char v[1 << 16];
	char lv[64];
	struct crux_cv_schedule s;
	if (!get1("/crux/it/ctl/leader", &lk, lv, sizeof(lv)) || !lk.lease ||
	    !get1("/crux/it/ctl/schedule", &kv, v, sizeof(v)))
		return false;
	if (crux_cv_schedule_unpack(v, kv.value_len, &s) != CRUX_OK)
		return false;
	bool ok = s.term == lk.create_revision;
	crux_cv_schedule_free(&s);
	return ok;
}

static double wait_until(bool (*cond)(void), double limit, const char *what)
{
	double t0 = nfx_now_s();
	while (!cond()) {
		if (nfx_now_s() - t0 >= limit) {
			fprintf(stderr, "FAIL: %s within %.1f s\n", what, limit);
			exit(1);
		}
		step_all();
	}
	return nfx_now_s() - t0;
}

static bool one_leader_on_lease(void)
{
	struct crux_etcd_kv lk;
	char lv[64];
	return leaders(NULL) == 1 && get1("/crux/it/ctl/leader", &lk, lv, sizeof(lv)) && lk.lease;
}

static bool h3_record_ok(void)
{
	struct crux_etcd_kv kv;
	static char v[1 << 16];
	struct crux_job_view h;
	if (!get1("/crux/it/hosts/h3", &kv, v, sizeof(v)) || !kv.lease)
		return false;
	if (crux_cv_host_decode(v, strlen(v), &h) != CRUX_OK)
		return false;
	bool ok = h.njobs == 1 && !strcmp(h.name, "h3");
	crux_jv_free(&h);
	return ok;
}

/* h1's applied revision when etcd was restarted empty: the new store's are below it. */
static int64_t rev_before_restart;

static bool h1_on_new_store(void)
{
	return H[0].rev < rev_before_restart;
}

static bool all_resynced(void)
{
	static double t0;
	bool all = true;
	if (!t0)
		t0 = nfx_now_s();
	for (int i = 0; i < NN; i++) {
		struct crux_cluster_status s;
		crux_cluster_get_status(H[i].n, &s);
		if (!s.resyncs && nfx_now_s() - t0 > 9.5)
			fprintf(stderr, "h%d: not resynchronised (applied %lld, stale %d)\n", i + 1,
				(long long)s.applied_revision, s.stale);
		all &= s.resyncs > 0;
	}
	return all;
}

int main(int argc, char **argv)
{
	char err[256];
	if (argc != 6)
		return 2;
	pid_t etcd = (pid_t)atoi(argv[2]), proxy = (pid_t)atoi(argv[5]);
	struct crux_etcd_opts eo = {.endpoints = argv[1], .timeout_ms = 1000};
	CHECK(crux_etcd_open(&eo, &E, err, sizeof(err)) == CRUX_OK);
	for (int i = 0; i < NN; i++) {
		struct crux_cluster_cfg c = {
		    .etcd = {.endpoints = i == 2 ? argv[4] : argv[1], .timeout_ms = 1000},
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
	}
	nfx_add_job(&H[0], "job-a", 1);
	nfx_add_job(&H[1], "job-a", 1);
	nfx_add_job(&H[2], "local-3", 3);
	printf("first schedule on every host after %.2f s\n", wait_for("job-a", 2, 10));
	CHECK(leaders(NULL) == 1);

	/* ---- a withdrawn override never removes another host's ---- */
	uint64_t x = crux_job_key_of("job-a");
	char ka[96], l1[128], l2[128], v[256];
	struct crux_etcd_kv kv;
	snprintf(ka, sizeof(ka), "/crux/it/overrides/0x%016llx", (unsigned long long)x);
	snprintf(l1, sizeof(l1), "job 0x%016llx level 1", (unsigned long long)x);
	snprintf(l2, sizeof(l2), "job 0x%016llx level 0", (unsigned long long)x);
	CHECK(crux_cluster_override(H[0].n, x, NULL, 0, l1, strlen(l1)) == CRUX_OK);
	run_for(0.3);
	CHECK(get1(ka, &kv, v, sizeof(v)) && !strcmp(v, l1));
	CHECK(kill(etcd, SIGSTOP) == 0);
	CHECK(crux_cluster_override(H[1].n, x, NULL, 0, l2, strlen(l2)) == CRUX_OK);
	(void)crux_cluster_step(H[1].n); /* fails: etcd frozen */
	struct crux_cluster_status cs;
	crux_cluster_get_status(H[1].n, &cs);
	CHECK(cs.overrides_pending);
	/* withdrawn (cruxctl restores the file): back to before the change */
	CHECK(crux_cluster_override(H[1].n, x, l2, strlen(l2), NULL, 0) == CRUX_OK);
	CHECK(kill(etcd, SIGCONT) == 0);
	run_for(1.0);
	crux_cluster_get_status(H[1].n, &cs);
	CHECK(!cs.overrides_pending);
	CHECK(get1(ka, &kv, v, sizeof(v)) && !strcmp(v, l1));
	/* a clear on another host removes it (the operator's explicit change) */
	CHECK(crux_cluster_override(H[2].n, x, l1, strlen(l1), NULL, 0) == CRUX_OK);
	run_for(0.3);
	CHECK(!get1(ka, &kv, v, sizeof(v)));
	printf("override withdrawn during an etcd freeze: h1's stays; a clear on h3 removes it\n");
	wait_for("job-a", 2, 10);

	/* ---- a well-formed schedule with a stale term ---- */
	struct crux_cv_schedule forged = {.input_revision = 1, .term = 1, .levels = 4, .njobs = 1};
	struct crux_cv_decision d = {.key = crux_job_key_of("forged"), .level = 0};
	char *txt;
	size_t len;
	forged.jobs = &d;
	CHECK(crux_cv_schedule_encode(&forged, &txt, &len) == CRUX_OK);
	CHECK(crux_etcd_put(E, "/crux/it/ctl/schedule", 21, txt, len, 0, NULL) == CRUX_OK);
	free(txt);
	run_for(0.5);
	for (int i = 0; i < NN; i++)
		CHECK(nfx_level_of(&H[i], "forged") < 0 && nfx_level_of(&H[i], "job-a") == 2);
	printf("schedule rewritten by the leader after a stale-term one: %.2f s\n",
	       wait_until(schedule_is_leaders, 3, "the leader rewrote its schedule"));
	/* ... and a value that is no schedule at all */
	CHECK(crux_etcd_put(E, "/crux/it/ctl/schedule", 21, "{garbage", 8, 0, NULL) == CRUX_OK);
	printf("schedule rewritten by the leader after garbage: %.2f s\n",
	       wait_until(schedule_is_leaders, 3, "the leader rewrote its schedule"));
	wait_for("job-a", 2, 3);

	/* ---- a host's record deleted, then overwritten without a lease ---- */
	CHECK(crux_etcd_delete(E, "/crux/it/hosts/h3", 17, false, NULL) == CRUX_OK);
	printf("deleted record of h3 republished after %.2f s\n",
	       wait_until(h3_record_ok, 2 * 1.1 + 1.5, "h3's record republished"));
	CHECK(crux_etcd_put(E, "/crux/it/hosts/h3", 17, "{}", 2, 0, NULL) == CRUX_OK);
	printf("overwritten record of h3 republished after %.2f s\n",
	       wait_until(h3_record_ok, 2 * 1.1 + 1.5, "h3's record republished"));
	wait_for("local-3", 3, 5);

	/* ---- the leader key deleted: the leader knows at once ---- */
	int old = -1;
	CHECK(leaders(&old) == 1);
	CHECK(crux_etcd_delete(E, "/crux/it/ctl/leader", 19, false, NULL) == CRUX_OK);
	double t0 = nfx_now_s(), two = 0, t2 = 0;
	for (;;) {
		/* The old leader stops at its next step after its watcher saw the
		 * delete; another may have taken over a step earlier: two hosts say
		 * they lead for at most that long (before: until the old leader
		 * tried to write, never in an idle cluster). */
		if (leaders(NULL) > 1) {
			if (!t2)
				t2 = nfx_now_s();
		} else if (t2) {
			two += nfx_now_s() - t2;
			t2 = 0;
		}
		CHECK(two + (t2 ? nfx_now_s() - t2 : 0) < 0.5);
		if (leaders(NULL) == 1 && one_leader_on_lease() && schedule_is_leaders())
			break;
		CHECK(nfx_now_s() - t0 < 3);
		step_all();
	}
	printf("leader key deleted: one leader on a lease with its schedule after %.2f s (two "
	       "hosts said they lead for %.2f s)\n",
	       nfx_now_s() - t0, two);

	/* ---- the leader key detached from its lease by a plain put ---- */
	CHECK(leaders(&old) == 1);
	CHECK(crux_etcd_put(E, "/crux/it/ctl/leader", 19, H[old].name, 2, 0, NULL) == CRUX_OK);
	t0 = nfx_now_s();
	printf("leader key put without a lease: one leader on a lease after %.2f s\n",
	       wait_until(one_leader_on_lease, 2 + 2, "a leader on a lease again"));
	wait_until(schedule_is_leaders, 3, "the new leader's schedule");
	wait_for("job-a", 2, 5);

	/* ---- h3's connections silently dropped: its watch is found dead ---- */
	struct crux_cluster_status s3;
	CHECK(kill(proxy, SIGUSR1) == 0);
	nfx_add_job(&H[0], "after-drop", 1);
	t0 = nfx_now_s();
	/* deadline: TTL 2 s + two beats of 0.67 s; then a re-list and a step */
	while (!agreed("after-drop", 1)) {
		CHECK(nfx_now_s() - t0 < 2 + 2 * 0.67 + 4);
		step_all();
	}
	crux_cluster_get_status(H[2].n, &s3);
	CHECK(s3.watch_restarts >= 1);
	printf("h3's connections dropped silently: watch restarted, new job applied after %.2f s\n",
	       nfx_now_s() - t0);
	run_for(0.5);
	crux_cluster_get_status(H[2].n, &s3);
	CHECK(!s3.stale);

	/* ---- h3 blackholed: stale, the others not; healed: back ---- */
	CHECK(kill(proxy, SIGUSR2) == 0);
	t0 = nfx_now_s();
	for (;;) {
		step_all();
		crux_cluster_get_status(H[2].n, &s3);
		if (s3.stale)
			break;
		CHECK(nfx_now_s() - t0 < 2 + 2 * 0.67 + 2);
	}
	printf("h3 blackholed: stale after %.2f s\n", nfx_now_s() - t0);
	for (int i = 0; i < 2; i++) {
		crux_cluster_get_status(H[i].n, &cs);
		CHECK(!cs.stale);
	}
	CHECK(kill(proxy, SIGHUP) == 0);
	nfx_add_job(&H[1], "after-heal", 2);
	t0 = nfx_now_s();
	while (!agreed("after-heal", 2)) {
		CHECK(nfx_now_s() - t0 < 2 + 2 * 0.67 + 4);
		step_all();
	}
	run_for(0.3);
	crux_cluster_get_status(H[2].n, &s3);
	CHECK(!s3.stale);
	printf("h3 healed: not stale, new job applied after %.2f s\n", nfx_now_s() - t0);

	/* ---- etcd restarted empty on the same endpoint ---- */
	int64_t before = H[0].rev;
	CHECK(system(argv[3]) == 0);
	t0 = nfx_now_s();
	wait_until(all_resynced, 10, "every host says it resynchronised");
	wait_until(h3_record_ok, 5, "h3's record published on the new etcd");
	wait_for("job-a", 2, 10);
	/* job-a was already on level 2 in the old store's schedule: wait for h1 to apply
	 * the new store's, which may come a step after the resynchronisation. */
	rev_before_restart = before;
	wait_until(h1_on_new_store, 10, "h1 applies the new store's schedule (a lower revision)");
	printf("etcd restarted empty: every host resynchronised and applies revision %lld (was "
	       "%lld) after %.2f s\n",
	       (long long)H[0].rev, (long long)before, nfx_now_s() - t0);
	crux_cluster_get_status(H[0].n, &cs);
	printf("  h1 says: %s\n", cs.resync_why);
	nfx_add_job(&H[2], "after-restore", 2);
	printf("new job applied on every host after %.2f s\n", wait_for("after-restore", 2, 10));

	for (int i = 0; i < NN; i++) {
		crux_cluster_close(H[i].n);
		crux_jv_free(&H[i].view);
	}
	crux_etcd_close(E);
	printf("cluster node faults: all checks passed\n");
	return 0;
}
