/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reader's loop of the seqlock (crux_seq_read) on a double-buffered
 * record like the decision table's: two banks, each with its counter, and an
 * 'active' index the writer flips after it has written the inactive bank.
 * The writer runs in the test's own thread, from inside 'pick', so the
 * interleavings that a preempted reader meets happen deterministically.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include <stdatomic.h>

#include "crux/seqlock.h"

struct bank {
	crux_seq_t seq; /* first: the region begins with its counter */
	uint64_t generation;
	uint64_t check; /* generation * 3: a torn read disagrees */
};

struct record {
	struct bank bank[2];
	_Atomic uint32_t active;
	uint64_t generation;
	/* The writer's steps to run inside the next pick(), and after how many picks. */
	void (*hook)(struct record *);
	unsigned hook_at, picks;
};

/* The writer's publish, split where a reader can see it half done. */
static int write_inactive(struct record *r)
{
	int b = (int)(atomic_load(&r->active) ^ 1u);
	uint64_t g = ++r->generation;
	crux_seq_write_begin(&r->bank[b].seq);
	r->bank[b].generation = g;
	r->bank[b].check = g * 3;
	crux_seq_write_end(&r->bank[b].seq);
	return b;
}

static void flip(struct record *r, int b)
{
	atomic_store_explicit(&r->active, (uint32_t)b, memory_order_release);
}

static void publish(struct record *r)
{
	flip(r, write_inactive(r));
}

static const void *pick(const void *rec)
{
	struct record *r = (struct record *)rec;
	const void *region = &r->bank[atomic_load_explicit(&r->active, memory_order_acquire)];
	/* The reader is preempted here: after choosing, before loading the counter. */
	if (r->hook && ++r->picks == r->hook_at) {
		void (*h)(struct record *) = r->hook;
		r->hook = NULL;
		h(r);
	}
	return region;
}

struct seen {
	uint64_t generation;
	int torn;
};

static void read_bank(const void *region, uint64_t seq, void *arg)
{
	const struct bank *b = region;
	struct seen *s = arg;
	(void)seq;
	s->generation = b->generation;
	s->torn = b->check != b->generation * 3;
}

static struct seen lookup(struct record *r)
{
	struct seen s = {0, 1};
	assert_int_equal(crux_seq_read(r, pick, read_bank, &s, CRUX_SEQ_MAX_RETRIES), CRUX_OK);
	assert_false(s.torn);
	return s;
}

static void setup(struct record *r)
{
	*r = (struct record){0};
	publish(r); /* generation 1 in bank 1 */
	publish(r); /* generation 2 in bank 0 */
	assert_int_equal(atomic_load(&r->active), 0);
}

/*
 * Two publishes while the reader sleeps between its pick and its counter
 * load, and the second not yet made active: the bank the reader picked is
 * consistent again, at a generation the record does not show yet.
 */
static void lap_unflipped(struct record *r)
{
	publish(r);		 /* generation 3 in bank 1, active */
	(void)write_inactive(r); /* generation 4 in bank 0, not flipped yet */
}

static void finish_lap(struct record *r)
{
	flip(r, 0);
}

/*
 * A lapped reader must not return the inactive bank: its next lookup would
 * read the active one, an older generation (what common-stress-decision
 * counted as a torn read once in 8 million). Fails without the reader's
 * check that the bank it read is still the one pick() returns.
 */
static void test_lapped_reader_stays_monotonic(void **state)
{
	(void)state;
	struct record r;
	setup(&r);
	r.hook = lap_unflipped;
	r.hook_at = 1;
	struct seen first = lookup(&r);
	struct seen second = lookup(&r);
	assert_true(second.generation >= first.generation);
	/* What the reader got was what the record showed: the active bank. */
	assert_int_equal(first.generation, 3);
	finish_lap(&r);
	struct seen third = lookup(&r);
	assert_int_equal(third.generation, 4);
}

/* A bank rewritten while the reader copied it: the copy is thrown away. */
static void lap_rewrite_same(struct record *r)
{
	crux_seq_write_begin(&r->bank[0].seq);
	r->bank[0].check = 0; /* half written */
}

static void test_torn_copy_retried(void **state)
{
	(void)state;
	struct record r;
	setup(&r);
	/* The writer is mid-write on the active bank from the first pick on: BUSY. */
	r.hook = lap_rewrite_same;
	r.hook_at = 1;
	struct seen s = {0, 0};
	assert_int_equal(crux_seq_read(&r, pick, read_bank, &s, 8), CRUX_ERR_BUSY);
	crux_seq_write_end(&r.bank[0].seq);
	r.bank[0].check = r.bank[0].generation * 3;
	assert_int_equal(lookup(&r).generation, 2);
}

/* Flips between a reader's lookups are seen in order, one lookup each. */
static void test_successive_publishes(void **state)
{
	(void)state;
	struct record r;
	setup(&r);
	for (uint64_t g = 3; g < 40; g++) {
		publish(&r);
		assert_int_equal(lookup(&r).generation, g);
	}
}

/* Without a pick (single region), the loop reads the record itself. */
static void test_no_pick(void **state)
{
	(void)state;
	struct bank b = {0};
	crux_seq_write_begin(&b.seq);
	b.generation = 7;
	b.check = 21;
	crux_seq_write_end(&b.seq);
	struct seen s = {0, 1};
	assert_int_equal(crux_seq_read(&b, NULL, read_bank, &s, 4), CRUX_OK);
	assert_int_equal(s.generation, 7);
	assert_false(s.torn);
	crux_seq_write_begin(&b.seq);
	assert_int_equal(crux_seq_read(&b, NULL, read_bank, &s, 4), CRUX_ERR_BUSY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lapped_reader_stays_monotonic),
	    cmocka_unit_test(test_torn_copy_retried),
	    cmocka_unit_test(test_successive_publishes),
	    cmocka_unit_test(test_no_pick),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
