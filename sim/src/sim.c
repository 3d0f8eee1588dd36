/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crux-sim event loop: arrivals, placement, departures; the engine gives the
 * steady state of the running set after every change, and between two events
 * every job advances at its steady rate (the simulator jumps).
 *
 * Placement (placer.c) owns the free GPUs and says, job by job, whether
 * and where a waiting job starts, or which running jobs to preempt for it.
 * Queue: first come first served (or the placement's order) with
 * backfilling, except that a job waiting longer than CRUX_SIM_STARVE_S at
 * the head of the queue stops backfilling until it starts (so large jobs
 * are not starved).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crux/sched.h"
#include "crux/sim.h"
#include "placer.h"
#include "sim_engine.h"

#define CRUX_SIM_STARVE_S (6 * 3600.0)
/* A preempted job restarts from its checkpoint: this much work is lost (our assumption). */
#define CRUX_SIM_RESTART_S 60.0

void crux_sim_config_defaults(struct crux_sim_config *c)
{
	memset(c, 0, sizeof(*c));
	c->policy = CRUX_SIM_CRUX_FULL;
	c->topo = CRUX_SIM_TOPO_CLOS2;
	crux_sim_topo_defaults(c->topo, &c->tp);
	c->levels = 8;
	c->seed = 1;
}

void crux_sim_label(const struct crux_sim_config *c, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s", crux_sim_policy_name(c->policy));

	if (n >= 0 && (size_t)n < len && c->max_slowdown > 0)
		n += snprintf(buf + n, len - (size_t)n, "@%g", c->max_slowdown);
	if (n >= 0 && (size_t)n < len && c->promote_bound > 0)
		n += snprintf(buf + n, len - (size_t)n, "~%g", c->promote_bound);
	if (n >= 0 && (size_t)n < len && c->max_slowdown > 0 && c->per_plan)
		n += snprintf(buf + n, len - (size_t)n, "/p");
	if (n >= 0 && (size_t)n < len && c->max_slowdown > 0 && c->guard_enforce_all)
		n += snprintf(buf + n, len - (size_t)n, "/e");
	if (n >= 0 && (size_t)n < len && c->max_slowdown > 0 && c->guard_refine)
		n += snprintf(buf + n, len - (size_t)n, "/r");
	if (n >= 0 && (size_t)n < len && c->n_weights > 0)
		snprintf(buf + n, len - (size_t)n, "/w");
}

enum job_state { J_FUTURE = 0, J_WAITING, J_RUNNING, J_DONE };

struct sim_job {
	const struct crux_sim_trace_job *tj;
	enum job_state state;
	uint32_t *hosts;
	uint32_t n_hosts;
	double remaining;
	double iso_s; /* iteration time alone, from placement on */
	double enq_s; /* start of its current wait (arrival, or preemption) */
	double run_s; /* time run before its current placement (preempted runs) */
	struct sim_eval_out ev;
	struct crux_sched_account acct; /* the guard's slowdown account */
};

/* Everything one run owns: the one context of the simulator. */
struct sim_run {
	const struct crux_sim_config *cfg;
	struct sim_engine *eng;
	struct sim_place *place;
	uint32_t n_hosts, gph;
	struct sim_job *jobs; /* trace order */
	size_t *order;	      /* by arrival */
	size_t *running;      /* indices into jobs */
	size_t n_running;
	size_t *waiting; /* FIFO of indices */
	size_t wait_head, wait_tail;
	double place_retry; /* the placement's next timer (INFINITY: none) */
	double now;	    /* for the queue order */
	struct sim_active *act;
	struct sim_eval_out *evo;
	struct step_ent *heap; /* step mode */
	double *last_t;	       /* step mode: last accounting time per running slot */
	double link_rate_sum;
	struct crux_sim_result *res;
	char *err;
	size_t errlen;
};

static int cmp_arrival(const void *a, const void *b, void *arg)
{
	const struct crux_sim_trace *t = arg;
	const struct crux_sim_trace_job *x = &t->jobs[*(const size_t *)a];
	const struct crux_sim_trace_job *y = &t->jobs[*(const size_t *)b];
	if (x->arrival_s != y->arrival_s)
		return x->arrival_s < y->arrival_s ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static uint32_t hosts_needed(const struct sim_run *s, uint32_t gpus)
{
	return (gpus + s->gph - 1) / s->gph;
}

static void place_job(const struct sim_run *s, size_t idx, struct sim_place_job *pj)
{
	const struct sim_job *j = &s->jobs[idx];

	pj->idx = idx;
	pj->gpus = j->tj->gpus;
	pj->compute_s = j->tj->compute_s;
	pj->comm_bytes = j->tj->comm_bytes;
	pj->overlap = j->tj->overlap;
	pj->remaining = j->remaining;
	pj->arrival_s = j->tj->arrival_s;
	pj->enq_s = j->enq_s;
	pj->fixed = j->tj->n_hosts ? j->tj->hosts : NULL;
	pj->n_fixed = j->tj->n_hosts;
}

static void release(struct sim_run *s, struct sim_job *j)
{
	crux_sim_place_release(s->place, (size_t)(j - s->jobs), j->hosts, j->n_hosts, j->tj->gpus);
}

static void fill_active(const struct sim_job *j, struct sim_active *a)
{
	a->id = j->tj->id;
	a->gpus = j->tj->gpus;
	a->n_hosts = j->n_hosts;
	a->hosts = j->hosts;
	a->compute_s = j->tj->compute_s;
	a->comm_bytes = j->tj->comm_bytes;
	a->overlap = j->tj->overlap;
	a->iso_s = j->iso_s;
	a->bound = 0;
	a->urgent = 0;
}

/* The guard bounds each job's mean slowdown through its account. */
static int uses_account(const struct sim_run *s)
{
	return s->cfg->max_slowdown > 0 && !s->cfg->per_plan;
}

/* Running jobs' accounts: dt more at their current rates. */
static void account_advance(struct sim_run *s, double dt)
{
	for (size_t i = 0; uses_account(s) && i < s->n_running; i++) {
		struct sim_job *j = &s->jobs[s->running[i]];

		if (j->iso_s > 0)
			crux_sched_account_add(&j->acct, dt, j->ev.iter_s / j->iso_s);
	}
}

/* Moves between free, protected and urgent; 1 if some job moved (a new plan is due). */
static int account_update(struct sim_run *s)
{
	int moved = 0;

	for (size_t i = 0; uses_account(s) && i < s->n_running; i++)
		moved |=
		    crux_sched_account_update(&s->jobs[s->running[i]].acct, s->cfg->max_slowdown);
	return moved;
}

/* When the next account would move at current rates (at least 1 s away:
 * cruxd replans once per pass, not continuously). */
static double account_next(const struct sim_run *s, double now)
{
	double tn = INFINITY;

	for (size_t i = 0; uses_account(s) && i < s->n_running; i++) {
		const struct sim_job *j = &s->jobs[s->running[i]];
		double dt;

		if (!(j->iso_s > 0))
			continue;
		dt = crux_sched_account_next(&j->acct, s->cfg->max_slowdown,
					     j->ev.iter_s / j->iso_s);
		if (isfinite(dt))
			tn = fmin(tn, now + fmax(dt, 1.0));
	}
	return tn;
}

/* Time of the next reference snapshot (INFINITY: none left). */
static double snap_next(const struct sim_run *s)
{
	const struct crux_sim_result *r = s->res;

	if (!r->ref_snaps || r->n_ref_snaps >= s->cfg->ref_snapshots)
		return INFINITY;
	return r->window_s * (double)(r->n_ref_snaps + 1) / (double)(s->cfg->ref_snapshots + 1);
}

/* The plan in force at time now in the reference model (a snapshot). */
static crux_status_t snapshot(struct sim_run *s, double now)
{
	struct crux_sim_ref_snap *q = &s->res->ref_snaps[s->res->n_ref_snaps];
	crux_status_t st = CRUX_OK;

	if (s->n_running > 0) {
		st = crux_sim_engine_reference(s->eng, s->act, s->n_running, q);
		if (st != CRUX_OK) {
			snprintf(s->err, s->errlen, "reference snapshot at %g s failed: %s", now,
				 crux_status_str(st));
			return st;
		}
	}
	q->t_s = now; /* an empty cluster: a snapshot of nothing */
	s->res->n_ref_snaps++;
	return CRUX_OK;
}

static crux_status_t evaluate(struct sim_run *s)
{
	double max_load = 0;
	for (size_t i = 0; i < s->n_running; i++) {
		struct sim_job *j = &s->jobs[s->running[i]];

		fill_active(j, &s->act[i]);
		if (uses_account(s)) {
			s->act[i].bound = crux_sched_account_bound(&j->acct, s->cfg->max_slowdown);
			s->act[i].urgent = crux_sched_account_urgent(&j->acct);
		}
	}
	crux_status_t st = crux_sim_engine_eval(s->eng, s->act, s->n_running, s->evo,
						&s->link_rate_sum, &max_load, s->err, s->errlen);
	if (st != CRUX_OK)
		return st;
	for (size_t i = 0; i < s->n_running; i++) {
		struct sim_job *j = &s->jobs[s->running[i]];
		j->ev = s->evo[i];
		s->res->jobs[s->running[i]].level = s->evo[i].level;
		if (s->evo[i].infeasible && !s->res->jobs[s->running[i]].infeasible) {
			s->res->jobs[s->running[i]].infeasible = 1;
			s->res->infeasible_jobs++;
		}
	}
	crux_sim_place_observe(s->place, s->running, s->act, s->evo, s->n_running);
	if (max_load > s->res->max_link_load)
		s->res->max_link_load = max_load;
	s->res->evaluations++;
	return CRUX_OK;
}

/* Add 'area' (GPU-seconds) spread uniformly over [t0, t1] to the bins. */
static void add_series(double *bins, size_t n_bins, double bin_s, double t0, double t1, double rate)
{
	if (t1 <= t0 || !n_bins)
		return;
	size_t b = (size_t)(t0 / bin_s);
	while (b < n_bins) {
		double lo = b * bin_s, hi = lo + bin_s;
		double a = t0 > lo ? t0 : lo, z = t1 < hi ? t1 : hi;
		if (z > a)
			bins[b] += rate * (z - a);
		if (t1 <= hi)
			break;
		b++;
	}
}

static void advance(struct sim_run *s, double t0, double t1)
{
	struct crux_sim_result *r = s->res;
	double dt = t1 - t0;
	double busy = 0, held = 0;
	if (dt <= 0)
		return;
	for (size_t i = 0; i < s->n_running; i++) {
		struct sim_job *j = &s->jobs[s->running[i]];
		double it = dt / j->ev.iter_s;
		if (it > j->remaining)
			it = j->remaining;
		j->remaining -= it;
		r->jobs[s->running[i]].iterations_done += it;
		r->job_bytes += it * j->ev.hop_bytes;
		r->jobs[s->running[i]].net_bytes += it * j->ev.hop_bytes;
		busy += j->tj->gpus * j->tj->compute_s / j->ev.iter_s;
		held += j->tj->gpus;
	}
	r->link_bytes += s->link_rate_sum * dt;
	double w0 = t0, w1 = t1 < r->window_s ? t1 : r->window_s;
	if (w1 > w0) {
		add_series(r->util, r->n_bins, r->bin_s, w0, w1, busy);
		add_series(r->alloc, r->n_bins, r->bin_s, w0, w1, held);
	}
}

/* Min-heap of (time of the job's next iteration boundary, running slot). */
struct step_ent {
	double t;
	size_t slot;
};

static void heap_down(struct step_ent *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && h[l].t < h[m].t)
			m = l;
		if (l + 1 < n && h[l + 1].t < h[m].t)
			m = l + 1;
		if (m == i)
			return;
		struct step_ent x = h[i];
		h[i] = h[m];
		h[m] = x;
		i = m;
	}
}

/* Credit running slot i with its progress from its last boundary to b, and its GPU
 * time up to b within the report window (w1). */
static void step_credit(struct sim_run *s, size_t i, double b, double w1)
{
	struct crux_sim_result *r = s->res;
	struct sim_job *j = &s->jobs[s->running[i]];
	double a = s->last_t[i];
	double it = (b - a) / j->ev.iter_s;
	it = it > j->remaining ? j->remaining : it;
	j->remaining -= it;
	r->jobs[s->running[i]].iterations_done += it;
	r->job_bytes += it * j->ev.hop_bytes;
	r->jobs[s->running[i]].net_bytes += it * j->ev.hop_bytes;
	double z = b < w1 ? b : w1;
	if (z > a) {
		add_series(r->util, r->n_bins, r->bin_s, a, z,
			   j->tj->gpus * j->tj->compute_s / j->ev.iter_s);
		add_series(r->alloc, r->n_bins, r->bin_s, a, z, j->tj->gpus);
	}
}

/*
 * The baseline the jump is measured against: walk every iteration boundary
 * of every running job in time order (a binary heap), crediting each job's
 * progress and GPU time interval by interval. It reaches the same state as
 * advance() at t1, one iteration at a time.
 */
static void step_advance(struct sim_run *s, double t0, double t1)
{
	struct crux_sim_result *r = s->res;
	size_t n = s->n_running;
	struct step_ent *h = s->heap;
	if (t1 <= t0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct sim_job *j = &s->jobs[s->running[i]];
		double frac = j->remaining - floor(j->remaining);
		if (frac <= 1e-12)
			frac = j->remaining >= 1 ? 1 : j->remaining;
		h[i].t = t0 + frac * j->ev.iter_s;
		h[i].slot = i;
		s->last_t[i] = t0;
	}
	for (size_t i = n / 2; i-- > 0;)
		heap_down(h, n, i);
	double w1 = t1 < r->window_s ? t1 : r->window_s;
	while (n && h[0].t < t1) {
		size_t i = h[0].slot;
		struct sim_job *j = &s->jobs[s->running[i]];
		double b = h[0].t;
		step_credit(s, i, b, w1);
		s->last_t[i] = b;
		r->steps++;
		h[0].t = j->remaining > 0 ? b + j->ev.iter_s : INFINITY;
		heap_down(h, n, 0);
	}
	/* The partial iterations up to t1. */
	for (size_t i = 0; i < n; i++) {
		step_credit(s, i, t1, w1);
	}
	r->link_bytes += s->link_rate_sum * (t1 - t0);
}

static void progress(struct sim_run *s, double t, size_t done, size_t n, struct timespec *last,
		     int final)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double el = (now.tv_sec - last->tv_sec) + (now.tv_nsec - last->tv_nsec) / 1e9;
	if (!final && el < 0.25)
		return;
	*last = now;
	double frac = n ? (double)done / (double)n : 1;
	int w = 30, fill = (int)(frac * w);
	fprintf(stderr, "\r%-10s [", crux_sim_policy_name(s->cfg->policy));
	for (int i = 0; i < w; i++)
		fputc(i < fill ? '#' : '.', stderr);
	fprintf(stderr, "] %5.1f%% jobs done, day %.2f", 100 * frac, t / 86400);
	if (final)
		fputc('\n', stderr);
	fflush(stderr);
}

static crux_status_t check_trace(struct sim_run *s, const struct crux_sim_trace *t)
{
	uint64_t total = (uint64_t)s->n_hosts * s->gph;
	for (size_t i = 0; i < t->n_jobs; i++) {
		const struct crux_sim_trace_job *j = &t->jobs[i];
		if (j->gpus > total) {
			snprintf(s->err, s->errlen,
				 "job %u asks for %u GPUs but the topology has "
				 "%llu (%u hosts x %u GPUs): use a larger "
				 "topology or drop the job",
				 j->id, j->gpus, (unsigned long long)total, s->n_hosts, s->gph);
			return CRUX_ERR_INVAL;
		}
		if (!j->n_hosts)
			continue;
		if (j->n_hosts != hosts_needed(s, j->gpus)) {
			snprintf(s->err, s->errlen,
				 "job %u: %u hosts listed for %u GPUs, expected "
				 "%u (%u GPUs per host)",
				 j->id, j->n_hosts, j->gpus, hosts_needed(s, j->gpus), s->gph);
			return CRUX_ERR_INVAL;
		}
		for (uint32_t k = 0; k < j->n_hosts; k++) {
			if (j->hosts[k] >= s->n_hosts) {
				snprintf(s->err, s->errlen,
					 "job %u: host %u does not exist (the "
					 "topology has hosts 0..%u)",
					 j->id, j->hosts[k], s->n_hosts - 1);
				return CRUX_ERR_INVAL;
			}
		}
	}
	return CRUX_OK;
}

void crux_sim_result_free(struct crux_sim_result *r)
{
	if (!r)
		return;
	free(r->jobs);
	free(r->util);
	free(r->alloc);
	free(r->ref_snaps);
	free(r);
}

static crux_status_t setup(struct sim_run *s, const struct crux_sim_trace *t)
{
	size_t n = t->n_jobs;
	crux_status_t st = crux_sim_engine_new(s->cfg, &s->eng, s->err, s->errlen);
	if (st != CRUX_OK)
		return st;
	s->n_hosts = crux_sim_engine_hosts(s->eng);
	s->gph = s->cfg->tp.gpus_per_host;
	if ((st = check_trace(s, t)) != CRUX_OK)
		return st;
	if ((st = crux_sim_place_new(s->cfg, s->eng, n, &s->place, s->err, s->errlen)) != CRUX_OK)
		return st;
	s->jobs = calloc(n ? n : 1, sizeof(*s->jobs));
	s->order = calloc(n ? n : 1, sizeof(*s->order));
	s->running = calloc(n ? n : 1, sizeof(*s->running));
	s->waiting = calloc(n ? n : 1, sizeof(*s->waiting));
	s->act = calloc(n ? n : 1, sizeof(*s->act));
	s->evo = calloc(n ? n : 1, sizeof(*s->evo));
	s->heap = calloc(n ? n : 1, sizeof(*s->heap));
	s->last_t = calloc(n ? n : 1, sizeof(*s->last_t));
	s->res = calloc(1, sizeof(*s->res));
	if (!s->jobs || !s->order || !s->running || !s->waiting || !s->act || !s->evo || !s->heap ||
	    !s->last_t || !s->res)
		return CRUX_ERR_NOMEM;
	struct crux_sim_result *r = s->res;
	r->policy = s->cfg->policy;
	crux_sim_label(s->cfg, r->label, sizeof(r->label));
	r->max_slowdown = s->cfg->max_slowdown;
	r->promote_bound = s->cfg->promote_bound;
	r->eval_model = s->cfg->eval_model;
	r->weighted = s->cfg->n_weights > 0;
	r->levels = s->cfg->levels;
	r->total_gpus = s->n_hosts * s->gph;
	r->n_jobs = n;
	r->jobs = calloc(n ? n : 1, sizeof(*r->jobs));
	if (!r->jobs)
		return CRUX_ERR_NOMEM;
	if (s->cfg->ref_snapshots > 10000) {
		snprintf(s->err, s->errlen, "ref_snapshots %u: at most 10000",
			 s->cfg->ref_snapshots);
		return CRUX_ERR_INVAL;
	}
	if (s->cfg->ref_snapshots && s->cfg->policy != CRUX_SIM_CASSINI &&
	    s->cfg->policy != CRUX_SIM_CASSINI_LCP) {
		r->ref_snaps = calloc(s->cfg->ref_snapshots, sizeof(*r->ref_snaps));
		if (!r->ref_snaps)
			return CRUX_ERR_NOMEM;
	}
	double last_arrival = 0;
	for (size_t i = 0; i < n; i++) {
		const struct crux_sim_trace_job *tj = &t->jobs[i];
		struct sim_job *j = &s->jobs[i];
		j->tj = tj;
		j->remaining = (double)tj->iterations;
		j->hosts = calloc(hosts_needed(s, tj->gpus), sizeof(*j->hosts));
		if (!j->hosts)
			return CRUX_ERR_NOMEM;
		s->order[i] = i;
		struct crux_sim_job_result *jr = &r->jobs[i];
		jr->id = tj->id;
		memcpy(jr->model, tj->model, sizeof(jr->model));
		jr->gpus = tj->gpus;
		jr->arrival_s = tj->arrival_s;
		jr->start_s = -1;
		jr->finish_s = -1;
		jr->iterations = tj->iterations;
		jr->level = -1;
		if (tj->arrival_s > last_arrival)
			last_arrival = tj->arrival_s;
	}
	qsort_r(s->order, n, sizeof(*s->order), cmp_arrival, (void *)t);
	r->window_s = s->cfg->window_s > 0 ? s->cfg->window_s : last_arrival;
	if (s->cfg->horizon_s > 0 && r->window_s > s->cfg->horizon_s)
		r->window_s = s->cfg->horizon_s;
	if (r->window_s <= 0)
		r->window_s = 1; /* every job arrives at 0: the window is fixed below */
	r->bin_s = s->cfg->bin_s > 0 ? s->cfg->bin_s : r->window_s / 336;
	r->n_bins = (size_t)ceil(r->window_s / r->bin_s);
	if (r->n_bins > 1000000) {
		snprintf(s->err, s->errlen,
			 "utilisation bin of %g s gives more than a million bins "
			 "over %g s: use a larger --bin",
			 r->bin_s, r->window_s);
		return CRUX_ERR_INVAL;
	}
	r->util = calloc(r->n_bins ? r->n_bins : 1, sizeof(*r->util));
	r->alloc = calloc(r->n_bins ? r->n_bins : 1, sizeof(*r->alloc));
	if (!r->util || !r->alloc)
		return CRUX_ERR_NOMEM;
	return CRUX_OK;
}

/* Stop a running job and put it back in the queue (Dally's preemption). */
static void preempt(struct sim_run *s, size_t idx, double now)
{
	struct sim_job *j = &s->jobs[idx];

	for (size_t i = 0; i < s->n_running; i++) {
		if (s->running[i] == idx) {
			s->running[i] = s->running[--s->n_running];
			break;
		}
	}
	release(s, j);
	j->run_s += now - s->res->jobs[idx].start_s;
	/* The work since its last checkpoint is lost, and it restarts. */
	if (j->iso_s > 0)
		j->remaining =
		    fmin((double)j->tj->iterations, j->remaining + CRUX_SIM_RESTART_S / j->iso_s);
	j->state = J_WAITING;
	j->enq_s = now;
	s->waiting[s->wait_tail++] = idx;
	s->res->preemptions++;
}

static int cmp_queue(const void *a, const void *b, void *arg)
{
	const struct sim_run *s = arg;
	struct sim_place_job x, y;
	place_job(s, *(const size_t *)a, &x);
	place_job(s, *(const size_t *)b, &y);
	double kx = crux_sim_place_key(s->place, &x, s->now, CRUX_SIM_STARVE_S);
	double ky = crux_sim_place_key(s->place, &y, s->now, CRUX_SIM_STARVE_S);
	if (kx != ky)
		return kx < ky ? -1 : 1;
	if (x.arrival_s != y.arrival_s)
		return x.arrival_s < y.arrival_s ? -1 : 1;
	return s->jobs[x.idx].tj->id < s->jobs[y.idx].tj->id ? -1 : 1;
}

static crux_status_t start_job(struct sim_run *s, size_t idx, double now)
{
	struct sim_job *j = &s->jobs[idx];
	struct crux_sim_job_result *jr = &s->res->jobs[idx];
	struct sim_active a;

	j->state = J_RUNNING;
	if (jr->start_s < 0)
		jr->start_s = now;
	else
		j->run_s -= now - jr->start_s; /* a restart: the run time counts from here */
	jr->n_hosts = j->n_hosts;
	fill_active(j, &a);
	crux_status_t st = crux_sim_engine_isolated(s->eng, &a, &jr->iso_iter_s, s->err, s->errlen);
	if (st != CRUX_OK)
		return st;
	j->iso_s = jr->iso_iter_s;
	crux_sched_account_init(&j->acct);
	s->running[s->n_running++] = idx;
	return CRUX_OK;
}

/* Start queued jobs the placement takes (with backfilling and a starvation
 * guard); preempted jobs go back to the queue's tail and get one more pass. */
static crux_status_t schedule_queue(struct sim_run *s, double now, int *changed)
{
	s->place_retry = INFINITY;
	for (int pass = 0; pass < 2; pass++) {
		size_t keep = s->wait_head, tail = s->wait_tail, preempted = 0;
		int blocked = 0;

		s->now = now;
		if (crux_sim_place_reorders(s->place))
			qsort_r(s->waiting + s->wait_head, tail - s->wait_head, sizeof(*s->waiting),
				cmp_queue, s);
		for (size_t w = s->wait_head; w < tail; w++) {
			size_t idx = s->waiting[w];
			struct sim_job *j = &s->jobs[idx];
			struct sim_place_job pj;
			const size_t *victims;
			size_t n_victims;
			double retry = INFINITY;
			enum sim_place_verdict v = SIM_PLACE_WAIT;

			place_job(s, idx, &pj);
			for (int tries = 0; !blocked && tries < 2; tries++) {
				v = crux_sim_place_try(s->place, &pj, now, j->hosts, &j->n_hosts,
						       &retry, &victims, &n_victims);
				if (v != SIM_PLACE_PREEMPT)
					break;
				for (size_t k = 0; k < n_victims; k++)
					preempt(s, victims[k], now);
				preempted += n_victims;
				*changed = 1;
			}
			if (v == SIM_PLACE_OK) {
				crux_status_t st = start_job(s, idx, now);
				if (st != CRUX_OK)
					return st;
				*changed = 1;
				continue;
			}
			if (!blocked && retry < s->place_retry)
				s->place_retry = retry;
			if (w == s->wait_head && now - j->tj->arrival_s > CRUX_SIM_STARVE_S)
				blocked = 1;
			s->waiting[keep++] = idx;
		}
		/* The preempted jobs, queued behind the jobs kept. */
		memmove(s->waiting + keep, s->waiting + tail, preempted * sizeof(*s->waiting));
		s->wait_tail = keep + preempted;
		if (!preempted)
			break;
	}
	return CRUX_OK;
}

crux_status_t crux_sim_run(const struct crux_sim_trace *trace, const struct crux_sim_config *cfg,
			   struct crux_sim_result **out, char *err, size_t errlen)
{
	struct sim_run s;
	struct timespec w0, w1, last = {0, 0};
	crux_status_t st;

	memset(&s, 0, sizeof(s));
	s.cfg = cfg;
	s.err = err;
	s.errlen = errlen;
	clock_gettime(CLOCK_MONOTONIC, &w0);
	if (!cfg->tp.gpus_per_host || !cfg->levels) {
		snprintf(err, errlen, "configuration: GPUs per host and levels must be > 0");
		return CRUX_ERR_INVAL;
	}
	if ((st = setup(&s, trace)) != CRUX_OK)
		goto done;
	struct crux_sim_result *r = s.res;
	size_t n = trace->n_jobs, next = 0, finished = 0;
	double t = 0;
	for (;;) {
		double t_arr = next < n ? trace->jobs[s.order[next]].arrival_s : INFINITY;
		double t_fin = INFINITY;
		for (size_t i = 0; i < s.n_running; i++) {
			struct sim_job *j = &s.jobs[s.running[i]];
			double f = t + j->remaining * j->ev.iter_s;
			if (f < t_fin)
				t_fin = f;
		}
		double tn = t_arr < t_fin ? t_arr : t_fin;
		tn = fmin(tn, account_next(&s, t));
		tn = fmin(tn, s.place_retry);
		if (!isfinite(tn))
			break;
		/* Reference snapshots of the plan in force, between events. */
		while (snap_next(&s) <= tn) {
			double ts = snap_next(&s);

			if (cfg->step_iterations)
				step_advance(&s, t, ts);
			else
				advance(&s, t, ts);
			account_advance(&s, ts - t);
			t = ts;
			if ((st = snapshot(&s, t)) != CRUX_OK)
				goto done;
		}
		int stop = 0;
		if (cfg->horizon_s > 0 && tn >= cfg->horizon_s) {
			tn = cfg->horizon_s;
			stop = 1;
		}
		if (cfg->step_iterations)
			step_advance(&s, t, tn);
		else
			advance(&s, t, tn);
		account_advance(&s, tn - t);
		t = tn;
		if (stop)
			break;
		int changed = 0;
		/* Departures at t (with a relative tolerance for rounding). */
		for (size_t i = 0; i < s.n_running;) {
			size_t idx = s.running[i];
			struct sim_job *j = &s.jobs[idx];
			if (j->remaining * j->ev.iter_s <= 1e-9 * (t > 1 ? t : 1)) {
				r->jobs[idx].iterations_done = (double)j->tj->iterations;
				j->remaining = 0;
				j->state = J_DONE;
				r->jobs[idx].finish_s = t;
				j->run_s += t - r->jobs[idx].start_s;
				release(&s, j);
				s.running[i] = s.running[--s.n_running];
				finished++;
				r->events++;
				changed = 1;
				continue;
			}
			i++;
		}
		while (next < n && trace->jobs[s.order[next]].arrival_s <= t) {
			size_t idx = s.order[next++];
			s.jobs[idx].state = J_WAITING;
			s.jobs[idx].enq_s = t;
			s.waiting[s.wait_tail++] = idx;
			r->events++;
		}
		if ((st = schedule_queue(&s, t, &changed)) != CRUX_OK)
			goto done;
		changed |= account_update(&s);
		if (changed && (st = evaluate(&s)) != CRUX_OK)
			goto done;
		if (cfg->progress)
			progress(&s, t, finished, n, &last, 0);
	}
	if (cfg->progress)
		progress(&s, t, finished, n, &last, 1);
	r->end_s = t;
	r->finished = finished;
	double busy = 0, held = 0;
	for (size_t b = 0; b < r->n_bins; b++) {
		double len =
		    (b + 1) * r->bin_s > r->window_s ? r->window_s - b * r->bin_s : r->bin_s;
		busy += r->util[b];
		held += r->alloc[b];
		r->util[b] /= len * r->total_gpus;
		r->alloc[b] /= len * r->total_gpus;
	}
	r->mean_util = busy / (r->window_s * r->total_gpus);
	r->mean_alloc = held / (r->window_s * r->total_gpus);
	r->busy_of_held = held > 0 ? busy / held : 0;
	for (size_t i = 0; i < n; i++) {
		struct crux_sim_job_result *jr = &r->jobs[i];
		const struct sim_job *j = &s.jobs[i];
		double ran = j->state == J_RUNNING ? j->run_s + t - jr->start_s : j->run_s;
		if (jr->start_s >= 0 && jr->iterations_done > 0) {
			jr->mean_iter_s = ran / jr->iterations_done;
			jr->slowdown = jr->iso_iter_s > 0 ? jr->mean_iter_s / jr->iso_iter_s : 0;
		}
		if (jr->finish_s >= 0)
			jr->jct_s = jr->finish_s - jr->arrival_s;
	}
	clock_gettime(CLOCK_MONOTONIC, &w1);
	r->wall_s = (w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) / 1e9;
	*out = r;
	s.res = NULL;
	st = CRUX_OK;
done:
	if (s.jobs) {
		for (size_t i = 0; i < trace->n_jobs; i++) {
			free(s.jobs[i].hosts);
		}
	}
	crux_sim_result_free(s.res);
	crux_sim_place_free(s.place);
	free(s.jobs);
	free(s.order);
	free(s.running);
	free(s.waiting);
	free(s.act);
	free(s.evo);
	free(s.heap);
	free(s.last_t);
	crux_sim_engine_free(s.eng);
	return st;
}
