/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Opening the decision table's writer: a mapped file (tests, cruxctl), a
 * sealed memfd (handed out over the attach socket), or a memfd with a shadow
 * file (cruxd); each adopts a previous writer's entries when they are whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/decision.h"
#include "crux/log.h"
#include "crux/shm.h"
#include "decision_writer_int.h"

crux_status_t crux_dt_writer_open_ex(const char *dir, const struct crux_dt_settings *settings,
				     struct crux_dt_writer **out, pid_t *holder_pid, char *err,
				     size_t errlen)
{
	crux_status_t st;
	char why[512];
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	st = crux_dt_writer_new(settings, &s, &w, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_shm_dir_check_ex(dir, true, err, errlen);
	if (st != CRUX_OK)
		goto out_free;

	bool keep = false;
	for (int attempt = 0;; attempt++) {
		if (attempt == 8) {
			crux_set_err(err, errlen, "%s/%s keeps being replaced by another process",
				     dir, CRUX_DT_FILE);
			st = CRUX_ERR_BUSY;
			goto out_free;
		}
		st = crux_shm_open_ex(dir, CRUX_DT_FILE, CRUX_DT_MAGIC, CRUX_DT_VERSION,
				      sizeof(struct dt_file), true, &w->map, why, sizeof(why));
		keep = st == CRUX_OK;
		if (st == CRUX_ERR_NOENT) {
			st = crux_shm_create_ex(dir, CRUX_DT_FILE, CRUX_DT_MAGIC, CRUX_DT_VERSION,
						sizeof(struct dt_file), 0644, true,
						crux_dt_init_file, &s, &w->map, why, sizeof(why));
			if (st == CRUX_ERR_EXIST)
				continue; /* another writer created it: open theirs */
		} else if (st == CRUX_ERR_CORRUPT || st == CRUX_ERR_VERSION) {
			crux_warn("%s; replacing it with an empty table", why);
			st = crux_shm_create_ex(dir, CRUX_DT_FILE, CRUX_DT_MAGIC, CRUX_DT_VERSION,
						sizeof(struct dt_file), 0644, false,
						crux_dt_init_file, &s, &w->map, why, sizeof(why));
		}
		if (st != CRUX_OK) {
			crux_set_err(err, errlen, "%s", why);
			goto out_free;
		}
		if (flock(w->map.fd, LOCK_EX | LOCK_NB) != 0) {
			int e = errno;
			if (e == EWOULDBLOCK) {
				pid_t holder = crux_dt_holder_of_map(&w->map);
				if (holder_pid)
					*holder_pid = holder;
				if (holder > 0)
					crux_set_err(
					    err, errlen,
					    "%s is held by another writer (pid %d); stop it "
					    "first (cruxd, or a running cruxctl)",
					    w->map.path, (int)holder);
				else
					crux_set_err(err, errlen, "%s is held by another writer",
						     w->map.path);
				st = CRUX_ERR_BUSY;
			} else {
				crux_set_err(err, errlen, "cannot lock %s: %s", w->map.path,
					     strerror(e));
				st = CRUX_ERR_IO;
			}
			goto out_unmap;
		}
		if (crux_dt_still_named_fd(w->map.fd, w->map.path))
			break;
		crux_shm_unmap(&w->map);
	}
	w->f = w->map.base;
	crux_dt_writer_finish(w, keep, &s);
	*out = w;
	return CRUX_OK;

out_unmap:
	crux_shm_unmap(&w->map);
out_free:
	crux_dt_writer_free_bare(w);
	return st;
}

crux_status_t crux_dt_writer_open_memfd(const struct crux_dt_settings *settings,
					struct crux_dt_writer **out, char *err, size_t errlen)
{
	crux_status_t st;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	st = crux_dt_writer_new(settings, &s, &w, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_memfd_create("crux-decision", CRUX_DT_MAGIC, CRUX_DT_VERSION,
			       sizeof(struct dt_file), CRUX_SEALS_TABLE, crux_dt_init_file, &s,
			       &w->map, err, errlen);
	if (st != CRUX_OK)
		goto out_free;
	w->f = w->map.base;
	crux_dt_writer_finish(w, false, &s);
	*out = w;
	return CRUX_OK;

out_free:
	crux_dt_writer_free_bare(w);
	return st;
}

crux_status_t crux_dt_writer_open(const char *dir, const struct crux_dt_settings *settings,
				  struct crux_dt_writer **out, pid_t *holder_pid)
{
	char err[512];
	crux_status_t st = crux_dt_writer_open_ex(dir, settings, out, holder_pid, err, sizeof(err));
	if (st != CRUX_OK)
		crux_err("%s", err);
	return st;
}

/*
 * A new table file holding the memfd's whole image, locked before it is
 * published under its name (link when none exists, rename over a bad one):
 * written with pwrite, never mapped. CRUX_ERR_EXIST when another writer
 * created one first.
 */
static crux_status_t shadow_create(struct crux_dt_writer *w, int dfd, bool replace, char *err,
				   size_t errlen)
{
	char tmp[128];
	int fd = -1;
	for (unsigned i = 0; i < 64; i++) {
		snprintf(tmp, sizeof(tmp), ".tmp-%d-%ld-%u-%s", (int)getpid(),
			 (long)syscall(SYS_gettid), i, CRUX_DT_FILE);
		fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		crux_set_err(err, errlen, "cannot create a file in %s: %s", w->shadow_dir,
			     strerror(errno));
		return errno == EACCES || errno == EPERM || errno == EROFS ? CRUX_ERR_PERM
									   : CRUX_ERR_IO;
	}
	crux_status_t st = CRUX_OK;
	if (fchmod(fd, 0644) != 0 || pwrite(fd, w->f, sizeof(*w->f), 0) != (ssize_t)sizeof(*w->f) ||
	    flock(fd, LOCK_EX | LOCK_NB) != 0) {
		crux_set_err(err, errlen, "cannot write %s: %s", w->shadow_path, strerror(errno));
		st = CRUX_ERR_IO;
	} else if (replace ? renameat(dfd, tmp, dfd, CRUX_DT_FILE) != 0
			   : linkat(dfd, tmp, dfd, CRUX_DT_FILE, 0) != 0) {
		st = errno == EEXIST ? CRUX_ERR_EXIST : CRUX_ERR_IO;
		crux_set_err(err, errlen, "cannot create %s: %s", w->shadow_path, strerror(errno));
	}
	unlinkat(dfd, tmp, 0); /* after link(): the extra name; after rename(): gone already */
	if (st != CRUX_OK) {
		close(fd);
		return st;
	}
	w->shadow_fd = fd;
	return CRUX_OK;
}

static crux_status_t open_shadow(const char *dir, const struct crux_dt_settings *settings,
				 struct crux_dt_writer **out, pid_t *holder_pid, int tries,
				 char *err, size_t errlen)
{
	crux_status_t st;
	char why[512];
	int dfd = -1;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	st = crux_dt_writer_new(settings, &s, &w, err, errlen);
	if (st != CRUX_OK)
		return st;
	if ((size_t)snprintf(w->shadow_path, sizeof(w->shadow_path), "%s/%s", dir, CRUX_DT_FILE) >=
	    sizeof(w->shadow_path)) {
		crux_set_err(err, errlen, "directory name %s is too long", dir);
		st = CRUX_ERR_INVAL;
		goto out_free;
	}
	snprintf(w->shadow_dir, sizeof(w->shadow_dir), "%s", dir);
	st = crux_shm_open_dir(dir, true, &dfd, err, errlen);
	if (st != CRUX_OK)
		goto out_free;
	st = crux_memfd_create("crux-decision", CRUX_DT_MAGIC, CRUX_DT_VERSION,
			       sizeof(struct dt_file), CRUX_SEALS_TABLE, crux_dt_init_file, &s,
			       &w->map, err, errlen);
	if (st != CRUX_OK)
		goto out_free;
	w->f = w->map.base;

	/*
	 * The file is opened, locked and read with pread, never mapped: whatever
	 * is done to it cannot fault the writer. Its entries are adopted when it
	 * is a whole table of this layout.
	 */
	bool keep = false, need_file = false, replace = false;
	for (int attempt = 0;; attempt++) {
		int fd = -1;
		if (attempt == 8) {
			crux_set_err(err, errlen, "%s keeps being replaced by another process",
				     w->shadow_path);
			st = CRUX_ERR_BUSY;
			goto out_free;
		}
		st = crux_shm_open_checked(dir, CRUX_DT_FILE, true, &fd, NULL, 0, err, errlen);
		if (st == CRUX_ERR_NOENT) {
			need_file = true;
			break;
		}
		if (st != CRUX_OK)
			goto out_free;
		if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
			int e = errno;
			if (e == EWOULDBLOCK) {
				pid_t holder = crux_dt_holder_of_fd(fd);
				if (holder_pid)
					*holder_pid = holder;
				if (holder > 0)
					crux_set_err(
					    err, errlen,
					    "%s is held by another writer (pid %d); stop it "
					    "first (cruxd, or a running cruxctl)",
					    w->shadow_path, (int)holder);
				else
					crux_set_err(err, errlen, "%s is held by another writer",
						     w->shadow_path);
				st = CRUX_ERR_BUSY;
			} else {
				crux_set_err(err, errlen, "cannot lock %s: %s", w->shadow_path,
					     strerror(e));
				st = CRUX_ERR_IO;
			}
			close(fd);
			goto out_free;
		}
		if (!crux_dt_still_named_fd(fd, w->shadow_path)) {
			close(fd);
			continue;
		}
		/* We hold the lock: a copy of a whole table is taken at once. */
		st = crux_dt_copy_from_fd(fd, dir, w->f, 200, why, sizeof(why));
		if (st == CRUX_OK) {
			keep = true;
			w->shadow_fd = fd;
		} else {
			crux_warn("%s; replacing it with an empty table", why);
			close(fd);
			need_file = replace = true;
		}
		break;
	}
	if (!keep) { /* nothing adopted: a fresh image (the copy may have left a partial one) */
		memset(w->f, 0, sizeof(*w->f));
		w->f->hdr.magic = CRUX_DT_MAGIC;
		w->f->hdr.layout_version = CRUX_DT_VERSION;
		w->f->hdr.header_size = sizeof(w->f->hdr);
		w->f->hdr.total_size = sizeof(*w->f);
		crux_dt_init_file(w->f, &s);
	}
	/* writer_finish publishes into the memfd only while shadow_fd is not set. */
	int fd_keep = w->shadow_fd;
	w->shadow_fd = -1;
	crux_dt_writer_finish(w, keep, &s);
	w->shadow_fd = fd_keep;
	if (need_file) {
		st = shadow_create(w, dfd, replace, why, sizeof(why));
		if (st == CRUX_ERR_EXIST && tries > 0) {
			/* Another writer made one meanwhile: open it, its lock decides. */
			close(dfd);
			crux_dt_writer_close(w);
			return open_shadow(dir, settings, out, holder_pid, tries - 1, err, errlen);
		}
		if (st != CRUX_OK) {
			crux_set_err(err, errlen, "%s", why);
			goto out_free;
		}
	} else {
		crux_dt_shadow_rewrite(w); /* the whole image, with our header and settings */
	}
	close(dfd);
	*out = w;
	return CRUX_OK;

out_free:
	if (dfd >= 0)
		close(dfd);
	if (w->shadow_fd >= 0)
		close(w->shadow_fd);
	if (w->map.base)
		crux_shm_unmap(&w->map);
	crux_dt_writer_free_bare(w);
	return st;
}

crux_status_t crux_dt_writer_open_shadow(const char *dir, const struct crux_dt_settings *settings,
					 struct crux_dt_writer **out, pid_t *holder_pid, char *err,
					 size_t errlen)
{
	return open_shadow(dir, settings, out, holder_pid, 8, err, errlen);
}
