/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What hosts exchange through etcd in cluster mode:
 *
 * - the host record: this host's job view (crux/job_view.h: per job seen on
 *   this host, counts and sums of its ranks' profile, never averages, the
 *   hosts its ranks run on and its traffic per peer host), so views of
 *   several hosts merge exactly (crux_jv_merge);
 * - the schedule record: the leader's decision for every job (level and
 *   routes keyed by source host), tagged with the etcd revision it was
 *   computed from and the leader's term (its leader key's create revision).
 *
 * Both are JSON; the decoders are strict (bounds, finite non-negative numbers,
 * a job key that matches its id) and fuzzed.
 */
#ifndef CRUX_CLUSTER_VIEW_H
#define CRUX_CLUSTER_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crux/addr.h"
#include "crux/decision.h"
#include "crux/job_view.h"
#include "crux/jobid.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_CV_VERSION	   1
#define CRUX_CV_MAX_JOBS   CRUX_JV_MAX_JOBS /* per host record / per schedule */
#define CRUX_CV_MAX_ROUTES 65536	    /* per schedule */
#define CRUX_CV_MAX_TEXT   (1u << 20) /* an encoded record (etcd's request limit is 1.5 MiB) */

/*
 * The host record: a job view (crux/job_view.h) as JSON: its name, address
 * and jobs (not the stall breakdown, not the hosts index: the decoder leaves
 * those empty; crux_jv_merge rebuilds the index). Encoding a view beyond the
 * job view's limits is CRUX_ERR_RANGE.
 */
crux_status_t crux_cv_host_encode(const struct crux_job_view *v, char **out, size_t *len);
crux_status_t crux_cv_host_decode(const char *text, size_t len, struct crux_job_view *out);

struct crux_cv_route {
	/* Routes are applied by the source host; src family 0 ("-" in JSON):
	 * by every host (an operator's override). */
	struct crux_addr src, dst;
	uint16_t path_id;
	uint8_t nports;
	uint16_t ports[CRUX_ROUTE_MAX_PORTS];
};

struct crux_cv_decision {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN]; /* may be empty */
	uint8_t state;		  /* enum crux_job_state; JSON "state", absent: scheduled */
	uint8_t level;
	/* What a new leader needs to go on where the last one stopped (both
	 * optional): when a profiling job's window began (Unix ms, "since"), and
	 * the profile a scheduled job's decision was made for (W, bytes and
	 * iteration time, "base": the hysteresis baseline). */
	uint64_t since_ms;
	bool has_base;
	double base[3];
	uint32_t nroutes;
	struct crux_cv_route *routes;
};

struct crux_cv_schedule {
	int64_t input_revision; /* etcd revision of the views it was computed from */
	int64_t term;		/* leader key's create revision when written */
	int64_t lease;		/* the leader key's lease (0: not said, older records) */
	char leader[64];	/* the leader's host name (empty: not said) */
	uint32_t levels;	/* 1..CRUX_MAX_LEVELS */
	uint32_t njobs;
	struct crux_cv_decision *jobs;
};

void crux_cv_schedule_free(struct crux_cv_schedule *s);
crux_status_t crux_cv_schedule_encode(const struct crux_cv_schedule *s, char **out, size_t *len);
crux_status_t crux_cv_schedule_decode(const char *text, size_t len, struct crux_cv_schedule *out);
/*
 * The schedule as the leader stores it in etcd: 'z' and a zlib stream of
 * the JSON text (225 jobs, 13.5 KB of JSON without the keys that are
 * their ids', pack into 0.9 KB: etcd sends the value to every host's
 * watch, so its size is paid once per host). unpack takes that or the plain JSON text (a value put
 * by hand); the text may unpack to at most CRUX_CV_MAX_TEXT bytes, and a stream cut short, followed
 * by other bytes or failing its checksum is CRUX_ERR_CORRUPT.
 */
crux_status_t crux_cv_schedule_pack(const struct crux_cv_schedule *s, char **out, size_t *len);
crux_status_t crux_cv_schedule_unpack(const void *value, size_t len, struct crux_cv_schedule *out);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_CLUSTER_VIEW_H */
