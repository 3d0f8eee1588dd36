/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operator overrides (cruxctl set / clear) as a small text file in the
 * shared-memory directory. While cruxd runs, cruxctl writes this file (whole,
 * atomically by rename) with a new sequence number and waits until the
 * agent's status record reports that number applied; the agent keeps it as
 * the persistent record of overrides across its restarts.
 *
 * Format, one directive per line, '#' starts a comment:
 *   seq <N>
 *   job <KEY> level <L> [id <ID>] [route <PEER>=<PATH>[:<PORT>[,<PORT>...]]]...
 * KEY is the 64-bit job key as 0x<hex>; ID the readable job id with bytes
 * outside [A-Za-z0-9._:@/+-] written %XX. A route without ports takes the
 * ports the prober found for that path.
 */
#ifndef CRUX_OVERRIDES_H
#define CRUX_OVERRIDES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crux/addr.h"
#include "crux/decision.h"
#include "crux/jobid.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUXD_OVERRIDES_FILE	  "overrides.conf"
#define CRUXD_MAX_OVERRIDES	  256
#define CRUXD_OVR_MAX_ROUTES	  16
#define CRUXD_OVERRIDES_MAX_BYTES (1u << 20)

struct cruxd_override_route {
	struct crux_addr peer;
	uint16_t path_id;
	uint8_t nports; /* 0: ports from the prober */
	uint8_t reserved;
	uint16_t ports[CRUX_ROUTE_MAX_PORTS];
};

struct cruxd_override {
	uint64_t job_key;
	char job_id[CRUX_JOB_ID_LEN]; /* may be empty */
	uint8_t level;
	uint8_t nroutes;
	uint16_t reserved;
	struct cruxd_override_route routes[CRUXD_OVR_MAX_ROUTES];
};

struct cruxd_overrides {
	uint64_t seq;
	uint32_t n;
	struct cruxd_override o[CRUXD_MAX_OVERRIDES];
};

/* "PEER=PATH[:PORT,PORT...]" (the CLI's --route and the file's route). */
crux_status_t cruxd_route_parse(const char *text, struct cruxd_override_route *out, char *err,
				size_t errlen);

/*
 * A job reference from the CLI: "0x<hex>" is a job key, anything else a
 * readable job id (key derived as every rank derives it).
 */
crux_status_t cruxd_job_ref_parse(const char *text, uint64_t *key, char *id, size_t idlen,
				  char *err, size_t errlen);

/* Parse a whole file held in memory. Errors name the line. */
crux_status_t cruxd_overrides_parse(const char *buf, size_t len, struct cruxd_overrides *out,
				    char *err, size_t errlen);

/* One override as the file's line "job 0x... level N [id ID] [route R]..."
 * (no newline; NUL-terminated). CRUX_ERR_RANGE if 'len' is too small. */
crux_status_t cruxd_override_format_line(const struct cruxd_override *x, char *buf, size_t len,
					 size_t *outlen);

/* Write the text form; CRUX_ERR_RANGE if 'len' is too small. */
crux_status_t cruxd_overrides_format(const struct cruxd_overrides *o, char *buf, size_t len,
				     size_t *outlen);

/*
 * Read dir/overrides.conf: regular file, no symlink, owned by root or by us,
 * not writable by group or others, at most CRUXD_OVERRIDES_MAX_BYTES.
 * CRUX_ERR_NOENT when absent.
 */
crux_status_t cruxd_overrides_load(const char *dir, struct cruxd_overrides *out, char *err,
				   size_t errlen);

/* Replace dir/overrides.conf atomically (mode 0644). */
crux_status_t cruxd_overrides_store(const char *dir, const struct cruxd_overrides *o);

int cruxd_overrides_find(const struct cruxd_overrides *o, uint64_t job_key);
/* Add or replace (by job key). CRUX_ERR_RANGE when full. */
crux_status_t cruxd_overrides_put(struct cruxd_overrides *o, const struct cruxd_override *x);
/* Remove one; false if it was not there. */
bool cruxd_overrides_remove(struct cruxd_overrides *o, uint64_t job_key);

/* Text form of a route: "PEER=PATH:PORT,PORT". */
void cruxd_route_format(const struct cruxd_override_route *r, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_OVERRIDES_H */
