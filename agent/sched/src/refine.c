/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compression refined by the evaluator (issue 26 item 3): after Max-K-Cut,
 * each job may move to another level where the evaluator predicts a higher
 * utilisation by more than p->refine_gain. By default (p->refine_free) any
 * level: judged by the reference model this free search beats the one kept
 * to the priority order (never above a higher-ranked job it shares a link
 * with, never below a lower-ranked one) on both held-out case seeds and at
 * K = 3 (bench sched-refcheck; agent/sched/README.md). It lost there while
 * the evaluator erred in its favour on such schedules (the level polish of
 * the eleventh round); the evaluator of the fifteenth round no longer does.
 * The order still decides paths and Max-K-Cut's start.
 *
 * Jobs that share no link do not meet in the evaluator, so each connected
 * component of the contention graph is refined on its own, as a cluster of
 * its jobs only: a move costs an evaluation of its component, not of the
 * cluster. Components of more than CRUX_SCHED_REFINE_MAX_JOBS jobs keep
 * Max-K-Cut's levels; each component stops after CRUX_SCHED_REFINE_MAX_EVALS
 * evaluations, and the plan after CRUX_SCHED_REFINE_MAX_WORK job-evaluations
 * (components in job-index order; the later ones keep Max-K-Cut's levels),
 * which bounds what it adds to a plan of any size.
 *
 * Not before the fairness guard (p->max_slowdown): the guard, which runs
 * next, then spends other jobs' gain undoing the moves, and more jobs end
 * above their bound (sched-guard, 2:1 Clos at 1.5: 73 held jobs above it in
 * the reference with the refinement, 39 without; a variant that kept only
 * moves leaving the jobs no further above their bounds: 75). After it, on
 * request (p->guard_refine: crux_sched_guard_refine), the same search runs
 * with every job capped at the larger of its bound and its time in the
 * guard's plan: the guard's lifts and holds buy the bounds with gain a move
 * of a job it never had to lift can give back. Not by default: the testbed's
 * model (bench/testbed/predict.py) finds it loses where the flows do not take
 * the planned paths (cruxd without probing) and where a shared level's
 * standing queue delays every ring step, neither of which the evaluator sees.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

#define REFINE_PASSES 3
/*
 * Guarded: a move may bring a job within its bound no nearer to it than this
 * fraction below (unless it is there already). The evaluator errs for some
 * jobs under several higher ones; moves up to the bound itself let the
 * reference find more held jobs above it (sched-guard, main case seed: 2:1
 * Clos at 3, 5 -> 6; one link at 1.5, 1 -> 2), at 0.1 none more, most of
 * the gain kept (chosen on the main seed; seed 77 held out).
 */
#define GUARD_REFINE_MARGIN 0.1

/* One component as a cluster of its own. */
struct refine_c {
	struct crux_sched_job *jobs;
	struct crux_sched_schedule *s;
	struct job_links jl;
	double *T;
	unsigned char nb[CRUX_SCHED_REFINE_MAX_JOBS * CRUX_SCHED_REFINE_MAX_JOBS];
	size_t n;
	int evals;
	long work; /* job-evaluations left to the plan */
	/* Guarded (after the guard): per member its cap on the iteration time
	 * (set from the first evaluation), its bound times its isolated time;
	 * 'top' the highest level a move may take, 'pin' members never moved.
	 * lim NULL: unguarded. */
	double *lim, *held;
	unsigned char pin[CRUX_SCHED_REFINE_MAX_JOBS];
	int top;
};

/* Where a job at level a and at level b stand against each neighbour (below,
 * level with, above): the same everywhere means the same schedule to the
 * evaluator. */
static int same_position(const struct refine_c *c, size_t v, int a, int b)
{
	for (size_t u = 0; u < c->n; u++) {
		if (!c->nb[v * c->n + u])
			continue;
		int lu = c->s->d[u].level;

		if ((a > lu) - (a < lu) != (b > lu) - (b < lu))
			return 0;
	}
	return 1;
}

static crux_status_t refine_eval(struct refine_c *c, struct crux_sched_eval *ev,
				 struct crux_sched_topo *t, double *util)
{
	/* The first evaluation of a component is a full pass (new jobs on ev). */
	int reuse = c->evals > 0;

	c->evals++;
	c->work -= (long)c->n;
	return crux_sched_evaluate_links(ev, t, c->jobs, c->n, c->s, &c->jl, reuse, c->T, util);
}

/* Guarded: every member within its cap after the last evaluation. */
static int refine_within(const struct refine_c *c)
{
	for (size_t a = 0; c->lim && a < c->n; a++)
		if (c->T[a] > c->lim[a])
			return 0;
	return 1;
}

/* Whether the component's and the plan's budgets allow one more evaluation. */
static int refine_can(const struct refine_c *c)
{
	return c->evals < CRUX_SCHED_REFINE_MAX_EVALS && c->work >= (long)c->n;
}

/* Local search over one component (levels in c->s; members in rank order). */
static crux_status_t refine_component(struct refine_c *c, struct crux_sched_eval *ev,
				      struct crux_sched_topo *t, double gain, int free_order,
				      int *moves)
{
	size_t n = c->n;
	double u0;
	crux_status_t st;

	for (size_t a = 0; a < n; a++)
		for (size_t b = a + 1; b < n; b++) {
			int share = 0;

			for (size_t x = c->jl.off[a]; x < c->jl.off[a + 1] && !share; x++)
				for (size_t y = c->jl.off[b]; y < c->jl.off[b + 1] && !share; y++)
					share = c->jl.link[x] == c->jl.link[y];
			c->nb[a * n + b] = c->nb[b * n + a] = (unsigned char)share;
		}
	if (!refine_can(c))
		return CRUX_OK;
	st = refine_eval(c, ev, t, &u0);
	if (st)
		return st;
	/* Guarded: no job beyond its bound or, above it already, beyond its time now. */
	for (size_t a = 0; c->lim && a < n; a++)
		c->lim[a] = crux_dmax(c->held[a] * (1 - GUARD_REFINE_MARGIN), c->T[a]) * (1 + 1e-9);
	for (int pass = 0; pass < REFINE_PASSES; pass++) {
		int moved = 0;

		/* Members are in rank order: a job's higher-ranked neighbours come first. */
		for (size_t v = 0; v < n && refine_can(c); v++) {
			int lo = 0, hi = c->top, cur = c->s->d[v].level, best_l = cur;
			double best_u = u0 * (1 + gain);

			if (c->pin[v] || cur > c->top)
				continue;

			/* Levels it may take: all, or (kept to the order) those that keep
			 * the order valid with every neighbour: [lo, hi]. */
			for (size_t u = 0; u < n && !free_order; u++) {
				if (!c->nb[v * n + u])
					continue;
				if (u < v && c->s->d[u].level < hi)
					hi = c->s->d[u].level;
				if (u > v && c->s->d[u].level > lo)
					lo = c->s->d[u].level;
			}
			for (int L = lo; L <= hi && refine_can(c); L++) {
				int seen = same_position(c, v, L, cur);
				double u;

				for (int q = lo; q < L && !seen; q++)
					seen = same_position(c, v, L, q);
				if (seen)
					continue;
				c->s->d[v].level = L;
				st = refine_eval(c, ev, t, &u);
				c->s->d[v].level = cur;
				if (st)
					return st;
				if (u > best_u && refine_within(c)) {
					best_u = u;
					best_l = L;
				}
			}
			if (best_l != cur) {
				c->s->d[v].level = best_l;
				u0 = best_u;
				moved = 1;
				(*moves)++;
			}
		}
		if (!moved)
			break;
	}
	return CRUX_OK;
}

/* Component members[0..cn) (in rank order) as a cluster of their own. */
static crux_status_t refine_build(struct refine_c *c, struct crux_sched_topo *t,
				  const struct crux_sched_job *jobs,
				  const struct crux_sched_schedule *s, const int *members,
				  size_t cn)
{
	crux_status_t st;

	c->n = cn;
	c->evals = 0;
	for (size_t a = 0; a < cn; a++)
		c->jobs[a] = jobs[members[a]];
	st = crux_sched_schedule_new(c->jobs, cn, s->levels, &c->s);
	if (st)
		return st;
	c->s->eval_model = s->eval_model;
	memcpy(c->s->share, s->share, sizeof(c->s->share));
	for (size_t a = 0; a < cn; a++) {
		const struct crux_sched_decision *d = &s->d[members[a]];
		int *p = c->s->d[a].path;

		memcpy(p, d->path, (size_t)jobs[members[a]].n_flows * sizeof(int));
		c->s->d[a] = *d;
		c->s->d[a].path = p;
	}
	return crux_sched_job_links_build(t, c->jobs, cn, c->s, &c->jl);
}

static void refine_unbuild(struct refine_c *c)
{
	crux_sched_job_links_free(&c->jl);
	memset(&c->jl, 0, sizeof(c->jl));
	crux_sched_schedule_free(c->s);
	c->s = NULL;
}

/* Insertion sort by rank (components are at most CRUX_SCHED_REFINE_MAX_JOBS). */
static void sort_by_rank(int *m, size_t cn, const struct crux_sched_schedule *s)
{
	for (size_t i = 1; i < cn; i++)
		for (size_t j = i; j > 0 && s->d[m[j - 1]].rank > s->d[m[j]].rank; j--) {
			int x = m[j];

			m[j] = m[j - 1];
			m[j - 1] = x;
		}
}

/* Guarded: each job's bound times its isolated time, as the guard takes them
 * (iso: scratch of n). */
static void refine_guard_held(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
			      size_t n, const struct crux_sched_params *p,
			      const struct job_links *jl, double *held, double *iso)
{
	crux_sched_guard_bounds(t, jobs, n, jl, p->max_slowdown, held, iso);
	for (size_t i = 0; i < n; i++)
		held[i] *= iso[i];
}

/*
 * Guarded, where a job moved: the whole plan with the guard's levels (T0)
 * and with the moves (T1). Where the components, each evaluated on its own,
 * let a job past its cap in the whole plan, or the whole plan lost, the
 * guard's levels come back. Then the guard's counts: violators, and
 * reported jobs now held within their bound.
 */
static crux_status_t refine_guard_check(struct crux_sched_eval *ev, struct crux_sched_topo *t,
					const struct crux_sched_job *jobs, size_t n,
					const struct job_links *jl, double *T0, const int *lev0,
					const double *held, int moves0,
					struct crux_sched_schedule *s)
{
	double *T1 = malloc(n * sizeof(double)), u0 = 0, u1 = 0;
	int *lev1 = malloc(n * sizeof(int)), keep = 1;
	crux_status_t st = T1 && lev1 ? CRUX_OK : CRUX_ERR_NOMEM;

	for (size_t i = 0; !st && i < n; i++) {
		lev1[i] = s->d[i].level;
		s->d[i].level = lev0[i];
	}
	if (!st)
		st = crux_sched_evaluate_links(ev, t, jobs, n, s, jl, 0, T0, &u0);
	for (size_t i = 0; !st && i < n; i++)
		s->d[i].level = lev1[i];
	if (!st)
		st = crux_sched_evaluate_links(ev, t, jobs, n, s, jl, 0, T1, &u1);
	for (size_t i = 0; !st && i < n; i++)
		keep &= !(T1[i] > crux_dmax(held[i], T0[i]) * (1 + 1e-9));
	if (st || !keep || !(u1 >= u0)) {
		for (size_t i = 0; lev1 && i < n; i++)
			s->d[i].level = lev0[i];
		if (T1)
			memcpy(T1, T0, n * sizeof(double));
		s->refine_moves = moves0;
	}
	if (!st) {
		s->guard_violators = 0;
		s->guard_infeasible = 0;
		for (size_t i = 0; i < n; i++) {
			int over = T1[i] > held[i] * (1 + 1e-9);

			if (s->d[i].infeasible && !over)
				s->d[i].infeasible = 0;
			s->guard_violators += !s->d[i].infeasible && over;
			s->guard_infeasible += s->d[i].infeasible;
		}
	}
	free(T1);
	free(lev1);
	return st;
}

static crux_status_t refine_plan(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				 size_t n, const struct crux_sched_params *p, int guarded,
				 struct crux_sched_schedule *s)
{
	struct job_links jl = {0};
	struct refine_c *c = NULL;
	struct crux_sched_eval *ev = NULL;
	size_t *loff = NULL;
	int *ljob = NULL, *comp = NULL, *queue = NULL, *lev0 = NULL, L = t->n_links, top;
	double *T0 = NULL, *held = NULL;
	int moves0 = s->refine_moves;
	crux_status_t st;

	st = crux_sched_job_links_build(t, jobs, n, s, &jl);
	if (st)
		return st;
	st = CRUX_ERR_NOMEM;
	comp = malloc(n * sizeof(int));
	queue = malloc(n * sizeof(int));
	c = calloc(1, sizeof(*c));
	if (c)
		c->work = CRUX_SCHED_REFINE_MAX_WORK;
	if (!comp || !queue || !c || crux_sched_eval_new(&ev) ||
	    crux_sched_link_jobs(&jl, n, L, &loff, &ljob))
		goto out;
	c->jobs = malloc(CRUX_SCHED_REFINE_MAX_JOBS * sizeof(*c->jobs));
	c->T = malloc(CRUX_SCHED_REFINE_MAX_JOBS * sizeof(double));
	if (!c->jobs || !c->T)
		goto out;
	top = s->levels - 1;
	if (guarded) {
		c->lim = malloc(CRUX_SCHED_REFINE_MAX_JOBS * sizeof(double));
		c->held = malloc(CRUX_SCHED_REFINE_MAX_JOBS * sizeof(double));
		T0 = malloc(n * sizeof(double));
		held = malloc(n * sizeof(double));
		lev0 = malloc(n * sizeof(int));
		if (!c->lim || !c->held || !T0 || !held || !lev0)
			goto out;
		/* The top level is the urgent jobs' where there are any (as in the guard). */
		for (size_t i = 0; i < n; i++)
			if (jobs[i].urgent)
				top = s->levels - 2;
		refine_guard_held(t, jobs, n, p, &jl, held, T0); /* T0: scratch until the check */
		for (size_t i = 0; i < n; i++)
			lev0[i] = s->d[i].level;
	}
	for (size_t i = 0; i < n; i++)
		comp[i] = -1;
	for (size_t root = 0; root < n; root++) {
		size_t qh = 0, qt = 0;

		if (comp[root] >= 0)
			continue;
		comp[root] = (int)root;
		queue[qt++] = (int)root;
		while (qh < qt) {
			int v = queue[qh++];

			for (size_t k = jl.off[v]; k < jl.off[v + 1]; k++)
				for (size_t q = loff[jl.link[k]]; q < loff[jl.link[k] + 1]; q++)
					if (comp[ljob[q]] < 0) {
						comp[ljob[q]] = (int)root;
						queue[qt++] = ljob[q];
					}
		}
		if (qt < 2 || qt > CRUX_SCHED_REFINE_MAX_JOBS || c->work < (long)qt)
			continue;
		sort_by_rank(queue, qt, s);
		st = refine_build(c, t, jobs, s, queue, qt);
		c->top = top;
		for (size_t a = 0; guarded && a < qt; a++) {
			c->held[a] = held[queue[a]];
			c->pin[a] = jobs[queue[a]].urgent != 0;
		}
		if (!st)
			st = refine_component(c, ev, t, p->refine_gain, guarded || p->refine_free,
					      &s->refine_moves);
		if (!st)
			for (size_t a = 0; a < qt; a++)
				s->d[queue[a]].level = c->s->d[a].level;
		s->refine_evals += c->evals;
		refine_unbuild(c);
		if (st)
			goto out;
	}
	st = guarded && s->refine_moves > moves0
		 ? refine_guard_check(ev, t, jobs, n, &jl, T0, lev0, held, moves0, s)
		 : CRUX_OK;
out:
	crux_sched_eval_free(ev);
	crux_sched_job_links_free(&jl);
	if (c) {
		free(c->jobs);
		free(c->T);
		free(c->lim);
		free(c->held);
		free(c);
	}
	free(T0);
	free(held);
	free(lev0);
	free(loff);
	free(ljob);
	free(comp);
	free(queue);
	return st;
}

crux_status_t crux_sched_compress_refine(struct crux_sched_topo *t,
					 const struct crux_sched_job *jobs, size_t n,
					 const struct crux_sched_params *p,
					 struct crux_sched_schedule *s)
{
	if (!(p->refine_gain > 0) || p->max_slowdown > 0 || s->levels < 2 || n < 2)
		return CRUX_OK;
	return refine_plan(t, jobs, n, p, 0, s);
}

crux_status_t crux_sched_guard_refine(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				      size_t n, const struct crux_sched_params *p,
				      struct crux_sched_schedule *s)
{
	if (!p->guard_refine || !(p->refine_gain > 0) || !(p->max_slowdown > 0) ||
	    p->guard_enforce_all || s->levels < 2 || n < 2)
		return CRUX_OK;
	return refine_plan(t, jobs, n, p, 1, s);
}
