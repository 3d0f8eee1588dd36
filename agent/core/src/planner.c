/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The planner (planner.h): a (merged) job view and 'now' -> each job's life
 * cycle (arrival, profiling window, departure, hysteresis) and decisions
 * (level, chosen path per flow) from the scheduler library (policy
 * Crux-full). Its job table is its own state between passes. Topology nodes
 * are found by host address, else name; the single-switch view is built
 * from the view's hosts in their sorted order.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/log.h"
#include "crux/profile.h"
#include "planner.h"

#define NS 1e9
struct job {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	uint8_t state; /* CRUX_JOB_PROFILING or CRUX_JOB_SCHEDULED */
	bool present;
	bool adopted; /* decision taken over from the table at start-up */
	/* Taken over at start-up and not seen since: its ranks may still be
	 * re-attaching to the restarted agent; it departs only when they have
	 * not come back by grace_until (set at the first pass). */
	bool restored;
	uint64_t grace_until;
	bool clamped;
	uint64_t since_ns;
	uint32_t nranks, ncompute;
	uint32_t nhosts;
	struct crux_addr hosts[MAX_JOB_HOSTS];
	double iter, compute, comm, overlap, stall, work, bytes;
	uint32_t nflows, capflows;
	struct flow *flows;
	/* profile the current decision was made for (hysteresis) */
	bool has_base;
	double base_work, base_bytes, base_iter;
	uint64_t since_wall_ms; /* cluster mode: since_ns as Unix time, for the next leader */
	/* decision */
	bool decided;
	uint8_t level;	  /* published: scheduled level + guard lift */
	double iso;	  /* isolated iteration estimate on its paths, s (fairness guard) */
	double prof_iter; /* iteration time measured at the end of profiling (top level) */
	/* The bound on its mean slowdown (CRUX_MAX_SLOWDOWN): measured
	 * slowdowns, pass by pass, since it was first scheduled. */
	struct crux_sched_account acct;
	uint64_t acct_ns; /* last pass accounted; 0 = none yet (calloc: a free account) */
	double t, intensity, k, priority;
	uint32_t ndflows;
	struct flow *dflows;
	uint32_t nadopt;
	struct crux_dt_route *adopt;
};

struct hostent {
	struct crux_addr addr;
	char name[CRUX_JV_NAME_LEN];
	int node; /* -1: not looked up, or not in the topology */
};

struct cruxd_jobs {
	struct job **v; /* sorted by key */
	size_t n, cap;
	struct hostent *hosts; /* the last view's, sorted */
	size_t nhosts, caphosts;
	struct crux_sched_topo *topo; /* where hosts are found: the file's or the star */
};

struct cruxd_planner {
	const struct cruxd_config *cfg;	   /* the agent's */
	struct crux_sched_topo *topo;	   /* the agent's, from the file; NULL: single-host view */
	struct cruxd_guard *guard;	   /* the agent's: promotion by measured slowdown */
	const struct cruxd_overrides *ovr; /* the plan's, while it runs */
	struct cruxd_jobs jobs;
	struct crux_sched_topo *star; /* single-host view: built from the hosts seen */
	uint32_t star_hosts_sig;
	bool first_pass;
	bool resched_pending;
	bool held; /* a profile change waits for the hold time */
	uint64_t last_resched_ns;
	uint64_t reschedules;
	uint32_t guard_infeasible; /* the last plan's s->guard_infeasible */
};

static double rel_change(double a, double b)
{
	double m = fmax(fabs(a), fabs(b));
	return m <= 0 ? 0 : fabs(a - b) / m;
}

/* ---- the job table: jobs by key, the view's hosts and their topology nodes ---- */

static int job_cmp_key(const void *k, const void *e)
{
	uint64_t key = *(const uint64_t *)k;
	const struct job *j = *(struct job *const *)e;
	return (key > j->key) - (key < j->key);
}

static struct job *jobs_find(const struct cruxd_jobs *t, uint64_t key)
{
	struct job **p = t->n ? bsearch(&key, t->v, t->n, sizeof(*t->v), job_cmp_key) : NULL;
	return p ? *p : NULL;
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	free(j->flows);
	free(j->dflows);
	free(j->adopt);
	free(j);
}

static struct job *jobs_add(struct cruxd_jobs *t, uint64_t key)
{
	struct job *j;
	size_t pos = 0;

	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		struct job **nj = realloc(t->v, nc * sizeof(*nj));
		if (!nj)
			return NULL;
		t->v = nj;
		t->cap = nc;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->key = key;
	while (pos < t->n && t->v[pos]->key < key)
		pos++;
	memmove(&t->v[pos + 1], &t->v[pos], (t->n - pos) * sizeof(*t->v));
	t->v[pos] = j;
	t->n++;
	return j;
}

static void jobs_drop(struct cruxd_jobs *t, size_t k)
{
	job_free(t->v[k]);
	memmove(&t->v[k], &t->v[k + 1], (t->n - k - 1) * sizeof(*t->v));
	t->n--;
}

static void jobs_clear(struct cruxd_jobs *t)
{
	for (size_t k = 0; k < t->n; k++)
		job_free(t->v[k]);
	t->n = 0;
}

static void jobs_free(struct cruxd_jobs *t)
{
	jobs_clear(t);
	free(t->v);
	free(t->hosts);
	memset(t, 0, sizeof(*t));
}

static crux_status_t job_add_flow(struct job *j, const struct crux_addr *src,
				  const struct crux_addr *dst, double bytes)
{
	for (uint32_t i = 0; i < j->nflows; i++)
		if (crux_addr_equal(&j->flows[i].src, src) &&
		    crux_addr_equal(&j->flows[i].dst, dst)) {
			j->flows[i].bytes += bytes;
			return CRUX_OK;
		}
	if (j->nflows == j->capflows) {
		uint32_t nc = j->capflows ? j->capflows * 2 : 8;
		struct flow *nf = realloc(j->flows, nc * sizeof(*nf));
		if (!nf)
			return CRUX_ERR_NOMEM;
		j->flows = nf;
		j->capflows = nc;
	}
	j->flows[j->nflows] = (struct flow){.src = *src, .dst = *dst, .bytes = bytes, .path = -1};
	j->nflows++;
	return CRUX_OK;
}

/* ---- hosts and topology nodes ------------------------------------------ */

static struct hostent *host_find(struct cruxd_jobs *t, const struct crux_addr *addr)
{
	for (size_t i = 0; i < t->nhosts; i++) {
		struct hostent *h = &t->hosts[i];
		if (addr->family ? crux_addr_equal(&h->addr, addr)
				 : (h->addr.family == 0 && !h->name[0]))
			return h;
	}
	return NULL;
}

static crux_status_t jobs_take_hosts(struct cruxd_jobs *t, const struct crux_job_view *v)
{
	if (v->nhosts > t->caphosts) {
		struct hostent *nh = realloc(t->hosts, v->nhosts * sizeof(*nh));
		if (!nh)
			return CRUX_ERR_NOMEM;
		t->hosts = nh;
		t->caphosts = v->nhosts;
	}
	for (size_t i = 0; i < v->nhosts; i++) {
		struct hostent *h = &t->hosts[i];
		memset(h, 0, sizeof(*h));
		h->addr = v->hosts[i].addr;
		memcpy(h->name, v->hosts[i].name, sizeof(h->name));
		h->node = -1;
	}
	t->nhosts = v->nhosts;
	return CRUX_OK;
}

static void jobs_set_topo(struct cruxd_jobs *t, struct crux_sched_topo *topo)
{
	t->topo = topo;
	for (size_t i = 0; i < t->nhosts; i++)
		t->hosts[i].node = -1;
}

static int jobs_node_of(struct cruxd_jobs *t, const struct crux_addr *addr)
{
	struct hostent *h = host_find(t, addr);
	int n;

	if (!t->topo)
		return -1;
	if (h && h->node >= 0)
		return h->node;
	n = cruxd_topo_node(t->topo, addr, h ? h->name : NULL);
	if (h)
		h->node = n;
	return n;
}

/* The view's hosts, for the decisions: realise finds their nodes from them. */
static crux_status_t jobs_export_hosts(const struct cruxd_jobs *t, struct cruxd_hosts *out)
{
	if (t->nhosts > out->cap) {
		struct crux_jv_host *nv = realloc(out->v, t->nhosts * sizeof(*nv));
		if (!nv) {
			out->n = 0;
			return CRUX_ERR_NOMEM;
		}
		out->v = nv;
		out->cap = t->nhosts;
	}
	for (size_t i = 0; i < t->nhosts; i++) {
		out->v[i].addr = t->hosts[i].addr;
		memcpy(out->v[i].name, t->hosts[i].name, sizeof(out->v[i].name));
	}
	out->n = t->nhosts;
	return CRUX_OK;
}

/* Single-host view: a star of every host seen around one switch. */
static crux_status_t build_star(struct cruxd_planner *pl)
{
	struct crux_sched_err err;
	struct crux_sched_topo *t = NULL;
	uint32_t sig = 2166136261u;
	size_t cap = 256 + pl->jobs.nhosts * 200, off = 0;
	char *text;
	crux_status_t st;

	for (size_t i = 0; i < pl->jobs.nhosts; i++)
		sig = (sig ^ (uint32_t)crux_addr_hash(&pl->jobs.hosts[i].addr)) * 16777619u;
	sig ^= (uint32_t)pl->jobs.nhosts;
	if (pl->star && sig == pl->star_hosts_sig)
		return CRUX_OK;
	text = malloc(cap);
	if (!text)
		return CRUX_ERR_NOMEM;
	off += (size_t)snprintf(text + off, cap - off, "switch crux-star-fabric\n");
	for (size_t i = 0; i < pl->jobs.nhosts; i++) {
		char name[CRUX_ADDR_STRLEN + CRUX_HOSTNAME_LEN];
		if (pl->jobs.hosts[i].addr.family)
			crux_addr_format(&pl->jobs.hosts[i].addr, name, sizeof(name));
		else
			snprintf(name, sizeof(name), "%s",
				 pl->jobs.hosts[i].name[0] ? pl->jobs.hosts[i].name : "local");
		off += (size_t)snprintf(text + off, cap - off,
					"host %s\nlink %s crux-star-fabric %.6f\n", name, name,
					pl->cfg->link_gbps);
	}
	st = crux_sched_topo_parse(text, off, "single-host view", &t, &err);
	free(text);
	if (st != CRUX_OK) {
		crux_err("cannot build the single-host view: %s", err.msg);
		return st;
	}
	crux_sched_topo_free(pl->star);
	pl->star = t;
	pl->star_hosts_sig = sig;
	jobs_set_topo(&pl->jobs, t);
	return CRUX_OK;
}

/* ---- the view, as the planner's jobs ----------------------------------- */

/* Take a (merged) job view: every job's figures are recomputed from its sums. */
crux_status_t cruxd_planner_take_view(struct cruxd_planner *pl, const struct crux_job_view *v,
				      uint64_t now)
{
	for (size_t k = 0; k < pl->jobs.n; k++) {
		struct job *j = pl->jobs.v[k];
		j->present = false;
		j->nranks = j->ncompute = j->nhosts = j->nflows = 0;
		j->iter = j->compute = j->comm = j->overlap = j->stall = j->work = j->bytes = 0;
		j->clamped = false;
	}
	if (jobs_take_hosts(&pl->jobs, v) != CRUX_OK)
		return CRUX_ERR_NOMEM;
	for (size_t i = 0; i < v->njobs; i++) {
		const struct crux_jv_job *vj = &v->jobs[i];
		struct job *j = jobs_find(&pl->jobs, vj->key);

		if (!j) {
			j = jobs_add(&pl->jobs, vj->key);
			if (!j)
				return CRUX_ERR_NOMEM;
			j->state = CRUX_JOB_PROFILING;
			j->since_ns = now;
			memcpy(j->id, vj->id, sizeof(j->id));
			j->id[sizeof(j->id) - 1] = '\0';
			crux_info("job %s (0x%016llx) arrived: %u rank(s); profiling for %.1f s",
				  j->id, (unsigned long long)j->key, vj->nranks,
				  (double)pl->cfg->profile_window_ns / NS);
		}
		j->present = true;
		j->restored = false; /* back: the usual life cycle from now on */
		j->nranks = vj->nranks;
		j->ncompute = vj->ncompute;
		j->clamped = vj->clamped;
		j->work = vj->compute_sum;
		if (vj->ncompute) {
			j->iter = vj->iter_sum / vj->ncompute;
			j->compute = vj->compute_sum / vj->ncompute;
			j->comm = vj->comm_sum / vj->ncompute;
			j->overlap = vj->overlap_sum / vj->ncompute;
			j->stall = vj->stall_sum / vj->ncompute;
		}
		/* No job runs alone faster than it computes: the estimate made at
		 * the last reschedule is kept at least at today's measured compute. */
		if (j->iso > 0 && j->iso < j->compute)
			j->iso = j->compute;
		j->nhosts = vj->nhosts < MAX_JOB_HOSTS ? vj->nhosts : MAX_JOB_HOSTS;
		memcpy(j->hosts, vj->hosts, j->nhosts * sizeof(j->hosts[0]));
		for (uint32_t f = 0; f < vj->nflows; f++) {
			const struct crux_jv_flow *fl = &vj->flows[f];
			if (job_add_flow(j, &fl->src, &fl->dst, fl->bytes) != CRUX_OK)
				return CRUX_ERR_NOMEM;
			j->bytes += fl->bytes;
		}
	}
	return CRUX_OK;
}

static bool overridden(const struct cruxd_planner *pl, uint64_t key)
{
	return cruxd_overrides_find(pl->ovr, key) >= 0;
}

/* Departures, end of profiling, significant changes. Sets pl->resched_pending. */
static void life_cycle(struct cruxd_planner *pl, uint64_t now)
{
	bool changed = false;
	size_t k = 0;

	while (k < pl->jobs.n) {
		struct job *j = pl->jobs.v[k];
		if (j->present) {
			k++;
			continue;
		}
		if (j->restored) {
			/* After a restart, ranks attached over cruxd.sock re-attach
			 * within a few passes: keep the job (and its level) meanwhile,
			 * as long as plugins trust an unrefreshed table, at least 3
			 * passes. */
			uint64_t grace = pl->cfg->settings.heartbeat_timeout_ns;
			if (grace < 3 * pl->cfg->interval_ns)
				grace = 3 * pl->cfg->interval_ns;
			if (!j->grace_until)
				j->grace_until = now + grace;
			if (now < j->grace_until) {
				k++;
				continue;
			}
			crux_info("job %s (0x%016llx) departed: its ranks did not come back within "
				  "%.1f s of the agent's restart",
				  j->id, (unsigned long long)j->key, (double)grace / NS);
		} else {
			crux_info("job %s (0x%016llx) departed", j->id, (unsigned long long)j->key);
		}
		if (j->state == CRUX_JOB_SCHEDULED)
			pl->resched_pending = true;
		jobs_drop(&pl->jobs, k);
	}
	for (k = 0; k < pl->jobs.n; k++) {
		struct job *j = pl->jobs.v[k];
		uint64_t el = now - j->since_ns;

		if (j->restored && !j->present)
			continue; /* nothing measured until its ranks are back */
		if (j->state == CRUX_JOB_PROFILING) {
			bool measured = j->ncompute == j->nranks;
			if (el >= pl->cfg->profile_window_ns &&
			    (measured || el >= 2 * pl->cfg->profile_window_ns)) {
				j->state = CRUX_JOB_SCHEDULED;
				j->prof_iter = j->iter;
				pl->resched_pending = true;
				crux_info(
				    "job %s profiled: W %.4g GPU-s/iteration, %.4g bytes/iteration "
				    "across hosts, iteration %.4g s%s",
				    j->id, j->work, j->bytes, j->iter,
				    measured ? "" : " (not every rank published timing)");
			}
			continue;
		}
		if (!j->has_base) {
			j->has_base = true;
			j->base_work = j->work;
			j->base_bytes = j->bytes;
			j->base_iter = j->iter;
			continue;
		}
		if (rel_change(j->work, j->base_work) > pl->cfg->change_threshold ||
		    rel_change(j->bytes, j->base_bytes) > pl->cfg->change_threshold ||
		    rel_change(j->iter, j->base_iter) > pl->cfg->change_threshold) {
			if (!changed)
				crux_debug("job %s changed: W %.4g -> %.4g, bytes %.4g -> %.4g",
					   j->id, j->base_work, j->work, j->base_bytes, j->bytes);
			changed = true;
		}
	}
	if (changed && now - pl->last_resched_ns >= pl->cfg->hold_ns)
		pl->resched_pending = true;
	pl->held = changed && !pl->resched_pending;
}

/* ---- scheduling ----------------------------------------------------------- */

/* The fairness guard's settings for the planner (bound, level weights). */
static void guard_params(const struct cruxd_planner *pl, struct crux_sched_params *p)
{
	bool weighted = false;

	p->max_slowdown = pl->cfg->guard.bound;
	for (uint32_t l = 0; l < pl->cfg->settings.nlevels && l < CRUX_SCHED_MAX_LEVELS; l++) {
		p->weight[l] = pl->cfg->settings.levels[l].weight;
		weighted |= p->weight[l] > 0;
	}
	p->n_weights = weighted ? (int)pl->cfg->settings.nlevels : 0;
}

/* The scheduler's level plus the guard's lift, within 0..K-1. */
static uint8_t guard_level(const struct cruxd_planner *pl, uint64_t key, int level)
{
	int64_t l = (int64_t)level + cruxd_guard_lift(pl->guard, key);
	uint32_t k = pl->cfg->settings.nlevels;

	return (uint8_t)(l < 0 ? 0 : l >= (int64_t)k ? k - 1 : l);
}

/* Longest gap between two passes a job's account credits, or 3 pass periods
 * when longer (a stopped agent or a suspended job is not evidence of its
 * speed). */
#define ACCOUNT_MAX_GAP_NS (10 * (uint64_t)NS)

/* The job's slowdown account: the time since the last pass at its measured
 * slowdown; a change of state (free / protected / urgent) reschedules. */
static void account_pass(struct cruxd_planner *pl, struct job *j, uint64_t now)
{
	double bound = pl->cfg->guard.bound;
	uint64_t gap = 3 * pl->cfg->interval_ns > ACCOUNT_MAX_GAP_NS ? 3 * pl->cfg->interval_ns
								     : ACCOUNT_MAX_GAP_NS;

	if (j->acct_ns && now > j->acct_ns && now - j->acct_ns <= gap)
		crux_sched_account_add(&j->acct, (double)(now - j->acct_ns) / NS, j->iter / j->iso);
	j->acct_ns = now;
	if (crux_sched_account_update(&j->acct, bound)) {
		crux_info("fairness guard: job %s mean slowdown %.2fx (bound %.2fx): %s", j->id,
			  crux_sched_account_mean(&j->acct), bound,
			  crux_sched_account_state_name(j->acct.state));
		pl->resched_pending = true;
	}
}

/* Feed every scheduled job's measured slowdown to the guard; a lift change
 * reschedules (the guard bounds how often). */
static void guard_pass(struct cruxd_planner *pl, uint64_t now)
{
	if (!(pl->cfg->guard.bound > 0))
		return;
	for (size_t k = 0; k < pl->jobs.n; k++) {
		const struct job *j = pl->jobs.v[k];

		if (j->state != CRUX_JOB_SCHEDULED || !j->decided || overridden(pl, j->key) ||
		    !(j->iso > 0) || !(j->iter > 0))
			continue;
		account_pass(pl, pl->jobs.v[k], now);
		if (cruxd_guard_observe(pl->guard, j->key, j->iter / j->iso, now,
					pl->cfg->settings.nlevels)) {
			crux_info(
			    "fairness guard: job %s measured %.2fx its isolated iteration time "
			    "(bound %.2fx): lift now %u level(s)",
			    j->id, j->iter / j->iso, pl->cfg->guard.bound,
			    cruxd_guard_lift(pl->guard, j->key));
			pl->resched_pending = true;
		}
	}
	/* Departed jobs: forgotten after a minute without samples. */
	cruxd_guard_prune(pl->guard, now, 60 * (uint64_t)NS);
}

/*
 * Run the scheduler over the scheduled, not overridden jobs. With
 * 'keep_adopted' (first pass after a restart with nothing new), jobs taken
 * over from the table keep their level and routes; only their figures
 * (t, I, k, P) are refreshed.
 */
static crux_status_t reschedule(struct cruxd_planner *pl, uint64_t now, bool keep_adopted)
{
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s = NULL;
	struct crux_sched_params p;
	struct crux_sched_topo *t;
	struct job **map = NULL;
	int *hosts = NULL;
	struct crux_sched_flow *flows = NULL;
	size_t cap_flows = 0;
	crux_status_t st = CRUX_OK;

	crux_sched_jobs_init(&js);
	for (size_t k = 0; k < pl->jobs.n; k++)
		if (pl->jobs.v[k]->state == CRUX_JOB_SCHEDULED &&
		    !overridden(pl, pl->jobs.v[k]->key))
			cap_flows = 1;
	if (!cap_flows) {
		pl->last_resched_ns = now;
		return CRUX_OK; /* nothing to schedule */
	}
	cap_flows = 0;
	if (!pl->topo && pl->jobs.nhosts) {
		st = build_star(pl);
		if (st != CRUX_OK)
			return st;
	}
	t = pl->jobs.topo;
	map = calloc(pl->jobs.n + 1, sizeof(*map));
	hosts = calloc(MAX_JOB_HOSTS, sizeof(*hosts));
	if (!map || !hosts) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	for (size_t k = 0; k < pl->jobs.n; k++) {
		struct job *j = pl->jobs.v[k];
		struct crux_sched_job sj;
		int nh = 0, nf = 0;

		/* A job restored at start-up whose ranks have not re-attached yet
		 * keeps its decision: nothing is measured for it now. */
		if (j->state != CRUX_JOB_SCHEDULED || overridden(pl, j->key) ||
		    (j->restored && !j->present))
			continue;
		for (uint32_t h = 0; h < j->nhosts; h++) {
			int n = jobs_node_of(&pl->jobs, &j->hosts[h]);
			bool dup = false;
			for (int q = 0; q < nh; q++)
				dup |= hosts[q] == n;
			if (n >= 0 && !dup)
				hosts[nh++] = n;
		}
		if (cap_flows < j->nflows) {
			struct crux_sched_flow *nfl = realloc(flows, j->nflows * sizeof(*nfl));
			if (!nfl) {
				st = CRUX_ERR_NOMEM;
				goto out;
			}
			flows = nfl;
			cap_flows = j->nflows;
		}
		for (uint32_t f = 0; f < j->nflows; f++) {
			struct flow *fl = &j->flows[f];
			fl->src_node = jobs_node_of(&pl->jobs, &fl->src);
			fl->dst_node = jobs_node_of(&pl->jobs, &fl->dst);
			fl->path = -1;
			if (fl->src_node < 0 || fl->dst_node < 0 || fl->src_node == fl->dst_node)
				continue;
			flows[nf++] = (struct crux_sched_flow){
			    .src = fl->src_node, .dst = fl->dst_node, .bytes = fl->bytes};
		}
		if (nh == 0) {
			/* None of its hosts is in the topology: nothing to place it on. */
			if (keep_adopted && j->adopted)
				continue;
			j->adopted = false;
			j->decided = true;
			j->level = (uint8_t)pl->cfg->settings.default_level;
			j->t = j->intensity = j->k = j->priority = 0;
			j->ndflows = 0;
			continue;
		}
		memset(&sj, 0, sizeof(sj));
		sj.id = j->key;
		sj.gpus = (int)j->nranks;
		sj.n_hosts = nh;
		sj.hosts = hosts;
		sj.work = j->work;
		sj.compute = j->compute;
		sj.overlap = crux_sched_overlap_from_times(j->compute, j->comm, j->iter);
		if (!isfinite(sj.overlap) || sj.overlap < 0)
			sj.overlap = 0;
		if (sj.overlap > 1)
			sj.overlap = 1;
		sj.iter_time = j->iter;
		if (pl->cfg->guard.bound > 0) {
			sj.slowdown_bound =
			    crux_sched_account_bound(&j->acct, pl->cfg->guard.bound);
			sj.urgent = crux_sched_account_urgent(&j->acct);
		}
		sj.n_flows = nf;
		sj.flows = flows;
		st = crux_sched_jobs_add(&js, &sj);
		if (st != CRUX_OK) {
			crux_err("scheduler refused job %s: %s", j->id, crux_status_str(st));
			goto out;
		}
		map[js.n - 1] = j;
	}
	if (js.n) {
		crux_sched_params_default(&p);
		p.levels = (int)pl->cfg->settings.nlevels;
		p.seed = pl->cfg->seed;
		p.paths_search = pl->cfg->paths_search;
		guard_params(pl, &p);
		st = crux_sched_schedule_new(js.v, js.n, p.levels, &s);
		if (st != CRUX_OK)
			goto out;
		st = crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, s);
		if (st != CRUX_OK) {
			crux_err("scheduling failed: %s", crux_status_str(st));
			goto out;
		}
		if (p.paths_search)
			crux_debug("paths search: %d move(s) kept of %d candidate plan(s)",
				   s->paths_moves, s->paths_evals);
		if (s->guard_lifts || s->guard_violators)
			crux_info(
			    "fairness guard: the planner lifted %d level(s) to keep predicted "
			    "slowdowns within %.2fx; %d job(s) still predicted above it",
			    s->guard_lifts, p.max_slowdown, s->guard_violators);
		pl->guard_infeasible = (uint32_t)s->guard_infeasible;
		for (size_t i = 0; i < js.n; i++)
			if (s->d[i].infeasible)
				crux_info(
				    "fairness guard: no schedule keeps job %s within %.2fx "
				    "(its traffic and its neighbours' need more than the links "
				    "carry); reported, not enforced",
				    map[i]->id, p.max_slowdown);
	}
	for (size_t i = 0; i < js.n; i++) {
		struct job *j = map[i];
		const struct crux_sched_decision *d = &s->d[i];
		uint32_t nf = 0;

		j->t = d->comm_time;
		j->intensity = d->intensity;
		j->k = d->k;
		j->priority = d->priority;
		/* The guard's reference: the model's isolated time, or what the job
		 * achieved while profiled on the top level when that is longer (the
		 * model knows link rates, not protocol and host overheads). */
		j->iso = fmax(crux_sched_isolated_iter(&js.v[i], d->comm_time), j->prof_iter);
		/* Without a timing measurement that is the bytes at line rate with
		 * no compute: far below the job's real isolated time, so the guard
		 * would see a slowdown that is not there. No estimate until one is
		 * measured (the change of iteration time then reschedules). */
		if (!j->ncompute || !(j->iter > 0))
			j->iso = 0;
		if (!(keep_adopted && j->adopted)) {
			j->level = guard_level(pl, j->key, d->level);
			j->adopted = false;
		}
		j->decided = true;
		free(j->dflows);
		j->ndflows = 0;
		j->dflows = j->nflows ? malloc(j->nflows * sizeof(*j->dflows)) : NULL;
		for (uint32_t f = 0; f < j->nflows && j->dflows; f++) {
			struct flow fl = j->flows[f];
			if (fl.src_node < 0 || fl.dst_node < 0 || fl.src_node == fl.dst_node)
				continue;
			fl.path = d->path && (int)nf < js.v[i].n_flows ? d->path[nf] : -1;
			nf++;
			j->dflows[j->ndflows++] = fl;
		}
	}
	for (size_t k = 0; k < pl->jobs.n; k++) {
		struct job *j = pl->jobs.v[k];
		if (j->state == CRUX_JOB_SCHEDULED) {
			j->has_base = true;
			j->base_work = j->work;
			j->base_bytes = j->bytes;
			j->base_iter = j->iter;
		}
	}
	pl->last_resched_ns = now;
	pl->reschedules++;
	crux_info("rescheduled %zu job(s) (%s)", js.n,
		  pl->topo ? pl->cfg->topology : "single-host view");
out:
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	free(flows);
	free(hosts);
	free(map);
	return st;
}

/* ---- decisions ------------------------------------------------------------ */

/* An override's decision: its level and routes, found from the job's first host. */
static crux_status_t decide_override(struct cruxd_planner *pl, const struct cruxd_override *o,
				     struct cruxd_decision *x)
{
	uint32_t top = pl->cfg->settings.nlevels - 1;
	const struct job *j = jobs_find(&pl->jobs, o->job_key);
	int src = j && j->nhosts ? jobs_node_of(&pl->jobs, &j->hosts[0]) : -1;

	x->key = o->job_key;
	snprintf(x->id, sizeof(x->id), "%s", o->job_id[0] ? o->job_id : j ? j->id : "");
	x->state = CRUX_JOB_OVERRIDDEN;
	x->level = (uint8_t)(o->level > top ? top : o->level);
	x->from = CRUXD_ROUTES_OVERRIDE;
	if (cruxd_decision_routes(x, o->nroutes) != CRUX_OK)
		return CRUX_ERR_NOMEM;
	for (uint8_t r = 0; r < o->nroutes; r++) {
		struct cruxd_route *rt = &x->routes[x->nroutes++];
		memset(rt, 0, sizeof(*rt));
		rt->rt.job_key = o->job_key;
		rt->rt.peer = o->routes[r].peer;
		rt->rt.path_id = o->routes[r].path_id;
		rt->rt.nports = o->routes[r].nports;
		memcpy(rt->rt.ports, o->routes[r].ports, sizeof(rt->rt.ports));
		rt->src_node = src;
		rt->dst_node = jobs_node_of(&pl->jobs, &o->routes[r].peer);
	}
	return CRUX_OK;
}

/* A job's decision: its row (profiling, scheduled, or its override's level) and figures. */
static crux_status_t decide_job(struct cruxd_planner *pl, const struct job *j,
				struct cruxd_decision *x)
{
	uint32_t top = pl->cfg->settings.nlevels - 1;
	int oi = cruxd_overrides_find(pl->ovr, j->key);

	x->key = j->key;
	memcpy(x->id, j->id, sizeof(x->id));
	if (oi >= 0) {
		uint32_t lv = pl->ovr->o[oi].level;
		x->overridden = true;
		x->state = CRUX_JOB_OVERRIDDEN;
		x->level = (uint8_t)(lv > top ? top : lv);
	} else if (j->state == CRUX_JOB_PROFILING || !j->decided) {
		x->state = CRUX_JOB_PROFILING;
		x->level = (uint8_t)top;
	} else {
		x->state = CRUX_JOB_SCHEDULED;
		x->level = j->level;
	}
	x->from = j->adopted ? CRUXD_ROUTES_ADOPTED : CRUXD_ROUTES_PLANNED;
	if (cruxd_decision_routes(x, j->nadopt) != CRUX_OK)
		return CRUX_ERR_NOMEM;
	for (uint32_t r = 0; r < j->nadopt; r++)
		x->routes[x->nroutes++] =
		    (struct cruxd_route){.rt = j->adopt[r], .src_node = -1, .dst_node = -1};
	if (j->ndflows > x->capflows) {
		struct flow *nf = realloc(x->flows, j->ndflows * sizeof(*nf));
		if (!nf)
			return CRUX_ERR_NOMEM;
		x->flows = nf;
		x->capflows = j->ndflows;
	}
	if (j->ndflows)
		memcpy(x->flows, j->dflows, j->ndflows * sizeof(*x->flows));
	x->nflows = j->ndflows;
	x->decided = j->decided;
	x->adopted = j->adopted;
	x->has_base = j->has_base;
	x->clamped = j->clamped;
	x->nranks = j->nranks;
	x->nhosts = j->nhosts;
	memcpy(x->hosts, j->hosts, j->nhosts * sizeof(x->hosts[0]));
	x->iter = j->iter;
	x->compute = j->compute;
	x->comm = j->comm;
	x->overlap = j->overlap;
	x->stall = j->stall;
	x->work = j->work;
	x->bytes = j->bytes;
	x->t = j->t;
	x->intensity = j->intensity;
	x->k = j->k;
	x->priority = j->priority;
	x->iso = j->iso;
	x->acct = j->acct;
	x->since_ns = j->since_ns;
	x->since_wall_ms = j->since_wall_ms;
	x->base_work = j->base_work;
	x->base_bytes = j->base_bytes;
	x->base_iter = j->base_iter;
	return CRUX_OK;
}

/* The overrides (in their order), then every job (by key). */
static crux_status_t decide(struct cruxd_planner *pl, struct cruxd_decisions *out)
{
	crux_status_t st = CRUX_OK;

	out->n = 0;
	out->valid = true;
	out->warn_full = true;
	for (uint32_t i = 0; i < pl->ovr->n && st == CRUX_OK; i++) {
		struct cruxd_decision *x = cruxd_decision_new(out);
		st = x ? decide_override(pl, &pl->ovr->o[i], x) : CRUX_ERR_NOMEM;
	}
	out->nover = out->n;
	for (size_t k = 0; k < pl->jobs.n && st == CRUX_OK; k++) {
		struct cruxd_decision *x = cruxd_decision_new(out);
		st = x ? decide_job(pl, pl->jobs.v[k], x) : CRUX_ERR_NOMEM;
	}
	return st;
}

/* Life cycle, the fairness guard, and a reschedule when one is due; then the
 * decisions (made every pass, the job table's figures change every pass). */
crux_status_t cruxd_planner_plan(struct cruxd_planner *pl, const struct cruxd_overrides *ovr,
				 uint64_t now, struct cruxd_decisions *out)
{
	crux_status_t st, dst;

	pl->ovr = ovr;
	st = jobs_export_hosts(&pl->jobs, &out->hosts);
	life_cycle(pl, now);
	guard_pass(pl, now);
	if (pl->first_pass || pl->resched_pending) {
		/* After a restart with nothing new: figures only, decisions stay. */
		crux_status_t rst = reschedule(pl, now, !pl->resched_pending);
		if (rst == CRUX_OK)
			pl->resched_pending = false;
		else
			st = rst;
		pl->first_pass = false;
	}
	dst = decide(pl, out);
	out->reschedules = pl->reschedules;
	out->guard_infeasible = pl->guard_infeasible;
	return st != CRUX_OK ? st : dst;
}

/*
 * Would a later plan decide something even if the view stayed the same? Yes
 * while a job is profiling (its window ends), a change waits for the hold
 * time, a reschedule is pending, or the fairness guard watches scheduled jobs.
 */
bool cruxd_planner_due(const struct cruxd_planner *pl)
{
	bool guarded = pl->cfg->guard.bound > 0;

	if (pl->resched_pending || pl->held)
		return true;
	for (size_t k = 0; k < pl->jobs.n; k++)
		if (pl->jobs.v[k]->state == CRUX_JOB_PROFILING ||
		    (guarded && pl->jobs.v[k]->decided))
			return true;
	return false;
}

int cruxd_planner_node_of(struct cruxd_planner *pl, const struct crux_addr *addr)
{
	return jobs_node_of(&pl->jobs, addr);
}

void cruxd_planner_resched(struct cruxd_planner *pl)
{
	pl->resched_pending = true;
}

void cruxd_planner_stamp_wall(struct cruxd_planner *pl, uint64_t now, uint64_t wall_ms)
{
	for (size_t k = 0; k < pl->jobs.n; k++) {
		struct job *j = pl->jobs.v[k];
		uint64_t el = now - j->since_ns;
		if (!j->since_wall_ms)
			j->since_wall_ms = wall_ms - el / 1000000u;
	}
}

/* ---- jobs decided before this planner ------------------------------------- */

crux_status_t cruxd_planner_keep(struct cruxd_planner *pl, const struct cruxd_planner_kept *k)
{
	uint32_t top = pl->cfg->settings.nlevels - 1;
	struct job *j;

	if (jobs_find(&pl->jobs, k->key))
		return CRUX_OK;
	j = jobs_add(&pl->jobs, k->key);
	if (!j)
		return CRUX_ERR_NOMEM;
	snprintf(j->id, sizeof(j->id), "%.*s", (int)sizeof(j->id) - 1, k->id);
	j->since_ns = k->since_ns;
	j->since_wall_ms = k->since_wall_ms;
	j->restored = k->restored;
	j->state = k->state == CRUX_JOB_SCHEDULED ? CRUX_JOB_SCHEDULED : CRUX_JOB_PROFILING;
	if (j->state == CRUX_JOB_SCHEDULED) {
		j->adopted = true;
		j->decided = true;
		j->level = (uint8_t)(k->level > top ? top : k->level);
		if (k->nroutes) {
			j->adopt = malloc(k->nroutes * sizeof(*j->adopt));
			if (!j->adopt)
				return CRUX_ERR_NOMEM;
			memcpy(j->adopt, k->routes, k->nroutes * sizeof(*j->adopt));
			j->nadopt = k->nroutes;
		}
	}
	if (k->has_base) {
		j->has_base = true;
		j->base_work = k->base_work;
		j->base_bytes = k->base_bytes;
		j->base_iter = k->base_iter;
	}
	return CRUX_OK;
}

void cruxd_planner_restart(struct cruxd_planner *pl)
{
	jobs_clear(&pl->jobs);
	pl->first_pass = true;
	pl->resched_pending = false;
}

/* ---- life ------------------------------------------------------------------- */

crux_status_t cruxd_planner_new(const struct cruxd_config *cfg, struct crux_sched_topo *topo,
				struct cruxd_guard *guard, struct cruxd_planner **out)
{
	struct cruxd_planner *pl = calloc(1, sizeof(*pl));

	*out = pl;
	if (!pl)
		return CRUX_ERR_NOMEM;
	pl->cfg = cfg;
	pl->topo = topo;
	pl->guard = guard;
	pl->first_pass = true;
	jobs_set_topo(&pl->jobs, topo);
	return CRUX_OK;
}

void cruxd_planner_configure(struct cruxd_planner *pl, struct crux_sched_topo *topo)
{
	for (size_t k = 0; k < pl->jobs.n; k++)
		pl->jobs.v[k]->adopted = false;
	pl->topo = topo;
	pl->star_hosts_sig = 0;
	crux_sched_topo_free(pl->star);
	pl->star = NULL;
	jobs_set_topo(&pl->jobs, topo); /* every host is looked up again */
	pl->resched_pending = true;
}

void cruxd_planner_free(struct cruxd_planner *pl)
{
	if (!pl)
		return;
	jobs_free(&pl->jobs);
	crux_sched_topo_free(pl->star);
	free(pl);
}
