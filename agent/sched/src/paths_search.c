/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A search over paths after Crux-full's levels (p->paths_search, issue 26
 * item 4). The greedy selection places the jobs' flows one job at a time
 * and never revisits a choice; judged by the reference model it closes
 * about 70 % of the ECMP -> optimum gap, and a search that flips one or two
 * flows at a time from its paths, each candidate scored with the levels
 * Crux-full would give it, closes 90-95 % (bench sched-optimality-honest
 * --paths-search). This is that search in the planner.
 *
 * A move sends one flow (width 1), or one or two flows (width 2), to other
 * candidate paths; the first move that raises the evaluator's utilisation is
 * kept (first improvement), in passes until none does. Moving a flow
 * changes which jobs meet, so every candidate's levels are planned again:
 * t and I on its paths, P = I (k I with p->correction), ranks, Max-K-Cut,
 * then the evaluator scores it. With p->paths_search_full each candidate
 * also gets the evaluator's refinement of its levels; by default only the
 * searched paths do, once at the end (the plan is kept only where it then
 * beats the greedy one in the evaluator), which costs a seventeenth as much
 * and, judged by the reference model, closes more of the gap (95.0 % at
 * width 2 on the bench's first 20 cases, 90.4 % with every candidate
 * refined). Plans with more than CRUX_SCHED_PATHS_MAX_FLOWS movable flows
 * keep the greedy paths; a plan stops after CRUX_SCHED_PATHS_MAX_EVALS
 * candidates or CRUX_SCHED_PATHS_MAX_WORK jobs planned over all of them.
 */
#include <stdlib.h>

#include "sched_int.h"

#define PATHS_PASSES 10
/* Relative gain a move must bring: above rounding, so equal plans never flip. */
#define PATHS_MIN_GAIN 1e-9

struct movable {
	size_t job;
	int flow;
	int n_paths;
};

crux_status_t crux_sched_levels_full(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				     size_t n, const struct crux_sched_params *p,
				     struct crux_sched_schedule *s)
{
	crux_status_t st = crux_sched_intensity(t, jobs, n, s);

	if (!st)
		st = crux_sched_prioritise(jobs, n, p, s);
	if (!st)
		st = crux_sched_compress(t, jobs, n, p, s);
	if (!st)
		st = crux_sched_compress_refine(t, jobs, n, p, s);
	return st;
}

/* The flows with a choice of paths, in job then flow order; -1: too many. */
static long list_movable(struct crux_sched_topo *t, const struct crux_sched_job *jobs, size_t n,
			 const struct crux_sched_schedule *s, struct movable *mv)
{
	long nm = 0;

	for (size_t i = 0; i < n; i++)
		for (int f = 0; f < jobs[i].n_flows; f++) {
			struct crux_sched_path_set ps;
			const struct crux_sched_flow *fl = &jobs[i].flows[f];

			if (s->d[i].path[f] < 0 || fl->src == fl->dst ||
			    crux_sched_topo_paths(t, fl->src, fl->dst, &ps) || ps.n_paths < 2)
				continue;
			if (nm == CRUX_SCHED_PATHS_MAX_FLOWS)
				return -1;
			mv[nm].job = i;
			mv[nm].flow = f;
			mv[nm].n_paths = ps.n_paths;
			nm++;
		}
	return nm;
}

struct search {
	struct crux_sched_topo *t;
	const struct crux_sched_job *jobs;
	size_t n;
	const struct crux_sched_params *p; /* the candidates' (no refinement unless full) */
	struct crux_sched_schedule *w;	   /* the candidate */
	struct crux_sched_eval *ev;
	int evals;
};

/* The candidate's levels planned again, then its utilisation. */
static crux_status_t score(struct search *c, double *u)
{
	crux_status_t st;

	c->w->refine_moves = 0;
	c->w->refine_evals = 0;
	c->evals++;
	st = crux_sched_levels_full(c->t, c->jobs, c->n, c->p, c->w);
	return st ? st : crux_sched_evaluate(c->ev, c->t, c->jobs, c->n, c->w, NULL, u);
}

crux_status_t crux_sched_paths_search(struct crux_sched_topo *t, const struct crux_sched_job *jobs,
				      size_t n, const struct crux_sched_params *p,
				      struct crux_sched_schedule *s)
{
	struct movable *mv = NULL;
	struct crux_sched_params q = *p;
	struct search c = {t, jobs, n, &q, NULL, NULL, 0};
	struct crux_sched_schedule *start = NULL;
	double best, u0 = 0;
	long nm;
	int moved = 1, moves = 0;
	crux_status_t st;

	s->paths_moves = 0;
	s->paths_evals = 0;
	if (p->paths_search < 0 || p->paths_search > 2)
		return CRUX_ERR_INVAL;
	if (!p->paths_search || n < 1)
		return CRUX_OK;
	mv = malloc(CRUX_SCHED_PATHS_MAX_FLOWS * sizeof(*mv));
	if (!mv)
		return CRUX_ERR_NOMEM;
	nm = list_movable(t, jobs, n, s, mv);
	if (nm < 1) { /* nothing to move, or too much to search */
		free(mv);
		return CRUX_OK;
	}
	if (!p->paths_search_full)
		q.refine_gain = 0; /* Max-K-Cut's levels per candidate */
	st = crux_sched_schedule_new(jobs, n, s->levels, &c.w);
	if (!st)
		st = crux_sched_schedule_new(jobs, n, s->levels, &start);
	if (!st)
		st = crux_sched_eval_new(&c.ev);
	if (!st)
		st = crux_sched_schedule_copy(c.w, s);
	if (!st)
		st = crux_sched_schedule_copy(start, s);
	if (!st)
		st = crux_sched_evaluate(c.ev, t, jobs, n, s, NULL, &u0);
	best = u0;
	if (!st && !p->paths_search_full)
		st = score(&c, &best); /* the start as the candidates are scored */
	for (int pass = 0; !st && moved && pass < PATHS_PASSES; pass++) {
		moved = 0;
		for (long a = 0; !st && a < nm; a++) {
			int *pa = &c.w->d[mv[a].job].path[mv[a].flow];
			int a0 = *pa;

			for (int xa = 1; !st && xa < mv[a].n_paths; xa++)
				for (long b = a; !st && b < (p->paths_search > 1 ? nm : a + 1);
				     b++) {
					int *pb = &c.w->d[mv[b].job].path[mv[b].flow];
					int b0 = *pb, nb = b == a ? 1 : mv[b].n_paths;

					for (int xb = b == a ? 0 : 1; !st && xb < nb; xb++) {
						double u;

						if (c.evals >= CRUX_SCHED_PATHS_MAX_EVALS ||
						    (double)(c.evals + 1) * (double)n >
							CRUX_SCHED_PATHS_MAX_WORK)
							goto done;
						*pa = (a0 + xa) % mv[a].n_paths;
						if (b != a)
							*pb = (b0 + xb) % mv[b].n_paths;
						st = score(&c, &u);
						if (st)
							break;
						if (u > best * (1 + PATHS_MIN_GAIN)) {
							best = u;
							moved = 1;
							moves++;
							st = crux_sched_schedule_copy(s, c.w);
							/* The next moves from the new paths. */
							a0 = *pa;
							break;
						}
						*pa = a0;
						*pb = b0;
					}
				}
		}
	}
done:
	/* Scored without the refinement: the searched paths get it now, and are
	 * kept only where the whole plan beats the greedy one. */
	if (!st && moves && !p->paths_search_full) {
		double u;

		st = crux_sched_levels_full(t, jobs, n, p, s);
		if (!st)
			st = crux_sched_evaluate(c.ev, t, jobs, n, s, NULL, &u);
		if (!st && !(u > u0 * (1 + PATHS_MIN_GAIN))) {
			st = crux_sched_schedule_copy(s, start);
			moves = 0;
		}
	}
	s->paths_moves = moves;
	s->paths_evals = c.evals;
	crux_sched_eval_free(c.ev);
	crux_sched_schedule_free(start);
	crux_sched_schedule_free(c.w);
	free(mv);
	return st;
}
