/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ECMP path prober: learns which source ports take which path to a peer host.
 *
 * A probe is a packet from a chosen source port with a small TTL (the number
 * of hops to the router whose forwarding choice names the path, e.g. 2 for
 * the spine of a leaf-spine fabric). The router that drops it answers with
 * ICMP time-exceeded; with IP_RECVERR the kernel queues that error on the
 * probing socket, and SO_EE_OFFENDER names the router. No raw sockets.
 *   TCP (socket transport): a non-blocking connect (SYN) from the port.
 *   UDP (RoCEv2): a datagram to the peer's port 4791 from the port.
 * The fabric must hash the source port (and not the destination port) for
 * the mapping to hold for data connections to any port of the peer.
 *
 * A path is named by the address of that router ("hop"). The cache keeps a
 * result per peer with an expiry, verifies one port per path now and then,
 * and probes again when a path changed or stopped answering.
 */
#ifndef CRUX_PROBE_H
#define CRUX_PROBE_H

#include <stdbool.h>
#include <stdint.h>

#include "crux/addr.h"
#include "crux/decision.h"
#include "crux/env.h"
#include "crux/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CRUXD_PROBE_MAX_PATHS 16
#define CRUXD_ROCE_PORT	      4791

enum cruxd_probe_proto {
	CRUXD_PROBE_TCP = 0,
	CRUXD_PROBE_UDP = 1,
};

struct cruxd_probe_config {
	enum cruxd_probe_proto proto;
	uint16_t dst_port; /* TCP: any port of the peer; UDP: 4791 */
	uint16_t port_lo;  /* source ports tried: [port_lo, port_hi] */
	uint16_t port_hi;
	uint8_t hops;		 /* TTL of a probe */
	uint32_t ports_per_path; /* wanted ports per path, <= CRUX_ROUTE_MAX_PORTS */
	uint32_t expect_paths;	 /* 0 = unknown: stop after 'patience' probes find nothing new */
	uint32_t patience;
	uint32_t max_probes; /* per peer and run */
	uint32_t rate;	     /* probes per second (rate limit) */
	uint32_t inflight;   /* probes outstanding at once */
	uint64_t timeout_ns; /* wait for the ICMP answer of one probe */
	uint64_t seed;	     /* order in which source ports are tried */
};

struct cruxd_probe_path {
	struct crux_addr hop; /* router that answered: names the path */
	uint8_t nports;
	uint16_t ports[CRUX_ROUTE_MAX_PORTS];
};

struct cruxd_probe_result {
	struct crux_addr peer;
	uint32_t npaths; /* paths sorted by hop address */
	struct cruxd_probe_path paths[CRUXD_PROBE_MAX_PATHS];
	uint32_t sent;
	uint32_t answered;    /* time-exceeded from a router */
	uint32_t reached;     /* the probe reached the peer: 'hops' too large */
	uint32_t bind_failed; /* source port busy */
	uint64_t done_ns;     /* CLOCK_MONOTONIC at the end of the run */
};

/* Defaults: TCP to port 9 of the peer, ports 40000-59999, 2 hops, 8 ports a path. */
void cruxd_probe_config_default(struct cruxd_probe_config *c);

/*
 * Read CRUX_PROBE_PROTO (tcp|udp), CRUX_PROBE_PORTS ("LO-HI"),
 * CRUX_PROBE_HOPS, CRUX_PROBE_RATE, CRUX_PROBE_TIMEOUT, CRUX_PROBE_PORTS_PER_PATH,
 * CRUX_PROBE_MAX through fn (NULL = getenv) over the defaults in *c.
 */
crux_status_t cruxd_probe_config_env(crux_getenv_fn fn, void *arg, struct cruxd_probe_config *c,
				     char *err, size_t errlen);

/* Parse "LO-HI" (1..65535, LO <= HI). */
crux_status_t cruxd_probe_parse_range(const char *name, const char *text, uint16_t *lo,
				      uint16_t *hi, char *err, size_t errlen);

/*
 * Probe 'peer' until every path has its ports (or the limits are reached).
 * CRUX_ERR_NOENT when no probe was answered (no router within 'hops', or
 * ICMP filtered), CRUX_ERR_RANGE when probes reached the peer itself
 * ('hops' too large), CRUX_ERR_IO on a socket failure.
 */
crux_status_t cruxd_probe_peer(const struct cruxd_probe_config *cfg, const struct crux_addr *peer,
			       struct cruxd_probe_result *out);

/*
 * One probe from 'port': the router that answered in *hop.
 * CRUX_ERR_TIMEOUT without answer, CRUX_ERR_RANGE when it reached the peer,
 * CRUX_ERR_BUSY when the port could not be bound.
 */
crux_status_t cruxd_probe_port(const struct cruxd_probe_config *cfg, const struct crux_addr *peer,
			       uint16_t port, struct crux_addr *hop);

/* Index of the path named by 'hop' in r, or -1. */
int cruxd_probe_find_path(const struct cruxd_probe_result *r, const struct crux_addr *hop);

/* ---- Cache with expiry and re-probing, driven by a background thread ---- */

#define CRUXD_PROBE_MAX_PEERS 256

enum cruxd_probe_state {
	CRUXD_PROBE_NONE = 0, /* wanted, not probed yet */
	CRUXD_PROBE_OK = 1,
	CRUXD_PROBE_FAILED = 2, /* last run found nothing; retried with back-off */
};

struct cruxd_probe_entry {
	struct crux_addr peer;
	uint8_t state; /* enum cruxd_probe_state */
	uint8_t pad[3];
	uint32_t failures;
	uint64_t probed_ns;    /* end of the last successful run */
	uint64_t verified_ns;  /* last verification that every path still holds */
	uint64_t next_ns;      /* earliest next action */
	uint64_t last_want_ns; /* entries nobody wants for a while are dropped */
	crux_status_t last_status;
	struct cruxd_probe_result result;
};

struct cruxd_probe_cache;

struct cruxd_probe_cache_config {
	struct cruxd_probe_config probe;
	uint64_t expiry_ns; /* full re-probe after this */
	uint64_t verify_ns; /* check one port per path this often */
	uint64_t retry_ns;  /* first retry after a failed run (doubles, capped at expiry) */
	uint64_t forget_ns; /* drop peers not wanted for this long */
};

void cruxd_probe_cache_config_default(struct cruxd_probe_cache_config *c);

/* Also reads CRUX_PROBE_EXPIRY and CRUX_PROBE_VERIFY. */
crux_status_t cruxd_probe_cache_config_env(crux_getenv_fn fn, void *arg,
					   struct cruxd_probe_cache_config *c, char *err,
					   size_t errlen);

crux_status_t cruxd_probe_cache_create(const struct cruxd_probe_cache_config *cfg,
				       struct cruxd_probe_cache **out);
/* Stops the thread if running. */
void cruxd_probe_cache_destroy(struct cruxd_probe_cache *c);

/* Declare interest in a peer (and its expected path count, 0 = unknown). */
crux_status_t cruxd_probe_cache_want(struct cruxd_probe_cache *c, const struct crux_addr *peer,
				     uint32_t expect_paths, uint64_t now_ns);

/* Copy the entry for 'peer'. CRUX_ERR_NOENT when not known. */
crux_status_t cruxd_probe_cache_get(struct cruxd_probe_cache *c, const struct crux_addr *peer,
				    struct cruxd_probe_entry *out);

/* Copy up to 'max' entries; returns the count. */
uint32_t cruxd_probe_cache_list(struct cruxd_probe_cache *c, struct cruxd_probe_entry *out,
				uint32_t max);

/* Mark a peer's paths as failed: probed again at once. */
void cruxd_probe_cache_invalidate(struct cruxd_probe_cache *c, const struct crux_addr *peer);

/*
 * Do the work that is due at 'now_ns' (at most one probe run): first run,
 * expiry, verification, retry. Returns true when something changed.
 * Called by the thread, or directly by tests.
 */
bool cruxd_probe_cache_step(struct cruxd_probe_cache *c, uint64_t now_ns);

/* Counter bumped on every change of any entry (cheap change detection). */
uint64_t cruxd_probe_cache_version(struct cruxd_probe_cache *c);

/* Background thread calling cruxd_probe_cache_step. */
crux_status_t cruxd_probe_cache_start(struct cruxd_probe_cache *c);
void cruxd_probe_cache_stop(struct cruxd_probe_cache *c);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_PROBE_H */
