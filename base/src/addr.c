/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "crux/addr.h"
#include "crux/hash.h"

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

crux_status_t crux_addr_from_sockaddr(const struct sockaddr *sa, struct crux_addr *out)
{
	struct crux_addr a;
	if (!sa || !out)
		return CRUX_ERR_INVAL;
	memset(&a, 0, sizeof(a));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		a.family = 4;
		memcpy(a.bytes, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		const uint8_t *b = in6->sin6_addr.s6_addr;
		if (memcmp(b, v4mapped_prefix, sizeof(v4mapped_prefix)) == 0) {
			a.family = 4;
			memcpy(a.bytes, b + 12, 4);
		} else {
			a.family = 6;
			memcpy(a.bytes, b, 16);
		}
	} else {
		return CRUX_ERR_INVAL;
	}
	*out = a;
	return CRUX_OK;
}

crux_status_t crux_addr_parse(const char *text, struct crux_addr *out)
{
	struct crux_addr a;
	if (!text || !out)
		return CRUX_ERR_INVAL;
	memset(&a, 0, sizeof(a));
	if (inet_pton(AF_INET, text, a.bytes) == 1) {
		a.family = 4;
	} else if (inet_pton(AF_INET6, text, a.bytes) == 1) {
		a.family = 6;
		if (memcmp(a.bytes, v4mapped_prefix, sizeof(v4mapped_prefix)) == 0) {
			memmove(a.bytes, a.bytes + 12, 4);
			memset(a.bytes + 4, 0, 12);
			a.family = 4;
		}
	} else {
		return CRUX_ERR_INVAL;
	}
	*out = a;
	return CRUX_OK;
}

void crux_addr_format(const struct crux_addr *a, char *buf, size_t len)
{
	char tmp[INET6_ADDRSTRLEN];
	if (!buf || len == 0)
		return;
	if (a && a->family == 4 && inet_ntop(AF_INET, a->bytes, tmp, sizeof(tmp)))
		snprintf(buf, len, "%s", tmp);
	else if (a && a->family == 6 && inet_ntop(AF_INET6, a->bytes, tmp, sizeof(tmp)))
		snprintf(buf, len, "%s", tmp);
	else if (a && a->family != 0)
		snprintf(buf, len, "?family%u", (unsigned)a->family);
	else
		snprintf(buf, len, "-");
}

static size_t addr_len(uint8_t family)
{
	return family == 4 ? 4 : family == 6 ? 16 : 0;
}

bool crux_addr_equal(const struct crux_addr *a, const struct crux_addr *b)
{
	if (a->family != b->family)
		return false;
	return memcmp(a->bytes, b->bytes, addr_len(a->family)) == 0;
}

uint64_t crux_addr_hash(const struct crux_addr *a)
{
	/* Only the significant bytes: equal addresses hash equally whatever the padding. */
	uint64_t lo = 0, hi = 0;
	uint8_t b[16] = {0};
	memcpy(b, a->bytes, addr_len(a->family));
	memcpy(&lo, b, 8);
	memcpy(&hi, b + 8, 8);
	return crux_mix64(lo ^ crux_mix64(hi ^ a->family));
}

const char *crux_sockaddr_format(const struct sockaddr *sa, char *buf, size_t len)
{
	const union crux_sockaddr *u = (const void *)sa;
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &u->sin.sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(u->sin.sin_port));
	} else if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &u->sin6.sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(u->sin6.sin6_port));
	} else {
		snprintf(buf, len, "(family %d)", sa->sa_family);
	}
	return buf;
}
