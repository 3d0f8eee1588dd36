/* SPDX-License-Identifier: Apache-2.0 */
/* The overrides file and the --route syntax. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the headers above first. */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/overrides.h"

static void test_route(void **state)
{
	struct cruxd_override_route r;
	char err[256], buf[160];

	(void)state;
	assert_int_equal(cruxd_route_parse("198.18.1.2=3:40001,40002,40003", &r, err, sizeof(err)),
			 CRUX_OK);
	assert_int_equal(r.peer.family, 4);
	assert_int_equal(r.path_id, 3);
	assert_int_equal(r.nports, 3);
	assert_int_equal(r.ports[2], 40003);
	cruxd_route_format(&r, buf, sizeof(buf));
	assert_string_equal(buf, "198.18.1.2=3:40001,40002,40003");
	assert_int_equal(cruxd_route_parse("fd00::1=0", &r, err, sizeof(err)), CRUX_OK);
	assert_int_equal(r.peer.family, 6);
	assert_int_equal(r.nports, 0);
	static const char *const bad[] = {
	    "",
	    "=1",
	    "198.18.1.2",
	    "198.18.1.2=",
	    "198.18.1.2=x",
	    "198.18.1.2=1:",
	    "198.18.1.2=1:0",
	    "198.18.1.2=1:65536",
	    "198.18.1.2=1:1,,2",
	    "host=1:2",
	    "198.18.1.2=65535",
	    "198.18.1.2=1:1,2,3,4,5,6,7,8,9",
	    "198.18.1.2=-1",
	    "198.18.1.2=1:+5",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(cruxd_route_parse(bad[i], &r, err, sizeof(err)), CRUX_ERR_INVAL);
		assert_true(err[0] != '\0');
	}
}

static void test_job_ref(void **state)
{
	uint64_t k;
	char id[64], err[256];

	(void)state;
	assert_int_equal(cruxd_job_ref_parse("0x00ff", &k, id, sizeof(id), err, sizeof(err)),
			 CRUX_OK);
	assert_int_equal(k, 0xff);
	assert_int_equal(cruxd_job_ref_parse("env:x", &k, id, sizeof(id), err, sizeof(err)),
			 CRUX_OK);
	assert_int_equal(k, crux_job_key_of("env:x"));
	assert_string_equal(id, "env:x");
	assert_int_equal(cruxd_job_ref_parse("0x0", &k, id, sizeof(id), err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_int_equal(cruxd_job_ref_parse("0xzz", &k, id, sizeof(id), err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_int_equal(cruxd_job_ref_parse("", &k, id, sizeof(id), err, sizeof(err)),
			 CRUX_ERR_INVAL);
}

static void test_roundtrip(void **state)
{
	struct cruxd_overrides *o = calloc(1, sizeof(*o)), *p = calloc(1, sizeof(*p));
	char *buf = malloc(1 << 16), err[256];
	size_t len;

	(void)state;
	assert_non_null(o);
	assert_non_null(p);
	o->seq = 42;
	o->n = 2;
	o->o[0].job_key = 0x1234;
	o->o[0].level = 3;
	snprintf(o->o[0].job_id, sizeof(o->o[0].job_id), "env:my job %%#\x01");
	assert_int_equal(
	    cruxd_route_parse("198.18.0.9=1:1,2", &o->o[0].routes[0], err, sizeof(err)), CRUX_OK);
	assert_int_equal(cruxd_route_parse("fd00::9=2", &o->o[0].routes[1], err, sizeof(err)),
			 CRUX_OK);
	o->o[0].nroutes = 2;
	o->o[1].job_key = 0xffffffffffffffffull;
	o->o[1].level = 0;
	assert_int_equal(cruxd_overrides_format(o, buf, 1 << 16, &len), CRUX_OK);
	assert_int_equal(cruxd_overrides_parse(buf, len, p, err, sizeof(err)), CRUX_OK);
	assert_int_equal(p->seq, 42);
	assert_int_equal(p->n, 2);
	assert_memory_equal(&o->o[0], &p->o[0], sizeof(o->o[0]));
	assert_memory_equal(&o->o[1], &p->o[1], sizeof(o->o[1]));
	assert_int_equal(cruxd_overrides_format(o, buf, 20, &len), CRUX_ERR_RANGE);
	free(o);
	free(p);
	free(buf);
}

static void test_bad_files(void **state)
{
	struct cruxd_overrides *o = calloc(1, sizeof(*o));
	char err[256];
	static const char *const bad[] = {
	    "seq\n",
	    "seq 1\nseq 2\n",
	    "seq x\n",
	    "job 0x1\n",
	    "job 0x1 level 8\n",
	    "job 0x1 level 1 level 2\n",
	    "job 1 level 1\n",
	    "job 0x1 level 1\njob 0x1 level 2\n",
	    "job 0x1 level 1 route 1.2.3.4=1:1 route 1.2.3.4=2:2\n",
	    "job 0x1 level 1 colour red\n",
	    "job 0x1 level 1 id a%zz\n",
	    "job 0x1 level 1 id a%00\n",
	    "frobnicate\n",
	    "job 0x1 level\n",
	};

	(void)state;
	assert_non_null(o);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_not_equal(
		    cruxd_overrides_parse(bad[i], strlen(bad[i]), o, err, sizeof(err)), CRUX_OK);
		assert_non_null(strstr(err, "line"));
	}
	{
		const char *good = "# c\n\n  seq 3 # x\njob 0xa level 1\n";
		assert_int_equal(cruxd_overrides_parse(good, strlen(good), o, err, sizeof(err)),
				 CRUX_OK);
	}
	assert_int_equal(o->seq, 3);
	assert_int_equal(o->n, 1);
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_route),
	    cmocka_unit_test(test_job_ref),
	    cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_bad_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
