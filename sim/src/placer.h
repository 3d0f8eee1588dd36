/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal: where crux-sim puts a job, and when. The placement owns the free
 * GPUs of every host; the event loop (sim.c) asks it, job by job in queue
 * order, whether to start a waiting job now and on which hosts. Policies:
 * pack and random (the baselines), Dally-style delay scheduling with
 * network-sensitive preemption and auto-tuned timers, and SJF-BCO (smallest
 * job first, balanced contention and overhead). Every network policy runs
 * on top of any of them.
 */
#ifndef CRUX_SIM_PLACER_H
#define CRUX_SIM_PLACER_H

#include <stddef.h>
#include <stdint.h>

#include "crux/sim.h"
#include "sim_engine.h"

struct sim_place;

/* What placement knows of a job (all from the trace but the wait). */
struct sim_place_job {
	size_t idx; /* trace index, 0 .. n_jobs-1 */
	uint32_t gpus;
	double compute_s, comm_bytes, overlap;
	double remaining; /* iterations left */
	double arrival_s;
	double enq_s;	       /* start of this wait: arrival, or its preemption */
	const uint32_t *fixed; /* hosts given by the trace, or NULL */
	uint32_t n_fixed;
};

enum sim_place_verdict {
	SIM_PLACE_WAIT =
	    0,	      /* not now: *retry_at says when to ask again (INFINITY: at the next event) */
	SIM_PLACE_OK, /* placed on hosts[0..n_hosts-1] */
	SIM_PLACE_PREEMPT, /* preempt the victims, then ask again (Dally) */
};

crux_status_t crux_sim_place_new(const struct crux_sim_config *cfg, const struct sim_engine *eng,
				 size_t n_jobs, struct sim_place **out, char *err, size_t errlen);
void crux_sim_place_free(struct sim_place *p);

/* 1 when the queue is served in crux_sim_place_key order instead of FIFO. */
int crux_sim_place_reorders(const struct sim_place *p);
/* Queue rank (lower first): SJF-BCO's job size in GPU-seconds; a job
 * waiting longer than starve_s goes first, by arrival. */
double crux_sim_place_key(const struct sim_place *p, const struct sim_place_job *j, double now,
			  double starve_s);

/*
 * Network sensitivity: the share of the job's isolated iteration that its
 * ring transfer takes, t / T. From the two figures cruxctl exports per job
 * (crux.placement/1): t / T = (1 - network_stall_fraction) / gpu_intensity,
 * with I = compute / t. 0 for a job on one host.
 */
double crux_sim_place_sensitivity(const struct sim_place *p, const struct sim_place_job *j);

/* Dally's delay timer for this job now (seconds from j->enq_s). */
double crux_sim_place_timer(const struct sim_place *p, const struct sim_place_job *j);

/*
 * Place j now, make it wait, or name running jobs to preempt for it
 * (*victims: trace indices, valid until the next call). 'hosts' has room
 * for ceil(gpus / GPUs per host) entries.
 */
enum sim_place_verdict crux_sim_place_try(struct sim_place *p, const struct sim_place_job *j,
					  double now, uint32_t *hosts, uint32_t *n_hosts,
					  double *retry_at, const size_t **victims,
					  size_t *n_victims);

/* A running job stopped (finished or preempted): its hosts are free again. */
void crux_sim_place_release(struct sim_place *p, size_t idx, const uint32_t *hosts,
			    uint32_t n_hosts, uint32_t gpus);

/* The steady state of the running jobs (idx[i]: trace index of jobs[i]):
 * Dally's auto-tuner reads how much the fabric stretches cross-rack transfers. */
void crux_sim_place_observe(struct sim_place *p, const size_t *idx, const struct sim_active *jobs,
			    const struct sim_eval_out *out, size_t n);

/* The auto-tuner's current stretch of a cross-rack transfer (>= 1). */
double crux_sim_place_stretch(const struct sim_place *p);

/* Free GPUs of host h (tests). */
uint32_t crux_sim_place_free_gpus(const struct sim_place *p, uint32_t h);

#endif /* CRUX_SIM_PLACER_H */
