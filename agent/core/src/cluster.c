/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cluster mode (cruxd --etcd URL --cluster NAME): the stage between this
 * host's job view and the plan. Every pass publishes the host view through
 * the cluster node (crux/cluster_node.h); the leader's node merges every
 * host's view at one etcd revision and calls plan_cb, which runs the same
 * planner as single-host mode on the merged view and exports its decisions
 * as the schedule; every host applies the schedule it watches to its own
 * table (levels; routes whose source is one of this host's addresses).
 *
 * A new leader starts its planner from the schedule in force (as a restarted
 * agent starts from its table): scheduled jobs keep their level and routes
 * until a real event, so a failover does not reshuffle the cluster.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "crux/cluster_node.h"
#include "crux/cluster_view.h"
#include "crux/log.h"

struct cruxd_cluster {
	const struct cruxd_config *cfg; /* the agent's */
	struct cruxd_planner *pl;	/* the agent's: the leader plans with it */
	struct crux_cluster_node *node;
	struct crux_cv_schedule sched; /* the schedule applied */
	int64_t sched_rev;
	uint64_t applies; /* schedules taken by apply_cb */
	bool have_sched;
	int64_t plan_term;	       /* the term the planner's jobs belong to */
	struct cruxd_overrides *ovr;   /* the cluster's overrides (leader) */
	struct cruxd_overrides *local; /* this host's overrides as last handed to the node */
	char *ovr_text;		       /* the record they were parsed from */
	size_t ovr_len;
	uint64_t ovr_pushed, ovr_acked; /* local overrides seq handed to / written to etcd */
	uint64_t now;
	/* Where the leader's planner puts its decisions: the agent's pass. */
	struct cruxd_decisions *plan;
};

/* ---- schedules ----------------------------------------------------------- */

/* Unix time in ms: how a profiling window's start travels between leaders
 * (their monotonic clocks differ; their wall clocks are synchronised). */
static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static crux_status_t sched_copy(const struct crux_cv_schedule *s, struct crux_cv_schedule *out)
{
	struct crux_cv_schedule c = *s;

	c.jobs = s->njobs ? calloc(s->njobs, sizeof(*c.jobs)) : NULL;
	if (s->njobs && !c.jobs)
		return CRUX_ERR_NOMEM;
	c.njobs = 0;
	for (uint32_t i = 0; i < s->njobs; i++) {
		struct crux_cv_decision *d = &c.jobs[c.njobs++];
		*d = s->jobs[i];
		d->routes = NULL;
		if (!s->jobs[i].nroutes)
			continue;
		d->routes = malloc(s->jobs[i].nroutes * sizeof(*d->routes));
		if (!d->routes) {
			d->nroutes = 0;
			crux_cv_schedule_free(&c);
			return CRUX_ERR_NOMEM;
		}
		memcpy(d->routes, s->jobs[i].routes, s->jobs[i].nroutes * sizeof(*d->routes));
	}
	*out = c;
	return CRUX_OK;
}

static const struct crux_cv_decision *sched_find(const struct crux_cv_schedule *s, uint64_t key)
{
	for (uint32_t i = 0; i < s->njobs; i++)
		if (s->jobs[i].key == key)
			return &s->jobs[i];
	return NULL;
}

static int decision_cmp(const void *x, const void *y)
{
	const struct crux_cv_decision *a = x, *b = y;
	return (a->key > b->key) - (a->key < b->key);
}

/* ---- the leader's plan ---------------------------------------------------- */

/* A new term: the planner starts from the schedule in force. */
static crux_status_t planner_from_schedule(struct cruxd_cluster *cl, uint64_t now)
{
	uint64_t wall = wall_ms();

	cruxd_planner_restart(cl->pl);
	for (uint32_t i = 0; cl->have_sched && i < cl->sched.njobs; i++) {
		const struct crux_cv_decision *d = &cl->sched.jobs[i];
		struct cruxd_planner_kept k = {.key = d->key,
					       .id = d->id,
					       .state = d->state,
					       .level = d->level,
					       .since_ns = now,
					       .has_base = d->has_base,
					       .base_work = d->base[0],
					       .base_bytes = d->base[1],
					       .base_iter = d->base[2]};

		if (d->state == CRUX_JOB_OVERRIDDEN)
			continue;
		if (d->since_ms && d->since_ms <= wall) {
			/* The profiling window goes on from where it began. */
			uint64_t el = (wall - d->since_ms) * 1000000u;
			k.since_ns = el < now ? now - el : 0;
			k.since_wall_ms = d->since_ms;
		}
		if (cruxd_planner_keep(cl->pl, &k) != CRUX_OK)
			return CRUX_ERR_NOMEM;
	}
	if (cl->have_sched)
		crux_info("cluster %s: leading from schedule revision %lld (%u job(s))",
			  cl->cfg->cluster, (long long)cl->sched_rev, cl->sched.njobs);
	return CRUX_OK;
}

/* The cluster's overrides: one line per job, each parsed on its own, so a
 * bad key (written by hand) is left out without dropping the others. */
static void take_overrides(struct cruxd_cluster *cl, const char *text, size_t len)
{
	struct cruxd_overrides *n, *one;
	const char *p = text, *end = text + len;
	unsigned bad = 0;
	char err[256], *t;

	if (len == cl->ovr_len && (!len || (cl->ovr_text && !memcmp(text, cl->ovr_text, len))))
		return;
	n = calloc(1, sizeof(*n));
	one = calloc(1, sizeof(*one));
	t = malloc(len + 1);
	if (!n || !t || !one) {
		free(n);
		free(one);
		free(t);
		return;
	}
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t ll = (size_t)((eol ? eol : end) - p);

		if (cruxd_overrides_parse(p, ll, one, err, sizeof(err)) != CRUX_OK || one->n != 1 ||
		    cruxd_overrides_find(n, one->o[0].job_key) >= 0 ||
		    cruxd_overrides_put(n, &one->o[0]) != CRUX_OK) {
			if (crux_log_once_key(0x0e7e5ull ^ crux_job_key_of(p)))
				crux_err(
				    "cluster %s: an override in etcd is refused and left out "
				    "(%.*s): %s; fix: run 'cruxctl set' or 'cruxctl clear' for "
				    "that job on any host",
				    cl->cfg->cluster, (int)(ll > 120 ? 120 : ll), p,
				    one->n != 1 ? "not one job line" : err);
			bad++;
		}
		p = eol ? eol + 1 : end;
	}
	if (len)
		memcpy(t, text, len);
	t[len] = '\0';
	free(cl->ovr_text);
	cl->ovr_text = t;
	cl->ovr_len = len;
	memcpy(cl->ovr, n, sizeof(*n));
	free(n);
	free(one);
	crux_info("cluster %s: overrides: %u job(s)%s", cl->cfg->cluster, cl->ovr->n,
		  bad ? " (some refused)" : "");
	cruxd_planner_resched(cl->pl);
}

/* The planner's decisions (the cluster's overrides first) as a schedule. */
static crux_status_t export_schedule(struct cruxd_cluster *cl, const struct cruxd_decisions *dec,
				     struct crux_cv_schedule *out)
{
	uint32_t n = 0;
	struct crux_cv_schedule s = {0};

	s.levels = cl->cfg->settings.nlevels;
	s.jobs = calloc(dec->n + 1, sizeof(*s.jobs));
	if (!s.jobs)
		return CRUX_ERR_NOMEM;
	for (size_t i = 0; i < dec->n && n < CRUX_CV_MAX_JOBS; i++) {
		const struct cruxd_decision *x = &dec->v[i];
		struct crux_cv_decision *d;
		const struct crux_cv_decision *old;

		if (x->overridden)
			continue;
		d = &s.jobs[n++];
		s.njobs = n;
		d->key = x->key;
		memcpy(d->id, x->id, sizeof(d->id));
		d->state = x->state;
		d->level = x->level;
		if (x->from == CRUXD_ROUTES_OVERRIDE) {
			d->routes = x->nroutes ? calloc(x->nroutes, sizeof(*d->routes)) : NULL;
			if (x->nroutes && !d->routes)
				goto nomem;
			for (uint32_t r = 0; r < x->nroutes; r++) {
				struct crux_cv_route *rt = &d->routes[d->nroutes++];
				rt->dst =
				    x->routes[r].rt.peer; /* src "any": every host applies it */
				rt->path_id = x->routes[r].rt.path_id;
				rt->nports = x->routes[r].rt.nports;
				memcpy(rt->ports, x->routes[r].rt.ports, sizeof(rt->ports));
			}
			continue;
		}
		d->since_ms = x->since_wall_ms;
		if (x->state == CRUX_JOB_PROFILING)
			continue;
		d->since_ms = 0; /* scheduled: the window no longer matters */
		d->has_base = x->has_base;
		d->base[0] = x->base_work;
		d->base[1] = x->base_bytes;
		d->base[2] = x->base_iter;
		old = x->adopted && cl->have_sched ? sched_find(&cl->sched, x->key) : NULL;
		if (x->adopted) {
			/* Taken over from the schedule in force: its routes stay. */
			if (old && old->nroutes) {
				d->routes = malloc(old->nroutes * sizeof(*d->routes));
				if (!d->routes)
					goto nomem;
				memcpy(d->routes, old->routes, old->nroutes * sizeof(*d->routes));
				d->nroutes = old->nroutes;
			}
			continue;
		}
		d->routes = x->nflows ? calloc(x->nflows, sizeof(*d->routes)) : NULL;
		if (x->nflows && !d->routes)
			goto nomem;
		for (uint32_t f = 0; f < x->nflows; f++) {
			const struct flow *fl = &x->flows[f];
			struct crux_cv_route *rt;

			if (fl->path < 0)
				continue;
			rt = &d->routes[d->nroutes++];
			rt->src = fl->src;
			rt->dst = fl->dst;
			rt->path_id = (uint16_t)fl->path;
		}
	}
	if (s.njobs > 1)
		qsort(s.jobs, s.njobs, sizeof(*s.jobs), decision_cmp);
	*out = s;
	return CRUX_OK;
nomem:
	crux_cv_schedule_free(&s);
	return CRUX_ERR_NOMEM;
}

static crux_status_t plan_cb(void *arg, const struct crux_job_view *merged, const char *ovr,
			     size_t ovr_len, struct crux_cv_schedule *out)
{
	struct cruxd_cluster *cl = arg;
	struct crux_cluster_status cs;
	crux_status_t st;

	crux_cluster_get_status(cl->node, &cs);
	if (cs.term != cl->plan_term) {
		st = planner_from_schedule(cl, cl->now);
		if (st != CRUX_OK)
			return st;
		cl->plan_term = cs.term;
	}
	take_overrides(cl, ovr ? ovr : "", ovr ? ovr_len : 0);
	st = cruxd_planner_take_view(cl->pl, merged, cl->now);
	if (st == CRUX_OK) {
		cruxd_planner_stamp_wall(cl->pl, cl->now, wall_ms());
		st = cruxd_planner_plan(cl->pl, cl->ovr, cl->now, cl->plan);
	}
	if (st == CRUX_OK)
		st = export_schedule(cl, cl->plan, out);
	return st;
}

/* ---- every host: apply ----------------------------------------------------- */

static void apply_cb(void *arg, const struct crux_cv_schedule *s, int64_t revision)
{
	struct cruxd_cluster *cl = arg;
	struct crux_cv_schedule c;

	if (sched_copy(s, &c) != CRUX_OK) {
		crux_err("cluster %s: out of memory applying schedule revision %lld: keeping the "
			 "last one",
			 cl->cfg->cluster, (long long)revision);
		return;
	}
	crux_cv_schedule_free(&cl->sched);
	cl->sched = c;
	cl->sched_rev = revision;
	cl->applies++;
	cl->have_sched = true;
	crux_info("cluster %s: applying schedule revision %lld (from revision %lld, term %lld): "
		  "%u job(s)",
		  cl->cfg->cluster, (long long)revision, (long long)s->input_revision,
		  (long long)s->term, s->njobs);
}

/* A source address of this host: one its ranks run on. */
static bool own_source(const struct crux_job_view *v, const struct crux_addr *src)
{
	if (!src->family)
		return true; /* an override: every host */
	for (size_t i = 0; i < v->njobs; i++)
		for (uint32_t h = 0; h < v->jobs[i].nhosts; h++)
			if (crux_addr_equal(&v->jobs[i].hosts[h], src))
				return true;
	return false;
}

static const struct crux_jv_job *local_job(const struct crux_job_view *v, uint64_t key)
{
	for (size_t i = 0; i < v->njobs; i++)
		if (v->jobs[i].key == key)
			return &v->jobs[i];
	return NULL;
}

/* One decision of the schedule, as this host applies it: the routes from its own sources. */
static crux_status_t decide_one(struct cruxd_cluster *cl, const struct crux_job_view *v,
				const struct crux_cv_decision *d, struct cruxd_decision *x)
{
	const struct crux_jv_job *lj = local_job(v, d->key);
	uint32_t top = cl->cfg->settings.nlevels - 1;
	x->key = d->key;
	snprintf(x->id, sizeof(x->id), "%s", d->id[0] ? d->id : lj ? lj->id : "");
	x->level = (uint8_t)(d->level > top ? top : d->level);
	x->state = d->state;
	x->from = CRUXD_ROUTES_SCHEDULE;
	if (cruxd_decision_routes(x, d->nroutes) != CRUX_OK)
		return CRUX_ERR_NOMEM;
	for (uint32_t r = 0; r < d->nroutes; r++) {
		const struct crux_cv_route *cr = &d->routes[r];
		struct cruxd_route *rt;

		if (!own_source(v, &cr->src))
			continue;
		rt = &x->routes[x->nroutes++];
		memset(rt, 0, sizeof(*rt));
		rt->rt.job_key = d->key;
		rt->rt.peer = cr->dst;
		rt->rt.path_id = cr->path_id;
		if (cr->nports) {
			rt->rt.nports = cr->nports;
			memcpy(rt->rt.ports, cr->ports, sizeof(rt->rt.ports));
		}
		rt->src_node = cruxd_planner_node_of(cl->pl, &cr->src);
		rt->dst_node = cruxd_planner_node_of(cl->pl, &cr->dst);
	}
	return CRUX_OK;
}

crux_status_t cruxd_cluster_decide(struct cruxd_cluster *cl, const struct crux_job_view *v,
				   struct cruxd_decisions *out)
{
	crux_status_t st = CRUX_OK;

	out->n = out->nover = 0;
	out->warn_full = false;
	out->valid = cl->have_sched;
	for (uint32_t i = 0; out->valid && i < cl->sched.njobs && st == CRUX_OK; i++) {
		struct cruxd_decision *x = cruxd_decision_new(out);
		st = x ? decide_one(cl, v, &cl->sched.jobs[i], x) : CRUX_ERR_NOMEM;
	}
	return st;
}

/* ---- the pass ------------------------------------------------------------- */

void cruxd_cluster_pass(struct cruxd_cluster *cl, struct crux_job_view *v, uint64_t now)
{
	struct crux_cluster_status cs;
	crux_status_t st;

	cl->now = now;
	/* The record names this host and an address of its ranks (the first job's last). */
	snprintf(v->name, sizeof(v->name), "%s", cl->cfg->host);
	memset(&v->addr, 0, sizeof(v->addr));
	for (size_t i = 0; i < v->njobs && !v->addr.family; i++)
		if (v->jobs[i].nhosts)
			v->addr = v->jobs[i].hosts[v->jobs[i].nhosts - 1];
	st = crux_cluster_set_view(cl->node, v);
	if (st != CRUX_OK && crux_log_once_key(0xc1057e3ull ^ (uint64_t)st))
		crux_err("cluster %s: this host's view cannot be published: %s", cl->cfg->cluster,
			 crux_status_str(st));
	/* Besides new inputs, the leader plans when time alone decides something
	 * (a profiling window or a hold time ends, the guard ages a job), and on
	 * the first step of a term. */
	crux_cluster_get_status(cl->node, &cs);
	if (cs.leader && (cs.term != cl->plan_term || cruxd_planner_due(cl->pl)))
		crux_cluster_replan(cl->node);
	(void)crux_cluster_step(cl->node);
}

bool cruxd_cluster_apply_received(struct cruxd_cluster *cl)
{
	uint64_t before;

	if (!cl)
		return false;
	before = cl->applies;
	/* The leader's input watch saw a host or an override change (its
	 * round: read, plan, write), or the leader key went (campaign): now,
	 * not at the next pass. */
	if (crux_cluster_step_due(cl->node)) {
		cl->now = crux_now_ns(); /* the plan's clock */
		(void)crux_cluster_step(cl->node);
	}
	crux_cluster_apply_received(cl->node);
	return cl->applies != before;
}

int cruxd_cluster_wake_fd(const struct cruxd_cluster *cl)
{
	return cl ? crux_cluster_wake_fd(cl->node) : -1;
}

/* This host's overrides file changed: hand every job whose override changed
 * to the node (its before and after), which writes one key per job. */
void cruxd_cluster_overrides_changed(struct cruxd_cluster *cl, const struct cruxd_overrides *local)
{
	char before[2048], after[2048];
	unsigned changed = 0;

	if (!cl)
		return;
	for (int pass = 0; pass < 2; pass++) {
		const struct cruxd_overrides *x = pass ? local : cl->local;
		for (uint32_t i = 0; i < x->n; i++) {
			uint64_t key = x->o[i].job_key;
			int bi = cruxd_overrides_find(cl->local, key),
			    ai = cruxd_overrides_find(local, key);
			size_t bl = 0, al = 0;
			crux_status_t st = CRUX_OK;

			if (pass && bi >= 0)
				continue; /* seen in the first pass */
			if (bi >= 0)
				st = cruxd_override_format_line(&cl->local->o[bi], before,
								sizeof(before), &bl);
			if (ai >= 0 && st == CRUX_OK)
				st = cruxd_override_format_line(&local->o[ai], after, sizeof(after),
								&al);
			if (st == CRUX_OK && bi >= 0 && ai >= 0 && bl == al &&
			    !memcmp(before, after, bl))
				continue;
			if (st == CRUX_OK)
				st = crux_cluster_override(cl->node, key, bi >= 0 ? before : NULL,
							   bl, ai >= 0 ? after : NULL, al);
			if (st != CRUX_OK)
				crux_err("cluster %s: the override of job 0x%016llx cannot go to "
					 "etcd: %s",
					 cl->cfg->cluster, (unsigned long long)key,
					 crux_status_str(st));
			else
				changed++;
		}
	}
	memcpy(cl->local, local, sizeof(*local));
	cl->ovr_pushed = local->seq;
	if (changed)
		crux_info(
		    "cluster %s: %u override change(s) (seq %llu) go to every host through etcd",
		    cl->cfg->cluster, changed, (unsigned long long)local->seq);
}

void cruxd_cluster_report(struct cruxd_cluster *cl, struct cruxd_status_body *b)
{
	struct crux_cluster_status cs;

	if (!cl)
		return;
	crux_cluster_get_status(cl->node, &cs);
	snprintf(b->cluster, sizeof(b->cluster), "%s", cl->cfg->cluster);
	snprintf(b->host, sizeof(b->host), "%s", cl->cfg->host);
	snprintf(b->leader, sizeof(b->leader), "%s", cs.leader_name);
	b->term = cs.term;
	b->schedule_revision = cs.applied_revision;
	b->schedule_input = cs.applied_input;
	b->schedules_written = cs.schedules_written;
	b->cluster_stale = cs.stale;
	snprintf(b->cluster_error, sizeof(b->cluster_error), "%s", cs.error);
	b->cluster_resyncs = (uint32_t)cs.resyncs;
	snprintf(b->cluster_resync, sizeof(b->cluster_resync), "%s", cs.resync_why);
	/* cruxctl set waits for this: in cluster mode, until etcd holds the overrides. */
	if (!cs.overrides_pending)
		cl->ovr_acked = cl->ovr_pushed;
	b->overrides_seq = cl->ovr_acked;
}

/* ---- open / close ----------------------------------------------------------- */

crux_status_t cruxd_cluster_open(const struct cruxd_config *cfg, struct cruxd_planner *pl,
				 const struct cruxd_overrides *local, struct cruxd_decisions *plan,
				 struct cruxd_cluster **out, char *err, size_t errlen)
{
	struct cruxd_cluster *cl = calloc(1, sizeof(*cl));
	struct crux_cluster_cfg cc;
	crux_status_t st;

	if (!cl || !(cl->ovr = calloc(1, sizeof(*cl->ovr))) ||
	    !(cl->local = calloc(1, sizeof(*cl->local)))) {
		if (cl)
			free(cl->ovr);
		free(cl);
		snprintf(err, errlen, "out of memory");
		return CRUX_ERR_NOMEM;
	}
	cl->cfg = cfg;
	cl->pl = pl;
	memset(&cc, 0, sizeof(cc));
	cc.etcd.endpoints = cl->cfg->etcd;
	cc.etcd.ca_file = cl->cfg->etcd_ca[0] ? cl->cfg->etcd_ca : NULL;
	cc.etcd.cert_file = cl->cfg->etcd_cert[0] ? cl->cfg->etcd_cert : NULL;
	cc.etcd.key_file = cl->cfg->etcd_key[0] ? cl->cfg->etcd_key : NULL;
	/* A pass must not wait long on etcd: the table's heartbeat depends on it. */
	cc.etcd.timeout_ms = 1000;
	cc.cluster = cl->cfg->cluster;
	cc.host = cl->cfg->host;
	cc.ttl_s = (int64_t)(cl->cfg->cluster_ttl_ns / 1000000000ull);
	cc.plan = plan_cb;
	cc.apply = apply_cb;
	cc.arg = cl;
	cl->plan = plan; /* a step between passes plans too (apply_received) */
	st = crux_cluster_open(&cc, &cl->node, err, errlen);
	if (st != CRUX_OK) {
		free(cl->ovr);
		free(cl->local);
		free(cl);
		return st;
	}
	/* What the file holds at start is taken as written already: a restarted
	 * agent does not push old overrides over what others changed meanwhile. */
	memcpy(cl->local, local, sizeof(*local));
	cl->ovr_pushed = cl->ovr_acked = local->seq;
	*out = cl;
	return CRUX_OK;
}

void cruxd_cluster_close(struct cruxd_cluster *cl)
{

	if (!cl)
		return;
	crux_cluster_close(cl->node);
	crux_cv_schedule_free(&cl->sched);
	free(cl->ovr_text);
	free(cl->ovr);
	free(cl->local);
	free(cl);
}
