/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decisions: the planner's (or the cluster schedule's) output, realise's and
 * report's input. A value of the pass; its buffers are kept from pass to pass.
 * The helpers are small and inline: every stage that builds or reads
 * decisions uses them, none owns them. The planner's decisions carry the
 * hosts of the view it planned from, so realise finds a host's topology node
 * from values (cruxd_topo_node: the one rule, the planner's too).
 */
#ifndef CRUXD_DECISIONS_H
#define CRUXD_DECISIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/decision.h"
#include "crux/job_view.h"
#include "crux/sched.h"

#define MAX_JOB_HOSTS CRUX_JV_MAX_JOB_HOSTS

/* One flow of a job between two hosts, with the scheduler's path for it. */
struct flow {
	struct crux_addr src, dst;
	double bytes; /* per iteration */
	int path;     /* scheduler's candidate index, -1 none */
	int src_node, dst_node;
};

/* A route a decision asks for: the row, and its ends' topology nodes. */
struct cruxd_route {
	struct crux_dt_route rt; /* rt.nports 0: ports from the probe snapshot */
	int src_node, dst_node;
};

enum cruxd_routes_from {
	CRUXD_ROUTES_PLANNED,  /* flows: the scheduler's paths, one route per peer */
	CRUXD_ROUTES_ADOPTED,  /* routes: taken over from the table at start-up, as they are */
	CRUXD_ROUTES_OVERRIDE, /* routes: an operator's, ports given or probed */
	CRUXD_ROUTES_SCHEDULE, /* routes: the cluster schedule's from this host, one per peer */
};

/* One job's decision: its row of the table, and the planner's figures for the status. */
struct cruxd_decision {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	uint8_t state; /* the row's: profiling, scheduled, overridden */
	uint8_t level;
	uint8_t from;	 /* enum cruxd_routes_from */
	bool overridden; /* a planner's job an override replaces: the override's row stands */
	uint32_t nroutes, caproutes;
	struct cruxd_route *routes;
	uint32_t nflows, capflows; /* the scheduler's flows with their paths (status, schedule) */
	struct flow *flows;
	/* The planner's figures. */
	bool decided, adopted, has_base, clamped;
	uint32_t nranks, nhosts;
	struct crux_addr hosts[MAX_JOB_HOSTS];
	double iter, compute, comm, overlap, stall, work, bytes;
	double t, intensity, k, priority, iso;
	struct crux_sched_account acct;
	uint64_t since_ns, since_wall_ms;
	double base_work, base_bytes, base_iter;
};

/* The hosts of the view a plan was made from (addresses and names, in the view's order). */
struct cruxd_hosts {
	size_t n, cap;
	struct crux_jv_host *v;
};

struct cruxd_decisions {
	bool valid;	/* false: none (cluster mode before its first schedule) */
	bool warn_full; /* say so when the table cannot take every job */
	size_t nover;	/* v[0..nover): the overrides; then one per job, by key */
	size_t n, cap;
	struct cruxd_decision *v;
	/* The planner's counters when it made them (the status shows them). */
	uint64_t reschedules;
	uint32_t guard_infeasible; /* the last schedule's jobs no level keeps within the bound */
	struct cruxd_hosts hosts;  /* the planner's: the view's hosts; the schedule's: none */
};

/* A host's topology node: by its address as text, else by its name (NULL:
 * none); -1 (or below): not a host of t, or no topology. */
static inline int cruxd_topo_node(const struct crux_sched_topo *t, const struct crux_addr *addr,
				  const char *name)
{
	char buf[CRUX_ADDR_STRLEN];
	int n = -1;

	if (!t)
		return -1;
	if (addr->family) {
		crux_addr_format(addr, buf, sizeof(buf));
		n = crux_sched_topo_find(t, buf);
	}
	if (n < 0 && name && name[0])
		n = crux_sched_topo_find(t, name);
	return n < crux_sched_topo_n_hosts(t) ? n : -1;
}

/* The name of the host with that address (NULL: none, or no address). */
static inline const char *cruxd_hosts_name(const struct cruxd_hosts *hs,
					   const struct crux_addr *addr)
{
	for (size_t i = 0; addr->family && i < hs->n; i++)
		if (crux_addr_equal(&hs->v[i].addr, addr))
			return hs->v[i].name;
	return NULL;
}

/* A new decision at the end (its buffers kept from an earlier pass); NULL: out of memory. */
static inline struct cruxd_decision *cruxd_decision_new(struct cruxd_decisions *d)
{
	struct cruxd_decision *x;
	struct cruxd_route *routes;
	struct flow *flows;
	uint32_t caproutes, capflows;

	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 64;
		struct cruxd_decision *nv = realloc(d->v, nc * sizeof(*nv));
		if (!nv)
			return NULL;
		memset(nv + d->cap, 0, (nc - d->cap) * sizeof(*nv));
		d->v = nv;
		d->cap = nc;
	}
	x = &d->v[d->n++];
	routes = x->routes;
	flows = x->flows;
	caproutes = x->caproutes;
	capflows = x->capflows;
	memset(x, 0, sizeof(*x));
	x->routes = routes;
	x->caproutes = caproutes;
	x->flows = flows;
	x->capflows = capflows;
	return x;
}

/* Room for n routes. */
static inline crux_status_t cruxd_decision_routes(struct cruxd_decision *x, uint32_t n)
{
	if (n > x->caproutes) {
		struct cruxd_route *nr = realloc(x->routes, n * sizeof(*nr));
		if (!nr)
			return CRUX_ERR_NOMEM;
		x->routes = nr;
		x->caproutes = n;
	}
	return CRUX_OK;
}

/* The decision of a planner's job (not an override's). */
static inline const struct cruxd_decision *cruxd_decision_of(const struct cruxd_decisions *d,
							     uint64_t key)
{
	for (size_t i = d->nover; i < d->n; i++)
		if (d->v[i].key == key)
			return &d->v[i];
	return NULL;
}

static inline void cruxd_decisions_free(struct cruxd_decisions *d)
{
	for (size_t i = 0; i < d->cap; i++) {
		free(d->v[i].routes);
		free(d->v[i].flows);
	}
	free(d->v);
	free(d->hosts.v);
	memset(d, 0, sizeof(*d));
}

#endif /* CRUXD_DECISIONS_H */
