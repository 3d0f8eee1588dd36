/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compression refined by the evaluator (crux_sched_compress_refine): what it
 * may change, what it must keep, and that the reference model (not the
 * evaluator it searches) finds it better than Max-K-Cut's levels alone.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cases.h"
#include "crux/sched.h"
#include "crux/sched_ref.h"
#include "sched_int.h" /* crux_sched_flow_links */

#define NCASES 40

struct plan {
	struct crux_sched_topo *t;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;
};

/* free_order: crux_sched_params.refine_free (-1: the library's default);
 * bound: the guard's max_slowdown (0: off). */
static void plan_full(struct plan *c, uint64_t seed, int nj, int K, double gain, int free_order,
		      double bound)
{
	struct crux_sched_params p;

	c->t = NULL;
	assert_null(crux_bench_small_case(seed, nj, &c->t, &c->js));
	crux_sched_params_default(&p);
	p.levels = K;
	p.refine_gain = gain;
	p.max_slowdown = bound;
	p.guard_refine = 1; /* off by default; nothing without a bound */
	if (free_order >= 0)
		p.refine_free = free_order;
	assert_int_equal(crux_sched_schedule_new(c->js.v, c->js.n, K, &c->s), CRUX_OK);
	assert_int_equal(crux_sched_run(c->t, c->js.v, c->js.n, &p, CRUX_SCHED_CRUX_FULL, c->s),
			 CRUX_OK);
}

static void plan_with(struct plan *c, uint64_t seed, int nj, int K, double gain, int free_order)
{
	plan_full(c, seed, nj, K, gain, free_order, 0);
}

static void plan(struct plan *c, uint64_t seed, int nj, int K, double gain)
{
	plan_with(c, seed, nj, K, gain, -1);
}

static void plan_free(struct plan *c)
{
	crux_sched_schedule_free(c->s);
	crux_sched_jobs_free(&c->js);
	crux_sched_topo_free(c->t);
}

static int share_link(struct crux_sched_topo *t, const struct crux_sched_jobs *js,
		      const struct crux_sched_schedule *s, size_t a, size_t b)
{
	for (int f = 0; f < js->v[a].n_flows; f++) {
		const int *la, *lb;
		int na, nb;

		if (s->d[a].path[f] < 0 ||
		    crux_sched_flow_links(t, &js->v[a], f, s->d[a].path[f], &la, &na))
			continue;
		for (int g = 0; g < js->v[b].n_flows; g++) {
			if (s->d[b].path[g] < 0 ||
			    crux_sched_flow_links(t, &js->v[b], g, s->d[b].path[g], &lb, &nb))
				continue;
			for (int x = 0; x < na; x++)
				for (int y = 0; y < nb; y++)
					if (la[x] == lb[y])
						return 1;
		}
	}
	return 0;
}

/* The evaluator's utilisation, and (T not NULL) each job's iteration time. */
static double eval_times(struct plan *c, double *T)
{
	struct crux_sched_eval *ev;
	double u;

	assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
	assert_int_equal(crux_sched_evaluate(ev, c->t, c->js.v, c->js.n, c->s, T, &u), CRUX_OK);
	crux_sched_eval_free(ev);
	return u;
}

static double eval_util(struct plan *c)
{
	return eval_times(c, NULL);
}

/* Kept to the order (refine_free 0): same paths and order as Max-K-Cut's
 * plan; levels only move within the order (no job above a higher-ranked job
 * it shares a link with), and the evaluator's utilisation never falls. */
static void test_refine_keeps_order_and_paths(void **state)
{
	(void)state;
	int moved = 0;

	for (int cs = 0; cs < 30; cs++) {
		struct plan a, b;
		int nj = 4 + cs % 6;

		plan(&a, 0x3e11 + (uint64_t)cs, nj, 3 + cs % 4, 0);
		plan_with(&b, 0x3e11 + (uint64_t)cs, nj, 3 + cs % 4, 0.01, 0);
		assert_int_equal(a.s->refine_evals, 0);
		assert_true(b.s->refine_evals <= CRUX_SCHED_REFINE_MAX_WORK);
		moved += b.s->refine_moves;
		for (size_t i = 0; i < a.js.n; i++) {
			assert_int_equal(a.s->d[i].rank, b.s->d[i].rank);
			for (int f = 0; f < a.js.v[i].n_flows; f++)
				assert_int_equal(a.s->d[i].path[f], b.s->d[i].path[f]);
			for (size_t k = 0; k < a.js.n; k++)
				if (b.s->d[i].rank < b.s->d[k].rank &&
				    share_link(b.t, &b.js, b.s, i, k))
					assert_true(b.s->d[i].level >= b.s->d[k].level);
		}
		assert_true(eval_util(&b) >= eval_util(&a) * (1 - 1e-9));
		if (!b.s->refine_moves) /* nothing moved: Max-K-Cut's levels */
			for (size_t i = 0; i < a.js.n; i++)
				assert_int_equal(a.s->d[i].level, b.s->d[i].level);
		plan_free(&a);
		plan_free(&b);
	}
	assert_true(moved > 0); /* the test means something */
}

/* Plan a (gain ga, refine_free fa; -1 the default) against plan b on the 40
 * optimality cases at K = 3, both run in the reference (per flow, 2 draws):
 * cases where b is better / worse by > 1 %, and the summed utilisations. */
struct ref_cmp {
	int better, worse;
	double sa, sb;
};

static struct ref_cmp ref_compare(double ga, int fa, double gb, int fb)
{
	struct ref_cmp r = {0, 0, 0, 0};

	for (int cs = 0; cs < NCASES; cs++) {
		struct plan a, b;
		struct crux_sched_ref_params rp;
		double ua, ub;

		plan_with(&a, 0x7ef1 + (uint64_t)cs, 5 + cs % 4, 3, ga, fa);
		plan_with(&b, 0x7ef1 + (uint64_t)cs, 5 + cs % 4, 3, gb, fb);
		crux_sched_ref_params_default(&rp);
		rp.phases = 2;
		rp.seed = (uint64_t)cs + 1;
		assert_int_equal(
		    crux_sched_reference(a.t, a.js.v, a.js.n, a.s, &rp, NULL, &ua, NULL), CRUX_OK);
		assert_int_equal(
		    crux_sched_reference(b.t, b.js.v, b.js.n, b.s, &rp, NULL, &ub, NULL), CRUX_OK);
		r.better += ub > ua * 1.01;
		r.worse += ub < ua / 1.01;
		r.sa += ua;
		r.sb += ub;
		plan_free(&a);
		plan_free(&b);
	}
	return r;
}

/* Judged by the reference model (per flow, 2 phase draws), the refined levels
 * (the library's default, free of the order) beat Max-K-Cut's alone: in
 * sched-refcheck's 200 cases 70 better and 3 worse by > 1 %, +1.45 % per
 * case (K = 8; kept to the order 55 / 2, +0.97 %). Here: 40 optimality cases
 * at K = 3 (23 better, 1 worse; kept to the order 21 / 0, and 17 / 2 before a
 * group's traces were read on every link). Fails on Max-K-Cut alone
 * (refine_gain 0: no case differs). */
static void test_refine_wins_in_reference(void **state)
{
	(void)state;
	struct ref_cmp r = ref_compare(0, -1, CRUX_SCHED_DEF_REFINE_GAIN, -1);

	print_message("refined vs Max-K-Cut, reference: %d better, %d worse by > 1 %%, mean "
		      "%+.2f %%\n",
		      r.better, r.worse, 100 * (r.sb / r.sa - 1));
	assert_true(r.better >= 2 * r.worse + 3);
	assert_true(r.sb > r.sa);
}

/* Free of the order (refine_free 1): same paths and ranks as Max-K-Cut's
 * plan, the evaluator's utilisation never falls, and some job does end
 * above a higher-ranked job it shares a link with (else the freedom is
 * never used and this is the test above). */
static void test_refine_free_moves_past_the_order(void **state)
{
	(void)state;
	int past = 0;

	for (int cs = 0; cs < 30; cs++) {
		struct plan a, b;
		int nj = 4 + cs % 6;

		plan(&a, 0x3e11 + (uint64_t)cs, nj, 3 + cs % 4, 0);
		plan_with(&b, 0x3e11 + (uint64_t)cs, nj, 3 + cs % 4, 0.01, 1);
		assert_true(b.s->refine_evals <= CRUX_SCHED_REFINE_MAX_WORK);
		for (size_t i = 0; i < a.js.n; i++) {
			assert_int_equal(a.s->d[i].rank, b.s->d[i].rank);
			for (int f = 0; f < a.js.v[i].n_flows; f++)
				assert_int_equal(a.s->d[i].path[f], b.s->d[i].path[f]);
			for (size_t k = 0; k < a.js.n; k++)
				past += b.s->d[i].rank < b.s->d[k].rank &&
					b.s->d[i].level < b.s->d[k].level &&
					share_link(b.t, &b.js, b.s, i, k);
		}
		assert_true(eval_util(&b) >= eval_util(&a) * (1 - 1e-9));
		plan_free(&a);
		plan_free(&b);
	}
	print_message("free refinement: %d job pairs against the order in 30 cases\n", past);
	assert_true(past > 0);
}

/* Judged by the reference model, the refinement free of the order beats the
 * one kept to it. sched-refcheck (200 cases, crux-full against Max-K-Cut
 * alone, per case): K = 8 +1.45 % (70 better / 3 worse by > 1 %) against
 * +0.97 % (55 / 2) kept to the order; held-out seed 77 +1.24 % (59 / 10)
 * against +0.90 % (45 / 4); K = 3 +1.92 % (92 / 3) against +1.54 % (83 / 3).
 * Here, the 40 cases of the test above: 8 better, 3 worse, +0.23 %. Fails
 * where the two are the same search (no case differs). */
static void test_refine_free_wins_in_reference(void **state)
{
	(void)state;
	struct ref_cmp r =
	    ref_compare(CRUX_SCHED_DEF_REFINE_GAIN, 0, CRUX_SCHED_DEF_REFINE_GAIN, 1);

	print_message("free vs kept to the order, reference: %d better, %d worse by > 1 %%, mean "
		      "%+.2f %%\n",
		      r.better, r.worse, 100 * (r.sb / r.sa - 1));
	assert_true(r.better > r.worse);
	assert_true(r.sb > r.sa);
}

/* Off at 0, one level, or with the guard on: nothing evaluated. */
static void test_refine_noop_cases(void **state)
{
	(void)state;
	struct plan a;
	struct crux_sched_params p;

	plan(&a, 0x51, 6, 1, 0.01);
	assert_int_equal(a.s->refine_evals, 0);
	for (size_t i = 0; i < a.js.n; i++)
		assert_int_equal(a.s->d[i].level, 0);
	crux_sched_params_default(&p);
	p.refine_gain = 0;
	a.s->levels = 1;
	assert_int_equal(crux_sched_compress_refine(a.t, a.js.v, a.js.n, &p, a.s), CRUX_OK);
	assert_int_equal(a.s->refine_evals, 0);
	plan_free(&a);
	/* The fairness guard on: Max-K-Cut's levels go to the guard as they are
	 * (crux_sched_guard_refine runs after it), and the guarded refinement
	 * is off by default and does nothing without the guard, at gain 0 or for
	 * the guard's first
	 * version (every bound enforced). */
	for (int cs = 0; cs < 10; cs++) {
		struct plan b;
		struct crux_sched_params q;

		plan(&b, 0x3e11 + (uint64_t)cs, 6, 4, 0.01);
		crux_sched_params_default(&q);
		q.levels = 4;
		q.max_slowdown = 2;
		b.s->refine_evals = 0;
		assert_int_equal(crux_sched_compress_refine(b.t, b.js.v, b.js.n, &q, b.s), CRUX_OK);
		assert_int_equal(b.s->refine_evals, 0);
		assert_int_equal(q.guard_refine, 0); /* off by default */
		assert_int_equal(crux_sched_guard_refine(b.t, b.js.v, b.js.n, &q, b.s), CRUX_OK);
		assert_int_equal(b.s->refine_evals, 0);
		q.guard_refine = 1;
		q.guard_enforce_all = 1;
		assert_int_equal(crux_sched_guard_refine(b.t, b.js.v, b.js.n, &q, b.s), CRUX_OK);
		q.guard_enforce_all = 0;
		q.refine_gain = 0;
		assert_int_equal(crux_sched_guard_refine(b.t, b.js.v, b.js.n, &q, b.s), CRUX_OK);
		q.refine_gain = 0.01;
		q.max_slowdown = 0;
		assert_int_equal(crux_sched_guard_refine(b.t, b.js.v, b.js.n, &q, b.s), CRUX_OK);
		assert_int_equal(b.s->refine_evals, 0);
		plan_free(&b);
	}
}

/* Each job's time at full link rates on its paths, times its bound: the cap
 * the guard holds it to (as crux_sched_guard takes the isolated time). */
static void held_times(struct plan *c, double bound, double *held)
{
	struct job_links jl;

	assert_int_equal(crux_sched_job_links_build(c->t, c->js.v, c->js.n, c->s, &jl), CRUX_OK);
	for (size_t i = 0; i < c->js.n; i++) {
		double tau = 0;

		for (size_t k = jl.off[i]; k < jl.off[i + 1]; k++)
			tau = fmax(tau, jl.bytes[k] / c->t->lbw[jl.link[k]]);
		held[i] = bound * crux_sched_isolated_iter(&c->js.v[i], tau);
	}
	crux_sched_job_links_free(&jl);
}

/* After the guard (crux_sched_guard_refine): same paths; no job the guard
 * held within its bound ends above it, none above it gets slower, the
 * evaluator's utilisation never falls, the counts the guard reports stay
 * true, and in some cases it gains. Fails before the guarded refinement (the
 * guard's plan was final: no case gained). */
static void test_guard_refine_keeps_bounds(void **state)
{
	(void)state;
	static const double bounds[3] = {1.5, 2, 3};
	int gained = 0, moved = 0;

	for (int cs = 0; cs < 30; cs++) {
		struct plan a, b;
		int nj = 5 + cs % 5, K = 3 + cs % 4;
		double bound = bounds[cs % 3], Ta[16], Tb[16], held[16], ua, ub;
		int viol = 0, inf = 0;

		plan_full(&a, 0x9a7d + (uint64_t)cs, nj, K, 0, -1, bound);
		plan_full(&b, 0x9a7d + (uint64_t)cs, nj, K, CRUX_SCHED_DEF_REFINE_GAIN, -1, bound);
		assert_true(a.js.n <= 16);
		ua = eval_times(&a, Ta);
		ub = eval_times(&b, Tb);
		held_times(&b, bound, held);
		for (size_t i = 0; i < a.js.n; i++) {
			for (int f = 0; f < a.js.v[i].n_flows; f++)
				assert_int_equal(a.s->d[i].path[f], b.s->d[i].path[f]);
			assert_true(Tb[i] <= fmax(held[i], Ta[i]) * (1 + 1e-6));
			/* a job still reported is above its bound; one within it is not */
			if (b.s->d[i].infeasible)
				assert_true(Tb[i] > held[i] * (1 - 1e-6));
			viol += !b.s->d[i].infeasible && Tb[i] > held[i] * (1 + 1e-6);
			inf += b.s->d[i].infeasible;
		}
		assert_true(ub >= ua * (1 - 1e-9));
		assert_int_equal(b.s->guard_violators, viol);
		assert_int_equal(b.s->guard_infeasible, inf);
		assert_true(b.s->guard_violators <= a.s->guard_violators);
		gained += ub > ua * (1 + CRUX_SCHED_DEF_REFINE_GAIN);
		moved += b.s->refine_moves;
		plan_free(&a);
		plan_free(&b);
	}
	print_message("guarded refinement: %d of 30 cases gained, %d moves\n", gained, moved);
	assert_true(gained > 0);
}

/* Judged by the reference model (per flow, 2 phase draws): the guarded
 * refinement against the guard's plan alone, at bound 3 and K = 3 on the 40
 * optimality cases: utilisation, and held jobs (not reported) above the
 * bound by more than 2 % (sched-guard's tolerance). Here 15 better, 0 worse
 * by > 1 %, +1.37 %, held jobs above the bound 1 -> 0 (at bound 1.5 the
 * guard leaves little to win: 1 better). Fails before it (the guard's plan
 * was final: no case differs). */
static void test_guard_refine_in_reference(void **state)
{
	(void)state;
	int better = 0, worse = 0, above_a = 0, above_b = 0;
	double sa = 0, sb = 0;

	for (int cs = 0; cs < NCASES; cs++) {
		struct plan a, b;
		struct crux_sched_ref_params rp;
		double ua, ub, Ta[16], Tb[16], held[16];

		plan_full(&a, 0x7ef1 + (uint64_t)cs, 5 + cs % 4, 3, 0, -1, 3);
		plan_full(&b, 0x7ef1 + (uint64_t)cs, 5 + cs % 4, 3, CRUX_SCHED_DEF_REFINE_GAIN, -1,
			  3);
		assert_true(a.js.n <= 16);
		crux_sched_ref_params_default(&rp);
		rp.phases = 2;
		rp.seed = (uint64_t)cs + 1;
		assert_int_equal(crux_sched_reference(a.t, a.js.v, a.js.n, a.s, &rp, Ta, &ua, NULL),
				 CRUX_OK);
		assert_int_equal(crux_sched_reference(b.t, b.js.v, b.js.n, b.s, &rp, Tb, &ub, NULL),
				 CRUX_OK);
		held_times(&a, 3, held);
		for (size_t i = 0; i < a.js.n; i++) {
			above_a += !a.s->d[i].infeasible && Ta[i] > 1.02 * held[i];
			above_b += !b.s->d[i].infeasible && Tb[i] > 1.02 * held[i];
		}
		better += ub > ua * 1.01;
		worse += ub < ua / 1.01;
		sa += ua;
		sb += ub;
		plan_free(&a);
		plan_free(&b);
	}
	print_message("guarded refinement, reference: %d better, %d worse by > 1 %%, mean %+.2f "
		      "%%; held jobs above the bound %d -> %d\n",
		      better, worse, 100 * (sb / sa - 1), above_a, above_b);
	assert_true(better >= 2 * worse + 5);
	assert_true(sb > sa);
	assert_true(above_b <= above_a);
}

/* The evaluator's answer for a job does not depend on its place in the list
 * (phase draws follow the job's id): what lets the refinement evaluate a
 * component as a cluster of its own. Failed when the draws followed the
 * index (a 7-job case moved by 0.9 %). */
static void test_eval_order_invariant(void **state)
{
	(void)state;
	for (int cs = 0; cs < 20; cs++) {
		struct plan a;
		struct crux_sched_jobs rj;
		struct crux_sched_schedule *r;
		struct crux_sched_eval *ev;
		double Ta[16], Tr[16], ua, ur;

		plan(&a, 0x3e11 + (uint64_t)cs, 4 + cs % 6, 3 + cs % 4, 0);
		size_t n = a.js.n;

		crux_sched_jobs_init(&rj);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(crux_sched_jobs_add(&rj, &a.js.v[n - 1 - i]), CRUX_OK);
		assert_int_equal(crux_sched_schedule_new(rj.v, n, a.s->levels, &r), CRUX_OK);
		r->eval_model = a.s->eval_model;
		for (size_t i = 0; i < n; i++) {
			const struct crux_sched_decision *d = &a.s->d[n - 1 - i];
			int *pth = r->d[i].path;

			for (int f = 0; f < rj.v[i].n_flows; f++)
				pth[f] = d->path[f];
			r->d[i] = *d;
			r->d[i].path = pth;
		}
		assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
		assert_int_equal(crux_sched_evaluate(ev, a.t, a.js.v, n, a.s, Ta, &ua), CRUX_OK);
		assert_int_equal(crux_sched_evaluate(ev, a.t, rj.v, n, r, Tr, &ur), CRUX_OK);
		crux_sched_eval_free(ev);
		for (size_t i = 0; i < n; i++)
			assert_true(fabs(Ta[n - 1 - i] - Tr[i]) <= 1e-9 * Ta[n - 1 - i]);
		assert_true(fabs(ua - ur) <= 1e-9 * ua);
		crux_sched_schedule_free(r);
		crux_sched_jobs_free(&rj);
		plan_free(&a);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_eval_order_invariant),
	    cmocka_unit_test(test_refine_keeps_order_and_paths),
	    cmocka_unit_test(test_refine_wins_in_reference),
	    cmocka_unit_test(test_refine_free_moves_past_the_order),
	    cmocka_unit_test(test_refine_free_wins_in_reference),
	    cmocka_unit_test(test_refine_noop_cases),
	    cmocka_unit_test(test_guard_refine_keeps_bounds),
	    cmocka_unit_test(test_guard_refine_in_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
