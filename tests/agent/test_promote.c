/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of cruxd's promotion by measurement (crux/guard.h). */
/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>

#include "crux/guard.h"

#define SEC 1000000000ull
#define K   8

static struct cruxd_guard *mk(double bound)
{
	struct cruxd_guard_config c;
	struct cruxd_guard *g = NULL;

	cruxd_guard_config_default(&c);
	c.bound = bound;
	assert_int_equal(cruxd_guard_new(&c, &g), CRUX_OK);
	return g;
}

/* A job measured 5x slower than alone under a 2x bound: lifted after the
 * aging time, one more level per further aging time, never past the top. */
static void test_starved_promoted(void **state)
{
	struct cruxd_guard *g = mk(2.0);
	uint64_t t = SEC;

	(void)state;
	for (int s = 0; s < 10; s++, t += SEC) {
		assert_false(cruxd_guard_observe(g, 7, 5.0, t, K));
		assert_int_equal(cruxd_guard_lift(g, 7), 0);
	}
	assert_true(cruxd_guard_observe(g, 7, 5.0, t, K)); /* 10 s above */
	assert_int_equal(cruxd_guard_lift(g, 7), 1);
	/* Still 5x on the new level: the next level 10 s later (aging). */
	for (int s = 0; s < 11; s++) {
		t += SEC;
		cruxd_guard_observe(g, 7, 5.0, t, K);
	}
	assert_int_equal(cruxd_guard_lift(g, 7), 2);
	for (int s = 0; s < 200; s++) {
		t += SEC;
		cruxd_guard_observe(g, 7, 5.0, t, K);
	}
	assert_int_equal(cruxd_guard_lift(g, 7), K - 1);
	/* A job within the bound is never lifted; bad samples are ignored. */
	for (int s = 0; s < 100; s++)
		assert_false(cruxd_guard_observe(g, 8, 1.9, t + (uint64_t)s * SEC, K));
	assert_false(cruxd_guard_observe(g, 8, -1, t + 200 * SEC, K));
	assert_int_equal(cruxd_guard_lift(g, 8), 0);
	assert_true(cruxd_guard_slowdown(g, 8) > 1.8 && cruxd_guard_slowdown(g, 8) < 2.0);
	cruxd_guard_free(g);
}

/* Once it runs well below the bound for the hold time, it goes back. */
static void test_recovered_returned(void **state)
{
	struct cruxd_guard *g = mk(2.0);
	uint64_t t = SEC, lifted_at = 0;

	(void)state;
	while (!cruxd_guard_lift(g, 1)) {
		cruxd_guard_observe(g, 1, 4.0, t, K);
		t += SEC;
	}
	lifted_at = t;
	/* 1.6x: inside the band (below 2, above 0.7 x 2): keeps the lift. */
	for (int s = 0; s < 120; s++, t += SEC)
		cruxd_guard_observe(g, 1, 1.6, t, K);
	assert_int_equal(cruxd_guard_lift(g, 1), 1);
	/* 1.0x: returned after the 60 s hold, not before. */
	uint64_t start = t;

	while (cruxd_guard_lift(g, 1)) {
		cruxd_guard_observe(g, 1, 1.0, t, K);
		t += SEC;
		assert_true(t - start < 90 * SEC);
	}
	assert_true(t - start >= 60 * SEC);
	assert_true(t > lifted_at);
	assert_int_equal(cruxd_guard_changes(g), 2);
	/* Departed jobs are forgotten. */
	cruxd_guard_prune(g, t + 100 * SEC, 10 * SEC);
	assert_true(cruxd_guard_slowdown(g, 1) == 0);
	cruxd_guard_free(g);
}

/* Noise around the bound does not flap the level. */
static void test_noise_no_oscillation(void **state)
{
	struct cruxd_guard *g = mk(2.0);
	uint32_t x = 12345;
	uint64_t t = SEC;

	(void)state;
	/* Uniform 1.2 .. 2.4 (mean 1.8; a third of the samples above the bound)
	 * for two hours: never lifted. */
	for (int s = 0; s < 7200; s++, t += SEC) {
		x = x * 1664525u + 1013904223u;
		cruxd_guard_observe(g, 3, 1.2 + 1.2 * (double)(x >> 8) / (double)(1u << 24), t, K);
	}
	assert_int_equal(cruxd_guard_changes(g), 0);
	/* Lifted once, then 1.4 .. 2.3 on that level (mostly inside the band)
	 * for an hour: it keeps exactly that lift. */
	while (!cruxd_guard_lift(g, 4)) {
		cruxd_guard_observe(g, 4, 6.0, t, K);
		t += SEC;
	}
	uint64_t before = cruxd_guard_changes(g);

	for (int s = 0; s < 3600; s++, t += SEC) {
		x = x * 1664525u + 1013904223u;
		cruxd_guard_observe(g, 4, 1.4 + 0.9 * (double)(x >> 8) / (double)(1u << 24), t, K);
	}
	assert_int_equal(cruxd_guard_changes(g), before);
	assert_int_equal(cruxd_guard_lift(g, 4), 1);
	cruxd_guard_free(g);
}

/*
 * A job that is fine only while lifted (1.2x lifted, 5x not): each return
 * that has to be undone doubles its hold, so it flips a few times in an
 * hour instead of every 35 s, and spends most of the hour lifted.
 */
static void test_needs_lift_backs_off(void **state)
{
	struct cruxd_guard *g = mk(2.0);
	uint64_t t = SEC, lifted = 0;

	(void)state;
	for (int s = 0; s < 3600; s++, t += SEC) {
		bool up = cruxd_guard_lift(g, 9) > 0;

		lifted += up;
		cruxd_guard_observe(g, 9, up ? 1.2 : 5.0, t, K);
	}
	assert_true(cruxd_guard_changes(g) <= 20);
	assert_true(lifted > 3600 * 9 / 10);
	cruxd_guard_free(g);
}

/* Many starving jobs at once: at most max_changes lifts per gap. */
static void test_rate_bound(void **state)
{
	struct cruxd_guard *g = mk(2.0);
	uint64_t t = SEC;
	int lifted = 0;

	(void)state;
	for (int s = 0; s <= 10; s++, t += SEC)
		for (uint64_t k = 100; k < 120; k++)
			cruxd_guard_observe(g, k, 10.0, t, K);
	for (uint64_t k = 100; k < 120; k++)
		lifted += cruxd_guard_lift(g, k) > 0;
	assert_int_equal(lifted, 4);
	/* Off: nothing is lifted, and switching off drops existing lifts. */
	struct cruxd_guard_config c;

	cruxd_guard_config_default(&c);
	cruxd_guard_configure(g, &c);
	for (uint64_t k = 100; k < 120; k++)
		assert_int_equal(cruxd_guard_lift(g, k), 0);
	assert_false(cruxd_guard_observe(g, 100, 10.0, t + 100 * SEC, K));
	cruxd_guard_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_starved_promoted),
	    cmocka_unit_test(test_recovered_returned),
	    cmocka_unit_test(test_noise_no_oscillation),
	    cmocka_unit_test(test_needs_lift_backs_off),
	    cmocka_unit_test(test_rate_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
