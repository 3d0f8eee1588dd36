/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What node_it.c and node_faults_it.c share: a check macro, a host of the
 * in-process cluster, and the plan/apply callbacks and helpers that drive
 * crux_cluster nodes against a real etcd.
 */
#ifndef CRUX_TESTS_NODE_FIXTURE_H
#define CRUX_TESTS_NODE_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "crux/cluster_node.h"

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);               \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

struct host {
	const char *name, *addr;
	struct crux_cluster_node *n;
	struct crux_job_view view;
	int64_t rev;
	uint32_t njobs;
	uint64_t keys[16];
	uint8_t levels[16];
	bool alive;
};

double nfx_now_s(void);
/* Level = the job's rank count, at most 3, on 4 levels. */
crux_status_t nfx_plan(void *arg, const struct crux_job_view *m, const char *ovr, size_t ovr_len,
		       struct crux_cv_schedule *out);
/* arg: the struct host the schedule reached. */
void nfx_apply(void *arg, const struct crux_cv_schedule *s, int64_t rev);
void nfx_add_job(struct host *h, const char *id, uint32_t ranks);
int nfx_level_of(const struct host *h, const char *id);

#endif
