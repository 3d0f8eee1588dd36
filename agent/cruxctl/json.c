/* SPDX-License-Identifier: Apache-2.0 */
#include <math.h>

#include "crux/json.h"
#include "json.h"

void json_init(struct json *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
	j->first[0] = true;
	j->after_key = false;
}

static void sep(struct json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
}

static void open_(struct json *j, char c)
{
	sep(j);
	fputc(c, j->f);
	if (j->depth < JSON_MAX_DEPTH - 1)
		j->depth++;
	j->first[j->depth] = true;
}

static void close_(struct json *j, char c)
{
	fputc(c, j->f);
	if (j->depth > 0)
		j->depth--;
}

void json_obj(struct json *j)
{
	open_(j, '{');
}

void json_end_obj(struct json *j)
{
	close_(j, '}');
}

void json_arr(struct json *j)
{
	open_(j, '[');
}

void json_end_arr(struct json *j)
{
	close_(j, ']');
}

void json_key(struct json *j, const char *k)
{
	sep(j);
	crux_json_put_str(j->f, k);
	fputc(':', j->f);
	j->after_key = true;
}

void json_str(struct json *j, const char *s)
{
	sep(j);
	crux_json_put_str(j->f, s ? s : "");
}

void json_num(struct json *j, double v)
{
	sep(j);
	if (isfinite(v))
		fprintf(j->f, "%.9g", v);
	else
		fputs("null", j->f);
}

void json_u64(struct json *j, uint64_t v)
{
	sep(j);
	fprintf(j->f, "%llu", (unsigned long long)v);
}

void json_i64(struct json *j, int64_t v)
{
	sep(j);
	fprintf(j->f, "%lld", (long long)v);
}

void json_bool(struct json *j, bool v)
{
	sep(j);
	fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j)
{
	sep(j);
	fputs("null", j->f);
}

void json_done(struct json *j)
{
	fputc('\n', j->f);
	fflush(j->f);
	j->first[0] = true;
	j->depth = 0;
}
