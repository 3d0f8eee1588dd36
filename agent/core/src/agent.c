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
		bool cleared = a->ovr_present && a->ovr->n;
		if (cleared) {
			crux_info("overrides file removed: %u override(s) cleared", a->ovr->n);
			a->pl.resched_pending = true;
		}
		if (a->ovr_present)
			memset(a->ovr, 0, sizeof(*a->ovr));
		if (cleared)
			cruxd_cluster_overrides_changed(a);
		a->ovr_present = false;
		a->ovr_error[0] = '\0';
		return;
	}
	if (a->ovr_present && sb.st_ino == a->ovr_stat.st_ino &&
	    sb.st_size == a->ovr_stat.st_size && sb.st_mtim.tv_sec == a->ovr_stat.st_mtim.tv_sec &&
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
			crux_warn(
			    "override for job 0x%016llx: level %u >= CRUX_LEVELS=%u, using %u",
			    (unsigned long long)n->o[i].job_key, n->o[i].level,
			    a->cfg.settings.nlevels, a->cfg.settings.nlevels - 1);
	if (n->seq != a->ovr->seq || n->n != a->ovr->n ||
	    memcmp(n->o, a->ovr->o, n->n * sizeof(n->o[0])))
		crux_info("overrides applied (seq %llu): %u job(s)", (unsigned long long)n->seq,
			  n->n);
	memcpy(a->ovr, n, sizeof(*n));
	a->ovr_error[0] = '\0';
	a->pl.resched_pending = true;
	free(n);
	/* Cluster mode: the leader merges them into the schedule for every host. */
	cruxd_cluster_overrides_changed(a);
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
			if (cruxd_overridden(a, tj->job_key))
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
			if (cruxd_overrides_put(a->ovr, &o) == CRUX_OK)
				imported++;
			continue;
		}
		if (cruxd_jobs_find(&a->pl.jobs, tj->job_key))
			continue;
		j = cruxd_jobs_add(&a->pl.jobs, tj->job_key);
		if (!j)
			return CRUX_ERR_NOMEM;
		memcpy(j->id, tj->job_id, sizeof(j->id));
		j->id[sizeof(j->id) - 1] = '\0';
		j->since_ns = now;
		j->restored = true;
		j->state =
		    tj->state == CRUX_JOB_SCHEDULED ? CRUX_JOB_SCHEDULED : CRUX_JOB_PROFILING;
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
	char err[256], derr[512];
	crux_status_t st;

	if (!a)
		return CRUX_ERR_NOMEM;
	a->cfg = *cfg;
	a->pl.first_pass = true;
	a->ovr = calloc(1, sizeof(*a->ovr));
	a->povr = a->ovr;
	a->old = calloc(1, sizeof(*a->old));
	a->status = calloc(1, sizeof(*a->status));
	if (!a->ovr || cruxd_rows_open(&a->pub) != CRUX_OK ||
	    cruxd_rows_open(&a->pass.rows) != CRUX_OK ||
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
	cruxd_jobs_set_topo(&a->pl.jobs, a->topo);
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
	return cruxd_cluster_open(a, err, errlen);
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

	cruxd_want_probes(a, &p->view);
	cruxd_snap_take(&p->probe, a->probe);
	if (a->cl) {
		crux_status_t st = cruxd_cluster_decide(a, &p->view, &p->schedule);
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

	p->now = now_ns;
	check_overrides(a);
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
		cruxd_cluster_pass(a, p);
	} else {
		st = cruxd_plan_take_view(a, &p->view, now_ns);
		if (st != CRUX_OK)
			return st;
		(void)cruxd_plan(a, now_ns, &p->plan);
	}
	st = realise(a, p);
	cruxd_agent_heartbeat(a);
	a->passes++;
	cruxd_cluster_report(a, a->status);
	cruxd_report(a, p, crux_now_ns() - t0);
	cruxd_status_publish(a->sw, a->status);
	return st;
}

int cruxd_agent_wake_fd(const struct cruxd_agent *a)
{
	return cruxd_cluster_wake_fd(a);
}

/* The table takes the new schedule now; the view, plan and report stay the
 * last pass's (the next pass refreshes them). */
void cruxd_agent_apply_received(struct cruxd_agent *a, uint64_t now_ns)
{
	if (!cruxd_cluster_apply_received(a))
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
	for (size_t k = 0; k < a->pl.jobs.n; k++)
		a->pl.jobs.v[k]->adopted = false;
	a->pl.star_hosts_sig = 0;
	crux_sched_topo_free(a->pl.star);
	a->pl.star = NULL;
	cruxd_jobs_set_topo(&a->pl.jobs, a->topo); /* every host is looked up again */
	a->pl.resched_pending = true;
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
	cruxd_cluster_close(a);
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
	cruxd_jobs_free(&a->pl.jobs);
	free(a->pass.ranks);
	free(a->pass.next);
	crux_jv_free(&a->pass.view);
	cruxd_decisions_free(&a->pass.plan);
	cruxd_decisions_free(&a->pass.schedule);
	cruxd_snap_close(&a->pass.probe);
	cruxd_rows_close(&a->pass.rows);
	cruxd_rows_close(&a->pub);
	crux_sched_topo_free(a->topo);
	crux_sched_topo_free(a->pl.star);
	free(a->ovr);
	free(a->old);
	free(a->status);
	cruxd_guard_free(a->guard);
	free(a);
}
