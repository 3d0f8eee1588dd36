/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The job view: per job seen, counts and sums of its ranks' profile (never
 * averages, so views of several hosts merge exactly), the hosts its ranks run
 * on and its traffic per (source, destination) host; and the hosts the view
 * names. One type for every use: cruxd builds this host's view from its ranks,
 * cluster mode publishes it (crux/cluster_view.h encodes and decodes it), the
 * leader merges every host's view and plans from the result.
 *
 * Needs nothing but libc and the base/common headers: built always.
 */
#ifndef CRUX_JOB_VIEW_H
#define CRUX_JOB_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crux/addr.h"
#include "crux/jobid.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_JV_NAME_LEN      64   /* a host name, as in a profile record */
#define CRUX_JV_MAX_JOBS      4096 /* per view */
#define CRUX_JV_MAX_JOB_HOSTS 64   /* hosts one job's ranks run on */
#define CRUX_JV_MAX_FLOWS     4096 /* per job of a record or a merge */

struct crux_jv_flow {
	struct crux_addr src, dst;
	double bytes; /* per iteration */
};

struct crux_jv_job {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	uint32_t nranks, ncompute; /* ncompute <= nranks: ranks with a compute profile */
	bool clamped;
	/* Sums over the ncompute ranks, s (overlap: fraction). */
	double iter_sum, compute_sum, comm_sum, overlap_sum, stall_sum;
	/* Stall breakdown: sums of the ranks' fractions over nsplit ranks (nsplit_net of them
	 * with the plugin's busy time). This host's only: the cluster record does not carry it. */
	uint32_t nsplit, nsplit_net;
	double split_compute_sum, split_inter_sum, split_net_sum, split_other_sum;
	uint32_t nhosts;
	struct crux_addr hosts[CRUX_JV_MAX_JOB_HOSTS];
	uint32_t nflows, capflows;
	struct crux_jv_flow *flows; /* one per (src, dst) */
};

/* A host the view names (a rank's host or a peer), to find topology nodes. */
struct crux_jv_host {
	struct crux_addr addr;
	char name[CRUX_JV_NAME_LEN];
};

struct crux_job_view {
	char name[CRUX_JV_NAME_LEN]; /* the host it is of ("merged": several) */
	struct crux_addr addr;	     /* that host's address (family 0: not said) */
	size_t njobs, capjobs;
	struct crux_jv_job *jobs;
	size_t nhosts, caphosts;
	struct crux_jv_host *hosts;
};

/* Address order: family, then bytes. */
int crux_jv_addr_cmp(const struct crux_addr *x, const struct crux_addr *y);

/* Empty the view, keeping its buffers; free them all. */
void crux_jv_clear(struct crux_job_view *v);
void crux_jv_free(struct crux_job_view *v);

/* A new empty job at the end (NULL: out of memory). */
struct crux_jv_job *crux_jv_new_job(struct crux_job_view *v);
/* Add bytes to the job's (src, dst) flow, created when new (no limit: a host's own view). */
crux_status_t crux_jv_job_flow(struct crux_jv_job *j, const struct crux_addr *src,
			       const struct crux_addr *dst, double bytes);
/* Append a copy of job (its flows copied, equal ones added). CRUX_ERR_RANGE beyond the limits. */
crux_status_t crux_jv_add_job(struct crux_job_view *v, const struct crux_jv_job *job);
/* Name a host once: by address, or (family 0) by name. */
crux_status_t crux_jv_add_host(struct crux_job_view *v, const struct crux_addr *addr,
			       const char *name);
/* The fixed order: jobs by key, each job's hosts and flows by address, hosts by (address, name). */
void crux_jv_sort(struct crux_job_view *v);

/*
 * Merge n views into one: jobs with the same key add their counts and sums,
 * union their hosts and add the bytes of equal (src, dst) flows. Views are
 * taken in order of name, so every agent merging the same views gets
 * bit-identical results; the result is sorted (crux_jv_sort) and names every
 * host its jobs run on or send to, by address. out: a view named "merged".
 */
crux_status_t crux_jv_merge(const struct crux_job_view *views, size_t n, struct crux_job_view *out);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_JOB_VIEW_H */
