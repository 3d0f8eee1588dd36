/* SPDX-License-Identifier: Apache-2.0 */
/* etcd client: base64 and the response parsers on canned gateway answers
 * (shapes as etcd 3.4's gateway writes them), good and hostile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "crux/etcd.h"
#include "etcd_internal.h"

#define S(x) x, strlen(x)

static void test_b64_roundtrip(void **state)
{
	(void)state;
	const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	for (size_t i = 0; i < 7; i++) {
		char enc[16];
		uint8_t dec[16];
		size_t n = 99;
		crux_b64_encode(in[i], strlen(in[i]), enc);
		assert_string_equal(enc, want[i]);
		assert_int_equal(crux_b64_decode(enc, strlen(enc), dec, &n), CRUX_OK);
		assert_int_equal(n, strlen(in[i]));
		assert_memory_equal(dec, in[i], n);
	}
}

static void test_b64_refuses(void **state)
{
	(void)state;
	const char *bad[] = {"Zg=", "Z===", "Zh==", "Zm9=", "Zm 9", "Zm9v\n", "=m9v", "Zg==Zg=="};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t dec[16];
		size_t n = 0;
		assert_int_equal(crux_b64_decode(bad[i], strlen(bad[i]), dec, &n),
				 CRUX_ERR_CORRUPT);
	}
}

static const char range_ok[] =
    "{\"header\":{\"cluster_id\":\"14841639068965178418\",\"member_id\":\"10276657743932975437\","
    "\"revision\":\"7\",\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"5\","
    "\"mod_revision\":\"6\",\"version\":\"2\",\"value\":\"YmFy\",\"lease\":\"7587872012926355714\"}"
    ","
    "{\"key\":\"Zm9vMg==\",\"create_revision\":\"7\",\"mod_revision\":\"7\",\"version\":\"1\"}],"
    "\"count\":\"2\"}\n";

static void test_range(void **state)
{
	(void)state;
	struct crux_etcd_range r;
	assert_int_equal(crux_etcd_parse_range(S(range_ok), &r), CRUX_OK);
	assert_int_equal(r.revision, 7);
	assert_int_equal(r.count, 2);
	assert_false(r.more);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.kvs[0].key_len, 3);
	assert_string_equal((char *)r.kvs[0].key, "foo");
	assert_string_equal((char *)r.kvs[0].value, "bar");
	assert_int_equal(r.kvs[0].create_revision, 5);
	assert_int_equal(r.kvs[0].mod_revision, 6);
	assert_int_equal(r.kvs[0].lease, 7587872012926355714LL);
	assert_int_equal(r.kvs[1].value_len, 0); /* empty value: omitted */
	crux_etcd_range_free(&r);

	/* Empty range: no kvs, no count. */
	assert_int_equal(crux_etcd_parse_range(S("{\"header\":{\"revision\":\"3\"}}"), &r),
			 CRUX_OK);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.revision, 3);
	crux_etcd_range_free(&r);
}

static void test_range_hostile(void **state)
{
	(void)state;
	const char *bad[] = {
	    "",
	    "[]",
	    "{}", /* no header */
	    "{\"header\":{\"revision\":\"-1\"}}",
	    "{\"header\":{\"revision\":\"7x\"}}",
	    "{\"header\":{\"revision\":\"99999999999999999999\"}}",
	    "{\"header\":{\"revision\":true}}",
	    "{\"header\":[]}",
	    "{\"header\":{\"revision\":\"1\"},\"kvs\":{}}",
	    "{\"header\":{\"revision\":\"1\"},\"kvs\":[1]}",
	    "{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"key\":\"Zm9v!\"}]}",
	    "{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"value\":\"YmFy\"}]}", /* no key */
	    "{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"9\","
	    "\"mod_revision\":\"2\"}]}",
	    "{\"header\":{\"revision\":\"1\"},\"more\":\"yes\"}",
	    "{\"header\":{\"revision\":\"1\"}} trailing",
	    "{\"header\":{\"revision\":\"1\"}",
	    "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
	    "],"
	    "\"header\":{\"revision\":\"1\"}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct crux_etcd_range r = {0};
		assert_int_equal(crux_etcd_parse_range(bad[i], strlen(bad[i]), &r),
				 CRUX_ERR_CORRUPT);
		assert_int_equal(r.n, 0);
	}
}

/* The header's cluster and member ids are unsigned 64-bit (etcd's are often
 * above INT64_MAX); a malformed id is "not said" (0), never an error. */
static void test_header_identity(void **state)
{
	(void)state;
	struct crux_etcd_identity id;
	int64_t rev = 0;
	assert_int_equal(
	    crux_etcd_parse_header(S("{\"header\":{\"cluster_id\":\"14841639068965178418\","
				     "\"member_id\":\"10276657743932975437\","
				     "\"revision\":\"42\",\"raft_term\":\"2\"}}"),
				   &rev),
	    CRUX_OK);
	crux_etcd_last_header(&id);
	assert_int_equal(rev, 42);
	assert_int_equal(id.revision, 42);
	assert_true(id.cluster_id == 14841639068965178418ull);
	assert_true(id.member_id == 10276657743932975437ull);
	/* 2^64 overflows, letters and numbers are not ids: 0, the answer still parses */
	assert_int_equal(
	    crux_etcd_parse_header(S("{\"header\":{\"cluster_id\":\"18446744073709551616\","
				     "\"member_id\":7,\"revision\":\"5\"}}"),
				   &rev),
	    CRUX_OK);
	crux_etcd_last_header(&id);
	assert_int_equal(id.revision, 5);
	assert_true(id.cluster_id == 0 && id.member_id == 0);
	assert_int_equal(crux_etcd_parse_header(
			     S("{\"header\":{\"cluster_id\":\"12x\",\"revision\":\"6\"}}"), &rev),
			 CRUX_OK);
	crux_etcd_last_header(&id);
	assert_true(id.cluster_id == 0 && id.revision == 6);
}

static void test_txn_grant_keepalive(void **state)
{
	(void)state;
	bool ok = true;
	int64_t rev = 0, id = 0, ttl = 0;
	/* A failed txn: no "succeeded" at all. */
	assert_int_equal(crux_etcd_parse_txn(
			     S("{\"header\":{\"revision\":\"12\"},\"responses\":[{}]}"), &ok, &rev),
			 CRUX_OK);
	assert_false(ok);
	assert_int_equal(rev, 12);
	assert_int_equal(crux_etcd_parse_txn(
			     S("{\"header\":{\"revision\":\"13\"},\"succeeded\":true}"), &ok, &rev),
			 CRUX_OK);
	assert_true(ok);
	assert_int_equal(
	    crux_etcd_parse_txn(S("{\"header\":{\"revision\":\"13\"},\"succeeded\":1}"), &ok, &rev),
	    CRUX_ERR_CORRUPT);

	assert_int_equal(
	    crux_etcd_parse_grant(
		S("{\"header\":{\"revision\":\"2\"},\"ID\":\"694d7a0c8d0b4a0f\"}"), &id, &ttl),
	    CRUX_ERR_CORRUPT); /* hex is not etcd's */
	assert_int_equal(
	    crux_etcd_parse_grant(
		S("{\"header\":{\"revision\":\"2\"},\"ID\":\"7587\",\"TTL\":\"10\"}"), &id, &ttl),
	    CRUX_OK);
	assert_int_equal(id, 7587);
	assert_int_equal(ttl, 10);
	assert_int_equal(crux_etcd_parse_grant(
			     S("{\"header\":{\"revision\":\"2\"},\"ID\":\"7587\"}"), &id, &ttl),
			 CRUX_ERR_CORRUPT);

	assert_int_equal(
	    crux_etcd_parse_keepalive(
		S("{\"result\":{\"header\":{\"revision\":\"2\"},\"ID\":\"7587\",\"TTL\":\"9\"}}"),
		&ttl),
	    CRUX_OK);
	assert_int_equal(ttl, 9);
	/* Expired: etcd leaves the TTL out. */
	assert_int_equal(
	    crux_etcd_parse_keepalive(
		S("{\"result\":{\"header\":{\"revision\":\"2\"},\"ID\":\"7587\"}}"), &ttl),
	    CRUX_OK);
	assert_int_equal(ttl, 0);
	assert_int_equal(crux_etcd_parse_keepalive(
			     S("{\"error\":{\"grpc_code\":14,\"message\":\"no leader\"}}"), &ttl),
			 CRUX_ERR_REMOTE);
}

static void test_error(void **state)
{
	(void)state;
	int64_t code = 0;
	char msg[32];
	assert_int_equal(crux_etcd_parse_error(
			     S("{\"error\":\"etcdserver: requested lease not found\","
			       "\"code\":5,\"message\":\"etcdserver: requested lease not found\"}"),
			     &code, msg, sizeof(msg)),
			 CRUX_OK);
	assert_int_equal(code, 5);
	assert_string_equal(msg, "etcdserver: requested lease not"); /* cut to fit */
	assert_int_equal(crux_etcd_parse_error(S("{\"code\":5,\"message\":\"a\\u0001b\"}"), &code,
					       msg, sizeof(msg)),
			 CRUX_OK);
	assert_string_equal(msg, "a?b");
	assert_int_equal(crux_etcd_parse_error(S("{\"error\":{\"grpc_code\":14,\"http_code\":503,"
						 "\"message\":\"etcdserver: no leader\"}}"),
					       &code, msg, sizeof(msg)),
			 CRUX_OK);
	assert_int_equal(code, 14);
	assert_int_equal(crux_etcd_parse_error(S("{\"code\":\"x\"}"), &code, msg, sizeof(msg)),
			 CRUX_ERR_CORRUPT);
}

static void test_watch(void **state)
{
	(void)state;
	struct crux_etcd_watch_msg m;
	assert_int_equal(
	    crux_etcd_parse_watch(
		S("{\"result\":{\"header\":{\"revision\":\"4\"},\"created\":true}}"), &m),
	    CRUX_OK);
	assert_true(m.created);
	assert_int_equal(m.n, 0);
	crux_etcd_watch_msg_free(&m);

	const char ev[] =
	    "{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":["
	    "{\"kv\":{\"key\":\"Zm9v\",\"create_revision\":\"8\",\"mod_revision\":\"9\","
	    "\"version\":\"2\",\"value\":\"YmF6\"}},"
	    "{\"type\":\"DELETE\",\"kv\":{\"key\":\"Zm9vMg==\",\"mod_revision\":\"9\"}}]}}";
	assert_int_equal(crux_etcd_parse_watch(S(ev), &m), CRUX_OK);
	assert_int_equal(m.revision, 9);
	assert_int_equal(m.n, 2);
	assert_int_equal(m.events[0].type, CRUX_ETCD_EV_PUT);
	assert_string_equal((char *)m.events[0].kv.value, "baz");
	assert_int_equal(m.events[1].type, CRUX_ETCD_EV_DELETE);
	assert_string_equal((char *)m.events[1].kv.key, "foo2");
	crux_etcd_watch_msg_free(&m);

	assert_int_equal(crux_etcd_parse_watch(
			     S("{\"result\":{\"header\":{\"revision\":\"9\"},\"canceled\":true,"
			       "\"compact_revision\":\"5\"}}"),
			     &m),
			 CRUX_OK);
	assert_true(m.canceled);
	assert_int_equal(m.compact_revision, 5);
	crux_etcd_watch_msg_free(&m);

	assert_int_equal(crux_etcd_parse_watch(
			     S("{\"error\":{\"grpc_code\":14,\"message\":\"no leader\"}}"), &m),
			 CRUX_ERR_REMOTE);
	const char *bad[] = {
	    "{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":[{\"type\":\"PATCH\",\"kv\":{"
	    "\"key\":\"Zm9v\"}}]}}",
	    "{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":[{\"type\":\"PUT\"}]}}",
	    "{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":[{\"kv\":{\"key\":\"Zm9v\"}},"
	    "7]}}",
	    "{\"result\":7}",
	    "{\"result\":{}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(crux_etcd_parse_watch(bad[i], strlen(bad[i]), &m),
				 CRUX_ERR_CORRUPT);
}

static void test_open_options(void **state)
{
	(void)state;
	struct crux_etcd *e = NULL;
	char err[256];
	struct crux_etcd_opts o = {.endpoints = "http://127.0.0.1:2379,https://h:2379/"};
	assert_int_equal(crux_etcd_open(&o, &e, err, sizeof(err)), CRUX_OK);
	assert_string_equal(crux_etcd_endpoint(e), "http://127.0.0.1:2379");
	crux_etcd_close(e);
	o.endpoints = "127.0.0.1:2379";
	assert_int_equal(crux_etcd_open(&o, &e, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "http://HOST:PORT"));
	o.endpoints = "";
	assert_int_equal(crux_etcd_open(&o, &e, err, sizeof(err)), CRUX_ERR_INVAL);
	o.endpoints = "http://a:1,,http://b:2";
	assert_int_equal(crux_etcd_open(&o, &e, err, sizeof(err)), CRUX_ERR_INVAL);
	o.endpoints = "http://a: 1";
	assert_int_equal(crux_etcd_open(&o, &e, err, sizeof(err)), CRUX_ERR_INVAL);
	o.endpoints = "https://a:1";
	o.cert_file = "/x/cert.pem";
	assert_int_equal(crux_etcd_open(&o, &e, err, sizeof(err)), CRUX_ERR_INVAL);
	assert_non_null(strstr(err, "key"));
}

static void test_unreachable(void **state)
{
	(void)state;
	struct crux_etcd *e = NULL;
	char err[256];
	/* Port 1 on loopback: refused at once, on both endpoints in turn. */
	struct crux_etcd_opts o = {.endpoints = "http://127.0.0.1:1,http://127.0.0.1:1",
				   .timeout_ms = 500};
	assert_int_equal(crux_etcd_open(&o, &e, err, sizeof(err)), CRUX_OK);
	struct crux_etcd_range r;
	assert_int_equal(crux_etcd_get(e, "k", 1, false, &r), CRUX_ERR_REMOTE);
	assert_non_null(strstr(crux_etcd_last_error(e), "127.0.0.1:1"));
	crux_etcd_close(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_b64_roundtrip),   cmocka_unit_test(test_b64_refuses),
	    cmocka_unit_test(test_range),	    cmocka_unit_test(test_range_hostile),
	    cmocka_unit_test(test_header_identity), cmocka_unit_test(test_txn_grant_keepalive),
	    cmocka_unit_test(test_error),	    cmocka_unit_test(test_watch),
	    cmocka_unit_test(test_open_options),    cmocka_unit_test(test_unreachable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
