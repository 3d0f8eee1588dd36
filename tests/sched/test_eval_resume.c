/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The evaluator's resume cache (crux_sched_evaluate_links with reuse): after any
 * sequence of level changes it must give bit for bit what a full pass gives,
 * whichever levels moved (none, one, several, the top, the bottom).
 */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "crux/sched.h"
#include "sched_int.h"

/* Two leaves of three hosts, two spines: cross-leaf flows have two paths. */
static const char *leafspine = "host h0 h1 h2 h3 h4 h5\nswitch l0 l1 s0 s1\n"
			       "link h0 l0 8\nlink h1 l0 8\nlink h2 l0 8\n"
			       "link h3 l1 8\nlink h4 l1 8\nlink h5 l1 8\n"
			       "link l0 s0 8\nlink l0 s1 8\nlink l1 s0 8\nlink l1 s1 8\n";

static void random_jobs(struct crux_sched_jobs *js, int n, unsigned *seed)
{
	for (int i = 0; i < n; i++) {
		int hosts[3], nh = 2 + (int)(rand_r(seed) % 2);
		struct crux_sched_flow fl[3];

		for (int h = 0; h < nh; h++)
			hosts[h] = (h * 3 + (int)(rand_r(seed) % 3)) % 6;
		if (hosts[0] == hosts[1])
			hosts[1] = (hosts[1] + 1) % 6;
		if (nh == 3 && (hosts[2] == hosts[0] || hosts[2] == hosts[1]))
			nh = 2;
		/* A ring over the hosts. */
		for (int h = 0; h < nh; h++) {
			fl[h].src = hosts[h];
			fl[h].dst = hosts[(h + 1) % nh];
			fl[h].bytes = (double)(1 + rand_r(seed) % 20) * 1e8;
		}
		struct crux_sched_job j = {.id = (uint64_t)i + 1,
					   .gpus = 8 * nh,
					   .n_hosts = nh,
					   .hosts = hosts,
					   .work = (double)(1 + rand_r(seed) % 9),
					   .compute = (double)(1 + rand_r(seed) % 19) / 10,
					   .overlap = (double)(rand_r(seed) % 4) / 4,
					   .n_flows = nh == 2 ? 1 : 3,
					   .flows = fl};

		assert_int_equal(crux_sched_jobs_add(js, &j), CRUX_OK);
	}
}

static void test_resume_matches_full(void **state)
{
	struct crux_sched_topo *t = NULL;
	struct crux_sched_err err = {{0}};
	unsigned seed = 4242;
	int resumed = 0;

	(void)state;
	assert_int_equal(crux_sched_topo_parse(leafspine, strlen(leafspine), "t", &t, &err),
			 CRUX_OK);
	for (int it = 0; it < 12; it++) {
		struct crux_sched_jobs js;
		struct crux_sched_params p;
		struct crux_sched_schedule *s;
		struct crux_sched_eval *ev_reuse, *ev_full;
		struct job_links jl;
		int n = 2 + (int)(rand_r(&seed) % 14);
		double T1[16], T2[16], u1, u2;

		crux_sched_jobs_init(&js);
		random_jobs(&js, n, &seed);
		crux_sched_params_default(&p);
		p.levels = 2 + (int)(rand_r(&seed) % 7);
		assert_int_equal(crux_sched_schedule_new(js.v, js.n, p.levels, &s), CRUX_OK);
		assert_int_equal(crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, s),
				 CRUX_OK);
		assert_int_equal(crux_sched_job_links_build(t, js.v, js.n, s, &jl), CRUX_OK);
		assert_int_equal(crux_sched_eval_new(&ev_reuse), CRUX_OK);
		assert_int_equal(crux_sched_eval_new(&ev_full), CRUX_OK);
		for (int step = 0; step < 30; step++) {
			/* 0..3 jobs to random levels (0: nothing moved). */
			int moves = (int)(rand_r(&seed) % 4);

			for (int m = 0; m < moves && step > 0; m++)
				s->d[rand_r(&seed) % (unsigned)n].level =
				    (int)(rand_r(&seed) % (unsigned)p.levels);
			memset(T1, 0, sizeof(T1));
			assert_int_equal(
			    crux_sched_evaluate_links(ev_reuse, t, js.v, js.n, s, &jl, 1, T1, &u1),
			    CRUX_OK);
			assert_int_equal(crux_sched_evaluate(ev_full, t, js.v, js.n, s, T2, &u2),
					 CRUX_OK);
			assert_memory_equal(T1, T2, (size_t)n * sizeof(double));
			assert_memory_equal(&u1, &u2, sizeof(double));
			resumed += step > 0;
		}
		crux_sched_job_links_free(&jl);
		crux_sched_eval_free(ev_reuse);
		crux_sched_eval_free(ev_full);
		crux_sched_schedule_free(s);
		crux_sched_jobs_free(&js);
	}
	assert_true(resumed > 300);
	crux_sched_topo_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_resume_matches_full),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
