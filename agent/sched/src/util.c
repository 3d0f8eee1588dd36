/* SPDX-License-Identifier: Apache-2.0 */
/* Error formatting, deterministic random numbers, file reading, tokenising. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

void crux_sched_errf(struct crux_sched_err *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

uint64_t crux_sched_mix64(uint64_t x)
{
	/* splitmix64 finaliser: a fixed, portable hash so every agent agrees. */
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

void crux_sched_rng_seed(struct sched_rng *r, uint64_t seed)
{
	r->s = seed;
}

uint64_t crux_sched_rng_next(struct sched_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ULL;
	return crux_sched_mix64(r->s);
}

uint32_t crux_sched_rng_below(struct sched_rng *r, uint32_t n)
{
	return (uint32_t)(((crux_sched_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

uint32_t crux_sched_name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 16777619u;
	}
	return h;
}

crux_status_t crux_sched_read_file_text(const char *path, char **text, size_t *len,
					struct crux_sched_err *err)
{
	FILE *f = NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	crux_status_t st = CRUX_ERR_IO;

	f = fopen(path, "r");
	if (!f) {
		crux_sched_errf(err, "%s: cannot open: %s; check the path", path, strerror(errno));
		return errno == ENOENT ? CRUX_ERR_NOENT : CRUX_ERR_IO;
	}
	for (;;) {
		if (n + 4096 + 1 > cap) {
			size_t nc = cap ? cap * 2 : 65536;
			char *nb = realloc(buf, nc);

			if (!nb) {
				crux_sched_errf(err, "%s: out of memory reading the file", path);
				st = CRUX_ERR_NOMEM;
				goto out;
			}
			buf = nb;
			cap = nc;
		}
		size_t r = fread(buf + n, 1, cap - n - 1, f);

		n += r;
		if (r == 0) {
			if (ferror(f)) {
				crux_sched_errf(err, "%s: read error", path);
				goto out;
			}
			break;
		}
	}
	buf[n] = '\0';
	*text = buf;
	*len = n;
	buf = NULL;
	st = CRUX_OK;
out:
	free(buf);
	fclose(f);
	return st;
}

int crux_sched_split_tokens(char *line, char **tok, int max)
{
	int n = 0;
	char *p = line;

	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r')
			p++;
		if (!*p || *p == '#')
			break;
		if (n == max)
			return -1;
		tok[n++] = p;
		while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '#')
			p++;
		if (*p == '#') {
			*p = '\0';
			break;
		}
		if (*p)
			*p++ = '\0';
	}
	return n;
}
