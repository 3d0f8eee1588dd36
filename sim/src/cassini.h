/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal: the CASSINI baseline (NSDI'24) as crux-sim models it. No
 * priorities: every job shares links fairly, but each job's periodic
 * communication phase is time-shifted so that jobs sharing a link take turns.
 */
#ifndef CRUX_SIM_CASSINI_H
#define CRUX_SIM_CASSINI_H

#include <stddef.h>

#include "crux/status.h"

/* Candidate shifts per iteration (CASSINI's circle discretised). */
#define SIM_CASSINI_SLOTS 16
/* Two periods are compatible when their ratio is within this of an integer <= 4. */
#define SIM_CASSINI_TOLERANCE 0.05

struct sim_cassini_job {
	double compute; /* c */
	double overlap; /* communication starts after (1 - overlap) c */
	int n_links;	/* fabric links the job uses */
	const int *links;
	const double *bytes; /* per iteration on each of those links */
};

/*
 * Choose shifts (greedy over jobs by decreasing communication time, each job
 * taking the slot that overlaps least with the jobs already placed on its
 * links) and evaluate the steady state relative to fair sharing: fair_iter[i]
 * is job i's iteration time when every job on its links communicates at once
 * (the scheduler's evaluator, one level, same paths). On its bottleneck link
 * a job keeps the byte-weighted fraction of that contention whose phases
 * still overlap its own after the shifts; a job of incompatible period
 * overlaps fully. iter_out[i] gets each job's iteration time, shift_out (may
 * be NULL) its shift as a fraction of its iteration.
 */
crux_status_t crux_sim_cassini_eval(const struct sim_cassini_job *jobs, size_t n, int n_links,
				    const double *link_bw, const double *fair_iter,
				    double *iter_out, double *shift_out);

/* Overlap (length) of the periodic phases [sa, sa+la) every pa and
 * [sb, sb+lb) every pb, over one common circle of length max(pa, pb) whose
 * length is a multiple of both (caller checks compatibility). */
double crux_sim_cassini_overlap(double sa, double la, double pa, double sb, double lb, double pb);

/* 1 when pa and pb are compatible periods (ratio close to 1, 2, 3 or 4). */
int crux_sim_cassini_compatible(double pa, double pb);

#endif /* CRUX_SIM_CASSINI_H */
