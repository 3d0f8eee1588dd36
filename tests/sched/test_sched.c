/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the scheduler library: the paper's examples, mechanisms,
 * evaluator, determinism, parser errors and the plan command end to end. */
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
#include <unistd.h>

#include "crux/sched.h"
#include "sched_int.h" /* crux_sched_eval_set_peers */

static const char *g_plan_exe;
static const char *g_lingjun_csv;

static struct crux_sched_topo *topo_text(const char *text)
{
	struct crux_sched_topo *t = NULL;
	struct crux_sched_err err = {{0}};
	crux_status_t st = crux_sched_topo_parse(text, strlen(text), "test.topo", &t, &err);

	if (st)
		fprintf(stderr, "topology: %s\n", err.msg);
	assert_int_equal(st, CRUX_OK);
	return t;
}

/* One switch, four hosts: h0-h1 traffic and h2-h3 traffic share nothing. */
static const char *star4 = "host h0 h1 h2 h3\nswitch s\n"
			   "link h0 s 8\nlink h1 s 8\nlink h2 s 8\nlink h3 s 8\n";

static void add_job(struct crux_sched_jobs *js, struct crux_sched_topo *t, uint64_t id,
		    const char *src, const char *dst, double bytes, double work, double compute,
		    double overlap)
{
	int hosts[2] = {crux_sched_topo_find(t, src), crux_sched_topo_find(t, dst)};
	struct crux_sched_flow fl = {hosts[0], hosts[1], bytes};
	struct crux_sched_job j = {.id = id,
				   .gpus = 2,
				   .n_hosts = 2,
				   .hosts = hosts,
				   .work = work,
				   .compute = compute,
				   .overlap = overlap,
				   .n_flows = 1,
				   .flows = &fl};

	assert_true(hosts[0] >= 0 && hosts[1] >= 0);
	assert_int_equal(crux_sched_jobs_add(js, &j), CRUX_OK);
}

/* ---- paper examples ---- */

static void test_example1_k(void **state)
{
	(void)state;
	/* Job 1: t = 2 s, compute 2 s; job 2: t = 1 s, compute 1 s; no overlap. */
	struct crux_sched_pair_job j1 = {2, 0, 2}, j2 = {1, 0, 1};
	double d2, d1;

	assert_int_equal(crux_sched_pair_gain(&j2, &j1, &d2, &d1), CRUX_OK);
	/* Link time over 12 s: job 1 6 s vs 4 s, job 2 6 s vs 3 s. */
	assert_true(fabs(d1 - 2.0) < 1e-9);
	assert_true(fabs(d2 - 3.0) < 1e-9);
	assert_true(fabs(d2 / d1 - 1.5) < 1e-9);
	/* Wildly unequal periods finish (bounded work) with finite gains. */
	struct crux_sched_pair_job fast = {1e-9, 0, 1e-9}, slow = {1e9, 0.5, 1e9};

	assert_int_equal(crux_sched_pair_gain(&fast, &slow, &d1, &d2), CRUX_OK);
	assert_true(isfinite(d1) && isfinite(d2));
	assert_int_equal(crux_sched_pair_gain(&slow, &fast, &d1, &d2), CRUX_OK);
	assert_true(isfinite(d1) && isfinite(d2));
	struct crux_sched_pair_job bad = {NAN, 0, 1};

	assert_int_equal(crux_sched_pair_gain(&bad, &j1, &d1, &d2), CRUX_ERR_INVAL);
}

static void test_example1_correction(void **state)
{
	(void)state;
	/* The same through crux_sched_correction: job 1 (more traffic) is the reference. */
	struct crux_sched_topo *t = topo_text(star4);
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;

	crux_sched_jobs_init(&js);
	add_job(&js, t, 1, "h0", "h1", 2e9, 10, 2, 0);
	add_job(&js, t, 2, "h2", "h3", 1e9, 5, 1, 0);
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 4, &s), CRUX_OK);
	/* 8 Gbit/s = 1 GB/s: t = 2 s and 1 s, equal intensities 5. */
	assert_int_equal(crux_sched_paths_ecmp(t, js.v, js.n, 1, s), CRUX_OK);
	assert_int_equal(crux_sched_intensity(t, js.v, js.n, s), CRUX_OK);
	assert_true(fabs(s->d[0].comm_time - 2) < 1e-9 && fabs(s->d[1].comm_time - 1) < 1e-9);
	assert_true(fabs(s->d[0].intensity - s->d[1].intensity) < 1e-9);
	assert_int_equal(crux_sched_correction(js.v, js.n, s), CRUX_OK);
	assert_int_equal(s->reference, 0);
	assert_true(fabs(s->d[0].k - 1.0) < 1e-12);
	assert_true(fabs(s->d[1].k - 1.5) < 1e-9);
	crux_sched_rank(s);
	assert_int_equal(s->d[1].rank, 0);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
}

static void test_example2_overlap_ranks_lower(void **state)
{
	(void)state;
	/* Job 1: W=10, t=1, compute 4; job 2: W=30, t=3, compute 2; comm after 50% compute. */
	struct crux_sched_topo *t = topo_text(star4);
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;

	crux_sched_jobs_init(&js);
	add_job(&js, t, 1, "h0", "h1", 1e9, 10, 4, 0.5);
	add_job(&js, t, 2, "h2", "h3", 3e9, 30, 2, 0.5);
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 4, &s), CRUX_OK);
	assert_int_equal(crux_sched_paths_ecmp(t, js.v, js.n, 1, s), CRUX_OK);
	assert_int_equal(crux_sched_intensity(t, js.v, js.n, s), CRUX_OK);
	assert_true(fabs(s->d[0].intensity - s->d[1].intensity) < 1e-9); /* both 10 */
	assert_int_equal(crux_sched_correction(js.v, js.n, s), CRUX_OK);
	assert_int_equal(s->reference, 1);
	assert_true(s->d[0].k < 1.0);
	assert_true(fabs(s->d[0].k - 0.5) < 1e-9);
	crux_sched_rank(s);
	assert_int_equal(s->d[0].rank, 1); /* the hidden job ranks lower */
	assert_int_equal(s->d[1].rank, 0);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
}

static void test_fig13(void **state)
{
	(void)state;
	/* Jobs 1..4 in decreasing priority; 1,2 share a link, 3,4 another; 2 levels. */
	struct crux_sched_topo *t = topo_text(star4);
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;
	struct crux_sched_params p;

	crux_sched_jobs_init(&js);
	add_job(&js, t, 1, "h0", "h1", 1e9, 40, 1, 0);
	add_job(&js, t, 2, "h0", "h1", 1e9, 30, 1, 0);
	add_job(&js, t, 3, "h2", "h3", 1e9, 20, 1, 0);
	add_job(&js, t, 4, "h2", "h3", 1e9, 10, 1, 0);
	crux_sched_params_default(&p);
	p.levels = 2;
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 2, &s), CRUX_OK);
	assert_int_equal(crux_sched_paths_ecmp(t, js.v, js.n, 1, s), CRUX_OK);
	assert_int_equal(crux_sched_intensity(t, js.v, js.n, s), CRUX_OK);
	for (int i = 0; i < 4; i++)
		s->d[i].priority = s->d[i].intensity;
	crux_sched_rank(s);
	crux_sched_compress_rank(s); /* Sincronia: 1/0/0/0 */
	assert_int_equal(s->d[0].level, 1);
	assert_int_equal(s->d[1].level + s->d[2].level + s->d[3].level, 0);
	crux_sched_compress_balanced(s); /* Varys: 1/1/0/0 */
	assert_int_equal(s->d[0].level, 1);
	assert_int_equal(s->d[1].level, 1);
	assert_int_equal(s->d[2].level + s->d[3].level, 0);
	assert_int_equal(crux_sched_compress(t, js.v, js.n, &p, s), CRUX_OK); /* Crux: 1/0/1/0 */
	assert_int_equal(s->d[0].level, 1);
	assert_int_equal(s->d[1].level, 0);
	assert_int_equal(s->d[2].level, 1);
	assert_int_equal(s->d[3].level, 0);
	assert_true(fabs(s->cut_weight - (40 + 20)) < 1e-9);
	/* The same on the explicit DAG. */
	int from[] = {0, 2}, to[] = {1, 3}, lv[4];
	double w[] = {1, 1}, cut;

	assert_int_equal(crux_sched_maxkcut(4, 2, from, to, w, 2, 10, 7, lv, &cut), CRUX_OK);
	assert_int_equal(lv[0], 1);
	assert_int_equal(lv[1], 0);
	assert_int_equal(lv[2], 1);
	assert_int_equal(lv[3], 0);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
}

static void test_fig14(void **state)
{
	(void)state;
	/* Five jobs, three levels; priority order 1 > 2 > 3 > 5 > 4, edges
	 * 1->2, 1->5, 2->3, 2->4, 5->4. The P-sorted order cannot cut all five
	 * edges; a random topological order (1,2,5,3,4) can: 1 high, 2 and 5
	 * medium, 3 and 4 low. */
	int from[] = {0, 0, 1, 1, 4}, to[] = {1, 4, 2, 3, 3}, lv[5];
	double w[] = {5, 5, 4, 4, 2}, cut;

	assert_int_equal(crux_sched_maxkcut(5, 5, from, to, w, 3, 10, 1, lv, &cut), CRUX_OK);
	assert_true(fabs(cut - 20) < 1e-9);
	assert_int_equal(lv[0], 2);
	assert_int_equal(lv[1], 1);
	assert_int_equal(lv[4], 1);
	assert_int_equal(lv[2], 0);
	assert_int_equal(lv[3], 0);
	/* With one order only (m = 1) the answer may be worse but stays valid. */
	assert_int_equal(crux_sched_maxkcut(5, 5, from, to, w, 3, 1, 1, lv, &cut), CRUX_OK);
	for (int e = 0; e < 5; e++)
		assert_true(lv[from[e]] >= lv[to[e]]);
	/* A cycle is refused. */
	int cf[] = {0, 1}, ct[] = {1, 0};

	assert_int_equal(crux_sched_maxkcut(2, 2, cf, ct, w, 2, 2, 1, lv, &cut), CRUX_ERR_INVAL);
}

static void test_maxkcut_brute_force(void **state)
{
	(void)state;
	/* Small random DAGs: the DP over many orders reaches the optimum over
	 * all valid K-level assignments, and the reported cut is the real one. */
	srand(11);
	for (int iter = 0; iter < 200; iter++) {
		int n = 2 + rand() % 5, K = 2 + rand() % 2, m = 0;
		int from[15], to[15], lv[6];
		double w[15], cut;

		for (int a = 0; a < n; a++) {
			for (int b = a + 1; b < n; b++) {
				if (rand() % 2) {
					from[m] = a;
					to[m] = b;
					w[m++] = 1 + rand() % 9;
				}
			}
		}
		assert_int_equal(
		    crux_sched_maxkcut(n, m, from, to, w, K, 300, (uint64_t)iter, lv, &cut),
		    CRUX_OK);
		double got = 0, best = 0;

		for (int e = 0; e < m; e++) {
			assert_true(lv[from[e]] >= lv[to[e]]);
			if (lv[from[e]] != lv[to[e]])
				got += w[e];
		}
		assert_true(fabs(got - cut) < 1e-9);
		int total = 1;

		for (int a = 0; a < n; a++)
			total *= K;
		for (int code = 0; code < total; code++) {
			int l[6], x = code, ok = 1;
			double c = 0;

			for (int a = 0; a < n; a++) {
				l[a] = x % K;
				x /= K;
			}
			for (int e = 0; e < m && ok; e++) {
				ok = l[from[e]] >= l[to[e]];
				if (l[from[e]] != l[to[e]])
					c += w[e];
			}
			if (ok && c > best)
				best = c;
		}
		if (fabs(best - cut) > 1e-9)
			fail_msg("case %d: n=%d K=%d cut %g, optimum %g", iter, n, K, cut, best);
	}
}

/* ---- path selection ---- */

static void test_path_ties(void **state)
{
	(void)state;
	/* Two explicit paths of different length: listed longer first. Empty
	 * fabric: equal bottleneck, the shorter sum wins (index 1). */
	const char *txt = "host a b\nswitch s1 s2 s3\n"
			  "link a s1 8\nlink s1 b 8\nlink a s2 8\nlink s2 s3 8\nlink s3 b 8\n"
			  "path a s2 s3 b\npath a s1 b\n";
	struct crux_sched_topo *t = topo_text(txt);
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;
	struct crux_sched_path_set ps;

	assert_int_equal(crux_sched_topo_paths(t, 0, 1, &ps), CRUX_OK);
	assert_int_equal(ps.n_paths, 2);
	assert_int_equal(crux_sched_topo_paths(t, 1, 0, &ps), CRUX_OK); /* reversed automatically */
	assert_int_equal(ps.n_paths, 2);
	crux_sched_jobs_init(&js);
	add_job(&js, t, 1, "a", "b", 1e9, 100, 1, 0);
	add_job(&js, t, 2, "a", "b", 1e9, 10, 1, 0);
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 2, &s), CRUX_OK);
	s->d[0].intensity = 100;
	s->d[1].intensity = 10;
	assert_int_equal(crux_sched_paths_select(t, js.v, js.n, NULL, s), CRUX_OK);
	assert_int_equal(s->d[0].path[0], 1); /* shorter sum */
	assert_int_equal(s->d[1].path[0], 0); /* the other path is now less loaded */
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);

	/* Clos: all candidates equal -> lowest index; next job takes the other aggregation. */
	struct crux_sched_clos2_params cp = {2, 2, 2, 1, 100, 100};
	struct crux_sched_err err;

	assert_int_equal(crux_sched_topo_clos2(&cp, &t, &err), CRUX_OK);
	assert_int_equal(crux_sched_topo_paths(t, 0, 2, &ps), CRUX_OK);
	assert_int_equal(ps.n_paths, 2);
	assert_int_equal(ps.off[1] - ps.off[0], 4);
	crux_sched_jobs_init(&js);
	add_job(&js, t, 7, "h1", "h3", 5e8, 1, 1, 0); /* lower intensity, listed first */
	add_job(&js, t, 9, "h0", "h2", 1e9, 50, 1, 0);
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 2, &s), CRUX_OK);
	s->d[0].intensity = 1;
	s->d[1].intensity = 50;
	assert_int_equal(crux_sched_paths_select(t, js.v, js.n, NULL, s), CRUX_OK);
	assert_int_equal(s->d[1].path[0], 0);
	assert_int_equal(s->d[0].path[0], 1);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
}

/* ---- evaluator ---- */

static void test_eval_priority_vs_fair(void **state)
{
	(void)state;
	/* Two identical jobs on one 1 GB/s link: 1 GB per iteration, compute 1 s. */
	struct crux_sched_topo *t = topo_text(star4);
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;
	struct crux_sched_eval *ev;
	double T[2], util;

	crux_sched_jobs_init(&js);
	add_job(&js, t, 1, "h0", "h1", 1e9, 2, 1, 0);
	add_job(&js, t, 2, "h0", "h1", 1e9, 2, 1, 0);
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 2, &s), CRUX_OK);
	assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
	assert_int_equal(crux_sched_paths_ecmp(t, js.v, js.n, 1, s), CRUX_OK);
	/* First model, same level: fair halves for the whole phase, comm 2 s
	 * each: T = 3, 3. */
	s->eval_model = CRUX_SCHED_EVAL_ALL_AT_ONCE;
	s->d[0].level = s->d[1].level = 0;
	assert_int_equal(crux_sched_evaluate(ev, t, js.v, js.n, s, T, &util), CRUX_OK);
	assert_true(fabs(T[0] - 3) < 1e-9 && fabs(T[1] - 3) < 1e-9);
	assert_true(fabs(util - (2.0 / 3 + 2.0 / 3) / 4) < 1e-9);
	/* Phase-aware (default): each meets the other only while it sends. Its
	 * share while sending is 0.7 x g + 0.3 x (1 - 1 / T): g = 1 / (1 + p) +
	 * p (1 - p) / (1 + p)^3, the other sending independently a fraction
	 * p = tau / T of the time (to second order), and 1 - 1 / T, the other's
	 * average load taken off; tau = 1 / share, T = 1 + tau, whose fixed
	 * point is T = 2.51916 (the reference model: 33-50 % by phase, 37.1 %
	 * over random phases; the average-load model alone said 2.618). */
	s->eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
	crux_sched_eval_set_peers(0);
	assert_int_equal(crux_sched_evaluate(ev, t, js.v, js.n, s, T, &util), CRUX_OK);
	double fix = 2.5191565;

	assert_true(fabs(T[0] - fix) < 1e-4 && fabs(T[1] - fix) < 1e-4);
	assert_true(fabs(util - (2 / fix + 2 / fix) / 4) < 1e-4);
	/* By default the two peers are run together (eval_peers.c): a start
	 * offset d persists under fair sharing (T = 3 - d for both, d drawn up
	 * to the 1 s the later one's compute leaves), so 2 < T < 3, the same
	 * for both. */
	crux_sched_eval_set_peers(2);
	assert_int_equal(crux_sched_evaluate(ev, t, js.v, js.n, s, T, &util), CRUX_OK);
	assert_true(T[0] > 2.05 && T[0] < 2.95 && fabs(T[0] - T[1]) < 1e-9);
	/* Job 1 above: T1 = 2 (alone), it loads the link 0.5 GB/s on average.
	 * First model: job 2 gets the other half, comm 2 s, T2 = 3. Phase-aware:
	 * job 2 sends in job 1's compute gaps (1 s free every 2 s), so it locks
	 * into them and T2 = 2, as the reference runs it (test_ref.c). */
	s->d[0].level = 1;
	for (int m = 0; m < 2; m++) {
		double T2 = m ? 3 : 2;

		s->eval_model = m ? CRUX_SCHED_EVAL_ALL_AT_ONCE : CRUX_SCHED_EVAL_PHASE_AWARE;
		assert_int_equal(crux_sched_evaluate(ev, t, js.v, js.n, s, T, &util), CRUX_OK);
		assert_true(fabs(T[0] - 2) < 1e-9);
		assert_true(fabs(T[1] - T2) < 1e-9);
		assert_true(fabs(util - (1.0 + 2.0 / T2) / 4) < 1e-9);
	}
	s->eval_model = 7;
	assert_int_equal(crux_sched_evaluate(ev, t, js.v, js.n, s, T, &util), CRUX_ERR_INVAL);
	crux_sched_eval_free(ev);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
}

static void test_eval_overlap(void **state)
{
	(void)state;
	struct crux_sched_topo *t = topo_text(star4);
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;
	struct crux_sched_eval *ev;
	double T[2], util;

	crux_sched_jobs_init(&js);
	/* Fully overlapped: comm 0.5 s hidden in 1 s of compute. */
	add_job(&js, t, 1, "h0", "h1", 5e8, 2, 1, 1.0);
	/* Half overlapped on another link: starts at 0.5 s, comm 1 s: T = 1.5. */
	add_job(&js, t, 2, "h2", "h3", 1e9, 2, 1, 0.5);
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 2, &s), CRUX_OK);
	assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
	assert_int_equal(crux_sched_paths_ecmp(t, js.v, js.n, 1, s), CRUX_OK);
	assert_int_equal(crux_sched_evaluate(ev, t, js.v, js.n, s, T, &util), CRUX_OK);
	assert_true(fabs(T[0] - 1.0) < 1e-9);
	assert_true(fabs(T[1] - 1.5) < 1e-9);
	assert_true(fabs(crux_sched_overlap_from_times(1, 1, 1.5) - 0.5) < 1e-12);
	crux_sched_eval_free(ev);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
}

/* ---- whole policies: validity and determinism ---- */

static void random_jobs(struct crux_sched_topo *t, struct crux_sched_jobs *js, int n, unsigned seed)
{
	int nh = crux_sched_topo_n_hosts(t);

	srand(seed);
	for (int i = 0; i < n; i++) {
		int hosts[4], k = 2 + rand() % 3;

		for (int a = 0; a < k; a++) {
		again:
			hosts[a] = rand() % nh;
			for (int b = 0; b < a; b++)
				if (hosts[b] == hosts[a])
					goto again;
		}
		struct crux_sched_job j = {.id = (uint64_t)(100 + i),
					   .gpus = 8 * k,
					   .n_hosts = k,
					   .hosts = hosts,
					   .compute = 0.1 + (rand() % 100) / 100.0,
					   .overlap = (rand() % 5) / 4.0};

		j.work = j.gpus * j.compute;
		assert_int_equal(crux_sched_jobs_add(js, &j), CRUX_OK);
		assert_int_equal(crux_sched_jobs_add_ring(js, js->n - 1, 1e8 * (1 + rand() % 20)),
				 CRUX_OK);
	}
}

static void test_validity_and_determinism(void **state)
{
	(void)state;
	struct crux_sched_clos2_params cp = {4, 2, 4, 1, 100, 100};
	struct crux_sched_topo *t, *t2;
	struct crux_sched_err err;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *a, *b;
	struct crux_sched_params p;

	assert_int_equal(crux_sched_topo_clos2(&cp, &t, &err), CRUX_OK);
	assert_int_equal(crux_sched_topo_clos2(&cp, &t2, &err), CRUX_OK);
	crux_sched_jobs_init(&js);
	random_jobs(t, &js, 40, 5);
	crux_sched_params_default(&p);
	p.levels = 3;
	p.seed = 42;
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 3, &a), CRUX_OK);
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 3, &b), CRUX_OK);
	for (int pol = 0; pol < CRUX_SCHED_N_POLICIES; pol++) {
		assert_int_equal(crux_sched_run(t, js.v, js.n, &p, (enum crux_sched_policy)pol, a),
				 CRUX_OK);
		assert_int_equal(crux_sched_run(t2, js.v, js.n, &p, (enum crux_sched_policy)pol, b),
				 CRUX_OK);
		for (size_t i = 0; i < js.n; i++) {
			assert_int_equal(a->d[i].level, b->d[i].level);
			assert_int_equal(a->d[i].rank, b->d[i].rank);
			assert_true(a->d[i].priority == b->d[i].priority);
			assert_true(a->d[i].level >= 0 && a->d[i].level < 3);
			for (int f = 0; f < js.v[i].n_flows; f++)
				assert_int_equal(a->d[i].path[f], b->d[i].path[f]);
		}
	}
	/* Crux compression is valid: if two jobs share a link, the higher-P job's
	 * level is not lower (with the refinement kept to the order; the default
	 * free one may put a job above a higher-ranked one, test_refine.c). */
	p.refine_free = 0;
	assert_int_equal(crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, a), CRUX_OK);
	int L = crux_sched_topo_n_links(t);
	unsigned char *use = calloc(js.n * (size_t)L, 1);

	assert_non_null(use);
	for (size_t i = 0; i < js.n; i++) {
		for (int f = 0; f < js.v[i].n_flows; f++) {
			struct crux_sched_path_set ps;

			assert_int_equal(crux_sched_topo_paths(t, js.v[i].flows[f].src,
							       js.v[i].flows[f].dst, &ps),
					 CRUX_OK);
			int pi = a->d[i].path[f];

			for (int k = ps.off[pi]; k < ps.off[pi + 1]; k++)
				use[i * (size_t)L + (size_t)ps.links[k]] = 1;
		}
	}
	int edges = 0;

	for (size_t x = 0; x < js.n; x++) {
		for (size_t y = 0; y < js.n; y++) {
			if (x == y || a->d[x].rank > a->d[y].rank)
				continue;
			for (int l = 0; l < L; l++) {
				if (use[x * (size_t)L + (size_t)l] &&
				    use[y * (size_t)L + (size_t)l]) {
					assert_true(a->d[x].level >= a->d[y].level);
					edges++;
					break;
				}
			}
		}
	}
	assert_true(edges > 0);
	assert_true(a->cut_weight > 0);
	free(use);
	/* Bad values through the API are refused, not propagated. */
	js.v[0].compute = NAN;
	assert_int_equal(crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, b),
			 CRUX_ERR_INVAL);
	js.v[0].compute = 0.5;
	js.v[1].flows[0].bytes = -1;
	assert_int_equal(crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, b),
			 CRUX_ERR_INVAL);
	js.v[1].flows[0].bytes = 1e9;
	/* The copy is exact. */
	assert_int_equal(crux_sched_schedule_copy(b, a), CRUX_OK);
	for (size_t i = 0; i < js.n; i++)
		assert_int_equal(a->d[i].level, b->d[i].level);
	crux_sched_schedule_free(a);
	crux_sched_schedule_free(b);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
	crux_sched_topo_free(t2);
}

/* ---- generators and loaders ---- */

static void test_generators(void **state)
{
	(void)state;
	struct crux_sched_topo *t;
	struct crux_sched_err err;
	struct crux_sched_path_set ps;
	struct crux_sched_clos3_params c3 = {2, 2, 2, 4, 2, 100, 100, 100};
	struct crux_sched_dsided_params ds = {16, 6, 12, 32, 8, 100, 400, 400};

	assert_int_equal(crux_sched_topo_clos3(&c3, &t, &err), CRUX_OK);
	assert_int_equal(crux_sched_topo_n_hosts(t), 8);
	/* h0 (pod 0) to h4 (pod 1): 2 aggs x 4 cores x 2 aggs = 16 paths of 6 links. */
	assert_int_equal(crux_sched_topo_paths(t, 0, 4, &ps), CRUX_OK);
	assert_int_equal(ps.n_paths, 16);
	assert_int_equal(ps.off[1], 6);
	crux_sched_topo_free(t);
	assert_int_equal(crux_sched_topo_dsided(&ds, &t, &err), CRUX_OK);
	assert_int_equal(crux_sched_topo_n_hosts(t), 16);
	assert_int_equal(crux_sched_topo_paths(t, 0, 1, &ps), CRUX_OK);
	assert_true(ps.n_paths > 1);
	crux_sched_topo_free(t);
	ds.host_links = 3;
	assert_int_equal(crux_sched_topo_dsided(&ds, &t, &err), CRUX_ERR_INVAL);
	if (g_lingjun_csv) {
		struct crux_sched_lingjun_params lp;

		crux_sched_lingjun_defaults(&lp);
		assert_int_equal(crux_sched_topo_lingjun(g_lingjun_csv, &lp, &t, &err), CRUX_OK);
		assert_int_equal(crux_sched_topo_n_hosts(t), 847);
		/* 847 hosts + 1 DSW + 3 PSW + 119 ASW. */
		assert_int_equal(crux_sched_topo_n_nodes(t), 847 + 1 + 3 + 119);
		assert_int_equal(crux_sched_topo_paths(t, 0, 1, &ps), CRUX_OK);
		crux_sched_topo_free(t);
	}
}

/* ---- parser errors ---- */

static void expect_topo_error(const char *text, const char *needle1, const char *needle2)
{
	struct crux_sched_topo *t = NULL;
	struct crux_sched_err err = {{0}};

	assert_int_not_equal(crux_sched_topo_parse(text, strlen(text), "bad.topo", &t, &err),
			     CRUX_OK);
	assert_null(t);
	if (!strstr(err.msg, needle1) || !strstr(err.msg, needle2))
		fail_msg("message '%s' lacks '%s' / '%s'", err.msg, needle1, needle2);
}

static void test_topo_errors(void **state)
{
	(void)state;
	expect_topo_error("host a b\nswitch s\nlink a s 0\n", "bad.topo:3", "bandwidth");
	expect_topo_error("host a b\nswitch s\nlink a s -5\n", "bad.topo:3", "bandwidth");
	expect_topo_error("host a b\nswitch s\nlink a s nan\n", "bad.topo:3", "bandwidth");
	expect_topo_error("host a b\nlink a zz 10\n", "bad.topo:2", "unknown node 'zz'");
	expect_topo_error("host a a\n", "bad.topo:1", "duplicate");
	expect_topo_error("host a b\nswitch s\nlink a s\n", "bad.topo:3", "malformed");
	expect_topo_error("host a\nfrobnicate\n", "bad.topo:2", "unknown keyword");
	expect_topo_error("host a b\nswitch s\nlink a s 10\npath a s b\n", "bad.topo:4", "hop 2");
	expect_topo_error("switch s\n", "bad.topo", "no hosts");
	expect_topo_error("host a b\nswitch s\nlink a s 10 y3\n", "bad.topo:3", "count");
}

static void expect_jobs_error(struct crux_sched_topo *t, const char *text, const char *needle1,
			      const char *needle2)
{
	struct crux_sched_jobs js;
	struct crux_sched_err err = {{0}};

	crux_sched_jobs_init(&js);
	assert_int_not_equal(crux_sched_jobs_parse(text, strlen(text), "bad.jobs", t, &js, &err),
			     CRUX_OK);
	assert_int_equal(js.n, 0);
	if (!strstr(err.msg, needle1) || !strstr(err.msg, needle2))
		fail_msg("message '%s' lacks '%s' / '%s'", err.msg, needle1, needle2);
}

static void test_jobs_errors(void **state)
{
	(void)state;
	/* h2 is an island: unreachable. */
	struct crux_sched_topo *t =
	    topo_text("host h0 h1 h2\nswitch s\nlink h0 s 10\nlink h1 s 10\n");
	struct crux_sched_jobs js;
	struct crux_sched_err err;
	const char *ok =
	    "# ok\njob 1 hosts=h0,h1 compute=0.5 allreduce=1e9\n"
	    "job 2 hosts=h0,h1 gpus=4 compute=1 work=2 overlap=0.25 steps=12\nflow 2 h1 h0 5e8\n";

	crux_sched_jobs_init(&js);
	assert_int_equal(crux_sched_jobs_parse(ok, strlen(ok), "ok.jobs", t, &js, &err), CRUX_OK);
	assert_int_equal(js.n, 2);
	assert_int_equal(js.v[0].gpus, 16);
	assert_true(fabs(js.v[0].work - 8.0) < 1e-12);
	assert_int_equal(js.v[0].n_flows, 2);
	/* ring: 2 (g-1)/g S per hop with g = 16 */
	assert_true(fabs(js.v[0].flows[0].bytes - 2.0 * 15 / 16 * 1e9) < 1);
	assert_int_equal(js.v[1].n_flows, 1);
	assert_int_equal(js.v[0].steps, 0);
	assert_int_equal(js.v[1].steps, 12);
	crux_sched_jobs_free(&js);

	expect_jobs_error(t, "job 1 hosts=h0,h2 compute=1 allreduce=1e9\n", "bad.jobs:1",
			  "unreachable");
	expect_jobs_error(t, "job 1 hosts=h0,h9 compute=1\n", "bad.jobs:1", "unknown host 'h9'");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=nan\n", "bad.jobs:1", "compute");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=-1\n", "bad.jobs:1", "compute");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=1 iter=-2\n", "bad.jobs:1", "iter");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=1\njob 1 hosts=h0 compute=1\n",
			  "bad.jobs:2", "duplicate job id 1");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=1\nflow 1 h0\n", "bad.jobs:2", "malformed");
	expect_jobs_error(t, "job x hosts=h0 compute=1\n", "bad.jobs:1", "'id'");
	expect_jobs_error(t, "job 1 hosts=h0,s compute=1\n", "bad.jobs:1", "switch");
	expect_jobs_error(t, "job 1 hosts=h0 compute=1 overlap=2\n", "bad.jobs:1", "overlap");
	expect_jobs_error(t, "job 1 compute=1\n", "bad.jobs:1", "hosts");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=1\nflow 1 h0 h1 -3\n", "bad.jobs:2",
			  "bytes");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=1 speed=3\n", "bad.jobs:1", "unknown key");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=1 steps=0\n", "bad.jobs:1",
			  "field 'steps': '0' must be an integer in 1..65536");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=1 steps=2.5\n", "bad.jobs:1", "steps");
	expect_jobs_error(t, "job 1 hosts=h0,h1 compute=1 steps=65537\n", "bad.jobs:1", "steps");
	crux_sched_topo_free(t);
}

/* ---- the plan command end to end ---- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The file a command wrote, as a string in buf. */
static void read_out(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	size_t n = fread(buf, 1, cap - 1, f);

	fclose(f);
	buf[n] = '\0';
}

static void test_plan_cli(void **state)
{
	(void)state;
	char dir[] = "/tmp/crux-sched-test-XXXXXX", topo[256], jobs[256], out[256], cmd[1200];
	char buf[8192];

	if (!g_plan_exe)
		skip();
	assert_non_null(mkdtemp(dir));
	snprintf(topo, sizeof(topo), "%s/t.topo", dir);
	snprintf(jobs, sizeof(jobs), "%s/j.jobs", dir);
	snprintf(out, sizeof(out), "%s/out", dir);
	write_file(
	    topo,
	    "host h0 h1 h2 h3\nswitch tor0 tor1 agg0 agg1\n"
	    "link h0 tor0 100\nlink h1 tor0 100\nlink h2 tor1 100\nlink h3 tor1 100\n"
	    "link tor0 agg0 100\nlink tor0 agg1 100\nlink tor1 agg0 100\nlink tor1 agg1 100\n");
	write_file(jobs, "job 11 hosts=h0,h2 compute=0.2 allreduce=2e9\n"
			 "job 12 hosts=h1,h3 compute=0.4 allreduce=1e9 overlap=0.5\n");
	snprintf(cmd, sizeof(cmd), "'%s' --topology '%s' --jobs '%s' --levels 2 --json > '%s' 2>&1",
		 g_plan_exe, topo, jobs, out);
	assert_int_equal(system(cmd), 0);
	read_out(out, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"policy\":\"crux\""));
	assert_non_null(strstr(buf, "\"id\":11"));
	assert_non_null(strstr(buf, "\"id\":12"));
	assert_non_null(strstr(buf, "\"hops\":[\"h0\",\"tor0\",\"agg"));
	/* The two jobs get different aggregation switches (least congested). */
	assert_true((strstr(buf, "agg0") != NULL) && (strstr(buf, "agg1") != NULL));
	/* The refinement is free of the order unless asked to keep it. */
	assert_non_null(strstr(buf, "\"refine_free\":true"));
	snprintf(
	    cmd, sizeof(cmd),
	    "'%s' --topology '%s' --jobs '%s' --levels 2 --refine-keep-order --json > '%s' 2>&1",
	    g_plan_exe, topo, jobs, out);
	assert_int_equal(system(cmd), 0);
	read_out(out, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"refine_free\":false"));
	/* The refinement after the guard: off unless asked for. */
	assert_non_null(strstr(buf, "\"guard_refine\":false"));
	snprintf(cmd, sizeof(cmd),
		 "'%s' --topology '%s' --jobs '%s' --levels 2 --max-slowdown 1.5 --guard-refine "
		 "--json > '%s' 2>&1",
		 g_plan_exe, topo, jobs, out);
	assert_int_equal(system(cmd), 0);
	read_out(out, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"guard_refine\":true"));
	/* The search over paths: off unless asked for; 0..2 only. */
	assert_non_null(strstr(buf, "\"paths_search\":0"));
	assert_non_null(strstr(buf, "\"paths_evals\":0"));
	snprintf(cmd, sizeof(cmd),
		 "'%s' --topology '%s' --jobs '%s' --levels 2 --paths-search 2 --json > '%s' 2>&1",
		 g_plan_exe, topo, jobs, out);
	assert_int_equal(system(cmd), 0);
	read_out(out, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"paths_search\":2"));
	assert_non_null(strstr(buf, "\"paths_search_full\":false"));
	assert_null(strstr(buf, "\"paths_evals\":0"));
	snprintf(cmd, sizeof(cmd), "'%s' --topology '%s' --jobs '%s' --paths-search 3 > '%s' 2>&1",
		 g_plan_exe, topo, jobs, out);
	int rc = system(cmd);

	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
	read_out(out, buf, sizeof(buf));
	assert_non_null(strstr(buf, "--paths-search '3'"));
	/* A bad jobs file: exit 1 and the message names file and line. */
	write_file(jobs, "job 11 hosts=h0,h7 compute=0.2\n");
	snprintf(cmd, sizeof(cmd), "'%s' --topology '%s' --jobs '%s' > '%s' 2>&1", g_plan_exe, topo,
		 jobs, out);
	rc = system(cmd);
	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
	read_out(out, buf, sizeof(buf));
	assert_non_null(strstr(buf, "j.jobs:1"));
	assert_non_null(strstr(buf, "unknown host 'h7'"));
	/* Usage errors exit 2. */
	snprintf(cmd, sizeof(cmd), "'%s' --levels 0 > /dev/null 2>&1", g_plan_exe);
	rc = system(cmd);
	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
	/* Table output mentions every job. */
	write_file(jobs, "job 11 hosts=h0,h2 compute=0.2 allreduce=2e9\n");
	snprintf(cmd, sizeof(cmd),
		 "'%s' --topology '%s' --jobs '%s' --policy sincronia > '%s' 2>&1", g_plan_exe,
		 topo, jobs, out);
	assert_int_equal(system(cmd), 0);
	unlink(topo);
	unlink(jobs);
	unlink(out);
	rmdir(dir);
}

/* Run crux-plan with ARGS on the test's files; its output in buf, exit status returned. */
static int plan_run(const char *dir, const char *args, char *buf, size_t cap)
{
	char cmd[1200], out[256];

	snprintf(out, sizeof(out), "%s/out", dir);
	snprintf(cmd, sizeof(cmd), "'%s' --topology '%s/t.topo' --jobs '%s/j.jobs' %s > '%s' 2>&1",
		 g_plan_exe, dir, dir, args, out);
	int rc = system(cmd);
	FILE *f = fopen(out, "r");

	assert_non_null(f);
	size_t n = fread(buf, 1, cap - 1, f);

	fclose(f);
	buf[n] = '\0';
	unlink(out);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* The aggregation switch of every flow in order ("0110"), from the JSON's hops. */
static void aggs_of(const char *buf, char *aggs, size_t cap)
{
	size_t n = 0;

	for (const char *p = strstr(buf, "\"agg"); p && n + 1 < cap; p = strstr(p + 1, "\"agg"))
		aggs[n++] = p[4];
	aggs[n] = '\0';
}

/*
 * --ecmp-paths keeps the plan's levels but puts every flow back on its ECMP
 * draw (what a fabric carries where the plan's paths are not bound: cruxd
 * without probing); --levels-given pins levels the plan would not choose;
 * --paths-given puts named flows on the path through a named node.
 */
static void test_plan_cli_ecmp_given(void **state)
{
	(void)state;
	char dir[] = "/tmp/crux-sched-test-XXXXXX", path[256], buf[8192];
	char ecmp[16], crux[16], mixed[16];

	if (!g_plan_exe)
		skip();
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/t.topo", dir);
	write_file(
	    path,
	    "host h0 h1 h2 h3\nswitch tor0 tor1 agg0 agg1\n"
	    "link h0 tor0 100\nlink h1 tor0 100\nlink h2 tor1 100\nlink h3 tor1 100\n"
	    "link tor0 agg0 100\nlink tor0 agg1 100\nlink tor1 agg0 100\nlink tor1 agg1 100\n");
	snprintf(path, sizeof(path), "%s/j.jobs", dir);
	write_file(path, "job 11 hosts=h0,h2 compute=0.2 allreduce=2e9\n"
			 "job 12 hosts=h1,h3 compute=0.4 allreduce=1e9 overlap=0.5\n");
	/* Seed 1: ECMP hashes three of the four flows onto agg0; Crux-full
	 * separates the jobs. */
	assert_int_equal(
	    plan_run(dir, "--levels 2 --seed 1 --policy ecmp --json", buf, sizeof(buf)), 0);
	aggs_of(buf, ecmp, sizeof(ecmp));
	assert_int_equal(plan_run(dir, "--levels 2 --seed 1 --json", buf, sizeof(buf)), 0);
	aggs_of(buf, crux, sizeof(crux));
	assert_string_equal(ecmp, "0010");
	assert_string_not_equal(crux, ecmp);
	assert_non_null(strstr(buf, "\"ecmp_paths\":false"));
	const char *l11 = strstr(buf, "\"id\":11,\"level\":");
	assert_non_null(l11);
	int lv11 = l11[strlen("\"id\":11,\"level\":")] - '0';

	assert_int_equal(plan_run(dir, "--levels 2 --seed 1 --ecmp-paths --json", buf, sizeof(buf)),
			 0);
	aggs_of(buf, mixed, sizeof(mixed));
	assert_string_equal(mixed, ecmp);
	assert_non_null(strstr(buf, "\"ecmp_paths\":true"));
	assert_non_null(strstr(buf, lv11 ? "\"id\":11,\"level\":1" : "\"id\":11,\"level\":0"));
	/* Levels given: both jobs where they are named, the paths still planned. */
	assert_int_equal(
	    plan_run(dir, "--levels 2 --seed 1 --levels-given 11=0,12=1 --json", buf, sizeof(buf)),
	    0);
	assert_non_null(strstr(buf, "\"id\":11,\"level\":0"));
	assert_non_null(strstr(buf, "\"id\":12,\"level\":1"));
	aggs_of(buf, mixed, sizeof(mixed));
	assert_string_equal(mixed, crux);
	/* Paths given (the spines a fabric hashed each connection onto): on
	 * top of the ECMP draw ("0010"), the named flows move, the others stay. */
	static const char *const given_paths[][2] = {
	    {"11:h0:h2:agg1,11:h2:h0:agg1,12:h1:h3:agg0", "1100"},
	    {"12:h3:h1:agg1", "0011"},
	};
	for (size_t g = 0; g < sizeof(given_paths) / sizeof(given_paths[0]); g++) {
		char args[160];

		snprintf(args, sizeof(args),
			 "--levels 2 --seed 1 --policy ecmp --json --paths-given %s",
			 given_paths[g][0]);
		assert_int_equal(plan_run(dir, args, buf, sizeof(buf)), 0);
		aggs_of(buf, mixed, sizeof(mixed));
		assert_string_equal(mixed, given_paths[g][1]);
		assert_non_null(strstr(buf, "\"paths_given\":true"));
	}
	/* Bad lists exit 2 naming the fault. */
	static const char *const bad[][2] = {
	    {"--levels-given 11=2", "a level in 0..1"},
	    {"--levels-given 13=0", "job 13 is not in the jobs file"},
	    {"--levels-given 11=0,11=1", "given twice"},
	    {"--levels-given 11", "expected ID=LEVEL"},
	    {"--paths-given 11:h0:h2", "expected ID:SRC:DST:VIA, got '11:h0:h2'"},
	    {"--paths-given 13:h0:h2:agg0", "job 13 is not in the jobs file"},
	    {"--paths-given 11:h0:h3:agg0", "job 11 has no flow from h0 to h3"},
	    {"--paths-given 11:h0:h2:tor0", "name a node on exactly one of them"},
	    {"--paths-given 11:hx:h2:agg0", "'hx' is not a host of the topology"},
	};
	for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
		char args[128];

		snprintf(args, sizeof(args), "--levels 2 %s", bad[b][0]);
		assert_int_equal(plan_run(dir, args, buf, sizeof(buf)), 2);
		if (!strstr(buf, bad[b][1]))
			fail_msg("%s: '%s' not in: %s", args, bad[b][1], buf);
	}
	snprintf(path, sizeof(path), "%s/t.topo", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/j.jobs", dir);
	unlink(path);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_example1_k),
	    cmocka_unit_test(test_example1_correction),
	    cmocka_unit_test(test_example2_overlap_ranks_lower),
	    cmocka_unit_test(test_fig13),
	    cmocka_unit_test(test_fig14),
	    cmocka_unit_test(test_maxkcut_brute_force),
	    cmocka_unit_test(test_path_ties),
	    cmocka_unit_test(test_eval_priority_vs_fair),
	    cmocka_unit_test(test_eval_overlap),
	    cmocka_unit_test(test_validity_and_determinism),
	    cmocka_unit_test(test_generators),
	    cmocka_unit_test(test_topo_errors),
	    cmocka_unit_test(test_jobs_errors),
	    cmocka_unit_test(test_plan_cli),
	    cmocka_unit_test(test_plan_cli_ecmp_given),
	};

	g_plan_exe = argc > 1 ? argv[1] : NULL;
	g_lingjun_csv = argc > 2 ? argv[2] : NULL;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
