/* SPDX-License-Identifier: Apache-2.0 */
/* cruxd: from profile records to the decision table. */
#include <errno.h>
#include <ifaddrs.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crux/agent.h"
#include "crux/attach.h"
#include "crux/guard.h"
#include "crux/log.h"
#include "crux/overrides.h"
#include "crux/profile.h"
#include "crux/sched.h"

#define NS 1e9
#define MAX_JOB_HOSTS 64
#define MAX_LOCAL_ADDRS 64

/* One training process, as the agent tracks it between passes. */
struct rank {
	pid_t pid;
	uint64_t start_time;
	uint64_t job_key;
	char job_id[CRUX_JOB_ID_LEN];
	char hostname[CRUX_HOSTNAME_LEN];
	struct crux_addr host;
	bool has_compute;
	bool clamped;
	bool clamp_logged;
	bool have_ref;
	double iter, compute, comm, overlap, stall;
	uint32_t npeers;
	struct crux_addr peer[CRUX_PROF_MAX_PEERS];
	double bpi[CRUX_PROF_MAX_PEERS]; /* bytes per iteration to each peer */
	/* Reference sample: traffic per iteration is measured over one window. */
	uint64_t ref_ns;
	uint64_t ref_iters;
	uint32_t nref;
	struct crux_addr ref_peer[CRUX_PROF_MAX_PEERS];
	uint64_t ref_tx[CRUX_PROF_MAX_PEERS];
};

struct flow {
	struct crux_addr src, dst;
	double bytes; /* per iteration */
	int path;     /* scheduler's candidate index, -1 none */
	int src_node, dst_node;
};

struct job {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	uint8_t state; /* CRUX_JOB_PROFILING or CRUX_JOB_SCHEDULED */
	bool present;
	bool adopted; /* decision taken over from the table at start-up */
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
	/* decision */
	bool decided;
	uint8_t level;	  /* published: scheduled level + guard lift */
	double iso;	  /* isolated iteration estimate on its paths, s (fairness guard) */
	double prof_iter; /* iteration time measured at the end of profiling (top level) */
	double t, intensity, k, priority;
	uint32_t ndflows;
	struct flow *dflows;
	uint32_t nadopt;
	struct crux_dt_route *adopt;
};

struct hostent {
	struct crux_addr addr;
	char name[CRUX_HOSTNAME_LEN];
	int node;
};

/* The agent's one context: everything it keeps between passes. */
struct cruxd_agent {
	struct cruxd_config cfg;
	struct crux_dt_writer *dt;  /* a sealed memfd (handed out) with a written file copy */
	struct crux_broker *broker; /* the attach socket (crux/attach.h) */
	struct cruxd_status_writer *sw;
	struct cruxd_probe_cache *probe;
	struct crux_sched_topo *topo; /* from the file; NULL = single-host view */
	struct crux_sched_topo *star; /* built from the hosts seen */
	uint32_t star_hosts_sig;

	struct rank *ranks, *next;
	size_t nranks, capranks, nnext, capnext;
	struct job **jobs;
	size_t njobs, capjobs;
	struct hostent *hosts;
	size_t nhosts, caphosts;

	struct crux_addr local[MAX_LOCAL_ADDRS];
	uint32_t nlocal;

	struct cruxd_guard *guard; /* promotion by measured slowdown */

	struct cruxd_overrides *ovr;
	bool ovr_present;
	struct stat ovr_stat;
	char ovr_error[256];

	bool first_pass;
	bool resched_pending;
	uint64_t last_resched_ns;
	uint64_t reschedules, passes;
	uint64_t probe_version;
	struct crux_prof_scan_stats scan;

	struct crux_dt_job *tjobs, *pub_jobs;
	struct crux_dt_route *troutes, *pub_routes;
	uint32_t pub_njobs, pub_nroutes;
	bool published;
	struct crux_dt_contents *old; /* table at start-up */
	struct cruxd_status_body *status;
	uint64_t now;
};

static double clampd(double v, double lo, double hi)
{
	if (!isfinite(v) || v < lo)
		return lo;
	return v > hi ? hi : v;
}

static double rel_change(double a, double b)
{
	double m = fmax(fabs(a), fabs(b));
	return m <= 0 ? 0 : fabs(a - b) / m;
}

static void addr_str(const struct crux_addr *a, char *buf, size_t len)
{
	crux_addr_format(a, buf, len);
}

/* ---- local addresses ---------------------------------------------------- */

static void load_local_addrs(struct cruxd_agent *a)
{
	struct ifaddrs *ifa = NULL;

	a->nlocal = 0;
	if (getifaddrs(&ifa) != 0)
		return;
	for (struct ifaddrs *i = ifa; i && a->nlocal < MAX_LOCAL_ADDRS; i = i->ifa_next) {
		struct crux_addr x;
		if (i->ifa_addr && crux_addr_from_sockaddr(i->ifa_addr, &x) == CRUX_OK)
			a->local[a->nlocal++] = x;
	}
	freeifaddrs(ifa);
}

static bool is_local(const struct cruxd_agent *a, const struct crux_addr *x)
{
	if (x->family == 0)
		return true;
	for (uint32_t i = 0; i < a->nlocal; i++)
		if (crux_addr_equal(&a->local[i], x))
			return true;
	return false;
}

/* ---- jobs ---------------------------------------------------------------- */

static int job_cmp_key(const void *k, const void *e)
{
	uint64_t key = *(const uint64_t *)k;
	const struct job *j = *(struct job *const *)e;
	return (key > j->key) - (key < j->key);
}

static struct job *job_find(const struct cruxd_agent *a, uint64_t key)
{
	struct job **p = a->njobs ? bsearch(&key, a->jobs, a->njobs, sizeof(*a->jobs), job_cmp_key)
				  : NULL;
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

static struct job *job_add(struct cruxd_agent *a, uint64_t key)
{
	struct job *j;
	size_t pos = 0;

	if (a->njobs == a->capjobs) {
		size_t nc = a->capjobs ? a->capjobs * 2 : 64;
		struct job **nj = realloc(a->jobs, nc * sizeof(*nj));
		if (!nj)
			return NULL;
		a->jobs = nj;
		a->capjobs = nc;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->key = key;
	while (pos < a->njobs && a->jobs[pos]->key < key)
		pos++;
	memmove(&a->jobs[pos + 1], &a->jobs[pos], (a->njobs - pos) * sizeof(*a->jobs));
	a->jobs[pos] = j;
	a->njobs++;
	return j;
}

static crux_status_t job_add_flow(struct job *j, const struct crux_addr *src,
				  const struct crux_addr *dst, double bytes)
{
	for (uint32_t i = 0; i < j->nflows; i++)
		if (crux_addr_equal(&j->flows[i].src, src) && crux_addr_equal(&j->flows[i].dst, dst)) {
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

static struct hostent *host_find(struct cruxd_agent *a, const struct crux_addr *addr,
				 const char *name)
{
	for (size_t i = 0; i < a->nhosts; i++) {
		struct hostent *h = &a->hosts[i];
		if (addr->family ? crux_addr_equal(&h->addr, addr)
				 : (h->addr.family == 0 && !strcmp(h->name, name ? name : "")))
			return h;
	}
	return NULL;
}

static struct hostent *host_get(struct cruxd_agent *a, const struct crux_addr *addr,
				const char *name)
{
	struct hostent *h = host_find(a, addr, name);

	if (h) {
		if (!h->name[0] && name)
			snprintf(h->name, sizeof(h->name), "%s", name);
		return h;
	}
	if (a->nhosts == a->caphosts) {
		size_t nc = a->caphosts ? a->caphosts * 2 : 32;
		struct hostent *nh = realloc(a->hosts, nc * sizeof(*nh));
		if (!nh)
			return NULL;
		a->hosts = nh;
		a->caphosts = nc;
	}
	h = &a->hosts[a->nhosts++];
	memset(h, 0, sizeof(*h));
	h->addr = *addr;
	if (name)
		snprintf(h->name, sizeof(h->name), "%s", name);
	h->node = -1;
	return h;
}

static struct crux_sched_topo *topo_now(const struct cruxd_agent *a)
{
	return a->topo ? a->topo : a->star;
}

/* Map a host to a topology node: by its address written as text, else its host name. */
static int node_of(struct cruxd_agent *a, const struct crux_addr *addr)
{
	struct crux_sched_topo *t = topo_now(a);
	struct hostent *h = host_find(a, addr, NULL);
	char buf[CRUX_ADDR_STRLEN];
	int n = -1;

	if (!t)
		return -1;
	if (h && h->node >= 0)
		return h->node;
	if (addr->family) {
		addr_str(addr, buf, sizeof(buf));
		n = crux_sched_topo_find(t, buf);
	}
	if (n < 0 && h && h->name[0])
		n = crux_sched_topo_find(t, h->name);
	if (n >= crux_sched_topo_n_hosts(t))
		n = -1;
	if (h)
		h->node = n;
	return n;
}

/* Single-host view: a star of every host seen around one switch. */
static crux_status_t build_star(struct cruxd_agent *a)
{
	struct crux_sched_err err;
	struct crux_sched_topo *t = NULL;
	uint32_t sig = 2166136261u;
	size_t cap = 256 + a->nhosts * 200, off = 0;
	char *text;
	crux_status_t st;

	for (size_t i = 0; i < a->nhosts; i++)
		sig = (sig ^ (uint32_t)crux_addr_hash(&a->hosts[i].addr)) * 16777619u;
	sig ^= (uint32_t)a->nhosts;
	if (a->star && sig == a->star_hosts_sig)
		return CRUX_OK;
	text = malloc(cap);
	if (!text)
		return CRUX_ERR_NOMEM;
	off += (size_t)snprintf(text + off, cap - off, "switch crux-star-fabric\n");
	for (size_t i = 0; i < a->nhosts; i++) {
		char name[CRUX_ADDR_STRLEN + CRUX_HOSTNAME_LEN];
		if (a->hosts[i].addr.family)
			addr_str(&a->hosts[i].addr, name, sizeof(name));
		else
			snprintf(name, sizeof(name), "%s", a->hosts[i].name[0] ? a->hosts[i].name
									  : "local");
		off += (size_t)snprintf(text + off, cap - off,
					"host %s\nlink %s crux-star-fabric %.6f\n", name, name,
					a->cfg.link_gbps);
	}
	st = crux_sched_topo_parse(text, off, "single-host view", &t, &err);
	free(text);
	if (st != CRUX_OK) {
		crux_err("cannot build the single-host view: %s", err.msg);
		return st;
	}
	crux_sched_topo_free(a->star);
	a->star = t;
	a->star_hosts_sig = sig;
	for (size_t i = 0; i < a->nhosts; i++)
		a->hosts[i].node = -1;
	return CRUX_OK;
}

/* ---- profile scan -------------------------------------------------------- */

static int rank_cmp(const void *x, const void *y)
{
	const struct rank *a = x, *b = y;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return (a->start_time > b->start_time) - (a->start_time < b->start_time);
}

static int rank_cmp_job(const void *x, const void *y)
{
	const struct rank *a = x, *b = y;
	if (a->job_key != b->job_key)
		return a->job_key < b->job_key ? -1 : 1;
	return rank_cmp(x, y);
}

static const struct rank *rank_prev(const struct cruxd_agent *a, pid_t pid, uint64_t start)
{
	struct rank key = {.pid = pid, .start_time = start};
	return a->nranks ? bsearch(&key, a->ranks, a->nranks, sizeof(key), rank_cmp) : NULL;
}

static void clamp_rank(struct cruxd_agent *a, struct rank *r, const struct crux_prof_compute *c)
{
	double maxit = a->cfg.max_iter_s;
	double it = clampd(c->iter_time_s, 0, maxit);
	double cp, cm, ov, sl;

	cp = clampd(c->compute_s, 0, it);
	cm = clampd(c->comm_s, 0, it);
	ov = clampd(c->overlap_s, 0, fmin(cp, cm));
	sl = cm - ov;
	if (it != c->iter_time_s || cp != c->compute_s || cm != c->comm_s || ov != c->overlap_s ||
	    !(fabs(sl - c->stall_s) <= 1e-6 + 1e-3 * cm))
		r->clamped = true;
	r->iter = it;
	r->compute = cp;
	r->comm = cm;
	r->overlap = ov;
	r->stall = sl;
}

static uint64_t tx_total(const struct crux_prof_peer *p)
{
	uint64_t s = 0;
	for (int l = 0; l < CRUX_MAX_LEVELS; l++)
		s += p->tx_bytes[l];
	return s;
}

static void take_ref(struct rank *r, const struct crux_prof_snapshot *s, uint64_t now)
{
	uint32_t n = s->has_net ? s->net.npeers : 0;

	if (n > CRUX_PROF_MAX_PEERS)
		n = CRUX_PROF_MAX_PEERS;
	r->ref_ns = now;
	r->ref_iters = s->has_compute ? s->compute.total_iterations : 0;
	r->nref = n;
	for (uint32_t i = 0; i < n; i++) {
		r->ref_peer[i] = s->net.peers[i].peer;
		r->ref_tx[i] = tx_total(&s->net.peers[i]);
	}
	r->have_ref = true;
}

/* Bytes per iteration to each peer, measured over (about) one profile window. */
static void update_traffic(struct cruxd_agent *a, struct rank *r,
			   const struct crux_prof_snapshot *s, uint64_t now)
{
	uint32_t n = s->has_net ? s->net.npeers : 0;
	double link = a->cfg.link_gbps * 1e9 / 8;
	double cap = link * (r->iter > 0 ? r->iter : a->cfg.max_iter_s);
	uint64_t iters = s->has_compute ? s->compute.total_iterations : 0;

	if (n > CRUX_PROF_MAX_PEERS)
		n = CRUX_PROF_MAX_PEERS;
	if (!r->have_ref) {
		/* First sight (new process or agent restart): the lifetime average. */
		r->npeers = n;
		for (uint32_t i = 0; i < n; i++) {
			double b = iters ? (double)tx_total(&s->net.peers[i]) / (double)iters : 0;
			r->peer[i] = s->net.peers[i].peer;
			r->bpi[i] = b;
		}
		take_ref(r, s, now);
	} else if (now - r->ref_ns >= a->cfg.profile_window_ns) {
		double dt = (double)(now - r->ref_ns) / NS;
		uint64_t di = iters >= r->ref_iters ? iters - r->ref_iters : 0;
		bool idle = di == 0;

		for (uint32_t i = 0; i < n && idle; i++)
			for (uint32_t k = 0; k < r->nref; k++)
				if (crux_addr_equal(&r->ref_peer[k], &s->net.peers[i].peer) &&
				    tx_total(&s->net.peers[i]) != r->ref_tx[k])
					idle = false;
		if (idle && n == r->npeers) {
			/* No iteration and no byte in a whole window: keep the estimate. */
			take_ref(r, s, now);
			goto bound;
		}
		r->npeers = n;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t tx = tx_total(&s->net.peers[i]), prev = 0;
			double d;
			for (uint32_t k = 0; k < r->nref; k++)
				if (crux_addr_equal(&r->ref_peer[k], &s->net.peers[i].peer))
					prev = r->ref_tx[k];
			d = tx >= prev ? (double)(tx - prev) : 0;
			r->peer[i] = s->net.peers[i].peer;
			if (di)
				r->bpi[i] = d / (double)di;
			else
				r->bpi[i] = r->iter > 0 ? d / dt * r->iter : 0;
		}
		take_ref(r, s, now);
	}
bound:
	for (uint32_t i = 0; i < r->npeers; i++) {
		double b = clampd(r->bpi[i], 0, cap);
		if (b != r->bpi[i])
			r->clamped = true;
		r->bpi[i] = b;
	}
}

static int scan_cb(void *arg, const struct crux_prof_snapshot *s)
{
	struct cruxd_agent *a = arg;
	const struct rank *prev;
	struct rank *r;

	if (s->id.job_key == 0 || s->id.job_id[0] == '\0')
		return 0; /* a record with no identity: nothing to group it by */
	if (a->nnext == a->capnext) {
		size_t nc = a->capnext ? a->capnext * 2 : 64;
		struct rank *nr = realloc(a->next, nc * sizeof(*nr));
		if (!nr)
			return 1;
		a->next = nr;
		a->capnext = nc;
	}
	r = &a->next[a->nnext];
	prev = rank_prev(a, s->pid, s->start_time);
	if (prev)
		*r = *prev;
	else
		memset(r, 0, sizeof(*r));
	r->pid = s->pid;
	r->start_time = s->start_time;
	r->job_key = s->id.job_key;
	memcpy(r->job_id, s->id.job_id, sizeof(r->job_id));
	r->job_id[sizeof(r->job_id) - 1] = '\0';
	memcpy(r->hostname, s->id.hostname, sizeof(r->hostname));
	r->hostname[sizeof(r->hostname) - 1] = '\0';
	r->host = s->id.host_addr;
	/*
	 * The preload may create the record before the plugin knows its
	 * device: then the plugin's net section names the host's address.
	 */
	if (r->host.family != 4 && r->host.family != 6 && s->has_net)
		r->host = s->net.local_addr;
	if (r->host.family != 4 && r->host.family != 6)
		r->host.family = 0;
	r->clamped = false;
	r->has_compute = s->has_compute && s->compute.windows > 0;
	if (s->has_compute)
		clamp_rank(a, r, &s->compute);
	else
		r->iter = r->compute = r->comm = r->overlap = r->stall = 0;
	update_traffic(a, r, s, a->now);
	if (r->clamped && !r->clamp_logged) {
		crux_warn("profile %s (pid %d, job %s): implausible values clamped (iteration %.3g s, "
			  "compute %.3g s, comm %.3g s per iteration, or traffic beyond the link "
			  "rate %.0f Gbit/s)",
			  s->file, (int)s->pid, r->job_id, s->compute.iter_time_s,
			  s->compute.compute_s, s->compute.comm_s, a->cfg.link_gbps);
		r->clamp_logged = true;
	}
	a->nnext++;
	return 0;
}

/* ---- grouping and life cycle -------------------------------------------- */

static crux_status_t group(struct cruxd_agent *a, uint64_t now)
{
	size_t i = 0;

	for (size_t k = 0; k < a->njobs; k++) {
		struct job *j = a->jobs[k];
		j->present = false;
		j->nranks = j->ncompute = j->nhosts = j->nflows = 0;
		j->iter = j->compute = j->comm = j->overlap = j->stall = j->work = j->bytes = 0;
		j->clamped = false;
	}
	a->nhosts = 0;
	if (a->nranks > 1)
		qsort(a->ranks, a->nranks, sizeof(*a->ranks), rank_cmp_job);
	while (i < a->nranks) {
		size_t e = i;
		struct job *j;

		while (e < a->nranks && a->ranks[e].job_key == a->ranks[i].job_key)
			e++;
		j = job_find(a, a->ranks[i].job_key);
		if (!j) {
			j = job_add(a, a->ranks[i].job_key);
			if (!j)
				return CRUX_ERR_NOMEM;
			j->state = CRUX_JOB_PROFILING;
			j->since_ns = now;
			memcpy(j->id, a->ranks[i].job_id, sizeof(j->id));
			crux_info("job %s (0x%016llx) arrived: %zu rank(s); profiling for %.1f s",
				  j->id, (unsigned long long)j->key, e - i,
				  (double)a->cfg.profile_window_ns / NS);
		}
		j->present = true;
		for (size_t k = i; k < e; k++) {
			struct rank *r = &a->ranks[k];
			struct hostent *h = host_get(a, &r->host, r->hostname);
			bool known = false;

			if (!h)
				return CRUX_ERR_NOMEM;
			j->nranks++;
			j->clamped |= r->clamped;
			if (r->has_compute) {
				j->ncompute++;
				j->iter += r->iter;
				j->compute += r->compute;
				j->comm += r->comm;
				j->overlap += r->overlap;
				j->stall += r->stall;
				j->work += r->compute;
			}
			for (uint32_t hi = 0; hi < j->nhosts; hi++)
				known |= crux_addr_equal(&j->hosts[hi], &r->host) &&
					 (r->host.family || hi == 0);
			if (!known && j->nhosts < MAX_JOB_HOSTS)
				j->hosts[j->nhosts++] = r->host;
			for (uint32_t p = 0; p < r->npeers; p++) {
				if (crux_addr_equal(&r->peer[p], &r->host) || r->bpi[p] <= 0)
					continue; /* intra-host: no path to choose */
				if (!host_get(a, &r->peer[p], NULL) ||
				    job_add_flow(j, &r->host, &r->peer[p], r->bpi[p]) != CRUX_OK)
					return CRUX_ERR_NOMEM;
				j->bytes += r->bpi[p];
			}
		}
		if (j->ncompute) {
			j->iter /= j->ncompute;
			j->compute /= j->ncompute;
			j->comm /= j->ncompute;
			j->overlap /= j->ncompute;
			j->stall /= j->ncompute;
		}
		i = e;
	}
	return CRUX_OK;
}

static bool overridden(const struct cruxd_agent *a, uint64_t key)
{
	return cruxd_overrides_find(a->ovr, key) >= 0;
}

/* Departures, end of profiling, significant changes. Sets a->resched_pending. */
static void life_cycle(struct cruxd_agent *a, uint64_t now)
{
	bool changed = false;
	size_t k = 0;

	while (k < a->njobs) {
		struct job *j = a->jobs[k];
		if (j->present) {
			k++;
			continue;
		}
		crux_info("job %s (0x%016llx) departed", j->id, (unsigned long long)j->key);
		if (j->state == CRUX_JOB_SCHEDULED)
			a->resched_pending = true;
		job_free(j);
		memmove(&a->jobs[k], &a->jobs[k + 1], (a->njobs - k - 1) * sizeof(*a->jobs));
		a->njobs--;
	}
	for (k = 0; k < a->njobs; k++) {
		struct job *j = a->jobs[k];
		uint64_t el = now - j->since_ns;

		if (j->state == CRUX_JOB_PROFILING) {
			bool measured = j->ncompute == j->nranks;
			if (el >= a->cfg.profile_window_ns && (measured || el >= 2 * a->cfg.profile_window_ns)) {
				j->state = CRUX_JOB_SCHEDULED;
				j->prof_iter = j->iter;
				a->resched_pending = true;
				crux_info("job %s profiled: W %.4g GPU-s/iteration, %.4g bytes/iteration "
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
		if (rel_change(j->work, j->base_work) > a->cfg.change_threshold ||
		    rel_change(j->bytes, j->base_bytes) > a->cfg.change_threshold ||
		    rel_change(j->iter, j->base_iter) > a->cfg.change_threshold) {
			if (!changed)
				crux_debug("job %s changed: W %.4g -> %.4g, bytes %.4g -> %.4g", j->id,
					   j->base_work, j->work, j->base_bytes, j->bytes);
			changed = true;
		}
	}
	if (changed && now - a->last_resched_ns >= a->cfg.hold_ns)
		a->resched_pending = true;
}

/* ---- scheduling ----------------------------------------------------------- */

/* The fairness guard's settings for the planner (bound, level weights). */
static void guard_params(const struct cruxd_agent *a, struct crux_sched_params *p)
{
	bool weighted = false;

	p->max_slowdown = a->cfg.guard.bound;
	for (uint32_t l = 0; l < a->cfg.settings.nlevels && l < CRUX_SCHED_MAX_LEVELS; l++) {
		p->weight[l] = a->cfg.settings.levels[l].weight;
		weighted |= p->weight[l] > 0;
	}
	p->n_weights = weighted ? (int)a->cfg.settings.nlevels : 0;
}

/* The scheduler's level plus the guard's lift, within 0..K-1. */
static uint8_t guard_level(const struct cruxd_agent *a, uint64_t key, int level)
{
	int64_t l = (int64_t)level + cruxd_guard_lift(a->guard, key);
	uint32_t k = a->cfg.settings.nlevels;

	return (uint8_t)(l < 0 ? 0 : l >= (int64_t)k ? k - 1 : l);
}

/* Feed every scheduled job's measured slowdown to the guard; a lift change
 * reschedules (the guard bounds how often). */
static void guard_pass(struct cruxd_agent *a, uint64_t now)
{
	if (!(a->cfg.guard.bound > 0))
		return;
	for (size_t k = 0; k < a->njobs; k++) {
		const struct job *j = a->jobs[k];

		if (j->state != CRUX_JOB_SCHEDULED || !j->decided || overridden(a, j->key) ||
		    !(j->iso > 0) || !(j->iter > 0))
			continue;
		if (cruxd_guard_observe(a->guard, j->key, j->iter / j->iso, now,
					a->cfg.settings.nlevels)) {
			crux_info("fairness guard: job %s measured %.2fx its isolated iteration time "
				  "(bound %.2fx): lift now %u level(s)",
				  j->id, j->iter / j->iso, a->cfg.guard.bound,
				  cruxd_guard_lift(a->guard, j->key));
			a->resched_pending = true;
		}
	}
	/* Departed jobs: forgotten after a minute without samples. */
	cruxd_guard_prune(a->guard, now, 60 * (uint64_t)NS);
}

/*
 * Run the scheduler over the scheduled, not overridden jobs. With
 * 'keep_adopted' (first pass after a restart with nothing new), jobs taken
 * over from the table keep their level and routes; only their figures
 * (t, I, k, P) are refreshed.
 */
static crux_status_t reschedule(struct cruxd_agent *a, uint64_t now, bool keep_adopted)
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
	for (size_t k = 0; k < a->njobs; k++)
		if (a->jobs[k]->state == CRUX_JOB_SCHEDULED && !overridden(a, a->jobs[k]->key))
			cap_flows = 1;
	if (!cap_flows) {
		a->last_resched_ns = now;
		return CRUX_OK; /* nothing to schedule */
	}
	cap_flows = 0;
	if (!a->topo && a->nhosts) {
		st = build_star(a);
		if (st != CRUX_OK)
			return st;
	}
	t = topo_now(a);
	map = calloc(a->njobs + 1, sizeof(*map));
	hosts = calloc(MAX_JOB_HOSTS, sizeof(*hosts));
	if (!map || !hosts) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	for (size_t k = 0; k < a->njobs; k++) {
		struct job *j = a->jobs[k];
		struct crux_sched_job sj;
		int nh = 0, nf = 0;

		if (j->state != CRUX_JOB_SCHEDULED || overridden(a, j->key))
			continue;
		for (uint32_t h = 0; h < j->nhosts; h++) {
			int n = node_of(a, &j->hosts[h]);
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
			fl->src_node = node_of(a, &fl->src);
			fl->dst_node = node_of(a, &fl->dst);
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
			j->level = (uint8_t)a->cfg.settings.default_level;
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
		p.levels = (int)a->cfg.settings.nlevels;
		p.seed = a->cfg.seed;
		guard_params(a, &p);
		st = crux_sched_schedule_new(js.v, js.n, p.levels, &s);
		if (st != CRUX_OK)
			goto out;
		st = crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, s);
		if (st != CRUX_OK) {
			crux_err("scheduling failed: %s", crux_status_str(st));
			goto out;
		}
		if (s->guard_lifts || s->guard_violators)
			crux_info("fairness guard: the planner lifted %d level(s) to keep predicted "
				  "slowdowns within %.2fx; %d job(s) still predicted above it",
				  s->guard_lifts, p.max_slowdown, s->guard_violators);
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
		if (!(keep_adopted && j->adopted)) {
			j->level = guard_level(a, j->key, d->level);
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
	for (size_t k = 0; k < a->njobs; k++) {
		struct job *j = a->jobs[k];
		if (j->state == CRUX_JOB_SCHEDULED) {
			j->has_base = true;
			j->base_work = j->work;
			j->base_bytes = j->bytes;
			j->base_iter = j->iter;
		}
	}
	a->last_resched_ns = now;
	a->reschedules++;
	crux_info("rescheduled %zu job(s) (%s)", js.n,
		  a->topo ? a->cfg.topology : "single-host view");
out:
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	free(flows);
	free(hosts);
	free(map);
	return st;
}

/* ---- paths to probed ports --------------------------------------------- */

/*
 * Which probed path realises the scheduler's candidate 'idx' from src to dst?
 * The probe names a path by the router 'hops' links away. When that switch
 * is named by one of its addresses in the topology, match exactly; else
 * match the k-th distinct switch at that depth (candidate order) with the
 * k-th probed path (ascending address), if the counts agree.
 */
static int probe_index(struct cruxd_agent *a, int src, int dst, int idx,
		       const struct cruxd_probe_result *r)
{
	struct crux_sched_path_set ps;
	int hops = a->cfg.probe_cfg.probe.hops;
	int want = -1, distinct[CRUXD_PROBE_MAX_PATHS], nd = 0, pos = -1;

	if (idx < 0)
		return -1;
	if (!a->topo || src < 0 || dst < 0)
		return idx < (int)r->npaths ? idx : -1;
	if (crux_sched_topo_paths(a->topo, src, dst, &ps) != CRUX_OK || idx >= ps.n_paths)
		return -1;
	for (int c = 0; c < ps.n_paths; c++) {
		int from, to, node;
		double bw;
		bool seen = false;

		if (ps.off[c + 1] - ps.off[c] < hops + 1)
			return -1; /* the probe would reach the peer on this path */
		if (crux_sched_topo_link(a->topo, ps.links[ps.off[c] + hops - 1], &from, &to, &bw) !=
		    CRUX_OK)
			return -1;
		node = to;
		if (c == idx) {
			struct crux_addr ad;
			want = node;
			if (crux_addr_parse(crux_sched_topo_node_name(a->topo, node), &ad) == CRUX_OK)
				return cruxd_probe_find_path(r, &ad);
		}
		for (int q = 0; q < nd; q++)
			seen |= distinct[q] == node;
		if (!seen) {
			if (nd == CRUXD_PROBE_MAX_PATHS)
				return -1;
			distinct[nd++] = node;
		}
	}
	for (int q = 0; q < nd; q++)
		if (distinct[q] == want)
			pos = q;
	return nd == (int)r->npaths ? pos : -1;
}

static int expected_paths(struct cruxd_agent *a, int src, int dst)
{
	struct crux_sched_path_set ps;

	if (!a->topo || src < 0 || dst < 0 ||
	    crux_sched_topo_paths(a->topo, src, dst, &ps) != CRUX_OK)
		return 0;
	return ps.n_paths;
}

/* Ports for (dst, path); false when none are known. */
static bool route_ports(struct cruxd_agent *a, int src_node, const struct crux_addr *dst,
			int dst_node, int idx, struct crux_dt_route *rt)
{
	struct cruxd_probe_entry *e;
	bool ok = false;
	int pi;

	if (!a->probe)
		return false;
	e = malloc(sizeof(*e));
	if (!e)
		return false;
	if (cruxd_probe_cache_get(a->probe, dst, e) == CRUX_OK && e->state == CRUXD_PROBE_OK) {
		pi = probe_index(a, src_node, dst_node, idx, &e->result);
		if (pi >= 0 && e->result.paths[pi].nports) {
			rt->nports = e->result.paths[pi].nports;
			memcpy(rt->ports, e->result.paths[pi].ports, sizeof(rt->ports));
			ok = true;
		}
	}
	free(e);
	return ok;
}

/* ---- the table ---------------------------------------------------------- */

static bool route_dup(const struct crux_dt_route *rs, uint32_t n, uint64_t key,
		      const struct crux_addr *peer)
{
	for (uint32_t i = 0; i < n; i++)
		if (rs[i].job_key == key && crux_addr_equal(&rs[i].peer, peer))
			return true;
	return false;
}

static void build_table(struct cruxd_agent *a, uint64_t now, uint32_t *njobs, uint32_t *nroutes)
{
	uint32_t nj = 0, nr = 0, top = a->cfg.settings.nlevels - 1;
	bool warned = false;

	(void)now;
	/* Overrides first: they hold even for jobs that have not started yet. */
	for (uint32_t i = 0; i < a->ovr->n && nj < CRUX_DT_MAX_JOBS; i++) {
		const struct cruxd_override *o = &a->ovr->o[i];
		struct crux_dt_job *tj = &a->tjobs[nj++];
		struct job *j = job_find(a, o->job_key);

		memset(tj, 0, sizeof(*tj));
		tj->job_key = o->job_key;
		snprintf(tj->job_id, sizeof(tj->job_id), "%s", o->job_id[0] ? o->job_id
								: j ? j->id : "");
		tj->level = (uint8_t)(o->level > top ? top : o->level);
		tj->state = CRUX_JOB_OVERRIDDEN;
		for (uint8_t r = 0; r < o->nroutes && nr < CRUX_DT_MAX_ROUTES; r++) {
			struct crux_dt_route *rt = &a->troutes[nr];
			const struct cruxd_override_route *or = &o->routes[r];
			int src = j && j->nhosts ? node_of(a, &j->hosts[0]) : -1;

			memset(rt, 0, sizeof(*rt));
			rt->job_key = o->job_key;
			rt->peer = or->peer;
			rt->path_id = or->path_id;
			if (or->nports) {
				rt->nports = or->nports;
				memcpy(rt->ports, or->ports, sizeof(rt->ports));
			} else if (!route_ports(a, src, &or->peer, node_of(a, &or->peer),
						or->path_id, rt)) {
				continue; /* no ports known for that path yet */
			}
			nr++;
		}
	}
	for (size_t k = 0; k < a->njobs; k++) {
		struct job *j = a->jobs[k];
		struct crux_dt_job *tj;

		if (overridden(a, j->key))
			continue;
		if (nj >= CRUX_DT_MAX_JOBS) {
			if (!warned)
				crux_warn("more than %d jobs: the rest run on the default level",
					  CRUX_DT_MAX_JOBS);
			warned = true;
			break;
		}
		tj = &a->tjobs[nj++];
		memset(tj, 0, sizeof(*tj));
		tj->job_key = j->key;
		memcpy(tj->job_id, j->id, sizeof(tj->job_id));
		if (j->state == CRUX_JOB_PROFILING || !j->decided) {
			tj->level = (uint8_t)top;
			tj->state = CRUX_JOB_PROFILING;
			continue;
		}
		tj->level = j->level;
		tj->state = CRUX_JOB_SCHEDULED;
		if (j->adopted) {
			for (uint32_t r = 0; r < j->nadopt && nr < CRUX_DT_MAX_ROUTES; r++)
				a->troutes[nr++] = j->adopt[r];
			continue;
		}
		for (uint32_t f = 0; f < j->ndflows && nr < CRUX_DT_MAX_ROUTES; f++) {
			const struct flow *fl = &j->dflows[f];
			struct crux_dt_route *rt = &a->troutes[nr];

			if (fl->path < 0 || route_dup(a->troutes, nr, j->key, &fl->dst))
				continue;
			memset(rt, 0, sizeof(*rt));
			rt->job_key = j->key;
			rt->peer = fl->dst;
			rt->path_id = (uint16_t)fl->path;
			if (route_ports(a, fl->src_node, &fl->dst, fl->dst_node, fl->path, rt))
				nr++;
		}
	}
	*njobs = nj;
	*nroutes = nr;
}

static crux_status_t publish_table(struct cruxd_agent *a, uint64_t now)
{
	uint32_t nj, nr;
	crux_status_t st;

	build_table(a, now, &nj, &nr);
	if (a->published && nj == a->pub_njobs && nr == a->pub_nroutes &&
	    !memcmp(a->tjobs, a->pub_jobs, nj * sizeof(*a->tjobs)) &&
	    !memcmp(a->troutes, a->pub_routes, nr * sizeof(*a->troutes)))
		return CRUX_OK;
	st = crux_dt_publish(a->dt, a->tjobs, nj, a->troutes, nr);
	if (st != CRUX_OK) {
		crux_err("cannot publish the decision table: %s", crux_status_str(st));
		return st;
	}
	memcpy(a->pub_jobs, a->tjobs, nj * sizeof(*a->tjobs));
	memcpy(a->pub_routes, a->troutes, nr * sizeof(*a->troutes));
	a->pub_njobs = nj;
	a->pub_nroutes = nr;
	a->published = true;
	crux_debug("published %u job(s), %u route(s)", nj, nr);
	return CRUX_OK;
}

/* ---- probing wishes --------------------------------------------------------- */

static void want_probes(struct cruxd_agent *a)
{
	if (!a->probe)
		return;
	for (size_t k = 0; k < a->njobs; k++) {
		struct job *j = a->jobs[k];
		for (uint32_t f = 0; f < j->nflows; f++) {
			const struct flow *fl = &j->flows[f];
			if (!is_local(a, &fl->src) || fl->dst.family == 0 || is_local(a, &fl->dst))
				continue;
			cruxd_probe_cache_want(a->probe, &fl->dst,
					       (uint32_t)expected_paths(a, node_of(a, &fl->src),
									node_of(a, &fl->dst)),
					       crux_now_ns());
		}
	}
	for (uint32_t i = 0; i < a->ovr->n; i++)
		for (uint8_t r = 0; r < a->ovr->o[i].nroutes; r++)
			if (!a->ovr->o[i].routes[r].nports)
				cruxd_probe_cache_want(a->probe, &a->ovr->o[i].routes[r].peer, 0,
						       crux_now_ns());
}

/* ---- overrides ------------------------------------------------------------ */

static void check_overrides(struct cruxd_agent *a)
{
	char path[CRUX_PATH_MAX + 32];
	struct cruxd_overrides *n;
	struct stat sb;
	char err[256];
	crux_status_t st;

	snprintf(path, sizeof(path), "%s/%s", a->cfg.shm_dir, CRUXD_OVERRIDES_FILE);
	if (lstat(path, &sb) != 0) {
		if (a->ovr_present && a->ovr->n) {
			crux_info("overrides file removed: %u override(s) cleared", a->ovr->n);
			a->resched_pending = true;
		}
		if (a->ovr_present)
			memset(a->ovr, 0, sizeof(*a->ovr));
		a->ovr_present = false;
		a->ovr_error[0] = '\0';
		return;
	}
	if (a->ovr_present && sb.st_ino == a->ovr_stat.st_ino && sb.st_size == a->ovr_stat.st_size &&
	    sb.st_mtim.tv_sec == a->ovr_stat.st_mtim.tv_sec &&
	    sb.st_mtim.tv_nsec == a->ovr_stat.st_mtim.tv_nsec)
		return;
	a->ovr_present = true;
	a->ovr_stat = sb;
	n = malloc(sizeof(*n));
	if (!n)
		return;
	st = cruxd_overrides_load(a->cfg.shm_dir, n, err, sizeof(err));
	if (st != CRUX_OK) {
		crux_err("overrides file refused, keeping the previous overrides: %s; fix: correct "
			 "it, or run 'cruxctl clear' to replace it (drops every override)",
			 err);
		snprintf(a->ovr_error, sizeof(a->ovr_error), "%s", err);
		free(n);
		return;
	}
	for (uint32_t i = 0; i < n->n; i++)
		if (n->o[i].level >= a->cfg.settings.nlevels)
			crux_warn("override for job 0x%016llx: level %u >= CRUX_LEVELS=%u, using %u",
				  (unsigned long long)n->o[i].job_key, n->o[i].level,
				  a->cfg.settings.nlevels, a->cfg.settings.nlevels - 1);
	if (n->seq != a->ovr->seq || n->n != a->ovr->n ||
	    memcmp(n->o, a->ovr->o, n->n * sizeof(n->o[0])))
		crux_info("overrides applied (seq %llu): %u job(s)", (unsigned long long)n->seq, n->n);
	memcpy(a->ovr, n, sizeof(*n));
	a->ovr_error[0] = '\0';
	a->resched_pending = true;
	free(n);
}

/* ---- status for cruxctl ------------------------------------------------- */

static void build_status(struct cruxd_agent *a, uint64_t pass_ns)
{
	struct cruxd_status_body *b = a->status;
	struct cruxd_probe_entry *pe = NULL;
	uint32_t nj = 0;

	b->agent_pid = (uint32_t)getpid();
	b->nlevels = a->cfg.settings.nlevels;
	b->overrides_seq = a->ovr->seq;
	b->passes = a->passes;
	b->reschedules = a->reschedules;
	b->last_pass_ns = pass_ns;
	b->interval_ns = a->cfg.interval_ns;
	b->profile_window_ns = a->cfg.profile_window_ns;
	b->table_generation = 0;
	b->records_valid = a->scan.valid;
	b->records_invalid = a->scan.invalid;
	b->records_busy = a->scan.busy;
	b->records_reaped = a->scan.reaped;
	b->nhosts_topology = a->topo ? (uint32_t)crux_sched_topo_n_hosts(a->topo) : 0;
	b->max_slowdown = a->cfg.guard.bound;
	b->guard_changes = cruxd_guard_changes(a->guard);
	snprintf(b->topology, sizeof(b->topology), "%s", a->topo ? a->cfg.topology : "");
	snprintf(b->overrides_error, sizeof(b->overrides_error), "%s", a->ovr_error);
	for (size_t k = 0; k < a->njobs && nj < CRUXD_STATUS_MAX_JOBS; k++) {
		const struct job *j = a->jobs[k];
		struct cruxd_status_job *sj = &b->jobs[nj++];
		int oi = cruxd_overrides_find(a->ovr, j->key);

		memset(sj, 0, sizeof(*sj));
		sj->job_key = j->key;
		memcpy(sj->job_id, j->id, sizeof(sj->job_id));
		sj->nranks = j->nranks;
		sj->nhosts = j->nhosts;
		for (uint32_t h = 0; h < j->nhosts && h < CRUXD_STATUS_JOB_HOSTS; h++)
			sj->hosts[h] = j->hosts[h];
		sj->iter_time_s = j->iter;
		sj->compute_s = j->compute;
		sj->comm_s = j->comm;
		sj->overlap_s = j->overlap;
		sj->stall_s = j->stall;
		sj->work = j->work;
		sj->bytes_per_iter = j->bytes;
		sj->comm_time_s = j->t;
		sj->intensity = j->intensity;
		sj->k = j->k;
		sj->priority = j->priority;
		sj->clamped = j->clamped;
		sj->iso_iter_s = j->iso;
		sj->slowdown = cruxd_guard_slowdown(a->guard, j->key);
		if (!(sj->slowdown > 0) && j->iso > 0 && j->iter > 0)
			sj->slowdown = j->iter / j->iso;
		sj->lift = (uint8_t)cruxd_guard_lift(a->guard, j->key);
		if (oi >= 0) {
			uint32_t lv = a->ovr->o[oi].level;
			sj->state = CRUX_JOB_OVERRIDDEN;
			sj->level = (uint8_t)(lv >= b->nlevels ? b->nlevels - 1 : lv);
		} else if (j->state == CRUX_JOB_PROFILING || !j->decided) {
			uint64_t el = a->now - j->since_ns;
			sj->state = CRUX_JOB_PROFILING;
			sj->level = (uint8_t)(b->nlevels - 1);
			sj->profiling_left_ms = el < a->cfg.profile_window_ns
							? (a->cfg.profile_window_ns - el) / 1000000
							: 0;
		} else {
			sj->state = CRUX_JOB_SCHEDULED;
			sj->level = j->level;
		}
		for (uint32_t f = 0; f < j->ndflows && sj->npaths < CRUXD_STATUS_JOB_PATHS; f++) {
			struct cruxd_status_path *sp = &sj->paths[sj->npaths];
			struct crux_dt_route rt;
			const struct flow *fl = &j->dflows[f];

			if (fl->path < 0)
				continue;
			sp->src = fl->src;
			sp->dst = fl->dst;
			sp->path_id = (uint16_t)fl->path;
			sp->bytes_per_iter = fl->bytes;
			memset(&rt, 0, sizeof(rt));
			if (route_ports(a, fl->src_node, &fl->dst, fl->dst_node, fl->path, &rt))
				sp->nports = rt.nports;
			sj->npaths++;
		}
	}
	b->njobs = nj;
	b->npeers = 0;
	if (a->probe && (pe = malloc(CRUXD_STATUS_MAX_PEERS * sizeof(*pe)))) {
		uint32_t n = cruxd_probe_cache_list(a->probe, pe, CRUXD_STATUS_MAX_PEERS);
		uint64_t now = crux_now_ns();
		for (uint32_t i = 0; i < n; i++) {
			struct cruxd_status_peer *sp = &b->peers[i];
			memset(sp, 0, sizeof(*sp));
			sp->peer = pe[i].peer;
			sp->state = pe[i].state;
			sp->failures = pe[i].failures;
			sp->age_ms = pe[i].probed_ns ? (now - pe[i].probed_ns) / 1000000 : UINT64_MAX;
			sp->npaths = (uint8_t)pe[i].result.npaths;
			for (uint32_t p = 0; p < pe[i].result.npaths && p < CRUXD_STATUS_PEER_PATHS; p++) {
				sp->paths[p].hop = pe[i].result.paths[p].hop;
				sp->paths[p].nports = pe[i].result.paths[p].nports;
				memcpy(sp->paths[p].ports, pe[i].result.paths[p].ports,
				       sizeof(sp->paths[p].ports));
			}
		}
		b->npeers = n;
		free(pe);
	}
}

/* ---- open / pass / close -------------------------------------------------- */

static crux_status_t load_topology(const struct cruxd_config *cfg, struct crux_sched_topo **out)
{
	struct crux_sched_err err;
	crux_status_t st;

	*out = NULL;
	if (!cfg->topology[0])
		return CRUX_OK;
	st = crux_sched_topo_load(cfg->topology, out, &err);
	if (st != CRUX_OK)
		crux_err("topology %s refused: %s", cfg->topology, err.msg);
	return st;
}

/* Take over the decisions of the table left by a previous agent. */
static crux_status_t adopt_table(struct cruxd_agent *a, uint64_t now)
{
	struct crux_dt_contents *c = a->old;
	uint32_t imported = 0;

	for (uint32_t i = 0; i < c->njobs && i < CRUX_DT_MAX_JOBS; i++) {
		const struct crux_dt_job *tj = &c->jobs[i];
		struct job *j;

		if (tj->job_key == 0)
			continue;
		if (tj->state == CRUX_JOB_OVERRIDDEN) {
			struct cruxd_override o;
			if (overridden(a, tj->job_key))
				continue;
			memset(&o, 0, sizeof(o));
			o.job_key = tj->job_key;
			memcpy(o.job_id, tj->job_id, sizeof(o.job_id));
			o.job_id[sizeof(o.job_id) - 1] = '\0';
			o.level = tj->level;
			for (uint32_t r = 0; r < c->nroutes && o.nroutes < CRUXD_OVR_MAX_ROUTES; r++) {
				if (c->routes[r].job_key != tj->job_key)
					continue;
				o.routes[o.nroutes].peer = c->routes[r].peer;
				o.routes[o.nroutes].path_id = c->routes[r].path_id;
				o.routes[o.nroutes].nports = c->routes[r].nports;
				memcpy(o.routes[o.nroutes].ports, c->routes[r].ports,
				       sizeof(o.routes[0].ports));
				o.nroutes++;
			}
			if (cruxd_overrides_put(a->ovr, &o) == CRUX_OK)
				imported++;
			continue;
		}
		if (job_find(a, tj->job_key))
			continue;
		j = job_add(a, tj->job_key);
		if (!j)
			return CRUX_ERR_NOMEM;
		memcpy(j->id, tj->job_id, sizeof(j->id));
		j->id[sizeof(j->id) - 1] = '\0';
		j->since_ns = now;
		j->state = tj->state == CRUX_JOB_SCHEDULED ? CRUX_JOB_SCHEDULED : CRUX_JOB_PROFILING;
		if (j->state == CRUX_JOB_SCHEDULED) {
			j->adopted = true;
			j->decided = true;
			j->level = (uint8_t)(tj->level >= a->cfg.settings.nlevels
						     ? a->cfg.settings.nlevels - 1
						     : tj->level);
			for (uint32_t r = 0; r < c->nroutes; r++) {
				struct crux_dt_route *nr;
				if (c->routes[r].job_key != tj->job_key)
					continue;
				nr = realloc(j->adopt, (j->nadopt + 1) * sizeof(*nr));
				if (!nr)
					return CRUX_ERR_NOMEM;
				j->adopt = nr;
				j->adopt[j->nadopt++] = c->routes[r];
			}
		}
	}
	if (imported) {
		a->ovr->seq++;
		crux_info("kept %u override(s) found in the decision table", imported);
		if (cruxd_overrides_store(a->cfg.shm_dir, a->ovr) == CRUX_OK) {
			char path[CRUX_PATH_MAX + 32];
			snprintf(path, sizeof(path), "%s/%s", a->cfg.shm_dir, CRUXD_OVERRIDES_FILE);
			if (lstat(path, &a->ovr_stat) == 0)
				a->ovr_present = true;
		}
	}
	if (c->njobs)
		crux_info("took over the decision table: %u job(s), %u route(s)", c->njobs,
			  c->nroutes);
	return CRUX_OK;
}

/* Contract v2: the table as a sealed memfd, served on the attach socket. */
static crux_status_t attach_open(struct cruxd_agent *a)
{
	struct crux_broker_policy pol;
	char err[512];
	crux_status_t st = crux_broker_policy_env(NULL, NULL, &pol, err, sizeof(err));
	if (st == CRUX_OK)
		st = crux_broker_open(a->cfg.shm_dir, &pol, crux_dt_writer_fd(a->dt), &a->broker,
				      err, sizeof(err));
	if (st != CRUX_OK)
		crux_err("cannot serve training processes: %s", err);
	else if (pol.nusers || pol.ngroups)
		crux_info("attach socket open to root and %u user(s), %u group(s)",
			  (unsigned)pol.nusers, (unsigned)pol.ngroups);
	return st;
}

crux_status_t cruxd_agent_open(const struct cruxd_config *cfg, struct cruxd_agent **out,
			       pid_t *holder)
{
	struct cruxd_agent *a = calloc(1, sizeof(*a));
	char err[256], derr[512];
	crux_status_t st;

	if (!a)
		return CRUX_ERR_NOMEM;
	a->cfg = *cfg;
	a->first_pass = true;
	a->ovr = calloc(1, sizeof(*a->ovr));
	a->tjobs = calloc(CRUX_DT_MAX_JOBS, sizeof(*a->tjobs));
	a->pub_jobs = calloc(CRUX_DT_MAX_JOBS, sizeof(*a->pub_jobs));
	a->troutes = calloc(CRUX_DT_MAX_ROUTES, sizeof(*a->troutes));
	a->pub_routes = calloc(CRUX_DT_MAX_ROUTES, sizeof(*a->pub_routes));
	a->old = calloc(1, sizeof(*a->old));
	a->status = calloc(1, sizeof(*a->status));
	if (!a->ovr || !a->tjobs || !a->pub_jobs || !a->troutes || !a->pub_routes || !a->old ||
	    !a->status || cruxd_guard_new(&cfg->guard, &a->guard) != CRUX_OK) {
		st = CRUX_ERR_NOMEM;
		goto fail;
	}
	st = crux_shm_dir_check(cfg->shm_dir, true);
	if (st != CRUX_OK)
		goto fail;
	st = load_topology(cfg, &a->topo);
	if (st != CRUX_OK)
		goto fail;
	st = crux_dt_writer_open_shadow(cfg->shm_dir, &cfg->settings, &a->dt, holder, derr,
					sizeof(derr));
	if (st != CRUX_OK) {
		crux_warn("%s", derr);
		goto fail;
	}
	st = crux_dt_writer_read(a->dt, a->old);
	if (st != CRUX_OK) {
		crux_warn("cannot read back the existing decision table (%s): starting afresh",
			  crux_status_str(st));
		memset(a->old, 0, sizeof(*a->old));
	}
	st = cruxd_overrides_load(cfg->shm_dir, a->ovr, err, sizeof(err));
	if (st == CRUX_OK) {
		char path[CRUX_PATH_MAX + 32];
		snprintf(path, sizeof(path), "%s/%s", cfg->shm_dir, CRUXD_OVERRIDES_FILE);
		a->ovr_present = lstat(path, &a->ovr_stat) == 0;
	} else if (st != CRUX_ERR_NOENT) {
		crux_err("overrides file refused: %s; fix: correct it, or run 'cruxctl clear' to "
			 "replace it (drops every override)",
			 err);
		snprintf(a->ovr_error, sizeof(a->ovr_error), "%s", err);
		memset(a->ovr, 0, sizeof(*a->ovr));
	}
	st = adopt_table(a, crux_now_ns());
	if (st != CRUX_OK)
		goto fail;
	st = attach_open(a);
	if (st != CRUX_OK)
		goto fail;
	st = cruxd_status_writer_open(cfg->shm_dir, &a->sw);
	if (st != CRUX_OK) {
		crux_err("cannot create the agent status record in %s: %s", cfg->shm_dir,
			 crux_status_str(st));
		goto fail;
	}
	if (cfg->probe) {
		st = cruxd_probe_cache_create(&cfg->probe_cfg, &a->probe);
		if (st != CRUX_OK)
			goto fail;
	}
	load_local_addrs(a);
	*out = a;
	return CRUX_OK;
fail:
	cruxd_agent_close(a);
	return st;
}

crux_status_t cruxd_agent_start_probing(struct cruxd_agent *a)
{
	return a->probe ? cruxd_probe_cache_start(a->probe) : CRUX_OK;
}

void cruxd_agent_heartbeat(struct cruxd_agent *a)
{
	crux_dt_heartbeat(a->dt);
	cruxd_status_heartbeat(a->sw);
}

crux_status_t cruxd_agent_pass(struct cruxd_agent *a, uint64_t now_ns)
{
	uint64_t t0 = crux_now_ns();
	struct rank *tmp;
	size_t tcap;
	crux_status_t st;

	a->now = now_ns;
	check_overrides(a);
	a->nnext = 0;
	memset(&a->scan, 0, sizeof(a->scan));
	/* Attached processes first (identity from the kernel), then v1 record files. */
	struct crux_prof_scan_stats att;
	st = crux_broker_scan(a->broker, scan_cb, a, &att);
	if (st == CRUX_OK)
		st = crux_prof_scan(a->cfg.shm_dir, CRUX_PROF_SCAN_REAP, scan_cb, a, &a->scan);
	a->scan.valid += att.valid;
	a->scan.invalid += att.invalid;
	a->scan.busy += att.busy;
	a->scan.reaped += att.reaped;
	if (st != CRUX_OK) {
		crux_err("profile scan of %s failed: %s", a->cfg.shm_dir, crux_status_str(st));
		cruxd_agent_heartbeat(a); /* the old decisions stay valid */
		return st;
	}
	/* The fresh ranks become the state; the old array is reused next pass. */
	tmp = a->ranks;
	tcap = a->capranks;
	a->ranks = a->next;
	a->capranks = a->capnext;
	a->nranks = a->nnext;
	a->next = tmp;
	a->capnext = tcap;
	if (a->nranks > 1)
		qsort(a->ranks, a->nranks, sizeof(*a->ranks), rank_cmp_job);
	st = group(a, now_ns);
	if (st != CRUX_OK)
		return st;
	if (a->nranks > 1)
		qsort(a->ranks, a->nranks, sizeof(*a->ranks), rank_cmp);
	life_cycle(a, now_ns);
	guard_pass(a, now_ns);
	if (a->first_pass || a->resched_pending) {
		/* After a restart with nothing new: figures only, decisions stay. */
		st = reschedule(a, now_ns, !a->resched_pending);
		if (st == CRUX_OK)
			a->resched_pending = false;
		a->first_pass = false;
	}
	want_probes(a);
	st = publish_table(a, now_ns);
	cruxd_agent_heartbeat(a);
	a->passes++;
	build_status(a, crux_now_ns() - t0);
	cruxd_status_publish(a->sw, a->status);
	return st;
}

crux_status_t cruxd_agent_reload(struct cruxd_agent *a, const struct cruxd_config *cfg)
{
	struct crux_sched_topo *t = NULL;
	crux_status_t st;

	st = load_topology(cfg, &t);
	if (st != CRUX_OK)
		return st;
	st = crux_dt_set_settings(a->dt, &cfg->settings);
	if (st != CRUX_OK) {
		crux_err("new level settings refused: %s", crux_status_str(st));
		crux_sched_topo_free(t);
		return st;
	}
	crux_sched_topo_free(a->topo);
	a->topo = t;
	for (size_t i = 0; i < a->nhosts; i++)
		a->hosts[i].node = -1;
	snprintf(a->cfg.topology, sizeof(a->cfg.topology), "%s", cfg->topology);
	a->cfg.settings = cfg->settings;
	a->cfg.interval_ns = cfg->interval_ns;
	a->cfg.profile_window_ns = cfg->profile_window_ns;
	a->cfg.change_threshold = cfg->change_threshold;
	a->cfg.hold_ns = cfg->hold_ns;
	a->cfg.link_gbps = cfg->link_gbps;
	a->cfg.max_iter_s = cfg->max_iter_s;
	a->cfg.seed = cfg->seed;
	a->cfg.guard = cfg->guard;
	cruxd_guard_configure(a->guard, &cfg->guard);
	for (size_t k = 0; k < a->njobs; k++)
		a->jobs[k]->adopted = false;
	a->star_hosts_sig = 0;
	crux_sched_topo_free(a->star);
	a->star = NULL;
	a->resched_pending = true;
	a->published = false;
	load_local_addrs(a);
	crux_info("configuration reloaded: %u levels, topology %s", cfg->settings.nlevels,
		  cfg->topology[0] ? cfg->topology : "none (single-host view)");
	return CRUX_OK;
}

const struct cruxd_status_body *cruxd_agent_status(const struct cruxd_agent *a)
{
	return a->status;
}

void cruxd_agent_close(struct cruxd_agent *a)
{
	if (!a)
		return;
	if (a->probe)
		cruxd_probe_cache_destroy(a->probe);
	if (a->sw)
		cruxd_status_writer_close(a->sw, true);
	crux_broker_close(a->broker);
	if (a->dt) {
		/* A last heartbeat so readers keep the decisions for a full timeout. */
		crux_dt_heartbeat(a->dt);
		crux_dt_writer_close(a->dt);
	}
	for (size_t k = 0; k < a->njobs; k++)
		job_free(a->jobs[k]);
	free(a->jobs);
	free(a->ranks);
	free(a->next);
	free(a->hosts);
	crux_sched_topo_free(a->topo);
	crux_sched_topo_free(a->star);
	free(a->ovr);
	free(a->tjobs);
	free(a->pub_jobs);
	free(a->troutes);
	free(a->pub_routes);
	free(a->old);
	free(a->status);
	cruxd_guard_free(a->guard);
	free(a);
}
