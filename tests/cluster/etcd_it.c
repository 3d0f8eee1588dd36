/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The etcd client against a real etcd (started by etcd-client.sh): put, get,
 * prefix range, delete, txn on both branches, leases (grant, keepalive,
 * revoke: its keys vanish, keepalive then says expired), watch from a past
 * revision and a watch ended by its stop callback. argv[1]: endpoints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crux/etcd.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "FAIL %s:%d: %s (%s)\n", __FILE__, __LINE__, #c,           \
				crux_etcd_last_error(e));                                          \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

struct seen {
	int puts, dels;
	int64_t last_rev, until;
};

static bool on_watch(void *arg, const struct crux_etcd_watch_msg *m)
{
	struct seen *s = arg;
	for (size_t i = 0; i < m->n; i++) {
		if (m->events[i].type == CRUX_ETCD_EV_PUT)
			s->puts++;
		else
			s->dels++;
		s->last_rev = m->events[i].kv.mod_revision;
	}
	return s->last_rev < s->until;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double stop_at;
static bool stop_later(void *arg)
{
	(void)arg;
	return now_s() >= stop_at;
}

static bool never(void *arg, const struct crux_etcd_watch_msg *m)
{
	(void)arg;
	(void)m;
	return true;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s ENDPOINTS\n", argv[0]);
		return 2;
	}
	struct crux_etcd *e = NULL;
	char err[256];
	struct crux_etcd_opts o = {.endpoints = argv[1], .timeout_ms = 3000};
	if (crux_etcd_open(&o, &e, err, sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "open: %s\n", err);
		return 1;
	}
	int64_t r1, r2, r3, rd;
	static const char bin[] = {'b', 0, (char)0xff, 'x'};
	CHECK(crux_etcd_put(e, "it/a", 4, "one", 3, 0, &r1) == CRUX_OK);
	CHECK(crux_etcd_put(e, "it/b", 4, bin, sizeof(bin), 0, &r2) == CRUX_OK);
	CHECK(crux_etcd_put(e, "iu", 2, "outside", 7, 0, &r3) == CRUX_OK);
	CHECK(r1 > 0 && r2 == r1 + 1 && r3 == r2 + 1);
	CHECK(strcmp(crux_etcd_endpoint(e), "http://127.0.0.1:1") != 0);

	struct crux_etcd_range r;
	CHECK(crux_etcd_get(e, "it/", 3, true, &r) == CRUX_OK);
	CHECK(r.n == 2 && r.count == 2 && r.revision == r3);
	CHECK(r.kvs[0].key_len == 4 && memcmp(r.kvs[0].key, "it/a", 4) == 0);
	CHECK(r.kvs[1].value_len == sizeof(bin) && memcmp(r.kvs[1].value, bin, sizeof(bin)) == 0);
	CHECK(r.kvs[0].create_revision == r1 && r.kvs[0].mod_revision == r1);
	crux_etcd_range_free(&r);
	CHECK(crux_etcd_get(e, "nothing", 7, false, &r) == CRUX_OK && r.n == 0);
	crux_etcd_range_free(&r);

	/* txn: create-if-absent succeeds once, then fails. */
	struct crux_etcd_cmp c = {.target = CRUX_ETCD_CMP_CREATE,
				  .result = CRUX_ETCD_EQUAL,
				  .key = "it/leader",
				  .klen = 9,
				  .number = 0};
	struct crux_etcd_op put = {
	    .kind = CRUX_ETCD_OP_PUT, .key = "it/leader", .klen = 9, .value = "me", .vlen = 2};
	bool ok = false;
	int64_t tr;
	CHECK(crux_etcd_txn(e, &c, 1, &put, 1, NULL, 0, &ok, &tr) == CRUX_OK && ok);
	CHECK(crux_etcd_txn(e, &c, 1, &put, 1, NULL, 0, &ok, &tr) == CRUX_OK && !ok);
	/* A compare on the value, with an op in the failure branch. */
	struct crux_etcd_cmp cv = {.target = CRUX_ETCD_CMP_VALUE,
				   .result = CRUX_ETCD_EQUAL,
				   .key = "it/leader",
				   .klen = 9,
				   .value = "you",
				   .vlen = 3};
	struct crux_etcd_op del = {.kind = CRUX_ETCD_OP_DELETE, .key = "iu", .klen = 2};
	CHECK(crux_etcd_txn(e, &cv, 1, &put, 1, &del, 1, &ok, &tr) == CRUX_OK && !ok);
	CHECK(crux_etcd_get(e, "iu", 2, false, &r) == CRUX_OK && r.n == 0);
	crux_etcd_range_free(&r);

	/* Leases. */
	int64_t id = 0, ttl = 0;
	CHECK(crux_etcd_lease_grant(e, 5, &id, &ttl) == CRUX_OK && id != 0 && ttl == 5);
	CHECK(crux_etcd_put(e, "it/leased", 9, "x", 1, id, NULL) == CRUX_OK);
	CHECK(crux_etcd_lease_keepalive(e, id, &ttl) == CRUX_OK && ttl == 5);
	CHECK(crux_etcd_get(e, "it/leased", 9, false, &r) == CRUX_OK && r.n == 1 &&
	      r.kvs[0].lease == id);
	crux_etcd_range_free(&r);
	CHECK(crux_etcd_lease_revoke(e, id) == CRUX_OK);
	CHECK(crux_etcd_get(e, "it/leased", 9, false, &r) == CRUX_OK && r.n == 0);
	crux_etcd_range_free(&r);
	CHECK(crux_etcd_lease_keepalive(e, id, &ttl) == CRUX_ERR_NOENT);
	CHECK(crux_etcd_lease_revoke(e, id) == CRUX_ERR_NOENT);
	CHECK(crux_etcd_put(e, "it/leased", 9, "x", 1, id, NULL) == CRUX_ERR_NOENT);

	/* Watch from the first put: puts of a, b, leader, leased (iu is outside);
	 * deletes of leased (revoked) and a. */
	CHECK(crux_etcd_delete(e, "it/a", 4, false, &rd) == CRUX_OK);
	struct seen s = {.until = rd};
	CHECK(crux_etcd_watch(e, "it/", 3, true, r1, on_watch, NULL, &s) == CRUX_OK);
	CHECK(s.puts == 4 && s.dels == 2 && s.last_rev == rd);

	/* A watch on quiet keys ends when its stop callback says so. */
	stop_at = now_s() + 1.2;
	double t0 = now_s();
	CHECK(crux_etcd_watch(e, "quiet/", 6, true, 0, never, stop_later, NULL) == CRUX_OK);
	CHECK(now_s() - t0 < 5.0);
	crux_etcd_close(e);
	printf("etcd client: all checks passed\n");
	return 0;
}
