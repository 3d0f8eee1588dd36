/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd: from profile records to the decision table. This file opens and
 * closes the agent and runs one pass as a pipeline of stages (agent_int.h):
 * observe -> host view -> (cluster) merged view -> plan -> realise -> report,
 * each stage's output a value of the pass (struct cruxd_pass) it owns.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_int.h"
#include "crux/log.h"

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
	uint32_t imported = 0, caproutes = 0;
	struct crux_dt_route *routes = NULL;

	for (uint32_t i = 0; i < c->njobs && i < CRUX_DT_MAX_JOBS; i++) {
		const struct crux_dt_job *tj = &c->jobs[i];
		struct cruxd_planner_kept k;

		if (tj->job_key == 0)
			continue;
		if (tj->state == CRUX_JOB_OVERRIDDEN) {
			struct cruxd_override o;
			if (cruxd_ovr_watch_has(a->ovr, tj->job_key))
				continue;
			memset(&o, 0, sizeof(o));
			o.job_key = tj->job_key;
			memcpy(o.job_id, tj->job_id, sizeof(o.job_id));
			o.job_id[sizeof(o.job_id) - 1] = '\0';
			o.level = tj->level;
			for (uint32_t r = 0; r < c->nroutes && o.nroutes < CRUXD_OVR_MAX_ROUTES;
			     r++) {
				if (c->routes[r].job_key != tj->job_key)
					continue;
				o.routes[o.nroutes].peer = c->routes[r].peer;
				o.routes[o.nroutes].path_id = c->routes[r].path_id;
				o.routes[o.nroutes].nports = c->routes[r].nports;
				memcpy(o.routes[o.nroutes].ports, c->routes[r].ports,
				       sizeof(o.routes[0].ports));
				o.nroutes++;
			}
			if (cruxd_ovr_watch_keep(a->ovr, &o) == CRUX_OK)
				imported++;
			continue;
		}
		k = (struct cruxd_planner_kept){.key = tj->job_key,
						.id = tj->job_id,
						.state = tj->state,
						.level = tj->level,
						.restored = true,
						.since_ns = now};
		/* Its routes, as the table holds them. */
		for (uint32_t r = 0; r < c->nroutes && tj->state == CRUX_JOB_SCHEDULED; r++) {
			if (c->routes[r].job_key != tj->job_key)
				continue;
			if (k.nroutes == caproutes) {
				struct crux_dt_route *nr;
				caproutes = caproutes ? 2 * caproutes : 16;
				nr = realloc(routes, caproutes * sizeof(*nr));
				if (!nr) {
					free(routes);
					return CRUX_ERR_NOMEM;
				}
				routes = nr;
			}
			routes[k.nroutes++] = c->routes[r];
		}
		k.routes = routes;
		if (cruxd_planner_keep(a->pl, &k) != CRUX_OK) {
			free(routes);
			return CRUX_ERR_NOMEM;
		}
	}
	free(routes);
	if (imported) {
		crux_info("kept %u override(s) found in the decision table", imported);
		cruxd_ovr_watch_store(a->ovr);
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
	if (st != CRUX_OK) {
		crux_err("cannot serve training processes: %s", err);
		return st;
	}
	/* Without the copies cruxctl lists no attached process; the agent works on. */
	if (crux_prof_copies_open(a->cfg.shm_dir, &a->copies, err, sizeof(err)) != CRUX_OK) {
		a->copies = NULL;
		crux_warn("cruxctl will not list attached processes: %s", err);
	}
	if (pol.nusers || pol.ngroups)
		crux_info("attach socket open to root and %u user(s), %u group(s)",
			  (unsigned)pol.nusers, (unsigned)pol.ngroups);
	return st;
}

crux_status_t cruxd_agent_open(const struct cruxd_config *cfg, struct cruxd_agent **out,
			       pid_t *holder)
{
	struct cruxd_agent *a = calloc(1, sizeof(*a));
	char derr[512];
	crux_status_t st;

	if (!a)
		return CRUX_ERR_NOMEM;
	a->cfg = *cfg;
	a->old = calloc(1, sizeof(*a->old));
	a->status = calloc(1, sizeof(*a->status));
	if (cruxd_rows_open(&a->pub) != CRUX_OK || cruxd_rows_open(&a->pass.rows) != CRUX_OK ||
	    cruxd_snap_open(&a->pass.probe, cfg->probe) != CRUX_OK || !a->old || !a->status ||
	    cruxd_guard_new(&cfg->guard, &a->guard) != CRUX_OK) {
		st = CRUX_ERR_NOMEM;
		goto fail;
	}
	st = crux_shm_dir_check(cfg->shm_dir, true);
	if (st != CRUX_OK)
		goto fail;
	st = load_topology(cfg, &a->topo);
	if (st != CRUX_OK)
		goto fail;
	st = cruxd_planner_new(&a->cfg, a->topo, a->guard, &a->pl);
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
	a->table_gen = a->old->generation;
	st = cruxd_ovr_watch_open(a->cfg.shm_dir, &a->ovr);
	if (st != CRUX_OK)
		goto fail;
	a->pass.ovr = cruxd_ovr_watch_get(a->ovr);
	st = adopt_table(a, crux_now_ns());
	if (st != CRUX_OK)
		goto fail;
	st = attach_open(a);
	if (st != CRUX_OK)
		goto fail;
	st = cruxd_status_writer_open(cfg->shm_dir, &a->sw);
	if (st != CRUX_OK)
		goto fail; /* the creation's own error names the file and why */
	if (cfg->probe) {
		st = cruxd_probe_cache_create(&cfg->probe_cfg, &a->probe);
		if (st != CRUX_OK)
			goto fail;
	}
	cruxd_load_local_addrs(a);
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

crux_status_t cruxd_agent_join(struct cruxd_agent *a, char *err, size_t errlen)
{
	if (!a->cfg.etcd[0] || a->cl)
		return CRUX_OK;
	return cruxd_cluster_open(&a->cfg, a->pl, cruxd_ovr_watch_get(a->ovr), &a->pass.plan,
				  &a->cl, err, errlen);
}

void cruxd_agent_heartbeat(struct cruxd_agent *a)
{
	crux_dt_heartbeat(a->dt);
	cruxd_status_heartbeat(a->sw);
}

/* Decisions -> the table: what to probe, one probe snapshot, rows, published. */
static crux_status_t realise(struct cruxd_agent *a, struct cruxd_pass *p)
{
	const struct cruxd_decisions *d = &p->plan;

	cruxd_want_probes(a, &p->view, &p->plan.hosts, p->ovr);
	cruxd_snap_take(&p->probe, a->probe);
	if (a->cl) {
		crux_status_t st = cruxd_cluster_decide(a->cl, &p->view, &p->schedule);
		if (st != CRUX_OK)
			return st;
		d = &p->schedule;
	}
	if (!d->valid)
		return CRUX_OK; /* no schedule yet: the table found at start-up stays */
	cruxd_realise(a, d, &p->probe, &p->rows);
	return cruxd_publish(a, &p->rows);
}

crux_status_t cruxd_agent_pass(struct cruxd_agent *a, uint64_t now_ns)
{
	struct cruxd_pass *p = &a->pass;
	uint64_t t0 = crux_now_ns(); /* the pass's duration, for status only */
	crux_status_t st;
	bool ovr_changed;

	p->now = now_ns;
	p->ovr = cruxd_ovr_watch_check(a->ovr, a->cfg.settings.nlevels, &ovr_changed);
	if (ovr_changed) {
		cruxd_planner_resched(a->pl);
		/* Cluster mode: the leader merges them into the schedule for every host. */
		cruxd_cluster_overrides_changed(a->cl, p->ovr);
	}
	st = cruxd_observe(a, p);
	if (st != CRUX_OK) {
		cruxd_agent_heartbeat(a); /* the old decisions stay valid */
		return st;
	}
	st = cruxd_view_build(p->ranks, p->nranks, &p->view);
	if (st != CRUX_OK)
		return st;
	if (a->cl) {
		/* etcd may be slow: the table's heartbeat must not wait for it. */
		cruxd_agent_heartbeat(a);
		cruxd_cluster_pass(a->cl, &p->view, now_ns);
	} else {
		st = cruxd_planner_take_view(a->pl, &p->view, now_ns);
		if (st != CRUX_OK)
			return st;
		(void)cruxd_planner_plan(a->pl, p->ovr, now_ns, &p->plan);
	}
	st = realise(a, p);
	cruxd_agent_heartbeat(a);
	a->passes++;
	cruxd_ovr_watch_report(a->ovr, a->status);
	cruxd_cluster_report(a->cl, a->status); /* cluster mode: the overrides etcd holds */
	cruxd_report(a, p, crux_now_ns() - t0);
	cruxd_status_publish(a->sw, a->status);
	return st;
}

int cruxd_agent_wake_fd(const struct cruxd_agent *a)
{
	return cruxd_cluster_wake_fd(a->cl);
}

/* The table takes the new schedule now; the view, plan and report stay the
 * last pass's (the next pass refreshes them). */
void cruxd_agent_apply_received(struct cruxd_agent *a, uint64_t now_ns)
{
	if (!cruxd_cluster_apply_received(a->cl))
		return;
	a->pass.now = now_ns;
	(void)realise(a, &a->pass);
	cruxd_agent_heartbeat(a);
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
		crux_err("new level settings refused (the reason is above): keeping the old ones");
		crux_sched_topo_free(t);
		return st;
	}
	a->table_gen++; /* new settings bump the table's generation */
	crux_sched_topo_free(a->topo);
	a->topo = t;
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
	cruxd_planner_configure(a->pl, a->topo);
	a->published = false;
	cruxd_load_local_addrs(a);
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
	cruxd_cluster_close(a->cl);
	if (a->probe)
		cruxd_probe_cache_destroy(a->probe);
	if (a->sw)
		cruxd_status_writer_close(a->sw, true);
	crux_broker_close(a->broker);
	crux_prof_copies_close(a->copies, true);
	if (a->dt) {
		/* A last heartbeat so readers keep the decisions for a full timeout. */
		crux_dt_heartbeat(a->dt);
		crux_dt_writer_close(a->dt);
	}
	cruxd_planner_free(a->pl);
	free(a->pass.ranks);
	free(a->pass.next);
	crux_jv_free(&a->pass.view);
	cruxd_decisions_free(&a->pass.plan);
	cruxd_decisions_free(&a->pass.schedule);
	cruxd_snap_close(&a->pass.probe);
	cruxd_rows_close(&a->pass.rows);
	cruxd_rows_close(&a->pub);
	crux_sched_topo_free(a->topo);
	cruxd_ovr_watch_close(a->ovr);
	free(a->old);
	free(a->status);
	cruxd_guard_free(a->guard);
	free(a);
}
