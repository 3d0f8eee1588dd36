/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent's host job view (agent/core/src/host_view.c) and its cluster record:
 * - the view does not depend on the order ranks were found;
 * - the views of two hosts, sent as records (encode, decode) and merged by
 *   crux_jv_merge, give the view one agent seeing every rank builds: the
 *   same jobs, counts, sums, hosts and flows (values exact in binary, so
 *   the order of the additions cannot matter);
 * - merged without the wire, the stall breakdown adds up too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent_int.h"
#include "crux/cluster_view.h"

static struct crux_addr A(const char *s) {
	struct crux_addr a;
	assert_int_equal(crux_addr_parse(s, &a), CRUX_OK);
	return a;
}

/* A rank of job 'id' on 'host' sending 'bytes' per iteration to 'peer'. */
static struct rank
mk(int pid, const char *id, const char *host, const char *peer, double bytes, double iter,
   double compute)
{
	struct rank r;

	memset(&r, 0, sizeof(r));
	r.pid = pid;
	r.start_time = 1000u + (uint64_t)pid;
	snprintf(r.job_id, sizeof(r.job_id), "%s", id);
	r.job_key = crux_job_key_of(id);
	snprintf(r.hostname, sizeof(r.hostname), "%s", host);
	r.host = A(host);
	r.has_compute = compute > 0;
	r.iter = iter;
	r.compute = compute;
	r.comm = iter - compute;
	r.stall = r.comm;
	r.npeers = 1;
	r.peer[0] = A(peer);
	r.bpi[0] = bytes;
	return r;
}

/* Host 10.0.0.1 runs ranks 0-2, host 10.0.0.2 ranks 3-5. */
static void ranks(struct rank *r)
{
	r[0] = mk(10, "job-a", "10.0.0.1", "10.0.0.2", 1024, 0.5, 0.25);
	r[1] = mk(11, "job-a", "10.0.0.1", "10.0.0.2", 2048, 0.75, 0.5);
	r[2] = mk(12, "job-b", "10.0.0.1", "10.0.0.3", 512, 0.125, 0.0625);
	r[3] = mk(13, "job-a", "10.0.0.2", "10.0.0.1", 4096, 0.5, 0.375);
	r[4] = mk(14, "job-b", "10.0.0.2", "10.0.0.1", 256, 0.25, 0);
	r[5] = mk(15, "job-c", "10.0.0.2", "10.0.0.1", 8, 1, 0.5);
}

static void assert_views_equal(const struct crux_job_view *x, const struct crux_job_view *y)
{
	assert_int_equal(x->njobs, y->njobs);
	for (size_t i = 0; i < x->njobs; i++) {
		const struct crux_jv_job *a = &x->jobs[i], *b = &y->jobs[i];
		assert_int_equal(a->key, b->key);
		assert_string_equal(a->id, b->id);
		assert_int_equal(a->nranks, b->nranks);
		assert_int_equal(a->ncompute, b->ncompute);
		assert_true(a->iter_sum == b->iter_sum && a->compute_sum == b->compute_sum &&
			    a->comm_sum == b->comm_sum && a->overlap_sum == b->overlap_sum &&
			    a->stall_sum == b->stall_sum);
		assert_int_equal(a->nhosts, b->nhosts);
		assert_memory_equal(a->hosts, b->hosts, a->nhosts * sizeof(a->hosts[0]));
		assert_int_equal(a->nflows, b->nflows);
		assert_memory_equal(a->flows, b->flows, a->nflows * sizeof(a->flows[0]));
	}
	assert_int_equal(x->nhosts, y->nhosts);
	for (size_t i = 0; i < x->nhosts; i++)
		assert_true(crux_addr_equal(&x->hosts[i].addr, &y->hosts[i].addr));
}

static void test_order(void **state)
{
	struct rank r[6], s[6];
	struct crux_job_view v1 = {0}, v2 = {0};

	(void)state;
	ranks(r);
	for (int i = 0; i < 6; i++)
		s[i] = r[5 - i];
	assert_int_equal(cruxd_view_build(r, 6, &v1), CRUX_OK);
	assert_int_equal(cruxd_view_build(s, 6, &v2), CRUX_OK);
	assert_views_equal(&v1, &v2);
	assert_int_equal(v1.njobs, 3);
	assert_true(v1.jobs[0].key < v1.jobs[1].key && v1.jobs[1].key < v1.jobs[2].key);
	for (size_t i = 1; i < v1.nhosts; i++)
		assert_true(crux_jv_addr_cmp(&v1.hosts[i - 1].addr, &v1.hosts[i].addr) <= 0);
	crux_jv_free(&v1);
	crux_jv_free(&v2);
}

/* Through the wire: encode, decode. */
static void wire(struct crux_job_view *v, const char *name, struct crux_job_view *out)
{
	char *txt;
	size_t len;

	snprintf(v->name, sizeof(v->name), "%s", name);
	assert_int_equal(crux_cv_host_encode(v, &txt, &len), CRUX_OK);
	assert_int_equal(crux_cv_host_decode(txt, len, out), CRUX_OK);
	assert_string_equal(out->name, name);
	free(txt);
}

static void test_merge_exact(void **state)
{
	struct rank r[6];
	struct crux_job_view all = {0}, va = {0}, vb = {0}, vm = {0};
	struct crux_job_view h[2];

	(void)state;
	ranks(r);
	assert_int_equal(cruxd_view_build(r, 6, &all), CRUX_OK);
	assert_int_equal(cruxd_view_build(r, 3, &va), CRUX_OK);
	assert_int_equal(cruxd_view_build(r + 3, 3, &vb), CRUX_OK);
	/* Given in the other order: the merge orders hosts by name. */
	wire(&vb, "host-b", &h[0]);
	wire(&va, "host-a", &h[1]);
	assert_int_equal(crux_jv_merge(h, 2, &vm), CRUX_OK);
	assert_views_equal(&all, &vm);
	/* job-a: 3 ranks, flows both ways summed per (source, peer) host. */
	assert_int_equal(vm.jobs[0].nranks + vm.jobs[1].nranks + vm.jobs[2].nranks, 6);
	crux_jv_free(&h[0]);
	crux_jv_free(&h[1]);
	crux_jv_free(&all);
	crux_jv_free(&va);
	crux_jv_free(&vb);
	crux_jv_free(&vm);
}

/* The stall breakdown is this host's (not on the wire), but views merge it exactly. */
static void test_merge_split(void **state)
{
	struct rank r[6];
	struct crux_job_view all = {0}, v[2] = {{.name = "b"}, {.name = "a"}}, m = {0};

	(void)state;
	ranks(r);
	for (int i = 0; i < 6; i++) {
		r[i].split = (struct crux_prof_stalls){.valid = true,
						       .net_known = i % 2,
						       .compute = 0.5,
						       .interconnect = 0.125 * i,
						       .network = 0.25,
						       .other = 0.0625};
	}
	assert_int_equal(cruxd_view_build(r, 6, &all), CRUX_OK);
	assert_int_equal(cruxd_view_build(r + 3, 3, &v[0]), CRUX_OK);
	assert_int_equal(cruxd_view_build(r, 3, &v[1]), CRUX_OK);
	assert_int_equal(crux_jv_merge(v, 2, &m), CRUX_OK);
	assert_views_equal(&all, &m);
	for (size_t i = 0; i < m.njobs; i++) {
		const struct crux_jv_job *x = &all.jobs[i], *y = &m.jobs[i];
		assert_int_equal(x->nsplit, y->nsplit);
		assert_int_equal(x->nsplit_net, y->nsplit_net);
		assert_true(x->split_compute_sum == y->split_compute_sum &&
			    x->split_inter_sum == y->split_inter_sum &&
			    x->split_net_sum == y->split_net_sum &&
			    x->split_other_sum == y->split_other_sum);
	}
	assert_int_equal(all.jobs[0].nsplit + all.jobs[1].nsplit + all.jobs[2].nsplit, 6);
	crux_jv_free(&all);
	crux_jv_free(&v[0]);
	crux_jv_free(&v[1]);
	crux_jv_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_order),
	    cmocka_unit_test(test_merge_exact),
	    cmocka_unit_test(test_merge_split),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
