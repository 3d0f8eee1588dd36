/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One whole policy: the steps of sched.c in the policy's order, then (Crux
 * policies) the fairness guard. It sits above both, so neither calls back.
 */
#include <stdlib.h>

#include "sched_int.h"

crux_status_t crux_sched_run(struct crux_sched_topo *t, const struct crux_sched_job *jobs, size_t n,
			     const struct crux_sched_params *p, enum crux_sched_policy pol,
			     struct crux_sched_schedule *s)
{
	crux_status_t st;

	if (s->n_jobs != n || p->levels < 1 || p->levels > CRUX_SCHED_MAX_LEVELS || p->orders < 1 ||
	    p->paths_search < 0 || p->paths_search > 2 ||
	    (p->eval_model != CRUX_SCHED_EVAL_PHASE_AWARE &&
	     p->eval_model != CRUX_SCHED_EVAL_ALL_AT_ONCE))
		return CRUX_ERR_INVAL;
	st = crux_sched_jobs_validate(t, jobs, n);
	if (st)
		return st;
	s->levels = p->levels;
	s->eval_model = p->eval_model;
	st = crux_sched_shares(p, s);
	if (st)
		return st;
	s->cut_weight = 0;
	s->refine_moves = 0;
	s->refine_evals = 0;
	s->paths_moves = 0;
	s->paths_evals = 0;
	s->reference = -1;
	for (size_t i = 0; i < n; i++) {
		s->d[i].k = 1;
		s->d[i].level = 0;
	}
	/* Every policy starts from what the jobs see by default: ECMP paths. */
	st = crux_sched_paths_ecmp(t, jobs, n, p->seed, s);
	if (!st)
		st = crux_sched_intensity(t, jobs, n, s);
	if (st)
		return st;
	switch (pol) {
	case CRUX_SCHED_CRUX_FULL:
		st = crux_sched_paths_select(t, jobs, n, NULL, s);
		if (!st)
			st = crux_sched_levels_full(t, jobs, n, p, s);
		/* On request (p->paths_search): the greedy paths searched further. */
		if (!st)
			st = crux_sched_paths_search(t, jobs, n, p, s);
		if (!st)
			st = crux_sched_guard(t, jobs, n, p, s);
		/* On request (p->guard_refine): what the guard's lifts cost, won back
		 * where no bound suffers. */
		if (!st)
			st = crux_sched_guard_refine(t, jobs, n, p, s);
		return st;
	case CRUX_SCHED_CRUX_PS_PA:
		st = crux_sched_paths_select(t, jobs, n, NULL, s);
		if (!st)
			st = crux_sched_intensity(t, jobs, n, s);
		/* fall through */
	case CRUX_SCHED_CRUX_PA:
		if (!st)
			st = crux_sched_prioritise(jobs, n, p, s);
		if (st)
			return st;
		crux_sched_compress_rank(s);
		return crux_sched_guard(t, jobs, n, p, s);
	case CRUX_SCHED_SINCRONIA:
		st = crux_sched_prio_sincronia(t, jobs, n, s);
		if (st)
			return st;
		crux_sched_rank(s);
		crux_sched_compress_rank(s);
		return CRUX_OK;
	case CRUX_SCHED_VARYS:
		st = crux_sched_prio_varys(jobs, n, s);
		if (st)
			return st;
		crux_sched_rank(s);
		crux_sched_compress_balanced(s);
		return CRUX_OK;
	case CRUX_SCHED_TACCL: {
		size_t *ord = malloc((n ? n : 1) * sizeof(size_t));

		if (!ord)
			return CRUX_ERR_NOMEM;
		for (size_t i = 0; i < n; i++)
			ord[i] = i;
		st = crux_sched_paths_select(t, jobs, n, ord, s);
		free(ord);
		if (!st)
			st = crux_sched_intensity(t, jobs, n, s);
		if (!st)
			st = crux_sched_prio_taccl(t, jobs, n, s);
		if (st)
			return st;
		crux_sched_rank(s);
		return crux_sched_compress_hops(s);
	}
	case CRUX_SCHED_ECMP:
		for (size_t i = 0; i < n; i++) {
			s->d[i].priority = 0;
			s->d[i].rank = (int)i;
			s->d[i].level = 0;
		}
		return CRUX_OK;
	default:
		return CRUX_ERR_INVAL;
	}
}
