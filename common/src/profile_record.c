/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A training process's own profile record: a sealed memfd shared by the
 * preload and the plugin (contract v2, handed to cruxd over the attach
 * socket), published under the seqlock protocol, and for contract v1 mirrored
 * into the agent's directory with pwrite.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/attach.h"
#include "crux/log.h"
#include "crux/profile.h"
#include "crux/shm.h"
#include "profile_layout.h"

struct crux_prof_handle {
	struct crux_shm_map map; /* this process's sealed memfd: the record itself */
	struct prof_file *f;
	/*
	 * Contract v1 (no agent socket): the record is mirrored into
	 * mirror_dir/mirror_name with pwrite, never mapped, so nothing done
	 * to that file can fault this process.
	 */
	int mirror_fd;
	char mirror_dir[CRUX_PATH_MAX];
	char mirror_name[96];
	int mirror_said;
};

static struct crux_prof_handle *handle_new(void)
{
	struct crux_prof_handle *h = calloc(1, sizeof(*h));
	if (h)
		h->mirror_fd = -1;
	return h;
}

/* ---- writer side ---- */

static void copy_str(char *dst, const char *src, size_t len)
{
	size_t n = strnlen(src, len - 1);
	memcpy(dst, src, n);
	memset(dst + n, 0, len - n);
}

static void prof_init(void *base, void *arg)
{
	struct prof_file *f = base;
	const struct crux_prof_identity *id = arg;
	/* Field by field: the strings are made terminated, padding stays zero. */
	f->id.job_key = id->job_key;
	copy_str(f->id.job_id, id->job_id, sizeof(f->id.job_id));
	copy_str(f->id.hostname, id->hostname, sizeof(f->id.hostname));
	f->id.host_addr.family = id->host_addr.family;
	memcpy(f->id.host_addr.bytes, id->host_addr.bytes, sizeof(f->id.host_addr.bytes));
	f->id.rank = id->rank;
	f->id.world_size = id->world_size;
	f->id.local_rank = id->local_rank;
}

/* ---- contract v1 mirror: the record's file, written with pwrite only ---- */

/* The copy's counter is the one the body was read under. */
struct section_copy {
	void *dst;
	size_t len;
};

static void section_read(const void *sec, uint64_t seq, void *arg)
{
	struct section_copy *c = arg;
	memcpy(c->dst, sec, c->len);
	__atomic_store_n((uint64_t *)c->dst, seq, __ATOMIC_RELAXED);
}

/* A consistent copy of one section of our own memfd (the other component may be writing it). */
static bool section_snapshot(const void *sec, void *dst, size_t len)
{
	struct section_copy c = {dst, len};
	return crux_seq_read(sec, NULL, section_read, &c, PROF_READ_RETRIES) == CRUX_OK;
}

/* Is the mirror descriptor still the file named mirror_dir/mirror_name, whole? */
static bool mirror_in_place(const struct crux_prof_handle *h)
{
	char path[CRUX_PATH_MAX + 96];
	struct stat a, b;
	snprintf(path, sizeof(path), "%s/%s", h->mirror_dir, h->mirror_name);
	return h->mirror_fd >= 0 && fstat(h->mirror_fd, &a) == 0 && lstat(path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
	       (size_t)a.st_size == sizeof(struct prof_file) && S_ISREG(b.st_mode);
}

/*
 * Write a whole consistent image of the record under a private name and
 * rename it over whatever carries the record's name now (a truncated, grown,
 * scribbled or foreign file). Readers see the old file or the new one.
 */
static crux_status_t mirror_recreate(struct crux_prof_handle *h, char *err, size_t errlen)
{
	char tmp[160];
	int dfd = -1, fd = -1;
	crux_status_t st = crux_shm_open_dir(h->mirror_dir, false, &dfd, err, errlen);
	if (st != CRUX_OK)
		return st;
	void *bm = NULL;
	struct prof_file *img = posix_memalign(&bm, 64, sizeof(*img)) == 0 ? bm : NULL;
	if (!img) {
		close(dfd);
		return CRUX_ERR_NOMEM;
	}
	memset(img, 0, sizeof(*img));
	memcpy(&img->hdr, &h->f->hdr, sizeof(img->hdr));
	img->id = h->f->id;
	if (!section_snapshot(&h->f->compute, &img->compute, sizeof(img->compute)) ||
	    !section_snapshot(&h->f->net, &img->net, sizeof(img->net))) {
		crux_set_err(err, errlen, "the record was kept busy by its writer");
		st = CRUX_ERR_BUSY;
		goto out;
	}
	for (unsigned i = 0; i < 64; i++) {
		snprintf(tmp, sizeof(tmp), ".tmp-%d-%ld-%u-%s", (int)getpid(),
			 (long)syscall(SYS_gettid), i, h->mirror_name);
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		int e = errno;
		if (e == EACCES || e == EPERM || e == EROFS)
			crux_set_err(err, errlen,
				     "cannot create a file in %s: %s; fix: run this process as the "
				     "user that owns %s (the agent's), or give the directory to "
				     "this user (chown %u %s)",
				     h->mirror_dir, strerror(e), h->mirror_dir, (unsigned)geteuid(),
				     h->mirror_dir);
		else
			crux_set_err(err, errlen, "cannot create a file in %s: %s", h->mirror_dir,
				     strerror(e));
		st = (e == EACCES || e == EPERM || e == EROFS) ? CRUX_ERR_PERM : CRUX_ERR_IO;
		goto out;
	}
	/* The umask must not decide who may read the record. */
	if (fchmod(fd, 0644) != 0 || !crux_put(fd, img, sizeof(*img), 0) ||
	    renameat(dfd, tmp, dfd, h->mirror_name) != 0) {
		crux_set_err(err, errlen, "cannot write %s/%s: %s", h->mirror_dir, h->mirror_name,
			     strerror(errno));
		unlinkat(dfd, tmp, 0);
		close(fd);
		st = CRUX_ERR_IO;
		goto out;
	}
	if (h->mirror_fd >= 0)
		close(h->mirror_fd);
	h->mirror_fd = fd;
	st = CRUX_OK;
out:
	free(img);
	close(dfd);
	return st;
}

/*
 * The preload and the plugin (separate copies of this library) both mirror
 * the record: a lock word in the shared memfd (header reserved[1]) keeps
 * their writes of the file from interleaving. Held for a few pwrites; a
 * holder that never lets go (impossible short of memory corruption) is
 * overruled after ~1 ms of yielding.
 */
static void mirror_lock(struct prof_file *f)
{
	for (int t = 0; t < 1000; t++) {
		uint64_t zero = 0;
		if (__atomic_compare_exchange_n(&f->hdr.reserved[1], &zero, 1, false,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
		sched_yield();
	}
}

static void mirror_unlock(struct prof_file *f)
{
	__atomic_store_n(&f->hdr.reserved[1], 0, __ATOMIC_RELEASE);
}

/*
 * Copy the record into the file: identity, then each section under the
 * seqlock protocol (odd counter, body, even counter), then the header, so a
 * pread reader that checks the counters never takes a torn copy, and
 * anything scribbled over the file is repaired at the next publish. A
 * missing, replaced or resized file costs this one write: it is written anew.
 */
static void mirror_sync(struct crux_prof_handle *h)
{
	char err[512];
	if (!h->mirror_dir[0])
		return;
	mirror_lock(h->f);
	if (!mirror_in_place(h)) {
		if (mirror_recreate(h, err, sizeof(err)) != CRUX_OK)
			crux_log_once(&h->mirror_said, CRUX_LOG_WARN,
				      "cannot rewrite the profile record: %s", err);
		mirror_unlock(h->f);
		return;
	}
	struct prof_file *img = malloc(sizeof(*img));
	if (!img) {
		mirror_unlock(h->f);
		return;
	}
	img->id = h->f->id;
	bool ok = crux_put(h->mirror_fd, &img->id, sizeof(img->id), offsetof(struct prof_file, id));
	for (unsigned k = 0; k < 2 && ok; k++) {
		const void *sec = k == 0 ? (const void *)&h->f->compute : (const void *)&h->f->net;
		void *dst = k == 0 ? (void *)&img->compute : (void *)&img->net;
		size_t len = k == 0 ? sizeof(img->compute) : sizeof(img->net);
		size_t off =
		    k == 0 ? offsetof(struct prof_file, compute) : offsetof(struct prof_file, net);
		if (!section_snapshot(sec, dst, len))
			continue; /* its writer is busy: the next publish copies it */
		uint64_t q = *(uint64_t *)dst;
		uint64_t odd = q - 1;
		ok = crux_put(h->mirror_fd, &odd, sizeof(odd), off) &&
		     crux_put(h->mirror_fd, (char *)dst + sizeof(q), len - sizeof(q),
			      off + sizeof(q)) &&
		     crux_put(h->mirror_fd, &q, sizeof(q), off);
	}
	memcpy(&img->hdr, &h->f->hdr, sizeof(img->hdr));
	ok = ok && crux_put(h->mirror_fd, &img->hdr, sizeof(img->hdr), 0);
	mirror_unlock(h->f);
	if (!ok)
		crux_log_once(&h->mirror_said, CRUX_LOG_WARN, "cannot write %s/%s: %s",
			      h->mirror_dir, h->mirror_name, strerror(errno));
	free(img);
}

/* Adopt an existing mirror file of this process (the other component made it), if whole. */
static bool mirror_adopt(struct crux_prof_handle *h)
{
	int dfd;
	struct stat sb;
	if (crux_shm_open_dir(h->mirror_dir, false, &dfd, NULL, 0) != CRUX_OK)
		return false;
	int fd = openat(dfd, h->mirror_name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return false;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & (S_IWGRP | S_IWOTH)) || (size_t)sb.st_size != sizeof(struct prof_file)) {
		close(fd);
		return false;
	}
	h->mirror_fd = fd;
	return true;
}

crux_status_t crux_prof_open_self_ex(const char *dir, const struct crux_prof_identity *id,
				     struct crux_prof_handle **out, char *err, size_t errlen)
{
	crux_status_t st;
	uint64_t start;
	struct crux_prof_handle *h = NULL;
	pid_t pid = getpid();

	st = crux_proc_start_time(pid, &start);
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "cannot read this process's start time from /proc");
		return CRUX_ERR_IO;
	}
	/* The agent owns the directory; a training process never creates it. */
	st = crux_shm_dir_check_ex(dir, false, err, errlen);
	if (st != CRUX_OK)
		return st;
	if (strlen(dir) >= sizeof(h->mirror_dir)) {
		crux_set_err(err, errlen, "directory name %s is too long", dir);
		return CRUX_ERR_INVAL;
	}
	/* The record itself: this process's sealed memfd, shared with the other component. */
	st = crux_prof_open_shared_ex(id, &h, err, errlen);
	if (st != CRUX_OK)
		return st;
	snprintf(h->mirror_dir, sizeof(h->mirror_dir), "%s", dir);
	crux_prof_name(pid, start, h->mirror_name, sizeof(h->mirror_name));
	mirror_lock(h->f);
	if (!mirror_adopt(h))
		st = mirror_recreate(h, err, errlen);
	mirror_unlock(h->f);
	if (st != CRUX_OK) {
		crux_prof_close(h);
		return st;
	}
	*out = h;
	return CRUX_OK;
}

crux_status_t crux_prof_open_self(const char *dir, const struct crux_prof_identity *id,
				  struct crux_prof_handle **out)
{
	char err[512];
	crux_status_t st = crux_prof_open_self_ex(dir, id, out, err, sizeof(err));
	if (st == CRUX_ERR_NOENT)
		crux_info("profile record not created: %s", err);
	else if (st != CRUX_OK)
		crux_warn("profile record not created: %s", err);
	return st;
}

/* ---- contract v2: the record is a sealed memfd shared with cruxd ---- */

/* The memfd's creation stamp (header reserved[0]): the first created is the process's record. */
static void prof_init_fd(void *base, void *arg)
{
	struct prof_file *f = base;
	prof_init(base, arg);
	__atomic_store_n(&f->hdr.reserved[0], crux_now_ns() | 1u, __ATOMIC_RELEASE);
}

crux_status_t crux_prof_create_fd_ex(const struct crux_prof_identity *id,
				     struct crux_prof_handle **out, char *err, size_t errlen)
{
	char name[64];
	crux_status_t st;
	struct crux_prof_handle *h = handle_new();
	if (!h)
		return CRUX_ERR_NOMEM;
	snprintf(name, sizeof(name), "%s%d", CRUX_PROF_MEMFD_PREFIX, (int)getpid());
	st = crux_memfd_create(name, CRUX_PROF_MAGIC, CRUX_PROF_VERSION, sizeof(struct prof_file),
			       CRUX_SEALS_PROFILE, prof_init_fd, (void *)id, &h->map, err, errlen);
	if (st != CRUX_OK) {
		free(h);
		return st;
	}
	h->f = h->map.base;
	*out = h;
	return CRUX_OK;
}

crux_status_t crux_prof_adopt_fd_ex(int fd, struct crux_prof_handle **out, char *err, size_t errlen)
{
	uint64_t start = 0;
	crux_status_t st;
	struct crux_prof_handle *h = handle_new();
	if (!h)
		return CRUX_ERR_NOMEM;
	st = crux_memfd_map(fd, CRUX_PROF_MAGIC, CRUX_PROF_VERSION, sizeof(struct prof_file),
			    CRUX_SEALS_PROFILE, true, &h->map, err, errlen);
	if (st != CRUX_OK) {
		free(h);
		return st;
	}
	h->f = h->map.base;
	crux_proc_start_time(getpid(), &start);
	if (h->f->hdr.writer_pid != (uint32_t)getpid() || h->f->hdr.writer_start_time != start) {
		crux_set_err(err, errlen, "the profile memfd belongs to another process");
		crux_prof_close(h);
		return CRUX_ERR_CORRUPT;
	}
	*out = h;
	return CRUX_OK;
}

void crux_prof_identity_of(const struct crux_prof_handle *h, struct crux_prof_identity *out)
{
	*out = h->f->id;
}

int crux_prof_handle_fd(const struct crux_prof_handle *h)
{
	return h ? h->map.fd : -1;
}

static void touch(struct prof_file *f)
{
	atomic_fetch_add_explicit(&f->hdr.generation, 1, memory_order_release);
	atomic_store_explicit(&f->hdr.heartbeat_ns, crux_now_ns(), memory_order_relaxed);
}

void crux_prof_publish_compute(struct crux_prof_handle *h, const struct crux_prof_compute *c)
{
	struct prof_compute_sec *s = &h->f->compute;
	crux_seq_write_begin(&s->seq);
	memcpy(&s->data, c, sizeof(*c));
	s->data.device[sizeof(s->data.device) - 1] = '\0';
	s->count++;
	crux_seq_write_end(&s->seq);
	touch(h->f);
	mirror_sync(h);
}

void crux_prof_publish_net(struct crux_prof_handle *h, const struct crux_prof_net *n)
{
	struct prof_net_sec *s = &h->f->net;
	uint32_t np = n->npeers < CRUX_PROF_MAX_PEERS ? n->npeers : CRUX_PROF_MAX_PEERS;
	crux_seq_write_begin(&s->seq);
	s->data.update_ns = n->update_ns;
	s->data.npeers = np;
	s->data.reserved = 0;
	s->data.local_addr = n->local_addr;
	memcpy(s->data.peers, n->peers, np * sizeof(n->peers[0]));
	memcpy(s->data.tx_bytes_by_kind, n->tx_bytes_by_kind, sizeof(n->tx_bytes_by_kind));
	s->data.busy_ns = n->busy_ns;
	s->data.busy_window_ns = n->busy_window_ns;
	s->data.busy_period_ns = n->busy_period_ns;
	{
		uint32_t nh =
		    n->nbusy_hist < CRUX_PROF_BUSY_SAMPLES ? n->nbusy_hist : CRUX_PROF_BUSY_SAMPLES;
		s->data.nbusy_hist = nh;
		s->data.reserved2 = 0;
		memcpy(s->data.busy_hist, n->busy_hist, nh * sizeof(n->busy_hist[0]));
	}
	s->count++;
	crux_seq_write_end(&s->seq);
	touch(h->f);
	mirror_sync(h);
}

void crux_prof_close(struct crux_prof_handle *h)
{
	if (!h)
		return;
	if (h->mirror_fd >= 0)
		close(h->mirror_fd);
	crux_shm_unmap(&h->map);
	free(h);
}

crux_status_t crux_prof_remove_self(const char *dir)
{
	char path[CRUX_PATH_MAX], name[96];
	uint64_t start;
	if (crux_proc_start_time(getpid(), &start) != CRUX_OK)
		return CRUX_ERR_IO;
	crux_prof_name(getpid(), start, name, sizeof(name));
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return CRUX_ERR_INVAL;
	if (unlink(path) != 0)
		return errno == ENOENT ? CRUX_ERR_NOENT : CRUX_ERR_IO;
	return CRUX_OK;
}

/* ---- the process's one record, shared by the preload and the plugin ---- */

/*
 * This process's record memfd: among the descriptors named
 * CRUX_PROF_MEMFD_PREFIX<pid> with a whole header, the one created first
 * (lowest creation stamp, then lowest descriptor). Every creator stamps its
 * memfd before it looks, so a later creator always sees an earlier one and
 * two racing components settle on the same record. -1 if none.
 */
static int find_prof_fd(void)
{
	char want[64], link[128], path[64];
	int best = -1;
	uint64_t best_stamp = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	snprintf(want, sizeof(want), "/memfd:%s%d ", CRUX_PROF_MEMFD_PREFIX, (int)getpid());
	for (struct dirent *e; (e = readdir(d));) {
		struct crux_shm_header h;
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end || fd < 0 || fd == dirfd(d))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%ld", fd);
		ssize_t n = readlink(path, link, sizeof(link) - 2);
		if (n <= 0)
			continue;
		link[n] = ' '; /* "(deleted)" follows the name after a space */
		link[n + 1] = '\0';
		if (strncmp(link, want, strlen(want)) != 0 ||
		    pread((int)fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
		    h.magic != CRUX_PROF_MAGIC || h.reserved[0] == 0)
			continue; /* not ours, or still being initialised */
		if (best < 0 || h.reserved[0] < best_stamp ||
		    (h.reserved[0] == best_stamp && fd < best)) {
			best = (int)fd;
			best_stamp = h.reserved[0];
		}
	}
	closedir(d);
	return best;
}

crux_status_t crux_prof_open_shared_ex(const struct crux_prof_identity *id,
				       struct crux_prof_handle **out, char *err, size_t errlen)
{
	struct crux_prof_handle *mine = NULL, *other = NULL;
	crux_status_t st;
	int fd = find_prof_fd();
	if (fd >= 0 && crux_prof_adopt_fd_ex(fd, out, err, errlen) == CRUX_OK)
		return CRUX_OK;
	st = crux_prof_create_fd_ex(id, &mine, err, errlen);
	if (st != CRUX_OK)
		return st;
	/* A racing component may have created one too: both keep the first created. */
	fd = find_prof_fd();
	if (fd >= 0 && fd != crux_prof_handle_fd(mine) &&
	    crux_prof_adopt_fd_ex(fd, &other, NULL, 0) == CRUX_OK) {
		crux_prof_close(mine);
		*out = other;
		return CRUX_OK;
	}
	*out = mine;
	return CRUX_OK;
}
