/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One host's membership of a Crux cluster in etcd (the engine of cruxd's
 * cluster mode):
 *
 *   /crux/<cluster>/hosts/<host>   this host's job view, on its own lease,
 *                                  written only when it changes
 *   /crux/<cluster>/ctl/leader     the leader key (crux/elect.h)
 *   /crux/<cluster>/ctl/schedule   the schedule record, written fenced
 *   /crux/<cluster>/overrides/0x<job key>  one operator's override of one
 *                                  job (cruxctl set on any host), one line
 *                                  of text the plan callback interprets;
 *                                  the leader hands them over in key order
 *
 * crux_cluster_step, called from the agent's loop, renews the lease (every
 * 0.25..0.33 TTL, spread at random), campaigns, and — on the leader, when
 * anything was written since its last read — reads every host view at one revision,
 * merges them, asks the plan callback for a schedule and writes it fenced
 * by its term. A watcher thread follows ctl/ by list-then-watch (a deleted
 * leader key makes the next step campaign);
 * step hands each new schedule to the apply callback in the caller's thread
 * (and so does crux_cluster_apply_received, as soon as it arrives).
 * When etcd cannot be reached the last applied schedule stays in force
 * (stale-but-usable), said once in the log and in crux_cluster_status:
 * after 2 s of failures (a leader election answers errors that long), or at
 * once when a call waited out its whole timeout.
 */
#ifndef CRUX_CLUSTER_NODE_H
#define CRUX_CLUSTER_NODE_H

#include "crux/cluster_view.h"
#include "crux/etcd.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_CLUSTER_NAME_MAX 64

/* The leader's planner: merged view (+ the overrides: every override key's
 * value as one line, in key order; empty when there is none) -> schedule
 * (levels, jobs). The node fills input_revision
 * and term; a schedule equal to the last one written is not written again. */
typedef crux_status_t (*crux_cluster_plan_fn)(void *arg, const struct crux_job_view *merged,
					      const char *overrides, size_t overrides_len,
					      struct crux_cv_schedule *out);
/* Every host: a newer schedule to write into the local decision table.
 * revision: the schedule key's mod revision. */
typedef void (*crux_cluster_apply_fn)(void *arg, const struct crux_cv_schedule *s,
				      int64_t revision);

struct crux_cluster_cfg {
	struct crux_etcd_opts etcd;
	const char *cluster; /* [A-Za-z0-9._-], 1..63 bytes */
	const char *host;    /* this host's name, same alphabet */
	int64_t ttl_s;	     /* lease TTL, 2..3600; 0: 10 */
	crux_cluster_plan_fn plan;
	crux_cluster_apply_fn apply;
	void *arg;
};

struct crux_cluster_status {
	bool leader;
	int64_t term;		   /* > 0 while leader */
	int64_t applied_revision;  /* schedule key revision last applied, 0 none */
	int64_t applied_input;	   /* the input revision that schedule was computed from */
	int64_t received_revision; /* newest schedule the watcher took (applied at the next step) */
	double received_at;	   /* when, CLOCK_MONOTONIC seconds */
	bool stale;		   /* etcd unreachable: last schedule kept */
	bool overrides_pending;	   /* override changes not yet written to etcd */
	uint64_t schedules_written;
	uint64_t bytes_written; /* keys + values this node put */
	uint64_t renewals;	/* lease keep-alives sent */
	char leader_name[CRUX_CLUSTER_NAME_MAX];
	char error[160];      /* while stale: etcd's last error in words */
	uint64_t resyncs;     /* another etcd store detected (restored, rebuilt): resynchronised */
	char resync_why[160]; /* the last one, in words */
	uint64_t watch_restarts; /* watches found silent past their deadline and restarted */
};

struct crux_cluster_node;

crux_status_t crux_cluster_open(const struct crux_cluster_cfg *cfg, struct crux_cluster_node **out,
				char *err, size_t errlen);
/* Stop the watcher; resign if leader; revoke the lease (records vanish). */
void crux_cluster_close(struct crux_cluster_node *n);
/* Ask the watcher to stop without waiting (it notices within about a
 * second): call on many nodes before closing them so their waits overlap. */
void crux_cluster_stop(struct crux_cluster_node *n);
/* Stop the watcher without resigning or revoking (a crash, for tests). */
void crux_cluster_abandon(struct crux_cluster_node *n);

/* Set this host's view (published by the next step if it changed). */
crux_status_t crux_cluster_set_view(struct crux_cluster_node *n, const struct crux_job_view *view);
/*
 * An operator's change on this host of one job's override, from 'before' to
 * 'after' (one line of text each; NULL: no override). The next step writes
 * it to /crux/<cluster>/overrides/0x<job key> (a put, no lease: it outlives
 * this host; or a delete). A change back to the state before a change not
 * yet written cancels it: a withdrawn change writes nothing, so it never
 * removes what another host wrote meanwhile.
 */
crux_status_t crux_cluster_override(struct crux_cluster_node *n, uint64_t job_key,
				    const char *before, size_t blen, const char *after,
				    size_t alen);
/* Have the leader call the plan callback at the next step even when no
 * input changed (time-driven decisions: profiling windows, hold times). */
void crux_cluster_replan(struct crux_cluster_node *n);
/* One round; never blocks longer than the etcd timeout per call. */
crux_status_t crux_cluster_step(struct crux_cluster_node *n);
void crux_cluster_get_status(struct crux_cluster_node *n, struct crux_cluster_status *out);
/*
 * Apply on arrival: a descriptor that becomes readable when the watcher took
 * a new schedule (or the leader key that fences one); -1 when none could be
 * made (then only steps apply). The agent polls it between its passes and
 * calls crux_cluster_apply_received, which applies the newest schedule the
 * fencing allows, in the caller's thread, without any etcd call: the
 * schedule takes effect within milliseconds of its arrival, not at the next
 * pass (cruxd's passes are a second apart).
 */
int crux_cluster_wake_fd(const struct crux_cluster_node *n);
void crux_cluster_apply_received(struct crux_cluster_node *n);
/*
 * A step is due now, not at the next pass: the leader's input watch saw a
 * host record or an override written after its last round (the leader
 * learns of changes by watching; its round reads what changed, plans and
 * writes), or the leader key is gone (campaign). Both wake the same
 * descriptor; the agent then calls crux_cluster_step.
 */
bool crux_cluster_step_due(struct crux_cluster_node *n);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_CLUSTER_NODE_H */
