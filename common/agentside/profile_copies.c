/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd's copies of attached records: a file per process in
 * <shm_dir>/CRUX_PROF_ATTACHED_DIR, rewritten every pass under the seqlock
 * protocol, so contract-v1 readers (cruxctl, older tools) see them too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/clock.h"
#include "crux/log.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"
#include "crux/shm.h"
#include "profile_layout.h"

#define COPIES_MAX 4096 /* processes remembered per pass (more are copied, not cleaned up) */

struct copy_key {
	pid_t pid;
	uint64_t start;
};

struct crux_prof_copies {
	char dir[CRUX_PATH_MAX];
	uint64_t pass;
	uint32_t nput;
	struct copy_key put[COPIES_MAX];
	int said;
};

crux_status_t crux_prof_copies_open(const char *shm_dir, struct crux_prof_copies **out, char *err,
				    size_t errlen)
{
	struct crux_prof_copies *c = calloc(1, sizeof(*c));
	crux_status_t st;
	if (!c)
		return CRUX_ERR_NOMEM;
	if ((size_t)snprintf(c->dir, sizeof(c->dir), "%s/%s", shm_dir, CRUX_PROF_ATTACHED_DIR) >=
	    sizeof(c->dir)) {
		crux_set_err(err, errlen, "directory name %s is too long", shm_dir);
		free(c);
		return CRUX_ERR_INVAL;
	}
	st = crux_shm_dir_check_ex(c->dir, true, err, errlen);
	if (st != CRUX_OK) {
		free(c);
		return st;
	}
	*out = c;
	return CRUX_OK;
}

void crux_prof_copies_begin(struct crux_prof_copies *c)
{
	if (!c)
		return;
	c->pass++;
	c->nput = 0;
}

/* The record image for a snapshot, counters at 2 * pass (even: published). */
static void copy_image(const struct crux_prof_copies *c, const struct crux_prof_snapshot *s,
		       struct prof_file *img)
{
	memset(img, 0, sizeof(*img));
	img->hdr.magic = CRUX_PROF_MAGIC;
	img->hdr.layout_version = CRUX_PROF_VERSION;
	img->hdr.header_size = sizeof(img->hdr);
	img->hdr.total_size = sizeof(*img);
	img->hdr.writer_pid = (uint32_t)s->pid;
	img->hdr.writer_start_time = s->start_time;
	atomic_store(&img->hdr.generation, c->pass);
	atomic_store(&img->hdr.heartbeat_ns, crux_now_ns());
	img->id = s->id;
	img->id.agent_uid = s->uid >= 0 ? (uint32_t)s->uid : UINT32_MAX;
	atomic_store(&img->compute.seq, 2 * c->pass);
	img->compute.count = s->has_compute;
	img->compute.data = s->compute;
	atomic_store(&img->net.seq, 2 * c->pass);
	img->net.count = s->has_net;
	img->net.data = s->net;
}

void crux_prof_copies_put(struct crux_prof_copies *c, const struct crux_prof_snapshot *s)
{
	char name[96], tmp[160];
	struct stat sb;
	int dfd = -1, fd = -1;
	if (!c || s->pid <= 0)
		return;
	if (c->nput < COPIES_MAX)
		c->put[c->nput++] = (struct copy_key){s->pid, s->start_time};
	struct prof_file *img = malloc(sizeof(*img));
	if (!img || crux_shm_open_dir(c->dir, true, &dfd, NULL, 0) != CRUX_OK)
		goto out;
	copy_image(c, s, img);
	crux_prof_name(s->pid, s->start_time, name, sizeof(name));
	fd = openat(dfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
	    !(sb.st_mode & (S_IWGRP | S_IWOTH)) && (size_t)sb.st_size == sizeof(*img)) {
		/* In place, under the seqlock protocol: readers never take a torn copy. */
		uint64_t odd = 2 * c->pass - 1;
		const size_t offs[2] = {offsetof(struct prof_file, compute),
					offsetof(struct prof_file, net)};
		const size_t lens[2] = {sizeof(img->compute), sizeof(img->net)};
		bool ok = crux_put(fd, &img->id, sizeof(img->id), offsetof(struct prof_file, id));
		for (int k = 0; k < 2 && ok; k++)
			ok = crux_put(fd, &odd, sizeof(odd), offs[k]) &&
			     crux_put(fd, (char *)img + offs[k] + 8, lens[k] - 8, offs[k] + 8) &&
			     crux_put(fd, (char *)img + offs[k], 8, offs[k]);
		ok = ok && crux_put(fd, &img->hdr, sizeof(img->hdr), 0);
		if (!ok)
			crux_log_once(&c->said, CRUX_LOG_WARN, "cannot write %s/%s: %s", c->dir,
				      name, strerror(errno));
		goto out;
	}
	if (fd >= 0)
		close(fd);
	/* Missing or damaged: a whole new file under a private name, renamed over. */
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%s", (int)getpid(), name);
	unlinkat(dfd, tmp, 0);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || fchmod(fd, 0644) != 0 || !crux_put(fd, img, sizeof(*img), 0) ||
	    renameat(dfd, tmp, dfd, name) != 0) {
		crux_log_once(&c->said, CRUX_LOG_WARN, "cannot write %s/%s: %s", c->dir, name,
			      strerror(errno));
		unlinkat(dfd, tmp, 0);
	}
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(img);
}

static bool copy_was_put(const struct crux_prof_copies *c, pid_t pid, uint64_t start)
{
	for (uint32_t i = 0; i < c->nput; i++)
		if (c->put[i].pid == pid && c->put[i].start == start)
			return true;
	return false;
}

/* Remove what is not a copy put this pass ('all': everything). */
static void copies_sweep(struct crux_prof_copies *c, bool all)
{
	int dfd;
	if (crux_shm_open_dir(c->dir, false, &dfd, NULL, 0) != CRUX_OK)
		return;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		pid_t pid;
		uint64_t start;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!all && crux_prof_parse_name(e->d_name, &pid, &start) &&
		    (c->nput >= COPIES_MAX || copy_was_put(c, pid, start)))
			continue;
		if (unlinkat(dfd, e->d_name, 0) != 0 && errno == EISDIR)
			unlinkat(dfd, e->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

void crux_prof_copies_end(struct crux_prof_copies *c)
{
	if (c)
		copies_sweep(c, false);
}

void crux_prof_copies_close(struct crux_prof_copies *c, bool remove)
{
	if (!c)
		return;
	if (remove) {
		copies_sweep(c, true);
		rmdir(c->dir);
	}
	free(c);
}
