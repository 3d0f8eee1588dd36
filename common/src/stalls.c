/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stall breakdown of an iteration from the figures a profile record holds:
 * the compute section's per-iteration busy times and the net section's busy
 * time of the plugin. See crux/profile.h and common/README.md.
 */
#include <math.h>
#include <string.h>

#include "crux/profile.h"

static double finite_nonneg(double v)
{
	return isfinite(v) && v > 0 ? v : 0;
}

void crux_prof_stalls_from(double iter_s, double compute_s, double comm_s, double stall_s,
			   double busy_frac, struct crux_prof_stalls *out)
{
	struct crux_prof_stalls r;

	memset(&r, 0, sizeof(r));
	iter_s = finite_nonneg(iter_s);
	if (iter_s <= 0) {
		*out = r;
		return;
	}
	r.valid = true;
	r.iter_s = iter_s;
	compute_s = fmin(finite_nonneg(compute_s), iter_s);
	comm_s = fmin(finite_nonneg(comm_s), iter_s);
	/* exposed communication: never more than the communication or what compute leaves */
	stall_s = fmin(fmin(finite_nonneg(stall_s), comm_s), iter_s - compute_s);
	r.compute = compute_s / iter_s;
	r.net_known = isfinite(busy_frac) && busy_frac >= 0;
	if (r.net_known && comm_s > 0) {
		/* the plugin's transfers happen inside NCCL's communication */
		r.net_busy_s = fmin(fmin(busy_frac, 1.0) * iter_s, comm_s);
		r.network = stall_s * (r.net_busy_s / comm_s) / iter_s;
	}
	r.interconnect = stall_s / iter_s - r.network;
	if (r.interconnect < 0)
		r.interconnect = 0;
	r.other = 1.0 - r.compute - r.interconnect - r.network;
	if (r.other < 0)
		r.other = 0;
	*out = r;
}

/* Cumulative busy time at t, interpolated linearly between history samples. */
static double busy_at(const struct crux_prof_busy_sample *h, uint32_t n, uint64_t t)
{
	uint32_t i = 1;

	while (i < n - 1 && h[i].t_ns < t)
		i++;
	if (h[i].t_ns == h[i - 1].t_ns)
		return (double)h[i].busy_ns;
	return (double)h[i - 1].busy_ns + (double)(h[i].busy_ns - h[i - 1].busy_ns) *
					      ((double)t - (double)h[i - 1].t_ns) /
					      (double)(h[i].t_ns - h[i - 1].t_ns);
}

double crux_prof_busy_fraction(const struct crux_prof_compute *c, bool has_compute,
			       const struct crux_prof_net *n, bool has_net, bool *over_window)
{
	if (over_window)
		*over_window = false;
	if (!has_net || !n)
		return -1;
	uint32_t nh = n->nbusy_hist <= CRUX_PROF_BUSY_SAMPLES ? n->nbusy_hist : 0;
	if (has_compute && c && nh >= 2 && isfinite(c->window_s) && c->window_s > 0 &&
	    c->window_end_ns > 0) {
		const struct crux_prof_busy_sample *h = n->busy_hist;
		uint64_t len = (uint64_t)(c->window_s * 1e9);
		/* a window that ends after the newest sample is measured up to that sample */
		uint64_t end =
		    c->window_end_ns < h[nh - 1].t_ns ? c->window_end_ns : h[nh - 1].t_ns;

		if (len > 0 && end >= len && end - len >= h[0].t_ns) {
			double b = busy_at(h, nh, end) - busy_at(h, nh, end - len);
			if (over_window)
				*over_window = true;
			return fmin(fmax(b / (double)len, 0.0), 1.0);
		}
	}
	if (n->busy_window_ns > 0 && n->busy_period_ns <= n->busy_window_ns)
		return (double)n->busy_period_ns / (double)n->busy_window_ns;
	return -1;
}

void crux_prof_stalls_of(const struct crux_prof_compute *c, bool has_compute,
			 const struct crux_prof_net *n, bool has_net, struct crux_prof_stalls *out)
{
	double busy = crux_prof_busy_fraction(c, has_compute, n, has_net, NULL);

	if (!has_compute || !c) {
		memset(out, 0, sizeof(*out));
		return;
	}
	crux_prof_stalls_from(c->iter_time_s, c->compute_s, c->comm_s, c->stall_s, busy, out);
}
