/* SPDX-License-Identifier: Apache-2.0 */
/* A minimal streaming JSON writer for cruxctl's --json output. */
#ifndef CRUXCTL_JSON_H
#define CRUXCTL_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 16

struct json {
	FILE *f;
	int depth;
	bool first[JSON_MAX_DEPTH];
	bool after_key;
};

void json_init(struct json *j, FILE *f);
void json_obj(struct json *j);   /* { */
void json_end_obj(struct json *j);
void json_arr(struct json *j);   /* [ */
void json_end_arr(struct json *j);
void json_key(struct json *j, const char *k);
void json_str(struct json *j, const char *s);
void json_num(struct json *j, double v);
void json_u64(struct json *j, uint64_t v);
void json_i64(struct json *j, int64_t v);
void json_bool(struct json *j, bool v);
void json_null(struct json *j);
/* Ends a document with a newline. */
void json_done(struct json *j);

#endif
