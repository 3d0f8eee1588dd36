/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which RDMA devices and which GID the verbs transport uses, by NCCL's
 * rules: NCCL_IB_HCA for devices, NCCL_IB_GID_INDEX / ADDR_FAMILY /
 * ADDR_RANGE / ROCE_VERSION_NUM for the RoCE GID.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/env.h"
#include "vx.h"

bool cruxn_hca_match(const char *spec, const char *dev, int port)
{
	bool exclude = false, exact = false, hit = false;
	const char *p = spec;

	if (!spec || !spec[0])
		return true;
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
		const char *colon = memchr(p, ':', len);
		size_t nlen = colon ? (size_t)(colon - p) : len;

		if (nlen > 0) {
			bool name_ok = exact ? strlen(dev) == nlen && strncmp(dev, p, nlen) == 0
					     : strncmp(dev, p, nlen) == 0;
			/* "dev:port" names one port; a bare name takes every port */
			bool port_ok = !colon || atoi(colon + 1) == port;
			hit = name_ok && port_ok;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return exclude ? !hit : hit;
}

/*
 * NCCL_IB_HCA entries are "dev[:port[:rail[:plane]]]": the rail and plane
 * NCCL's own IB transport gives the device in its v12 properties. The first
 * entry naming this device and port that gives them wins; an exclusion list
 * ('^') gives none.
 */
void cruxn_hca_ids(const char *spec, const char *dev, int port, int *rail, int *plane)
{
	bool exact = false;
	const char *p = spec;

	*rail = *plane = -1;
	if (!spec || !spec[0] || *p == '^')
		return;
	if (*p == '=') {
		exact = true;
		p++;
	}
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char entry[128], *f[4] = {NULL, NULL, NULL, NULL};
		int nf = 0;

		if (len < sizeof(entry)) {
			memcpy(entry, p, len);
			entry[len] = '\0';
			/* fields may be empty ("mlx5_0::2"): split by hand, not strtok */
			f[nf++] = entry;
			for (char *c = entry; *c && nf < 4; c++)
				if (*c == ':') {
					*c = '\0';
					f[nf++] = c + 1;
				}
			size_t nlen = strlen(f[0]);
			bool name_ok = nlen > 0 && (exact ? strcmp(dev, f[0]) == 0
							  : strncmp(dev, f[0], nlen) == 0);
			bool port_ok = nf < 2 || !f[1][0] || atoi(f[1]) == port;
			if (name_ok && port_ok) {
				if (nf >= 3 && f[2][0])
					*rail = atoi(f[2]);
				if (nf >= 4 && f[3][0])
					*plane = atoi(f[3]);
				return;
			}
		}
		p += len;
		if (*p == ',')
			p++;
	}
}

/* "a.b.c.d/n" or "x:y::/n" into rules->range / range_bits. */
static crux_status_t parse_range(const char *text, struct cruxn_gid_rules *r, char *err,
				 size_t errlen)
{
	char buf[64];
	char *slash;
	long bits;
	int fam;

	if (strlen(text) >= sizeof(buf))
		goto bad;
	strcpy(buf, text);
	slash = strchr(buf, '/');
	if (!slash)
		goto bad;
	*slash = '\0';
	bits = strtol(slash + 1, NULL, 10);
	fam = strchr(buf, ':') ? AF_INET6 : AF_INET;
	memset(r->range, 0, sizeof(r->range));
	if (inet_pton(fam, buf, r->range) != 1 || bits < 0 || bits > (fam == AF_INET ? 32 : 128))
		goto bad;
	r->range_bits = (int)bits;
	return CRUX_OK;
bad:
	snprintf(err, errlen,
		 "NCCL_IB_ADDR_RANGE='%s' is not an address prefix: use e.g. 10.0.0.0/8 or "
		 "fd00::/8",
		 text);
	return CRUX_ERR_INVAL;
}

crux_status_t cruxn_gid_rules_load(struct cruxn_gid_rules *r, char *err, size_t errlen)
{
	static const char *const families[] = {"AF_INET", "AF_INET6", NULL};
	struct cruxn_gid_rules out;
	long long v;
	int fam;
	const char *range;

	memset(&out, 0, sizeof(out));
	out.range_bits = -1;
	if (crux_env_int(NULL, NULL, "NCCL_IB_GID_INDEX", -1, -1, 255, &v, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	out.index = (int)v;
	if (crux_env_int(NULL, NULL, "NCCL_IB_ROCE_VERSION_NUM", 2, 1, 2, &v, err, errlen) !=
	    CRUX_OK)
		return CRUX_ERR_INVAL;
	out.roce_version = (int)v;
	if (crux_env_enum(NULL, NULL, "NCCL_IB_ADDR_FAMILY", families, 0, &fam, err, errlen) !=
	    CRUX_OK)
		return CRUX_ERR_INVAL;
	out.family = fam == 0 ? CRUXN_GID_V4 : CRUXN_GID_V6;
	range = crux_env_get(NULL, NULL, "NCCL_IB_ADDR_RANGE");
	if (range && parse_range(range, &out, err, errlen) != CRUX_OK)
		return CRUX_ERR_INVAL;
	*r = out;
	return CRUX_OK;
}

static bool gid_v4_mapped(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(g->raw, pfx, sizeof(pfx)) == 0;
}

static bool gid_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];
	return memcmp(g->raw, zero, 16) == 0;
}

static bool prefix_match(const uint8_t *a, const uint8_t *p, int bits)
{
	int full = bits / 8, rest = bits % 8;

	if (memcmp(a, p, (size_t)full) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((a[full] ^ p[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

static bool gid_usable(const union ibv_gid *g, const struct cruxn_gid_rules *r)
{
	bool v4 = gid_v4_mapped(g);

	if (gid_zero(g))
		return false;
	if (r->family == CRUXN_GID_V4 && !v4)
		return false;
	if (r->family == CRUXN_GID_V6) {
		/* IPv6: not v4-mapped, not link-local fe80::/10 */
		if (v4 || (g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80))
			return false;
	}
	if (r->range_bits >= 0) {
		const uint8_t *a = v4 ? g->raw + 12 : g->raw;
		if (!prefix_match(a, r->range, r->range_bits))
			return false;
	}
	return true;
}

crux_status_t cruxn_gid_choose(const struct cruxn_gid_cand *c, int n,
			       const struct cruxn_gid_rules *r, int *index)
{
	int want = r->roce_version == 1 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
	int best = -1, best_rank = 0;

	if (r->index >= 0) {
		for (int i = 0; i < n; i++) {
			if (c[i].index == r->index && !gid_zero(&c[i].gid)) {
				*index = r->index;
				return CRUX_OK;
			}
		}
		return CRUX_ERR_NOENT;
	}
	for (int i = 0; i < n; i++) {
		int rank;
		if (!gid_usable(&c[i].gid, r))
			continue;
		if (c[i].type == want)
			rank = 3;
		else if (c[i].type < 0)
			rank = 2; /* type unknown: Linux lists v2 after v1, the later wins */
		else
			rank = 1;
		/* first match of a known type; the last of unknown type */
		if (rank > best_rank || (rank == best_rank && rank == 2)) {
			best = c[i].index;
			best_rank = rank;
		}
	}
	if (best < 0)
		return CRUX_ERR_NOENT;
	*index = best;
	return CRUX_OK;
}
