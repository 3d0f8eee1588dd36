/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxn-bench: the plugin's measurements (driven by bench/plugin/run.sh).
 *
 *   stream-recv DIR                       receive until a 0-byte message
 *   stream-send DIR SIZE SECONDS INFLIGHT throughput, prints "gbps X"
 *   pp-server DIR                         plugin ping-pong echo side
 *   pp-client DIR ITERS SIZE...           prints "rtt SIZE USEC" per size
 *                                         and "polls_per_rtt SIZE N"
 *   tcp-server PORT                       blocking TCP ping-pong echo side
 *   tcp-client HOST PORT ITERS SIZE...    prints "rtt SIZE USEC" per size
 *
 * Processes meet through files in DIR (listener handles), so the two sides
 * can run in different network namespaces. The ping-pong buffers are
 * registered with regMr on both communicators, as NCCL registers its own.
 * CRUXN_BENCH_IDLE_US=N makes the ping-pong sleep N us after a poll that
 * found nothing (for instruction counts under callgrind, where a spinning
 * poll would run until valgrind switches threads and count the wait, not
 * the work); 0, the default, spins as NCCL's proxy thread does.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netdrv.h"

static const cruxn_net_v12_t *net;

static void die(const char *msg)
{
	fprintf(stderr, "cruxn-bench: %s\n", msg);
	exit(1);
}

static void *init_ctx(void)
{
	void *ctx = NULL;
	cruxn_comm_config_t cfg = {.trafficClass = CRUXN_NET_TRAFFIC_CLASS_UNDEF};
	if (net->init(&ctx, 1, &cfg, NULL, NULL) != CRUXN_SUCCESS)
		die("plugin init failed");
	return ctx;
}

static void put_handle(const char *dir, const char *name, const char *h)
{
	char p[512], q[512];
	FILE *f;
	snprintf(p, sizeof(p), "%s/%s.tmp", dir, name);
	snprintf(q, sizeof(q), "%s/%s", dir, name);
	f = fopen(p, "wb");
	if (!f || fwrite(h, CRUXN_NET_HANDLE_MAXSIZE, 1, f) != 1 || fclose(f) != 0 ||
	    rename(p, q) != 0)
		die("cannot write a handle file");
}

static void get_handle(const char *dir, const char *name, char *h)
{
	char p[512];
	FILE *f = NULL;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	for (int i = 0; i < 300 && !f; i++) {
		f = fopen(p, "rb");
		if (!f)
			usleep(20000);
	}
	if (!f || fread(h, CRUXN_NET_HANDLE_MAXSIZE, 1, f) != 1)
		die("no handle file from the peer");
	fclose(f);
}

/* Both sides listen, publish, then connect to the other and accept. */
static void pair_up(const char *dir, const char *me, const char *peer, void *ctx, void **s,
		    void **r)
{
	char mine[CRUXN_NET_HANDLE_MAXSIZE], theirs[CRUXN_NET_HANDLE_MAXSIZE];
	void *l = NULL;
	if (net->listen(ctx, 0, mine, &l) != CRUXN_SUCCESS)
		die("listen failed");
	put_handle(dir, me, mine);
	get_handle(dir, peer, theirs);
	*s = *r = NULL;
	uint64_t t0 = netdrv_now_ns();
	while (!*s || !*r) {
		if (!*s && net->connect(ctx, 0, theirs, s, NULL) != CRUXN_SUCCESS)
			die("connect failed");
		if (!*r && net->accept(l, r, NULL) != CRUXN_SUCCESS)
			die("accept failed");
		if (netdrv_now_ns() - t0 > 20000000000ull)
			die("set-up timed out");
	}
	net->closeListen(l);
}

static double tv_ns(const struct timeval *tv)
{
	return (double)tv->tv_sec * 1e9 + (double)tv->tv_usec * 1e3;
}

static int stream_recv(const char *dir)
{
	void *ctx = init_ctx(), *s, *r;
	size_t cap = 64u << 20;
	char *b = malloc(cap * 2);
	void *reqs[2] = {NULL, NULL};
	int sizes[1];
	if (!b)
		die("malloc");
	pair_up(dir, "recv", "send", ctx, &s, &r);
	/* two receives posted at all times, as NCCL's pipelined steps do */
	for (uint64_t k = 0;; k++) {
		int slot = (int)(k % 2);
		void *data[1] = {b + (size_t)slot * cap};
		int tag = 0;
		if (k < 2) {
			while (!reqs[slot])
				if (net->irecv(r, 1, data, &cap, &tag, NULL, NULL, &reqs[slot]) !=
				    CRUXN_SUCCESS)
					die("irecv");
			continue;
		}
		slot = (int)((k - 2) % 2);
		if (netdrv_wait(net, reqs[slot], sizes, 60000) != 0)
			die("receive failed");
		reqs[slot] = NULL;
		if (sizes[0] == 0)
			break;
		data[0] = b + (size_t)slot * cap;
		while (!reqs[slot])
			if (net->irecv(r, 1, data, &cap, &tag, NULL, NULL, &reqs[slot]) !=
			    CRUXN_SUCCESS)
				die("irecv");
	}
	net->closeSend(s);
	net->closeRecv(r);
	net->finalize(ctx);
	free(b);
	return 0;
}

static int stream_send(const char *dir, size_t size, double seconds, int inflight)
{
	void *ctx = init_ctx(), *s, *r;
	char *b = malloc(size);
	void *reqs[32] = {0};
	uint64_t bytes = 0, t0, t1;
	struct rusage ru0, ru1;
	if (!b || inflight < 1 || inflight > 32)
		die("bad arguments");
	memset(b, 0x5a, size);
	pair_up(dir, "send", "recv", ctx, &s, &r);
	/* warm-up, then measure */
	for (int w = 0; w < 4; w++)
		if (netdrv_send(net, s, b, size, 0, 60000) != 0)
			die("send failed");
	getrusage(RUSAGE_SELF, &ru0);
	t0 = netdrv_now_ns();
	t1 = t0 + (uint64_t)(seconds * 1e9);
	for (uint64_t k = 0;; k++) {
		int slot = (int)(k % (uint64_t)inflight);
		if (reqs[slot]) {
			if (netdrv_wait(net, reqs[slot], NULL, 60000) != 0)
				die("send failed");
			reqs[slot] = NULL;
			bytes += size;
		}
		if (netdrv_now_ns() >= t1)
			break;
		while (!reqs[slot])
			if (net->isend(s, b, size, 0, NULL, NULL, &reqs[slot]) != CRUXN_SUCCESS)
				die("isend");
	}
	for (int k = 0; k < inflight; k++)
		if (reqs[k]) {
			if (netdrv_wait(net, reqs[k], NULL, 60000) != 0)
				die("send failed");
			bytes += size;
		}
	double dt = (double)(netdrv_now_ns() - t0) / 1e9;
	getrusage(RUSAGE_SELF, &ru1);
	if (netdrv_send(net, s, b, 0, 0, 60000) != 0)
		die("stop message");
	printf("gbps %.3f\n", (double)bytes * 8 / dt / 1e9);
	/* CPU time of this process per message: steadier than wall time on a shared machine */
	printf("cpu_ns_per_msg %.1f\n", (tv_ns(&ru1.ru_utime) + tv_ns(&ru1.ru_stime) -
					 tv_ns(&ru0.ru_utime) - tv_ns(&ru0.ru_stime)) /
					    ((double)bytes / (double)size));
	/* let the receiver drain before closing */
	usleep(200000);
	net->closeSend(s);
	net->closeRecv(r);
	net->finalize(ctx);
	free(b);
	return 0;
}

/* ---- ping-pong over the plugin, registered buffers ---- */

static long pp_idle_us;	  /* CRUXN_BENCH_IDLE_US */
static uint64_t pp_polls; /* isend/irecv/test calls that found nothing */

static void pp_idle(uint64_t t0)
{
	pp_polls++;
	if (netdrv_now_ns() - t0 > 60000000000ull)
		die("ping-pong timed out");
	if (pp_idle_us > 0)
		usleep((useconds_t)pp_idle_us);
}

static void pp_wait(void *req, int *size)
{
	uint64_t t0 = netdrv_now_ns();
	int done = 0;
	for (;;) {
		if (net->test(req, &done, size) != CRUXN_SUCCESS)
			die("test failed");
		if (done)
			return;
		pp_idle(t0);
	}
}

static void pp_send(void *s, void *b, size_t n, void *mh)
{
	void *req = NULL;
	uint64_t t0 = netdrv_now_ns();
	for (;;) {
		if (net->isend(s, b, n, 0, mh, NULL, &req) != CRUXN_SUCCESS)
			die("isend failed");
		if (req)
			break;
		pp_idle(t0);
	}
	pp_wait(req, NULL);
}

static size_t pp_recv(void *r, void *b, size_t cap, void *mh)
{
	void *req = NULL, *data[1] = {b}, *mhs[1] = {mh};
	int tag = 0, sz = -1;
	uint64_t t0 = netdrv_now_ns();
	for (;;) {
		if (net->irecv(r, 1, data, &cap, &tag, mhs, NULL, &req) != CRUXN_SUCCESS)
			die("irecv failed");
		if (req)
			break;
		pp_idle(t0);
	}
	pp_wait(req, &sz);
	return (size_t)sz;
}

/* One buffer, registered on both communicators (each comm has its own). */
static void pp_reg(void *s, void *r, void *b, size_t cap, void **smh, void **rmh)
{
	const char *y = getenv("CRUXN_BENCH_IDLE_US");
	pp_idle_us = y ? strtol(y, NULL, 10) : 0;
	if (net->regMr(s, b, cap, CRUXN_PTR_HOST, smh) != CRUXN_SUCCESS ||
	    net->regMr(r, b, cap, CRUXN_PTR_HOST, rmh) != CRUXN_SUCCESS)
		die("regMr failed");
}

static void pp_close(void *ctx, void *s, void *r, void *smh, void *rmh)
{
	net->deregMr(s, smh);
	net->deregMr(r, rmh);
	net->closeSend(s);
	net->closeRecv(r);
	net->finalize(ctx);
}

static int pp_server(const char *dir)
{
	void *ctx = init_ctx(), *s, *r, *smh, *rmh;
	size_t cap = 1 << 20, got;
	char *b = malloc(cap);
	if (!b)
		die("malloc");
	pair_up(dir, "srv", "cli", ctx, &s, &r);
	pp_reg(s, r, b, cap, &smh, &rmh);
	for (;;) {
		got = pp_recv(r, b, cap, rmh);
		if (got == 1 && b[0] == 'Q')
			break;
		pp_send(s, b, got, smh);
	}
	pp_close(ctx, s, r, smh, rmh);
	free(b);
	return 0;
}

static int pp_client(const char *dir, int iters, int nsizes, char **sizes)
{
	void *ctx = init_ctx(), *s, *r, *smh, *rmh;
	size_t cap = 1 << 20;
	char *b = calloc(1, cap);
	if (!b)
		die("malloc");
	pair_up(dir, "cli", "srv", ctx, &s, &r);
	pp_reg(s, r, b, cap, &smh, &rmh);
	for (int i = 0; i < nsizes; i++) {
		size_t sz = strtoull(sizes[i], NULL, 0);
		uint64_t t0 = 0, p0 = 0;
		for (int k = -iters / 10; k < iters; k++) {
			if (k == 0) {
				t0 = netdrv_now_ns();
				p0 = pp_polls;
			}
			b[0] = 'D';
			pp_send(s, b, sz, smh);
			if (pp_recv(r, b, cap, rmh) != sz)
				die("ping-pong: wrong size back");
		}
		printf("rtt %zu %.3f\n", sz, (double)(netdrv_now_ns() - t0) / iters / 1e3);
		/* calls that found nothing, per round trip */
		printf("polls_per_rtt %zu %.2f\n", sz, (double)(pp_polls - p0) / iters);
	}
	b[0] = 'Q';
	pp_send(s, b, 1, smh);
	usleep(100000);
	pp_close(ctx, s, r, smh, rmh);
	free(b);
	return 0;
}

/* ---- minimal blocking TCP ping-pong: the baseline ---- */

static int full_io(int fd, char *b, size_t n, int wr)
{
	size_t off = 0;
	while (off < n) {
		ssize_t k =
		    wr ? send(fd, b + off, n - off, MSG_NOSIGNAL) : recv(fd, b + off, n - off, 0);
		if (k <= 0)
			return -1;
		off += (size_t)k;
	}
	return 0;
}

static int tcp_server(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), fd;
	uint32_t n;
	char *b = malloc(1 << 20);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!b || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0)
		die("tcp server");
	fd = accept(l, NULL, NULL);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* each message: 4-byte length, then the bytes; echo it back */
	while (full_io(fd, (char *)&n, 4, 0) == 0 && n != 0xffffffffu) {
		if (full_io(fd, b, n, 0) || full_io(fd, (char *)&n, 4, 1) || full_io(fd, b, n, 1))
			break;
	}
	close(fd);
	close(l);
	free(b);
	return 0;
}

static int tcp_client(const char *host, int port, int iters, int nsizes, char **sizes)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
	char *b = calloc(1, 1 << 20);
	uint32_t n;
	inet_pton(AF_INET, host, &a.sin_addr);
	for (int i = 0; i < 100; i++) {
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			break;
		close(fd);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		usleep(20000);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (int i = 0; i < nsizes; i++) {
		uint32_t sz = (uint32_t)strtoul(sizes[i], NULL, 0);
		uint64_t t0 = 0;
		for (int k = -iters / 10; k < iters; k++) {
			if (k == 0)
				t0 = netdrv_now_ns();
			n = sz;
			if (full_io(fd, (char *)&n, 4, 1) || full_io(fd, b, sz, 1) ||
			    full_io(fd, (char *)&n, 4, 0) || full_io(fd, b, n, 0))
				die("tcp ping-pong failed");
		}
		printf("rtt %u %.3f\n", sz, (double)(netdrv_now_ns() - t0) / iters / 1e3);
	}
	n = 0xffffffffu;
	(void)full_io(fd, (char *)&n, 4, 1);
	close(fd);
	free(b);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 3 && strcmp(argv[1], "tcp-server") == 0)
		return tcp_server(atoi(argv[2]));
	if (argc >= 6 && strcmp(argv[1], "tcp-client") == 0)
		return tcp_client(argv[2], atoi(argv[3]), atoi(argv[4]), argc - 5, argv + 5);
	const char *entry = getenv("NCCL_NET_PLUGIN");
	if (!netdrv_load(entry ? entry : "crux", &net) || !net)
		die("cannot load the plugin (NCCL_NET_PLUGIN, LD_LIBRARY_PATH)");
	if (argc >= 3 && strcmp(argv[1], "stream-recv") == 0)
		return stream_recv(argv[2]);
	if (argc >= 6 && strcmp(argv[1], "stream-send") == 0)
		return stream_send(argv[2], strtoull(argv[3], NULL, 0), atof(argv[4]),
				   atoi(argv[5]));
	if (argc >= 3 && strcmp(argv[1], "pp-server") == 0)
		return pp_server(argv[2]);
	if (argc >= 5 && strcmp(argv[1], "pp-client") == 0)
		return pp_client(argv[2], atoi(argv[3]), argc - 4, argv + 4);
	fprintf(stderr, "usage: see the comment at the top of bench.c\n");
	return 2;
}
