/* SPDX-License-Identifier: Apache-2.0 */
/* The overrides file and the route syntax shared by cruxctl and cruxd. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crux/env.h"
#include "crux/log.h"
#include "crux/overrides.h"
#include "crux/shm.h"

#define ERR(...)                                                                                   \
	do {                                                                                       \
		if (err && errlen)                                                                 \
			snprintf(err, errlen, __VA_ARGS__);                                        \
	} while (0)

static crux_status_t parse_u(const char *s, size_t n, unsigned long max, unsigned long *out)
{
	unsigned long v = 0;

	if (n == 0 || n > 10)
		return CRUX_ERR_INVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return CRUX_ERR_INVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > max)
		return CRUX_ERR_RANGE;
	*out = v;
	return CRUX_OK;
}

crux_status_t cruxd_route_parse(const char *text, struct cruxd_override_route *out, char *err,
				size_t errlen)
{
	struct cruxd_override_route r;
	char peer[CRUX_ADDR_STRLEN];
	const char *eq, *p, *colon;
	unsigned long v;
	size_t n;

	memset(&r, 0, sizeof(r));
	eq = text ? strchr(text, '=') : NULL;
	if (!eq || eq == text || (size_t)(eq - text) >= sizeof(peer)) {
		ERR("route '%s' is not valid: expected PEER=PATH[:PORT,PORT...], e.g. "
		    "198.18.1.2=1:40001,40002",
		    text ? text : "");
		return CRUX_ERR_INVAL;
	}
	memcpy(peer, text, (size_t)(eq - text));
	peer[eq - text] = '\0';
	if (crux_addr_parse(peer, &r.peer) != CRUX_OK) {
		ERR("route '%s': '%s' is not an IPv4 or IPv6 address", text, peer);
		return CRUX_ERR_INVAL;
	}
	p = eq + 1;
	colon = strchr(p, ':');
	n = colon ? (size_t)(colon - p) : strlen(p);
	if (parse_u(p, n, CRUX_PATH_NONE - 1, &v) != CRUX_OK) {
		ERR("route '%s': path id '%.*s' is not an integer in [0, %u]", text, (int)n, p,
		    CRUX_PATH_NONE - 1);
		return CRUX_ERR_INVAL;
	}
	r.path_id = (uint16_t)v;
	if (colon) {
		p = colon + 1;
		for (;;) {
			const char *comma = strchr(p, ',');
			n = comma ? (size_t)(comma - p) : strlen(p);
			if (r.nports >= CRUX_ROUTE_MAX_PORTS) {
				ERR("route '%s': more than %d ports", text, CRUX_ROUTE_MAX_PORTS);
				return CRUX_ERR_INVAL;
			}
			if (parse_u(p, n, 65535, &v) != CRUX_OK || v == 0) {
				ERR("route '%s': port '%.*s' is not an integer in [1, 65535]", text,
				    (int)n, p);
				return CRUX_ERR_INVAL;
			}
			r.ports[r.nports++] = (uint16_t)v;
			if (!comma)
				break;
			p = comma + 1;
		}
	}
	*out = r;
	return CRUX_OK;
}

void cruxd_route_format(const struct cruxd_override_route *r, char *buf, size_t len)
{
	char a[CRUX_ADDR_STRLEN];
	size_t off;
	int w;

	if (!len)
		return;
	crux_addr_format(&r->peer, a, sizeof(a));
	w = snprintf(buf, len, "%s=%u", a, r->path_id);
	off = w < 0 ? 0 : (size_t)w;
	for (uint8_t i = 0; i < r->nports && i < CRUX_ROUTE_MAX_PORTS && off < len; i++) {
		w = snprintf(buf + off, len - off, "%c%u", i ? ',' : ':', r->ports[i]);
		if (w < 0)
			break;
		off += (size_t)w;
	}
}

static bool id_plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("._:@/+-", c) != NULL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static crux_status_t parse_key(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n < 3 || n > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return CRUX_ERR_INVAL;
	for (size_t i = 2; i < n; i++) {
		int h = hexval(s[i]);
		if (h < 0)
			return CRUX_ERR_INVAL;
		v = (v << 4) | (uint64_t)h;
	}
	if (v == 0)
		return CRUX_ERR_INVAL;
	*out = v;
	return CRUX_OK;
}

crux_status_t cruxd_job_ref_parse(const char *text, uint64_t *key, char *id, size_t idlen,
				  char *err, size_t errlen)
{
	uint64_t k;
	size_t n = text ? strlen(text) : 0;

	if (n == 0) {
		ERR("--job needs a job id (as shown by cruxctl status) or a key 0x<hex>");
		return CRUX_ERR_INVAL;
	}
	if (n >= CRUX_JOB_ID_LEN) {
		ERR("job id '%s' is longer than %d characters", text, CRUX_JOB_ID_LEN - 1);
		return CRUX_ERR_INVAL;
	}
	if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
		if (parse_key(text, n, &k) != CRUX_OK) {
			ERR("job key '%s' is not valid: expected 0x followed by 1 to 16 hex digits "
			    "(not zero)",
			    text);
			return CRUX_ERR_INVAL;
		}
		*key = k;
		if (id && idlen)
			id[0] = '\0';
		return CRUX_OK;
	}
	*key = crux_job_key_of(text);
	if (id && idlen)
		snprintf(id, idlen, "%s", text);
	return CRUX_OK;
}

int cruxd_overrides_find(const struct cruxd_overrides *o, uint64_t job_key)
{
	for (uint32_t i = 0; i < o->n; i++)
		if (o->o[i].job_key == job_key)
			return (int)i;
	return -1;
}

crux_status_t cruxd_overrides_put(struct cruxd_overrides *o, const struct cruxd_override *x)
{
	int i = cruxd_overrides_find(o, x->job_key);

	if (i >= 0) {
		o->o[i] = *x;
		return CRUX_OK;
	}
	if (o->n >= CRUXD_MAX_OVERRIDES)
		return CRUX_ERR_RANGE;
	o->o[o->n++] = *x;
	return CRUX_OK;
}

bool cruxd_overrides_remove(struct cruxd_overrides *o, uint64_t job_key)
{
	int i = cruxd_overrides_find(o, job_key);

	if (i < 0)
		return false;
	memmove(&o->o[i], &o->o[i + 1], (o->n - (uint32_t)i - 1) * sizeof(o->o[0]));
	o->n--;
	return true;
}

/* Split the next whitespace-separated token of [*p, end). */
static bool next_tok(const char **p, const char *end, const char **tok, size_t *n)
{
	const char *s = *p;

	while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
		s++;
	if (s >= end) {
		*p = s;
		return false;
	}
	*tok = s;
	while (s < end && *s != ' ' && *s != '\t' && *s != '\r')
		s++;
	*n = (size_t)(s - *tok);
	*p = s;
	return true;
}

static bool tok_is(const char *t, size_t n, const char *word)
{
	return strlen(word) == n && memcmp(t, word, n) == 0;
}

static crux_status_t decode_id(const char *t, size_t n, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c == '%') {
			int h, l;
			if (i + 2 >= n)
				return CRUX_ERR_INVAL;
			h = hexval(t[i + 1]);
			l = hexval(t[i + 2]);
			if (h < 0 || l < 0 || (h == 0 && l == 0))
				return CRUX_ERR_INVAL;
			c = (unsigned char)(h * 16 + l);
			i += 2;
		} else if (!id_plain(c)) {
			return CRUX_ERR_INVAL;
		}
		if (o + 1 >= outlen)
			return CRUX_ERR_RANGE;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return CRUX_OK;
}

static crux_status_t parse_job_line(const char **p, const char *end, struct cruxd_override *x,
				    unsigned line, char *err, size_t errlen)
{
	const char *t;
	size_t n;
	bool have_level = false, have_id = false;
	unsigned long v;

	memset(x, 0, sizeof(*x));
	if (!next_tok(p, end, &t, &n) || parse_key(t, n, &x->job_key) != CRUX_OK) {
		ERR("overrides line %u: 'job' must be followed by a key 0x<hex>", line);
		return CRUX_ERR_INVAL;
	}
	while (next_tok(p, end, &t, &n)) {
		const char *a;
		size_t an;

		if (!next_tok(p, end, &a, &an)) {
			ERR("overrides line %u: '%.*s' needs a value", line, (int)n, t);
			return CRUX_ERR_INVAL;
		}
		if (tok_is(t, n, "level")) {
			if (have_level || parse_u(a, an, CRUX_MAX_LEVELS - 1, &v) != CRUX_OK) {
				ERR("overrides line %u: level '%.*s' is not an integer in [0, %d] "
				    "(or given twice)",
				    line, (int)an, a, CRUX_MAX_LEVELS - 1);
				return CRUX_ERR_INVAL;
			}
			x->level = (uint8_t)v;
			have_level = true;
		} else if (tok_is(t, n, "id")) {
			if (have_id || decode_id(a, an, x->job_id, sizeof(x->job_id)) != CRUX_OK) {
				ERR("overrides line %u: id '%.*s' is not valid (printable, %%XX "
				    "escapes, < %d bytes, once)",
				    line, (int)an, a, CRUX_JOB_ID_LEN);
				return CRUX_ERR_INVAL;
			}
			have_id = true;
		} else if (tok_is(t, n, "route")) {
			char rbuf[160];
			char rerr[200];

			if (x->nroutes >= CRUXD_OVR_MAX_ROUTES) {
				ERR("overrides line %u: more than %d routes", line,
				    CRUXD_OVR_MAX_ROUTES);
				return CRUX_ERR_INVAL;
			}
			if (an >= sizeof(rbuf)) {
				ERR("overrides line %u: route too long", line);
				return CRUX_ERR_INVAL;
			}
			memcpy(rbuf, a, an);
			rbuf[an] = '\0';
			if (cruxd_route_parse(rbuf, &x->routes[x->nroutes], rerr, sizeof(rerr)) !=
			    CRUX_OK) {
				ERR("overrides line %u: %s", line, rerr);
				return CRUX_ERR_INVAL;
			}
			for (uint8_t i = 0; i < x->nroutes; i++)
				if (crux_addr_equal(&x->routes[i].peer,
						    &x->routes[x->nroutes].peer)) {
					ERR("overrides line %u: two routes for peer %s", line,
					    rbuf);
					return CRUX_ERR_INVAL;
				}
			x->nroutes++;
		} else {
			ERR("overrides line %u: unknown field '%.*s' (expected level, id or route)",
			    line, (int)n, t);
			return CRUX_ERR_INVAL;
		}
	}
	if (!have_level) {
		ERR("overrides line %u: job without a level", line);
		return CRUX_ERR_INVAL;
	}
	return CRUX_OK;
}

crux_status_t cruxd_overrides_parse(const char *buf, size_t len, struct cruxd_overrides *out,
				    char *err, size_t errlen)
{
	struct cruxd_overrides *o;
	const char *p = buf, *end = buf + len;
	unsigned line = 0;
	bool have_seq = false;
	crux_status_t st = CRUX_OK;

	if (len > CRUXD_OVERRIDES_MAX_BYTES) {
		ERR("overrides file larger than %u bytes", CRUXD_OVERRIDES_MAX_BYTES);
		return CRUX_ERR_RANGE;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return CRUX_ERR_NOMEM;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *lend = eol ? eol : end;
		const char *hash = memchr(p, '#', (size_t)(lend - p));
		const char *q = p, *t;
		size_t n;

		line++;
		if (memchr(p, '\0', (size_t)(lend - p))) {
			ERR("overrides line %u: NUL byte", line);
			st = CRUX_ERR_INVAL;
			goto out;
		}
		if (hash)
			lend = hash;
		if (next_tok(&q, lend, &t, &n)) {
			if (tok_is(t, n, "seq")) {
				const char *a;
				size_t an;
				uint64_t v = 0;
				if (have_seq || !next_tok(&q, lend, &a, &an) || an > 19 ||
				    next_tok(&q, lend, &t, &n)) {
					ERR("overrides line %u: expected 'seq <N>' once", line);
					st = CRUX_ERR_INVAL;
					goto out;
				}
				for (size_t i = 0; i < an; i++) {
					if (a[i] < '0' || a[i] > '9') {
						ERR("overrides line %u: seq is not a number", line);
						st = CRUX_ERR_INVAL;
						goto out;
					}
					v = v * 10 + (uint64_t)(a[i] - '0');
				}
				o->seq = v;
				have_seq = true;
			} else if (tok_is(t, n, "job")) {
				struct cruxd_override x;
				st = parse_job_line(&q, lend, &x, line, err, errlen);
				if (st != CRUX_OK)
					goto out;
				if (cruxd_overrides_find(o, x.job_key) >= 0) {
					ERR("overrides line %u: job 0x%016llx given twice", line,
					    (unsigned long long)x.job_key);
					st = CRUX_ERR_INVAL;
					goto out;
				}
				if (o->n >= CRUXD_MAX_OVERRIDES) {
					ERR("overrides line %u: more than %d jobs", line,
					    CRUXD_MAX_OVERRIDES);
					st = CRUX_ERR_RANGE;
					goto out;
				}
				o->o[o->n++] = x;
			} else {
				ERR("overrides line %u: unknown directive '%.*s' (expected seq or "
				    "job)",
				    line, (int)n, t);
				st = CRUX_ERR_INVAL;
				goto out;
			}
		}
		p = eol ? eol + 1 : end;
	}
	memcpy(out, o, sizeof(*o));
out:
	free(o);
	return st;
}

crux_status_t cruxd_override_format_line(const struct cruxd_override *x, char *buf, size_t len,
					 size_t *outlen)
{
	size_t off = 0;
	int w;

#define PUT(...)                                                                                   \
	do {                                                                                       \
		w = snprintf(buf + off, len - off, __VA_ARGS__);                                   \
		if (w < 0 || (size_t)w >= len - off)                                               \
			return CRUX_ERR_RANGE;                                                     \
		off += (size_t)w;                                                                  \
	} while (0)

	if (!len)
		return CRUX_ERR_RANGE;
	PUT("job 0x%016llx level %u", (unsigned long long)x->job_key, x->level);
	if (x->job_id[0]) {
		PUT(" id ");
		for (size_t k = 0; k < sizeof(x->job_id) && x->job_id[k]; k++) {
			unsigned char c = (unsigned char)x->job_id[k];
			if (id_plain(c))
				PUT("%c", c);
			else
				PUT("%%%02X", c);
		}
	}
	for (uint8_t r = 0; r < x->nroutes && r < CRUXD_OVR_MAX_ROUTES; r++) {
		char rb[160];
		cruxd_route_format(&x->routes[r], rb, sizeof(rb));
		PUT(" route %s", rb);
	}
	*outlen = off;
	return CRUX_OK;
}

crux_status_t cruxd_overrides_format(const struct cruxd_overrides *o, char *buf, size_t len,
				     size_t *outlen)
{
	size_t off = 0, n;
	crux_status_t st;
	int w;

	if (!len)
		return CRUX_ERR_RANGE;
	PUT("# crux overrides: written by cruxctl, applied by cruxd\nseq %llu\n",
	    (unsigned long long)o->seq);
	for (uint32_t i = 0; i < o->n; i++) {
		st = cruxd_override_format_line(&o->o[i], buf + off, len - off, &n);
		if (st != CRUX_OK)
			return st;
		off += n;
		PUT("\n");
	}
#undef PUT
	*outlen = off;
	return CRUX_OK;
}

crux_status_t cruxd_overrides_load(const char *dir, struct cruxd_overrides *out, char *err,
				   size_t errlen)
{
	char path[CRUX_PATH_MAX + 32];
	struct stat sb;
	char *buf = NULL;
	size_t got = 0;
	crux_status_t st;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, CRUXD_OVERRIDES_FILE);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return CRUX_ERR_NOENT;
		ERR("%s: %s%s", path, strerror(errno),
		    errno == ELOOP ? " (a symlink: remove it; overrides must be a regular file)"
				   : "");
		return errno == ELOOP ? CRUX_ERR_PERM : CRUX_ERR_IO;
	}
	if (fstat(fd, &sb) != 0) {
		ERR("%s: %s", path, strerror(errno));
		st = CRUX_ERR_IO;
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		ERR("%s is not a regular file: remove it", path);
		st = CRUX_ERR_PERM;
		goto out;
	}
	if ((sb.st_uid != 0 && sb.st_uid != geteuid()) || (sb.st_mode & 022)) {
		ERR("%s must be owned by root (or this user) and not writable by group or others "
		    "(fix: chmod 644, chown root)",
		    path);
		st = CRUX_ERR_PERM;
		goto out;
	}
	if (sb.st_size > (off_t)CRUXD_OVERRIDES_MAX_BYTES) {
		ERR("%s is larger than %u bytes", path, CRUXD_OVERRIDES_MAX_BYTES);
		st = CRUX_ERR_RANGE;
		goto out;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	st = cruxd_overrides_parse(buf, got, out, err, errlen);
out:
	free(buf);
	close(fd);
	return st;
}

crux_status_t cruxd_overrides_store(const char *dir, const struct cruxd_overrides *o)
{
	char path[CRUX_PATH_MAX + 32], tmp[CRUX_PATH_MAX + 48];
	size_t cap = 4096 + (size_t)o->n * 1024, len = 0, off = 0;
	char *buf = malloc(cap);
	crux_status_t st;
	int fd = -1;

	if (!buf)
		return CRUX_ERR_NOMEM;
	st = cruxd_overrides_format(o, buf, cap, &len);
	if (st != CRUX_OK)
		goto out;
	snprintf(path, sizeof(path), "%s/%s", dir, CRUXD_OVERRIDES_FILE);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d", dir, CRUXD_OVERRIDES_FILE, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		crux_err("cannot create %s: %s", tmp, strerror(errno));
		st = CRUX_ERR_IO;
		goto out;
	}
	if (fchmod(fd, 0644) != 0)
		crux_warn("chmod %s: %s", tmp, strerror(errno));
	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			crux_err("cannot write %s: %s", tmp, strerror(errno));
			st = CRUX_ERR_IO;
			goto out;
		}
		off += (size_t)w;
	}
	close(fd);
	fd = -1;
	if (rename(tmp, path) != 0) {
		crux_err("cannot rename %s to %s: %s", tmp, path, strerror(errno));
		st = CRUX_ERR_IO;
		goto out;
	}
	st = CRUX_OK;
out:
	if (fd >= 0)
		close(fd);
	if (st != CRUX_OK)
		unlink(tmp);
	free(buf);
	return st;
}
