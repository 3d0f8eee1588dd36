/* SPDX-License-Identifier: Apache-2.0 */
/* The bootstrap channel both transports share (boot.h). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "boot.h"
#include "crux/log.h"
#include "cruxn.h"

int cruxn_boot_nifs(void)
{
	return cruxn_ctx.ndevs;
}

const struct cruxn_dev *cruxn_boot_if(int i)
{
	return i >= 0 && i < cruxn_ctx.ndevs ? &cruxn_ctx.devs[i] : NULL;
}

crux_status_t cruxn_boot_listen(const struct cruxn_dev *ifc, uint32_t magic, uint16_t version,
				uint64_t nonce, void *handle, int *out)
{
	struct cruxn_boot_handle *h = handle;
	union crux_sockaddr a;
	socklen_t alen = sizeof(a);
	int fd = -1;

	if (cruxn_sock_open_bound(&ifc->addr.sa, ifc->addrlen, 0, false, &fd) != CRUX_OK) {
		crux_err("cannot bind a listening socket on %s: %m", ifc->name);
		return CRUX_ERR_IO;
	}
	if (listen(fd, 128) != 0 || getsockname(fd, &a.sa, &alen) != 0) {
		crux_err("cannot listen on %s: %m", ifc->name);
		close(fd);
		return CRUX_ERR_IO;
	}
	memset(handle, 0, CRUXN_NET_HANDLE_MAXSIZE);
	h->magic = magic;
	h->version = version;
	h->family = a.sa.sa_family;
	if (a.sa.sa_family == AF_INET) {
		memcpy(h->addr, &a.sin.sin_addr, 4);
		h->port = a.sin.sin_port;
	} else {
		memcpy(h->addr, &a.sin6.sin6_addr, 16);
		h->port = a.sin6.sin6_port;
		h->scope_id = a.sin6.sin6_scope_id;
	}
	h->nonce = nonce;
	*out = fd;
	return CRUX_OK;
}

crux_status_t cruxn_boot_handle_peer(const void *handle, uint32_t magic, uint16_t version,
				     union crux_sockaddr *peer, socklen_t *len)
{
	const struct cruxn_boot_handle *h = handle;

	if (h->magic != magic || h->version != version ||
	    (h->family != AF_INET && h->family != AF_INET6) || h->port == 0)
		return CRUX_ERR_INVAL;
	memset(peer, 0, sizeof(*peer));
	if (h->family == AF_INET) {
		peer->sin.sin_family = AF_INET;
		memcpy(&peer->sin.sin_addr, h->addr, 4);
		peer->sin.sin_port = h->port;
		*len = sizeof(peer->sin);
	} else {
		peer->sin6.sin6_family = AF_INET6;
		memcpy(&peer->sin6.sin6_addr, h->addr, 16);
		peer->sin6.sin6_port = h->port;
		peer->sin6.sin6_scope_id = h->scope_id;
		*len = sizeof(peer->sin6);
	}
	return CRUX_OK;
}

crux_status_t cruxn_boot_connect(const struct cruxn_dev *ifc, const struct sockaddr *peer,
				 socklen_t plen, uint16_t dport, uint16_t sport, int *out)
{
	union crux_sockaddr a;
	int fd = -1;

	if (plen > sizeof(a))
		return CRUX_ERR_INVAL;
	memcpy(&a, peer, plen);
	if (dport && a.sa.sa_family == AF_INET)
		a.sin.sin_port = htons(dport);
	else if (dport)
		a.sin6.sin6_port = htons(dport);
	if (cruxn_sock_open_bound(&ifc->addr.sa, ifc->addrlen, sport, sport != 0, &fd) != CRUX_OK)
		return CRUX_ERR_IO;
	if (connect(fd, &a.sa, plen) != 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return CRUX_ERR_IO;
	}
	(void)cruxn_sock_tune(fd, &cruxn_ctx.cfg);
	*out = fd;
	return CRUX_OK;
}

/* ---- pumps ---- */

int cruxn_boot_write_some(int fd, const void *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n =
		    send(fd, (const char *)buf + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
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

int cruxn_boot_read_some(int fd, void *buf, size_t len, size_t *off)
{
	while (*off < len) {
		ssize_t n = recv(fd, (char *)buf + *off, len - *off, MSG_DONTWAIT);
		if (n > 0) {
			*off += (size_t)n;
			continue;
		}
		if (n == 0)
			return CRUXN_BOOT_EOF;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EINTR)
			continue;
		return errno;
	}
	return 0;
}

int cruxn_boot_connect_poll(int fd, bool *done)
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

void cruxn_boot_close_gracefully(int fd)
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

/* ---- greetings ---- */

void cruxn_boot_greeter_init(struct cruxn_boot_greeter *g, size_t hello_len)
{
	g->hello_len = hello_len <= CRUXN_BOOT_HELLO_MAX ? hello_len : CRUXN_BOOT_HELLO_MAX;
	g->n = 0;
}

void cruxn_boot_greeter_close(struct cruxn_boot_greeter *g)
{
	for (int i = 0; i < g->n; i++)
		close(g->fd[i]);
	g->n = 0;
}

/* Forget entry i (its fd closed when asked); the last entry takes its place. */
static void greeter_drop(struct cruxn_boot_greeter *g, int i, bool close_fd)
{
	if (close_fd)
		close(g->fd[i]);
	g->n--;
	if (i != g->n) {
		g->fd[i] = g->fd[g->n];
		g->off[i] = g->off[g->n];
		g->since[i] = g->since[g->n];
		memcpy(g->hello[i], g->hello[g->n], g->hello_len);
	}
}

int cruxn_boot_greet(struct cruxn_boot_greeter *g, int listen_fd,
		     enum cruxn_boot_verdict (*judge)(void *arg, int fd, const void *hello),
		     void *arg)
{
	int rc = 0;

	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNABORTED)
				rc = errno;
			break;
		}
		if (g->n >= CRUXN_BOOT_PEND) {
			/* Full of peers that never greeted: make room by dropping the oldest. */
			int old = 0;
			for (int i = 1; i < g->n; i++)
				if (g->since[i] < g->since[old])
					old = i;
			greeter_drop(g, old, true);
		}
		g->fd[g->n] = fd;
		g->off[g->n] = 0;
		g->since[g->n] = crux_now_ns();
		g->n++;
	}
	for (int i = 0; i < g->n;) {
		int e = cruxn_boot_read_some(g->fd[i], g->hello[i], g->hello_len, &g->off[i]);
		if (e) {
			greeter_drop(g, i, true);
			continue;
		}
		if (g->off[i] < g->hello_len) {
			i++;
			continue;
		}
		switch (judge(arg, g->fd[i], g->hello[i])) {
		case CRUXN_BOOT_TAKE:
			greeter_drop(g, i, false);
			break;
		case CRUXN_BOOT_REJECT:
			greeter_drop(g, i, true);
			break;
		default:
			i++;
			break;
		}
	}
	return rc;
}
