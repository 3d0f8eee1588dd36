/* SPDX-License-Identifier: Apache-2.0 */
/* Host records (job views as JSON) and schedule records: round trips, strict
 * decoding, and a merge (crux_jv_merge) that is exact and independent of the
 * order hosts are given in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "crux/cluster_view.h"
#include "crux/jobid.h"

static struct crux_addr A(const char *s) {
	struct crux_addr a;
	assert_int_equal(crux_addr_parse(s, &a), CRUX_OK);
	return a;
}

/* Host h of a 2-host job "job-a" (4 ranks each) plus a local job. */
static void
make_host(struct crux_job_view *h, int which)
{
	memset(h, 0, sizeof(*h));
	const char *me = which ? "10.0.0.2" : "10.0.0.1", *peer = which ? "10.0.0.1" : "10.0.0.2";
	strcpy(h->name, which ? "host-b" : "host-a");
	h->addr = A(me);
	struct crux_jv_flow f = {.src = A(me), .dst = A(peer), .bytes = 1.5e9 + which};
	struct crux_jv_job j = {.nranks = 4,
				.ncompute = 4,
				.iter_sum = 0.4 + 0.1 * which,
				.compute_sum = 0.3,
				.comm_sum = 0.1 / 3,
				.overlap_sum = 2,
				.stall_sum = 0.01,
				.nhosts = 1,
				.nflows = 1,
				.flows = &f};
	strcpy(j.id, "job-a");
	j.key = crux_job_key_of(j.id);
	j.hosts[0] = A(me);
	assert_int_equal(crux_jv_add_job(h, &j), CRUX_OK);
	struct crux_jv_job l = {
	    .nranks = 1, .ncompute = 1, .iter_sum = 1, .compute_sum = 1, .nhosts = 1};
	strcpy(l.id, which ? "local-b" : "local-a");
	l.key = crux_job_key_of(l.id);
	l.hosts[0] = A(me);
	assert_int_equal(crux_jv_add_job(h, &l), CRUX_OK);
}

static void test_host_roundtrip(void **state)
{
	(void)state;
	struct crux_job_view h, d;
	char *txt;
	size_t len;
	make_host(&h, 0);
	assert_int_equal(crux_cv_host_encode(&h, &txt, &len), CRUX_OK);
	assert_int_equal(strlen(txt), len);
	assert_int_equal(crux_cv_host_decode(txt, len, &d), CRUX_OK);
	assert_string_equal(d.name, "host-a");
	assert_int_equal(d.njobs, 2);
	assert_int_equal(d.jobs[0].key, h.jobs[0].key);
	/* Doubles survive bit for bit (sums are merged, so this matters). */
	assert_memory_equal(&d.jobs[0].comm_sum, &h.jobs[0].comm_sum, sizeof(double));
	assert_memory_equal(&d.jobs[0].flows[0], &h.jobs[0].flows[0], sizeof(struct crux_jv_flow));
	assert_true(crux_addr_equal(&d.jobs[0].hosts[0], &h.addr));
	free(txt);
	crux_jv_free(&d);
	crux_jv_free(&h);
}

static void test_host_hostile(void **state)
{
	(void)state;
	const char *bad[] = {
	    "{\"v\":2,\"host\":\"h\",\"addr\":\"10.0.0.1\",\"jobs\":[]}",
	    "{\"v\":1,\"host\":\"h h\",\"addr\":\"10.0.0.1\",\"jobs\":[]}",
	    "{\"v\":1,\"host\":\"h\",\"addr\":\"10.0.0.300\",\"jobs\":[]}",
	    "{\"v\":1,\"host\":\"h\",\"addr\":\"10.0.0.1\",\"jobs\":{}}",
	    /* key does not match the id */
	    ("{\"v\":1,\"host\":\"h\",\"addr\":\"10.0.0.1\",\"jobs\":[{\"id\":\"j\",\"key\":"
	     "\"0000000000000001\","
	     "\"ranks\":1,\"compute\":1,\"clamped\":false,\"sum\":[1,1,0,0,0],\"hosts\":[],"
	     "\"flows\":[]}]}"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct crux_job_view d;
		assert_int_not_equal(crux_cv_host_decode(bad[i], strlen(bad[i]), &d), CRUX_OK);
	}
	/* Mutations of a good record: compute > ranks, negative or infinite sums,
	 * overlap above its count, a short sum list, a port-like bad flow. */
	struct crux_job_view h;
	char *txt;
	size_t len;
	make_host(&h, 1);
	assert_int_equal(crux_cv_host_encode(&h, &txt, &len), CRUX_OK);
	const char *from[] = {"\"compute\":4", "\"sum\":[0.5",
			      "\"sum\":[0.5",  ",2.0,",
			      ",0.01]",	       "\"10.0.0.2\",\"10.0.0.1\",1500000001"};
	const char *to[] = {"\"compute\":5",
			    "\"sum\":[-0.5",
			    "\"sum\":[1e999",
			    ",4.5,",
			    "]",
			    "\"10.0.0.2\",\"10.0.0.1\",\"x\""};
	for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
		char *p = strstr(txt, from[i]);
		assert_non_null(p);
		size_t off = (size_t)(p - txt);
		char *m = malloc(len + 64);
		memcpy(m, txt, off);
		strcpy(m + off, to[i]);
		strcat(m, p + strlen(from[i]));
		struct crux_job_view d;
		assert_int_not_equal(crux_cv_host_decode(m, strlen(m), &d), CRUX_OK);
		free(m);
	}
	free(txt);
	crux_jv_free(&h);
}

static void test_merge(void **state)
{
	(void)state;
	struct crux_job_view hs[2], rev[2], m1, m2;
	make_host(&hs[0], 0);
	make_host(&hs[1], 1);
	rev[0] = hs[1];
	rev[1] = hs[0];
	assert_int_equal(crux_jv_merge(hs, 2, &m1), CRUX_OK);
	assert_int_equal(crux_jv_merge(rev, 2, &m2), CRUX_OK);
	assert_int_equal(m1.njobs, 3);
	/* Sorted by key, identical whatever the order of the hosts. */
	for (uint32_t i = 0; i + 1 < m1.njobs; i++)
		assert_true(m1.jobs[i].key < m1.jobs[i + 1].key);
	const struct crux_jv_job *ja = NULL;
	for (uint32_t i = 0; i < m1.njobs; i++) {
		assert_int_equal(m1.jobs[i].key, m2.jobs[i].key);
		assert_memory_equal(&m1.jobs[i].iter_sum, &m2.jobs[i].iter_sum, 5 * sizeof(double));
		assert_int_equal(m1.jobs[i].nflows, m2.jobs[i].nflows);
		if (strcmp(m1.jobs[i].id, "job-a") == 0)
			ja = &m1.jobs[i];
	}
	assert_non_null(ja);
	assert_int_equal(ja->nranks, 8);
	assert_int_equal(ja->ncompute, 8);
	assert_int_equal(ja->nhosts, 2);
	assert_int_equal(ja->nflows, 2);
	assert_true(ja->iter_sum == 0.4 + 0.5);
	crux_jv_free(&m1);
	crux_jv_free(&m2);
	crux_jv_free(&hs[0]);
	crux_jv_free(&hs[1]);
}

static void test_schedule(void **state)
{
	(void)state;
	struct crux_cv_route r = {.src = A("10.0.0.1"),
				  .dst = A("fd00::2"),
				  .path_id = 3,
				  .nports = 2,
				  .ports = {49152, 50000}};
	struct crux_cv_decision d[2] = {{.key = 0x1234, .level = 3, .nroutes = 1, .routes = &r},
					{.key = 0xffffffffffffffffULL, .level = 0}};
	struct crux_cv_schedule s = {.input_revision = 77,
				     .term = 12,
				     .levels = 4,
				     .njobs = 2,
				     .jobs = d},
				out;
	char *txt;
	size_t len;
	assert_int_equal(crux_cv_schedule_encode(&s, &txt, &len), CRUX_OK);
	assert_int_equal(crux_cv_schedule_decode(txt, len, &out), CRUX_OK);
	assert_int_equal(out.input_revision, 77);
	assert_int_equal(out.term, 12);
	assert_int_equal(out.njobs, 2);
	assert_int_equal(out.jobs[1].key, 0xffffffffffffffffULL);
	assert_int_equal(out.jobs[0].nroutes, 1);
	assert_memory_equal(&out.jobs[0].routes[0], &r, sizeof(r));
	crux_cv_schedule_free(&out);
	free(txt);

	const char *bad[] = {
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":0,\"jobs\":[]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":9,\"jobs\":[]}",
	    "{\"v\":1,\"rev\":-1,\"term\":1,\"levels\":2,\"jobs\":[]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":2,"
	    "\"routes\":[]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000000\","
	    "\"level\":0,"
	    "\"routes\":[]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"000000000000000A\","
	    "\"level\":0,"
	    "\"routes\":[]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"routes\":[[\"10.0.0.1\",\"10.0.0.2\",1,[0]]]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"routes\":[[\"10.0.0.1\",\"10.0.0.2\",70000,[]]]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"routes\":[]},{\"key\":\"0000000000000001\",\"level\":1,\"routes\":[]}]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_not_equal(crux_cv_schedule_decode(bad[i], strlen(bad[i]), &out),
				     CRUX_OK);
}

/* Job state, id and routes for every host (an override) survive a round trip. */
static void test_schedule_state(void **state)
{
	(void)state;
	struct crux_cv_route r = {
	    .dst = A("10.0.0.2"), .path_id = 1, .nports = 1, .ports = {40000}};
	struct crux_cv_decision d[3] = {
	    {.key = 1, .state = CRUX_JOB_OVERRIDDEN, .level = 0, .nroutes = 1, .routes = &r},
	    {.key = 2, .state = CRUX_JOB_PROFILING, .level = 3, .since_ms = 1795000000123ull},
	    {.key = 3,
	     .state = CRUX_JOB_SCHEDULED,
	     .level = 2,
	     .has_base = true,
	     .base = {1.5, 2e9, 0.1}}};
	struct crux_cv_schedule s = {.input_revision = 5,
				     .term = 2,
				     .levels = 4,
				     .njobs = 3,
				     .jobs = d},
				out;
	char *txt;
	size_t len;

	snprintf(d[0].id, sizeof(d[0].id), "job-a");
	assert_int_equal(crux_cv_schedule_encode(&s, &txt, &len), CRUX_OK);
	assert_int_equal(crux_cv_schedule_decode(txt, len, &out), CRUX_OK);
	assert_string_equal(out.jobs[0].id, "job-a");
	assert_int_equal(out.jobs[0].state, CRUX_JOB_OVERRIDDEN);
	assert_int_equal(out.jobs[0].routes[0].src.family, 0);
	assert_memory_equal(&out.jobs[0].routes[0], &r, sizeof(r));
	assert_int_equal(out.jobs[1].state, CRUX_JOB_PROFILING);
	assert_int_equal(out.jobs[2].state, CRUX_JOB_SCHEDULED);
	assert_string_equal(out.jobs[2].id, "");
	assert_int_equal(out.jobs[1].since_ms, 1795000000123ull);
	assert_false(out.jobs[1].has_base);
	assert_true(out.jobs[2].has_base);
	assert_memory_equal(out.jobs[2].base, d[2].base, sizeof(d[2].base)); /* bit for bit */
	crux_cv_schedule_free(&out);
	free(txt);

	const char *bad[] = {
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"state\":\"paused\",\"routes\":[]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"state\":1,\"routes\":[]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"id\":\"a b\",\"routes\":[]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"id\":\"\",\"routes\":[]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"routes\":[[\"--\",\"10.0.0.2\",1,[]]]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"base\":[1,2],\"routes\":[]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"base\":[1,-2,3],\"routes\":[]}]}",
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"key\":\"0000000000000001\","
	    "\"level\":0,"
	    "\"since\":-5,\"routes\":[]}]}",
	    /* neither a key nor an id to derive it from */
	    "{\"v\":1,\"rev\":1,\"term\":1,\"levels\":2,\"jobs\":[{\"level\":0,\"routes\":[]}]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_not_equal(crux_cv_schedule_decode(bad[i], strlen(bad[i]), &out),
				     CRUX_OK);
}

/* The packed schedule (zlib, as the leader stores it): a round trip; the
 * plain text still unpacks; a stream cut short, with trailing bytes, a
 * broken checksum or unpacking past CRUX_CV_MAX_TEXT is refused. */
static void test_schedule_packed(void **state)
{
	(void)state;
	struct crux_cv_decision d[64];
	memset(d, 0, sizeof(d));
	for (int i = 0; i < 64; i++) {
		d[i].level = (uint8_t)(i % 4);
		snprintf(d[i].id, sizeof(d[i].id), "job-%d", i);
		d[i].key = crux_job_key_of(d[i].id);
	}
	d[5].key = 0x1005; /* not its id's: written out */
	struct crux_cv_schedule s = {.input_revision = 9,
				     .term = 3,
				     .lease = 77,
				     .levels = 4,
				     .njobs = 64,
				     .jobs = d},
				out;
	char *txt, *z;
	size_t len, zlen;
	assert_int_equal(crux_cv_schedule_encode(&s, &txt, &len), CRUX_OK);
	/* The keys that are their ids' are left out: only job-5's is in the text. */
	assert_non_null(strstr(txt, "\"key\":\"0000000000001005\""));
	assert_null(strstr(strstr(txt, "\"key\"") + 1, "\"key\""));
	assert_int_equal(crux_cv_schedule_pack(&s, &z, &zlen), CRUX_OK);
	assert_true(zlen * 4 < len); /* what every watcher is sent */
	assert_int_equal(z[0], 'z');
	assert_int_equal(crux_cv_schedule_unpack(z, zlen, &out), CRUX_OK);
	assert_int_equal(out.njobs, 64);
	assert_int_equal(out.lease, 77);
	assert_string_equal(out.jobs[63].id, "job-63");
	assert_int_equal(out.jobs[63].level, 3);
	assert_int_equal(out.jobs[63].key, crux_job_key_of("job-63"));
	assert_int_equal(out.jobs[5].key, 0x1005);
	crux_cv_schedule_free(&out);
	assert_int_equal(crux_cv_schedule_unpack(txt, len, &out), CRUX_OK);
	assert_int_equal(out.njobs, 64);
	crux_cv_schedule_free(&out);

	assert_int_equal(crux_cv_schedule_unpack(z, zlen - 1, &out), CRUX_ERR_CORRUPT);
	assert_int_equal(crux_cv_schedule_unpack(z, 1, &out), CRUX_ERR_CORRUPT);
	assert_int_equal(crux_cv_schedule_unpack(z, 0, &out), CRUX_ERR_CORRUPT);
	char *more = malloc(zlen + 1);
	memcpy(more, z, zlen);
	more[zlen] = ' ';
	assert_int_equal(crux_cv_schedule_unpack(more, zlen + 1, &out), CRUX_ERR_CORRUPT);
	memcpy(more, z, zlen);
	more[zlen - 1] ^= 0x5a; /* the adler-32 checksum's last byte */
	assert_int_equal(crux_cv_schedule_unpack(more, zlen, &out), CRUX_ERR_CORRUPT);
	free(more);
	free(z);
	free(txt);

	/* 2 MiB of spaces after a valid object packs small; it unpacks past the limit. */
	size_t big = 2u << 20;
	char *sp = malloc(big);
	memset(sp, ' ', big);
	memcpy(sp, "{}", 2);
	uLongf bl = compressBound((uLong)big);
	char *bz = malloc(bl + 1);
	bz[0] = 'z';
	assert_int_equal(compress2((Bytef *)bz + 1, &bl, (Bytef *)sp, (uLong)big, 9), Z_OK);
	assert_true(bl < 8192);
	assert_int_equal(crux_cv_schedule_unpack(bz, bl + 1, &out), CRUX_ERR_CORRUPT);
	free(bz);
	free(sp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_host_roundtrip), cmocka_unit_test(test_host_hostile),
	    cmocka_unit_test(test_merge),	   cmocka_unit_test(test_schedule),
	    cmocka_unit_test(test_schedule_state), cmocka_unit_test(test_schedule_packed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
