/* SPDX-License-Identifier: Apache-2.0 */
/* Status strings, strict environment parsing, addresses, logging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>

#include <netinet/in.h>

#include "crux/addr.h"
#include "crux/env.h"
#include "crux/log.h"
#include "crux/status.h"
#include "testutil.h"

static void test_status_strings(void **state)
{
	(void)state;
	for (int s = CRUX_OK; s <= CRUX_ERR_TIMEOUT; s++) {
		const char *t = crux_status_str((crux_status_t)s);
		assert_non_null(t);
		assert_string_not_equal(t, "unknown status");
	}
	assert_string_equal(crux_status_str((crux_status_t)999), "unknown status");
	assert_string_equal(crux_status_str(CRUX_ERR_BUSY), "busy");
}

static void test_env_int(void **state)
{
	(void)state;
	struct tu_env env[] = {{"CRUX_LEVELS", "nine"},
			       {"CRUX_A", "7"},
			       {"CRUX_B", " 7"},
			       {"CRUX_C", "7x"},
			       {"CRUX_D", "-3"},
			       {"CRUX_E", ""},
			       {"CRUX_F", "99999999999999999999"},
			       {"CRUX_G", "+5"},
			       {NULL, NULL}};
	char err[256] = "";
	long long v = 42;

	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_LEVELS", 4, 1, 8, &v, err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_int_equal(v, 42); /* untouched on error */
	assert_string_equal(err, "CRUX_LEVELS='nine' is not valid: expected an integer in [1, 8]");

	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_A", 4, 1, 8, &v, err, sizeof(err)),
			 CRUX_OK);
	assert_int_equal(v, 7);
	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_UNSET", 4, 1, 8, &v, NULL, 0), CRUX_OK);
	assert_int_equal(v, 4);
	/* empty = unset */
	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_E", 5, 1, 8, &v, NULL, 0), CRUX_OK);
	assert_int_equal(v, 5);
	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_B", 4, 1, 8, &v, NULL, 0),
			 CRUX_ERR_INVAL);
	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_C", 4, 1, 8, &v, NULL, 0),
			 CRUX_ERR_INVAL);
	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_D", 4, 1, 8, &v, err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "CRUX_D='-3'"));
	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_D", 4, -5, 8, &v, NULL, 0), CRUX_OK);
	assert_int_equal(v, -3);
	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_F", 4, 0, INT64_MAX, &v, NULL, 0),
			 CRUX_ERR_INVAL);
	assert_int_equal(crux_env_int(tu_getenv, env, "CRUX_G", 4, 0, 8, &v, NULL, 0), CRUX_OK);
	assert_int_equal(v, 5);
}

static void test_parse_u64(void **state)
{
	(void)state;
	uint64_t u = 7;
	char err[256];
	assert_int_equal(crux_parse_u64("CRUX_X", "0", 0, 10, &u, err, sizeof(err)), CRUX_OK);
	assert_true(u == 0);
	assert_int_equal(
	    crux_parse_u64("CRUX_X", "18446744073709551615", 0, UINT64_MAX, &u, NULL, 0), CRUX_OK);
	assert_true(u == UINT64_MAX);
	assert_int_equal(crux_parse_u64("CRUX_X", "0x10", 0, 100, &u, NULL, 0), CRUX_OK);
	assert_true(u == 16);
	assert_int_equal(crux_parse_u64("CRUX_X", "0XfF", 0, 1000, &u, NULL, 0), CRUX_OK);
	assert_true(u == 255);
	/* refused: octal-looking, signs, blanks, empty, overflow, out of range, bare 0x */
	const char *bad[] = {"010", "-1", "+1",	  " 1", "1 ", "", "18446744073709551616",
			     "11",  "0x", "0x-1", "1e3"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		u = 7;
		assert_int_equal(crux_parse_u64("CRUX_X", bad[i], 0, 10, &u, err, sizeof(err)),
				 CRUX_ERR_INVAL);
		assert_true(u == 7);
	}
	assert_string_equal(err,
			    "CRUX_X='1e3' is not valid: expected an unsigned integer in [0, 10] "
			    "(decimal, or hexadecimal after 0x)");
}

static void test_parse_double(void **state)
{
	(void)state;
	double d = -1;
	char err[256];
	assert_int_equal(crux_parse_double("CRUX_X", "0.25", 0, 1, &d, err, sizeof(err)), CRUX_OK);
	assert_true(d == 0.25);
	assert_int_equal(crux_parse_double("CRUX_X", "1e-3", 0, 1, &d, NULL, 0), CRUX_OK);
	assert_true(d == 1e-3);
	assert_int_equal(crux_parse_double("CRUX_X", "-2", -5, 1, &d, NULL, 0), CRUX_OK);
	assert_true(d == -2);
	const char *bad[] = {"nan", "inf", "0x10", " 1", "1 ",	"1.5.2",
			     "",    ".",   "e5",   "1e", "--1", "2"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		d = 7;
		assert_int_equal(crux_parse_double("CRUX_X", bad[i], 0, 1, &d, err, sizeof(err)),
				 CRUX_ERR_INVAL);
		assert_true(d == 7);
		assert_non_null(strstr(err, "CRUX_X='"));
		assert_non_null(strstr(err, "expected a number in [0, 1]"));
	}
}

static void test_env_bool_enum(void **state)
{
	(void)state;
	struct tu_env env[] = {{"CRUX_ON", "Yes"},    {"CRUX_OFF", "off"},   {"CRUX_BAD", "maybe"},
			       {"CRUX_MODE", "HOST"}, {"CRUX_MODE2", "gpu"}, {NULL, NULL}};
	bool b = false;
	char err[256];
	assert_int_equal(crux_env_bool(tu_getenv, env, "CRUX_ON", false, &b, NULL, 0), CRUX_OK);
	assert_true(b);
	assert_int_equal(crux_env_bool(tu_getenv, env, "CRUX_OFF", true, &b, NULL, 0), CRUX_OK);
	assert_false(b);
	assert_int_equal(crux_env_bool(tu_getenv, env, "CRUX_NONE", true, &b, NULL, 0), CRUX_OK);
	assert_true(b);
	assert_int_equal(crux_env_bool(tu_getenv, env, "CRUX_BAD", true, &b, err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_string_equal(err, "CRUX_BAD='maybe' is not valid: expected 1/0, true/false, "
				 "yes/no or on/off");

	const char *const choices[] = {"auto", "cupti", "events", "host", NULL};
	int idx = -1;
	assert_int_equal(crux_env_enum(tu_getenv, env, "CRUX_MODE", choices, 0, &idx, NULL, 0),
			 CRUX_OK);
	assert_int_equal(idx, 3);
	assert_int_equal(crux_env_enum(tu_getenv, env, "CRUX_NONE", choices, 1, &idx, NULL, 0),
			 CRUX_OK);
	assert_int_equal(idx, 1);
	idx = -1;
	assert_int_equal(
	    crux_env_enum(tu_getenv, env, "CRUX_MODE2", choices, 0, &idx, err, sizeof(err)),
	    CRUX_ERR_INVAL);
	assert_int_equal(idx, -1);
	assert_string_equal(err, "CRUX_MODE2='gpu' is not valid: expected one of auto, cupti, "
				 "events, host");
}

static void test_duration(void **state)
{
	(void)state;
	uint64_t ns = 0;
	char err[256];
	struct {
		const char *text;
		uint64_t ns;
	} good[] = {{"5", 5000000000ull},     {"250ms", 250000000ull}, {"1.5s", 1500000000ull},
		    {"10us", 10000ull},	      {"7ns", 7ull},	       {"2m", 120000000000ull},
		    {"0.5", 500000000ull},    {".25s", 250000000ull},  {"5h", 18000000000000ull},
		    {"1d", 86400000000000ull}};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(crux_parse_duration_ns("CRUX_T", good[i].text, 0, UINT64_MAX,
							1000000000ull, &ns, err, sizeof(err)),
				 CRUX_OK);
		assert_true(ns == good[i].ns);
	}
	const char *bad[] = {
	    "5y", "-1s", "s", "", "1 s", "1e3ms", "1.2.3s", "99999999999999999999s", "0x5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ns = 77;
		assert_int_equal(crux_parse_duration_ns("CRUX_T", bad[i], 0, UINT64_MAX, 1, &ns,
							err, sizeof(err)),
				 CRUX_ERR_INVAL);
		assert_true(ns == 77);
		assert_non_null(strstr(err, "CRUX_T='"));
		assert_non_null(strstr(err, "ns, us, ms, s, m, h or d"));
	}
	/* range */
	assert_int_equal(
	    crux_parse_duration_ns("CRUX_T", "2s", 0, 1000000000ull, 1, &ns, err, sizeof(err)),
	    CRUX_ERR_INVAL);
	struct tu_env env[] = {{"CRUX_WIN", "200ms"}, {NULL, NULL}};
	assert_int_equal(crux_env_duration_ns(tu_getenv, env, "CRUX_WIN", 1, 0, UINT64_MAX,
					      1000000ull, &ns, NULL, 0),
			 CRUX_OK);
	assert_true(ns == 200000000ull);
	assert_int_equal(crux_env_duration_ns(tu_getenv, env, "CRUX_NOPE", 123, 0, UINT64_MAX,
					      1000000ull, &ns, NULL, 0),
			 CRUX_OK);
	assert_true(ns == 123);
}

static void test_quote_long_and_control(void **state)
{
	(void)state;
	char val[300];
	memset(val, 'a', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	val[3] = '\n';
	char err[512];
	long long v;
	assert_int_equal(crux_parse_int("CRUX_N", val, 0, 1, &v, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_null(strchr(err, '\n'));
	assert_non_null(strstr(err, "aaa?aaa"));
	assert_non_null(strstr(err, "...'"));
	assert_true(strlen(err) < 200);
}

static void test_env_process_getenv(void **state)
{
	(void)state;
	long long v = 0;
	setenv("CRUX_TEST_ENV_INT", "3", 1);
	assert_int_equal(crux_env_int(NULL, NULL, "CRUX_TEST_ENV_INT", 1, 0, 9, &v, NULL, 0),
			 CRUX_OK);
	assert_int_equal(v, 3);
	unsetenv("CRUX_TEST_ENV_INT");
	assert_null(crux_env_get(NULL, NULL, "CRUX_TEST_ENV_INT"));
}

static void test_addr(void **state)
{
	(void)state;
	struct crux_addr a, b, c;
	char buf[CRUX_ADDR_STRLEN];
	assert_int_equal(crux_addr_parse("198.18.0.1", &a), CRUX_OK);
	assert_int_equal(a.family, 4);
	crux_addr_format(&a, buf, sizeof(buf));
	assert_string_equal(buf, "198.18.0.1");
	assert_int_equal(crux_addr_parse("::ffff:198.18.0.1", &b), CRUX_OK);
	assert_int_equal(b.family, 4);
	assert_true(crux_addr_equal(&a, &b));
	assert_true(crux_addr_hash(&a) == crux_addr_hash(&b));
	assert_int_equal(crux_addr_parse("fd00::1", &c), CRUX_OK);
	assert_int_equal(c.family, 6);
	crux_addr_format(&c, buf, sizeof(buf));
	assert_string_equal(buf, "fd00::1");
	assert_false(crux_addr_equal(&a, &c));
	assert_true(crux_addr_hash(&a) != crux_addr_hash(&c));
	assert_int_equal(crux_addr_parse("198.18.0.256", &c), CRUX_ERR_INVAL);
	assert_int_equal(crux_addr_parse("host", &c), CRUX_ERR_INVAL);
	assert_int_equal(c.family, 6); /* untouched */

	struct sockaddr_in sin = {.sin_family = AF_INET};
	memcpy(&sin.sin_addr, a.bytes, 4);
	assert_int_equal(crux_addr_from_sockaddr((struct sockaddr *)&sin, &b), CRUX_OK);
	assert_true(crux_addr_equal(&a, &b));
	struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
	sin6.sin6_addr.s6_addr[10] = 0xff;
	sin6.sin6_addr.s6_addr[11] = 0xff;
	memcpy(&sin6.sin6_addr.s6_addr[12], a.bytes, 4);
	memset(&b, 0x55, sizeof(b));
	assert_int_equal(crux_addr_from_sockaddr((struct sockaddr *)&sin6, &b), CRUX_OK);
	assert_true(crux_addr_equal(&a, &b));
	assert_int_equal(b.pad[0], 0);
	struct sockaddr bad = {.sa_family = AF_UNIX};
	assert_int_equal(crux_addr_from_sockaddr(&bad, &b), CRUX_ERR_INVAL);

	struct crux_addr none;
	memset(&none, 0, sizeof(none));
	crux_addr_format(&none, buf, sizeof(buf));
	assert_string_equal(buf, "-");
	/* padding garbage does not change equality */
	b = a;
	b.pad[1] = 9;
	b.bytes[10] = 9;
	assert_true(crux_addr_equal(&a, &b));
	assert_true(crux_addr_hash(&a) == crux_addr_hash(&b));
}

static void test_log_level_and_sink(void **state)
{
	(void)state;
	struct tu_log cap = {0};
	enum crux_log_level lvl;
	char err[256];
	struct tu_env e1[] = {{"CRUX_LOG_LEVEL", "debug"}, {NULL, NULL}};
	struct tu_env e2[] = {{"CRUX_LOG_LEVEL", "2"}, {NULL, NULL}};
	struct tu_env e3[] = {{"CRUX_LOG_LEVEL", "loud"}, {NULL, NULL}};
	struct tu_env e4[] = {{"CRUX_LOG_LEVEL", "4"}, {NULL, NULL}};
	assert_int_equal(crux_log_parse_level(tu_getenv, e1, &lvl, NULL, 0), CRUX_OK);
	assert_int_equal(lvl, CRUX_LOG_DEBUG);
	assert_int_equal(crux_log_parse_level(tu_getenv, e2, &lvl, NULL, 0), CRUX_OK);
	assert_int_equal(lvl, CRUX_LOG_INFO);
	assert_int_equal(crux_log_parse_level(tu_getenv, NULL, &lvl, NULL, 0), CRUX_OK);
	assert_int_equal(lvl, CRUX_LOG_WARN);
	assert_int_equal(crux_log_parse_level(tu_getenv, e3, &lvl, err, sizeof(err)),
			 CRUX_ERR_INVAL);
	assert_string_equal(err, "CRUX_LOG_LEVEL='loud' is not valid: expected one of error, "
				 "warn, info, debug or 0..3");
	assert_int_equal(crux_log_parse_level(tu_getenv, e4, &lvl, NULL, 0), CRUX_ERR_INVAL);

	crux_log_set_sink(tu_log_sink, &cap);
	setenv("CRUX_LOG_LEVEL", "bogus", 1);
	assert_int_equal(crux_log_init("crux-test"), CRUX_ERR_INVAL);
	assert_int_equal(crux_log_get_level(), CRUX_LOG_WARN);
	assert_int_equal(cap.lines, 1);
	assert_int_equal(cap.level, CRUX_LOG_ERROR);
	assert_non_null(strstr(cap.last, "CRUX_LOG_LEVEL='bogus'"));

	setenv("CRUX_LOG_LEVEL", "error", 1);
	assert_int_equal(crux_log_init("crux-test"), CRUX_OK);
	assert_int_equal(crux_log_get_level(), CRUX_LOG_ERROR);
	cap.lines = 0;
	crux_warn("not shown %d", 1);
	assert_int_equal(cap.lines, 0);
	crux_err("shown %d\n", 2);
	assert_int_equal(cap.lines, 1);
	assert_string_equal(cap.last, "shown 2"); /* trailing newline dropped */

	crux_log_set_level(CRUX_LOG_DEBUG);
	int flag = 0;
	for (int i = 0; i < 3; i++)
		crux_log_once(&flag, CRUX_LOG_INFO, "once");
	assert_int_equal(cap.lines, 2);

	crux_log_once_reset();
	assert_true(crux_log_once_key(1234));
	assert_false(crux_log_once_key(1234));
	/* bounded memory: after many other keys the old one may log again */
	for (uint64_t k = 0; k < 300; k++)
		crux_log_once_key(10000 + k);
	assert_true(crux_log_once_key(1234));

	unsetenv("CRUX_LOG_LEVEL");
	crux_log_set_sink(NULL, NULL);
	crux_log_set_level(CRUX_LOG_WARN);
}

static void test_log_stderr(void **state)
{
	(void)state;
	/* stderr sink: the line carries the component prefix. */
	char path[] = "/tmp/crux-logtest-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	crux_log_set_sink(NULL, NULL);
	unsetenv("CRUX_LOG_LEVEL");
	crux_log_init("crux-unit");
	crux_warn("hello %s", "world");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	char buf[256] = "";
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(path);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "crux-unit["));
	assert_non_null(strstr(buf, "WARN: hello world\n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_status_strings),
	    cmocka_unit_test(test_env_int),
	    cmocka_unit_test(test_parse_u64),
	    cmocka_unit_test(test_parse_double),
	    cmocka_unit_test(test_env_bool_enum),
	    cmocka_unit_test(test_duration),
	    cmocka_unit_test(test_quote_long_and_control),
	    cmocka_unit_test(test_env_process_getenv),
	    cmocka_unit_test(test_addr),
	    cmocka_unit_test(test_log_level_and_sink),
	    cmocka_unit_test(test_log_stderr),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
