/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The schedule record the leader writes and every agent applies:
 * {"v":1,"rev":N,"term":N,"lease":N,"leader":"h1","levels":K,"jobs":[{"key":"<16 hex>","level":L,
 *  "id":"job-a","state":"profiling"|"overridden",
 *  "routes":[["src","dst",path_id,[port,...]],...]}]}
 *  "since":unix_ms,"base":[W,bytes,iter],
 * "lease", "leader" (the leader key's lease and holder: hosts fence on
 * them), "id", "state", "since" and "base" are optional (absent: no id, scheduled,
 * unknown); src "-": every host. "key" is left out when it is
 * crux_job_key_of(id): 8 bytes per job that do not compress, sent to every
 * host's watch (225 jobs pack into 2.6 KB with their keys, 0.9 KB without).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "crux/jobid.h"
#include "cv_internal.h"

void crux_cv_schedule_free(struct crux_cv_schedule *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->njobs; i++)
		free(s->jobs[i].routes);
	free(s->jobs);
	memset(s, 0, sizeof(*s));
}

static json_object *route_json(const struct crux_cv_route *r)
{
	json_object *o = json_object_new_array(), *ports = json_object_new_array();
	if (!o || !ports) {
		json_object_put(o);
		json_object_put(ports);
		return NULL;
	}
	if (crux_cv_add_addr(o, &r->src) != CRUX_OK || crux_cv_add_addr(o, &r->dst) != CRUX_OK) {
		json_object_put(o);
		json_object_put(ports);
		return NULL;
	}
	json_object_array_add(o, json_object_new_int(r->path_id));
	json_object_array_add(o, ports);
	for (uint8_t i = 0; i < r->nports && i < CRUX_ROUTE_MAX_PORTS; i++)
		json_object_array_add(ports, json_object_new_int(r->ports[i]));
	return o;
}

crux_status_t crux_cv_schedule_encode(const struct crux_cv_schedule *s, char **out, size_t *len)
{
	json_object *o = json_object_new_object(), *jobs = json_object_new_array();
	crux_status_t st = CRUX_ERR_NOMEM;
	if (!o || !jobs) {
		json_object_put(jobs);
		goto out;
	}
	json_object_object_add(o, "v", json_object_new_int(CRUX_CV_VERSION));
	json_object_object_add(o, "rev", json_object_new_int64(s->input_revision));
	json_object_object_add(o, "term", json_object_new_int64(s->term));
	if (s->lease)
		json_object_object_add(o, "lease", json_object_new_int64(s->lease));
	if (s->leader[0])
		json_object_object_add(o, "leader", json_object_new_string(s->leader));
	json_object_object_add(o, "levels", json_object_new_int64(s->levels));
	json_object_object_add(o, "jobs", jobs);
	for (uint32_t i = 0; i < s->njobs; i++) {
		const struct crux_cv_decision *d = &s->jobs[i];
		json_object *j = json_object_new_object(), *routes = json_object_new_array();
		char key[17];
		if (!j || !routes) {
			json_object_put(j);
			json_object_put(routes);
			goto out;
		}
		json_object_array_add(jobs, j);
		snprintf(key, sizeof(key), "%016" PRIx64, d->key);
		if (!d->id[0] || crux_job_key_of(d->id) != d->key)
			json_object_object_add(j, "key", json_object_new_string(key));
		json_object_object_add(j, "level", json_object_new_int(d->level));
		if (d->id[0])
			json_object_object_add(j, "id", json_object_new_string(d->id));
		if (d->state == CRUX_JOB_PROFILING || d->state == CRUX_JOB_OVERRIDDEN)
			json_object_object_add(j, "state",
					       json_object_new_string(d->state == CRUX_JOB_PROFILING
									  ? "profiling"
									  : "overridden"));
		if (d->since_ms)
			json_object_object_add(j, "since",
					       json_object_new_int64((int64_t)d->since_ms));
		if (d->has_base) {
			json_object *b = json_object_new_array();
			if (!b)
				goto out;
			json_object_object_add(j, "base", b);
			for (int k = 0; k < 3; k++)
				json_object_array_add(b, json_object_new_double(d->base[k]));
		}
		json_object_object_add(j, "routes", routes);
		for (uint32_t r = 0; r < d->nroutes; r++) {
			json_object *ro = route_json(&d->routes[r]);
			if (!ro)
				goto out;
			json_object_array_add(routes, ro);
		}
	}
	st = crux_cv_finish(o, out, len);
out:
	json_object_put(o);
	return st;
}

static crux_status_t route_from_json(json_object *o, struct crux_cv_route *r)
{
	if (!json_object_is_type(o, json_type_array) || json_object_array_length(o) != 4 ||
	    crux_cv_addr(json_object_array_get_idx(o, 0), &r->src) ||
	    crux_cv_addr(json_object_array_get_idx(o, 1), &r->dst))
		return CRUX_ERR_CORRUPT;
	json_object *pid = json_object_array_get_idx(o, 2),
		    *ports = json_object_array_get_idx(o, 3);
	if (!json_object_is_type(pid, json_type_int) ||
	    !json_object_is_type(ports, json_type_array) ||
	    json_object_array_length(ports) > CRUX_ROUTE_MAX_PORTS)
		return CRUX_ERR_CORRUPT;
	int64_t p = json_object_get_int64(pid);
	if (p < 0 || p > UINT16_MAX)
		return CRUX_ERR_CORRUPT;
	r->path_id = (uint16_t)p;
	r->nports = (uint8_t)json_object_array_length(ports);
	for (uint8_t i = 0; i < r->nports; i++) {
		json_object *po = json_object_array_get_idx(ports, i);
		if (!json_object_is_type(po, json_type_int))
			return CRUX_ERR_CORRUPT;
		int64_t v = json_object_get_int64(po);
		if (v < 1 || v > UINT16_MAX) /* a source port, never 0 */
			return CRUX_ERR_CORRUPT;
		r->ports[i] = (uint16_t)v;
	}
	return CRUX_OK;
}

static crux_status_t decision_from_json(json_object *o, uint32_t levels, uint32_t *nroutes,
					struct crux_cv_decision *d)
{
	json_object *routes, *st;
	uint64_t v;
	if (!json_object_is_type(o, json_type_object) || crux_cv_uint(o, "level", levels - 1, &v) ||
	    crux_cv_get(o, "routes", json_type_array, &routes))
		return CRUX_ERR_CORRUPT;
	d->level = (uint8_t)v;
	d->state = CRUX_JOB_SCHEDULED;
	if (json_object_object_get_ex(o, "id", NULL) && crux_cv_text(o, "id", d->id, sizeof(d->id)))
		return CRUX_ERR_CORRUPT;
	/* No key: the id's (a job without either is no job). */
	if (json_object_object_get_ex(o, "key", NULL)
		? crux_cv_key(o, &d->key) != CRUX_OK
		: !d->id[0] || !(d->key = crux_job_key_of(d->id)))
		return CRUX_ERR_CORRUPT;
	if (json_object_object_get_ex(o, "state", &st)) {
		const char *t =
		    json_object_is_type(st, json_type_string) ? json_object_get_string(st) : "";
		if (!strcmp(t, "profiling"))
			d->state = CRUX_JOB_PROFILING;
		else if (!strcmp(t, "overridden"))
			d->state = CRUX_JOB_OVERRIDDEN;
		else
			return CRUX_ERR_CORRUPT;
	}
	if (json_object_object_get_ex(o, "since", NULL)) {
		if (crux_cv_uint(o, "since", INT64_MAX, &v))
			return CRUX_ERR_CORRUPT;
		d->since_ms = v;
	}
	if (json_object_object_get_ex(o, "base", &st)) {
		if (!json_object_is_type(st, json_type_array) || json_object_array_length(st) != 3)
			return CRUX_ERR_CORRUPT;
		for (size_t k = 0; k < 3; k++)
			if (crux_cv_num(json_object_array_get_idx(st, k), &d->base[k]))
				return CRUX_ERR_CORRUPT;
		d->has_base = true;
	}
	size_t n = json_object_array_length(routes);
	if (n > CRUX_CV_MAX_ROUTES - *nroutes)
		return CRUX_ERR_CORRUPT;
	*nroutes += (uint32_t)n;
	if (n && !(d->routes = calloc(n, sizeof(*d->routes))))
		return CRUX_ERR_NOMEM;
	for (size_t i = 0; i < n; i++) {
		if (route_from_json(json_object_array_get_idx(routes, i), &d->routes[i]))
			return CRUX_ERR_CORRUPT;
		d->nroutes = (uint32_t)i + 1;
	}
	return CRUX_OK;
}

crux_status_t crux_cv_schedule_decode(const char *text, size_t len, struct crux_cv_schedule *out)
{
	json_object *o, *jobs;
	struct crux_cv_schedule s = {0};
	uint64_t v, rev, term, levels;
	if (len > CRUX_CV_MAX_TEXT)
		return CRUX_ERR_CORRUPT;
	crux_status_t st = crux_etcd_json_parse(text, len, &o);
	if (st != CRUX_OK)
		return st;
	st = CRUX_ERR_CORRUPT;
	if (crux_cv_uint(o, "v", UINT32_MAX, &v) || v != CRUX_CV_VERSION) {
		st = CRUX_ERR_VERSION;
		goto out;
	}
	if (crux_cv_uint(o, "rev", INT64_MAX, &rev) || crux_cv_uint(o, "term", INT64_MAX, &term) ||
	    crux_cv_uint(o, "levels", CRUX_MAX_LEVELS, &levels) || levels < 1 ||
	    crux_cv_get(o, "jobs", json_type_array, &jobs) ||
	    json_object_array_length(jobs) > CRUX_CV_MAX_JOBS)
		goto out;
	s.input_revision = (int64_t)rev;
	s.term = (int64_t)term;
	s.levels = (uint32_t)levels;
	if (json_object_object_get_ex(o, "lease", NULL)) {
		uint64_t lease;
		if (crux_cv_uint(o, "lease", INT64_MAX, &lease))
			goto out;
		s.lease = (int64_t)lease;
	}
	if (json_object_object_get_ex(o, "leader", NULL) &&
	    crux_cv_text(o, "leader", s.leader, sizeof(s.leader)) != CRUX_OK)
		goto out;
	size_t n = json_object_array_length(jobs);
	if (n && !(s.jobs = calloc(n, sizeof(*s.jobs)))) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	uint32_t nroutes = 0;
	for (size_t i = 0; i < n; i++) {
		s.njobs = (uint32_t)i + 1;
		if ((st = decision_from_json(json_object_array_get_idx(jobs, i), s.levels, &nroutes,
					     &s.jobs[i])) != CRUX_OK)
			goto out;
		for (size_t k = 0; k < i; k++)
			if (s.jobs[k].key == s.jobs[i].key) {
				st = CRUX_ERR_CORRUPT;
				goto out;
			}
	}
	st = CRUX_OK;
out:
	json_object_put(o);
	if (st != CRUX_OK) {
		crux_cv_schedule_free(&s);
		return st;
	}
	*out = s;
	return CRUX_OK;
}

#define PACK_TAG 'z'

crux_status_t crux_cv_schedule_pack(const struct crux_cv_schedule *s, char **out, size_t *len)
{
	char *txt;
	size_t tlen;
	crux_status_t st = crux_cv_schedule_encode(s, &txt, &tlen);
	if (st != CRUX_OK)
		return st;
	uLongf zlen = compressBound((uLong)tlen);
	char *z = malloc(zlen + 2);
	if (!z) {
		free(txt);
		return CRUX_ERR_NOMEM;
	}
	z[0] = PACK_TAG;
	int rc =
	    compress2((Bytef *)z + 1, &zlen, (const Bytef *)txt, (uLong)tlen, Z_BEST_COMPRESSION);
	free(txt);
	if (rc != Z_OK) {
		free(z);
		return CRUX_ERR_NOMEM;
	}
	z[zlen + 1] = '\0';
	*out = z;
	*len = zlen + 1;
	return CRUX_OK;
}

/* Inflate one whole zlib stream into at most CRUX_CV_MAX_TEXT bytes. */
static crux_status_t inflate_all(const unsigned char *in, size_t inlen, char **out, size_t *outlen)
{
	z_stream zs = {0};
	size_t cap = inlen * 8 + 1024;
	if (cap > CRUX_CV_MAX_TEXT + 1)
		cap = CRUX_CV_MAX_TEXT + 1;
	char *buf = malloc(cap);
	if (!buf || inlen > UINT_MAX || inflateInit(&zs) != Z_OK) {
		free(buf);
		return CRUX_ERR_NOMEM;
	}
	crux_status_t st = CRUX_ERR_CORRUPT;
	zs.next_in = (Bytef *)(uintptr_t)in;
	zs.avail_in = (uInt)inlen;
	for (;;) {
		zs.next_out = (Bytef *)buf + zs.total_out;
		zs.avail_out = (uInt)(cap - zs.total_out);
		int rc = inflate(&zs, Z_NO_FLUSH);
		if (rc == Z_STREAM_END) {
			/* The whole value is the stream, and the text fits the limit. */
			if (zs.avail_in == 0 && zs.total_out <= CRUX_CV_MAX_TEXT)
				st = CRUX_OK;
			break;
		}
		if (rc != Z_OK && rc != Z_BUF_ERROR)
			break; /* bad data or checksum */
		if (zs.avail_out > 0)
			break; /* out of input before the stream's end */
		if (cap > CRUX_CV_MAX_TEXT)
			break; /* more than the limit */
		size_t ncap = cap * 2 > CRUX_CV_MAX_TEXT + 1 ? CRUX_CV_MAX_TEXT + 1 : cap * 2;
		char *nb = realloc(buf, ncap);
		if (!nb) {
			st = CRUX_ERR_NOMEM;
			break;
		}
		buf = nb;
		cap = ncap;
	}
	size_t n = zs.total_out;
	inflateEnd(&zs);
	if (st != CRUX_OK) {
		free(buf);
		return st;
	}
	*out = buf;
	*outlen = n;
	return CRUX_OK;
}

crux_status_t crux_cv_schedule_unpack(const void *value, size_t len, struct crux_cv_schedule *out)
{
	const unsigned char *v = value;
	if (len == 0 || !v)
		return CRUX_ERR_CORRUPT;
	if (v[0] != PACK_TAG)
		return crux_cv_schedule_decode(value, len, out);
	char *txt;
	size_t tlen;
	crux_status_t st = inflate_all(v + 1, len - 1, &txt, &tlen);
	if (st != CRUX_OK)
		return st;
	st = crux_cv_schedule_decode(txt, tlen, out);
	free(txt);
	return st;
}
