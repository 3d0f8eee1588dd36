/* SPDX-License-Identifier: Apache-2.0 */
/* Schedules, intensity, correction factor, path selection and the level mappings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

#define K_MAX	       100.0 /* clamp of the correction factor */
#define GAIN_EPS       1e-9
#define PAIR_MAX_ITERS 100000

void crux_sched_params_default(struct crux_sched_params *p)
{
	p->levels = CRUX_SCHED_DEF_LEVELS;
	p->orders = CRUX_SCHED_DEF_ORDERS;
	p->seed = 1;
	p->max_slowdown = 0;
	p->n_weights = 0;
	for (int l = 0; l < CRUX_SCHED_MAX_LEVELS; l++)
		p->weight[l] = 0;
	p->eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
	p->correction = 0;
	p->guard_enforce_all = 0;
	p->refine_gain = CRUX_SCHED_DEF_REFINE_GAIN;
	p->refine_free = 1;
	p->guard_refine = 0;
	p->paths_search = 0;
	p->paths_search_full = 0;
}

static const char *const policy_names[CRUX_SCHED_N_POLICIES] = {
    "crux", "crux-ps-pa", "crux-pa", "sincronia", "varys", "taccl", "ecmp",
};

const char *crux_sched_policy_name(enum crux_sched_policy p)
{
	return (unsigned)p < CRUX_SCHED_N_POLICIES ? policy_names[p] : "unknown";
}

crux_status_t crux_sched_policy_parse(const char *name, enum crux_sched_policy *out)
{
	for (int i = 0; i < CRUX_SCHED_N_POLICIES; i++) {
		if (!strcmp(name, policy_names[i])) {
			*out = (enum crux_sched_policy)i;
			return CRUX_OK;
		}
	}
	if (!strcmp(name, "crux-full")) {
		*out = CRUX_SCHED_CRUX_FULL;
		return CRUX_OK;
	}
	return CRUX_ERR_INVAL;
}

crux_status_t crux_sched_schedule_new(const struct crux_sched_job *jobs, size_t n, int levels,
				      struct crux_sched_schedule **out)
{
	struct crux_sched_schedule *s;
	size_t nf = 0;

	if (levels < 1 || levels > CRUX_SCHED_MAX_LEVELS)
		return CRUX_ERR_RANGE;
	for (size_t i = 0; i < n; i++) {
		if (jobs[i].n_flows < 0)
			return CRUX_ERR_INVAL;
		nf += (size_t)jobs[i].n_flows;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return CRUX_ERR_NOMEM;
	s->d = calloc(n ? n : 1, sizeof(*s->d));
	s->path_store = malloc((nf ? nf : 1) * sizeof(int));
	if (!s->d || !s->path_store) {
		crux_sched_schedule_free(s);
		return CRUX_ERR_NOMEM;
	}
	s->n_jobs = n;
	s->n_paths = nf;
	s->levels = levels;
	s->reference = -1;
	nf = 0;
	for (size_t i = 0; i < n; i++) {
		s->d[i].id = jobs[i].id;
		s->d[i].k = 1;
		s->d[i].rank = (int)i;
		s->d[i].path = s->path_store + nf;
		for (int f = 0; f < jobs[i].n_flows; f++)
			s->path_store[nf + (size_t)f] = -1;
		nf += (size_t)jobs[i].n_flows;
	}
	*out = s;
	return CRUX_OK;
}

void crux_sched_schedule_free(struct crux_sched_schedule *s)
{
	if (!s)
		return;
	free(s->d);
	free(s->path_store);
	free(s);
}

crux_status_t crux_sched_schedule_copy(struct crux_sched_schedule *dst,
				       const struct crux_sched_schedule *src)
{
	if (dst->n_jobs != src->n_jobs || dst->n_paths != src->n_paths)
		return CRUX_ERR_INVAL;
	for (size_t i = 0; i < src->n_jobs; i++) {
		int *p = dst->d[i].path;

		if (src->d[i].path - src->path_store != p - dst->path_store)
			return CRUX_ERR_INVAL;
		dst->d[i] = src->d[i];
		dst->d[i].path = p;
	}
	if (src->n_paths)
		memcpy(dst->path_store, src->path_store, src->n_paths * sizeof(int));
	dst->levels = src->levels;
	dst->eval_model = src->eval_model;
	memcpy(dst->share, src->share, sizeof(dst->share));
	dst->guard_lifts = src->guard_lifts;
	dst->guard_violators = src->guard_violators;
	dst->guard_infeasible = src->guard_infeasible;
	dst->reference = src->reference;
	dst->cut_weight = src->cut_weight;
	dst->refine_moves = src->refine_moves;
	dst->refine_evals = src->refine_evals;
	dst->paths_moves = src->paths_moves;
	dst->paths_evals = src->paths_evals;
	return CRUX_OK;
}

/* ---- paths ---- */

int crux_sched_ecmp_pick(uint64_t seed, uint64_t job_id, int src, int dst, int n_paths)
{
	if (n_paths <= 1)
		return 0;
	uint64_t h = crux_sched_mix64(
	    seed ^ crux_sched_mix64(
		       job_id ^ crux_sched_mix64(((uint64_t)(uint32_t)src << 32) | (uint32_t)dst)));

	return (int)(h % (uint64_t)n_paths);
}

crux_status_t crux_sched_paths_ecmp(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				    size_t n, uint64_t seed, struct crux_sched_schedule *s)
{
	for (size_t i = 0; i < n; i++) {
		for (int f = 0; f < jobs[i].n_flows; f++) {
			const struct crux_sched_flow *fl = &jobs[i].flows[f];
			struct crux_sched_path_set ps;

			if (fl->src == fl->dst) {
				s->d[i].path[f] = -1;
				continue;
			}
			crux_status_t st = crux_sched_topo_paths(t, fl->src, fl->dst, &ps);

			if (st)
				return st;
			s->d[i].path[f] =
			    crux_sched_ecmp_pick(seed, jobs[i].id, fl->src, fl->dst, ps.n_paths);
		}
	}
	return CRUX_OK;
}

struct key_idx {
	double a, b;
	size_t i;
};

static int cmp_key_desc(const void *x, const void *y)
{
	const struct key_idx *p = x, *q = y;

	if (p->a != q->a)
		return p->a > q->a ? -1 : 1;
	if (p->b != q->b)
		return p->b > q->b ? -1 : 1;
	return p->i < q->i ? -1 : p->i > q->i;
}

crux_status_t crux_sched_paths_select(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				      size_t n, const size_t *order, struct crux_sched_schedule *s)
{
	double *load = calloc((size_t)t->n_links + 1, sizeof(double));
	struct key_idx *ord = NULL;
	crux_status_t st = CRUX_ERR_NOMEM;

	if (!load)
		return st;
	if (!order) {
		ord = malloc((n ? n : 1) * sizeof(*ord));
		if (!ord)
			goto out;
		for (size_t i = 0; i < n; i++) {
			ord[i].a = s->d[i].intensity;
			ord[i].b = 0;
			ord[i].i = i;
		}
		qsort(ord, n, sizeof(*ord), cmp_key_desc);
	}
	for (size_t oi = 0; oi < n; oi++) {
		size_t i = order ? order[oi] : ord[oi].i;

		if (i >= n) {
			st = CRUX_ERR_INVAL;
			goto out;
		}
		/* [inferred] A link's load is an average rate: the job's bytes over its
		 * isolated iteration time, so a job that mostly computes weighs less. */
		double T = fmax(jobs[i].compute,
				(1 - jobs[i].overlap) * jobs[i].compute + s->d[i].comm_time);
		double scale = T > 0 ? 1.0 / T : 1;

		for (int f = 0; f < jobs[i].n_flows; f++) {
			const struct crux_sched_flow *fl = &jobs[i].flows[f];
			struct crux_sched_path_set ps;
			int best = -1;
			double best_max = 0, best_sum = 0;

			if (fl->src == fl->dst) {
				s->d[i].path[f] = -1;
				continue;
			}
			st = crux_sched_topo_paths(t, fl->src, fl->dst, &ps);
			if (st)
				goto out;
			for (int p = 0; p < ps.n_paths; p++) {
				double mx = 0, sum = 0;

				for (int k = ps.off[p]; k < ps.off[p + 1]; k++) {
					int l = ps.links[k];
					double u = (load[l] + scale * fl->bytes) / t->lbw[l];

					sum += u;
					if (u > mx)
						mx = u;
				}
				if (best < 0 || mx < best_max ||
				    (mx == best_max && sum < best_sum)) {
					best = p;
					best_max = mx;
					best_sum = sum;
				}
			}
			s->d[i].path[f] = best;
			for (int k = ps.off[best]; k < ps.off[best + 1]; k++)
				load[ps.links[k]] += scale * fl->bytes;
		}
	}
	st = CRUX_OK;
out:
	free(load);
	free(ord);
	return st;
}

/* ---- intensity ---- */

crux_status_t crux_sched_intensity(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				   size_t n, struct crux_sched_schedule *s)
{
	double *m = calloc((size_t)t->n_links + 1, sizeof(double));
	int *touched = NULL;
	size_t tcap = 0;
	crux_status_t st = CRUX_ERR_NOMEM;

	if (!m)
		return st;
	for (size_t i = 0; i < n; i++) {
		size_t nt = 0;
		double tmax = 0;

		for (int f = 0; f < jobs[i].n_flows; f++) {
			const int *links;
			int nl;

			st = crux_sched_flow_links(t, &jobs[i], f, s->d[i].path[f], &links, &nl);
			if (st)
				goto out;
			for (int k = 0; k < nl; k++) {
				int l = links[k];

				if (m[l] == 0) {
					if (nt == tcap) {
						size_t nc = tcap ? tcap * 2 : 64;
						int *np = realloc(touched, nc * sizeof(int));

						if (!np) {
							st = CRUX_ERR_NOMEM;
							goto out;
						}
						touched = np;
						tcap = nc;
					}
					touched[nt++] = l;
				}
				m[l] += jobs[i].flows[f].bytes;
			}
		}
		for (size_t k = 0; k < nt; k++) {
			double tt = m[touched[k]] / t->lbw[touched[k]];

			if (tt > tmax)
				tmax = tt;
			m[touched[k]] = 0;
		}
		s->d[i].comm_time = tmax;
		s->d[i].intensity = tmax > 0 ? jobs[i].work / tmax : 0;
	}
	st = CRUX_OK;
out:
	free(m);
	free(touched);
	return st;
}

/* ---- correction factor ---- */

/* Periodic busy pattern of the job served first: [kT + s, kT + s + c). */
struct busy {
	double period, start, len;
};

/* Free link time in [x, y) under the busy pattern. */
static double free_time(const struct busy *b, double x, double y)
{
	if (y <= x)
		return 0;
	/* busy time in [0, z) */
	double bx = 0, by = 0;

	for (int pass = 0; pass < 2; pass++) {
		double z = pass ? y : x, acc;
		double u = z - b->start;

		if (u <= 0) {
			acc = 0;
		} else {
			double k = floor(u / b->period);
			double r = u - k * b->period;

			acc = k * b->len + (r < b->len ? r : b->len);
		}
		if (pass)
			by = acc;
		else
			bx = acc;
	}
	return (y - x) - (by - bx);
}

/* Time at which `need` seconds of free link time have accumulated after x (O(1)). */
static double free_until(const struct busy *b, double x, double need)
{
	if (x < b->start) {
		double avail = b->start - x;

		if (avail >= need)
			return x + need;
		need -= avail;
		x = b->start;
	}
	double per_free = b->period - b->len;
	double base = b->start + floor((x - b->start) / b->period) * b->period;

	if (x < base) /* rounding */
		x = base;
	if (x - base < b->len)
		x = base + b->len; /* inside a busy interval: wait for its end */
	double avail = base + b->period - x;

	if (avail >= need)
		return x + need;
	need -= avail;
	base += b->period;
	/* Whole periods, leaving a partial one (0 < need <= per_free). */
	double whole = floor(need / per_free);

	if (whole > 0 && whole * per_free >= need)
		whole -= 1;
	base += whole * b->period;
	need -= whole * per_free;
	if (need <= 0)
		return base;
	return base + b->len + need;
}

/*
 * Link time each job gets in [0, H) when both start at 0 and hi is served
 * first. [inferred] H = 3 iterations of the longer job: the paper's Example 1
 * is counted over 12 s (k = 1.5), and this horizon also orders Example 2's
 * hidden job lower (a steady state would not: that job's gaps phase-lock).
 */
static void pair_times(const struct crux_sched_pair_job *hi, const struct crux_sched_pair_job *lo,
		       double H, double *t_hi, double *t_lo)
{
	double th = hi->comm, tl = lo->comm;
	double sh = (1.0 - hi->overlap) * hi->compute, sl = (1.0 - lo->overlap) * lo->compute;
	double Th = fmax(hi->compute, sh + th);
	struct busy b = {Th, sh, th};

	if (th <= 0) {
		/* hi never uses the link: lo runs alone. */
		b.len = 0;
		b.period = 1e300; /* no busy interval within any horizon */
	}
	*t_hi = th > 0 ? H - free_time(&b, 0, H) : 0;
	if (tl <= 0) {
		*t_lo = 0;
		return;
	}
	if (th > 0 && Th - th <= GAIN_EPS * Th) {
		*t_lo = 0; /* hi holds the link all the time */
		return;
	}
	double x = 0, sent = 0;
	long iters = 0;

	while (x < H) {
		double cs = x + sl, ce;

		if (cs >= H)
			break;
		if (++iters > PAIR_MAX_ITERS) {
			/* Very unequal periods: extrapolate the share seen so far. */
			sent *= H / x;
			break;
		}
		ce = free_until(&b, cs, tl);
		sent += free_time(&b, cs, fmin(ce, H));
		x = fmax(x + lo->compute, ce);
	}
	*t_lo = sent;
}

crux_status_t crux_sched_pair_gain(const struct crux_sched_pair_job *j,
				   const struct crux_sched_pair_job *r, double *d_j, double *d_r)
{
	const struct crux_sched_pair_job *v[2] = {j, r};
	double T[2];

	for (int i = 0; i < 2; i++) {
		if (!isfinite(v[i]->compute) || v[i]->compute < 0 || !isfinite(v[i]->comm) ||
		    v[i]->comm < 0 || !isfinite(v[i]->overlap) || v[i]->overlap < 0 ||
		    v[i]->overlap > 1)
			return CRUX_ERR_INVAL;
		if (v[i]->compute + v[i]->comm <= 0)
			return CRUX_ERR_INVAL;
		T[i] = fmax(v[i]->compute, (1.0 - v[i]->overlap) * v[i]->compute + v[i]->comm);
	}
	double H = 3.0 * fmax(T[0], T[1]), jf, rs, rf, js;

	pair_times(j, r, H, &jf, &rs);
	pair_times(r, j, H, &rf, &js);
	*d_j = jf - js;
	*d_r = rf - rs;
	return CRUX_OK;
}

struct kcache {
	double c, o, t, k;
};

/* The reference job: the one with the most network bytes (-1: none). */
static size_t reference_job(const struct crux_sched_job *jobs, size_t n,
			    const struct crux_sched_schedule *s)
{
	size_t ref = (size_t)-1;
	double best = -1;

	for (size_t i = 0; i < n; i++) {
		double tot = 0;

		for (int f = 0; f < jobs[i].n_flows; f++)
			if (jobs[i].flows[f].src != jobs[i].flows[f].dst)
				tot += jobs[i].flows[f].bytes;
		if (s->d[i].comm_time > 0 && tot > best) {
			best = tot;
			ref = i;
		}
	}
	return ref;
}

crux_status_t crux_sched_priority_plain(const struct crux_sched_job *jobs, size_t n,
					struct crux_sched_schedule *s)
{
	size_t ref = reference_job(jobs, n, s);

	s->reference = ref == (size_t)-1 ? -1 : (int)ref;
	for (size_t i = 0; i < n; i++) {
		s->d[i].k = 1;
		s->d[i].priority = s->d[i].intensity;
	}
	return CRUX_OK;
}

crux_status_t crux_sched_correction(const struct crux_sched_job *jobs, size_t n,
				    struct crux_sched_schedule *s)
{
	size_t ref = reference_job(jobs, n, s);
	struct kcache *cache = NULL;
	size_t cache_cap = 0;
	crux_status_t st = CRUX_OK;

	s->reference = ref == (size_t)-1 ? -1 : (int)ref;
	if (ref != (size_t)-1) {
		cache_cap = 1024;
		while (cache_cap < 2 * n)
			cache_cap *= 2;
		cache = malloc(cache_cap * sizeof(*cache));
		if (!cache)
			return CRUX_ERR_NOMEM;
		for (size_t i = 0; i < cache_cap; i++)
			cache[i].t = -1;
	}
	for (size_t i = 0; i < n; i++) {
		double k = 1;

		if (ref != (size_t)-1 && i != ref && s->d[i].comm_time > 0) {
			struct crux_sched_pair_job pj = {jobs[i].compute, jobs[i].overlap,
							 s->d[i].comm_time};
			struct crux_sched_pair_job pr = {jobs[ref].compute, jobs[ref].overlap,
							 s->d[ref].comm_time};
			/* Jobs of one model share (c, overlap, t): simulate each tuple once. */
			uint64_t h;
			double key[3] = {pj.compute, pj.overlap, pj.comm};

			memcpy(&h, &key[0], 8);
			uint64_t h2, h3;

			memcpy(&h2, &key[1], 8);
			memcpy(&h3, &key[2], 8);
			h = crux_sched_mix64(h ^ crux_sched_mix64(h2 ^ crux_sched_mix64(h3)));
			size_t slot = h & (cache_cap - 1);

			while (cache[slot].t >= 0 &&
			       !(cache[slot].c == pj.compute && cache[slot].o == pj.overlap &&
				 cache[slot].t == pj.comm))
				slot = (slot + 1) & (cache_cap - 1);
			if (cache[slot].t >= 0) {
				k = cache[slot].k;
			} else {
				double dj, dr;

				st = crux_sched_pair_gain(&pj, &pr, &dj, &dr);
				if (st)
					goto out;
				if (dr > GAIN_EPS)
					k = dj / dr;
				else
					k = dj > GAIN_EPS ? K_MAX : 1;
				k = fmin(fmax(k, 0), K_MAX);
				cache[slot].c = pj.compute;
				cache[slot].o = pj.overlap;
				cache[slot].t = pj.comm;
				cache[slot].k = k;
			}
		}
		s->d[i].k = k;
		s->d[i].priority = k * s->d[i].intensity;
	}
out:
	free(cache);
	return st;
}

/* ---- ranks and rank-based level mappings ---- */

void crux_sched_rank(struct crux_sched_schedule *s)
{
	struct key_idx *ord = malloc((s->n_jobs ? s->n_jobs : 1) * sizeof(*ord));

	if (!ord) {
		/* Fall back to index order rather than leaving stale ranks. */
		for (size_t i = 0; i < s->n_jobs; i++)
			s->d[i].rank = (int)i;
		return;
	}
	for (size_t i = 0; i < s->n_jobs; i++) {
		ord[i].a = s->d[i].priority;
		ord[i].b = s->d[i].intensity;
		ord[i].i = i;
	}
	qsort(ord, s->n_jobs, sizeof(*ord), cmp_key_desc);
	for (size_t r = 0; r < s->n_jobs; r++)
		s->d[ord[r].i].rank = (int)r;
	free(ord);
}

crux_status_t crux_sched_prioritise(const struct crux_sched_job *jobs, size_t n,
				    const struct crux_sched_params *p,
				    struct crux_sched_schedule *s)
{
	crux_status_t st = p->correction ? crux_sched_correction(jobs, n, s)
					 : crux_sched_priority_plain(jobs, n, s);

	if (!st)
		crux_sched_rank(s);
	return st;
}

void crux_sched_compress_rank(struct crux_sched_schedule *s)
{
	for (size_t i = 0; i < s->n_jobs; i++) {
		int l = s->levels - 1 - s->d[i].rank;

		s->d[i].level = l < 0 ? 0 : l;
	}
}

void crux_sched_compress_balanced(struct crux_sched_schedule *s)
{
	size_t n = s->n_jobs;

	for (size_t i = 0; i < n; i++) {
		size_t blk = (size_t)s->d[i].rank * (size_t)s->levels / (n ? n : 1);

		s->d[i].level = s->levels - 1 - (int)blk;
	}
}

/* TACCL: one level per distinct hop count (the integer part of the priority), longest first. */
crux_status_t crux_sched_compress_hops(struct crux_sched_schedule *s)
{
	size_t n = s->n_jobs;
	double prev = 0;
	int cls = -1;
	struct key_idx *o = malloc((n ? n : 1) * sizeof(*o));

	if (!o)
		return CRUX_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		o[i].a = s->d[i].priority;
		o[i].b = 0;
		o[i].i = i;
	}
	qsort(o, n, sizeof(*o), cmp_key_desc);
	for (size_t r = 0; r < n; r++) {
		double hops = floor(o[r].a);

		if (cls < 0 || hops != prev) {
			cls++;
			prev = hops;
		}
		int l = s->levels - 1 - cls;

		s->d[o[r].i].level = l < 0 ? 0 : l;
	}
	free(o);
	return CRUX_OK;
}

/* ---- checks ---- */

crux_status_t crux_sched_jobs_validate(const struct crux_sched_topo *t,
				       const struct crux_sched_job *jobs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct crux_sched_job *j = &jobs[i];

		if (!isfinite(j->compute) || j->compute < 0 || !isfinite(j->work) || j->work < 0 ||
		    !isfinite(j->overlap) || j->overlap < 0 || j->overlap > 1 || j->n_flows < 0 ||
		    (j->n_flows && !j->flows) || j->gpus < 0 || j->steps < 0 ||
		    j->steps > CRUX_SCHED_MAX_STEPS)
			return CRUX_ERR_INVAL;
		for (int f = 0; f < j->n_flows; f++) {
			const struct crux_sched_flow *fl = &j->flows[f];

			if (fl->src < 0 || fl->dst < 0 || fl->src >= t->n_hosts ||
			    fl->dst >= t->n_hosts || !isfinite(fl->bytes) || fl->bytes < 0)
				return CRUX_ERR_INVAL;
		}
	}
	return CRUX_OK;
}
