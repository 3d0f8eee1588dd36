/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The phase-aware evaluator's gap reuse has a bounded cost. A lower job is
 * simulated against the windows of the jobs above it; the number of events
 * that takes must stay bounded whatever the jobs: a fuzzed pair (a higher job
 * whose period is 1e75 times the lower one's) once spent 163,840 events per
 * evaluation and 20 s under the sanitizers; a job starved by a window that
 * fills its period spent them too, on every call of the guard. A transfer
 * over many higher periods meets their average load and takes no events.
 */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "crux/sched.h"
#include "sched_int.h"

static const char clos[] = "host h0 h1 h2 h3\nswitch tor0 tor1 agg0 agg1\n"
			   "link h0 tor0 100\nlink h1 tor0 100\nlink h2 tor1 100\n"
			   "link h3 tor1 100\nlink tor0 agg0 100\nlink tor0 agg1 100\n"
			   "link tor1 agg0 100\nlink tor1 agg1 100\n";

/* Job 2 above job 1, both evaluated phase-aware; returns the gap events. */
static size_t evaluate_two(const char *jobs, double *T, double *util)
{
	struct crux_sched_topo *t = NULL;
	struct crux_sched_err err = {{0}};
	struct crux_sched_jobs js;
	struct crux_sched_schedule *s = NULL;
	struct crux_sched_eval *ev = NULL;
	size_t n;

	assert_int_equal(crux_sched_topo_parse(clos, sizeof(clos) - 1, "clos", &t, &err), CRUX_OK);
	crux_sched_jobs_init(&js);
	assert_int_equal(crux_sched_jobs_parse(jobs, strlen(jobs), "jobs", t, &js, &err), CRUX_OK);
	assert_int_equal(js.n, 2);
	assert_int_equal(crux_sched_schedule_new(js.v, js.n, 2, &s), CRUX_OK);
	assert_int_equal(crux_sched_paths_ecmp(t, js.v, js.n, 1, s), CRUX_OK);
	s->eval_model = CRUX_SCHED_EVAL_PHASE_AWARE;
	s->d[0].level = 0;
	s->d[1].level = 1;
	assert_int_equal(crux_sched_eval_new(&ev), CRUX_OK);
	assert_int_equal(crux_sched_evaluate(ev, t, js.v, js.n, s, T, util), CRUX_OK);
	n = crux_sched_eval_gap_events(ev);
	crux_sched_eval_free(ev);
	crux_sched_schedule_free(s);
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
	return n;
}

/* The fuzzer's input: the lower job's steps are lost to rounding next to
 * the higher job's phase, so every event moved it by 1e-9 of its period. */
static void test_far_periods_bounded(void **state)
{
	double T[2], util;
	size_t n;

	(void)state;
	n = evaluate_two("job 1 hosts=h0,h2 compute=0.2 allreduce=3e9\n"
			 "job 2 hosts=h0,h2 compute=0.8 allreduce=5e90\n",
			 T, &util);
	assert_true(n <= 4096);
	assert_true(isfinite(T[0]) && T[0] > 0 && isfinite(T[1]) && T[1] > 0);
	assert_true(util >= 0 && util <= 1);
	/* The same higher job starves a lower one outright: no window ends,
	 * nothing moves, and it took every event of every iteration. */
	n = evaluate_two("job 0 hosts=h0,h2 compute=0.2 allreduce=1e9\n"
			 "job 7 hosts=h0,h2 compute=0.8 allreduce=5e90\n",
			 T, &util);
	assert_true(n <= 4096);
	assert_true(isfinite(T[0]) && T[0] > 0 && isfinite(T[1]) && T[1] > 0);
}

/* A higher job sending 10 ms of every 20 ms: a lower transfer of seconds
 * spans hundreds of its periods (fluid answer, no events); one of 20 ms
 * fits its gaps and is simulated. */
static void test_span_cut(void **state)
{
	double T[2], util;

	(void)state;
	/* 100 GB/s links; allreduce over 2 hosts moves its bytes once each way. */
	const char *high = "job 2 hosts=h0,h2 compute=0.01 overlap=0 allreduce=1e9\n";
	char text[256];

	snprintf(text, sizeof(text), "job 1 hosts=h0,h2 compute=1 allreduce=4e11\n%s", high);
	assert_int_equal(evaluate_two(text, T, &util), 0);
	snprintf(text, sizeof(text), "job 1 hosts=h0,h2 compute=0.02 allreduce=1e9\n%s", high);
	assert_true(evaluate_two(text, T, &util) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_far_periods_bounded),
	    cmocka_unit_test(test_span_cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
