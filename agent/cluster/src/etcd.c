/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd client transport: one libcurl easy handle per client (connections
 * are reused), endpoints tried in turn starting from the last one that
 * answered, every request JSON-encoded with json-c.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/etcd.h"
#include "crux/log.h"
#include "etcd_internal.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *dup_opt(const char *s, bool *fail)
{
	if (!s || !*s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*fail = true;
	return d;
}

static crux_status_t parse_endpoints(struct crux_etcd *e, const char *list, char *err,
				     size_t errlen)
{
	const char *p = list;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		while (n > 0 && p[n - 1] == '/')
			n--;
		bool http = n > 7 && strncmp(p, "http://", 7) == 0;
		bool https = n > 8 && strncmp(p, "https://", 8) == 0;
		if (!http && !https) {
			snprintf(err, errlen,
				 "etcd endpoint '%.*s' is not a URL: write http://HOST:PORT or "
				 "https://HOST:PORT, several separated by commas",
				 (int)(n > 80 ? 80 : n), p);
			return CRUX_ERR_INVAL;
		}
		for (size_t i = 0; i < n; i++) {
			if (p[i] <= ' ' || p[i] == 0x7f) {
				snprintf(err, errlen,
					 "etcd endpoint '%.*s' contains a space or a control "
					 "character: remove it",
					 (int)(n > 80 ? 80 : n), p);
				return CRUX_ERR_INVAL;
			}
		}
		if (e->nep == CRUX_ETCD_MAX_ENDPOINTS || n > 255) {
			snprintf(err, errlen,
				 "too many etcd endpoints or one longer than 255 bytes "
				 "(at most %d): shorten the list",
				 CRUX_ETCD_MAX_ENDPOINTS);
			return CRUX_ERR_RANGE;
		}
		if (!(e->eps[e->nep] = strndup(p, n)))
			return CRUX_ERR_NOMEM;
		e->nep++;
		p = comma ? comma + 1 : p + strlen(p);
	}
	if (e->nep == 0) {
		snprintf(err, errlen,
			 "no etcd endpoint given: set --etcd/CRUX_ETCD to "
			 "http://HOST:PORT[,...]");
		return CRUX_ERR_INVAL;
	}
	return CRUX_OK;
}

crux_status_t crux_etcd_open(const struct crux_etcd_opts *opts, struct crux_etcd **out, char *err,
			     size_t errlen)
{
	crux_status_t st = CRUX_ERR_NOMEM;
	if (errlen)
		err[0] = '\0';
	if (!opts || !opts->endpoints || !out) {
		snprintf(err, errlen, "etcd: no options given");
		return CRUX_ERR_INVAL;
	}
	if ((opts->cert_file && *opts->cert_file) != (opts->key_file && *opts->key_file)) {
		snprintf(err, errlen,
			 "etcd: a client certificate needs its key and a key its "
			 "certificate: give both files or neither");
		return CRUX_ERR_INVAL;
	}
	if (opts->timeout_ms < 0) {
		snprintf(err, errlen, "etcd: negative timeout: give milliseconds >= 0");
		return CRUX_ERR_INVAL;
	}
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		snprintf(err, errlen, "etcd: libcurl failed to initialise: %s",
			 curl_easy_strerror(curl_init_rc));
		return CRUX_ERR_UNSUPPORTED;
	}
	struct crux_etcd *e = calloc(1, sizeof(*e));
	if (!e)
		goto fail;
	bool oom = false;
	e->ca = dup_opt(opts->ca_file, &oom);
	e->cert = dup_opt(opts->cert_file, &oom);
	e->key = dup_opt(opts->key_file, &oom);
	e->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 5000;
	if (oom)
		goto fail;
	if ((st = parse_endpoints(e, opts->endpoints, err, errlen)) != CRUX_OK)
		goto fail;
	st = CRUX_ERR_NOMEM;
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	if (!h)
		goto fail;
	e->hdrs = h;
	/* A member without quorum answers at once instead of hanging. */
	if (!(h = curl_slist_append(e->hdrs, "Grpc-Metadata-hasleader: true")))
		goto fail;
	e->hdrs = h;
	if (!(e->curl = curl_easy_init()))
		goto fail;
	*out = e;
	return CRUX_OK;
fail:
	if (st == CRUX_ERR_NOMEM)
		snprintf(err, errlen, "etcd: out of memory");
	crux_etcd_close(e);
	return st;
}

void crux_etcd_close(struct crux_etcd *e)
{
	if (!e)
		return;
	if (e->curl)
		curl_easy_cleanup(e->curl);
	curl_slist_free_all(e->hdrs);
	for (size_t i = 0; i < e->nep; i++)
		free(e->eps[i]);
	free(e->ca);
	free(e->cert);
	free(e->key);
	free(e);
}

const char *crux_etcd_endpoint(const struct crux_etcd *e)
{
	return e->eps[e->cur];
}

void crux_etcd_identity(const struct crux_etcd *e, struct crux_etcd_identity *out)
{
	*out = e->id;
}

const char *crux_etcd_last_error(const struct crux_etcd *e)
{
	return e->lasterr;
}

size_t crux_etcd_buf_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct etcd_buf *b = arg;
	size_t n = size * nmemb;
	if (n > ETCD_MAX_BODY - b->len)
		return 0; /* a hostile answer does not exhaust memory */
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

void crux_etcd_setup_handle(struct crux_etcd *e, CURL *c, const char *url, const char *body)
{
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->hdrs);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (e->ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, e->ca);
	if (e->cert) {
		curl_easy_setopt(c, CURLOPT_SSLCERT, e->cert);
		curl_easy_setopt(c, CURLOPT_SSLKEY, e->key);
	}
}

/* Map an etcd/gRPC error code to a status. */
static crux_status_t grpc_status(int64_t code)
{
	switch (code) {
	case 3: /* INVALID_ARGUMENT */
	case 9: /* FAILED_PRECONDITION */
		return CRUX_ERR_INVAL;
	case 5: /* NOT_FOUND (lease) */
		return CRUX_ERR_NOENT;
	case 11: /* OUT_OF_RANGE (compacted revision) */
		return CRUX_ERR_STALE;
	case 4: /* DEADLINE_EXCEEDED */
		return CRUX_ERR_TIMEOUT;
	default:
		return CRUX_ERR_REMOTE;
	}
}

/*
 * POST body to path; on 200 the answer is in *resp (caller frees). A
 * transport failure or a 503 (no quorum) moves on to the next endpoint; any
 * other HTTP error is etcd's answer and is returned.
 */
static crux_status_t etcd_call(struct crux_etcd *e, const char *path, json_object *req,
			       struct etcd_buf *resp)
{
	const char *body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	if (!body)
		return CRUX_ERR_NOMEM;
	crux_status_t st = CRUX_ERR_REMOTE;
	for (size_t k = 0; k < e->nep; k++) {
		size_t idx = (e->cur + k) % e->nep;
		char url[320];
		snprintf(url, sizeof(url), "%s%s", e->eps[idx], path);
		struct etcd_buf b = {0};
		crux_etcd_setup_handle(e, e->curl, url, body);
		curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, e->timeout_ms);
		curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, crux_etcd_buf_write);
		curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, &b);
		CURLcode rc = curl_easy_perform(e->curl);
		long http = 0;
		curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &http);
		if (rc != CURLE_OK) {
			snprintf(e->lasterr, sizeof(e->lasterr), "%s: %s", e->eps[idx],
				 curl_easy_strerror(rc));
			st = rc == CURLE_OPERATION_TIMEDOUT ? CRUX_ERR_TIMEOUT : CRUX_ERR_REMOTE;
			free(b.p);
			continue;
		}
		if (http == 200 && b.len > 0) {
			e->cur = idx;
			*resp = b;
			return CRUX_OK;
		}
		int64_t code = 0;
		char msg[160] = "";
		if (b.len == 0 ||
		    crux_etcd_parse_error(b.p, b.len, &code, msg, sizeof(msg)) != CRUX_OK)
			snprintf(msg, sizeof(msg), "unreadable answer");
		snprintf(e->lasterr, sizeof(e->lasterr), "%s: HTTP %ld: %s", e->eps[idx], http,
			 msg);
		free(b.p);
		if (http == 503 || http == 0 || http == 200) {
			st = CRUX_ERR_REMOTE;
			continue; /* no quorum on this member, or nothing said: try another */
		}
		return grpc_status(code);
	}
	return st;
}

/* The request object starts with "key" (and "range_end" for a prefix). */
crux_status_t crux_etcd_key_json(json_object *o, const char *kname, const void *key, size_t klen,
				 bool prefix)
{
	if (klen == 0 || klen > CRUX_ETCD_MAX_VALUE)
		return CRUX_ERR_INVAL;
	char *enc = malloc(crux_b64_encoded_len(klen) + 1);
	if (!enc)
		return CRUX_ERR_NOMEM;
	crux_b64_encode(key, klen, enc);
	json_object_object_add(o, kname, json_object_new_string(enc));
	free(enc);
	if (!prefix)
		return CRUX_OK;
	/* range_end = the key with its last byte + 1 (carrying past 0xff). */
	uint8_t *end = malloc(klen);
	if (!end)
		return CRUX_ERR_NOMEM;
	memcpy(end, key, klen);
	size_t n = klen;
	while (n > 0 && end[n - 1] == 0xff)
		n--;
	if (n == 0) {
		end[0] = 0; /* "\0": every key from key on */
		n = 1;
	} else {
		end[n - 1]++;
	}
	enc = malloc(crux_b64_encoded_len(n) + 1);
	if (!enc) {
		free(end);
		return CRUX_ERR_NOMEM;
	}
	crux_b64_encode(end, n, enc);
	json_object_object_add(o, "range_end", json_object_new_string(enc));
	free(enc);
	free(end);
	return CRUX_OK;
}

static crux_status_t add_bytes(json_object *o, const char *name, const void *v, size_t n)
{
	if (n > CRUX_ETCD_MAX_VALUE)
		return CRUX_ERR_RANGE;
	char *enc = malloc(crux_b64_encoded_len(n) + 1);
	if (!enc)
		return CRUX_ERR_NOMEM;
	crux_b64_encode(v, n, enc);
	json_object_object_add(o, name, json_object_new_string(enc));
	free(enc);
	return CRUX_OK;
}

void crux_etcd_add_i64(json_object *o, const char *name, int64_t v)
{
	char s[32];
	snprintf(s, sizeof(s), "%lld", (long long)v);
	json_object_object_add(o, name, json_object_new_string(s));
}

/* Run one request: build, call, hand the answer to parse. */
typedef crux_status_t (*parse_fn)(const char *body, size_t len, void *out);

static crux_status_t call_parse(struct crux_etcd *e, const char *path, json_object *req,
				parse_fn parse, void *out)
{
	struct etcd_buf b = {0};
	crux_status_t st = etcd_call(e, path, req, &b);
	if (st == CRUX_OK) {
		st = parse(b.p, b.len, out);
		if (st == CRUX_OK) {
			uint64_t k = e->id.answers + 1;
			crux_etcd_last_header(&e->id);
			e->id.answers = k;
		}
		if (st == CRUX_ERR_CORRUPT)
			snprintf(e->lasterr, sizeof(e->lasterr), "%s: malformed answer to %s",
				 e->eps[e->cur], path);
	}
	free(b.p);
	return st;
}

static crux_status_t p_range(const char *b, size_t n, void *out)
{
	return crux_etcd_parse_range(b, n, out);
}

static crux_status_t p_header(const char *b, size_t n, void *out)
{
	return crux_etcd_parse_header(b, n, out);
}

crux_status_t crux_etcd_get_at(struct crux_etcd *e, const void *key, size_t klen, bool prefix,
			       bool keys_only, int64_t revision, struct crux_etcd_range *out)
{
	json_object *req = json_object_new_object();
	if (!req)
		return CRUX_ERR_NOMEM;
	crux_status_t st = crux_etcd_key_json(req, "key", key, klen, prefix);
	if (st == CRUX_OK && keys_only)
		json_object_object_add(req, "keys_only", json_object_new_boolean(1));
	if (st == CRUX_OK && revision > 0)
		crux_etcd_add_i64(req, "revision", revision);
	if (st == CRUX_OK)
		st = call_parse(e, "/v3/kv/range", req, p_range, out);
	json_object_put(req);
	return st;
}

crux_status_t crux_etcd_get(struct crux_etcd *e, const void *key, size_t klen, bool prefix,
			    struct crux_etcd_range *out)
{
	return crux_etcd_get_at(e, key, klen, prefix, false, 0, out);
}

crux_status_t crux_etcd_put(struct crux_etcd *e, const void *key, size_t klen, const void *val,
			    size_t vlen, int64_t lease, int64_t *revision)
{
	json_object *req = json_object_new_object();
	if (!req)
		return CRUX_ERR_NOMEM;
	int64_t rev = 0;
	crux_status_t st = crux_etcd_key_json(req, "key", key, klen, false);
	if (st == CRUX_OK)
		st = add_bytes(req, "value", val, vlen);
	if (st == CRUX_OK && lease)
		crux_etcd_add_i64(req, "lease", lease);
	if (st == CRUX_OK)
		st = call_parse(e, "/v3/kv/put", req, p_header, &rev);
	json_object_put(req);
	if (st == CRUX_OK && revision)
		*revision = rev;
	return st;
}

crux_status_t crux_etcd_delete(struct crux_etcd *e, const void *key, size_t klen, bool prefix,
			       int64_t *revision)
{
	json_object *req = json_object_new_object();
	if (!req)
		return CRUX_ERR_NOMEM;
	int64_t rev = 0;
	crux_status_t st = crux_etcd_key_json(req, "key", key, klen, prefix);
	if (st == CRUX_OK)
		st = call_parse(e, "/v3/kv/deleterange", req, p_header, &rev);
	json_object_put(req);
	if (st == CRUX_OK && revision)
		*revision = rev;
	return st;
}

static crux_status_t ops_json(json_object *arr, const struct crux_etcd_op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		json_object *op = json_object_new_object(), *inner = json_object_new_object();
		if (!op || !inner) {
			json_object_put(op);
			json_object_put(inner);
			return CRUX_ERR_NOMEM;
		}
		bool put = ops[i].kind == CRUX_ETCD_OP_PUT;
		json_object_object_add(op, put ? "request_put" : "request_delete_range", inner);
		json_object_array_add(arr, op);
		crux_status_t st = crux_etcd_key_json(inner, "key", ops[i].key, ops[i].klen,
						      !put && ops[i].prefix);
		if (st == CRUX_OK && put)
			st = add_bytes(inner, "value", ops[i].value, ops[i].vlen);
		if (st != CRUX_OK)
			return st;
		if (put && ops[i].lease)
			crux_etcd_add_i64(inner, "lease", ops[i].lease);
	}
	return CRUX_OK;
}

static const char *const target_names[] = {"VERSION", "CREATE", "MOD", "VALUE", "LEASE"};
static const char *const target_fields[] = {"version", "create_revision", "mod_revision", "value",
					    "lease"};
static const char *const result_names[] = {"EQUAL", "GREATER", "LESS", "NOT_EQUAL"};

struct txn_out {
	bool ok;
	int64_t rev;
};

static crux_status_t p_txn(const char *b, size_t n, void *out)
{
	struct txn_out *t = out;
	return crux_etcd_parse_txn(b, n, &t->ok, &t->rev);
}

crux_status_t crux_etcd_txn(struct crux_etcd *e, const struct crux_etcd_cmp *cmp, size_t ncmp,
			    const struct crux_etcd_op *ok_ops, size_t nok,
			    const struct crux_etcd_op *fail_ops, size_t nfail, bool *succeeded,
			    int64_t *revision)
{
	if (ncmp + nok + nfail > CRUX_ETCD_MAX_TXN_OPS)
		return CRUX_ERR_RANGE;
	json_object *req = json_object_new_object();
	json_object *c = json_object_new_array(), *s = json_object_new_array(),
		    *f = json_object_new_array();
	crux_status_t st = CRUX_ERR_NOMEM;
	if (!req || !c || !s || !f) {
		json_object_put(c);
		json_object_put(s);
		json_object_put(f);
		goto out;
	}
	json_object_object_add(req, "compare", c);
	json_object_object_add(req, "success", s);
	json_object_object_add(req, "failure", f);
	for (size_t i = 0; i < ncmp; i++) {
		if ((unsigned)cmp[i].target > CRUX_ETCD_CMP_LEASE ||
		    (unsigned)cmp[i].result > CRUX_ETCD_NOT_EQUAL) {
			st = CRUX_ERR_INVAL;
			goto out;
		}
		json_object *one = json_object_new_object();
		if (!one)
			goto out;
		json_object_array_add(c, one);
		if ((st = crux_etcd_key_json(one, "key", cmp[i].key, cmp[i].klen, false)) !=
		    CRUX_OK)
			goto out;
		json_object_object_add(one, "target",
				       json_object_new_string(target_names[cmp[i].target]));
		json_object_object_add(one, "result",
				       json_object_new_string(result_names[cmp[i].result]));
		if (cmp[i].target == CRUX_ETCD_CMP_VALUE)
			st = add_bytes(one, "value", cmp[i].value, cmp[i].vlen);
		else
			crux_etcd_add_i64(one, target_fields[cmp[i].target], cmp[i].number);
		if (st != CRUX_OK)
			goto out;
	}
	if ((st = ops_json(s, ok_ops, nok)) != CRUX_OK ||
	    (st = ops_json(f, fail_ops, nfail)) != CRUX_OK)
		goto out;
	struct txn_out t = {0};
	st = call_parse(e, "/v3/kv/txn", req, p_txn, &t);
	if (st == CRUX_OK) {
		*succeeded = t.ok;
		if (revision)
			*revision = t.rev;
	}
out:
	json_object_put(req);
	return st;
}

struct grant_out {
	int64_t id, ttl;
};

static crux_status_t p_grant(const char *b, size_t n, void *out)
{
	struct grant_out *g = out;
	return crux_etcd_parse_grant(b, n, &g->id, &g->ttl);
}

static crux_status_t p_keepalive(const char *b, size_t n, void *out)
{
	return crux_etcd_parse_keepalive(b, n, out);
}

crux_status_t crux_etcd_lease_grant(struct crux_etcd *e, int64_t ttl_s, int64_t *id, int64_t *ttl)
{
	if (ttl_s < 2 || ttl_s > 86400)
		return CRUX_ERR_RANGE; /* etcd's minimum TTL is 2 s */
	json_object *req = json_object_new_object();
	if (!req)
		return CRUX_ERR_NOMEM;
	crux_etcd_add_i64(req, "TTL", ttl_s);
	struct grant_out g = {0};
	crux_status_t st = call_parse(e, "/v3/lease/grant", req, p_grant, &g);
	json_object_put(req);
	if (st == CRUX_OK) {
		*id = g.id;
		if (ttl)
			*ttl = g.ttl;
	}
	return st;
}

crux_status_t crux_etcd_lease_keepalive(struct crux_etcd *e, int64_t id, int64_t *ttl)
{
	json_object *req = json_object_new_object();
	if (!req)
		return CRUX_ERR_NOMEM;
	crux_etcd_add_i64(req, "ID", id);
	int64_t t = 0;
	crux_status_t st = call_parse(e, "/v3/lease/keepalive", req, p_keepalive, &t);
	json_object_put(req);
	if (st == CRUX_OK && t == 0)
		st = CRUX_ERR_NOENT; /* expired: etcd omits the TTL */
	if (st == CRUX_OK && ttl)
		*ttl = t;
	return st;
}

crux_status_t crux_etcd_lease_revoke(struct crux_etcd *e, int64_t id)
{
	json_object *req = json_object_new_object();
	if (!req)
		return CRUX_ERR_NOMEM;
	crux_etcd_add_i64(req, "ID", id);
	int64_t rev;
	crux_status_t st = call_parse(e, "/v3/lease/revoke", req, p_header, &rev);
	json_object_put(req);
	return st;
}
