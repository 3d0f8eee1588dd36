/* SPDX-License-Identifier: Apache-2.0 */
/* The job table (jobs.h): jobs by key, the view's hosts and their topology nodes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"

static int job_cmp_key(const void *k, const void *e)
{
	uint64_t key = *(const uint64_t *)k;
	const struct job *j = *(struct job *const *)e;
	return (key > j->key) - (key < j->key);
}

struct job *cruxd_jobs_find(const struct cruxd_jobs *t, uint64_t key)
{
	struct job **p = t->n ? bsearch(&key, t->v, t->n, sizeof(*t->v), job_cmp_key) : NULL;
	return p ? *p : NULL;
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	free(j->flows);
	free(j->dflows);
	free(j->adopt);
	free(j);
}

struct job *cruxd_jobs_add(struct cruxd_jobs *t, uint64_t key)
{
	struct job *j;
	size_t pos = 0;

	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		struct job **nj = realloc(t->v, nc * sizeof(*nj));
		if (!nj)
			return NULL;
		t->v = nj;
		t->cap = nc;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->key = key;
	while (pos < t->n && t->v[pos]->key < key)
		pos++;
	memmove(&t->v[pos + 1], &t->v[pos], (t->n - pos) * sizeof(*t->v));
	t->v[pos] = j;
	t->n++;
	return j;
}

void cruxd_jobs_drop(struct cruxd_jobs *t, size_t k)
{
	job_free(t->v[k]);
	memmove(&t->v[k], &t->v[k + 1], (t->n - k - 1) * sizeof(*t->v));
	t->n--;
}

void cruxd_jobs_clear(struct cruxd_jobs *t)
{
	for (size_t k = 0; k < t->n; k++)
		job_free(t->v[k]);
	t->n = 0;
}

void cruxd_jobs_free(struct cruxd_jobs *t)
{
	cruxd_jobs_clear(t);
	free(t->v);
	free(t->hosts);
	memset(t, 0, sizeof(*t));
}

crux_status_t cruxd_job_add_flow(struct job *j, const struct crux_addr *src,
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
		struct flow *nf = realloc(j->flows, nc * sizeof(*nf));
		if (!nf)
			return CRUX_ERR_NOMEM;
		j->flows = nf;
		j->capflows = nc;
	}
	j->flows[j->nflows] = (struct flow){.src = *src, .dst = *dst, .bytes = bytes, .path = -1};
	j->nflows++;
	return CRUX_OK;
}

/* ---- hosts and topology nodes ------------------------------------------ */

static struct hostent *host_find(struct cruxd_jobs *t, const struct crux_addr *addr)
{
	for (size_t i = 0; i < t->nhosts; i++) {
		struct hostent *h = &t->hosts[i];
		if (addr->family ? crux_addr_equal(&h->addr, addr)
				 : (h->addr.family == 0 && !h->name[0]))
			return h;
	}
	return NULL;
}

crux_status_t cruxd_jobs_take_hosts(struct cruxd_jobs *t, const struct crux_job_view *v)
{
	if (v->nhosts > t->caphosts) {
		struct hostent *nh = realloc(t->hosts, v->nhosts * sizeof(*nh));
		if (!nh)
			return CRUX_ERR_NOMEM;
		t->hosts = nh;
		t->caphosts = v->nhosts;
	}
	for (size_t i = 0; i < v->nhosts; i++) {
		struct hostent *h = &t->hosts[i];
		memset(h, 0, sizeof(*h));
		h->addr = v->hosts[i].addr;
		memcpy(h->name, v->hosts[i].name, sizeof(h->name));
		h->node = -1;
	}
	t->nhosts = v->nhosts;
	return CRUX_OK;
}

void cruxd_jobs_set_topo(struct cruxd_jobs *t, struct crux_sched_topo *topo)
{
	t->topo = topo;
	for (size_t i = 0; i < t->nhosts; i++)
		t->hosts[i].node = -1;
}

int cruxd_jobs_node_of(struct cruxd_jobs *t, const struct crux_addr *addr)
{
	struct hostent *h = host_find(t, addr);
	char buf[CRUX_ADDR_STRLEN];
	int n = -1;

	if (!t->topo)
		return -1;
	if (h && h->node >= 0)
		return h->node;
	if (addr->family) {
		crux_addr_format(addr, buf, sizeof(buf));
		n = crux_sched_topo_find(t->topo, buf);
	}
	if (n < 0 && h && h->name[0])
		n = crux_sched_topo_find(t->topo, h->name);
	if (n >= crux_sched_topo_n_hosts(t->topo))
		n = -1;
	if (h)
		h->node = n;
	return n;
}
