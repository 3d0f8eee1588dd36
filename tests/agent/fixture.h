/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test fixture: a private shared-memory directory and "rank" child processes
 * that own real profile records (written through common's API) and publish
 * whatever the test sends them.
 */
#ifndef CRUX_TEST_AGENT_FIXTURE_H
#define CRUX_TEST_AGENT_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

#include "crux/profile.h"

struct fx_rank {
	pid_t pid;
	int cmd_fd;
	int ack_fd;
};

/* mkdtemp under /tmp; 'shm' gets <tmp>/shm (created, mode 0755). */
int fx_dir(char *tmp, size_t tlen, char *shm, size_t slen);
void fx_rmdir(const char *tmp);

int fx_rank_spawn(const char *dir, const char *job_id, const char *host, int rank, int world,
		  struct fx_rank *out);
/* Publish; NULL skips a section. Returns 0 when the child acknowledged. */
int fx_rank_publish(struct fx_rank *r, const struct crux_prof_compute *c,
		    const struct crux_prof_net *n);
void fx_rank_kill(struct fx_rank *r);

/* A compute section: iter, compute, comm, overlap seconds; iterations so far. */
void fx_compute(struct crux_prof_compute *c, double iter, double compute, double comm,
		double overlap, uint64_t iters);
/* Add 'bytes' sent to 'peer' at level 0. */
void fx_net_add(struct crux_prof_net *n, const char *peer, uint64_t bytes);

#endif
