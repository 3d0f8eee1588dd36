/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CASSINI baseline: time shifts of periodic communication phases.
 *
 * CASSINI places every job's communication phase on a per-link circle of one
 * (unified) iteration and rotates the jobs so that phases sharing a link
 * overlap as little as possible; one shift per job, found by traversing the
 * job-link graph. We keep that idea with two simplifications, written down
 * in the README: shifts are chosen greedily (jobs with the longest
 * communication first, SIM_CASSINI_SLOTS candidate shifts each), and two jobs
 * whose iteration times are not (close to) integer multiples cannot keep a
 * fixed relative phase, so they are taken to overlap fully, as jobs of one
 * level do in the fair-sharing evaluator.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cassini.h"

int crux_sim_cassini_compatible(double pa, double pb)
{
	if (!(pa > 0) || !(pb > 0))
		return 0;
	double r = pa > pb ? pa / pb : pb / pa;
	double k = floor(r + 0.5);
	return k >= 1 && k <= 4 && fabs(r - k) <= SIM_CASSINI_TOLERANCE * k;
}

static double lin_overlap(double a0, double a1, double b0, double b1)
{
	double lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
	return hi > lo ? hi - lo : 0;
}

/* Overlap of circular arcs [x, x+lx) and [y, y+ly) on a circle of length p. */
static double circ_overlap(double x, double lx, double y, double ly, double p)
{
	x = fmod(x, p);
	y = fmod(y, p);
	if (x < 0)
		x += p;
	if (y < 0)
		y += p;
	lx = lx < p ? lx : p;
	ly = ly < p ? ly : p;
	double s = 0;
	for (int m = -1; m <= 1; m++)
		s += lin_overlap(x, x + lx, y + m * p, y + m * p + ly);
	return s;
}

double crux_sim_cassini_overlap(double sa, double la, double pa, double sb, double lb, double pb)
{
	double p = pa > pb ? pa : pb;
	int ka = (int)floor(p / pa + 0.5), kb = (int)floor(p / pb + 0.5);
	ka = ka < 1 ? 1 : ka;
	kb = kb < 1 ? 1 : kb;
	double stepa = p / ka, stepb = p / kb, s = 0;
	la = la < stepa ? la : stepa;
	lb = lb < stepb ? lb : stepb;
	for (int i = 0; i < ka; i++)
		for (int j = 0; j < kb; j++)
			s += circ_overlap(sa + i * stepa, la, sb + j * stepb, lb, p);
	return s;
}

/* Fraction of a's phase that b's phase covers (1 when incompatible). */
static double cover(double sa, double la, double pa, double sb, double lb, double pb)
{
	if (la <= 0 || lb <= 0)
		return 0;
	if (!crux_sim_cassini_compatible(pa, pb))
		return 1;
	double p = pa > pb ? pa : pb;
	double ka = floor(p / pa + 0.5);
	double own = ka * (la < p / ka ? la : p / ka);
	double f = crux_sim_cassini_overlap(sa, la, pa, sb, lb, pb) / own;
	return f > 1 ? 1 : f;
}

struct cjob {
	double t;	 /* isolated communication time: max_e M/B */
	double tau;	 /* current communication time */
	double iter;	 /* current iteration time */
	double shift;	 /* fraction of the iteration */
	double fair_tau; /* communication time under fair sharing (all at once) */
	int bottleneck;	 /* link of the largest bytes / rate; -1 without traffic */
	int placed;
};

static double phase_start(const struct sim_cassini_job *j, const struct cjob *c)
{
	return (1 - j->overlap) * j->compute + c->shift * c->iter;
}

static double iter_of(const struct sim_cassini_job *j, double tau)
{
	double it = (1 - j->overlap) * j->compute + tau;
	return it > j->compute ? it : j->compute;
}

static int cmp_by_t(const void *a, const void *b, void *arg)
{
	const struct cjob *c = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	if (c[x].t != c[y].t)
		return c[x].t > c[y].t ? -1 : 1;
	return x < y ? -1 : x > y;
}

crux_status_t crux_sim_cassini_eval(const struct sim_cassini_job *jobs, size_t n, int n_links,
				    const double *link_bw, const double *fair_iter,
				    double *iter_out, double *shift_out)
{
	struct cjob *c = calloc(n ? n : 1, sizeof(*c));
	size_t *order = calloc(n ? n : 1, sizeof(*order));
	int *lstart = calloc((size_t)n_links + 1, sizeof(*lstart));
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += (size_t)jobs[i].n_links;
	size_t *ljob = calloc(total ? total : 1, sizeof(*ljob));
	double *lbytes = calloc(total ? total : 1, sizeof(*lbytes));
	int *fill = calloc((size_t)n_links + 1, sizeof(*fill));
	double *wsum = calloc(n ? n : 1, sizeof(*wsum));
	size_t *nbr = calloc(n ? n : 1, sizeof(*nbr));
	crux_status_t st = CRUX_ERR_NOMEM;

	if (!c || !order || !lstart || !ljob || !lbytes || !fill || !wsum || !nbr)
		goto out;
	/* Link -> (job, bytes) lists. */
	for (size_t i = 0; i < n; i++) {
		for (int k = 0; k < jobs[i].n_links; k++) {
			if (jobs[i].links[k] < 0 || jobs[i].links[k] >= n_links) {
				st = CRUX_ERR_INVAL;
				goto out;
			}
			lstart[jobs[i].links[k] + 1]++;
		}
	}
	for (int e = 0; e < n_links; e++)
		lstart[e + 1] += lstart[e];
	for (size_t i = 0; i < n; i++) {
		double t = 0;
		c[i].bottleneck = -1;
		for (int k = 0; k < jobs[i].n_links; k++) {
			int e = jobs[i].links[k];
			size_t at = (size_t)lstart[e] + (size_t)fill[e]++;
			ljob[at] = i;
			lbytes[at] = jobs[i].bytes[k];
			double le = jobs[i].bytes[k] / link_bw[e];
			if (le > t) {
				t = le;
				c[i].bottleneck = e;
			}
		}
		c[i].t = t;
		c[i].tau = t;
		c[i].iter = iter_of(&jobs[i], t);
		order[i] = i;
	}
	qsort_r(order, n, sizeof(*order), cmp_by_t, c);

	/*
	 * Greedy shifts on the isolated phases. A job's competitors are merged
	 * first: w[b] = sum over the links a and b share of a's time there.
	 */
	for (size_t oi = 0; oi < n; oi++) {
		size_t a = order[oi];
		const struct sim_cassini_job *ja = &jobs[a];
		double best = INFINITY;
		int best_k = 0;
		size_t nb = 0;
		for (int q = 0; q < ja->n_links && c[a].t > 0; q++) {
			int e = ja->links[q];
			double w = ja->bytes[q] / link_bw[e];
			for (int x = lstart[e]; x < lstart[e + 1]; x++) {
				size_t b = ljob[x];
				if (b == a || !c[b].placed)
					continue;
				if (wsum[b] == 0)
					nbr[nb++] = b;
				wsum[b] += w;
			}
		}
		for (int k = 0; nb && k < SIM_CASSINI_SLOTS; k++) {
			c[a].shift = (double)k / SIM_CASSINI_SLOTS;
			double sa = phase_start(ja, &c[a]), cost = 0;
			for (size_t x = 0; x < nb; x++) {
				size_t b = nbr[x];
				cost += wsum[b] * cover(sa, c[a].tau, c[a].iter,
							phase_start(&jobs[b], &c[b]), c[b].tau,
							c[b].iter);
			}
			if (cost < best - 1e-12) {
				best = cost;
				best_k = k;
			}
		}
		for (size_t x = 0; x < nb; x++)
			wsum[nbr[x]] = 0;
		c[a].shift = (double)best_k / SIM_CASSINI_SLOTS;
		c[a].placed = 1;
	}

	/*
	 * Steady state relative to fair sharing: the evaluator's ECMP answer has
	 * every job on a link communicating at once. CASSINI removes the part of
	 * that contention its shifts avoid: on the job's bottleneck link, its
	 * extra communication time (tau_fair - t) shrinks to the byte-weighted
	 * fraction of the competitors whose phases still cover its own. Phase
	 * lengths depend on the answer: a damped fixed point.
	 */
	double *next = calloc(n ? n : 1, sizeof(*next));
	if (!next)
		goto out;
	for (size_t a = 0; a < n; a++) {
		double start = (1 - jobs[a].overlap) * jobs[a].compute;
		double tf = fair_iter[a] > jobs[a].compute * (1 + 1e-12) ? fair_iter[a] - start : 0;
		c[a].fair_tau = tf > c[a].t ? tf : c[a].t;
		/* From the isolated phases (the schedule CASSINI planned): the
		 * smallest self-consistent answer. */
		c[a].tau = c[a].t;
		c[a].iter = iter_of(&jobs[a], c[a].tau);
	}
	for (int round = 0; round < 8; round++) {
		for (size_t a = 0; a < n; a++) {
			const struct sim_cassini_job *ja = &jobs[a];
			double sa = phase_start(ja, &c[a]), frac = 0;
			if (c[a].bottleneck >= 0) {
				int e = c[a].bottleneck;
				double all = 0, cov = 0;
				for (int x = lstart[e]; x < lstart[e + 1]; x++) {
					size_t b = ljob[x];
					if (b == a)
						continue;
					all += lbytes[x];
					cov += lbytes[x] * cover(sa, c[a].tau, c[a].iter,
								 phase_start(&jobs[b], &c[b]),
								 c[b].tau, c[b].iter);
				}
				frac = all > 0 ? cov / all : 0;
			}
			next[a] = c[a].t + (c[a].fair_tau - c[a].t) * frac;
		}
		for (size_t a = 0; a < n; a++) {
			c[a].tau = 0.5 * (c[a].tau + next[a]);
			c[a].iter = iter_of(&jobs[a], c[a].tau);
		}
	}
	/* A link never carries more than its capacity on average. */
	for (int e = 0; e < n_links; e++) {
		double load = 0;
		for (int x = lstart[e]; x < lstart[e + 1]; x++)
			load += lbytes[x] / c[ljob[x]].iter;
		load /= link_bw[e];
		if (load <= 1 + 1e-9)
			continue;
		/* Overloaded: the jobs on this link fall back to fair sharing, whose
		 * answer fits every link (and only lightens the others). */
		for (int x = lstart[e]; x < lstart[e + 1]; x++) {
			size_t b = ljob[x];
			c[b].iter = fair_iter[b] > c[b].iter ? fair_iter[b] : c[b].iter;
		}
	}
	free(next);
	for (size_t i = 0; i < n; i++) {
		/* Never slower than fair sharing on the same paths. */
		iter_out[i] = c[i].iter < fair_iter[i] ? c[i].iter : fair_iter[i];
		if (shift_out)
			shift_out[i] = c[i].shift;
	}
	st = CRUX_OK;
out:
	free(c);
	free(order);
	free(lstart);
	free(ljob);
	free(lbytes);
	free(fill);
	free(wsum);
	free(nbr);
	return st;
}
