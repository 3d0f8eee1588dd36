/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket transport's data path: inline and striped sends, path moves
 * and class re-marking at message boundaries, grouped receives.
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

#define CTRL_CHECK_NS 10000000ull /* sender: end-of-stream check when idle */

/* ---- sender data path ------------------------------------------------------ */

static bool set_uses_port(const struct cruxn_set *s, uint16_t port)
{
	for (int i = 0; port && i < s->nsocks; i++)
		if (s->sports[i] == port)
			return true;
	return false;
}

/* Open the data sockets of a new path towards the receiver's data listener. */
static void path_start(struct cruxn_comm *c)
{
	struct cruxn_set *s;
	bool same = true;

	for (int i = 0; i < c->nsocks; i++) {
		uint16_t p = cruxn_route_port(&c->b.tag.route, i);
		if (p != c->cur->sports[i])
			same = false;
		/* Old sockets from this port to the same listener still drain: wait for them. */
		for (struct cruxn_set *o = c->retired; o; o = o->next)
			if (set_uses_port(o, p))
				return;
	}
	if (same) {
		/* The current sockets already realise this route (only its id changed). */
		c->b.route_now = c->b.tag.route;
		c->route_dirty = false;
		return;
	}
	s = cruxn_sk_set_new(c->next_epoch, c->nsocks);
	if (!s)
		return;
	for (int i = 0; i < c->nsocks; i++) {
		s->sports[i] = cruxn_route_port(&c->b.tag.route, i);
		if (cruxn_sk_open_to_peer(c->b.dev, &c->b.peer.sa, c->b.peerlen, c->data_port,
					  cruxn_route_port(&c->b.tag.route, i),
					  &s->fds[i]) != CRUX_OK) {
			cruxn_sk_set_close(s);
			return; /* try again on a later message */
		}
		(void)cruxn_sock_set_class(s->fds[i], c->b.family, &c->b.marked);
	}
	c->next_epoch++;
	c->pending = s;
	c->b.route_now = c->b.tag.route;
	c->route_dirty = false;
}

/* Progress the new path's connects; switch to it when all are up. */
static void path_progress(struct cruxn_comm *c)
{
	struct cruxn_set *s = c->pending;

	for (int i = 0; i < s->nsocks; i++) {
		int e = 0;
		if (!s->connected[i])
			e = cruxn_boot_connect_poll(s->fds[i], &s->connected[i]);
		if (!e && s->connected[i] && s->hello_off[i] < sizeof(struct cruxn_hello)) {
			struct cruxn_hello hl;
			memset(&hl, 0, sizeof(hl));
			hl.magic = CRUXN_WIRE_MAGIC;
			hl.version = CRUXN_WIRE_VERSION;
			hl.kind = CRUXN_SOCK_DATA;
			hl.index = (uint8_t)i;
			hl.listen_nonce = c->conn_nonce;
			hl.conn_nonce = c->conn_nonce;
			hl.nsocks = (uint32_t)c->nsocks;
			hl.epoch = s->epoch;
			hl.tos = c->b.marked.tos;
			hl.prio = c->b.marked.prio;
			hl.chunk_bytes = c->chunk_bytes;
			e = cruxn_boot_write_some(s->fds[i], &hl, sizeof(hl), &s->hello_off[i]);
			if (!e && s->hello_off[i] == sizeof(hl))
				s->ready_count++;
		}
		if (e) {
			/* The new path failed: stay on the old one, retry on a later change. */
			crux_warn("moving a connection to path %u failed (%s); staying on the "
				  "current path",
				  c->b.tag.route.path_id, strerror(e));
			cruxn_sk_set_close(s);
			c->pending = NULL;
			return;
		}
	}
	if (s->ready_count == s->nsocks) {
		char peer[80];
		c->pending = NULL;
		cruxn_sk_retire_current(c, s);
		crux_info("connection to %s moved to path %u (socket set %u)",
			  crux_sockaddr_format(&c->b.peer.sa, peer, sizeof(peer)),
			  c->b.route_now.path_id, s->epoch);
	}
}

/* Receiver's reply (data listener port) and end-of-stream detection. */
static void send_read_ctrl(struct cruxn_comm *c)
{
	int e = cruxn_boot_read_some(c->ctrl, &c->in_msg, sizeof(c->in_msg), &c->in_off);

	if (e == CRUXN_BOOT_EOF) {
		/* Receiver closed: what is already written still completes. */
		c->b.peer_closed = true;
	} else if (e) {
		cruxn_comm_fail(&c->b, e, "control socket");
	} else if (c->in_off == sizeof(c->in_msg)) {
		if (c->in_msg.magic == CRUXN_WIRE_MAGIC && c->in_msg.type == CRUXN_MSG_ACCEPT &&
		    c->in_msg.size > 0 && c->in_msg.size < 65536)
			c->data_port = (uint16_t)c->in_msg.size;
		else
			cruxn_comm_fail(&c->b, EPROTO, "unexpected control message");
		c->in_off = 0;
	}
}

static void send_progress(struct cruxn_comm *c)
{
	while (c->b.fifo_count > 0 && !atomic_load(&c->b.error)) {
		struct cruxn_req *r = c->b.fifo[c->b.fifo_head];
		struct iovec iov[2];
		struct msghdr mh;
		ssize_t n;

		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = 0;
		if (cruxn_skr(r)->hdr_off < sizeof(cruxn_skr(r)->hdr)) {
			iov[mh.msg_iovlen].iov_base =
			    (char *)&cruxn_skr(r)->hdr + cruxn_skr(r)->hdr_off;
			iov[mh.msg_iovlen].iov_len =
			    sizeof(cruxn_skr(r)->hdr) - cruxn_skr(r)->hdr_off;
			mh.msg_iovlen++;
		}
		if (cruxn_skr(r)->inline_off < cruxn_skr(r)->inline_len) {
			iov[mh.msg_iovlen].iov_base = (char *)r->data[0] + cruxn_skr(r)->inline_off;
			iov[mh.msg_iovlen].iov_len =
			    cruxn_skr(r)->inline_len - cruxn_skr(r)->inline_off;
			mh.msg_iovlen++;
		}
		if (mh.msg_iovlen == 0) {
			cruxn_skr(r)->ctrl_done = true;
			cruxn_fifo_pop(&c->b);
			continue;
		}
		n = sendmsg(c->ctrl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			cruxn_comm_fail(&c->b, errno, "control socket");
			break;
		}
		size_t h = sizeof(cruxn_skr(r)->hdr) - cruxn_skr(r)->hdr_off;
		if ((size_t)n <= h) {
			cruxn_skr(r)->hdr_off += (size_t)n;
		} else {
			cruxn_skr(r)->hdr_off = sizeof(cruxn_skr(r)->hdr);
			cruxn_skr(r)->inline_off += (size_t)n - h;
		}
	}
	/*
	 * After its reply the receiver only ever closes the control socket: look
	 * while the reply is due or our output is blocked (a dead receiver then
	 * fails the stuck requests), else at most every CTRL_CHECK_NS, so the
	 * per-message path does not pay a recv() that finds nothing.
	 */
	if (!atomic_load(&c->b.error) && !c->b.peer_closed) {
		uint64_t now = crux_coarse_ns();
		if (c->data_port == 0 || c->b.fifo_count > 0 || now >= c->ctrl_check_ns) {
			c->ctrl_check_ns = now + CTRL_CHECK_NS;
			send_read_ctrl(c);
		}
	}
	if (c->pending)
		path_progress(c);
	if (c->retired)
		cruxn_sk_reap_retired(c);
}

/* Which data sockets carry a striped message: both sides compute the same. */
static int stripe_parts(const struct cruxn_comm *c, uint64_t size)
{
	uint64_t parts = size / c->chunk_bytes;
	if (parts < 1)
		parts = 1;
	if (parts > (uint64_t)c->nsocks)
		parts = (uint64_t)c->nsocks;
	return (int)parts;
}

static void enqueue_stripes(struct cruxn_comm *c, struct cruxn_req *r, int slot, uint64_t size,
			    struct cruxn_set *s)
{
	int parts = stripe_parts(c, size);
	uint64_t base = size / (uint64_t)parts, off = 0;
	int start = (int)(c->striped_seq % (uint32_t)c->nsocks);

	c->striped_seq++;
	atomic_fetch_add(&cruxn_skr(r)->pending, parts);
	atomic_fetch_add(&s->tasks, parts);
	for (int p = 0; p < parts; p++) {
		struct cruxn_task t;
		int idx = (start + p) % c->nsocks;
		uint64_t len = p == parts - 1 ? size - off : base;

		memset(&t, 0, sizeof(t));
		t.kind = CRUXN_TASK_IO;
		t.fd = s->fds[idx];
		t.buf = (char *)r->data[slot] + off;
		t.len = (size_t)len;
		t.req = r;
		t.set = s;
		cruxn_sk_queue_push(c, idx, &t);
		off += len;
	}
	cruxn_sk_wake_helpers(c);
}

static void remark(struct cruxn_comm *c, const struct cruxn_class *cls)
{
	(void)cruxn_sock_set_class(c->ctrl, c->b.family, cls);
	/* Data sockets: in stream order, just before the next message's bytes. */
	for (int i = 0; i < c->nsocks; i++) {
		struct cruxn_task t;
		memset(&t, 0, sizeof(t));
		t.kind = CRUXN_TASK_MARK;
		t.fd = c->cur->fds[i];
		t.set = c->cur;
		t.cls = *cls;
		atomic_fetch_add(&c->cur->tasks, 1);
		cruxn_sk_queue_push(c, i, &t);
	}
	cruxn_sk_wake_helpers(c);
	if (c->pending)
		for (int i = 0; i < c->pending->nsocks; i++)
			(void)cruxn_sock_set_class(c->pending->fds[i], c->b.family, cls);
	c->b.marked = *cls;
}

/* Message boundary: take the current class and path before any byte goes out. */
static void sk_boundary(struct cruxn_base *b, bool class_changed, bool route_changed)
{
	struct cruxn_comm *c = cruxn_sk(b);

	if (class_changed)
		remark(c, &c->b.tag.cls);
	if (route_changed)
		c->route_dirty = true;
}

static crux_status_t sk_post_send(struct cruxn_base *b, struct cruxn_req *r)
{
	struct cruxn_comm *c = cruxn_sk(b);
	struct cruxn_sock_req *sr = cruxn_skr(r);
	size_t size = r->cap[0];

	if (c->route_dirty && !c->pending && c->data_port)
		path_start(c);
	if (c->pending)
		path_progress(c);

	sr->hdr.magic = CRUXN_WIRE_MAGIC;
	sr->hdr.level = (uint8_t)r->level;
	sr->hdr.tos = (uint8_t)c->b.marked.tos;
	sr->hdr.prio = c->b.marked.prio;
	sr->hdr.tag = r->tags[0];
	sr->hdr.size = size;
	sr->hdr.epoch = c->cur->epoch;
	sr->hdr.seq = c->msg_seq++;
	if (size <= cruxn_ctx.cfg.inline_bytes) {
		sr->hdr.type = CRUXN_MSG_INLINE;
		sr->inline_len = size;
	} else {
		sr->hdr.type = CRUXN_MSG_STRIPED;
		enqueue_stripes(c, r, 0, size, c->cur);
	}
	cruxn_fifo_push(&c->b, r);
	send_progress(c);
	return CRUX_OK;
}

/* ---- receiver data path --------------------------------------------------- */

/* Accept data sockets of later paths and sort them into sets by epoch. */
static enum cruxn_boot_verdict judge_data_hello(void *arg, int fd, const void *hello)
{
	struct cruxn_comm *c = arg;
	const struct cruxn_hello *hl = hello;
	struct cruxn_set *s;

	if (!cruxn_sk_hello_valid(hl, c->conn_nonce) || hl->kind != CRUXN_SOCK_DATA ||
	    hl->conn_nonce != c->conn_nonce || (int)hl->nsocks != c->nsocks ||
	    hl->epoch <= c->cur->epoch)
		return CRUXN_BOOT_REJECT;
	for (s = c->incoming; s && s->epoch != hl->epoch; s = s->next)
		;
	if (!s) {
		s = cruxn_sk_set_new(hl->epoch, c->nsocks);
		if (!s)
			return CRUXN_BOOT_WAIT;
		s->next = c->incoming;
		c->incoming = s;
	}
	if (s->fds[hl->index] >= 0)
		return CRUXN_BOOT_REJECT;
	s->fds[hl->index] = fd;
	s->ready_count++;
	(void)cruxn_sock_tune(fd, &cruxn_ctx.cfg);
	(void)cruxn_sock_set_class(fd, c->b.family, &c->b.marked);
	return CRUXN_BOOT_TAKE;
}

static void accept_data_sockets(struct cruxn_comm *c)
{
	/* a failed accept() leaves the listener as it was: the sender retries the path */
	(void)cruxn_boot_greet(&c->greet, c->data_listener, judge_data_hello, c);
}

/* The set for 'epoch', switching to it when it is newer and complete; NULL = not yet. */
static struct cruxn_set *recv_set(struct cruxn_comm *c, uint32_t epoch)
{
	struct cruxn_set **pp;

	if (c->cur->epoch == epoch)
		return c->cur;
	if (epoch < c->cur->epoch)
		return NULL;
	accept_data_sockets(c);
	for (pp = &c->incoming; *pp; pp = &(*pp)->next) {
		struct cruxn_set *s = *pp;
		if (s->epoch == epoch && s->ready_count == s->nsocks) {
			*pp = s->next;
			s->next = NULL;
			cruxn_sk_retire_current(c, s);
			return s;
		}
	}
	return NULL;
}

/*
 * Read the control stream through the stage, so a header and a small
 * payload cost one system call; large remainders go straight to 'dst'.
 * Returns like read_some.
 */
static int ctrl_read(struct cruxn_comm *c, void *dst, size_t len, size_t *off)
{
	while (*off < len) {
		size_t have = c->stage_len - c->stage_off;
		ssize_t n;

		if (have > 0) {
			size_t k = have < len - *off ? have : len - *off;
			memcpy((char *)dst + *off, c->stage + c->stage_off, k);
			c->stage_off += k;
			*off += k;
			continue;
		}
		if (len - *off >= sizeof(c->stage))
			return cruxn_boot_read_some(c->ctrl, dst, len, off);
		n = recv(c->ctrl, c->stage, sizeof(c->stage), MSG_DONTWAIT);
		if (n > 0) {
			c->stage_off = 0;
			c->stage_len = (size_t)n;
			continue;
		}
		if (n == 0)
			return CRUXN_BOOT_EOF;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno != EINTR)
			return errno;
	}
	return 0;
}

static void recv_progress(struct cruxn_comm *c)
{
	int e;

	if (c->out_off < sizeof(c->out_msg)) {
		e = cruxn_boot_write_some(c->ctrl, &c->out_msg, sizeof(c->out_msg), &c->out_off);
		if (e)
			cruxn_comm_fail(&c->b, e, "control socket");
	}
	if (c->retired)
		cruxn_sk_reap_retired(c);
	while (!atomic_load(&c->b.error)) {
		struct cruxn_msg *m = &c->rx_hdr;
		struct cruxn_req *r;
		struct cruxn_set *s = NULL;
		int slot = -1;

		if (c->rx_req) {
			struct cruxn_req *q = c->rx_req;
			size_t off = q->got[c->rx_slot] - c->rx_left;
			e = ctrl_read(c, q->data[c->rx_slot], q->got[c->rx_slot], &off);
			if (e) {
				cruxn_comm_fail(&c->b, e == CRUXN_BOOT_EOF ? ECONNRESET : e,
						"control socket");
				return;
			}
			c->rx_left = q->got[c->rx_slot] - off;
			if (c->rx_left > 0)
				return;
			cruxn_skr(q)->inline_len--; /* inline slots outstanding */
			c->rx_req = NULL;
		}
		if (!c->rx_have_hdr) {
			if (c->b.peer_closed)
				return;
			e = ctrl_read(c, m, sizeof(*m), &c->rx_hdr_off);
			if (e == CRUXN_BOOT_EOF && c->rx_hdr_off == 0) {
				/* Sender closed: striped data already sent may still be arriving.
				 */
				c->b.peer_closed = true;
				return;
			}
			if (e) {
				cruxn_comm_fail(&c->b, e == CRUXN_BOOT_EOF ? ECONNRESET : e,
						"control socket");
				return;
			}
			if (c->rx_hdr_off < sizeof(*m))
				return;
			if (m->magic != CRUXN_WIRE_MAGIC ||
			    (m->type != CRUXN_MSG_INLINE && m->type != CRUXN_MSG_STRIPED) ||
			    (m->type == CRUXN_MSG_INLINE && m->size > (1u << 20))) {
				cruxn_comm_fail(&c->b, EPROTO, "malformed message header");
				return;
			}
			c->rx_have_hdr = true;
		}
		if (c->b.fifo_count == 0)
			return; /* nothing posted yet: keep the header */
		if (m->type == CRUXN_MSG_STRIPED) {
			s = recv_set(c, m->epoch);
			if (!s)
				return; /* the new path's sockets are still arriving */
		}
		r = c->b.fifo[c->b.fifo_head];
		if (r->n == 1) {
			slot = 0;
		} else {
			for (int i = 0; i < r->n; i++) {
				if (!r->matched[i] && r->tags[i] == m->tag) {
					slot = i;
					break;
				}
			}
		}
		if (slot < 0) {
			cruxn_comm_fail(&c->b, EPROTO,
					"message tag matches no slot of the posted receive");
			return;
		}
		if (m->size > r->cap[slot]) {
			crux_err(
			    "receive buffer of %zu bytes is smaller than the %llu-byte message",
			    r->cap[slot], (unsigned long long)m->size);
			cruxn_comm_fail(&c->b, EMSGSIZE, "message larger than the receive buffer");
			return;
		}
		if (m->tos != c->b.marked.tos || m->prio != c->b.marked.prio) {
			struct cruxn_class cls = {m->tos, m->prio, m->level, c->b.marked.sl};
			(void)cruxn_sock_set_class(c->ctrl, c->b.family, &cls);
			for (int i = 0; i < c->nsocks; i++)
				(void)cruxn_sock_set_class(c->cur->fds[i], c->b.family, &cls);
			c->b.marked = cls;
		}
		r->matched[slot] = true;
		r->got[slot] = m->size;
		r->nmatched++;
		if (r->nmatched == r->n)
			cruxn_fifo_pop(&c->b);
		atomic_fetch_add_explicit(
		    &c->b.stats->rx[m->level < CRUX_MAX_LEVELS ? m->level : 0], m->size,
		    memory_order_relaxed);
		c->rx_have_hdr = false;
		c->rx_hdr_off = 0;
		if (m->type == CRUXN_MSG_STRIPED) {
			enqueue_stripes(c, r, slot, m->size, s);
		} else if (m->size > 0) {
			cruxn_skr(r)->inline_len++;
			c->rx_req = r;
			c->rx_slot = slot;
			c->rx_left = m->size;
		}
	}
}

static crux_status_t sk_post_recv(struct cruxn_base *b, struct cruxn_req *r)
{
	cruxn_fifo_push(b, r);
	recv_progress(cruxn_sk(b));
	return CRUX_OK;
}

/* After the peer closed its control socket, can this request still finish? */
static bool sk_req_orphaned(const struct cruxn_req *r)
{
	const struct cruxn_sock_req *sr = cruxn_skr_c(r);

	if (r->is_send)
		return !sr->ctrl_done;
	return r->nmatched < r->n || sr->inline_len > 0;
}

static bool sk_req_done(const struct cruxn_req *r)
{
	const struct cruxn_sock_req *sr = cruxn_skr_c(r);

	if (atomic_load_explicit(&sr->pending, memory_order_acquire) != 0)
		return false;
	if (r->is_send)
		return sr->ctrl_done;
	return r->nmatched == r->n && sr->inline_len == 0;
}

static bool sk_progress(struct cruxn_base *b)
{
	if (b->is_send)
		send_progress(cruxn_sk(b));
	else
		recv_progress(cruxn_sk(b));
	return true; /* the helpers move bytes meanwhile: always look again */
}

static bool sk_test(struct cruxn_base *b, struct cruxn_req *r)
{
	return sk_req_done(r) || (sk_progress(b) && sk_req_done(r));
}

const struct cruxn_transport_ops cruxn_socket_ops = {
    .name = "socket",
    .kind = CRUXN_TP_SOCKET,
    .yield_in_test = true,
    .start = cruxn_sk_start,
    .stop = NULL,
    .ndevs = cruxn_sk_ndevs,
    .properties = cruxn_sk_properties,
    .listen = cruxn_sk_listen,
    .connect = cruxn_sk_connect,
    .accept = cruxn_sk_accept,
    .close_listen = cruxn_sk_close_listen,
    .reg_mr = cruxn_sk_reg_mr,
    .dereg_mr = cruxn_sk_dereg_mr,
    .boundary = sk_boundary,
    .post_send = sk_post_send,
    .post_recv = sk_post_recv,
    .flush = NULL, /* host memory: the data is in place when the receive completes */
    .progress = sk_progress,
    .test = sk_test,
    .req_orphaned = sk_req_orphaned,
    .wake = cruxn_sk_wake,
    .destroy = cruxn_sk_destroy,
};
