/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reference model of periodic training jobs on a fabric (the judge of the
 * fluid evaluator, not a planner: it is slow on purpose).
 *
 * Event-driven fluid simulation. Every job repeats iterations: compute for c
 * seconds; its communication phase starts (1 - overlap) x c after the
 * iteration began, each of its flows then has its bytes to send on its
 * chosen path; the iteration ends when the compute is done and every flow has
 * finished, and the next one starts at once. Between events the rates are
 * constant: levels are served in strict priority (a lower level gets what the
 * active flows of the higher levels leave, at every instant), and inside a
 * level the active flows share max-min fairly per flow (or per job: a job's
 * flows move together at rates proportional to their remaining bytes, its
 * busiest link counting as its share). With guaranteed shares (s->share)
 * each level with active traffic on a link is first given max-min rates
 * within share x the link's rate, then the rest goes by strict priority.
 *
 * Iteration times are measured over [warm-up, horizon]; results are the
 * mean over `phases` runs with seeded random start offsets (phases = 0: one
 * run with every job starting at time 0). Utilisation is the evaluator's
 * formula, sum_j W_j / T_j over sum_j gpus_j, so the two compare directly.
 */
#ifndef CRUX_SCHED_REF_H
#define CRUX_SCHED_REF_H

#include <stddef.h>
#include <stdint.h>

#include "crux/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

enum crux_sched_ref_fairness {
	CRUX_SCHED_REF_PER_FLOW = 0, /* max-min per flow (TCP / RoCE per QP) */
	CRUX_SCHED_REF_PER_JOB,	     /* max-min per job (the evaluator's assumption) */
};

struct crux_sched_ref_params {
	enum crux_sched_ref_fairness fairness;
	int phases;	      /* random start-offset draws averaged; 0 = all start at 0 */
	uint64_t seed;	      /* start offsets */
	double horizon_iters; /* horizon, in isolated iterations of the slowest job */
	double warmup_iters;  /* not measured, same unit (< horizon_iters) */
	uint64_t max_events;  /* per run; the run stops there (stats.truncated) */
};
/* per flow, 4 phases, seed 1, horizon 40, warm-up 10, 2,000,000 events. */
void crux_sched_ref_params_default(struct crux_sched_ref_params *p);

struct crux_sched_ref_stats {
	uint64_t events;  /* rate recomputations, all runs */
	int starved;	  /* jobs x runs with fewer than 2 iterations ended in the window */
	int truncated;	  /* runs stopped by max_events before the horizon */
	double horizon_s; /* simulated seconds per run */
};

/*
 * Runs the jobs on s's paths and levels. iter_time[i] (may be NULL) gets job
 * i's mean iteration time (a starved job: the measured window over the
 * iterations it completed there, at least the window); util the GPU
 * utilisation; stats (may be NULL) what the runs did. Jobs without network
 * traffic run at their compute time. CRUX_ERR_INVAL for invalid jobs (as
 * crux_sched_evaluate), a schedule of another size or bad params.
 */
crux_status_t crux_sched_reference(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				   size_t n, const struct crux_sched_schedule *s,
				   const struct crux_sched_ref_params *p, double *iter_time,
				   double *util, struct crux_sched_ref_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_SCHED_REF_H */
