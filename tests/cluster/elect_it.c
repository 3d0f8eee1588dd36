/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election against a real etcd: A wins, B loses and learns who leads;
 * A stops renewing its lease (a frozen leader); B takes over within the TTL
 * (+ margin) and A's fenced write is then refused, so it cannot overwrite
 * B's schedule. argv[1]: endpoints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crux/elect.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);               \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct crux_etcd *client(const char *eps)
{
	struct crux_etcd *e = NULL;
	char err[256];
	struct crux_etcd_opts o = {.endpoints = eps, .timeout_ms = 3000};
	if (crux_etcd_open(&o, &e, err, sizeof(err)) != CRUX_OK) {
		fprintf(stderr, "open: %s\n", err);
		exit(1);
	}
	return e;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	const char *lk = "el/leader", *sk = "el/schedule";
	struct crux_etcd *a = client(argv[1]), *b = client(argv[1]);
	int64_t la, lb, ttl, ta = 0, tb = 0, rev;
	char holder[64];
	CHECK(crux_etcd_lease_grant(a, 2, &la, &ttl) == CRUX_OK);
	CHECK(crux_etcd_lease_grant(b, 2, &lb, &ttl) == CRUX_OK);
	CHECK(crux_elect_campaign(a, lk, "agent-a", la, &ta, holder, sizeof(holder)) == CRUX_OK);
	CHECK(ta > 0 && strcmp(holder, "agent-a") == 0);
	/* Campaigning again while leader keeps the same term. */
	int64_t again = 0;
	CHECK(crux_elect_campaign(a, lk, "agent-a", la, &again, NULL, 0) == CRUX_OK && again == ta);
	CHECK(crux_elect_campaign(b, lk, "agent-b", lb, &tb, holder, sizeof(holder)) == CRUX_OK);
	CHECK(tb == 0 && strcmp(holder, "agent-a") == 0);
	CHECK(crux_elect_fenced_put(a, lk, ta, 0, sk, "from-a", 6, &rev) == CRUX_OK);
	CHECK(crux_elect_fenced_put(b, lk, tb, 0, sk, "from-b", 6, &rev) == CRUX_ERR_PERM);
	CHECK(crux_elect_fenced_put(b, lk, ta + 1, 0, sk, "from-b", 6, &rev) == CRUX_ERR_PERM);

	/* A freezes (no more renewals); B renews and campaigns every 200 ms. */
	double t0 = now_s(), next_ka = t0;
	while (tb == 0 && now_s() - t0 < 10) {
		if (now_s() >= next_ka) {
			CHECK(crux_etcd_lease_keepalive(b, lb, &ttl) == CRUX_OK);
			next_ka = now_s() + 0.6;
		}
		CHECK(crux_elect_campaign(b, lk, "agent-b", lb, &tb, holder, sizeof(holder)) ==
		      CRUX_OK);
		if (tb == 0) {
			struct timespec ts = {0, 200000000};
			nanosleep(&ts, NULL);
		}
	}
	double took = now_s() - t0;
	printf("takeover after %.2f s (lease TTL 2 s)\n", took);
	CHECK(tb > ta);
	CHECK(took < 2 + 3); /* TTL plus etcd's expiry granularity, with margin */
	CHECK(crux_elect_fenced_put(b, lk, tb, 0, sk, "from-b", 6, &rev) == CRUX_OK);
	/* The deposed leader wakes up and tries to write: fenced. */
	CHECK(crux_elect_fenced_put(a, lk, ta, 0, sk, "from-a", 6, &rev) == CRUX_ERR_PERM);
	CHECK(crux_etcd_lease_keepalive(a, la, &ttl) == CRUX_ERR_NOENT);
	struct crux_etcd_range r;
	CHECK(crux_etcd_get(a, sk, strlen(sk), false, &r) == CRUX_OK && r.n == 1);
	CHECK(r.kvs[0].value_len == 6 && memcmp(r.kvs[0].value, "from-b", 6) == 0);
	crux_etcd_range_free(&r);
	CHECK(crux_elect_resign(a, lk, ta) == CRUX_ERR_PERM);
	CHECK(crux_elect_resign(b, lk, tb) == CRUX_OK);
	CHECK(crux_etcd_get(a, lk, strlen(lk), false, &r) == CRUX_OK && r.n == 0);
	crux_etcd_range_free(&r);
	CHECK(crux_etcd_lease_revoke(b, lb) == CRUX_OK);
	crux_etcd_close(a);
	crux_etcd_close(b);
	printf("election: all checks passed\n");
	return 0;
}
