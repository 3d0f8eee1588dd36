/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host addresses as they appear in shared memory: fixed size, IPv4 or IPv6.
 * Peer hosts are identified by the IP address the plugin sees on its
 * connections; routes in the decision table are keyed by it.
 */
#ifndef CRUX_ADDR_H
#define CRUX_ADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUX_ADDR_STRLEN 48

/* A socket address of either family, without casts between sockaddr types. */
union crux_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
};

struct crux_addr {
	uint8_t family; /* 0 = none, 4 = IPv4, 6 = IPv6 */
	uint8_t pad[3];
	uint8_t bytes[16]; /* IPv4 in the first 4 bytes, rest zero */
};

/*
 * A socket address as text: "198.18.0.1:5000", "[fd00::1]:5000", or
 * "(family N)" for another family; always NUL-terminates; returns buf.
 */
const char *crux_sockaddr_format(const struct sockaddr *sa, char *buf, size_t len);

/* From a sockaddr_in / sockaddr_in6 (IPv4-mapped IPv6 becomes IPv4). */
crux_status_t crux_addr_from_sockaddr(const struct sockaddr *sa, struct crux_addr *out);
/* From text "198.18.0.1" or "fd00::1". */
crux_status_t crux_addr_parse(const char *text, struct crux_addr *out);
/* To text; always NUL-terminates; "-" for family 0. */
void crux_addr_format(const struct crux_addr *a, char *buf, size_t len);
bool crux_addr_equal(const struct crux_addr *a, const struct crux_addr *b);
uint64_t crux_addr_hash(const struct crux_addr *a);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_ADDR_H */
