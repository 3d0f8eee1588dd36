/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decision table file layout (private; version CRUX_DT_VERSION):
 *
 *   struct crux_shm_header   generation, heartbeat (atomics), writer pid
 *   dt_top                   'active': which of the two banks readers use
 *   bank[0], bank[1]         settings + jobs + routes + hash indexes
 *
 * Each bank is one seqlock region. The writer fills the inactive bank, then
 * flips 'active': a reader only retries when the writer laps it twice, so
 * lookups almost never retry even when the agent publishes continuously.
 * Jobs are found through an open-addressing index keyed by the job key,
 * routes through one keyed by (job key, peer address); index slots hold
 * entry number + 1 (0 = empty) and are bounds-checked on every use.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "crux/decision.h"
#include "crux/log.h"
#include "crux/shm.h"
#include "internal.h"

#define DT_JOB_BUCKETS	    (2 * CRUX_DT_MAX_JOBS)
#define DT_ROUTE_BUCKETS    (2 * CRUX_DT_MAX_ROUTES)
#define DT_MIN_BUCKETS	    8u
#define DT_READ_ALL_RETRIES (16 * CRUX_SEQ_MAX_RETRIES)

struct dt_job_slot {
	uint64_t key;
	char id[CRUX_JOB_ID_LEN];
	uint8_t level;
	uint8_t state;
	uint16_t reserved;
	uint32_t reserved2;
};

struct dt_route_slot {
	uint64_t key;
	struct crux_addr peer;
	uint16_t path_id;
	uint8_t nports;
	uint8_t reserved;
	uint16_t ports[CRUX_ROUTE_MAX_PORTS];
};

struct dt_bank {
	crux_seq_t seq;
	uint64_t generation;
	uint32_t nlevels;
	uint32_t default_level;
	uint64_t heartbeat_timeout_ns;
	struct crux_level_map levels[CRUX_MAX_LEVELS];
	uint32_t njobs;
	uint32_t nroutes;
	uint32_t job_mask; /* index buckets - 1 (power of two - 1) */
	uint32_t route_mask;
	uint64_t reserved[2];
	uint16_t job_index[DT_JOB_BUCKETS];
	uint16_t route_index[DT_ROUTE_BUCKETS];
	struct dt_job_slot jobs[CRUX_DT_MAX_JOBS];
	struct dt_route_slot routes[CRUX_DT_MAX_ROUTES];
};

struct dt_top {
	_Atomic uint32_t active;
	uint32_t reserved[15];
};

struct dt_file {
	struct crux_shm_header hdr;
	struct dt_top top;
	struct dt_bank bank[2];
};

_Static_assert(sizeof(struct dt_job_slot) == 80, "job slot layout");
_Static_assert(sizeof(struct dt_route_slot) == 48, "route slot layout");
_Static_assert(sizeof(struct crux_level_map) == 8, "level map layout");
_Static_assert(CRUX_DT_MAX_ROUTES < 65535 && CRUX_DT_MAX_JOBS < 65535, "16-bit index slots");
_Static_assert((CRUX_MAX_LEVELS & (CRUX_MAX_LEVELS - 1)) == 0, "level mask");

struct crux_dt_reader {
	struct crux_shm_map map;
	const struct dt_file *f;
	void *owned; /* a private copy this reader frees (crux_dt_reader_open_copy) */
};

struct crux_dt_writer {
	struct crux_shm_map map;
	struct dt_file *f;
	struct dt_bank
	    *stage; /* the current contents, private: what the next publish starts from */
	struct dt_bank *scratch; /* the next contents while they are built and checked */
	/* Shadow mode (cruxd): the table is a memfd; the file is written, never mapped. */
	int shadow_fd;
	char shadow_dir[CRUX_PATH_MAX];
	char shadow_path[CRUX_PATH_MAX];
	int shadow_said;
};

size_t crux_dt_file_size(void)
{
	return sizeof(struct dt_file);
}

/* Plain loads the compiler may not repeat: a value checked is the value used. */
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/*
 * Index hashes (part of the file layout: writer and readers must agree).
 * Job keys are already FNV-1a hashes: one multiply spreads them. A route
 * mixes the peer's significant address bytes into the job key first.
 */
static inline uint32_t job_hash(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32);
}

/* The peer address as two words, bytes beyond the family's length zeroed. */
struct peer_words {
	uint64_t lo, hi;
	uint8_t family;
};

static inline struct peer_words peer_words(const struct crux_addr *a)
{
	struct peer_words w;
	memcpy(&w.lo, a->bytes, 8);
	memcpy(&w.hi, a->bytes + 8, 8);
	w.family = a->family;
	if (a->family == 4) {
		w.lo &= 0xffffffffull; /* little endian: the first 4 bytes */
		w.hi = 0;
	} else if (a->family != 6) {
		w.lo = w.hi = 0;
	}
	return w;
}

static inline uint32_t route_hash(uint64_t key, const struct peer_words *p)
{
	uint64_t x =
	    key ^ (p->lo * 0xff51afd7ed558ccdull) ^ (p->hi * 0xc4ceb9fe1a85ec53ull) ^ p->family;
	return job_hash(x);
}

/* ---- settings ---- */

void crux_dt_settings_default(uint32_t nlevels, struct crux_dt_settings *out)
{
	if (nlevels < 1)
		nlevels = 1;
	if (nlevels > CRUX_MAX_LEVELS)
		nlevels = CRUX_MAX_LEVELS;
	memset(out, 0, sizeof(*out));
	out->nlevels = nlevels;
	out->default_level = 0;
	for (uint32_t l = 0; l < CRUX_MAX_LEVELS; l++) {
		out->levels[l].dscp = (uint8_t)(8 * l);
		out->levels[l].ib_sl = (uint8_t)l;
		out->levels[l].sock_prio = (int32_t)l;
	}
	out->heartbeat_timeout_ns = CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS;
}

crux_status_t crux_dt_settings_validate(const struct crux_dt_settings *s, char *err, size_t errlen)
{
	if (s->nlevels < 1 || s->nlevels > CRUX_MAX_LEVELS) {
		crux_set_err(err, errlen, "number of levels %u is not in [1, %d]",
			     (unsigned)s->nlevels, CRUX_MAX_LEVELS);
		return CRUX_ERR_INVAL;
	}
	if (s->default_level >= s->nlevels) {
		crux_set_err(err, errlen, "default level %u is not in [0, %u]",
			     (unsigned)s->default_level, (unsigned)s->nlevels - 1);
		return CRUX_ERR_INVAL;
	}
	if (s->heartbeat_timeout_ns == 0) {
		crux_set_err(err, errlen, "heartbeat timeout must be positive");
		return CRUX_ERR_INVAL;
	}
	for (uint32_t l = 0; l < s->nlevels; l++) {
		const struct crux_level_map *m = &s->levels[l];
		if (m->dscp > 63) {
			crux_set_err(err, errlen, "level %u: DSCP %u is not in [0, 63]",
				     (unsigned)l, (unsigned)m->dscp);
			return CRUX_ERR_INVAL;
		}
		if (m->ib_sl > 15) {
			crux_set_err(err, errlen, "level %u: InfiniBand SL %u is not in [0, 15]",
				     (unsigned)l, (unsigned)m->ib_sl);
			return CRUX_ERR_INVAL;
		}
		if (m->sock_prio < 0) {
			crux_set_err(err, errlen, "level %u: socket priority %d is negative",
				     (unsigned)l, (int)m->sock_prio);
			return CRUX_ERR_INVAL;
		}
		for (uint32_t o = 0; o < l; o++) {
			if (s->levels[o].dscp == m->dscp) {
				crux_set_err(err, errlen,
					     "levels %u and %u share DSCP %u: switches could not "
					     "tell them apart",
					     (unsigned)o, (unsigned)l, (unsigned)m->dscp);
				return CRUX_ERR_INVAL;
			}
		}
	}
	return CRUX_OK;
}

/* ---- validation of a consistent bank copy ---- */

static bool mask_ok(uint32_t mask, uint32_t max_buckets)
{
	uint32_t n = mask + 1;
	return n >= 1 && n <= max_buckets && (n & (n - 1)) == 0;
}

static void bank_settings(const struct dt_bank *b, struct crux_dt_settings *s)
{
	memset(s, 0, sizeof(*s));
	s->nlevels = b->nlevels;
	s->default_level = b->default_level;
	s->heartbeat_timeout_ns = b->heartbeat_timeout_ns;
	memcpy(s->levels, b->levels, sizeof(s->levels));
}

/* Whole-bank check on a private copy (reader open, read_all, writer restart, fuzzing). */
static crux_status_t bank_validate(const struct dt_bank *b, char *err, size_t errlen)
{
	struct crux_dt_settings s;
	char why[160];
	bank_settings(b, &s);
	if (crux_dt_settings_validate(&s, why, sizeof(why)) != CRUX_OK) {
		crux_set_err(err, errlen, "bad settings: %s", why);
		return CRUX_ERR_CORRUPT;
	}
	if (b->njobs > CRUX_DT_MAX_JOBS || b->nroutes > CRUX_DT_MAX_ROUTES) {
		crux_set_err(err, errlen, "%u jobs / %u routes exceed the limits %d / %d",
			     (unsigned)b->njobs, (unsigned)b->nroutes, CRUX_DT_MAX_JOBS,
			     CRUX_DT_MAX_ROUTES);
		return CRUX_ERR_CORRUPT;
	}
	if (!mask_ok(b->job_mask, DT_JOB_BUCKETS) || !mask_ok(b->route_mask, DT_ROUTE_BUCKETS) ||
	    b->njobs > b->job_mask || b->nroutes > b->route_mask) {
		crux_set_err(err, errlen, "bad index size (%u job / %u route buckets)",
			     (unsigned)b->job_mask + 1, (unsigned)b->route_mask + 1);
		return CRUX_ERR_CORRUPT;
	}
	for (uint32_t i = 0; i <= b->job_mask; i++) {
		if (b->job_index[i] > b->njobs) {
			crux_set_err(err, errlen, "job index slot %u points past the %u jobs",
				     (unsigned)i, (unsigned)b->njobs);
			return CRUX_ERR_CORRUPT;
		}
	}
	for (uint32_t i = 0; i <= b->route_mask; i++) {
		if (b->route_index[i] > b->nroutes) {
			crux_set_err(err, errlen, "route index slot %u points past the %u routes",
				     (unsigned)i, (unsigned)b->nroutes);
			return CRUX_ERR_CORRUPT;
		}
	}
	for (uint32_t i = 0; i < b->njobs; i++) {
		const struct dt_job_slot *j = &b->jobs[i];
		if (j->key == 0 || j->level >= b->nlevels || j->state > CRUX_JOB_OVERRIDDEN ||
		    !memchr(j->id, '\0', sizeof(j->id))) {
			crux_set_err(err, errlen,
				     "job entry %u is invalid (key, level %u, state "
				     "%u or unterminated id)",
				     (unsigned)i, (unsigned)j->level, (unsigned)j->state);
			return CRUX_ERR_CORRUPT;
		}
	}
	for (uint32_t i = 0; i < b->nroutes; i++) {
		const struct dt_route_slot *r = &b->routes[i];
		if (r->key == 0 || r->nports > CRUX_ROUTE_MAX_PORTS ||
		    (r->peer.family != 4 && r->peer.family != 6)) {
			crux_set_err(err, errlen,
				     "route entry %u is invalid (key, %u ports or "
				     "address family %u)",
				     (unsigned)i, (unsigned)r->nports, (unsigned)r->peer.family);
			return CRUX_ERR_CORRUPT;
		}
	}
	return CRUX_OK;
}

/*
 * Consistent copy of the active bank's used part into 'dst' (private).
 * Counts are clamped before they size a copy; the copy is validated by the
 * caller once the sequence check passed.
 */
static crux_status_t bank_snapshot(const struct dt_file *f, struct dt_bank *dst, unsigned retries)
{
	for (unsigned t = 0; t < retries; t++) {
		uint32_t a = atomic_load_explicit(&f->top.active, memory_order_acquire) & 1u;
		const struct dt_bank *b = &f->bank[a];
		uint64_t s = crux_seq_read_begin(&b->seq);
		if (s & 1u) {
			cpu_relax();
			continue;
		}
		memcpy(dst, b, offsetof(struct dt_bank, job_index));
		uint32_t jm = dst->job_mask < DT_JOB_BUCKETS ? dst->job_mask : DT_JOB_BUCKETS - 1;
		uint32_t rm =
		    dst->route_mask < DT_ROUTE_BUCKETS ? dst->route_mask : DT_ROUTE_BUCKETS - 1;
		uint32_t nj = dst->njobs < CRUX_DT_MAX_JOBS ? dst->njobs : CRUX_DT_MAX_JOBS;
		uint32_t nr = dst->nroutes < CRUX_DT_MAX_ROUTES ? dst->nroutes : CRUX_DT_MAX_ROUTES;
		memcpy(dst->job_index, b->job_index, (jm + 1) * sizeof(uint16_t));
		memcpy(dst->route_index, b->route_index, (rm + 1) * sizeof(uint16_t));
		memcpy(dst->jobs, b->jobs, nj * sizeof(b->jobs[0]));
		memcpy(dst->routes, b->routes, nr * sizeof(b->routes[0]));
		if (crux_seq_read_ok(&b->seq, s))
			return CRUX_OK;
	}
	return CRUX_ERR_BUSY;
}

/* ---- reader ---- */

crux_status_t crux_dt_validate_mapped(const void *base, size_t size, char *err, size_t errlen)
{
	crux_status_t st;
	char why[256];
	st = crux_shm_validate_ex(base, size, CRUX_DT_MAGIC, CRUX_DT_VERSION,
				  sizeof(struct dt_file), why, sizeof(why));
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "decision table: %s", why);
		return st;
	}
	struct dt_bank *copy = malloc(sizeof(*copy));
	if (!copy)
		return CRUX_ERR_NOMEM;
	st = bank_snapshot(base, copy, DT_READ_ALL_RETRIES);
	if (st == CRUX_OK) {
		st = bank_validate(copy, why, sizeof(why));
		if (st != CRUX_OK)
			crux_set_err(err, errlen, "decision table: %s", why);
	} else {
		crux_set_err(err, errlen, "decision table: writer kept it busy");
	}
	free(copy);
	return st;
}

crux_status_t crux_dt_reader_open_ex(const char *dir, struct crux_dt_reader **out, char *err,
				     size_t errlen)
{
	crux_status_t st;
	struct crux_dt_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return CRUX_ERR_NOMEM;
	st = crux_shm_open_ex(dir, CRUX_DT_FILE, CRUX_DT_MAGIC, CRUX_DT_VERSION,
			      sizeof(struct dt_file), false, &r->map, err, errlen);
	if (st != CRUX_OK)
		goto out_free;
	char why[256];
	st = crux_dt_validate_mapped(r->map.base, r->map.size, why, sizeof(why));
	/* Busy at open time is no reason to refuse: lookups retry on their own. */
	if (st != CRUX_OK && st != CRUX_ERR_BUSY) {
		crux_set_err(err, errlen, "%s: %s; fix: restart cruxd (it rewrites the table)",
			     r->map.path, why);
		goto out_unmap;
	}
	r->f = r->map.base;
	*out = r;
	return CRUX_OK;

out_unmap:
	crux_shm_unmap(&r->map);
out_free:
	free(r);
	return st;
}

crux_status_t crux_dt_reader_open(const char *dir, struct crux_dt_reader **out)
{
	char err[512];
	crux_status_t st = crux_dt_reader_open_ex(dir, out, err, sizeof(err));
	if (st == CRUX_ERR_NOENT)
		crux_debug("%s", err);
	else if (st != CRUX_OK)
		crux_warn("%s", err);
	return st;
}

crux_status_t crux_dt_reader_open_buffer(const void *base, size_t size, struct crux_dt_reader **out,
					 char *err, size_t errlen)
{
	crux_status_t st = crux_dt_validate_mapped(base, size, err, errlen);
	if (st != CRUX_OK && st != CRUX_ERR_BUSY)
		return st;
	struct crux_dt_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return CRUX_ERR_NOMEM;
	r->map.fd = -1; /* not ours: close leaves the buffer alone */
	r->f = base;
	*out = r;
	return CRUX_OK;
}

void crux_dt_reader_close(struct crux_dt_reader *r)
{
	if (!r)
		return;
	free(r->owned);
	if (r->map.fd >= 0)
		crux_shm_unmap(&r->map);
	free(r);
}

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
			  (off_t)(offsetof(struct dt_file, bank) + (size_t)i * sizeof(struct dt_bank))) !=
		    (ssize_t)sizeof(q[i]))
			return false;
	if (pread(fd, &top, sizeof(top), (off_t)offsetof(struct dt_file, top)) != (ssize_t)sizeof(top) ||
	    pread(fd, &gen, sizeof(gen),
		  (off_t)(offsetof(struct dt_file, hdr) + offsetof(struct crux_shm_header, generation))) !=
		(ssize_t)sizeof(gen))
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
static crux_status_t copy_refusal(int fd, long long size, const char *dir, char *err,
				  size_t errlen)
{
	struct crux_shm_header h;
	char why[256];
	crux_status_t st = CRUX_ERR_CORRUPT;
	if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h))
		st = crux_shm_validate_ex(&h, sizeof(struct dt_file), CRUX_DT_MAGIC, CRUX_DT_VERSION,
					  sizeof(struct dt_file), why, sizeof(why));
	if (st == CRUX_OK || st == CRUX_ERR_CORRUPT)
		snprintf(why, sizeof(why),
			 "%lld bytes, this layout needs %zu (truncated, resized or not a table)",
			 size, sizeof(struct dt_file));
	/* The version message carries its own fix. */
	crux_set_err(err, errlen, "%s/%s is not a usable decision table: %s%s", dir, CRUX_DT_FILE,
		     why, st == CRUX_ERR_VERSION ? "" : "; fix: restart cruxd (it rewrites the table)");
	return st == CRUX_ERR_VERSION ? CRUX_ERR_VERSION : CRUX_ERR_CORRUPT;
}

/* A validated, consistent pread copy of the table file on 'fd' into 'buf'. */
static crux_status_t copy_from_fd(int fd, const char *dir, struct dt_file *buf, int tries,
				  char *err, size_t errlen)
{
	struct stat sb;
	crux_status_t st = CRUX_ERR_BUSY;
	for (int t = 0; t < tries && st == CRUX_ERR_BUSY; t++) {
		if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
			crux_set_err(err, errlen, "%s/%s is not a regular file; fix: restart cruxd "
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
			crux_set_err(err, errlen,
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
	st = copy_from_fd(fd, dir, buf, 200, err, errlen);
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
	int cur; /* the copy in use; -1 before the first */
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
	st = copy_from_fd(fd, m->dir, m->buf[next], 3, err, errlen);
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

bool crux_dt_reader_is_current(const struct crux_dt_reader *r)
{
	struct stat a, b;
	if (r->map.fd < 0 || !r->map.path[0])
		return true; /* a buffer or a sealed memfd: never replaced under us */
	return fstat(r->map.fd, &a) == 0 && lstat(r->map.path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

uint64_t crux_dt_generation(const struct crux_dt_reader *r)
{
	return atomic_load_explicit(&((struct dt_file *)r->f)->hdr.generation,
				    memory_order_acquire);
}

static uint64_t hb_age(const struct dt_file *f, uint64_t now_ns)
{
	uint64_t hb =
	    atomic_load_explicit(&((struct dt_file *)f)->hdr.heartbeat_ns, memory_order_relaxed);
	if (hb == 0)
		return UINT64_MAX;
	return now_ns > hb ? now_ns - hb : 0;
}

uint64_t crux_dt_heartbeat_age(const struct crux_dt_reader *r, uint64_t now_ns)
{
	return hb_age(r->f, now_ns);
}

static uint64_t hb_timeout(const struct dt_file *f)
{
	for (unsigned t = 0; t < CRUX_SEQ_MAX_RETRIES; t++) {
		uint32_t a = atomic_load_explicit(&f->top.active, memory_order_acquire) & 1u;
		const struct dt_bank *b = &f->bank[a];
		uint64_t s = crux_seq_read_begin(&b->seq);
		uint64_t v = LOAD(b->heartbeat_timeout_ns);
		if (crux_seq_read_ok(&b->seq, s))
			return v ? v : CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS;
	}
	return CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS;
}

bool crux_dt_is_stale(const struct crux_dt_reader *r, uint64_t now_ns)
{
	return hb_age(r->f, now_ns) > hb_timeout(r->f);
}

crux_status_t crux_dt_level_map(const struct crux_dt_reader *r, uint32_t level,
				struct crux_level_map *out)
{
	const struct dt_file *f = r->f;

	for (unsigned t = 0; t < CRUX_SEQ_MAX_RETRIES; t++) {
		uint32_t a = atomic_load_explicit(&f->top.active, memory_order_acquire) & 1u;
		const struct dt_bank *b = &f->bank[a];
		uint64_t s = crux_seq_read_begin(&b->seq);
		if (s & 1u) {
			cpu_relax();
			continue;
		}
		uint32_t nlevels = LOAD(b->nlevels);
		/* Clamp before indexing: a torn read must stay in bounds too. */
		uint32_t l = nlevels >= 1 && level >= nlevels ? nlevels - 1 : level;
		struct crux_level_map cm = b->levels[l & (CRUX_MAX_LEVELS - 1)];
		if (!crux_seq_read_ok(&b->seq, s)) {
			cpu_relax();
			continue;
		}
		if (nlevels < 1 || nlevels > CRUX_MAX_LEVELS || cm.dscp > 63)
			return CRUX_ERR_CORRUPT;
		*out = cm;
		return CRUX_OK;
	}
	return CRUX_ERR_BUSY;
}

crux_status_t crux_dt_lookup(const struct crux_dt_reader *r, uint64_t job_key,
			     const struct crux_addr *peer, struct crux_decision *out)
{
	const struct dt_file *f = r->f;
	struct peer_words pw = {0, 0, 0};
	if (peer)
		pw = peer_words(peer);
	for (unsigned t = 0; t < CRUX_SEQ_MAX_RETRIES; t++) {
		uint32_t a = atomic_load_explicit(&f->top.active, memory_order_acquire) & 1u;
		const struct dt_bank *b = &f->bank[a];
		uint64_t s = crux_seq_read_begin(&b->seq);
		if (s & 1u) {
			cpu_relax();
			continue;
		}
		bool corrupt = false, job_found = false, route_found = false;
		uint32_t nlevels = LOAD(b->nlevels);
		uint32_t level = LOAD(b->default_level);
		uint32_t state = 0;
		uint64_t gen = LOAD(b->generation);
		uint16_t path_id = CRUX_PATH_NONE;
		uint32_t nports = 0;
		uint16_t ports[CRUX_ROUTE_MAX_PORTS];

		uint32_t mask = LOAD(b->job_mask), n = LOAD(b->njobs);
		if (mask >= DT_JOB_BUCKETS || n > CRUX_DT_MAX_JOBS) {
			corrupt = true;
		} else {
			uint32_t h = job_hash(job_key) & mask;
			for (uint32_t i = 0; i <= mask; i++) {
				uint32_t slot = LOAD(b->job_index[h]);
				if (slot == 0)
					break;
				if (slot > n) {
					corrupt = true;
					break;
				}
				const struct dt_job_slot *j = &b->jobs[slot - 1];
				if (LOAD(j->key) == job_key) {
					level = LOAD(j->level);
					state = LOAD(j->state);
					job_found = true;
					break;
				}
				h = (h + 1) & mask;
			}
		}
		if (peer && !corrupt) {
			mask = LOAD(b->route_mask);
			n = LOAD(b->nroutes);
			if (mask >= DT_ROUTE_BUCKETS || n > CRUX_DT_MAX_ROUTES) {
				corrupt = true;
			} else {
				uint32_t h = route_hash(job_key, &pw) & mask;
				for (uint32_t i = 0; i <= mask; i++) {
					uint32_t slot = LOAD(b->route_index[h]);
					if (slot == 0)
						break;
					if (slot > n) {
						corrupt = true;
						break;
					}
					const struct dt_route_slot *rt = &b->routes[slot - 1];
					/* Slots hold normalised addresses: compare words. */
					uint64_t lo, hi;
					memcpy(&lo, rt->peer.bytes, 8);
					memcpy(&hi, rt->peer.bytes + 8, 8);
					if (LOAD(rt->key) == job_key && lo == pw.lo &&
					    hi == pw.hi && rt->peer.family == pw.family) {
						path_id = rt->path_id;
						nports = LOAD(rt->nports);
						memcpy(ports, rt->ports, sizeof(ports));
						route_found = true;
						break;
					}
					h = (h + 1) & mask;
				}
			}
		}
		/* Masked index: in bounds whatever was read; checked below once consistent. */
		struct crux_level_map cm = b->levels[level & (CRUX_MAX_LEVELS - 1)];
		if (!crux_seq_read_ok(&b->seq, s)) {
			cpu_relax();
			continue;
		}
		if (corrupt || nlevels < 1 || nlevels > CRUX_MAX_LEVELS || level >= nlevels ||
		    state > CRUX_JOB_OVERRIDDEN || nports > CRUX_ROUTE_MAX_PORTS)
			return CRUX_ERR_CORRUPT;

		out->generation = gen;
		out->level = (uint8_t)level;
		out->state = (uint8_t)state;
		out->job_found = job_found;
		out->route_found = route_found;
		out->class_map = cm;
		out->path_id = path_id;
		out->nports = (uint8_t)nports;
		if (route_found)
			memcpy(out->ports, ports, sizeof(out->ports));
		else
			memset(out->ports, 0, sizeof(out->ports));
		return CRUX_OK;
	}
	return CRUX_ERR_BUSY;
}

static void bank_to_contents(const struct dt_bank *b, const struct crux_shm_header *h,
			     struct crux_dt_contents *out)
{
	bank_settings(b, &out->settings);
	out->generation = b->generation;
	out->heartbeat_ns = atomic_load(&((struct crux_shm_header *)h)->heartbeat_ns);
	out->writer_pid = (pid_t)__atomic_load_n(&h->writer_pid, __ATOMIC_RELAXED);
	out->njobs = b->njobs;
	out->nroutes = b->nroutes;
	for (uint32_t i = 0; i < b->njobs; i++) {
		struct crux_dt_job *j = &out->jobs[i];
		memset(j, 0, sizeof(*j));
		j->job_key = b->jobs[i].key;
		memcpy(j->job_id, b->jobs[i].id, sizeof(j->job_id));
		j->level = b->jobs[i].level;
		j->state = b->jobs[i].state;
	}
	for (uint32_t i = 0; i < b->nroutes; i++) {
		struct crux_dt_route *r = &out->routes[i];
		memset(r, 0, sizeof(*r));
		r->job_key = b->routes[i].key;
		r->peer = b->routes[i].peer;
		r->path_id = b->routes[i].path_id;
		r->nports = b->routes[i].nports;
		memcpy(r->ports, b->routes[i].ports, sizeof(r->ports));
	}
}

crux_status_t crux_dt_read_all(const struct crux_dt_reader *r, struct crux_dt_contents *out)
{
	/* Entry by entry straight into 'out' (no allocation); used once consistent. */
	const struct dt_file *f = r->f;
	for (unsigned t = 0; t < DT_READ_ALL_RETRIES; t++) {
		uint32_t a = atomic_load_explicit(&f->top.active, memory_order_acquire) & 1u;
		const struct dt_bank *b = &f->bank[a];
		uint64_t s = crux_seq_read_begin(&b->seq);
		if (s & 1u) {
			cpu_relax();
			continue;
		}
		uint32_t nj = LOAD(b->njobs), nr = LOAD(b->nroutes);
		if (nj > CRUX_DT_MAX_JOBS || nr > CRUX_DT_MAX_ROUTES) {
			if (crux_seq_read_ok(&b->seq, s))
				return CRUX_ERR_CORRUPT;
			continue;
		}
		struct crux_dt_settings set;
		bank_settings(b, &set);
		out->settings = set;
		out->generation = LOAD(b->generation);
		out->njobs = nj;
		out->nroutes = nr;
		for (uint32_t i = 0; i < nj; i++) {
			struct crux_dt_job *j = &out->jobs[i];
			memset(j, 0, sizeof(*j));
			j->job_key = b->jobs[i].key;
			memcpy(j->job_id, b->jobs[i].id, sizeof(j->job_id));
			j->level = b->jobs[i].level;
			j->state = b->jobs[i].state;
		}
		for (uint32_t i = 0; i < nr; i++) {
			struct crux_dt_route *rt = &out->routes[i];
			memset(rt, 0, sizeof(*rt));
			rt->job_key = b->routes[i].key;
			rt->peer = b->routes[i].peer;
			rt->path_id = b->routes[i].path_id;
			rt->nports = b->routes[i].nports;
			memcpy(rt->ports, b->routes[i].ports, sizeof(rt->ports));
		}
		if (!crux_seq_read_ok(&b->seq, s))
			continue;
		out->heartbeat_ns = atomic_load(&((struct dt_file *)f)->hdr.heartbeat_ns);
		out->writer_pid = (pid_t)__atomic_load_n(&f->hdr.writer_pid, __ATOMIC_RELAXED);
		/* Same rules as the writer enforces. */
		if (crux_dt_settings_validate(&out->settings, NULL, 0) != CRUX_OK)
			return CRUX_ERR_CORRUPT;
		for (uint32_t i = 0; i < nj; i++) {
			const struct crux_dt_job *j = &out->jobs[i];
			if (j->level >= out->settings.nlevels || j->state > CRUX_JOB_OVERRIDDEN ||
			    !memchr(j->job_id, '\0', sizeof(j->job_id)))
				return CRUX_ERR_CORRUPT;
		}
		for (uint32_t i = 0; i < nr; i++)
			if (out->routes[i].nports > CRUX_ROUTE_MAX_PORTS)
				return CRUX_ERR_CORRUPT;
		return CRUX_OK;
	}
	return CRUX_ERR_BUSY;
}

/* ---- writer ---- */

static uint32_t buckets_for(uint32_t n, uint32_t max)
{
	uint32_t b = DT_MIN_BUCKETS;
	while (b < 2 * n && b < max)
		b <<= 1;
	return b;
}

/* Fill stage's entries and indexes from the caller's arrays; stage settings are kept. */
static crux_status_t stage_build(struct dt_bank *st, const struct crux_dt_job *jobs, uint32_t njobs,
				 const struct crux_dt_route *routes, uint32_t nroutes, char *err,
				 size_t errlen)
{
	if (njobs > CRUX_DT_MAX_JOBS || nroutes > CRUX_DT_MAX_ROUTES) {
		crux_set_err(err, errlen, "%u jobs / %u routes exceed the limits %d / %d",
			     (unsigned)njobs, (unsigned)nroutes, CRUX_DT_MAX_JOBS,
			     CRUX_DT_MAX_ROUTES);
		return CRUX_ERR_RANGE;
	}
	uint32_t jb = buckets_for(njobs, DT_JOB_BUCKETS);
	uint32_t rb = buckets_for(nroutes, DT_ROUTE_BUCKETS);
	st->job_mask = jb - 1;
	st->route_mask = rb - 1;
	memset(st->job_index, 0, jb * sizeof(uint16_t));
	memset(st->route_index, 0, rb * sizeof(uint16_t));
	for (uint32_t i = 0; i < njobs; i++) {
		const struct crux_dt_job *j = &jobs[i];
		if (j->job_key == 0 || j->level >= st->nlevels || j->state > CRUX_JOB_OVERRIDDEN) {
			crux_set_err(err, errlen,
				     "job %u: key 0, level %u >= %u levels or bad state %u",
				     (unsigned)i, (unsigned)j->level, (unsigned)st->nlevels,
				     (unsigned)j->state);
			return CRUX_ERR_INVAL;
		}
		uint32_t h = job_hash(j->job_key) & st->job_mask;
		while (st->job_index[h] != 0) {
			if (st->jobs[st->job_index[h] - 1].key == j->job_key) {
				crux_set_err(err, errlen, "job key %016llx appears twice",
					     (unsigned long long)j->job_key);
				return CRUX_ERR_INVAL;
			}
			h = (h + 1) & st->job_mask;
		}
		struct dt_job_slot *s = &st->jobs[i];
		memset(s, 0, sizeof(*s));
		s->key = j->job_key;
		memcpy(s->id, j->job_id, sizeof(s->id));
		s->id[sizeof(s->id) - 1] = '\0';
		s->level = j->level;
		s->state = j->state;
		st->job_index[h] = (uint16_t)(i + 1);
	}
	st->njobs = njobs;
	for (uint32_t i = 0; i < nroutes; i++) {
		const struct crux_dt_route *r = &routes[i];
		if (r->job_key == 0 || r->nports > CRUX_ROUTE_MAX_PORTS ||
		    (r->peer.family != 4 && r->peer.family != 6)) {
			crux_set_err(err, errlen,
				     "route %u: key 0, %u ports (max %d) or no peer address",
				     (unsigned)i, (unsigned)r->nports, CRUX_ROUTE_MAX_PORTS);
			return CRUX_ERR_INVAL;
		}
		/* Normalised copy: padding and unused address bytes zero. */
		struct dt_route_slot s;
		memset(&s, 0, sizeof(s));
		s.key = r->job_key;
		s.peer.family = r->peer.family;
		memcpy(s.peer.bytes, r->peer.bytes, r->peer.family == 4 ? 4 : 16);
		s.path_id = r->path_id;
		s.nports = r->nports;
		memcpy(s.ports, r->ports, r->nports * sizeof(uint16_t));
		struct peer_words pw = peer_words(&s.peer);
		uint32_t h = route_hash(s.key, &pw) & st->route_mask;
		while (st->route_index[h] != 0) {
			const struct dt_route_slot *o = &st->routes[st->route_index[h] - 1];
			if (o->key == s.key && crux_addr_equal(&o->peer, &s.peer)) {
				char a[CRUX_ADDR_STRLEN];
				crux_addr_format(&s.peer, a, sizeof(a));
				crux_set_err(err, errlen,
					     "route (job %016llx, peer %s) appears twice",
					     (unsigned long long)s.key, a);
				return CRUX_ERR_INVAL;
			}
			h = (h + 1) & st->route_mask;
		}
		st->routes[i] = s;
		st->route_index[h] = (uint16_t)(i + 1);
	}
	st->nroutes = nroutes;
	return CRUX_OK;
}

/* Copy the stage into the inactive bank and make it the active one. */
/* ---- shadow file (cruxd): pwrite, never mmap, so nobody can fault the agent ---- */

static bool shadow_put(struct crux_dt_writer *w, const void *p, size_t len, size_t off)
{
	return pwrite(w->shadow_fd, p, len, (off_t)off) == (ssize_t)len;
}

static bool still_named_fd(int fd, const char *path);

/* Replace a removed, replaced or truncated file with a whole copy of the table. */
static void shadow_rewrite(struct crux_dt_writer *w)
{
	struct crux_shm_map m;
	char err[512];
	if (!still_named_fd(w->shadow_fd, w->shadow_path)) {
		if (crux_shm_create_ex(w->shadow_dir, CRUX_DT_FILE, CRUX_DT_MAGIC, CRUX_DT_VERSION,
				       sizeof(struct dt_file), 0644, false, NULL, NULL, &m, err,
				       sizeof(err)) != CRUX_OK) {
			crux_log_once(&w->shadow_said, CRUX_LOG_WARN,
				      "cannot recreate the decision table file: %s", err);
			return;
		}
		munmap(m.base, m.size);
		if (flock(m.fd, LOCK_EX | LOCK_NB) != 0) {
			close(m.fd); /* someone else's now: keep serving through the socket */
			return;
		}
		close(w->shadow_fd);
		w->shadow_fd = m.fd;
		crux_warn("%s was removed or replaced: recreated it", w->shadow_path);
	}
	if (!shadow_put(w, w->f, sizeof(*w->f), 0) ||
	    ftruncate(w->shadow_fd, (off_t)sizeof(*w->f)) != 0)
		crux_log_once(&w->shadow_said, CRUX_LOG_WARN, "cannot write %s: %s",
			      w->shadow_path, strerror(errno));
}

/*
 * Copy bank 'i' (just written) to the file under the same seqlock protocol
 * (odd counter, body, even counter), then the active index and generation.
 */
static void shadow_sync(struct crux_dt_writer *w, uint32_t i)
{
	struct stat sb;
	if (w->shadow_fd < 0)
		return;
	if (fstat(w->shadow_fd, &sb) != 0 || (size_t)sb.st_size != sizeof(*w->f) ||
	    !still_named_fd(w->shadow_fd, w->shadow_path)) {
		shadow_rewrite(w);
		return;
	}
	const struct dt_bank *b = &w->f->bank[i];
	size_t off = offsetof(struct dt_file, bank) + i * sizeof(*b);
	uint64_t q = atomic_load(&b->seq);
	uint64_t odd = q - 1;
	bool ok = shadow_put(w, &odd, sizeof(odd), off) &&
		  shadow_put(w, (const char *)b + sizeof(b->seq), sizeof(*b) - sizeof(b->seq),
			     off + sizeof(b->seq)) &&
		  shadow_put(w, &q, sizeof(q), off) &&
		  shadow_put(w, &w->f->top, sizeof(w->f->top), offsetof(struct dt_file, top)) &&
		  shadow_put(w, &w->f->hdr, sizeof(w->f->hdr), 0);
	if (!ok)
		crux_log_once(&w->shadow_said, CRUX_LOG_WARN, "cannot write %s: %s",
			      w->shadow_path, strerror(errno));
}

static void stage_commit(struct crux_dt_writer *w)
{
	struct dt_file *f = w->f;
	struct dt_bank *st = w->stage;
	uint32_t a = atomic_load_explicit(&f->top.active, memory_order_relaxed) & 1u;
	struct dt_bank *b = &f->bank[a ^ 1u];
	uint64_t gen = atomic_load(&f->hdr.generation) + 1;

	st->generation = gen;
	crux_seq_write_begin(&b->seq);
	/* Only the used part: cost follows the contents, not the capacity. */
	memcpy((char *)b + sizeof(b->seq), (char *)st + sizeof(st->seq),
	       offsetof(struct dt_bank, job_index) - sizeof(b->seq));
	memcpy(b->job_index, st->job_index, (st->job_mask + 1) * sizeof(uint16_t));
	memcpy(b->route_index, st->route_index, (st->route_mask + 1) * sizeof(uint16_t));
	memcpy(b->jobs, st->jobs, st->njobs * sizeof(st->jobs[0]));
	memcpy(b->routes, st->routes, st->nroutes * sizeof(st->routes[0]));
	crux_seq_write_end(&b->seq);
	atomic_store_explicit(&f->top.active, a ^ 1u, memory_order_release);
	atomic_store_explicit(&f->hdr.generation, gen, memory_order_release);
	shadow_sync(w, a ^ 1u);
}

static void stage_set_settings(struct dt_bank *st, const struct crux_dt_settings *s)
{
	st->nlevels = s->nlevels;
	st->default_level = s->default_level;
	st->heartbeat_timeout_ns = s->heartbeat_timeout_ns;
	memcpy(st->levels, s->levels, sizeof(st->levels));
}

static void dt_init_file(void *base, void *arg)
{
	struct dt_file *f = base;
	const struct crux_dt_settings *s = arg;
	for (int i = 0; i < 2; i++) {
		stage_set_settings(&f->bank[i], s);
		f->bank[i].job_mask = DT_MIN_BUCKETS - 1;
		f->bank[i].route_mask = DT_MIN_BUCKETS - 1;
	}
	atomic_store(&f->top.active, 0);
}

/* The pid holding an flock on (dev, ino), from /proc/locks; 0 when not found. */
static void writer_finish(struct crux_dt_writer *w, bool keep, const struct crux_dt_settings *sp);

static pid_t flock_holder(dev_t dev, ino_t ino)
{
	FILE *fp = fopen("/proc/locks", "re");
	char line[256];
	pid_t found = 0;
	if (!fp)
		return 0;
	while (!found && fgets(line, sizeof(line), fp)) {
		char type[16];
		int pid;
		unsigned maj, min;
		unsigned long long in;
		/* "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF" */
		if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%llu", type, &pid, &maj, &min, &in) !=
		    5)
			continue;
		if (strcmp(type, "FLOCK") == 0 && in == (unsigned long long)ino &&
		    maj == major(dev) && min == minor(dev))
			found = pid;
	}
	fclose(fp);
	return found;
}

static pid_t holder_of(const struct crux_shm_map *m)
{
	const struct crux_shm_header *h = m->base;
	struct stat sb;
	if (fstat(m->fd, &sb) == 0) {
		pid_t p = flock_holder(sb.st_dev, sb.st_ino);
		if (p > 0)
			return p;
	}
	pid_t p = (pid_t)__atomic_load_n(&h->writer_pid, __ATOMIC_RELAXED);
	uint64_t start = __atomic_load_n(&h->writer_start_time, __ATOMIC_RELAXED);
	return (p > 0 && crux_proc_alive(p, start)) ? p : 0;
}

static bool still_named_fd(int fd, const char *path)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* Is 'path' still the inode we locked? (A concurrent writer may have replaced it.) */
static bool still_named(const struct crux_shm_map *m)
{
	struct stat a, b;
	return fstat(m->fd, &a) == 0 && lstat(m->path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* A writer with its staging buffers and validated settings '*s', no file yet. */
static crux_status_t writer_new(const struct crux_dt_settings *settings, struct crux_dt_settings *s,
				struct crux_dt_writer **out, char *err, size_t errlen)
{
	char why[512];
	crux_status_t st;
	struct crux_dt_writer *w;

	*s = *settings;
	st = crux_dt_settings_validate(s, why, sizeof(why));
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "decision table settings: %s", why);
		return st;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return CRUX_ERR_NOMEM;
	w->map.fd = -1;
	w->shadow_fd = -1;
	w->stage = calloc(1, sizeof(*w->stage));
	w->scratch = calloc(1, sizeof(*w->scratch));
	if (!w->stage || !w->scratch) {
		free(w->scratch);
		free(w->stage);
		free(w);
		return CRUX_ERR_NOMEM;
	}
	*out = w;
	return CRUX_OK;
}

/* The inverse of writer_new (files, mappings and descriptors are the caller's). */
static void writer_free_bare(struct crux_dt_writer *w)
{
	free(w->scratch);
	free(w->stage);
	free(w);
}

crux_status_t crux_dt_writer_open_ex(const char *dir, const struct crux_dt_settings *settings,
				     struct crux_dt_writer **out, pid_t *holder_pid, char *err,
				     size_t errlen)
{
	crux_status_t st;
	char why[512];
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	st = writer_new(settings, &s, &w, err, errlen);
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
						sizeof(struct dt_file), 0644, true, dt_init_file,
						&s, &w->map, why, sizeof(why));
			if (st == CRUX_ERR_EXIST)
				continue; /* another writer created it: open theirs */
		} else if (st == CRUX_ERR_CORRUPT || st == CRUX_ERR_VERSION) {
			crux_warn("%s; replacing it with an empty table", why);
			st = crux_shm_create_ex(dir, CRUX_DT_FILE, CRUX_DT_MAGIC, CRUX_DT_VERSION,
						sizeof(struct dt_file), 0644, false, dt_init_file,
						&s, &w->map, why, sizeof(why));
		}
		if (st != CRUX_OK) {
			crux_set_err(err, errlen, "%s", why);
			goto out_free;
		}
		if (flock(w->map.fd, LOCK_EX | LOCK_NB) != 0) {
			int e = errno;
			if (e == EWOULDBLOCK) {
				pid_t holder = holder_of(&w->map);
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
		if (still_named(&w->map))
			break;
		crux_shm_unmap(&w->map);
	}
	w->f = w->map.base;
	writer_finish(w, keep, &s);
	*out = w;
	return CRUX_OK;

out_unmap:
	crux_shm_unmap(&w->map);
out_free:
	writer_free_bare(w);
	return st;
}

/* After mapping: adopt the old entries ('keep'), settings, writer identity, first publish. */
static void writer_finish(struct crux_dt_writer *w, bool keep, const struct crux_dt_settings *sp)
{
	struct crux_dt_settings s = *sp;
	char why[512];
	crux_status_t st;

	/* Restart: keep the published entries, under the new settings. */
	if (keep) {
		st = bank_snapshot(w->f, w->stage, DT_READ_ALL_RETRIES);
		if (st == CRUX_OK)
			st = bank_validate(w->stage, why, sizeof(why));
		if (st != CRUX_OK) {
			crux_warn("%s: existing entries dropped (%s)", w->map.path,
				  st == CRUX_ERR_BUSY ? "busy" : why);
			memset(w->stage, 0, sizeof(*w->stage));
			w->stage->job_mask = DT_MIN_BUCKETS - 1;
			w->stage->route_mask = DT_MIN_BUCKETS - 1;
			w->stage->nlevels = s.nlevels;
		}
		for (uint32_t i = 0; i < w->stage->njobs; i++) {
			if (w->stage->jobs[i].level >= s.nlevels) {
				crux_warn("job %s: level %u clamped to %u (now %u levels)",
					  w->stage->jobs[i].id, (unsigned)w->stage->jobs[i].level,
					  (unsigned)s.nlevels - 1, (unsigned)s.nlevels);
				w->stage->jobs[i].level = (uint8_t)(s.nlevels - 1);
			}
		}
	} else {
		w->stage->job_mask = DT_MIN_BUCKETS - 1;
		w->stage->route_mask = DT_MIN_BUCKETS - 1;
	}
	stage_set_settings(w->stage, &s);
	/* A writer that died inside a publish left an odd counter: make it even
	 * again, or our next write (which adds one) would look consistent. */
	for (int i = 0; i < 2; i++) {
		uint64_t q = atomic_load(&w->f->bank[i].seq);
		if (q & 1u)
			atomic_store(&w->f->bank[i].seq, q + 1);
	}
	uint64_t start = 0;
	crux_proc_start_time(getpid(), &start);
	__atomic_store_n(&w->f->hdr.writer_start_time, start, __ATOMIC_RELAXED);
	__atomic_store_n(&w->f->hdr.writer_pid, (uint32_t)getpid(), __ATOMIC_RELEASE);
	stage_commit(w);
	crux_dt_heartbeat(w);
}

crux_status_t crux_dt_writer_open_memfd(const struct crux_dt_settings *settings,
					struct crux_dt_writer **out, char *err, size_t errlen)
{
	crux_status_t st;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	st = writer_new(settings, &s, &w, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_memfd_create("crux-decision", CRUX_DT_MAGIC, CRUX_DT_VERSION,
			       sizeof(struct dt_file), CRUX_SEALS_TABLE, dt_init_file, &s,
			       &w->map, err, errlen);
	if (st != CRUX_OK)
		goto out_free;
	w->f = w->map.base;
	writer_finish(w, false, &s);
	*out = w;
	return CRUX_OK;

out_free:
	writer_free_bare(w);
	return st;
}

int crux_dt_writer_fd(const struct crux_dt_writer *w)
{
	return w ? w->map.fd : -1;
}

crux_status_t crux_dt_reader_open_fd(int fd, struct crux_dt_reader **out, char *err,
				     size_t errlen)
{
	char why[256];
	crux_status_t st;
	struct crux_dt_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return CRUX_ERR_NOMEM;
	st = crux_memfd_map(fd, CRUX_DT_MAGIC, CRUX_DT_VERSION, sizeof(struct dt_file),
			    CRUX_SEALS_TABLE, false, &r->map, why, sizeof(why));
	if (st == CRUX_OK) {
		st = crux_dt_validate_mapped(r->map.base, r->map.size, why, sizeof(why));
		if (st == CRUX_ERR_BUSY)
			st = CRUX_OK; /* lookups retry on their own */
		else if (st != CRUX_OK)
			crux_shm_unmap(&r->map);
	}
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "decision table from cruxd: %s", why);
		free(r);
		return st;
	}
	r->f = r->map.base;
	*out = r;
	return CRUX_OK;
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

crux_status_t crux_dt_writer_read(const struct crux_dt_writer *w, struct crux_dt_contents *out)
{
	bank_to_contents(w->stage, &w->f->hdr, out);
	return CRUX_OK;
}

crux_status_t crux_dt_publish_ex(struct crux_dt_writer *w, const struct crux_dt_job *jobs,
				 uint32_t njobs, const struct crux_dt_route *routes,
				 uint32_t nroutes, char *err, size_t errlen)
{
	crux_status_t st;
	if (njobs > CRUX_DT_MAX_JOBS || nroutes > CRUX_DT_MAX_ROUTES) {
		crux_set_err(err, errlen, "%u jobs / %u routes exceed the limits %d / %d",
			     (unsigned)njobs, (unsigned)nroutes, CRUX_DT_MAX_JOBS,
			     CRUX_DT_MAX_ROUTES);
		return CRUX_ERR_RANGE;
	}
	/* Build into the scratch bank so the current contents survive an error. */
	struct dt_bank *next = w->scratch;
	memcpy(next, w->stage, offsetof(struct dt_bank, job_index));
	st = stage_build(next, jobs, njobs, routes, nroutes, err, errlen);
	if (st != CRUX_OK)
		return st;
	w->scratch = w->stage;
	w->stage = next;
	stage_commit(w);
	return CRUX_OK;
}

crux_status_t crux_dt_publish(struct crux_dt_writer *w, const struct crux_dt_job *jobs,
			      uint32_t njobs, const struct crux_dt_route *routes, uint32_t nroutes)
{
	char err[256];
	crux_status_t st = crux_dt_publish_ex(w, jobs, njobs, routes, nroutes, err, sizeof(err));
	if (st != CRUX_OK)
		crux_err("decision table not published: %s", err);
	return st;
}

crux_status_t crux_dt_set_settings(struct crux_dt_writer *w, const struct crux_dt_settings *s)
{
	char err[256];
	if (crux_dt_settings_validate(s, err, sizeof(err)) != CRUX_OK) {
		crux_err("decision table settings refused: %s", err);
		return CRUX_ERR_INVAL;
	}
	for (uint32_t i = 0; i < w->stage->njobs; i++) {
		if (w->stage->jobs[i].level >= s->nlevels) {
			crux_err("decision table settings refused: job %s has level %u, not "
				 "below the new %u levels",
				 w->stage->jobs[i].id, (unsigned)w->stage->jobs[i].level,
				 (unsigned)s->nlevels);
			return CRUX_ERR_INVAL;
		}
	}
	stage_set_settings(w->stage, s);
	stage_commit(w);
	return CRUX_OK;
}

void crux_dt_heartbeat(struct crux_dt_writer *w)
{
	uint64_t now = crux_now_ns();
	atomic_store_explicit(&w->f->hdr.heartbeat_ns, now, memory_order_release);
	if (w->shadow_fd >= 0) {
		struct stat sb;
		if (fstat(w->shadow_fd, &sb) != 0 || (size_t)sb.st_size != sizeof(*w->f) ||
		    !still_named_fd(w->shadow_fd, w->shadow_path))
			shadow_rewrite(w);
		else
			shadow_put(w, &now, sizeof(now), offsetof(struct crux_shm_header, heartbeat_ns));
	}
}

/* The flock holder of the table on 'fd', else its header's live writer; 0 if none found. */
static pid_t holder_of_fd(int fd)
{
	struct crux_shm_header h;
	struct stat sb;
	if (fstat(fd, &sb) == 0) {
		pid_t p = flock_holder(sb.st_dev, sb.st_ino);
		if (p > 0)
			return p;
	}
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return 0;
	pid_t p = (pid_t)h.writer_pid;
	return (p > 0 && crux_proc_alive(p, h.writer_start_time)) ? p : 0;
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
	if (fchmod(fd, 0644) != 0 ||
	    pwrite(fd, w->f, sizeof(*w->f), 0) != (ssize_t)sizeof(*w->f) ||
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
				 struct crux_dt_writer **out, pid_t *holder_pid, int tries, char *err,
				 size_t errlen)
{
	crux_status_t st;
	char why[512];
	int dfd = -1;
	struct crux_dt_settings s;
	struct crux_dt_writer *w;
	st = writer_new(settings, &s, &w, err, errlen);
	if (st != CRUX_OK)
		return st;
	if ((size_t)snprintf(w->shadow_path, sizeof(w->shadow_path), "%s/%s", dir,
			     CRUX_DT_FILE) >= sizeof(w->shadow_path)) {
		crux_set_err(err, errlen, "directory name %s is too long", dir);
		st = CRUX_ERR_INVAL;
		goto out_free;
	}
	snprintf(w->shadow_dir, sizeof(w->shadow_dir), "%s", dir);
	st = crux_shm_open_dir(dir, true, &dfd, err, errlen);
	if (st != CRUX_OK)
		goto out_free;
	st = crux_memfd_create("crux-decision", CRUX_DT_MAGIC, CRUX_DT_VERSION,
			       sizeof(struct dt_file), CRUX_SEALS_TABLE, dt_init_file, &s, &w->map,
			       err, errlen);
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
				pid_t holder = holder_of_fd(fd);
				if (holder_pid)
					*holder_pid = holder;
				if (holder > 0)
					crux_set_err(err, errlen,
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
		if (!still_named_fd(fd, w->shadow_path)) {
			close(fd);
			continue;
		}
		/* We hold the lock: a copy of a whole table is taken at once. */
		st = copy_from_fd(fd, dir, w->f, 200, why, sizeof(why));
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
		dt_init_file(w->f, &s);
	}
	/* writer_finish publishes into the memfd only while shadow_fd is not set. */
	int fd_keep = w->shadow_fd;
	w->shadow_fd = -1;
	writer_finish(w, keep, &s);
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
		shadow_rewrite(w); /* the whole image, with our header and settings */
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
	writer_free_bare(w);
	return st;
}

crux_status_t crux_dt_writer_open_shadow(const char *dir, const struct crux_dt_settings *settings,
					 struct crux_dt_writer **out, pid_t *holder_pid, char *err,
					 size_t errlen)
{
	return open_shadow(dir, settings, out, holder_pid, 8, err, errlen);
}

void crux_dt_writer_close(struct crux_dt_writer *w)
{
	if (!w)
		return;
	/* Closing the descriptor releases the flock. */
	crux_shm_unmap(&w->map);
	if (w->shadow_fd >= 0)
		close(w->shadow_fd);
	writer_free_bare(w);
}
