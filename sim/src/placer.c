/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-sim placement policies (placer.h). A job smaller than a host goes
 * to the fullest host it fits on (best fit) under every policy: it uses no
 * fabric link. A larger one takes whole free hosts:
 *
 * - pack: one ToR group if one has room (the fullest that fits), else the
 *   groups with the most free hosts first (fewest groups);
 * - random: free hosts drawn uniformly (seeded);
 * - dally (Dally, Sharma et al. 2024: delay scheduling for network-aware
 *   consolidation): a job that could fit in one group but finds none free
 *   waits up to its delay timer for one; then it preempts less
 *   network-sensitive jobs to free a group, or else is placed as pack
 *   spills. The timer is auto-tuned (see dally_timer) unless fixed;
 * - sjf-bco (SJF-BCO, Yu et al. 2022): the smallest job (GPU-seconds) first;
 *   one group if one has room, else, from an analytical contention model of
 *   ring all-reduce, the spread whose most contended group slows the ring
 *   least (balanced contention), on the fewest groups (overhead).
 *
 * The papers give the mechanisms; the constants below are ours (README).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crux/sched.h"
#include "placer.h"

/* A job below this sensitivity gains too little from a group to wait for one
 * under a fixed timer, or to preempt for one. */
#define DALLY_SIGMA_MIN 0.1
/* Longest auto-tuned wait (the queue's starvation guard is 6 h). */
#define DALLY_TIMER_MAX_S (4 * 3600.0)
/* A victim must have run this long in its current placement (no thrashing),
 * and is preempted at most this many times. */
#define DALLY_MIN_RUN_S	  600.0
#define DALLY_MAX_PREEMPT 2
/* Auto-tuner: prior stretch of a cross-group transfer (one other ring on
 * the uplinks) and the weight of each new observation. */
#define DALLY_STRETCH_PRIOR 2.0
#define DALLY_STRETCH_EWMA  0.2

static const char *const place_names[CRUX_SIM_N_PLACEMENTS] = {"pack", "random", "dally",
							       "sjf-bco"};

const char *crux_sim_placement_name(enum crux_sim_placement p)
{
	return (unsigned)p < CRUX_SIM_N_PLACEMENTS ? place_names[p] : "?";
}

crux_status_t crux_sim_placement_parse(const char *s, enum crux_sim_placement *out)
{
	for (int i = 0; i < CRUX_SIM_N_PLACEMENTS; i++) {
		if (strcmp(s, place_names[i]) == 0) {
			*out = (enum crux_sim_placement)i;
			return CRUX_OK;
		}
	}
	return CRUX_ERR_INVAL;
}

struct place_job {
	int running;
	uint32_t gpus;
	uint32_t n_groups;  /* groups its hosts span */
	uint32_t preempted; /* times */
	double start_s;	    /* of its current placement */
	double sigma;
};

struct sim_place {
	const struct crux_sim_config *cfg;
	enum crux_sim_placement policy;
	uint32_t n_hosts, gph, n_groups;
	const uint32_t *group;
	uint32_t *free_gpus;  /* per host */
	uint32_t *group_free; /* fully free hosts per group */
	uint32_t *group_size; /* hosts per group */
	uint32_t *cross;      /* per group: running rings that leave it (cross its uplinks) */
	double *up_bw;	      /* per group: uplink bytes/s */
	double host_bw;	      /* bytes/s of a host's fabric link */
	size_t *owner;	      /* per host: 1 + trace index of the multi-host job on it, 0 none */
	struct place_job *jobs;
	size_t n_jobs;
	uint64_t rng;
	double stretch; /* Dally's auto-tuner */
	/* Scratch. */
	uint32_t *order; /* groups */
	uint32_t *seen;	 /* groups (stamps) */
	uint32_t stamp;
	size_t *victims, *cand;
	uint32_t *trial; /* hosts */
};

static uint64_t rng_next(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void crux_sim_place_free(struct sim_place *p)
{
	if (!p)
		return;
	free(p->free_gpus);
	free(p->group_free);
	free(p->group_size);
	free(p->cross);
	free(p->up_bw);
	free(p->owner);
	free(p->jobs);
	free(p->order);
	free(p->seen);
	free(p->victims);
	free(p->cand);
	free(p->trial);
	free(p);
}

crux_status_t crux_sim_place_new(const struct crux_sim_config *cfg, const struct sim_engine *eng,
				 size_t n_jobs, struct sim_place **out, char *err, size_t errlen)
{
	struct sim_place *p = calloc(1, sizeof(*p));

	if (!p)
		return CRUX_ERR_NOMEM;
	if ((unsigned)cfg->placement >= CRUX_SIM_N_PLACEMENTS || !(cfg->delay_timer_s >= 0)) {
		snprintf(err, errlen,
			 "placement %d / delay timer %g s: expected a placement of "
			 "crux_sim_placement and a timer >= 0 (0 = auto-tuned)",
			 (int)cfg->placement, cfg->delay_timer_s);
		free(p);
		return CRUX_ERR_INVAL;
	}
	p->cfg = cfg;
	p->policy = cfg->placement;
	p->n_hosts = crux_sim_engine_hosts(eng);
	p->gph = cfg->tp.gpus_per_host;
	p->group = crux_sim_engine_host_group(eng, &p->n_groups);
	p->n_jobs = n_jobs;
	p->rng = cfg->seed ^ 0x5ca1ab1e0ddba11ull;
	p->stretch = DALLY_STRETCH_PRIOR;
	p->free_gpus = calloc(p->n_hosts, sizeof(*p->free_gpus));
	p->group_free = calloc(p->n_groups, sizeof(*p->group_free));
	p->group_size = calloc(p->n_groups, sizeof(*p->group_size));
	p->cross = calloc(p->n_groups, sizeof(*p->cross));
	p->up_bw = calloc(p->n_groups, sizeof(*p->up_bw));
	p->order = calloc(p->n_groups, sizeof(*p->order));
	p->seen = calloc(p->n_groups, sizeof(*p->seen));
	p->owner = calloc(p->n_hosts, sizeof(*p->owner));
	p->victims = calloc(p->n_hosts, sizeof(*p->victims));
	p->cand = calloc(p->n_hosts, sizeof(*p->cand));
	p->trial = calloc(p->n_hosts, sizeof(*p->trial));
	p->jobs = calloc(n_jobs ? n_jobs : 1, sizeof(*p->jobs));
	if (!p->free_gpus || !p->group_free || !p->group_size || !p->cross || !p->up_bw ||
	    !p->order || !p->seen || !p->owner || !p->victims || !p->cand || !p->trial ||
	    !p->jobs) {
		crux_sim_place_free(p);
		return CRUX_ERR_NOMEM;
	}
	for (uint32_t h = 0; h < p->n_hosts; h++) {
		p->free_gpus[h] = p->gph;
		p->group_free[p->group[h]]++;
		p->group_size[p->group[h]]++;
	}
	for (uint32_t q = 0; q < p->n_groups; q++) {
		double hb;
		crux_sim_engine_group_rates(eng, q, &hb, &p->up_bw[q]);
		p->host_bw = hb > p->host_bw ? hb : p->host_bw;
	}
	*out = p;
	return CRUX_OK;
}

int crux_sim_place_reorders(const struct sim_place *p)
{
	return p->policy == CRUX_SIM_PLACE_SJF_BCO;
}

uint32_t crux_sim_place_free_gpus(const struct sim_place *p, uint32_t h)
{
	return h < p->n_hosts ? p->free_gpus[h] : 0;
}

double crux_sim_place_stretch(const struct sim_place *p)
{
	return p->stretch;
}

static uint32_t hosts_needed(const struct sim_place *p, uint32_t gpus)
{
	return (gpus + p->gph - 1) / p->gph;
}

/* Ring transfer time alone (bytes per hop over a host link) and iteration time. */
static void job_times(const struct sim_place *p, const struct sim_place_job *j, double *tau,
		      double *iter)
{
	double g = j->gpus;
	*tau = 0;
	if (hosts_needed(p, j->gpus) > 1 && p->host_bw > 0)
		*tau = 2 * (g - 1) / g * j->comm_bytes / p->host_bw;
	*iter = fmax(j->compute_s, (1 - j->overlap) * j->compute_s + *tau);
}

double crux_sim_place_sensitivity(const struct sim_place *p, const struct sim_place_job *j)
{
	double tau, it;
	job_times(p, j, &tau, &it);
	return it > 0 ? tau / it : 0;
}

double crux_sim_place_key(const struct sim_place *p, const struct sim_place_job *j, double now,
			  double starve_s)
{
	double tau, it;

	if (now - j->arrival_s > starve_s)
		return -1e300 + j->arrival_s; /* ahead of every size, oldest first */
	if (p->policy != CRUX_SIM_PLACE_SJF_BCO)
		return j->arrival_s;
	job_times(p, j, &tau, &it);
	return (double)j->gpus * j->remaining * it;
}

/*
 * Auto-tuned timer: wait no longer than what a group saves. Spread over
 * groups, the ring's transfer is stretched by the fabric (the tuner's
 * estimate s, learnt from the running cross-group jobs), which costs
 * sigma x (s - 1) of each remaining isolated iteration.
 */
double crux_sim_place_timer(const struct sim_place *p, const struct sim_place_job *j)
{
	double sigma = crux_sim_place_sensitivity(p, j), tau, it;

	if (p->cfg->delay_timer_s > 0)
		return sigma >= DALLY_SIGMA_MIN ? p->cfg->delay_timer_s : 0;
	job_times(p, j, &tau, &it);
	return fmin(DALLY_TIMER_MAX_S, sigma * (p->stretch - 1) * j->remaining * it);
}

void crux_sim_place_observe(struct sim_place *p, const size_t *idx, const struct sim_active *jobs,
			    const struct sim_eval_out *out, size_t n)
{
	double num = 0, den = 0;

	if (p->policy != CRUX_SIM_PLACE_DALLY || p->cfg->delay_timer_s > 0)
		return;
	for (size_t i = 0; i < n; i++) {
		const struct place_job *q = &p->jobs[idx[i]];

		if (q->n_groups < 2 || q->sigma < DALLY_SIGMA_MIN || !(jobs[i].iso_s > 0))
			continue;
		/* T / T_iso = 1 + sigma (s - 1) where the transfer is exposed. */
		double s = 1 + (out[i].iter_s / jobs[i].iso_s - 1) / q->sigma;
		num += q->gpus * fmax(1, s);
		den += q->gpus;
	}
	if (den > 0)
		p->stretch = (1 - DALLY_STRETCH_EWMA) * p->stretch + DALLY_STRETCH_EWMA * num / den;
}

static uint32_t gpus_on_host(const struct sim_place *p, uint32_t gpus, uint32_t k)
{
	/* The job's GPUs fill its hosts in order; the last may be partial. */
	uint32_t left = gpus - k * p->gph;
	return left < p->gph ? left : p->gph;
}

static void take_host(struct sim_place *p, uint32_t h, uint32_t gpus)
{
	if (p->free_gpus[h] == p->gph)
		p->group_free[p->group[h]]--;
	p->free_gpus[h] -= gpus;
}

static void give_host(struct sim_place *p, uint32_t h, uint32_t gpus)
{
	p->free_gpus[h] += gpus;
	if (p->free_gpus[h] == p->gph)
		p->group_free[p->group[h]]++;
}

/* Distinct groups of a host list (marks them in p->seen with a new stamp). */
static uint32_t span(struct sim_place *p, const uint32_t *hosts, uint32_t n)
{
	uint32_t k = 0;
	if (++p->stamp == 0) {
		memset(p->seen, 0, p->n_groups * sizeof(*p->seen));
		p->stamp = 1;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t q = p->group[hosts[i]];
		if (p->seen[q] != p->stamp) {
			p->seen[q] = p->stamp;
			k++;
		}
	}
	return k;
}

/* Book a placement: GPUs, ring crossings per group, owners, the job's state. */
static void commit(struct sim_place *p, const struct sim_place_job *j, const uint32_t *hosts,
		   uint32_t n, double now)
{
	struct place_job *q = &p->jobs[j->idx];

	for (uint32_t k = 0; k < n; k++)
		take_host(p, hosts[k], gpus_on_host(p, j->gpus, k));
	q->running = 1;
	q->gpus = j->gpus;
	q->start_s = now;
	q->sigma = crux_sim_place_sensitivity(p, j);
	q->n_groups = span(p, hosts, n);
	for (uint32_t k = 0; n > 1 && k < n; k++) {
		if (p->free_gpus[hosts[k]] == 0)
			p->owner[hosts[k]] = j->idx + 1;
	}
	if (q->n_groups > 1) {
		for (uint32_t g = 0; g < p->n_groups; g++)
			p->cross[g] += p->seen[g] == p->stamp;
	}
}

void crux_sim_place_release(struct sim_place *p, size_t idx, const uint32_t *hosts, uint32_t n,
			    uint32_t gpus)
{
	struct place_job *q = &p->jobs[idx];

	for (uint32_t k = 0; k < n; k++) {
		give_host(p, hosts[k], gpus_on_host(p, gpus, k));
		if (p->owner[hosts[k]] == idx + 1)
			p->owner[hosts[k]] = 0;
	}
	if (q->n_groups > 1 && span(p, hosts, n) > 1) {
		for (uint32_t g = 0; g < p->n_groups; g++)
			p->cross[g] -= p->seen[g] == p->stamp;
	}
	q->running = 0;
	q->n_groups = 0;
}

/* 'need' of the 'total' fully free hosts, uniformly at random, in host order. */
static uint32_t pick_random(struct sim_place *p, uint32_t need, uint32_t total, uint32_t *hosts)
{
	uint32_t n = 0, left = total;
	/* Selection sampling (Knuth's algorithm S): one pass, sorted output. */
	for (uint32_t h = 0; h < p->n_hosts && n < need; h++) {
		if (p->free_gpus[h] != p->gph)
			continue;
		if (rng_next(&p->rng) % left < need - n)
			hosts[n++] = h;
		left--;
	}
	return n;
}

/* Whole free hosts of group q, lowest first, appended from hosts[n]. */
static uint32_t pick_group(const struct sim_place *p, uint32_t q, uint32_t need, uint32_t *hosts,
			   uint32_t n)
{
	for (uint32_t h = 0; h < p->n_hosts && n < need; h++) {
		if (p->group[h] == q && p->free_gpus[h] == p->gph)
			hosts[n++] = h;
	}
	return n;
}

/* The fullest group with 'need' whole free hosts (UINT32_MAX: none). */
static uint32_t best_fit_group(const struct sim_place *p, uint32_t need)
{
	uint32_t fit = UINT32_MAX;
	for (uint32_t q = 0; q < p->n_groups; q++) {
		if (p->group_free[q] >= need &&
		    (fit == UINT32_MAX || p->group_free[q] < p->group_free[fit]))
			fit = q;
	}
	return fit;
}

/* pack: one group if one fits, else groups with the most free hosts first. */
static uint32_t pick_pack(struct sim_place *p, uint32_t need, uint32_t *hosts)
{
	uint32_t n = 0, fit = best_fit_group(p, need);

	if (fit != UINT32_MAX)
		return pick_group(p, fit, need, hosts, 0);
	/* Spill: the group with the most free hosts, each in turn (the hosts
	 * picked are taken only at commit, so mark the groups used). */
	if (++p->stamp == 0) {
		memset(p->seen, 0, p->n_groups * sizeof(*p->seen));
		p->stamp = 1;
	}
	while (n < need) {
		uint32_t q = UINT32_MAX;
		for (uint32_t g = 0; g < p->n_groups; g++) {
			if (p->seen[g] != p->stamp && p->group_free[g] &&
			    (q == UINT32_MAX || p->group_free[g] > p->group_free[q]))
				q = g;
		}
		if (q == UINT32_MAX)
			break;
		p->seen[q] = p->stamp;
		n = pick_group(p, q, need, hosts, n);
	}
	return n;
}

/* SJF-BCO's contention model: a ring spread over groups crosses each of
 * their uplinks once per direction at the host rate; a group's uplinks
 * slow every ring crossing them by max(1, rings x host rate / uplink). */
static double group_stretch(const struct sim_place *p, uint32_t q, uint32_t extra)
{
	double need = (double)(p->cross[q] + extra) * p->host_bw;
	return p->up_bw[q] > 0 ? fmax(1, need / p->up_bw[q]) : 1;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_free_desc(const void *a, const void *b, void *arg)
{
	const struct sim_place *p = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (p->group_free[x] != p->group_free[y])
		return p->group_free[x] > p->group_free[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int cmp_cross_asc(const void *a, const void *b, void *arg)
{
	const struct sim_place *p = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (p->cross[x] != p->cross[y])
		return p->cross[x] < p->cross[y] ? -1 : 1;
	return cmp_free_desc(a, b, arg);
}

/*
 * sjf-bco, a job that no group holds. For each contention threshold k (the
 * rings already crossing a group), the groups with at most k, taken most
 * free hosts first (fewest groups: least overhead) and least contended
 * first (balance). The candidate whose worst group stretches the ring least
 * wins; then the least contention it adds in all (sum of its groups'
 * stretches), then the fewest groups.
 */
static uint32_t pick_bco(struct sim_place *p, uint32_t need, uint32_t *hosts)
{
	double best = INFINITY, best_sum = INFINITY;
	uint32_t best_n = 0, best_groups = UINT32_MAX, m = 0, kmax = 0;

	for (uint32_t q = 0; q < p->n_groups; q++) {
		if (p->group_free[q]) {
			p->order[m++] = q;
			kmax = p->cross[q] > kmax ? p->cross[q] : kmax;
		}
	}
	for (int by_cross = 0; by_cross < 2; by_cross++) {
		qsort_r(p->order, m, sizeof(*p->order), by_cross ? cmp_cross_asc : cmp_free_desc,
			p);
		for (uint32_t k = 0; k <= kmax; k++) {
			uint32_t n = 0, groups = 0;
			double worst = 1, sum = 0;
			for (uint32_t i = 0; i < m && n < need; i++) {
				uint32_t q = p->order[i];
				double x = group_stretch(p, q, 1);
				if (p->cross[q] > k)
					continue;
				n = pick_group(p, q, need, p->trial, n);
				groups++;
				worst = fmax(worst, x);
				sum += x;
			}
			if (n < need)
				continue;
			if (worst < best ||
			    (worst == best &&
			     (sum < best_sum || (sum == best_sum && groups < best_groups)))) {
				best = worst;
				best_sum = sum;
				best_groups = groups;
				best_n = n;
				memcpy(hosts, p->trial, n * sizeof(*hosts));
			}
		}
	}
	return best_n;
}

/* Trace index of running multi-host jobs on group q's hosts, fewest first. */
static int cmp_victim(const void *a, const void *b, void *arg)
{
	const struct sim_place *p = arg;
	const struct place_job *x = &p->jobs[*(const size_t *)a], *y = &p->jobs[*(const size_t *)b];
	if (x->sigma != y->sigma)
		return x->sigma < y->sigma ? -1 : 1;
	if (x->gpus != y->gpus)
		return x->gpus < y->gpus ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/*
 * Dally's network-sensitive preemption: free one group for j by stopping
 * running jobs much less sensitive than j (sigma at most half of j's), that
 * have run DALLY_MIN_RUN_S and were preempted fewer than DALLY_MAX_PREEMPT
 * times, least sensitive first; the group that costs the fewest GPUs of
 * victims wins. Returns the number of victims (0: none will do).
 */
static size_t pick_victims(struct sim_place *p, const struct sim_place_job *j, double now,
			   uint32_t need)
{
	double sigma = crux_sim_place_sensitivity(p, j);
	uint64_t best_cost = UINT64_MAX;
	size_t best_n = 0;

	if (sigma < DALLY_SIGMA_MIN)
		return 0;
	for (uint32_t q = 0; q < p->n_groups; q++) {
		size_t nc = 0;
		uint32_t have = p->group_free[q];
		uint64_t cost = 0;

		if (p->group_size[q] < need)
			continue;
		/* Distinct eligible owners of the group's hosts. */
		for (uint32_t h = 0; h < p->n_hosts; h++) {
			size_t o = p->owner[h];
			const struct place_job *v;
			int dup = 0;

			if (p->group[h] != q || !o)
				continue;
			v = &p->jobs[o - 1];
			if (!v->running || v->sigma > sigma / 2 ||
			    now - v->start_s < DALLY_MIN_RUN_S || v->preempted >= DALLY_MAX_PREEMPT)
				continue;
			for (size_t c = 0; c < nc && !dup; c++)
				dup = p->cand[c] == o - 1;
			if (!dup)
				p->cand[nc++] = o - 1;
		}
		qsort_r(p->cand, nc, sizeof(*p->cand), cmp_victim, p);
		size_t nv = 0;
		for (size_t c = 0; c < nc && have < need; c++) {
			size_t v = p->cand[c];
			for (uint32_t h = 0; h < p->n_hosts; h++)
				have += p->group[h] == q && p->owner[h] == v + 1;
			cost += p->jobs[v].gpus;
			nv++;
		}
		if (have >= need && nv && cost < best_cost) {
			best_cost = cost;
			best_n = nv;
			memcpy(p->victims, p->cand, nv * sizeof(*p->victims));
		}
	}
	for (size_t v = 0; v < best_n; v++)
		p->jobs[p->victims[v]].preempted++;
	return best_n;
}

enum sim_place_verdict crux_sim_place_try(struct sim_place *p, const struct sim_place_job *j,
					  double now, uint32_t *hosts, uint32_t *n_hosts,
					  double *retry_at, const size_t **victims,
					  size_t *n_victims)
{
	uint32_t need = hosts_needed(p, j->gpus), n = 0, total = 0;

	*retry_at = INFINITY;
	*n_victims = 0;
	*victims = p->victims;
	if (j->fixed) {
		for (uint32_t k = 0; k < j->n_fixed; k++) {
			if (p->free_gpus[j->fixed[k]] < gpus_on_host(p, j->gpus, k))
				return SIM_PLACE_WAIT;
		}
		memcpy(hosts, j->fixed, j->n_fixed * sizeof(*hosts));
		n = j->n_fixed;
		goto placed;
	}
	if (j->gpus < p->gph) {
		uint32_t best = UINT32_MAX;
		for (uint32_t h = 0; h < p->n_hosts; h++) {
			if (p->free_gpus[h] >= j->gpus &&
			    (best == UINT32_MAX || p->free_gpus[h] < p->free_gpus[best]))
				best = h;
		}
		if (best == UINT32_MAX)
			return SIM_PLACE_WAIT;
		hosts[n++] = best;
		goto placed;
	}
	for (uint32_t q = 0; q < p->n_groups; q++)
		total += p->group_free[q];
	switch (p->policy) {
	case CRUX_SIM_PLACE_RANDOM:
		if (total < need)
			return SIM_PLACE_WAIT;
		n = pick_random(p, need, total, hosts);
		break;
	case CRUX_SIM_PLACE_DALLY: {
		uint32_t biggest = 0;
		for (uint32_t q = 0; q < p->n_groups; q++)
			biggest = p->group_size[q] > biggest ? p->group_size[q] : biggest;
		if (best_fit_group(p, need) != UINT32_MAX || need > biggest) {
			if (total < need)
				return SIM_PLACE_WAIT;
			n = pick_pack(p, need, hosts); /* one group, or none can hold it */
			break;
		}
		double deadline = j->enq_s + crux_sim_place_timer(p, j);
		if (now < deadline) {
			*retry_at = deadline;
			return SIM_PLACE_WAIT;
		}
		if (!p->cfg->no_preempt && (*n_victims = pick_victims(p, j, now, need)) > 0)
			return SIM_PLACE_PREEMPT;
		if (total < need)
			return SIM_PLACE_WAIT;
		n = pick_pack(p, need, hosts);
		break;
	}
	case CRUX_SIM_PLACE_SJF_BCO: {
		uint32_t fit = best_fit_group(p, need);
		if (total < need)
			return SIM_PLACE_WAIT;
		n = fit != UINT32_MAX ? pick_group(p, fit, need, hosts, 0)
				      : pick_bco(p, need, hosts);
		qsort(hosts, n, sizeof(*hosts), cmp_u32); /* the ring in host order */
		break;
	}
	default:
		if (total < need)
			return SIM_PLACE_WAIT;
		n = pick_pack(p, need, hosts);
		break;
	}
	if (n < need)
		return SIM_PLACE_WAIT;
placed:
	commit(p, j, hosts, n, now);
	*n_hosts = n;
	return SIM_PLACE_OK;
}
