/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The attach broker (libcrux-agentside: cruxd's side of crux/attach.h):
 * cruxd.sock, the policy of who may attach, and the attached records.
 */
#ifndef CRUX_BROKER_H
#define CRUX_BROKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "crux/attach.h"
#include "crux/env.h"
#include "crux/profile_scan.h"

#ifdef __cplusplus
extern "C" {
#endif

struct crux_broker_policy {
	uint32_t nusers, ngroups; /* both 0: any local user */
	uid_t users[32];
	gid_t groups[32];
	bool shared_jobs; /* a job key may have members of several uids */
};

/*
 * Parse CRUX_ALLOW_USERS / CRUX_ALLOW_GROUPS (comma-separated names or
 * numbers) and CRUX_ALLOW_SHARED_JOBS (0/1) through fn (NULL = getenv).
 */
crux_status_t crux_broker_policy_env(crux_getenv_fn fn, void *arg, struct crux_broker_policy *out,
				     char *err, size_t errlen);

struct crux_broker;

/*
 * Listen on 'dir'/cruxd.sock (mode 0666: the policy, not the file mode,
 * decides who may attach) and serve attachments from a thread of its own,
 * handing out 'table_fd' (the writer's memfd; not owned). The socket is
 * recreated when removed or replaced.
 */
crux_status_t crux_broker_open(const char *dir, const struct crux_broker_policy *pol, int table_fd,
			       struct crux_broker **out, char *err, size_t errlen);

/* One attached process, as the kernel names it. */
struct crux_broker_peer_info {
	pid_t pid; /* in the agent's pid namespace */
	uid_t uid;
	gid_t gid;
	uint64_t start_time;
};

/*
 * Visit the record of every attached rank: a validated snapshot whose pid
 * and start time are the kernel's, never the record's. 'stats' as for
 * crux_prof_scan (reaped = connections closed since the last scan).
 */
crux_status_t crux_broker_scan(struct crux_broker *b, crux_prof_scan_fn fn, void *arg,
			       struct crux_prof_scan_stats *stats);

/* Attached processes and refusals so far (status, tests). */
void crux_broker_counts(struct crux_broker *b, uint32_t *attached, uint64_t *refused);

void crux_broker_close(struct crux_broker *b);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_BROKER_H */
