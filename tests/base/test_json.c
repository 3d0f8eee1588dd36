/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON writer: exact bytes for escaping, nesting and numbers; json-c reads them back. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four headers above first. */
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/json.h"
#if CRUX_TEST_HAVE_JSONC
#include <json-c/json.h>
#endif

/* A writer on a memory stream; take() closes it and returns the bytes. */
struct out {
	char *buf;
	size_t len;
	FILE *f;
	struct crux_json j;
};

static void start(struct out *o)
{
	o->buf = NULL;
	o->len = 0;
	o->f = open_memstream(&o->buf, &o->len);
	assert_non_null(o->f);
	crux_json_init(&o->j, o->f);
}

static char *take(struct out *o)
{
	fclose(o->f);
	return o->buf;
}

/* Every byte 1..255 once, in order. */
static void all_bytes(char s[256])
{
	for (int i = 1; i < 256; i++)
		s[i - 1] = (char)i;
	s[255] = '\0';
}

static void test_escaping(void **state)
{
	(void)state;
	struct out o;
	start(&o);
	crux_json_put_str(o.f, "a\"b\\c\n\t\x01\x7f\xc3\xa9/'");
	fputc(' ', o.f);
	crux_json_put_str(o.f, NULL);
	char *s = take(&o);
	assert_string_equal(s, "\"a\\\"b\\\\c\\u000a\\u0009\\u0001\\u007f\\u00c3\\u00a9/'\" \"\"");
	free(s);

	/* every byte: printable ASCII as is, the rest \u00XX, one line */
	char in[256];
	all_bytes(in);
	start(&o);
	crux_json_put_str(o.f, in);
	s = take(&o);
	assert_null(strchr(s, '\n'));
	for (const char *p = s; *p; p++)
		assert_true(*p >= 0x20 && *p < 0x7f);
	assert_non_null(strstr(s, " !\\\"#"));
	assert_non_null(strstr(s, "[\\\\]"));
	assert_non_null(strstr(s, "}~\\u007f\\u0080"));
	assert_non_null(strstr(s, "\\u00ff\""));
	free(s);
}

static void test_nesting(void **state)
{
	(void)state;
	struct out o;
	start(&o);
	crux_json_obj(&o.j);
	crux_json_key(&o.j, "a");
	crux_json_arr(&o.j);
	crux_json_end_arr(&o.j);
	crux_json_key(&o.j, "b");
	crux_json_arr(&o.j);
	crux_json_u64(&o.j, 1);
	crux_json_obj(&o.j);
	crux_json_key(&o.j, "c");
	crux_json_null(&o.j);
	crux_json_key(&o.j, "d");
	crux_json_bool(&o.j, true);
	crux_json_end_obj(&o.j);
	crux_json_arr(&o.j);
	crux_json_bool(&o.j, false);
	crux_json_end_arr(&o.j);
	crux_json_end_arr(&o.j);
	crux_json_key(&o.j, "e");
	crux_json_obj(&o.j);
	crux_json_end_obj(&o.j);
	crux_json_end_obj(&o.j);
	crux_json_done(&o.j);
	/* a second document on the same writer starts without a comma */
	crux_json_arr(&o.j);
	crux_json_str(&o.j, "x");
	crux_json_end_arr(&o.j);
	crux_json_done(&o.j);
	char *s = take(&o);
	assert_string_equal(
	    s, "{\"a\":[],\"b\":[1,{\"c\":null,\"d\":true},[false]],\"e\":{}}\n[\"x\"]\n");
	free(s);
}

static void test_numbers(void **state)
{
	(void)state;
	struct out o;
	start(&o);
	crux_json_arr(&o.j);
	crux_json_num(&o.j, 0.1);
	crux_json_num(&o.j, 1e21);
	crux_json_num(&o.j, -2.5);
	crux_json_num(&o.j, NAN);
	crux_json_num(&o.j, INFINITY);
	crux_json_numf(&o.j, "%.3f", 2.0 / 3.0);
	crux_json_numf(&o.j, "%.6f", -INFINITY);
	crux_json_u64(&o.j, UINT64_MAX);
	crux_json_i64(&o.j, INT64_MIN);
	crux_json_end_arr(&o.j);
	char *s = take(&o);
	assert_string_equal(s, "[0.1,1e+21,-2.5,null,null,0.667,null,18446744073709551615,"
			       "-9223372036854775808]");
	free(s);
}

static void test_lines(void **state)
{
	(void)state;
	struct out o;
	start(&o);
	crux_json_init_lines(&o.j, o.f);
	crux_json_obj(&o.j);
	crux_json_key(&o.j, "benchmark");
	crux_json_str(&o.j, "lookup");
	crux_json_key(&o.j, "lookup_ns");
	crux_json_obj(&o.j);
	crux_json_key(&o.j, "median");
	crux_json_numf(&o.j, "%.2f", 12.375);
	crux_json_key(&o.j, "runs");
	crux_json_arr(&o.j);
	crux_json_u64(&o.j, 1);
	crux_json_u64(&o.j, 2);
	crux_json_end_arr(&o.j);
	crux_json_end_obj(&o.j);
	crux_json_key(&o.j, "goal_met");
	crux_json_bool(&o.j, true);
	crux_json_end_obj(&o.j);
	crux_json_done(&o.j);
	crux_json_obj(&o.j); /* an empty document */
	crux_json_end_obj(&o.j);
	crux_json_done(&o.j);
	char *s = take(&o);
	assert_string_equal(s, "{\n  \"benchmark\": \"lookup\",\n"
			       "  \"lookup_ns\": {\"median\": 12.38, \"runs\": [1, 2]},\n"
			       "  \"goal_met\": true\n}\n{}\n");
	free(s);
}

/* The field calls are a key and its value: the same bytes as the two calls. */
static void test_fields(void **state)
{
	(void)state;
	struct out o;
	start(&o);
	crux_json_obj(&o.j);
	crux_json_field_str(&o.j, "s", "a\"b");
	crux_json_field_num(&o.j, "n", 0.1);
	crux_json_field_numf(&o.j, "f", "%.2f", NAN);
	crux_json_field_u64(&o.j, "u", 7);
	crux_json_field_i64(&o.j, "i", -7);
	crux_json_field_bool(&o.j, "b", false);
	crux_json_key(&o.j, "o");
	crux_json_obj(&o.j);
	crux_json_field_numf(&o.j, "g", "%g", 1.5);
	crux_json_end_obj(&o.j);
	crux_json_end_obj(&o.j);
	char *s = take(&o);
	assert_string_equal(s, "{\"s\":\"a\\\"b\",\"n\":0.1,\"f\":null,\"u\":7,\"i\":-7,"
			       "\"b\":false,\"o\":{\"g\":1.5}}");
	free(s);
}

#if CRUX_TEST_HAVE_JSONC
/* The writer's \u00XX is read as code point U+00XX: bytes >= 0x80 come back as two-byte UTF-8. */
static void as_read(const char *in, char *out)
{
	for (const unsigned char *q = (const unsigned char *)in; *q; q++) {
		if (*q < 0x80) {
			*out++ = (char)*q;
		} else {
			*out++ = (char)(0xc0 | (*q >> 6));
			*out++ = (char)(0x80 | (*q & 0x3f));
		}
	}
	*out = '\0';
}

/* What the writer wrote is what json-c reads: every byte string, keys, numbers, nesting. */
static void test_jsonc_round_trip(void **state)
{
	(void)state;
	char bytes[256];
	all_bytes(bytes);
	const char *keys[] = {"plain", "q\"uote", "back\\slash", "nl\nkey", "\xe2\x82\xac"};
	const double nums[] = {0.0, -1.5, 1.0 / 3.0, 6.02214076e23, 1e-300};

	struct out o;
	start(&o);
	crux_json_obj(&o.j);
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		crux_json_key(&o.j, keys[k]);
		crux_json_arr(&o.j);
		crux_json_str(&o.j, bytes + k * 40);
		crux_json_num(&o.j, nums[k]);
		crux_json_i64(&o.j, -(int64_t)k * 1000000007);
		crux_json_obj(&o.j);
		crux_json_key(&o.j, "t");
		crux_json_bool(&o.j, k & 1);
		crux_json_end_obj(&o.j);
		crux_json_end_arr(&o.j);
	}
	crux_json_end_obj(&o.j);
	char *s = take(&o);

	enum json_tokener_error jerr;
	json_object *root = json_tokener_parse_verbose(s, &jerr);
	assert_non_null(root);
	assert_int_equal(jerr, json_tokener_success);
	assert_int_equal(json_object_object_length(root), 5);
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		json_object *arr, *v;
		char want[512];
		as_read(keys[k], want);
		assert_true(json_object_object_get_ex(root, want, &arr));
		assert_int_equal(json_object_array_length(arr), 4);
		as_read(bytes + k * 40, want);
		assert_string_equal(json_object_get_string(json_object_array_get_idx(arr, 0)),
				    want);
		double d = json_object_get_double(json_object_array_get_idx(arr, 1));
		assert_true(fabs(d - nums[k]) <= fabs(nums[k]) * 1e-8);
		assert_true(json_object_get_int64(json_object_array_get_idx(arr, 2)) ==
			    -(int64_t)k * 1000000007);
		assert_true(json_object_object_get_ex(json_object_array_get_idx(arr, 3), "t", &v));
		assert_int_equal(json_object_get_boolean(v), (int)(k & 1));
	}
	json_object_put(root);
	free(s);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_nesting),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_fields),
#if CRUX_TEST_HAVE_JSONC
		cmocka_unit_test(test_jsonc_round_trip),
#endif
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
