/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage 2, this host's job view: ranks -> per job, counts and sums of the
 * ranks' profile, the hosts it runs on and its traffic per (source, peer)
 * host. Sums, not averages, so the views of several hosts merge exactly
 * (crux_cv_merge); the order of everything is fixed (jobs by key, flows by
 * addresses, hosts by address then name), never the order records were found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"

int cruxd_addr_cmp(const struct crux_addr *x, const struct crux_addr *y)
{
	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	return memcmp(x->bytes, y->bytes, sizeof(x->bytes));
}

static int addr_qcmp(const void *x, const void *y)
{
	return cruxd_addr_cmp(x, y);
}

static int flow_cmp(const void *x, const void *y)
{
	const struct cruxd_view_flow *a = x, *b = y;
	int c = cruxd_addr_cmp(&a->src, &b->src);
	return c ? c : cruxd_addr_cmp(&a->dst, &b->dst);
}

static int host_cmp(const void *x, const void *y)
{
	const struct cruxd_view_host *a = x, *b = y;
	int c = cruxd_addr_cmp(&a->addr, &b->addr);
	return c ? c : strcmp(a->name, b->name);
}

static int job_cmp(const void *x, const void *y)
{
	const struct cruxd_view_job *a = x, *b = y;
	return (a->key > b->key) - (a->key < b->key);
}

static int rank_cmp_job(const void *x, const void *y)
{
	const struct rank *a = *(const struct rank *const *)x, *b = *(const struct rank *const *)y;
	if (a->job_key != b->job_key)
		return a->job_key < b->job_key ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return (a->start_time > b->start_time) - (a->start_time < b->start_time);
}

void cruxd_view_clear(struct cruxd_view *v)
{
	v->njobs = 0;
	v->nhosts = 0;
}

void cruxd_view_free(struct cruxd_view *v)
{
	for (size_t i = 0; i < v->capjobs; i++)
		free(v->jobs[i].flows);
	free(v->jobs);
	free(v->hosts);
	memset(v, 0, sizeof(*v));
}

/* A new empty job at the end (its flow buffer reused). */
static struct cruxd_view_job *view_new_job(struct cruxd_view *v)
{
	struct cruxd_view_job *j;

	if (v->njobs == v->capjobs) {
		size_t nc = v->capjobs ? v->capjobs * 2 : 32;
		struct cruxd_view_job *nj = realloc(v->jobs, nc * sizeof(*nj));
		if (!nj)
			return NULL;
		memset(nj + v->capjobs, 0, (nc - v->capjobs) * sizeof(*nj));
		v->jobs = nj;
		v->capjobs = nc;
	}
	j = &v->jobs[v->njobs];
	struct cruxd_view_flow *keep = j->flows;
	uint32_t cap = j->capflows;
	memset(j, 0, sizeof(*j));
	j->flows = keep;
	j->capflows = cap;
	v->njobs++;
	return j;
}

static crux_status_t job_flow(struct cruxd_view_job *j, const struct crux_addr *src,
			      const struct crux_addr *dst, double bytes)
{
	for (uint32_t i = 0; i < j->nflows; i++)
		if (crux_addr_equal(&j->flows[i].src, src) &&
		    crux_addr_equal(&j->flows[i].dst, dst)) {
			j->flows[i].bytes += bytes;
			return CRUX_OK;
		}
	if (j->nflows == j->capflows) {
		uint32_t nc = j->capflows ? j->capflows * 2 : 8;
		struct cruxd_view_flow *nf = realloc(j->flows, nc * sizeof(*nf));
		if (!nf)
			return CRUX_ERR_NOMEM;
		j->flows = nf;
		j->capflows = nc;
	}
	j->flows[j->nflows++] = (struct cruxd_view_flow){.src = *src, .dst = *dst, .bytes = bytes};
	return CRUX_OK;
}

crux_status_t cruxd_view_add_host(struct cruxd_view *v, const struct crux_addr *addr,
				  const char *name)
{
	struct cruxd_view_host *h;

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
		struct cruxd_view_host *nh = realloc(v->hosts, nc * sizeof(*nh));
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

crux_status_t cruxd_view_add_job(struct cruxd_view *v, const struct cruxd_view_job *src)
{
	struct cruxd_view_job *j = view_new_job(v);

	if (!j)
		return CRUX_ERR_NOMEM;
	struct cruxd_view_flow *keep = j->flows;
	uint32_t cap = j->capflows;
	*j = *src;
	j->flows = keep;
	j->capflows = cap;
	j->nflows = 0;
	for (uint32_t f = 0; f < src->nflows; f++)
		if (job_flow(j, &src->flows[f].src, &src->flows[f].dst, src->flows[f].bytes) !=
		    CRUX_OK)
			return CRUX_ERR_NOMEM;
	return CRUX_OK;
}

void cruxd_view_sort(struct cruxd_view *v)
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

crux_status_t cruxd_view_build(const struct rank *ranks, size_t n, struct cruxd_view *v)
{
	const struct rank **order = n ? malloc(n * sizeof(*order)) : NULL;
	crux_status_t st = CRUX_OK;
	size_t i = 0;

	cruxd_view_clear(v);
	if (n && !order)
		return CRUX_ERR_NOMEM;
	for (size_t k = 0; k < n; k++)
		order[k] = &ranks[k];
	if (n > 1)
		qsort(order, n, sizeof(*order), rank_cmp_job);
	while (i < n && st == CRUX_OK) {
		size_t e = i;
		struct cruxd_view_job *j = view_new_job(v);

		if (!j) {
			st = CRUX_ERR_NOMEM;
			break;
		}
		while (e < n && order[e]->job_key == order[i]->job_key)
			e++;
		j->key = order[i]->job_key;
		memcpy(j->id, order[i]->job_id, sizeof(j->id));
		for (size_t k = i; k < e && st == CRUX_OK; k++) {
			const struct rank *r = order[k];
			bool known = false;

			st = cruxd_view_add_host(v, &r->host, r->hostname);
			j->nranks++;
			j->clamped |= r->clamped;
			if (r->has_compute) {
				j->ncompute++;
				j->iter_sum += r->iter;
				j->compute_sum += r->compute;
				j->comm_sum += r->comm;
				j->overlap_sum += r->overlap;
				j->stall_sum += r->stall;
			}
			if (r->split.valid) {
				j->nsplit++;
				j->nsplit_net += r->split.net_known;
				j->split_compute_sum += r->split.compute;
				j->split_inter_sum += r->split.interconnect;
				j->split_net_sum += r->split.network;
				j->split_other_sum += r->split.other;
			}
			for (uint32_t hi = 0; hi < j->nhosts; hi++)
				known |= crux_addr_equal(&j->hosts[hi], &r->host) &&
					 (r->host.family || hi == 0);
			if (!known && j->nhosts < MAX_JOB_HOSTS)
				j->hosts[j->nhosts++] = r->host;
			for (uint32_t p = 0; p < r->npeers && st == CRUX_OK; p++) {
				if (crux_addr_equal(&r->peer[p], &r->host) || r->bpi[p] <= 0)
					continue; /* intra-host: no path to choose */
				st = cruxd_view_add_host(v, &r->peer[p], NULL);
				if (st == CRUX_OK)
					st = job_flow(j, &r->host, &r->peer[p], r->bpi[p]);
			}
		}
		i = e;
	}
	free(order);
	if (st == CRUX_OK)
		cruxd_view_sort(v);
	return st;
}
