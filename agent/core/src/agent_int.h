/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd's pass, as a pipeline of values. agent.c owns the pass's values
 * (struct cruxd_pass) and runs the stages in order; each stage reads what the
 * ones before it produced and the agent's long-lived state (configuration,
 * writers, caches, the guard), and writes only its own output:
 *
 *   observe.c   profile records, last ranks -> ranks (per process, with the
 *                                              traffic reference windows)
 *   host_view.c ranks                       -> this host's job view
 *                                              (crux/job_view.h: counts and
 *                                              sums; views merge exactly)
 *   cluster.c   host view                   -> etcd; merged view -> the
 *                                              leader's plan -> schedule;
 *                                              schedule -> decisions
 *   planner.c   view, overrides, now        -> decisions (decisions.h), with
 *                                              the view's hosts
 *   realise.c   decisions, probe snapshot   -> the table's rows, published
 *   report.c    decisions, rows, snapshot   -> the status record for cruxctl
 *
 * The components with state between passes are behind their own headers,
 * and the agent holds only their handles: the planner (planner.h: its job
 * table, hysteresis, counters), the overrides file (ovr_watch.h) and the
 * cluster node (cluster.h). ports.c (probe snapshot -> ports) is read by the
 * stages. No stage calls back into an earlier one: what to probe finds a
 * host's topology node from the hosts the planner's decisions carry (the
 * view it planned from) and the agent's topology, by the planner's rule
 * (cruxd_topo_node, decisions.h); tests/structure/no-calls.txt forbids
 * realise and report any call into the planner. The cluster stage runs the
 * planner on the leader (its plan callback), as agent.c does in single-host
 * mode. The pass reads no clock for its decisions: it takes 'now' as input.
 */
#ifndef CRUXD_AGENT_INT_H
#define CRUXD_AGENT_INT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cluster.h"
#include "crux/agent.h"
#include "crux/attach.h"
#include "crux/broker.h"
#include "crux/decision_writer.h"
#include "crux/guard.h"
#include "crux/job_view.h"
#include "crux/overrides.h"
#include "crux/profile.h"
#include "crux/sched.h"
#include "decisions.h"
#include "ovr_watch.h"
#include "planner.h"

#define NS		1e9
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

/* ---- the pass's other values --------------------------------------------- */

/* The probe cache's entries, copied once for realise and report. */
struct cruxd_probe_snap {
	struct cruxd_probe_entry *e; /* CRUXD_PROBE_MAX_PEERS; NULL: no prober */
	uint32_t n;
};

/* The table's rows (CRUX_DT_MAX_JOBS jobs, CRUX_DT_MAX_ROUTES routes). */
struct cruxd_rows {
	struct crux_dt_job *jobs;
	struct crux_dt_route *routes;
	uint32_t njobs, nroutes;
};

/* One pass's values: each stage's output, kept until the next pass. */
struct cruxd_pass {
	uint64_t now;
	const struct cruxd_overrides *ovr; /* the overrides file's, as this pass found it */
	struct rank *ranks, *next;	   /* observe: this pass's (sorted by pid), the spare */
	size_t nranks, capranks, nnext, capnext;
	struct crux_prof_scan_stats scan;
	struct crux_job_view view;	 /* this host's */
	struct cruxd_decisions plan;	 /* the planner's (cluster mode: the leader's last) */
	struct cruxd_decisions schedule; /* cluster mode: the applied schedule, for this host */
	struct cruxd_probe_snap probe;
	struct cruxd_rows rows; /* what realise built */
};

/* The agent's long-lived state: configuration, writers, caches, the guard; and the pass it runs. */
struct cruxd_agent {
	struct cruxd_config cfg;
	struct crux_dt_writer *dt;	 /* a sealed memfd (handed out) with a written file copy */
	uint64_t table_gen;		 /* the table's generation: read at start, +1 per publish */
	struct crux_broker *broker;	 /* the attach socket (crux/attach.h) */
	struct crux_prof_copies *copies; /* attached records copied for cruxctl (crux/profile.h) */
	struct cruxd_status_writer *sw;
	struct cruxd_status_body *status;
	struct cruxd_probe_cache *probe;
	struct crux_sched_topo *topo;		 /* from the file; NULL = single-host view */
	struct crux_addr local[MAX_LOCAL_ADDRS]; /* this host's addresses */
	uint32_t nlocal;
	struct cruxd_guard *guard;   /* promotion by measured slowdown */
	struct cruxd_planner *pl;    /* the jobs between passes (planner.h) */
	struct cruxd_ovr_watch *ovr; /* the overrides file (ovr_watch.h) */
	struct cruxd_cluster *cl;    /* cluster mode (cluster.h); NULL: single-host mode */
	uint64_t passes;

	struct cruxd_rows pub; /* the table as last published */
	bool published;
	struct crux_dt_contents *old; /* table at start-up */

	struct cruxd_pass pass;
};

static inline double clampd(double v, double lo, double hi)
{
	if (!isfinite(v) || v < lo)
		return lo;
	return v > hi ? hi : v;
}

static inline bool cruxd_addr_in(const struct crux_addr *set, uint32_t n, const struct crux_addr *x)
{
	if (x->family == 0)
		return true;
	for (uint32_t i = 0; i < n; i++)
		if (crux_addr_equal(&set[i], x))
			return true;
	return false;
}

/* observe.c: profile records and the last pass's ranks -> p's ranks (sorted by pid). */
void cruxd_load_local_addrs(struct cruxd_agent *a);
crux_status_t cruxd_observe(struct cruxd_agent *a, struct cruxd_pass *p);

/* host_view.c */
crux_status_t cruxd_view_build(const struct rank *ranks, size_t n, struct crux_job_view *out);

/* ports.c */
crux_status_t cruxd_snap_open(struct cruxd_probe_snap *s, bool probing);
void cruxd_snap_close(struct cruxd_probe_snap *s);
void cruxd_snap_take(struct cruxd_probe_snap *s, struct cruxd_probe_cache *c);
/* The ports of probed path for the scheduler's candidate idx from src to dst (false: none known).
 */
bool cruxd_snap_ports(const struct cruxd_probe_snap *s, struct crux_sched_topo *topo, int hops,
		      int src_node, const struct crux_addr *dst, int dst_node, int idx,
		      struct crux_dt_route *rt);
int cruxd_expected_paths(struct crux_sched_topo *topo, int src, int dst);

/* realise.c: what to probe; decisions and the snapshot -> rows; rows -> the table. */
void cruxd_want_probes(struct cruxd_agent *a, const struct crux_job_view *v,
		       const struct cruxd_hosts *hosts, const struct cruxd_overrides *local);
void cruxd_realise(struct cruxd_agent *a, const struct cruxd_decisions *d,
		   const struct cruxd_probe_snap *snap, struct cruxd_rows *out);
crux_status_t cruxd_publish(struct cruxd_agent *a, const struct cruxd_rows *rows);
crux_status_t cruxd_rows_open(struct cruxd_rows *r);
void cruxd_rows_close(struct cruxd_rows *r);

/* report.c: the pass's values -> the status record. */
void cruxd_report(struct cruxd_agent *a, const struct cruxd_pass *p, uint64_t pass_ns);

#endif /* CRUXD_AGENT_INT_H */
