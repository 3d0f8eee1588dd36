/* SPDX-License-Identifier: Apache-2.0 */
/* cruxd configuration from CRUX_ variables, parsed strictly. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crux/agent.h"
#include "crux/sched.h"

#define SEC 1000000000ull

crux_status_t cruxd_parse_level_list(const char *name, const char *text, uint32_t n, long min,
				     long max, long *out, char *err, size_t errlen)
{
	long vals[CRUX_MAX_LEVELS];
	const char *p = text;
	uint32_t k = 0;

	if (!text || !*text)
		goto bad;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char item[24];
		long long v;

		if (len == 0 || len >= sizeof(item) || k >= n || k >= CRUX_MAX_LEVELS)
			goto bad;
		memcpy(item, p, len);
		item[len] = '\0';
		if (crux_parse_int(name, item, min, max, &v, NULL, 0) != CRUX_OK)
			goto bad;
		vals[k++] = (long)v;
		if (!comma)
			break;
		p = comma + 1;
	}
	if (k != n)
		goto bad;
	memcpy(out, vals, n * sizeof(long));
	return CRUX_OK;
bad:
	if (err && errlen)
		snprintf(
		    err, errlen,
		    "%s='%s' is not valid: expected %u comma-separated integers in [%ld, %ld], "
		    "one per level from level 0 (CRUX_LEVELS=%u)",
		    name, text ? text : "", n, min, max, n);
	return CRUX_ERR_INVAL;
}

static crux_status_t level_list(crux_getenv_fn fn, void *arg, const char *name, uint32_t n,
				long min, long max, long *out, bool *given, char *err,
				size_t errlen)
{
	const char *v = crux_env_get(fn, arg, name);

	*given = v != NULL;
	if (!v)
		return CRUX_OK;
	return cruxd_parse_level_list(name, v, n, min, max, out, err, errlen);
}

/* The fairness guard: bound, promotion timing and per-level weights. */
static crux_status_t guard_env(crux_getenv_fn fn, void *arg, struct cruxd_config *c, char *err,
			       size_t errlen)
{
	const char *ms = crux_env_get(fn, arg, "CRUX_MAX_SLOWDOWN");
	struct crux_sched_err se;
	long w[CRUX_MAX_LEVELS];
	bool given = false;
	crux_status_t st;

	cruxd_guard_config_default(&c->guard);
	if (ms && crux_sched_slowdown_parse(ms, &c->guard.bound, &se) != CRUX_OK) {
		if (err)
			snprintf(
			    err, errlen,
			    "CRUX_MAX_SLOWDOWN='%s' is not valid: expected a number in [1, %g] "
			    "(e.g. 2 = no job below half its isolated speed) or 0/off",
			    ms, CRUX_SCHED_MAX_SLOWDOWN_LIMIT);
		return CRUX_ERR_INVAL;
	}
	st = crux_env_duration_ns(fn, arg, "CRUX_GUARD_AGE", c->guard.age_ns, SEC / 10, 3600 * SEC,
				  SEC, &c->guard.age_ns, err, errlen);
	if (st == CRUX_OK)
		st = crux_env_duration_ns(fn, arg, "CRUX_GUARD_HOLD", c->guard.hold_ns, SEC / 10,
					  3600 * SEC, SEC, &c->guard.hold_ns, err, errlen);
	if (st != CRUX_OK)
		return st;
	if (c->guard.max_hold_ns < c->guard.hold_ns)
		c->guard.max_hold_ns = c->guard.hold_ns;
	if (c->guard.min_gap_ns > c->guard.age_ns)
		c->guard.min_gap_ns = c->guard.age_ns;
	st = level_list(fn, arg, "CRUX_LEVEL_WEIGHTS", c->settings.nlevels, 1, 65535, w, &given,
			err, errlen);
	if (st != CRUX_OK)
		return st;
	for (uint32_t l = 0; l < c->settings.nlevels; l++)
		c->settings.levels[l].weight = given ? (uint16_t)w[l] : 0;
	return CRUX_OK;
}

/* A name for etcd keys: 1..63 bytes of A-Z a-z 0-9 . _ - */
static bool key_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

static crux_status_t env_text(crux_getenv_fn fn, void *arg, const char *name, char *buf, size_t cap,
			      char *err, size_t errlen)
{
	const char *v = crux_env_get(fn, arg, name);
	if (!v)
		return CRUX_OK;
	if (strlen(v) >= cap) {
		if (err && errlen)
			snprintf(err, errlen, "%s is longer than %zu bytes: shorten it", name,
				 cap - 1);
		return CRUX_ERR_INVAL;
	}
	snprintf(buf, cap, "%s", v);
	return CRUX_OK;
}

/* CRUX_ETCD, CRUX_CLUSTER, CRUX_HOST, CRUX_ETCD_CA/CERT/KEY, CRUX_CLUSTER_TTL. */
static crux_status_t cluster_env(crux_getenv_fn fn, void *arg, struct cruxd_config *c, char *err,
				 size_t errlen)
{
	crux_status_t st = env_text(fn, arg, "CRUX_ETCD", c->etcd, sizeof(c->etcd), err, errlen);
	if (st == CRUX_OK)
		st = env_text(fn, arg, "CRUX_CLUSTER", c->cluster, sizeof(c->cluster), err, errlen);
	if (st == CRUX_OK)
		st = env_text(fn, arg, "CRUX_HOST", c->host, sizeof(c->host), err, errlen);
	if (st == CRUX_OK)
		st = env_text(fn, arg, "CRUX_ETCD_CA", c->etcd_ca, sizeof(c->etcd_ca), err, errlen);
	if (st == CRUX_OK)
		st = env_text(fn, arg, "CRUX_ETCD_CERT", c->etcd_cert, sizeof(c->etcd_cert), err,
			      errlen);
	if (st == CRUX_OK)
		st = env_text(fn, arg, "CRUX_ETCD_KEY", c->etcd_key, sizeof(c->etcd_key), err,
			      errlen);
	if (st == CRUX_OK)
		st = crux_env_duration_ns(fn, arg, "CRUX_CLUSTER_TTL", 10 * SEC, 2 * SEC,
					  3600 * SEC, SEC, &c->cluster_ttl_ns, err, errlen);
	if (st != CRUX_OK)
		return st;
	if (!c->etcd[0]) {
		if (c->cluster[0] && err && errlen)
			snprintf(err, errlen,
				 "CRUX_CLUSTER is set but CRUX_ETCD is not: set both "
				 "(cluster mode) or neither (single-host mode)");
		return c->cluster[0] ? CRUX_ERR_INVAL : CRUX_OK;
	}
	if (!c->cluster[0])
		snprintf(c->cluster, sizeof(c->cluster), "default");
	if (!c->host[0] && (gethostname(c->host, sizeof(c->host) - 1) != 0 || !c->host[0])) {
		if (err && errlen)
			snprintf(err, errlen, "cannot read the host name: set CRUX_HOST (--host)");
		return CRUX_ERR_INVAL;
	}
	if (!key_name_ok(c->cluster) || !key_name_ok(c->host)) {
		if (err && errlen)
			snprintf(
			    err, errlen,
			    "cluster name '%s' or host name '%s' is not 1..63 characters of "
			    "A-Z a-z 0-9 . _ -: set CRUX_CLUSTER (--cluster) / CRUX_HOST (--host)",
			    c->cluster, c->host);
		return CRUX_ERR_INVAL;
	}
	if (!c->etcd_cert[0] != !c->etcd_key[0]) {
		if (err && errlen)
			snprintf(err, errlen,
				 "CRUX_ETCD_CERT and CRUX_ETCD_KEY go together: set both "
				 "or neither");
		return CRUX_ERR_INVAL;
	}
	return CRUX_OK;
}

crux_status_t cruxd_config_env(crux_getenv_fn fn, void *arg, struct cruxd_config *out, char *err,
			       size_t errlen)
{
	struct cruxd_config c;
	long dscp[CRUX_MAX_LEVELS], prio[CRUX_MAX_LEVELS], sl[CRUX_MAX_LEVELS];
	bool gd, gp, gs, b;
	long long v;
	const char *topo;
	crux_status_t st;

	memset(&c, 0, sizeof(c));
	st = crux_shm_dir(fn, arg, c.shm_dir, sizeof(c.shm_dir));
	if (st != CRUX_OK) {
		if (err && errlen)
			snprintf(
			    err, errlen,
			    "CRUX_SHM_DIR is not valid: expected an absolute path shorter than "
			    "%d bytes",
			    CRUX_PATH_MAX);
		return st;
	}
	topo = crux_env_get(fn, arg, "CRUX_TOPOLOGY");
	if (topo) {
		if (strlen(topo) >= sizeof(c.topology)) {
			if (err && errlen)
				snprintf(err, errlen, "CRUX_TOPOLOGY is longer than %d bytes",
					 CRUX_PATH_MAX - 1);
			return CRUX_ERR_INVAL;
		}
		strcpy(c.topology, topo);
	}
	st = crux_env_int(fn, arg, "CRUX_LEVELS", CRUX_DEFAULT_LEVELS, 1, CRUX_MAX_LEVELS, &v, err,
			  errlen);
	if (st != CRUX_OK)
		return st;
	crux_dt_settings_default((uint32_t)v, &c.settings);
	st = level_list(fn, arg, "CRUX_LEVEL_DSCP", c.settings.nlevels, 0, 63, dscp, &gd, err,
			errlen);
	if (st == CRUX_OK)
		st = level_list(fn, arg, "CRUX_LEVEL_PRIO", c.settings.nlevels, 0, 15, prio, &gp,
				err, errlen);
	if (st == CRUX_OK)
		st = level_list(fn, arg, "CRUX_LEVEL_SL", c.settings.nlevels, 0, 15, sl, &gs, err,
				errlen);
	if (st != CRUX_OK)
		return st;
	for (uint32_t l = 0; l < c.settings.nlevels; l++) {
		if (gd)
			c.settings.levels[l].dscp = (uint8_t)dscp[l];
		if (gp)
			c.settings.levels[l].sock_prio = (int32_t)prio[l];
		if (gs)
			c.settings.levels[l].ib_sl = (uint8_t)sl[l];
	}
	/*
	 * CS6 / CS7 are network control (routing protocols, LACP, PFC's own
	 * pause): switches give them strict priority and policers, and a training
	 * job's bytes there starve the fabric's control plane. Refused unless the
	 * operator says the fabric was configured for it.
	 */
	st = crux_env_bool(fn, arg, "CRUX_ALLOW_NETWORK_CONTROL_DSCP", false, &b, err, errlen);
	if (st != CRUX_OK)
		return st;
	for (uint32_t l = 0; l < c.settings.nlevels && !b; l++) {
		uint8_t d = c.settings.levels[l].dscp;
		if (d == 48 || d == 56) {
			if (err && errlen)
				snprintf(
				    err, errlen,
				    "level %u would be DSCP %u (CS%u, network control)%s: give "
				    "CRUX_LEVEL_DSCP one DSCP per level that the switches queue "
				    "for data (e.g. 0,8,16,24,32,40,26,34), or set "
				    "CRUX_ALLOW_NETWORK_CONTROL_DSCP=1 if the fabric is configured "
				    "for it",
				    (unsigned)l, (unsigned)d, (unsigned)d / 8,
				    gd ? " in CRUX_LEVEL_DSCP"
				       : " by the default map (CRUX_LEVELS > 6)");
			return CRUX_ERR_INVAL;
		}
	}
	/*
	 * InfiniBand: an SL is only as good as the subnet manager's SL2VL and
	 * QoS set-up (routing engines that use SLs against credit loops may drop
	 * or deadlock others). CRUX_IB_ALLOWED_SLS names the ones configured.
	 */
	{
		const char *allowed = crux_env_get(fn, arg, "CRUX_IB_ALLOWED_SLS");
		if (allowed) {
			uint32_t mask = 0;
			const char *p = allowed;
			char *end;
			while (*p) {
				long x = strtol(p, &end, 10);
				if (end == p || x < 0 || x > 15 || (*end && *end != ',') ||
				    (*end == ',' && !end[1])) {
					if (err && errlen)
						snprintf(
						    err, errlen,
						    "CRUX_IB_ALLOWED_SLS='%s' is not valid: "
						    "expected "
						    "comma-separated service levels in [0, 15]",
						    allowed);
					return CRUX_ERR_INVAL;
				}
				mask |= 1u << x;
				p = *end ? end + 1 : end;
			}
			for (uint32_t l = 0; l < c.settings.nlevels; l++) {
				if (!(mask & (1u << c.settings.levels[l].ib_sl))) {
					if (err && errlen)
						snprintf(
						    err, errlen,
						    "level %u would use IB service level %u, which "
						    "CRUX_IB_ALLOWED_SLS='%s' does not allow: give "
						    "CRUX_LEVEL_SL one allowed SL per level",
						    (unsigned)l,
						    (unsigned)c.settings.levels[l].ib_sl, allowed);
					return CRUX_ERR_INVAL;
				}
			}
		}
	}
	st = crux_env_int(fn, arg, "CRUX_DEFAULT_LEVEL", 0, 0, c.settings.nlevels - 1, &v, err,
			  errlen);
	if (st != CRUX_OK)
		return st;
	c.settings.default_level = (uint32_t)v;
	st = crux_env_duration_ns(fn, arg, "CRUX_HEARTBEAT_TIMEOUT",
				  CRUX_DT_DEFAULT_HEARTBEAT_TIMEOUT_NS, SEC / 10, 3600 * SEC, SEC,
				  &c.settings.heartbeat_timeout_ns, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_dt_settings_validate(&c.settings, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_env_duration_ns(fn, arg, "CRUX_AGENT_INTERVAL", SEC, SEC / 100, 60 * SEC, SEC,
				  &c.interval_ns, err, errlen);
	if (st != CRUX_OK)
		return st;
	if (c.interval_ns * 3 > c.settings.heartbeat_timeout_ns) {
		if (err && errlen)
			snprintf(
			    err, errlen,
			    "CRUX_AGENT_INTERVAL (%llu ms) must be at most a third of "
			    "CRUX_HEARTBEAT_TIMEOUT (%llu ms) so the heartbeat never goes stale "
			    "while the agent runs",
			    (unsigned long long)(c.interval_ns / 1000000),
			    (unsigned long long)(c.settings.heartbeat_timeout_ns / 1000000));
		return CRUX_ERR_INVAL;
	}
	st = crux_env_duration_ns(fn, arg, "CRUX_PROFILE_WINDOW", 30 * SEC, SEC / 10, 3600 * SEC,
				  SEC, &c.profile_window_ns, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_env_double(fn, arg, "CRUX_AGENT_CHANGE", 0.25, 0.01, 100.0, &c.change_threshold,
			     err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_env_duration_ns(fn, arg, "CRUX_AGENT_HOLD", 10 * SEC, 0, 3600 * SEC, SEC,
				  &c.hold_ns, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_env_double(fn, arg, "CRUX_AGENT_LINK_GBPS", 100.0, 0.001, 100000.0, &c.link_gbps,
			     err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_env_double(fn, arg, "CRUX_AGENT_MAX_ITER", 3600.0, 0.001, 86400.0, &c.max_iter_s,
			     err, errlen);
	if (st != CRUX_OK)
		return st;
	st = crux_env_int(fn, arg, "CRUX_AGENT_SEED", 1, 0, INT64_MAX, &v, err, errlen);
	if (st != CRUX_OK)
		return st;
	c.seed = (uint64_t)v;
	st = crux_env_int(fn, arg, "CRUX_AGENT_PATHS_SEARCH", 0, 0, 2, &v, err, errlen);
	if (st != CRUX_OK)
		return st;
	c.paths_search = (int)v;
	st = crux_env_bool(fn, arg, "CRUX_PROBE", true, &b, err, errlen);
	if (st != CRUX_OK)
		return st;
	c.probe = b;
	cruxd_probe_cache_config_default(&c.probe_cfg);
	st = cruxd_probe_cache_config_env(fn, arg, &c.probe_cfg, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = guard_env(fn, arg, &c, err, errlen);
	if (st != CRUX_OK)
		return st;
	st = cluster_env(fn, arg, &c, err, errlen);
	if (st != CRUX_OK)
		return st;
	*out = c;
	return CRUX_OK;
}
