/* SPDX-License-Identifier: Apache-2.0 */
/* Probe results per peer: expiry, verification, re-probing, background thread. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crux/clock.h"
#include "crux/log.h"
#include "crux/probe.h"
#include "crux/shm.h"

struct cache_slot {
	struct cruxd_probe_entry e;
	uint32_t expect_paths;
	bool used;
};

struct cruxd_probe_cache {
	struct cruxd_probe_cache_config cfg;
	pthread_mutex_t lock; /* guards slots, version, stop */
	pthread_cond_t wake;
	pthread_t thread;
	bool running;
	bool stop;
	uint64_t version;
	struct cache_slot slots[CRUXD_PROBE_MAX_PEERS];
};

void cruxd_probe_cache_config_default(struct cruxd_probe_cache_config *c)
{
	memset(c, 0, sizeof(*c));
	cruxd_probe_config_default(&c->probe);
	c->expiry_ns = 600ull * 1000000000ull;
	c->verify_ns = 30ull * 1000000000ull;
	c->retry_ns = 5ull * 1000000000ull;
	c->forget_ns = 600ull * 1000000000ull;
}

crux_status_t cruxd_probe_cache_config_env(crux_getenv_fn fn, void *arg,
					   struct cruxd_probe_cache_config *c, char *err,
					   size_t errlen)
{
	struct cruxd_probe_cache_config n = *c;
	crux_status_t st;

	st = cruxd_probe_config_env(fn, arg, &n.probe, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_env_duration_ns(fn, arg, "CRUX_PROBE_EXPIRY", c->expiry_ns, 1000000000ull,
				  86400ull * 1000000000ull, 1000000000ull, &n.expiry_ns, err,
				  errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_env_duration_ns(fn, arg, "CRUX_PROBE_VERIFY", c->verify_ns, 100000000ull,
				  86400ull * 1000000000ull, 1000000000ull, &n.verify_ns, err,
				  errlen);
	if (st != CRUX_OK)
		return st;
	*c = n;
	return CRUX_OK;
}

crux_status_t cruxd_probe_cache_create(const struct cruxd_probe_cache_config *cfg,
				       struct cruxd_probe_cache **out)
{
	struct cruxd_probe_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return CRUX_ERR_NOMEM;
	c->cfg = *cfg;
	if (pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c);
		return CRUX_ERR_NOMEM;
	}
	if (crux_cond_init_monotonic(&c->wake) != 0) {
		pthread_mutex_destroy(&c->lock);
		free(c);
		return CRUX_ERR_NOMEM;
	}
	*out = c;
	return CRUX_OK;
}

void cruxd_probe_cache_destroy(struct cruxd_probe_cache *c)
{
	if (!c)
		return;
	cruxd_probe_cache_stop(c);
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static struct cache_slot *find(struct cruxd_probe_cache *c, const struct crux_addr *peer)
{
	for (int i = 0; i < CRUXD_PROBE_MAX_PEERS; i++)
		if (c->slots[i].used && crux_addr_equal(&c->slots[i].e.peer, peer))
			return &c->slots[i];
	return NULL;
}

crux_status_t cruxd_probe_cache_want(struct cruxd_probe_cache *c, const struct crux_addr *peer,
				     uint32_t expect_paths, uint64_t now_ns)
{
	struct cache_slot *s;
	crux_status_t st = CRUX_OK;

	if (!peer || (peer->family != 4 && peer->family != 6))
		return CRUX_ERR_INVAL;
	pthread_mutex_lock(&c->lock);
	s = find(c, peer);
	if (!s) {
		for (int i = 0; i < CRUXD_PROBE_MAX_PEERS && !s; i++)
			if (!c->slots[i].used)
				s = &c->slots[i];
		if (!s) {
			st = CRUX_ERR_RANGE;
			goto out;
		}
		memset(s, 0, sizeof(*s));
		s->used = true;
		s->e.peer = *peer;
		s->e.state = CRUXD_PROBE_NONE;
		s->e.next_ns = now_ns;
		s->e.last_status = CRUX_ERR_NOENT;
		c->version++;
		pthread_cond_signal(&c->wake);
	}
	if (s->expect_paths != expect_paths && s->e.state == CRUXD_PROBE_OK &&
	    expect_paths > s->e.result.npaths)
		s->e.next_ns = now_ns; /* the topology says there is more to find */
	s->expect_paths = expect_paths;
	s->e.last_want_ns = now_ns;
out:
	pthread_mutex_unlock(&c->lock);
	return st;
}

crux_status_t cruxd_probe_cache_get(struct cruxd_probe_cache *c, const struct crux_addr *peer,
				    struct cruxd_probe_entry *out)
{
	struct cache_slot *s;
	crux_status_t st = CRUX_ERR_NOENT;

	pthread_mutex_lock(&c->lock);
	s = find(c, peer);
	if (s) {
		*out = s->e;
		st = CRUX_OK;
	}
	pthread_mutex_unlock(&c->lock);
	return st;
}

uint32_t cruxd_probe_cache_list(struct cruxd_probe_cache *c, struct cruxd_probe_entry *out,
				uint32_t max)
{
	uint32_t n = 0;

	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < CRUXD_PROBE_MAX_PEERS && n < max; i++)
		if (c->slots[i].used)
			out[n++] = c->slots[i].e;
	pthread_mutex_unlock(&c->lock);
	return n;
}

void cruxd_probe_cache_invalidate(struct cruxd_probe_cache *c, const struct crux_addr *peer)
{
	struct cache_slot *s;

	pthread_mutex_lock(&c->lock);
	s = find(c, peer);
	if (s) {
		s->e.next_ns = 0;
		s->e.probed_ns = 0; /* forces a full run */
		pthread_cond_signal(&c->wake);
	}
	pthread_mutex_unlock(&c->lock);
}

uint64_t cruxd_probe_cache_version(struct cruxd_probe_cache *c)
{
	uint64_t v;

	pthread_mutex_lock(&c->lock);
	v = c->version;
	pthread_mutex_unlock(&c->lock);
	return v;
}

enum action { ACT_NONE, ACT_PROBE, ACT_VERIFY };

static enum action due(const struct cruxd_probe_cache *c, const struct cache_slot *s, uint64_t now)
{
	const struct cruxd_probe_entry *e = &s->e;

	if (now < e->next_ns)
		return ACT_NONE;
	if (e->state != CRUXD_PROBE_OK || e->probed_ns == 0 ||
	    now - e->probed_ns >= c->cfg.expiry_ns)
		return ACT_PROBE;
	if (s->expect_paths > e->result.npaths)
		return ACT_PROBE;
	if (now - e->verified_ns >= c->cfg.verify_ns)
		return ACT_VERIFY;
	return ACT_NONE;
}

/* Does every path still leave through the router it was recorded for? */
static bool verify(const struct cruxd_probe_config *pc, const struct cruxd_probe_result *r)
{
	for (uint32_t i = 0; i < r->npaths; i++) {
		const struct cruxd_probe_path *p = &r->paths[i];
		bool ok = false;

		for (int attempt = 0; attempt < 3 && !ok && p->nports; attempt++) {
			struct crux_addr hop;
			crux_status_t st = cruxd_probe_port(pc, &r->peer, p->ports[0], &hop);
			if (st == CRUX_OK) {
				if (!crux_addr_equal(&hop, &p->hop))
					return false;
				ok = true;
			} else if (st != CRUX_ERR_TIMEOUT && st != CRUX_ERR_BUSY) {
				return false;
			}
		}
		if (!ok)
			return false;
	}
	return true;
}

bool cruxd_probe_cache_step(struct cruxd_probe_cache *c, uint64_t now_ns)
{
	struct cruxd_probe_config pc;
	struct cruxd_probe_result *res = NULL;
	struct crux_addr peer;
	struct cache_slot *s = NULL;
	enum action act = ACT_NONE;
	char buf[CRUX_ADDR_STRLEN];
	crux_status_t st;
	bool changed = false;

	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < CRUXD_PROBE_MAX_PEERS; i++) {
		struct cache_slot *x = &c->slots[i];
		if (!x->used)
			continue;
		if (now_ns > x->e.last_want_ns && now_ns - x->e.last_want_ns > c->cfg.forget_ns) {
			x->used = false;
			c->version++;
			changed = true;
			continue;
		}
		if (act == ACT_NONE && (act = due(c, x, now_ns)) != ACT_NONE)
			s = x;
	}
	if (!s) {
		pthread_mutex_unlock(&c->lock);
		return changed;
	}
	peer = s->e.peer;
	pc = c->cfg.probe;
	pc.expect_paths = s->expect_paths;
	res = malloc(sizeof(*res));
	if (res && act == ACT_VERIFY)
		*res = s->e.result;
	pthread_mutex_unlock(&c->lock);
	if (!res)
		return changed;

	crux_addr_format(&peer, buf, sizeof(buf));
	/* The run happens without the lock: readers keep the old result meanwhile. */
	if (act == ACT_VERIFY) {
		if (verify(&pc, res)) {
			pthread_mutex_lock(&c->lock);
			s = find(c, &peer);
			if (s)
				s->e.verified_ns = crux_now_ns();
			pthread_mutex_unlock(&c->lock);
			free(res);
			return changed;
		}
		crux_warn("probe: paths to %s changed or stopped answering; probing again", buf);
	}
	st = cruxd_probe_peer(&pc, &peer, res);
	pthread_mutex_lock(&c->lock);
	s = find(c, &peer);
	if (s) {
		uint64_t end = crux_now_ns();
		if (st == CRUX_OK) {
			if (s->e.state != CRUXD_PROBE_OK || s->e.result.npaths != res->npaths)
				crux_info("probe: %s has %u path(s) (%u probes, %u answered)", buf,
					  res->npaths, res->sent, res->answered);
			s->e.result = *res;
			s->e.state = CRUXD_PROBE_OK;
			s->e.failures = 0;
			s->e.probed_ns = end;
			s->e.verified_ns = end;
			/* fewer paths than the topology promises: look again later */
			s->e.next_ns = res->npaths < s->expect_paths ? end + c->cfg.retry_ns : end;
		} else {
			uint64_t back = c->cfg.retry_ns;
			for (uint32_t k = 0; k < s->e.failures && back < c->cfg.expiry_ns; k++)
				back *= 2;
			if (back > c->cfg.expiry_ns)
				back = c->cfg.expiry_ns;
			if (s->e.failures == 0)
				crux_warn(
				    "probe: no path found to %s: %s%s", buf, crux_status_str(st),
				    st == CRUX_ERR_RANGE   ? " (probes reached the peer: lower "
							     "CRUX_PROBE_HOPS)"
				    : st == CRUX_ERR_NOENT ? " (no ICMP time-exceeded: check "
							     "CRUX_PROBE_HOPS and ICMP rate limits)"
							   : "");
			memset(&s->e.result, 0, sizeof(s->e.result));
			s->e.result.peer = peer;
			s->e.state = CRUXD_PROBE_FAILED;
			s->e.failures++;
			s->e.next_ns = end + back;
		}
		s->e.last_status = st;
		c->version++;
		changed = true;
	}
	pthread_mutex_unlock(&c->lock);
	free(res);
	return changed;
}

static void *thread_main(void *arg)
{
	struct cruxd_probe_cache *c = arg;

	for (;;) {
		bool worked;

		pthread_mutex_lock(&c->lock);
		if (c->stop) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		pthread_mutex_unlock(&c->lock);
		worked = cruxd_probe_cache_step(c, crux_now_ns());
		pthread_mutex_lock(&c->lock);
		if (!c->stop && !worked) {
			crux_cond_wait_ns(&c->wake, &c->lock, 200000000ull);
		}
		pthread_mutex_unlock(&c->lock);
	}
	return NULL;
}

crux_status_t cruxd_probe_cache_start(struct cruxd_probe_cache *c)
{
	int rc;

	if (c->running)
		return CRUX_OK;
	c->stop = false;
	rc = pthread_create(&c->thread, NULL, thread_main, c);
	if (rc != 0) {
		crux_err("probe: cannot start the probe thread: %s", strerror(rc));
		return CRUX_ERR_IO;
	}
	c->running = true;
	return CRUX_OK;
}

void cruxd_probe_cache_stop(struct cruxd_probe_cache *c)
{
	if (!c->running)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->thread, NULL);
	c->running = false;
}
