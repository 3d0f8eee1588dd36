/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decision table writer: the private stage and scratch banks, publish into the
 * inactive bank and flip, settings, heartbeat, and (cruxd) the shadow file
 * kept in step with pwrite. Opening a writer: decision_open.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/decision.h"
#include "crux/log.h"
#include "crux/shm.h"
#include "decision_writer_int.h"

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

/* ---- shadow file (cruxd): pwrite, never mmap, so nobody can fault the agent ---- */

static bool shadow_put(struct crux_dt_writer *w, const void *p, size_t len, size_t off)
{
	return pwrite(w->shadow_fd, p, len, (off_t)off) == (ssize_t)len;
}

void crux_dt_shadow_rewrite(struct crux_dt_writer *w)
{
	struct crux_shm_map m;
	char err[512];
	if (!crux_dt_still_named_fd(w->shadow_fd, w->shadow_path)) {
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
		crux_log_once(&w->shadow_said, CRUX_LOG_WARN, "cannot write %s: %s", w->shadow_path,
			      strerror(errno));
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
	    !crux_dt_still_named_fd(w->shadow_fd, w->shadow_path)) {
		crux_dt_shadow_rewrite(w);
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
		crux_log_once(&w->shadow_said, CRUX_LOG_WARN, "cannot write %s: %s", w->shadow_path,
			      strerror(errno));
}

/* Copy the stage into the inactive bank and make it the active one. */
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

void crux_dt_init_file(void *base, void *arg)
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

crux_status_t crux_dt_writer_new(const struct crux_dt_settings *settings,
				 struct crux_dt_settings *s, struct crux_dt_writer **out, char *err,
				 size_t errlen)
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

void crux_dt_writer_free_bare(struct crux_dt_writer *w)
{
	free(w->scratch);
	free(w->stage);
	free(w);
}

void crux_dt_writer_finish(struct crux_dt_writer *w, bool keep, const struct crux_dt_settings *sp)
{
	struct crux_dt_settings s = *sp;
	char why[512];
	crux_status_t st;

	/* Restart: keep the published entries, under the new settings. */
	if (keep) {
		st = crux_dt_bank_snapshot(w->f, w->stage, DT_READ_ALL_RETRIES);
		if (st == CRUX_OK)
			st = crux_dt_bank_validate(w->stage, why, sizeof(why));
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

int crux_dt_writer_fd(const struct crux_dt_writer *w)
{
	return w ? w->map.fd : -1;
}

crux_status_t crux_dt_writer_read(const struct crux_dt_writer *w, struct crux_dt_contents *out)
{
	const struct dt_bank *b = w->stage;
	crux_dt_bank_settings(b, &out->settings);
	out->generation = b->generation;
	out->heartbeat_ns = atomic_load(&w->f->hdr.heartbeat_ns);
	out->writer_pid = (pid_t)__atomic_load_n(&w->f->hdr.writer_pid, __ATOMIC_RELAXED);
	out->njobs = b->njobs;
	out->nroutes = b->nroutes;
	crux_dt_bank_entries(b, b->njobs, b->nroutes, out);
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
		    !crux_dt_still_named_fd(w->shadow_fd, w->shadow_path))
			crux_dt_shadow_rewrite(w);
		else
			shadow_put(w, &now, sizeof(now),
				   offsetof(struct crux_shm_header, heartbeat_ns));
	}
}

void crux_dt_writer_close(struct crux_dt_writer *w)
{
	if (!w)
		return;
	/* Closing the descriptor releases the flock. */
	crux_shm_unmap(&w->map);
	if (w->shadow_fd >= 0)
		close(w->shadow_fd);
	crux_dt_writer_free_bare(w);
}
