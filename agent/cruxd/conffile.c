/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conffile.h"

void cruxd_conffile_free(struct cruxd_conffile *c)
{
	for (int i = 0; i < c->n; i++) {
		free(c->name[i]);
		free(c->value[i]);
	}
	c->n = 0;
}

const char *cruxd_conffile_get(const struct cruxd_conffile *c, const char *name)
{
	for (int i = c->n - 1; i >= 0; i--)
		if (!strcmp(c->name[i], name))
			return c->value[i];
	return NULL;
}

static const char *skip_blank(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* One non-comment line [s, e): name and value into c. */
static crux_status_t parse_line(const char *s, const char *e, int lineno, struct cruxd_conffile *c,
				char *err, size_t errlen)
{
	const char *eq, *v, *ve;
	size_t nl;

	if (e - s > 7 && !memcmp(s, "export", 6) && (s[6] == ' ' || s[6] == '\t'))
		s = skip_blank(s + 6, e);
	eq = memchr(s, '=', (size_t)(e - s));
	if (!eq) {
		snprintf(err, errlen, "line %d: expected CRUX_NAME=value", lineno);
		return CRUX_ERR_INVAL;
	}
	nl = (size_t)(eq - s);
	if (nl < 6 || nl > 64 || memcmp(s, "CRUX_", 5)) {
		snprintf(err, errlen, "line %d: only CRUX_ variables belong here ('%.*s')", lineno,
			 (int)(nl > 64 ? 64 : nl), s);
		return CRUX_ERR_INVAL;
	}
	for (size_t i = 5; i < nl; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '_')) {
			snprintf(err, errlen, "line %d: bad variable name '%.*s'", lineno, (int)nl,
				 s);
			return CRUX_ERR_INVAL;
		}
	v = eq + 1;
	ve = e;
	while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
		ve--;
	if (ve > v && (*v == '"' || *v == '\'')) {
		if (ve - v < 2 || ve[-1] != *v || memchr(v + 1, *v, (size_t)(ve - v - 2))) {
			snprintf(err, errlen, "line %d: unmatched or inner %c quote in the value",
				 lineno, *v);
			return CRUX_ERR_INVAL;
		}
		v++;
		ve--;
	}
	for (const char *p = v; p < ve; p++)
		if ((unsigned char)*p < 0x20 && *p != '\t') {
			snprintf(err, errlen, "line %d: control character in the value", lineno);
			return CRUX_ERR_INVAL;
		}
	if (c->n == CRUXD_CONF_MAX) {
		snprintf(err, errlen, "line %d: more than %d settings", lineno, CRUXD_CONF_MAX);
		return CRUX_ERR_INVAL;
	}
	c->name[c->n] = strndup(s, nl);
	c->value[c->n] = strndup(v, (size_t)(ve - v));
	if (!c->name[c->n] || !c->value[c->n]) {
		free(c->name[c->n]);
		free(c->value[c->n]);
		snprintf(err, errlen, "out of memory");
		return CRUX_ERR_NOMEM;
	}
	c->n++;
	return CRUX_OK;
}

crux_status_t cruxd_conffile_parse(const char *text, size_t len, struct cruxd_conffile *out,
				   char *err, size_t errlen)
{
	struct cruxd_conffile c = {0};
	const char *p = text, *end = text + len;
	int lineno = 0;
	crux_status_t st = CRUX_OK;

	if (len > CRUXD_CONF_MAX_BYTES) {
		snprintf(err, errlen, "more than %d bytes", CRUXD_CONF_MAX_BYTES);
		return CRUX_ERR_INVAL;
	}
	if (memchr(text, 0, len)) {
		snprintf(err, errlen, "a NUL byte: not a text file");
		return CRUX_ERR_INVAL;
	}
	while (p < end && st == CRUX_OK) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end, *s = skip_blank(p, e);
		lineno++;
		if (e > s && e[-1] == '\r')
			e--;
		if (s < e && *s != '#')
			st = parse_line(s, e, lineno, &c, err, errlen);
		p = nl ? nl + 1 : end;
	}
	if (st != CRUX_OK) {
		cruxd_conffile_free(&c);
		return st;
	}
	*out = c;
	return CRUX_OK;
}

crux_status_t cruxd_conffile_load(const char *path, struct cruxd_conffile *out, char *err,
				  size_t errlen)
{
	char *buf = NULL, why[256];
	struct stat sb;
	ssize_t got;
	crux_status_t st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return errno == ENOENT ? CRUX_ERR_NOENT : CRUX_ERR_IO;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > CRUXD_CONF_MAX_BYTES) {
		snprintf(err, errlen, "%s: not a regular file of at most %d bytes", path,
			 CRUXD_CONF_MAX_BYTES);
		close(fd);
		return CRUX_ERR_INVAL;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		close(fd);
		snprintf(err, errlen, "%s: out of memory", path);
		return CRUX_ERR_NOMEM;
	}
	got = read(fd, buf, (size_t)sb.st_size + 1);
	close(fd);
	if (got < 0 || got > sb.st_size) {
		snprintf(err, errlen, "%s: %s", path,
			 got < 0 ? strerror(errno) : "changed while read");
		free(buf);
		return CRUX_ERR_IO;
	}
	st = cruxd_conffile_parse(buf, (size_t)got, out, why, sizeof(why));
	free(buf);
	if (st != CRUX_OK)
		snprintf(err, errlen, "%s: %s", path, why);
	return st;
}
