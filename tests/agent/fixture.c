/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crux/jobid.h"
#include "crux/shm.h"
#include "fixture.h"

int fx_dir(char *tmp, size_t tlen, char *shm, size_t slen)
{
	snprintf(tmp, tlen, "/tmp/cxag-test.XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	if (chmod(tmp, 0755) != 0)
		return -1;
	snprintf(shm, slen, "%s/shm", tmp);
	return crux_shm_dir_check(shm, true) == CRUX_OK ? 0 : -1;
}

void fx_rmdir(const char *tmp)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmp);
}

struct msg {
	int kind; /* 1 compute, 2 net, 3 both */
	struct crux_prof_compute c;
	struct crux_prof_net n;
};

static int xread(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t r = read(fd, (char *)buf + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int xwrite(int fd, const void *buf, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, (const char *)buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

int fx_rank_spawn(const char *dir, const char *job_id, const char *host, int rank, int world,
		  struct fx_rank *out)
{
	int cmd[2], ack[2];
	char ok = 0;
	pid_t pid;

	if (pipe(cmd) != 0 || pipe(ack) != 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct crux_prof_identity id;
		struct crux_prof_handle *h = NULL;
		struct msg *m = malloc(sizeof(*m));

		close(cmd[1]);
		close(ack[0]);
		memset(&id, 0, sizeof(id));
		snprintf(id.job_id, sizeof(id.job_id), "%s", job_id);
		id.job_key = crux_job_key_of(id.job_id);
		snprintf(id.hostname, sizeof(id.hostname), "host-%s", host ? host : "local");
		if (host)
			crux_addr_parse(host, &id.host_addr);
		id.rank = rank;
		id.world_size = world;
		id.local_rank = rank;
		ok = m && crux_prof_open_self(dir, &id, &h) == CRUX_OK;
		if (xwrite(ack[1], &ok, 1) != 0 || !ok)
			_exit(1);
		while (xread(cmd[0], m, sizeof(*m)) == 0) {
			if (m->kind & 1)
				crux_prof_publish_compute(h, &m->c);
			if (m->kind & 2)
				crux_prof_publish_net(h, &m->n);
			if (xwrite(ack[1], &ok, 1) != 0)
				break;
		}
		_exit(0);
	}
	close(cmd[0]);
	close(ack[1]);
	out->pid = pid;
	out->cmd_fd = cmd[1];
	out->ack_fd = ack[0];
	if (xread(out->ack_fd, &ok, 1) != 0 || !ok) {
		fx_rank_kill(out);
		return -1;
	}
	return 0;
}

int fx_rank_publish(struct fx_rank *r, const struct crux_prof_compute *c,
		    const struct crux_prof_net *n)
{
	struct msg *m = calloc(1, sizeof(*m));
	char ok = 0;
	int rc;

	if (!m)
		return -1;
	if (c) {
		m->kind |= 1;
		m->c = *c;
	}
	if (n) {
		m->kind |= 2;
		m->n = *n;
	}
	rc = xwrite(r->cmd_fd, m, sizeof(*m)) == 0 && xread(r->ack_fd, &ok, 1) == 0 && ok ? 0 : -1;
	free(m);
	return rc;
}

void fx_rank_kill(struct fx_rank *r)
{
	if (r->pid > 0) {
		kill(r->pid, SIGKILL);
		waitpid(r->pid, NULL, 0);
	}
	if (r->cmd_fd >= 0)
		close(r->cmd_fd);
	if (r->ack_fd >= 0)
		close(r->ack_fd);
	r->pid = -1;
	r->cmd_fd = r->ack_fd = -1;
}

void fx_compute(struct crux_prof_compute *c, double iter, double compute, double comm,
		double overlap, uint64_t iters)
{
	memset(c, 0, sizeof(*c));
	c->window_s = 1;
	c->windows = 1;
	c->iterations = iters;
	c->total_iterations = iters;
	c->iter_time_s = iter;
	c->compute_s = compute;
	c->comm_s = comm;
	c->overlap_s = overlap;
	c->stall_s = comm - overlap;
	c->timing_backend = CRUX_TIMING_HOST;
	c->flags = CRUX_PROF_F_ITER_DETECTED;
	snprintf(c->device, sizeof(c->device), "cpu");
}

void fx_net_add(struct crux_prof_net *n, const char *peer, uint64_t bytes)
{
	struct crux_addr a;

	if (crux_addr_parse(peer, &a) != CRUX_OK)
		return;
	for (uint32_t i = 0; i < n->npeers; i++)
		if (crux_addr_equal(&n->peers[i].peer, &a)) {
			n->peers[i].tx_bytes[0] += bytes;
			return;
		}
	if (n->npeers < CRUX_PROF_MAX_PEERS) {
		memset(&n->peers[n->npeers], 0, sizeof(n->peers[0]));
		n->peers[n->npeers].peer = a;
		n->peers[n->npeers].tx_bytes[0] = bytes;
		n->npeers++;
	}
}
