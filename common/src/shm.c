/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/log.h"
#include "crux/shm.h"

_Static_assert(sizeof(struct crux_shm_header) == 64, "the record header is 64 bytes");

crux_status_t crux_shm_dir(crux_getenv_fn fn, void *arg, char *buf, size_t len)
{
	const char *v = crux_env_get(fn, arg, "CRUX_SHM_DIR");
	char shown[CRUX_ENV_SHOWN_LEN];
	if (!v)
		v = CRUX_SHM_DIR_DEFAULT;
	size_t n = strlen(v);
	/* Trailing slashes would make "dir//name": drop them, keep "/" itself. */
	while (n > 1 && v[n - 1] == '/')
		n--;
	/* DIR/cruxd.sock fits a socket address; "/" + the longest record name
	 * we build fits CRUX_PATH_MAX. */
	_Static_assert(CRUX_SHM_DIR_MAX + 1 + 96 <= CRUX_PATH_MAX, "record paths fit");
	if (v[0] != '/' || n > CRUX_SHM_DIR_MAX || n + 1 > len) {
		crux_env_quote(v, shown, sizeof(shown));
		crux_err("CRUX_SHM_DIR='%s' is not valid: expected an absolute path of at most %d "
			 "characters (default " CRUX_SHM_DIR_DEFAULT ")",
			 shown, CRUX_SHM_DIR_MAX);
		return CRUX_ERR_INVAL;
	}
	memcpy(buf, v, n);
	buf[n] = '\0';
	return CRUX_OK;
}

/* The checks on an open directory; 'dir' only names it in messages. */
static crux_status_t check_dir_stat(const char *dir, const struct stat *st, char *err,
				    size_t errlen)
{
	/*
	 * Removing is advice only for our own default path: a CRUX_SHM_DIR that
	 * names someone else's file (/etc/passwd) gets "choose another", never rm.
	 */
	bool ours = !strcmp(dir, CRUX_SHM_DIR_DEFAULT);
	if (S_ISLNK(st->st_mode)) {
		if (ours)
			crux_set_err(
			    err, errlen,
			    "%s is a symbolic link, which could point anywhere; fix: remove "
			    "it (rm %s) so cruxd recreates a real directory, or set "
			    "CRUX_SHM_DIR",
			    dir, dir);
		else
			crux_set_err(
			    err, errlen,
			    "CRUX_SHM_DIR=%s is a symbolic link, which could point anywhere; "
			    "fix: set CRUX_SHM_DIR to the real directory (or unset it for "
			    "the default " CRUX_SHM_DIR_DEFAULT ")",
			    dir);
		return CRUX_ERR_PERM;
	}
	if (!S_ISDIR(st->st_mode)) {
		if (ours)
			crux_set_err(err, errlen,
				     "%s is not a directory; fix: remove it (rm %s) or set "
				     "CRUX_SHM_DIR to a directory",
				     dir, dir);
		else
			crux_set_err(err, errlen,
				     "CRUX_SHM_DIR=%s is not a directory; fix: set CRUX_SHM_DIR to "
				     "a directory for Crux (or unset it for the "
				     "default " CRUX_SHM_DIR_DEFAULT ")",
				     dir);
		return CRUX_ERR_PERM;
	}
	uid_t me = geteuid();
	if (st->st_uid != 0 && st->st_uid != me) {
		crux_set_err(
		    err, errlen,
		    "%s is owned by uid %u, neither root nor this user (uid %u), who could "
		    "replace the records in it; fix: chown %u %s, or set CRUX_SHM_DIR to a "
		    "directory of this user",
		    dir, (unsigned)st->st_uid, (unsigned)me, (unsigned)me, dir);
		return CRUX_ERR_PERM;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		crux_set_err(err, errlen,
			     "%s is writable by group or others (mode %04o), so anyone could "
			     "replace the records in it; fix: chmod 755 %s",
			     dir, (unsigned)(st->st_mode & 07777), dir);
		return CRUX_ERR_PERM;
	}
	return CRUX_OK;
}

crux_status_t crux_shm_dir_check_ex(const char *dir, bool create, char *err, size_t errlen)
{
	struct stat st;
	if (!dir || dir[0] != '/') {
		crux_set_err(err, errlen, "shared-memory directory '%s' is not an absolute path",
			     dir ? dir : "(null)");
		return CRUX_ERR_INVAL;
	}
	if (lstat(dir, &st) != 0) {
		if (errno != ENOENT) {
			crux_set_err(err, errlen, "cannot inspect %s: %s", dir, strerror(errno));
			return errno == EACCES ? CRUX_ERR_PERM : CRUX_ERR_IO;
		}
		if (!create) {
			crux_set_err(err, errlen,
				     "%s does not exist (is cruxd running? it creates it)", dir);
			return CRUX_ERR_NOENT;
		}
		if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
			crux_set_err(err, errlen,
				     "cannot create %s: %s; fix: create its parent directory or "
				     "set CRUX_SHM_DIR",
				     dir, strerror(errno));
			return errno == EACCES ? CRUX_ERR_PERM : CRUX_ERR_IO;
		}
		if (lstat(dir, &st) != 0) {
			crux_set_err(err, errlen, "cannot inspect %s: %s", dir, strerror(errno));
			return CRUX_ERR_IO;
		}
		/* The umask may have taken read/search bits that readers need. */
		if (S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 07777) != 0755 &&
		    chmod(dir, 0755) == 0)
			st.st_mode = (st.st_mode & ~07777u) | 0755;
	}
	return check_dir_stat(dir, &st, err, errlen);
}

crux_status_t crux_shm_dir_check(const char *dir, bool create)
{
	char err[512];
	crux_status_t st = crux_shm_dir_check_ex(dir, create, err, sizeof(err));
	if (st == CRUX_ERR_NOENT)
		crux_debug("%s", err);
	else if (st != CRUX_OK)
		crux_err("%s", err);
	return st;
}

/* Open the directory itself and check what was opened (no race with a swap). */
crux_status_t crux_shm_open_dir(const char *dir, bool create, int *dfd_out, char *err,
				size_t errlen)
{
	crux_status_t st = crux_shm_dir_check_ex(dir, create, err, errlen);
	if (st != CRUX_OK)
		return st;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		crux_set_err(err, errlen, "cannot open directory %s: %s", dir, strerror(errno));
		return errno == ELOOP || errno == ENOTDIR ? CRUX_ERR_PERM : CRUX_ERR_IO;
	}
	struct stat sb;
	if (fstat(dfd, &sb) != 0) {
		crux_set_err(err, errlen, "cannot inspect %s: %s", dir, strerror(errno));
		close(dfd);
		return CRUX_ERR_IO;
	}
	st = check_dir_stat(dir, &sb, err, errlen);
	if (st != CRUX_OK) {
		close(dfd);
		return st;
	}
	*dfd_out = dfd;
	return CRUX_OK;
}

static bool name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	return n > 0 && n <= 80 && !strchr(name, '/') && strcmp(name, ".") != 0 &&
	       strcmp(name, "..") != 0;
}

/* Magic, version and header size of a header copy (no size checks). */
static crux_status_t header_check(const struct crux_shm_header *h, uint32_t magic,
				  uint16_t layout_version, char *err, size_t errlen)
{
	if (h->magic != magic) {
		crux_set_err(err, errlen,
			     "wrong magic 0x%08x (expected 0x%08x): not a record of "
			     "this kind",
			     h->magic, magic);
		return CRUX_ERR_CORRUPT;
	}
	if (h->layout_version != layout_version) {
		crux_set_err(err, errlen,
			     "layout version %u, but this build reads version %u (components of "
			     "different Crux versions); fix: run the same version everywhere",
			     (unsigned)h->layout_version, (unsigned)layout_version);
		return CRUX_ERR_VERSION;
	}
	if (h->header_size != sizeof(*h)) {
		crux_set_err(err, errlen, "header size %u, expected %zu", (unsigned)h->header_size,
			     sizeof(*h));
		return CRUX_ERR_CORRUPT;
	}
	return CRUX_OK;
}

crux_status_t crux_shm_validate_ex(const void *buf, size_t avail, uint32_t magic,
				   uint16_t layout_version, size_t expected_size, char *err,
				   size_t errlen)
{
	struct crux_shm_header h;
	if (!buf || avail < sizeof(h)) {
		crux_set_err(err, errlen, "truncated: %zu bytes, less than the %zu-byte header",
			     avail, sizeof(h));
		return CRUX_ERR_CORRUPT;
	}
	memcpy(&h, buf, sizeof(h));
	crux_status_t st = header_check(&h, magic, layout_version, err, errlen);
	if (st != CRUX_OK)
		return st;
	if (h.total_size != expected_size) {
		crux_set_err(err, errlen, "header says %llu bytes, expected %zu",
			     (unsigned long long)h.total_size, expected_size);
		return CRUX_ERR_CORRUPT;
	}
	if (expected_size > avail) {
		crux_set_err(err, errlen, "truncated: %zu bytes, expected %zu", avail,
			     expected_size);
		return CRUX_ERR_CORRUPT;
	}
	return CRUX_OK;
}

crux_status_t crux_shm_validate(const void *buf, size_t avail, uint32_t magic,
				uint16_t layout_version, size_t expected_size)
{
	return crux_shm_validate_ex(buf, avail, magic, layout_version, expected_size, NULL, 0);
}

static crux_status_t map_fd(int fd, size_t size, bool writable, void **base, char *err,
			    size_t errlen, const char *path)
{
	void *p =
	    mmap(NULL, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		crux_set_err(err, errlen, "cannot map %s: %s", path, strerror(errno));
		return CRUX_ERR_IO;
	}
	*base = p;
	return CRUX_OK;
}

crux_status_t crux_shm_create_ex(const char *dir, const char *name, uint32_t magic,
				 uint16_t layout_version, size_t size, mode_t mode, bool exclusive,
				 crux_shm_init_fn init, void *init_arg, struct crux_shm_map *out,
				 char *err, size_t errlen)
{
	crux_status_t st;
	int dfd = -1, fd = -1;
	void *base = NULL;
	char tmp[128], path[CRUX_PATH_MAX];
	bool tmp_exists = false;

	if (!name_ok(name) || size < sizeof(struct crux_shm_header) || !out) {
		crux_set_err(err, errlen, "bad record name or size");
		return CRUX_ERR_INVAL;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path)) {
		crux_set_err(err, errlen, "path %s/%s is too long", dir, name);
		return CRUX_ERR_INVAL;
	}
	st = crux_shm_open_dir(dir, true, &dfd, err, errlen);
	if (st != CRUX_OK)
		return st;

	/* A private name per thread: two copies of this library may race in one process. */
	for (unsigned i = 0; i < 64; i++) {
		snprintf(tmp, sizeof(tmp), ".tmp-%d-%ld-%u-%s", (int)getpid(),
			 (long)syscall(SYS_gettid), i, name);
		fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		int e = errno;
		if (e == EACCES || e == EPERM || e == EROFS)
			crux_set_err(
			    err, errlen,
			    "cannot create a file in %s: %s; fix: run this process as the "
			    "user that owns %s (the agent's), or give the directory to this "
			    "user (chown %u %s)",
			    dir, strerror(e), dir, (unsigned)geteuid(), dir);
		else
			crux_set_err(err, errlen, "cannot create a file in %s: %s", dir,
				     strerror(e));
		st = (e == EACCES || e == EPERM || e == EROFS) ? CRUX_ERR_PERM : CRUX_ERR_IO;
		goto out_close;
	}
	tmp_exists = true;
	/* The umask must not decide who may read the table. */
	if (fchmod(fd, mode) != 0 || ftruncate(fd, (off_t)size) != 0) {
		crux_set_err(err, errlen, "cannot size %s: %s", path, strerror(errno));
		st = CRUX_ERR_IO;
		goto out_close;
	}
	st = map_fd(fd, size, true, &base, err, errlen, path);
	if (st != CRUX_OK)
		goto out_close;

	struct crux_shm_header *h = base;
	uint64_t start = 0;
	crux_proc_start_time(getpid(), &start);
	h->magic = magic;
	h->layout_version = layout_version;
	h->header_size = sizeof(*h);
	h->total_size = size;
	h->writer_pid = (uint32_t)getpid();
	h->writer_start_time = start;
	atomic_store(&h->generation, 0);
	atomic_store(&h->heartbeat_ns, 0);
	if (init)
		init(base, init_arg);

	/* Publish the fully initialised file under its real name in one step. */
	if (exclusive) {
		if (linkat(dfd, tmp, dfd, name, 0) != 0) {
			if (errno == EEXIST) {
				crux_set_err(err, errlen, "%s already exists", path);
				st = CRUX_ERR_EXIST;
			} else {
				crux_set_err(err, errlen, "cannot create %s: %s", path,
					     strerror(errno));
				st = errno == EACCES ? CRUX_ERR_PERM : CRUX_ERR_IO;
			}
			goto out_unmap;
		}
	} else {
		if (renameat(dfd, tmp, dfd, name) != 0) {
			crux_set_err(err, errlen, "cannot create %s: %s", path, strerror(errno));
			st = errno == EACCES ? CRUX_ERR_PERM : CRUX_ERR_IO;
			goto out_unmap;
		}
		tmp_exists = false;
	}
	if (tmp_exists)
		unlinkat(dfd, tmp, 0);
	close(dfd);
	out->base = base;
	out->size = size;
	out->fd = fd;
	out->writable = true;
	snprintf(out->path, sizeof(out->path), "%s", path);
	return CRUX_OK;

out_unmap:
	munmap(base, size);
out_close:
	if (tmp_exists)
		unlinkat(dfd, tmp, 0);
	if (fd >= 0)
		close(fd);
	close(dfd);
	return st;
}

crux_status_t crux_shm_create(const char *dir, const char *name, uint32_t magic,
			      uint16_t layout_version, size_t size, mode_t mode, bool exclusive,
			      struct crux_shm_map *out)
{
	char err[512];
	crux_status_t st = crux_shm_create_ex(dir, name, magic, layout_version, size, mode,
					      exclusive, NULL, NULL, out, err, sizeof(err));
	if (st != CRUX_OK && st != CRUX_ERR_EXIST)
		crux_err("%s", err);
	return st;
}

crux_status_t crux_shm_open_checked(const char *dir, const char *name, bool writable, int *fd_out,
				    char *path_out, size_t pathlen, char *err, size_t errlen)
{
	crux_status_t st;
	int dfd = -1, fd = -1;
	char path[CRUX_PATH_MAX];
	struct stat sb;

	if (!name_ok(name)) {
		crux_set_err(err, errlen, "bad record name");
		return CRUX_ERR_INVAL;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path)) {
		crux_set_err(err, errlen, "path %s/%s is too long", dir, name);
		return CRUX_ERR_INVAL;
	}
	if (path_out)
		snprintf(path_out, pathlen, "%s", path);
	st = crux_shm_open_dir(dir, false, &dfd, err, errlen);
	if (st != CRUX_OK)
		return st;
	/* O_NONBLOCK: a FIFO planted under the name must not hang us. */
	fd =
	    openat(dfd, name, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT) {
			crux_set_err(err, errlen, "%s does not exist", path);
			st = CRUX_ERR_NOENT;
		} else if (e == ELOOP) {
			crux_set_err(err, errlen,
				     "%s is a symbolic link; refusing to follow it; fix: rm %s",
				     path, path);
			st = CRUX_ERR_PERM;
		} else if (e == EISDIR) {
			crux_set_err(err, errlen,
				     "%s is a directory, not a record file; fix: "
				     "remove it",
				     path);
			st = CRUX_ERR_PERM;
		} else {
			crux_set_err(err, errlen, "cannot open %s: %s", path, strerror(e));
			st = (e == EACCES || e == EPERM) ? CRUX_ERR_PERM : CRUX_ERR_IO;
		}
		goto out_close;
	}
	if (fstat(fd, &sb) != 0) {
		crux_set_err(err, errlen, "cannot inspect %s: %s", path, strerror(errno));
		st = CRUX_ERR_IO;
		goto out_close;
	}
	if (!S_ISREG(sb.st_mode)) {
		crux_set_err(err, errlen, "%s is not a regular file (mode %06o); fix: rm %s", path,
			     (unsigned)sb.st_mode, path);
		st = CRUX_ERR_PERM;
		goto out_close;
	}
	if (sb.st_mode & (S_IWGRP | S_IWOTH)) {
		crux_set_err(err, errlen,
			     "%s is writable by group or others (mode %04o); fix: chmod 644 %s",
			     path, (unsigned)(sb.st_mode & 07777), path);
		st = CRUX_ERR_PERM;
		goto out_close;
	}
	if (sb.st_uid != 0 && sb.st_uid != geteuid()) {
		crux_set_err(err, errlen,
			     "%s is owned by uid %u, neither root nor this user; fix: remove it",
			     path, (unsigned)sb.st_uid);
		st = CRUX_ERR_PERM;
		goto out_close;
	}
	close(dfd);
	*fd_out = fd;
	return CRUX_OK;

out_close:
	if (fd >= 0)
		close(fd);
	close(dfd);
	return st;
}

crux_status_t crux_shm_open_ex(const char *dir, const char *name, uint32_t magic,
			       uint16_t layout_version, size_t size, bool writable,
			       struct crux_shm_map *out, char *err, size_t errlen)
{
	crux_status_t st;
	int fd = -1;
	void *base = NULL;
	char path[CRUX_PATH_MAX], why[256];
	struct stat sb;

	if (!out) {
		crux_set_err(err, errlen, "bad record name");
		return CRUX_ERR_INVAL;
	}
	st = crux_shm_open_checked(dir, name, writable, &fd, path, sizeof(path), err, errlen);
	if (st != CRUX_OK)
		return st;
	if (fstat(fd, &sb) != 0) {
		crux_set_err(err, errlen, "cannot inspect %s: %s", path, strerror(errno));
		st = CRUX_ERR_IO;
		goto out_close;
	}
	/* Header first (a version mismatch explains a size mismatch), then the size. */
	struct crux_shm_header h;
	ssize_t got = pread(fd, &h, sizeof(h), 0);
	if (got < 0) {
		crux_set_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
		st = CRUX_ERR_IO;
		goto out_close;
	}
	if ((size_t)got < sizeof(h)) {
		snprintf(why, sizeof(why), "truncated: %zd bytes, less than the %zu-byte header",
			 got, sizeof(h));
		st = CRUX_ERR_CORRUPT;
	} else {
		st = header_check(&h, magic, layout_version, why, sizeof(why));
	}
	if (st == CRUX_OK && (uint64_t)sb.st_size != size) {
		snprintf(why, sizeof(why),
			 "file has %lld bytes, this layout needs %zu (truncated "
			 "or from another build)",
			 (long long)sb.st_size, size);
		st = CRUX_ERR_CORRUPT;
	}
	if (st != CRUX_OK) {
		crux_set_err(err, errlen,
			     "%s is not a valid record: %s; fix: remove it (the "
			     "writer recreates it)",
			     path, why);
		goto out_close;
	}
	st = map_fd(fd, size, writable, &base, err, errlen, path);
	if (st != CRUX_OK)
		goto out_close;
	/* The mapping is what we use: validate it, not only what pread saw. */
	st = crux_shm_validate_ex(base, size, magic, layout_version, size, why, sizeof(why));
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "%s is not a valid record: %s", path, why);
		munmap(base, size);
		goto out_close;
	}
	out->base = base;
	out->size = size;
	out->fd = fd;
	out->writable = writable;
	snprintf(out->path, sizeof(out->path), "%s", path);
	return CRUX_OK;

out_close:
	if (fd >= 0)
		close(fd);
	return st;
}

crux_status_t crux_shm_open(const char *dir, const char *name, uint32_t magic,
			    uint16_t layout_version, size_t size, bool writable,
			    struct crux_shm_map *out)
{
	char err[512];
	crux_status_t st = crux_shm_open_ex(dir, name, magic, layout_version, size, writable, out,
					    err, sizeof(err));
	if (st == CRUX_ERR_NOENT)
		crux_debug("%s", err);
	else if (st != CRUX_OK)
		crux_warn("%s", err);
	return st;
}

void crux_shm_unmap(struct crux_shm_map *map)
{
	if (!map)
		return;
	if (map->base)
		munmap(map->base, map->size);
	if (map->fd >= 0)
		close(map->fd);
	map->base = NULL;
	map->size = 0;
	map->fd = -1;
}

crux_status_t crux_proc_start_time(pid_t pid, uint64_t *out)
{
	char path[64], buf[1024];
	if (pid <= 0)
		return CRUX_ERR_INVAL;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ESRCH ? CRUX_ERR_NOENT : CRUX_ERR_IO;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return CRUX_ERR_NOENT; /* the process went away between open and read */
	buf[n] = '\0';
	/* The command name may hold spaces and ')': fields count from the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return CRUX_ERR_IO;
	p++;
	/* After ")" come fields 3..; starttime is field 22. */
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return CRUX_ERR_IO;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p + 1, &end, 10);
	if (errno || end == p + 1)
		return CRUX_ERR_IO;
	*out = v;
	return CRUX_OK;
}

bool crux_proc_alive(pid_t pid, uint64_t start_time)
{
	uint64_t now_start;
	crux_status_t st = crux_proc_start_time(pid, &now_start);
	if (st == CRUX_OK)
		return now_start == start_time;
	if (st == CRUX_ERR_NOENT || st == CRUX_ERR_INVAL)
		return false;
	/* /proc unreadable: do not declare a live process dead on that alone. */
	return kill(pid, 0) == 0 || errno == EPERM;
}
