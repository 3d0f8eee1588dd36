/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: a hostile verbs peer, over the hardware double (vx_double.c)
 * in this process. The harness plays the other end of a verbs connection:
 * it completes the bootstrap handshake properly (its own double QPs, one per
 * QP the plugin asks for), then sends what the input says:
 *
 * - receiver mode (the plugin receives): RDMA WRITE WITH IMMEDIATE into the
 *   plugin's size table with arbitrary immediates, lengths, offsets and
 *   keys, then a control stream (LANE, LANE_CLOSE, BYE, garbage ...);
 * - sender mode (the plugin sends): arbitrary clear-to-send entries written
 *   into the plugin's FIFO (optionally made plausible: stamps, keys, and
 *   addresses of the harness's buffer), a control stream, then isends.
 *
 * The plugin must neither crash nor hang, whatever the peer does.
 *
 * Input: byte 0 = mode (bit 0: sender mode), grouped slots - 1 (bits 1-3),
 * plausible CTS entries (bit 4); byte 1 = queue pairs per connection;
 * byte 2 = data writes (receiver mode); byte 3 = bytes of RDMA part / 4;
 * then the RDMA part, then the control stream (vx_msg records; a record
 * whose first byte is even gets a valid magic, version and nonce).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot.h"
#include "core.h"
#include "verbs/vx_transport.h"
#include "vx_double.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int ready;
static char fuzz_dir[] = "/tmp/cxvb-fuzz-XXXXXX";

/* the harness's end: queue pairs, a completion queue, registered memory */
static struct ibv_cq *hcq;
static struct ibv_qp *hqp[VX_MAX_QPS];
static int hnqp;
static unsigned char hbuf[1 << 16];
static struct ibv_mr *hmr;

static void remove_dir(void)
{
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fuzz_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", fuzz_dir);
}

static int setup(void)
{
	const struct cruxn_ibv *v;

	if (ready)
		return ready > 0 ? 0 : -1;
	ready = -1;
	if (!mkdtemp(fuzz_dir))
		return -1;
	atexit(remove_dir);
	chmod(fuzz_dir, 0755);
	setenv("CRUX_SHM_DIR", fuzz_dir, 1);
	setenv("CRUX_SOCKET_IFNAME", "=lo", 1);
	setenv("CRUX_SOCKET_FAMILY", "ipv4", 1);
	setenv("CRUX_JOB_ID", "cxvb-fuzz", 1);
	setenv("CRUX_LOG_LEVEL", "error", 1);
	setenv("CRUX_TIMEOUT", "1s", 1);
	setenv("CRUX_TRANSPORT", "socket", 1); /* no real libibverbs: the double below */
	if (cruxn_init(NULL) != CRUXN_SUCCESS)
		return -1;
	if (vxd_open_lo(&cruxn_vx_state) != 0)
		return -1;
	cruxn_ctx.ops = &cruxn_verbs_ops;
	v = &cruxn_vx_state.ibv;
	hcq = v->create_cq(cruxn_vx_state.devs[0].ctx, 4096, NULL, NULL, 0);
	hmr = v->reg_mr(cruxn_vx_state.devs[0].pd, hbuf, sizeof(hbuf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!hcq || !hmr)
		return -1;
	ready = 1;
	return 0;
}

static void harness_qps(int n)
{
	const struct cruxn_ibv *v = &cruxn_vx_state.ibv;
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = hcq;
	ia.recv_cq = hcq;
	ia.qp_type = IBV_QPT_RC;
	for (hnqp = 0; hnqp < n; hnqp++)
		hqp[hnqp] = v->create_qp(cruxn_vx_state.devs[0].pd, &ia);
}

static void harness_free(void)
{
	struct ibv_wc wc[64];

	while (cruxn_ibv_poll_cq(hcq, 64, wc) > 0)
		;
	for (int i = 0; i < hnqp; i++)
		cruxn_vx_state.ibv.destroy_qp(hqp[i]);
	hnqp = 0;
}

/* Connect harness QP i to the plugin's QP 'qpn' (INIT, RTR, RTS). */
static void harness_connect(int i, uint32_t qpn)
{
	struct cruxn_vx_ep self = cruxn_vx_state.devs[0].ep, peer = self;
	struct cruxn_class cls = {0, 0, 0, 0};
	char err[320];

	self.qpn = hqp[i]->qp_num;
	self.psn = self.qpn & 0xffffff;
	peer.qpn = qpn;
	peer.psn = qpn & 0xffffff;
	(void)cruxn_vx_qp_connect(&cruxn_vx_state.ibv, hqp[i], &self, &peer, &cruxn_vx_qpcfg,
				  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &cls, 0, err,
				  sizeof(err));
	/* the plugin's data writes each consume one receive */
	for (int k = 0; k < 64; k++) {
		struct ibv_recv_wr wr, *bad = NULL;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)k;
		(void)cruxn_ibv_post_recv(hqp[i], &wr, &bad);
	}
}

static void harness_msg(struct vx_msg *m, int kind, uint64_t nonce)
{
	const struct cruxn_vx_ep *ep = &cruxn_vx_state.devs[0].ep;

	memset(m, 0, sizeof(*m));
	m->magic = VX_MAGIC;
	m->version = VX_VERSION;
	m->kind = (uint16_t)kind;
	m->nonce = nonce;
	m->nqps = (uint8_t)hnqp;
	for (int i = 0; i < hnqp; i++)
		m->qpn[i] = hqp[i]->qp_num;
	memcpy(m->gid, ep->gid.raw, 16);
	m->port = ep->port;
	m->link_layer = ep->link_layer;
	m->mtu = ep->mtu;
}

/* Read one control message within a bound, driving 'poke' meanwhile. */
static int read_msg(int fd, struct vx_msg *m, void (*poke)(void *), void *arg)
{
	size_t off = 0;

	for (int i = 0; i < 2000 && off < sizeof(*m); i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;
		poke(arg);
		if (poll(&p, 1, 1) <= 0)
			continue;
		n = recv(fd, (char *)m + off, sizeof(*m) - off, MSG_DONTWAIT);
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return off == sizeof(*m) ? 0 : -1;
}

/* The hostile control stream: vx_msg records, most made to pass validation. */
static void send_ctrl(int fd, const uint8_t *p, size_t n, uint64_t nonce)
{
	int one = 1;

	/* as the plugin's own ends: no Nagle delay between small messages */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	while (n > 0) {
		struct vx_msg m;
		size_t k = n < sizeof(m) ? n : sizeof(m);
		memset(&m, 0, sizeof(m));
		memcpy(&m, p, k);
		if (k == sizeof(m) && !(p[0] & 1)) {
			m.magic = VX_MAGIC;
			m.version = VX_VERSION;
			m.nonce = nonce;
			m.kind = (uint16_t)(m.kind % 10);
		}
		if (send(fd, &m, k, MSG_NOSIGNAL) < 0)
			return;
		p += k;
		n -= k;
	}
}

struct accepting {
	void *l, *r;
	int failed;
};

static void poke_accept(void *arg)
{
	struct accepting *a = arg;
	if (!a->r && !a->failed && cruxn_accept(a->l, &a->r) != CRUXN_SUCCESS)
		a->failed = 1;
}

static void receiver_mode(const uint8_t *in, size_t size, int slots, int nqps, int nwr, size_t rdma)
{
	char hb[CRUXN_NET_HANDLE_MAXSIZE];
	struct cruxn_boot_handle *h = (struct cruxn_boot_handle *)hb;
	struct accepting a = {NULL, NULL, 0};
	struct vx_msg m, acc;
	struct sockaddr_in sa;
	int fd = -1;

	if (cruxn_listen(0, hb, &a.l) != CRUXN_SUCCESS)
		return;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	memcpy(&sa.sin_addr, h->addr, 4);
	sa.sin_port = h->port;
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto out;
	harness_qps(nqps >= 1 && nqps <= VX_MAX_QPS ? nqps : 1);
	harness_msg(&m, VX_HELLO, h->nonce);
	m.nqps = (uint8_t)nqps;		    /* raw: the listener must refuse what is out of range */
	m.addr = (uint64_t)(uintptr_t)hbuf; /* the plugin's CTS writes land here */
	m.rkey = hmr->rkey;
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m) ||
	    read_msg(fd, &acc, poke_accept, &a) != 0 || acc.kind != VX_ACCEPT)
		goto out;
	for (int i = 0; i < hnqp && i < acc.nqps; i++)
		harness_connect(i, acc.qpn[i]);
	harness_msg(&m, VX_READY, h->nonce);
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		goto out;
	for (int i = 0; i < 2000 && !a.r && !a.failed; i++)
		poke_accept(&a);
	if (!a.r)
		goto out;
	{
		static char bufs[4][CRUXN_NET_MAX_RECVS][4096];
		void *reqs[4] = {0};
		for (int q = 0; q < 4; q++) {
			void *ptrs[CRUXN_NET_MAX_RECVS];
			size_t caps[CRUXN_NET_MAX_RECVS];
			int tags[CRUXN_NET_MAX_RECVS];
			for (int s = 0; s < slots; s++) {
				ptrs[s] = bufs[q][s];
				caps[s] = sizeof(bufs[q][s]);
				tags[s] = s;
			}
			if (cruxn_irecv(a.r, slots, ptrs, caps, tags, NULL, &reqs[q]) !=
			    CRUXN_SUCCESS)
				break;
		}
		/* data writes with the peer's immediates, lengths, offsets and keys */
		for (int k = 0; k < nwr && (size_t)(k + 1) * 8 <= rdma; k++) {
			const uint8_t *w = in + (size_t)k * 8;
			struct ibv_sge sg = {(uint64_t)(uintptr_t)hbuf, w[4] % 64u, hmr->lkey};
			struct ibv_send_wr wr, *bad = NULL;
			uint32_t imm;
			memcpy(&imm, w, 4);
			memset(&wr, 0, sizeof(wr));
			wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wr.sg_list = &sg;
			wr.num_sge = sg.length ? 1 : 0;
			wr.imm_data = imm;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.rdma.remote_addr = acc.addr + (uint64_t)w[5] * 8;
			wr.wr.rdma.rkey = (w[7] & 1) ? imm : acc.rkey;
			if (hnqp > 0)
				(void)cruxn_ibv_post_send(hqp[w[6] % hnqp], &wr, &bad);
		}
		send_ctrl(fd, in + rdma, size - rdma, h->nonce);
		shutdown(fd, SHUT_WR);
		usleep(1100); /* an idle connection reads its control socket once a millisecond */
		for (int it = 0; it < 200; it++) {
			int live = 0;
			for (int q = 0; q < 4; q++) {
				int done = 0, sizes[CRUXN_NET_MAX_RECVS];
				if (!reqs[q])
					continue;
				if (cruxn_test(reqs[q], &done, sizes) != CRUXN_SUCCESS || done)
					reqs[q] = NULL;
				else
					live++;
			}
			if (!live)
				break;
		}
	}
out:
	if (a.r)
		cruxn_close_recv(a.r);
	if (fd >= 0)
		close(fd);
	cruxn_close_listen(a.l);
	harness_free();
}

struct connecting {
	char *handle;
	void *s;
	int failed;
};

static void poke_connect(void *arg)
{
	struct connecting *c = arg;
	if (!c->s && !c->failed && cruxn_connect(0, -1, c->handle, &c->s) != CRUXN_SUCCESS)
		c->failed = 1;
}

static void sender_mode(const uint8_t *in, size_t size, bool plausible, size_t rdma)
{
	char hb[CRUXN_NET_HANDLE_MAXSIZE];
	struct cruxn_boot_handle *h = (struct cruxn_boot_handle *)hb;
	struct connecting c = {hb, NULL, 0};
	struct sockaddr_in sa;
	socklen_t salen = sizeof(sa);
	struct vx_msg hello, m;
	int lfd, fd = -1;
	uint64_t nonce = 0x5eed;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 4) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &salen) != 0)
		goto out;
	memset(hb, 0, sizeof(hb));
	h->magic = VX_MAGIC;
	h->version = VX_VERSION;
	h->family = AF_INET;
	memcpy(h->addr, &sa.sin_addr, 4);
	h->port = sa.sin_port;
	h->nonce = nonce;
	for (int i = 0; i < 2000 && fd < 0 && !c.failed; i++) {
		poke_connect(&c);
		fd = accept(lfd, NULL, NULL);
	}
	if (fd < 0 || read_msg(fd, &hello, poke_connect, &c) != 0 || hello.nqps < 1 ||
	    hello.nqps > VX_MAX_QPS)
		goto out;
	harness_qps(hello.nqps);
	for (int i = 0; i < hnqp; i++)
		harness_connect(i, hello.qpn[i]);
	harness_msg(&m, VX_ACCEPT, nonce);
	m.addr = (uint64_t)(uintptr_t)hbuf; /* the plugin's size writes land here */
	m.rkey = hmr->rkey;
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		goto out;
	for (int i = 0; i < 2000 && !c.s && !c.failed; i++)
		poke_connect(&c);
	if (!c.s)
		goto out;
	/* clear-to-send entries as the peer writes them */
	if (rdma > 0) {
		static unsigned char cts[sizeof(((struct vx_comm *)0)->fifo)];
		size_t n = rdma < sizeof(cts) ? rdma : sizeof(cts);
		struct ibv_sge sg = {(uint64_t)(uintptr_t)cts, (uint32_t)n, 0};
		struct ibv_send_wr wr, *bad = NULL;
		struct ibv_mr *cmr;
		memset(cts, 0, sizeof(cts));
		memcpy(cts, in, n);
		if (plausible) {
			struct vx_cts *e = (struct vx_cts *)(void *)cts;
			for (size_t i = 0; (i + 1) * sizeof(*e) <= n; i++) {
				e[i].addr = (uint64_t)(uintptr_t)hbuf + 4096 * (i % 8);
				e[i].rkey = hmr->rkey;
				e[i].cap %= 8192;
				if (e[i].nslots < 1 || e[i].nslots > VX_SLOTS)
					e[i].nslots = (uint16_t)(1 + e[i].nslots % VX_SLOTS);
				e[i].stamp = (uint32_t)(i / VX_SLOTS + 1);
			}
		}
		cmr = cruxn_vx_state.ibv.reg_mr(cruxn_vx_state.devs[0].pd, cts, sizeof(cts),
						IBV_ACCESS_LOCAL_WRITE);
		sg.lkey = cmr ? cmr->lkey : 0;
		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.sg_list = &sg;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = hello.addr;
		wr.wr.rdma.rkey = hello.rkey;
		if (cmr && hnqp > 0)
			(void)cruxn_ibv_post_send(hqp[0], &wr, &bad);
		if (cmr)
			cruxn_vx_state.ibv.dereg_mr(cmr);
	}
	send_ctrl(fd, in + rdma, size - rdma, nonce);
	usleep(1100); /* an idle connection reads its control socket once a millisecond */
	{
		static unsigned char sb[8192];
		static const size_t sizes[] = {0, 100, 4096, 8000};
		for (int k = 0; k < 4; k++) {
			void *req = NULL;
			int done = 0;
			cruxn_result_t rc = CRUXN_SUCCESS;
			/* ~2 ms each: control messages are read within a millisecond */
			for (int i = 0; i < 100 && !req && rc == CRUXN_SUCCESS; i++) {
				rc = cruxn_isend(c.s, sb, sizes[k], k, NULL, &req);
				if (!req)
					usleep(20);
			}
			for (int i = 0; req && i < 100 && !done && rc == CRUXN_SUCCESS; i++) {
				rc = cruxn_test(req, &done, NULL);
				if (!done)
					usleep(20);
			}
			if (rc != CRUXN_SUCCESS)
				break;
		}
	}
	shutdown(fd, SHUT_WR);
out:
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	/* a connect still under way ends (the peer's socket closed, or CRUX_TIMEOUT) */
	for (int i = 0; i < 300 && !c.s && !c.failed && h->connect_state; i++) {
		poke_connect(&c);
		usleep(10000);
	}
	if (c.s)
		cruxn_close_send(c.s);
	harness_free();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t rdma;
	int mode, slots;

	if (size < 4 || setup() != 0)
		return 0;
	mode = data[0] & 1;
	slots = 1 + ((data[0] >> 1) & 7);
	rdma = (size_t)data[3] * 4;
	if (rdma > size - 4)
		rdma = size - 4;
	if (mode) {
		cruxn_vx_qpcfg.nqps = 1 + data[1] % VX_MAX_QPS;
		sender_mode(data + 4, size - 4, data[0] & 0x10, rdma);
		cruxn_vx_qpcfg.nqps = 1;
	} else {
		receiver_mode(data + 4, size - 4, slots, data[1], data[2] % 16, rdma);
	}
	return 0;
}
