/* SPDX-License-Identifier: Apache-2.0 */
/* Socket helpers: marking, tuning, binding. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "crux/log.h"
#include "cruxn.h"

/* Returns 0, or the errno of the first option that failed. */
int cruxn_sock_set_class(int fd, int family, const struct cruxn_class *cls)
{
	int tos = cls->tos, prio = cls->prio, rc = 0;

	if (family == AF_INET6) {
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos)) != 0)
			rc = errno;
		/* A v4-mapped peer on a v6 socket is sent with IP_TOS. */
		(void)setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	} else if (setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) != 0) {
		rc = errno;
	}
	/* Setting IP_TOS resets sk_priority on Linux, so SO_PRIORITY goes last. */
	if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, sizeof(prio)) != 0) {
		crux_log_once(&cruxn_ctx.once_prio_fail, CRUX_LOG_WARN,
			      "SO_PRIORITY %d refused (%s): priorities above 6 need CAP_NET_ADMIN; "
			      "DSCP marking still applies",
			      prio, strerror(errno));
	}
	return rc;
}

crux_status_t cruxn_sock_tune(int fd, const struct cruxn_config *cfg)
{
	int one = 1;
	unsigned int user_timeout = (unsigned int)cfg->timeout_ms;
	int idle = (int)(cfg->timeout_ms / 3000);
	int intvl, cnt = 3;

	if (idle < 1)
		idle = 1;
	intvl = idle;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		return CRUX_ERR_IO;
	/* Bounded failure: unacknowledged data or a silent peer end the connection. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	if (cfg->sockbuf > 0) {
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &cfg->sockbuf, sizeof(cfg->sockbuf));
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &cfg->sockbuf, sizeof(cfg->sockbuf));
	}
	return CRUX_OK;
}

crux_status_t cruxn_sock_open_bound(const struct sockaddr *local, socklen_t len, uint16_t port,
				    bool reuse, int *out)
{
	union crux_sockaddr a;
	int fd, one = 1;

	if (len > sizeof(a))
		return CRUX_ERR_INVAL;
	memcpy(&a, local, len);
	if (a.sa.sa_family == AF_INET)
		a.sin.sin_port = htons(port);
	else
		a.sin6.sin6_port = htons(port);
	fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return CRUX_ERR_IO;
	if (reuse) {
		/* Route ports are shared by the data sockets of every connection to that peer. */
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	}
	if (bind(fd, &a.sa, len) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return CRUX_ERR_IO;
	}
	*out = fd;
	return CRUX_OK;
}
