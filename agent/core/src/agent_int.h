/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd's pass, as stages with explicit inputs and outputs (agent.c runs
 * them in order):
 *
 *   observe.c  local profile records      -> ranks (per process, with the
 *                                             traffic reference windows)
 *   host_view.c ranks                     -> this host's job view
 *                                             (crux/job_view.h: counts and sums,
 *                                             never averages: views of several
 *                                             hosts merge exactly)
 *   cluster.c  host view                  -> etcd; merged view -> the leader's
 *                                             plan; schedule -> this host
 *   plan.c     (merged) view, now         -> jobs' life cycle and decisions
 *                                             (the scheduler library)
 *   realise.c  decisions or schedule      -> the local decision table
 *   report.c   everything above           -> the status record for cruxctl
 *
 * The pass reads no clock for its decisions: it takes 'now' as input.
 */
#ifndef CRUXD_AGENT_INT_H
#define CRUXD_AGENT_INT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "crux/agent.h"
#include "crux/attach.h"
#include "crux/broker.h"
#include "crux/decision_writer.h"
#include "crux/guard.h"
#include "crux/job_view.h"
#include "crux/overrides.h"
#include "crux/profile.h"
#include "crux/sched.h"

#define NS		1e9
#define MAX_JOB_HOSTS	CRUX_JV_MAX_JOB_HOSTS
#define MAX_LOCAL_ADDRS 64

/* One training process, as the agent tracks it between passes. */
struct rank {
	pid_t pid;
	uint64_t start_time;
	uint64_t job_key;
	char job_id[CRUX_JOB_ID_LEN];
	char hostname[CRUX_HOSTNAME_LEN];
	struct crux_addr host;
	bool has_compute;
	bool clamped;
	bool clamp_logged;
	bool have_ref;
	double iter, compute, comm, overlap, stall;
	struct crux_prof_stalls split; /* stall breakdown of this rank (issue 31) */
	uint32_t npeers;
	struct crux_addr peer[CRUX_PROF_MAX_PEERS];
	double bpi[CRUX_PROF_MAX_PEERS]; /* bytes per iteration to each peer */
	/* Reference sample: traffic per iteration is measured over one window. */
	uint64_t ref_ns;
	uint64_t ref_iters;
	uint32_t nref;
	struct crux_addr ref_peer[CRUX_PROF_MAX_PEERS];
	uint64_t ref_tx[CRUX_PROF_MAX_PEERS];
};

struct flow {
	struct crux_addr src, dst;
	double bytes; /* per iteration */
	int path;     /* scheduler's candidate index, -1 none */
	int src_node, dst_node;
};

struct job {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	uint8_t state; /* CRUX_JOB_PROFILING or CRUX_JOB_SCHEDULED */
	bool present;
	bool adopted; /* decision taken over from the table at start-up */
	/* Taken over at start-up and not seen since: its ranks may still be
	 * re-attaching to the restarted agent; it departs only when they have
	 * not come back by grace_until (set at the first pass). */
	bool restored;
	uint64_t grace_until;
	bool clamped;
	uint64_t since_ns;
	uint32_t nranks, ncompute;
	uint32_t nhosts;
	struct crux_addr hosts[MAX_JOB_HOSTS];
	double iter, compute, comm, overlap, stall, work, bytes;
	uint32_t nflows, capflows;
	struct flow *flows;
	/* profile the current decision was made for (hysteresis) */
	bool has_base;
	double base_work, base_bytes, base_iter;
	uint64_t since_wall_ms; /* cluster mode: since_ns as Unix time, for the next leader */
	/* decision */
	bool decided;
	uint8_t level;	  /* published: scheduled level + guard lift */
	double iso;	  /* isolated iteration estimate on its paths, s (fairness guard) */
	double prof_iter; /* iteration time measured at the end of profiling (top level) */
	/* The bound on its mean slowdown (CRUX_MAX_SLOWDOWN): measured
	 * slowdowns, pass by pass, since it was first scheduled. */
	struct crux_sched_account acct;
	uint64_t acct_ns; /* last pass accounted; 0 = none yet (calloc: a free account) */
	double t, intensity, k, priority;
	uint32_t ndflows;
	struct flow *dflows;
	uint32_t nadopt;
	struct crux_dt_route *adopt;
};

struct hostent {
	struct crux_addr addr;
	char name[CRUX_HOSTNAME_LEN];
	int node;
};

struct ag_cluster;

/* The agent's one context: everything it keeps between passes. */
struct cruxd_agent {
	struct cruxd_config cfg;
	struct crux_dt_writer *dt;	 /* a sealed memfd (handed out) with a written file copy */
	uint64_t table_gen;		 /* the table's generation: read at start, +1 per publish */
	struct crux_broker *broker;	 /* the attach socket (crux/attach.h) */
	struct crux_prof_copies *copies; /* attached records copied for cruxctl (crux/profile.h) */
	struct cruxd_status_writer *sw;
	struct cruxd_probe_cache *probe;
	struct crux_sched_topo *topo; /* from the file; NULL = single-host view */
	struct crux_sched_topo *star; /* built from the hosts seen */
	uint32_t star_hosts_sig;

	struct rank *ranks, *next;
	size_t nranks, capranks, nnext, capnext;
	struct job **jobs;
	size_t njobs, capjobs;
	struct hostent *hosts;
	size_t nhosts, caphosts;

	struct crux_addr local[MAX_LOCAL_ADDRS];
	uint32_t nlocal;

	struct cruxd_guard *guard; /* promotion by measured slowdown */

	struct cruxd_overrides *ovr;
	bool ovr_present;
	struct stat ovr_stat;
	char ovr_error[256];

	bool first_pass;
	bool resched_pending;
	bool held; /* a profile change waits for the hold time */
	uint64_t last_resched_ns;
	uint64_t reschedules, passes;
	uint32_t guard_infeasible; /* the last plan's s->guard_infeasible */
	uint64_t probe_version;
	struct crux_prof_scan_stats scan;
	struct crux_job_view view;    /* this host's, rebuilt every pass */
	struct ag_cluster *cl;	      /* cluster mode; NULL: embedded single-host mode */
	struct cruxd_overrides *povr; /* the planner's overrides: ovr, or the cluster's */

	struct crux_dt_job *tjobs, *pub_jobs;
	struct crux_dt_route *troutes, *pub_routes;
	uint32_t pub_njobs, pub_nroutes;
	bool published;
	struct crux_dt_contents *old; /* table at start-up */
	struct cruxd_status_body *status;
	uint64_t now;
};

static inline double clampd(double v, double lo, double hi)
{
	if (!isfinite(v) || v < lo)
		return lo;
	return v > hi ? hi : v;
}

static inline double rel_change(double a, double b)
{
	double m = fmax(fabs(a), fabs(b));
	return m <= 0 ? 0 : fabs(a - b) / m;
}

/* observe.c */
void cruxd_load_local_addrs(struct cruxd_agent *a);
bool cruxd_is_local(const struct cruxd_agent *a, const struct crux_addr *x);
crux_status_t cruxd_observe(struct cruxd_agent *a, uint64_t now);

/* host_view.c */
crux_status_t cruxd_view_build(const struct rank *ranks, size_t n, struct crux_job_view *out);

/* plan.c */
struct job *cruxd_job_find(const struct cruxd_agent *a, uint64_t key);
struct job *cruxd_job_add(struct cruxd_agent *a, uint64_t key);
void cruxd_job_free(struct job *j);
int cruxd_node_of(struct cruxd_agent *a, const struct crux_addr *addr);
bool cruxd_overridden(const struct cruxd_agent *a, uint64_t key);
crux_status_t cruxd_plan_take_view(struct cruxd_agent *a, const struct crux_job_view *v,
				   uint64_t now);
crux_status_t cruxd_plan(struct cruxd_agent *a, uint64_t now);
bool cruxd_plan_due(const struct cruxd_agent *a);

/* realise.c */
bool cruxd_route_ports(struct cruxd_agent *a, int src_node, const struct crux_addr *dst,
		       int dst_node, int idx, struct crux_dt_route *rt);
crux_status_t cruxd_realise(struct cruxd_agent *a, uint64_t now);

/* cluster.c (cluster_none.c when built without libcurl/json-c) */
crux_status_t cruxd_cluster_open(struct cruxd_agent *a, char *err, size_t errlen);
void cruxd_cluster_close(struct cruxd_agent *a);
/* Publish this host's view; one round of the cluster node (the leader plans). */
void cruxd_cluster_pass(struct cruxd_agent *a, uint64_t now);
/* The schedule the watcher took since the pass, applied now (true: one was). */
bool cruxd_cluster_apply_received(struct cruxd_agent *a);
int cruxd_cluster_wake_fd(const struct cruxd_agent *a);
/* The applied schedule as this host's table; false: no schedule yet. */
bool cruxd_cluster_table(struct cruxd_agent *a, uint32_t *njobs, uint32_t *nroutes);
void cruxd_cluster_report(struct cruxd_agent *a, struct cruxd_status_body *b);
/* The local overrides file changed: hand it to the cluster. */
void cruxd_cluster_overrides_changed(struct cruxd_agent *a);

/* report.c */
void cruxd_report(struct cruxd_agent *a, uint64_t pass_ns);

#endif /* CRUXD_AGENT_INT_H */
