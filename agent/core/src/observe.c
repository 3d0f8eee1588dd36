/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage 1, observe: this host's profile records (attached processes, then v1
 * record files) and the last pass's ranks -> this pass's ranks. Per process
 * it carries over what only this host can know: the traffic reference window
 * and whether a clamp was logged.
 */
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"
#include "crux/log.h"

/* ---- local addresses ---------------------------------------------------- */

void cruxd_load_local_addrs(struct cruxd_agent *a)
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

/* ---- profile scan -------------------------------------------------------- */

static int rank_cmp(const void *x, const void *y)
{
	const struct rank *a = x, *b = y;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return (a->start_time > b->start_time) - (a->start_time < b->start_time);
}

static const struct rank *rank_prev(const struct cruxd_pass *p, pid_t pid, uint64_t start)
{
	struct rank key = {.pid = pid, .start_time = start};
	return p->nranks ? bsearch(&key, p->ranks, p->nranks, sizeof(key), rank_cmp) : NULL;
}

/* What the scan callbacks need. */
struct scan {
	struct cruxd_agent *a;
	struct cruxd_pass *p;
};

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

/* The rank's stall breakdown from its clamped figures and the plugin's busy fraction. */
static void split_rank(struct rank *r, const struct crux_prof_snapshot *s)
{
	double busy;

	memset(&r->split, 0, sizeof(r->split));
	if (!r->has_compute)
		return;
	busy = crux_prof_busy_fraction(&s->compute, s->has_compute, &s->net, s->has_net, NULL);
	crux_prof_stalls_from(r->iter, r->compute, r->comm, r->stall, busy, &r->split);
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
	struct cruxd_agent *a = ((struct scan *)arg)->a;
	struct cruxd_pass *p = ((struct scan *)arg)->p;
	const struct rank *prev;
	struct rank *r;

	if (s->id.job_key == 0 || s->id.job_id[0] == '\0')
		return 0; /* a record with no identity: nothing to group it by */
	if (p->nnext == p->capnext) {
		size_t nc = p->capnext ? p->capnext * 2 : 64;
		struct rank *nr = realloc(p->next, nc * sizeof(*nr));
		if (!nr)
			return 1;
		p->next = nr;
		p->capnext = nc;
	}
	r = &p->next[p->nnext];
	prev = rank_prev(p, s->pid, s->start_time);
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
	if (r->has_compute && s->compute.iter_time_s == 0) {
		/* A window that saw no complete iteration (the first one still
		 * running, or one longer than the window) measured nothing: the
		 * rank's last window stands, and before its first it has no
		 * timing. As 0 s it would pull the job's mean iteration and
		 * compute down, and the guard's isolated estimate with them. */
		r->has_compute = prev && prev->has_compute;
		if (!r->has_compute)
			r->iter = r->compute = r->comm = r->overlap = r->stall = 0;
	} else if (s->has_compute) {
		clamp_rank(a, r, &s->compute);
	} else {
		r->iter = r->compute = r->comm = r->overlap = r->stall = 0;
	}
	split_rank(r, s);
	update_traffic(a, r, s, p->now);
	if (r->clamped && !r->clamp_logged) {
		crux_warn(
		    "profile %s (pid %d, job %s): implausible values clamped (iteration %.3g s, "
		    "compute %.3g s, comm %.3g s per iteration, or traffic beyond the link "
		    "rate %.0f Gbit/s)",
		    s->file, (int)s->pid, r->job_id, s->compute.iter_time_s, s->compute.compute_s,
		    s->compute.comm_s, a->cfg.link_gbps);
		r->clamp_logged = true;
	}
	p->nnext++;
	return 0;
}

/* An attached record: copied for cruxctl, then taken like any other. */
static int attached_cb(void *arg, const struct crux_prof_snapshot *s)
{
	crux_prof_copies_put(((struct scan *)arg)->a->copies, s);
	return scan_cb(arg, s);
}

/* Scan the records into p's ranks, sorted by (pid, start time). */
crux_status_t cruxd_observe(struct cruxd_agent *a, struct cruxd_pass *p)
{
	struct crux_prof_scan_stats att;
	struct scan sc = {a, p};
	struct rank *tmp;
	size_t tcap;
	crux_status_t st;

	p->nnext = 0;
	memset(&p->scan, 0, sizeof(p->scan));
	/* Attached processes first (identity from the kernel), then v1 record files. */
	crux_prof_copies_begin(a->copies);
	st = crux_broker_scan(a->broker, attached_cb, &sc, &att);
	if (st == CRUX_OK)
		crux_prof_copies_end(a->copies);
	if (st == CRUX_OK)
		st = crux_prof_scan(a->cfg.shm_dir, CRUX_PROF_SCAN_REAP, scan_cb, &sc, &p->scan);
	p->scan.valid += att.valid;
	p->scan.invalid += att.invalid;
	p->scan.busy += att.busy;
	p->scan.reaped += att.reaped;
	if (st != CRUX_OK) {
		crux_err("profile scan of %s failed: %s", a->cfg.shm_dir, crux_status_str(st));
		return st;
	}
	/* The fresh ranks become the pass's; the old array is reused next pass. */
	tmp = p->ranks;
	tcap = p->capranks;
	p->ranks = p->next;
	p->capranks = p->capnext;
	p->nranks = p->nnext;
	p->next = tmp;
	p->capnext = tcap;
	if (p->nranks > 1)
		qsort(p->ranks, p->nranks, sizeof(*p->ranks), rank_cmp);
	return CRUX_OK;
}
