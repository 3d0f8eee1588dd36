/* SPDX-License-Identifier: Apache-2.0 */
/* The cluster node tests' shared fixture (node_fixture.h). */
#include <string.h>
#include <time.h>

#include "crux/addr.h"
#include "crux/jobid.h"
#include "node_fixture.h"

double nfx_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

crux_status_t nfx_plan(void *arg, const struct crux_job_view *m, const char *ovr, size_t ovr_len,
		       struct crux_cv_schedule *out)
{
	(void)ovr;
	(void)ovr_len;
	(void)arg;
	out->levels = 4;
	out->njobs = m->njobs;
	out->jobs = m->njobs ? calloc(m->njobs, sizeof(*out->jobs)) : NULL;
	for (uint32_t i = 0; i < m->njobs; i++) {
		out->jobs[i].key = m->jobs[i].key;
		out->jobs[i].level = (uint8_t)(m->jobs[i].nranks < 3 ? m->jobs[i].nranks : 3);
	}
	return CRUX_OK;
}

void nfx_apply(void *arg, const struct crux_cv_schedule *s, int64_t rev)
{
	struct host *h = arg;
	h->rev = rev;
	h->njobs = s->njobs < 16 ? s->njobs : 16;
	for (uint32_t i = 0; i < h->njobs; i++) {
		h->keys[i] = s->jobs[i].key;
		h->levels[i] = s->jobs[i].level;
	}
}

void nfx_add_job(struct host *h, const char *id, uint32_t ranks)
{
	struct crux_jv_job j = {.nranks = ranks,
				.ncompute = ranks,
				.iter_sum = ranks,
				.compute_sum = ranks * 0.5,
				.nhosts = 1};
	snprintf(j.id, sizeof(j.id), "%s", id);
	j.key = crux_job_key_of(id);
	CHECK(crux_addr_parse(h->addr, &j.hosts[0]) == CRUX_OK);
	CHECK(crux_jv_add_job(&h->view, &j) == CRUX_OK);
	CHECK(crux_cluster_set_view(h->n, &h->view) == CRUX_OK);
}

int nfx_level_of(const struct host *h, const char *id)
{
	uint64_t k = crux_job_key_of(id);
	for (uint32_t i = 0; i < h->njobs; i++)
		if (h->keys[i] == k)
			return h->levels[i];
	return -1;
}
