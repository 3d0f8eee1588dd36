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
#ifndef CRUXN_TRANSPORT_H
#define CRUXN_TRANSPORT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cruxn.h"

#define CRUXN_HANDLE_MAGIC 0x4c505843u /* "CXPL" */
#define CRUXN_WIRE_MAGIC   0x57585243u /* "CRXW" */
#define CRUXN_WIRE_VERSION 1
#define CRUXN_QDEPTH	   512 /* tasks per data socket: 32 requests x 8 slots, plus marks */

enum cruxn_sock_kind { CRUXN_SOCK_CTRL = 1, CRUXN_SOCK_DATA = 2 };

/* What the listener publishes through NCCL's bootstrap (<= 128 bytes). */
struct cruxn_handle {
	uint32_t magic;
	uint16_t version;
	uint16_t family; /* AF_INET / AF_INET6 */
	uint8_t addr[16];
	uint16_t port; /* network order */
	uint16_t pad;
	uint32_t scope_id;
	uint64_t listen_nonce;
	uint64_t connect_state; /* sender's in-progress state; 0 from the listener */
};

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

enum cruxn_msg_type {
	CRUXN_MSG_INLINE = 1,  /* payload follows on the control socket */
	CRUXN_MSG_STRIPED = 2, /* payload on the data sockets of set 'epoch' */
	CRUXN_MSG_ACCEPT = 3,  /* receiver -> sender: size = data listener port */
};

struct cruxn_msg {
	uint32_t magic;
	uint16_t type;
	uint8_t level;
	uint8_t tos;
	int32_t prio;
	int32_t tag;
	uint64_t size;
	uint32_t epoch;
	uint32_t seq;
};

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

#define CRUXN_REQ_MAGIC 0x51525843u

struct cruxn_req {
	uint32_t magic;
	bool used;
	bool is_send;
	struct cruxn_comm *comm;
	int n;
	void *data[CRUXN_NET_MAX_RECVS];
	size_t cap[CRUXN_NET_MAX_RECVS];
	int tags[CRUXN_NET_MAX_RECVS];
	size_t got[CRUXN_NET_MAX_RECVS];
	bool matched[CRUXN_NET_MAX_RECVS];
	int nmatched;
	_Atomic int pending; /* data-socket tasks outstanding */
	/* send: header + inline payload progress on the control socket */
	struct cruxn_msg hdr;
	size_t hdr_off;
	size_t inline_off;
	size_t inline_len;
	bool ctrl_done;
	int level;
};

struct cruxn_comm {
	uint32_t magic;
	bool is_send;
	pthread_mutex_t lock; /* proxy-side calls on one comm */
	int family;
	int dev;
	int ctrl;
	int nsocks;
	int nthreads;
	size_t chunk_bytes;
	uint64_t conn_nonce;
	union {
		struct sockaddr sa;
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} peer;
	socklen_t peerlen;
	struct crux_addr peer_host;
	struct cruxn_peer_stats *stats;

	struct cruxn_set *cur;     /* set new messages use */
	struct cruxn_set *pending; /* sender: set being connected for a new path */
	struct cruxn_set *retired; /* old sets still draining */
	uint32_t next_epoch;
	struct cruxn_queue *q; /* one per data socket index */
	struct cruxn_helper helpers[CRUXN_MAX_SOCKS];
	pthread_mutex_t wake_lock;
	pthread_cond_t wake;
	_Atomic int sleepers;
	_Atomic bool stop;
	_Atomic int error; /* errno-like; 0 = healthy */
	int err_logged; /* crux_log_once flag */
	bool ctrl_eof; /* the peer closed its control socket (orderly or not) */

	struct cruxn_req reqs[CRUXN_NET_MAX_REQUESTS];
	/* posting order: sender's control output, receiver's matching */
	struct cruxn_req *fifo[CRUXN_NET_MAX_REQUESTS];
	int fifo_head;
	int fifo_count;
	uint32_t striped_seq;
	uint32_t msg_seq;

	/* sender */
	struct cruxn_tag_state tag;
	struct cruxn_class marked; /* class the sockets carry now */
	uint16_t data_port;        /* receiver's data listener, 0 until known */
	struct cruxn_msg in_msg;   /* ACCEPT reply being read */
	size_t in_off;
	uint64_t ctrl_check_ns; /* next look for the receiver's end of stream (coarse clock) */
	struct cruxn_route route_now; /* route the current set realises */
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
	struct cruxn_set *incoming; /* sets being accepted, by epoch */
	int pend_fds[CRUXN_MAX_SOCKS * 2];
	struct cruxn_hello pend_hello[CRUXN_MAX_SOCKS * 2];
	size_t pend_off[CRUXN_MAX_SOCKS * 2];
	int npend;
};

#endif /* CRUXN_TRANSPORT_H */
