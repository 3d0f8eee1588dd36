/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Profile record file layout (private; version CRUX_PROF_VERSION):
 *
 *   struct crux_shm_header  writer pid + start time (must match the name)
 *   identity                written once before the file is published
 *   compute section         seq counter + publish count + crux_prof_compute
 *   net section             seq counter + publish count + crux_prof_net
 *
 * The two sections sit on their own cache lines: the preload and the plugin
 * publish from different threads without sharing a line.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sched.h>
#include <sys/syscall.h>

#include "crux/attach.h"
#include "crux/log.h"
#include "crux/profile.h"
#include "crux/shm.h"
#include "internal.h"

struct prof_compute_sec {
	_Alignas(64) crux_seq_t seq;
	uint64_t count; /* publishes so far; 0 = never */
	struct crux_prof_compute data;
};

struct prof_net_sec {
	_Alignas(64) crux_seq_t seq;
	uint64_t count;
	struct crux_prof_net data;
};

struct prof_file {
	struct crux_shm_header hdr;
	struct crux_prof_identity id;
	struct prof_compute_sec compute;
	struct prof_net_sec net;
};

_Static_assert(offsetof(struct prof_file, id) == 64, "identity follows the header");

/*
 * Read attempts per section. The agent is no data path: it may wait out a
 * writer copying a whole section (~10 KB) rather than skip the record.
 */
#define PROF_READ_RETRIES 4096

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

size_t crux_prof_file_size(void)
{
	return sizeof(struct prof_file);
}

int crux_prof_name(pid_t pid, uint64_t start_time, char *buf, size_t len)
{
	return snprintf(buf, len, CRUX_PROF_PREFIX "%d-%" PRIu64 CRUX_PROF_SUFFIX, (int)pid,
			start_time);
}

/* Strict inverse of crux_prof_name: digits only, no leading zeros or signs. */
bool crux_prof_parse_name(const char *name, pid_t *pid, uint64_t *start_time)
{
	const size_t plen = sizeof(CRUX_PROF_PREFIX) - 1, slen = sizeof(CRUX_PROF_SUFFIX) - 1;
	size_t n = strlen(name);
	if (n <= plen + slen || strncmp(name, CRUX_PROF_PREFIX, plen) != 0 ||
	    strcmp(name + n - slen, CRUX_PROF_SUFFIX) != 0)
		return false;
	const char *p = name + plen, *end = name + n - slen;
	uint64_t v[2] = {0, 0};
	for (int k = 0; k < 2; k++) {
		const char *q = p;
		while (q < end && *q >= '0' && *q <= '9') {
			uint64_t d = (uint64_t)(*q - '0');
			if (v[k] > (UINT64_MAX - d) / 10)
				return false;
			v[k] = v[k] * 10 + d;
			q++;
		}
		if (q == p || (q - p > 1 && *p == '0'))
			return false;
		if (k == 0) {
			if (q >= end || *q != '-')
				return false;
			p = q + 1;
		} else if (q != end) {
			return false;
		}
	}
	if (v[0] == 0 || v[0] > INT32_MAX)
		return false;
	*pid = (pid_t)v[0];
	*start_time = v[1];
	return true;
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

/* A consistent copy of one section of our own memfd (the other component may be writing it). */
static bool section_snapshot(const void *sec, void *dst, size_t len)
{
	const crux_seq_t *seq = sec;
	for (unsigned t = 0; t < PROF_READ_RETRIES; t++) {
		uint64_t s = crux_seq_read_begin(seq);
		if (s & 1u) {
			cpu_relax();
			continue;
		}
		memcpy(dst, sec, len);
		/* The copy's counter is the one the body was read under. */
		__atomic_store_n((uint64_t *)dst, s, __ATOMIC_RELAXED);
		if (crux_seq_read_ok(seq, s))
			return true;
	}
	return false;
}

static bool put(int fd, const void *p, size_t len, size_t off)
{
	return pwrite(fd, p, len, (off_t)off) == (ssize_t)len;
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
	if (fchmod(fd, 0644) != 0 || !put(fd, img, sizeof(*img), 0) ||
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
	bool ok = put(h->mirror_fd, &img->id, sizeof(img->id), offsetof(struct prof_file, id));
	for (unsigned k = 0; k < 2 && ok; k++) {
		const void *sec = k == 0 ? (const void *)&h->f->compute : (const void *)&h->f->net;
		void *dst = k == 0 ? (void *)&img->compute : (void *)&img->net;
		size_t len = k == 0 ? sizeof(img->compute) : sizeof(img->net);
		size_t off = k == 0 ? offsetof(struct prof_file, compute)
				    : offsetof(struct prof_file, net);
		if (!section_snapshot(sec, dst, len))
			continue; /* its writer is busy: the next publish copies it */
		uint64_t q = *(uint64_t *)dst;
		uint64_t odd = q - 1;
		ok = put(h->mirror_fd, &odd, sizeof(odd), off) &&
		     put(h->mirror_fd, (char *)dst + sizeof(q), len - sizeof(q), off + sizeof(q)) &&
		     put(h->mirror_fd, &q, sizeof(q), off);
	}
	memcpy(&img->hdr, &h->f->hdr, sizeof(img->hdr));
	ok = ok && put(h->mirror_fd, &img->hdr, sizeof(img->hdr), 0);
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

crux_status_t crux_prof_adopt_fd_ex(int fd, struct crux_prof_handle **out, char *err,
				    size_t errlen)
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

crux_status_t crux_prof_map_fd(int fd, struct crux_shm_map *out, char *err, size_t errlen)
{
	return crux_memfd_map(fd, CRUX_PROF_MAGIC, CRUX_PROF_VERSION, sizeof(struct prof_file),
			      CRUX_SEALS_PROFILE, false, out, err, errlen);
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
		uint32_t nh = n->nbusy_hist < CRUX_PROF_BUSY_SAMPLES ? n->nbusy_hist
								      : CRUX_PROF_BUSY_SAMPLES;
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

/* ---- reader side ---- */

static bool addr_family_ok(const struct crux_addr *a, bool allow_none)
{
	return a->family == 4 || a->family == 6 || (allow_none && a->family == 0);
}

/*
 * Validate a mapped (or buffered) record and take a consistent snapshot.
 * With expect_pid > 0 the header must name that process.
 */
crux_status_t crux_prof_validate_buffer(const void *base, size_t size, pid_t expect_pid,
					uint64_t expect_start, struct crux_prof_snapshot *out,
					char *err, size_t errlen)
{
	const struct prof_file *f = base;
	char why[256];
	crux_status_t st = crux_shm_validate_ex(base, size, CRUX_PROF_MAGIC, CRUX_PROF_VERSION,
						sizeof(struct prof_file), why, sizeof(why));
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "%s", why);
		return st;
	}
	uint32_t wpid = __atomic_load_n(&f->hdr.writer_pid, __ATOMIC_RELAXED);
	uint64_t wstart = __atomic_load_n(&f->hdr.writer_start_time, __ATOMIC_RELAXED);
	if (expect_pid > 0 && (wpid != (uint32_t)expect_pid || wstart != expect_start)) {
		crux_set_err(err, errlen,
			     "header names process %u (start %" PRIu64 "), the file name %d (start "
			     "%" PRIu64 ")",
			     wpid, wstart, (int)expect_pid, expect_start);
		return CRUX_ERR_CORRUPT;
	}
	if (wpid == 0 || wpid > INT32_MAX) {
		crux_set_err(err, errlen, "header names no valid process (pid %u)", wpid);
		return CRUX_ERR_CORRUPT;
	}
	/* Identity is written before publication and never changes: a plain copy. */
	out->id = f->id;
	if (!memchr(out->id.job_id, '\0', sizeof(out->id.job_id)) ||
	    !memchr(out->id.hostname, '\0', sizeof(out->id.hostname)) ||
	    !addr_family_ok(&out->id.host_addr, true)) {
		crux_set_err(err, errlen, "identity has an unterminated string or a bad address");
		return CRUX_ERR_CORRUPT;
	}

	uint64_t count = 0;
	bool ok = false;
	for (unsigned t = 0; t < PROF_READ_RETRIES && !ok; t++) {
		uint64_t s = crux_seq_read_begin(&f->compute.seq);
		if (s & 1u) {
			cpu_relax();
			continue;
		}
		count = __atomic_load_n(&f->compute.count, __ATOMIC_RELAXED);
		memcpy(&out->compute, &f->compute.data, sizeof(out->compute));
		ok = crux_seq_read_ok(&f->compute.seq, s);
	}
	if (!ok) {
		crux_set_err(err, errlen, "compute section kept busy by its writer");
		return CRUX_ERR_BUSY;
	}
	out->has_compute = count > 0;
	if (!memchr(out->compute.device, '\0', sizeof(out->compute.device)) ||
	    out->compute.timing_backend > CRUX_TIMING_CUPTI) {
		crux_set_err(err, errlen,
			     "compute section: unterminated device name or timing "
			     "backend %u unknown",
			     out->compute.timing_backend);
		return CRUX_ERR_CORRUPT;
	}

	ok = false;
	for (unsigned t = 0; t < PROF_READ_RETRIES && !ok; t++) {
		uint64_t s = crux_seq_read_begin(&f->net.seq);
		if (s & 1u) {
			cpu_relax();
			continue;
		}
		count = __atomic_load_n(&f->net.count, __ATOMIC_RELAXED);
		uint32_t np = __atomic_load_n(&f->net.data.npeers, __ATOMIC_RELAXED);
		out->net.update_ns = f->net.data.update_ns;
		out->net.npeers = np;
		out->net.reserved = 0;
		out->net.local_addr = f->net.data.local_addr;
		/* Clamped copy; an out-of-range count is reported once consistent. */
		uint32_t cp = np < CRUX_PROF_MAX_PEERS ? np : CRUX_PROF_MAX_PEERS;
		memcpy(out->net.peers, f->net.data.peers, cp * sizeof(out->net.peers[0]));
		memset(out->net.peers + cp, 0,
		       (CRUX_PROF_MAX_PEERS - cp) * sizeof(out->net.peers[0]));
		memcpy(out->net.tx_bytes_by_kind, f->net.data.tx_bytes_by_kind,
		       sizeof(out->net.tx_bytes_by_kind));
		out->net.busy_ns = f->net.data.busy_ns;
		out->net.busy_window_ns = f->net.data.busy_window_ns;
		out->net.busy_period_ns = f->net.data.busy_period_ns;
		{
			uint32_t nh = __atomic_load_n(&f->net.data.nbusy_hist, __ATOMIC_RELAXED);
			uint32_t ch = nh < CRUX_PROF_BUSY_SAMPLES ? nh : CRUX_PROF_BUSY_SAMPLES;
			out->net.nbusy_hist = nh;
			out->net.reserved2 = 0;
			memcpy(out->net.busy_hist, f->net.data.busy_hist,
			       ch * sizeof(out->net.busy_hist[0]));
			memset(out->net.busy_hist + ch, 0,
			       (CRUX_PROF_BUSY_SAMPLES - ch) * sizeof(out->net.busy_hist[0]));
		}
		ok = crux_seq_read_ok(&f->net.seq, s);
	}
	if (!ok) {
		crux_set_err(err, errlen, "net section kept busy by its writer");
		return CRUX_ERR_BUSY;
	}
	out->has_net = count > 0;
	if (out->net.npeers > CRUX_PROF_MAX_PEERS) {
		crux_set_err(err, errlen, "net section: %u peers, at most %d",
			     (unsigned)out->net.npeers, CRUX_PROF_MAX_PEERS);
		return CRUX_ERR_CORRUPT;
	}
	if (out->net.busy_period_ns > out->net.busy_window_ns ||
	    out->net.busy_period_ns > out->net.busy_ns) {
		crux_set_err(err, errlen,
			     "net section: busy %" PRIu64 " ns in a period of %" PRIu64
			     " ns (cumulative %" PRIu64 " ns): more than the period or the total",
			     out->net.busy_period_ns, out->net.busy_window_ns, out->net.busy_ns);
		return CRUX_ERR_CORRUPT;
	}
	if (out->net.nbusy_hist > CRUX_PROF_BUSY_SAMPLES) {
		crux_set_err(err, errlen, "net section: %u busy samples, at most %d",
			     (unsigned)out->net.nbusy_hist, CRUX_PROF_BUSY_SAMPLES);
		return CRUX_ERR_CORRUPT;
	}
	for (uint32_t i = 0; i < out->net.nbusy_hist; i++) {
		const struct crux_prof_busy_sample *b = &out->net.busy_hist[i];
		if (b->busy_ns > out->net.busy_ns ||
		    (i && (b->t_ns < b[-1].t_ns || b->busy_ns < b[-1].busy_ns))) {
			crux_set_err(err, errlen,
				     "net section: busy sample %u goes back in time, or beyond the "
				     "total busy time",
				     (unsigned)i);
			return CRUX_ERR_CORRUPT;
		}
	}
	if (!addr_family_ok(&out->net.local_addr, true)) {
		crux_set_err(err, errlen, "net section: local address has family %u",
			     (unsigned)out->net.local_addr.family);
		return CRUX_ERR_CORRUPT;
	}
	for (uint32_t i = 0; i < out->net.npeers; i++) {
		if (!addr_family_ok(&out->net.peers[i].peer, false)) {
			crux_set_err(err, errlen, "net section: peer %u has address family %u",
				     (unsigned)i, (unsigned)out->net.peers[i].peer.family);
			return CRUX_ERR_CORRUPT;
		}
	}
	out->pid = (pid_t)wpid;
	out->start_time = wstart;
	return CRUX_OK;
}

static crux_status_t prof_read(const char *dir, const char *name, unsigned flags,
			       struct crux_prof_snapshot *out, char *err, size_t errlen)
{
	pid_t pid;
	uint64_t start;
	struct crux_shm_map map;
	char why[512];
	crux_status_t st;

	if (!crux_prof_parse_name(name, &pid, &start)) {
		crux_set_err(err, errlen,
			     "%s/%s: not a profile record name (" CRUX_PROF_PREFIX
			     "<pid>-<starttime>" CRUX_PROF_SUFFIX ")",
			     dir, name);
		return CRUX_ERR_INVAL;
	}
	st = crux_shm_open_ex(dir, name, CRUX_PROF_MAGIC, CRUX_PROF_VERSION,
			      sizeof(struct prof_file), false, &map, err, errlen);
	if (st != CRUX_OK)
		return st;
	/*
	 * The mapping is never touched: a file truncated under it would fault us.
	 * A pread copy instead, kept only if the counters did not move meanwhile.
	 */
	void *cm = NULL;
	struct prof_file *copy = posix_memalign(&cm, 64, sizeof(*copy)) == 0 ? cm : NULL;
	st = copy ? CRUX_ERR_BUSY : CRUX_ERR_NOMEM;
	for (int t = 0; t < 64 && st == CRUX_ERR_BUSY; t++) {
		struct stat sb;
		uint64_t q[3];
		if (fstat(map.fd, &sb) != 0 || (size_t)sb.st_size != sizeof(*copy) ||
		    pread(map.fd, copy, sizeof(*copy), 0) != (ssize_t)sizeof(*copy)) {
			snprintf(why, sizeof(why), "truncated or resized while being read");
			st = CRUX_ERR_CORRUPT;
			break;
		}
		if (pread(map.fd, &q[0], 8, offsetof(struct prof_file, compute.seq)) != 8 ||
		    pread(map.fd, &q[1], 8, offsetof(struct prof_file, net.seq)) != 8 ||
		    pread(map.fd, &q[2], 8,
			  offsetof(struct prof_file, hdr) + offsetof(struct crux_shm_header, generation)) != 8 ||
		    q[0] != atomic_load(&copy->compute.seq) || q[1] != atomic_load(&copy->net.seq) ||
		    q[2] != atomic_load(&copy->hdr.generation) || (q[0] & 1u) || (q[1] & 1u))
			continue; /* the writer moved while we copied */
		st = crux_prof_validate_buffer(copy, sizeof(*copy), pid, start, out, why,
					       sizeof(why));
	}
	if (st == CRUX_ERR_BUSY)
		snprintf(why, sizeof(why), "its writer kept it busy");
	free(copy);
	if (st == CRUX_OK) {
		/* Who wrote it, from the kernel: the file's owner, or cruxd's word for its copies. */
		struct stat fsb;
		out->attached = (flags & CRUX_PROF_SCAN_AGENT_COPIES) != 0;
		if (out->attached)
			out->uid = (int64_t)out->id.agent_uid;
		else
			out->uid = fstat(map.fd, &fsb) == 0 ? (int64_t)fsb.st_uid : -1;
	}
	if (st != CRUX_OK)
		crux_set_err(err, errlen, "%s: %s", map.path, why);
	else
		snprintf(out->file, sizeof(out->file), "%s", map.path);
	crux_shm_unmap(&map);
	return st;
}

crux_status_t crux_prof_read_ex(const char *dir, const char *name, struct crux_prof_snapshot *out,
				char *err, size_t errlen)
{
	/* A private snapshot: 'out' is written only on success. */
	struct crux_prof_snapshot *tmp = malloc(sizeof(*tmp));
	if (!tmp)
		return CRUX_ERR_NOMEM;
	crux_status_t st = prof_read(dir, name, 0, tmp, err, errlen);
	if (st == CRUX_OK)
		memcpy(out, tmp, sizeof(*out));
	free(tmp);
	return st;
}

crux_status_t crux_prof_read(const char *dir, const char *name, struct crux_prof_snapshot *out)
{
	char err[768];
	crux_status_t st = crux_prof_read_ex(dir, name, out, err, sizeof(err));
	if (st != CRUX_OK && st != CRUX_ERR_BUSY)
		crux_warn("%s", err);
	return st;
}

/* A key for "this file, this problem" so a bad record is logged once. */
static uint64_t report_key(const char *dir, const char *name, crux_status_t st)
{
	char buf[CRUX_PATH_MAX + 16];
	snprintf(buf, sizeof(buf), "%s/%s#%d", dir, name, (int)st);
	return crux_job_key_of(buf);
}

/* Leftover ".tmp-<pid>-..." of a creator that died between create and publish. */
static bool stale_temp(const char *name)
{
	int pid;
	if (strncmp(name, ".tmp-", 5) != 0 || sscanf(name + 5, "%d-", &pid) != 1 || pid <= 0)
		return false;
	return kill(pid, 0) != 0 && errno == ESRCH;
}

crux_status_t crux_prof_scan(const char *dir, unsigned flags, crux_prof_scan_fn fn, void *arg,
			     struct crux_prof_scan_stats *stats)
{
	struct crux_prof_scan_stats s = {0, 0, 0, 0};
	char err[768];
	int dfd;
	crux_status_t st = crux_shm_open_dir(dir, false, &dfd, err, sizeof(err));
	if (st != CRUX_OK) {
		if (crux_log_once_key(report_key(dir, "", st)))
			crux_warn("profile scan: %s", err);
		return st;
	}
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return CRUX_ERR_IO;
	}
	struct crux_prof_snapshot *snap = malloc(sizeof(*snap));
	if (!snap) {
		closedir(d);
		return CRUX_ERR_NOMEM;
	}
	struct dirent *e;
	st = CRUX_OK;
	while ((e = readdir(d)) != NULL) {
		const char *name = e->d_name;
		pid_t pid;
		uint64_t start;
		if ((flags & CRUX_PROF_SCAN_REAP) && stale_temp(name)) {
			unlinkat(dfd, name, 0);
			continue;
		}
		if (strncmp(name, CRUX_PROF_PREFIX, sizeof(CRUX_PROF_PREFIX) - 1) != 0)
			continue;
		if (!crux_prof_parse_name(name, &pid, &start)) {
			s.invalid++;
			if (crux_log_once_key(report_key(dir, name, CRUX_ERR_INVAL)))
				crux_warn(
				    "skipping %s/%s: not a profile record name (" CRUX_PROF_PREFIX
				    "<pid>-<starttime>" CRUX_PROF_SUFFIX "); remove it",
				    dir, name);
			continue;
		}
		if ((flags & CRUX_PROF_SCAN_REAP) && !crux_proc_alive(pid, start)) {
			if (unlinkat(dfd, name, 0) == 0) {
				s.reaped++;
				crux_info("removed %s/%s: process %d is gone", dir, name, (int)pid);
			}
			continue;
		}
		crux_status_t rs = prof_read(dir, name, flags, snap, err, sizeof(err));
		if (rs == CRUX_ERR_BUSY) {
			s.busy++;
			continue;
		}
		if (rs == CRUX_ERR_NOENT)
			continue; /* removed since readdir */
		if (rs != CRUX_OK) {
			s.invalid++;
			if (crux_log_once_key(report_key(dir, name, rs)))
				crux_warn("skipping invalid profile record: %s", err);
			continue;
		}
		s.valid++;
		if (fn && fn(arg, snap) != 0)
			break;
	}
	free(snap);
	closedir(d);
	if (stats)
		*stats = s;
	return st;
}

/* ---- cruxd's copies of attached records ---- */

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
		bool ok = put(fd, &img->id, sizeof(img->id), offsetof(struct prof_file, id));
		for (int k = 0; k < 2 && ok; k++)
			ok = put(fd, &odd, sizeof(odd), offs[k]) &&
			     put(fd, (char *)img + offs[k] + 8, lens[k] - 8, offs[k] + 8) &&
			     put(fd, (char *)img + offs[k], 8, offs[k]);
		ok = ok && put(fd, &img->hdr, sizeof(img->hdr), 0);
		if (!ok)
			crux_log_once(&c->said, CRUX_LOG_WARN, "cannot write %s/%s: %s", c->dir, name,
				      strerror(errno));
		goto out;
	}
	if (fd >= 0)
		close(fd);
	/* Missing or damaged: a whole new file under a private name, renamed over. */
	snprintf(tmp, sizeof(tmp), ".tmp-%d-%s", (int)getpid(), name);
	unlinkat(dfd, tmp, 0);
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || fchmod(fd, 0644) != 0 || !put(fd, img, sizeof(*img), 0) ||
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
