/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The planner: the jobs it tracks between passes (life cycle, figures,
 * hysteresis, the fairness guard's accounts) and the hosts of the view it
 * last took with their topology nodes. One pass: take a (merged) job view,
 * then plan(overrides, now) -> decisions. Single-host mode runs it from
 * agent.c; cluster mode from the leader's round (cluster.c), which also
 * restarts it from the schedule in force for a new term.
 *
 * It borrows the agent's configuration, topology and guard (they outlive it;
 * cruxd_planner_configure after a reload).
 */
#ifndef CRUXD_PLANNER_H
#define CRUXD_PLANNER_H

#include "crux/agent.h"
#include "crux/guard.h"
#include "crux/overrides.h"
#include "decisions.h"

struct cruxd_planner;

crux_status_t cruxd_planner_new(const struct cruxd_config *cfg, struct crux_sched_topo *topo,
				struct cruxd_guard *guard, struct cruxd_planner **out);
void cruxd_planner_free(struct cruxd_planner *pl);

/* After a reload: the new topology (NULL: the single-host view); adopted
 * decisions are made again at the next plan. */
void cruxd_planner_configure(struct cruxd_planner *pl, struct crux_sched_topo *topo);

/* A job decided before this planner (the table at start-up, or the schedule
 * in force when a leader's term begins): kept until a real event. */
struct cruxd_planner_kept {
	uint64_t key;
	const char *id;
	uint8_t state; /* CRUX_JOB_SCHEDULED keeps its level and routes */
	uint8_t level; /* clamped to the levels configured */
	bool restored; /* its ranks may still be re-attaching to a restarted agent */
	uint64_t since_ns, since_wall_ms;
	bool has_base; /* the hysteresis baseline of the decision in force */
	double base_work, base_bytes, base_iter;
	uint32_t nroutes; /* the table's routes, kept as they are */
	const struct crux_dt_route *routes;
};

/* Add that job (a job already tracked stays as it is). */
crux_status_t cruxd_planner_keep(struct cruxd_planner *pl, const struct cruxd_planner_kept *k);
/* Forget every job: a new leader's term starts from the schedule (keep). */
void cruxd_planner_restart(struct cruxd_planner *pl);
/* Reschedule at the next plan (the overrides changed). */
void cruxd_planner_resched(struct cruxd_planner *pl);

/* A (merged) view at 'now': arrivals, every job's figures from its sums. */
crux_status_t cruxd_planner_take_view(struct cruxd_planner *pl, const struct crux_job_view *v,
				      uint64_t now);
/* Cluster mode: every job's start as Unix time in ms, where not set yet. */
void cruxd_planner_stamp_wall(struct cruxd_planner *pl, uint64_t now, uint64_t wall_ms);
/* Life cycle, the fairness guard, a reschedule when one is due; then the
 * decisions: the overrides (in their order), then every job (by key), and
 * the hosts of the view taken (out->hosts: realise finds their nodes). */
crux_status_t cruxd_planner_plan(struct cruxd_planner *pl, const struct cruxd_overrides *ovr,
				 uint64_t now, struct cruxd_decisions *out);
/* Would a later plan decide something even if the view stayed the same? */
bool cruxd_planner_due(const struct cruxd_planner *pl);
/* A host's topology node (by address as text, else host name); -1: none.
 * The cluster stage's, for the schedule's routes. */
int cruxd_planner_node_of(struct cruxd_planner *pl, const struct crux_addr *addr);

#endif /* CRUXD_PLANNER_H */
