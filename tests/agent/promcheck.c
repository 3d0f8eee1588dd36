/* SPDX-License-Identifier: Apache-2.0 */
/*
 * promcheck [--prefix P] [--require NAME]... < TEXT: a strict checker of the
 * Prometheus text exposition format (0.0.4) for the metrics tests. Checks:
 * every line is a HELP, a TYPE or a sample and ends in a newline; metric and
 * label names are valid; label values use only the \\ \" \n escapes; values
 * are numbers (or NaN/+Inf/-Inf); each family has one TYPE, given before its
 * samples, and its samples are contiguous; no sample is repeated; counters
 * end in _total and are >= 0; every name starts with the prefix; every
 * required family has a TYPE. Exit 0 when valid, 1 with the first problem.
 */
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FAM	    512
#define MAX_SAMPLES 65536

static char fam_name[MAX_FAM][128], fam_type[MAX_FAM][16];
static bool fam_help[MAX_FAM];
static int nfam;
static char *samples[MAX_SAMPLES];
static int nsamples;
static long lineno;

static int fail(const char *why, const char *line)
{
	fprintf(stderr, "promcheck: line %ld: %s: %s\n", lineno, why, line);
	return 1;
}

static bool name_ok(const char *s, size_t n, bool metric)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bool ok = isalpha(c) || c == '_' || (metric && c == ':') || (i && isdigit(c));
		if (!ok || c >= 0x80)
			return false;
	}
	return true;
}

static int find_fam(const char *name)
{
	for (int i = 0; i < nfam; i++)
		if (!strcmp(fam_name[i], name))
			return i;
	return -1;
}

static bool value_ok(const char *s, double *v)
{
	char *end;
	if (!strcmp(s, "NaN") || !strcmp(s, "+Inf") || !strcmp(s, "-Inf")) {
		*v = s[0] == '-' ? -INFINITY : s[0] == '+' ? INFINITY : NAN;
		return true;
	}
	*v = strtod(s, &end);
	return end != s && *end == 0 && !isspace((unsigned char)s[0]);
}

int main(int argc, char **argv)
{
	const char *prefix = "";
	char line[8192];
	int cur = -1; /* family whose samples are being read */
	bool closed[MAX_FAM] = {false};

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--prefix") && i + 1 < argc)
			prefix = argv[++i];
		else if (!strcmp(argv[i], "--require") && i + 1 < argc)
			i++;
		else {
			fprintf(stderr,
				"usage: promcheck [--prefix P] [--require NAME]... < TEXT\n");
			return 2;
		}
	}
	while (fgets(line, sizeof(line), stdin)) {
		size_t n = strlen(line);
		lineno++;
		if (!n || line[n - 1] != '\n')
			return fail("line without a newline (or too long)", line);
		line[--n] = 0;
		if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7)) {
			bool help = line[2] == 'H';
			char *name = line + 7, *sp = strchr(name, ' ');
			if (!sp || !name_ok(name, (size_t)(sp - name), true))
				return fail("bad metric name in a comment", line);
			*sp = 0;
			if (strncmp(name, prefix, strlen(prefix)))
				return fail("name without the prefix", name);
			int f = find_fam(name);
			if (f >= 0 && closed[f])
				return fail("family given again after other families", name);
			if (f < 0) {
				if (nfam == MAX_FAM || strlen(name) >= sizeof(fam_name[0]))
					return fail("too many families", name);
				f = nfam++;
				strcpy(fam_name[f], name);
			}
			if (cur >= 0 && cur != f)
				closed[cur] = true;
			cur = f;
			if (help) {
				if (fam_help[f])
					return fail("second HELP", name);
				if (!sp[1])
					return fail("empty HELP", name);
				fam_help[f] = true;
			} else {
				const char *t = sp + 1;
				if (fam_type[f][0])
					return fail("second TYPE", name);
				if (strcmp(t, "counter") && strcmp(t, "gauge") &&
				    strcmp(t, "histogram") && strcmp(t, "summary") &&
				    strcmp(t, "untyped"))
					return fail("unknown TYPE", t);
				if (!strcmp(t, "counter") &&
				    (strlen(name) < 6 || strcmp(name + strlen(name) - 6, "_total")))
					return fail("counter not named *_total", name);
				snprintf(fam_type[f], sizeof(fam_type[f]), "%s", t);
			}
			continue;
		}
		if (line[0] == '#' || line[0] == 0)
			return fail("stray comment or empty line", line);
		/* A sample: name[{labels}] value */
		size_t nl = strcspn(line, "{ ");
		char name[128];
		if (!name_ok(line, nl, true) || nl >= sizeof(name))
			return fail("bad metric name", line);
		memcpy(name, line, nl);
		name[nl] = 0;
		int f = find_fam(name);
		if (f < 0 || !fam_type[f][0])
			return fail("sample before its TYPE", line);
		if (f != cur || closed[f])
			return fail("samples of a family not contiguous", line);
		char *p = line + nl;
		if (*p == '{') {
			p++;
			while (*p != '}') {
				size_t ln = strcspn(p, "=");
				if (!name_ok(p, ln, false) || p[ln] != '=' || p[ln + 1] != '"')
					return fail("bad label", line);
				p += ln + 2;
				while (*p != '"') {
					if (!*p)
						return fail("unterminated label value", line);
					if (*p == '\\') {
						if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
							return fail("bad escape in a label value",
								    line);
						p++;
					} else if (*p == '\n') {
						return fail("raw newline in a label value", line);
					}
					p++;
				}
				p++;
				if (*p == ',')
					p++;
				else if (*p != '}')
					return fail("labels not separated by commas", line);
			}
			p++;
		}
		if (*p != ' ')
			return fail("no space before the value", line);
		*p = 0;
		char *val = p + 1, *ts = strchr(val, ' ');
		if (ts) {
			*ts++ = 0;
			char *e;
			strtoll(ts, &e, 10);
			if (e == ts || *e)
				return fail("bad timestamp", ts);
		}
		double v;
		if (!value_ok(val, &v))
			return fail("bad value", val);
		if (!strcmp(fam_type[f], "counter") && !(v >= 0))
			return fail("negative counter", line);
		for (int i = 0; i < nsamples; i++)
			if (!strcmp(samples[i], line))
				return fail("repeated sample", line);
		if (nsamples == MAX_SAMPLES || !(samples[nsamples++] = strdup(line)))
			return fail("too many samples", line);
	}
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--require")) {
			int f = find_fam(argv[++i]);
			if (f < 0 || !fam_type[f][0]) {
				fprintf(stderr, "promcheck: required family %s missing\n", argv[i]);
				return 1;
			}
		} else if (!strcmp(argv[i], "--prefix")) {
			i++;
		}
	if (!lineno) {
		fprintf(stderr, "promcheck: empty input\n");
		return 1;
	}
	return 0;
}
