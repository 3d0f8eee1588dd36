/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal: the network side of crux-sim. An engine owns the topology and a
 * policy; given the running jobs (placement, compute, bytes, overlap) it
 * decides paths and levels (or time shifts) and returns every job's
 * steady-state iteration time and the average load it puts on each link.
 */
#ifndef CRUX_SIM_ENGINE_H
#define CRUX_SIM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "crux/sim.h"

struct sim_engine;

struct sim_active {
	uint32_t id;
	uint32_t gpus;
	uint32_t n_hosts;
	const uint32_t *hosts;
	double compute_s;
	double comm_bytes;
	double overlap;
	double iso_s; /* iteration time alone (0 = not known yet) */
	double bound; /* the guard's bound on this job's predicted slowdown in this
		       * plan (its slowdown account); 0 = the configured bound */
	int urgent;   /* its account is at the bound: the guard's top level */
};

struct sim_eval_out {
	double iter_s;	  /* steady-state iteration time */
	double hop_bytes; /* bytes per iteration summed over the fabric links it crosses */
	int level;	  /* 0 = highest; -1 when the policy has no levels */
	int infeasible;	  /* the guard found no schedule that keeps it within its bound */
};

crux_status_t crux_sim_engine_new(const struct crux_sim_config *cfg, struct sim_engine **out,
				  char *err, size_t errlen);
void crux_sim_engine_free(struct sim_engine *e);

uint32_t crux_sim_engine_hosts(const struct sim_engine *e);
/* Placement locality group (ToR) of each host; groups are 0..n_groups-1. */
const uint32_t *crux_sim_engine_host_group(const struct sim_engine *e, uint32_t *n_groups);

/* Rate of group q's host links (the fastest, bytes/s) and of its switch's
 * links up the fabric (sum, bytes/s): what placement's contention model needs. */
void crux_sim_engine_group_rates(const struct sim_engine *e, uint32_t q, double *host_bw,
				 double *up_bw);

/*
 * Run the policy on the running set and evaluate the steady state. 'out' has
 * one entry per job. '*link_rate_sum' is the sum over links of the average
 * bytes/s carried and '*max_load' the highest average load/capacity.
 */
crux_status_t crux_sim_engine_eval(struct sim_engine *e, const struct sim_active *jobs, size_t n,
				   struct sim_eval_out *out, double *link_rate_sum,
				   double *max_load, char *err, size_t errlen);

/*
 * The policy's plan for the running set (paths and levels), not evaluated:
 * for tests and tools. Free *out with crux_sched_schedule_free; its d[i].path
 * index each flow's candidates (crux_sched_topo_paths), flows in ring order,
 * 'channels' per host pair.
 */
struct crux_sched_schedule;
crux_status_t crux_sim_engine_plan(struct sim_engine *e, const struct sim_active *jobs, size_t n,
				   struct crux_sched_schedule **out, char *err, size_t errlen);

/*
 * The plan in force (the last crux_sim_engine_eval's, for the same n jobs) run
 * through the reference model: fills *snap but t_s. CRUX_ERR_INVAL when
 * there is no such plan (CASSINI keeps none).
 */
crux_status_t crux_sim_engine_reference(struct sim_engine *e, const struct sim_active *jobs,
					size_t n, struct crux_sim_ref_snap *snap);

/* Iteration time of one job alone on the fabric (ECMP-independent: best path). */
crux_status_t crux_sim_engine_isolated(struct sim_engine *e, const struct sim_active *job,
				       double *iter_s, char *err, size_t errlen);

#endif /* CRUX_SIM_ENGINE_H */
