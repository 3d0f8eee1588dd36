/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small etcd v3 client over etcd's JSON gateway (POST /v3/...), built on
 * libcurl and json-c. Several endpoints are tried in turn; every request
 * carries "Grpc-Metadata-hasleader: true" so a member without quorum fails at
 * once; TLS with a CA file and a client certificate is supported.
 *
 * Keys and values are byte strings (base64 on the wire). Every response is
 * validated: a malformed or hostile answer is CRUX_ERR_CORRUPT, never a crash.
 * One handle is used by one thread at a time.
 */
#ifndef CRUX_ETCD_H
#define CRUX_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_ETCD_MAX_ENDPOINTS 16
/* A key or value above this size is refused before it is sent (etcd's
 * default request limit is 1.5 MiB). */
#define CRUX_ETCD_MAX_VALUE   (1u << 20)
#define CRUX_ETCD_MAX_TXN_OPS 128

struct crux_etcd_opts {
	const char *endpoints; /* "http://h:p[,https://h:p...]" */
	const char *ca_file;   /* PEM CA bundle (https), NULL: system default */
	const char *cert_file; /* PEM client certificate, NULL: none */
	const char *key_file;  /* PEM client key (with cert_file) */
	long timeout_ms;       /* per unary request, 0: 5000 */
};

struct crux_etcd;

/* Parse the options and set up the handle (no request is sent). */
crux_status_t crux_etcd_open(const struct crux_etcd_opts *opts, struct crux_etcd **out, char *err,
			     size_t errlen);
void crux_etcd_close(struct crux_etcd *e);
/* The endpoint the last successful request went to. */
const char *crux_etcd_endpoint(const struct crux_etcd *e);
/* The last error in words (endpoint, HTTP status, etcd's message). */
const char *crux_etcd_last_error(const struct crux_etcd *e);

/* Who answered: the response header of the last successful unary call
 * (0: not said). A restored or rebuilt etcd shows as another cluster_id, or
 * as a revision lower than one seen before. */
struct crux_etcd_identity {
	uint64_t cluster_id, member_id;
	int64_t revision;
	uint64_t answers; /* successful calls on this handle so far: tells a new answer */
};
void crux_etcd_identity(const struct crux_etcd *e, struct crux_etcd_identity *out);

struct crux_etcd_kv {
	uint8_t *key; /* decoded; one extra NUL byte after key_len */
	size_t key_len;
	uint8_t *value; /* decoded; one extra NUL byte after value_len */
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
	int64_t lease;
};

struct crux_etcd_range {
	int64_t revision; /* header.revision of the answer */
	int64_t count;
	bool more;
	size_t n;
	struct crux_etcd_kv *kvs;
};
void crux_etcd_range_free(struct crux_etcd_range *r);

/* Range over one key, or over every key starting with key when prefix. */
crux_status_t crux_etcd_get(struct crux_etcd *e, const void *key, size_t klen, bool prefix,
			    struct crux_etcd_range *out);
/* The same at store revision 'revision' (0: the newest); keys_only: keys and
 * revisions without the values (every value_len 0). */
crux_status_t crux_etcd_get_at(struct crux_etcd *e, const void *key, size_t klen, bool prefix,
			       bool keys_only, int64_t revision, struct crux_etcd_range *out);
crux_status_t crux_etcd_put(struct crux_etcd *e, const void *key, size_t klen, const void *val,
			    size_t vlen, int64_t lease, int64_t *revision);
crux_status_t crux_etcd_delete(struct crux_etcd *e, const void *key, size_t klen, bool prefix,
			       int64_t *revision);

enum crux_etcd_target {
	CRUX_ETCD_CMP_VERSION,
	CRUX_ETCD_CMP_CREATE,
	CRUX_ETCD_CMP_MOD,
	CRUX_ETCD_CMP_VALUE,
	CRUX_ETCD_CMP_LEASE,
};
enum crux_etcd_result {
	CRUX_ETCD_EQUAL,
	CRUX_ETCD_GREATER,
	CRUX_ETCD_LESS,
	CRUX_ETCD_NOT_EQUAL,
};
struct crux_etcd_cmp {
	enum crux_etcd_target target;
	enum crux_etcd_result result;
	const void *key;
	size_t klen;
	int64_t number;	   /* version, revision or lease */
	const void *value; /* CRUX_ETCD_CMP_VALUE */
	size_t vlen;
};
enum crux_etcd_op_kind { CRUX_ETCD_OP_PUT, CRUX_ETCD_OP_DELETE };
struct crux_etcd_op {
	enum crux_etcd_op_kind kind;
	const void *key;
	size_t klen;
	const void *value; /* put */
	size_t vlen;
	int64_t lease; /* put */
	bool prefix;   /* delete */
};

/* Atomic compare-then-ops. *succeeded says which branch ran. */
crux_status_t crux_etcd_txn(struct crux_etcd *e, const struct crux_etcd_cmp *cmp, size_t ncmp,
			    const struct crux_etcd_op *ok_ops, size_t nok,
			    const struct crux_etcd_op *fail_ops, size_t nfail, bool *succeeded,
			    int64_t *revision);

crux_status_t crux_etcd_lease_grant(struct crux_etcd *e, int64_t ttl_s, int64_t *id, int64_t *ttl);
/* One renewal; CRUX_ERR_NOENT when the lease has expired. */
crux_status_t crux_etcd_lease_keepalive(struct crux_etcd *e, int64_t id, int64_t *ttl);
crux_status_t crux_etcd_lease_revoke(struct crux_etcd *e, int64_t id);

enum crux_etcd_event_type { CRUX_ETCD_EV_PUT, CRUX_ETCD_EV_DELETE };
struct crux_etcd_event {
	enum crux_etcd_event_type type;
	struct crux_etcd_kv kv;
};
/* One line of a watch stream. */
struct crux_etcd_watch_msg {
	int64_t revision; /* header.revision */
	bool created;
	bool canceled;
	int64_t compact_revision; /* > 0: history compacted, re-list then watch */
	size_t n;
	struct crux_etcd_event *events;
};
void crux_etcd_watch_msg_free(struct crux_etcd_watch_msg *m);

/*
 * Called for every message of a watch; return false to end the watch.
 * The message is freed after the call.
 */
typedef bool (*crux_etcd_watch_fn)(void *arg, const struct crux_etcd_watch_msg *m);
/* Polled about once a second while the stream is idle: true ends the watch. */
typedef bool (*crux_etcd_stop_fn)(void *arg);

/*
 * Watch key (or the prefix) from start_rev (0: from now) until fn returns
 * false or stop says so (CRUX_OK), the stream is cancelled by etcd
 * (CRUX_ERR_STALE when compacted: re-list), or the connection fails
 * (CRUX_ERR_REMOTE). Endpoints are tried in turn to open the stream.
 */
crux_status_t crux_etcd_watch(struct crux_etcd *e, const void *key, size_t klen, bool prefix,
			      int64_t start_rev, crux_etcd_watch_fn fn, crux_etcd_stop_fn stop,
			      void *arg);

/* ---- Response parsers (pure functions: unit tests and the fuzz target) ---- */
crux_status_t crux_etcd_parse_range(const char *body, size_t len, struct crux_etcd_range *out);
/* put, deleterange, lease revoke: header.revision. */
crux_status_t crux_etcd_parse_header(const char *body, size_t len, int64_t *revision);
crux_status_t crux_etcd_parse_txn(const char *body, size_t len, bool *succeeded, int64_t *revision);
crux_status_t crux_etcd_parse_grant(const char *body, size_t len, int64_t *id, int64_t *ttl);
/* ttl 0: the lease has expired. */
crux_status_t crux_etcd_parse_keepalive(const char *body, size_t len, int64_t *ttl);
/* A gateway error body: code and message (either may be absent). */
crux_status_t crux_etcd_parse_error(const char *body, size_t len, int64_t *code, char *msg,
				    size_t msglen);
/* One watch line; an error object on the stream is CRUX_ERR_REMOTE. */
crux_status_t crux_etcd_parse_watch(const char *line, size_t len, struct crux_etcd_watch_msg *out);

/* Strict base64 (RFC 4648, padded). */
size_t crux_b64_encoded_len(size_t n);
void crux_b64_encode(const void *in, size_t n, char *out); /* out: encoded_len + 1 */
/* out must hold len/4*3 + 1 bytes; NUL-terminated. */
crux_status_t crux_b64_decode(const char *in, size_t len, uint8_t *out, size_t *outlen);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_ETCD_H */
