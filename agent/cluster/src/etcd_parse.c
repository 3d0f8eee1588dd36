/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parsers of etcd's JSON gateway answers. etcd omits fields whose value is
 * zero (a missing field is 0 / false / empty), returns 64-bit integers as
 * JSON strings, and base64-encodes keys and values. Everything else — wrong
 * types, bad base64, negative revisions, absurd sizes — is CRUX_ERR_CORRUPT.
 */
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "crux/etcd.h"
#include "etcd_internal.h"

#define ETCD_JSON_DEPTH 24

crux_status_t crux_etcd_json_parse(const char *body, size_t len, json_object **out)
{
	if (!body || len == 0 || len > ETCD_MAX_BODY || len > INT_MAX)
		return CRUX_ERR_CORRUPT;
	json_tokener *tok = json_tokener_new_ex(ETCD_JSON_DEPTH);
	if (!tok)
		return CRUX_ERR_NOMEM;
	json_object *o = json_tokener_parse_ex(tok, body, (int)len);
	crux_status_t st = CRUX_OK;
	if (!o || json_tokener_get_error(tok) != json_tokener_success) {
		st = CRUX_ERR_CORRUPT;
		goto out;
	}
	/* Only whitespace may follow the object. */
	for (size_t i = json_tokener_get_parse_end(tok); i < len; i++) {
		if (body[i] != ' ' && body[i] != '\n' && body[i] != '\r' && body[i] != '\t') {
			st = CRUX_ERR_CORRUPT;
			goto out;
		}
	}
	if (!json_object_is_type(o, json_type_object))
		st = CRUX_ERR_CORRUPT;
out:
	json_tokener_free(tok);
	if (st != CRUX_OK) {
		json_object_put(o);
		return st;
	}
	*out = o;
	return CRUX_OK;
}

/* An optional member of an object: NULL when absent; CORRUPT when present
 * with another JSON type. */
static crux_status_t member(json_object *o, const char *name, json_type type, json_object **out)
{
	json_object *m = NULL;
	*out = NULL;
	if (!json_object_object_get_ex(o, name, &m) || !m)
		return CRUX_OK;
	if (!json_object_is_type(m, type))
		return CRUX_ERR_CORRUPT;
	*out = m;
	return CRUX_OK;
}

/* A 64-bit integer sent as a decimal string (or, leniently, as a number). */
crux_status_t crux_etcd_json_i64(json_object *o, const char *name, int64_t *out)
{
	json_object *m = NULL;
	*out = 0;
	if (!json_object_object_get_ex(o, name, &m) || !m)
		return CRUX_OK;
	if (json_object_is_type(m, json_type_int)) {
		errno = 0;
		int64_t v = json_object_get_int64(m);
		if (errno)
			return CRUX_ERR_CORRUPT;
		*out = v;
		return CRUX_OK;
	}
	if (!json_object_is_type(m, json_type_string))
		return CRUX_ERR_CORRUPT;
	const char *s = json_object_get_string(m);
	size_t n = (size_t)json_object_get_string_len(m);
	if (n == 0 || n > 20 || strlen(s) != n)
		return CRUX_ERR_CORRUPT;
	for (size_t i = s[0] == '-' ? 1 : 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return CRUX_ERR_CORRUPT;
	if (n == 1 && s[0] == '-')
		return CRUX_ERR_CORRUPT;
	char *end = NULL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end)
		return CRUX_ERR_CORRUPT;
	*out = v;
	return CRUX_OK;
}

static crux_status_t get_u64(json_object *o, const char *name, int64_t *out)
{
	int64_t v;
	crux_status_t st = crux_etcd_json_i64(o, name, &v);
	if (st != CRUX_OK)
		return st;
	if (v < 0)
		return CRUX_ERR_CORRUPT;
	*out = v;
	return CRUX_OK;
}

static crux_status_t get_bool(json_object *o, const char *name, bool *out)
{
	json_object *m;
	crux_status_t st = member(o, name, json_type_boolean, &m);
	if (st != CRUX_OK)
		return st;
	*out = m ? json_object_get_boolean(m) : false;
	return CRUX_OK;
}

/* A base64 member decoded into a fresh buffer (one NUL after the bytes). */
static crux_status_t get_bytes(json_object *o, const char *name, uint8_t **buf, size_t *len)
{
	json_object *m;
	crux_status_t st = member(o, name, json_type_string, &m);
	if (st != CRUX_OK)
		return st;
	const char *s = m ? json_object_get_string(m) : "";
	size_t n = m ? (size_t)json_object_get_string_len(m) : 0;
	if (n > ETCD_MAX_BODY)
		return CRUX_ERR_CORRUPT;
	uint8_t *b = malloc(n / 4 * 3 + 1);
	if (!b)
		return CRUX_ERR_NOMEM;
	size_t got = 0;
	st = crux_b64_decode(s, n, b, &got);
	if (st != CRUX_OK) {
		free(b);
		return st;
	}
	*buf = b;
	*len = got;
	return CRUX_OK;
}

/* The last header parsed by this thread (the transport copies it into the
 * handle that made the call: a handle is used by one thread at a time). */
static _Thread_local struct crux_etcd_identity last_header;

void crux_etcd_last_header(struct crux_etcd_identity *out)
{
	*out = last_header;
}

/* cluster_id and member_id: unsigned 64-bit (a string, all 20 digits may be
 * used); absent or unreadable: 0 (unknown, the check is skipped). */
static uint64_t header_id(json_object *h, const char *name)
{
	json_object *m;
	uint64_t v = 0;
	if (!json_object_object_get_ex(h, name, &m) || !json_object_is_type(m, json_type_string))
		return 0;
	const char *s = json_object_get_string(m);
	size_t n = (size_t)json_object_get_string_len(m);
	if (n == 0 || n > 20 || strlen(s) != n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return 0;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	return v;
}

static crux_status_t header_revision(json_object *o, int64_t *rev)
{
	json_object *h;
	crux_status_t st = member(o, "header", json_type_object, &h);
	if (st != CRUX_OK)
		return st;
	if (!h)
		return CRUX_ERR_CORRUPT; /* every etcd answer carries a header */
	st = get_u64(h, "revision", rev);
	if (st == CRUX_OK) {
		last_header.revision = *rev;
		last_header.cluster_id = header_id(h, "cluster_id");
		last_header.member_id = header_id(h, "member_id");
	}
	return st;
}

static void kv_free(struct crux_etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

static crux_status_t parse_kv(json_object *o, struct crux_etcd_kv *kv)
{
	struct crux_etcd_kv k = {0};
	crux_status_t st;
	if (!json_object_is_type(o, json_type_object))
		return CRUX_ERR_CORRUPT;
	if ((st = get_u64(o, "create_revision", &k.create_revision)) != CRUX_OK ||
	    (st = get_u64(o, "mod_revision", &k.mod_revision)) != CRUX_OK ||
	    (st = get_u64(o, "version", &k.version)) != CRUX_OK ||
	    (st = crux_etcd_json_i64(o, "lease", &k.lease)) != CRUX_OK)
		return st;
	if ((st = get_bytes(o, "key", &k.key, &k.key_len)) != CRUX_OK)
		return st;
	if ((st = get_bytes(o, "value", &k.value, &k.value_len)) != CRUX_OK) {
		kv_free(&k);
		return st;
	}
	if (k.key_len == 0 || k.mod_revision < k.create_revision) {
		kv_free(&k);
		return CRUX_ERR_CORRUPT;
	}
	*kv = k;
	return CRUX_OK;
}

void crux_etcd_range_free(struct crux_etcd_range *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		kv_free(&r->kvs[i]);
	free(r->kvs);
	memset(r, 0, sizeof(*r));
}

crux_status_t crux_etcd_range_from_json(json_object *o, struct crux_etcd_range *out)
{
	struct crux_etcd_range r = {0};
	json_object *kvs;
	crux_status_t st;
	if ((st = header_revision(o, &r.revision)) != CRUX_OK ||
	    (st = get_u64(o, "count", &r.count)) != CRUX_OK ||
	    (st = get_bool(o, "more", &r.more)) != CRUX_OK ||
	    (st = member(o, "kvs", json_type_array, &kvs)) != CRUX_OK)
		return st;
	size_t n = kvs ? json_object_array_length(kvs) : 0;
	if (n > 0) {
		r.kvs = calloc(n, sizeof(*r.kvs));
		if (!r.kvs)
			return CRUX_ERR_NOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		st = parse_kv(json_object_array_get_idx(kvs, i), &r.kvs[i]);
		if (st != CRUX_OK) {
			crux_etcd_range_free(&r);
			return st;
		}
		r.n = i + 1;
	}
	*out = r;
	return CRUX_OK;
}

crux_status_t crux_etcd_parse_range(const char *body, size_t len, struct crux_etcd_range *out)
{
	json_object *o;
	crux_status_t st = crux_etcd_json_parse(body, len, &o);
	if (st != CRUX_OK)
		return st;
	st = crux_etcd_range_from_json(o, out);
	json_object_put(o);
	return st;
}

crux_status_t crux_etcd_parse_header(const char *body, size_t len, int64_t *revision)
{
	json_object *o;
	crux_status_t st = crux_etcd_json_parse(body, len, &o);
	if (st != CRUX_OK)
		return st;
	int64_t rev;
	st = header_revision(o, &rev);
	json_object_put(o);
	if (st == CRUX_OK)
		*revision = rev;
	return st;
}

crux_status_t crux_etcd_parse_txn(const char *body, size_t len, bool *succeeded, int64_t *revision)
{
	json_object *o, *resp;
	crux_status_t st = crux_etcd_json_parse(body, len, &o);
	if (st != CRUX_OK)
		return st;
	int64_t rev = 0;
	bool ok = false;
	if ((st = header_revision(o, &rev)) != CRUX_OK ||
	    (st = get_bool(o, "succeeded", &ok)) != CRUX_OK ||
	    (st = member(o, "responses", json_type_array, &resp)) != CRUX_OK)
		goto out;
	if (resp && json_object_array_length(resp) > CRUX_ETCD_MAX_TXN_OPS)
		st = CRUX_ERR_CORRUPT;
out:
	json_object_put(o);
	if (st == CRUX_OK) {
		*succeeded = ok;
		*revision = rev;
	}
	return st;
}

crux_status_t crux_etcd_parse_grant(const char *body, size_t len, int64_t *id, int64_t *ttl)
{
	json_object *o;
	crux_status_t st = crux_etcd_json_parse(body, len, &o);
	if (st != CRUX_OK)
		return st;
	int64_t rev, i = 0, t = 0;
	if ((st = header_revision(o, &rev)) == CRUX_OK &&
	    (st = crux_etcd_json_i64(o, "ID", &i)) == CRUX_OK &&
	    (st = get_u64(o, "TTL", &t)) == CRUX_OK && (i == 0 || t == 0))
		st = CRUX_ERR_CORRUPT; /* a grant without an ID or TTL granted nothing */
	json_object_put(o);
	if (st == CRUX_OK) {
		*id = i;
		*ttl = t;
	}
	return st;
}

crux_status_t crux_etcd_parse_keepalive(const char *body, size_t len, int64_t *ttl)
{
	json_object *o, *res;
	crux_status_t st = crux_etcd_json_parse(body, len, &o);
	if (st != CRUX_OK)
		return st;
	int64_t t = 0, rev;
	if ((st = member(o, "error", json_type_object, &res)) == CRUX_OK && res)
		st = CRUX_ERR_REMOTE;
	if (st == CRUX_OK && (st = member(o, "result", json_type_object, &res)) == CRUX_OK) {
		if (!res)
			st = CRUX_ERR_CORRUPT;
		else if ((st = header_revision(res, &rev)) == CRUX_OK)
			st = get_u64(res, "TTL", &t);
	}
	json_object_put(o);
	if (st == CRUX_OK)
		*ttl = t;
	return st;
}

crux_status_t crux_etcd_parse_error(const char *body, size_t len, int64_t *code, char *msg,
				    size_t msglen)
{
	json_object *o, *m;
	crux_status_t st = crux_etcd_json_parse(body, len, &o);
	if (st != CRUX_OK)
		return st;
	int64_t c = 0;
	/* A stream error wraps the fields in an "error" object; a unary error
	 * has them at the top (and "error" as a string, dropped by etcd 3.6). */
	json_object *inner = NULL;
	if (json_object_object_get_ex(o, "error", &inner) &&
	    !json_object_is_type(inner, json_type_object))
		inner = NULL;
	json_object *src = inner ? inner : o;
	if ((st = crux_etcd_json_i64(src, inner ? "grpc_code" : "code", &c)) != CRUX_OK ||
	    (st = member(src, "message", json_type_string, &m)) != CRUX_OK)
		goto out;
	if (msglen > 0) {
		const char *s = m ? json_object_get_string(m) : "";
		size_t i = 0;
		/* Printable ASCII only: the message ends up in logs. */
		for (; s[i] && i + 1 < msglen; i++)
			msg[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
		msg[i] = '\0';
	}
	*code = c;
out:
	json_object_put(o);
	return st;
}

void crux_etcd_watch_msg_free(struct crux_etcd_watch_msg *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		kv_free(&m->events[i].kv);
	free(m->events);
	memset(m, 0, sizeof(*m));
}

crux_status_t crux_etcd_parse_watch(const char *line, size_t len, struct crux_etcd_watch_msg *out)
{
	json_object *o, *res, *evs, *err;
	struct crux_etcd_watch_msg w = {0};
	crux_status_t st = crux_etcd_json_parse(line, len, &o);
	if (st != CRUX_OK)
		return st;
	if ((st = member(o, "error", json_type_object, &err)) != CRUX_OK)
		goto out;
	if (err) {
		st = CRUX_ERR_REMOTE;
		goto out;
	}
	if ((st = member(o, "result", json_type_object, &res)) != CRUX_OK)
		goto out;
	if (!res) {
		st = CRUX_ERR_CORRUPT;
		goto out;
	}
	if ((st = header_revision(res, &w.revision)) != CRUX_OK ||
	    (st = get_bool(res, "created", &w.created)) != CRUX_OK ||
	    (st = get_bool(res, "canceled", &w.canceled)) != CRUX_OK ||
	    (st = get_u64(res, "compact_revision", &w.compact_revision)) != CRUX_OK ||
	    (st = member(res, "events", json_type_array, &evs)) != CRUX_OK)
		goto out;
	size_t n = evs ? json_object_array_length(evs) : 0;
	if (n > 0 && !(w.events = calloc(n, sizeof(*w.events)))) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *ev = json_object_array_get_idx(evs, i), *type, *kv;
		if (!json_object_is_type(ev, json_type_object)) {
			st = CRUX_ERR_CORRUPT;
			goto out;
		}
		if ((st = member(ev, "type", json_type_string, &type)) != CRUX_OK ||
		    (st = member(ev, "kv", json_type_object, &kv)) != CRUX_OK)
			goto out;
		const char *t = type ? json_object_get_string(type) : "PUT";
		if (!kv || (strcmp(t, "PUT") != 0 && strcmp(t, "DELETE") != 0)) {
			st = CRUX_ERR_CORRUPT;
			goto out;
		}
		w.events[i].type = strcmp(t, "PUT") == 0 ? CRUX_ETCD_EV_PUT : CRUX_ETCD_EV_DELETE;
		if ((st = parse_kv(kv, &w.events[i].kv)) != CRUX_OK)
			goto out;
		w.n = i + 1;
	}
out:
	json_object_put(o);
	if (st != CRUX_OK) {
		crux_etcd_watch_msg_free(&w);
		return st;
	}
	*out = w;
	return CRUX_OK;
}
