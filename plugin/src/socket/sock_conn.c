/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket transport's connection set-up: listen, non-blocking connect
 * (control socket + data sockets, each greeting with a hello), accept, and
 * memory registration (host memory needs none).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "crux/log.h"
#include "cruxn.h"
#include "sock_transport.h"

#define CRUXN_LISTEN_MAGIC  0x4e545843u
#define CRUXN_CONNECT_MAGIC 0x43545843u
#define CRUXN_MR_MAGIC	    0x4d525843u

struct cruxn_listen {
	uint32_t magic;
	int fd;
	int dev;
	uint64_t nonce;
	struct cruxn_boot_greeter greet; /* connections that have not greeted yet */
	bool bound;
	struct cruxn_hello first; /* hello that bound this listener to one connection */
	int ctrl;
	int data[CRUXN_MAX_SOCKS];
	int ndata;
};

struct cruxn_connecting {
	uint32_t magic;
	int dev;
	int nsocks;
	int fds[1 + CRUXN_MAX_SOCKS];
	bool connected[1 + CRUXN_MAX_SOCKS];
	size_t off[1 + CRUXN_MAX_SOCKS];
	struct cruxn_hello hello[1 + CRUXN_MAX_SOCKS];
	union crux_sockaddr peer;
	socklen_t peerlen;
	uint64_t listen_nonce;
	uint64_t conn_nonce;
	uint64_t deadline_ns;
	struct cruxn_tag_state tag;
};

struct cruxn_mr {
	uint32_t magic;
	int type;
};

/* ---- the transport's devices: the bootstrap interfaces themselves -------- */

crux_status_t cruxn_sk_start(const struct cruxn_config *cfg, char *err, size_t errlen)
{
	(void)cfg;
	(void)err;
	(void)errlen;
	return CRUX_OK; /* init scanned the interfaces already */
}

int cruxn_sk_ndevs(void)
{
	return cruxn_boot_nifs();
}

crux_status_t cruxn_sk_properties(int dev, cruxn_props_v11_t *p)
{
	const struct cruxn_dev *d = cruxn_boot_if(dev);

	if (!d)
		return CRUX_ERR_INVAL;
	memset(p, 0, sizeof(*p));
	p->name = (char *)d->name;
	p->pciPath = d->pci_path;
	p->guid = (uint64_t)dev;
	p->ptrSupport = CRUXN_PTR_HOST;
	p->regIsGlobal = 0;
	p->forceFlush = 0;
	p->speed = d->speed_mbps;
	p->port = 0;
	p->latency = 0;
	p->maxComms = 65536;
	p->maxRecvs = CRUXN_NET_MAX_RECVS;
	p->netDeviceType = CRUXN_DEV_HOST;
	p->netDeviceVersion = 0;
	p->vProps.ndevs = 1;
	p->vProps.devs[0] = dev;
	p->maxP2pBytes = (size_t)CRUXN_NET_MAX_BYTES;
	p->maxCollBytes = (size_t)CRUXN_NET_MAX_BYTES;
	p->maxMultiRequestSize = 1;
	return CRUX_OK;
}

/* ---- listen / connect / accept ------------------------------------------ */

crux_status_t cruxn_sk_listen(int dev, void *handle, void **listen_comm)
{
	const struct cruxn_dev *d = cruxn_boot_if(dev);
	struct cruxn_listen *l = NULL;

	if (!handle || !listen_comm || !d)
		return CRUX_ERR_INVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return CRUX_ERR_IO;
	l->nonce = cruxn_new_nonce();
	if (cruxn_boot_listen(d, CRUXN_HANDLE_MAGIC, CRUXN_WIRE_VERSION, l->nonce, handle,
			      &l->fd) != CRUX_OK) {
		free(l);
		return CRUX_ERR_IO;
	}
	l->magic = CRUXN_LISTEN_MAGIC;
	l->dev = dev;
	l->ctrl = -1;
	for (int i = 0; i < CRUXN_MAX_SOCKS; i++)
		l->data[i] = -1;
	cruxn_boot_greeter_init(&l->greet, sizeof(struct cruxn_hello));
	*listen_comm = l;
	return CRUX_OK;
}

static void connecting_free(struct cruxn_connecting *st)
{
	for (int i = 0; i <= st->nsocks; i++)
		if (st->fds[i] >= 0)
			close(st->fds[i]);
	st->magic = 0;
	free(st);
}

/*
 * Open one sender socket to 'peer' (port 'dport'), bound to the device
 * address and, with a route, to a source port that takes the chosen path.
 */
crux_status_t cruxn_sk_open_to_peer(int dev, const struct sockaddr *peer, socklen_t plen,
				    uint16_t dport, uint16_t sport, int *out)
{
	const struct cruxn_dev *d = cruxn_boot_if(dev);

	if (cruxn_boot_connect(d, peer, plen, dport, sport, out) == CRUX_OK)
		return CRUX_OK;
	if (sport == 0)
		return CRUX_ERR_IO;
	/* The path's port is taken for this peer: keep going on an ephemeral one. */
	crux_log_once(&cruxn_ctx.once_port_fail, CRUX_LOG_WARN,
		      "cannot use source port %u for a data socket (%s); using an "
		      "ephemeral port (ECMP) for it",
		      sport, strerror(errno));
	return cruxn_boot_connect(d, peer, plen, dport, 0, out);
}

static crux_status_t connect_start(int dev, int traffic_class, const struct cruxn_boot_handle *h,
				   const union crux_sockaddr *peer, socklen_t plen,
				   struct cruxn_connecting **out)
{
	struct cruxn_connecting *st = calloc(1, sizeof(*st));
	struct crux_addr peer_host;
	const struct cruxn_config *cfg = &cruxn_ctx.cfg;
	uint16_t dport = ntohs(h->port);

	if (!st)
		return CRUX_ERR_IO;
	st->magic = CRUXN_CONNECT_MAGIC;
	st->dev = dev;
	st->nsocks = cfg->nthreads * cfg->nsocks_per_thread;
	for (int i = 0; i <= CRUXN_MAX_SOCKS; i++)
		st->fds[i] = -1;
	st->peer = *peer;
	st->peerlen = plen;
	if (cruxn_ctx.devs[dev].addr.sa.sa_family != h->family) {
		crux_err("connect: device %s is %s but the peer's handle is %s; set "
			 "CRUX_SOCKET_FAMILY or CRUX_SOCKET_IFNAME alike on every host",
			 cruxn_ctx.devs[dev].name,
			 cruxn_ctx.devs[dev].addr.sa.sa_family == AF_INET ? "IPv4" : "IPv6",
			 h->family == AF_INET ? "IPv4" : "IPv6");
		free(st);
		return CRUX_ERR_INVAL;
	}
	st->listen_nonce = h->nonce;
	st->conn_nonce = cruxn_new_nonce();
	st->deadline_ns = crux_now_ns() + cfg->timeout_ms * 1000000ull;
	memset(&peer_host, 0, sizeof(peer_host));
	(void)crux_addr_from_sockaddr(&st->peer.sa, &peer_host);
	cruxn_tag_init(&st->tag, &peer_host, traffic_class);
	(void)cruxn_tag_refresh(&st->tag);

	for (int i = 0; i <= st->nsocks; i++) {
		uint16_t sport = i == 0 ? 0 : cruxn_route_port(&st->tag.route, i - 1);
		if (cruxn_sk_open_to_peer(dev, &st->peer.sa, st->peerlen, dport, sport,
					  &st->fds[i]) != CRUX_OK) {
			crux_err("connect: cannot open a socket to the peer: %m");
			connecting_free(st);
			return CRUX_ERR_IO;
		}
		(void)cruxn_sock_set_class(st->fds[i], h->family, &st->tag.cls);
		struct cruxn_hello *hl = &st->hello[i];
		hl->magic = CRUXN_WIRE_MAGIC;
		hl->version = CRUXN_WIRE_VERSION;
		hl->kind = i == 0 ? CRUXN_SOCK_CTRL : CRUXN_SOCK_DATA;
		hl->index = (uint8_t)(i == 0 ? 0 : i - 1);
		hl->listen_nonce = st->listen_nonce;
		hl->conn_nonce = st->conn_nonce;
		hl->nsocks = (uint32_t)st->nsocks;
		hl->epoch = 0;
		hl->tos = st->tag.cls.tos;
		hl->prio = st->tag.cls.prio;
		hl->chunk_bytes = cfg->chunk_bytes;
	}
	*out = st;
	return CRUX_OK;
}

static crux_status_t connect_finish(struct cruxn_connecting *st, struct cruxn_base **send_comm)
{
	struct cruxn_comm *c = NULL;
	struct cruxn_set *s = NULL;

	if (cruxn_sk_comm_create(true, st->dev, st->nsocks, st->peer.sa.sa_family, &c) != CRUX_OK)
		return CRUX_ERR_IO;
	s = cruxn_sk_set_new(0, st->nsocks);
	if (!s) {
		cruxn_sk_comm_destroy(c);
		return CRUX_ERR_IO;
	}
	c->ctrl = st->fds[0];
	st->fds[0] = -1;
	for (int i = 0; i < st->nsocks; i++) {
		s->fds[i] = st->fds[i + 1];
		s->sports[i] = cruxn_route_port(&st->tag.route, i);
		st->fds[i + 1] = -1;
	}
	c->cur = s;
	c->next_epoch = 1;
	c->conn_nonce = st->conn_nonce;
	c->chunk_bytes = cruxn_ctx.cfg.chunk_bytes;
	memcpy(&c->b.peer, &st->peer, st->peerlen);
	c->b.peerlen = st->peerlen;
	c->b.tag = st->tag;
	c->b.peer_host = st->tag.peer;
	c->b.marked = st->tag.cls;
	c->b.route_now = st->tag.route;
	c->b.stats = cruxn_peer_stats_get(&c->b.peer_host);
	if (cruxn_sk_comm_start_helpers(c) != CRUX_OK) {
		cruxn_sk_comm_destroy(c);
		return CRUX_ERR_IO;
	}
	*send_comm = &c->b;
	return CRUX_OK;
}

crux_status_t cruxn_sk_connect(int dev, int traffic_class, void *handle,
			       struct cruxn_base **send_comm)
{
	struct cruxn_boot_handle *h = handle;
	struct cruxn_connecting *st;
	union crux_sockaddr peer;
	socklen_t plen;
	crux_status_t rc;
	bool all = true;

	if (!handle || !send_comm || !cruxn_boot_if(dev))
		return CRUX_ERR_INVAL;
	*send_comm = NULL;
	if (cruxn_boot_handle_peer(h, CRUXN_HANDLE_MAGIC, CRUXN_WIRE_VERSION, &peer, &plen) !=
	    CRUX_OK) {
		crux_err("connect: the handle is not a Crux listener's handle (bad magic, version, "
			 "family or port): is every rank loading the same plugin?");
		return CRUX_ERR_INVAL;
	}
	st = (struct cruxn_connecting *)(uintptr_t)h->connect_state;
	if (!st) {
		rc = connect_start(dev, traffic_class, h, &peer, plen, &st);
		if (rc != CRUX_OK)
			return rc;
		if (!cruxn_connecting_register(st)) {
			connecting_free(st);
			crux_err("connect: too many connections being set up at once");
			return CRUX_ERR_IO;
		}
		h->connect_state = (uint64_t)(uintptr_t)st;
	} else if (!cruxn_connecting_find(st, false) || st->magic != CRUXN_CONNECT_MAGIC) {
		crux_err("connect: the handle carries an unknown connection state (corrupted "
			 "handle?)");
		return CRUX_ERR_INVAL;
	}

	for (int i = 0; i <= st->nsocks; i++) {
		int e = 0;
		if (!st->connected[i])
			e = cruxn_boot_connect_poll(st->fds[i], &st->connected[i]);
		if (!e && st->connected[i])
			e = cruxn_boot_write_some(st->fds[i], &st->hello[i], sizeof(st->hello[i]),
						  &st->off[i]);
		if (e) {
			char peer[80];
			crux_err("connect to %s failed: %s",
				 crux_sockaddr_format(&st->peer.sa, peer, sizeof(peer)),
				 strerror(e));
			rc = CRUX_ERR_REMOTE;
			goto fail;
		}
		if (!st->connected[i] || st->off[i] < sizeof(st->hello[i]))
			all = false;
	}
	if (!all) {
		if (crux_now_ns() > st->deadline_ns) {
			crux_err("connect: no connection within CRUX_TIMEOUT (%llu ms)",
				 (unsigned long long)cruxn_ctx.cfg.timeout_ms);
			rc = CRUX_ERR_REMOTE;
			goto fail;
		}
		return CRUX_OK; /* NULL comm: NCCL calls again */
	}
	rc = connect_finish(st, send_comm);
	if (rc != CRUX_OK)
		goto fail;
	cruxn_connecting_find(st, true);
	connecting_free(st);
	h->connect_state = 0;
	return CRUX_OK;
fail:
	cruxn_connecting_find(st, true);
	connecting_free(st);
	h->connect_state = 0;
	return rc;
}

static void listen_reset(struct cruxn_listen *l)
{
	l->bound = false;
	l->ctrl = -1;
	for (int i = 0; i < CRUXN_MAX_SOCKS; i++)
		l->data[i] = -1;
	l->ndata = 0;
}

bool cruxn_sk_hello_valid(const struct cruxn_hello *hl, uint64_t nonce)
{
	return hl->magic == CRUXN_WIRE_MAGIC && hl->version == CRUXN_WIRE_VERSION &&
	       hl->listen_nonce == nonce && hl->nsocks >= 1 && hl->nsocks <= CRUXN_MAX_SOCKS &&
	       hl->index < hl->nsocks && hl->chunk_bytes >= 4096 &&
	       (hl->kind == CRUXN_SOCK_CTRL || hl->kind == CRUXN_SOCK_DATA);
}

static crux_status_t accept_finish(struct cruxn_listen *l, struct cruxn_base **recv_comm)
{
	struct cruxn_comm *c = NULL;
	struct cruxn_set *s = NULL;
	const struct cruxn_dev *d = cruxn_boot_if(l->dev);
	union crux_sockaddr a;
	socklen_t alen = sizeof(a);
	struct cruxn_class cls = {0, 0, 0, 0};
	int nsocks = (int)l->first.nsocks;

	if (cruxn_sk_comm_create(false, l->dev, nsocks, d->addr.sa.sa_family, &c) != CRUX_OK)
		return CRUX_ERR_IO;
	s = cruxn_sk_set_new(0, nsocks);
	if (!s)
		goto fail;
	c->ctrl = l->ctrl;
	for (int i = 0; i < nsocks; i++)
		s->fds[i] = l->data[i];
	c->cur = s;
	listen_reset(l);
	c->conn_nonce = l->first.conn_nonce;
	c->chunk_bytes = l->first.chunk_bytes;
	c->b.peerlen = sizeof(c->b.peer);
	if (getpeername(c->ctrl, &c->b.peer.sa, &c->b.peerlen) != 0)
		goto fail;
	(void)crux_addr_from_sockaddr(&c->b.peer.sa, &c->b.peer_host);
	c->b.stats = cruxn_peer_stats_get(&c->b.peer_host);
	/* The receive side's own packets (ACKs, replies) take the sender's class. */
	cls.tos = l->first.tos;
	cls.prio = l->first.prio;
	cls.level = 0;
	c->b.marked = cls;
	(void)cruxn_sock_tune(c->ctrl, &cruxn_ctx.cfg);
	(void)cruxn_sock_set_class(c->ctrl, c->b.family, &cls);
	for (int i = 0; i < nsocks; i++) {
		(void)cruxn_sock_tune(s->fds[i], &cruxn_ctx.cfg);
		(void)cruxn_sock_set_class(s->fds[i], c->b.family, &cls);
	}
	/* A per-connection listener for the data sockets of later paths. */
	if (cruxn_sock_open_bound(&d->addr.sa, d->addrlen, 0, false, &c->data_listener) !=
		CRUX_OK ||
	    listen(c->data_listener, 64) != 0 || getsockname(c->data_listener, &a.sa, &alen) != 0)
		goto fail;
	c->out_msg.magic = CRUXN_WIRE_MAGIC;
	c->out_msg.type = CRUXN_MSG_ACCEPT;
	c->out_msg.size = ntohs(a.sa.sa_family == AF_INET ? a.sin.sin_port : a.sin6.sin6_port);
	c->out_off = 0;
	(void)cruxn_boot_write_some(c->ctrl, &c->out_msg, sizeof(c->out_msg), &c->out_off);
	if (cruxn_sk_comm_start_helpers(c) != CRUX_OK)
		goto fail;
	*recv_comm = &c->b;
	return CRUX_OK;
fail:
	crux_err("accept: cannot set up the receive connection: %m");
	if (c && c->ctrl >= 0 && c->cur == NULL) {
		close(c->ctrl);
		c->ctrl = -1;
	}
	cruxn_sk_comm_destroy(c);
	return CRUX_ERR_IO;
}

/* A complete greeting on the listener: the connection's control or data socket, or a stranger. */
static enum cruxn_boot_verdict judge_hello(void *arg, int fd, const void *hello)
{
	struct cruxn_listen *l = arg;
	const struct cruxn_hello *hl = hello;

	if (!cruxn_sk_hello_valid(hl, l->nonce) ||
	    (l->bound && hl->conn_nonce != l->first.conn_nonce) ||
	    (hl->kind == CRUXN_SOCK_CTRL && l->ctrl >= 0) ||
	    (hl->kind == CRUXN_SOCK_DATA &&
	     (l->data[hl->index] >= 0 || (l->bound && hl->nsocks != l->first.nsocks)))) {
		crux_warn("accept: dropped a connection with an unexpected greeting (not a "
			  "Crux peer of this listener)");
		return CRUXN_BOOT_REJECT;
	}
	if (!l->bound) {
		l->bound = true;
		l->first = *hl;
	}
	if (hl->kind == CRUXN_SOCK_CTRL) {
		l->ctrl = fd;
		l->first.tos = hl->tos;
		l->first.prio = hl->prio;
	} else {
		l->data[hl->index] = fd;
		l->ndata++;
	}
	return CRUXN_BOOT_TAKE;
}

crux_status_t cruxn_sk_accept(void *listen_comm, struct cruxn_base **recv_comm)
{
	struct cruxn_listen *l = listen_comm;
	int e;

	if (!l || !recv_comm || l->magic != CRUXN_LISTEN_MAGIC)
		return CRUX_ERR_INVAL;
	*recv_comm = NULL;
	e = cruxn_boot_greet(&l->greet, l->fd, judge_hello, l);
	if (e) {
		crux_err("accept failed: %s", strerror(e));
		return CRUX_ERR_IO;
	}
	if (l->bound && l->ctrl >= 0 && l->ndata == (int)l->first.nsocks)
		return accept_finish(l, recv_comm);
	return CRUX_OK;
}

crux_status_t cruxn_sk_close_listen(void *listen_comm)
{
	struct cruxn_listen *l = listen_comm;

	if (!l || l->magic != CRUXN_LISTEN_MAGIC)
		return CRUX_ERR_INVAL;
	close(l->fd);
	cruxn_boot_greeter_close(&l->greet);
	if (l->ctrl >= 0)
		close(l->ctrl);
	for (int i = 0; i < CRUXN_MAX_SOCKS; i++)
		if (l->data[i] >= 0)
			close(l->data[i]);
	l->magic = 0;
	free(l);
	return CRUX_OK;
}

/* ---- memory registration (host memory needs none) ----------------------- */

crux_status_t cruxn_sk_reg_mr(struct cruxn_base *c, void *data, size_t size, int type,
			      uint64_t offset, int fd, void **mhandle)
{
	struct cruxn_mr *mr;
	(void)c;
	(void)data;
	(void)size;
	(void)offset;
	(void)fd; /* NCCL keeps its dma-buf fd; nothing here maps it */

	if (type != CRUXN_PTR_HOST) {
		crux_err("regMr: only host memory is supported by the socket transport (type %d)",
			 type);
		return CRUX_ERR_INVAL;
	}
	mr = malloc(sizeof(*mr));
	if (!mr)
		return CRUX_ERR_NOMEM;
	mr->magic = CRUXN_MR_MAGIC;
	mr->type = type;
	*mhandle = mr;
	return CRUX_OK;
}

crux_status_t cruxn_sk_dereg_mr(struct cruxn_base *c, void *mhandle)
{
	struct cruxn_mr *mr = mhandle;
	(void)c;

	if (!mr)
		return CRUX_OK;
	if (mr->magic != CRUXN_MR_MAGIC)
		return CRUX_ERR_INVAL;
	mr->magic = 0;
	free(mr);
	return CRUX_OK;
}
