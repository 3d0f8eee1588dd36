/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket transport: wire format and connection objects.
 *
 * A connection is one control socket plus N data sockets (a "set"). The
 * control socket carries a 32-byte header per message (and the payload of
 * small messages); large payloads are striped over the data sockets by
 * helper threads. Both sides derive the stripes from (size, sequence), so
 * the data streams stay aligned without per-chunk headers. A path change
 * opens a new set to the receiver's per-connection data listener and moves
 * at a message boundary: every header names the set (epoch) it uses.
 */
#ifndef CRUXN_SOCK_TRANSPORT_H
#define CRUXN_SOCK_TRANSPORT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "boot.h"
#include "core.h"
#include "cruxn.h"
#include "sock_req.h"

#define CRUXN_HANDLE_MAGIC 0x4c505843u /* "CXPL" */
#define CRUXN_WIRE_MAGIC   0x57585243u /* "CRXW" */
#define CRUXN_WIRE_VERSION 1
#define CRUXN_QDEPTH	   512 /* tasks per data socket: 32 requests x 8 slots, plus marks */

enum cruxn_sock_kind { CRUXN_SOCK_CTRL = 1, CRUXN_SOCK_DATA = 2 };

/* First bytes on every socket a sender opens. */
struct cruxn_hello {
	uint32_t magic;
	uint16_t version;
	uint8_t kind;  /* enum cruxn_sock_kind */
	uint8_t index; /* data socket index */
	uint64_t listen_nonce;
	uint64_t conn_nonce;
	uint32_t nsocks;
	uint32_t epoch;
	int32_t tos;
	int32_t prio;
	uint64_t chunk_bytes;
};

_Static_assert(sizeof(struct cruxn_hello) <= CRUXN_BOOT_HELLO_MAX, "a hello must fit a greeting");

enum cruxn_task_kind { CRUXN_TASK_IO = 0, CRUXN_TASK_MARK = 1 };

struct cruxn_req;
struct cruxn_set;

struct cruxn_task {
	int kind;
	int fd;
	char *buf;
	size_t len;
	size_t off;
	struct cruxn_req *req;
	struct cruxn_set *set;
	struct cruxn_class cls;
};

/* Single producer (the proxy thread) / single consumer (one helper thread). */
struct cruxn_queue {
	struct cruxn_task ring[CRUXN_QDEPTH];
	_Atomic uint32_t head;
	_Atomic uint32_t tail;
};

struct cruxn_set {
	uint32_t epoch;
	int nsocks;
	int fds[CRUXN_MAX_SOCKS];
	uint16_t sports[CRUXN_MAX_SOCKS]; /* source ports asked for (0 = ephemeral) */
	/* connection progress of a set being opened (sender) or accepted (receiver) */
	bool connected[CRUXN_MAX_SOCKS];
	size_t hello_off[CRUXN_MAX_SOCKS];
	int ready_count;
	_Atomic int tasks; /* queued IO tasks not yet finished */
	struct cruxn_set *next;
};

struct cruxn_comm;

struct cruxn_helper {
	pthread_t th;
	struct cruxn_comm *comm;
	int id;
	bool started;
};

struct cruxn_comm {
	struct cruxn_base b; /* first: the core's view */
	int ctrl;
	int nsocks;
	int nthreads;
	size_t chunk_bytes;
	uint64_t conn_nonce;

	struct cruxn_set *cur;	   /* set new messages use */
	struct cruxn_set *pending; /* sender: set being connected for a new path */
	struct cruxn_set *retired; /* old sets still draining */
	uint32_t next_epoch;
	struct cruxn_queue *q; /* one per data socket index */
	struct cruxn_helper helpers[CRUXN_MAX_SOCKS];
	pthread_mutex_t wake_lock;
	pthread_cond_t wake;
	_Atomic int sleepers;
	_Atomic bool stop;

	uint32_t striped_seq;
	uint32_t msg_seq;

	/* sender */
	uint16_t data_port;	 /* receiver's data listener, 0 until known */
	struct cruxn_msg in_msg; /* ACCEPT reply being read */
	size_t in_off;
	uint64_t ctrl_check_ns; /* next look for the receiver's end of stream (coarse clock) */
	bool route_dirty;

	/* receiver */
	int data_listener;
	uint64_t data_nonce;
	struct cruxn_msg out_msg; /* ACCEPT reply */
	size_t out_off;
	char stage[4096]; /* control bytes read ahead: a header and a small payload in one recv */
	size_t stage_off;
	size_t stage_len;
	struct cruxn_msg rx_hdr;
	size_t rx_hdr_off;
	bool rx_have_hdr;
	struct cruxn_req *rx_req; /* inline payload in progress */
	int rx_slot;
	size_t rx_left;
	struct cruxn_set *incoming;	 /* sets being accepted, by epoch */
	struct cruxn_boot_greeter greet; /* data sockets that have not greeted yet */
};

static inline struct cruxn_comm *cruxn_sk(struct cruxn_base *b)
{
	return (struct cruxn_comm *)b;
}

_Static_assert(sizeof(struct cruxn_sock_req) <= CRUXN_REQ_TP_BYTES,
	       "the socket transport's part must fit a request");

static inline struct cruxn_sock_req *cruxn_skr(struct cruxn_req *r)
{
	return (struct cruxn_sock_req *)(void *)r->tp;
}

static inline const struct cruxn_sock_req *cruxn_skr_c(const struct cruxn_req *r)
{
	return (const struct cruxn_sock_req *)(const void *)r->tp;
}

extern const struct cruxn_transport_ops cruxn_socket_ops;

/* ---- shared by the socket transport's files (sock_comm.c) ---------------- */

void cruxn_sk_queue_push(struct cruxn_comm *c, int idx, const struct cruxn_task *t);
void cruxn_sk_wake(struct cruxn_base *b);
void cruxn_sk_wake_helpers(struct cruxn_comm *c);
struct cruxn_set *cruxn_sk_set_new(uint32_t epoch, int nsocks);
void cruxn_sk_set_close(struct cruxn_set *s);
void cruxn_sk_reap_retired(struct cruxn_comm *c);
void cruxn_sk_retire_current(struct cruxn_comm *c, struct cruxn_set *next);
crux_status_t cruxn_sk_comm_create(bool is_send, int dev, int nsocks, int family,
				   struct cruxn_comm **out);
crux_status_t cruxn_sk_comm_start_helpers(struct cruxn_comm *c);
void cruxn_sk_comm_destroy(struct cruxn_comm *c);
void cruxn_sk_destroy(struct cruxn_base *b);

/* sock_conn.c */
crux_status_t cruxn_sk_open_to_peer(int dev, const struct sockaddr *peer, socklen_t plen,
				    uint16_t dport, uint16_t sport, int *out);
bool cruxn_sk_hello_valid(const struct cruxn_hello *hl, uint64_t nonce);
crux_status_t cruxn_sk_start(const struct cruxn_config *cfg, char *err, size_t errlen);
int cruxn_sk_ndevs(void);
crux_status_t cruxn_sk_properties(int dev, cruxn_props_v11_t *p);
crux_status_t cruxn_sk_listen(int dev, void *handle, void **listen_comm);
crux_status_t cruxn_sk_connect(int dev, int traffic_class, void *handle, struct cruxn_base **out);
crux_status_t cruxn_sk_accept(void *listen_comm, struct cruxn_base **out);
crux_status_t cruxn_sk_close_listen(void *listen_comm);
crux_status_t cruxn_sk_reg_mr(struct cruxn_base *c, void *data, size_t size, int type,
			      uint64_t offset, int fd, void **mhandle);
crux_status_t cruxn_sk_dereg_mr(struct cruxn_base *c, void *mhandle);

#endif /* CRUXN_SOCK_TRANSPORT_H */
