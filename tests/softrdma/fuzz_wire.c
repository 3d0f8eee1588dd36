/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a hostile peer of the software RDMA device. After a valid
 * HELLO for a QP in RTS (with a registered MR and a posted receive), the
 * input is sent as the rest of the byte stream on a TCP connection to the
 * context's listener; the device must answer or close, never crash or hang.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sr.h"
#include "srt.h"

#define PEER_QPN 0x123456u

static struct srt_end g_e;
static uint16_t g_port;
static uint8_t g_buf[4096];
static struct ibv_mr *g_mr;

static int init(void)
{
	setenv("CRUX_SOFTRDMA_IFNAMES", "lo", 1);
	if (srt_end_open(&g_e, 16))
		return -1;
	g_mr = ibv_reg_mr(g_e.pd, g_buf, sizeof g_buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
							IBV_ACCESS_REMOTE_READ);
	union ibv_gid g;
	ibv_query_gid(g_e.ctx, 1, 2, &g);
	if (!g_mr || srt_connect(&g_e, PEER_QPN, &g, 0, 0))
		return -1;
	g_port = (uint16_t)(g_e.qp->qp_num >> 8);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready = -2;
	if (ready == -2)
		ready = init();
	if (ready)
		abort();
	/* keep receives posted and completions drained so runs stay alike */
	struct ibv_wc wc[16];
	while (ibv_poll_cq(g_e.cq, 16, wc) > 0) {
	}
	srt_recv(g_e.qp, 1, g_buf, 64, g_mr->lkey);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(g_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (fd < 0)
		return 0;
	/* close with a reset: thousands of runs must not pile up TIME_WAIT ports */
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		close(fd); /* out of local ports, say: not the device's fault */
		return 0;
	}
	uint8_t hello[SR_HDR_LEN];
	struct sr_hdr h = {.type = SR_F_HELLO, .qpn = g_e.qp->qp_num, .seq = PEER_QPN};
	sr_hdr_encode(&h, hello);
	if (send(fd, hello, sizeof hello, MSG_NOSIGNAL) != (ssize_t)sizeof hello) {
		close(fd);
		return 0;
	}
	size_t off = 0;
	while (off < size) {
		ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the device closed on us: allowed */
		off += (size_t)n;
	}
	shutdown(fd, SHUT_WR);
	/* the device must close its end once our stream ends */
	uint8_t sink[4096];
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, 5000);
		if (r < 0 && errno == EINTR)
			continue; /* libFuzzer's timeout alarm */
		if (r != 1)
			abort(); /* hang */
		ssize_t n = recv(fd, sink, sizeof sink, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
	}
	close(fd);
	/* a decoded header encodes back to the same bytes */
	if (size >= SR_HDR_LEN) {
		struct sr_hdr d;
		uint8_t back[SR_HDR_LEN];
		if (sr_hdr_decode(data, &d) == 0) {
			sr_hdr_encode(&d, back);
			if (memcmp(back, data, 3) || memcmp(back + 4, data + 4, SR_HDR_LEN - 8))
				abort();
		}
	}
	return 0;
}
