/* SPDX-License-Identifier: Apache-2.0 */
/* A host's membership of a Crux cluster in etcd (see crux/cluster_node.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "crux/cluster_node.h"
#include "crux/elect.h"
#include "crux/log.h"

/*
 * While etcd's members elect a new leader (about one election timeout) the
 * survivors answer errors; a failure is staleness only once it has lasted
 * STALE_AFTER_S, or at once when the failed call waited out its whole
 * timeout (a frozen or cut-off etcd). Before the first success: stale.
 */
#define STALE_AFTER_S 2.0

struct link_health {
	double bad_since; /* start of the first failed call of this streak; < 0: healthy */
	bool waited;	  /* a call of the streak ran into its timeout */
};

/* One job's override as changed on this host and not yet written: 'before'
 * is its state when the first unwritten change was made (NULL: none). */
struct ovr_change {
	uint64_t key;
	char *before, *after; /* NUL-terminated text, NULL: no override (delete) */
	/* A write was sent and its outcome is unknown (a timeout: etcd may apply
	 * it later, e.g. when a frozen etcd resumes): what was sent, and the
	 * key's value read before it (NULL: absent). */
	bool tried;
	char *tried_val, *prior;
	bool revert; /* withdrawn after a try: undo it if it landed, only then */
};

static void ovr_change_free(struct ovr_change *c);

struct view_entry {
	char *key;
	int64_t mod; /* the record's mod revision: same key and mod, same value */
	bool ok;     /* decoded (an unreadable record is left out, said once) */
	struct crux_job_view h;
};

struct crux_cluster_node {
	struct crux_cluster_cfg cfg;
	char cluster[CRUX_CLUSTER_NAME_MAX], host[CRUX_CLUSTER_NAME_MAX];
	char k_hosts[96], k_me[160], k_ctl[96], k_leader[112], k_sched[112], k_ovr[112],
	    k_beat[112];
	struct crux_etcd *e;  /* step's handle */
	struct crux_etcd *we; /* the watcher's handle */
	int64_t lease, term;
	double next_keepalive, next_campaign;
	uint64_t rng;	  /* spreads renewals: hosts started together drift apart */
	uint64_t wrng;	  /* the watcher's: spreads its retries */
	uint64_t irng;	  /* the input watcher's */
	int64_t seen_rev; /* store revision of the leader's last full read of the views */
	uint64_t renewals;
	char *view_text; /* to publish */
	size_t view_len;
	bool view_dirty;
	struct ovr_change *ovr; /* operators' changes not yet written, by job key */
	size_t novr, ovr_cap;
	bool replan;
	char *last_plan; /* the last schedule written, with rev and term 0 */
	size_t last_plan_len;
	uint64_t planned_sig; /* inputs of the last schedule written */
	int64_t planned_term;
	struct link_health etcd; /* the step's calls */
	bool said_stale;
	uint64_t schedules_written, bytes_written;
	char leader_name[CRUX_CLUSTER_NAME_MAX];

	pthread_t watcher;
	bool watcher_started;
	int wake_fd; /* eventfd: the watcher took something the next apply may use */
	atomic_bool
	    woken; /* wake_fd was written since the last drain: steps make no syscall otherwise */
	atomic_bool stop;
	atomic_bool leader_gone; /* the watcher saw the leader key deleted */
	pthread_mutex_t mu;	 /* guards the fields below */
	struct crux_cv_schedule latest;
	int64_t latest_rev, applied_rev, applied_input;
	double latest_at;	  /* when the watcher took it (monotonic) */
	struct link_health watch; /* the watcher's list */
	/* The leader key as the watcher last saw it (fencing). */
	bool lk_known, lk_present;
	int64_t lk_create, lk_lease, lk_seen; /* lk_seen: revision the watcher has seen up to */
	char lk_holder[CRUX_CLUSTER_NAME_MAX];
	int64_t sched_key_rev; /* last put or delete of the schedule key the watcher saw */
	int64_t held_rev;      /* newest schedule refused for its term (said once) */
	/* Which etcd: a restored or rebuilt store shows as another cluster id or
	 * a revision going back. */
	uint64_t store_cid;
	int64_t store_rev;
	uint64_t step_answers; /* the step handle's answers already noted */
	bool resync_pending;
	uint64_t resyncs;
	char resync_why[160];
	/* Watch liveness: the leader beats ctl/beat every beat_s; a watch that
	 * brought nothing for deadline_s (a connection dropped without RST) is
	 * restarted and the host is stale until the re-list succeeds. */
	double watch_last; /* when the watch stream last brought a message (or was listed) */
	double beat_s, deadline_s;
	uint64_t watch_restarts;
	/* The leader's decoded host records, in key order: a round reads the
	 * keys and revisions and fetches only the records that changed. */
	struct view_entry *vc;
	size_t nvc;
	/* The leader's input watch (its own thread and handle, started at its
	 * first term): a host record or an override changing wakes the agent so
	 * its round runs now, where it waited for its next pass (cruxd: up to a
	 * second) and probed the store's revision every step. */
	pthread_t iwatcher;
	bool iwatcher_started;
	struct crux_etcd *ie;
	atomic_int_fast64_t lead_term;	/* the term the input watch serves, 0: none */
	atomic_int_fast64_t inputs_rev; /* newest input change it saw (or its start) */
	atomic_bool iwatch_open;	/* streaming from a known revision */
	_Atomic double iwatch_last;	/* when it last brought a message */
	/* step only */
	double next_beat;
	int64_t written_rev;   /* revision of this leader's last schedule write */
	double next_selfcheck; /* next comparison of this host's record with etcd */
};

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Tell the agent's loop that a schedule (or the leader key fencing it)
 * arrived: it applies it now instead of at its next pass. */
static void wake(struct crux_cluster_node *n)
{
	uint64_t one = 1;
	if (n->wake_fd < 0)
		return;
	/* Written every time, flagged after: a wake is never lost, and the
	 * flag tells apply_latest when a read is worth its syscall. */
	ssize_t w = write(n->wake_fd, &one, sizeof(one));
	(void)w; /* best effort: without it the next pass applies anyway */
	atomic_store(&n->woken, true);
}

static bool name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n >= CRUX_CLUSTER_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* ---- watcher thread: list, then watch from the list's revision + 1 ---- */

static void take_schedule(struct crux_cluster_node *n, const struct crux_etcd_kv *kv)
{
	struct crux_cv_schedule s;
	crux_status_t st = crux_cv_schedule_unpack(kv->value, kv->value_len, &s);
	if (st != CRUX_OK) {
		if (crux_log_once_key(0x5c4ed0000ull ^ (uint64_t)kv->mod_revision))
			crux_warn(
			    "cluster %s: the schedule at etcd revision %lld is unreadable (%s): "
			    "keeping the last one",
			    n->cluster, (long long)kv->mod_revision, crux_status_str(st));
		return;
	}
	pthread_mutex_lock(&n->mu);
	if (kv->mod_revision > n->latest_rev) {
		crux_cv_schedule_free(&n->latest);
		n->latest = s;
		n->latest_rev = kv->mod_revision;
		n->latest_at = mono_s();
		pthread_mutex_unlock(&n->mu);
		wake(n);
		return;
	}
	crux_cv_schedule_free(&s);
	pthread_mutex_unlock(&n->mu);
}

static bool key_is(const struct crux_etcd_kv *kv, const char *k)
{
	size_t l = strlen(k);
	return kv->key_len == l && memcmp(kv->key, k, l) == 0;
}

/* The leader key's state (NULL: absent), under mu. */
static void leader_key_seen(struct crux_cluster_node *n, const struct crux_etcd_kv *kv)
{
	n->lk_present = kv != NULL;
	n->lk_create = kv ? kv->create_revision : 0;
	n->lk_lease = kv ? kv->lease : 0;
	if (kv)
		snprintf(n->lk_holder, sizeof(n->lk_holder), "%.*s",
			 (int)(kv->value_len < 63 ? kv->value_len : 63), (const char *)kv->value);
	else
		n->lk_holder[0] = '\0';
}

static bool on_watch(void *arg, const struct crux_etcd_watch_msg *m)
{
	struct crux_cluster_node *n = arg;
	for (size_t i = 0; i < m->n; i++) {
		const struct crux_etcd_kv *kv = &m->events[i].kv;
		bool put = m->events[i].type == CRUX_ETCD_EV_PUT;
		if (key_is(kv, n->k_sched)) {
			pthread_mutex_lock(&n->mu);
			int64_t r = kv->mod_revision ? kv->mod_revision : m->revision;
			if (r > n->sched_key_rev)
				n->sched_key_rev = r;
			pthread_mutex_unlock(&n->mu);
			if (put)
				take_schedule(n, kv);
		} else if (key_is(kv, n->k_leader)) {
			pthread_mutex_lock(&n->mu);
			leader_key_seen(n, put ? kv : NULL);
			pthread_mutex_unlock(&n->mu);
			/* Gone: campaign now, not at the next timer or pass. Put: a
			 * schedule held for its term may be the new leader's. */
			if (!put)
				atomic_store(&n->leader_gone, true);
			wake(n);
		}
	}
	pthread_mutex_lock(&n->mu);
	if (m->revision > n->lk_seen)
		n->lk_seen = m->revision;
	n->watch_last = mono_s();
	pthread_mutex_unlock(&n->mu);
	return !atomic_load(&n->stop);
}

/* Under mu: the store that answered (a header). A cluster id other than
 * the one seen before, or a revision lower than one seen before, is another
 * store (restored empty or from an older snapshot, rebuilt): every
 * revision remembered means nothing there; resynchronise. */
static void note_store(struct crux_cluster_node *n, const struct crux_etcd_identity *id)
{
	bool other = false;
	if (!id->revision)
		return;
	if (n->store_cid && id->cluster_id && id->cluster_id != n->store_cid) {
		snprintf(n->resync_why, sizeof(n->resync_why),
			 "etcd's cluster id changed from %016llx to %016llx (another or a restored "
			 "etcd)",
			 (unsigned long long)n->store_cid, (unsigned long long)id->cluster_id);
		other = true;
	} else if (id->revision < n->store_rev) {
		snprintf(n->resync_why, sizeof(n->resync_why),
			 "etcd's revision went back from %lld to %lld (restored empty or from an "
			 "older snapshot)",
			 (long long)n->store_rev, (long long)id->revision);
		other = true;
	}
	if (id->cluster_id)
		n->store_cid = id->cluster_id;
	if (other || id->revision > n->store_rev)
		n->store_rev = id->revision;
	if (!other)
		return;
	/* Schedules of the new store start again from low revisions: take them. */
	n->latest_rev = n->held_rev = n->sched_key_rev = 0;
	n->applied_rev = 0;
	n->resync_pending = true;
	n->resyncs++;
}

static bool watch_stop(void *arg)
{
	struct crux_cluster_node *n = arg;
	if (atomic_load(&n->stop))
		return true;
	pthread_mutex_lock(&n->mu);
	double now = mono_s(), quiet = now - n->watch_last;
	bool dead = quiet > n->deadline_s;
	if (dead) {
		/* Nothing, not even the leader's beat, for longer than a lease and
		 * two beats: the stream is dead without having said so. Stale now;
		 * the re-list says whether etcd answers. */
		n->watch_restarts++;
		n->watch.bad_since = now;
		n->watch.waited = true;
	}
	pthread_mutex_unlock(&n->mu);
	if (dead)
		crux_warn(
		    "cluster %s: host %s: the watch on etcd brought nothing for %.1f s (deadline "
		    "%.1f s: a lease and two leader beats): restarting it",
		    n->cluster, n->host, quiet, n->deadline_s);
	return dead;
}

static void health_note(struct link_health *h, crux_status_t st, bool ok, double started)
{
	if (ok) {
		h->bad_since = -1;
		h->waited = false;
		return;
	}
	if (h->bad_since < 0)
		h->bad_since = started;
	if (st == CRUX_ERR_TIMEOUT)
		h->waited = true;
}

static bool health_stale(const struct link_health *h, double now)
{
	return h->bad_since >= 0 && (h->waited || now - h->bad_since >= STALE_AFTER_S);
}

static void set_watch_ok(struct crux_cluster_node *n, crux_status_t st, double started)
{
	pthread_mutex_lock(&n->mu);
	health_note(&n->watch, st, st == CRUX_OK, started);
	pthread_mutex_unlock(&n->mu);
}

static void nap(struct crux_cluster_node *n, double s)
{
	double until = mono_s() + s;
	while (!atomic_load(&n->stop) && mono_s() < until) {
		struct timespec ts = {0, 50000000};
		nanosleep(&ts, NULL);
	}
}

static double xorshift01(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (double)(*x >> 11) / 0x1p53;
}

/* Retries are spread at random: when etcd loses its leader every host's
 * stream breaks at once, and lockstep re-lists would hit it together again. */
static void *watcher_main(void *arg)
{
	struct crux_cluster_node *n = arg;
	while (!atomic_load(&n->stop)) {
		struct crux_etcd_range r;
		struct crux_etcd_identity id;
		double started = mono_s();
		/* The schedule and the leader key at one revision. */
		crux_status_t gst = crux_etcd_get(n->we, n->k_ctl, strlen(n->k_ctl), true, &r);
		if (gst != CRUX_OK) {
			set_watch_ok(n, gst, started);
			nap(n, 0.5 + 0.5 * xorshift01(&n->wrng));
			continue;
		}
		crux_etcd_identity(n->we, &id);
		const struct crux_etcd_kv *lk = NULL, *sk = NULL;
		for (size_t i = 0; i < r.n; i++) {
			if (key_is(&r.kvs[i], n->k_leader))
				lk = &r.kvs[i];
			else if (key_is(&r.kvs[i], n->k_sched))
				sk = &r.kvs[i];
		}
		pthread_mutex_lock(&n->mu);
		note_store(n, &id);
		leader_key_seen(n, lk);
		n->watch_last = mono_s();
		n->lk_known = true;
		n->lk_seen = r.revision;
		if (sk && sk->mod_revision > n->sched_key_rev)
			n->sched_key_rev = sk->mod_revision;
		pthread_mutex_unlock(&n->mu);
		if (!lk)
			atomic_store(&n->leader_gone, true);
		if (sk)
			take_schedule(n, sk);
		int64_t from = r.revision + 1;
		crux_etcd_range_free(&r);
		set_watch_ok(n, CRUX_OK, started);
		/* One watch covers the schedule and the leader key (both under ctl/). */
		crux_status_t st = crux_etcd_watch(n->we, n->k_ctl, strlen(n->k_ctl), true, from,
						   on_watch, watch_stop, n);
		/* A broken stream (its member died) is not staleness yet: re-list at
		 * once through the next endpoint; only a failed list marks it. */
		if (st != CRUX_OK && !atomic_load(&n->stop))
			nap(n, 0.1 + 0.4 * xorshift01(&n->wrng));
	}
	return NULL;
}

/* ---- the leader's input watch ---- */

static void raise_rev(atomic_int_fast64_t *r, int64_t v)
{
	int_fast64_t cur = atomic_load(r);
	while (v > cur && !atomic_compare_exchange_weak(r, &cur, v))
		;
}

static bool on_input(void *arg, const struct crux_etcd_watch_msg *m)
{
	struct crux_cluster_node *n = arg;
	size_t cl = strlen(n->k_ctl);
	bool input = false;
	for (size_t i = 0; i < m->n; i++) {
		const struct crux_etcd_kv *kv = &m->events[i].kv;
		/* ctl/ is the leader's own (schedule, beat) and the election. */
		if (kv->key_len >= cl && !memcmp(kv->key, n->k_ctl, cl))
			continue;
		raise_rev(&n->inputs_rev, kv->mod_revision ? kv->mod_revision : m->revision);
		input = true;
	}
	atomic_store(&n->iwatch_last, mono_s());
	if (input)
		wake(n);
	return !atomic_load(&n->stop) && atomic_load(&n->lead_term) > 0;
}

static bool input_stop(void *arg)
{
	struct crux_cluster_node *n = arg;
	/* A stream silent past the deadline (the leader's own beats pass
	 * through it) is dead: list again. */
	return atomic_load(&n->stop) || atomic_load(&n->lead_term) == 0 ||
	       mono_s() - atomic_load(&n->iwatch_last) > n->deadline_s;
}

/* The whole cluster prefix from the revision of a one-key read: a change
 * after it arrives as an event; one before it is in the leader's next
 * full read (inputs_rev is raised to it). */
static void *input_watcher_main(void *arg)
{
	struct crux_cluster_node *n = arg;
	char prefix[96];
	snprintf(prefix, sizeof(prefix), "/crux/%s/", n->cluster);
	while (!atomic_load(&n->stop)) {
		if (atomic_load(&n->lead_term) == 0) {
			nap(n, 0.1);
			continue;
		}
		struct crux_etcd_range r;
		if (crux_etcd_get(n->ie, n->k_leader, strlen(n->k_leader), false, &r) != CRUX_OK) {
			nap(n, 0.1 + 0.4 * xorshift01(&n->irng));
			continue;
		}
		int64_t from = r.revision;
		crux_etcd_range_free(&r);
		raise_rev(&n->inputs_rev, from);
		atomic_store(&n->iwatch_last, mono_s());
		atomic_store(&n->iwatch_open, true);
		crux_status_t st = crux_etcd_watch(n->ie, prefix, strlen(prefix), true, from + 1,
						   on_input, input_stop, n);
		atomic_store(&n->iwatch_open, false);
		if (st != CRUX_OK && !atomic_load(&n->stop))
			nap(n, 0.1 + 0.4 * xorshift01(&n->irng));
	}
	return NULL;
}

/* The input watch says nothing changed since the leader's last full read:
 * open, heard within a beat and a second (the leader's own beats pass
 * through it), and no input event after seen_rev. */
static bool inputs_quiet(struct crux_cluster_node *n)
{
	return atomic_load(&n->iwatch_open) &&
	       mono_s() - atomic_load(&n->iwatch_last) < n->beat_s + 1.0 &&
	       atomic_load(&n->inputs_rev) <= n->seen_rev;
}

/* Step only: the input watch serves this term (started at the first). */
static void input_watch_follow(struct crux_cluster_node *n)
{
	atomic_store(&n->lead_term, n->term);
	if (n->term <= 0 || n->iwatcher_started || !n->ie)
		return;
	/* Without it the leader probes the store every step. */
	n->iwatcher_started = pthread_create(&n->iwatcher, NULL, input_watcher_main, n) == 0;
}

/* ---- open / close ---- */

crux_status_t crux_cluster_open(const struct crux_cluster_cfg *cfg, struct crux_cluster_node **out,
				char *err, size_t errlen)
{
	if (!name_ok(cfg->cluster) || !name_ok(cfg->host)) {
		snprintf(err, errlen,
			 "cluster name '%s' or host name '%s' is empty, longer than 63 "
			 "bytes or has characters outside A-Z a-z 0-9 . _ -: choose another",
			 cfg->cluster ? cfg->cluster : "", cfg->host ? cfg->host : "");
		return CRUX_ERR_INVAL;
	}
	if (cfg->ttl_s && (cfg->ttl_s < 2 || cfg->ttl_s > 3600)) {
		snprintf(err, errlen, "cluster lease TTL %lld s is outside 2..3600: choose another",
			 (long long)cfg->ttl_s);
		return CRUX_ERR_RANGE;
	}
	if (!cfg->plan || !cfg->apply) {
		snprintf(err, errlen, "cluster: plan and apply callbacks are required");
		return CRUX_ERR_INVAL;
	}
	struct crux_cluster_node *n = calloc(1, sizeof(*n));
	if (!n) {
		snprintf(err, errlen, "cluster: out of memory");
		return CRUX_ERR_NOMEM;
	}
	n->cfg = *cfg;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	n->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)n;
	for (const char *c = cfg->host; *c; c++)
		n->rng = (n->rng ^ (uint8_t)*c) * 0x100000001b3ull;
	n->rng |= 1;
	n->wrng = n->rng * 0x9e3779b97f4a7c15ull | 1;
	n->irng = n->wrng * 0x9e3779b97f4a7c15ull | 1;
	if (!n->cfg.ttl_s)
		n->cfg.ttl_s = 10;
	snprintf(n->cluster, sizeof(n->cluster), "%s", cfg->cluster);
	snprintf(n->host, sizeof(n->host), "%s", cfg->host);
	snprintf(n->k_hosts, sizeof(n->k_hosts), "/crux/%s/hosts/", n->cluster);
	snprintf(n->k_me, sizeof(n->k_me), "%s%s", n->k_hosts, n->host);
	snprintf(n->k_ctl, sizeof(n->k_ctl), "/crux/%s/ctl/", n->cluster);
	snprintf(n->k_leader, sizeof(n->k_leader), "%sleader", n->k_ctl);
	snprintf(n->k_sched, sizeof(n->k_sched), "%sschedule", n->k_ctl);
	snprintf(n->k_beat, sizeof(n->k_beat), "%sbeat", n->k_ctl);
	/* The leader beats a few times per lease (at most every 2 s); a watch
	 * silent for a lease (no leader: no beat) and two beats is dead. */
	n->beat_s = (double)n->cfg.ttl_s / 3 < 2.0 ? (double)n->cfg.ttl_s / 3 : 2.0;
	n->deadline_s = (double)n->cfg.ttl_s + 2 * n->beat_s;
	snprintf(n->k_ovr, sizeof(n->k_ovr), "/crux/%s/overrides/", n->cluster);
	/* Stale until etcd first answers. */
	n->etcd = (struct link_health){.bad_since = mono_s(), .waited = true};
	n->watch = n->etcd;
	pthread_mutex_init(&n->mu, NULL);
	n->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	crux_status_t st = crux_etcd_open(&cfg->etcd, &n->e, err, errlen);
	if (st == CRUX_OK)
		st = crux_etcd_open(&cfg->etcd, &n->we, err, errlen);
	if (st == CRUX_OK) /* the input watch's, used once this host leads */
		st = crux_etcd_open(&cfg->etcd, &n->ie, err, errlen);
	if (st == CRUX_OK && pthread_create(&n->watcher, NULL, watcher_main, n) != 0) {
		snprintf(err, errlen, "cluster: cannot start the watcher thread");
		st = CRUX_ERR_IO;
	}
	if (st != CRUX_OK) {
		crux_etcd_close(n->e);
		crux_etcd_close(n->we);
		crux_etcd_close(n->ie);
		if (n->wake_fd >= 0)
			close(n->wake_fd);
		pthread_mutex_destroy(&n->mu);
		free(n);
		return st;
	}
	n->watcher_started = true;
	*out = n;
	return CRUX_OK;
}

static void view_cache_drop(struct crux_cluster_node *n)
{
	for (size_t i = 0; i < n->nvc; i++) {
		free(n->vc[i].key);
		crux_jv_free(&n->vc[i].h);
	}
	free(n->vc);
	n->vc = NULL;
	n->nvc = 0;
}

static void teardown(struct crux_cluster_node *n)
{
	atomic_store(&n->stop, true);
	if (n->watcher_started)
		pthread_join(n->watcher, NULL);
	if (n->iwatcher_started)
		pthread_join(n->iwatcher, NULL);
	crux_etcd_close(n->e);
	crux_etcd_close(n->we);
	crux_etcd_close(n->ie);
	if (n->wake_fd >= 0)
		close(n->wake_fd);
	crux_cv_schedule_free(&n->latest);
	pthread_mutex_destroy(&n->mu);
	free(n->view_text);
	for (size_t i = 0; i < n->novr; i++)
		ovr_change_free(&n->ovr[i]);
	free(n->ovr);
	free(n->last_plan);
	view_cache_drop(n);
	free(n);
}

void crux_cluster_close(struct crux_cluster_node *n)
{
	if (!n)
		return;
	if (n->term > 0)
		(void)crux_elect_resign(n->e, n->k_leader, n->term);
	if (n->lease)
		(void)crux_etcd_lease_revoke(n->e, n->lease);
	teardown(n);
}

void crux_cluster_stop(struct crux_cluster_node *n)
{
	if (n)
		atomic_store(&n->stop, true);
}

void crux_cluster_abandon(struct crux_cluster_node *n)
{
	if (n)
		teardown(n);
}

crux_status_t crux_cluster_set_view(struct crux_cluster_node *n, const struct crux_job_view *view)
{
	char *txt;
	size_t len;
	crux_status_t st = crux_cv_host_encode(view, &txt, &len);
	if (st != CRUX_OK)
		return st;
	if (n->view_text && n->view_len == len && memcmp(n->view_text, txt, len) == 0) {
		free(txt); /* unchanged: nothing to write */
		return CRUX_OK;
	}
	free(n->view_text);
	n->view_text = txt;
	n->view_len = len;
	n->view_dirty = true;
	return CRUX_OK;
}

static void ovr_change_free(struct ovr_change *c)
{
	free(c->before);
	free(c->after);
	free(c->tried_val);
	free(c->prior);
}

static bool text_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

static crux_status_t dup_text(const char *t, size_t len, char **out)
{
	*out = NULL;
	if (!t)
		return CRUX_OK;
	if (memchr(t, '\n', len) || memchr(t, '\0', len) || len == 0)
		return CRUX_ERR_INVAL; /* one line per override */
	if (!(*out = malloc(len + 1)))
		return CRUX_ERR_NOMEM;
	memcpy(*out, t, len);
	(*out)[len] = '\0';
	return CRUX_OK;
}

crux_status_t crux_cluster_override(struct crux_cluster_node *n, uint64_t job_key,
				    const char *before, size_t blen, const char *after, size_t alen)
{
	char *b, *a;
	crux_status_t st;
	size_t i;

	if (!job_key)
		return CRUX_ERR_INVAL;
	if ((st = dup_text(before, blen, &b)) != CRUX_OK)
		return st;
	if ((st = dup_text(after, alen, &a)) != CRUX_OK) {
		free(b);
		return st;
	}
	for (i = 0; i < n->novr && n->ovr[i].key != job_key; i++)
		;
	if (i < n->novr) {
		struct ovr_change *c = &n->ovr[i];
		free(b);
		free(c->after);
		c->after = a;
		c->revert = false;
		if (text_eq(c->before, c->after)) {
			/* Back where it was before the unwritten change (withdrawn): write
			 * nothing, so another host's override of this job stays; a write
			 * already sent is undone only where it landed. */
			if (c->tried) {
				c->revert = true;
			} else {
				ovr_change_free(c);
				n->ovr[i] = n->ovr[--n->novr];
			}
		}
		return CRUX_OK;
	}
	if (text_eq(b, a)) {
		free(a);
		free(b);
		return CRUX_OK;
	}
	if (n->novr == n->ovr_cap) {
		size_t cap = n->ovr_cap ? 2 * n->ovr_cap : 8;
		struct ovr_change *m = realloc(n->ovr, cap * sizeof(*m));
		if (!m) {
			free(a);
			free(b);
			return CRUX_ERR_NOMEM;
		}
		n->ovr = m;
		n->ovr_cap = cap;
	}
	n->ovr[n->novr++] = (struct ovr_change){.key = job_key, .before = b, .after = a};
	return CRUX_OK;
}

/* Undo a withdrawn change's write where it landed: the key still holds what
 * we sent (or is still absent after our delete) -> what it held before. */
static crux_status_t revert_override(struct crux_cluster_node *n, const struct ovr_change *c,
				     const char *k, size_t kl)
{
	struct crux_etcd_cmp cmp = {.key = k, .klen = kl, .result = CRUX_ETCD_EQUAL};
	struct crux_etcd_op op = {.key = k, .klen = kl};
	bool done = false;

	if (c->tried_val) {
		cmp.target = CRUX_ETCD_CMP_VALUE;
		cmp.value = c->tried_val;
		cmp.vlen = strlen(c->tried_val);
	} else {
		if (!c->prior)
			return CRUX_OK;		    /* a delete of an absent key changed nothing */
		cmp.target = CRUX_ETCD_CMP_VERSION; /* still absent */
		cmp.number = 0;
	}
	if (c->prior) {
		op.kind = CRUX_ETCD_OP_PUT;
		op.value = c->prior;
		op.vlen = strlen(c->prior);
	} else {
		op.kind = CRUX_ETCD_OP_DELETE;
	}
	crux_status_t st = crux_etcd_txn(n->e, &cmp, 1, &op, 1, NULL, 0, &done, NULL);
	if (st == CRUX_OK && done)
		crux_info("cluster %s: host %s: a withdrawn override of job 0x%016llx had reached "
			  "etcd: undone",
			  n->cluster, n->host, (unsigned long long)c->key);
	return st;
}

/* Write the operators' changes: one key per job, put or delete. */
static crux_status_t write_overrides(struct crux_cluster_node *n)
{
	while (n->novr) {
		struct ovr_change *c = &n->ovr[0];
		char k[160];
		int kl =
		    snprintf(k, sizeof(k), "%s0x%016llx", n->k_ovr, (unsigned long long)c->key);
		crux_status_t st;
		if (c->revert) {
			st = revert_override(n, c, k, (size_t)kl);
		} else {
			if (!c->tried) {
				/* what to restore should this write be withdrawn after it left */
				struct crux_etcd_range r;
				if ((st = crux_etcd_get(n->e, k, (size_t)kl, false, &r)) != CRUX_OK)
					return st;
				free(c->prior);
				c->prior = NULL;
				if (r.n == 1 &&
				    (st = dup_text((const char *)r.kvs[0].value, r.kvs[0].value_len,
						   &c->prior)) != CRUX_OK)
					c->prior = NULL; /* not one line: nothing sane to restore */
				crux_etcd_range_free(&r);
			}
			free(c->tried_val);
			c->tried_val = NULL;
			if (c->after && !(c->tried_val = strdup(c->after)))
				return CRUX_ERR_NOMEM;
			c->tried = true;
			st = c->after ? crux_etcd_put(n->e, k, (size_t)kl, c->after,
						      strlen(c->after), 0, NULL)
				      : crux_etcd_delete(n->e, k, (size_t)kl, false, NULL);
			if (st == CRUX_OK)
				n->bytes_written += (size_t)kl + (c->after ? strlen(c->after) : 0);
		}
		if (st != CRUX_OK)
			return st;
		ovr_change_free(c);
		n->ovr[0] = n->ovr[--n->novr];
	}
	return CRUX_OK;
}

void crux_cluster_replan(struct crux_cluster_node *n)
{
	n->replan = true;
}

/* ---- step ---- */

static void etcd_state(struct crux_cluster_node *n, crux_status_t st, double started)
{
	bool ok = st == CRUX_OK || st == CRUX_ERR_PERM || st == CRUX_ERR_NOENT;
	pthread_mutex_lock(&n->mu);
	health_note(&n->etcd, st, ok, started);
	bool stale = health_stale(&n->etcd, mono_s());
	int64_t rev = n->applied_rev;
	pthread_mutex_unlock(&n->mu);
	/* Said once per outage, also when etcd was never reached since start. */
	if (stale && !n->said_stale) {
		crux_warn("cluster %s: host %s: etcd unreachable (%s): keeping the last schedule "
			  "(revision %lld) until it returns",
			  n->cluster, n->host, crux_etcd_last_error(n->e), (long long)rev);
		n->said_stale = true;
	} else if (ok && n->said_stale) {
		crux_info("cluster %s: host %s: etcd reachable again at %s", n->cluster, n->host,
			  crux_etcd_endpoint(n->e));
		n->said_stale = false;
	}
}

/* The next renewal in 0.25..0.33 TTL: hosts whose leases were granted in
 * the same moment (a cluster started together, etcd back after an outage)
 * would otherwise renew in one burst every TTL/3 forever. */
static double renew_in(struct crux_cluster_node *n)
{
	return (double)n->cfg.ttl_s * (0.25 + xorshift01(&n->rng) / 12);
}

/* Keep the lease; a lost lease (expired while we were away) starts over. */
static crux_status_t keep_lease(struct crux_cluster_node *n, double now)
{
	crux_status_t st = CRUX_OK;
	if (n->lease && now >= n->next_keepalive) {
		st = crux_etcd_lease_keepalive(n->e, n->lease, NULL);
		if (st == CRUX_ERR_NOENT) {
			crux_warn("cluster %s: lease of host %s expired: publishing again",
				  n->cluster, n->host);
			n->lease = 0;
			n->term = 0;
			n->view_dirty = true;
			st = CRUX_OK;
		} else if (st == CRUX_OK) {
			n->next_keepalive = now + renew_in(n);
			n->renewals++;
		}
	}
	if (st == CRUX_OK && !n->lease) {
		st = crux_etcd_lease_grant(n->e, n->cfg.ttl_s, &n->lease, NULL);
		if (st == CRUX_OK) {
			n->next_keepalive = now + renew_in(n);
			n->view_dirty = true;
		}
	}
	return st;
}

static uint64_t inputs_sig(const struct crux_etcd_range *r)
{
	uint64_t h = 0xcbf29ce484222325ull ^ r->n;
	for (size_t i = 0; i < r->n; i++)
		h = (h ^ (uint64_t)r->kvs[i].mod_revision) * 0x100000001b3ull;
	return h;
}

/* The overrides keys (etcd returns them sorted by key: every leader builds
 * the same text) as one line each; a value that is not one line is left out. */
static crux_status_t overrides_text(struct crux_cluster_node *n, const struct crux_etcd_range *ro,
				    char **out, size_t *len)
{
	size_t cap = 1, off = 0;
	char *t;

	for (size_t i = 0; i < ro->n; i++)
		cap += ro->kvs[i].value_len + 1;
	if (!(t = malloc(cap)))
		return CRUX_ERR_NOMEM;
	for (size_t i = 0; i < ro->n; i++) {
		const struct crux_etcd_kv *kv = &ro->kvs[i];
		if (!kv->value_len || memchr(kv->value, '\n', kv->value_len) ||
		    memchr(kv->value, '\0', kv->value_len)) {
			if (crux_log_once_key(0x0e77ull ^ (uint64_t)kv->mod_revision))
				crux_warn(
				    "cluster %s: override %s is not one line of text: left out",
				    n->cluster, (const char *)kv->key);
			continue;
		}
		memcpy(t + off, kv->value, kv->value_len);
		off += kv->value_len;
		t[off++] = '\n';
	}
	t[off] = '\0';
	*out = t;
	*len = off;
	return CRUX_OK;
}

/*
 * The host records listed in keys (keys and revisions, read at one
 * revision) as decoded views, from the cache where the key and its mod
 * revision are unchanged; the others are fetched at that same revision, one
 * by one when at most VIEW_FETCH_MAX changed, else all in one read (each
 * fetch is a round trip the leader's loop waits for: a start, a resync or
 * leases expiring together take the one read). At 1,000 hosts
 * a job's arrival changes one record: one small read instead of every
 * record's value read and decoded again. *views: shallow copies owned by the
 * cache.
 */
#define VIEW_FETCH_MAX 2

static crux_status_t read_views(struct crux_cluster_node *n, const struct crux_etcd_range *keys,
				struct crux_job_view **views, size_t *nv)
{
	struct view_entry *nc = keys->n ? calloc(keys->n, sizeof(*nc)) : NULL;
	bool *need = keys->n ? calloc(keys->n, sizeof(*need)) : NULL;
	struct crux_etcd_range full = {0};
	size_t miss = 0, j = 0, f = 0;
	crux_status_t st = CRUX_OK;

	*views = NULL;
	*nv = 0;
	if (keys->n && (!nc || !need)) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	/* Both lists are in key order: one merge pass takes over what is unchanged. */
	for (size_t i = 0; i < keys->n; i++) {
		const struct crux_etcd_kv *kv = &keys->kvs[i];
		int c = 1;
		while (j < n->nvc && (c = strcmp(n->vc[j].key, (const char *)kv->key)) < 0)
			j++;
		if (j < n->nvc && c == 0 && n->vc[j].mod == kv->mod_revision) {
			nc[i] = n->vc[j];
			memset(&n->vc[j++], 0, sizeof(n->vc[0])); /* moved */
			continue;
		}
		nc[i].mod = kv->mod_revision;
		if (!(nc[i].key = strdup((const char *)kv->key))) {
			st = CRUX_ERR_NOMEM;
			goto out;
		}
		need[i] = true;
		miss++;
	}
	if (miss > VIEW_FETCH_MAX &&
	    (st = crux_etcd_get_at(n->e, n->k_hosts, strlen(n->k_hosts), true, false,
				   keys->revision, &full)) != CRUX_OK)
		goto out;
	for (size_t i = 0; i < keys->n; i++) {
		struct crux_etcd_range one = {0};
		const struct crux_etcd_kv *kv = NULL;
		if (!need[i])
			continue;
		if (miss > VIEW_FETCH_MAX) {
			while (f < full.n && strcmp((const char *)full.kvs[f].key, nc[i].key) < 0)
				f++;
			if (f < full.n && !strcmp((const char *)full.kvs[f].key, nc[i].key))
				kv = &full.kvs[f];
		} else {
			st = crux_etcd_get_at(n->e, nc[i].key, strlen(nc[i].key), false, false,
					      keys->revision, &one);
			if (st != CRUX_OK)
				goto out;
			kv = one.n == 1 ? &one.kvs[0] : NULL;
		}
		crux_status_t d =
		    kv && kv->mod_revision == nc[i].mod
			? crux_cv_host_decode((const char *)kv->value, kv->value_len, &nc[i].h)
			: CRUX_ERR_CORRUPT;
		nc[i].ok = d == CRUX_OK;
		if (d != CRUX_OK && crux_log_once_key(0x40575ull ^ (uint64_t)nc[i].mod))
			crux_warn("cluster %s: host record %s is unreadable (%s): left out",
				  n->cluster, nc[i].key, crux_status_str(d));
		crux_etcd_range_free(&one);
	}
	if (keys->n && !(*views = calloc(keys->n, sizeof(**views)))) {
		st = CRUX_ERR_NOMEM;
		goto out;
	}
	for (size_t i = 0; i < keys->n; i++)
		if (nc[i].ok)
			(*views)[(*nv)++] = nc[i].h;
out:
	crux_etcd_range_free(&full);
	free(need);
	view_cache_drop(n);
	if (st != CRUX_OK) {
		for (size_t i = 0; nc && i < keys->n; i++) {
			free(nc[i].key);
			crux_jv_free(&nc[i].h);
		}
		free(nc);
		return st;
	}
	n->vc = nc;
	n->nvc = keys->n;
	return CRUX_OK;
}

/* The leader's round: views at one revision -> merge -> plan -> fenced write. */
static crux_status_t lead(struct crux_cluster_node *n)
{
	struct crux_etcd_range r;
	crux_status_t st;
	/* Someone else put or deleted the schedule key since our last write (by
	 * hand, a stale leader's copy): write ours again, even if unchanged. */
	pthread_mutex_lock(&n->mu);
	bool force = n->written_rev && n->sched_key_rev > n->written_rev;
	int64_t foreign = n->sched_key_rev;
	pthread_mutex_unlock(&n->mu);
	if (force && crux_log_once_key(0xf0e1ull ^ (uint64_t)foreign))
		crux_warn(
		    "cluster %s: the schedule key was changed by someone other than leader %s "
		    "at revision %lld: writing the leader's schedule again",
		    n->cluster, n->host, (long long)foreign);
	/* Nothing written anywhere since the last full read (the input watch
	 * says so, or a one-key read tells the store's revision): the views are
	 * unchanged, so skip reading all N of them again. */
	if (n->seen_rev && n->planned_term == n->term && !n->replan && !force) {
		if (inputs_quiet(n))
			return CRUX_OK;
		if ((st = crux_etcd_get(n->e, n->k_leader, strlen(n->k_leader), false, &r)) !=
		    CRUX_OK)
			return st;
		bool same = r.revision == n->seen_rev;
		crux_etcd_range_free(&r);
		if (same)
			return CRUX_OK;
	}
	/* Keys and revisions only: the values come from read_views. */
	if ((st = crux_etcd_get_at(n->e, n->k_hosts, strlen(n->k_hosts), true, true, 0, &r)) !=
	    CRUX_OK)
		return st;
	n->seen_rev = 0; /* set again once this read is fully handled */
	struct crux_etcd_range ro;
	st = crux_etcd_get(n->e, n->k_ovr, strlen(n->k_ovr), true, &ro);
	if (st != CRUX_OK) {
		crux_etcd_range_free(&r);
		return st;
	}
	uint64_t sig = inputs_sig(&r) ^ (inputs_sig(&ro) * 0x9e3779b97f4a7c15ull);
	if (sig == n->planned_sig && n->planned_term == n->term && !n->replan && !force) {
		n->seen_rev = r.revision;
		crux_etcd_range_free(&r);
		crux_etcd_range_free(&ro);
		return CRUX_OK;
	}
	n->replan = false;
	struct crux_job_view *views = NULL;
	size_t nv = 0;
	struct crux_job_view merged = {0};
	struct crux_cv_schedule s = {0};
	char *txt = NULL, *cmp = NULL, *otext = NULL;
	size_t len = 0, cmp_len = 0, olen = 0;
	if ((st = read_views(n, &r, &views, &nv)) != CRUX_OK)
		goto out;
	crux_status_t pst = crux_jv_merge(views, nv, &merged);
	if (pst == CRUX_OK)
		pst = overrides_text(n, &ro, &otext, &olen);
	if (pst == CRUX_OK)
		pst = n->cfg.plan(n->cfg.arg, &merged, otext, olen, &s);
	if (pst == CRUX_OK)
		pst = crux_cv_schedule_encode(&s, &cmp, &cmp_len);
	if (pst == CRUX_OK && n->last_plan && n->planned_term == n->term && !force &&
	    cmp_len == n->last_plan_len && !memcmp(cmp, n->last_plan, cmp_len)) {
		n->planned_sig = sig; /* the same decisions: nothing to write */
		goto out;
	}
	s.input_revision = r.revision;
	s.term = n->term;
	s.lease = n->lease;
	snprintf(s.leader, sizeof(s.leader), "%s", n->host);
	if (pst == CRUX_OK)
		pst = crux_cv_schedule_pack(&s, &txt, &len);
	if (pst != CRUX_OK) {
		/* A planning failure is not an etcd failure: keep the last schedule
		 * and try again when the inputs change. */
		if (crux_log_once_key(0x91a4ull ^ sig))
			crux_warn("cluster %s: leader %s could not plan from revision %lld (%s): "
				  "the last schedule stays",
				  n->cluster, n->host, (long long)r.revision, crux_status_str(pst));
		n->planned_sig = sig;
		n->planned_term = n->term;
		goto out;
	}
	int64_t wrev = 0;
	st = crux_elect_fenced_put(n->e, n->k_leader, n->term, n->lease, n->k_sched, txt, len,
				   &wrev);
	if (st == CRUX_OK) {
		n->written_rev = wrev;
		/* Our write took the next revision: nothing else was written in
		 * between, so the next probe need not read the views again. */
		if (wrev == r.revision + 1)
			r.revision = wrev;
		n->planned_sig = sig;
		n->planned_term = n->term;
		free(n->last_plan);
		n->last_plan = cmp;
		n->last_plan_len = cmp_len;
		cmp = NULL;
		n->schedules_written++;
		n->bytes_written += len + strlen(n->k_sched);
	} else if (st == CRUX_ERR_PERM) {
		crux_warn(
		    "cluster %s: host %s is no longer the leader (term %lld fenced: the leader "
		    "key was replaced or detached from its lease): schedule not written",
		    n->cluster, n->host, (long long)n->term);
		n->term = 0;
		n->written_rev = 0;
	}
out:
	if (st == CRUX_OK && n->planned_sig == sig && n->planned_term == n->term)
		n->seen_rev = r.revision; /* handled: the next probe compares with it */
	free(otext);
	free(txt);
	free(cmp);
	crux_etcd_range_free(&ro);
	crux_cv_schedule_free(&s);
	crux_jv_free(&merged);
	free(views); /* the cache's */
	crux_etcd_range_free(&r);
	return st;
}

static void apply_latest(struct crux_cluster_node *n)
{
	uint64_t cnt;
	if (atomic_exchange(&n->woken, false)) {
		ssize_t got = read(n->wake_fd, &cnt, sizeof(cnt));
		(void)got; /* drained (or already drained with an earlier flag) */
	}
	pthread_mutex_lock(&n->mu);
	if (n->latest_rev > n->applied_rev && n->latest_rev != n->held_rev) {
		const struct crux_cv_schedule *l = &n->latest;
		/* Only the current leader's schedule: its term is the leader key's
		 * create revision (and its lease the key's lease). */
		if (!n->lk_known || !n->lk_present || l->term != n->lk_create ||
		    (l->lease && l->lease != n->lk_lease)) {
			if (n->lk_known)
				crux_warn(
				    "cluster %s: host %s: schedule revision %lld is not applied: "
				    "it "
				    "names term %lld (leader %s) but the leader key is %s%lld "
				    "(holder %s): a stale or forged schedule; waiting for the "
				    "leader's",
				    n->cluster, n->host, (long long)n->latest_rev,
				    (long long)l->term, l->leader[0] ? l->leader : "?",
				    n->lk_present ? "at term " : "absent, term ",
				    (long long)n->lk_create, n->lk_present ? n->lk_holder : "-");
			n->held_rev = n->latest_rev;
			pthread_mutex_unlock(&n->mu);
			return;
		}
		n->applied_rev = n->latest_rev;
		n->applied_input = n->latest.input_revision;
		/* The callback runs under the lock: the watcher only swaps schedules. */
		n->cfg.apply(n->cfg.arg, &n->latest, n->latest_rev);
	}
	pthread_mutex_unlock(&n->mu);
}

/*
 * Write this host's view only to a key that is ours (on our lease) or free:
 * two agents given one host name must not overwrite each other's views.
 * *mine: written. A key held by another live lease is said once and retried
 * at the next step (it frees itself when that lease ends).
 */
static crux_status_t publish_view(struct crux_cluster_node *n, bool *mine)
{
	size_t kl = strlen(n->k_me);
	struct crux_etcd_op put = {.kind = CRUX_ETCD_OP_PUT,
				   .key = n->k_me,
				   .klen = kl,
				   .value = n->view_text,
				   .vlen = n->view_len,
				   .lease = n->lease};
	struct crux_etcd_cmp ours = {.target = CRUX_ETCD_CMP_LEASE,
				     .result = CRUX_ETCD_EQUAL,
				     .key = n->k_me,
				     .klen = kl,
				     .number = n->lease};
	struct crux_etcd_cmp absent = {.target = CRUX_ETCD_CMP_VERSION,
				       .result = CRUX_ETCD_EQUAL,
				       .key = n->k_me,
				       .klen = kl,
				       .number = 0};
	crux_status_t st = crux_etcd_txn(n->e, &ours, 1, &put, 1, NULL, 0, mine, NULL);

	if (st == CRUX_OK && !*mine)
		st = crux_etcd_txn(n->e, &absent, 1, &put, 1, NULL, 0, mine, NULL);
	if (st == CRUX_OK && !*mine) {
		/* Written by hand without a lease (etcdctl put): no agent owns it and
		 * it would never expire: take it back, if unchanged since read. */
		struct crux_etcd_range r;
		st = crux_etcd_get(n->e, n->k_me, kl, false, &r);
		if (st == CRUX_OK && r.n == 1 && r.kvs[0].lease == 0) {
			struct crux_etcd_cmp same = {.target = CRUX_ETCD_CMP_MOD,
						     .result = CRUX_ETCD_EQUAL,
						     .key = n->k_me,
						     .klen = kl,
						     .number = r.kvs[0].mod_revision};
			st = crux_etcd_txn(n->e, &same, 1, &put, 1, NULL, 0, mine, NULL);
		}
		if (st == CRUX_OK)
			crux_etcd_range_free(&r);
	}
	if (st == CRUX_OK && !*mine && crux_log_once_key(0x4057d0ull ^ (uint64_t)n->lease))
		crux_err("cluster %s: host name %s is held by another agent's lease (another "
			 "agent with this name, or this host's previous run until its lease ends): "
			 "this host's jobs are left out until it is free; fix: give every host its "
			 "own name (--host, CRUX_HOST)",
			 n->cluster, n->host);
	return st;
}

/* The leader's beat under ctl/: every host's watch sees traffic at least
 * every beat_s, so a watch that sees none for its deadline is dead. Fenced
 * like every leader write; the leader's next probe does not take its own
 * beat for a change of the views. */
static crux_status_t beat(struct crux_cluster_node *n, double now)
{
	char v[96];
	int64_t wrev = 0;
	int len = snprintf(v, sizeof(v), "%s %lld", n->host, (long long)n->term);
	crux_status_t st = crux_elect_fenced_put(n->e, n->k_leader, n->term, n->lease, n->k_beat, v,
						 (size_t)len, &wrev);
	if (st == CRUX_ERR_PERM) {
		crux_warn("cluster %s: host %s is no longer the leader (term %lld fenced)",
			  n->cluster, n->host, (long long)n->term);
		n->term = 0;
		n->written_rev = 0;
		return CRUX_OK;
	}
	if (st != CRUX_OK)
		return st;
	n->next_beat = now + n->beat_s;
	n->bytes_written += (size_t)len + strlen(n->k_beat);
	if (n->seen_rev && wrev == n->seen_rev + 1)
		n->seen_rev = wrev;
	return CRUX_OK;
}

/* Anti-entropy: this host's record as etcd holds it, compared now and then
 * with what we published (deleted or overwritten by hand, lost in a
 * compaction accident): published again when it differs. */
static crux_status_t check_own_record(struct crux_cluster_node *n, double now)
{
	struct crux_etcd_range r;
	crux_status_t st;
	const char *why = NULL;

	if (n->view_dirty || !n->view_text || !n->lease || now < n->next_selfcheck)
		return CRUX_OK;
	n->next_selfcheck = now + (double)n->cfg.ttl_s * (0.9 + 0.2 * xorshift01(&n->rng));
	if ((st = crux_etcd_get(n->e, n->k_me, strlen(n->k_me), false, &r)) != CRUX_OK)
		return st;
	if (r.n == 0)
		why = "was deleted";
	else if (r.kvs[0].lease != n->lease)
		why = "was overwritten (not on this host's lease)";
	else if (r.kvs[0].value_len != n->view_len ||
		 memcmp(r.kvs[0].value, n->view_text, n->view_len) != 0)
		why = "was overwritten";
	crux_etcd_range_free(&r);
	if (why) {
		crux_warn("cluster %s: the record of host %s %s: publishing it again", n->cluster,
			  n->host, why);
		n->view_dirty = true;
	}
	return CRUX_OK;
}

/* Under no lock: the leader key as the watcher saw it says we lead no more
 * (deleted, another term, detached from our lease): stop at once. */
static void check_leadership(struct crux_cluster_node *n)
{
	pthread_mutex_lock(&n->mu);
	bool known = n->lk_known && n->lk_seen >= n->term;
	bool present = n->lk_present;
	int64_t create = n->lk_create, lease = n->lk_lease;
	char holder[CRUX_CLUSTER_NAME_MAX];
	snprintf(holder, sizeof(holder), "%s", n->lk_holder);
	pthread_mutex_unlock(&n->mu);
	if (!known || (present && create == n->term && lease == n->lease))
		return;
	if (!present)
		crux_warn(
		    "cluster %s: host %s stops leading (term %lld): the leader key was deleted",
		    n->cluster, n->host, (long long)n->term);
	else if (create != n->term)
		crux_warn("cluster %s: host %s stops leading (term %lld): the leader key now has "
			  "term %lld (holder %s)",
			  n->cluster, n->host, (long long)n->term, (long long)create, holder);
	else
		crux_warn("cluster %s: host %s stops leading (term %lld): the leader key was "
			  "detached from its lease (a plain put%s): it is replaced",
			  n->cluster, n->host, (long long)n->term,
			  lease ? " on another lease" : "");
	n->term = 0;
	n->written_rev = 0;
	snprintf(n->leader_name, sizeof(n->leader_name), "%s", present ? holder : "");
}

/* A leader key on no lease never expires: nobody would ever take over. */
static crux_status_t drop_leaseless(struct crux_cluster_node *n, bool *dropped)
{
	pthread_mutex_lock(&n->mu);
	bool leaseless = n->lk_known && n->lk_present && n->lk_lease == 0;
	int64_t create = n->lk_create;
	pthread_mutex_unlock(&n->mu);
	*dropped = false;
	if (!leaseless)
		return CRUX_OK;
	crux_status_t st = crux_elect_drop_leaseless(n->e, n->k_leader, create, dropped);
	if (st == CRUX_OK && *dropped)
		crux_warn(
		    "cluster %s: host %s replaced a leader key on no lease (term %lld, put by "
		    "hand): electing a leader again",
		    n->cluster, n->host, (long long)create);
	return st;
}

/*
 * One campaign: the leader key created on our lease if absent (Patroni's
 * txn), and nothing sent while the watcher shows a leader key on a lease:
 * with N hosts, a leader's end made all N campaign with a txn and a read
 * each, and the once-per-TTL fallback cost every host two requests per TTL.
 * The term is the txn's revision (the key's create revision); the holder
 * otherwise comes from the watcher.
 */
static crux_status_t campaign(struct crux_cluster_node *n, bool force)
{
	size_t kl = strlen(n->k_leader), ml = strlen(n->host);
	pthread_mutex_lock(&n->mu);
	bool known = n->lk_known && n->lk_present;
	int64_t create = n->lk_create, lease = n->lk_lease;
	char holder[CRUX_CLUSTER_NAME_MAX];
	snprintf(holder, sizeof(holder), "%s", n->lk_holder);
	pthread_mutex_unlock(&n->mu);
	if (known && !force && lease) {
		if (lease == n->lease && !strcmp(holder, n->host))
			n->term = create; /* ours already (a term of ours the store kept) */
		else
			snprintf(n->leader_name, sizeof(n->leader_name), "%s", holder);
		return CRUX_OK;
	}
	if (!n->lease)
		return CRUX_ERR_INVAL;
	struct crux_etcd_cmp absent = {.target = CRUX_ETCD_CMP_CREATE,
				       .result = CRUX_ETCD_EQUAL,
				       .key = n->k_leader,
				       .klen = kl,
				       .number = 0};
	struct crux_etcd_op put = {.kind = CRUX_ETCD_OP_PUT,
				   .key = n->k_leader,
				   .klen = kl,
				   .value = n->host,
				   .vlen = ml,
				   .lease = n->lease};
	bool created = false;
	int64_t rev = 0;
	crux_status_t st = crux_etcd_txn(n->e, &absent, 1, &put, 1, NULL, 0, &created, &rev);
	if (st != CRUX_OK)
		return st;
	if (created) {
		n->term = rev;
		snprintf(n->leader_name, sizeof(n->leader_name), "%s", n->host);
	} else {
		n->term = 0;
		snprintf(n->leader_name, sizeof(n->leader_name), "%s", known ? holder : "");
	}
	return CRUX_OK;
}

/* After another store was detected: everything this node remembers of the
 * old one (its lease may be unknown there, its record and the schedule
 * absent or old) is checked again: republish, campaign, rewrite. */
static void resync(struct crux_cluster_node *n)
{
	pthread_mutex_lock(&n->mu);
	bool due = n->resync_pending;
	char why[sizeof(n->resync_why)];
	snprintf(why, sizeof(why), "%s", n->resync_why);
	n->resync_pending = false;
	pthread_mutex_unlock(&n->mu);
	if (!due)
		return;
	crux_warn("cluster %s: host %s: %s: resynchronising (record published again, leader "
		  "elected again, its schedule written again and accepted)",
		  n->cluster, n->host, why);
	n->view_dirty = true;
	n->next_keepalive = 0; /* a lease unknown there is granted again */
	n->term = 0;
	n->written_rev = 0;
	n->seen_rev = 0;
	n->planned_sig = 0;
	n->planned_term = 0;
	free(n->last_plan);
	n->last_plan = NULL;
	n->last_plan_len = 0;
	n->next_campaign = 0;
	atomic_store(&n->inputs_rev, 0); /* the input watch lists the new store again */
	view_cache_drop(n); /* another store: its revisions say nothing of our copies */
}

crux_status_t crux_cluster_step(struct crux_cluster_node *n)
{
	double now = mono_s();
	resync(n);
	crux_status_t st = keep_lease(n, now);
	if (st == CRUX_OK)
		st = check_own_record(n, now);
	if (st == CRUX_OK && n->view_dirty && n->view_text) {
		bool mine = false;
		st = publish_view(n, &mine);
		if (st == CRUX_OK && mine) {
			n->view_dirty = false;
			n->bytes_written += n->view_len + strlen(n->k_me);
			n->next_selfcheck = now + (double)n->cfg.ttl_s;
		}
	}
	if (st == CRUX_OK && n->novr)
		st = write_overrides(n);
	if (n->term > 0)
		check_leadership(n);
	bool dropped = false;
	if (st == CRUX_OK && n->term == 0)
		st = drop_leaseless(n, &dropped);
	/* Campaign when the watcher saw the leader key go, and once per TTL in
	 * case a deletion fell between a list and its watch. */
	if (st == CRUX_OK && n->term == 0 &&
	    (dropped || now >= n->next_campaign || atomic_exchange(&n->leader_gone, false))) {
		st = campaign(n, dropped);
		n->next_campaign = now + (double)n->cfg.ttl_s;
		if (st == CRUX_OK && n->term > 0)
			crux_info("cluster %s: host %s leads (term %lld)", n->cluster, n->host,
				  (long long)n->term);
	}
	input_watch_follow(n);
	if (st == CRUX_OK && n->term > 0)
		st = lead(n);
	if (st == CRUX_OK && n->term > 0 && now >= n->next_beat)
		st = beat(n, now);
	struct crux_etcd_identity id;
	crux_etcd_identity(n->e, &id);
	if (id.answers != n->step_answers) {
		/* a new answer this step (an old one would say an old revision) */
		n->step_answers = id.answers;
		pthread_mutex_lock(&n->mu);
		note_store(n, &id);
		pthread_mutex_unlock(&n->mu);
	}
	etcd_state(n, st, now);
	apply_latest(n);
	return st;
}

int crux_cluster_wake_fd(const struct crux_cluster_node *n)
{
	return n->wake_fd;
}

void crux_cluster_apply_received(struct crux_cluster_node *n)
{
	apply_latest(n);
}

bool crux_cluster_step_due(struct crux_cluster_node *n)
{
	return (n->term > 0 && atomic_load(&n->inputs_rev) > n->seen_rev) ||
	       (n->term == 0 && atomic_load(&n->leader_gone));
}

void crux_cluster_get_status(struct crux_cluster_node *n, struct crux_cluster_status *out)
{
	memset(out, 0, sizeof(*out));
	out->leader = n->term > 0;
	out->term = n->term;
	out->schedules_written = n->schedules_written;
	out->bytes_written = n->bytes_written;
	out->overrides_pending = n->novr > 0;
	out->renewals = n->renewals;
	snprintf(out->leader_name, sizeof(out->leader_name), "%s",
		 n->term > 0 ? n->host : n->leader_name);
	pthread_mutex_lock(&n->mu);
	out->applied_revision = n->applied_rev;
	out->applied_input = n->applied_input;
	out->received_revision = n->latest_rev;
	out->received_at = n->latest_at;
	out->resyncs = n->resyncs;
	out->watch_restarts = n->watch_restarts;
	snprintf(out->resync_why, sizeof(out->resync_why), "%s", n->resync_why);
	double now = mono_s();
	bool se = health_stale(&n->etcd, now);
	out->stale = se || health_stale(&n->watch, now);
	pthread_mutex_unlock(&n->mu);
	if (out->stale)
		snprintf(out->error, sizeof(out->error), "%s",
			 se && crux_etcd_last_error(n->e)[0] ? crux_etcd_last_error(n->e)
							     : "the watch on etcd failed");
}
