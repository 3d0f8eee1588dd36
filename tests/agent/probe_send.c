/* SPDX-License-Identifier: Apache-2.0 */
/*
 * probe-send tcp|udp PEER DSTPORT SRCPORT COUNT: send COUNT ordinary packets
 * (TCP SYNs, or UDP datagrams) with a normal TTL from one source port, so a
 * test can see which path the fabric gives that port.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_in dst, src;
	int udp, count, one = 1;

	if (argc != 6) {
		fprintf(stderr, "usage: probe-send tcp|udp PEER DSTPORT SRCPORT COUNT\n");
		return 2;
	}
	udp = !strcmp(argv[1], "udp");
	memset(&dst, 0, sizeof(dst));
	memset(&src, 0, sizeof(src));
	dst.sin_family = src.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1) {
		fprintf(stderr, "probe-send: bad address %s\n", argv[2]);
		return 2;
	}
	dst.sin_port = htons((uint16_t)atoi(argv[3]));
	src.sin_port = htons((uint16_t)atoi(argv[4]));
	count = atoi(argv[5]);
	for (int i = 0; i < count; i++) {
		int fd = socket(AF_INET, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK, 0);
		struct pollfd p;

		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
		    bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0) {
			fprintf(stderr, "probe-send: port %s: %s\n", argv[4], strerror(errno));
			return 1;
		}
		if (udp) {
			if (sendto(fd, "x", 1, 0, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
				fprintf(stderr, "probe-send: sendto: %s\n", strerror(errno));
				return 1;
			}
		} else if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0 &&
			   errno != EINPROGRESS) {
			fprintf(stderr, "probe-send: connect: %s\n", strerror(errno));
			return 1;
		}
		/* TCP: wait for the RST (or the connection) so the port is free again */
		p.fd = fd;
		p.events = POLLOUT;
		if (!udp)
			poll(&p, 1, 500);
		close(fd);
	}
	return 0;
}
