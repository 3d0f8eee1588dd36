/* SPDX-License-Identifier: Apache-2.0 */
/* The job view (crux/job_view.h): building, the fixed order, the exact merge. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/job_view.h"

int crux_jv_addr_cmp(const struct crux_addr *x, const struct crux_addr *y)
{
	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	return memcmp(x->bytes, y->bytes, sizeof(x->bytes));
}

static int addr_qcmp(const void *x, const void *y)
{
	return crux_jv_addr_cmp(x, y);
}

static int flow_cmp(const void *x, const void *y)
{
	const struct crux_jv_flow *a = x, *b = y;
	int c = crux_jv_addr_cmp(&a->src, &b->src);
	return c ? c : crux_jv_addr_cmp(&a->dst, &b->dst);
}

static int host_cmp(const void *x, const void *y)
{
	const struct crux_jv_host *a = x, *b = y;
	int c = crux_jv_addr_cmp(&a->addr, &b->addr);
	return c ? c : strcmp(a->name, b->name);
}

static int job_cmp(const void *x, const void *y)
{
	const struct crux_jv_job *a = x, *b = y;
	return (a->key > b->key) - (a->key < b->key);
}

void crux_jv_clear(struct crux_job_view *v)
{
	v->njobs = 0;
	v->nhosts = 0;
}

void crux_jv_free(struct crux_job_view *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->capjobs; i++)
		free(v->jobs[i].flows);
	free(v->jobs);
	free(v->hosts);
	memset(v, 0, sizeof(*v));
}

struct crux_jv_job *crux_jv_new_job(struct crux_job_view *v)
{
	struct crux_jv_job *j;

	if (v->njobs == v->capjobs) {
		size_t nc = v->capjobs ? v->capjobs * 2 : 32;
		struct crux_jv_job *nj = realloc(v->jobs, nc * sizeof(*nj));
		if (!nj)
			return NULL;
		memset(nj + v->capjobs, 0, (nc - v->capjobs) * sizeof(*nj));
		v->jobs = nj;
		v->capjobs = nc;
	}
	j = &v->jobs[v->njobs];
	/* A cleared view's job keeps its flow buffer for the next pass. */
	struct crux_jv_flow *keep = j->flows;
	uint32_t cap = j->capflows;
	memset(j, 0, sizeof(*j));
	j->flows = keep;
	j->capflows = cap;
	v->njobs++;
	return j;
}

/* limit: the most flows a job may reach (a record's, when merging or copying records). */
static crux_status_t job_flow(struct crux_jv_job *j, const struct crux_addr *src,
			      const struct crux_addr *dst, double bytes, uint32_t limit)
{
	for (uint32_t i = 0; i < j->nflows; i++)
		if (crux_addr_equal(&j->flows[i].src, src) &&
		    crux_addr_equal(&j->flows[i].dst, dst)) {
			j->flows[i].bytes += bytes;
			return CRUX_OK;
		}
	if (j->nflows >= limit)
		return CRUX_ERR_RANGE;
	if (j->nflows == j->capflows) {
		uint32_t nc = j->capflows ? j->capflows * 2 : 8;
		struct crux_jv_flow *nf = realloc(j->flows, nc * sizeof(*nf));
		if (!nf)
			return CRUX_ERR_NOMEM;
		j->flows = nf;
		j->capflows = nc;
	}
	j->flows[j->nflows++] = (struct crux_jv_flow){.src = *src, .dst = *dst, .bytes = bytes};
	return CRUX_OK;
}

crux_status_t crux_jv_job_flow(struct crux_jv_job *j, const struct crux_addr *src,
			       const struct crux_addr *dst, double bytes)
{
	return job_flow(j, src, dst, bytes, UINT32_MAX);
}

crux_status_t crux_jv_add_job(struct crux_job_view *v, const struct crux_jv_job *src)
{
	struct crux_jv_job *j;
	crux_status_t st = CRUX_OK;

	if (v->njobs >= CRUX_JV_MAX_JOBS || src->nflows > CRUX_JV_MAX_FLOWS ||
	    src->nhosts > CRUX_JV_MAX_JOB_HOSTS)
		return CRUX_ERR_RANGE;
	j = crux_jv_new_job(v);
	if (!j)
		return CRUX_ERR_NOMEM;
	struct crux_jv_flow *keep = j->flows;
	uint32_t cap = j->capflows;
	*j = *src;
	j->flows = keep;
	j->capflows = cap;
	j->nflows = 0;
	for (uint32_t f = 0; f < src->nflows && st == CRUX_OK; f++)
		st = job_flow(j, &src->flows[f].src, &src->flows[f].dst, src->flows[f].bytes,
			      CRUX_JV_MAX_FLOWS);
	if (st != CRUX_OK)
		v->njobs--; /* not half a job */
	return st;
}

crux_status_t crux_jv_add_host(struct crux_job_view *v, const struct crux_addr *addr,
			       const char *name)
{
	struct crux_jv_host *h;

	for (size_t i = 0; i < v->nhosts; i++) {
		h = &v->hosts[i];
		if (addr->family ? crux_addr_equal(&h->addr, addr)
				 : (h->addr.family == 0 && !strcmp(h->name, name ? name : ""))) {
			if (!h->name[0] && name)
				snprintf(h->name, sizeof(h->name), "%s", name);
			return CRUX_OK;
		}
	}
	if (v->nhosts == v->caphosts) {
		size_t nc = v->caphosts ? v->caphosts * 2 : 32;
		struct crux_jv_host *nh = realloc(v->hosts, nc * sizeof(*nh));
		if (!nh)
			return CRUX_ERR_NOMEM;
		v->hosts = nh;
		v->caphosts = nc;
	}
	h = &v->hosts[v->nhosts++];
	memset(h, 0, sizeof(*h));
	h->addr = *addr;
	if (name)
		snprintf(h->name, sizeof(h->name), "%s", name);
	return CRUX_OK;
}

void crux_jv_sort(struct crux_job_view *v)
{
	if (v->njobs > 1)
		qsort(v->jobs, v->njobs, sizeof(*v->jobs), job_cmp);
	for (size_t i = 0; i < v->njobs; i++) {
		if (v->jobs[i].nhosts > 1)
			qsort(v->jobs[i].hosts, v->jobs[i].nhosts, sizeof(v->jobs[i].hosts[0]),
			      addr_qcmp);
		if (v->jobs[i].nflows > 1)
			qsort(v->jobs[i].flows, v->jobs[i].nflows, sizeof(*v->jobs[i].flows),
			      flow_cmp);
	}
	if (v->nhosts > 1)
		qsort(v->hosts, v->nhosts, sizeof(*v->hosts), host_cmp);
}

/* ---- merge ---- */

static int view_name_cmp(const void *a, const void *b)
{
	const struct crux_job_view *x = *(const struct crux_job_view *const *)a;
	const struct crux_job_view *y = *(const struct crux_job_view *const *)b;
	int c = strcmp(x->name, y->name);
	return c ? c : memcmp(&x->addr, &y->addr, sizeof(x->addr));
}

static crux_status_t merge_into(struct crux_jv_job *m, const struct crux_jv_job *j)
{
	crux_status_t st = CRUX_OK;

	m->nranks += j->nranks;
	m->ncompute += j->ncompute;
	m->clamped |= j->clamped;
	m->iter_sum += j->iter_sum;
	m->compute_sum += j->compute_sum;
	m->comm_sum += j->comm_sum;
	m->overlap_sum += j->overlap_sum;
	m->stall_sum += j->stall_sum;
	m->nsplit += j->nsplit;
	m->nsplit_net += j->nsplit_net;
	m->split_compute_sum += j->split_compute_sum;
	m->split_inter_sum += j->split_inter_sum;
	m->split_net_sum += j->split_net_sum;
	m->split_other_sum += j->split_other_sum;
	for (uint32_t i = 0; i < j->nhosts; i++) {
		bool known = false;
		for (uint32_t k = 0; k < m->nhosts && !known; k++)
			known = crux_addr_equal(&m->hosts[k], &j->hosts[i]);
		if (!known && m->nhosts < CRUX_JV_MAX_JOB_HOSTS)
			m->hosts[m->nhosts++] = j->hosts[i];
	}
	for (uint32_t i = 0; i < j->nflows && st == CRUX_OK; i++)
		st = job_flow(m, &j->flows[i].src, &j->flows[i].dst, j->flows[i].bytes,
			      CRUX_JV_MAX_FLOWS);
	return st;
}

/* Every host the merged jobs run on or send to, by address. */
static crux_status_t merge_hosts(struct crux_job_view *m)
{
	crux_status_t st = CRUX_OK;

	for (size_t i = 0; i < m->njobs && st == CRUX_OK; i++) {
		const struct crux_jv_job *j = &m->jobs[i];
		for (uint32_t h = 0; h < j->nhosts && st == CRUX_OK; h++)
			st = crux_jv_add_host(m, &j->hosts[h], NULL);
		for (uint32_t f = 0; f < j->nflows && st == CRUX_OK; f++) {
			st = crux_jv_add_host(m, &j->flows[f].src, NULL);
			if (st == CRUX_OK)
				st = crux_jv_add_host(m, &j->flows[f].dst, NULL);
		}
	}
	return st;
}

crux_status_t crux_jv_merge(const struct crux_job_view *views, size_t n, struct crux_job_view *out)
{
	struct crux_job_view m = {0};
	const struct crux_job_view **order = n ? malloc(n * sizeof(*order)) : NULL;
	crux_status_t st = CRUX_ERR_NOMEM;

	if (n && !order)
		return st;
	for (size_t i = 0; i < n; i++)
		order[i] = &views[i];
	if (n > 1)
		qsort(order, n, sizeof(*order), view_name_cmp);
	snprintf(m.name, sizeof(m.name), "merged");
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < order[i]->njobs; k++) {
			const struct crux_jv_job *j = &order[i]->jobs[k];
			size_t x = 0;

			while (x < m.njobs && m.jobs[x].key != j->key)
				x++;
			if (x == m.njobs) {
				struct crux_jv_job *e;
				if (m.njobs >= CRUX_JV_MAX_JOBS) {
					st = CRUX_ERR_RANGE;
					goto fail;
				}
				if (!(e = crux_jv_new_job(&m))) {
					st = CRUX_ERR_NOMEM;
					goto fail;
				}
				e->key = j->key;
				memcpy(e->id, j->id, sizeof(e->id));
			}
			if ((st = merge_into(&m.jobs[x], j)) != CRUX_OK)
				goto fail;
		}
	}
	st = merge_hosts(&m);
	if (st != CRUX_OK)
		goto fail;
	crux_jv_sort(&m);
	free(order);
	*out = m;
	return CRUX_OK;
fail:
	free(order);
	crux_jv_free(&m);
	return st;
}
