/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stall breakdown (crux_prof_stalls_*) on synthetic timelines: per
 * iteration, compute intervals, communication intervals and the intervals
 * during which the net plugin had transfers in flight. The truth is measured
 * on the timeline (1 us steps): compute busy, exposed communication inside
 * and outside the plugin's busy time. The record's figures are what the
 * preload and the plugin publish for it (unions, overlap, the plugin's busy
 * fraction over whole iterations); the breakdown from them must give the
 * truth exactly without overlap, and within the stated bound (overlap / iteration)
 * with it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crux/profile.h"

#define ITER_US 100000
#define MAXIV	16

struct iv {
	int a, b; /* [a, b) in us inside the iteration */
};

struct timeline {
	struct iv compute[MAXIV], comm[MAXIV], net[MAXIV];
	int ncompute, ncomm, nnet;
};

struct truth {
	double compute, interconnect, network, other, overlap;
};

/* What the record holds for the timeline, and the truth measured on it. */
struct figures {
	double iter_s, compute_s, comm_s, overlap_s, stall_s, busy_frac;
};

static bool in(const struct iv *v, int n, int t)
{
	for (int i = 0; i < n; i++)
		if (t >= v[i].a && t < v[i].b)
			return true;
	return false;
}

static void measure(const struct timeline *tl, struct figures *f, struct truth *tr)
{
	long cp = 0, cm = 0, ov = 0, nb = 0, net_exposed = 0, intra_exposed = 0;

	for (int t = 0; t < ITER_US; t++) {
		bool c = in(tl->compute, tl->ncompute, t);
		bool m = in(tl->comm, tl->ncomm, t);
		bool n = in(tl->net, tl->nnet, t);

		cp += c;
		cm += m;
		ov += c && m;
		nb += n;
		if (m && !c) {
			if (n)
				net_exposed++;
			else
				intra_exposed++;
		}
	}
	f->iter_s = ITER_US / 1e6;
	f->compute_s = cp / 1e6;
	f->comm_s = cm / 1e6;
	f->overlap_s = ov / 1e6;
	f->stall_s = (cm - ov) / 1e6;
	f->busy_frac = (double)nb / ITER_US; /* the plugin's period: whole iterations */
	tr->compute = (double)cp / ITER_US;
	tr->network = (double)net_exposed / ITER_US;
	tr->interconnect = (double)intra_exposed / ITER_US;
	tr->other = 1.0 - tr->compute - tr->network - tr->interconnect;
	tr->overlap = (double)ov / ITER_US;
}

static void split(const struct figures *f, struct crux_prof_stalls *s)
{
	crux_prof_stalls_from(f->iter_s, f->compute_s, f->comm_s, f->stall_s, f->busy_frac, s);
}

#define EPS 1e-9

static void check_exact(const struct timeline *tl, double compute, double inter, double net,
			double other)
{
	struct figures f;
	struct truth tr;
	struct crux_prof_stalls s;

	measure(tl, &f, &tr);
	/* the timeline is what the test says it is */
	assert_true(fabs(tr.compute - compute) < EPS && fabs(tr.interconnect - inter) < EPS &&
		    fabs(tr.network - net) < EPS && fabs(tr.other - other) < EPS);
	split(&f, &s);
	assert_true(s.valid && s.net_known);
	assert_true(fabs(s.compute - compute) < EPS);
	assert_true(fabs(s.interconnect - inter) < EPS);
	assert_true(fabs(s.network - net) < EPS);
	assert_true(fabs(s.other - other) < EPS);
	assert_true(fabs(s.compute + s.interconnect + s.network + s.other - 1.0) < EPS);
}

/* compute 60 ms, then 15 ms inside the host, then 25 ms waiting on the plugin */
static void test_sequential(void **state)
{
	(void)state;
	struct timeline tl = {.compute = {{0, 60000}},
			      .ncompute = 1,
			      .comm = {{60000, 100000}},
			      .ncomm = 1,
			      .net = {{75000, 100000}},
			      .nnet = 1};
	check_exact(&tl, 0.60, 0.15, 0.25, 0);
}

/* a single-host job: communication never reaches the plugin */
static void test_intra_only(void **state)
{
	(void)state;
	struct timeline tl = {
	    .compute = {{0, 70000}}, .ncompute = 1, .comm = {{70000, 100000}}, .ncomm = 1};
	check_exact(&tl, 0.70, 0.30, 0, 0);
}

/* data loading (neither) and several buckets, network and intra-host interleaved */
static void test_buckets_and_idle(void **state)
{
	(void)state;
	struct timeline tl = {
	    .compute = {{10000, 40000}, {50000, 70000}},
	    .ncompute = 2,
	    .comm = {{40000, 50000}, {70000, 100000}},
	    .ncomm = 2,
	    .net = {{42000, 50000}, {80000, 95000}},
	    .nnet = 2,
	};
	/* compute 50 ms, idle 10 ms, network 8 + 15 = 23 ms, intra 2 + 10 + 5 = 17 ms */
	check_exact(&tl, 0.50, 0.17, 0.23, 0.10);
}

/* overlap with compute, the communication entirely inter-host: still exact */
static void test_overlap_all_network(void **state)
{
	(void)state;
	struct timeline tl = {.compute = {{0, 70000}},
			      .ncompute = 1,
			      .comm = {{50000, 100000}},
			      .ncomm = 1,
			      .net = {{50000, 100000}},
			      .nnet = 1};
	check_exact(&tl, 0.70, 0, 0.30, 0);
}

/*
 * Overlap where the network part hides under compute and the intra-host part
 * is exposed: the worst case of proportional attribution. Truth: network 0,
 * interconnect 0.3; estimate 0.15 / 0.15. The error is within overlap / iteration.
 */
static void test_overlap_bound(void **state)
{
	(void)state;
	struct timeline tl = {.compute = {{0, 70000}},
			      .ncompute = 1,
			      .comm = {{40000, 100000}},
			      .ncomm = 1,
			      .net = {{40000, 70000}},
			      .nnet = 1};
	struct figures f;
	struct truth tr;
	struct crux_prof_stalls s;

	measure(&tl, &f, &tr);
	split(&f, &s);
	assert_true(fabs(tr.network) < EPS && fabs(tr.interconnect - 0.30) < EPS);
	assert_true(fabs(s.network - 0.15) < EPS && fabs(s.interconnect - 0.15) < EPS);
	assert_true(fabs(s.network - tr.network) <= tr.overlap + EPS);
	/* stalls as a whole stay exact: only their split moves */
	assert_true(fabs(s.network + s.interconnect - (tr.network + tr.interconnect)) < EPS);
}

/* random timelines: sums, bounds; exact whenever there is no overlap */
static void random_ivs(struct iv *v, int *n, unsigned *seed)
{
	*n = 1 + rand_r(seed) % 5;
	for (int i = 0; i < *n; i++) {
		int a = rand_r(seed) % ITER_US, len = rand_r(seed) % 30000;
		v[i].a = a;
		v[i].b = a + len > ITER_US ? ITER_US : a + len;
	}
}

static void test_random(void **state)
{
	(void)state;
	unsigned seed = 31;
	int exact = 0;

	for (int k = 0; k < 300; k++) {
		struct timeline tl;
		struct figures f;
		struct truth tr;
		struct crux_prof_stalls s;

		memset(&tl, 0, sizeof(tl));
		random_ivs(tl.compute, &tl.ncompute, &seed);
		random_ivs(tl.comm, &tl.ncomm, &seed);
		/* the plugin is busy only inside communication */
		tl.nnet = 0;
		for (int i = 0; i < tl.ncomm; i++) {
			struct iv c = tl.comm[i];
			int len = c.b - c.a;
			if (len <= 0 || rand_r(&seed) % 4 == 0)
				continue;
			int a = c.a + rand_r(&seed) % (len + 1);
			int b = a + rand_r(&seed) % (c.b - a + 1);
			tl.net[tl.nnet++] = (struct iv){a, b};
		}
		if (k % 2) { /* half without overlap: communication after the compute */
			tl.ncomm = tl.nnet = 0;
			int end = 0;
			for (int i = 0; i < tl.ncompute; i++)
				end = tl.compute[i].b > end ? tl.compute[i].b : end;
			if (end < ITER_US) {
				int mid = end + rand_r(&seed) % (ITER_US - end + 1);
				tl.comm[tl.ncomm++] = (struct iv){end, ITER_US};
				tl.net[tl.nnet++] = (struct iv){mid, ITER_US};
			}
		}
		measure(&tl, &f, &tr);
		split(&f, &s);
		assert_true(s.valid);
		assert_true(fabs(s.compute + s.interconnect + s.network + s.other - 1.0) < 1e-9);
		assert_true(s.compute >= 0 && s.interconnect >= 0 && s.network >= 0 &&
			    s.other >= 0);
		assert_true(fabs(s.compute - tr.compute) < EPS);
		assert_true(fabs(s.network - tr.network) <= tr.overlap + EPS);
		assert_true(fabs(s.network + s.interconnect - (tr.network + tr.interconnect)) <
			    EPS);
		if (tr.overlap < EPS) {
			assert_true(fabs(s.network - tr.network) < EPS);
			exact++;
		}
	}
	assert_true(exact >= 150);
}

/* no plugin figures: the network part is unknown, every exposed second intra-host */
static void test_unknown_and_degenerate(void **state)
{
	(void)state;
	struct crux_prof_stalls s;

	crux_prof_stalls_from(0.1, 0.06, 0.04, 0.04, -1, &s);
	assert_true(s.valid && !s.net_known);
	assert_true(fabs(s.interconnect - 0.4) < EPS && s.network == 0);
	crux_prof_stalls_from(0, 0.06, 0.04, 0.04, 0.5, &s);
	assert_false(s.valid);
	crux_prof_stalls_from(NAN, NAN, NAN, NAN, NAN, &s);
	assert_false(s.valid);
	/* absurd figures are clamped: stall beyond what compute leaves, busy > 1 */
	crux_prof_stalls_from(0.1, 0.09, 0.05, 0.05, 7, &s);
	assert_true(s.valid && s.net_known);
	assert_true(fabs(s.compute - 0.9) < EPS && fabs(s.network - 0.1) < EPS && s.other == 0 &&
		    s.interconnect == 0);
}

/* from a record's sections: the plugin's busy fraction over its period */
static void test_of_record(void **state)
{
	(void)state;
	struct crux_prof_compute c;
	struct crux_prof_net *n = calloc(1, sizeof(*n));
	struct crux_prof_stalls s;

	assert_non_null(n);
	memset(&c, 0, sizeof(c));
	c.iter_time_s = 0.2;
	c.compute_s = 0.12;
	c.comm_s = 0.08;
	c.stall_s = 0.08;
	n->busy_ns = 50000000000ull;
	n->busy_window_ns = 10000000000ull;
	n->busy_period_ns = 3000000000ull; /* 30 %: 60 ms of each 200 ms iteration */
	crux_prof_stalls_of(&c, true, n, true, &s);
	assert_true(s.valid && s.net_known);
	assert_true(fabs(s.network - 0.30) < EPS && fabs(s.interconnect - 0.10) < EPS);
	assert_true(fabs(s.net_busy_s - 0.06) < EPS);
	/*
	 * With a busy history the compute window's own span counts, not the
	 * plugin's period: window [20 s, 22 s], busy 1.0 s of it (50 %); the
	 * period says 30 %. Samples 1 s apart, busy linear inside each.
	 */
	c.window_end_ns = 22000000000ull;
	c.window_s = 2.0;
	n->nbusy_hist = 5;
	for (int i = 0; i < 5; i++) /* t = 19..23 s; 0.5 s busy per second from 19 s */
		n->busy_hist[i] = (struct crux_prof_busy_sample){(19ull + i) * 1000000000ull,
								 40000000000ull + i * 500000000ull};
	n->busy_ns = n->busy_hist[4].busy_ns;
	bool over = false;
	assert_true(fabs(crux_prof_busy_fraction(&c, true, n, true, &over) - 0.5) < EPS && over);
	crux_prof_stalls_of(&c, true, n, true, &s);
	/* busy 100 ms of the 200 ms iteration, comm 80 ms: capped, all exposed comm is network */
	assert_true(fabs(s.network - 0.40) < EPS && s.interconnect < EPS);
	/* half a sample interval: interpolated (21.5 s .. 23.5 s -> moved back to end at 23 s) */
	c.window_end_ns = 23500000000ull;
	assert_true(fabs(crux_prof_busy_fraction(&c, true, n, true, &over) - 0.5) < EPS && over);
	/* a window older than the history: the period's figure */
	c.window_end_ns = 19500000000ull;
	assert_true(fabs(crux_prof_busy_fraction(&c, true, n, true, &over) - 0.3) < EPS && !over);
	/* uneven busy inside the history: exact at the samples */
	n->busy_hist[2].busy_ns = n->busy_hist[1].busy_ns; /* nothing in 20..21 s */
	n->busy_hist[3].busy_ns = n->busy_hist[2].busy_ns + 900000000ull;
	n->busy_hist[4].busy_ns = n->busy_hist[3].busy_ns + 100000000ull;
	c.window_end_ns = 22000000000ull; /* 20..22 s: 0 + 0.9 s */
	assert_true(fabs(crux_prof_busy_fraction(&c, true, n, true, &over) - 0.45) < EPS && over);
	n->nbusy_hist = 0;
	c.window_end_ns = 0;
	c.window_s = 0;
	crux_prof_stalls_of(&c, true, n, false, &s);
	assert_true(s.valid && !s.net_known && fabs(s.interconnect - 0.4) < EPS);
	n->busy_window_ns = 0; /* published before any period: unknown */
	crux_prof_stalls_of(&c, true, n, true, &s);
	assert_false(s.net_known);
	crux_prof_stalls_of(&c, false, n, true, &s);
	assert_false(s.valid);
	free(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sequential),
	    cmocka_unit_test(test_intra_only),
	    cmocka_unit_test(test_buckets_and_idle),
	    cmocka_unit_test(test_overlap_all_network),
	    cmocka_unit_test(test_overlap_bound),
	    cmocka_unit_test(test_random),
	    cmocka_unit_test(test_unknown_and_degenerate),
	    cmocka_unit_test(test_of_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
