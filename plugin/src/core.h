/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport-independent core of the plugin: requests and their pool,
 * the communicator base both directions embed, the message-boundary
 * decision (class / path), byte counters, and the table of operations a
 * transport (socket/, verbs/) implements. Modelled on NCCL's ncclNet_t and
 * rdma-core's provider ops: the core validates NCCL's arguments, takes the
 * communicator's lock and calls one operation; the transport moves bytes.
 *
 * Inside the plugin every function returns a crux_status_t; NCCL's
 * cruxn_result_t exists only at the entry points (core.c, net.c), and a
 * communicator's failure cause is one errno kept in 'error'.
 */
#ifndef CRUXN_CORE_H
#define CRUXN_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cruxn.h"

#define CRUXN_SEND_MAGIC 0x53545843u
#define CRUXN_RECV_MAGIC 0x52545843u
#define CRUXN_REQ_MAGIC	 0x51525843u
/* Room for a transport's part of a request (each transport asserts its part fits). */
#define CRUXN_REQ_TP_BYTES 128

struct cruxn_base;

struct cruxn_req {
	uint32_t magic;
	bool used;
	bool is_send;
	struct cruxn_base *comm;
	/* everything from here is cleared when the request is taken from the pool */
	int n;
	void *data[CRUXN_NET_MAX_RECVS];
	size_t cap[CRUXN_NET_MAX_RECVS];
	int tags[CRUXN_NET_MAX_RECVS];
	/* NCCL's memory handle of each buffer (what reg_mr gave it), NULL when it passed none */
	void *mh[CRUXN_NET_MAX_RECVS];
	size_t got[CRUXN_NET_MAX_RECVS];
	bool matched[CRUXN_NET_MAX_RECVS];
	int nmatched;
	int level;
	bool busy; /* counted in the plugin's busy time (busy.c) */
	_Alignas(16) unsigned char tp[CRUXN_REQ_TP_BYTES]; /* the transport's part */
};

/* Both directions of a connection of either transport start with this. */
struct cruxn_base {
	uint32_t magic; /* CRUXN_SEND_MAGIC / CRUXN_RECV_MAGIC */
	bool is_send;
	const struct cruxn_transport_ops *ops;
	pthread_mutex_t lock; /* proxy-side calls on one comm */
	int dev;
	int family;
	union crux_sockaddr peer;
	socklen_t peerlen;
	struct crux_addr peer_host;
	struct cruxn_peer_stats *stats;
	struct cruxn_comm_ctx *nctx; /* sender: NCCL's communicator context (v11/v12), or NULL */
	_Atomic int error;	     /* errno-like cause; 0 = healthy */
	int err_logged;		     /* crux_log_once flag */
	bool peer_closed;	     /* the peer closed its end (orderly or not) */

	struct cruxn_req reqs[CRUXN_NET_MAX_REQUESTS];
	/* posting order: sender's output, receiver's matching */
	struct cruxn_req *fifo[CRUXN_NET_MAX_REQUESTS];
	int fifo_head;
	int fifo_count;

	/* sender: the decision table's view and what the connection realises now */
	struct cruxn_tag_state tag;
	struct cruxn_class marked;    /* class the connection carries now */
	struct cruxn_route route_now; /* route the current lanes / sockets realise */
};

/*
 * What a transport implements: a complete net. start/stop/ndevs/properties
 * run under the context's lock at init and finalize; comm operations run
 * with the comm's lock held and none blocks. A transport reports a failure
 * seen outside a post op through cruxn_comm_fail(), which later NCCL calls
 * turn into a remote error.
 */
struct cruxn_transport_ops {
	const char *name;
	int kind; /* enum cruxn_transport_kind: what CRUX_TRANSPORT names it */
	/* An incomplete test() yields the CPU (the transport's helper threads move the bytes). */
	bool yield_in_test;
	/* Open the transport's devices; on failure 'err' says why (it is not used then). */
	crux_status_t (*start)(const struct cruxn_config *cfg, char *err, size_t errlen);
	void (*stop)(void);
	int (*ndevs)(void);
	crux_status_t (*properties)(int dev, cruxn_props_v11_t *p);
	/* v12: the device's rail and plane ids (may be NULL: none, CRUXN_NET_ID_UNDEF). */
	void (*ids)(int dev, int *rail, int *plane);
	crux_status_t (*listen)(int dev, void *handle, void **listen_comm);
	/* *out stays NULL while the connection is still being set up. */
	crux_status_t (*connect)(int dev, int traffic_class, void *handle, struct cruxn_base **out);
	crux_status_t (*accept)(void *listen_comm, struct cruxn_base **out);
	crux_status_t (*close_listen)(void *listen_comm);
	/* fd < 0: not a DMA-BUF registration. */
	crux_status_t (*reg_mr)(struct cruxn_base *c, void *data, size_t size, int type,
				uint64_t offset, int fd, void **mhandle);
	crux_status_t (*dereg_mr)(struct cruxn_base *c, void *mhandle);
	/* Sender, at a message boundary: the class and/or the route changed. */
	void (*boundary)(struct cruxn_base *c, bool class_changed, bool route_changed);
	/*
	 * The core filled r (buffers, sizes, tags, memory handles). The one
	 * failure rule: CRUX_OK, the request is posted; CRUX_ERR_BUSY, not now
	 * (the receiver has not posted, a lane is being built): the core frees
	 * r and NCCL gets a NULL request to retry; anything else fails the comm
	 * (the core calls cruxn_comm_fail) and NCCL gets an error.
	 */
	crux_status_t (*post_send)(struct cruxn_base *c, struct cruxn_req *r);
	/*
	 * May be NULL. Sender, first in isend, before a request is taken or the
	 * decision read: has the receiver posted (NCCL's IB isend looks at its
	 * FIFO and returns at once when not)? False: NCCL gets a NULL request
	 * to retry (an error if the comm failed meanwhile).
	 */
	bool (*peer_ready)(struct cruxn_base *c);
	/*
	 * May be NULL. Sender, after the boundary and before a request is taken:
	 * false, no send can be posted now (a lane is being built or moved;
	 * NCCL gets a NULL request to retry); true, post_send follows at once
	 * under the same lock (it reports any failure).
	 */
	bool (*send_ready)(struct cruxn_base *c);
	crux_status_t (*post_recv)(struct cruxn_base *c, struct cruxn_req *r);
	/* NULL op, or *out NULL: nothing to flush (host memory), NCCL gets a NULL request. */
	crux_status_t (*flush)(struct cruxn_base *c, int n, void **data, int *sizes,
			       void **mhandles, struct cruxn_req **out);
	/*
	 * Moves what can move; false only when nothing changed (no completion,
	 * no control message, no failure), so test() need not look at the
	 * request again.
	 */
	bool (*progress)(struct cruxn_base *c);
	/*
	 * test()'s question, one call: is r done, after one progress call when
	 * it was not (an empty poll, the usual answer, costs one indirect call).
	 */
	bool (*test)(struct cruxn_base *c, struct cruxn_req *r);
	/* After the peer closed: can r still finish? */
	bool (*req_orphaned)(const struct cruxn_req *r);
	/* A finished or abandoned request gives back what the transport held for it (may be NULL).
	 */
	void (*req_release)(struct cruxn_base *c, struct cruxn_req *r);
	/* Wake the transport's own threads after a failure (may be NULL). */
	void (*wake)(struct cruxn_base *c);
	void (*destroy)(struct cruxn_base *c);
};

/*
 * The transports built into this plugin, in CRUX_TRANSPORT=auto's order of
 * preference (NULL-terminated; transports.c).
 */
extern const struct cruxn_transport_ops *const cruxn_transports[];

/* A random non-zero nonce (the clock is crux_now_ns, crux/clock.h). */
uint64_t cruxn_new_nonce(void);

/* Initialise the base of a new comm (lock, request pool). */
void cruxn_base_init(struct cruxn_base *c, bool is_send, const struct cruxn_transport_ops *ops,
		     int dev, int family);
void cruxn_base_fini(struct cruxn_base *c);

/* Mark the comm failed with errno 'err' (first cause wins, logged once). */
void cruxn_comm_fail(struct cruxn_base *c, int err, const char *what);

/* A free request of c's pool, cleared (NULL: 32 in flight). */
struct cruxn_req *cruxn_req_get(struct cruxn_base *c);

void cruxn_fifo_push(struct cruxn_base *c, struct cruxn_req *r);
void cruxn_fifo_pop(struct cruxn_base *c);

/* Received bytes at 'level' (the sender's level, bounded). */
static inline void cruxn_count_rx(struct cruxn_base *c, int level, uint64_t bytes)
{
	atomic_fetch_add_explicit(&c->stats->rx[level >= 0 && level < CRUX_MAX_LEVELS ? level : 0],
				  bytes, memory_order_relaxed);
}

/* Connect states kept in NCCL's handle between connect() calls. */
bool cruxn_connecting_register(void *st);
/* True (and unregistered when 'remove') when st is a live connect state. */
bool cruxn_connecting_find(const void *st, bool remove);

bool cruxn_route_equal(const struct cruxn_route *a, const struct cruxn_route *b);
/* The route's i-th source port, 0 without a route (ephemeral / hashed). */
uint16_t cruxn_route_port(const struct cruxn_route *r, int i);

#endif /* CRUXN_CORE_H */
