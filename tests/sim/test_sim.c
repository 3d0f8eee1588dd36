/* SPDX-License-Identifier: Apache-2.0 */
/* crux-sim unit tests: hand-computed steady states, conservation, determinism, traces. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cassini.h"
#include "crux/sched.h"
#include "sim_engine.h"

/* cmocka 1.1.5 has no floating-point assertion. */
#define assert_near(a, b, eps)                                                                     \
	do {                                                                                       \
		double a_ = (a), b_ = (b), e_ = (eps);                                             \
		if (!(fabs(a_ - b_) <= e_))                                                        \
			fail_msg("%s = %.12g, expected %.12g (+-%g)", #a, a_, b_, e_);             \
	} while (0)
#include "crux/sim.h"

/*
 * Two switches joined by one 8 Gbit/s (1e9 B/s) cable; hosts h0, h1 on s0 and
 * h2, h3 on s1 with fast host links. Job 1 on h0,h2 and job 2 on h1,h3: both
 * rings cross the s0-s1 cable in each direction.
 */
static const char topo_text[] = "host h0 h1 h2 h3\n"
				"switch s0 s1\n"
				"link h0 s0 8000\nlink h1 s0 8000\n"
				"link h2 s1 8000\nlink h3 s1 8000\n"
				"link s0 s1 8\n";

struct fixture {
	char dir[64];
	char topo[128];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/crux-sim-test.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->topo, sizeof(f->topo), "%s/topo.txt", f->dir);
	FILE *t = fopen(f->topo, "w");
	if (!t)
		return -1;
	fputs(topo_text, t);
	fclose(t);
	setenv("CRUX_SHM_DIR", f->dir, 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	unlink(f->topo);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void small_config(const struct fixture *f, struct crux_sim_config *c, enum crux_sim_policy p)
{
	crux_sim_config_defaults(c);
	c->policy = p;
	c->topo = CRUX_SIM_TOPO_FILE;
	c->topo_path = f->topo;
	crux_sim_topo_defaults(CRUX_SIM_TOPO_FILE, &c->tp);
	c->tp.gpus_per_host = 1;
	c->tp.channels = 1;
	c->levels = 2;
	c->horizon_s = 1000;
	c->window_s = 1000;
	/* The hand-computed cases below are under the first steady-state model. */
	c->eval_model = CRUX_SCHED_EVAL_ALL_AT_ONCE;
}

/* Two identical jobs: compute 1 s, 1e9 B per ring hop (1 s alone on the cable), no overlap. */
static struct crux_sim_trace *two_jobs(double overlap, double bytes)
{
	struct crux_sim_trace *t;
	assert_int_equal(crux_sim_trace_new(&t), CRUX_OK);
	uint32_t h1[2] = {0, 2}, h2[2] = {1, 3};
	struct crux_sim_trace_job j = {.id = 1,
				       .arrival_s = 0,
				       .model = "a",
				       .gpus = 2,
				       .iterations = 100000,
				       .compute_s = 1,
				       .comm_bytes = bytes,
				       .overlap = overlap,
				       .n_hosts = 2,
				       .hosts = h1};
	assert_int_equal(crux_sim_trace_add(t, &j), CRUX_OK);
	j.id = 2;
	j.hosts = h2;
	assert_int_equal(crux_sim_trace_add(t, &j), CRUX_OK);
	return t;
}

static void sorted_iters(const struct crux_sim_result *r, double *lo, double *hi)
{
	double a = r->jobs[0].mean_iter_s, b = r->jobs[1].mean_iter_s;
	*lo = a < b ? a : b;
	*hi = a < b ? b : a;
}

/* Fair sharing: each job gets half the cable, 2 s of communication, T = 3 s. */
static void test_fair_share(void **state)
{
	struct crux_sim_config c;
	struct crux_sim_result *r;
	char err[512];
	small_config(*state, &c, CRUX_SIM_ECMP);
	struct crux_sim_trace *t = two_jobs(0, 1e9);
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	double lo, hi;
	sorted_iters(r, &lo, &hi);
	assert_near(lo, 3.0, 1e-6);
	assert_near(hi, 3.0, 1e-6);
	assert_near(r->jobs[0].iso_iter_s, 2.0, 1e-9);
	assert_near(r->jobs[0].slowdown, 1.5, 1e-6);
	/* Each GPU computes 1 s in 3: utilisation 1/3. */
	assert_near(r->mean_util, 1.0 / 3, 1e-6);
	crux_sim_result_free(r);
	/* The default phase-aware model: each meets the other only while it
	 * sends. The two peers are run together from drawn start phases, an
	 * offset d that persists under fair sharing: T = 3 - d for both (the
	 * reference model: 33-50 % by phase; the closed form, T = 2.51916, in
	 * tests/sched/test_sched.c). */
	c.eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	sorted_iters(r, &lo, &hi);
	assert_near(lo, hi, 1e-6);
	assert_true(lo > 2.05 && lo < 2.95);
	assert_near(r->mean_util, 1 / lo, 1e-6);
	crux_sim_result_free(r);
	c.eval_model = 5;
	assert_int_not_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_non_null(strstr(err, "eval_model"));
	crux_sim_trace_free(t);
}

/*
 * Reference snapshots: the two identical jobs of test_fair_share in the
 * reference model. One level with one random start phase: a phase offset d
 * persists under fair sharing (T = 3 - d), so 1/3 <= util <= 1/2 while the
 * first evaluator says 1/3; on two levels (crux-full) the low job fills the
 * high one's compute gaps: 1/2 each, the evaluator (1/2 + 1/3) / 2.
 */
static void test_ref_snapshots(void **state)
{
	struct crux_sim_config c;
	struct crux_sim_result *r;
	char err[512];
	struct crux_sim_trace *t = two_jobs(0, 1e9);

	small_config(*state, &c, CRUX_SIM_ECMP);
	c.ref_snapshots = 3;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(r->n_ref_snaps, 3);
	for (size_t k = 0; k < r->n_ref_snaps; k++) {
		const struct crux_sim_ref_snap *q = &r->ref_snaps[k];

		assert_true(q->t_s >= 1000.0 * (double)(k + 1) / 4 - 1e-9);
		assert_int_equal(q->jobs, 2);
		assert_int_equal(q->net_jobs, 2);
		assert_near(q->eval_util, 1.0 / 3, 1e-9);
		assert_true(q->ref_util >= 1.0 / 3 - 1e-6 && q->ref_util <= 0.5 + 1e-6);
		assert_int_equal(q->starved, 0);
	}
	crux_sim_result_free(r);
	small_config(*state, &c, CRUX_SIM_CRUX_FULL);
	c.ref_snapshots = 1;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(r->n_ref_snaps, 1);
	assert_near(r->ref_snaps[0].eval_util, (0.5 + 1.0 / 3) / 2, 1e-9);
	assert_near(r->ref_snaps[0].ref_util, 0.5, 1e-6);
	assert_near(r->ref_snaps[0].slow_ref_max, 1.0, 1e-6);
	assert_near(r->ref_snaps[0].slow_eval_max, 1.5, 1e-6);
	crux_sim_result_free(r);
	/* CASSINI shifts phases the reference does not model: no snapshots. */
	small_config(*state, &c, CRUX_SIM_CASSINI);
	c.ref_snapshots = 2;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(r->n_ref_snaps, 0);
	crux_sim_result_free(r);
	crux_sim_trace_free(t);
}

/*
 * Strict priority: the high job alone on the cable (T = 2 s, half the cable
 * on average); the low job gets the other half: 2 s of communication, T = 3.
 * Utilisation (1/2 + 1/3) / 2.
 */
static void test_priority(void **state)
{
	struct crux_sim_config c;
	struct crux_sim_result *r;
	char err[512];
	small_config(*state, &c, CRUX_SIM_CRUX_FULL);
	struct crux_sim_trace *t = two_jobs(0, 1e9);
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	double lo, hi;
	sorted_iters(r, &lo, &hi);
	assert_near(lo, 2.0, 1e-6);
	assert_near(hi, 3.0, 1e-6);
	assert_int_not_equal(r->jobs[0].level, r->jobs[1].level);
	assert_near(r->mean_util, (0.5 + 1.0 / 3) / 2, 1e-6);
	crux_sim_result_free(r);
	crux_sim_trace_free(t);
}

/* A heavy job (id 1, hosts 0/2) and a light one (id 2, hosts 1/3) sharing the cable. */
static struct crux_sim_trace *heavy_light(double heavy_compute, double heavy_bytes,
					  double light_compute, double light_bytes)
{
	struct crux_sim_trace *t;
	uint32_t h1[2] = {0, 2}, h2[2] = {1, 3};
	struct crux_sim_trace_job j = {.id = 1,
				       .model = "heavy",
				       .gpus = 2,
				       .iterations = 100000,
				       .compute_s = heavy_compute,
				       .comm_bytes = heavy_bytes,
				       .n_hosts = 2,
				       .hosts = h1};

	assert_int_equal(crux_sim_trace_new(&t), CRUX_OK);
	assert_int_equal(crux_sim_trace_add(t, &j), CRUX_OK);
	j.id = 2;
	j.compute_s = light_compute;
	j.comm_bytes = light_bytes;
	j.hosts = h2;
	assert_int_equal(crux_sim_trace_add(t, &j), CRUX_OK);
	return t;
}

/*
 * The fairness guard: a heavy job (1.8e9 B per hop, compute 0.2 s: 2 s alone)
 * over a light one (0.9e9 B, compute 0.05 s: 0.95 s alone) on the cable.
 * Strict priority leaves the light one 0.1 GB/s (9.05 s, 9.5x); the bound 2
 * makes them share (3.8 s and 1.85 s: 1.9x and 1.95x).
 */
static void test_guard_bound(void **state)
{
	struct crux_sim_config c;
	struct crux_sim_result *r;
	struct crux_sim_trace *t = heavy_light(0.2, 1.8e9, 0.05, 0.9e9);
	char err[512];

	small_config(*state, &c, CRUX_SIM_CRUX_FULL);
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_string_equal(r->label, "crux-full");
	assert_near(r->jobs[1].slowdown, 9.05 / 0.95, 1e-6);
	crux_sim_result_free(r);
	c.max_slowdown = 2;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_string_equal(r->label, "crux-full@2");
	assert_near(r->jobs[0].slowdown, 1.9, 1e-6);
	assert_near(r->jobs[1].slowdown, 1.85 / 0.95, 1e-6);
	assert_int_equal(r->jobs[0].level, r->jobs[1].level);
	assert_int_equal(r->infeasible_jobs, 0);
	crux_sim_result_free(r);
	/* At 1.2 the two need 1.8e9 / (1.2 x 2 s) + 0.9e9 / (1.2 x 0.95 s) = 1.54
	 * GB/s of the 1 GB/s cable: the light job (needing more) is reported
	 * infeasible; "/e" enforces every bound and reports none. */
	c.max_slowdown = 1.2;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(r->infeasible_jobs, 1);
	assert_int_equal(r->jobs[1].infeasible, 1);
	assert_int_equal(r->jobs[0].infeasible, 0);
	crux_sim_result_free(r);
	c.guard_enforce_all = 1;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_string_equal(r->label, "crux-full@1.2/e");
	assert_int_equal(r->infeasible_jobs, 0);
	crux_sim_result_free(r);
	c.guard_enforce_all = 0;
	/* "/r": the refinement after the guard; the light job stays reported. */
	c.guard_refine = 1;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_string_equal(r->label, "crux-full@1.2/r");
	assert_int_equal(r->jobs[1].infeasible, 1);
	crux_sim_result_free(r);
	c.guard_refine = 0;
	c.max_slowdown = 2;
	/* Weights must match the levels. */
	c.n_weights = 3;
	c.weight[0] = c.weight[1] = c.weight[2] = 1;
	assert_int_not_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_non_null(strstr(err, "level weights"));
	crux_sim_trace_free(t);
}

/*
 * The bound on each job's mean (the slowdown account) against the bound on
 * every plan: a heavy job (1.4e9 B, compute 0.6 s: 2 s alone) over a light
 * one (0.9e9 B, compute 0.05 s: 0.95 s alone). Strict priority leaves the
 * light one 0.3 GB/s: 3.2x, within a young job's free cap (2 x 2) but above 2. Per plan
 * (/p) they share from the start; with the account the light job runs at
 * 3.2x until its mean nears 2, then is protected (every plan within 2, which
 * holds it): both means end within 2, the light one close to it, and the
 * cluster computes more than per plan.
 */
static void test_guard_account(void **state)
{
	struct crux_sim_config c;
	struct crux_sim_result *r, *rp;
	struct crux_sim_trace *t = heavy_light(0.6, 1.4e9, 0.05, 0.9e9);
	char err[512];

	small_config(*state, &c, CRUX_SIM_CRUX_FULL);
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_near(r->jobs[1].slowdown, 3.05 / 0.95, 1e-6);
	crux_sim_result_free(r);
	c.max_slowdown = 2;
	c.per_plan = 1;
	assert_int_equal(crux_sim_run(t, &c, &rp, err, sizeof(err)), CRUX_OK);
	assert_string_equal(rp->label, "crux-full@2/p");
	assert_true(rp->jobs[0].slowdown <= 2 + 1e-9 && rp->jobs[1].slowdown <= 2 + 1e-9);
	c.per_plan = 0;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_string_equal(r->label, "crux-full@2");
	print_message("account: %.4f %.4f util %.4f; per plan: %.4f %.4f util %.4f; evals %zu\n",
		      r->jobs[0].slowdown, r->jobs[1].slowdown, r->mean_util, rp->jobs[0].slowdown,
		      rp->jobs[1].slowdown, rp->mean_util, r->evaluations);
	assert_true(r->jobs[0].slowdown <= 2 + 1e-6 && r->jobs[1].slowdown <= 2 + 1e-6);
	assert_true(r->jobs[1].slowdown > 1.9);
	assert_true(r->evaluations >= 2); /* the account's own event replanned */
	assert_true(r->mean_util > rp->mean_util);
	crux_sim_result_free(r);
	crux_sim_result_free(rp);
	crux_sim_trace_free(t);
}

/* CASSINI: equal periods (2 s), phases of 1 s shifted apart: no contention left. */
static void test_cassini_turns(void **state)
{
	struct crux_sim_config c;
	struct crux_sim_result *r;
	char err[512];
	small_config(*state, &c, CRUX_SIM_CASSINI);
	struct crux_sim_trace *t = two_jobs(0, 1e9);
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	double lo, hi;
	sorted_iters(r, &lo, &hi);
	assert_near(lo, 2.0, 1e-6);
	assert_near(hi, 2.0, 1e-6);
	assert_near(r->mean_util, 0.5, 1e-6);
	crux_sim_result_free(r);
	crux_sim_trace_free(t);
}

/* Fully overlapped: communication (1 s alone) hidden behind 1 s of compute. */
static void test_overlapped(void **state)
{
	struct crux_sim_config c;
	struct crux_sim_result *r;
	char err[512];
	small_config(*state, &c, CRUX_SIM_CRUX_FULL);
	struct crux_sim_trace *t = two_jobs(1.0, 1e9);
	t->n_jobs = 1; /* job 1 alone */
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_near(r->jobs[0].iso_iter_s, 1.0, 1e-9);
	assert_near(r->jobs[0].mean_iter_s, 1.0, 1e-6);
	/* Half overlapped: 0.5 s of compute first, then 1 s on the cable. */
	t->jobs[0].overlap = 0.5;
	crux_sim_result_free(r);
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
	assert_near(r->jobs[0].mean_iter_s, 1.5, 1e-6);
	crux_sim_result_free(r);
	t->n_jobs = 2;
	crux_sim_trace_free(t);
}

static void gen_small(struct crux_sim_trace **t, uint64_t seed)
{
	struct crux_sim_workload_params wp;
	char err[256];
	crux_sim_workload_defaults(&wp);
	wp.seed = seed;
	wp.n_jobs = 80;
	wp.span_s = 6 * 3600;
	wp.total_gpus = 16 * 8;
	wp.max_job_gpus = 64;
	wp.median_s = 900;
	assert_int_equal(crux_sim_workload_generate(&wp, t, err, sizeof(err)), CRUX_OK);
}

static void small_clos(struct crux_sim_config *c, enum crux_sim_policy p)
{
	crux_sim_config_defaults(c);
	c->policy = p;
	c->topo = CRUX_SIM_TOPO_CLOS2;
	crux_sim_topo_defaults(CRUX_SIM_TOPO_CLOS2, &c->tp);
	c->tp.n_tor = 8;
	c->tp.n_agg = 4;
	c->tp.hosts_per_tor = 2;
	c->tp.channels = 4;
	c->placement = CRUX_SIM_PLACE_RANDOM;
}

/* Bytes the jobs sent = bytes the links carried; no link above its capacity. */
static void test_conservation(void **state)
{
	(void)state;
	struct crux_sim_trace *t;
	gen_small(&t, 7);
	for (int p = 0; p < CRUX_SIM_N_POLICIES; p++) {
		struct crux_sim_config c;
		struct crux_sim_result *r;
		char err[512];
		small_clos(&c, (enum crux_sim_policy)p);
		assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
		assert_true(r->job_bytes > 0);
		assert_true(fabs(r->link_bytes - r->job_bytes) <= 1e-9 * r->job_bytes);
		double sum = 0;
		for (size_t i = 0; i < r->n_jobs; i++) {
			sum += r->jobs[i].net_bytes;
			if (r->jobs[i].finish_s >= 0)
				assert_near(r->jobs[i].iterations_done,
					    (double)r->jobs[i].iterations, 1e-6);
			assert_true(r->jobs[i].slowdown >= 1 - 1e-9);
		}
		assert_true(fabs(sum - r->job_bytes) <= 1e-9 * r->job_bytes);
		assert_true(r->max_link_load <= 1 + 1e-6);
		assert_int_equal(r->finished, r->n_jobs);
		crux_sim_result_free(r);
	}
	crux_sim_trace_free(t);
}

/* Stepping through every iteration reaches the same state as jumping. */
static void test_step_equals_jump(void **state)
{
	(void)state;
	struct crux_sim_trace *t;
	gen_small(&t, 11);
	struct crux_sim_config c;
	struct crux_sim_result *a, *b;
	char err[512];
	small_clos(&c, CRUX_SIM_CRUX_FULL);
	c.horizon_s = 1800;
	assert_int_equal(crux_sim_run(t, &c, &a, err, sizeof(err)), CRUX_OK);
	c.step_iterations = 1;
	assert_int_equal(crux_sim_run(t, &c, &b, err, sizeof(err)), CRUX_OK);
	assert_true(b->steps > 1000);
	assert_near(a->mean_util, b->mean_util, 1e-9);
	for (size_t i = 0; i < a->n_jobs; i++)
		assert_near(a->jobs[i].iterations_done, b->jobs[i].iterations_done,
			    1e-6 * (1 + a->jobs[i].iterations_done));
	crux_sim_result_free(a);
	crux_sim_result_free(b);
	crux_sim_trace_free(t);
}

static char *trace_text(const struct crux_sim_trace *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(crux_sim_trace_write(f, t), CRUX_OK);
	fclose(f);
	return buf;
}

static void test_determinism(void **state)
{
	(void)state;
	struct crux_sim_trace *a, *b, *c3;
	gen_small(&a, 42);
	gen_small(&b, 42);
	gen_small(&c3, 43);
	char *ta = trace_text(a), *tb = trace_text(b), *tc = trace_text(c3);
	assert_string_equal(ta, tb);
	assert_string_not_equal(ta, tc);
	/* The text round-trips through the parser. */
	struct crux_sim_trace *p;
	char err[256];
	assert_int_equal(crux_sim_trace_parse(ta, strlen(ta), "rt", &p, err, sizeof(err)), CRUX_OK);
	char *tp = trace_text(p);
	assert_string_equal(ta, tp);
	/* Same seed, same simulation, bit for bit. */
	struct crux_sim_config c;
	struct crux_sim_result *r1, *r2;
	small_clos(&c, CRUX_SIM_CRUX_FULL);
	assert_int_equal(crux_sim_run(a, &c, &r1, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_sim_run(p, &c, &r2, err, sizeof(err)), CRUX_OK);
	assert_int_equal(r1->n_jobs, r2->n_jobs);
	for (size_t i = 0; i < r1->n_jobs; i++) {
		assert_true(r1->jobs[i].finish_s == r2->jobs[i].finish_s);
		assert_true(r1->jobs[i].slowdown == r2->jobs[i].slowdown);
		assert_int_equal(r1->jobs[i].level, r2->jobs[i].level);
	}
	assert_true(r1->mean_util == r2->mean_util);
	crux_sim_result_free(r1);
	crux_sim_result_free(r2);
	free(ta);
	free(tb);
	free(tc);
	free(tp);
	crux_sim_trace_free(a);
	crux_sim_trace_free(b);
	crux_sim_trace_free(c3);
	crux_sim_trace_free(p);
}

static void test_trace_errors(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		const char *want;
	} cases[] = {
	    {"", "empty trace"},
	    {"job 1 0 m 8 10 0.1 100 0.5 -\n", "first line must be 'crux-sim-trace 1'"},
	    {"crux-sim-trace 2\n", "unsupported trace version"},
	    {"crux-sim-trace 1\njob 1 0 m 8 10 0.1 100 0.5\n", "10 fields"},
	    {"crux-sim-trace 1\nwork 1\n", "unknown record 'work'"},
	    {"crux-sim-trace 1\njob 0 0 m 8 10 0.1 100 0.5 -\n", "field id"},
	    {"crux-sim-trace 1\njob 1 -1 m 8 10 0.1 100 0.5 -\n", "field arrival_s"},
	    {"crux-sim-trace 1\njob 1 nan m 8 10 0.1 100 0.5 -\n", "field arrival_s"},
	    {"crux-sim-trace 1\njob 1 0 b@d 8 10 0.1 100 0.5 -\n", "field model"},
	    {"crux-sim-trace 1\njob 1 0 m 0 10 0.1 100 0.5 -\n", "field gpus"},
	    {"crux-sim-trace 1\njob 1 0 m 8 x 0.1 100 0.5 -\n", "field iterations"},
	    {"crux-sim-trace 1\njob 1 0 m 8 10 0 100 0.5 -\n", "field compute_s"},
	    {"crux-sim-trace 1\njob 1 0 m 8 10 0.1 -5 0.5 -\n", "field comm_bytes"},
	    {"crux-sim-trace 1\njob 1 0 m 8 10 0.1 100 1.5 -\n", "field overlap"},
	    {"crux-sim-trace 1\njob 1 0 m 8 10 0.1 100 0.5 1,1\n", "listed twice"},
	    {"crux-sim-trace 1\njob 1 0 m 8 10 0.1 100 0.5 1,,2\n", "field hosts"},
	    {"crux-sim-trace 1\njob 1 0 m 2 10 0.1 100 0.5 1,2,3\n", "at most one host per GPU"},
	    {"crux-sim-trace 1\njob 7 0 m 8 10 0.1 100 0.5 -\njob 7 1 m 8 10 0.1 100 0.5 -\n",
	     "job id 7 appears more than once"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct crux_sim_trace *t = NULL;
		char err[512] = "";
		crux_status_t st = crux_sim_trace_parse(cases[i].text, strlen(cases[i].text),
							"bad.trace", &t, err, sizeof(err));
		if (st == CRUX_OK || !strstr(err, cases[i].want))
			fail_msg("case %zu: status %d, error '%s', wanted '%s'", i, st, err,
				 cases[i].want);
		assert_null(t);
		assert_non_null(strstr(err, "bad.trace:"));
	}
	/* Comments, blank lines, CRLF and explicit hosts are accepted. */
	static const char ok[] = "# a trace\r\n\ncrux-sim-trace 1 # header\r\n"
				 "job 3 10.5 gpt2-xl 16 100 0.3 3e9 0.3 4,5\r\n";
	struct crux_sim_trace *t;
	char err[256];
	assert_int_equal(crux_sim_trace_parse(ok, strlen(ok), "ok", &t, err, sizeof(err)), CRUX_OK);
	assert_int_equal(t->n_jobs, 1);
	assert_int_equal(t->jobs[0].n_hosts, 2);
	assert_int_equal(t->jobs[0].hosts[1], 5);
	assert_near(t->jobs[0].comm_bytes, 3e9, 0);
	crux_sim_trace_free(t);
	/* A missing file names the path. */
	assert_int_equal(crux_sim_trace_load("/nonexistent/x.trace", &t, err, sizeof(err)),
			 CRUX_ERR_NOENT);
	assert_non_null(strstr(err, "/nonexistent/x.trace"));
}

/* A trace that does not fit the topology is refused with the reason. */
static void test_trace_vs_topology(void **state)
{
	struct crux_sim_config c;
	struct crux_sim_result *r = NULL;
	char err[512] = "";
	small_config(*state, &c, CRUX_SIM_ECMP);
	struct crux_sim_trace *t = two_jobs(0, 1e9);
	t->jobs[1].hosts[1] = 9;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "host 9 does not exist"));
	t->jobs[1].hosts[1] = 3;
	t->jobs[1].gpus = 64;
	assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "asks for 64 GPUs"));
	assert_null(r);
	crux_sim_trace_free(t);
}

static void test_cassini_geometry(void **state)
{
	(void)state;
	assert_true(crux_sim_cassini_compatible(2.0, 2.05));
	assert_true(crux_sim_cassini_compatible(1.0, 3.02));
	assert_false(crux_sim_cassini_compatible(1.0, 1.5));
	assert_false(crux_sim_cassini_compatible(1.0, 7.0));
	/* [0,1) and [1,2) on a 2 s circle: disjoint; [0.5,1.5): half of each. */
	assert_near(crux_sim_cassini_overlap(0, 1, 2, 1, 1, 2), 0, 1e-12);
	assert_near(crux_sim_cassini_overlap(0, 1, 2, 0.5, 1, 2), 0.5, 1e-12);
	/* Wrap-around: [1.5, 2.5) covers [0, 0.5). */
	assert_near(crux_sim_cassini_overlap(0, 1, 2, 1.5, 1, 2), 0.5, 1e-12);
	/* Period 1 (phase 0.5) twice on a period-2 circle against [0, 1): 0.5. */
	assert_near(crux_sim_cassini_overlap(0, 0.5, 1, 0, 1, 2), 0.5, 1e-12);
}

static void test_workload_catalogue(void **state)
{
	(void)state;
	size_t n;
	const struct crux_sim_model *m = crux_sim_models(&n);
	assert_int_equal(n, 11);
	struct crux_sim_trace *t;
	gen_small(&t, 5);
	for (size_t i = 0; i < t->n_jobs; i++) {
		assert_true(t->jobs[i].compute_s > 0 && t->jobs[i].compute_s < 10);
		assert_true(t->jobs[i].comm_bytes > 0);
		assert_true(t->jobs[i].gpus <= 64);
		assert_true(i == 0 || t->jobs[i].arrival_s >= t->jobs[i - 1].arrival_s);
		assert_true(t->jobs[i].arrival_s < 6 * 3600);
	}
	/* BERT-base: 110M fp16 gradients = 220 MB. */
	assert_string_equal(m[0].name, "bert-base");
	crux_sim_trace_free(t);
}

/*
 * The baseline rules on a small Clos with thin uplinks (8 ToR x 2 hosts, 4 x
 * 20G uplinks, 4 channels): job 1 on one host (no network traffic), jobs 2-4
 * across ToRs with different intensities.
 */
static const uint32_t rule_hosts[4][4] = {{0}, {2, 4, 6, 8}, {3, 5, 7, 9}, {10, 12}};

static void rule_jobs(struct sim_active *a)
{
	static const uint32_t nh[4] = {1, 4, 4, 2};
	static const double compute[4] = {0.2, 0.3, 0.1, 0.05};
	static const double bytes[4] = {1e8, 4e8, 2e8, 1e8};

	for (int i = 0; i < 4; i++)
		a[i] = (struct sim_active){.id = (uint32_t)i + 1,
					   .gpus = 8 * nh[i],
					   .n_hosts = nh[i],
					   .hosts = rule_hosts[i],
					   .compute_s = compute[i],
					   .comm_bytes = bytes[i],
					   .overlap = 0.2};
}

static struct crux_sched_schedule *rule_plan(enum crux_sim_policy p, struct crux_sim_config *c)
{
	struct sim_engine *e;
	struct crux_sched_schedule *s;
	struct sim_active a[4];
	char err[256];

	small_clos(c, p);
	c->levels = 2;
	assert_int_equal(crux_sim_engine_new(c, &e, err, sizeof(err)), CRUX_OK);
	rule_jobs(a);
	assert_int_equal(crux_sim_engine_plan(e, a, 4, &s, err, sizeof(err)), CRUX_OK);
	crux_sim_engine_free(e);
	return s;
}

/* Sincronia ranks the job without network traffic last, on ECMP paths and on
 * Crux's: the levels of its rank mapping go to jobs that use the network. */
static void test_sincronia_no_traffic_last(void **state)
{
	static const enum crux_sim_policy pols[] = {CRUX_SIM_SINCRONIA, CRUX_SIM_SINCRONIA_LCP};

	(void)state;
	for (size_t k = 0; k < sizeof(pols) / sizeof(pols[0]); k++) {
		struct crux_sim_config c;
		struct crux_sched_schedule *s = rule_plan(pols[k], &c);

		assert_int_equal(s->d[0].rank, 3);
		assert_int_equal(s->d[0].level, 0);
		int top = 0;
		for (int i = 1; i < 4; i++)
			top += s->d[i].level == 1;
		assert_int_equal(top, 1); /* K = 2: the top-ranked networked job alone above */
		crux_sched_schedule_free(s);
	}
}

/* The baselines on least-congested paths and the diagnostic orders use
 * exactly Crux-full's paths; plain Sincronia keeps ECMP's (which differ here). */
static void test_lcp_same_paths_as_crux(void **state)
{
	static const enum crux_sim_policy same[] = {
	    CRUX_SIM_CRUX_PS_PA,  CRUX_SIM_SINCRONIA_LCP, CRUX_SIM_CASSINI_LCP,
	    CRUX_SIM_DIAG_RANDOM, CRUX_SIM_DIAG_REVERSED, CRUX_SIM_DIAG_ONE_LEVEL};
	struct crux_sim_config c;
	struct crux_sched_schedule *crux = rule_plan(CRUX_SIM_CRUX_FULL, &c);
	size_t flows = 0;

	(void)state;
	for (size_t k = 0; k < sizeof(same) / sizeof(same[0]); k++) {
		struct crux_sched_schedule *s = rule_plan(same[k], &c);

		assert_int_equal(s->n_paths, crux->n_paths);
		for (size_t f = 0; f < s->n_paths; f++)
			if (s->path_store[f] != crux->path_store[f])
				fail_msg("%s: flow %zu on path %d, Crux-full's %d",
					 crux_sim_policy_name(same[k]), f, s->path_store[f],
					 crux->path_store[f]);
		flows = s->n_paths;
		crux_sched_schedule_free(s);
	}
	assert_true(flows > 0);
	struct crux_sched_schedule *ecmp = rule_plan(CRUX_SIM_SINCRONIA, &c);
	size_t differ = 0;
	for (size_t f = 0; f < ecmp->n_paths; f++)
		differ += ecmp->path_store[f] != crux->path_store[f];
	assert_true(differ > 0);
	/* One level and CASSINI-lite on Crux's paths keep no priority. */
	struct crux_sched_schedule *one = rule_plan(CRUX_SIM_DIAG_ONE_LEVEL, &c);
	for (int i = 0; i < 4; i++)
		assert_int_equal(one->d[i].level, 0);
	crux_sched_schedule_free(one);
	crux_sched_schedule_free(ecmp);
	crux_sched_schedule_free(crux);
}

/*
 * The generator's offered load: GPU time asked at the isolated iteration
 * time it assumes (200 Gb/s per host, ring all-reduce) over the GPU time of
 * the span is the requested load; a lower load shortens the same jobs.
 */
static double offered_load(const struct crux_sim_trace *t,
			   const struct crux_sim_workload_params *wp)
{
	double asked = 0;

	for (size_t i = 0; i < t->n_jobs; i++) {
		const struct crux_sim_trace_job *j = &t->jobs[i];
		double h = ceil(j->gpus / 8.0);
		double comm =
		    h > 1 ? 2 * (h - 1) / h * j->comm_bytes * 8 / (wp->host_gbps * 1e9) : 0;
		double it = fmax(j->compute_s, (1 - j->overlap) * j->compute_s + comm);

		asked += (double)j->gpus * (double)j->iterations * it;
	}
	return asked / ((double)wp->total_gpus * wp->span_s);
}

static void test_workload_offered_load(void **state)
{
	static const double loads[] = {0.6, 0.8, 1.0};
	struct crux_sim_trace *t[3];
	char err[256];

	(void)state;
	for (int k = 0; k < 3; k++) {
		struct crux_sim_workload_params wp;

		crux_sim_workload_defaults(&wp);
		wp.seed = 5;
		wp.n_jobs = 300;
		wp.span_s = 2 * 86400;
		wp.total_gpus = 1024;
		wp.max_job_gpus = 128;
		wp.load = loads[k];
		assert_int_equal(crux_sim_workload_generate(&wp, &t[k], err, sizeof(err)), CRUX_OK);
		assert_near(offered_load(t[k], &wp), loads[k], 0.01 * loads[k]);
	}
	/* Same jobs and arrivals; iterations scale with the load. */
	for (size_t i = 0; i < t[0]->n_jobs; i++) {
		assert_int_equal(t[0]->jobs[i].gpus, t[2]->jobs[i].gpus);
		assert_near(t[0]->jobs[i].arrival_s, t[2]->jobs[i].arrival_s, 0);
		if (t[2]->jobs[i].iterations >= 100)
			assert_near((double)t[0]->jobs[i].iterations,
				    0.6 * (double)t[2]->jobs[i].iterations,
				    0.01 * (double)t[2]->jobs[i].iterations);
	}
	for (int k = 0; k < 3; k++)
		crux_sim_trace_free(t[k]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fair_share, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_priority, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ref_snapshots, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_guard_bound, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_guard_account, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cassini_turns, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_overlapped, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_trace_vs_topology, setup, teardown),
	    cmocka_unit_test(test_conservation),
	    cmocka_unit_test(test_step_equals_jump),
	    cmocka_unit_test(test_determinism),
	    cmocka_unit_test(test_trace_errors),
	    cmocka_unit_test(test_cassini_geometry),
	    cmocka_unit_test(test_workload_catalogue),
	    cmocka_unit_test(test_sincronia_no_traffic_last),
	    cmocka_unit_test(test_lcp_same_paths_as_crux),
	    cmocka_unit_test(test_workload_offered_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
