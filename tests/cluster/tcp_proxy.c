/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A TCP proxy for one host's etcd connections, to break them the ways a
 * network does without telling anyone (the cluster fault tests):
 *   tcp-proxy LISTEN_PORT TARGET_PORT   (127.0.0.1; prints "ready" when listening)
 *   SIGUSR1  drop: every open connection goes silent for good (nothing is
 *            forwarded or closed either way, as after a conntrack or load
 *            balancer idle timeout without RST); new connections work
 *   SIGUSR2  blackhole: as SIGUSR1, and new connections are accepted but
 *            silent too (a host cut off from etcd)
 *   SIGHUP   heal: new connections work again (silent ones stay silent)
 *   SIGTERM  exit
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXC 256

struct conn {
	int a, b;    /* client side, target side */
	bool silent; /* kept open, never forwarded */
};

static volatile sig_atomic_t drop_req, hole, heal_req, quit;

static void on_sig(int s)
{
	if (s == SIGUSR1)
		drop_req = 1;
	else if (s == SIGUSR2)
		hole = 1, drop_req = 1;
	else if (s == SIGHUP)
		heal_req = 1;
	else
		quit = 1;
}

static int dial(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	struct conn c[MAXC];
	size_t n = 0;
	int one = 1, lfd, target;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct sigaction act;

	if (argc != 3) {
		fprintf(stderr, "usage: tcp-proxy LISTEN_PORT TARGET_PORT\n");
		return 2;
	}
	target = atoi(argv[2]);
	memset(&act, 0, sizeof(act));
	act.sa_handler = on_sig;
	sigaction(SIGUSR1, &act, NULL);
	sigaction(SIGUSR2, &act, NULL);
	sigaction(SIGHUP, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	signal(SIGPIPE, SIG_IGN);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_port = htons((uint16_t)atoi(argv[1]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 64) != 0) {
		perror("tcp-proxy: listen");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (!quit) {
		struct pollfd p[1 + 2 * MAXC];
		size_t np = 0;

		if (drop_req) {
			for (size_t i = 0; i < n; i++)
				c[i].silent = true;
			drop_req = 0;
		}
		if (heal_req) {
			hole = 0;
			heal_req = 0;
		}
		p[np++] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (size_t i = 0; i < n; i++) {
			p[np++] =
			    (struct pollfd){.fd = c[i].silent ? -1 : c[i].a, .events = POLLIN};
			p[np++] =
			    (struct pollfd){.fd = c[i].silent ? -1 : c[i].b, .events = POLLIN};
		}
		if (poll(p, np, 200) < 0) {
			if (errno == EINTR)
				continue;
			perror("tcp-proxy: poll");
			return 1;
		}
		size_t polled = n; /* a connection accepted below has no entry in p yet */
		if (p[0].revents & POLLIN) {
			int a = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (a >= 0 && n < MAXC) {
				int b = hole ? -1 : dial(target);
				if (hole || b >= 0) {
					c[n++] = (struct conn){.a = a, .b = b, .silent = hole};
				} else {
					fprintf(stderr, "tcp-proxy: cannot reach port %d: %s\n",
						target, strerror(errno));
					close(a);
				}
			} else if (a >= 0) {
				close(a);
			}
		}
		for (size_t i = 0, k = 1; i < polled; i++, k += 2) {
			for (int side = 0; side < 2; side++) {
				char buf[65536];
				int from = side ? c[i].b : c[i].a, to = side ? c[i].a : c[i].b;
				if (!(p[k + (size_t)side].revents & (POLLIN | POLLHUP | POLLERR)))
					continue;
				ssize_t r = read(from, buf, sizeof(buf));
				if (r <= 0) {
					c[i].silent = false;
					close(c[i].a);
					if (c[i].b >= 0)
						close(c[i].b);
					c[i].a = c[i].b = -1;
					break;
				}
				for (ssize_t off = 0; off < r;) {
					ssize_t w = write(to, buf + off, (size_t)(r - off));
					if (w <= 0)
						break;
					off += w;
				}
			}
		}
		/* forget closed connections (poll indices are rebuilt each round) */
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (c[i].a >= 0)
				c[m++] = c[i];
		n = m;
	}
	return 0;
}
