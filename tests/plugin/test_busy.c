/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's busy time (plugin/src/busy.c): the union of the time with at
 * least one transfer in flight, on synthetic post/complete sequences with
 * known times, and its period over the publisher's samples; then many
 * threads posting and completing at once must leave nothing open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>

#include "busy.h"

#define MS 1000000ull

static void test_union(void **state)
{
	(void)state;
	cruxn_busy_reset();
	/* [10, 30) and [20, 50) overlap: 40 ms; [60, 70): 10 ms; idle between */
	cruxn_busy_begin_at(10 * MS);
	cruxn_busy_begin_at(20 * MS);
	cruxn_busy_end_at(30 * MS);
	assert_int_equal(cruxn_busy_total_at(40 * MS), 30 * MS); /* open interval counted */
	cruxn_busy_end_at(50 * MS);
	assert_int_equal(cruxn_busy_total_at(55 * MS), 40 * MS);
	cruxn_busy_begin_at(60 * MS);
	cruxn_busy_end_at(70 * MS);
	assert_int_equal(cruxn_busy_total_at(100 * MS), 50 * MS);
}

static void test_period(void **state)
{
	(void)state;
	uint64_t total, window, in;

	cruxn_busy_reset();
	/* 1 s samples; busy 300 ms of every second */
	for (uint64_t s = 0; s < 30; s++) {
		cruxn_busy_begin_at(s * 1000 * MS + 100 * MS);
		cruxn_busy_end_at(s * 1000 * MS + 400 * MS);
		cruxn_busy_sample((s + 1) * 1000 * MS, 10000 * MS, &total, &window, &in);
		assert_int_equal(total, (s + 1) * 300 * MS);
		if (s == 0) {
			assert_int_equal(window, 0); /* nothing to measure a period from */
		} else if (s < 10) {
			assert_int_equal(window, s * 1000 * MS); /* young: all there is */
			assert_int_equal(in, s * 300 * MS);
		} else {
			assert_int_equal(window, 10000 * MS);
			assert_int_equal(in, 3000 * MS);
		}
	}
}

/* the published history: spaced by period / 64, oldest first, ending now, monotonic */
static void test_history(void **state)
{
	(void)state;
	static struct crux_prof_net net;

	cruxn_busy_reset();
	/* publishes every 10 ms, period 6.4 s: samples kept 100 ms apart */
	for (uint64_t k = 1; k <= 1000; k++) {
		uint64_t now = k * 10 * MS;
		if (k % 10 == 3)
			cruxn_busy_begin_at(now - 5 * MS);
		if (k % 10 == 7)
			cruxn_busy_end_at(now - 5 * MS);
		cruxn_busy_publish(now, 6400 * MS, &net);
		assert_true(net.nbusy_hist >= 1 && net.nbusy_hist <= CRUX_PROF_BUSY_SAMPLES);
		assert_true(net.busy_hist[net.nbusy_hist - 1].t_ns == now);
		assert_true(net.busy_hist[net.nbusy_hist - 1].busy_ns == net.busy_ns);
		for (uint32_t i = 1; i < net.nbusy_hist; i++) {
			assert_true(net.busy_hist[i].t_ns > net.busy_hist[i - 1].t_ns);
			assert_true(net.busy_hist[i].busy_ns >= net.busy_hist[i - 1].busy_ns);
			if (i + 1 < net.nbusy_hist)
				assert_true(net.busy_hist[i].t_ns - net.busy_hist[i - 1].t_ns >=
					    100 * MS);
		}
	}
	assert_int_equal(net.nbusy_hist, CRUX_PROF_BUSY_SAMPLES);
	/* 40 ms busy in every 100 ms: over the history's span, 40 % */
	uint64_t span = net.busy_hist[63].t_ns - net.busy_hist[0].t_ns;
	uint64_t busy = net.busy_hist[63].busy_ns - net.busy_hist[0].busy_ns;
	assert_true(span >= 6000 * MS);
	assert_true(busy * 100 / span >= 39 && busy * 100 / span <= 41);
}

/* a request counted once, whatever the number of ends (close after completion) */
static void test_request_flag(void **state)
{
	(void)state;
	bool f = false;

	cruxn_busy_reset();
	cruxn_busy_req_begin(&f);
	cruxn_busy_req_begin(&f);
	cruxn_busy_req_end(&f);
	cruxn_busy_req_end(&f);
	uint64_t a = cruxn_busy_total_at(UINT64_MAX / 2);
	uint64_t b = cruxn_busy_total_at(UINT64_MAX / 2 + 1000);
	assert_int_equal(a, b); /* closed: no open interval left */
}

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200000; i++) {
		cruxn_busy_begin();
		cruxn_busy_end();
	}
	return NULL;
}

/* concurrent posts and completions: never negative, nothing left open */
static void test_threads(void **state)
{
	(void)state;
	pthread_t t[4];

	cruxn_busy_reset();
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker, NULL), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	uint64_t a = cruxn_busy_total_at(UINT64_MAX / 2);
	uint64_t b = cruxn_busy_total_at(UINT64_MAX / 2 + 1000);
	assert_int_equal(a, b);
	/* and it still counts afterwards */
	cruxn_busy_begin_at(UINT64_MAX / 2);
	cruxn_busy_end_at(UINT64_MAX / 2 + 5 * MS);
	assert_int_equal(cruxn_busy_total_at(UINT64_MAX / 2 + 10 * MS), a + 5 * MS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_union),   cmocka_unit_test(test_period),
	    cmocka_unit_test(test_history), cmocka_unit_test(test_request_flag),
	    cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
