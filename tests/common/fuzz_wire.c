/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: everything that crosses the attach socket (crux/attach.h)
 * and the agent's policy variables. Byte 0: bits 0-1 the descriptor count,
 * bits 2-3 what the rest is (hello, reply, CRUX_ALLOW_USERS /
 * CRUX_ALLOW_GROUPS value). A decoder that accepts must have checked what
 * it promises; a refusal must come with a message. Either broken aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/attach.h"
#include "crux/broker.h"
#include "crux/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct one_env {
	const char *name;
	char value[512];
};

static const char *one_getenv(void *arg, const char *name)
{
	const struct one_env *e = arg;
	return strcmp(e->name, name) == 0 ? e->value : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	if (size < 1)
		return 0;
	int nfds = data[0] & 3;
	unsigned what = (data[0] >> 2) & 3;
	const uint8_t *msg = data + 1;
	size_t len = size - 1;
	crux_log_set_level(CRUX_LOG_ERROR);
	err[0] = '\0';

	if (what == 0) {
		struct crux_wire_hello h;
		crux_status_t st = crux_wire_decode_hello(msg, len, nfds, &h, err, sizeof(err));
		if (st != CRUX_OK && !err[0])
			abort();
		if (st == CRUX_OK) {
			if (h.role != CRUX_ROLE_RANK && h.role != CRUX_ROLE_OBSERVER)
				abort();
			if (nfds != (h.role == CRUX_ROLE_RANK) || h.pid <= 0)
				abort();
			if (h.role == CRUX_ROLE_RANK &&
			    (!memchr(h.job_id, '\0', sizeof(h.job_id)) ||
			     crux_job_key_of(h.job_id) != h.job_key))
				abort();
		}
	} else if (what == 1) {
		struct crux_wire_reply r;
		crux_status_t st = crux_wire_decode_reply(msg, len, nfds, &r, err, sizeof(err));
		if (st != CRUX_OK && !err[0])
			abort();
		if (st == CRUX_OK) {
			if (!memchr(r.reason, '\0', sizeof(r.reason)))
				abort();
			if (r.type == CRUX_WIRE_WELCOME &&
			    (nfds != 1 || r.table_size != crux_dt_file_size()))
				abort();
			if (r.type == CRUX_WIRE_REFUSE && nfds != 0)
				abort();
		}
	} else {
		struct one_env e = {what == 2 ? "CRUX_ALLOW_USERS" : "CRUX_ALLOW_GROUPS", {0}};
		struct crux_broker_policy p;
		size_t n = len < sizeof(e.value) - 1 ? len : sizeof(e.value) - 1;
		memcpy(e.value, msg, n);
		crux_status_t st = crux_broker_policy_env(one_getenv, &e, &p, err, sizeof(err));
		if (st != CRUX_OK && !strstr(err, e.name))
			abort();
		if (st == CRUX_OK && (p.nusers > 32 || p.ngroups > 32))
			abort();
	}
	return 0;
}
