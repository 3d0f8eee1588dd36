/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The etcd client over TLS (etcd-tls.sh): with the CA and a client
 * certificate every call works; without the client certificate, or trusting
 * another CA, the call fails with an error that names the endpoint.
 * argv: ENDPOINT CA CERT KEY.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/etcd.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);               \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static struct crux_etcd *client(const char *ep, const char *ca, const char *cert, const char *key)
{
	struct crux_etcd *e = NULL;
	char err[256];
	struct crux_etcd_opts o = {
	    .endpoints = ep, .ca_file = ca, .cert_file = cert, .key_file = key, .timeout_ms = 3000};
	CHECK(crux_etcd_open(&o, &e, err, sizeof(err)) == CRUX_OK);
	return e;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	struct crux_etcd *e = client(argv[1], argv[2], argv[3], argv[4]);
	int64_t rev, id, ttl;
	struct crux_etcd_range r;
	crux_status_t st = crux_etcd_put(e, "tls/k", 5, "v", 1, 0, &rev);
	if (st != CRUX_OK)
		fprintf(stderr, "put over TLS: %s: %s\n", crux_status_str(st),
			crux_etcd_last_error(e));
	CHECK(st == CRUX_OK && rev > 0);
	CHECK(crux_etcd_get(e, "tls/", 4, true, &r) == CRUX_OK && r.n == 1);
	crux_etcd_range_free(&r);
	CHECK(crux_etcd_lease_grant(e, 5, &id, &ttl) == CRUX_OK);
	CHECK(crux_etcd_lease_revoke(e, id) == CRUX_OK);
	crux_etcd_close(e);

	/* No client certificate: etcd refuses the handshake. */
	e = client(argv[1], argv[2], NULL, NULL);
	CHECK(crux_etcd_get(e, "tls/k", 5, false, &r) == CRUX_ERR_REMOTE);
	CHECK(strstr(crux_etcd_last_error(e), "127.0.0.1") != NULL);
	fprintf(stderr, "without a client certificate: %s\n", crux_etcd_last_error(e));
	crux_etcd_close(e);
	/* Trusting the client certificate as CA: the server is not verified. */
	e = client(argv[1], argv[3], argv[3], argv[4]);
	CHECK(crux_etcd_get(e, "tls/k", 5, false, &r) == CRUX_ERR_REMOTE);
	fprintf(stderr, "with the wrong CA: %s\n", crux_etcd_last_error(e));
	crux_etcd_close(e);
	printf("etcd TLS: all checks passed\n");
	return 0;
}
