/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contract v2: processes attach to cruxd over a UNIX socket in CRUX_SHM_DIR.
 *
 * A process connects, sends one HELLO with its profile memfd (SCM_RIGHTS);
 * the agent learns pid/uid/gid from the kernel (SO_PEERCRED), checks the
 * claims against /proc and its policy, maps the profile after checking its
 * seals, and answers WELCOME with the decision-table memfd, or REFUSE with
 * the reason. The profile lives as long as the connection: a closed socket
 * is that process's end. See common/README.md for the threat model.
 */
#ifndef CRUX_ATTACH_H
#define CRUX_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crux/decision.h"
#include "crux/env.h"
#include "crux/jobid.h"
#include "crux/profile.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_AGENT_SOCK	  "cruxd.sock"
#define CRUX_WIRE_MAGIC	  0x4d585243u /* "CRXM" little-endian */
#define CRUX_WIRE_VERSION 1

enum crux_wire_type {
	CRUX_WIRE_HELLO = 1,   /* process -> agent, carries the profile memfd (rank) */
	CRUX_WIRE_WELCOME = 2, /* agent -> process, carries the table memfd */
	CRUX_WIRE_REFUSE = 3,  /* agent -> process, reason text */
};

enum crux_wire_role {
	CRUX_ROLE_RANK = 1,	/* a training process: profile memfd attached */
	CRUX_ROLE_OBSERVER = 2, /* cruxctl, tools: table only */
};

#define CRUX_WIRE_REASON_LEN 200

/* Fixed-size, host byte order (same host), 256 bytes each. */
struct crux_wire_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t size; /* sizeof(struct crux_wire_hello) */
	uint32_t role;
	int32_t pid; /* the sender's pid in its own pid namespace */
	uint32_t reserved;
	uint64_t start_time; /* field 22 of /proc/self/stat */
	uint64_t job_key;    /* must equal the profile's identity */
	char job_id[CRUX_JOB_ID_LEN];
	uint8_t pad[256 - 40 - CRUX_JOB_ID_LEN];
};

struct crux_wire_reply {
	uint32_t magic;
	uint16_t version;
	uint16_t type;	/* WELCOME or REFUSE */
	uint32_t size;	/* sizeof(struct crux_wire_reply) */
	int32_t status; /* crux_status_t of a refusal */
	uint64_t table_size;
	uint32_t agent_pid;
	uint32_t reserved;
	char reason[CRUX_WIRE_REASON_LEN];
	uint8_t pad[256 - 32 - CRUX_WIRE_REASON_LEN];
};

_Static_assert(sizeof(struct crux_wire_hello) == 256, "hello is 256 bytes");
_Static_assert(sizeof(struct crux_wire_reply) == 256, "reply is 256 bytes");

/*
 * Strict decoders of what crosses the socket ('len' bytes received, 'nfds'
 * descriptors with them). Every field is checked: magic, version, type,
 * size, role, strings terminated and printable, the key matching the id's
 * hash, the descriptor count the type requires. CRUX_ERR_CORRUPT or
 * CRUX_ERR_VERSION with the reason in 'err'.
 */
crux_status_t crux_wire_decode_hello(const void *buf, size_t len, int nfds,
				     struct crux_wire_hello *out, char *err, size_t errlen);
crux_status_t crux_wire_decode_reply(const void *buf, size_t len, int nfds,
				     struct crux_wire_reply *out, char *err, size_t errlen);

/* ---- Process side ---- */

/* This process's own record: crux_prof_open_shared_ex (crux/profile.h). */

/* One connection to the agent; never blocks. */
struct crux_agent_conn;

/*
 * Connect to 'dir'/cruxd.sock and send the HELLO ('prof' NULL: observer).
 * CRUX_ERR_NOENT when no agent listens. The answer comes with
 * crux_agent_conn_poll.
 */
crux_status_t crux_agent_conn_open(const char *dir, struct crux_prof_handle *prof,
				   struct crux_agent_conn **out, char *err, size_t errlen);
/*
 * Non-blocking: CRUX_OK with a reader over the agent's table once welcomed
 * (*table set once; the connection keeps no reference to it), CRUX_ERR_BUSY
 * while no answer has come, CRUX_ERR_PERM when refused (reason in err),
 * CRUX_ERR_REMOTE when the agent closed the connection or sent garbage.
 */
crux_status_t crux_agent_conn_poll(struct crux_agent_conn *c, struct crux_dt_reader **table,
				   char *err, size_t errlen);
/* True while the agent has not closed the connection (one poll(2), no wait). */
bool crux_agent_conn_alive(struct crux_agent_conn *c);
/* Wait up to timeout_ms for the answer (tools and tests, not the data path). */
crux_status_t crux_agent_conn_wait(struct crux_agent_conn *c, int timeout_ms,
				   struct crux_dt_reader **table, char *err, size_t errlen);
void crux_agent_conn_close(struct crux_agent_conn *c);

/* The agent's side (cruxd): crux/broker.h. */

#ifdef __cplusplus
}
#endif

#endif /* CRUX_ATTACH_H */
