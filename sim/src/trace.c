/* SPDX-License-Identifier: Apache-2.0 */
/* crux-sim trace format: parser and writer (format in crux/sim_trace.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "crux/sim_trace.h"

#define TRACE_MAX_LINE	 65536
#define TRACE_MAX_FIELDS 12

struct parse_ctx {
	const char *name;
	size_t line;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3))) static crux_status_t perr(struct parse_ctx *c,
								const char *fmt, ...)
{
	if (c->err && c->errlen) {
		int n = snprintf(c->err, c->errlen, "%s:%zu: ", c->name, c->line);
		if (n >= 0 && (size_t)n < c->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return CRUX_ERR_INVAL;
}

static crux_status_t parse_u64(struct parse_ctx *c, const char *field, const char *s, uint64_t min,
			       uint64_t max, uint64_t *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return perr(c, "field %s: '%s' is not an integer in [%llu, %llu]", field, s,
			    (unsigned long long)min, (unsigned long long)max);
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return perr(c, "field %s: '%s' is not an integer in [%llu, %llu]", field, s,
			    (unsigned long long)min, (unsigned long long)max);
	*out = v;
	return CRUX_OK;
}

/* A finite decimal in [min, max]; 'open_min' excludes min itself. */
static crux_status_t parse_num(struct parse_ctx *c, const char *field, const char *s, double min,
			       double max, int open_min, double *out)
{
	char *end;
	const char *what = open_min ? "a number in (%g, %g]" : "a number in [%g, %g]";
	char range[96];
	snprintf(range, sizeof(range), what, min, max);
	/* strtod accepts "nan", "inf" and hex floats: only plain decimals here. */
	for (const char *p = s; *p; p++) {
		if (!strchr("0123456789.eE+-", *p))
			return perr(c, "field %s: '%s' is not %s", field, s, range);
	}
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v < min || v > max ||
	    (open_min && v <= min))
		return perr(c, "field %s: '%s' is not %s", field, s, range);
	*out = v;
	return CRUX_OK;
}

static int model_char_ok(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '.' || ch == '_' || ch == '+' || ch == '-';
}

static crux_status_t parse_hosts(struct parse_ctx *c, const char *s, uint32_t gpus,
				 struct crux_sim_trace_job *job)
{
	if (strcmp(s, "-") == 0) {
		job->n_hosts = 0;
		job->hosts = NULL;
		return CRUX_OK;
	}
	size_t n = 1;
	for (const char *p = s; *p; p++)
		n += *p == ',';
	if (n > gpus)
		return perr(c,
			    "field hosts: %zu hosts listed for a %u-GPU job (at most one "
			    "host per GPU)",
			    n, gpus);
	uint32_t *hosts = calloc(n, sizeof(*hosts));
	if (!hosts)
		return CRUX_ERR_NOMEM;
	size_t k = 0;
	const char *p = s;
	while (k < n) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char tok[16];
		if (len == 0 || len >= sizeof(tok)) {
			free(hosts);
			return perr(c,
				    "field hosts: '%s' is not '-' or a comma-separated list of "
				    "host indices",
				    s);
		}
		memcpy(tok, p, len);
		tok[len] = '\0';
		uint64_t v;
		crux_status_t st = parse_u64(c, "hosts", tok, 0, UINT32_MAX - 1, &v);
		if (st != CRUX_OK) {
			free(hosts);
			return st;
		}
		for (size_t i = 0; i < k; i++) {
			if (hosts[i] == v) {
				free(hosts);
				return perr(c, "field hosts: host %llu listed twice",
					    (unsigned long long)v);
			}
		}
		hosts[k++] = (uint32_t)v;
		p = comma ? comma + 1 : p + len;
	}
	job->n_hosts = (uint32_t)n;
	job->hosts = hosts;
	return CRUX_OK;
}

static crux_status_t parse_job(struct parse_ctx *c, char **f, size_t nf,
			       struct crux_sim_trace_job *job)
{
	static const char *const names[] = {"id",	  "arrival_s",	"model",
					    "gpus",	  "iterations", "compute_s",
					    "comm_bytes", "overlap",	"hosts"};
	if (nf != 10)
		return perr(c,
			    "a job line has 10 fields (job ID ARRIVAL_S MODEL GPUS ITERATIONS "
			    "COMPUTE_S COMM_BYTES OVERLAP HOSTS), found %zu",
			    nf);
	crux_status_t st;
	uint64_t v;
	memset(job, 0, sizeof(*job));
	if ((st = parse_u64(c, names[0], f[1], 1, UINT32_MAX, &v)) != CRUX_OK)
		return st;
	job->id = (uint32_t)v;
	if ((st = parse_num(c, names[1], f[2], 0, 1e10, 0, &job->arrival_s)) != CRUX_OK)
		return st;
	size_t ml = strlen(f[3]);
	if (ml == 0 || ml >= CRUX_SIM_MODEL_NAME_MAX)
		return perr(c, "field model: '%s' must have 1 to %d characters", f[3],
			    CRUX_SIM_MODEL_NAME_MAX - 1);
	for (size_t i = 0; i < ml; i++) {
		if (!model_char_ok(f[3][i]))
			return perr(c,
				    "field model: '%s' may contain only letters, digits and "
				    "'._+-'",
				    f[3]);
	}
	memcpy(job->model, f[3], ml + 1);
	if ((st = parse_u64(c, names[3], f[4], 1, CRUX_SIM_TRACE_MAX_GPUS, &v)) != CRUX_OK)
		return st;
	job->gpus = (uint32_t)v;
	if ((st = parse_u64(c, names[4], f[5], 1, 1000000000000ull, &job->iterations)) != CRUX_OK)
		return st;
	if ((st = parse_num(c, names[5], f[6], 0, 3600, 1, &job->compute_s)) != CRUX_OK)
		return st;
	if ((st = parse_num(c, names[6], f[7], 0, 1e14, 0, &job->comm_bytes)) != CRUX_OK)
		return st;
	if ((st = parse_num(c, names[7], f[8], 0, 1, 0, &job->overlap)) != CRUX_OK)
		return st;
	return parse_hosts(c, f[9], job->gpus, job);
}

crux_status_t crux_sim_trace_new(struct crux_sim_trace **out)
{
	struct crux_sim_trace *t = calloc(1, sizeof(*t));
	if (!t)
		return CRUX_ERR_NOMEM;
	*out = t;
	return CRUX_OK;
}

/* Takes ownership of job->hosts. */
static crux_status_t trace_push(struct crux_sim_trace *t, struct crux_sim_trace_job *job)
{
	if (t->n_jobs >= CRUX_SIM_TRACE_MAX_JOBS)
		return CRUX_ERR_RANGE;
	if (t->n_jobs == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct crux_sim_trace_job *j = realloc(t->jobs, cap * sizeof(*j));
		if (!j)
			return CRUX_ERR_NOMEM;
		t->jobs = j;
		t->cap = cap;
	}
	t->jobs[t->n_jobs++] = *job;
	return CRUX_OK;
}

crux_status_t crux_sim_trace_add(struct crux_sim_trace *t, const struct crux_sim_trace_job *job)
{
	struct crux_sim_trace_job copy = *job;
	if (job->n_hosts) {
		copy.hosts = malloc(job->n_hosts * sizeof(*copy.hosts));
		if (!copy.hosts)
			return CRUX_ERR_NOMEM;
		memcpy(copy.hosts, job->hosts, job->n_hosts * sizeof(*copy.hosts));
	} else {
		copy.hosts = NULL;
	}
	crux_status_t st = trace_push(t, &copy);
	if (st != CRUX_OK)
		free(copy.hosts);
	return st;
}

void crux_sim_trace_free(struct crux_sim_trace *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_jobs; i++)
		free(t->jobs[i].hosts);
	free(t->jobs);
	free(t);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* Duplicate ids are found by sorting a copy of the ids once at the end. */
static crux_status_t check_unique_ids(const struct crux_sim_trace *t, const char *name, char *err,
				      size_t errlen)
{
	if (t->n_jobs < 2)
		return CRUX_OK;
	uint32_t *ids = malloc(t->n_jobs * sizeof(*ids));
	if (!ids)
		return CRUX_ERR_NOMEM;
	for (size_t i = 0; i < t->n_jobs; i++)
		ids[i] = t->jobs[i].id;
	qsort(ids, t->n_jobs, sizeof(*ids), cmp_u32);
	crux_status_t st = CRUX_OK;
	for (size_t i = 1; i < t->n_jobs; i++) {
		if (ids[i] == ids[i - 1]) {
			if (err && errlen)
				snprintf(err, errlen, "%s: job id %u appears more than once", name,
					 ids[i]);
			st = CRUX_ERR_INVAL;
			break;
		}
	}
	free(ids);
	return st;
}

crux_status_t crux_sim_trace_parse(const char *text, size_t len, const char *name,
				   struct crux_sim_trace **out, char *err, size_t errlen)
{
	struct parse_ctx c = {
	    .name = name ? name : "trace", .line = 0, .err = err, .errlen = errlen};
	struct crux_sim_trace *t = NULL;
	char *buf = malloc(TRACE_MAX_LINE + 1);
	int have_header = 0;
	crux_status_t st;

	if (!buf)
		return CRUX_ERR_NOMEM;
	if ((st = crux_sim_trace_new(&t)) != CRUX_OK)
		goto fail;
	size_t pos = 0;
	while (pos < len) {
		size_t start = pos;
		while (pos < len && text[pos] != '\n')
			pos++;
		size_t ll = pos - start;
		pos++; /* past '\n' */
		c.line++;
		if (ll > TRACE_MAX_LINE) {
			st = perr(&c, "line longer than %d bytes", TRACE_MAX_LINE);
			goto fail;
		}
		memcpy(buf, text + start, ll);
		buf[ll] = '\0';
		if (ll && buf[ll - 1] == '\r')
			buf[--ll] = '\0';
		if (memchr(buf, '\0', ll)) {
			st = perr(&c, "NUL byte in the line (not a text file?)");
			goto fail;
		}
		char *hash = strchr(buf, '#');
		if (hash)
			*hash = '\0';
		char *f[TRACE_MAX_FIELDS];
		size_t nf = 0;
		char *save = NULL;
		for (char *tok = strtok_r(buf, " \t", &save); tok;
		     tok = strtok_r(NULL, " \t", &save)) {
			if (nf == TRACE_MAX_FIELDS) {
				st = perr(&c, "too many fields (a job line has 10)");
				goto fail;
			}
			f[nf++] = tok;
		}
		if (nf == 0)
			continue;
		if (!have_header) {
			if (strcmp(f[0], "crux-sim-trace") != 0) {
				st = perr(&c,
					  "the first line must be 'crux-sim-trace 1' (found "
					  "'%s'): is this a crux-sim trace?",
					  f[0]);
				goto fail;
			}
			if (nf != 2 || strcmp(f[1], "1") != 0) {
				st = perr(&c, "unsupported trace version (this crux-sim reads "
					      "'crux-sim-trace 1')");
				goto fail;
			}
			have_header = 1;
			continue;
		}
		if (strcmp(f[0], "job") != 0) {
			st = perr(&c, "unknown record '%s' (expected 'job')", f[0]);
			goto fail;
		}
		struct crux_sim_trace_job job;
		if ((st = parse_job(&c, f, nf, &job)) != CRUX_OK)
			goto fail;
		if ((st = trace_push(t, &job)) != CRUX_OK) {
			free(job.hosts);
			if (st == CRUX_ERR_RANGE)
				perr(&c, "more than %u jobs", CRUX_SIM_TRACE_MAX_JOBS);
			goto fail;
		}
	}
	if (!have_header) {
		c.line = c.line ? c.line : 1;
		st = perr(&c, "empty trace: the first line must be 'crux-sim-trace 1'");
		goto fail;
	}
	if ((st = check_unique_ids(t, c.name, err, errlen)) != CRUX_OK)
		goto fail;
	free(buf);
	*out = t;
	return CRUX_OK;
fail:
	free(buf);
	crux_sim_trace_free(t);
	return st;
}

crux_status_t crux_sim_trace_load(const char *path, struct crux_sim_trace **out, char *err,
				  size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	size_t len = 0, cap = 0;
	crux_status_t st;

	if (!f) {
		if (err && errlen)
			snprintf(err, errlen, "%s: cannot open the trace: %s", path,
				 strerror(errno));
		return errno == ENOENT ? CRUX_ERR_NOENT : CRUX_ERR_IO;
	}
	for (;;) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 1 << 16;
			char *n = realloc(text, ncap);
			if (!n) {
				st = CRUX_ERR_NOMEM;
				goto out;
			}
			text = n;
			cap = ncap;
		}
		size_t got = fread(text + len, 1, cap - len, f);
		len += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		if (err && errlen)
			snprintf(err, errlen, "%s: read error", path);
		st = CRUX_ERR_IO;
		goto out;
	}
	st = crux_sim_trace_parse(text, len, path, out, err, errlen);
out:
	free(text);
	fclose(f);
	return st;
}

crux_status_t crux_sim_trace_write(FILE *f, const struct crux_sim_trace *t)
{
	fprintf(f, "crux-sim-trace 1\n"
		   "# job ID ARRIVAL_S MODEL GPUS ITERATIONS COMPUTE_S COMM_BYTES OVERLAP HOSTS\n");
	for (size_t i = 0; i < t->n_jobs; i++) {
		const struct crux_sim_trace_job *j = &t->jobs[i];
		fprintf(f, "job %u %.17g %s %u %llu %.17g %.17g %.17g ", j->id, j->arrival_s,
			j->model, j->gpus, (unsigned long long)j->iterations, j->compute_s,
			j->comm_bytes, j->overlap);
		if (!j->n_hosts)
			fputc('-', f);
		for (uint32_t h = 0; h < j->n_hosts; h++)
			fprintf(f, h ? ",%u" : "%u", j->hosts[h]);
		fputc('\n', f);
	}
	return ferror(f) ? CRUX_ERR_IO : CRUX_OK;
}
