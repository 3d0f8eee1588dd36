/* SPDX-License-Identifier: Apache-2.0 */
/* The reference model (crux/sched_ref.h) on hand-computed cases: strict
 * priority (the paper's Example 1), gap reuse between levels, per-flow and
 * per-job fairness, guaranteed shares, bad parameters, and crux-plan. */
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
#include <sys/wait.h>
#include <unistd.h>

#include "crux/sched.h"
#include "crux/sched_ref.h"
#include "sched_int.h" /* crux_sched_eval_set_peers */

static const char *g_plan_exe;

/* Every host on one switch; 8 Gbit/s = 1e9 bytes/s per direction. */
static const char *star =
    "host a b c d e x\nswitch s\n"
    "link a s 8\nlink b s 8\nlink c s 8\nlink d s 8\nlink e s 8\nlink x s 8\n";

struct fx {
	struct crux_sched_topo *t;
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s;
};

static void fx_init(struct fx *f)
{
	struct crux_sched_err err = {{0}};

	memset(f, 0, sizeof(*f));
	assert_int_equal(crux_sched_topo_parse(star, strlen(star), "star", &f->t, &err), CRUX_OK);
	crux_sched_jobs_init(&f->js);
}

static void fx_free(struct fx *f)
{
	crux_sched_schedule_free(f->s);
	crux_sched_jobs_free(&f->js);
	crux_sched_topo_free(f->t);
}

/* A job sending `bytes` from each of srcs (comma-free list of names) to x. */
static void job(struct fx *f, uint64_t id, const char *srcs, double bytes, double compute,
		double gpus_per_host)
{
	int hosts[8], n = 0;
	struct crux_sched_flow fl[8];

	for (const char *p = srcs; *p; p++) {
		char name[2] = {*p, 0};

		hosts[n] = crux_sched_topo_find(f->t, name);
		assert_true(hosts[n] >= 0);
		fl[n].src = hosts[n];
		fl[n].dst = crux_sched_topo_find(f->t, "x");
		fl[n].bytes = bytes;
		n++;
	}
	hosts[n] = crux_sched_topo_find(f->t, "x");
	struct crux_sched_job j = {.id = id,
				   .gpus = (int)(gpus_per_host * (n + 1)),
				   .n_hosts = n + 1,
				   .hosts = hosts,
				   .work = gpus_per_host * (n + 1) * compute,
				   .compute = compute,
				   .n_flows = n,
				   .flows = fl};

	assert_int_equal(crux_sched_jobs_add(&f->js, &j), CRUX_OK);
}

static void levels(struct fx *f, int K, const int *lev)
{
	crux_sched_schedule_free(f->s);
	f->s = NULL;
	assert_int_equal(crux_sched_schedule_new(f->js.v, f->js.n, K, &f->s), CRUX_OK);
	for (size_t i = 0; i < f->js.n; i++) {
		f->s->d[i].level = lev[i];
		for (int q = 0; q < f->js.v[i].n_flows; q++)
			f->s->d[i].path[q] = 0;
	}
}

static double ref(struct fx *f, enum crux_sched_ref_fairness fair, int phases, double *T,
		  struct crux_sched_ref_stats *rs)
{
	struct crux_sched_ref_params p;
	double u = -1;

	crux_sched_ref_params_default(&p);
	p.fairness = fair;
	p.phases = phases;
	assert_int_equal(crux_sched_reference(f->t, f->js.v, f->js.n, f->s, &p, T, &u, rs),
			 CRUX_OK);
	return u;
}

static double evalu(struct fx *f, enum crux_sched_eval_model m)
{
	struct crux_sched_eval *ev;
	double u = -1;

	f->s->eval_model = m;
	assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
	assert_int_equal(crux_sched_evaluate(ev, f->t, f->js.v, f->js.n, f->s, NULL, &u), CRUX_OK);
	crux_sched_eval_free(ev);
	return u;
}

#define NEAR(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

/* The review's toy case: two jobs, 1 s compute, 1 s communication, one link. */
static void test_two_identical_jobs(void **state)
{
	(void)state;
	struct fx f;
	double T[2];
	struct crux_sched_ref_stats rs;

	fx_init(&f);
	job(&f, 1, "a", 1e9, 1.0, 1);
	job(&f, 2, "b", 1e9, 1.0, 1);
	/* One level, both starting together: they stay in step and share the
	 * link for 2 s: T = 3 s, utilisation 1/3, which the evaluator says too. */
	levels(&f, 1, (int[]){0, 0});
	NEAR(ref(&f, CRUX_SCHED_REF_PER_FLOW, 0, T, &rs), 1.0 / 3, 1e-6);
	NEAR(T[0], 3.0, 1e-6);
	NEAR(T[1], 3.0, 1e-6);
	assert_int_equal(rs.starved, 0);
	assert_int_equal(rs.truncated, 0);
	NEAR(evalu(&f, CRUX_SCHED_EVAL_ALL_AT_ONCE), 1.0 / 3, 1e-9);
	/* The phase-aware evaluator's closed form for peers: T = 2.5192
	 * (test_sched.c derives it), 39.7 %. */
	crux_sched_eval_set_peers(0);
	NEAR(evalu(&f, CRUX_SCHED_EVAL_PHASE_AWARE), 1 / 2.5191565, 1e-4);
	crux_sched_eval_set_peers(2);
	/* Random start phases: a phase offset d (0..1 s) persists under fair
	 * sharing and gives T = 3 - d, so the mean lies strictly between. */
	double u = ref(&f, CRUX_SCHED_REF_PER_FLOW, 8, T, &rs);

	assert_true(u > 1.0 / 3 + 0.01 && u < 0.5 - 0.01);
	NEAR(T[0], T[1], 1e-6);
	/* By default the evaluator runs the two peers together (eval_peers.c)
	 * from its own phase draws: the offset persists there too, so it lands
	 * strictly between in step and interleaved, and both jobs alike. */
	double e = evalu(&f, CRUX_SCHED_EVAL_PHASE_AWARE);

	printf("two peers: evaluator %.4f, reference %.4f (8 phases)\n", e, u);
	assert_true(e > 1.0 / 3 + 0.01 && e < 0.5 - 0.01);
	/* Two levels, either order, any phase: the low job fills the high job's
	 * compute gaps, they interleave and both run at 2 s (50 %). The first
	 * model says 41.7 % (the low job sees the high one's average load, not
	 * its gaps); the phase-aware one runs the low job in the high one's
	 * windows and says 50 %. */
	for (int o = 0; o < 2; o++) {
		levels(&f, 2, o ? (int[]){0, 1} : (int[]){1, 0});
		for (int ph = 0; ph <= 4; ph += 4) {
			NEAR(ref(&f, CRUX_SCHED_REF_PER_FLOW, ph, T, &rs), 0.5, 1e-6);
			NEAR(T[0], 2.0, 1e-6);
			NEAR(T[1], 2.0, 1e-6);
		}
		NEAR(evalu(&f, CRUX_SCHED_EVAL_ALL_AT_ONCE), (0.5 + 1.0 / 3) / 2, 1e-9);
		NEAR(evalu(&f, CRUX_SCHED_EVAL_PHASE_AWARE), 0.5, 1e-9);
	}
	fx_free(&f);
}

/* Paper Example 1 (Fig. 11) under strict priority, both orders, in step. */
static void test_example1_strict_priority(void **state)
{
	(void)state;
	struct fx f;
	double T[2];

	fx_init(&f);
	/* Job 1: compute 2 s, 2 s on the link; job 2: 1 s and 1 s; 10 GPUs each. */
	job(&f, 1, "a", 2e9, 2.0, 5);
	job(&f, 2, "b", 1e9, 1.0, 5);
	/* Job 1 first: it runs at 4 s; job 2 gets the link's gaps: 4 s. */
	levels(&f, 2, (int[]){1, 0});
	NEAR(ref(&f, CRUX_SCHED_REF_PER_FLOW, 0, T, NULL), 0.375, 1e-6);
	NEAR(T[0], 4.0, 1e-6);
	NEAR(T[1], 4.0, 1e-6);
	/* Job 2 first: 2 s; job 1 fits 1 s slots between: 6 s. 41.7 %. */
	levels(&f, 2, (int[]){0, 1});
	NEAR(ref(&f, CRUX_SCHED_REF_PER_FLOW, 0, T, NULL), 2.5 / 6, 1e-6);
	NEAR(T[0], 6.0, 1e-6);
	NEAR(T[1], 2.0, 1e-6);
	fx_free(&f);
}

/* A job with 3 flows on a link against a job with 1: per flow 3/4, per job 1/2. */
static void test_per_flow_fairness(void **state)
{
	(void)state;
	struct fx f;
	double T[2];

	fx_init(&f);
	job(&f, 1, "abc", 3e9, 0.0, 1); /* 9e9 bytes into x per iteration */
	job(&f, 2, "d", 3e9, 0.0, 1);
	levels(&f, 1, (int[]){0, 0});
	/* Per flow: four flows at 0.25e9 each; all finish at 12 s together. */
	ref(&f, CRUX_SCHED_REF_PER_FLOW, 0, T, NULL);
	NEAR(T[0], 12.0, 1e-6);
	NEAR(T[1], 12.0, 1e-6);
	/* Per job: 0.5e9 each; job 2 ends every 6 s, job 1 after 18 s. */
	ref(&f, CRUX_SCHED_REF_PER_JOB, 0, T, NULL);
	NEAR(T[0], 18.0, 1e-6);
	NEAR(T[1], 6.0, 1e-6);
	/* The phase-aware evaluator weighs a job's flows on a link: job 1 gets
	 * more than the per-job half (18 s), which the first model gives it. */
	double Te[2];
	struct crux_sched_eval *ev;

	assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
	f.s->eval_model = CRUX_SCHED_EVAL_ALL_AT_ONCE;
	assert_int_equal(crux_sched_evaluate(ev, f.t, f.js.v, f.js.n, f.s, Te, NULL), CRUX_OK);
	NEAR(Te[0], 18.0, 1e-6);
	f.s->eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
	assert_int_equal(crux_sched_evaluate(ev, f.t, f.js.v, f.js.n, f.s, Te, NULL), CRUX_OK);
	assert_true(Te[0] < 17.0);
	crux_sched_eval_free(ev);
	fx_free(&f);
}

/* Strict priority starves a low level under a job that never stops sending;
 * guaranteed shares (weights 1, 3) give it a quarter of the link. */
static void test_strict_and_shares(void **state)
{
	(void)state;
	struct fx f;
	double T[2];
	struct crux_sched_ref_stats rs;

	fx_init(&f);
	job(&f, 1, "a", 1e9, 0.0, 1);
	job(&f, 2, "b", 1e9, 0.0, 1);
	levels(&f, 2, (int[]){1, 0});
	ref(&f, CRUX_SCHED_REF_PER_FLOW, 0, T, &rs);
	NEAR(T[0], 1.0, 1e-6);
	assert_int_equal(rs.starved, 1);
	assert_true(T[1] >= rs.horizon_s * 0.99);
	f.s->share[0] = 0.25;
	f.s->share[1] = 0.75;
	ref(&f, CRUX_SCHED_REF_PER_FLOW, 3, T, &rs);
	NEAR(T[0], 4.0 / 3, 1e-6);
	NEAR(T[1], 4.0, 1e-6);
	assert_int_equal(rs.starved, 0);
	fx_free(&f);
}

/* Overlap: communication starts half-way through a 2 s compute and takes 1 s
 * alone: T = 2 s alone; two such jobs in step share for 2 s: T = 3 s. */
static void test_overlap(void **state)
{
	(void)state;
	struct fx f;
	double T[2];

	fx_init(&f);
	job(&f, 1, "a", 1e9, 2.0, 1);
	f.js.v[0].overlap = 0.5;
	levels(&f, 1, (int[]){0});
	ref(&f, CRUX_SCHED_REF_PER_FLOW, 0, T, NULL);
	NEAR(T[0], 2.0, 1e-6);
	job(&f, 2, "b", 1e9, 2.0, 1);
	f.js.v[1].overlap = 0.5;
	levels(&f, 1, (int[]){0, 0});
	ref(&f, CRUX_SCHED_REF_PER_FLOW, 0, T, NULL);
	NEAR(T[0], 3.0, 1e-6);
	NEAR(T[1], 3.0, 1e-6);
	fx_free(&f);
}

/* A job with explicit flows between named hosts ("ab" = a to b). */
static void job_flows(struct fx *f, uint64_t id, const char *const *pairs, int n, double bytes,
		      double compute, double overlap, int steps)
{
	int hosts[8], nh = 0;
	struct crux_sched_flow fl[8];

	for (int k = 0; k < n; k++) {
		int h[2];

		for (int e = 0; e < 2; e++) {
			char name[2] = {pairs[k][e], 0};
			int q = 0;

			h[e] = crux_sched_topo_find(f->t, name);
			assert_true(h[e] >= 0);
			while (q < nh && hosts[q] != h[e])
				q++;
			if (q == nh)
				hosts[nh++] = h[e];
		}
		fl[k] = (struct crux_sched_flow){h[0], h[1], bytes};
	}
	struct crux_sched_job j = {.id = id,
				   .gpus = nh,
				   .n_hosts = nh,
				   .hosts = hosts,
				   .work = nh * compute,
				   .compute = compute,
				   .overlap = overlap,
				   .steps = steps,
				   .n_flows = n,
				   .flows = fl};

	assert_int_equal(crux_sched_jobs_add(&f->js, &j), CRUX_OK);
}

/*
 * Ring steps: a part waits for its ring predecessor's previous part. Job 1
 * is a two-host ring (a->b, b->a, 1 s of bytes each, 1 s compute overlapped)
 * below two higher jobs that take b's downlink in odd seconds and a's in
 * even ones. As one transfer each hop sends in its free second: T = 2 s. In
 * 4 dependent steps a hop sends one part per free second and then waits for
 * the other's (which waits for the next second): T = 4 s, by hand:
 * a->b 4.25-4.5, b->a 5-5.5, a->b 6-6.5, b->a 7-7.5, a->b 8-8.25.
 */
static void test_ring_steps(void **state)
{
	(void)state;
	struct fx f;
	double T[3];

	for (int steps = 0; steps <= 4; steps += 4) {
		fx_init(&f);
		job_flows(&f, 1, (const char *const[]){"ab", "ba"}, 2, 1e9, 1.0, 1.0, steps);
		job_flows(&f, 2, (const char *const[]){"db"}, 1, 1e9, 1.0, 0.0, 0);
		job_flows(&f, 3, (const char *const[]){"ea"}, 1, 1e9, 2.0, 1.0, 0);
		levels(&f, 2, (int[]){0, 1, 1});
		ref(&f, CRUX_SCHED_REF_PER_FLOW, 0, T, NULL);
		NEAR(T[1], 2.0, 1e-6);
		NEAR(T[2], 2.0, 1e-6);
		NEAR(T[0], steps ? 4.0 : 2.0, 1e-6);
		/* Alone, steps change nothing: 1 s of bytes per hop. */
		levels(&f, 2, (int[]){1, 0, 0});
		f.js.v[1].flows[0].bytes = f.js.v[2].flows[0].bytes = 0;
		ref(&f, CRUX_SCHED_REF_PER_FLOW, 0, T, NULL);
		NEAR(T[0], 1.0, 1e-6);
		fx_free(&f);
	}
}

static void test_bad_params_and_determinism(void **state)
{
	(void)state;
	struct fx f;
	struct crux_sched_ref_params p;
	double u1, u2, T[2];

	fx_init(&f);
	job(&f, 1, "a", 1e9, 1.0, 1);
	job(&f, 2, "b", 1e9, 0.7, 1);
	levels(&f, 1, (int[]){0, 0});
	crux_sched_ref_params_default(&p);
	p.warmup_iters = p.horizon_iters;
	assert_int_equal(crux_sched_reference(f.t, f.js.v, f.js.n, f.s, &p, T, &u1, NULL),
			 CRUX_ERR_INVAL);
	crux_sched_ref_params_default(&p);
	p.horizon_iters = NAN;
	assert_int_equal(crux_sched_reference(f.t, f.js.v, f.js.n, f.s, &p, T, &u1, NULL),
			 CRUX_ERR_INVAL);
	crux_sched_ref_params_default(&p);
	p.fairness = (enum crux_sched_ref_fairness)7;
	assert_int_equal(crux_sched_reference(f.t, f.js.v, f.js.n, f.s, &p, T, &u1, NULL),
			 CRUX_ERR_INVAL);
	crux_sched_ref_params_default(&p);
	f.js.v[0].compute = -1;
	assert_int_equal(crux_sched_reference(f.t, f.js.v, f.js.n, f.s, &p, T, &u1, NULL),
			 CRUX_ERR_INVAL);
	f.js.v[0].compute = 1;
	/* Truncation is reported, and what was simulated is still measured. */
	struct crux_sched_ref_stats rs;

	p.max_events = 50;
	p.phases = 0;
	assert_int_equal(crux_sched_reference(f.t, f.js.v, f.js.n, f.s, &p, T, &u1, &rs), CRUX_OK);
	assert_int_equal(rs.truncated, 1);
	crux_sched_ref_params_default(&p);
	assert_int_equal(crux_sched_reference(f.t, f.js.v, f.js.n, f.s, &p, T, &u1, NULL), CRUX_OK);
	assert_int_equal(crux_sched_reference(f.t, f.js.v, f.js.n, f.s, &p, T, &u2, NULL), CRUX_OK);
	assert_true(u1 == u2);
	fx_free(&f);
}

static int run_cmd(const char *cmd, char *out, size_t cap)
{
	FILE *p = popen(cmd, "r");
	size_t n = 0;

	assert_non_null(p);
	while (n + 1 < cap && !feof(p)) {
		size_t r = fread(out + n, 1, cap - 1 - n, p);

		if (!r)
			break;
		n += r;
	}
	out[n] = 0;
	int st = pclose(p);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_plan_cli_reference(void **state)
{
	(void)state;
	char dir[] = "/tmp/crux-test-ref-XXXXXX", tp[128], jp[128], cmd[1024];
	static char out[65536];

	assert_non_null(mkdtemp(dir));
	snprintf(tp, sizeof(tp), "%s/t.topo", dir);
	snprintf(jp, sizeof(jp), "%s/j.jobs", dir);
	FILE *fp = fopen(tp, "w");

	assert_non_null(fp);
	fputs(star, fp);
	fclose(fp);
	fp = fopen(jp, "w");
	assert_non_null(fp);
	fputs("job 1 hosts=a,x gpus=2 compute=1\nflow 1 a x 1e9\n"
	      "job 2 hosts=b,x gpus=2 compute=1\nflow 2 b x 1e9\n",
	      fp);
	fclose(fp);
	snprintf(cmd, sizeof(cmd),
		 "%s --topology %s --jobs %s --levels 2 --reference --ref-phases 0 --json 2>&1",
		 g_plan_exe, tp, jp);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "\"ref_model\":{\"fairness\":\"flow\",\"phases\":0,"
				    "\"gpu_util\":0.500000"));
	assert_non_null(strstr(out, "\"ref_iter_time\":2,"));
	/* The guard's report: two jobs each needing 2e9 / (1.1 x 2.2 s) = 0.83
	 * GB/s of x's 1 GB/s link at bound 1.1: one is infeasible. */
	fp = fopen(jp, "w");
	assert_non_null(fp);
	fputs("job 1 hosts=a,x gpus=2 compute=0.2\nflow 1 a x 2e9\n"
	      "job 2 hosts=b,x gpus=2 compute=0.2\nflow 2 b x 2e9\n",
	      fp);
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "%s --topology %s --jobs %s --max-slowdown 1.1 --json 2>&1",
		 g_plan_exe, tp, jp);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "\"guard_infeasible\":1,"));
	assert_non_null(strstr(out, "\"infeasible\":true"));
	assert_non_null(strstr(out, "\"infeasible\":false"));
	snprintf(cmd, sizeof(cmd), "%s --topology %s --jobs %s --max-slowdown 1.1 2>&1", g_plan_exe,
		 tp, jp);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "1 jobs no schedule can hold within it"));
	snprintf(cmd, sizeof(cmd), "%s --topology %s --jobs %s --reference --ref-fairness tcp 2>&1",
		 g_plan_exe, tp, jp);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "--ref-fairness 'tcp': expected flow or job"));
	snprintf(cmd, sizeof(cmd), "%s --topology %s --jobs %s --reference --ref-phases -1 2>&1",
		 g_plan_exe, tp, jp);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 2);
	unlink(tp);
	unlink(jp);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_identical_jobs),
	    cmocka_unit_test(test_example1_strict_priority),
	    cmocka_unit_test(test_per_flow_fairness),
	    cmocka_unit_test(test_strict_and_shares),
	    cmocka_unit_test(test_overlap),
	    cmocka_unit_test(test_ring_steps),
	    cmocka_unit_test(test_bad_params_and_determinism),
	    cmocka_unit_test(test_plan_cli_reference),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s CRUX_PLAN\n", argv[0]);
		return 2;
	}
	g_plan_exe = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
