/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket transport: non-blocking connection set-up, striped data
 * sockets driven by helper threads, grouped receives, class re-marking and
 * path moves at message boundaries. See transport.h for the wire format.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crux/log.h"
#include "crux/shm.h"
#include "cruxn.h"
#include "transport.h"

#define CRUXN_LISTEN_MAGIC  0x4e545843u
#define CRUXN_SEND_MAGIC    0x53545843u
#define CRUXN_RECV_MAGIC    0x52545843u
#define CRUXN_CONNECT_MAGIC 0x43545843u
#define CRUXN_MR_MAGIC	    0x4d525843u
#define HELPER_WAIT_MS	    100
#define CTRL_CHECK_NS	    10000000ull /* sender: end-of-stream check when idle */

struct cruxn_listen {
	uint32_t magic;
	int fd;
	int dev;
	uint64_t nonce;
	int pend_fds[1 + CRUXN_MAX_SOCKS * 2];
	struct cruxn_hello pend_hello[1 + CRUXN_MAX_SOCKS * 2];
	size_t pend_off[1 + CRUXN_MAX_SOCKS * 2];
	uint64_t pend_since[1 + CRUXN_MAX_SOCKS * 2];
	int npend;
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
	union {
		struct sockaddr sa;
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} peer;
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

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t new_nonce(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = now_ns() ^ ((uint64_t)getpid() << 32);
	return v ? v : 1;
}

/* Write what the socket takes now. Returns 0 (maybe incomplete) or an errno. */
static int write_some(int fd, const void *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = send(fd, (const char *)buf + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			*off += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 ? errno : EPIPE;
	}
	return 0;
}

#define CRUXN_EOF (-1)

/* Read what is there now. Returns 0 (maybe incomplete), CRUXN_EOF, or an errno. */
static int read_some(int fd, void *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = recv(fd, (char *)buf + *off, len - *off, MSG_DONTWAIT);
		if (n > 0) {
			*off += (size_t)n;
			continue;
		}
		if (n == 0)
			return CRUXN_EOF;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EINTR)
			continue;
		return errno;
	}
	return 0;
}

/* Non-blocking connect finished? 0 with *done set, or the connect error. */
static int connect_poll(int fd, bool *done)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int err = 0;
	socklen_t l = sizeof(err);

	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
		return errno;
	if (err)
		return err;
	*done = true;
	return 0;
}

static void comm_fail(struct cruxn_comm *c, int err, const char *what)
{
	int expected = 0;
	char peer[80];

	if (!atomic_compare_exchange_strong(&c->error, &expected, err ? err : EIO))
		return;
	crux_log_once(&c->err_logged, CRUX_LOG_WARN, "%s connection to %s failed (%s: %s)",
		      c->is_send ? "send" : "receive", cruxn_sa_str(&c->peer.sa, peer, sizeof(peer)),
		      what, strerror(err ? err : EIO));
	pthread_mutex_lock(&c->wake_lock);
	pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->wake_lock);
}

/* ---- helper threads ------------------------------------------------------ */

static bool helper_has_work(const struct cruxn_comm *c, int id)
{
	for (int i = id; i < c->nsocks; i += c->nthreads) {
		if (atomic_load(&c->q[i].head) != atomic_load(&c->q[i].tail))
			return true;
	}
	return false;
}

static void helper_wait(struct cruxn_comm *c, int id)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += HELPER_WAIT_MS * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->wake_lock);
	atomic_fetch_add(&c->sleepers, 1);
	if (!atomic_load(&c->stop) && (atomic_load(&c->error) || !helper_has_work(c, id)))
		pthread_cond_timedwait(&c->wake, &c->wake_lock, &until);
	atomic_fetch_sub(&c->sleepers, 1);
	pthread_mutex_unlock(&c->wake_lock);
}

static void *helper_main(void *arg)
{
	struct cruxn_helper *h = arg;
	struct cruxn_comm *c = h->comm;
	struct pollfd pfd[CRUXN_MAX_SOCKS];

	while (!atomic_load(&c->stop)) {
		int npoll = 0;
		bool work = false, progress = false;

		if (atomic_load(&c->error)) {
			helper_wait(c, h->id);
			continue;
		}
		for (int i = h->id; i < c->nsocks; i += c->nthreads) {
			struct cruxn_queue *q = &c->q[i];
			uint32_t head = atomic_load_explicit(&q->head, memory_order_relaxed);
			uint32_t tail = atomic_load_explicit(&q->tail, memory_order_acquire);

			while (head != tail) {
				struct cruxn_task *t = &q->ring[head % CRUXN_QDEPTH];
				work = true;
				if (t->kind == CRUXN_TASK_MARK) {
					(void)cruxn_sock_set_class(t->fd, c->family, &t->cls);
					atomic_fetch_sub_explicit(&t->set->tasks, 1,
								  memory_order_release);
				} else {
					int e = c->is_send ? write_some(t->fd, t->buf, t->len, &t->off)
							   : read_some(t->fd, t->buf, t->len, &t->off);
					if (e) {
						comm_fail(c, e == CRUXN_EOF ? ECONNRESET : e,
							  "data socket");
						break;
					}
					if (t->off < t->len) {
						pfd[npoll].fd = t->fd;
						pfd[npoll].events = c->is_send ? POLLOUT : POLLIN;
						pfd[npoll].revents = 0;
						npoll++;
						break;
					}
					atomic_fetch_sub_explicit(&t->set->tasks, 1, memory_order_release);
					atomic_fetch_sub_explicit(&t->req->pending, 1,
								  memory_order_release);
				}
				progress = true;
				head++;
				atomic_store_explicit(&q->head, head, memory_order_release);
			}
		}
		if (!work)
			helper_wait(c, h->id);
		else if (!progress && npoll > 0)
			/* With several sockets per thread, an idle one may get work meanwhile. */
			(void)poll(pfd, (nfds_t)npoll, c->nsocks > c->nthreads ? 1 : HELPER_WAIT_MS);
	}
	return NULL;
}

static void queue_push(struct cruxn_comm *c, int idx, const struct cruxn_task *t)
{
	struct cruxn_queue *q = &c->q[idx];
	uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);

	q->ring[tail % CRUXN_QDEPTH] = *t;
	atomic_store(&q->tail, tail + 1);
}

static void wake_helpers(struct cruxn_comm *c)
{
	if (atomic_load(&c->sleepers) > 0) {
		pthread_mutex_lock(&c->wake_lock);
		pthread_cond_broadcast(&c->wake);
		pthread_mutex_unlock(&c->wake_lock);
	}
}

/*
 * Close without losing what we sent: close() on a socket with unread bytes
 * in its receive queue makes the kernel send a reset and drop our own
 * unsent data, so the peer could lose the tail of the last message. Queue
 * the FIN after our data, discard what the peer sent us (bounded, never
 * blocking), then close: the kernel finishes sending on its own.
 */
static void sock_close_gracefully(int fd)
{
	char buf[16384];

	(void)shutdown(fd, SHUT_WR);
	for (int i = 0; i < 256; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n <= 0 && !(n < 0 && errno == EINTR))
			break;
	}
	close(fd);
}

static void set_close(struct cruxn_set *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nsocks; i++)
		if (s->fds[i] >= 0)
			sock_close_gracefully(s->fds[i]);
	free(s);
}

static struct cruxn_set *set_new(uint32_t epoch, int nsocks)
{
	struct cruxn_set *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->epoch = epoch;
	s->nsocks = nsocks;
	for (int i = 0; i < CRUXN_MAX_SOCKS; i++)
		s->fds[i] = -1;
	return s;
}

/* Has the receiver closed every socket of this set (EOF or error readable)? */
static bool set_peer_closed(const struct cruxn_set *s)
{
	for (int i = 0; i < s->nsocks; i++) {
		char b;
		ssize_t n = recv(s->fds[i], &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
			return false;
	}
	return true;
}

/*
 * Close sets whose queued tasks have all finished. The sender waits for the
 * receiver to close first: its data may still sit in the socket buffers, and
 * the TIME_WAIT state then stays on the receiver, so this source port can
 * reach the same listener again when the route comes back.
 */
static void reap_retired(struct cruxn_comm *c)
{
	struct cruxn_set **pp = &c->retired;

	while (*pp) {
		struct cruxn_set *s = *pp;
		if (atomic_load_explicit(&s->tasks, memory_order_acquire) == 0 &&
		    (!c->is_send || set_peer_closed(s))) {
			*pp = s->next;
			set_close(s);
		} else {
			pp = &s->next;
		}
	}
}

static void retire_current(struct cruxn_comm *c, struct cruxn_set *next)
{
	c->cur->next = c->retired;
	c->retired = c->cur;
	c->cur = next;
}

/* ---- comm objects --------------------------------------------------------- */

static void comm_destroy(struct cruxn_comm *c)
{
	struct cruxn_set *s, *n;

	if (!c)
		return;
	atomic_store(&c->stop, true);
	pthread_mutex_lock(&c->wake_lock);
	pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->wake_lock);
	for (int i = 0; i < c->nthreads; i++)
		if (c->helpers[i].started)
			pthread_join(c->helpers[i].th, NULL);
	if (c->ctrl >= 0)
		sock_close_gracefully(c->ctrl);
	if (c->data_listener >= 0)
		close(c->data_listener);
	for (int i = 0; i < c->npend; i++)
		close(c->pend_fds[i]);
	set_close(c->cur);
	set_close(c->pending);
	for (s = c->retired; s; s = n) {
		n = s->next;
		set_close(s);
	}
	for (s = c->incoming; s; s = n) {
		n = s->next;
		set_close(s);
	}
	free(c->q);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->wake_lock);
	pthread_cond_destroy(&c->wake);
	c->magic = 0;
	free(c);
}

static crux_status_t comm_create(bool is_send, int dev, int nsocks, int family,
				 struct cruxn_comm **out)
{
	struct cruxn_comm *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;

	if (!c)
		return CRUX_ERR_NOMEM;
	c->q = calloc((size_t)nsocks, sizeof(*c->q));
	if (!c->q) {
		free(c);
		return CRUX_ERR_NOMEM;
	}
	c->magic = is_send ? CRUXN_SEND_MAGIC : CRUXN_RECV_MAGIC;
	c->is_send = is_send;
	c->dev = dev;
	c->family = family;
	c->ctrl = -1;
	c->data_listener = -1;
	c->nsocks = nsocks;
	c->nthreads = cruxn_ctx.cfg.nthreads < nsocks ? cruxn_ctx.cfg.nthreads : nsocks;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->wake_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->wake, &ca);
	pthread_condattr_destroy(&ca);
	for (int i = 0; i < CRUXN_NET_MAX_REQUESTS; i++) {
		c->reqs[i].magic = CRUXN_REQ_MAGIC;
		c->reqs[i].comm = c;
	}
	*out = c;
	return CRUX_OK;
}

static crux_status_t comm_start_helpers(struct cruxn_comm *c)
{
	for (int i = 0; i < c->nthreads; i++) {
		c->helpers[i].comm = c;
		c->helpers[i].id = i;
		if (pthread_create(&c->helpers[i].th, NULL, helper_main, &c->helpers[i]) != 0)
			return CRUX_ERR_IO;
		c->helpers[i].started = true;
	}
	return CRUX_OK;
}

static struct cruxn_req *req_alloc(struct cruxn_comm *c)
{
	if (c->fifo_count >= CRUXN_NET_MAX_REQUESTS)
		return NULL;
	for (int i = 0; i < CRUXN_NET_MAX_REQUESTS; i++) {
		struct cruxn_req *r = &c->reqs[i];
		if (!r->used) {
			memset(&r->n, 0, sizeof(*r) - offsetof(struct cruxn_req, n));
			r->used = true;
			r->is_send = c->is_send;
			return r;
		}
	}
	return NULL;
}

static void fifo_push(struct cruxn_comm *c, struct cruxn_req *r)
{
	c->fifo[(c->fifo_head + c->fifo_count) % CRUXN_NET_MAX_REQUESTS] = r;
	c->fifo_count++;
}

static void fifo_pop(struct cruxn_comm *c)
{
	c->fifo_head = (c->fifo_head + 1) % CRUXN_NET_MAX_REQUESTS;
	c->fifo_count--;
}

/* ---- listen / connect / accept ------------------------------------------ */

cruxn_result_t cruxn_listen(int dev, void *handle, void **listen_comm)
{
	struct cruxn_handle *h = handle;
	struct cruxn_listen *l = NULL;
	struct cruxn_dev *d;
	union {
		struct sockaddr sa;
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} a;
	socklen_t alen = sizeof(a);
	int fd = -1;

	if (!handle || !listen_comm || dev < 0 || dev >= cruxn_ctx.ndevs)
		return CRUXN_INVALID_ARGUMENT;
	d = &cruxn_ctx.devs[dev];
	l = calloc(1, sizeof(*l));
	if (!l)
		return CRUXN_SYSTEM_ERROR;
	if (cruxn_sock_open_bound(&d->addr.sa, d->addrlen, 0, false, &fd) != CRUX_OK) {
		crux_err("cannot bind a listening socket on %s: %m", d->name);
		goto fail;
	}
	if (listen(fd, 128) != 0 || getsockname(fd, &a.sa, &alen) != 0) {
		crux_err("cannot listen on %s: %m", d->name);
		goto fail;
	}
	l->magic = CRUXN_LISTEN_MAGIC;
	l->fd = fd;
	l->dev = dev;
	l->nonce = new_nonce();
	l->ctrl = -1;
	for (int i = 0; i < CRUXN_MAX_SOCKS; i++)
		l->data[i] = -1;

	memset(handle, 0, CRUXN_NET_HANDLE_MAXSIZE);
	h->magic = CRUXN_HANDLE_MAGIC;
	h->version = CRUXN_WIRE_VERSION;
	h->family = a.sa.sa_family;
	if (a.sa.sa_family == AF_INET) {
		memcpy(h->addr, &a.sin.sin_addr, 4);
		h->port = a.sin.sin_port;
	} else {
		memcpy(h->addr, &a.sin6.sin6_addr, 16);
		h->port = a.sin6.sin6_port;
		h->scope_id = a.sin6.sin6_scope_id;
	}
	h->listen_nonce = l->nonce;
	*listen_comm = l;
	return CRUXN_SUCCESS;
fail:
	if (fd >= 0)
		close(fd);
	free(l);
	return CRUXN_SYSTEM_ERROR;
}

static bool connecting_register(struct cruxn_connecting *st)
{
	bool ok = false;
	pthread_mutex_lock(&cruxn_ctx.lock);
	for (size_t i = 0; i < sizeof(cruxn_ctx.connecting) / sizeof(cruxn_ctx.connecting[0]); i++) {
		if (!cruxn_ctx.connecting[i]) {
			cruxn_ctx.connecting[i] = st;
			ok = true;
			break;
		}
	}
	pthread_mutex_unlock(&cruxn_ctx.lock);
	return ok;
}

/* True (and unregistered when 'remove') when st is a live connect state. */
static bool connecting_find(const void *st, bool remove)
{
	bool found = false;
	pthread_mutex_lock(&cruxn_ctx.lock);
	for (size_t i = 0; i < sizeof(cruxn_ctx.connecting) / sizeof(cruxn_ctx.connecting[0]); i++) {
		if (st && cruxn_ctx.connecting[i] == st) {
			found = true;
			if (remove)
				cruxn_ctx.connecting[i] = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&cruxn_ctx.lock);
	return found;
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
static crux_status_t open_to_peer(int dev, const struct sockaddr *peer, socklen_t plen,
				  uint16_t dport, uint16_t sport, int *out)
{
	struct cruxn_dev *d = &cruxn_ctx.devs[dev];
	union {
		struct sockaddr sa;
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} a;
	int fd = -1;
	crux_status_t st;

	memcpy(&a, peer, plen);
	if (a.sa.sa_family == AF_INET)
		a.sin.sin_port = htons(dport);
	else
		a.sin6.sin6_port = htons(dport);
	st = cruxn_sock_open_bound(&d->addr.sa, d->addrlen, sport, sport != 0, &fd);
	if (st == CRUX_OK && connect(fd, &a.sa, plen) != 0 && errno != EINPROGRESS) {
		close(fd);
		fd = -1;
		st = CRUX_ERR_IO;
	}
	if (st != CRUX_OK && sport != 0) {
		/* The path's port is taken for this peer: keep going on an ephemeral one. */
		crux_log_once(&cruxn_ctx.once_port_fail, CRUX_LOG_WARN,
			      "cannot use source port %u for a data socket (%s); using an "
			      "ephemeral port (ECMP) for it",
			      sport, strerror(errno));
		return open_to_peer(dev, peer, plen, dport, 0, out);
	}
	if (st != CRUX_OK)
		return st;
	(void)cruxn_sock_tune(fd, &cruxn_ctx.cfg);
	*out = fd;
	return CRUX_OK;
}

static uint16_t route_port(const struct cruxn_route *r, int i)
{
	if (r->path_id == CRUX_PATH_NONE || r->nports == 0)
		return 0;
	return r->ports[i % r->nports];
}

static cruxn_result_t connect_start(int dev, int traffic_class, struct cruxn_handle *h,
				    struct cruxn_connecting **out)
{
	struct cruxn_connecting *st = calloc(1, sizeof(*st));
	struct crux_addr peer_host;
	const struct cruxn_config *cfg = &cruxn_ctx.cfg;
	uint16_t dport = ntohs(h->port);

	if (!st)
		return CRUXN_SYSTEM_ERROR;
	st->magic = CRUXN_CONNECT_MAGIC;
	st->dev = dev;
	st->nsocks = cfg->nthreads * cfg->nsocks_per_thread;
	for (int i = 0; i <= CRUXN_MAX_SOCKS; i++)
		st->fds[i] = -1;
	if (h->family == AF_INET) {
		st->peer.sin.sin_family = AF_INET;
		memcpy(&st->peer.sin.sin_addr, h->addr, 4);
		st->peer.sin.sin_port = h->port;
		st->peerlen = sizeof(st->peer.sin);
	} else {
		st->peer.sin6.sin6_family = AF_INET6;
		memcpy(&st->peer.sin6.sin6_addr, h->addr, 16);
		st->peer.sin6.sin6_port = h->port;
		st->peer.sin6.sin6_scope_id = h->scope_id;
		st->peerlen = sizeof(st->peer.sin6);
	}
	if (cruxn_ctx.devs[dev].addr.sa.sa_family != h->family) {
		crux_err("connect: device %s is %s but the peer's handle is %s; set "
			 "CRUX_SOCKET_FAMILY or CRUX_SOCKET_IFNAME alike on every host",
			 cruxn_ctx.devs[dev].name,
			 cruxn_ctx.devs[dev].addr.sa.sa_family == AF_INET ? "IPv4" : "IPv6",
			 h->family == AF_INET ? "IPv4" : "IPv6");
		free(st);
		return CRUXN_INVALID_ARGUMENT;
	}
	st->listen_nonce = h->listen_nonce;
	st->conn_nonce = new_nonce();
	st->deadline_ns = now_ns() + cfg->timeout_ms * 1000000ull;
	memset(&peer_host, 0, sizeof(peer_host));
	(void)crux_addr_from_sockaddr(&st->peer.sa, &peer_host);
	cruxn_tag_init(&st->tag, &peer_host, traffic_class);
	(void)cruxn_tag_refresh(&st->tag);

	for (int i = 0; i <= st->nsocks; i++) {
		uint16_t sport = i == 0 ? 0 : route_port(&st->tag.route, i - 1);
		if (open_to_peer(dev, &st->peer.sa, st->peerlen, dport, sport, &st->fds[i]) !=
		    CRUX_OK) {
			crux_err("connect: cannot open a socket to the peer: %m");
			connecting_free(st);
			return CRUXN_SYSTEM_ERROR;
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
	return CRUXN_SUCCESS;
}

static cruxn_result_t connect_finish(struct cruxn_connecting *st, void **send_comm)
{
	struct cruxn_comm *c = NULL;
	struct cruxn_set *s = NULL;

	if (comm_create(true, st->dev, st->nsocks, st->peer.sa.sa_family, &c) != CRUX_OK)
		return CRUXN_SYSTEM_ERROR;
	s = set_new(0, st->nsocks);
	if (!s) {
		comm_destroy(c);
		return CRUXN_SYSTEM_ERROR;
	}
	c->ctrl = st->fds[0];
	st->fds[0] = -1;
	for (int i = 0; i < st->nsocks; i++) {
		s->fds[i] = st->fds[i + 1];
		s->sports[i] = route_port(&st->tag.route, i);
		st->fds[i + 1] = -1;
	}
	c->cur = s;
	c->next_epoch = 1;
	c->conn_nonce = st->conn_nonce;
	c->chunk_bytes = cruxn_ctx.cfg.chunk_bytes;
	memcpy(&c->peer, &st->peer, st->peerlen);
	c->peerlen = st->peerlen;
	c->tag = st->tag;
	c->peer_host = st->tag.peer;
	c->marked = st->tag.cls;
	c->route_now = st->tag.route;
	c->stats = cruxn_peer_stats_get(&c->peer_host);
	if (comm_start_helpers(c) != CRUX_OK) {
		comm_destroy(c);
		return CRUXN_SYSTEM_ERROR;
	}
	*send_comm = c;
	return CRUXN_SUCCESS;
}

cruxn_result_t cruxn_connect(int dev, int traffic_class, void *handle, void **send_comm)
{
	struct cruxn_handle *h = handle;
	struct cruxn_connecting *st;
	cruxn_result_t rc;
	bool all = true;

	if (!handle || !send_comm || dev < 0 || dev >= cruxn_ctx.ndevs)
		return CRUXN_INVALID_ARGUMENT;
	*send_comm = NULL;
	if (h->magic != CRUXN_HANDLE_MAGIC || h->version != CRUXN_WIRE_VERSION ||
	    (h->family != AF_INET && h->family != AF_INET6) || h->port == 0) {
		crux_err("connect: the handle is not a Crux listener's handle (bad magic, version, "
			 "family or port): is every rank loading the same plugin?");
		return CRUXN_INVALID_ARGUMENT;
	}
	st = (struct cruxn_connecting *)(uintptr_t)h->connect_state;
	if (!st) {
		rc = connect_start(dev, traffic_class, h, &st);
		if (rc != CRUXN_SUCCESS)
			return rc;
		if (!connecting_register(st)) {
			connecting_free(st);
			crux_err("connect: too many connections being set up at once");
			return CRUXN_SYSTEM_ERROR;
		}
		h->connect_state = (uint64_t)(uintptr_t)st;
	} else if (!connecting_find(st, false) || st->magic != CRUXN_CONNECT_MAGIC) {
		crux_err("connect: the handle carries an unknown connection state (corrupted "
			 "handle?)");
		return CRUXN_INVALID_ARGUMENT;
	}

	for (int i = 0; i <= st->nsocks; i++) {
		int e = 0;
		if (!st->connected[i])
			e = connect_poll(st->fds[i], &st->connected[i]);
		if (!e && st->connected[i])
			e = write_some(st->fds[i], &st->hello[i], sizeof(st->hello[i]), &st->off[i]);
		if (e) {
			char peer[80];
			crux_err("connect to %s failed: %s",
				 cruxn_sa_str(&st->peer.sa, peer, sizeof(peer)), strerror(e));
			rc = CRUXN_REMOTE_ERROR;
			goto fail;
		}
		if (!st->connected[i] || st->off[i] < sizeof(st->hello[i]))
			all = false;
	}
	if (!all) {
		if (now_ns() > st->deadline_ns) {
			crux_err("connect: no connection within CRUX_TIMEOUT (%llu ms)",
				 (unsigned long long)cruxn_ctx.cfg.timeout_ms);
			rc = CRUXN_REMOTE_ERROR;
			goto fail;
		}
		return CRUXN_SUCCESS; /* NULL comm: NCCL calls again */
	}
	rc = connect_finish(st, send_comm);
	if (rc != CRUXN_SUCCESS)
		goto fail;
	connecting_find(st, true);
	connecting_free(st);
	h->connect_state = 0;
	return CRUXN_SUCCESS;
fail:
	connecting_find(st, true);
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

static void pend_drop(int *fds, struct cruxn_hello *hello, size_t *off, int *n, int i, bool close_fd)
{
	if (close_fd)
		close(fds[i]);
	fds[i] = fds[*n - 1];
	hello[i] = hello[*n - 1];
	off[i] = off[*n - 1];
	(*n)--;
}

static bool hello_valid(const struct cruxn_hello *hl, uint64_t nonce)
{
	return hl->magic == CRUXN_WIRE_MAGIC && hl->version == CRUXN_WIRE_VERSION &&
	       hl->listen_nonce == nonce && hl->nsocks >= 1 && hl->nsocks <= CRUXN_MAX_SOCKS &&
	       hl->index < hl->nsocks && hl->chunk_bytes >= 4096 &&
	       (hl->kind == CRUXN_SOCK_CTRL || hl->kind == CRUXN_SOCK_DATA);
}

static cruxn_result_t accept_finish(struct cruxn_listen *l, void **recv_comm)
{
	struct cruxn_comm *c = NULL;
	struct cruxn_set *s = NULL;
	struct cruxn_dev *d = &cruxn_ctx.devs[l->dev];
	union {
		struct sockaddr sa;
		struct sockaddr_in sin;
		struct sockaddr_in6 sin6;
	} a;
	socklen_t alen = sizeof(a);
	struct cruxn_class cls;
	int nsocks = (int)l->first.nsocks;

	if (comm_create(false, l->dev, nsocks, d->addr.sa.sa_family, &c) != CRUX_OK)
		return CRUXN_SYSTEM_ERROR;
	s = set_new(0, nsocks);
	if (!s)
		goto fail;
	c->ctrl = l->ctrl;
	for (int i = 0; i < nsocks; i++)
		s->fds[i] = l->data[i];
	c->cur = s;
	listen_reset(l);
	c->conn_nonce = l->first.conn_nonce;
	c->chunk_bytes = l->first.chunk_bytes;
	c->peerlen = sizeof(c->peer);
	if (getpeername(c->ctrl, &c->peer.sa, &c->peerlen) != 0)
		goto fail;
	(void)crux_addr_from_sockaddr(&c->peer.sa, &c->peer_host);
	c->stats = cruxn_peer_stats_get(&c->peer_host);
	/* The receive side's own packets (ACKs, replies) take the sender's class. */
	cls.tos = l->first.tos;
	cls.prio = l->first.prio;
	cls.level = 0;
	c->marked = cls;
	(void)cruxn_sock_tune(c->ctrl, &cruxn_ctx.cfg);
	(void)cruxn_sock_set_class(c->ctrl, c->family, &cls);
	for (int i = 0; i < nsocks; i++) {
		(void)cruxn_sock_tune(s->fds[i], &cruxn_ctx.cfg);
		(void)cruxn_sock_set_class(s->fds[i], c->family, &cls);
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
	(void)write_some(c->ctrl, &c->out_msg, sizeof(c->out_msg), &c->out_off);
	if (comm_start_helpers(c) != CRUX_OK)
		goto fail;
	*recv_comm = c;
	return CRUXN_SUCCESS;
fail:
	crux_err("accept: cannot set up the receive connection: %m");
	if (c && c->ctrl >= 0 && c->cur == NULL) {
		close(c->ctrl);
		c->ctrl = -1;
	}
	comm_destroy(c);
	return CRUXN_SYSTEM_ERROR;
}

cruxn_result_t cruxn_accept(void *listen_comm, void **recv_comm)
{
	struct cruxn_listen *l = listen_comm;
	const int maxpend = (int)(sizeof(l->pend_fds) / sizeof(l->pend_fds[0]));

	if (!l || !recv_comm || l->magic != CRUXN_LISTEN_MAGIC)
		return CRUXN_INVALID_ARGUMENT;
	*recv_comm = NULL;
	for (;;) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
			    errno == ECONNABORTED)
				break;
			crux_err("accept failed: %m");
			return CRUXN_SYSTEM_ERROR;
		}
		if (l->npend >= maxpend) {
			/* Full of peers that never greeted: make room by dropping the oldest. */
			int old = 0;
			for (int i = 1; i < l->npend; i++)
				if (l->pend_since[i] < l->pend_since[old])
					old = i;
			pend_drop(l->pend_fds, l->pend_hello, l->pend_off, &l->npend, old, true);
			l->pend_since[old] = l->pend_since[l->npend];
		}
		l->pend_fds[l->npend] = fd;
		l->pend_off[l->npend] = 0;
		l->pend_since[l->npend] = now_ns();
		l->npend++;
	}
	for (int i = 0; i < l->npend;) {
		int e = read_some(l->pend_fds[i], &l->pend_hello[i], sizeof(l->pend_hello[i]),
				  &l->pend_off[i]);
		struct cruxn_hello *hl = &l->pend_hello[i];
		if (e) {
			pend_drop(l->pend_fds, l->pend_hello, l->pend_off, &l->npend, i, true);
			l->pend_since[i] = l->pend_since[l->npend];
			continue;
		}
		if (l->pend_off[i] < sizeof(*hl)) {
			i++;
			continue;
		}
		if (!hello_valid(hl, l->nonce) ||
		    (l->bound && hl->conn_nonce != l->first.conn_nonce) ||
		    (hl->kind == CRUXN_SOCK_CTRL && l->ctrl >= 0) ||
		    (hl->kind == CRUXN_SOCK_DATA && (l->data[hl->index] >= 0 ||
						     (l->bound && hl->nsocks != l->first.nsocks)))) {
			crux_warn("accept: dropped a connection with an unexpected greeting (not a "
				  "Crux peer of this listener)");
			pend_drop(l->pend_fds, l->pend_hello, l->pend_off, &l->npend, i, true);
			l->pend_since[i] = l->pend_since[l->npend];
			continue;
		}
		if (!l->bound) {
			l->bound = true;
			l->first = *hl;
		}
		if (hl->kind == CRUXN_SOCK_CTRL) {
			l->ctrl = l->pend_fds[i];
			l->first.tos = hl->tos;
			l->first.prio = hl->prio;
		} else {
			l->data[hl->index] = l->pend_fds[i];
			l->ndata++;
		}
		pend_drop(l->pend_fds, l->pend_hello, l->pend_off, &l->npend, i, false);
		l->pend_since[i] = l->pend_since[l->npend];
	}
	if (l->bound && l->ctrl >= 0 && l->ndata == (int)l->first.nsocks)
		return accept_finish(l, recv_comm);
	return CRUXN_SUCCESS;
}

cruxn_result_t cruxn_close_listen(void *listen_comm)
{
	struct cruxn_listen *l = listen_comm;

	if (!l || l->magic != CRUXN_LISTEN_MAGIC)
		return CRUXN_INVALID_ARGUMENT;
	close(l->fd);
	for (int i = 0; i < l->npend; i++)
		close(l->pend_fds[i]);
	if (l->ctrl >= 0)
		close(l->ctrl);
	for (int i = 0; i < CRUXN_MAX_SOCKS; i++)
		if (l->data[i] >= 0)
			close(l->data[i]);
	l->magic = 0;
	free(l);
	return CRUXN_SUCCESS;
}

/* ---- memory registration (host memory needs none) ----------------------- */

cruxn_result_t cruxn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct cruxn_mr *mr;
	(void)data;
	(void)size;

	if (!comm || !mhandle)
		return CRUXN_INVALID_ARGUMENT;
	if (type != CRUXN_PTR_HOST) {
		crux_err("regMr: only host memory is supported by the socket transport (type %d)",
			 type);
		return CRUXN_INVALID_ARGUMENT;
	}
	mr = malloc(sizeof(*mr));
	if (!mr)
		return CRUXN_SYSTEM_ERROR;
	mr->magic = CRUXN_MR_MAGIC;
	mr->type = type;
	*mhandle = mr;
	return CRUXN_SUCCESS;
}

cruxn_result_t cruxn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				   int fd, void **mhandle)
{
	(void)offset;
	(void)fd;
	return cruxn_reg_mr(comm, data, size, type, mhandle);
}

cruxn_result_t cruxn_dereg_mr(void *comm, void *mhandle)
{
	struct cruxn_mr *mr = mhandle;
	(void)comm;

	if (!mr)
		return CRUXN_SUCCESS;
	if (mr->magic != CRUXN_MR_MAGIC)
		return CRUXN_INVALID_ARGUMENT;
	mr->magic = 0;
	free(mr);
	return CRUXN_SUCCESS;
}

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
		uint16_t p = route_port(&c->tag.route, i);
		if (p != c->cur->sports[i])
			same = false;
		/* Old sockets from this port to the same listener still drain: wait for them. */
		for (struct cruxn_set *o = c->retired; o; o = o->next)
			if (set_uses_port(o, p))
				return;
	}
	if (same) {
		/* The current sockets already realise this route (only its id changed). */
		c->route_now = c->tag.route;
		c->route_dirty = false;
		return;
	}
	s = set_new(c->next_epoch, c->nsocks);
	if (!s)
		return;
	for (int i = 0; i < c->nsocks; i++) {
		s->sports[i] = route_port(&c->tag.route, i);
		if (open_to_peer(c->dev, &c->peer.sa, c->peerlen, c->data_port,
				 route_port(&c->tag.route, i), &s->fds[i]) != CRUX_OK) {
			set_close(s);
			return; /* try again on a later message */
		}
		(void)cruxn_sock_set_class(s->fds[i], c->family, &c->marked);
	}
	c->next_epoch++;
	c->pending = s;
	c->route_now = c->tag.route;
	c->route_dirty = false;
}

/* Progress the new path's connects; switch to it when all are up. */
static void path_progress(struct cruxn_comm *c)
{
	struct cruxn_set *s = c->pending;

	for (int i = 0; i < s->nsocks; i++) {
		int e = 0;
		if (!s->connected[i])
			e = connect_poll(s->fds[i], &s->connected[i]);
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
			hl.tos = c->marked.tos;
			hl.prio = c->marked.prio;
			hl.chunk_bytes = c->chunk_bytes;
			e = write_some(s->fds[i], &hl, sizeof(hl), &s->hello_off[i]);
			if (!e && s->hello_off[i] == sizeof(hl))
				s->ready_count++;
		}
		if (e) {
			/* The new path failed: stay on the old one, retry on a later change. */
			crux_warn("moving a connection to path %u failed (%s); staying on the "
				  "current path",
				  c->tag.route.path_id, strerror(e));
			set_close(s);
			c->pending = NULL;
			return;
		}
	}
	if (s->ready_count == s->nsocks) {
		char peer[80];
		c->pending = NULL;
		retire_current(c, s);
		crux_info("connection to %s moved to path %u (socket set %u)",
			  cruxn_sa_str(&c->peer.sa, peer, sizeof(peer)), c->route_now.path_id,
			  s->epoch);
	}
}

/* Receiver's reply (data listener port) and end-of-stream detection. */
static void send_read_ctrl(struct cruxn_comm *c)
{
	int e = read_some(c->ctrl, &c->in_msg, sizeof(c->in_msg), &c->in_off);

	if (e == CRUXN_EOF) {
		/* Receiver closed: what is already written still completes. */
		c->ctrl_eof = true;
	} else if (e) {
		comm_fail(c, e, "control socket");
	} else if (c->in_off == sizeof(c->in_msg)) {
		if (c->in_msg.magic == CRUXN_WIRE_MAGIC && c->in_msg.type == CRUXN_MSG_ACCEPT &&
		    c->in_msg.size > 0 && c->in_msg.size < 65536)
			c->data_port = (uint16_t)c->in_msg.size;
		else
			comm_fail(c, EPROTO, "unexpected control message");
		c->in_off = 0;
	}
}

static void send_progress(struct cruxn_comm *c)
{
	while (c->fifo_count > 0 && !atomic_load(&c->error)) {
		struct cruxn_req *r = c->fifo[c->fifo_head];
		struct iovec iov[2];
		struct msghdr mh;
		ssize_t n;

		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = 0;
		if (r->hdr_off < sizeof(r->hdr)) {
			iov[mh.msg_iovlen].iov_base = (char *)&r->hdr + r->hdr_off;
			iov[mh.msg_iovlen].iov_len = sizeof(r->hdr) - r->hdr_off;
			mh.msg_iovlen++;
		}
		if (r->inline_off < r->inline_len) {
			iov[mh.msg_iovlen].iov_base = (char *)r->data[0] + r->inline_off;
			iov[mh.msg_iovlen].iov_len = r->inline_len - r->inline_off;
			mh.msg_iovlen++;
		}
		if (mh.msg_iovlen == 0) {
			r->ctrl_done = true;
			fifo_pop(c);
			continue;
		}
		n = sendmsg(c->ctrl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			comm_fail(c, errno, "control socket");
			break;
		}
		size_t h = sizeof(r->hdr) - r->hdr_off;
		if ((size_t)n <= h) {
			r->hdr_off += (size_t)n;
		} else {
			r->hdr_off = sizeof(r->hdr);
			r->inline_off += (size_t)n - h;
		}
	}
	/*
	 * After its reply the receiver only ever closes the control socket: look
	 * while the reply is due or our output is blocked (a dead receiver then
	 * fails the stuck requests), else at most every CTRL_CHECK_NS, so the
	 * per-message path does not pay a recv() that finds nothing.
	 */
	if (!atomic_load(&c->error) && !c->ctrl_eof) {
		uint64_t now = cruxn_coarse_ns();
		if (c->data_port == 0 || c->fifo_count > 0 || now >= c->ctrl_check_ns) {
			c->ctrl_check_ns = now + CTRL_CHECK_NS;
			send_read_ctrl(c);
		}
	}
	if (c->pending)
		path_progress(c);
	if (c->retired)
		reap_retired(c);
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
	atomic_fetch_add(&r->pending, parts);
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
		queue_push(c, idx, &t);
		off += len;
	}
	wake_helpers(c);
}

static void remark(struct cruxn_comm *c, const struct cruxn_class *cls)
{
	(void)cruxn_sock_set_class(c->ctrl, c->family, cls);
	/* Data sockets: in stream order, just before the next message's bytes. */
	for (int i = 0; i < c->nsocks; i++) {
		struct cruxn_task t;
		memset(&t, 0, sizeof(t));
		t.kind = CRUXN_TASK_MARK;
		t.fd = c->cur->fds[i];
		t.set = c->cur;
		t.cls = *cls;
		atomic_fetch_add(&c->cur->tasks, 1);
		queue_push(c, i, &t);
	}
	wake_helpers(c);
	if (c->pending)
		for (int i = 0; i < c->pending->nsocks; i++)
			(void)cruxn_sock_set_class(c->pending->fds[i], c->family, cls);
	c->marked = *cls;
}

static bool route_equal(const struct cruxn_route *a, const struct cruxn_route *b)
{
	return a->path_id == b->path_id && a->nports == b->nports &&
	       memcmp(a->ports, b->ports, sizeof(a->ports)) == 0;
}

cruxn_result_t cruxn_isend(void *send_comm, void *data, size_t size, int tag, void **request)
{
	struct cruxn_comm *c = send_comm;
	struct cruxn_req *r;

	if (!c || !request || c->magic != CRUXN_SEND_MAGIC || (size > 0 && !data))
		return CRUXN_INVALID_ARGUMENT;
	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->error) || c->ctrl_eof) {
		pthread_mutex_unlock(&c->lock);
		return CRUXN_REMOTE_ERROR;
	}
	r = req_alloc(c);
	if (!r) {
		*request = NULL; /* 32 in flight: NCCL retries later */
		pthread_mutex_unlock(&c->lock);
		return CRUXN_SUCCESS;
	}
	/* Message boundary: take the current class and path before any byte goes out. */
	if (cruxn_tag_refresh(&c->tag)) {
		if (memcmp(&c->tag.cls, &c->marked, sizeof(c->marked)) != 0)
			remark(c, &c->tag.cls);
		if (!route_equal(&c->tag.route, &c->route_now))
			c->route_dirty = true;
	}
	if (c->route_dirty && !c->pending && c->data_port)
		path_start(c);
	if (c->pending)
		path_progress(c);

	r->n = 1;
	r->data[0] = data;
	r->cap[0] = size;
	r->got[0] = size;
	r->tags[0] = tag;
	r->level = c->tag.cls.level;
	r->hdr.magic = CRUXN_WIRE_MAGIC;
	r->hdr.level = (uint8_t)c->tag.cls.level;
	r->hdr.tos = (uint8_t)c->marked.tos;
	r->hdr.prio = c->marked.prio;
	r->hdr.tag = tag;
	r->hdr.size = size;
	r->hdr.epoch = c->cur->epoch;
	r->hdr.seq = c->msg_seq++;
	if (size <= cruxn_ctx.cfg.inline_bytes) {
		r->hdr.type = CRUXN_MSG_INLINE;
		r->inline_len = size;
	} else {
		r->hdr.type = CRUXN_MSG_STRIPED;
		enqueue_stripes(c, r, 0, size, c->cur);
	}
	atomic_fetch_add_explicit(&c->stats->tx[r->level], size, memory_order_relaxed);
	fifo_push(c, r);
	send_progress(c);
	*request = r;
	pthread_mutex_unlock(&c->lock);
	return CRUXN_SUCCESS;
}

/* ---- receiver data path --------------------------------------------------- */

/* Accept data sockets of later paths and sort them into sets by epoch. */
static void accept_data_sockets(struct cruxn_comm *c)
{
	const int maxpend = (int)(sizeof(c->pend_fds) / sizeof(c->pend_fds[0]));

	for (;;) {
		int fd = accept4(c->data_listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		if (c->npend >= maxpend) {
			close(fd);
			continue;
		}
		c->pend_fds[c->npend] = fd;
		c->pend_off[c->npend] = 0;
		c->npend++;
	}
	for (int i = 0; i < c->npend;) {
		struct cruxn_hello *hl = &c->pend_hello[i];
		struct cruxn_set *s;
		int e = read_some(c->pend_fds[i], hl, sizeof(*hl), &c->pend_off[i]);

		if (e) {
			pend_drop(c->pend_fds, c->pend_hello, c->pend_off, &c->npend, i, true);
			continue;
		}
		if (c->pend_off[i] < sizeof(*hl)) {
			i++;
			continue;
		}
		if (!hello_valid(hl, c->conn_nonce) || hl->kind != CRUXN_SOCK_DATA ||
		    hl->conn_nonce != c->conn_nonce || (int)hl->nsocks != c->nsocks ||
		    hl->epoch <= c->cur->epoch) {
			pend_drop(c->pend_fds, c->pend_hello, c->pend_off, &c->npend, i, true);
			continue;
		}
		for (s = c->incoming; s && s->epoch != hl->epoch; s = s->next)
			;
		if (!s) {
			s = set_new(hl->epoch, c->nsocks);
			if (!s) {
				i++;
				continue;
			}
			s->next = c->incoming;
			c->incoming = s;
		}
		if (s->fds[hl->index] >= 0) {
			pend_drop(c->pend_fds, c->pend_hello, c->pend_off, &c->npend, i, true);
			continue;
		}
		s->fds[hl->index] = c->pend_fds[i];
		s->ready_count++;
		(void)cruxn_sock_tune(s->fds[hl->index], &cruxn_ctx.cfg);
		(void)cruxn_sock_set_class(s->fds[hl->index], c->family, &c->marked);
		pend_drop(c->pend_fds, c->pend_hello, c->pend_off, &c->npend, i, false);
	}
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
			retire_current(c, s);
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
			return read_some(c->ctrl, dst, len, off);
		n = recv(c->ctrl, c->stage, sizeof(c->stage), MSG_DONTWAIT);
		if (n > 0) {
			c->stage_off = 0;
			c->stage_len = (size_t)n;
			continue;
		}
		if (n == 0)
			return CRUXN_EOF;
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
		e = write_some(c->ctrl, &c->out_msg, sizeof(c->out_msg), &c->out_off);
		if (e)
			comm_fail(c, e, "control socket");
	}
	if (c->retired)
		reap_retired(c);
	while (!atomic_load(&c->error)) {
		struct cruxn_msg *m = &c->rx_hdr;
		struct cruxn_req *r;
		struct cruxn_set *s = NULL;
		int slot = -1;

		if (c->rx_req) {
			struct cruxn_req *q = c->rx_req;
			size_t off = q->got[c->rx_slot] - c->rx_left;
			e = ctrl_read(c, q->data[c->rx_slot], q->got[c->rx_slot], &off);
			if (e) {
				comm_fail(c, e == CRUXN_EOF ? ECONNRESET : e, "control socket");
				return;
			}
			c->rx_left = q->got[c->rx_slot] - off;
			if (c->rx_left > 0)
				return;
			q->inline_len--; /* inline slots outstanding */
			c->rx_req = NULL;
		}
		if (!c->rx_have_hdr) {
			if (c->ctrl_eof)
				return;
			e = ctrl_read(c, m, sizeof(*m), &c->rx_hdr_off);
			if (e == CRUXN_EOF && c->rx_hdr_off == 0) {
				/* Sender closed: striped data already sent may still be arriving. */
				c->ctrl_eof = true;
				return;
			}
			if (e) {
				comm_fail(c, e == CRUXN_EOF ? ECONNRESET : e, "control socket");
				return;
			}
			if (c->rx_hdr_off < sizeof(*m))
				return;
			if (m->magic != CRUXN_WIRE_MAGIC ||
			    (m->type != CRUXN_MSG_INLINE && m->type != CRUXN_MSG_STRIPED) ||
			    (m->type == CRUXN_MSG_INLINE && m->size > (1u << 20))) {
				comm_fail(c, EPROTO, "malformed message header");
				return;
			}
			c->rx_have_hdr = true;
		}
		if (c->fifo_count == 0)
			return; /* nothing posted yet: keep the header */
		if (m->type == CRUXN_MSG_STRIPED) {
			s = recv_set(c, m->epoch);
			if (!s)
				return; /* the new path's sockets are still arriving */
		}
		r = c->fifo[c->fifo_head];
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
			comm_fail(c, EPROTO, "message tag matches no slot of the posted receive");
			return;
		}
		if (m->size > r->cap[slot]) {
			crux_err("receive buffer of %zu bytes is smaller than the %llu-byte message",
				 r->cap[slot], (unsigned long long)m->size);
			comm_fail(c, EMSGSIZE, "message larger than the receive buffer");
			return;
		}
		if (m->tos != c->marked.tos || m->prio != c->marked.prio) {
			struct cruxn_class cls = {m->tos, m->prio, m->level};
			(void)cruxn_sock_set_class(c->ctrl, c->family, &cls);
			for (int i = 0; i < c->nsocks; i++)
				(void)cruxn_sock_set_class(c->cur->fds[i], c->family, &cls);
			c->marked = cls;
		}
		r->matched[slot] = true;
		r->got[slot] = m->size;
		r->nmatched++;
		if (r->nmatched == r->n)
			fifo_pop(c);
		atomic_fetch_add_explicit(&c->stats->rx[m->level < CRUX_MAX_LEVELS ? m->level : 0],
					  m->size, memory_order_relaxed);
		c->rx_have_hdr = false;
		c->rx_hdr_off = 0;
		if (m->type == CRUXN_MSG_STRIPED) {
			enqueue_stripes(c, r, slot, m->size, s);
		} else if (m->size > 0) {
			r->inline_len++;
			c->rx_req = r;
			c->rx_slot = slot;
			c->rx_left = m->size;
		}
	}
}

cruxn_result_t cruxn_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
			   const int *tags, void **request)
{
	struct cruxn_comm *c = recv_comm;
	struct cruxn_req *r;

	if (!c || !request || c->magic != CRUXN_RECV_MAGIC || n < 1 || n > CRUXN_NET_MAX_RECVS ||
	    !data || !sizes)
		return CRUXN_INVALID_ARGUMENT;
	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->error)) {
		pthread_mutex_unlock(&c->lock);
		return CRUXN_REMOTE_ERROR;
	}
	for (int i = 0; i < n; i++) {
		/* A message would be written through it later, on another thread. */
		if (sizes[i] > 0 && !data[i]) {
			pthread_mutex_unlock(&c->lock);
			return CRUXN_INVALID_ARGUMENT;
		}
	}
	r = req_alloc(c);
	if (!r) {
		*request = NULL;
		pthread_mutex_unlock(&c->lock);
		return CRUXN_SUCCESS;
	}
	r->n = n;
	for (int i = 0; i < n; i++) {
		r->data[i] = data[i];
		r->cap[i] = sizes[i];
		r->tags[i] = tags ? tags[i] : 0;
	}
	fifo_push(c, r);
	recv_progress(c);
	*request = r;
	pthread_mutex_unlock(&c->lock);
	return CRUXN_SUCCESS;
}

cruxn_result_t cruxn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			    void **request)
{
	(void)n;
	(void)data;
	(void)sizes;
	(void)mhandles;
	if (!recv_comm || !request)
		return CRUXN_INVALID_ARGUMENT;
	/* Host memory: the data is in place when the receive completes. */
	*request = NULL;
	return CRUXN_SUCCESS;
}

/* After the peer closed its control socket, can this request still finish? */
static bool req_orphaned(const struct cruxn_req *r)
{
	if (!r->comm->ctrl_eof)
		return false;
	if (r->is_send)
		return !r->ctrl_done;
	return r->nmatched < r->n || r->inline_len > 0;
}

static bool req_done(const struct cruxn_req *r)
{
	if (atomic_load_explicit(&r->pending, memory_order_acquire) != 0)
		return false;
	if (r->is_send)
		return r->ctrl_done;
	return r->nmatched == r->n && r->inline_len == 0;
}

cruxn_result_t cruxn_test(void *request, int *done, int *sizes)
{
	struct cruxn_req *r = request;
	struct cruxn_comm *c;
	cruxn_result_t rc = CRUXN_SUCCESS;

	if (!r || !done || r->magic != CRUXN_REQ_MAGIC || !r->used)
		return CRUXN_INVALID_ARGUMENT;
	c = r->comm;
	pthread_mutex_lock(&c->lock);
	if (!req_done(r)) {
		if (c->is_send)
			send_progress(c);
		else
			recv_progress(c);
	}
	if (req_done(r)) {
		if (sizes)
			for (int i = 0; i < r->n; i++)
				sizes[i] = (int)(r->got[i] > 0x7fffffff ? 0x7fffffff : r->got[i]);
		r->used = false;
		*done = 1;
	} else {
		*done = 0;
		if (atomic_load(&c->error)) {
			rc = CRUXN_REMOTE_ERROR;
		} else if (req_orphaned(r)) {
			comm_fail(c, ECONNRESET, "peer closed the connection");
			rc = CRUXN_REMOTE_ERROR;
		}
	}
	pthread_mutex_unlock(&c->lock);
	/*
	 * NCCL's proxy polls test() in a tight loop; give the core to our helper
	 * threads (and the peer) when they are the ones with work to do.
	 */
	if (!*done && rc == CRUXN_SUCCESS)
		sched_yield();
	return rc;
}

cruxn_result_t cruxn_close_send(void *send_comm)
{
	struct cruxn_comm *c = send_comm;

	if (!c || c->magic != CRUXN_SEND_MAGIC)
		return CRUXN_INVALID_ARGUMENT;
	comm_destroy(c);
	return CRUXN_SUCCESS;
}

cruxn_result_t cruxn_close_recv(void *recv_comm)
{
	struct cruxn_comm *c = recv_comm;

	if (!c || c->magic != CRUXN_RECV_MAGIC)
		return CRUXN_INVALID_ARGUMENT;
	comm_destroy(c);
	return CRUXN_SUCCESS;
}
