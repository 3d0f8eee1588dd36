/* SPDX-License-Identifier: Apache-2.0 */
/* crux-sim placement policies: hand-built cases with known answers (Dally's
 * delay timer, its auto-tuner and preemption choice; SJF-BCO's order and
 * balance), and whole runs under every placement. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crux/sim.h"
#include "placer.h"
#include "sim_engine.h"

#define assert_near(a, b, eps)                                                                     \
	do {                                                                                       \
		double a_ = (a), b_ = (b), e_ = (eps);                                             \
		if (!(fabs(a_ - b_) <= e_))                                                        \
			fail_msg("%s = %.12g, expected %.12g (+-%g)", #a, a_, b_, e_);             \
	} while (0)

/* Host link 200 Gb/s = 25e9 B/s. */
#define HOST_BPS 25e9

struct rig {
	struct crux_sim_config cfg;
	struct sim_engine *eng;
	struct sim_place *p;
	uint32_t hosts[16], n;
	double retry;
	const size_t *victims;
	size_t n_victims;
};

/* A two-layer Clos of n_tor ToRs x hpt hosts of one GPU each; each ToR's
 * uplinks (2 x 100G) carry exactly one host's rate. */
static void rig_new(struct rig *r, enum crux_sim_placement pl, uint32_t n_tor, uint32_t hpt,
		    size_t n_jobs)
{
	char err[256];

	memset(r, 0, sizeof(*r));
	crux_sim_config_defaults(&r->cfg);
	crux_sim_topo_defaults(CRUX_SIM_TOPO_CLOS2, &r->cfg.tp);
	r->cfg.tp.n_tor = n_tor;
	r->cfg.tp.n_agg = 2;
	r->cfg.tp.hosts_per_tor = hpt;
	r->cfg.tp.gpus_per_host = 1;
	r->cfg.tp.channels = 1;
	r->cfg.tp.host_gbps = 200;
	r->cfg.tp.tor_gbps = 100;
	r->cfg.placement = pl;
	assert_int_equal(crux_sim_engine_new(&r->cfg, &r->eng, err, sizeof(err)), CRUX_OK);
	assert_int_equal(crux_sim_place_new(&r->cfg, r->eng, n_jobs, &r->p, err, sizeof(err)),
			 CRUX_OK);
	/* Hosts are numbered ToR by ToR. */
	uint32_t ng;
	const uint32_t *g = crux_sim_engine_host_group(r->eng, &ng);
	assert_int_equal(ng, n_tor);
	for (uint32_t h = 0; h < n_tor * hpt; h++)
		assert_int_equal(g[h], h / hpt);
}

static void rig_free(struct rig *r)
{
	crux_sim_place_free(r->p);
	crux_sim_engine_free(r->eng);
}

/* A job of 'gpus' hosts whose ring transfer takes tau_s alone, with 1 s of
 * compute and no overlap: sensitivity tau / (1 + tau). */
static struct sim_place_job job(size_t idx, uint32_t gpus, double tau_s, double remaining)
{
	struct sim_place_job j = {
	    .idx = idx, .gpus = gpus, .compute_s = 1, .overlap = 0, .remaining = remaining};
	double g = gpus;
	j.comm_bytes = gpus > 1 ? tau_s * HOST_BPS * g / (2 * (g - 1)) : 0;
	return j;
}

static enum sim_place_verdict try_at(struct rig *r, const struct sim_place_job *j, double now)
{
	return crux_sim_place_try(r->p, j, now, r->hosts, &r->n, &r->retry, &r->victims,
				  &r->n_victims);
}

/* Start a job on the given hosts (the trace's placement). */
static void occupy(struct rig *r, struct sim_place_job *j, const uint32_t *hosts, uint32_t n,
		   double now)
{
	j->fixed = hosts;
	j->n_fixed = n;
	assert_int_equal(try_at(r, j, now), SIM_PLACE_OK);
	j->fixed = NULL;
	j->n_fixed = 0;
}

static uint32_t groups_of(const struct rig *r, uint32_t hpt)
{
	uint32_t mask = 0, k = 0;
	for (uint32_t i = 0; i < r->n; i++)
		mask |= 1u << (r->hosts[i] / hpt);
	for (; mask; mask &= mask - 1)
		k++;
	return k;
}

static void test_sensitivity(void **state)
{
	(void)state;
	struct rig r;
	rig_new(&r, CRUX_SIM_PLACE_DALLY, 2, 2, 4);
	struct sim_place_job j = job(0, 2, 1.0, 10);
	/* tau 1 s, compute 1 s, no overlap: T = 2 s, sigma = 0.5. */
	assert_near(crux_sim_place_sensitivity(r.p, &j), 0.5, 1e-12);
	/* (1 - network stall fraction) / intensity: f = 1/2, I = c / tau = 1. */
	assert_near((1 - 0.5) / 1.0, crux_sim_place_sensitivity(r.p, &j), 1e-12);
	/* Half overlapped: T = max(1, 0.5 + 1) = 1.5, sigma = 2/3. */
	j.overlap = 0.5;
	assert_near(crux_sim_place_sensitivity(r.p, &j), 1 / 1.5, 1e-12);
	/* On one host: no fabric. */
	struct sim_place_job one = job(1, 1, 0, 10);
	assert_near(crux_sim_place_sensitivity(r.p, &one), 0, 0);
	rig_free(&r);
}

/* 3 ToRs x 2 hosts; one host of each ToR busy: a 2-host job waits for a ToR
 * until its fixed timer, then spreads; a ToR freed in time is taken. */
static void test_dally_timer_expiry(void **state)
{
	(void)state;
	struct rig r;
	rig_new(&r, CRUX_SIM_PLACE_DALLY, 3, 2, 8);
	r.cfg.delay_timer_s = 100;
	uint32_t h0 = 0, h2 = 2, h4 = 4;
	struct sim_place_job a = job(0, 1, 0, 10), b = job(1, 1, 0, 10), c = job(2, 1, 0, 10);
	occupy(&r, &a, &h0, 1, 0);
	occupy(&r, &b, &h2, 1, 0);
	occupy(&r, &c, &h4, 1, 0);

	struct sim_place_job j = job(3, 2, 1.0, 1000);
	j.enq_s = 10;
	assert_int_equal(try_at(&r, &j, 10), SIM_PLACE_WAIT);
	assert_near(r.retry, 110, 1e-9);
	assert_int_equal(try_at(&r, &j, 109.9), SIM_PLACE_WAIT);
	assert_near(r.retry, 110, 1e-9);
	/* Expired: no victim (single-host jobs), spread over two ToRs. */
	assert_int_equal(try_at(&r, &j, 110), SIM_PLACE_OK);
	assert_int_equal(r.n, 2);
	assert_int_equal(groups_of(&r, 2), 2);
	crux_sim_place_release(r.p, 3, r.hosts, r.n, 2);

	/* ToR 1 frees up before the timer: the job takes it at once. */
	crux_sim_place_release(r.p, 1, &h2, 1, 1);
	j.enq_s = 200;
	assert_int_equal(try_at(&r, &j, 250), SIM_PLACE_OK);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.hosts[0], 2);
	assert_int_equal(r.hosts[1], 3);

	/* An insensitive job (sigma < 0.1) does not wait under a fixed timer. */
	struct sim_place_job k = job(4, 2, 0.01, 1000);
	k.enq_s = 300;
	assert_near(crux_sim_place_timer(r.p, &k), 0, 0);
	assert_int_equal(try_at(&r, &k, 300), SIM_PLACE_OK);
	assert_int_equal(groups_of(&r, 2), 2);
	rig_free(&r);
}

/* The auto-tuned timer: sigma x (stretch - 1) x remaining isolated time,
 * with the stretch learnt from the running cross-ToR jobs. */
static void test_dally_autotune(void **state)
{
	(void)state;
	struct rig r;
	rig_new(&r, CRUX_SIM_PLACE_DALLY, 2, 2, 4);
	struct sim_place_job j = job(0, 2, 1.0, 1000);
	/* sigma 0.5, prior stretch 2, R = 1000 x 2 s: 1000 s. */
	assert_near(crux_sim_place_stretch(r.p), 2, 0);
	assert_near(crux_sim_place_timer(r.p, &j), 1000, 1e-9);

	/* A cross-ToR job (hosts 0 and 2), sigma 0.5, running at 2x its isolated time:
	 * its transfer is stretched 3x; the tuner moves 20 % of the way: 2.2. */
	uint32_t hs[2] = {0, 2};
	struct sim_place_job x = job(1, 2, 1.0, 1000);
	occupy(&r, &x, hs, 2, 0);
	size_t idx = 1;
	struct sim_active act = {.id = 2, .gpus = 2, .iso_s = 2};
	struct sim_eval_out out = {.iter_s = 4};
	crux_sim_place_observe(r.p, &idx, &act, &out, 1);
	assert_near(crux_sim_place_stretch(r.p), 2.2, 1e-12);
	assert_near(crux_sim_place_timer(r.p, &j), 0.5 * 1.2 * 2000, 1e-9);
	/* An uncongested fabric: the stretch decays to 1 and nobody waits. */
	out.iter_s = 2;
	for (int i = 0; i < 200; i++)
		crux_sim_place_observe(r.p, &idx, &act, &out, 1);
	assert_near(crux_sim_place_stretch(r.p), 1, 1e-9);
	assert_true(crux_sim_place_timer(r.p, &j) < 1e-6);
	/* Long jobs are capped at 4 h. */
	out.iter_s = 20;
	crux_sim_place_observe(r.p, &idx, &act, &out, 1);
	j.remaining = 1e9;
	assert_near(crux_sim_place_timer(r.p, &j), 4 * 3600.0, 1e-9);
	rig_free(&r);
}

/*
 * 3 ToRs x 2 hosts, all busy: ToR 0 runs a compute-bound job (sigma 0.01),
 * ToR 1 a sensitive one (0.5), ToR 2 a compute-bound job started late. A
 * sensitive job (0.5) whose timer expired preempts only the first: the
 * second is as sensitive as it is, the third ran less than 10 minutes.
 */
static void test_dally_preemption(void **state)
{
	(void)state;
	struct rig r;
	rig_new(&r, CRUX_SIM_PLACE_DALLY, 3, 2, 8);
	r.cfg.delay_timer_s = 60;
	uint32_t t0[2] = {0, 1}, t1[2] = {2, 3}, t2[2] = {4, 5};
	struct sim_place_job v0 = job(0, 2, 0.01, 1e6), v1 = job(1, 2, 1.0, 1e6),
			     v2 = job(2, 2, 0.01, 1e6);
	occupy(&r, &v0, t0, 2, 0);
	occupy(&r, &v1, t1, 2, 0);
	occupy(&r, &v2, t2, 2, 500);

	struct sim_place_job j = job(3, 2, 1.0, 1000);
	j.enq_s = 540;
	assert_int_equal(try_at(&r, &j, 540), SIM_PLACE_WAIT);
	assert_near(r.retry, 600, 1e-9);
	assert_int_equal(try_at(&r, &j, 600), SIM_PLACE_PREEMPT);
	assert_int_equal(r.n_victims, 1);
	assert_int_equal(r.victims[0], 0);
	crux_sim_place_release(r.p, 0, t0, 2, 2);
	assert_int_equal(try_at(&r, &j, 600), SIM_PLACE_OK);
	assert_int_equal(r.hosts[0], 0);
	assert_int_equal(r.hosts[1], 1);

	/* At 1200 v2 is eligible too, but a job whose sensitivity is low does not preempt. */
	struct sim_place_job low = job(4, 2, 0.05, 1000);
	low.enq_s = 0;
	assert_int_equal(try_at(&r, &low, 1200), SIM_PLACE_WAIT);
	assert_int_equal(r.n_victims, 0);
	/* Without preemption the sensitive job only waits. */
	r.cfg.no_preempt = 1;
	struct sim_place_job k = job(5, 2, 1.0, 1000);
	assert_int_equal(try_at(&r, &k, 1200), SIM_PLACE_WAIT);
	assert_int_equal(r.n_victims, 0);
	rig_free(&r);
}

/* Each victim is preempted at most twice. */
static void test_dally_preempt_limit(void **state)
{
	(void)state;
	struct rig r;
	rig_new(&r, CRUX_SIM_PLACE_DALLY, 1, 2, 4);
	r.cfg.delay_timer_s = 1;
	uint32_t t0[2] = {0, 1};
	struct sim_place_job v = job(0, 2, 0.01, 1e6), j = job(1, 2, 1.0, 10);
	for (int round = 0; round < 3; round++) {
		double now = 1000.0 * (round + 1);
		occupy(&r, &v, t0, 2, now - 700);
		j.enq_s = now - 10;
		if (round < 2) {
			assert_int_equal(try_at(&r, &j, now), SIM_PLACE_PREEMPT);
			assert_int_equal(r.victims[0], 0);
		} else {
			assert_int_equal(try_at(&r, &j, now), SIM_PLACE_WAIT);
		}
		crux_sim_place_release(r.p, 0, t0, 2, 2);
	}
	rig_free(&r);
}

/* SJF-BCO serves the smallest job (GPU-seconds) first, a starving one before all. */
static void test_sjf_order(void **state)
{
	(void)state;
	struct rig r;
	rig_new(&r, CRUX_SIM_PLACE_SJF_BCO, 2, 2, 4);
	assert_true(crux_sim_place_reorders(r.p));
	struct sim_place_job small = job(0, 2, 1.0, 10), big = job(1, 4, 1.0, 10),
			     long1 = job(2, 2, 1.0, 1000);
	/* 2 GPUs x 10 x 2 s, 4 x 10 x 2 s, 2 x 1000 x 2 s. */
	assert_near(crux_sim_place_key(r.p, &small, 0, 3600), 40, 1e-9);
	assert_near(crux_sim_place_key(r.p, &big, 0, 3600), 80, 1e-9);
	assert_near(crux_sim_place_key(r.p, &long1, 0, 3600), 4000, 1e-9);
	long1.arrival_s = 0;
	small.arrival_s = 5000;
	assert_true(crux_sim_place_key(r.p, &long1, 5000, 3600) <
		    crux_sim_place_key(r.p, &small, 5000, 3600));
	/* FIFO policies rank by arrival. */
	struct rig f;
	rig_new(&f, CRUX_SIM_PLACE_PACK, 2, 2, 4);
	assert_false(crux_sim_place_reorders(f.p));
	assert_near(crux_sim_place_key(f.p, &small, 5000, 3600), 5000, 0);
	rig_free(&f);
	rig_free(&r);
}

/*
 * 3 ToRs x 3 hosts. Two rings already cross ToRs 0 and 1 (hosts 0-3 and
 * 1-4); ToR 2 runs two one-host jobs. One host is free in each ToR. A 2-host
 * job: pack takes ToRs 0 and 1 (each then crossed by 3 rings), SJF-BCO takes
 * ToR 0 or 1 and ToR 2 (3 rings and 1: balanced).
 */
static void test_bco_balance(void **state)
{
	(void)state;
	for (int bco = 0; bco < 2; bco++) {
		struct rig r;
		rig_new(&r, bco ? CRUX_SIM_PLACE_SJF_BCO : CRUX_SIM_PLACE_PACK, 3, 3, 8);
		uint32_t x[2] = {0, 3}, w[2] = {1, 4}, y0 = 6, y1 = 7;
		struct sim_place_job jx = job(0, 2, 1.0, 10), jw = job(1, 2, 1.0, 10),
				     a = job(2, 1, 0, 10), b = job(3, 1, 0, 10);
		occupy(&r, &jx, x, 2, 0);
		occupy(&r, &jw, w, 2, 0);
		occupy(&r, &a, &y0, 1, 0);
		occupy(&r, &b, &y1, 1, 0);
		struct sim_place_job j = job(4, 2, 1.0, 10);
		assert_int_equal(try_at(&r, &j, 0), SIM_PLACE_OK);
		assert_int_equal(r.n, 2);
		if (bco) {
			assert_true(r.hosts[0] == 2 || r.hosts[0] == 5);
			assert_int_equal(r.hosts[1], 8);
		} else {
			assert_int_equal(r.hosts[0], 2);
			assert_int_equal(r.hosts[1], 5);
		}
		rig_free(&r);
	}
	/* A job one ToR holds goes there (no contention, no overhead). */
	struct rig r;
	rig_new(&r, CRUX_SIM_PLACE_SJF_BCO, 3, 3, 8);
	uint32_t y = 0;
	struct sim_place_job a = job(0, 1, 0, 10), j = job(1, 3, 1.0, 10);
	occupy(&r, &a, &y, 1, 0);
	assert_int_equal(try_at(&r, &j, 0), SIM_PLACE_OK);
	assert_int_equal(groups_of(&r, 3), 1);
	assert_int_equal(r.hosts[0], 3);
	rig_free(&r);
}

/* Whole runs: every job finishes under every placement, slowdowns >= 1, and
 * the network policy's bytes are conserved, preemptions included. */
static void test_runs(void **state)
{
	(void)state;
	struct crux_sim_workload_params wp;
	struct crux_sim_trace *t;
	char err[512];

	crux_sim_workload_defaults(&wp);
	wp.n_jobs = 120;
	wp.span_s = 12 * 3600.0;
	wp.seed = 5;
	wp.load = 0.9;
	wp.total_gpus = 8 * 4 * 8;
	wp.max_job_gpus = 64;
	assert_int_equal(crux_sim_workload_generate(&wp, &t, err, sizeof(err)), CRUX_OK);
	for (int pl = 0; pl < CRUX_SIM_N_PLACEMENTS; pl++) {
		enum crux_sim_policy pols[2] = {CRUX_SIM_ECMP, CRUX_SIM_CRUX_FULL};
		for (int k = 0; k < 2; k++) {
			struct crux_sim_config c;
			struct crux_sim_result *r;
			crux_sim_config_defaults(&c);
			c.policy = pols[k];
			crux_sim_topo_defaults(CRUX_SIM_TOPO_CLOS2, &c.tp);
			c.tp.n_tor = 8;
			c.tp.n_agg = 4;
			c.tp.hosts_per_tor = 4;
			c.tp.tor_gbps = 100;
			c.tp.channels = 2;
			c.placement = (enum crux_sim_placement)pl;
			assert_int_equal(crux_sim_run(t, &c, &r, err, sizeof(err)), CRUX_OK);
			assert_int_equal(r->finished, r->n_jobs);
			assert_true(fabs(r->link_bytes - r->job_bytes) <= 1e-9 * r->job_bytes);
			for (size_t i = 0; i < r->n_jobs; i++) {
				assert_near(r->jobs[i].iterations_done,
					    (double)r->jobs[i].iterations, 1e-6);
				assert_true(r->jobs[i].slowdown >= 1 - 1e-9);
				assert_true(r->jobs[i].jct_s >= r->jobs[i].iterations *
								    r->jobs[i].iso_iter_s *
								    (1 - 1e-9));
			}
			/* This workload makes Dally preempt (4-5 jobs): the restarts'
			 * accounting is what the checks above cover. */
			if (pl != CRUX_SIM_PLACE_DALLY)
				assert_int_equal(r->preemptions, 0);
			else
				assert_true(r->preemptions > 0);
			crux_sim_result_free(r);
		}
	}
	crux_sim_trace_free(t);
}

static void test_names(void **state)
{
	(void)state;
	enum crux_sim_placement p;
	for (int i = 0; i < CRUX_SIM_N_PLACEMENTS; i++) {
		assert_int_equal(crux_sim_placement_parse(
				     crux_sim_placement_name((enum crux_sim_placement)i), &p),
				 CRUX_OK);
		assert_int_equal(p, i);
	}
	assert_int_equal(crux_sim_placement_parse("tetris", &p), CRUX_ERR_INVAL);
	assert_string_equal(crux_sim_placement_name(CRUX_SIM_PLACE_SJF_BCO), "sjf-bco");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_sensitivity),
	    cmocka_unit_test(test_dally_timer_expiry),
	    cmocka_unit_test(test_dally_autotune),
	    cmocka_unit_test(test_dally_preemption),
	    cmocka_unit_test(test_dally_preempt_limit),
	    cmocka_unit_test(test_sjf_order),
	    cmocka_unit_test(test_bco_balance),
	    cmocka_unit_test(test_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
