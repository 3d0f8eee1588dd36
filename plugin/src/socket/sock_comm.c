/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket transport's plumbing: non-blocking socket I/O, the helper
 * threads that stream striped data, socket sets (one per path epoch) and
 * the connection object. See sock_transport.h for the wire format.
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
#include "crux/clock.h"
#include "crux/log.h"
#include "cruxn.h"
#include "sock_transport.h"

#define HELPER_WAIT_MS 100

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
	pthread_mutex_lock(&c->wake_lock);
	atomic_fetch_add(&c->sleepers, 1);
	if (!atomic_load(&c->stop) && (atomic_load(&c->b.error) || !helper_has_work(c, id)))
		crux_cond_wait_ns(&c->wake, &c->wake_lock, HELPER_WAIT_MS * 1000000ull);
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

		if (atomic_load(&c->b.error)) {
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
					(void)cruxn_sock_set_class(t->fd, c->b.family, &t->cls);
					atomic_fetch_sub_explicit(&t->set->tasks, 1,
								  memory_order_release);
				} else {
					int e = c->b.is_send
						    ? cruxn_boot_write_some(t->fd, t->buf, t->len,
									    &t->off)
						    : cruxn_boot_read_some(t->fd, t->buf, t->len,
									   &t->off);
					if (e) {
						cruxn_comm_fail(
						    &c->b, e == CRUXN_BOOT_EOF ? ECONNRESET : e,
						    "data socket");
						break;
					}
					if (t->off < t->len) {
						pfd[npoll].fd = t->fd;
						pfd[npoll].events = c->b.is_send ? POLLOUT : POLLIN;
						pfd[npoll].revents = 0;
						npoll++;
						break;
					}
					atomic_fetch_sub_explicit(&t->set->tasks, 1,
								  memory_order_release);
					atomic_fetch_sub_explicit(&cruxn_skr(t->req)->pending, 1,
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
			(void)poll(pfd, (nfds_t)npoll,
				   c->nsocks > c->nthreads ? 1 : HELPER_WAIT_MS);
	}
	return NULL;
}

void cruxn_sk_queue_push(struct cruxn_comm *c, int idx, const struct cruxn_task *t)
{
	struct cruxn_queue *q = &c->q[idx];
	uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);

	q->ring[tail % CRUXN_QDEPTH] = *t;
	atomic_store(&q->tail, tail + 1);
}

void cruxn_sk_wake_helpers(struct cruxn_comm *c)
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
void cruxn_sk_set_close(struct cruxn_set *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nsocks; i++)
		if (s->fds[i] >= 0)
			cruxn_boot_close_gracefully(s->fds[i]);
	free(s);
}

struct cruxn_set *cruxn_sk_set_new(uint32_t epoch, int nsocks)
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
void cruxn_sk_reap_retired(struct cruxn_comm *c)
{
	struct cruxn_set **pp = &c->retired;

	while (*pp) {
		struct cruxn_set *s = *pp;
		if (atomic_load_explicit(&s->tasks, memory_order_acquire) == 0 &&
		    (!c->b.is_send || set_peer_closed(s))) {
			*pp = s->next;
			cruxn_sk_set_close(s);
		} else {
			pp = &s->next;
		}
	}
}

void cruxn_sk_retire_current(struct cruxn_comm *c, struct cruxn_set *next)
{
	c->cur->next = c->retired;
	c->retired = c->cur;
	c->cur = next;
}

/* ---- comm objects --------------------------------------------------------- */

void cruxn_sk_comm_destroy(struct cruxn_comm *c)
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
		cruxn_boot_close_gracefully(c->ctrl);
	if (c->data_listener >= 0)
		close(c->data_listener);
	cruxn_boot_greeter_close(&c->greet);
	cruxn_sk_set_close(c->cur);
	cruxn_sk_set_close(c->pending);
	for (s = c->retired; s; s = n) {
		n = s->next;
		cruxn_sk_set_close(s);
	}
	for (s = c->incoming; s; s = n) {
		n = s->next;
		cruxn_sk_set_close(s);
	}
	free(c->q);
	pthread_mutex_destroy(&c->wake_lock);
	pthread_cond_destroy(&c->wake);
	cruxn_base_fini(&c->b);
	free(c);
}

void cruxn_sk_destroy(struct cruxn_base *b)
{
	cruxn_sk_comm_destroy(cruxn_sk(b));
}

void cruxn_sk_wake(struct cruxn_base *b)
{
	struct cruxn_comm *c = cruxn_sk(b);

	pthread_mutex_lock(&c->wake_lock);
	pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->wake_lock);
}

crux_status_t cruxn_sk_comm_create(bool is_send, int dev, int nsocks, int family,
				   struct cruxn_comm **out)
{
	struct cruxn_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return CRUX_ERR_NOMEM;
	c->q = calloc((size_t)nsocks, sizeof(*c->q));
	if (!c->q) {
		free(c);
		return CRUX_ERR_NOMEM;
	}
	cruxn_base_init(&c->b, is_send, &cruxn_socket_ops, dev, family);
	c->ctrl = -1;
	c->data_listener = -1;
	cruxn_boot_greeter_init(&c->greet, sizeof(struct cruxn_hello));
	c->nsocks = nsocks;
	c->nthreads = cruxn_ctx.cfg.nthreads < nsocks ? cruxn_ctx.cfg.nthreads : nsocks;
	pthread_mutex_init(&c->wake_lock, NULL);
	crux_cond_init_monotonic(&c->wake);
	*out = c;
	return CRUX_OK;
}

crux_status_t cruxn_sk_comm_start_helpers(struct cruxn_comm *c)
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
