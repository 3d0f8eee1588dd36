/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The iteration detector on synthetic call traces: DDP (bucket rebuild in the
 * first iterations, many equal buckets), FSDP (per-layer all-gather and
 * reduce-scatter, with gradient accumulation), pipeline parallel send/recv
 * (1F1B), plus noise: a metric all-reduce every few steps, evaluation phases,
 * random stray calls.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "detect.h"

struct trace {
	uint32_t sig[CRUXC_DET_MAX_CALLS];
	uint64_t t[CRUXC_DET_MAX_CALLS]; /* start times, for the timed variants */
	uint64_t now;
	size_t n;
};

/* A call 'gap' ns after the previous one. */
static void put_at(struct trace *t, uint32_t s, uint64_t gap)
{
	t->now += gap;
	if (t->n < CRUXC_DET_MAX_CALLS) {
		t->t[t->n] = t->now;
		t->sig[t->n++] = s;
	}
}

static void put(struct trace *t, uint32_t s)
{
	put_at(t, s, 1000000);
}

/* Signatures: op in the high byte, a size or layer in the rest. */
#define AR(x)	(0x01000000u | (x))
#define AG(x)	(0x02000000u | (x))
#define RS(x)	(0x03000000u | (x))
#define SEND(x) (0x04000000u | (x))
#define RECV(x) (0x05000000u | (x))
#define BC(x)	(0x06000000u | (x))

static struct cruxc_det_scratch *scratch;

static int setup(void **state)
{
	(void)state;
	return cruxc_det_scratch_new(&scratch) == CRUX_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	cruxc_det_scratch_free(scratch);
	return 0;
}

static struct cruxc_det_result detect_ok(const struct trace *t)
{
	struct cruxc_det_result r;

	assert_int_equal(cruxc_detect(t->sig, NULL, t->n, scratch, &r), CRUX_OK);
	return r;
}

static struct cruxc_det_result detect_timed_ok(const struct trace *t)
{
	struct cruxc_det_result r;

	assert_int_equal(cruxc_detect(t->sig, t->t, t->n, scratch, &r), CRUX_OK);
	return r;
}

/* One DDP iteration: first (small) bucket, k full buckets, last bucket. */
static void ddp_iter(struct trace *t, int k)
{
	put(t, AR(1));
	for (int i = 0; i < k; i++)
		put(t, AR(25));
	put(t, AR(7));
}

static void test_ddp_rebuild(void **state)
{
	struct trace t = {.n = 0};
	struct cruxc_det_result r;

	(void)state;
	/* Two iterations before the rebuild: other bucket sizes and order. */
	for (int i = 0; i < 2; i++) {
		for (int j = 0; j < 9; j++)
			put(&t, AR(30 + j));
	}
	for (int i = 0; i < 150; i++)
		ddp_iter(&t, 4);
	r = detect_ok(&t);
	assert_int_equal(r.length, 6);
	assert_true(r.repeats >= 100);
}

/*
 * The first calls of a DDP run with two equal buckets (A A B per iteration)
 * after two warm-up calls: 'A' splits the run into alternating segments "A"
 * and "A B", each exactly half. Neither is "most" of A's segments, so no
 * period yet (a loaded machine ran detection here, counted a 2-call period
 * and published 111 iterations for 80 run); once B has repeated, the period
 * is the whole iteration.
 */
static void early_alternating(uint32_t a, uint32_t b)
{
	struct trace t = {.n = 0};
	struct cruxc_det_result r;

	put(&t, AR(40));
	put(&t, AR(41));
	for (int i = 0; i < 3; i++) {
		put(&t, a);
		put(&t, a);
		if (i < 2)
			put(&t, b);
	}
	/* C D A A B A A B A A: A's segments alternate, B's repeat twice */
	for (size_t n = 9; n <= t.n; n++) {
		crux_status_t st = cruxc_detect(t.sig, NULL, n, scratch, &r);
		if (st == CRUX_OK && r.length != 3)
			fail_msg("%zu calls: a %u-call period (%u repeats, coverage %.2f)", n,
				 r.length, r.repeats, r.coverage);
	}
	put(&t, b);
	for (int i = 0; i < 2; i++) {
		put(&t, a);
		put(&t, a);
		put(&t, b);
	}
	r = detect_ok(&t);
	assert_int_equal(r.length, 3);
}

/* Which of the two equal-share modes the sort meets first depends on the
 * signatures' hashes: try several. */
static void test_early_alternating_segments(void **state)
{
	(void)state;
	for (uint32_t x = 0; x < 32; x++)
		early_alternating(AR(100 + x), AR(7));
}

/* 60 identical full buckets: the period is the whole iteration, not one bucket. */
static void test_ddp_many_equal_buckets(void **state)
{
	struct trace t = {.n = 0};

	(void)state;
	for (int i = 0; i < 40; i++)
		ddp_iter(&t, 60);
	assert_int_equal(detect_ok(&t).length, 62);
}

/* Loss all-reduce every 10 steps and a broadcast of buffers each step. */
static void test_ddp_metric_noise(void **state)
{
	struct trace t = {.n = 0};
	struct cruxc_det_result r;

	(void)state;
	for (int i = 0; i < 200; i++) {
		put(&t, BC(3));
		ddp_iter(&t, 3);
		if (i % 10 == 9)
			put(&t, AR(0xff));
	}
	r = detect_ok(&t);
	assert_int_equal(r.length, 6);
}

/* Same with the extra call placed first in the next iteration, and a missing call. */
static void test_ddp_metric_noise_shifted(void **state)
{
	struct trace t = {.n = 0};

	(void)state;
	for (int i = 0; i < 200; i++) {
		if (i % 8 == 0)
			put(&t, AR(0xfe));
		put(&t, BC(3));
		put(&t, AR(1));
		put(&t, AR(25));
		put(&t, AR(25));
		if (i % 16 != 15)
			put(&t, AR(25));
		put(&t, AR(7));
	}
	assert_int_equal(detect_ok(&t).length, 6);
}

/* Training, a long evaluation phase (metric all-reduces only), training again. */
static void test_eval_phase(void **state)
{
	struct trace t = {.n = 0};

	(void)state;
	for (int i = 0; i < 250; i++)
		ddp_iter(&t, 5);
	for (int i = 0; i < 300; i++)
		put(&t, AR(0x99));
	for (int i = 0; i < 250; i++)
		ddp_iter(&t, 5);
	assert_int_equal(detect_ok(&t).length, 7);
}

/*
 * FSDP: root unit (embeddings) and L equal layers. Forward all-gathers every
 * unit, backward all-gathers in reverse and reduce-scatters each unit's grads.
 */
static void fsdp_micro(struct trace *t, int layers, int sync)
{
	put(t, AG(100));
	for (int l = 0; l < layers; l++)
		put(t, AG(10));
	for (int l = 0; l < layers; l++) {
		put(t, AG(10));
		if (sync)
			put(t, RS(10));
	}
	put(t, AG(100));
	if (sync)
		put(t, RS(100));
}

static void test_fsdp(void **state)
{
	struct trace t = {.n = 0};

	(void)state;
	for (int i = 0; i < 100; i++)
		fsdp_micro(&t, 12, 1);
	assert_int_equal(detect_ok(&t).length, 12 + 12 + 12 + 2 + 1);
}

static void test_fsdp_grad_accumulation(void **state)
{
	struct trace t = {.n = 0};
	uint32_t len = 0;

	(void)state;
	for (int i = 0; i < 40; i++) {
		size_t before = t.n;

		for (int m = 0; m < 3; m++)
			fsdp_micro(&t, 8, 0);
		fsdp_micro(&t, 8, 1);
		len = (uint32_t)(t.n - before);
	}
	assert_int_equal(detect_ok(&t).length, len);
}

/* 1F1B schedule of stage 1 of 4 with m micro-batches, then a DP all-reduce. */
static void pp_iter(struct trace *t, int m, int stages, int stage)
{
	int warm = stages - stage - 1;

	for (int i = 0; i < warm; i++) {
		put(t, RECV(0x100));
		put(t, SEND(0x200));
	}
	for (int i = 0; i < m - warm; i++) {
		put(t, RECV(0x100));
		put(t, SEND(0x200));
		put(t, RECV(0x201));
		put(t, SEND(0x101));
	}
	for (int i = 0; i < warm; i++) {
		put(t, RECV(0x201));
		put(t, SEND(0x101));
	}
	put(t, AR(55));
}

static void test_pipeline_1f1b(void **state)
{
	struct trace t = {.n = 0};

	(void)state;
	for (int i = 0; i < 60; i++)
		pp_iter(&t, 16, 4, 1);
	assert_int_equal(detect_ok(&t).length, 16 * 4 + 1);
}

/* Pure pipeline, no data parallelism: nothing but send/recv. */
static void test_pipeline_no_dp(void **state)
{
	struct trace t = {.n = 0};
	struct cruxc_det_result r;

	(void)state;
	for (int i = 0; i < 60; i++) {
		pp_iter(&t, 8, 4, 1);
		t.n--; /* drop the all-reduce */
	}
	r = detect_ok(&t);
	assert_int_equal(r.length, 8 * 4);
}

/* Random stray calls (1 in 50) on top of FSDP. */
static void test_random_noise(void **state)
{
	struct trace t = {.n = 0};
	unsigned seed = 12345;

	(void)state;
	for (int i = 0; i < 100; i++) {
		size_t start = t.n;

		fsdp_micro(&t, 6, 1);
		for (size_t j = start; j < t.n; j++) {
			seed = seed * 1103515245u + 12345u;
			if ((seed >> 16) % 50 == 0) {
				memmove(&t.sig[j + 1], &t.sig[j], (t.n - j) * sizeof(t.sig[0]));
				t.sig[j] = BC(0x77);
				t.n++;
				j++;
			}
		}
		if (t.n > CRUXC_DET_MAX_CALLS - 40)
			break;
	}
	assert_int_equal(detect_ok(&t).length, 6 * 3 + 3);
}

static void test_no_pattern(void **state)
{
	struct trace t = {.n = 0};
	struct cruxc_det_result r;
	unsigned seed = 1;

	(void)state;
	for (int i = 0; i < 2000; i++) {
		seed = seed * 1103515245u + 12345u;
		put(&t, AR(seed >> 8 & 0xffff));
	}
	assert_int_equal(cruxc_detect(t.sig, NULL, t.n, scratch, &r), CRUX_ERR_NOENT);
	assert_int_equal(cruxc_detect(t.sig, t.t, t.n, scratch, &r), CRUX_ERR_NOENT);
	assert_int_equal(cruxc_detect(t.sig, NULL, 3, scratch, &r), CRUX_ERR_NOENT);
	assert_int_equal(cruxc_detect(t.sig, NULL, CRUXC_DET_MAX_CALLS + 1, scratch, &r),
			 CRUX_ERR_INVAL);
}

/*
 * DDP with 20 equal buckets in backward (1 ms apart) after a 40 ms forward,
 * and a loss all-reduce every 10 steps: with the timing, the forward pauses
 * say one iteration per bucket run.
 */
static void ddp_timed(struct trace *t, int iters, int loss_every)
{
	for (int i = 0; i < iters; i++) {
		put_at(t, AR(1), 40000000);
		for (int b = 0; b < 20; b++)
			put_at(t, AR(25), 1000000);
		put_at(t, AR(7), 1000000);
		if (loss_every && i % loss_every == loss_every - 1)
			put_at(t, AR(0xff), 2000000);
	}
}

static void test_timed_equal_buckets_and_loss(void **state)
{
	struct trace t = {.n = 0};

	(void)state;
	ddp_timed(&t, 150, 10);
	assert_int_equal(detect_timed_ok(&t).length, 22);
	/* Structure alone finds the same here (the one-call period is never taken). */
	assert_int_equal(detect_ok(&t).length, 22);
}

/*
 * A single bucket per step plus a loss all-reduce every 5 steps: a one-call
 * period is never inferred, so five steps count as one iteration (the
 * per-iteration compute/communication ratio is the same).
 */
static void test_one_call_iteration_counts_groups(void **state)
{
	struct trace t = {.n = 0};

	(void)state;
	for (int i = 0; i < 600; i++) {
		put_at(&t, AR(25), 30000000);
		if (i % 5 == 4)
			put_at(&t, AR(0xff), 1000000);
	}
	assert_int_equal(detect_timed_ok(&t).length, 6);
	assert_int_equal(detect_ok(&t).length, 6);
}

/* Equal buckets with one pause per iteration: timing keeps the long period. */
static void test_timed_rhythm_keeps_long(void **state)
{
	struct trace t = {.n = 0};

	(void)state;
	for (int i = 0; i < 100; i++) {
		put_at(&t, AR(25), 40000000);
		for (int b = 0; b < 30; b++)
			put_at(&t, AR(25), 500000);
		put_at(&t, AR(9), 500000);
	}
	assert_int_equal(detect_timed_ok(&t).length, 32);
}

/* Two equal buckets and a smaller one after each compute pause: period 3. */
static void test_timed_two_equal_buckets(void **state)
{
	struct trace t = {.n = 0};

	(void)state;
	for (int i = 0; i < 300; i++) {
		put_at(&t, AR(25), 10000000);
		put_at(&t, AR(25), 3000000);
		put_at(&t, AR(6), 3000000);
	}
	assert_int_equal(detect_timed_ok(&t).length, 3);
	assert_int_equal(detect_ok(&t).length, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ddp_rebuild),
	    cmocka_unit_test(test_early_alternating_segments),
	    cmocka_unit_test(test_ddp_many_equal_buckets),
	    cmocka_unit_test(test_ddp_metric_noise),
	    cmocka_unit_test(test_ddp_metric_noise_shifted),
	    cmocka_unit_test(test_eval_phase),
	    cmocka_unit_test(test_fsdp),
	    cmocka_unit_test(test_fsdp_grad_accumulation),
	    cmocka_unit_test(test_pipeline_1f1b),
	    cmocka_unit_test(test_pipeline_no_dp),
	    cmocka_unit_test(test_random_noise),
	    cmocka_unit_test(test_no_pattern),
	    cmocka_unit_test(test_timed_equal_buckets_and_loss),
	    cmocka_unit_test(test_one_call_iteration_counts_groups),
	    cmocka_unit_test(test_timed_rhythm_keeps_long),
	    cmocka_unit_test(test_timed_two_equal_buckets),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
