/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs transport's connection set-up over a TCP bootstrap socket, in
 * NCCL's order: the sender connects and sends HELLO (lane 0's queue pair,
 * its CTS FIFO); the receiver builds its end, moves it to RTS and answers
 * ACCEPT (its queue pair, its size table); the sender moves its end to RTS
 * and sends READY. connect/accept return a NULL comm until done.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "boot.h"
#include "crux/log.h"
#include "vx_transport.h"

#define VX_LISTEN_MAGIC	 0x4c565843u
#define VX_CONNECT_MAGIC 0x43565843u

_Static_assert(sizeof(struct vx_msg) <= CRUXN_BOOT_HELLO_MAX, "HELLO must fit a greeting");

struct vx_listen {
	uint32_t magic;
	int fd;
	int dev;
	uint64_t nonce;
	/* connections that have not greeted yet: strangers cannot block a real peer */
	struct cruxn_boot_greeter greet;
	int afd;	  /* the greeted connection being set up */
	struct vx_msg in; /* its HELLO */
	struct vx_comm *c;
};

struct vx_connecting {
	uint32_t magic;
	struct vx_comm *c;
	bool connected;
	uint64_t deadline_ns;
};

static void comm_free(struct vx_comm *c)
{
	const struct cruxn_ibv *v = &cruxn_vx_state.ibv;
	struct vx_lane *l, *n;

	if (!c)
		return;
	/* queue pairs first: nothing may still write into what we release next */
	for (l = c->lanes; l; l = n) {
		n = l->next;
		cruxn_vx_lane_free(l);
	}
	c->lanes = NULL;
	if (c->flush_qp)
		v->destroy_qp(c->flush_qp);
	if (c->flush_mr)
		v->dereg_mr(c->flush_mr);
	for (int i = 0; i < CRUXN_NET_MAX_REQUESTS; i++)
		if (c->b.reqs[i].used)
			c->b.ops->req_release(&c->b, &c->b.reqs[i]);
	if (c->fifo_mr)
		v->dereg_mr(c->fifo_mr);
	if (c->sizes_out_mr)
		v->dereg_mr(c->sizes_out_mr);
	if (c->sizes_mr)
		v->dereg_mr(c->sizes_mr);
	if (c->cts_mr)
		v->dereg_mr(c->cts_mr);
	if (c->cq)
		v->destroy_cq(c->cq);
	if (c->fd >= 0)
		cruxn_boot_close_gracefully(c->fd);
	cruxn_base_fini(&c->b);
	free(c); /* posix_memalign'd */
}

void cruxn_vx_destroy(struct cruxn_base *b)
{
	struct vx_comm *c = vx_of(b);

	/* what arrived (completions not yet polled included), then BYE, then the QPs go */
	if (c->ready && !atomic_load(&c->b.error))
		(void)c->b.ops->progress(&c->b);
	cruxn_vx_bye(c);
	comm_free(c);
}

/*
 * A comm holds registered control memory (FIFO, size tables, CTS source,
 * flush buffer): page-aligned and page-rounded, as NCCL's ncclIbMalloc, so a
 * registration never shares a page with other heap data.
 */
static struct vx_comm *comm_alloc(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t page = pg > 0 ? (size_t)pg : 4096;
	size_t size = (sizeof(struct vx_comm) + page - 1) / page * page;
	void *p = NULL;

	if (posix_memalign(&p, page, size) != 0)
		return NULL;
	memset(p, 0, size);
	return p;
}

static struct vx_comm *comm_new(bool is_send, int dev, int family, int nqps)
{
	const struct cruxn_ibv *v = &cruxn_vx_state.ibv;
	struct vx_comm *c = comm_alloc();
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	char why[256];

	if (!c)
		return NULL;
	cruxn_base_init(&c->b, is_send, &cruxn_verbs_ops, dev, family);
	c->fd = -1;
	c->bell = is_send ? &c->fifo_bell : &c->sizes_bell;
	c->dev = &cruxn_vx_state.devs[dev];
	c->nqps = nqps;
	if (cruxn_vx_ep_refresh(&cruxn_vx_state, c->dev, &c->ep, why, sizeof(why)) != CRUX_OK) {
		crux_err("verbs: cannot set up a connection: %s", why);
		comm_free(c);
		return NULL;
	}
	c->cq = v->create_cq(c->dev->ctx, VX_CQ_DEPTH(nqps), NULL, NULL, 0);
	if (!c->cq)
		goto fail;
	if (is_send) {
		/* each table with the bell that follows it */
		c->fifo_mr = v->reg_mr(c->dev->pd, c->fifo, sizeof(c->fifo) + 8, rw);
		c->sizes_out_mr = v->reg_mr(c->dev->pd, c->sizes_out, sizeof(c->sizes_out) + 8,
					    IBV_ACCESS_LOCAL_WRITE);
		if (!c->fifo_mr || !c->sizes_out_mr)
			goto fail;
	} else {
		c->sizes_mr = v->reg_mr(c->dev->pd, c->sizes, sizeof(c->sizes) + 8, rw);
		c->cts_mr =
		    v->reg_mr(c->dev->pd, c->cts, sizeof(c->cts) + 8, IBV_ACCESS_LOCAL_WRITE);
		if (!c->sizes_mr || !c->cts_mr)
			goto fail;
	}
	return c;
fail:
	crux_err("verbs: cannot set up a connection on %s (completion queue or memory "
		 "registration failed: %s); check the locked-memory limit (ulimit -l)",
		 c->dev->name, strerror(errno));
	comm_free(c);
	return NULL;
}

/* ---- listen ------------------------------------------------------------------- */

crux_status_t cruxn_vx_listen(int dev, void *handle, void **listen_comm)
{
	const struct cruxn_dev *boot = cruxn_boot_if(0); /* NCCL's bootstrap interface */
	struct vx_listen *l;

	if (!boot) {
		crux_err("verbs listen: no network interface for the bootstrap socket; set "
			 "CRUX_SOCKET_IFNAME");
		return CRUX_ERR_NOENT;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return CRUX_ERR_NOMEM;
	l->nonce = cruxn_new_nonce();
	if (cruxn_boot_listen(boot, VX_MAGIC, VX_VERSION, l->nonce, handle, &l->fd) != CRUX_OK) {
		crux_err("verbs listen: no bootstrap socket on %s", boot->name);
		free(l);
		return CRUX_ERR_IO;
	}
	l->magic = VX_LISTEN_MAGIC;
	l->dev = dev;
	l->afd = -1;
	cruxn_boot_greeter_init(&l->greet, sizeof(struct vx_msg));
	*listen_comm = l;
	return CRUX_OK;
}

crux_status_t cruxn_vx_close_listen(void *listen_comm)
{
	struct vx_listen *l = listen_comm;

	if (l->magic != VX_LISTEN_MAGIC)
		return CRUX_ERR_INVAL;
	close(l->fd);
	cruxn_boot_greeter_close(&l->greet);
	if (l->c)
		comm_free(l->c);
	else if (l->afd >= 0)
		close(l->afd);
	l->magic = 0;
	free(l);
	return CRUX_OK;
}

/* ---- connect ------------------------------------------------------------------ */

static crux_status_t connect_start(int dev, int traffic_class, const struct cruxn_boot_handle *h,
				   const union crux_sockaddr *peer, socklen_t plen,
				   struct vx_connecting **out)
{
	const struct cruxn_dev *boot = cruxn_boot_if(0);
	struct vx_connecting *st;
	struct vx_comm *c;
	struct vx_lane *l;
	struct vx_msg m;

	if (!boot) {
		crux_err("verbs connect: no network interface for the bootstrap socket; set "
			 "CRUX_SOCKET_IFNAME");
		return CRUX_ERR_NOENT;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return CRUX_ERR_NOMEM;
	if (boot->addr.sa.sa_family != h->family) {
		crux_err(
		    "verbs connect: the bootstrap interface %s and the peer's handle differ in "
		    "address family; set CRUX_SOCKET_IFNAME / CRUX_SOCKET_FAMILY alike",
		    boot->name);
		free(st);
		return CRUX_ERR_INVAL;
	}
	c = comm_new(true, dev, h->family, cruxn_vx_qpcfg.nqps);
	if (!c) {
		free(st);
		return CRUX_ERR_IO;
	}
	st->c = c;
	st->magic = VX_CONNECT_MAGIC;
	st->deadline_ns = crux_now_ns() + cruxn_ctx.cfg.timeout_ms * 1000000ull;
	c->nonce = h->nonce;
	memcpy(&c->b.peer, peer, plen);
	c->b.peerlen = plen;
	(void)crux_addr_from_sockaddr(&c->b.peer.sa, &c->b.peer_host);
	c->b.stats = cruxn_peer_stats_get(&c->b.peer_host);
	cruxn_tag_init(&c->b.tag, &c->b.peer_host, traffic_class);
	c->b.tag.ib = true; /* NCCL_IB_TC / NCCL_IB_SL apply */
	(void)cruxn_tag_refresh(&c->b.tag);
	l = cruxn_vx_lane_new(c, 0, &c->b.tag.cls, &c->b.tag.route);
	if (!l)
		goto fail;
	cruxn_vx_lane_link(c, l);
	c->cur = l;
	c->next_lane = 1;
	c->b.marked = l->cls;
	c->b.route_now = l->route;
	if (l->route_refused)
		c->b.route_now.path_id = CRUX_PATH_NONE, c->b.route_now.nports = 0;
	/* tuned: lane changes are small messages that must not wait for an ACK (Nagle) */
	if (cruxn_boot_connect(boot, &c->b.peer.sa, c->b.peerlen, 0, 0, &c->fd) != CRUX_OK)
		goto fail;
	cruxn_vx_ep_to_msg(c, l, &m, VX_HELLO);
	m.addr = (uint64_t)(uintptr_t)c->fifo;
	m.rkey = c->fifo_mr->rkey;
	cruxn_vx_ctrl_send(c, &m);
	*out = st;
	return CRUX_OK;
fail:
	crux_err("verbs connect: cannot start the connection on %s: %s", c->dev->name,
		 strerror(errno));
	comm_free(c);
	free(st);
	return CRUX_ERR_IO;
}

static void connecting_end(struct cruxn_boot_handle *h, struct vx_connecting *st, bool free_comm)
{
	cruxn_connecting_find(st, true);
	if (free_comm)
		comm_free(st->c);
	st->magic = 0;
	free(st);
	h->connect_state = 0;
}

crux_status_t cruxn_vx_connect(int dev, int traffic_class, void *handle, struct cruxn_base **out)
{
	struct cruxn_boot_handle *h = handle;
	struct vx_connecting *st;
	struct vx_comm *c;
	union crux_sockaddr peer;
	socklen_t plen;
	int e = 0;

	if (cruxn_boot_handle_peer(h, VX_MAGIC, VX_VERSION, &peer, &plen) != CRUX_OK) {
		crux_err(
		    "verbs connect: the handle is not a Crux verbs listener's (bad magic, "
		    "version, family or port): do all ranks load the same plugin with the same "
		    "CRUX_TRANSPORT?");
		return CRUX_ERR_INVAL;
	}
	st = (struct vx_connecting *)(uintptr_t)h->connect_state;
	if (!st) {
		crux_status_t rc = connect_start(dev, traffic_class, h, &peer, plen, &st);
		if (rc != CRUX_OK)
			return rc;
		if (!cruxn_connecting_register(st)) {
			comm_free(st->c);
			free(st);
			crux_err("verbs connect: too many connections being set up at once");
			return CRUX_ERR_RANGE;
		}
		h->connect_state = (uint64_t)(uintptr_t)st;
	} else if (!cruxn_connecting_find(st, false) || st->magic != VX_CONNECT_MAGIC) {
		crux_err("verbs connect: the handle carries an unknown connection state (corrupted "
			 "handle?)");
		return CRUX_ERR_INVAL;
	}
	c = st->c;
	if (!st->connected)
		e = cruxn_boot_connect_poll(c->fd, &st->connected);
	if (!e && st->connected) {
		/* HELLO out, then ACCEPT in (lane 0's far end), then READY out */
		cruxn_vx_ctrl_progress(c);
		if (atomic_load(&c->b.error))
			e = EPROTO;
	}
	if (e) {
		char peer[80];
		crux_err("verbs connect to %s failed: %s",
			 crux_sockaddr_format(&c->b.peer.sa, peer, sizeof(peer)), strerror(e));
		connecting_end(h, st, true);
		return CRUX_ERR_REMOTE;
	}
	if (c->ready && c->out_count == 0) {
		connecting_end(h, st, false);
		*out = &c->b;
		return CRUX_OK;
	}
	if (crux_now_ns() > st->deadline_ns) {
		crux_err("verbs connect: no connection within CRUX_TIMEOUT (%llu ms)",
			 (unsigned long long)cruxn_ctx.cfg.timeout_ms);
		connecting_end(h, st, true);
		return CRUX_ERR_TIMEOUT;
	}
	return CRUX_OK; /* NULL comm: NCCL calls again */
}

/* ---- accept ------------------------------------------------------------------- */

static bool hello_ok(const struct vx_msg *m, uint64_t nonce)
{
	return m->magic == VX_MAGIC && m->version == VX_VERSION && m->kind == VX_HELLO &&
	       m->nonce == nonce && m->lane == 0 && m->addr != 0 && m->nqps >= 1 &&
	       m->nqps <= VX_MAX_QPS;
}

/* HELLO read: build our end of lane 0 and queue ACCEPT. */
static crux_status_t accept_build(struct vx_listen *l)
{
	struct vx_comm *c;
	struct vx_lane *lane;
	struct cruxn_class cls = {l->in.tos, 0, l->in.level, l->in.sl};
	struct cruxn_route none;
	struct vx_msg m;

	memset(&none, 0, sizeof(none));
	none.path_id = CRUX_PATH_NONE;
	/* the sender's number of queue pairs per lane rules both ends */
	c = comm_new(false, l->dev, cruxn_boot_if(0)->addr.sa.sa_family, l->in.nqps);
	if (!c)
		return CRUX_ERR_IO;
	c->fd = l->afd;
	l->afd = -1;
	cls.tos = cruxn_vx_fifo_tos(c, cls.tos); /* NCCL_IB_FIFO_TC: our CTS writes and ACKs */
	(void)cruxn_sock_tune(c->fd, &cruxn_ctx.cfg);
	l->c = c;
	c->nonce = l->nonce;
	c->rfifo = l->in.addr;
	c->rfifo_rkey = l->in.rkey;
	c->b.peerlen = sizeof(c->b.peer);
	if (getpeername(c->fd, &c->b.peer.sa, &c->b.peerlen) != 0)
		return CRUX_ERR_IO;
	(void)crux_addr_from_sockaddr(&c->b.peer.sa, &c->b.peer_host);
	c->b.stats = cruxn_peer_stats_get(&c->b.peer_host);
	lane = cruxn_vx_lane_new(c, 0, &cls, &none);
	if (!lane)
		return CRUX_ERR_IO;
	for (int i = 0; i < lane->nqps; i++)
		lane->flow_label[i] = l->in.flow_label[i]; /* the sender's paths, both ways */
	cruxn_vx_lane_link(c, lane);
	c->cur = lane;
	c->b.marked = cls;
	if (cruxn_vx_lane_connect(c, lane, &l->in) != CRUX_OK ||
	    cruxn_vx_post_recvs(c, lane, VX_RECV_POSTED) != CRUX_OK)
		return CRUX_ERR_IO;
	cruxn_vx_ep_to_msg(c, lane, &m, VX_ACCEPT);
	m.addr = (uint64_t)(uintptr_t)c->sizes;
	m.rkey = c->sizes_mr->rkey;
	cruxn_vx_ctrl_send(c, &m);
	return CRUX_OK;
}

/* A complete greeting: the first that greets properly is set up (one at a time). */
static enum cruxn_boot_verdict judge_hello(void *arg, int fd, const void *hello)
{
	struct vx_listen *l = arg;

	if (!hello_ok(hello, l->nonce)) {
		crux_warn("verbs accept: dropped a connection with an unexpected greeting "
			  "(not a Crux verbs peer of this listener)");
		return CRUXN_BOOT_REJECT;
	}
	if (l->afd >= 0)
		return CRUXN_BOOT_WAIT;
	l->afd = fd;
	memcpy(&l->in, hello, sizeof(l->in));
	return CRUXN_BOOT_TAKE;
}

crux_status_t cruxn_vx_accept(void *listen_comm, struct cruxn_base **out)
{
	struct vx_listen *l = listen_comm;
	struct vx_comm *c;

	if (l->magic != VX_LISTEN_MAGIC)
		return CRUX_ERR_INVAL;
	if (!l->c) {
		/* a failed accept() leaves the listener as it was: NCCL calls again */
		(void)cruxn_boot_greet(&l->greet, l->fd, judge_hello, l);
		if (l->afd < 0)
			return CRUX_OK;
		if (accept_build(l) != CRUX_OK) {
			crux_err("verbs accept: cannot set up the receive connection on %s",
				 cruxn_vx_state.devs[l->dev].name);
			if (l->c)
				comm_free(l->c);
			else if (l->afd >= 0)
				close(l->afd);
			l->c = NULL;
			l->afd = -1;
			return CRUX_ERR_IO;
		}
	}
	c = l->c;
	cruxn_vx_ctrl_progress(c);
	if (atomic_load(&c->b.error) || c->b.peer_closed) {
		comm_free(c);
		l->c = NULL;
		return CRUX_ERR_REMOTE;
	}
	if (!c->ready)
		return CRUX_OK;
	l->c = NULL;
	*out = &c->b;
	return CRUX_OK;
}
