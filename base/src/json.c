/* SPDX-License-Identifier: Apache-2.0 */
/* The streaming JSON writer: separators by nesting level, strict escaping. */
#include <math.h>

#include "crux/json.h"

void crux_json_put_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void crux_json_init(struct crux_json *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
	j->first[0] = true;
	j->after_key = false;
	j->lines = false;
}

void crux_json_init_lines(struct crux_json *j, FILE *f)
{
	crux_json_init(j, f);
	j->lines = true;
}

/* Before any value or key: a comma unless first at its level or after a key. */
static void sep(struct crux_json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (j->lines && j->depth == 1)
		fputs(j->first[1] ? "\n  " : ",\n  ", j->f);
	else if (!j->first[j->depth])
		fputs(j->lines ? ", " : ",", j->f);
	j->first[j->depth] = false;
}

static void open_level(struct crux_json *j, char c)
{
	sep(j);
	fputc(c, j->f);
	if (j->depth < CRUX_JSON_MAX_DEPTH - 1)
		j->depth++;
	j->first[j->depth] = true;
}

static void close_level(struct crux_json *j, char c)
{
	if (j->lines && j->depth == 1 && !j->first[1])
		fputc('\n', j->f);
	fputc(c, j->f);
	if (j->depth > 0)
		j->depth--;
}

void crux_json_obj(struct crux_json *j)
{
	open_level(j, '{');
}

void crux_json_end_obj(struct crux_json *j)
{
	close_level(j, '}');
}

void crux_json_arr(struct crux_json *j)
{
	open_level(j, '[');
}

void crux_json_end_arr(struct crux_json *j)
{
	close_level(j, ']');
}

void crux_json_key(struct crux_json *j, const char *k)
{
	sep(j);
	crux_json_put_str(j->f, k);
	fputs(j->lines ? ": " : ":", j->f);
	j->after_key = true;
}

void crux_json_str(struct crux_json *j, const char *s)
{
	sep(j);
	crux_json_put_str(j->f, s);
}

void crux_json_num(struct crux_json *j, double v)
{
	crux_json_numf(j, "%.9g", v);
}

void crux_json_numf(struct crux_json *j, const char *fmt, double v)
{
	sep(j);
	if (isfinite(v))
		fprintf(j->f, fmt, v);
	else
		fputs("null", j->f);
}

void crux_json_u64(struct crux_json *j, uint64_t v)
{
	sep(j);
	fprintf(j->f, "%llu", (unsigned long long)v);
}

void crux_json_i64(struct crux_json *j, int64_t v)
{
	sep(j);
	fprintf(j->f, "%lld", (long long)v);
}

void crux_json_bool(struct crux_json *j, bool v)
{
	sep(j);
	fputs(v ? "true" : "false", j->f);
}

void crux_json_null(struct crux_json *j)
{
	sep(j);
	fputs("null", j->f);
}

void crux_json_field_str(struct crux_json *j, const char *k, const char *v)
{
	crux_json_key(j, k);
	crux_json_str(j, v);
}

void crux_json_field_num(struct crux_json *j, const char *k, double v)
{
	crux_json_key(j, k);
	crux_json_num(j, v);
}

void crux_json_field_numf(struct crux_json *j, const char *k, const char *fmt, double v)
{
	crux_json_key(j, k);
	crux_json_numf(j, fmt, v);
}

void crux_json_field_u64(struct crux_json *j, const char *k, uint64_t v)
{
	crux_json_key(j, k);
	crux_json_u64(j, v);
}

void crux_json_field_i64(struct crux_json *j, const char *k, int64_t v)
{
	crux_json_key(j, k);
	crux_json_i64(j, v);
}

void crux_json_field_bool(struct crux_json *j, const char *k, bool v)
{
	crux_json_key(j, k);
	crux_json_bool(j, v);
}

void crux_json_done(struct crux_json *j)
{
	fputc('\n', j->f);
	fflush(j->f);
	j->first[0] = true;
	j->depth = 0;
	j->after_key = false;
}
