/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fairness guard of the planner: the knobs (CRUX_MAX_SLOWDOWN,
 * CRUX_LEVEL_WEIGHTS), the guaranteed shares they give each level, and the
 * bound on predicted slowdown that repairs a compression which would starve a
 * job.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crux/env.h"
#include "sched_int.h"

/* A round lifts every violator once; this many rounds of K levels suffice
 * for every job to reach the top, so the loop always ends. */
#define GUARD_ROUNDS_PER_LEVEL 2
#define GUARD_EPS	       1e-9
/* A top-level peer at most this fraction of the bound may go one level down. */
#define PUSH_SLACK 0.9
/* The level search: jobs it may move (worst first, each once), and the
 * weight of the summed excess over the bound next to the worst slowdown. */
#define SEARCH_JOBS   8
#define SEARCH_EXCESS 0.2
/* An urgent job is first held to this x the bound by the usual steps (its
 * mean falls while it runs below it); where they cannot, it gets the top
 * level alone. */
#define GUARD_URGENT_TARGET 0.8
/* Measured this much slower than predicted: the model does not see why. */
#define GUARD_MODEL_GAP 1.5
/* The bottom-up filling: its evaluations at most (each a full one), and the
 * network jobs above which it is not tried (its cost grows with both). */
#define FILL_EVALS   96
#define FILL_JOBS    256
#define FILL_GIVE_UP 3 /* jobs it may give up on top of the estimate's */
/* Bounds tried for the given-up jobs when giving them up freely would make
 * the worst job worse than no guard: geometric steps up to that worst. */
#define HOLD_STEPS 2
/* Rounds of the hold step: a job its best plan still leaves above its bound
 * is given up with the others for the next round (reported, held at the
 * same steps), so that a plan need not spend the rest's bounds on it. */
#define HOLD_ROUNDS 3

crux_status_t crux_sched_slowdown_parse(const char *text, double *out, struct crux_sched_err *err)
{
	double v;

	if (!text || !*text || !strcmp(text, "off") || !strcmp(text, "0")) {
		*out = 0;
		return CRUX_OK;
	}
	if (crux_parse_double("max slowdown", text, 1, CRUX_SCHED_MAX_SLOWDOWN_LIMIT, &v, NULL,
			      0) != CRUX_OK) {
		crux_sched_errf(
		    err,
		    "max slowdown '%s': expected a number in [1, %g] (e.g. 2.0 = no job "
		    "below half its isolated speed), or 0/off to disable the guard",
		    text, CRUX_SCHED_MAX_SLOWDOWN_LIMIT);
		return CRUX_ERR_INVAL;
	}
	*out = v;
	return CRUX_OK;
}

crux_status_t crux_sched_weights_parse(const char *text, struct crux_sched_params *p,
				       struct crux_sched_err *err)
{
	double w[CRUX_SCHED_MAX_LEVELS];
	int n = 0;
	const char *c = text;

	if (!text || !*text) {
		p->n_weights = 0;
		return CRUX_OK;
	}
	for (;;) {
		const char *end = strchr(c, ',');
		size_t len = end ? (size_t)(end - c) : strlen(c);
		char one[64];

		if (n == CRUX_SCHED_MAX_LEVELS) {
			crux_sched_errf(err, "level weights '%s': more than %d weights", text,
					CRUX_SCHED_MAX_LEVELS);
			return CRUX_ERR_INVAL;
		}
		if (len < sizeof(one)) {
			memcpy(one, c, len);
			one[len] = '\0';
		}
		if (len >= sizeof(one) ||
		    crux_parse_double("level weight", one, 0, 1e9, &w[n], NULL, 0) != CRUX_OK ||
		    !(w[n] > 0)) {
			crux_sched_errf(
			    err,
			    "level weights '%s': weight %d is not a number in (0, 1e9]; give "
			    "one weight per level, lowest level first, e.g. 1,1,2,2,4,4,8,8",
			    text, n + 1);
			return CRUX_ERR_INVAL;
		}
		n++;
		if (!end)
			break;
		c = end + 1;
	}
	memcpy(p->weight, w, (size_t)n * sizeof(double));
	p->n_weights = n;
	return CRUX_OK;
}

crux_status_t crux_sched_params_env(struct crux_sched_params *p, struct crux_sched_err *err)
{
	/* Empty means unset, as for every CRUX_ variable. */
	const char *ms = crux_env_get(NULL, NULL, "CRUX_MAX_SLOWDOWN");
	const char *lw = crux_env_get(NULL, NULL, "CRUX_LEVEL_WEIGHTS");
	crux_status_t st;
	double v;

	if (ms) {
		st = crux_sched_slowdown_parse(ms, &v, err);
		if (st) {
			crux_sched_errf(err,
					"CRUX_MAX_SLOWDOWN='%s': expected a number in [1, %g] or "
					"0/off (unset: no bound)",
					ms, CRUX_SCHED_MAX_SLOWDOWN_LIMIT);
			return st;
		}
		p->max_slowdown = v;
	}
	if (lw) {
		struct crux_sched_params tmp = *p;

		st = crux_sched_weights_parse(lw, &tmp, err);
		if (st) {
			crux_sched_errf(
			    err,
			    "CRUX_LEVEL_WEIGHTS='%s': expected one positive weight per level, "
			    "lowest first, comma-separated (e.g. 1,1,2,2,4,4,8,8)",
			    lw);
			return st;
		}
		*p = tmp;
	}
	return CRUX_OK;
}

crux_status_t crux_sched_shares(const struct crux_sched_params *p, struct crux_sched_schedule *s)
{
	double sum = 0;

	memset(s->share, 0, sizeof(s->share));
	s->guard_lifts = 0;
	s->guard_violators = 0;
	if (p->n_weights == 0)
		return CRUX_OK;
	if (p->n_weights != p->levels)
		return CRUX_ERR_INVAL;
	for (int l = 0; l < p->n_weights; l++) {
		if (!isfinite(p->weight[l]) || !(p->weight[l] > 0))
			return CRUX_ERR_INVAL;
		sum += p->weight[l];
	}
	for (int l = 0; l < p->n_weights; l++)
		s->share[l] = p->weight[l] / sum;
	return CRUX_OK;
}

/* Scratch of one guard call: jobs on each link (CSR) and the evaluation. */
struct guard_ws {
	struct job_links jl;
	size_t *loff;
	int *ljob;
	double *iso, *T;
	double *bnd; /* each job's bound: its own slowdown_bound, else the params' */
	const struct crux_sched_job *jobs;
	int cap; /* highest level of a job not urgent (the top is the urgent jobs') */
	int *lift, *lift_to;
	unsigned char *moved; /* 1 lifted, 2 pushed down by the guard */
	struct crux_sched_eval *ev;
};

static void guard_ws_free(struct guard_ws *w)
{
	crux_sched_job_links_free(&w->jl);
	free(w->loff);
	free(w->ljob);
	free(w->iso);
	free(w->T);
	free(w->bnd);
	free(w->lift);
	free(w->lift_to);
	free(w->moved);
	crux_sched_eval_free(w->ev);
}

static crux_status_t guard_ws_init(struct guard_ws *w, struct crux_sched_topo *t,
				   const struct crux_sched_job *jobs, size_t n, double bound,
				   const struct crux_sched_schedule *s)
{
	size_t L = (size_t)t->n_links, inc;
	crux_status_t st;

	memset(w, 0, sizeof(*w));
	w->jobs = jobs;
	w->cap = s->levels - 1;
	for (size_t i = 0; i < n && s->levels > 1; i++)
		if (jobs[i].urgent)
			w->cap = s->levels - 2;
	/* Valid once here: every evaluation below reuses these links (only
	 * levels change while this scratch lives). */
	st = crux_sched_jobs_validate(t, jobs, n);
	if (!st)
		st = crux_sched_job_links_build(t, jobs, n, s, &w->jl);
	if (st)
		return st;
	inc = w->jl.off[n];
	w->loff = calloc(L + 2, sizeof(size_t));
	w->ljob = malloc((inc ? inc : 1) * sizeof(int));
	w->iso = malloc((n ? n : 1) * sizeof(double));
	w->T = malloc((n ? n : 1) * sizeof(double));
	w->bnd = malloc((n ? n : 1) * sizeof(double));
	w->lift = malloc((n ? n : 1) * sizeof(int));
	w->lift_to = malloc((n ? n : 1) * sizeof(int));
	w->moved = calloc(n ? n : 1, 1);
	if (!w->loff || !w->ljob || !w->iso || !w->T || !w->bnd || !w->lift || !w->lift_to ||
	    !w->moved)
		return CRUX_ERR_NOMEM;
	st = crux_sched_eval_new(&w->ev);
	if (st)
		return st;
	for (size_t k = 0; k < inc; k++)
		w->loff[w->jl.link[k] + 2]++;
	for (size_t l = 0; l < L; l++)
		w->loff[l + 2] += w->loff[l + 1];
	for (size_t i = 0; i < n; i++)
		for (size_t k = w->jl.off[i]; k < w->jl.off[i + 1]; k++)
			w->ljob[w->loff[w->jl.link[k] + 1]++] = (int)i;
	crux_sched_guard_bounds(t, jobs, n, &w->jl, bound, w->bnd, w->iso);
	return CRUX_OK;
}

void crux_sched_guard_bounds(const struct crux_sched_topo *t, const struct crux_sched_job *jobs,
			     size_t n, const struct job_links *jl, double bound, double *bnd,
			     double *iso)
{
	for (size_t i = 0; i < n; i++) {
		double tau = 0, b = jobs[i].slowdown_bound;

		bnd[i] = isfinite(b) && b >= 1 ? b : bound;

		if (jobs[i].iso_time > 0 && isfinite(jobs[i].iso_time)) {
			iso[i] = jobs[i].iso_time;
			continue;
		}
		for (size_t k = jl->off[i]; k < jl->off[i + 1]; k++)
			tau = fmax(tau, jl->bytes[k] / t->lbw[jl->link[k]]);
		iso[i] = crux_sched_isolated_iter(&jobs[i], tau);
	}
}

static int over_bound(const struct guard_ws *w, size_t i)
{
	return w->T[i] > w->bnd[i] * w->iso[i] * (1 + GUARD_EPS);
}

/* Predicted slowdown over the job's own bound (1 = at it). */
static double bound_ratio(const struct guard_ws *w, size_t i)
{
	return w->T[i] / (w->iso[i] * w->bnd[i]);
}

/*
 * Where the bound sends violator i: with peers on its level (jobs sharing a
 * link with it), one level up: above those peers, sharing with any blocker
 * on that level and still below those higher up; without, the lowest level
 * above its own among the jobs sharing a link with it (share with the
 * nearest blocker). Its peers rank below every blocker, so their bandwidth
 * costs the least work; the next round goes on up if that was not enough.
 * -1: nothing above to join, or it is on the top level already.
 */
static int lift_target(const struct guard_ws *w, const struct crux_sched_schedule *s, size_t i)
{
	int mine = s->d[i].level, best = -1, peers = 0;

	for (size_t k = w->jl.off[i]; k < w->jl.off[i + 1]; k++) {
		int l = w->jl.link[k];

		for (size_t q = w->loff[l]; q < w->loff[l + 1]; q++) {
			int lv = s->d[w->ljob[q]].level;

			if (lv > mine && (best < 0 || lv < best))
				best = lv;
			peers += lv == mine && (size_t)w->ljob[q] != i;
		}
	}
	if (peers && mine + 1 < s->levels)
		best = mine + 1;
	if (w->jobs[i].urgent)
		return -1; /* on the top level already */
	if (best > w->cap)
		best = w->cap > mine ? w->cap : -1;
	return best;
}

/*
 * A violator on the top level: its peers there with ample slack (predicted
 * slowdown at most PUSH_SLACK x the bound), never lifted or pushed before, go one
 * level down. Returns how many were queued in w->lift / lift_to from *nl.
 */
static void push_peers(struct guard_ws *w, const struct crux_sched_schedule *s, size_t i,
		       size_t *nl)
{
	int mine = s->d[i].level;

	if (mine == 0)
		return;
	for (size_t k = w->jl.off[i]; k < w->jl.off[i + 1]; k++) {
		int l = w->jl.link[k];

		for (size_t q = w->loff[l]; q < w->loff[l + 1]; q++) {
			int u = w->ljob[q];

			if ((size_t)u == i || s->d[u].level != mine || w->moved[u] ||
			    w->jobs[u].urgent || w->T[u] > PUSH_SLACK * w->bnd[u] * w->iso[u])
				continue;
			w->moved[u] = 2;
			w->lift[*nl] = u;
			w->lift_to[(*nl)++] = mine - 1;
		}
	}
}

/* What one attempt left: jobs above their bound, the worst predicted
 * slowdown over the job's bound, utilisation; and the same count and worst
 * before its moves. */
struct guard_res {
	int left, left0;
	double worst, worst0, util;
};

static double guard_worst(const struct guard_ws *w, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = fmax(m, bound_ratio(w, i));
	return m;
}

/* Lift and push rounds on the current paths; *left gets the violators after. */
static crux_status_t guard_levels(struct guard_ws *w, struct crux_sched_topo *t,
				  const struct crux_sched_job *jobs, size_t n,
				  struct crux_sched_schedule *s, int *lifts, int *left,
				  double *util, struct guard_res *r)
{
	for (int round = 0;; round++) {
		size_t nl = 0;
		crux_status_t st =
		    crux_sched_evaluate_links(w->ev, t, jobs, n, s, &w->jl, 1, w->T, util);

		if (st)
			return st;
		*left = 0;
		for (size_t i = 0; i < n; i++)
			*left += over_bound(w, i);
		if (round == 0) {
			r->left0 = *left;
			r->worst0 = guard_worst(w, n);
		}
		if (*left == 0 || round == GUARD_ROUNDS_PER_LEVEL * s->levels)
			return CRUX_OK;
		/* Decide every move on this evaluation, then apply them together. */
		for (size_t i = 0; i < n; i++) {
			if (!over_bound(w, i))
				continue;
			int lv = lift_target(w, s, i);

			if (lv < 0) {
				push_peers(w, s, i, &nl);
				continue;
			}
			w->moved[i] = 1;
			w->lift[nl] = (int)i;
			w->lift_to[nl++] = lv;
		}
		if (nl == 0)
			return CRUX_OK;
		for (size_t q = 0; q < nl; q++)
			s->d[w->lift[q]].level = w->lift_to[q];
		*lifts += (int)nl;
	}
}

struct slow_idx {
	int viol; /* violators first */
	double key;
	size_t i;
};

static int cmp_slow(const void *x, const void *y)
{
	const struct slow_idx *a = x, *b = y;

	if (a->viol != b->viol)
		return b->viol - a->viol;
	if (a->key != b->key)
		return a->key > b->key ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/*
 * Path selection again with the violators first (worst first), then the
 * others by decreasing intensity: a violator whose own flows were crowded
 * onto shared links gets the least loaded paths. Levels stay.
 */
static crux_status_t reroute(const struct guard_ws *w, struct crux_sched_topo *t,
			     const struct crux_sched_job *jobs, size_t n,
			     struct crux_sched_schedule *s)
{
	struct slow_idx *o = malloc(n * sizeof(*o));
	size_t *order = malloc(n * sizeof(*order));
	crux_status_t st = CRUX_ERR_NOMEM;

	if (!o || !order)
		goto out;
	for (size_t i = 0; i < n; i++) {
		o[i].i = i;
		o[i].viol = over_bound(w, i);
		o[i].key = o[i].viol ? bound_ratio(w, i) : s->d[i].intensity;
	}
	qsort(o, n, sizeof(*o), cmp_slow);
	for (size_t i = 0; i < n; i++)
		order[i] = o[i].i;
	st = crux_sched_paths_select(t, jobs, n, order, s);
	if (!st)
		st = crux_sched_intensity(t, jobs, n, s);
out:
	free(o);
	free(order);
	return st;
}

static crux_status_t guard_reroute(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				   size_t n, double bound, struct crux_sched_schedule *s)
{
	struct guard_ws w;
	double util;
	crux_status_t st = guard_ws_init(&w, t, jobs, n, bound, s);

	if (!st)
		st = crux_sched_evaluate_links(w.ev, t, jobs, n, s, &w.jl, 1, w.T, &util);
	if (!st)
		st = reroute(&w, t, jobs, n, s);
	guard_ws_free(&w);
	return st;
}

/* a better than b: within the bound beats above it; both within it, the
 * higher utilisation; both above it, fewer violators. */
static int guard_better(const struct guard_res *a, const struct guard_res *b)
{
	if ((a->left == 0) != (b->left == 0))
		return a->left == 0;
	if (a->left == 0)
		return a->util > b->util * (1 + GUARD_EPS);
	return a->left < b->left;
}

/* One attempt on s (paths and levels as given): lift/push rounds from scratch. */
static crux_status_t guard_attempt(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				   size_t n, double bound, struct crux_sched_schedule *s,
				   int *lifts, struct guard_res *r)
{
	struct guard_ws w;
	double util = 0;
	int left = 0;
	crux_status_t st = guard_ws_init(&w, t, jobs, n, bound, s);

	if (!st)
		st = guard_levels(&w, t, jobs, n, s, lifts, &left, &util, r);
	if (!st) {
		r->left = left;
		r->util = util;
		r->worst = guard_worst(&w, n);
	}
	guard_ws_free(&w);
	return st;
}

/*
 * The reserved level: every job compressed again into the K-1 levels below
 * the top one, which is left to the jobs the bound lifts. A violator on the
 * highest ordinary level then gains strict priority over all of them instead
 * of sharing that level fairly with hundreds of peers.
 */
static crux_status_t guard_reserved(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				    size_t n, const struct crux_sched_params *p,
				    struct crux_sched_schedule *s)
{
	struct crux_sched_params q = *p;
	crux_status_t st;

	q.levels = p->levels - 1;
	q.n_weights = 0;
	st = crux_sched_compress(t, jobs, n, &q, s);
	s->levels = p->levels;
	return st;
}

/* What the level search minimises: the worst predicted slowdown (over each
 * job's bound), plus a little of every job's excess over its bound (so
 * fixing one of two violators counts). */
static double search_obj(const struct guard_ws *w, size_t n)
{
	double worst = 0, excess = 0;

	for (size_t i = 0; i < n; i++) {
		double r = bound_ratio(w, i);

		worst = fmax(worst, r);
		excess += fmax(r - 1, 0);
	}
	return worst + SEARCH_EXCESS * excess;
}

/*
 * 4. The level search: the worst job above the bound goes to the level
 * (any of the K) where the objective is lowest, then the next worst, each
 * job at most once and SEARCH_JOBS jobs in all. It undoes what the lifts
 * do to a heavy job: gathered on the top level it shares fairly with all
 * its peers, while a lower level with fewer peers and the higher levels'
 * average load off the link can serve it better. Each move lowers the
 * objective or is not made, so it cannot cycle.
 */
static crux_status_t guard_search(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				  size_t n, double bound, struct crux_sched_schedule *s, int *moves,
				  struct guard_res *r)
{
	struct guard_ws w;
	double util = 0, f;
	crux_status_t st = guard_ws_init(&w, t, jobs, n, bound, s);

	if (!st)
		st = crux_sched_evaluate_links(w.ev, t, jobs, n, s, &w.jl, 1, w.T, &util);
	if (st)
		goto out;
	f = search_obj(&w, n);
	for (int step = 0; step < SEARCH_JOBS; step++) {
		size_t wi = n;
		double wsd = 0;

		/* w.moved marks the jobs already tried. */
		for (size_t i = 0; i < n; i++)
			if (!w.moved[i] && !jobs[i].urgent && over_bound(&w, i) &&
			    bound_ratio(&w, i) > wsd) {
				wsd = bound_ratio(&w, i);
				wi = i;
			}
		if (wi == n)
			break;
		w.moved[wi] = 1;
		int cur = s->d[wi].level, best = cur;
		double bf = f;

		for (int l = 0; l <= w.cap; l++) {
			if (l == cur)
				continue;
			s->d[wi].level = l;
			st = crux_sched_evaluate_links(w.ev, t, jobs, n, s, &w.jl, 1, w.T, &util);
			if (st)
				goto out;
			double g = search_obj(&w, n);

			if (g < bf * (1 - 1e-6)) {
				bf = g;
				best = l;
			}
		}
		s->d[wi].level = best;
		f = bf;
		*moves += best != cur;
		st = crux_sched_evaluate_links(w.ev, t, jobs, n, s, &w.jl, 1, w.T, &util);
		if (st)
			goto out;
	}
	r->left = 0;
	for (size_t i = 0; i < n; i++)
		r->left += over_bound(&w, i);
	r->util = util;
	r->worst = guard_worst(&w, n);
out:
	guard_ws_free(&w);
	return st;
}

/*
 * 5. Levels filled from the bottom (Audsley's order of fixed-priority
 * scheduling): the jobs given up take the lowest level; every other job starts
 * on the highest it may take; then, level by level from the lowest free one,
 * jobs still up there, least intense first, go down to it as long as every job
 * on it and below stays within its bound with all the others above (they only
 * gain by it). The longest such run of the order is found by doubling and
 * halving; the job that ends it stays up and the run goes on after it. A level
 * no job can take ends the filling: the rest share the highest. Crux's order
 * holds wherever the bound allows it, and a job it would starve ends above the
 * jobs that can wait.
 */
struct fill {
	struct guard_ws *w;
	struct crux_sched_topo *t;
	const struct crux_sched_job *jobs;
	size_t n;
	const unsigned char *gave_up;
	struct crux_sched_schedule *s;
	const size_t *cand; /* the jobs to place, least intense first */
	double util;
	int evals;
};

/* Do cand[q..q+k) on level l keep every job on l and below within bound? */
static crux_status_t fill_try(struct fill *f, size_t q, size_t k, int l, int *ok)
{
	crux_status_t st;

	for (size_t x = q; x < q + k; x++)
		f->s->d[f->cand[x]].level = l;
	st = crux_sched_evaluate_links(f->w->ev, f->t, f->jobs, f->n, f->s, &f->w->jl, 1, f->w->T,
				       &f->util);
	f->evals++;
	*ok = 1;
	for (size_t i = 0; !st && i < f->n && *ok; i++)
		*ok = f->s->d[i].level > l || (f->gave_up && f->gave_up[i]) || !over_bound(f->w, i);
	for (size_t x = q; x < q + k; x++)
		f->s->d[f->cand[x]].level = f->w->cap;
	return st;
}

static size_t net_jobs(const struct crux_sched_job *jobs, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += jobs[i].n_flows > 0;
	return k;
}

static crux_status_t guard_bottom_up(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				     size_t n, double bound, const unsigned char *gave_up,
				     struct crux_sched_schedule *s, int *moves, struct guard_res *r,
				     int *worst_i)
{
	struct guard_ws w;
	int *was = malloc(n * sizeof(int));
	size_t *order = malloc(n * sizeof(size_t)), *cand = malloc(n * sizeof(size_t)), nc = 0;
	crux_status_t st = guard_ws_init(&w, t, jobs, n, bound, s);
	struct fill f = {&w, t, jobs, n, gave_up, s, cand, 0, 0};
	int low = 0;

	if (!st && (!was || !order || !cand))
		st = CRUX_ERR_NOMEM;
	if (st)
		goto out;
	/* Least intense first: Crux's rank, lowest priority first. */
	for (size_t i = 0; i < n; i++)
		order[(size_t)s->d[i].rank < n ? n - 1 - (size_t)s->d[i].rank : i] = i;
	for (size_t i = 0; i < n; i++) {
		was[i] = s->d[i].level;
		if (jobs[i].urgent || w.jl.off[i + 1] == w.jl.off[i])
			continue; /* urgent: the top level; no traffic: anywhere */
		s->d[i].level = w.cap;
		if (gave_up && gave_up[i]) {
			s->d[i].level = 0;
			low = 1;
		}
	}
	for (size_t q = 0; q < n; q++)
		if (s->d[order[q]].level == w.cap && !jobs[order[q]].urgent &&
		    w.jl.off[order[q] + 1] > w.jl.off[order[q]])
			cand[nc++] = order[q];
	for (int l = low; l < w.cap && nc > 0; l++) {
		size_t q = 0, left = 0;
		int placed = 0;

		while (q < nc && f.evals < FILL_EVALS) {
			size_t good = 0, bad = nc - q + 1, k = 1;
			int ok = 0;

			/* doubling, then halving: the longest run from q that fits */
			while (k < bad && f.evals < FILL_EVALS) {
				st = fill_try(&f, q, k, l, &ok);
				if (st)
					goto out;
				if (ok)
					good = k;
				else
					bad = k;
				k = bad == nc - q + 1 ? 2 * k : good + (bad - good) / 2;
				if (k > nc - q)
					k = bad == nc - q + 1 ? nc - q : k;
				if (good + 1 >= bad || k <= good)
					break;
			}
			for (size_t x = q; x < q + good; x++)
				s->d[cand[x]].level = l;
			placed += good > 0;
			q += good;
			if (q < nc)
				cand[left++] = cand[q++]; /* ends the run: stays up */
		}
		while (q < nc)
			cand[left++] = cand[q++];
		nc = left;
		if (!placed)
			break;
	}
	st = crux_sched_evaluate_links(w.ev, t, jobs, n, s, &w.jl, 1, w.T, &f.util);
	if (st)
		goto out;
	r->left = 0;
	*worst_i = -1;
	for (size_t i = 0; i < n; i++) {
		int v = !(gave_up && gave_up[i]) && over_bound(&w, i);

		r->left += v;
		*moves += s->d[i].level != was[i];
		if (v && !jobs[i].urgent &&
		    (*worst_i < 0 || bound_ratio(&w, i) > bound_ratio(&w, (size_t)*worst_i)))
			*worst_i = (int)i;
	}
	r->util = f.util;
	r->worst = guard_worst(&w, n);
out:
	free(was);
	free(order);
	free(cand);
	guard_ws_free(&w);
	return st;
}

static crux_status_t guard_run(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
			       size_t n, const struct crux_sched_params *p,
			       const unsigned char *gave_up, unsigned char *extra,
			       struct crux_sched_schedule *s)
{
	struct crux_sched_schedule *orig = NULL, *best = NULL;
	struct guard_res r, rb, r0;
	crux_status_t st;
	double bound = p->max_slowdown;
	int lifts = 0, lifts_b, urgent = 0;

	if (!(bound > 0) || n == 0)
		return CRUX_OK;
	if (!(bound >= 1) || s->n_jobs != n)
		return CRUX_ERR_INVAL;
	for (size_t i = 0; extra && i < n; i++)
		extra[i] = 0;
	st = crux_sched_schedule_new(jobs, n, s->levels, &orig);
	if (!st)
		st = crux_sched_schedule_new(jobs, n, s->levels, &best);
	for (size_t i = 0; i < n && s->levels > 1; i++)
		urgent += jobs[i].urgent != 0;
	/* 0. Jobs whose mean slowdown is at the bound: the top level is theirs,
	 * every other job compressed again into the K-1 levels below. */
	if (!st && urgent)
		st = guard_reserved(t, jobs, n, p, s);
	for (size_t i = 0; !st && urgent && i < n; i++)
		if (jobs[i].urgent)
			s->d[i].level = s->levels - 1;
	if (!st)
		st = crux_sched_schedule_copy(orig, s);
	/* 1. Lifts and pushes on the compression as it is. */
	if (!st)
		st = guard_attempt(t, jobs, n, bound, s, &lifts, &rb);
	if (st || (rb.left == 0 && lifts == 0))
		goto out;
	r0 = rb;
	st = crux_sched_schedule_copy(best, s);
	lifts_b = lifts;
	/* 2. The top level reserved for the jobs the bound lifts. */
	if (!st && p->levels > 1 && !urgent) {
		st = crux_sched_schedule_copy(s, orig);
		lifts = 0;
		if (!st)
			st = guard_reserved(t, jobs, n, p, s);
		if (!st)
			st = guard_attempt(t, jobs, n, bound, s, &lifts, &r);
		/* Kept when it does better, and only whole: a partial repair
		 * crowds the reserved level and helps less than attempt 1 + 3. */
		if (!st && r.left == 0 && guard_better(&r, &rb)) {
			rb = r;
			lifts_b = lifts;
			st = crux_sched_schedule_copy(best, s);
		}
	}
	/*
	 * 3. Path selection again with the violators first, then the rounds.
	 * Where attempts 1-2 met the bound, from the compression's levels and
	 * kept if the predicted utilisation is higher: Crux's path selection
	 * leaves the least intense jobs the most crowded links, so a violator
	 * on clean paths needs fewer lifts, and lifts are what cost the others.
	 * Else on the levels of attempt 1, kept if fewer remain above it.
	 */
	if (!st) {
		int met = rb.left == 0;

		st = crux_sched_schedule_copy(s, met ? orig : best);
		if (!st)
			st = guard_reroute(t, jobs, n, bound, s);
		lifts = met ? 0 : lifts_b;
		if (!st)
			st = guard_attempt(t, jobs, n, bound, s, &lifts, &r);
		if (!st && guard_better(&r, &rb)) {
			rb = r;
			lifts_b = lifts;
			st = crux_sched_schedule_copy(best, s);
		}
	}
	/* 4. Still above it: the level search from the best so far. */
	if (!st && rb.left > 0) {
		int moves = 0;

		st = crux_sched_schedule_copy(s, best);
		if (!st)
			st = guard_search(t, jobs, n, bound, s, &moves, &r);
		if (!st && moves > 0) {
			rb.left = r.left;
			rb.worst = r.worst;
			rb.util = r.util;
			lifts_b += moves;
			st = crux_sched_schedule_copy(best, s);
		}
	}
	/* 5. Still above it: the levels filled from the bottom, on the best
	 * paths so far; kept when it leaves fewer jobs above their bound. */
	if (!st && rb.left > 0 && s->levels > 1 && net_jobs(jobs, n) <= FILL_JOBS) {
		unsigned char *gu = calloc(n, 1);
		int moves = 0, wi = -1;

		st = gu ? CRUX_OK : CRUX_ERR_NOMEM;
		for (size_t i = 0; !st && gave_up && i < n; i++)
			gu[i] = gave_up[i];
		/* A job the filling finds no level for, with the others held, is
		 * given up too (its worst violator, FILL_GIVE_UP at most) and the
		 * filling starts again: no schedule of levels it tried holds it. */
		for (int g = 0; !st; g++) {
			moves = 0;
			st = crux_sched_schedule_copy(s, best);
			if (!st)
				st = guard_bottom_up(t, jobs, n, bound, gu, s, &moves, &r, &wi);
			if (st || r.left == 0 || wi < 0 || !extra || g == FILL_GIVE_UP)
				break;
			gu[wi] = 1;
		}
		if (!st && guard_better(&r, &rb)) {
			rb = r;
			lifts_b += moves;
			st = crux_sched_schedule_copy(best, s);
			for (size_t i = 0; extra && i < n; i++)
				extra[i] = gu[i] && !(gave_up && gave_up[i]);
		}
		free(gu);
	}
	/* Never worse than no guard: if the moves raised the worst predicted
	 * slowdown and still miss the bound, the compression stays as it was. */
	if (!st && rb.left > 0 && r0.worst0 < rb.worst) {
		st = crux_sched_schedule_copy(best, orig);
		rb.left = r0.left0;
		lifts_b = 0;
		for (size_t i = 0; extra && i < n; i++)
			extra[i] = 0;
	}
	if (!st)
		st = crux_sched_schedule_copy(s, best);
	lifts = lifts_b;
out:
	if (!st) {
		s->guard_lifts = lifts + urgent;
		s->guard_violators = rb.left;
	}
	crux_sched_schedule_free(orig);
	crux_sched_schedule_free(best);
	return st;
}

/*
 * After the first try: whether every urgent job (of the original jobs) is
 * predicted within its bound in tmp (the jobs as the first try saw them).
 * An urgent job measured much slower than the model predicts for it
 * (iter_time > GUARD_MODEL_GAP x the prediction: the model does not see
 * what slows it) first goes up to the highest level among the jobs sharing
 * a link with it, so that none keeps strict priority over it. Recounts the
 * violators.
 */
static crux_status_t urgent_met(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				const struct crux_sched_job *tmp, size_t n, double bound,
				struct crux_sched_schedule *s, int *met)
{
	struct guard_ws w;
	double util;
	int left = 0, blind = 0;
	crux_status_t st = guard_ws_init(&w, t, tmp, n, bound, s);

	if (!st)
		st = crux_sched_evaluate_links(w.ev, t, tmp, n, s, &w.jl, 1, w.T, &util);
	for (size_t i = 0; !st && i < n; i++) {
		if (!jobs[i].urgent || !(jobs[i].iter_time > GUARD_MODEL_GAP * w.T[i]))
			continue;
		blind = 1;
		for (size_t k = w.jl.off[i]; k < w.jl.off[i + 1]; k++) {
			int l = w.jl.link[k];

			for (size_t q = w.loff[l]; q < w.loff[l + 1]; q++)
				if (s->d[w.ljob[q]].level > s->d[i].level)
					s->d[i].level = s->d[w.ljob[q]].level;
		}
	}
	if (!st && blind)
		st = crux_sched_evaluate_links(w.ev, t, tmp, n, s, &w.jl, 1, w.T, &util);
	*met = 1;
	for (size_t i = 0; !st && i < n; i++) {
		left += over_bound(&w, i);
		if (jobs[i].urgent && over_bound(&w, i))
			*met = 0;
	}
	if (!st)
		s->guard_violators = left;
	guard_ws_free(&w);
	return st;
}

/*
 * Jobs no schedule can hold within their bound (see crux_sched_guard), from
 * average loads on s's paths: inf[i] set and relax[i] the bound this plan
 * gives them; *count how many.
 */
static crux_status_t guard_infeasible(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				      size_t n, double bound, const struct crux_sched_schedule *s,
				      unsigned char *inf, double *relax, int *count)
{
	struct guard_ws w;
	size_t L = (size_t)t->n_links;
	double *need = NULL, *load = NULL;
	crux_status_t st = guard_ws_init(&w, t, jobs, n, bound, s);
	int c = 0;

	if (st)
		goto out;
	need = calloc(w.jl.off[n] + 1, sizeof(double));
	load = calloc(L + 1, sizeof(double));
	st = CRUX_ERR_NOMEM;
	if (!need || !load)
		goto out;
	for (size_t i = 0; i < n; i++) {
		double tau = 0, own;

		inf[i] = 0;
		relax[i] = w.bnd[i];
		if (w.jl.off[i + 1] == w.jl.off[i] || !(w.iso[i] > 0))
			continue;
		for (size_t k = w.jl.off[i]; k < w.jl.off[i + 1]; k++)
			tau = fmax(tau, w.jl.bytes[k] / t->lbw[w.jl.link[k]]);
		own = crux_sched_isolated_iter(&jobs[i], tau) / w.iso[i];
		if (own > w.bnd[i] * (1 + GUARD_EPS)) {
			/* Slower than its bound alone, on its own paths. */
			inf[i] = 1;
			relax[i] = fmin(own, CRUX_SCHED_MAX_SLOWDOWN_LIMIT);
			c++;
			continue;
		}
		for (size_t k = w.jl.off[i]; k < w.jl.off[i + 1]; k++) {
			need[k] = w.jl.bytes[k] / (w.bnd[i] * w.iso[i]);
			load[w.jl.link[k]] += need[k];
		}
	}
	/* One pass suffices: giving a job up only lowers the other links' loads. */
	for (size_t l = 0; l < L; l++) {
		while (load[l] > t->lbw[l] * (1 + GUARD_EPS)) {
			int worst = -1;
			double most = 0;

			for (size_t q = w.loff[l]; q < w.loff[l + 1]; q++) {
				int j = w.ljob[q];

				if (inf[j])
					continue;
				for (size_t k = w.jl.off[j]; k < w.jl.off[j + 1]; k++)
					if (w.jl.link[k] == (int)l && need[k] > most) {
						most = need[k];
						worst = j;
					}
			}
			if (worst < 0)
				break;
			inf[worst] = 1;
			c++;
			for (size_t k = w.jl.off[worst]; k < w.jl.off[worst + 1]; k++)
				load[w.jl.link[k]] -= need[k];
		}
	}
	/*
	 * What a given-up job can get while every other job is held at its
	 * bound: the rate the others' needs leave on each of its links, shared
	 * with the other given-up jobs there; at least its own bound.
	 */
	for (size_t i = 0; i < n; i++) {
		double tau = 0;

		if (!inf[i] || need[w.jl.off[i]] == 0)
			continue; /* kept, or slower than its bound alone (set above) */
		for (size_t k = w.jl.off[i]; k < w.jl.off[i + 1]; k++) {
			int l = w.jl.link[k], given = 0;

			for (size_t q = w.loff[l]; q < w.loff[l + 1]; q++)
				given += inf[w.ljob[q]] && need[w.jl.off[w.ljob[q]]] > 0;
			double r = (t->lbw[l] - load[l]) / (given ? given : 1);

			tau = r > 0 ? fmax(tau, w.jl.bytes[k] / r) : INFINITY;
		}
		double sd = crux_sched_isolated_iter(&jobs[i], tau) / w.iso[i];

		relax[i] = fmin(fmax(sd, w.bnd[i]), CRUX_SCHED_MAX_SLOWDOWN_LIMIT);
	}
	*count = c;
	st = CRUX_OK;
out:
	free(need);
	free(load);
	guard_ws_free(&w);
	return st;
}

static crux_status_t guard_main(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				size_t n, const struct crux_sched_params *p,
				const unsigned char *gave_up, unsigned char *extra,
				struct crux_sched_schedule *s);

/* A plan as the guard weighs it against no guard. */
struct guard_abs {
	double worst; /* the highest slowdown of any job (T over its isolated time) */
	double util;  /* predicted utilisation */
	int left;     /* jobs not reported above their own bound */
	int over;     /* jobs above their own bound, reported or not */
};

/* s evaluated into a; above (may be NULL) marks the jobs a->left counts.
 * With 'unreport', a job in inf that s holds within its bound leaves inf. */
static crux_status_t guard_worst_abs(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				     size_t n, double bound, const struct crux_sched_schedule *s,
				     unsigned char *inf, int unreport, struct guard_abs *a,
				     unsigned char *above)
{
	struct guard_ws w;
	crux_status_t st = guard_ws_init(&w, t, jobs, n, bound, s);

	if (!st)
		st = crux_sched_evaluate_links(w.ev, t, jobs, n, s, &w.jl, 0, w.T, &a->util);
	if (!st) {
		a->worst = 0;
		a->left = 0;
		a->over = 0;
		for (size_t i = 0; i < n; i++) {
			int o = over_bound(&w, i);

			if (w.iso[i] > 0)
				a->worst = fmax(a->worst, w.T[i] / w.iso[i]);
			if (unreport && inf[i] && !o)
				inf[i] = 0;
			a->left += !inf[i] && o;
			a->over += o;
			if (above)
				above[i] = !inf[i] && o;
		}
	}
	guard_ws_free(&w);
	return st;
}

/* One hold plan into s, from orig: the jobs in inf at a bound a share 'frac'
 * of the way, geometrically, from their own to worst0 (tmp: scratch). */
static crux_status_t guard_hold(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				size_t n, const struct crux_sched_params *p,
				const unsigned char *inf, double worst0, double frac,
				const struct crux_sched_schedule *orig, struct crux_sched_job *tmp,
				struct crux_sched_schedule *s)
{
	crux_status_t st;

	memcpy(tmp, jobs, n * sizeof(*tmp));
	for (size_t i = 0; i < n; i++) {
		double b = tmp[i].slowdown_bound > 0 ? tmp[i].slowdown_bound : p->max_slowdown;

		if (!inf[i])
			continue;
		b *= pow(fmax(worst0 / b, 1), frac);
		tmp[i].slowdown_bound = fmin(b, CRUX_SCHED_MAX_SLOWDOWN_LIMIT);
		tmp[i].urgent = 0;
	}
	st = crux_sched_schedule_copy(s, orig);
	if (!st)
		st = guard_main(t, tmp, n, p, NULL, NULL, s);
	return st;
}

crux_status_t crux_sched_guard(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
			       size_t n, const struct crux_sched_params *p,
			       struct crux_sched_schedule *s)
{
	struct crux_sched_job *tmp = NULL;
	struct crux_sched_schedule *orig = NULL, *best = NULL;
	unsigned char *inf = NULL, *extra = NULL, *above = NULL, *inf_b = NULL;
	double *relax = NULL, worst0 = 0;
	struct guard_abs a0, a1;
	int count = 0, extras = 0;
	crux_status_t st;

	s->guard_infeasible = 0;
	for (size_t i = 0; i < s->n_jobs; i++)
		s->d[i].infeasible = 0;
	if (!(p->max_slowdown > 0) || n == 0 || s->n_jobs != n || p->guard_enforce_all)
		return guard_main(t, jobs, n, p, NULL, NULL, s);
	inf = malloc(n);
	extra = calloc(n, 1);
	relax = malloc(n * sizeof(double));
	tmp = malloc(n * sizeof(*tmp));
	st = inf && extra && relax && tmp ? CRUX_OK : CRUX_ERR_NOMEM;
	if (!st)
		st = guard_infeasible(t, jobs, n, p->max_slowdown, s, inf, relax, &count);
	if (!st)
		st = crux_sched_schedule_new(jobs, n, s->levels, &orig);
	if (!st)
		st = crux_sched_schedule_copy(orig, s);
	if (!st)
		st = guard_worst_abs(t, jobs, n, p->max_slowdown, s, inf, 0, &a0, NULL);
	if (st)
		goto out;
	worst0 = a0.worst;
	/* The others keep their bounds; the infeasible ones get what they can. */
	memcpy(tmp, jobs, n * sizeof(*tmp));
	for (size_t i = 0; i < n; i++) {
		if (!inf[i])
			continue;
		tmp[i].slowdown_bound = relax[i];
		tmp[i].urgent = 0;
	}
	st = guard_main(t, tmp, n, p, count ? inf : NULL, extra, s);
	for (size_t i = 0; i < n; i++) {
		extras += extra[i];
		inf[i] |= extra[i];
	}
	if (!st)
		st = guard_worst_abs(t, jobs, n, p->max_slowdown, s, inf, 0, &a1, NULL);
	/*
	 * Never a worse worst job than no guard. First the jobs given up are
	 * held at a bound between their own and that worst slowdown, then at
	 * that worst itself (their report stays), every other job at its bound;
	 * the first plan that holds the others is kept, else the one that
	 * leaves the fewest above. Where the best such plan leaves jobs above,
	 * those are given up too and the steps run again (HOLD_ROUNDS); such a
	 * plan is kept only where fewer jobs in all end above their bound, or
	 * as many at a higher predicted utilisation: a plan that only moves a
	 * job from the violators to the report is not one. If every such plan
	 * is still worse than no guard, the guard as without the estimate (the
	 * estimate's report stays).
	 */
	if (!st && (count || extras) && a1.worst > worst0 * (1 + GUARD_EPS)) {
		struct guard_abs ab = {INFINITY, 0, INT_MAX, INT_MAX};

		st = crux_sched_schedule_new(jobs, n, s->levels, &best);
		above = malloc(n);
		inf_b = malloc(n);
		if (!st && !(above && inf_b))
			st = CRUX_ERR_NOMEM;
		for (int r = 0; !st && r < HOLD_ROUNDS && ab.left > 0; r++) {
			int found = 0;

			if (r > 0) {
				/* the best plan's jobs left above join the given-up */
				memcpy(inf, inf_b, n);
				for (size_t i = 0; i < n; i++)
					inf[i] |= above[i];
			}
			for (int k = 0; !st && k < HOLD_STEPS && ab.left > 0; k++) {
				struct guard_abs a2;

				st = guard_hold(t, jobs, n, p, inf, worst0,
						(double)(k + 1) / HOLD_STEPS, orig, tmp, s);
				if (!st)
					st = guard_worst_abs(t, jobs, n, p->max_slowdown, s, inf, 0,
							     &a2, NULL);
				if (st || a2.worst > worst0 * (1 + GUARD_EPS))
					continue;
				if (r == 0 ? a2.left < ab.left
					   : a2.over < ab.over ||
						 (a2.over == ab.over &&
						  a2.util > ab.util * (1 + GUARD_EPS))) {
					ab = a2;
					found = 1;
					st = crux_sched_schedule_copy(best, s);
					memcpy(inf_b, inf, n);
				}
			}
			if (st || !found)
				break; /* nothing better this round: no further one */
			if (ab.left > 0) {
				st = guard_worst_abs(t, jobs, n, p->max_slowdown, best, inf_b, 0,
						     &ab, above);
				for (size_t i = 0; !st && i < n; i++)
					extra[i] |= above[i];
			}
		}
		if (!st && ab.left < INT_MAX) {
			a1 = ab;
			memcpy(inf, inf_b, n);
			st = crux_sched_schedule_copy(s, best);
		}
	}
	if (!st && (count || extras) && a1.worst > worst0 * (1 + GUARD_EPS)) {
		for (size_t i = 0; i < n; i++) {
			inf[i] &= !extra[i];
			extra[i] = 0;
		}
		st = crux_sched_schedule_copy(s, orig);
		if (!st)
			st = guard_main(t, jobs, n, p, NULL, NULL, s);
		if (!st)
			st = guard_worst_abs(t, jobs, n, p->max_slowdown, s, inf, 0, &a1, NULL);
	}
	/* A job the plan holds within its bound after all is not reported. */
	if (!st && (count || extras))
		st = guard_worst_abs(t, jobs, n, p->max_slowdown, s, inf, 1, &a1, NULL);
	if (!st) {
		s->guard_violators = a1.left;
		for (size_t i = 0; i < n; i++) {
			s->d[i].infeasible = inf[i];
			s->guard_infeasible += inf[i];
		}
	}
out:
	crux_sched_schedule_free(orig);
	crux_sched_schedule_free(best);
	free(tmp);
	free(inf);
	free(extra);
	free(above);
	free(inf_b);
	free(relax);
	return st;
}

static crux_status_t guard_main(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				size_t n, const struct crux_sched_params *p,
				const unsigned char *gave_up, unsigned char *extra,
				struct crux_sched_schedule *s)
{
	struct crux_sched_job *tmp = NULL;
	struct crux_sched_schedule *save = NULL;
	crux_status_t st;
	int urgent = 0, met = 0;

	for (size_t i = 0; i < n && p->max_slowdown > 0 && s->levels > 1; i++)
		urgent += jobs[i].urgent != 0;
	if (!urgent)
		return guard_run(t, jobs, n, p, gave_up, extra, s);
	extra = NULL; /* urgency has its own step: nothing more is given up */
	/*
	 * Urgent jobs first as protected ones with a tighter bound, by the usual
	 * steps: sharing a level with its blockers costs the others less than
	 * strict priority over all of them. Only where that leaves an urgent job
	 * above it, the top level is the urgent jobs' alone.
	 */
	tmp = malloc(n * sizeof(*tmp));
	st = tmp ? crux_sched_schedule_new(jobs, n, s->levels, &save) : CRUX_ERR_NOMEM;
	if (!st)
		st = crux_sched_schedule_copy(save, s);
	if (st)
		goto out;
	memcpy(tmp, jobs, n * sizeof(*tmp));
	for (size_t i = 0; i < n; i++) {
		tmp[i].urgent = 0;
		if (jobs[i].urgent)
			tmp[i].slowdown_bound = GUARD_URGENT_TARGET * p->max_slowdown;
	}
	st = guard_run(t, tmp, n, p, gave_up, extra, s);
	if (!st)
		st = urgent_met(t, jobs, tmp, n, p->max_slowdown, s, &met);
	if (!st && !met) {
		st = crux_sched_schedule_copy(s, save);
		if (!st)
			st = guard_run(t, jobs, n, p, gave_up, extra, s);
	}
out:
	free(tmp);
	crux_sched_schedule_free(save);
	return st;
}

/* ---- Slowdown account --------------------------------------------------- */

void crux_sched_account_init(struct crux_sched_account *a)
{
	a->run_s = 0;
	a->alone_s = 0;
	a->last = 0;
	a->state = CRUX_SCHED_ACCOUNT_FREE;
}

void crux_sched_account_add(struct crux_sched_account *a, double dt, double slowdown)
{
	if (!(dt > 0) || !isfinite(dt) || !(slowdown > 0) || !isfinite(slowdown))
		return;
	a->run_s += dt;
	a->alone_s += dt / slowdown;
	a->last = slowdown;
}

double crux_sched_account_mean(const struct crux_sched_account *a)
{
	return a->alone_s > 0 ? a->run_s / a->alone_s : 0;
}

/* The state a mean m calls for, from state 'from' (the hysteresis), when the
 * job ran at slowdown 'last' since the previous update. */
static enum crux_sched_account_state account_state(enum crux_sched_account_state from, double m,
						   double last, double bound)
{
	/* Urgent until well below the threshold: no flip at every plan. */
	if (from == CRUX_SCHED_ACCOUNT_URGENT &&
	    m >= CRUX_SCHED_ACCOUNT_URGENT_EXIT * bound * (1 - GUARD_EPS))
		return from;
	if (m >= CRUX_SCHED_ACCOUNT_PROTECT_AT * bound * (1 - GUARD_EPS)) {
		/* Urgent only where protection did not hold the job. */
		if (from == CRUX_SCHED_ACCOUNT_PROTECTED && last > bound * (1 + GUARD_EPS))
			return CRUX_SCHED_ACCOUNT_URGENT;
		return CRUX_SCHED_ACCOUNT_PROTECTED;
	}
	if (m < CRUX_SCHED_ACCOUNT_RELEASE_AT * bound * (1 + GUARD_EPS))
		return CRUX_SCHED_ACCOUNT_FREE;
	/* Between the two: a free job stays free, the others are protected. */
	return from == CRUX_SCHED_ACCOUNT_FREE ? from : CRUX_SCHED_ACCOUNT_PROTECTED;
}

int crux_sched_account_update(struct crux_sched_account *a, double bound)
{
	double m = crux_sched_account_mean(a);
	enum crux_sched_account_state to;

	if (!(bound > 0) || !(m > 0))
		return 0;
	to = account_state(a->state, m, a->last, bound);
	if (to == a->state)
		return 0;
	a->state = to;
	return 1;
}

/*
 * A free job's bound is the slowdown s at which SLACK_S more seconds bring
 * its mean to PROTECT_AT x B: (E + H) / (A + H / s) = T gives
 * s = H / ((E + H) / T - A), any s when that is not positive. A young job
 * has no slack (CAP x B, as before); an old one whose mean stayed low may be
 * slowed further for a while, up to CAP_MAX x B, and the account protects it
 * when its mean gets there.
 */
double crux_sched_account_bound(const struct crux_sched_account *a, double bound)
{
	const double H = CRUX_SCHED_ACCOUNT_SLACK_S;
	double lo = CRUX_SCHED_ACCOUNT_CAP * bound, hi = CRUX_SCHED_ACCOUNT_CAP_MAX * bound, d;

	if (a->state != CRUX_SCHED_ACCOUNT_FREE)
		return bound;
	d = (a->run_s + H) / (CRUX_SCHED_ACCOUNT_PROTECT_AT * bound) - a->alone_s;
	if (!isfinite(d))
		return lo;
	if (d <= H / hi) /* no slowdown would reach T within H, or the ceiling would not */
		return hi;
	return fmax(lo, H / d);
}

int crux_sched_account_urgent(const struct crux_sched_account *a)
{
	return a->state == CRUX_SCHED_ACCOUNT_URGENT;
}

const char *crux_sched_account_state_name(unsigned state)
{
	switch (state) {
	case CRUX_SCHED_ACCOUNT_FREE:
		return "free";
	case CRUX_SCHED_ACCOUNT_PROTECTED:
		return "protected";
	case CRUX_SCHED_ACCOUNT_URGENT:
		return "urgent";
	}
	return "unknown";
}

/*
 * Running at slowdown s from (E, A) for t seconds the mean is
 * (E + t) / (A + t / s); it reaches m* at t = (m* A - E) / (1 - m* / s),
 * when that is positive. The next threshold: the one above the mean when
 * running slower than it, below when faster.
 */
double crux_sched_account_next(const struct crux_sched_account *a, double bound, double s)
{
	static const double at[] = {CRUX_SCHED_ACCOUNT_RELEASE_AT, CRUX_SCHED_ACCOUNT_URGENT_EXIT,
				    CRUX_SCHED_ACCOUNT_PROTECT_AT};
	double m = crux_sched_account_mean(a), best = INFINITY;

	if (!(bound > 0) || !(s > 0) || !isfinite(s))
		return INFINITY;
	if (!(m > 0)) /* nothing accounted yet: the mean will be s itself */
		return account_state(a->state, s, s, bound) == a->state ? INFINITY : 0;
	/* Running at s moves it now (a protected job above B at its threshold). */
	if (account_state(a->state, m, s, bound) != a->state)
		return 0;
	for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		double target = at[k] * bound, t;

		/* Only a crossing that changes the state counts. */
		if (!(s > target && m < target) && !(s < target && m > target))
			continue;
		t = (target * a->alone_s - a->run_s) / (1 - target / s);
		if (!(t >= 0))
			continue;
		if (account_state(a->state, target * (s > target ? 1 + 1e-6 : 1 - 1e-6), s,
				  bound) == a->state)
			continue;
		best = fmin(best, t);
	}
	return best;
}
