/* SPDX-License-Identifier: Apache-2.0 */
/* Deadlines on the monotonic clock: normalised timespecs, a condvar wait that ends after its
 * deadline. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include "crux/clock.h"

static uint64_t ts_ns(struct timespec ts)
{
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void test_deadline_ts(void **state)
{
	(void)state;
	const uint64_t rels[] = {
	    0, 1, 999999999ull, 1000000000ull, 2500000000ull, 86400000000000ull};
	for (size_t i = 0; i < sizeof(rels) / sizeof(rels[0]); i++) {
		uint64_t before = crux_now_ns();
		struct timespec ts = crux_deadline_ts(rels[i]);
		uint64_t after = crux_now_ns();
		assert_true(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
		assert_true(ts_ns(ts) >= before + rels[i]);
		assert_true(ts_ns(ts) <= after + rels[i]);
	}
}

static void test_cond_wait(void **state)
{
	(void)state;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c;
	assert_int_equal(crux_cond_init_monotonic(&c), 0);
	/* the deadline is read on the clock the condvar was made with: the wait lasts 20 ms of it
	 */
	pthread_mutex_lock(&m);
	uint64_t t0 = crux_now_ns();
	assert_int_equal(crux_cond_wait_ns(&c, &m, 20000000ull), ETIMEDOUT);
	assert_true(crux_now_ns() - t0 >= 20000000ull);
	pthread_mutex_unlock(&m);
	pthread_cond_destroy(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_deadline_ts),
	    cmocka_unit_test(test_cond_wait),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
