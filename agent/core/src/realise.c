/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage 4, realise: decisions (this agent's plan, or the cluster's schedule)
 * and one probe snapshot -> the rows of this host's decision table, then
 * published. The scheduler's paths become source ports this host's prober
 * found; probing is asked for the peers the local jobs send to.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"
#include "crux/log.h"

crux_status_t cruxd_rows_open(struct cruxd_rows *r)
{
	memset(r, 0, sizeof(*r));
	r->jobs = calloc(CRUX_DT_MAX_JOBS, sizeof(*r->jobs));
	r->routes = calloc(CRUX_DT_MAX_ROUTES, sizeof(*r->routes));
	return r->jobs && r->routes ? CRUX_OK : CRUX_ERR_NOMEM;
}

void cruxd_rows_close(struct cruxd_rows *r)
{
	free(r->jobs);
	free(r->routes);
	memset(r, 0, sizeof(*r));
}

/* ---- probing wishes --------------------------------------------------------- */

/* A host's node in the agent's topology, named as the plan's view names it
 * (without a topology file no path count is expected: -1). */
static int node_of(const struct cruxd_agent *a, const struct cruxd_hosts *hosts,
		   const struct crux_addr *addr)
{
	return a->topo ? cruxd_topo_node(a->topo, addr, cruxd_hosts_name(hosts, addr)) : -1;
}

/* The peers this host's jobs send to (the prober keeps its own clock). */
void cruxd_want_probes(struct cruxd_agent *a, const struct crux_job_view *v,
		       const struct cruxd_hosts *hosts, const struct cruxd_overrides *local)
{
	if (!a->probe)
		return;
	for (size_t k = 0; k < v->njobs; k++) {
		const struct crux_jv_job *j = &v->jobs[k];
		for (uint32_t f = 0; f < j->nflows; f++) {
			const struct crux_jv_flow *fl = &j->flows[f];
			if (!cruxd_addr_in(a->local, a->nlocal, &fl->src) || fl->dst.family == 0 ||
			    cruxd_addr_in(a->local, a->nlocal, &fl->dst))
				continue;
			cruxd_probe_cache_want(
			    a->probe, &fl->dst,
			    (uint32_t)cruxd_expected_paths(a->topo, node_of(a, hosts, &fl->src),
							   node_of(a, hosts, &fl->dst)),
			    crux_now_ns());
		}
	}
	for (uint32_t i = 0; i < local->n; i++)
		for (uint8_t r = 0; r < local->o[i].nroutes; r++)
			if (!local->o[i].routes[r].nports)
				cruxd_probe_cache_want(a->probe, &local->o[i].routes[r].peer, 0,
						       crux_now_ns());
}

/* ---- the rows ----------------------------------------------------------- */

static bool route_dup(const struct crux_dt_route *rs, uint32_t n, uint64_t key,
		      const struct crux_addr *peer)
{
	for (uint32_t i = 0; i < n; i++)
		if (rs[i].job_key == key && crux_addr_equal(&rs[i].peer, peer))
			return true;
	return false;
}

/* A route's ports: given, else from the snapshot (false: none known yet). */
static bool route_ports(struct cruxd_agent *a, const struct cruxd_probe_snap *snap,
			const struct cruxd_route *r, struct crux_dt_route *rt)
{
	*rt = r->rt;
	return rt->nports || cruxd_snap_ports(snap, a->topo, a->cfg.probe_cfg.probe.hops,
					      r->src_node, &rt->peer, r->dst_node, rt->path_id, rt);
}

/* The routes of one decision after the rows' first *nr. */
static void decision_rows(struct cruxd_agent *a, const struct cruxd_decision *d,
			  const struct cruxd_probe_snap *snap, struct cruxd_rows *out)
{
	struct crux_dt_route *rs = out->routes;
	uint32_t nr = out->nroutes;

	switch (d->from) {
	case CRUXD_ROUTES_OVERRIDE:
		for (uint32_t r = 0; r < d->nroutes && nr < CRUX_DT_MAX_ROUTES; r++)
			nr += route_ports(a, snap, &d->routes[r], &rs[nr]);
		break;
	case CRUXD_ROUTES_ADOPTED:
		for (uint32_t r = 0;
		     d->state == CRUX_JOB_SCHEDULED && r < d->nroutes && nr < CRUX_DT_MAX_ROUTES;
		     r++)
			rs[nr++] = d->routes[r].rt;
		break;
	case CRUXD_ROUTES_SCHEDULE:
		for (uint32_t r = 0; r < d->nroutes && nr < CRUX_DT_MAX_ROUTES; r++) {
			if (route_dup(rs, nr, d->key, &d->routes[r].rt.peer))
				continue;
			if (route_ports(a, snap, &d->routes[r], &rs[nr]))
				nr++;
			else if (a->probe) /* no ports known for that path yet */
				cruxd_probe_cache_want(a->probe, &d->routes[r].rt.peer, 0,
						       crux_now_ns());
		}
		break;
	case CRUXD_ROUTES_PLANNED:
		for (uint32_t f = 0;
		     d->state == CRUX_JOB_SCHEDULED && f < d->nflows && nr < CRUX_DT_MAX_ROUTES;
		     f++) {
			const struct flow *fl = &d->flows[f];
			struct cruxd_route r = {.src_node = fl->src_node, .dst_node = fl->dst_node};

			if (fl->path < 0 || route_dup(rs, nr, d->key, &fl->dst))
				continue;
			r.rt.job_key = d->key;
			r.rt.peer = fl->dst;
			r.rt.path_id = (uint16_t)fl->path;
			nr += route_ports(a, snap, &r, &rs[nr]);
		}
		break;
	}
	out->nroutes = nr;
}

void cruxd_realise(struct cruxd_agent *a, const struct cruxd_decisions *d,
		   const struct cruxd_probe_snap *snap, struct cruxd_rows *out)
{
	bool warned = false;

	out->njobs = out->nroutes = 0;
	for (size_t i = 0; i < d->n; i++) {
		const struct cruxd_decision *x = &d->v[i];
		struct crux_dt_job *tj;

		if (x->overridden)
			continue; /* the override's row (first) stands */
		if (out->njobs >= CRUX_DT_MAX_JOBS) {
			if (i < d->nover)
				continue;
			if (d->warn_full && !warned)
				crux_warn("more than %d jobs: the rest run on the default level",
					  CRUX_DT_MAX_JOBS);
			warned = true;
			break;
		}
		tj = &out->jobs[out->njobs++];
		memset(tj, 0, sizeof(*tj));
		tj->job_key = x->key;
		memcpy(tj->job_id, x->id, sizeof(tj->job_id));
		tj->level = x->level;
		tj->state = x->state;
		decision_rows(a, x, snap, out);
	}
}

/*
 * One line per job whose level or profiling state differs from the table
 * last published (new jobs included): the level timeline of a run, which the
 * testbed needs to tell a job's slow iterations from those it ran with a
 * neighbour on its level (bench/testbed/levels.py). Tables keep their order
 * from pass to pass, so the same index is tried first.
 */
static void log_levels(const struct cruxd_agent *a, const struct cruxd_rows *rows)
{
	uint32_t pn = a->published ? a->pub.njobs : 0;

	for (uint32_t i = 0; i < rows->njobs; i++) {
		const struct crux_dt_job *n = &rows->jobs[i], *o = NULL;
		bool prof = n->state == CRUX_JOB_PROFILING;
		char from[16] = "";

		if (i < pn && a->pub.jobs[i].job_key == n->job_key)
			o = &a->pub.jobs[i];
		for (uint32_t q = 0; !o && q < pn; q++)
			if (a->pub.jobs[q].job_key == n->job_key)
				o = &a->pub.jobs[q];
		if (o && o->level == n->level && (o->state == CRUX_JOB_PROFILING) == prof)
			continue;
		if (o)
			snprintf(from, sizeof(from), "%u -> ", o->level);
		crux_info("job %s: level %s%u%s (table generation %llu)", n->job_id, from, n->level,
			  prof ? ", profiling" : "", (unsigned long long)a->table_gen + 1);
	}
}

crux_status_t cruxd_publish(struct cruxd_agent *a, const struct cruxd_rows *rows)
{
	uint32_t nj = rows->njobs, nr = rows->nroutes;
	char err[256];
	crux_status_t st;

	if (a->published && nj == a->pub.njobs && nr == a->pub.nroutes &&
	    !memcmp(rows->jobs, a->pub.jobs, nj * sizeof(*rows->jobs)) &&
	    !memcmp(rows->routes, a->pub.routes, nr * sizeof(*rows->routes)))
		return CRUX_OK;
	st = crux_dt_publish_ex(a->dt, rows->jobs, nj, rows->routes, nr, err, sizeof(err));
	if (st != CRUX_OK) {
		crux_err("cannot publish the decision table: %s", err);
		return st;
	}
	log_levels(a, rows);
	a->table_gen++; /* each publish bumps the table's generation by one */
	memcpy(a->pub.jobs, rows->jobs, nj * sizeof(*rows->jobs));
	memcpy(a->pub.routes, rows->routes, nr * sizeof(*rows->routes));
	a->pub.njobs = nj;
	a->pub.nroutes = nr;
	a->published = true;
	crux_debug("published %u job(s), %u route(s)", nj, nr);
	return CRUX_OK;
}
