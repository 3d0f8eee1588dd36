/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: every parser of etcd gateway answers (range, header, txn,
 * lease grant/keepalive, error, watch line) and base64, on the same bytes.
 * A parser that accepts must hand back consistent values (keys non-empty,
 * revisions not negative, buffers NUL-terminated); a violation aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/etcd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_kv(const struct crux_etcd_kv *kv)
{
	if (kv->key_len == 0 || kv->key[kv->key_len] != 0 || kv->value[kv->value_len] != 0 ||
	    kv->create_revision < 0 || kv->mod_revision < kv->create_revision)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct crux_etcd_range r;
	if (crux_etcd_parse_range(s, size, &r) == CRUX_OK) {
		if (r.revision < 0 || r.count < 0)
			abort();
		for (size_t i = 0; i < r.n; i++)
			check_kv(&r.kvs[i]);
		crux_etcd_range_free(&r);
	}
	int64_t rev = -1, id = 0, ttl = -1;
	if (crux_etcd_parse_header(s, size, &rev) == CRUX_OK && rev < 0)
		abort();
	bool ok;
	if (crux_etcd_parse_txn(s, size, &ok, &rev) == CRUX_OK && rev < 0)
		abort();
	if (crux_etcd_parse_grant(s, size, &id, &ttl) == CRUX_OK && (id == 0 || ttl <= 0))
		abort();
	if (crux_etcd_parse_keepalive(s, size, &ttl) == CRUX_OK && ttl < 0)
		abort();
	char msg[64];
	if (crux_etcd_parse_error(s, size, &id, msg, sizeof(msg)) == CRUX_OK &&
	    strlen(msg) >= sizeof(msg))
		abort();
	struct crux_etcd_watch_msg w;
	if (crux_etcd_parse_watch(s, size, &w) == CRUX_OK) {
		if (w.revision < 0 || w.compact_revision < 0)
			abort();
		for (size_t i = 0; i < w.n; i++) {
			if (w.events[i].type != CRUX_ETCD_EV_PUT &&
			    w.events[i].type != CRUX_ETCD_EV_DELETE)
				abort();
			check_kv(&w.events[i].kv);
		}
		crux_etcd_watch_msg_free(&w);
	}
	uint8_t *out = malloc(size / 4 * 3 + 1);
	size_t n = 0;
	if (out && crux_b64_decode(s, size, out, &n) == CRUX_OK) {
		/* Canonical: re-encoding gives the input back. */
		char *enc = malloc(crux_b64_encoded_len(n) + 1);
		if (enc) {
			crux_b64_encode(out, n, enc);
			if (strlen(enc) != size || memcmp(enc, s, size) != 0)
				abort();
		}
		free(enc);
	}
	free(out);
	return 0;
}
