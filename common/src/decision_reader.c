/* SPDX-License-Identifier: Apache-2.0 */
/* Decision table readers of a mapping (file, buffer or cruxd's memfd): lookups on the data path. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common_int.h"
#include "crux/decision.h"
#include "crux/log.h"
#include "crux/shm.h"
#include "decision_layout.h"

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

crux_status_t crux_dt_reader_open_fd(int fd, struct crux_dt_reader **out, char *err, size_t errlen)
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

void crux_dt_reader_close(struct crux_dt_reader *r)
{
	if (!r)
		return;
	free(r->owned);
	if (r->map.fd >= 0)
		crux_shm_unmap(&r->map);
	free(r);
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

static void timeout_read(const void *region, uint64_t seq, void *arg)
{
	(void)seq;
	*(uint64_t *)arg = LOAD(((const struct dt_bank *)region)->heartbeat_timeout_ns);
}

static uint64_t hb_timeout(const struct dt_file *f)
{
	uint64_t v = 0;
	if (crux_dt_bank_read(f, timeout_read, &v, CRUX_SEQ_MAX_RETRIES) == CRUX_OK && v)
		return v;
	return CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS;
}

bool crux_dt_is_stale(const struct crux_dt_reader *r, uint64_t now_ns)
{
	return hb_age(r->f, now_ns) > hb_timeout(r->f);
}

struct level_read {
	uint32_t level, nlevels;
	struct crux_level_map cm;
};

static void level_read(const void *region, uint64_t seq, void *arg)
{
	const struct dt_bank *b = region;
	struct level_read *lr = arg;
	(void)seq;
	lr->nlevels = LOAD(b->nlevels);
	/* Clamp before indexing: a torn read must stay in bounds too. */
	uint32_t l = lr->nlevels >= 1 && lr->level >= lr->nlevels ? lr->nlevels - 1 : lr->level;
	lr->cm = b->levels[l & (CRUX_MAX_LEVELS - 1)];
}

crux_status_t crux_dt_level_map(const struct crux_dt_reader *r, uint32_t level,
				struct crux_level_map *out)
{
	struct level_read lr = {.level = level};
	crux_status_t st = crux_dt_bank_read(r->f, level_read, &lr, CRUX_SEQ_MAX_RETRIES);
	if (st != CRUX_OK)
		return st;
	if (lr.nlevels < 1 || lr.nlevels > CRUX_MAX_LEVELS || lr.cm.dscp > 63)
		return CRUX_ERR_CORRUPT;
	*out = lr.cm;
	return CRUX_OK;
}

/* One lookup's inputs and what it read; used only once the read was consistent. */
struct lookup {
	uint64_t job_key;
	const struct crux_addr *peer;
	struct peer_words pw;
	bool corrupt, job_found, route_found;
	uint32_t nlevels, level, state, nports;
	uint64_t gen;
	uint16_t path_id;
	uint64_t ports[2]; /* the route's CRUX_ROUTE_MAX_PORTS ports, as two words */
	struct crux_level_map cm;
};

_Static_assert(sizeof(((struct dt_route_slot *)0)->ports) == 2 * sizeof(uint64_t),
	       "ports fit two words");

static void lookup_read(const void *region, uint64_t seq, void *arg)
{
	const struct dt_bank *b = region;
	struct lookup *lk = arg;
	const uint64_t key = lk->job_key;
	bool corrupt = false, job_found = false, route_found = false;
	uint32_t level = LOAD(b->default_level), state = 0, nports = 0;
	uint16_t path_id = CRUX_PATH_NONE;
	(void)seq;

	uint32_t mask = LOAD(b->job_mask), n = LOAD(b->njobs);
	if (mask >= DT_JOB_BUCKETS || n > CRUX_DT_MAX_JOBS) {
		corrupt = true;
	} else {
		uint32_t h = job_hash(key) & mask;
		for (uint32_t i = 0; i <= mask; i++) {
			uint32_t slot = LOAD(b->job_index[h]);
			if (slot == 0)
				break;
			if (slot > n) {
				corrupt = true;
				break;
			}
			const struct dt_job_slot *j = &b->jobs[slot - 1];
			if (LOAD(j->key) == key) {
				level = LOAD(j->level);
				state = LOAD(j->state);
				job_found = true;
				break;
			}
			h = (h + 1) & mask;
		}
	}
	if (lk->peer && !corrupt) {
		const struct peer_words pw = lk->pw;
		mask = LOAD(b->route_mask);
		n = LOAD(b->nroutes);
		if (mask >= DT_ROUTE_BUCKETS || n > CRUX_DT_MAX_ROUTES) {
			corrupt = true;
		} else {
			uint32_t h = route_hash(key, &pw) & mask;
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
				if (LOAD(rt->key) == key && lo == pw.lo && hi == pw.hi &&
				    rt->peer.family == pw.family) {
					path_id = rt->path_id;
					nports = LOAD(rt->nports);
					memcpy(&lk->ports[0], &rt->ports[0], 8);
					memcpy(&lk->ports[1], &rt->ports[4], 8);
					route_found = true;
					break;
				}
				h = (h + 1) & mask;
			}
		}
	}
	lk->corrupt = corrupt;
	lk->job_found = job_found;
	lk->route_found = route_found;
	lk->nlevels = LOAD(b->nlevels);
	lk->level = level;
	lk->state = state;
	lk->gen = LOAD(b->generation);
	lk->path_id = path_id;
	lk->nports = nports;
	/* Masked index: in bounds whatever was read; checked once consistent. */
	lk->cm = b->levels[level & (CRUX_MAX_LEVELS - 1)];
}

crux_status_t crux_dt_lookup(const struct crux_dt_reader *r, uint64_t job_key,
			     const struct crux_addr *peer, struct crux_decision *out)
{
	struct lookup lk;
	lk.job_key = job_key;
	lk.peer = peer;
	lk.pw = peer ? peer_words(peer) : (struct peer_words){0, 0, 0};
	lk.ports[0] = lk.ports[1] = 0;
	crux_status_t st = crux_dt_bank_read(r->f, lookup_read, &lk, CRUX_SEQ_MAX_RETRIES);
	if (st != CRUX_OK)
		return st;
	if (lk.corrupt || lk.nlevels < 1 || lk.nlevels > CRUX_MAX_LEVELS ||
	    lk.level >= lk.nlevels || lk.state > CRUX_JOB_OVERRIDDEN ||
	    lk.nports > CRUX_ROUTE_MAX_PORTS)
		return CRUX_ERR_CORRUPT;

	out->generation = lk.gen;
	out->level = (uint8_t)lk.level;
	out->state = (uint8_t)lk.state;
	out->job_found = lk.job_found;
	out->route_found = lk.route_found;
	out->class_map = lk.cm;
	out->path_id = lk.path_id;
	out->nports = (uint8_t)lk.nports;
	if (lk.route_found)
		memcpy(out->ports, lk.ports, sizeof(out->ports));
	else
		memset(out->ports, 0, sizeof(out->ports));
	return CRUX_OK;
}

/* Entry by entry straight into 'out' (no allocation); bad counts are reported once consistent. */
struct all_read {
	struct crux_dt_contents *out;
	bool bad_counts;
};

static void all_read(const void *region, uint64_t seq, void *arg)
{
	const struct dt_bank *b = region;
	struct all_read *ar = arg;
	struct crux_dt_contents *out = ar->out;
	(void)seq;
	uint32_t nj = LOAD(b->njobs), nr = LOAD(b->nroutes);
	ar->bad_counts = nj > CRUX_DT_MAX_JOBS || nr > CRUX_DT_MAX_ROUTES;
	if (ar->bad_counts)
		return;
	struct crux_dt_settings set;
	crux_dt_bank_settings(b, &set);
	out->settings = set;
	out->generation = LOAD(b->generation);
	out->njobs = nj;
	out->nroutes = nr;
	crux_dt_bank_entries(b, nj, nr, out);
}

crux_status_t crux_dt_read_all(const struct crux_dt_reader *r, struct crux_dt_contents *out)
{
	const struct dt_file *f = r->f;
	struct all_read ar = {.out = out};
	crux_status_t st = crux_dt_bank_read(f, all_read, &ar, DT_READ_ALL_RETRIES);
	if (st != CRUX_OK)
		return st;
	if (ar.bad_counts)
		return CRUX_ERR_CORRUPT;
	out->heartbeat_ns = atomic_load(&((struct dt_file *)f)->hdr.heartbeat_ns);
	out->writer_pid = (pid_t)__atomic_load_n(&f->hdr.writer_pid, __ATOMIC_RELAXED);
	/* Same rules as the writer enforces. */
	if (crux_dt_settings_validate(&out->settings, NULL, 0) != CRUX_OK)
		return CRUX_ERR_CORRUPT;
	for (uint32_t i = 0; i < out->njobs; i++) {
		const struct crux_dt_job *j = &out->jobs[i];
		if (j->level >= out->settings.nlevels || j->state > CRUX_JOB_OVERRIDDEN ||
		    !memchr(j->job_id, '\0', sizeof(j->job_id)))
			return CRUX_ERR_CORRUPT;
	}
	for (uint32_t i = 0; i < out->nroutes; i++)
		if (out->routes[i].nports > CRUX_ROUTE_MAX_PORTS)
			return CRUX_ERR_CORRUPT;
	return CRUX_OK;
}
