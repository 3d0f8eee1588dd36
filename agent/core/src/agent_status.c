/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's status record file. */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crux/agent_status.h"
#include "crux/log.h"

/*
 * The agent keeps the record in private memory and only writes the file
 * (pwrite under the record's seqlock protocol), never maps it: whatever
 * anyone does to the file cannot fault cruxd. A removed, replaced or
 * resized file is written anew, whole.
 */
struct cruxd_status_writer {
	struct cruxd_status_file *f; /* private image */
	int fd;
	char dir[CRUX_PATH_MAX];
	char path[CRUX_PATH_MAX + 32];
	int said;
};

static bool put(struct cruxd_status_writer *w, const void *p, size_t len, size_t off)
{
	return pwrite(w->fd, p, len, (off_t)off) == (ssize_t)len;
}

/* A fresh file under the name (atomic replace), written whole from the image. */
static crux_status_t recreate(struct cruxd_status_writer *w)
{
	struct crux_shm_map m;
	crux_status_t st = crux_shm_create(w->dir, CRUXD_STATUS_FILE, CRUXD_STATUS_MAGIC,
					   CRUXD_STATUS_VERSION, sizeof(*w->f), 0644, false, &m);
	if (st != CRUX_OK)
		return st;
	if (!w->f->hdr.magic)
		memcpy(&w->f->hdr, m.base, sizeof(w->f->hdr)); /* first time: its header */
	munmap(m.base, m.size);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = m.fd;
	return put(w, w->f, sizeof(*w->f), 0) ? CRUX_OK : CRUX_ERR_IO;
}

/* Is the file still ours and whole? Else write it anew. */
static bool file_ok(struct cruxd_status_writer *w)
{
	struct stat a, b;
	if (fstat(w->fd, &a) == 0 && lstat(w->path, &b) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino && (size_t)a.st_size == sizeof(*w->f))
		return true;
	if (recreate(w) != CRUX_OK)
		crux_log_once(&w->said, CRUX_LOG_WARN, "cannot rewrite %s: %s", w->path,
			      strerror(errno));
	else
		crux_warn("%s was removed, replaced or resized: written anew", w->path);
	return false;
}

crux_status_t cruxd_status_writer_open(const char *dir, struct cruxd_status_writer **out)
{
	struct cruxd_status_writer *w = calloc(1, sizeof(*w));
	crux_status_t st;

	if (!w)
		return CRUX_ERR_NOMEM;
	w->fd = -1;
	w->f = calloc(1, sizeof(*w->f));
	if (!w->f) {
		free(w);
		return CRUX_ERR_NOMEM;
	}
	snprintf(w->dir, sizeof(w->dir), "%s", dir);
	snprintf(w->path, sizeof(w->path), "%s/%s", dir, CRUXD_STATUS_FILE);
	st = recreate(w);
	if (st != CRUX_OK) {
		if (w->fd >= 0)
			close(w->fd);
		free(w->f);
		free(w);
		return st;
	}
	*out = w;
	return CRUX_OK;
}

void cruxd_status_heartbeat(struct cruxd_status_writer *w)
{
	uint64_t now = crux_now_ns();
	atomic_store_explicit(&w->f->hdr.heartbeat_ns, now, memory_order_relaxed);
	if (file_ok(w))
		put(w, &now, sizeof(now), offsetof(struct crux_shm_header, heartbeat_ns));
}

void cruxd_status_publish(struct cruxd_status_writer *w, const struct cruxd_status_body *b)
{
	struct cruxd_status_file *f = w->f;
	uint32_t nj = b->njobs < CRUXD_STATUS_MAX_JOBS ? b->njobs : CRUXD_STATUS_MAX_JOBS;
	uint32_t np = b->npeers < CRUXD_STATUS_MAX_PEERS ? b->npeers : CRUXD_STATUS_MAX_PEERS;

	crux_seq_write_begin(&f->seq);
	memcpy(&f->body, b, offsetof(struct cruxd_status_body, jobs));
	f->body.njobs = nj;
	f->body.npeers = np;
	memcpy(f->body.jobs, b->jobs, nj * sizeof(b->jobs[0]));
	memcpy(f->body.peers, b->peers, np * sizeof(b->peers[0]));
	crux_seq_write_end(&f->seq);
	atomic_fetch_add_explicit(&f->hdr.generation, 1, memory_order_relaxed);
	if (file_ok(w)) {
		/* Readers map the file: odd counter, body, even counter, as in memory. */
		uint64_t q = atomic_load(&f->seq), odd = q - 1;
		size_t so = offsetof(struct cruxd_status_file, seq);
		if (!put(w, &odd, sizeof(odd), so) ||
		    !put(w, &f->body, sizeof(f->body), offsetof(struct cruxd_status_file, body)) ||
		    !put(w, &q, sizeof(q), so) || !put(w, &f->hdr, sizeof(f->hdr), 0))
			crux_log_once(&w->said, CRUX_LOG_WARN, "cannot write %s: %s", w->path,
				      strerror(errno));
	}
	cruxd_status_heartbeat(w);
}

void cruxd_status_writer_close(struct cruxd_status_writer *w, bool remove)
{
	struct stat a, b;

	if (!w)
		return;
	/* Remove the file only if it is still ours. */
	if (remove && fstat(w->fd, &a) == 0 && lstat(w->path, &b) == 0 && a.st_ino == b.st_ino &&
	    a.st_dev == b.st_dev)
		unlink(w->path);
	close(w->fd);
	free(w->f);
	free(w);
}

crux_status_t cruxd_status_read(const char *dir, struct cruxd_status_body *out,
				uint64_t *heartbeat_ns)
{
	struct crux_shm_map map;
	struct cruxd_status_file *f;
	crux_status_t st;

	/* Opened for its checks only; read with pread (a mapping could fault us). */
	st = crux_shm_open(dir, CRUXD_STATUS_FILE, CRUXD_STATUS_MAGIC, CRUXD_STATUS_VERSION,
			   sizeof(struct cruxd_status_file), false, &map);
	if (st != CRUX_OK)
		return st;
	/* C11: the size must be a multiple of the alignment (ASan enforces it). */
	f = aligned_alloc(64, (sizeof(*f) + 63) / 64 * 64);
	st = f ? CRUX_ERR_BUSY : CRUX_ERR_NOMEM;
	for (int t = 0; t < 200 && st == CRUX_ERR_BUSY; t++) {
		struct stat sb;
		uint64_t q;
		if (fstat(map.fd, &sb) != 0 || (size_t)sb.st_size != sizeof(*f) ||
		    pread(map.fd, f, sizeof(*f), 0) != (ssize_t)sizeof(*f)) {
			st = CRUX_ERR_CORRUPT;
			break;
		}
		/* The seqlock's closing check, for a copy: the counter must not have moved. */
		if (pread(map.fd, &q, sizeof(q), offsetof(struct cruxd_status_file, seq)) !=
			(ssize_t)sizeof(q) ||
		    q != atomic_load(&f->seq) || (q & 1u)) {
			usleep(1000);
			continue;
		}
		memcpy(out, &f->body, sizeof(*out));
		st = CRUX_OK;
	}
	if (st == CRUX_OK) {
		if (out->njobs > CRUXD_STATUS_MAX_JOBS || out->npeers > CRUXD_STATUS_MAX_PEERS ||
		    out->nlevels > CRUX_MAX_LEVELS) {
			st = CRUX_ERR_CORRUPT;
		} else {
			out->topology[sizeof(out->topology) - 1] = '\0';
			out->overrides_error[sizeof(out->overrides_error) - 1] = '\0';
			for (uint32_t i = 0; i < out->njobs; i++)
				out->jobs[i].job_id[CRUX_JOB_ID_LEN - 1] = '\0';
			if (heartbeat_ns)
				*heartbeat_ns = atomic_load_explicit(&f->hdr.heartbeat_ns,
								     memory_order_acquire);
		}
	}
	free(f);
	crux_shm_unmap(&map);
	return st;
}
