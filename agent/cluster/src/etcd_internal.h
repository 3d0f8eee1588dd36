/* SPDX-License-Identifier: Apache-2.0 */
/* Shared between the etcd client's transport and its parsers. */
#ifndef CRUX_ETCD_INTERNAL_H
#define CRUX_ETCD_INTERNAL_H

#include <curl/curl.h>
#include <json-c/json.h>

#include "crux/etcd.h"

/* No answer (or watch line) larger than this is read. */
#define ETCD_MAX_BODY (64u << 20)

/* Parse one JSON object (trailing whitespace allowed). */
crux_status_t crux_etcd_json_parse(const char *body, size_t len, json_object **out);
/* A 64-bit integer member (string or number); 0 when absent. */
crux_status_t crux_etcd_json_i64(json_object *o, const char *name, int64_t *out);
crux_status_t crux_etcd_range_from_json(json_object *o, struct crux_etcd_range *out);

struct crux_etcd {
	CURL *curl;
	struct curl_slist *hdrs;
	char *eps[CRUX_ETCD_MAX_ENDPOINTS];
	size_t nep;
	size_t cur;
	char *ca, *cert, *key;
	long timeout_ms;
	char lasterr[320];
	struct crux_etcd_identity id; /* header of the last answer parsed */
};

/* The header the calling thread's last parse read. */
void crux_etcd_last_header(struct crux_etcd_identity *out);

struct etcd_buf {
	char *p;
	size_t len, cap;
};

/* Append to a growing buffer (a libcurl write callback; refuses past
 * ETCD_MAX_BODY). */
size_t crux_etcd_buf_write(char *data, size_t size, size_t nmemb, void *arg);
/* URL, headers, body, TLS and timeouts of one request on handle c. */
void crux_etcd_setup_handle(struct crux_etcd *e, CURL *c, const char *url, const char *body);
/* "key" (and "range_end" for a prefix) of a request object. */
crux_status_t crux_etcd_key_json(json_object *o, const char *kname, const void *key, size_t klen,
				 bool prefix);
/* A 64-bit integer as etcd's JSON wants it (a decimal string). */
void crux_etcd_add_i64(json_object *o, const char *name, int64_t v);

#endif
