/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's transport-independent entry points: argument checks, the
 * request pool, the message-boundary decision and byte counters; each call
 * ends in one operation of the transport chosen at init (core.h).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "busy.h"
#include "core.h"
#include "crux/log.h"
#include "cruxn.h"

uint64_t cruxn_new_nonce(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = crux_now_ns() ^ ((uint64_t)getpid() << 32);
	return v ? v : 1;
}

/* NCCL's view of our status: the peer's failure is a remote error. */
static cruxn_result_t to_result(crux_status_t st)
{
	switch (st) {
	case CRUX_OK:
		return CRUXN_SUCCESS;
	case CRUX_ERR_INVAL:
	case CRUX_ERR_RANGE:
	case CRUX_ERR_CORRUPT:
	case CRUX_ERR_VERSION:
		return CRUXN_INVALID_ARGUMENT;
	case CRUX_ERR_REMOTE:
	case CRUX_ERR_TIMEOUT:
		return CRUXN_REMOTE_ERROR;
	default:
		return CRUXN_SYSTEM_ERROR;
	}
}

/* The transport chosen at init (before init: the last built in, the socket transport). */
static const struct cruxn_transport_ops *ops_now(void)
{
	const struct cruxn_transport_ops *const *t = cruxn_transports;

	if (cruxn_ctx.ops)
		return cruxn_ctx.ops;
	while (t[1])
		t++;
	return *t;
}

/* A post op's failure as the comm's errno-like cause. */
static int status_errno(crux_status_t st)
{
	switch (st) {
	case CRUX_ERR_NOMEM:
		return ENOMEM;
	case CRUX_ERR_INVAL:
		return EINVAL;
	case CRUX_ERR_RANGE:
		return ERANGE;
	case CRUX_ERR_TIMEOUT:
		return ETIMEDOUT;
	case CRUX_ERR_REMOTE:
		return EREMOTEIO;
	default:
		return EIO;
	}
}

/*
 * The one failure rule of post ops: OK, posted; BUSY, not now (r goes back
 * to the pool and NCCL gets a NULL request to retry); anything else fails
 * the comm. Returns what NCCL gets.
 */
static cruxn_result_t post_result(struct cruxn_base *c, struct cruxn_req *r, crux_status_t st,
				  const char *what, void **request)
{
	if (st == CRUX_OK) {
		*request = r;
		return CRUXN_SUCCESS;
	}
	if (c->ops->req_release)
		c->ops->req_release(c, r);
	r->used = false;
	*request = NULL;
	if (st == CRUX_ERR_BUSY)
		return atomic_load(&c->error) ? CRUXN_REMOTE_ERROR : CRUXN_SUCCESS;
	cruxn_comm_fail(c, status_errno(st), what);
	return st == CRUX_ERR_REMOTE ? CRUXN_REMOTE_ERROR : to_result(st);
}

void cruxn_base_init(struct cruxn_base *c, bool is_send, const struct cruxn_transport_ops *ops,
		     int dev, int family)
{
	c->magic = is_send ? CRUXN_SEND_MAGIC : CRUXN_RECV_MAGIC;
	c->is_send = is_send;
	c->ops = ops;
	c->dev = dev;
	c->family = family;
	pthread_mutex_init(&c->lock, NULL);
	for (int i = 0; i < CRUXN_NET_MAX_REQUESTS; i++) {
		c->reqs[i].magic = CRUXN_REQ_MAGIC;
		c->reqs[i].comm = c;
	}
}

void cruxn_base_fini(struct cruxn_base *c)
{
	pthread_mutex_destroy(&c->lock);
	c->magic = 0;
}

void cruxn_comm_fail(struct cruxn_base *c, int err, const char *what)
{
	int expected = 0;
	char peer[80];

	if (!atomic_compare_exchange_strong(&c->error, &expected, err ? err : EIO))
		return;
	crux_log_once(&c->err_logged, CRUX_LOG_WARN, "%s connection to %s failed (%s: %s)",
		      c->is_send ? "send" : "receive",
		      crux_sockaddr_format(&c->peer.sa, peer, sizeof(peer)), what,
		      strerror(err ? err : EIO));
	if (c->ops->wake)
		c->ops->wake(c);
}

/* A free request of the pool, not yet taken (req_take), or NULL. */
static struct cruxn_req *req_free(struct cruxn_base *c)
{
	if (c->fifo_count >= CRUXN_NET_MAX_REQUESTS)
		return NULL;
	for (int i = 0; i < CRUXN_NET_MAX_REQUESTS; i++)
		if (!c->reqs[i].used)
			return &c->reqs[i];
	return NULL;
}

static struct cruxn_req *req_take(struct cruxn_base *c, struct cruxn_req *r)
{
	memset(&r->n, 0, sizeof(*r) - offsetof(struct cruxn_req, n));
	r->used = true;
	r->is_send = c->is_send;
	return r;
}

struct cruxn_req *cruxn_req_get(struct cruxn_base *c)
{
	struct cruxn_req *r = req_free(c);

	return r ? req_take(c, r) : NULL;
}

void cruxn_fifo_push(struct cruxn_base *c, struct cruxn_req *r)
{
	c->fifo[(c->fifo_head + c->fifo_count) % CRUXN_NET_MAX_REQUESTS] = r;
	c->fifo_count++;
}

void cruxn_fifo_pop(struct cruxn_base *c)
{
	c->fifo_head = (c->fifo_head + 1) % CRUXN_NET_MAX_REQUESTS;
	c->fifo_count--;
}

bool cruxn_connecting_register(void *st)
{
	bool ok = false;
	pthread_mutex_lock(&cruxn_ctx.lock);
	for (size_t i = 0; i < sizeof(cruxn_ctx.connecting) / sizeof(cruxn_ctx.connecting[0]);
	     i++) {
		if (!cruxn_ctx.connecting[i]) {
			cruxn_ctx.connecting[i] = st;
			ok = true;
			break;
		}
	}
	pthread_mutex_unlock(&cruxn_ctx.lock);
	return ok;
}

bool cruxn_connecting_find(const void *st, bool remove)
{
	bool found = false;
	pthread_mutex_lock(&cruxn_ctx.lock);
	for (size_t i = 0; i < sizeof(cruxn_ctx.connecting) / sizeof(cruxn_ctx.connecting[0]);
	     i++) {
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

bool cruxn_route_equal(const struct cruxn_route *a, const struct cruxn_route *b)
{
	return a->path_id == b->path_id && a->nports == b->nports &&
	       memcmp(a->ports, b->ports, sizeof(a->ports)) == 0;
}

uint16_t cruxn_route_port(const struct cruxn_route *r, int i)
{
	if (r->path_id == CRUX_PATH_NONE || r->nports == 0)
		return 0;
	return r->ports[i % r->nports];
}

static bool class_equal(const struct cruxn_class *a, const struct cruxn_class *b)
{
	return a->tos == b->tos && a->prio == b->prio && a->level == b->level && a->sl == b->sl;
}

/* ---- connection set-up ---------------------------------------------------- */

cruxn_result_t cruxn_listen(int dev, void *handle, void **listen_comm)
{
	if (!handle || !listen_comm || dev < 0 || dev >= cruxn_ndevs())
		return CRUXN_INVALID_ARGUMENT;
	return to_result(ops_now()->listen(dev, handle, listen_comm));
}

cruxn_result_t cruxn_connect(int dev, int traffic_class, void *handle, void **send_comm)
{
	struct cruxn_base *c = NULL;
	crux_status_t st;

	if (!handle || !send_comm || dev < 0 || dev >= cruxn_ndevs())
		return CRUXN_INVALID_ARGUMENT;
	*send_comm = NULL;
	st = ops_now()->connect(dev, traffic_class, handle, &c);
	if (st == CRUX_OK)
		*send_comm = c;
	return to_result(st);
}

cruxn_result_t cruxn_accept(void *listen_comm, void **recv_comm)
{
	struct cruxn_base *c = NULL;
	crux_status_t st;

	if (!listen_comm || !recv_comm)
		return CRUXN_INVALID_ARGUMENT;
	*recv_comm = NULL;
	st = ops_now()->accept(listen_comm, &c);
	if (st == CRUX_OK)
		*recv_comm = c;
	return to_result(st);
}

cruxn_result_t cruxn_close_listen(void *listen_comm)
{
	if (!listen_comm)
		return CRUXN_INVALID_ARGUMENT;
	return to_result(ops_now()->close_listen(listen_comm));
}

static struct cruxn_base *comm_of(void *comm)
{
	struct cruxn_base *c = comm;
	if (!c || (c->magic != CRUXN_SEND_MAGIC && c->magic != CRUXN_RECV_MAGIC))
		return NULL;
	return c;
}

cruxn_result_t cruxn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct cruxn_base *c = comm_of(comm);

	if (!c || !mhandle)
		return CRUXN_INVALID_ARGUMENT;
	return to_result(c->ops->reg_mr(c, data, size, type, 0, -1, mhandle));
}

cruxn_result_t cruxn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				   int fd, void **mhandle)
{
	struct cruxn_base *c = comm_of(comm);

	if (!c || !mhandle)
		return CRUXN_INVALID_ARGUMENT;
	return to_result(c->ops->reg_mr(c, data, size, type, offset, fd, mhandle));
}

cruxn_result_t cruxn_dereg_mr(void *comm, void *mhandle)
{
	struct cruxn_base *c = comm_of(comm);

	if (!mhandle)
		return CRUXN_SUCCESS;
	if (!c)
		return CRUXN_INVALID_ARGUMENT;
	return to_result(c->ops->dereg_mr(c, mhandle));
}

/* ---- data path -------------------------------------------------------------- */

/* isend takes nothing now: NCCL retries (an error if the comm failed meanwhile); unlocks. */
static cruxn_result_t not_now(struct cruxn_base *c, void **request)
{
	*request = NULL;
	pthread_mutex_unlock(&c->lock);
	return atomic_load(&c->error) ? CRUXN_REMOTE_ERROR : CRUXN_SUCCESS;
}

cruxn_result_t cruxn_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			   void **request)
{
	struct cruxn_base *c = send_comm;
	struct cruxn_req *r;
	cruxn_result_t rc;

	if (!c || !request || c->magic != CRUXN_SEND_MAGIC || (size > 0 && !data))
		return CRUXN_INVALID_ARGUMENT;
	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->error) || c->peer_closed) {
		pthread_mutex_unlock(&c->lock);
		return CRUXN_REMOTE_ERROR;
	}
	/* the receiver has not posted: NCCL retries, nothing taken, no decision read */
	if (c->ops->peer_ready && !c->ops->peer_ready(c))
		return not_now(c, request);
	r = req_free(c);
	if (!r) {
		*request = NULL; /* 32 in flight: NCCL retries later */
		pthread_mutex_unlock(&c->lock);
		return CRUXN_SUCCESS;
	}
	/* Message boundary: the decision is taken once per message, before any byte moves. */
	if (cruxn_tag_refresh(&c->tag)) {
		bool cls = !class_equal(&c->tag.cls, &c->marked);
		bool route = !cruxn_route_equal(&c->tag.route, &c->route_now);
		if (cls || route)
			c->ops->boundary(c, cls, route);
	}
	/* a lane is being built or moved: NCCL retries, nothing taken */
	if (c->ops->send_ready && !c->ops->send_ready(c))
		return not_now(c, request);
	req_take(c, r);
	r->n = 1;
	r->data[0] = data;
	r->cap[0] = size;
	r->got[0] = size;
	r->tags[0] = tag;
	r->mh[0] = mhandle;
	r->level = c->tag.cls.level;
	rc = post_result(c, r, c->ops->post_send(c, r), "posting a send", request);
	if (*request) {
		cruxn_busy_req_begin(&r->busy);
		atomic_fetch_add_explicit(&c->stats->tx[r->level], size, memory_order_relaxed);
		if (c->nctx)
			cruxn_count_tx_kind(c->nctx, size);
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

cruxn_result_t cruxn_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
			   const int *tags, void **mhandles, void **request)
{
	struct cruxn_base *c = recv_comm;
	struct cruxn_req *r;
	cruxn_result_t rc;

	if (!c || !request || c->magic != CRUXN_RECV_MAGIC || n < 1 || n > CRUXN_NET_MAX_RECVS ||
	    !data || !sizes)
		return CRUXN_INVALID_ARGUMENT;
	for (int i = 0; i < n; i++) {
		/* A message would be written through it later, on another thread. */
		if (sizes[i] > 0 && !data[i])
			return CRUXN_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(&c->lock);
	if (atomic_load(&c->error)) {
		pthread_mutex_unlock(&c->lock);
		return CRUXN_REMOTE_ERROR;
	}
	r = cruxn_req_get(c);
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
		r->mh[i] = mhandles ? mhandles[i] : NULL;
	}
	rc = post_result(c, r, c->ops->post_recv(c, r), "posting a receive", request);
	if (*request)
		cruxn_busy_req_begin(&r->busy);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

cruxn_result_t cruxn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			    void **request)
{
	struct cruxn_base *c = recv_comm;
	struct cruxn_req *r = NULL;
	crux_status_t st;

	if (!c || !request || c->magic != CRUXN_RECV_MAGIC)
		return CRUXN_INVALID_ARGUMENT;
	*request = NULL;
	if (!c->ops->flush)
		return CRUXN_SUCCESS;
	pthread_mutex_lock(&c->lock);
	st = c->ops->flush(c, n, data, sizes, mhandles, &r);
	pthread_mutex_unlock(&c->lock);
	if (st == CRUX_OK)
		*request = r;
	return to_result(st);
}

cruxn_result_t cruxn_test(void *request, int *done, int *sizes)
{
	struct cruxn_req *r = request;
	struct cruxn_base *c;
	cruxn_result_t rc = CRUXN_SUCCESS;

	if (!r || !done || r->magic != CRUXN_REQ_MAGIC || !r->used)
		return CRUXN_INVALID_ARGUMENT;
	c = r->comm;
	pthread_mutex_lock(&c->lock);
	if (c->ops->test(c, r)) {
		if (sizes)
			for (int i = 0; i < r->n; i++)
				sizes[i] = (int)(r->got[i] > 0x7fffffff ? 0x7fffffff : r->got[i]);
		if (c->ops->req_release)
			c->ops->req_release(c, r);
		cruxn_busy_req_end(&r->busy);
		r->used = false;
		*done = 1;
	} else {
		*done = 0;
		if (atomic_load(&c->error)) {
			rc = CRUXN_REMOTE_ERROR;
		} else if (c->peer_closed && c->ops->req_orphaned(r)) {
			cruxn_comm_fail(c, ECONNRESET, "peer closed the connection");
			rc = CRUXN_REMOTE_ERROR;
		}
	}
	pthread_mutex_unlock(&c->lock);
	/*
	 * NCCL's proxy polls test() in a tight loop; a transport whose own
	 * threads move the bytes (sockets) gets the core back for them. The
	 * NIC needs no such help: no system call on the verbs path.
	 */
	if (!*done && rc == CRUXN_SUCCESS && c->ops->yield_in_test)
		sched_yield();
	return rc;
}

/* Requests a closing connection never completed leave the busy time. */
static void busy_forget(struct cruxn_base *c)
{
	for (int i = 0; i < CRUXN_NET_MAX_REQUESTS; i++)
		if (c->reqs[i].used)
			cruxn_busy_req_end(&c->reqs[i].busy);
}

cruxn_result_t cruxn_close_send(void *send_comm)
{
	struct cruxn_base *c = send_comm;
	struct cruxn_comm_ctx *x;

	if (!c || c->magic != CRUXN_SEND_MAGIC)
		return CRUXN_INVALID_ARGUMENT;
	x = c->nctx;
	c->nctx = NULL;
	busy_forget(c);
	c->ops->destroy(c);
	cruxn_comm_ctx_put(x);
	return CRUXN_SUCCESS;
}

cruxn_result_t cruxn_close_recv(void *recv_comm)
{
	struct cruxn_base *c = recv_comm;

	if (!c || c->magic != CRUXN_RECV_MAGIC)
		return CRUXN_INVALID_ARGUMENT;
	busy_forget(c);
	c->ops->destroy(c);
	return CRUXN_SUCCESS;
}
