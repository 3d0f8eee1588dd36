/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A job whose flows cross the traffic of several higher-level jobs, judged
 * by the reference model (crux/sched_ref.h): the evaluator runs it against
 * each higher job's own send trace per link (a traced job's flows load each
 * of its links at their own rates, and its trace repeats over a whole number
 * of the windows it met), so its iteration time follows the reference's.
 * Before, such a job kept a fluid bound, off by more than 5 % for 105 of the
 * 255 jobs checked here (sched-refcheck: 283 of 2,200 schedules outside).
 * Where the higher jobs' periods differ, the trace is longer (below).
 */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "crux/sched.h"
#include "crux/sched_ref.h"
#include "sched_int.h" /* crux_sched_eval_set_peers */

/* One small case planned by Crux-full, then every job on a level of a
 * seeded random order (more jobs meet several higher ones than under Crux's
 * order alone), run through the phase-aware evaluator and the reference. */
struct rcase {
	struct crux_sched_topo *t;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;
	double Te[16], Tr[16], ue, ur;
};

static void rcase_run_k(struct rcase *c, uint64_t seed, int nj, int K)
{
	struct crux_sched_params p;
	struct crux_sched_eval *ev = NULL;
	struct crux_sched_ref_params rp;

	c->t = NULL;
	c->s = NULL;
	assert_null(crux_bench_small_case(seed, nj, &c->t, &c->js));
	crux_sched_params_default(&p);
	p.levels = 8;
	p.refine_gain = 0; /* only the paths are kept: the levels are drawn below */
	assert_int_equal(crux_sched_schedule_new(c->js.v, c->js.n, p.levels, &c->s), CRUX_OK);
	assert_int_equal(crux_sched_run(c->t, c->js.v, c->js.n, &p, CRUX_SCHED_CRUX_FULL, c->s),
			 CRUX_OK);
	for (size_t i = 0; i < c->js.n; i++)
		c->s->d[i].level = (int)(crux_bench_rnd(&seed) % (uint64_t)K);
	c->s->eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
	assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
	assert_int_equal(crux_sched_evaluate(ev, c->t, c->js.v, c->js.n, c->s, c->Te, &c->ue),
			 CRUX_OK);
	crux_sched_eval_free(ev);
	crux_sched_ref_params_default(&rp);
	rp.seed = seed;
	assert_int_equal(
	    crux_sched_reference(c->t, c->js.v, c->js.n, c->s, &rp, c->Tr, &c->ur, NULL), CRUX_OK);
}

static void rcase_run(struct rcase *c, uint64_t seed, int nj)
{
	rcase_run_k(c, seed, nj, 8);
}

static void rcase_free(struct rcase *c)
{
	crux_sched_schedule_free(c->s);
	crux_sched_jobs_free(&c->js);
	crux_sched_topo_free(c->t);
}

/* Per job under several higher jobs: |evaluator / reference - 1| <= 5 %? */
static void count_case(uint64_t seed, int nj, int *n, int *within)
{
	struct rcase c;

	rcase_run(&c, seed, nj);
	for (size_t i = 0; i < c.js.n; i++) {
		int higher = 0;

		for (size_t k = 0; k < c.js.n; k++)
			higher +=
			    k != i && c.s->d[k].level > c.s->d[i].level && c.js.v[k].n_flows > 0;
		if (higher < 2 || c.js.v[i].n_flows == 0 || !(c.Tr[i] > 0) ||
		    c.Tr[i] > 20 * c.js.v[i].compute)
			continue; /* starved in the reference: its time is a bound there */
		(*n)++;
		*within += fabs(c.Te[i] / c.Tr[i] - 1) <= 0.05;
	}
	rcase_free(&c);
}

static void test_several_higher_follow_reference(void **state)
{
	int n = 0, within = 0;

	(void)state;
	for (uint64_t c = 0; c < 120; c++)
		count_case(0x5e7e2a11ull + c * 7919, 3 + (int)(c % 4), &n, &within);
	printf("jobs under several higher jobs: %d of %d within 5 %% of the reference\n", within,
	       n);
	assert_true(n >= 150);
	/* 217 of 255 (85 %) since a job reads a group's traces on every link
	 * (209 when members were averaged where they had peers); 206 when a
	 * higher level's peers were first run together (eval_peers.c); 177
	 * before (69 %; 172 before a job out of work kept its simulated
	 * iterations); the old fluid bound: 150 (59 %). */
	assert_true(within * 100 >= n * 84);
}

/*
 * Two top jobs on two links in a line, a middle job across both (its send
 * trace follows both) and a low job across both under all three. The
 * middle job's trace, repeated every span, is a whole number of one top
 * period only and falls out of step with the other; a longer trace (more
 * iterations where the higher periods differ) repeats less often.
 */
static const char line[] = "host a0 a1 b1 b2 c0 c2 d0 d2\nswitch s0 s1 s2\n"
			   "link a0 s0 100\nlink c0 s0 100\nlink d0 s0 100\n"
			   "link a1 s1 100\nlink b1 s1 100\n"
			   "link b2 s2 100\nlink c2 s2 100\nlink d2 s2 100\n"
			   "link s0 s1 100\nlink s1 s2 100\n";

/* The low job's |evaluator / reference - 1| in one such case. */
static double chain_error(uint64_t *seed)
{
	struct crux_sched_topo *t = NULL;
	struct crux_sched_err err = {{0}};
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s = NULL;
	struct crux_sched_eval *ev = NULL;
	struct crux_sched_ref_params rp;
	double Te[4], Tr[4], ue, ur, c[4], b[4];
	char jobs[512];
	static const int lv[4] = {7, 7, 6, 5};

	for (int i = 0; i < 4; i++) {
		c[i] = 0.05 + 0.45 * (double)(crux_bench_rnd(seed) % 1000) / 1000;
		b[i] = (0.2 + 2.0 * (double)(crux_bench_rnd(seed) % 1000) / 1000) * 1e9;
	}
	snprintf(jobs, sizeof(jobs),
		 "job 0 hosts=a0,a1 compute=%.4f allreduce=%.4g\n"
		 "job 1 hosts=b1,b2 compute=%.4f allreduce=%.4g\n"
		 "job 2 hosts=c0,c2 compute=%.4f allreduce=%.4g\n"
		 "job 3 hosts=d0,d2 compute=%.4f allreduce=%.4g\n",
		 c[0], b[0], c[1], b[1], c[2], b[2], c[3], b[3]);
	assert_int_equal(crux_sched_topo_parse(line, sizeof(line) - 1, "line", &t, &err), CRUX_OK);
	crux_sched_jobs_init(&js);
	assert_int_equal(crux_sched_jobs_parse(jobs, strlen(jobs), "jobs", t, &js, &err), CRUX_OK);
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 8, &s), CRUX_OK);
	assert_int_equal(crux_sched_paths_ecmp(t, js.v, js.n, 1, s), CRUX_OK);
	for (size_t i = 0; i < js.n; i++)
		s->d[i].level = lv[i];
	s->eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
	assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
	assert_int_equal(crux_sched_evaluate(ev, t, js.v, js.n, s, Te, &ue), CRUX_OK);
	crux_sched_ref_params_default(&rp);
	assert_int_equal(crux_sched_reference(t, js.v, js.n, s, &rp, Tr, &ur, NULL), CRUX_OK);
	crux_sched_eval_free(ev);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
	if (!(Tr[3] > 0) || Tr[3] > 20 * c[3])
		return -1; /* starved in the reference: its time is a bound there */
	return fabs(Te[3] / Tr[3] - 1);
}

static void test_mixed_periods_chain(void **state)
{
	uint64_t seed = 0xc4a1bull;
	int n = 0, within = 0;
	double sum = 0;

	(void)state;
	for (int k = 0; k < 60; k++) {
		double e = chain_error(&seed);

		if (e < 0)
			continue;
		n++;
		sum += e;
		within += e <= 0.1;
	}
	printf("low job under a traced job and two top jobs: %d of %d within 10 %% of the "
	       "reference, mean error %.1f %%\n",
	       within, n, 100 * sum / (n ? n : 1));
	assert_true(n >= 30);
	/* 43 of 49 within 10 %, mean 6.3 %, with the top jobs read in the
	 * traced job's frame (gap_anchor); 21 of 49, 16.0 % with each top job
	 * repeating on its own period, out of step with the traced job's
	 * sends; 16 of 49, 19.4 % with every trace of 10 iterations. */
	assert_true(within >= 38);
	assert_true(sum / n <= 0.09);
}

/*
 * Where the gap simulation runs out of work (a job under several higher
 * jobs meets every change of their traces), the whole iterations it ran
 * stand; before, the job fell back to the fluid bound, whose floor misses
 * the starvation the reference shows where the higher jobs interleave.
 * Schedules of 8-10 jobs in random level orders, utilisation within 5 % of
 * the reference: 223 of 300 since a level's peers are run together, under
 * the higher levels too, and leave their traces (198 with only the peers no
 * higher level meets run so, 199 before either; 197 before the whole
 * iterations stood; 203 before the higher jobs were read in a traced job's
 * frame, which gains on sched-refcheck's schedules, 91.5 -> 92.8 %, and
 * loses 4 of these).
 */
static int within_case(uint64_t seed, int nj)
{
	struct rcase c;
	int in;

	rcase_run(&c, seed, nj);
	in = fabs(c.ue / c.ur - 1) <= 0.05;
	rcase_free(&c);
	return in;
}

static void test_out_of_work_keeps_iterations(void **state)
{
	int within = 0;

	(void)state;
	for (uint64_t c = 0; c < 300; c++)
		within += within_case(0x57a4e5ull + c * 104729, 8 + (int)(c % 3));
	printf("random level orders: %d of 300 schedules within 5 %% of the reference\n", within);
	/* 263; 223 with a group's members averaged where they have peers. */
	assert_true(within >= 250);
}

/*
 * One level: every job of a small case (or of the one shared link) on the
 * same level, so each meets its peers only while both send and how often
 * depends on how their phases settle. The evaluator runs such a group
 * together (eval_peers.c); its closed form (a blend of peers sending
 * independently and of their average load) was outside +-5 % of the
 * reference on 22 % of sched-refcheck's one-link schedules. Three in four
 * cases here are on one link, the others on a small Clos.
 */
static int one_level_within(uint64_t seed, int nj, int single, int peers)
{
	struct crux_sched_topo *t = NULL;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s = NULL;
	struct crux_sched_params p;
	struct crux_sched_eval *ev = NULL;
	struct crux_sched_ref_params rp;
	double ue, ur;

	if (single) {
		assert_null(crux_bench_single_link(&t));
		crux_sched_jobs_init(&js);
		for (int i = 0; i < nj; i++) {
			/* Job i sends from 1-3 hosts of its own into h0 (the one
			 * shared link), as sched-refcheck's one-link cases do. */
			double c = crux_bench_urand(&seed, 0.05, 0.5);
			double ov = crux_bench_rnd(&seed) % 2 ? crux_bench_urand(&seed, 0, 0.6) : 0;
			int nf = 1 + (int)(crux_bench_rnd(&seed) % 3), hosts[4] = {0};
			double per = crux_bench_urand(&seed, 0.1, 1.5) * c * 12.5e9 / nf;
			struct crux_sched_flow fl[3];

			for (int k = 0; k < nf; k++) {
				hosts[1 + k] = 1 + (i * 3 + k) % 10;
				fl[k] = (struct crux_sched_flow){hosts[1 + k], 0, per};
			}
			struct crux_sched_job jb = {.id = (uint64_t)i + 1,
						    .compute = c,
						    .overlap = ov,
						    .gpus = 8 * (nf + 1),
						    .work = 8 * (nf + 1) * c,
						    .n_hosts = nf + 1,
						    .hosts = hosts,
						    .n_flows = nf,
						    .flows = fl};

			assert_int_equal(crux_sched_jobs_add(&js, &jb), CRUX_OK);
		}
	} else
		assert_null(crux_bench_small_case(seed, nj, &t, &js));
	crux_sched_params_default(&p);
	p.levels = 8;
	p.refine_gain = 0; /* only the paths are kept: one level below */
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, p.levels, &s), CRUX_OK);
	assert_int_equal(crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, s), CRUX_OK);
	for (size_t i = 0; i < js.n; i++)
		s->d[i].level = 0;
	s->eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
	assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
	crux_sched_eval_set_peers(peers);
	assert_int_equal(crux_sched_evaluate(ev, t, js.v, js.n, s, NULL, &ue), CRUX_OK);
	crux_sched_eval_set_peers(2);
	crux_sched_eval_free(ev);
	crux_sched_ref_params_default(&rp);
	rp.seed = seed;
	assert_int_equal(crux_sched_reference(t, js.v, js.n, s, &rp, NULL, &ur, NULL), CRUX_OK);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
	return fabs(ue / ur - 1) <= 0.05;
}

static void test_one_level_peers_run_together(void **state)
{
	int within[2] = {0, 0};

	(void)state;
	for (int peers = 0; peers < 2; peers++)
		for (uint64_t c = 0; c < 60; c++)
			within[peers] += one_level_within(0x9ee75ull + c * 6151, 3 + (int)(c % 8),
							  c % 4 != 0, 2 * peers);
	printf("one level: %d of 60 schedules within 5 %% of the reference run together, "
	       "%d with the closed form\n",
	       within[1], within[0]);
	/* 60 run together; the closed form: 48, so it fails this. */
	assert_true(within[1] >= 56);
}

/*
 * Three levels in random order: most jobs share a level with peers and sit
 * under higher jobs too. Such a group is run together in what the higher
 * jobs' windows and traces leave of its links, and leaves its own traces
 * for the levels below (sched-refcheck at K = 3: 86.7 -> 92.6 % of
 * schedules within +-5 %).
 */
static void test_peers_under_higher_levels(void **state)
{
	int within[2] = {0, 0};

	(void)state;
	for (int m = 0; m < 2; m++)
		for (uint64_t c = 0; c < 100; c++) {
			struct rcase rc;

			crux_sched_eval_set_peers(m + 1);
			rcase_run_k(&rc, 0x3e7e1ull + c * 7727, 5 + (int)(c % 6), 3);
			crux_sched_eval_set_peers(2);
			within[m] += fabs(rc.ue / rc.ur - 1) <= 0.05;
			rcase_free(&rc);
		}
	printf("three levels: %d of 100 schedules within 5 %% of the reference with peers run "
	       "under higher levels, %d with only the peers no higher level meets\n",
	       within[1], within[0]);
	/* 90 of 100 (75 with only the peers no higher level meets); 69 (64)
	 * with a group's members averaged where they have peers. */
	assert_true(within[1] >= 85);
}

/* Do jobs a and b share a link (jl: the schedule's links per job)? */
static int share_link(const struct job_links *jl, size_t a, size_t b)
{
	for (size_t x = jl->off[a]; x < jl->off[a + 1]; x++)
		for (size_t y = jl->off[b]; y < jl->off[b + 1]; y++)
			if (jl->link[x] == jl->link[y])
				return 1;
	return 0;
}

/*
 * A job under a group of peers (two higher jobs of one level that share a
 * link, so the evaluator runs them together): it reads each member's trace,
 * which carries the member's own load on each link, shared links included.
 * Before, a member was taken at its average load on every link where it had
 * a peer (as when peers were not run together), and at its trace elsewhere:
 * a lower flow crossing both kinds of link was held to the average even in
 * the group's gaps, and one crossing only shared links was never made to
 * wait for them (sched-refcheck, 200 cases: 91.6 -> 97.3 % of schedules
 * within +-5 %).
 */
static void test_under_a_group_reads_its_traces(void **state)
{
	int n = 0, within = 0;

	(void)state;
	for (uint64_t c = 0; c < 120; c++) {
		struct rcase rc;
		struct job_links jl;

		rcase_run_k(&rc, 0x6a0e5ull + c * 4099, 4 + (int)(c % 7), 3);
		assert_int_equal(crux_sched_job_links_build(rc.t, rc.js.v, rc.js.n, rc.s, &jl),
				 CRUX_OK);
		for (size_t i = 0; i < rc.js.n; i++) {
			int under = 0;

			for (size_t q = 0; q < rc.js.n && !under; q++) {
				if (rc.s->d[q].level <= rc.s->d[i].level || !share_link(&jl, i, q))
					continue;
				for (size_t p = 0; p < rc.js.n && !under; p++)
					under = p != q && rc.s->d[p].level == rc.s->d[q].level &&
						share_link(&jl, p, q);
			}
			if (!under || !(rc.Tr[i] > 0) || rc.Tr[i] > 20 * rc.js.v[i].compute)
				continue; /* starved in the reference: its time is a bound there */
			n++;
			within += fabs(rc.Te[i] / rc.Tr[i] - 1) <= 0.05;
		}
		crux_sched_job_links_free(&jl);
		rcase_free(&rc);
	}
	printf("under a group of peers: %d of %d jobs within 5 %% of the reference\n", within, n);
	assert_true(n >= 100);
	/* 161 of 257; 96 with the members averaged where they have peers. */
	assert_true(within * 100 >= n * 55);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_several_higher_follow_reference),
	    cmocka_unit_test(test_mixed_periods_chain),
	    cmocka_unit_test(test_out_of_work_keeps_iterations),
	    cmocka_unit_test(test_one_level_peers_run_together),
	    cmocka_unit_test(test_peers_under_higher_levels),
	    cmocka_unit_test(test_under_a_group_reads_its_traces),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
