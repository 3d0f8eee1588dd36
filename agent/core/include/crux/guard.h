/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd's fairness guard: promotion by measurement (CRUX_MAX_SLOWDOWN).
 *
 * Every pass the agent feeds each scheduled job's measured slowdown (its
 * current iteration time from the profile over its isolated estimate). A job
 * whose smoothed slowdown stays above the bound for 'age_ns' is lifted one
 * level above what the scheduler gave it, and one more level for every
 * further 'age_ns' above it (aging), up to the top. A lifted job returns one
 * level only after its smoothed slowdown stayed below hysteresis x bound for
 * its hold time; each return followed by a new lift doubles that job's hold
 * time (up to max_hold_ns), so a job that needs its lift keeps it. At most
 * one change per job per 'min_gap_ns' and at most 'max_changes' changes per
 * 'min_gap_ns' in all bound how often the agent reschedules. Every change
 * restarts the job's measurement (samples from before describe the old level).
 */
#ifndef CRUX_GUARD_H
#define CRUX_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cruxd_guard_config {
	double bound;	      /* max slowdown (>= 1); 0 = guard off */
	double alpha;	      /* EWMA weight of a new sample, (0, 1] */
	double hysteresis;    /* return below hysteresis x bound, (0, 1) */
	uint64_t age_ns;      /* time above the bound per lifted level */
	uint64_t hold_ns;     /* first hold time below the return threshold */
	uint64_t max_hold_ns; /* cap of the doubled hold time */
	uint64_t min_gap_ns;  /* least time between two changes of one job */
	uint32_t max_changes; /* changes of all jobs per min_gap_ns */
};

void cruxd_guard_config_default(struct cruxd_guard_config *c);

struct cruxd_guard;

crux_status_t cruxd_guard_new(const struct cruxd_guard_config *c, struct cruxd_guard **out);
void cruxd_guard_free(struct cruxd_guard *g);
/* Replace the configuration (SIGHUP); lifts stay. */
void cruxd_guard_configure(struct cruxd_guard *g, const struct cruxd_guard_config *c);

/*
 * One measurement of a job at now_ns: slowdown = iteration time / isolated
 * estimate (ignored unless finite and > 0). Returns true when the job's lift
 * changed (the caller reschedules). nlevels bounds the lift (nlevels - 1).
 */
bool cruxd_guard_observe(struct cruxd_guard *g, uint64_t key, double slowdown, uint64_t now_ns,
			 uint32_t nlevels);
/* Levels added to the job's scheduled level (0 = none). */
uint32_t cruxd_guard_lift(const struct cruxd_guard *g, uint64_t key);
/* Smoothed slowdown of the job (0 = not measured yet). */
double cruxd_guard_slowdown(const struct cruxd_guard *g, uint64_t key);
/* Drop the jobs not seen since before now_ns - keep_ns (departed). */
void cruxd_guard_prune(struct cruxd_guard *g, uint64_t now_ns, uint64_t keep_ns);
/* Level changes made so far. */
uint64_t cruxd_guard_changes(const struct cruxd_guard *g);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_GUARD_H */
