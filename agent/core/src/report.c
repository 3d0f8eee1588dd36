/* SPDX-License-Identifier: Apache-2.0 */
/* Stage 5, report: the pass's decisions, rows, view and probe snapshot -> the status record. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_int.h"

/* ---- status for cruxctl ------------------------------------------------- */

static int flow_bytes_desc(const void *x, const void *y)
{
	const struct cruxd_status_path *a = x, *b = y;
	return (a->bytes_per_iter < b->bytes_per_iter) - (a->bytes_per_iter > b->bytes_per_iter);
}

/*
 * A job's network sensitivity from this host's view: the mean stall
 * breakdown of its ranks and its bytes per iteration by host pair (the
 * largest CRUXD_STATUS_JOB_PEERS).
 */
static void put_sensitivity(struct cruxd_status_job *sj, const struct crux_job_view *v,
			    uint64_t key)
{
	for (size_t i = 0; i < v->njobs; i++) {
		const struct crux_jv_job *vj = &v->jobs[i];
		struct cruxd_status_path all[64];
		uint32_t n = 0;

		if (vj->key != key)
			continue;
		if (vj->nsplit) {
			sj->stalls_valid = 1;
			sj->stalls_net_known = vj->nsplit_net == vj->nsplit;
			sj->frac_compute = vj->split_compute_sum / vj->nsplit;
			sj->frac_interconnect = vj->split_inter_sum / vj->nsplit;
			sj->frac_network = vj->split_net_sum / vj->nsplit;
			sj->frac_other = vj->split_other_sum / vj->nsplit;
		}
		for (uint32_t f = 0; f < vj->nflows && n < 64; f++) {
			memset(&all[n], 0, sizeof(all[n]));
			all[n].src = vj->flows[f].src;
			all[n].dst = vj->flows[f].dst;
			all[n].bytes_per_iter = vj->flows[f].bytes;
			n++;
		}
		qsort(all, n, sizeof(all[0]), flow_bytes_desc);
		sj->npeer_bytes =
		    (uint8_t)(n < CRUXD_STATUS_JOB_PEERS ? n : CRUXD_STATUS_JOB_PEERS);
		memcpy(sj->peer_bytes, all, sj->npeer_bytes * sizeof(all[0]));
		return;
	}
}

/*
 * Cluster mode: every job of the table this host applies, with this host's
 * share of its profile (its local ranks) and, on the leader (b->term, set by
 * the cluster stage's report), the planner's figures.
 */
static uint32_t cluster_jobs(const struct cruxd_agent *a, const struct cruxd_pass *p,
			     struct cruxd_status_body *b)
{
	const struct crux_job_view *view = &p->view;
	uint32_t nj = 0;

	for (uint32_t i = 0; a->published && i < a->pub.njobs && nj < CRUXD_STATUS_MAX_JOBS; i++) {
		const struct crux_dt_job *tj = &a->pub.jobs[i];
		struct cruxd_status_job *sj = &b->jobs[nj++];
		const struct cruxd_decision *pj =
		    b->term > 0 ? cruxd_decision_of(&p->plan, tj->job_key) : NULL;

		memset(sj, 0, sizeof(*sj));
		sj->job_key = tj->job_key;
		memcpy(sj->job_id, tj->job_id, sizeof(sj->job_id));
		sj->level = tj->level;
		sj->state = tj->state;
		for (size_t v = 0; v < view->njobs; v++) {
			const struct crux_jv_job *lj = &view->jobs[v];
			double nc = lj->ncompute ? lj->ncompute : 1;

			if (lj->key != tj->job_key)
				continue;
			sj->nranks = lj->nranks;
			sj->nhosts = lj->nhosts;
			for (uint32_t h = 0; h < lj->nhosts && h < CRUXD_STATUS_JOB_HOSTS; h++)
				sj->hosts[h] = lj->hosts[h];
			sj->iter_time_s = lj->iter_sum / nc;
			sj->compute_s = lj->compute_sum / nc;
			sj->comm_s = lj->comm_sum / nc;
			sj->overlap_s = lj->overlap_sum / nc;
			sj->stall_s = lj->stall_sum / nc;
			sj->work = lj->compute_sum;
			sj->clamped = lj->clamped;
			for (uint32_t f = 0; f < lj->nflows; f++)
				sj->bytes_per_iter += lj->flows[f].bytes;
			for (uint32_t r = 0;
			     r < a->pub.nroutes && sj->npaths < CRUXD_STATUS_JOB_PATHS; r++) {
				const struct crux_dt_route *rt = &a->pub.routes[r];
				struct cruxd_status_path *sp = &sj->paths[sj->npaths];
				if (rt->job_key != tj->job_key)
					continue;
				memset(sp, 0, sizeof(*sp));
				sp->src = lj->nhosts ? lj->hosts[0] : sp->src;
				sp->dst = rt->peer;
				sp->path_id = rt->path_id;
				sp->nports = rt->nports;
				sj->npaths++;
			}
		}
		put_sensitivity(sj, view, tj->job_key);
		if (pj) {
			sj->comm_time_s = pj->t;
			sj->intensity = pj->intensity;
			sj->k = pj->k;
			sj->priority = pj->priority;
			sj->iso_iter_s = pj->iso;
		}
	}
	return nj;
}

/* Single-host mode: every job the planner tracks, with its figures and decision. */
static uint32_t planner_jobs(const struct cruxd_agent *a, const struct cruxd_pass *p,
			     struct cruxd_status_body *b)
{
	uint32_t nj = 0;

	for (size_t k = p->plan.nover; k < p->plan.n && nj < CRUXD_STATUS_MAX_JOBS; k++) {
		const struct cruxd_decision *j = &p->plan.v[k];
		struct cruxd_status_job *sj = &b->jobs[nj++];

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
		put_sensitivity(sj, &p->view, j->key);
		sj->slowdown = cruxd_guard_slowdown(a->guard, j->key);
		if (!(sj->slowdown > 0) && j->iso > 0 && j->iter > 0)
			sj->slowdown = j->iter / j->iso;
		sj->lift = (uint8_t)cruxd_guard_lift(a->guard, j->key);
		if (a->cfg.guard.bound > 0) {
			sj->mean_slowdown = crux_sched_account_mean(&j->acct);
			sj->guard_state = (uint8_t)j->acct.state;
		}
		sj->state = j->state;
		sj->level = j->level;
		if (j->state == CRUX_JOB_PROFILING) {
			uint64_t el = p->now - j->since_ns;
			sj->profiling_left_ms = el < a->cfg.profile_window_ns
						    ? (a->cfg.profile_window_ns - el) / 1000000
						    : 0;
		}
		for (uint32_t f = 0; f < j->nflows && sj->npaths < CRUXD_STATUS_JOB_PATHS; f++) {
			struct cruxd_status_path *sp = &sj->paths[sj->npaths];
			struct crux_dt_route rt;
			const struct flow *fl = &j->flows[f];

			if (fl->path < 0)
				continue;
			sp->src = fl->src;
			sp->dst = fl->dst;
			sp->path_id = (uint16_t)fl->path;
			sp->bytes_per_iter = fl->bytes;
			memset(&rt, 0, sizeof(rt));
			if (cruxd_snap_ports(&p->probe, a->topo, a->cfg.probe_cfg.probe.hops,
					     fl->src_node, &fl->dst, fl->dst_node, fl->path, &rt))
				sp->nports = rt.nports;
			sj->npaths++;
		}
	}
	return nj;
}

/* The probed peers, as the snapshot realise used holds them. */
static uint32_t probed_peers(const struct cruxd_probe_snap *s, struct cruxd_status_body *b)
{
	uint64_t now = crux_now_ns();
	uint32_t n = s->n < CRUXD_STATUS_MAX_PEERS ? s->n : CRUXD_STATUS_MAX_PEERS;

	for (uint32_t i = 0; i < n; i++) {
		const struct cruxd_probe_entry *pe = &s->e[i];
		struct cruxd_status_peer *sp = &b->peers[i];

		memset(sp, 0, sizeof(*sp));
		sp->peer = pe->peer;
		sp->state = pe->state;
		sp->failures = pe->failures;
		sp->age_ms = pe->probed_ns ? (now - pe->probed_ns) / 1000000 : UINT64_MAX;
		sp->npaths = (uint8_t)pe->result.npaths;
		for (uint32_t q = 0; q < pe->result.npaths && q < CRUXD_STATUS_PEER_PATHS; q++) {
			sp->paths[q].hop = pe->result.paths[q].hop;
			sp->paths[q].nports = pe->result.paths[q].nports;
			memcpy(sp->paths[q].ports, pe->result.paths[q].ports,
			       sizeof(sp->paths[q].ports));
		}
	}
	return n;
}

void cruxd_report(struct cruxd_agent *a, const struct cruxd_pass *p, uint64_t pass_ns)
{
	struct cruxd_status_body *b = a->status;

	b->agent_pid = (uint32_t)getpid();
	b->nlevels = a->cfg.settings.nlevels;
	b->passes = a->passes;
	b->reschedules = p->plan.reschedules;
	b->last_pass_ns = pass_ns;
	b->interval_ns = a->cfg.interval_ns;
	b->profile_window_ns = a->cfg.profile_window_ns;
	b->table_generation = a->table_gen;
	b->records_valid = p->scan.valid;
	b->records_invalid = p->scan.invalid;
	b->records_busy = p->scan.busy;
	b->records_reaped = p->scan.reaped;
	b->nhosts_topology = a->topo ? (uint32_t)crux_sched_topo_n_hosts(a->topo) : 0;
	b->max_slowdown = a->cfg.guard.bound;
	b->guard_changes = cruxd_guard_changes(a->guard);
	b->guard_infeasible = p->plan.guard_infeasible;
	snprintf(b->topology, sizeof(b->topology), "%s", a->topo ? a->cfg.topology : "");
	b->njobs = a->cl ? cluster_jobs(a, p, b) : planner_jobs(a, p, b);
	b->npeers = probed_peers(&p->probe, b);
}
