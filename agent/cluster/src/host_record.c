/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host record: a job view (crux/job_view.h) as JSON, encoded and strictly
 * decoded (crux_jv_merge adds records up).
 *
 * {"v":1,"host":"h1","addr":"10.0.0.1","jobs":[{"id":"job-a","key":"<16 hex>",
 *  "ranks":8,"compute":8,"clamped":false,"sum":[iter,compute,comm,overlap,stall],
 *  "hosts":["10.0.0.1",...],"flows":[["10.0.0.1","10.0.0.2",bytes],...]}]}
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cv_internal.h"

crux_status_t crux_cv_add_addr(json_object *arr, const struct crux_addr *a)
{
	char s[CRUX_ADDR_STRLEN];
	crux_addr_format(a, s, sizeof(s));
	json_object *o = json_object_new_string(s);
	if (!o || json_object_array_add(arr, o) != 0) {
		json_object_put(o);
		return CRUX_ERR_NOMEM;
	}
	return CRUX_OK;
}

crux_status_t crux_cv_finish(json_object *o, char **out, size_t *len)
{
	size_t n = 0;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	if (!s)
		return CRUX_ERR_NOMEM;
	if (n > CRUX_CV_MAX_TEXT)
		return CRUX_ERR_RANGE;
	char *d = malloc(n + 1);
	if (!d)
		return CRUX_ERR_NOMEM;
	memcpy(d, s, n + 1);
	*out = d;
	*len = n;
	return CRUX_OK;
}

static json_object *job_json(const struct crux_jv_job *j)
{
	json_object *o = json_object_new_object(), *sum = json_object_new_array(),
		    *hosts = json_object_new_array(), *flows = json_object_new_array();
	char key[17];
	if (!o || !sum || !hosts || !flows)
		goto fail;
	snprintf(key, sizeof(key), "%016" PRIx64, j->key);
	json_object_object_add(o, "id", json_object_new_string(j->id));
	json_object_object_add(o, "key", json_object_new_string(key));
	json_object_object_add(o, "ranks", json_object_new_int64(j->nranks));
	json_object_object_add(o, "compute", json_object_new_int64(j->ncompute));
	json_object_object_add(o, "clamped", json_object_new_boolean(j->clamped));
	json_object_object_add(o, "sum", sum);
	json_object_object_add(o, "hosts", hosts);
	json_object_object_add(o, "flows", flows);
	const double s[5] = {j->iter_sum, j->compute_sum, j->comm_sum, j->overlap_sum,
			     j->stall_sum};
	for (int i = 0; i < 5; i++)
		json_object_array_add(sum, json_object_new_double(s[i]));
	for (uint32_t i = 0; i < j->nhosts; i++)
		if (crux_cv_add_addr(hosts, &j->hosts[i]) != CRUX_OK)
			goto fail_o;
	for (uint32_t i = 0; i < j->nflows; i++) {
		json_object *f = json_object_new_array();
		if (!f || json_object_array_add(flows, f) != 0) {
			json_object_put(f);
			goto fail_o;
		}
		if (crux_cv_add_addr(f, &j->flows[i].src) != CRUX_OK ||
		    crux_cv_add_addr(f, &j->flows[i].dst) != CRUX_OK)
			goto fail_o;
		json_object_array_add(f, json_object_new_double(j->flows[i].bytes));
	}
	return o;
fail:
	json_object_put(sum);
	json_object_put(hosts);
	json_object_put(flows);
fail_o:
	json_object_put(o);
	return NULL;
}

/* What the decoder would refuse is not sent. */
static bool within_limits(const struct crux_job_view *h)
{
	if (h->njobs > CRUX_CV_MAX_JOBS)
		return false;
	for (size_t i = 0; i < h->njobs; i++)
		if (h->jobs[i].nflows > CRUX_JV_MAX_FLOWS ||
		    h->jobs[i].nhosts > CRUX_JV_MAX_JOB_HOSTS)
			return false;
	return true;
}

crux_status_t crux_cv_host_encode(const struct crux_job_view *h, char **out, size_t *len)
{
	json_object *o, *jobs;
	crux_status_t st = CRUX_ERR_NOMEM;
	if (!within_limits(h))
		return CRUX_ERR_RANGE;
	o = json_object_new_object();
	jobs = json_object_new_array();
	if (!o || !jobs) {
		json_object_put(jobs);
		goto out;
	}
	json_object_object_add(o, "v", json_object_new_int(CRUX_CV_VERSION));
	json_object_object_add(o, "host", json_object_new_string(h->name));
	char a[CRUX_ADDR_STRLEN];
	crux_addr_format(&h->addr, a, sizeof(a));
	json_object_object_add(o, "addr", json_object_new_string(a));
	json_object_object_add(o, "jobs", jobs);
	for (size_t i = 0; i < h->njobs; i++) {
		json_object *j = job_json(&h->jobs[i]);
		if (!j)
			goto out;
		json_object_array_add(jobs, j);
	}
	st = crux_cv_finish(o, out, len);
out:
	json_object_put(o);
	return st;
}

/* ---- decoding ---- */

crux_status_t crux_cv_get(json_object *o, const char *name, json_type type, json_object **out)
{
	json_object *m = NULL;
	if (!json_object_object_get_ex(o, name, &m) || !m || !json_object_is_type(m, type))
		return CRUX_ERR_CORRUPT;
	*out = m;
	return CRUX_OK;
}

crux_status_t crux_cv_uint(json_object *o, const char *name, uint64_t max, uint64_t *out)
{
	json_object *m;
	if (crux_cv_get(o, name, json_type_int, &m) != CRUX_OK)
		return CRUX_ERR_CORRUPT;
	int64_t v = json_object_get_int64(m);
	if (v < 0 || (uint64_t)v > max)
		return CRUX_ERR_CORRUPT;
	*out = (uint64_t)v;
	return CRUX_OK;
}

/* A finite, non-negative number (JSON integer or double). */
crux_status_t crux_cv_num(json_object *m, double *out)
{
	if (!json_object_is_type(m, json_type_double) && !json_object_is_type(m, json_type_int))
		return CRUX_ERR_CORRUPT;
	double v = json_object_get_double(m);
	if (!isfinite(v) || v < 0)
		return CRUX_ERR_CORRUPT;
	*out = v;
	return CRUX_OK;
}

crux_status_t crux_cv_addr(json_object *m, struct crux_addr *out)
{
	if (!m || !json_object_is_type(m, json_type_string) ||
	    json_object_get_string_len(m) >= CRUX_ADDR_STRLEN)
		return CRUX_ERR_CORRUPT;
	if (!strcmp(json_object_get_string(m), "-")) {
		/* No address (crux_addr_format's "-"): a host known by name only. */
		memset(out, 0, sizeof(*out));
		return CRUX_OK;
	}
	return crux_addr_parse(json_object_get_string(m), out) == CRUX_OK ? CRUX_OK
									  : CRUX_ERR_CORRUPT;
}

crux_status_t crux_cv_key(json_object *o, uint64_t *out)
{
	json_object *m;
	if (crux_cv_get(o, "key", json_type_string, &m) != CRUX_OK ||
	    json_object_get_string_len(m) != 16)
		return CRUX_ERR_CORRUPT;
	const char *s = json_object_get_string(m);
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return CRUX_ERR_CORRUPT;
		v = v << 4 | (uint64_t)d;
	}
	if (v == 0)
		return CRUX_ERR_CORRUPT;
	*out = v;
	return CRUX_OK;
}

/* Copy a printable string member (no spaces) into buf. */
crux_status_t crux_cv_text(json_object *o, const char *name, char *buf, size_t cap)
{
	json_object *m;
	if (crux_cv_get(o, name, json_type_string, &m) != CRUX_OK)
		return CRUX_ERR_CORRUPT;
	size_t n = (size_t)json_object_get_string_len(m);
	const char *s = json_object_get_string(m);
	if (n == 0 || n >= cap)
		return CRUX_ERR_CORRUPT;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return CRUX_ERR_CORRUPT;
	memcpy(buf, s, n + 1);
	return CRUX_OK;
}

static crux_status_t job_from_json(json_object *o, struct crux_jv_job *j)
{
	json_object *sum, *hosts, *flows;
	uint64_t v;
	if (!json_object_is_type(o, json_type_object) ||
	    crux_cv_text(o, "id", j->id, sizeof(j->id)) || crux_cv_key(o, &j->key) ||
	    j->key != crux_job_key_of(j->id))
		return CRUX_ERR_CORRUPT;
	if (crux_cv_uint(o, "ranks", UINT32_MAX, &v))
		return CRUX_ERR_CORRUPT;
	j->nranks = (uint32_t)v;
	if (crux_cv_uint(o, "compute", j->nranks, &v))
		return CRUX_ERR_CORRUPT;
	j->ncompute = (uint32_t)v;
	json_object *cl;
	if (crux_cv_get(o, "clamped", json_type_boolean, &cl))
		return CRUX_ERR_CORRUPT;
	j->clamped = json_object_get_boolean(cl);
	if (crux_cv_get(o, "sum", json_type_array, &sum) || json_object_array_length(sum) != 5)
		return CRUX_ERR_CORRUPT;
	double *s[5] = {&j->iter_sum, &j->compute_sum, &j->comm_sum, &j->overlap_sum,
			&j->stall_sum};
	for (int i = 0; i < 5; i++)
		if (crux_cv_num(json_object_array_get_idx(sum, (size_t)i), s[i]))
			return CRUX_ERR_CORRUPT;
	if (j->overlap_sum > j->ncompute) /* each rank's overlap is a fraction */
		return CRUX_ERR_CORRUPT;
	if (crux_cv_get(o, "hosts", json_type_array, &hosts) ||
	    json_object_array_length(hosts) > CRUX_JV_MAX_JOB_HOSTS)
		return CRUX_ERR_CORRUPT;
	j->nhosts = (uint32_t)json_object_array_length(hosts);
	for (uint32_t i = 0; i < j->nhosts; i++)
		if (crux_cv_addr(json_object_array_get_idx(hosts, i), &j->hosts[i]))
			return CRUX_ERR_CORRUPT;
	if (crux_cv_get(o, "flows", json_type_array, &flows) ||
	    json_object_array_length(flows) > CRUX_JV_MAX_FLOWS)
		return CRUX_ERR_CORRUPT;
	size_t nf = json_object_array_length(flows);
	if (nf && !(j->flows = calloc(nf, sizeof(*j->flows))))
		return CRUX_ERR_NOMEM;
	j->capflows = (uint32_t)nf;
	for (size_t i = 0; i < nf; i++) {
		json_object *f = json_object_array_get_idx(flows, i);
		struct crux_jv_flow *fl = &j->flows[i];
		if (!json_object_is_type(f, json_type_array) || json_object_array_length(f) != 3 ||
		    crux_cv_addr(json_object_array_get_idx(f, 0), &fl->src) ||
		    crux_cv_addr(json_object_array_get_idx(f, 1), &fl->dst) ||
		    crux_cv_num(json_object_array_get_idx(f, 2), &fl->bytes))
			return CRUX_ERR_CORRUPT;
		j->nflows = (uint32_t)i + 1;
	}
	return CRUX_OK;
}

crux_status_t crux_cv_host_decode(const char *text, size_t len, struct crux_job_view *out)
{
	json_object *o, *jobs;
	struct crux_job_view h = {0};
	uint64_t v;
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
	json_object *addr;
	if (crux_cv_text(o, "host", h.name, sizeof(h.name)) ||
	    crux_cv_get(o, "addr", json_type_string, &addr) || crux_cv_addr(addr, &h.addr) ||
	    crux_cv_get(o, "jobs", json_type_array, &jobs) ||
	    json_object_array_length(jobs) > CRUX_CV_MAX_JOBS)
		goto out;
	size_t n = json_object_array_length(jobs);
	if (n && !(h.jobs = calloc(n, sizeof(*h.jobs)))) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	h.capjobs = n; /* every job's flows are freed, a half-decoded one's too */
	for (size_t i = 0; i < n; i++) {
		h.njobs = i + 1;
		if ((st = job_from_json(json_object_array_get_idx(jobs, i), &h.jobs[i])) != CRUX_OK)
			goto out;
		for (size_t k = 0; k < i; k++)
			if (h.jobs[k].key == h.jobs[i].key) {
				st = CRUX_ERR_CORRUPT; /* one entry per job */
				goto out;
			}
	}
	st = CRUX_OK;
out:
	json_object_put(o);
	if (st != CRUX_OK) {
		crux_jv_free(&h);
		return st;
	}
	*out = h;
	return CRUX_OK;
}
