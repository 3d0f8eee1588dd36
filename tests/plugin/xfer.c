/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building blocks of the namespace tests: a verified bulk transfer in two
 * phases (the test changes the decision table in between) and a path probe.
 */
#include <arpa/inet.h>
#include <errno.h>
/* linux/errqueue.h uses struct timespec without including time.h. */
#include <time.h>

#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netdrv.h"

static int file_exists(const char *dir, const char *name)
{
	char p[512];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &sb) == 0;
}

static int touch(const char *dir, const char *name)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	if (!f)
		return -1;
	fclose(f);
	return 0;
}

static void *init_ctx(const cruxn_net_v12_t *net)
{
	void *ctx = NULL;
	cruxn_comm_config_t cfg = {.trafficClass = CRUXN_NET_TRAFFIC_CLASS_UNDEF};
	if (net->init(&ctx, 1, &cfg, NULL, NULL) != CRUXN_SUCCESS)
		return NULL;
	return ctx;
}

/* xfer-recv DIR: receive and verify until a 0-byte message. */
static int xfer_recv(const char *dir, const cruxn_net_v12_t *net)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE], p[512], q[512];
	void *ctx = init_ctx(net), *l = NULL, *r = NULL;
	size_t cap = 64u << 20, got = 0, total = 0;
	char *b = malloc(cap);
	uint32_t idx = 0;
	FILE *f;

	if (!ctx || !b || net->listen(ctx, 0, handle, &l) != CRUXN_SUCCESS) {
		fprintf(stderr, "xfer-recv: init/listen failed\n");
		return 1;
	}
	snprintf(p, sizeof(p), "%s/handle.tmp", dir);
	snprintf(q, sizeof(q), "%s/handle", dir);
	f = fopen(p, "wb");
	if (!f || fwrite(handle, sizeof(handle), 1, f) != 1 || fclose(f) != 0 ||
	    rename(p, q) != 0) {
		fprintf(stderr, "xfer-recv: cannot write %s\n", q);
		return 1;
	}
	if (netdrv_accept(net, l, &r) != 0) {
		fprintf(stderr, "xfer-recv: accept failed\n");
		return 1;
	}
	for (;;) {
		if (netdrv_recv(net, r, b, cap, 0, &got, 60000) != 0) {
			fprintf(stderr, "xfer-recv: receive %u failed\n", idx);
			return 1;
		}
		if (got == 0)
			break;
		if (netdrv_check(b, got, idx) != 0) {
			fprintf(stderr, "xfer-recv: message %u corrupt or out of order\n", idx);
			return 1;
		}
		idx++;
		total += got;
	}
	printf("xfer-recv: %u messages, %zu bytes verified\n", idx, total);
	net->closeRecv(r);
	net->closeListen(l);
	net->finalize(ctx);
	free(b);
	return 0;
}

/* Publishes how many messages have gone, so a test can see progress. */
static void write_count(const char *dir, uint32_t n)
{
	char p[512], q[512];
	snprintf(p, sizeof(p), "%s/sent.tmp", dir);
	snprintf(q, sizeof(q), "%s/sent", dir);
	FILE *f = fopen(p, "w");
	if (!f)
		return;
	fprintf(f, "%u\n", n);
	if (fclose(f) == 0)
		rename(p, q);
}

/*
 * xfer-send DIR SIZE COUNT1 COUNT2 [hold]: phase 1, wait for DIR/phase2.go,
 * phase 2, stop. With "hold", phase 1 goes on past COUNT1 until DIR/phase1.stop
 * appears (at most two minutes), publishing its count in DIR/sent, so a test
 * can keep the transfer running for as long as it needs, on a fast machine too.
 */
static int xfer_send(const char *dir, size_t size, int n1, int n2, int hold,
		     const cruxn_net_v12_t *net)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE], p[512];
	void *ctx = init_ctx(net), *s = NULL;
	char *b = malloc(size ? size : 1);
	uint32_t idx = 0;
	FILE *f = NULL;

	snprintf(p, sizeof(p), "%s/handle", dir);
	for (int i = 0; i < 300 && !f; i++) {
		f = fopen(p, "rb");
		if (!f)
			usleep(100000);
	}
	if (!ctx || !b || !f || fread(handle, sizeof(handle), 1, f) != 1) {
		fprintf(stderr, "xfer-send: no handle at %s\n", p);
		return 1;
	}
	fclose(f);
	if (netdrv_connect(net, ctx, 0, handle, &s) != 0) {
		fprintf(stderr, "xfer-send: connect failed\n");
		return 1;
	}
	for (int phase = 0; phase < 2; phase++) {
		int n = phase ? n2 : n1;
		int held = phase == 0 && hold;
		time_t until = time(NULL) + 120;
		for (int k = 0; k < n || held; k++, idx++) {
			if (held && k >= n && k % 16 == 0) {
				write_count(dir, idx);
				if (file_exists(dir, "phase1.stop"))
					break;
				if (time(NULL) > until) {
					fprintf(stderr, "xfer-send: no phase1.stop in 120 s\n");
					return 1;
				}
			}
			netdrv_fill(b, size, idx);
			if (netdrv_send(net, s, b, size, 0, 60000) != 0) {
				fprintf(stderr, "xfer-send: message %u failed\n", idx);
				return 1;
			}
		}
		if (phase == 0) {
			touch(dir, "phase1.done");
			for (int i = 0; i < 600 && !file_exists(dir, "phase2.go"); i++)
				usleep(50000);
			if (!file_exists(dir, "phase2.go")) {
				fprintf(stderr, "xfer-send: no phase2.go\n");
				return 1;
			}
		}
	}
	if (netdrv_send(net, s, b, 0, 0, 60000) != 0)
		return 1;
	printf("xfer-send: %u messages of %zu bytes sent\n", idx, size);
	net->closeSend(s);
	net->finalize(ctx);
	free(b);
	return 0;
}

int cruxn_conf_xfer(int argc, char **argv, const cruxn_net_v12_t *net);
int cruxn_conf_xfer(int argc, char **argv, const cruxn_net_v12_t *net)
{
	if (strcmp(argv[0], "xfer-recv") == 0 && argc >= 2)
		return xfer_recv(argv[1], net);
	if (strcmp(argv[0], "xfer-send") == 0 && argc >= 5)
		return xfer_send(argv[1], strtoull(argv[2], NULL, 0), atoi(argv[3]), atoi(argv[4]),
				 argc >= 6 && strcmp(argv[5], "hold") == 0, net);
	fprintf(stderr, "usage: xfer-recv DIR | xfer-send DIR SIZE COUNT1 COUNT2 [hold]\n");
	return 2;
}

/*
 * probe SRC DST DPORT PORT0 COUNT TTL: for each source port, a TCP SYN with
 * a TTL that expires at the spine; the ICMP error names the router.
 */
int cruxn_conf_probe(int argc, char **argv);
int cruxn_conf_probe(int argc, char **argv)
{
	struct sockaddr_in src, dst;
	int port0, count, ttl, one = 1;

	if (argc < 7) {
		fprintf(stderr, "usage: probe SRC DST DPORT PORT0 COUNT TTL\n");
		return 2;
	}
	memset(&src, 0, sizeof(src));
	memset(&dst, 0, sizeof(dst));
	src.sin_family = dst.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[1], &src.sin_addr) != 1 ||
	    inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1)
		return 2;
	dst.sin_port = htons((uint16_t)atoi(argv[3]));
	port0 = atoi(argv[4]);
	count = atoi(argv[5]);
	ttl = atoi(argv[6]);
	for (int p = port0; p < port0 + count; p++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		char off[INET_ADDRSTRLEN] = "-";
		if (fd < 0)
			return 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
		setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl));
		setsockopt(fd, IPPROTO_IP, IP_RECVERR, &one, sizeof(one));
		src.sin_port = htons((uint16_t)p);
		if (bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0) {
			close(fd);
			continue;
		}
		(void)connect(fd, (struct sockaddr *)&dst, sizeof(dst));
		for (int tries = 0; tries < 10 && off[0] == '-'; tries++) {
			struct pollfd pf = {.fd = fd, .events = POLLERR};
			char cbuf[512], dbuf[64];
			struct iovec iov = {dbuf, sizeof(dbuf)};
			struct msghdr mh = {.msg_iov = &iov,
					    .msg_iovlen = 1,
					    .msg_control = cbuf,
					    .msg_controllen = sizeof(cbuf)};
			if (poll(&pf, 1, 100) <= 0)
				continue;
			if (recvmsg(fd, &mh, MSG_ERRQUEUE) < 0)
				continue;
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
				if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR) {
					struct sock_extended_err *ee = (void *)CMSG_DATA(c);
					struct sockaddr_in *o = (void *)SO_EE_OFFENDER(ee);
					inet_ntop(AF_INET, &o->sin_addr, off, sizeof(off));
				}
			}
		}
		printf("%d %s\n", p, off);
		close(fd);
	}
	return 0;
}
