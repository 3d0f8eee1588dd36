/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one JSON writer of Crux: streaming, compact (no spaces, no newlines
 * inside a document), into a FILE. Separators are placed by the writer, so
 * a caller writes keys and values in order and cannot forget a comma.
 *
 *   struct crux_json j;
 *   crux_json_init(&j, stdout);
 *   crux_json_obj(&j);
 *   crux_json_key(&j, "jobs"); crux_json_u64(&j, 3);
 *   crux_json_end_obj(&j);
 *   crux_json_done(&j);          -> {"jobs":3}\n
 *
 * Strings: quote and backslash are escaped; every byte outside printable
 * ASCII becomes \u00XX, so the output is valid JSON (and one line) whatever
 * the input bytes are. NULL is written as "". Non-finite numbers are null.
 */
#ifndef CRUX_JSON_H
#define CRUX_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nesting deeper than this is written correctly but its commas are not tracked. */
#define CRUX_JSON_MAX_DEPTH 16

struct crux_json {
	FILE *f;
	int depth;
	bool first[CRUX_JSON_MAX_DEPTH];
	bool after_key;
	bool lines; /* crux_json_init_lines */
};

void crux_json_init(struct crux_json *j, FILE *f);
/*
 * The layout of result files meant to be read by people too: the outer
 * container's members one per line, indented two spaces, and ", " / ": "
 * between the rest, which stays on the member's line:
 *   {
 *     "benchmark": "lookup",
 *     "lookup_ns": {"median": 12.38, "p99": 27.23}
 *   }
 */
void crux_json_init_lines(struct crux_json *j, FILE *f);
void crux_json_obj(struct crux_json *j); /* { */
void crux_json_end_obj(struct crux_json *j);
void crux_json_arr(struct crux_json *j); /* [ */
void crux_json_end_arr(struct crux_json *j);
void crux_json_key(struct crux_json *j, const char *k);
void crux_json_str(struct crux_json *j, const char *s);
/* %.9g: nine significant digits, enough to read a double's value back to 1e-9. */
void crux_json_num(struct crux_json *j, double v);
/* A number with the caller's printf conversion for one double, e.g. "%.6f". */
void crux_json_numf(struct crux_json *j, const char *fmt, double v)
    __attribute__((format(printf, 2, 0)));
void crux_json_u64(struct crux_json *j, uint64_t v);
void crux_json_i64(struct crux_json *j, int64_t v);
void crux_json_bool(struct crux_json *j, bool v);
void crux_json_null(struct crux_json *j);
/* One member of an object: its key, then its value (the calls above, in one). */
void crux_json_field_str(struct crux_json *j, const char *k, const char *v);
void crux_json_field_num(struct crux_json *j, const char *k, double v);
void crux_json_field_numf(struct crux_json *j, const char *k, const char *fmt, double v)
    __attribute__((format(printf, 3, 0)));
void crux_json_field_u64(struct crux_json *j, const char *k, uint64_t v);
void crux_json_field_i64(struct crux_json *j, const char *k, int64_t v);
void crux_json_field_bool(struct crux_json *j, const char *k, bool v);
/* Ends a document with a newline and flushes; the writer can start another. */
void crux_json_done(struct crux_json *j);

/* Writes s as a quoted, escaped JSON string, outside any writer. */
void crux_json_put_str(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_JSON_H */
