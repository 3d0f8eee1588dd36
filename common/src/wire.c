/* SPDX-License-Identifier: Apache-2.0 */
/* Strict decoders of the attach protocol's messages (crux/attach.h). */
#include <string.h>

#include "common_int.h"
#include "crux/attach.h"
#include "crux/jobid.h"

static crux_status_t head_check(const void *buf, size_t len, size_t want, uint16_t *type, char *err,
				size_t errlen)
{
	uint32_t magic, size;
	uint16_t version;
	if (!buf || len != want) {
		crux_set_err(err, errlen, "message of %zu bytes, expected %zu", len, want);
		return CRUX_ERR_CORRUPT;
	}
	memcpy(&magic, buf, 4);
	memcpy(&version, (const char *)buf + 4, 2);
	memcpy(type, (const char *)buf + 6, 2);
	memcpy(&size, (const char *)buf + 8, 4);
	if (magic != CRUX_WIRE_MAGIC) {
		crux_set_err(err, errlen, "wrong magic 0x%08x: not a Crux attach message", magic);
		return CRUX_ERR_CORRUPT;
	}
	if (version != CRUX_WIRE_VERSION) {
		crux_set_err(err, errlen,
			     "attach protocol version %u, this build speaks %u; fix: run the same "
			     "Crux version in cruxd and the jobs",
			     (unsigned)version, (unsigned)CRUX_WIRE_VERSION);
		return CRUX_ERR_VERSION;
	}
	if (size != want) {
		crux_set_err(err, errlen, "message says %u bytes, expected %zu", size, want);
		return CRUX_ERR_CORRUPT;
	}
	return CRUX_OK;
}

static bool printable_str(const char *s, size_t len, bool allow_space)
{
	const char *end = memchr(s, '\0', len);
	if (!end)
		return false;
	for (const char *p = s; p < end; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c > 0x7e || (!allow_space && c == ' '))
			return false;
	}
	return true;
}

crux_status_t crux_wire_decode_hello(const void *buf, size_t len, int nfds,
				     struct crux_wire_hello *out, char *err, size_t errlen)
{
	struct crux_wire_hello h;
	uint16_t type;
	crux_status_t st = head_check(buf, len, sizeof(h), &type, err, errlen);
	if (st != CRUX_OK)
		return st;
	memcpy(&h, buf, sizeof(h));
	if (type != CRUX_WIRE_HELLO) {
		crux_set_err(err, errlen, "message type %u where a hello was expected",
			     (unsigned)type);
		return CRUX_ERR_CORRUPT;
	}
	if (h.role != CRUX_ROLE_RANK && h.role != CRUX_ROLE_OBSERVER) {
		crux_set_err(err, errlen, "unknown role %u", h.role);
		return CRUX_ERR_CORRUPT;
	}
	if (nfds != (h.role == CRUX_ROLE_RANK ? 1 : 0)) {
		crux_set_err(err, errlen, "%d descriptors with a %s hello", nfds,
			     h.role == CRUX_ROLE_RANK ? "rank" : "observer");
		return CRUX_ERR_CORRUPT;
	}
	if (h.pid <= 0) {
		crux_set_err(err, errlen, "bad pid %d", (int)h.pid);
		return CRUX_ERR_CORRUPT;
	}
	if (h.role == CRUX_ROLE_RANK) {
		if (!printable_str(h.job_id, sizeof(h.job_id), false) || !h.job_id[0] ||
		    h.job_key == 0 || crux_job_key_of(h.job_id) != h.job_key) {
			crux_set_err(err, errlen, "job id and key do not match");
			return CRUX_ERR_CORRUPT;
		}
	}
	*out = h;
	return CRUX_OK;
}

crux_status_t crux_wire_decode_reply(const void *buf, size_t len, int nfds,
				     struct crux_wire_reply *out, char *err, size_t errlen)
{
	struct crux_wire_reply r;
	uint16_t type;
	crux_status_t st = head_check(buf, len, sizeof(r), &type, err, errlen);
	if (st != CRUX_OK)
		return st;
	memcpy(&r, buf, sizeof(r));
	if (type != CRUX_WIRE_WELCOME && type != CRUX_WIRE_REFUSE) {
		crux_set_err(err, errlen, "message type %u where an answer was expected",
			     (unsigned)type);
		return CRUX_ERR_CORRUPT;
	}
	if (nfds != (type == CRUX_WIRE_WELCOME ? 1 : 0)) {
		crux_set_err(err, errlen, "%d descriptors with a %s", nfds,
			     type == CRUX_WIRE_WELCOME ? "welcome" : "refusal");
		return CRUX_ERR_CORRUPT;
	}
	if (!printable_str(r.reason, sizeof(r.reason), true)) {
		crux_set_err(err, errlen, "unterminated or unprintable reason");
		return CRUX_ERR_CORRUPT;
	}
	if (type == CRUX_WIRE_WELCOME && r.table_size != crux_dt_file_size()) {
		crux_set_err(err, errlen, "table of %llu bytes, expected %zu",
			     (unsigned long long)r.table_size, crux_dt_file_size());
		return CRUX_ERR_CORRUPT;
	}
	if (type == CRUX_WIRE_REFUSE && (r.status <= 0 || r.status >= 64)) {
		crux_set_err(err, errlen, "refusal with bad status %d", (int)r.status);
		return CRUX_ERR_CORRUPT;
	}
	*out = r;
	return CRUX_OK;
}
