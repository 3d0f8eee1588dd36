/* SPDX-License-Identifier: Apache-2.0 */
/* Interval accounting on synthetic kernel records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "ival.h"

#define C CRUXC_IV_COMPUTE
#define N CRUXC_IV_COMM

static struct cruxc_iv_event scratch[256];

static struct cruxc_busy acc(const struct cruxc_iv *iv, size_t n, const struct cruxc_span *sp,
			     size_t ns)
{
	struct cruxc_busy b;

	assert_int_equal(cruxc_iv_account(iv, n, sp, ns, scratch, &b), CRUX_OK);
	return b;
}

static void test_disjoint(void **state)
{
	const struct cruxc_iv iv[] = {{0, 10, C, 0}, {10, 15, N, 0}, {20, 30, C, 0}};
	const struct cruxc_span sp[] = {{0, 40}};
	struct cruxc_busy b = acc(iv, 3, sp, 1);

	(void)state;
	assert_int_equal(b.compute_ns, 20);
	assert_int_equal(b.comm_ns, 5);
	assert_int_equal(b.overlap_ns, 0);
}

/* Concurrent kernels of one kind count once; overlap is the intersection of unions. */
static void test_unions_and_overlap(void **state)
{
	const struct cruxc_iv iv[] = {
	    {0, 100, C, 0},   {50, 150, C, 0},			  /* compute union [0,150) */
	    {120, 200, N, 0}, {130, 140, N, 0}, {190, 260, N, 0}, /* comm [120,260) */
	    {250, 255, C, 0},
	};
	const struct cruxc_span sp[] = {{0, 1000}};
	struct cruxc_busy b = acc(iv, 6, sp, 1);

	(void)state;
	assert_int_equal(b.compute_ns, 155);
	assert_int_equal(b.comm_ns, 140);
	assert_int_equal(b.overlap_ns, 30 + 5);
}

/* Only time inside the spans counts; gaps between spans are skipped. */
static void test_spans_clip(void **state)
{
	const struct cruxc_iv iv[] = {{0, 100, C, 0}, {40, 80, N, 0}};
	const struct cruxc_span sp[] = {{10, 20}, {30, 50}, {70, 90}, {200, 300}};
	struct cruxc_busy b = acc(iv, 2, sp, 4);

	(void)state;
	assert_int_equal(b.compute_ns, 10 + 20 + 20);
	assert_int_equal(b.comm_ns, 10 + 10);
	assert_int_equal(b.overlap_ns, 20);
}

static void test_unsorted_input_and_empty(void **state)
{
	const struct cruxc_iv iv[] = {{70, 90, N, 0}, {5, 5, C, 0}, {0, 60, C, 0}};
	const struct cruxc_span sp[] = {{0, 100}};
	struct cruxc_busy b = acc(iv, 3, sp, 1);

	(void)state;
	assert_int_equal(b.compute_ns, 60);
	assert_int_equal(b.comm_ns, 20);
	b = acc(NULL, 0, sp, 1);
	assert_int_equal(b.compute_ns + b.comm_ns + b.overlap_ns, 0);
	b = acc(iv, 3, NULL, 0);
	assert_int_equal(b.compute_ns + b.comm_ns + b.overlap_ns, 0);
}

static void test_bad_input(void **state)
{
	const struct cruxc_iv bad[] = {{10, 5, C, 0}};
	const struct cruxc_iv ok[] = {{0, 5, C, 0}};
	const struct cruxc_span overlapping[] = {{0, 10}, {5, 20}};
	const struct cruxc_span sp[] = {{0, 10}};
	struct cruxc_busy b;

	(void)state;
	assert_int_equal(cruxc_iv_account(bad, 1, sp, 1, scratch, &b), CRUX_ERR_INVAL);
	assert_int_equal(cruxc_iv_account(ok, 1, overlapping, 2, scratch, &b), CRUX_ERR_INVAL);
	assert_int_equal(cruxc_iv_account(ok, 1, sp, 1, NULL, &b), CRUX_ERR_INVAL);
}

/* Many random intervals against a brute-force count per nanosecond. */
static void test_random_against_bruteforce(void **state)
{
	struct cruxc_iv iv[100];
	const struct cruxc_span sp[] = {{50, 300}, {400, 900}};
	unsigned seed = 7;
	uint64_t c = 0, n = 0, o = 0;
	struct cruxc_busy b;

	(void)state;
	for (int i = 0; i < 100; i++) {
		uint64_t s, len;

		seed = seed * 1103515245u + 12345u;
		s = (seed >> 8) % 1000;
		seed = seed * 1103515245u + 12345u;
		len = (seed >> 8) % 40;
		iv[i] = (struct cruxc_iv){s, s + len, (seed >> 4) & 1, 0};
	}
	for (uint64_t t = 0; t < 1100; t++) {
		int in = (t >= 50 && t < 300) || (t >= 400 && t < 900), hc = 0, hn = 0;

		for (int i = 0; i < 100; i++) {
			if (t >= iv[i].start && t < iv[i].end) {
				hc |= iv[i].kind == C;
				hn |= iv[i].kind == N;
			}
		}
		c += in && hc;
		n += in && hn;
		o += in && hc && hn;
	}
	b = acc(iv, 100, sp, 2);
	assert_int_equal(b.compute_ns, c);
	assert_int_equal(b.comm_ns, n);
	assert_int_equal(b.overlap_ns, o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_disjoint),   cmocka_unit_test(test_unions_and_overlap),
	    cmocka_unit_test(test_spans_clip), cmocka_unit_test(test_unsorted_input_and_empty),
	    cmocka_unit_test(test_bad_input),  cmocka_unit_test(test_random_against_bruteforce),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
