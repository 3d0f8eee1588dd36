/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage 4, realise: decisions (this agent's plan, or the cluster's schedule)
 * and overrides -> this host's decision table. The scheduler's paths become
 * source ports this host's prober found; probing is asked for the peers the
 * local jobs send to.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"
#include "crux/log.h"

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
		if (crux_sched_topo_link(a->topo, ps.links[ps.off[c] + hops - 1], &from, &to,
					 &bw) != CRUX_OK)
			return -1;
		node = to;
		if (c == idx) {
			struct crux_addr ad;
			want = node;
			if (crux_addr_parse(crux_sched_topo_node_name(a->topo, node), &ad) ==
			    CRUX_OK)
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
bool cruxd_route_ports(struct cruxd_agent *a, int src_node, const struct crux_addr *dst,
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
		struct job *j = cruxd_job_find(a, o->job_key);

		memset(tj, 0, sizeof(*tj));
		tj->job_key = o->job_key;
		snprintf(tj->job_id, sizeof(tj->job_id), "%s",
			 o->job_id[0] ? o->job_id
			 : j	      ? j->id
				      : "");
		tj->level = (uint8_t)(o->level > top ? top : o->level);
		tj->state = CRUX_JOB_OVERRIDDEN;
		for (uint8_t r = 0; r < o->nroutes && nr < CRUX_DT_MAX_ROUTES; r++) {
			struct crux_dt_route *rt = &a->troutes[nr];
			const struct cruxd_override_route * or = &o->routes[r];
			int src = j && j->nhosts ? cruxd_node_of(a, &j->hosts[0]) : -1;

			memset(rt, 0, sizeof(*rt));
			rt->job_key = o->job_key;
			rt->peer = or->peer;
			rt->path_id = or->path_id;
			if (or->nports) {
				rt->nports = or->nports;
				memcpy(rt->ports, or->ports, sizeof(rt->ports));
			} else if (!cruxd_route_ports(a, src, & or->peer,
						      cruxd_node_of(a, & or->peer), or->path_id,
						      rt)) {
				continue; /* no ports known for that path yet */
			}
			nr++;
		}
	}
	for (size_t k = 0; k < a->njobs; k++) {
		struct job *j = a->jobs[k];
		struct crux_dt_job *tj;

		if (cruxd_overridden(a, j->key))
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
			if (cruxd_route_ports(a, fl->src_node, &fl->dst, fl->dst_node, fl->path,
					      rt))
				nr++;
		}
	}
	*njobs = nj;
	*nroutes = nr;
}

/*
 * One line per job whose level or profiling state differs from the table
 * last published (new jobs included): the level timeline of a run, which the
 * testbed needs to tell a job's slow iterations from those it ran with a
 * neighbour on its level (bench/testbed/levels.py). Tables keep their order
 * from pass to pass, so the same index is tried first.
 */
static void log_levels(const struct cruxd_agent *a, uint32_t nj)
{
	uint32_t pn = a->published ? a->pub_njobs : 0;

	for (uint32_t i = 0; i < nj; i++) {
		const struct crux_dt_job *n = &a->tjobs[i], *o = NULL;
		bool prof = n->state == CRUX_JOB_PROFILING;
		char from[16] = "";

		if (i < pn && a->pub_jobs[i].job_key == n->job_key)
			o = &a->pub_jobs[i];
		for (uint32_t q = 0; !o && q < pn; q++)
			if (a->pub_jobs[q].job_key == n->job_key)
				o = &a->pub_jobs[q];
		if (o && o->level == n->level && (o->state == CRUX_JOB_PROFILING) == prof)
			continue;
		if (o)
			snprintf(from, sizeof(from), "%u -> ", o->level);
		crux_info("job %s: level %s%u%s (table generation %llu)", n->job_id, from, n->level,
			  prof ? ", profiling" : "", (unsigned long long)a->table_gen + 1);
	}
}

static crux_status_t publish_table(struct cruxd_agent *a, uint64_t now)
{
	uint32_t nj, nr;
	crux_status_t st;

	if (!a->cl)
		build_table(a, now, &nj, &nr);
	else if (!cruxd_cluster_table(a, &nj, &nr))
		return CRUX_OK; /* no schedule yet: the table found at start-up stays */
	if (a->published && nj == a->pub_njobs && nr == a->pub_nroutes &&
	    !memcmp(a->tjobs, a->pub_jobs, nj * sizeof(*a->tjobs)) &&
	    !memcmp(a->troutes, a->pub_routes, nr * sizeof(*a->troutes)))
		return CRUX_OK;
	char err[256];
	st = crux_dt_publish_ex(a->dt, a->tjobs, nj, a->troutes, nr, err, sizeof(err));
	if (st != CRUX_OK) {
		crux_err("cannot publish the decision table: %s", err);
		return st;
	}
	log_levels(a, nj);
	a->table_gen++; /* each publish bumps the table's generation by one */
	memcpy(a->pub_jobs, a->tjobs, nj * sizeof(*a->tjobs));
	memcpy(a->pub_routes, a->troutes, nr * sizeof(*a->troutes));
	a->pub_njobs = nj;
	a->pub_nroutes = nr;
	a->published = true;
	crux_debug("published %u job(s), %u route(s)", nj, nr);
	return CRUX_OK;
}

/* ---- probing wishes --------------------------------------------------------- */

/* The peers this host's jobs send to (the prober keeps its own clock). */
static void want_probes(struct cruxd_agent *a)
{
	if (!a->probe)
		return;
	for (size_t k = 0; k < a->view.njobs; k++) {
		const struct crux_jv_job *j = &a->view.jobs[k];
		for (uint32_t f = 0; f < j->nflows; f++) {
			const struct crux_jv_flow *fl = &j->flows[f];
			if (!cruxd_is_local(a, &fl->src) || fl->dst.family == 0 ||
			    cruxd_is_local(a, &fl->dst))
				continue;
			cruxd_probe_cache_want(a->probe, &fl->dst,
					       (uint32_t)expected_paths(a,
									cruxd_node_of(a, &fl->src),
									cruxd_node_of(a, &fl->dst)),
					       crux_now_ns());
		}
	}
	for (uint32_t i = 0; i < a->ovr->n; i++)
		for (uint8_t r = 0; r < a->ovr->o[i].nroutes; r++)
			if (!a->ovr->o[i].routes[r].nports)
				cruxd_probe_cache_want(a->probe, &a->ovr->o[i].routes[r].peer, 0,
						       crux_now_ns());
}

crux_status_t cruxd_realise(struct cruxd_agent *a, uint64_t now)
{
	want_probes(a);
	return publish_table(a, now);
}
