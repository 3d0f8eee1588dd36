/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd's logic as a library (the executable is a thin loop around it, and
 * the unit tests drive it pass by pass with their own clock).
 *
 * One pass: read the overrides file if it changed; scan the profile records
 * (reaping dead processes); group ranks into jobs by job key; clamp absurd
 * values; track arrivals, departures and the profiling window; reschedule
 * with the scheduler library when a job finished profiling, departed, or its
 * profile changed beyond a threshold (hysteresis); map the chosen paths to
 * probed source ports; publish the decision table when it changed; refresh
 * the heartbeat; publish the agent status record for cruxctl.
 */
#ifndef CRUX_AGENT_H
#define CRUX_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "crux/agent_status.h"
#include "crux/decision.h"
#include "crux/env.h"
#include "crux/guard.h"
#include "crux/probe.h"
#include "crux/shm.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cruxd_config {
	char shm_dir[CRUX_PATH_MAX];
	char topology[CRUX_PATH_MAX]; /* "" = single-host view */
	struct crux_dt_settings settings;
	uint64_t interval_ns;	    /* pass period; heartbeat refreshed every pass */
	uint64_t profile_window_ns; /* a new job stays on the top level this long */
	double change_threshold;    /* relative profile change that triggers a reschedule */
	uint64_t hold_ns;	    /* least time between change-triggered reschedules */
	double link_gbps;	    /* host link rate in the single-host view; clamp bound */
	double max_iter_s;	    /* longest plausible iteration (clamp) */
	uint64_t seed;
	int paths_search; /* CRUX_AGENT_PATHS_SEARCH: crux_sched_params.paths_search (0 = off) */
	bool probe;
	struct cruxd_probe_cache_config probe_cfg;
	struct cruxd_guard_config guard; /* CRUX_MAX_SLOWDOWN, CRUX_GUARD_AGE, CRUX_GUARD_HOLD */
	/* Cluster mode (CRUX_ETCD set): "" = embedded single-host mode. */
	char etcd[1024];  /* CRUX_ETCD: endpoints "http(s)://h:p[,...]" */
	char cluster[64]; /* CRUX_CLUSTER (default "default") */
	char host[64];	  /* CRUX_HOST (default: the host name) */
	char etcd_ca[CRUX_PATH_MAX], etcd_cert[CRUX_PATH_MAX], etcd_key[CRUX_PATH_MAX];
	uint64_t cluster_ttl_ns; /* CRUX_CLUSTER_TTL: this host's lease in etcd */
};

/* Defaults, then CRUX_ variables through fn (NULL = getenv). */
crux_status_t cruxd_config_env(crux_getenv_fn fn, void *arg, struct cruxd_config *out, char *err,
			       size_t errlen);

/*
 * A per-level list "A,B,C" of exactly 'n' integers in [min, max], e.g.
 * CRUX_LEVEL_DSCP="0,8,16,24" (level 0 first).
 */
crux_status_t cruxd_parse_level_list(const char *name, const char *text, uint32_t n, long min,
				     long max, long *out, char *err, size_t errlen);

struct cruxd_agent;

/*
 * Check the directory, load the topology, take the decision table (keeping
 * the decisions it holds for running jobs), load the overrides, create the
 * status record. CRUX_ERR_BUSY when another process holds the table
 * (*holder, may be NULL, names it). The probe thread is not started here.
 */
crux_status_t cruxd_agent_open(const struct cruxd_config *cfg, struct cruxd_agent **out,
			       pid_t *holder);

/* One pass at time now_ns (CLOCK_MONOTONIC; tests pass their own). */
crux_status_t cruxd_agent_pass(struct cruxd_agent *a, uint64_t now_ns);

/*
 * Cluster mode: join the cluster named in cfg (publish this host's job view,
 * campaign, apply the schedule). Called once after open, before the first
 * pass; CRUX_ERR_UNSUPPORTED when built without libcurl/json-c.
 */
crux_status_t cruxd_agent_join(struct cruxd_agent *a, char *err, size_t errlen);

/*
 * Cluster mode, between passes: a descriptor readable when a new schedule
 * arrived from etcd (-1: none, single-host mode), and the call that applies
 * it to the decision table at once (no etcd call, no observation).
 */
int cruxd_agent_wake_fd(const struct cruxd_agent *a);
void cruxd_agent_apply_received(struct cruxd_agent *a, uint64_t now_ns);

/* Heartbeat only (between passes). */
void cruxd_agent_heartbeat(struct cruxd_agent *a);

/* Start / stop background probing (cruxd). */
crux_status_t cruxd_agent_start_probing(struct cruxd_agent *a);

/*
 * Reload (SIGHUP): topology and level settings from 'cfg' (directory and
 * probing set-up stay). On error the old configuration stays.
 */
crux_status_t cruxd_agent_reload(struct cruxd_agent *a, const struct cruxd_config *cfg);

/* The status last published (valid until the next pass). */
const struct cruxd_status_body *cruxd_agent_status(const struct cruxd_agent *a);

/* Give up the table (it stays valid; its heartbeat stops) and free everything. */
void cruxd_agent_close(struct cruxd_agent *a);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_AGENT_H */
