/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decision table readers that never map the file (contract v1 and cruxctl):
 * validated pread copies, and the mirror that refreshes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/decision.h"
#include "crux/shm.h"
#include "decision_layout.h"

/*
 * The seqlock's closing check, for a copy: the counters and indexes the copy
 * holds must still be in the file after it was read.
 */
static bool copy_still_current(int fd, const struct dt_file *c)
{
	struct dt_top top;
	uint64_t gen, q[2];
	for (int i = 0; i < 2; i++)
		if (pread(fd, &q[i], sizeof(q[i]),
			  (off_t)(offsetof(struct dt_file, bank) +
				  (size_t)i * sizeof(struct dt_bank))) != (ssize_t)sizeof(q[i]))
			return false;
	if (pread(fd, &top, sizeof(top), (off_t)offsetof(struct dt_file, top)) !=
		(ssize_t)sizeof(top) ||
	    pread(fd, &gen, sizeof(gen),
		  (off_t)(offsetof(struct dt_file, hdr) +
			  offsetof(struct crux_shm_header, generation))) != (ssize_t)sizeof(gen))
		return false;
	return q[0] == atomic_load(&c->bank[0].seq) && q[1] == atomic_load(&c->bank[1].seq) &&
	       !(q[0] & 1u) && !(q[1] & 1u) &&
	       atomic_load(&top.active) == atomic_load(&c->top.active) &&
	       gen == atomic_load(&c->hdr.generation);
}

/*
 * Why the file on 'fd' (of st_size 'size') is not a table of this layout:
 * the header's own complaint (magic, layout version) when it has one.
 */
static crux_status_t copy_refusal(int fd, long long size, const char *dir, char *err, size_t errlen)
{
	struct crux_shm_header h;
	char why[256];
	crux_status_t st = CRUX_ERR_CORRUPT;
	if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h))
		st =
		    crux_shm_validate_ex(&h, sizeof(struct dt_file), CRUX_DT_MAGIC, CRUX_DT_VERSION,
					 sizeof(struct dt_file), why, sizeof(why));
	if (st == CRUX_OK || st == CRUX_ERR_CORRUPT)
		snprintf(why, sizeof(why),
			 "%lld bytes, this layout needs %zu (truncated, resized or not a table)",
			 size, sizeof(struct dt_file));
	/* The version message carries its own fix. */
	crux_set_err(err, errlen, "%s/%s is not a usable decision table: %s%s", dir, CRUX_DT_FILE,
		     why,
		     st == CRUX_ERR_VERSION ? "" : "; fix: restart cruxd (it rewrites the table)");
	return st == CRUX_ERR_VERSION ? CRUX_ERR_VERSION : CRUX_ERR_CORRUPT;
}

crux_status_t crux_dt_copy_from_fd(int fd, const char *dir, struct dt_file *buf, int tries,
				   char *err, size_t errlen)
{
	struct stat sb;
	crux_status_t st = CRUX_ERR_BUSY;
	for (int t = 0; t < tries && st == CRUX_ERR_BUSY; t++) {
		if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			crux_set_err(err, errlen,
				     "%s/%s is not a regular file; fix: restart cruxd "
				     "(it rewrites the table)",
				     dir, CRUX_DT_FILE);
			return CRUX_ERR_CORRUPT;
		}
		if ((size_t)sb.st_size != sizeof(*buf) ||
		    pread(fd, buf, sizeof(*buf), 0) != (ssize_t)sizeof(*buf))
			return copy_refusal(fd, (long long)sb.st_size, dir, err, errlen);
		char why[256];
		/* The closing check right after the copy: the window is the pread alone. */
		if (!copy_still_current(fd, buf))
			st = CRUX_ERR_BUSY; /* the writer moved while we copied */
		else
			st = crux_dt_validate_mapped(buf, sizeof(*buf), why, sizeof(why));
		if (st == CRUX_ERR_BUSY && t + 1 < tries)
			usleep(1000);
		else if (st != CRUX_OK && st != CRUX_ERR_BUSY)
			crux_set_err(err, errlen, "%s/%s: %s", dir, CRUX_DT_FILE, why);
	}
	if (st == CRUX_ERR_BUSY)
		crux_set_err(err, errlen, "%s/%s: the writer kept it busy", dir, CRUX_DT_FILE);
	return st;
}

/* The table file, opened for reading (never mapped). */
static crux_status_t open_table_file(const char *dir, int *fd_out, char *err, size_t errlen)
{
	int dfd = -1;
	crux_status_t st = crux_shm_open_dir(dir, false, &dfd, err, errlen);
	if (st != CRUX_OK)
		return st;
	int fd = openat(dfd, CRUX_DT_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int e = errno;
	close(dfd);
	if (fd < 0) {
		if (e == ENOENT)
			crux_set_err(err, errlen, "%s/%s does not exist", dir, CRUX_DT_FILE);
		else if (e == ELOOP) /* cruxd refuses it too: the link must go */
			crux_set_err(
			    err, errlen,
			    "%s/%s is a symbolic link; refusing to follow it; fix: rm %s/%s "
			    "(the link only; cruxd writes a new table)",
			    dir, CRUX_DT_FILE, dir, CRUX_DT_FILE);
		else
			crux_set_err(err, errlen, "cannot open %s/%s: %s", dir, CRUX_DT_FILE,
				     strerror(e));
		return e == ENOENT ? CRUX_ERR_NOENT : CRUX_ERR_PERM;
	}
	*fd_out = fd;
	return CRUX_OK;
}

crux_status_t crux_dt_reader_open_copy(const char *dir, struct crux_dt_reader **out, char *err,
				       size_t errlen)
{
	int fd = -1;
	crux_status_t st = open_table_file(dir, &fd, err, errlen);
	if (st != CRUX_OK)
		return st;
	void *bm = NULL;
	struct dt_file *buf = posix_memalign(&bm, 64, sizeof(*buf)) == 0 ? bm : NULL;
	if (!buf) {
		close(fd);
		return CRUX_ERR_NOMEM;
	}
	st = crux_dt_copy_from_fd(fd, dir, buf, 200, err, errlen);
	close(fd);
	if (st == CRUX_OK)
		st = crux_dt_reader_open_buffer(buf, sizeof(*buf), out, err, errlen);
	if (st != CRUX_OK) {
		free(buf);
		return st;
	}
	(*out)->owned = buf;
	return CRUX_OK;
}

/* ---- v1 readers: private copies refreshed with pread ---- */

#define DT_MIRROR_COPIES 3

struct crux_dt_mirror {
	char dir[CRUX_PATH_MAX];
	int cur;		     /* the copy in use; -1 before the first */
	struct crux_shm_header last; /* the file's header when copy 'cur' was taken */
	struct crux_dt_reader rd[DT_MIRROR_COPIES];
	struct dt_file *buf[DT_MIRROR_COPIES];
};

void crux_dt_mirror_close(struct crux_dt_mirror *m)
{
	if (!m)
		return;
	for (int i = 0; i < DT_MIRROR_COPIES; i++)
		free(m->buf[i]);
	free(m);
}

bool crux_dt_mirror_owns(const struct crux_dt_mirror *m, const struct crux_dt_reader *r)
{
	return m && r && r >= &m->rd[0] && r < &m->rd[DT_MIRROR_COPIES];
}

/* Same writer, same contents: only the heartbeat may differ. */
static bool same_contents(const struct crux_shm_header *a, const struct crux_shm_header *b)
{
	return a->magic == b->magic && a->layout_version == b->layout_version &&
	       a->total_size == b->total_size && a->writer_pid == b->writer_pid &&
	       a->writer_start_time == b->writer_start_time &&
	       atomic_load(&a->generation) == atomic_load(&b->generation);
}

crux_status_t crux_dt_mirror_refresh(struct crux_dt_mirror *m, struct crux_dt_reader **out,
				     char *err, size_t errlen)
{
	struct crux_shm_header h[2];
	struct stat sb;
	int fd = -1;
	crux_status_t st = open_table_file(m->dir, &fd, err, errlen);
	if (st != CRUX_OK)
		return st;
	/* Two equal header reads: no pwrite of the header was under way. */
	bool hdr_ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
		      (size_t)sb.st_size == sizeof(struct dt_file) &&
		      pread(fd, &h[0], sizeof(h[0]), 0) == (ssize_t)sizeof(h[0]) &&
		      pread(fd, &h[1], sizeof(h[1]), 0) == (ssize_t)sizeof(h[1]) &&
		      memcmp(&h[0], &h[1], sizeof(h[0])) == 0;
	if (m->cur >= 0 && hdr_ok && same_contents(&h[0], &m->last)) {
		/* Nothing new but the heartbeat: a single atomic store into the copy in use. */
		atomic_store_explicit(&m->buf[m->cur]->hdr.heartbeat_ns,
				      atomic_load(&h[0].heartbeat_ns), memory_order_relaxed);
		close(fd);
		*out = &m->rd[m->cur];
		return CRUX_OK;
	}
	/*
	 * A new copy into a buffer no reader has used since the copy before last;
	 * a busy writer is not waited for (the caller may be a data path): the
	 * next refresh tries again.
	 */
	int next = (m->cur + 1) % DT_MIRROR_COPIES;
	st = crux_dt_copy_from_fd(fd, m->dir, m->buf[next], 3, err, errlen);
	close(fd);
	if (st != CRUX_OK)
		return st;
	memcpy(&m->last, &m->buf[next]->hdr, sizeof(m->last));
	m->cur = next;
	*out = &m->rd[next];
	return CRUX_OK;
}

crux_status_t crux_dt_mirror_open(const char *dir, struct crux_dt_mirror **out,
				  struct crux_dt_reader **reader, char *err, size_t errlen)
{
	struct crux_dt_mirror *m = calloc(1, sizeof(*m));
	crux_status_t st;
	if (!m)
		return CRUX_ERR_NOMEM;
	if (strlen(dir) >= sizeof(m->dir)) {
		free(m);
		crux_set_err(err, errlen, "directory name %s is too long", dir);
		return CRUX_ERR_INVAL;
	}
	snprintf(m->dir, sizeof(m->dir), "%s", dir);
	m->cur = -1;
	for (int i = 0; i < DT_MIRROR_COPIES; i++) {
		void *bm = NULL;
		if (posix_memalign(&bm, 64, sizeof(struct dt_file)) != 0) {
			crux_dt_mirror_close(m);
			return CRUX_ERR_NOMEM;
		}
		m->buf[i] = bm;
		m->rd[i].map.fd = -1; /* the mirror owns the buffer */
		m->rd[i].f = bm;
	}
	st = crux_dt_mirror_refresh(m, reader, err, errlen);
	for (int t = 0; st == CRUX_ERR_BUSY && t < 10; t++) /* the first copy: worth a few ms */
		st = crux_dt_mirror_refresh(m, reader, err, errlen);
	if (st != CRUX_OK) {
		crux_dt_mirror_close(m);
		return st;
	}
	*out = m;
	return CRUX_OK;
}
