/* SPDX-License-Identifier: Apache-2.0 */
/* CRUX_ variables of the plugin, parsed strictly, and interface-name matching. */
#include <stdio.h>
#include <string.h>

#include "crux/decision.h"
#include "crux/env.h"
#include "cruxn.h"

static const char *const family_names[] = {"any", "ipv4", "ipv6", NULL};

crux_status_t cruxn_config_load(struct cruxn_config *cfg, char *err, size_t errlen)
{
	struct cruxn_config c;
	long long v;
	uint64_t ns;
	const char *s;

	memset(&c, 0, sizeof(c));
	/* CRUX_SOCKET_IFNAME wins over NCCL's own variable. */
	s = crux_env_get(NULL, NULL, "CRUX_SOCKET_IFNAME");
	if (!s)
		s = crux_env_get(NULL, NULL, "NCCL_SOCKET_IFNAME");
	if (s) {
		if (strlen(s) >= sizeof(c.ifname_spec)) {
			snprintf(err, errlen,
				 "CRUX_SOCKET_IFNAME/NCCL_SOCKET_IFNAME is longer than %zu "
				 "characters",
				 sizeof(c.ifname_spec) - 1);
			return CRUX_ERR_INVAL;
		}
		snprintf(c.ifname_spec, sizeof(c.ifname_spec), "%s", s);
	}
	if (crux_env_enum(NULL, NULL, "CRUX_SOCKET_FAMILY", family_names, CRUXN_FAM_ANY, &c.family,
			  err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	if (crux_env_int(NULL, NULL, "CRUX_SOCKET_NTHREADS", 2, 1, CRUXN_MAX_SOCKS, &v, err,
			 errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	c.nthreads = (int)v;
	if (crux_env_int(NULL, NULL, "CRUX_NSOCKS_PERTHREAD", 1, 1, CRUXN_MAX_SOCKS, &v, err,
			 errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	c.nsocks_per_thread = (int)v;
	if (c.nthreads * c.nsocks_per_thread > CRUXN_MAX_SOCKS) {
		snprintf(
		    err, errlen,
		    "CRUX_SOCKET_NTHREADS (%d) x CRUX_NSOCKS_PERTHREAD (%d) is more than %d data "
		    "sockets per connection: lower one of them",
		    c.nthreads, c.nsocks_per_thread, CRUXN_MAX_SOCKS);
		return CRUX_ERR_INVAL;
	}
	if (crux_env_int(NULL, NULL, "CRUX_INLINE_BYTES", 65536, 0, 1 << 20, &v, err, errlen) !=
	    CRUX_OK)
		return CRUX_ERR_INVAL;
	c.inline_bytes = (size_t)v;
	if (crux_env_int(NULL, NULL, "CRUX_CHUNK_BYTES", 128 << 10, 4096, 64 << 20, &v, err,
			 errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	c.chunk_bytes = (size_t)v;
	if (crux_env_int(NULL, NULL, "CRUX_CLASS", -1, 0, CRUX_MAX_LEVELS - 1, &v, err, errlen) !=
	    CRUX_OK)
		return CRUX_ERR_INVAL;
	c.class_level = (int)v;
	if (crux_env_bool(NULL, NULL, "CRUX_TAGGING", true, &c.tagging, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	if (crux_env_duration_ns(NULL, NULL, "CRUX_TIMEOUT", 30000000000ull, 1000000000ull,
				 3600000000000ull, 1000000000ull, &ns, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	c.timeout_ms = ns / 1000000u;
	if (crux_env_duration_ns(NULL, NULL, "CRUX_PUBLISH_INTERVAL", 1000000000ull, 10000000ull,
				 60000000000ull, 1000000ull, &ns, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	c.publish_ns = ns;
	if (crux_env_duration_ns(NULL, NULL, "CRUX_BUSY_PERIOD", 30000000000ull, 1000000000ull,
				 600000000000ull, 1000000000ull, &ns, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	c.busy_period_ns = ns;
	if (crux_env_int(NULL, NULL, "CRUX_SOCKET_BUFSIZE", 0, 0, 1 << 30, &v, err, errlen) !=
	    CRUX_OK)
		return CRUX_ERR_INVAL;
	c.sockbuf = (int)v;
	{
		static const char *const kinds[] = {"auto", "verbs", "socket", NULL};
		const char *e;
		if (crux_env_enum(NULL, NULL, "CRUX_TRANSPORT", kinds, CRUXN_TP_AUTO, &c.transport,
				  err, errlen) != CRUX_OK)
			return CRUX_ERR_INVAL;
		e = crux_env_get(NULL, NULL, "CRUX_IBVERBS_LIB");
		snprintf(c.ibverbs_lib, sizeof(c.ibverbs_lib), "%s", e ? e : "");
		e = crux_env_get(NULL, NULL, "CRUX_MLX5_LIB");
		snprintf(c.mlx5_lib, sizeof(c.mlx5_lib), "%s", e ? e : "");
		/* NCCL's IB class for RoCE/IB (-1: unset, as NCCL) */
		if (crux_env_int(NULL, NULL, "NCCL_IB_TC", -1, -1, 255, &v, err, errlen) != CRUX_OK)
			return CRUX_ERR_INVAL;
		c.ib_tc = (int)v;
		if (crux_env_int(NULL, NULL, "NCCL_IB_SL", -1, -1, 15, &v, err, errlen) != CRUX_OK)
			return CRUX_ERR_INVAL;
		c.ib_sl = (int)v;
		if (crux_env_int(NULL, NULL, "NCCL_IB_FIFO_TC", -1, -1, 255, &v, err, errlen) !=
		    CRUX_OK)
			return CRUX_ERR_INVAL;
		c.ib_fifo_tc = (int)v;
		e = crux_env_get(NULL, NULL, "CRUX_IB_HCA");
		if (!e)
			e = crux_env_get(NULL, NULL, "NCCL_IB_HCA");
		snprintf(c.hca_spec, sizeof(c.hca_spec), "%s", e ? e : "");
	}
	*cfg = c;
	return CRUX_OK;
}

/*
 * NCCL_SOCKET_IFNAME syntax: a comma-separated list; a leading '^' turns the
 * list into exclusions, a leading '=' (after any '^') makes entries exact
 * names instead of prefixes. An empty spec matches everything but loopback
 * and docker bridges (NCCL's default).
 */
bool cruxn_ifname_match(const char *spec, const char *ifname)
{
	bool exclude = false, exact = false, hit = false;
	const char *p = spec;

	if (!spec || !spec[0])
		return strncmp(ifname, "lo", 2) != 0 && strncmp(ifname, "docker", 6) != 0;
	if (*p == '^') {
		exclude = true;
		p++;
	}
	if (*p == '=') {
		exact = true;
		p++;
	}
	while (*p && !hit) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len > 0) {
			if (exact)
				hit = strlen(ifname) == len && strncmp(ifname, p, len) == 0;
			else
				hit = strncmp(ifname, p, len) == 0;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	if (exclude)
		return !hit && strncmp(ifname, "lo", 2) != 0;
	return hit;
}
