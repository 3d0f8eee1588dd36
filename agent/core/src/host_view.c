/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage 2, this host's job view: ranks -> per job, counts and sums of the
 * ranks' profile, the hosts it runs on and its traffic per (source, peer)
 * host (crux/job_view.h). Sums, not averages, so the views of several hosts
 * merge exactly (crux_jv_merge); the order of everything is fixed
 * (crux_jv_sort), never the order records were found.
 */
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"

_Static_assert(CRUX_JV_NAME_LEN == CRUX_HOSTNAME_LEN, "a view's host name is a record's");
_Static_assert(CRUX_JV_MAX_JOB_HOSTS == MAX_JOB_HOSTS, "a view's job hosts are a job's");

static int rank_cmp_job(const void *x, const void *y)
{
	const struct rank *a = *(const struct rank *const *)x, *b = *(const struct rank *const *)y;
	if (a->job_key != b->job_key)
		return a->job_key < b->job_key ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return (a->start_time > b->start_time) - (a->start_time < b->start_time);
}

/* One rank's figures, hosts and traffic into its job's sums. */
static crux_status_t add_rank(struct crux_job_view *v, struct crux_jv_job *j, const struct rank *r)
{
	crux_status_t st = crux_jv_add_host(v, &r->host, r->hostname);
	bool known = false;

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
		known |= crux_addr_equal(&j->hosts[hi], &r->host) && (r->host.family || hi == 0);
	if (!known && j->nhosts < MAX_JOB_HOSTS)
		j->hosts[j->nhosts++] = r->host;
	for (uint32_t p = 0; p < r->npeers && st == CRUX_OK; p++) {
		if (crux_addr_equal(&r->peer[p], &r->host) || r->bpi[p] <= 0)
			continue; /* intra-host: no path to choose */
		st = crux_jv_add_host(v, &r->peer[p], NULL);
		if (st == CRUX_OK)
			st = crux_jv_job_flow(j, &r->host, &r->peer[p], r->bpi[p]);
	}
	return st;
}

crux_status_t cruxd_view_build(const struct rank *ranks, size_t n, struct crux_job_view *v)
{
	const struct rank **order = n ? malloc(n * sizeof(*order)) : NULL;
	crux_status_t st = CRUX_OK;
	size_t i = 0;

	crux_jv_clear(v);
	if (n && !order)
		return CRUX_ERR_NOMEM;
	for (size_t k = 0; k < n; k++)
		order[k] = &ranks[k];
	if (n > 1)
		qsort(order, n, sizeof(*order), rank_cmp_job);
	while (i < n && st == CRUX_OK) {
		size_t e = i;
		struct crux_jv_job *j = crux_jv_new_job(v);

		if (!j) {
			st = CRUX_ERR_NOMEM;
			break;
		}
		while (e < n && order[e]->job_key == order[i]->job_key)
			e++;
		j->key = order[i]->job_key;
		memcpy(j->id, order[i]->job_id, sizeof(j->id));
		for (size_t k = i; k < e && st == CRUX_OK; k++)
			st = add_rank(v, j, order[k]);
		i = e;
	}
	free(order);
	if (st == CRUX_OK)
		crux_jv_sort(v);
	return st;
}
