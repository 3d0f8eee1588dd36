/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The job table: the jobs the planner tracks between passes (life cycle,
 * figures, decision) and the hosts of the view it last took, each mapped to a
 * topology node. plan.c (and cluster.c, for a new term) write it; the other
 * stages read it: look a job up, map a host to its node.
 */
#ifndef CRUXD_JOBS_H
#define CRUXD_JOBS_H

#include <stdbool.h>
#include <stdint.h>

#include "crux/decision.h"
#include "crux/job_view.h"
#include "crux/sched.h"

#define MAX_JOB_HOSTS CRUX_JV_MAX_JOB_HOSTS

struct flow {
	struct crux_addr src, dst;
	double bytes; /* per iteration */
	int path;     /* scheduler's candidate index, -1 none */
	int src_node, dst_node;
};

struct job {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	uint8_t state; /* CRUX_JOB_PROFILING or CRUX_JOB_SCHEDULED */
	bool present;
	bool adopted; /* decision taken over from the table at start-up */
	/* Taken over at start-up and not seen since: its ranks may still be
	 * re-attaching to the restarted agent; it departs only when they have
	 * not come back by grace_until (set at the first pass). */
	bool restored;
	uint64_t grace_until;
	bool clamped;
	uint64_t since_ns;
	uint32_t nranks, ncompute;
	uint32_t nhosts;
	struct crux_addr hosts[MAX_JOB_HOSTS];
	double iter, compute, comm, overlap, stall, work, bytes;
	uint32_t nflows, capflows;
	struct flow *flows;
	/* profile the current decision was made for (hysteresis) */
	bool has_base;
	double base_work, base_bytes, base_iter;
	uint64_t since_wall_ms; /* cluster mode: since_ns as Unix time, for the next leader */
	/* decision */
	bool decided;
	uint8_t level;	  /* published: scheduled level + guard lift */
	double iso;	  /* isolated iteration estimate on its paths, s (fairness guard) */
	double prof_iter; /* iteration time measured at the end of profiling (top level) */
	/* The bound on its mean slowdown (CRUX_MAX_SLOWDOWN): measured
	 * slowdowns, pass by pass, since it was first scheduled. */
	struct crux_sched_account acct;
	uint64_t acct_ns; /* last pass accounted; 0 = none yet (calloc: a free account) */
	double t, intensity, k, priority;
	uint32_t ndflows;
	struct flow *dflows;
	uint32_t nadopt;
	struct crux_dt_route *adopt;
};

struct hostent {
	struct crux_addr addr;
	char name[CRUX_JV_NAME_LEN];
	int node; /* -1: not looked up, or not in the topology */
};

struct cruxd_jobs {
	struct job **v; /* sorted by key */
	size_t n, cap;
	struct hostent *hosts; /* the last view's, sorted */
	size_t nhosts, caphosts;
	struct crux_sched_topo *topo; /* where hosts are found: the file's or the star */
};

struct job *cruxd_jobs_find(const struct cruxd_jobs *t, uint64_t key);
/* A new zeroed job with that key, in order (NULL: out of memory). */
struct job *cruxd_jobs_add(struct cruxd_jobs *t, uint64_t key);
/* Free the k-th job and close the gap. */
void cruxd_jobs_drop(struct cruxd_jobs *t, size_t k);
void cruxd_jobs_clear(struct cruxd_jobs *t);
void cruxd_jobs_free(struct cruxd_jobs *t);
crux_status_t cruxd_job_add_flow(struct job *j, const struct crux_addr *src,
				 const struct crux_addr *dst, double bytes);

/* The hosts of a (merged) view: unique and sorted; every flow's ends among them. */
crux_status_t cruxd_jobs_take_hosts(struct cruxd_jobs *t, const struct crux_job_view *v);
/* Hosts are found in topo from now on (NULL: none); every host is looked up again. */
void cruxd_jobs_set_topo(struct cruxd_jobs *t, struct crux_sched_topo *topo);
/* A host's topology node: by its address written as text, else its host name; -1 none. */
int cruxd_jobs_node_of(struct cruxd_jobs *t, const struct crux_addr *addr);

#endif /* CRUXD_JOBS_H */
