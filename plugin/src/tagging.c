/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Priority class and path of a connection, from the decision table; byte
 * counters per peer host and level, published into the profile record.
 *
 * Precedence of the class: a fresh decision table naming the job >
 * CRUX_CLASS > NCCL's per-communicator traffic class > the table's default
 * level (fresh table) > DSCP 0 / priority 0.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "busy.h"
#include "crux/attach.h"
#include "crux/clock.h"
#include "crux/log.h"
#include "crux/shm.h"
#include "cruxn.h"

enum dt_cond { DT_UNKNOWN = 0, DT_OK, DT_MISSING, DT_STALE, DT_CORRUPT };

#define DT_RETRY_NS	   1000000000ull
#define DT_COPY_REFRESH_NS 100000000ull /* v1: the copy of decision.tbl is re-read this often */

/* One log line per change of the table's condition, process-wide. */
static void note_cond(int cond, const char *why)
{
	int old = atomic_exchange(&cruxn_ctx.dt_state, cond);
	if (old == cond)
		return;
	if (cond == DT_OK && cruxn_ctx.conn_welcomed)
		crux_info("decision table from cruxd (%s/%s) in use", cruxn_ctx.shm_dir,
			  CRUX_AGENT_SOCK);
	else if (cond == DT_OK)
		crux_info("decision table %s/%s in use", cruxn_ctx.shm_dir, CRUX_DT_FILE);
	else if (strstr(why, CRUX_DT_FILE)) /* common's message names the file and the fix */
		crux_warn("%s; until the decision table is usable: the default class and ECMP "
			  "paths",
			  why);
	else
		crux_warn("decision table %s/%s %s: using the default class and ECMP paths until "
			  "it is usable (is cruxd running?)",
			  cruxn_ctx.shm_dir, CRUX_DT_FILE, why);
}

/*
 * Open (or re-open after the agent replaced the file) the table, at most
 * once per second, whoever calls first. Returns the reader now in use.
 */
static struct crux_dt_reader *dt_open_locked_at(bool at_init);
static struct crux_dt_reader *dt_open_locked(void)
{
	return dt_open_locked_at(false);
}

static struct crux_dt_reader *dt_maybe_reopen(uint64_t now)
{
	struct cruxn_context *c = &cruxn_ctx;
	uint64_t next = atomic_load_explicit(&c->dt_next_try_ns, memory_order_relaxed);
	struct crux_dt_reader *cur = atomic_load_explicit(&c->dt, memory_order_acquire);

	if (now < next)
		return cur;
	if (!atomic_compare_exchange_strong(&c->dt_next_try_ns, &next, now + DT_RETRY_NS))
		return cur; /* another thread is trying */
	if (pthread_mutex_trylock(&c->lock) != 0)
		return cur;
	cur = dt_open_locked();
	pthread_mutex_unlock(&c->lock);
	return cur;
}

/* Contract v2: does an agent serve the attach socket in the directory? */
static bool agent_socket_present(void)
{
	char path[CRUX_PATH_MAX + 32];
	struct stat sb;
	snprintf(path, sizeof(path), "%.255s/%s", cruxn_ctx.shm_dir, CRUX_AGENT_SOCK);
	return lstat(path, &sb) == 0 && S_ISSOCK(sb.st_mode);
}

static void profile_identity(struct crux_prof_identity *id);

/*
 * Make 'r' the reader in use; the old one stays mapped (threads may hold it).
 * The v1 copies' readers belong to the mirror, which keeps them until finalize.
 */
static struct crux_dt_reader *install_locked(struct crux_dt_reader *cur, struct crux_dt_reader *r)
{
	struct cruxn_context *c = &cruxn_ctx;
	bool keep = cur && cur != r && !crux_dt_mirror_owns(c->dt_mirror, cur);
	if (keep && c->ndt_retired >= (int)(sizeof(c->dt_retired) / sizeof(c->dt_retired[0]))) {
		if (!crux_dt_mirror_owns(c->dt_mirror, r))
			crux_dt_reader_close(r);
		return cur;
	}
	if (keep)
		c->dt_retired[c->ndt_retired++] = cur;
	atomic_store_explicit(&c->dt, r, memory_order_release);
	return r;
}

/*
 * The agent's sealed table over the attach socket, without blocking (at init
 * up to 500 ms). *served: an agent holds or is answering our connection, so
 * the v1 file is not to be used. Returns a new reader, or NULL.
 */
static struct crux_dt_reader *attach_locked(bool at_init, bool *served)
{
	struct cruxn_context *c = &cruxn_ctx;
	struct crux_dt_reader *r = NULL;
	char err[512] = "";
	crux_status_t st;

	*served = false;
	if (c->conn && c->conn_welcomed) {
		if (crux_agent_conn_alive(c->conn)) {
			*served = true;
			return NULL;
		}
		crux_agent_conn_close(c->conn);
		c->conn = NULL;
		c->conn_welcomed = false;
		crux_warn("cruxd closed its connection: the last decisions until it is back");
	}
	if (!c->conn) {
		if (!agent_socket_present())
			return NULL;
		if (!c->att_prof) {
			struct crux_prof_identity id;
			profile_identity(&id);
			if (crux_prof_open_shared_ex(&id, &c->att_prof, err, sizeof(err)) !=
			    CRUX_OK)
				c->att_prof =
				    NULL; /* attach as an observer: the table still helps */
		}
		st = crux_agent_conn_open(c->shm_dir, c->att_prof, &c->conn, err, sizeof(err));
		if (st != CRUX_OK) {
			c->conn = NULL;
			return NULL;
		}
	}
	*served = true;
	st = at_init ? crux_agent_conn_wait(c->conn, 500, &r, err, sizeof(err))
		     : crux_agent_conn_poll(c->conn, &r, err, sizeof(err));
	if (st == CRUX_ERR_BUSY || st == CRUX_ERR_TIMEOUT)
		return NULL; /* the answer is looked for on the next try */
	if (st != CRUX_OK) {
		crux_agent_conn_close(c->conn);
		c->conn = NULL;
		*served = false;
		note_cond(DT_CORRUPT, err);
		return NULL;
	}
	c->conn_welcomed = true;
	return r;
}

/* Called with the context lock held. */
static struct crux_dt_reader *dt_open_locked_at(bool at_init)
{
	struct cruxn_context *c = &cruxn_ctx;
	struct crux_dt_reader *cur = atomic_load_explicit(&c->dt, memory_order_acquire);
	struct crux_dt_reader *r = NULL;
	crux_status_t st;
	bool served;

	r = attach_locked(at_init, &served);
	if (r) {
		atomic_store(&c->dt_copy_next_ns, 0); /* the agent's table: no copies */
		return install_locked(cur, r);
	}
	if (served)
		return cur;

	/*
	 * Contract v1: a private copy of the file, re-read with pread (never
	 * mapped, so a file truncated under us costs a stale copy, not a SIGBUS).
	 * The _ex-like mirror calls log nothing: a bad table retried says so once.
	 */
	char err[512] = "";
	if (!c->dt_mirror)
		st = crux_dt_mirror_open(c->shm_dir, &c->dt_mirror, &r, err, sizeof(err));
	else
		st = crux_dt_mirror_refresh(c->dt_mirror, &r, err, sizeof(err));
	/* Without a first copy the stale path retries, once a second. */
	if (c->dt_mirror)
		atomic_store(&c->dt_copy_next_ns, crux_now_ns() + DT_COPY_REFRESH_NS);
	if (st == CRUX_OK)
		cur = r == cur ? cur : install_locked(cur, r);
	else if (!cur && st == CRUX_ERR_NOENT)
		note_cond(DT_MISSING, "does not exist");
	else if (!cur)
		note_cond(DT_CORRUPT, err[0] ? err : crux_status_str(st));
	return cur;
}

/* v1 copies: re-read the file at most every DT_COPY_REFRESH_NS, whoever comes first. */
static void dt_copy_refresh(uint64_t now)
{
	struct cruxn_context *c = &cruxn_ctx;
	uint64_t next = atomic_load_explicit(&c->dt_copy_next_ns, memory_order_relaxed);

	if (!next || now < next)
		return;
	if (!atomic_compare_exchange_strong(&c->dt_copy_next_ns, &next, now + DT_COPY_REFRESH_NS))
		return; /* another thread is at it */
	if (pthread_mutex_trylock(&c->lock) != 0)
		return;
	(void)dt_open_locked();
	pthread_mutex_unlock(&c->lock);
}

void cruxn_tag_init(struct cruxn_tag_state *ts, const struct crux_addr *peer, int nccl_tc)
{
	memset(ts, 0, sizeof(*ts));
	ts->nccl_tc = nccl_tc;
	if (peer)
		ts->peer = *peer;
	ts->route.path_id = CRUX_PATH_NONE;
}

/*
 * CRUX_CLASS: the level's DSCP, priority and SL from a usable table's header (what
 * the operator configured the switches for), else from the default map.
 */
static void class_from_level(int level, const struct crux_dt_reader *r, struct cruxn_class *cls)
{
	struct crux_dt_settings s;
	struct crux_level_map m;

	if (r && crux_dt_level_map(r, (uint32_t)level, &m) == CRUX_OK) {
		cls->tos = m.dscp << 2;
		cls->prio = m.sock_prio;
		cls->sl = m.ib_sl;
	} else {
		crux_dt_settings_default(CRUX_MAX_LEVELS, &s);
		cls->tos = s.levels[level].dscp << 2;
		cls->prio = s.levels[level].sock_prio;
		cls->sl = s.levels[level].ib_sl;
	}
	cls->level = level;
}

int cruxn_tag_level_classes(struct cruxn_class *out, int max, bool dflt)
{
	struct crux_dt_reader *r = atomic_load_explicit(&cruxn_ctx.dt, memory_order_acquire);
	struct crux_level_map m;
	int n = 0;

	if (!r && !dflt)
		return 0;
	for (int lv = 0; lv < CRUX_MAX_LEVELS && n < max; lv++) {
		if (r && crux_dt_level_map(r, (uint32_t)lv, &m) != CRUX_OK)
			break; /* past the table's levels */
		class_from_level(lv, r, &out[n++]);
	}
	return n;
}

bool cruxn_tag_refresh(struct cruxn_tag_state *ts)
{
	const struct cruxn_config *cfg = &cruxn_ctx.cfg;
	struct crux_dt_reader *r = NULL;
	struct crux_decision d;
	struct cruxn_class cls = {0, 0, 0, 0};
	struct cruxn_route route;
	bool stale = true, have = false, changed;
	uint64_t gen = 0;

	if (cfg->tagging) {
		uint64_t now = crux_now_ns();
		/* v1 copy due for a re-read (one load and compare otherwise). */
		if (atomic_load_explicit(&cruxn_ctx.dt_copy_next_ns, memory_order_relaxed) - 1 <
		    now)
			dt_copy_refresh(now);
		r = atomic_load_explicit(&cruxn_ctx.dt, memory_order_acquire);
		stale = r ? crux_dt_is_stale(r, now) : true;
		if (stale) {
			/* Rare path: missing or stale table, re-try at most once a second. */
			r = dt_maybe_reopen(crux_coarse_ns());
			stale = r ? crux_dt_is_stale(r, now) : true;
		}
		gen = r ? crux_dt_generation(r) : 0;
		if (ts->valid && r == ts->reader && gen == ts->gen && stale == ts->stale)
			return false;
	} else if (ts->valid) {
		return false;
	}

	memset(&route, 0, sizeof(route));
	route.path_id = CRUX_PATH_NONE;
	if (r && !stale) {
		crux_status_t st =
		    crux_dt_lookup(r, cruxn_ctx.job.key, ts->peer.family ? &ts->peer : NULL, &d);
		if (st == CRUX_ERR_BUSY)
			return false; /* writer busy: keep the old decision, look again next send */
		if (st == CRUX_OK) {
			have = true;
			note_cond(DT_OK, "");
		} else {
			note_cond(DT_CORRUPT, crux_status_str(st));
		}
	} else if (r && stale) {
		note_cond(DT_STALE, "has a stale heartbeat");
	}

	if (have && d.job_found) {
		cls.tos = d.class_map.dscp << 2;
		cls.prio = d.class_map.sock_prio;
		cls.sl = d.class_map.ib_sl;
		cls.level = d.level;
	} else if (cfg->class_level >= 0) {
		class_from_level(cfg->class_level, have ? r : NULL, &cls);
	} else if (ts->ib && (cfg->ib_tc >= 0 || cfg->ib_sl >= 0 || ts->nccl_tc >= 0)) {
		/*
		 * NCCL's IB precedence for the class without a decision:
		 * NCCL_IB_TC / NCCL_IB_SL, then the communicator's trafficClass,
		 * then the table's default level (else 0).
		 */
		int tc = cfg->ib_tc >= 0    ? cfg->ib_tc
			 : ts->nccl_tc >= 0 ? ts->nccl_tc
			 : have		    ? d.class_map.dscp << 2
					    : 0;
		cls.tos = tc & 0xfc;
		cls.prio = have ? d.class_map.sock_prio : 0;
		cls.sl = cfg->ib_sl >= 0			 ? cfg->ib_sl
			 : ts->nccl_tc >= 0 && ts->nccl_tc <= 15 ? ts->nccl_tc
			 : have					 ? d.class_map.ib_sl
								 : 0;
		cls.level = (cls.tos >> 5) < CRUX_MAX_LEVELS ? (cls.tos >> 5) : CRUX_MAX_LEVELS - 1;
	} else if (ts->nccl_tc >= 0) {
		cls.tos = ts->nccl_tc & 0xfc;
		cls.prio = 0;
		cls.sl = 0; /* NCCL_IB_SL's default */
		cls.level = (cls.tos >> 5) < CRUX_MAX_LEVELS ? (cls.tos >> 5) : CRUX_MAX_LEVELS - 1;
	} else if (have) {
		cls.tos = d.class_map.dscp << 2;
		cls.prio = d.class_map.sock_prio;
		cls.sl = d.class_map.ib_sl;
		cls.level = d.level;
	}
	if (cls.level < 0 || cls.level >= CRUX_MAX_LEVELS)
		cls.level = 0;
	if (have && d.route_found && d.nports > 0) {
		route.path_id = d.path_id;
		route.nports = d.nports > CRUX_ROUTE_MAX_PORTS ? CRUX_ROUTE_MAX_PORTS : d.nports;
		memcpy(route.ports, d.ports, route.nports * sizeof(route.ports[0]));
	}

	changed = !ts->valid || memcmp(&cls, &ts->cls, sizeof(cls)) != 0 ||
		  route.path_id != ts->route.path_id || route.nports != ts->route.nports ||
		  memcmp(route.ports, ts->route.ports, sizeof(route.ports)) != 0;
	ts->cls = cls;
	ts->route = route;
	ts->reader = r;
	ts->gen = gen;
	ts->stale = stale;
	ts->valid = true;
	return changed;
}

struct cruxn_peer_stats *cruxn_peer_stats_get(const struct crux_addr *peer)
{
	struct cruxn_context *c = &cruxn_ctx;
	struct cruxn_peer_stats *p = NULL;
	int n;

	pthread_mutex_lock(&c->peers_lock);
	n = atomic_load(&c->npeers);
	for (int i = 0; i < n; i++) {
		if (crux_addr_equal(&c->peers[i].peer, peer)) {
			p = &c->peers[i];
			break;
		}
	}
	if (!p && n < CRUX_PROF_MAX_PEERS) {
		p = &c->peers[n];
		p->peer = *peer;
		atomic_store(&c->npeers, n + 1);
	}
	if (!p) /* more peers than the record holds: count them with the last one */
		p = &c->peers[CRUX_PROF_MAX_PEERS - 1];
	pthread_mutex_unlock(&c->peers_lock);
	return p;
}

static void publish_once(void)
{
	struct cruxn_context *c = &cruxn_ctx;
	struct crux_prof_net net;
	int n = atomic_load(&c->npeers);

	memset(&net, 0, sizeof(net));
	net.update_ns = crux_now_ns();
	net.npeers = (uint32_t)n;
	if (c->ndevs > 0)
		(void)crux_addr_from_sockaddr(&c->devs[0].addr.sa, &net.local_addr);
	for (int i = 0; i < n; i++) {
		net.peers[i].peer = c->peers[i].peer;
		for (int l = 0; l < CRUX_MAX_LEVELS; l++) {
			net.peers[i].tx_bytes[l] =
			    atomic_load_explicit(&c->peers[i].tx[l], memory_order_relaxed);
			net.peers[i].rx_bytes[l] =
			    atomic_load_explicit(&c->peers[i].rx[l], memory_order_relaxed);
		}
	}
	for (int k = 0; k < CRUX_COLL_KINDS; k++)
		net.tx_bytes_by_kind[k] =
		    atomic_load_explicit(&c->tx_kind[k], memory_order_relaxed);
	cruxn_busy_publish(net.update_ns, c->cfg.busy_period_ns, &net);
	crux_prof_publish_net(c->prof, &net);
}

static void profile_identity(struct crux_prof_identity *out)
{
	struct cruxn_context *c = &cruxn_ctx;
	struct crux_prof_identity id;
	struct crux_rank_info ri;

	memset(&id, 0, sizeof(id));
	id.job_key = c->job.key;
	snprintf(id.job_id, sizeof(id.job_id), "%.63s", c->job.id);
	if (gethostname(id.hostname, sizeof(id.hostname) - 1) != 0)
		snprintf(id.hostname, sizeof(id.hostname), "unknown");
	if (c->ndevs > 0)
		(void)crux_addr_from_sockaddr(&c->devs[0].addr.sa, &id.host_addr);
	id.rank = id.world_size = id.local_rank = -1;
	if (crux_rank_info_derive(NULL, NULL, &ri) == CRUX_OK) {
		id.rank = ri.rank;
		id.world_size = ri.world_size;
		id.local_rank = ri.local_rank;
	}
	*out = id;
}

static void open_profile(void)
{
	struct cruxn_context *c = &cruxn_ctx;
	struct crux_prof_identity id;
	crux_status_t st;

	profile_identity(&id);
	/* Re-tried every publish interval: the _ex variant logs nothing, we say it once. */
	char err[512] = "";
	/* v2 agent: this process's sealed memfd (shared with the preload); else a v1 file. */
	if (agent_socket_present())
		st = crux_prof_open_shared_ex(&id, &c->prof, err, sizeof(err));
	else
		st = crux_prof_open_self_ex(c->shm_dir, &id, &c->prof, err, sizeof(err));
	if (st != CRUX_OK) {
		c->prof = NULL;
		crux_log_once(&c->once_prof_fail, CRUX_LOG_WARN,
			      "cannot open this process's profile record in %s (%s): byte counters "
			      "are not published; check CRUX_SHM_DIR",
			      c->shm_dir, err[0] ? err : crux_status_str(st));
	}
}

static void *publisher_main(void *arg)
{
	struct cruxn_context *c = &cruxn_ctx;
	(void)arg;

	pthread_mutex_lock(&c->pub_lock);
	while (!c->pub_stop) {
		crux_cond_wait_ns(&c->pub_cond, &c->pub_lock, c->cfg.publish_ns);
		pthread_mutex_unlock(&c->pub_lock);
		if (!c->prof)
			open_profile();
		if (c->prof && atomic_load(&c->npeers) > 0)
			publish_once();
		pthread_mutex_lock(&c->pub_lock);
	}
	pthread_mutex_unlock(&c->pub_lock);
	return NULL;
}

crux_status_t cruxn_tagging_start(void)
{
	struct cruxn_context *c = &cruxn_ctx;

	crux_cond_init_monotonic(&c->pub_cond);
	c->pub_stop = false;
	/* First look at the table now, so a missing one is reported at init. */
	atomic_store(&c->dt_next_try_ns, crux_coarse_ns() + DT_RETRY_NS);
	if (c->cfg.tagging)
		(void)dt_open_locked_at(true); /* init holds the context lock */
	if (pthread_create(&c->publisher, NULL, publisher_main, NULL) != 0) {
		pthread_cond_destroy(&c->pub_cond);
		return CRUX_ERR_IO;
	}
	c->publisher_running = true;
	return CRUX_OK;
}

void cruxn_tagging_stop(void)
{
	struct cruxn_context *c = &cruxn_ctx;

	if (c->publisher_running) {
		pthread_mutex_lock(&c->pub_lock);
		c->pub_stop = true;
		pthread_cond_signal(&c->pub_cond);
		pthread_mutex_unlock(&c->pub_lock);
		pthread_join(c->publisher, NULL);
		c->publisher_running = false;
		pthread_cond_destroy(&c->pub_cond);
	}
	/* Last words: the counters as they are now (short jobs included). */
	if (!c->prof && atomic_load(&c->npeers) > 0)
		open_profile();
	if (c->prof) {
		if (atomic_load(&c->npeers) > 0)
			publish_once();
		crux_prof_close(c->prof);
		c->prof = NULL;
	}
}
