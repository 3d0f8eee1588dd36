/* SPDX-License-Identifier: Apache-2.0 */
/* Process side of the attach protocol (crux/attach.h): never blocks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common_int.h"
#include "crux/attach.h"
#include "crux/log.h"

struct crux_agent_conn {
	int sock;
	bool answered;
};

ssize_t crux_sock_send(int sock, const void *buf, size_t len, int fd)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof(ctl.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

ssize_t crux_sock_recv(int sock, void *buf, size_t len, int *fd, int *nfds)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl.b,
			   .msg_controllen = sizeof(ctl.b)};
	*fd = -1;
	*nfds = 0;
	ssize_t n = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = f;
			else
				close(f); /* more than one: the decoder refuses by count */
			(*nfds)++;
		}
	}
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		*nfds += 100; /* oversized: never a valid message */
	return n;
}

crux_status_t crux_agent_conn_open(const char *dir, struct crux_prof_handle *prof,
				   struct crux_agent_conn **out, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct crux_wire_hello h;
	crux_status_t st;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, CRUX_AGENT_SOCK) >=
	    sizeof(sa.sun_path)) {
		crux_set_err(err, errlen, "%s/%s is too long for a socket path", dir,
			     CRUX_AGENT_SOCK);
		return CRUX_ERR_INVAL;
	}
	memset(&h, 0, sizeof(h));
	h.magic = CRUX_WIRE_MAGIC;
	h.version = CRUX_WIRE_VERSION;
	h.type = CRUX_WIRE_HELLO;
	h.size = sizeof(h);
	h.role = prof ? CRUX_ROLE_RANK : CRUX_ROLE_OBSERVER;
	h.pid = (int32_t)getpid();
	crux_proc_start_time(getpid(), &h.start_time);
	if (prof) {
		/* The hello claims what the record says; the agent checks both. */
		struct crux_prof_identity id;
		crux_prof_identity_of(prof, &id);
		h.job_key = id.job_key;
		memcpy(h.job_id, id.job_id, sizeof(h.job_id));
		h.job_id[sizeof(h.job_id) - 1] = '\0';
	}
	struct crux_agent_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return CRUX_ERR_NOMEM;
	c->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (c->sock < 0) {
		crux_set_err(err, errlen, "socket: %s", strerror(errno));
		st = CRUX_ERR_IO;
		goto fail;
	}
	if (connect(c->sock, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		crux_set_err(err, errlen, "no agent at %s: %s%s", sa.sun_path, strerror(e),
			     e == ENOENT || e == ECONNREFUSED ? " (is cruxd running?)" : "");
		st = (e == ENOENT || e == ECONNREFUSED) ? CRUX_ERR_NOENT
		     : (e == EACCES || e == EPERM)	? CRUX_ERR_PERM
							: CRUX_ERR_IO;
		goto fail;
	}
	if (crux_sock_send(c->sock, &h, sizeof(h), prof ? crux_prof_handle_fd(prof) : -1) !=
	    (ssize_t)sizeof(h)) {
		crux_set_err(err, errlen, "cannot send to the agent: %s", strerror(errno));
		st = CRUX_ERR_REMOTE;
		goto fail;
	}
	*out = c;
	return CRUX_OK;
fail:
	if (c->sock >= 0)
		close(c->sock);
	free(c);
	return st;
}

crux_status_t crux_agent_conn_poll(struct crux_agent_conn *c, struct crux_dt_reader **table,
				   char *err, size_t errlen)
{
	struct crux_wire_reply r;
	char buf[sizeof(r) + 1];
	char why[256];
	int fd, nfds;
	crux_status_t st;

	if (c->answered) {
		crux_set_err(err, errlen, "the agent already answered");
		return CRUX_ERR_INVAL;
	}
	ssize_t n = crux_sock_recv(c->sock, buf, sizeof(buf), &fd, &nfds);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return CRUX_ERR_BUSY;
	if (n <= 0) {
		crux_set_err(err, errlen, "the agent closed the connection");
		return CRUX_ERR_REMOTE;
	}
	c->answered = true;
	st = crux_wire_decode_reply(buf, (size_t)n, nfds, &r, why, sizeof(why));
	if (st != CRUX_OK) {
		crux_set_err(err, errlen, "bad answer from the agent: %s", why);
		st = CRUX_ERR_REMOTE;
	} else if (r.type == CRUX_WIRE_REFUSE) {
		crux_set_err(err, errlen, "cruxd (pid %u) refused this process: %s", r.agent_pid,
			     r.reason);
		st = CRUX_ERR_PERM;
	} else {
		st = crux_dt_reader_open_fd(fd, table, err, errlen);
		if (st != CRUX_OK)
			st = CRUX_ERR_REMOTE;
	}
	if (fd >= 0)
		close(fd);
	return st;
}

crux_status_t crux_agent_conn_wait(struct crux_agent_conn *c, int timeout_ms,
				   struct crux_dt_reader **table, char *err, size_t errlen)
{
	uint64_t end = crux_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	for (;;) {
		crux_status_t st = crux_agent_conn_poll(c, table, err, errlen);
		uint64_t now = crux_now_ns();
		if (st != CRUX_ERR_BUSY)
			return st;
		if (now >= end) {
			crux_set_err(err, errlen, "the agent did not answer within %d ms",
				     timeout_ms);
			return CRUX_ERR_TIMEOUT;
		}
		struct pollfd p = {.fd = c->sock, .events = POLLIN};
		poll(&p, 1, (int)((end - now) / 1000000ull) + 1);
	}
}

bool crux_agent_conn_alive(struct crux_agent_conn *c)
{
	struct pollfd p = {.fd = c->sock, .events = POLLIN};
	if (poll(&p, 1, 0) <= 0)
		return true;
	if (p.revents & (POLLHUP | POLLERR))
		return false;
	char b;
	ssize_t n = recv(c->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

void crux_agent_conn_close(struct crux_agent_conn *c)
{
	if (!c)
		return;
	close(c->sock);
	free(c);
}
