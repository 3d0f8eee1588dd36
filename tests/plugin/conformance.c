/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Conformance driver for libnccl-net-crux.so: loads the library as NCCL does
 * (NCCL_NET_PLUGIN name resolution, version symbols) and checks the plugin
 * contract between processes over loopback.
 *
 *   conformance symbols   every exported version, name, properties, a
 *                         transfer through each version's table (v12 is the
 *                         table every other command drives, as NCCL 2.30 does)
 *   conformance hints     setNetAttr hints per communicator: bytes sent under
 *                         each announced collective kind reach the profile record
 *   conformance pair      non-blocking set-up, sizes 0 B..256 MiB, larger
 *                         receive buffers, grouped receives with tags,
 *                         32 in flight and retry on NULL request
 *   conformance faults    garbage handles, refused connect, peer killed
 *                         mid-transfer (both sides), close with requests in
 *                         flight, bad CRUX_ value
 *   conformance ring N    ring all-reduce over N processes
 *   conformance flush     (verbs) iflush of a receive into memory registered as
 *                         GPU memory: a request that completes (1-byte READ);
 *                         host memory: a NULL request
 *   conformance churn     several connections in threads of one process
 *                         while the decision table flips levels and routes
 *                         (path moves) underneath; every byte verified
 *
 * Also the building block of the namespace tests:
 *   conformance xfer-recv DIR   / xfer-send DIR   (see the wire_*.sh scripts)
 *   conformance probe DST PORT0 COUNT TTL
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>

#include "crux/decision.h"
#include "crux/decision_writer.h"
#include "crux/jobid.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"
#include "netdrv.h"

static const cruxn_net_v12_t *net;
static void *lib;
static char tmpdir[64];

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "[%d] FAIL %s:%d: ", (int)getpid(), __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                     \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static void logger(cruxn_log_level_t level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	va_list ap;
	(void)flags;
	if (level > CRUXN_LOG_INFO && !getenv("CONF_VERBOSE"))
		return;
	if (level == CRUXN_LOG_INFO && !getenv("CONF_VERBOSE"))
		return;
	fprintf(stderr, "[%d] NCCL %s %s:%d ", (int)getpid(),
		level == CRUXN_LOG_WARN ? "WARN" : "INFO", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void cleanup_tmp(void)
{
	char cmd[128];
	if (tmpdir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", tmpdir);
	}
}

/* Private environment: own shared-memory dir, loopback device, our job. */
static void setup_env(void)
{
	if (!getenv("CRUX_SHM_DIR")) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/cxpl-conf-XXXXXX");
		CHECK(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
		chmod(tmpdir, 0755);
		setenv("CRUX_SHM_DIR", tmpdir, 1);
		atexit(cleanup_tmp);
	}
	if (!getenv("CRUX_SOCKET_IFNAME"))
		setenv("CRUX_SOCKET_IFNAME", "=lo", 1);
	if (!getenv("CRUX_JOB_ID"))
		setenv("CRUX_JOB_ID", "cxpl-conformance", 1);
	if (!getenv("CRUX_TIMEOUT"))
		setenv("CRUX_TIMEOUT", "5s", 1);
}

static void load(void)
{
	const char *entry = getenv("NCCL_NET_PLUGIN");
	lib = netdrv_load(entry ? entry : "crux", &net);
	CHECK(lib && net, "no ncclNetPlugin_v12 in the plugin");
}

static void *init_ctx(void)
{
	void *ctx = NULL;
	cruxn_comm_config_t cfg = {.trafficClass = CRUXN_NET_TRAFFIC_CLASS_UNDEF};
	CHECK(net->init(&ctx, 1, &cfg, logger, NULL) == CRUXN_SUCCESS, "init failed");
	int n = 0;
	CHECK(net->devices(&n) == CRUXN_SUCCESS, "devices");
	if (n == 0 && getenv("CRUX_SOCKET_FAMILY")) {
		printf("SKIP: no %s address on the selected interfaces\n",
		       getenv("CRUX_SOCKET_FAMILY"));
		exit(77);
	}
	CHECK(n >= 1, "no devices");
	return ctx;
}

/* ---- single-process helpers ---- */

/* Connect and accept in one thread: only works if neither blocks. A call that
 * waited for its peer would wait forever here (the plugin has no bounded wait on
 * that path), so the bound only needs to catch that: 2 s, not 200 ms, which a
 * sanitizer build on a loaded 2-core machine exceeded (4 QPs set up per call). */
#define CONF_NONBLOCK_NS 2000000000ull
static void self_connect(void *ctx, void **s, void **r)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	void *l = NULL;
	uint64_t t0 = netdrv_now_ns();
	CHECK(net->listen(ctx, 0, handle, &l) == CRUXN_SUCCESS && l, "listen");
	*s = *r = NULL;
	while (!*s || !*r) {
		if (!*r) {
			uint64_t a = netdrv_now_ns();
			CHECK(net->accept(l, r, NULL) == CRUXN_SUCCESS, "accept");
			CHECK(netdrv_now_ns() - a < CONF_NONBLOCK_NS, "accept blocked");
		}
		if (!*s) {
			uint64_t a = netdrv_now_ns();
			CHECK(net->connect(ctx, 0, handle, s, NULL) == CRUXN_SUCCESS, "connect");
			CHECK(netdrv_now_ns() - a < CONF_NONBLOCK_NS, "connect blocked");
		}
		CHECK(netdrv_now_ns() - t0 < 10000000000ull, "set-up took more than 10 s");
	}
	CHECK(net->closeListen(l) == CRUXN_SUCCESS, "closeListen");
}

/* ---- symbols ---- */

static void ping_table_v6(const cruxn_net_v6_t *t)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	void *l = NULL, *s = NULL, *r = NULL, *sr = NULL, *rr = NULL;
	static char sb[300000], rb[400000];
	int sizes[1] = {(int)sizeof(rb)}, tags[1] = {7}, got = -1, done_s = 0, done_r = 0;
	void *data[1] = {rb};
	cruxn_props_v6_t p;

	CHECK(t->init(logger) == CRUXN_SUCCESS, "v6 init");
	CHECK(t->getProperties(0, &p) == CRUXN_SUCCESS && p.maxRecvs == 8 &&
		  p.ptrSupport == CRUXN_PTR_HOST && p.speed > 0,
	      "v6 properties");
	CHECK(t->listen(0, handle, &l) == CRUXN_SUCCESS, "v6 listen");
	while (!s || !r) {
		if (!r)
			CHECK(t->accept(l, &r) == CRUXN_SUCCESS, "v6 accept");
		if (!s)
			CHECK(t->connect(0, handle, &s) == CRUXN_SUCCESS, "v6 connect");
	}
	netdrv_fill(sb, sizeof(sb), 6);
	CHECK(t->irecv(r, 1, data, sizes, tags, NULL, &rr) == CRUXN_SUCCESS && rr, "v6 irecv");
	CHECK(t->isend(s, sb, (int)sizeof(sb), 7, NULL, &sr) == CRUXN_SUCCESS && sr, "v6 isend");
	while (!done_s || !done_r) {
		if (!done_s)
			CHECK(t->test(sr, &done_s, NULL) == CRUXN_SUCCESS, "v6 test send");
		if (!done_r)
			CHECK(t->test(rr, &done_r, &got) == CRUXN_SUCCESS, "v6 test recv");
	}
	CHECK(got == (int)sizeof(sb) && netdrv_check(rb, sizeof(sb), 6) == 0, "v6 data");
	t->closeSend(s);
	t->closeRecv(r);
	t->closeListen(l);
}

static void ping_v11(void *ctx)
{
	void *s, *r, *sr = NULL, *rr = NULL;
	static char sb[1 << 20], rb[(1 << 20) + 100];
	size_t cap = sizeof(rb);
	void *data[1] = {rb};
	int tags[1] = {3}, got = 0, ds = 0, dr = 0;

	self_connect(ctx, &s, &r);
	netdrv_fill(sb, sizeof(sb), 11);
	CHECK(net->irecv(r, 1, data, &cap, tags, NULL, NULL, &rr) == CRUXN_SUCCESS && rr, "irecv");
	CHECK(net->isend(s, sb, sizeof(sb), 3, NULL, NULL, &sr) == CRUXN_SUCCESS && sr, "isend");
	while (!ds || !dr) {
		if (!ds)
			CHECK(net->test(sr, &ds, NULL) == CRUXN_SUCCESS, "test");
		if (!dr)
			CHECK(net->test(rr, &dr, &got) == CRUXN_SUCCESS, "test");
	}
	CHECK(got == (int)sizeof(sb) && netdrv_check(rb, sizeof(sb), 11) == 0, "v11 data");
	void *fr = (void *)1;
	int fs = (int)sizeof(sb);
	CHECK(net->iflush(r, 1, data, &fs, NULL, &fr) == CRUXN_SUCCESS && fr == NULL,
	      "iflush of host memory must return a NULL request");
	net->closeSend(s);
	net->closeRecv(r);
}

/* The v11 table: v12 without rail/plane and with 4-device virtual NICs. */
static void ping_table_v11(const cruxn_net_v11_t *t)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	void *ctx = NULL, *l = NULL, *s = NULL, *r = NULL, *sr = NULL, *rr = NULL;
	static char sb[200000], rb[200000];
	size_t cap = sizeof(rb);
	void *data[1] = {rb};
	int tag = 5, got = 0, ds = 0, dr = 0;
	cruxn_props_v11_t p;
	cruxn_comm_config_t cfg = {.trafficClass = CRUXN_NET_TRAFFIC_CLASS_UNDEF};

	CHECK(t->init(&ctx, 2, &cfg, logger, NULL) == CRUXN_SUCCESS && ctx, "v11 init");
	CHECK(t->getProperties(0, &p) == CRUXN_SUCCESS && p.maxRecvs == 8 &&
		  p.maxMultiRequestSize == 1 && p.vProps.ndevs == 1 && p.vProps.devs[0] == 0,
	      "v11 props");
	CHECK(t->listen(ctx, 0, handle, &l) == CRUXN_SUCCESS, "v11 listen");
	while (!s || !r) {
		if (!r)
			CHECK(t->accept(l, &r, NULL) == CRUXN_SUCCESS, "v11 accept");
		if (!s)
			CHECK(t->connect(ctx, 0, handle, &s, NULL) == CRUXN_SUCCESS, "v11 connect");
	}
	netdrv_fill(sb, sizeof(sb), 111);
	CHECK(t->irecv(r, 1, data, &cap, &tag, NULL, NULL, &rr) == CRUXN_SUCCESS && rr,
	      "v11 irecv");
	CHECK(t->isend(s, sb, sizeof(sb), 5, NULL, NULL, &sr) == CRUXN_SUCCESS && sr, "v11 isend");
	while (!ds || !dr) {
		if (!ds)
			CHECK(t->test(sr, &ds, NULL) == CRUXN_SUCCESS, "v11 test");
		if (!dr)
			CHECK(t->test(rr, &dr, &got) == CRUXN_SUCCESS, "v11 test");
	}
	CHECK(got == (int)sizeof(sb) && netdrv_check(rb, sizeof(sb), 111) == 0, "v11 data");
	t->closeSend(s);
	t->closeRecv(r);
	t->closeListen(l);
	CHECK(t->finalize(ctx) == CRUXN_SUCCESS, "v11 finalize");
}

static int cmd_symbols(void)
{
	const char *syms[] = {CRUXN_SYM_V6,  CRUXN_SYM_V7,  CRUXN_SYM_V8, CRUXN_SYM_V9,
			      CRUXN_SYM_V10, CRUXN_SYM_V11, CRUXN_SYM_V12};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		const char *const *tab = dlsym(lib, syms[i]);
		CHECK(tab && *tab && strcmp(*tab, "Crux") == 0, "%s missing or not named Crux",
		      syms[i]);
	}
	void *ctx = init_ctx();
	cruxn_props_v12_t p;
	memset(&p, 0x5a, sizeof(p));
	CHECK(net->getProperties(0, &p) == CRUXN_SUCCESS, "getProperties");
	/* v12: as NCCL's socket transport fills them (no rail, no plane, one request). */
	CHECK(p.railId == CRUXN_NET_ID_UNDEF && p.planeId == CRUXN_NET_ID_UNDEF,
	      "v12 railId/planeId should be -1 on sockets, got %d/%d", p.railId, p.planeId);
	CHECK(p.maxMultiRequestSize == 1, "maxMultiRequestSize %d", p.maxMultiRequestSize);
	CHECK(p.vProps.ndevs == 1 && p.vProps.devs[0] == 0 && p.vProps.devs[1] == 0 &&
		  p.vProps.devs[7] == 0,
	      "v12 vProps: one device, the rest cleared");
	CHECK(p.name && strcmp(p.name, "lo") == 0, "device 0 should be lo, got %s", p.name);
	CHECK(p.ptrSupport == CRUXN_PTR_HOST && p.maxRecvs == 8 && p.speed > 0, "props");
	CHECK(p.pciPath == NULL, "loopback has no PCI path");
	CHECK(p.maxP2pBytes > 0 && p.maxP2pBytes <= CRUXN_NET_MAX_BYTES && p.maxCollBytes > 0 &&
		  p.maxCollBytes <= CRUXN_NET_MAX_BYTES,
	      "max transfer sizes");
	CHECK(p.netDeviceType == CRUXN_DEV_HOST && p.netDeviceVersion == 0, "host device");
	CHECK(net->getProperties(99, &p) != CRUXN_SUCCESS, "getProperties(99) must fail");
	ping_v11(ctx);
	/* finalize tolerates a NULL context (NCCL 2.28 after a failed init) */
	CHECK(net->finalize(NULL) == CRUXN_SUCCESS, "finalize(NULL)");

	/* every older table moves data too */
	ping_table_v11(dlsym(lib, CRUXN_SYM_V11));
	ping_table_v6(dlsym(lib, CRUXN_SYM_V6));
	const cruxn_net_v7_t *t7 = dlsym(lib, CRUXN_SYM_V7);
	const cruxn_net_v8_t *t8 = dlsym(lib, CRUXN_SYM_V8);
	const cruxn_net_v9_t *t9 = dlsym(lib, CRUXN_SYM_V9);
	const cruxn_net_v10_t *t10 = dlsym(lib, CRUXN_SYM_V10);
	cruxn_props_v7_t p7;
	cruxn_props_v8_t p8;
	cruxn_props_v9_t p9;
	CHECK(t7->getProperties(0, &p7) == CRUXN_SUCCESS && p7.maxRecvs == 8, "v7 props");
	CHECK(t8->getProperties(0, &p8) == CRUXN_SUCCESS && p8.maxRecvs == 8 &&
		  p8.netDeviceType == CRUXN_DEV_HOST,
	      "v8 props");
	CHECK(t9->getProperties(0, &p9) == CRUXN_SUCCESS && p9.maxRecvs == 8 &&
		  p9.maxP2pBytes == CRUXN_NET_MAX_BYTES,
	      "v9 props");
	CHECK(t10->getProperties(0, &p9) == CRUXN_SUCCESS && p9.vProps.ndevs == 1, "v10 props");
	CHECK(t10->init(logger, NULL) == CRUXN_SUCCESS, "v10 init");
	/* v10's per-connect traffic class path */
	{
		char handle[CRUXN_NET_HANDLE_MAXSIZE];
		void *l = NULL, *s = NULL, *r = NULL;
		cruxn_comm_config_t cfg = {.trafficClass = 0x60};
		cruxn_dev_handle_t *dh = (void *)1;
		CHECK(t10->listen(0, handle, &l) == CRUXN_SUCCESS, "v10 listen");
		while (!s || !r) {
			if (!r)
				CHECK(t10->accept(l, &r, &dh) == CRUXN_SUCCESS, "v10 accept");
			if (!s)
				CHECK(t10->connect(0, &cfg, handle, &s, &dh) == CRUXN_SUCCESS,
				      "v10 connect");
		}
		CHECK(dh == NULL, "device handle must be NULL for host memory");
		static char b[4096];
		size_t cap = sizeof(b);
		void *data[1] = {b}, *sr = NULL, *rr = NULL;
		int tag = 1, ds = 0, dr = 0;
		CHECK(t10->isend(s, b, 100, 1, NULL, NULL, &sr) == CRUXN_SUCCESS && sr,
		      "v10 isend");
		CHECK(t10->irecv(r, 1, data, &cap, &tag, NULL, NULL, &rr) == CRUXN_SUCCESS && rr,
		      "v10 irecv");
		while (!ds || !dr) {
			if (!ds)
				CHECK(t10->test(sr, &ds, NULL) == CRUXN_SUCCESS, "v10 test");
			if (!dr)
				CHECK(t10->test(rr, &dr, NULL) == CRUXN_SUCCESS, "v10 test");
		}
		t10->closeSend(s);
		t10->closeRecv(r);
		t10->closeListen(l);
	}
	CHECK(net->finalize(ctx) == CRUXN_SUCCESS, "finalize");
	printf("symbols: ok (v6..v12 exported, named Crux, each moves data)\n");
	return 0;
}

/* ---- hints (setNetAttr) ---- */

/* One message over a self-connected pair, both ends driven here. */
static void xfer_once(void *s, void *r, size_t size, uint32_t seed)
{
	static char sb[1 << 20], rb[1 << 20];
	size_t cap = sizeof(rb);
	void *data[1] = {rb}, *sr = NULL, *rr = NULL;
	int tag = 9, got = -1, ds = 0, dr = 0;

	CHECK(size <= sizeof(sb), "message too large for the test");
	netdrv_fill(sb, size, seed);
	CHECK(net->irecv(r, 1, data, &cap, &tag, NULL, NULL, &rr) == CRUXN_SUCCESS && rr, "irecv");
	CHECK(net->isend(s, sb, size, 9, NULL, NULL, &sr) == CRUXN_SUCCESS && sr, "isend");
	while (!ds || !dr) {
		if (!ds)
			CHECK(net->test(sr, &ds, NULL) == CRUXN_SUCCESS, "test send");
		if (!dr)
			CHECK(net->test(rr, &dr, &got) == CRUXN_SUCCESS, "test recv");
	}
	CHECK(got == (int)size && netdrv_check(rb, size, seed) == 0, "data of %zu bytes", size);
}

static int own_record(void *arg, const struct crux_prof_snapshot *snap)
{
	if (snap->pid == getpid() && snap->has_net)
		*(struct crux_prof_snapshot *)arg = *snap;
	return 0;
}

/*
 * NCCL calls setNetAttr(ctx, hints) on a communicator's context before its
 * transfers (the operation as one ncclFunc_t bit, algorithm, protocol, peers
 * and flows); the plugin keeps them per communicator and counts the bytes its
 * send comms move under the announced kind, published in the profile record
 * (net section, layout v4). Also: hints of another communicator do not leak
 * into this one, unknown operations are counted as no kind.
 */
static int cmd_hints(void)
{
	static struct crux_prof_snapshot snap;
	void *ctx = init_ctx(), *ctx2 = NULL, *s, *r, *s2, *r2;
	cruxn_comm_config_t cfg = {.trafficClass = CRUXN_NET_TRAFFIC_CLASS_UNDEF};
	cruxn_net_attr_t a;
	uint64_t want[CRUX_COLL_KINDS] = {0};

	CHECK(net->setNetAttr, "v12 has setNetAttr");
	CHECK(net->init(&ctx2, 2, &cfg, logger, NULL) == CRUXN_SUCCESS && ctx2, "second init");
	self_connect(ctx, &s, &r);
	self_connect(ctx2, &s2, &r2);
	memset(&a, 0xff, sizeof(a)); /* NCCL_NET_ATTR_INIT: every field undefined */
	xfer_once(s, r, 1000, 1);    /* before any hint: no kind */
	a.op = 1u << CRUXN_FUNC_ALLREDUCE;
	a.algo = 1u << 1;
	a.proto = 1u << 2;
	a.send.maxConcurrentPeers = a.send.minConcurrentPeers = 1;
	a.send.maxFlowsPerPeer = a.send.minFlowsPerPeer = 2;
	CHECK(net->setNetAttr(ctx, &a) == CRUXN_SUCCESS, "setNetAttr allreduce");
	xfer_once(s, r, 1 << 20, 2);
	xfer_once(s, r, 1 << 20, 3);
	want[CRUX_COLL_ALLREDUCE] += 2u << 20;
	/* the other communicator announces a send: its bytes only */
	a.op = 1u << CRUXN_FUNC_SEND;
	CHECK(net->setNetAttr(ctx2, &a) == CRUXN_SUCCESS, "setNetAttr send");
	xfer_once(s2, r2, 300000, 4);
	want[CRUX_COLL_SENDRECV] += 300000;
	xfer_once(s, r, 5000, 5); /* still all-reduce on the first */
	want[CRUX_COLL_ALLREDUCE] += 5000;
	a.op = 1u << CRUXN_FUNC_ALLGATHERV; /* counted as all-gather */
	CHECK(net->setNetAttr(ctx, &a) == CRUXN_SUCCESS, "setNetAttr allgatherv");
	xfer_once(s, r, 4096, 6);
	want[CRUX_COLL_ALLGATHER] += 4096;
	a.op = (1u << CRUXN_FUNC_ALLREDUCE) | (1u << CRUXN_FUNC_BROADCAST); /* not one operation */
	CHECK(net->setNetAttr(ctx, &a) == CRUXN_SUCCESS, "setNetAttr two ops");
	xfer_once(s, r, 777, 7);
	a.op = (uint32_t)CRUXN_NET_ATTR_UNDEF;
	CHECK(net->setNetAttr(ctx, &a) == CRUXN_SUCCESS, "setNetAttr undefined op");
	xfer_once(s, r, 888, 8);
	CHECK(net->setNetAttr(NULL, &a) != CRUXN_SUCCESS, "setNetAttr without a context");
	CHECK(net->setNetAttr(ctx, NULL) != CRUXN_SUCCESS, "setNetAttr without hints");

	/* the publisher (CRUX_PUBLISH_INTERVAL) writes the net section */
	for (int i = 0; i < 300; i++) {
		bool done = true;
		memset(&snap, 0, sizeof(snap));
		crux_prof_scan(getenv("CRUX_SHM_DIR"), 0, own_record, &snap, NULL);
		for (int k = 0; k < CRUX_COLL_KINDS; k++)
			done &= snap.net.tx_bytes_by_kind[k] == want[k];
		if (done)
			break;
		usleep(10000);
	}
	CHECK(snap.has_net, "no net section in this process's profile record");
	for (int k = 0; k < CRUX_COLL_KINDS; k++)
		CHECK(snap.net.tx_bytes_by_kind[k] == want[k], "kind %d: %llu bytes, want %llu", k,
		      (unsigned long long)snap.net.tx_bytes_by_kind[k],
		      (unsigned long long)want[k]);
	/* a context finalized before its send comm closes stays valid for it */
	CHECK(net->finalize(ctx2) == CRUXN_SUCCESS, "finalize with a live send comm");
	xfer_once(s2, r2, 100, 9);
	net->closeSend(s2);
	net->closeRecv(r2);
	net->closeSend(s);
	net->closeRecv(r);
	CHECK(net->finalize(ctx) == CRUXN_SUCCESS, "finalize");
	printf("hints: ok (allreduce %llu, allgather %llu, sendrecv %llu bytes by NCCL's hints)\n",
	       (unsigned long long)want[CRUX_COLL_ALLREDUCE],
	       (unsigned long long)want[CRUX_COLL_ALLGATHER],
	       (unsigned long long)want[CRUX_COLL_SENDRECV]);
	return 0;
}

/* ---- two processes ---- */

static const size_t pair_sizes[] = {
    0, 1, 7, 8, 1000, 4096, 65535, 65536, 65537, (1 << 20) + 3, 16 << 20, 64 << 20, 256u << 20};

static int exchange_fd[2];

static void pair_sender(void *ctx, void *comm)
{
	(void)ctx;
	size_t nsz = sizeof(pair_sizes) / sizeof(pair_sizes[0]);
	char *buf = malloc(256u << 20);
	CHECK(buf, "malloc");
	/* sizes, once each; the larger ones ride through the data sockets */
	for (size_t i = 0; i < nsz; i++) {
		netdrv_fill(buf, pair_sizes[i], (uint32_t)i);
		CHECK(netdrv_send(net, comm, buf, pair_sizes[i], 1, 30000) == 0, "send size %zu",
		      pair_sizes[i]);
	}
	/* grouped receives n = 1..8: the receiver lists tags in reverse */
	for (int n = 1; n <= 8; n++) {
		void *reqs[8];
		for (int k = 0; k < n; k++) {
			size_t sz = (size_t)(k % 2 ? 100000 + k * 77 : 3000 + k);
			char *b = buf + (size_t)k * (1 << 20);
			int tag = 1000 + n * 10 + k;
			netdrv_fill(b, sz, (uint32_t)tag);
			reqs[k] = NULL;
			while (!reqs[k])
				CHECK(net->isend(comm, b, sz, tag, NULL, NULL, &reqs[k]) ==
					  CRUXN_SUCCESS,
				      "isend");
		}
		for (int k = 0; k < n; k++)
			CHECK(netdrv_wait(net, reqs[k], NULL, 10000) == 0, "grouped send");
	}
	/* 32 in flight; the 33rd gets a NULL request; retry after one completes */
	{
		void *reqs[33];
		size_t sz = 256 << 10;
		for (int k = 0; k < 33; k++)
			netdrv_fill(buf + (size_t)k * sz, sz, (uint32_t)(5000 + k));
		for (int k = 0; k < 32; k++) {
			reqs[k] = NULL;
			/* an RDMA transport answers NULL until the receive is posted */
			for (uint64_t t0 = netdrv_now_ns();
			     !reqs[k] && netdrv_now_ns() - t0 < 10000000000ull;)
				CHECK(net->isend(comm, buf + (size_t)k * sz, sz, 9, NULL, NULL,
						 &reqs[k]) == CRUXN_SUCCESS,
				      "isend %d of 32", k);
			CHECK(reqs[k], "isend %d of 32 must be accepted", k);
		}
		reqs[32] = (void *)0x1234;
		CHECK(net->isend(comm, buf + 32 * sz, sz, 9, NULL, NULL, &reqs[32]) ==
			      CRUXN_SUCCESS &&
			  reqs[32] == NULL,
		      "the 33rd isend must return a NULL request");
		CHECK(netdrv_wait(net, reqs[0], NULL, 10000) == 0, "first of 32");
		for (uint64_t t0 = netdrv_now_ns();
		     !reqs[32] && netdrv_now_ns() - t0 < 10000000000ull;)
			CHECK(net->isend(comm, buf + 32 * sz, sz, 9, NULL, NULL, &reqs[32]) ==
				  CRUXN_SUCCESS,
			      "retry after a completion");
		CHECK(reqs[32], "retry after a completion must be accepted");
		for (int k = 1; k < 33; k++)
			CHECK(netdrv_wait(net, reqs[k], NULL, 10000) == 0, "in-flight send %d", k);
	}
	free(buf);
}

static void pair_receiver(void *ctx, void *comm)
{
	(void)ctx;
	size_t nsz = sizeof(pair_sizes) / sizeof(pair_sizes[0]);
	size_t cap = (256u << 20) + (8u << 20);
	char *buf = malloc(cap);
	CHECK(buf, "malloc");
	for (size_t i = 0; i < nsz; i++) {
		size_t got = 0;
		/* a buffer larger than the message: test reports the real size */
		size_t c = pair_sizes[i] + 4096 + pair_sizes[i] / 64;
		CHECK(c <= cap, "cap");
		CHECK(netdrv_recv(net, comm, buf, c, 1, &got, 30000) == 0, "recv size %zu",
		      pair_sizes[i]);
		CHECK(got == pair_sizes[i], "size %zu reported as %zu", pair_sizes[i], got);
		CHECK(netdrv_check(buf, got, (uint32_t)i) == 0, "data of size %zu corrupt", got);
	}
	for (int n = 1; n <= 8; n++) {
		void *data[8], *req = NULL;
		size_t caps[8];
		int tags[8], sizes[8];
		for (int s = 0; s < n; s++) {
			int k = n - 1 - s; /* reverse order of the sender's posts */
			tags[s] = 1000 + n * 10 + k;
			data[s] = buf + (size_t)s * (1 << 20);
			caps[s] = 200000;
		}
		while (!req)
			CHECK(net->irecv(comm, n, data, caps, tags, NULL, NULL, &req) ==
				  CRUXN_SUCCESS,
			      "irecv n=%d", n);
		CHECK(netdrv_wait(net, req, sizes, 10000) == 0, "grouped recv n=%d", n);
		for (int s = 0; s < n; s++) {
			int k = n - 1 - s;
			size_t sz = (size_t)(k % 2 ? 100000 + k * 77 : 3000 + k);
			CHECK(sizes[s] == (int)sz, "n=%d slot %d size %d != %zu", n, s, sizes[s],
			      sz);
			CHECK(netdrv_check(data[s], sz, (uint32_t)tags[s]) == 0,
			      "n=%d slot %d (tag %d) holds the wrong message", n, s, tags[s]);
		}
	}
	{
		void *reqs[33], *data[1];
		size_t sz = 256 << 10, c = sz;
		int tag = 9, sizes[1];
		for (int k = 0; k < 32; k++) {
			data[0] = buf + (size_t)k * sz;
			reqs[k] = NULL;
			CHECK(net->irecv(comm, 1, data, &c, &tag, NULL, NULL, &reqs[k]) ==
				      CRUXN_SUCCESS &&
				  reqs[k],
			      "irecv %d of 32 must be accepted", k);
		}
		data[0] = buf + 32 * sz;
		reqs[32] = (void *)0x1234;
		CHECK(net->irecv(comm, 1, data, &c, &tag, NULL, NULL, &reqs[32]) == CRUXN_SUCCESS &&
			  reqs[32] == NULL,
		      "the 33rd irecv must return a NULL request");
		CHECK(netdrv_wait(net, reqs[0], sizes, 10000) == 0, "first of 32");
		CHECK(net->irecv(comm, 1, data, &c, &tag, NULL, NULL, &reqs[32]) == CRUXN_SUCCESS &&
			  reqs[32],
		      "retry after a completion must be accepted");
		for (int k = 1; k < 33; k++)
			CHECK(netdrv_wait(net, reqs[k], sizes, 10000) == 0, "in-flight recv %d", k);
		for (int k = 0; k < 33; k++)
			CHECK(netdrv_check(buf + (size_t)k * sz, sz, (uint32_t)(5000 + k)) == 0,
			      "in-flight message %d corrupt or out of order", k);
	}
	free(buf);
}

/* Fork a sender; this process receives. Returns the child's pid. */
static pid_t start_pair(void (*child_fn)(void *ctx, void *comm), void **ctx_out, void **rcomm)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	void *l = NULL;
	pid_t pid;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, exchange_fd) == 0, "socketpair");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		void *ctx = init_ctx(), *s = NULL;
		CHECK(read(exchange_fd[1], handle, sizeof(handle)) == (ssize_t)sizeof(handle),
		      "handle");
		CHECK(netdrv_connect(net, ctx, 0, handle, &s) == 0, "connect");
		child_fn(ctx, s);
		CHECK(net->closeSend(s) == CRUXN_SUCCESS, "closeSend");
		CHECK(net->finalize(ctx) == CRUXN_SUCCESS, "finalize");
		_exit(0);
	}
	void *ctx = init_ctx();
	CHECK(net->listen(ctx, 0, handle, &l) == CRUXN_SUCCESS, "listen");
	/* accept before the peer connects: must come back at once with no comm */
	void *r = (void *)1;
	uint64_t t0 = netdrv_now_ns();
	CHECK(net->accept(l, &r, NULL) == CRUXN_SUCCESS && r == NULL, "early accept");
	CHECK(netdrv_now_ns() - t0 < CONF_NONBLOCK_NS, "accept blocked");
	CHECK(write(exchange_fd[0], handle, sizeof(handle)) == (ssize_t)sizeof(handle), "handle");
	CHECK(netdrv_accept(net, l, &r) == 0, "accept");
	net->closeListen(l);
	*ctx_out = ctx;
	*rcomm = r;
	return pid;
}

static int wait_child(pid_t pid)
{
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int cmd_pair(void)
{
	void *ctx, *r;
	pid_t pid = start_pair(pair_sender, &ctx, &r);
	pair_receiver(ctx, r);
	CHECK(net->closeRecv(r) == CRUXN_SUCCESS, "closeRecv");
	CHECK(wait_child(pid) == 0, "sender failed");
	CHECK(net->finalize(ctx) == CRUXN_SUCCESS, "finalize");
	printf("pair: ok (non-blocking set-up, sizes 0 B..256 MiB, larger buffers, grouped "
	       "n=1..8, 32 in flight, NULL-request retry)\n");
	return 0;
}

/* ---- faults ---- */

static void endless_sender(void *ctx, void *comm)
{
	(void)ctx;
	size_t sz = 64 << 20;
	char *b = malloc(sz);
	CHECK(b, "malloc");
	netdrv_fill(b, sz, 1);
	for (;;)
		if (netdrv_send(net, comm, b, sz, 1, 60000) != 0)
			_exit(3);
}

static void endless_receiver_child(void)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	void *ctx = init_ctx(), *l = NULL, *r = NULL;
	size_t sz = 64 << 20;
	char *b = malloc(sz);
	CHECK(b, "malloc");
	CHECK(net->listen(ctx, 0, handle, &l) == CRUXN_SUCCESS, "listen");
	CHECK(write(exchange_fd[1], handle, sizeof(handle)) == (ssize_t)sizeof(handle), "handle");
	CHECK(netdrv_accept(net, l, &r) == 0, "accept");
	CHECK(netdrv_recv(net, r, b, sz, 1, NULL, 20000) == 0, "first recv");
	if (getenv("CRUX_TRANSPORT") && strcmp(getenv("CRUX_TRANSPORT"), "verbs") == 0) {
		/*
		 * Post the next receive (an RDMA sender waits for its clear-to-send,
		 * which irecv itself writes), then stall: nothing progresses it.
		 */
		void *req = NULL, *data[1] = {b};
		int tag = 1;
		for (uint64_t t0 = netdrv_now_ns(); !req && netdrv_now_ns() - t0 < 20000000000ull;)
			CHECK(net->irecv(r, 1, data, &sz, &tag, NULL, NULL, &req) == CRUXN_SUCCESS,
			      "second irecv");
	}
	for (;;)
		pause();
}

static void fault_garbage(void *ctx)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE], good[CRUXN_NET_HANDLE_MAXSIZE];
	void *s = NULL, *l = NULL;
	srand(42);
	for (int i = 0; i < 20; i++) {
		for (size_t k = 0; k < sizeof(handle); k++)
			handle[k] = (char)rand();
		s = NULL;
		CHECK(net->connect(ctx, 0, handle, &s, NULL) != CRUXN_SUCCESS && s == NULL,
		      "a garbage handle must be refused");
	}
	/* a real handle whose in-progress state pointer was scribbled over */
	CHECK(net->listen(ctx, 0, good, &l) == CRUXN_SUCCESS, "listen");
	memcpy(handle, good, sizeof(handle));
	uint64_t bogus = 0xdeadbeefcafe;
	memcpy(handle + 40, &bogus, sizeof(bogus));
	CHECK(net->connect(ctx, 0, handle, &s, NULL) != CRUXN_SUCCESS, "scribbled state refused");
	net->closeListen(l);
	/* a listener that went away: refused within a bounded time */
	uint64_t t0 = netdrv_now_ns();
	int rc = 0;
	s = NULL;
	while (!s && rc == 0 && netdrv_now_ns() - t0 < 10000000000ull)
		rc = net->connect(ctx, 0, good, &s, NULL);
	CHECK(rc != CRUXN_SUCCESS && !s, "connect to a closed listener must fail");
	CHECK(net->test(NULL, &rc, NULL) != CRUXN_SUCCESS, "test(NULL) must fail");
	char junk[256];
	memset(junk, 0x5a, sizeof(junk));
	CHECK(net->test(junk, &rc, NULL) != CRUXN_SUCCESS, "test(garbage) must fail");
	CHECK(net->isend(junk, junk, 4, 0, NULL, NULL, (void **)&s) != CRUXN_SUCCESS,
	      "isend on garbage comm");
}

static void fault_sender_killed(void)
{
	void *ctx, *r, *req = NULL, *data[1];
	size_t sz = 64 << 20, got = 0;
	char *b = malloc(sz);
	int tag = 1, done = 0, rc = 0;
	CHECK(b, "malloc");
	pid_t pid = start_pair(endless_sender, &ctx, &r);
	CHECK(netdrv_recv(net, r, b, sz, 1, &got, 20000) == 0 && got == sz, "first message");
	data[0] = b;
	CHECK(net->irecv(r, 1, data, &sz, &tag, NULL, NULL, &req) == CRUXN_SUCCESS && req, "irecv");
	/* let some of it arrive, then kill the sender mid-message */
	CHECK(net->test(req, &done, NULL) == CRUXN_SUCCESS, "test");
	usleep(2000);
	kill(pid, SIGKILL);
	wait_child(pid);
	uint64_t t0 = netdrv_now_ns();
	done = 0;
	while (!done && rc == CRUXN_SUCCESS) {
		rc = net->test(req, &done, NULL);
		CHECK(netdrv_now_ns() - t0 < 10000000000ull, "no error 10 s after the peer died");
	}
	/* Either the message had fully arrived, or test reports the failure. */
	CHECK(rc != CRUXN_SUCCESS || done, "dead sender");
	if (rc == CRUXN_SUCCESS) {
		/* it completed: the next one must fail */
		req = NULL;
		rc = net->irecv(r, 1, data, &sz, &tag, NULL, NULL, &req);
		t0 = netdrv_now_ns();
		done = 0;
		while (rc == CRUXN_SUCCESS && req && !done) {
			rc = net->test(req, &done, NULL);
			CHECK(netdrv_now_ns() - t0 < 10000000000ull, "no error after peer died");
		}
		CHECK(rc != CRUXN_SUCCESS, "receive from a dead peer must fail");
	}
	printf("  dead sender detected in %.1f ms\n", (double)(netdrv_now_ns() - t0) / 1e6);
	CHECK(net->closeRecv(r) == CRUXN_SUCCESS, "closeRecv after failure");
	free(b);
	net->finalize(ctx);
}

static void fault_receiver_killed(void)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	void *ctx, *s = NULL;
	size_t sz = 64 << 20;
	char *b = malloc(sz);
	int rc = 0;
	CHECK(b, "malloc");
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, exchange_fd) == 0, "socketpair");
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0)
		endless_receiver_child();
	ctx = init_ctx();
	CHECK(read(exchange_fd[0], handle, sizeof(handle)) == (ssize_t)sizeof(handle), "handle");
	CHECK(netdrv_connect(net, ctx, 0, handle, &s) == 0, "connect");
	netdrv_fill(b, sz, 1);
	CHECK(netdrv_send(net, s, b, sz, 1, 20000) == 0, "first send");
	void *req = NULL;
	/* NCCL's IB shape answers NULL until the receiver's next receive is posted */
	for (uint64_t t1 = netdrv_now_ns(); !req && netdrv_now_ns() - t1 < 20000000000ull;)
		CHECK(net->isend(s, b, sz, 1, NULL, NULL, &req) == CRUXN_SUCCESS, "isend");
	CHECK(req, "isend accepted within 20 s");
	usleep(20000);
	kill(pid, SIGKILL);
	wait_child(pid);
	uint64_t t0 = netdrv_now_ns();
	int done = 0;
	while (rc == CRUXN_SUCCESS && !done) {
		rc = net->test(req, &done, NULL);
		CHECK(netdrv_now_ns() - t0 < 10000000000ull, "no error 10 s after the peer died");
	}
	CHECK(rc != CRUXN_SUCCESS, "a send to a killed receiver must fail");
	printf("  dead receiver detected in %.1f ms\n", (double)(netdrv_now_ns() - t0) / 1e6);
	CHECK(net->closeSend(s) == CRUXN_SUCCESS, "closeSend after failure");
	free(b);
	net->finalize(ctx);
}

static void inflight_sender(void *ctx, void *comm)
{
	(void)ctx;
	size_t sz = 8 << 20;
	char *b = malloc(sz * 8);
	void *reqs[8];
	CHECK(b, "malloc");
	netdrv_fill(b, sz * 8, 2);
	for (int k = 0; k < 8; k++) {
		int rc = CRUXN_SUCCESS;
		reqs[k] = NULL;
		/*
		 * An RDMA transport answers NULL until the receiver's receive is
		 * posted, and an error once the receiver is gone (it closes after
		 * the first message): both end the sends "one way or the other".
		 */
		for (uint64_t t0 = netdrv_now_ns();
		     !reqs[k] && rc == CRUXN_SUCCESS && netdrv_now_ns() - t0 < 10000000000ull;)
			rc = net->isend(comm, b + (size_t)k * sz, sz, 1, NULL, NULL, &reqs[k]);
		CHECK(rc == CRUXN_SUCCESS || (k > 0 && rc == CRUXN_REMOTE_ERROR), "isend");
		if (rc != CRUXN_SUCCESS)
			break;
		CHECK(reqs[k], "isend accepted within 10 s");
	}
	/*
	 * The receiver closes right after the first message arrived: that send
	 * completes (the RDMA transport learns it from the receiver's goodbye even
	 * when the close cost the acknowledgement); later sends end one way or the
	 * other, never hang.
	 */
	CHECK(netdrv_wait(net, reqs[0], NULL, 10000) == 0, "first in-flight send");
	for (int k = 1; k < 8 && reqs[k]; k++) {
		int done = 0, rc = CRUXN_SUCCESS;
		for (uint64_t t0 = netdrv_now_ns(); !done && rc == CRUXN_SUCCESS;) {
			rc = net->test(reqs[k], &done, NULL);
			CHECK(netdrv_now_ns() - t0 < 10000000000ull, "in-flight send %d hangs", k);
		}
	}
	usleep(300000);
	/* close with requests still in flight */
	CHECK(net->closeSend(comm) == CRUXN_SUCCESS, "closeSend with requests in flight");
	free(b);
	net->finalize(ctx);
	_exit(0);
}

static void fault_close_inflight(void)
{
	void *ctx, *r, *reqs[8], *data[1];
	size_t sz = 8 << 20;
	char *b = malloc(sz * 8);
	int tag = 1;
	CHECK(b, "malloc");
	pid_t pid = start_pair(inflight_sender, &ctx, &r);
	for (int k = 0; k < 8; k++) {
		data[0] = b + (size_t)k * sz;
		reqs[k] = NULL;
		CHECK(net->irecv(r, 1, data, &sz, &tag, NULL, NULL, &reqs[k]) == CRUXN_SUCCESS &&
			  reqs[k],
		      "irecv");
	}
	CHECK(netdrv_wait(net, reqs[0], NULL, 10000) == 0, "first in-flight recv");
	CHECK(netdrv_check(b, sz, 2) == 0, "first in-flight message corrupt");
	uint64_t t0 = netdrv_now_ns();
	CHECK(net->closeRecv(r) == CRUXN_SUCCESS, "closeRecv with requests in flight");
	CHECK(netdrv_now_ns() - t0 < 2000000000ull, "closeRecv took more than 2 s");
	CHECK(wait_child(pid) == 0, "sender crashed or hung on close");
	free(b);
	net->finalize(ctx);
}

static void fault_bad_env(void)
{
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		void *ctx = NULL;
		cruxn_comm_config_t cfg = {.trafficClass = -1};
		setenv("CRUX_SOCKET_NTHREADS", "lots", 1);
		_exit(net->init(&ctx, 1, &cfg, logger, NULL) == CRUXN_SUCCESS ? 1 : 0);
	}
	CHECK(wait_child(pid) == 0, "init must fail on CRUX_SOCKET_NTHREADS=lots");
}

/* Silent strangers connected to a listener must not keep a real peer out. */
static void fault_strangers(void *ctx)
{
	char handle[CRUXN_NET_HANDLE_MAXSIZE];
	void *l = NULL, *s = NULL, *r = NULL;
	int fds[40];
	struct sockaddr_in a;
	uint16_t port;

	CHECK(net->listen(ctx, 0, handle, &l) == CRUXN_SUCCESS, "listen");
	memcpy(&port, handle + 24, sizeof(port)); /* our handle layout: port after the address */
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = port;
	a.sin_addr.s_addr = htonl(0x7f000001);
	for (int i = 0; i < 40; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		CHECK(fds[i] >= 0 && connect(fds[i], (struct sockaddr *)&a, sizeof(a)) == 0,
		      "stranger connect");
		if (i % 8 == 0)
			CHECK(net->accept(l, &r, NULL) == CRUXN_SUCCESS && !r,
			      "accept with strangers");
	}
	uint64_t t0 = netdrv_now_ns();
	while (!s || !r) {
		if (!r)
			CHECK(net->accept(l, &r, NULL) == CRUXN_SUCCESS, "accept");
		if (!s)
			CHECK(net->connect(ctx, 0, handle, &s, NULL) == CRUXN_SUCCESS, "connect");
		CHECK(netdrv_now_ns() - t0 < 5000000000ull, "strangers kept the real peer out");
	}
	for (int i = 0; i < 40; i++)
		close(fds[i]);
	net->closeSend(s);
	net->closeRecv(r);
	net->closeListen(l);
}

static int cmd_faults(void)
{
	void *ctx = init_ctx();
	fault_garbage(ctx);
	printf("  garbage handles refused\n");
	if (!getenv("CRUX_SOCKET_FAMILY")) {
		fault_strangers(ctx);
		printf("  silent strangers do not block a real peer\n");
	}
	net->finalize(ctx);
	fault_bad_env();
	printf("  bad CRUX_ value fails init\n");
	fault_sender_killed();
	fault_receiver_killed();
	fault_close_inflight();
	printf("faults: ok\n");
	return 0;
}

/* ---- ring all-reduce ---- */

struct ring_shared {
	char handles[16][CRUXN_NET_HANDLE_MAXSIZE];
	volatile int ready[16];
};

static double ring_value(int rank, size_t i)
{
	return (double)((rank + 1) * 1000 + (long)(i % 997));
}

static void ring_rank(struct ring_shared *sh, int rank, int nranks, size_t count)
{
	void *ctx = init_ctx(), *l = NULL, *s = NULL, *r = NULL;
	double *v = malloc(count * sizeof(double)), *tmp;
	size_t seg = (count + (size_t)nranks - 1) / (size_t)nranks;
	CHECK(v, "malloc");
	tmp = malloc(seg * sizeof(double));
	CHECK(tmp, "malloc");
	for (size_t i = 0; i < count; i++)
		v[i] = ring_value(rank, i);
	CHECK(net->listen(ctx, 0, sh->handles[rank], &l) == CRUXN_SUCCESS, "listen");
	__atomic_store_n(&sh->ready[rank], 1, __ATOMIC_RELEASE);
	int next = (rank + 1) % nranks;
	while (!__atomic_load_n(&sh->ready[next], __ATOMIC_ACQUIRE))
		usleep(1000);
	uint64_t t0 = netdrv_now_ns();
	while (!s || !r) {
		if (!s)
			CHECK(net->connect(ctx, 0, sh->handles[next], &s, NULL) == CRUXN_SUCCESS,
			      "connect");
		if (!r)
			CHECK(net->accept(l, &r, NULL) == CRUXN_SUCCESS, "accept");
		CHECK(netdrv_now_ns() - t0 < 20000000000ull, "ring set-up");
	}
	net->closeListen(l);
	/* reduce-scatter, then all-gather */
	for (int phase = 0; phase < 2; phase++) {
		for (int step = 0; step < nranks - 1; step++) {
			int sidx = ((rank - step + (phase ? 1 : 0)) % nranks + nranks) % nranks;
			int ridx = ((rank - step - 1 + (phase ? 1 : 0)) % nranks + nranks) % nranks;
			size_t soff = (size_t)sidx * seg, roff = (size_t)ridx * seg;
			size_t slen = soff >= count ? 0 : (count - soff < seg ? count - soff : seg);
			size_t rlen = roff >= count ? 0 : (count - roff < seg ? count - roff : seg);
			void *sreq = NULL, *rreq = NULL;
			void *data[1] = {phase ? (void *)(v + roff) : (void *)tmp};
			size_t cap = seg * sizeof(double);
			int tag = 0, got = -1;
			while (!rreq)
				CHECK(net->irecv(r, 1, data, &cap, &tag, NULL, NULL, &rreq) ==
					  CRUXN_SUCCESS,
				      "irecv");
			while (!sreq)
				CHECK(net->isend(s, v + soff, slen * sizeof(double), 0, NULL, NULL,
						 &sreq) == CRUXN_SUCCESS,
				      "isend");
			CHECK(netdrv_wait(net, sreq, NULL, 20000) == 0, "ring send");
			CHECK(netdrv_wait(net, rreq, &got, 20000) == 0, "ring recv");
			CHECK(got == (int)(rlen * sizeof(double)), "ring size %d", got);
			if (!phase)
				for (size_t i = 0; i < rlen; i++)
					v[roff + i] += tmp[i];
		}
	}
	for (size_t i = 0; i < count; i++) {
		double want = 0;
		for (int k = 0; k < nranks; k++)
			want += ring_value(k, i);
		CHECK(v[i] == want, "rank %d element %zu = %g, want %g", rank, i, v[i], want);
	}
	net->closeSend(s);
	net->closeRecv(r);
	net->finalize(ctx);
	free(v);
	free(tmp);
}

static int cmd_ring(int nranks)
{
	struct ring_shared *sh;
	pid_t pids[16];
	size_t count = (3u << 20) + 5; /* odd count: uneven segments */
	int fails = 0;

	CHECK(nranks >= 2 && nranks <= 16, "ranks in [2, 16]");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(sh != MAP_FAILED, "mmap");
	memset(sh, 0, sizeof(*sh));
	for (int k = 0; k < nranks; k++) {
		pids[k] = fork();
		CHECK(pids[k] >= 0, "fork");
		if (pids[k] == 0) {
			ring_rank(sh, k, nranks, count);
			_exit(0);
		}
	}
	for (int k = 0; k < nranks; k++)
		fails += wait_child(pids[k]) != 0;
	CHECK(fails == 0, "%d rank(s) failed", fails);
	printf("ring: ok (%d ranks, all-reduce of %zu doubles verified)\n", nranks, count);
	return 0;
}

/* ---- churn: concurrent connections, table changing underneath ---- */

#define CHURN_PAIRS 3
#define CHURN_MSGS  150

static volatile int churn_running;
/* Table changes so far: the pairs keep sending until more than 10 happened,
 * so a fast machine cannot finish the transfer between two changes. */
static int churn_flips;

static void *churn_pair(void *arg)
{
	void *ctx = arg, *s, *r;
	size_t cap = 2u << 20;
	char *sb = malloc(cap), *rb = malloc(cap);
	CHECK(sb && rb, "malloc");
	self_connect(ctx, &s, &r);
	for (uint32_t k = 0;
	     k < CHURN_MSGS || __atomic_load_n(&churn_flips, __ATOMIC_RELAXED) <= 10; k++) {
		/* inline and striped sizes, unaligned */
		size_t sz =
		    (size_t)((k * 7919u) % 5 == 0 ? (k * 104729u) % cap : (k * 131u) % 70000);
		uint32_t seed = (uint32_t)(uintptr_t)&s ^ k;
		void *sr = NULL, *rr = NULL, *data[1] = {rb};
		int tag = 0, got = -1, ds = 0, dr = 0;
		netdrv_fill(sb, sz, seed);
		while (!rr)
			CHECK(net->irecv(r, 1, data, &cap, &tag, NULL, NULL, &rr) == CRUXN_SUCCESS,
			      "irecv");
		while (!sr)
			CHECK(net->isend(s, sb, sz, 0, NULL, NULL, &sr) == CRUXN_SUCCESS, "isend");
		uint64_t t0 = netdrv_now_ns();
		while (!ds || !dr) {
			if (!ds)
				CHECK(net->test(sr, &ds, NULL) == CRUXN_SUCCESS, "test send %u", k);
			if (!dr)
				CHECK(net->test(rr, &dr, &got) == CRUXN_SUCCESS, "test recv %u", k);
			CHECK(netdrv_now_ns() - t0 < 20000000000ull, "message %u stuck", k);
		}
		CHECK(got == (int)sz && netdrv_check(rb, sz, seed) == 0,
		      "message %u (%zu bytes) corrupt across a table change", k, sz);
	}
	net->closeSend(s);
	net->closeRecv(r);
	free(sb);
	free(rb);
	return NULL;
}

static int cmd_churn(void)
{
	struct crux_dt_settings set;
	struct crux_dt_writer *w = NULL;
	struct crux_dt_job job;
	struct crux_dt_route route;
	pthread_t th[CHURN_PAIRS];
	char id[96];
	int flips = 0;

	crux_dt_settings_default(CRUX_DEFAULT_LEVELS, &set);
	set.heartbeat_timeout_ns = 3600ull * 1000000000ull;
	CHECK(crux_dt_writer_open(getenv("CRUX_SHM_DIR"), &set, &w, NULL) == CRUX_OK,
	      "decision table writer");
	snprintf(id, sizeof(id), "env:%s", getenv("CRUX_JOB_ID"));
	memset(&job, 0, sizeof(job));
	job.job_key = crux_job_key_of(id);
	job.state = CRUX_JOB_SCHEDULED;
	memset(&route, 0, sizeof(route));
	route.job_key = job.job_key;
	CHECK(crux_addr_parse("127.0.0.1", &route.peer) == CRUX_OK, "addr");
	route.nports = 2;
	CHECK(crux_dt_publish(w, &job, 1, NULL, 0) == CRUX_OK, "publish");
	crux_dt_heartbeat(w);

	void *ctx = init_ctx();
	churn_running = 1;
	for (int i = 0; i < CHURN_PAIRS; i++)
		CHECK(pthread_create(&th[i], NULL, churn_pair, ctx) == 0, "thread");
	/* flip level and route while the connections run; joining ends it */
	for (int i = 0; i < CHURN_PAIRS; i++) {
		while (pthread_tryjoin_np(th[i], NULL) != 0) {
			job.level = (uint8_t)(flips % CRUX_DEFAULT_LEVELS);
			route.path_id = (uint16_t)(flips % 3);
			route.ports[0] = (uint16_t)(46000 + 100 * (flips % 3));
			route.ports[1] = (uint16_t)(route.ports[0] + 1);
			CHECK(crux_dt_publish(w, &job, 1, &route, flips % 3 == 2 ? 0 : 1) ==
				  CRUX_OK,
			      "publish");
			crux_dt_heartbeat(w);
			flips++;
			__atomic_store_n(&churn_flips, flips, __ATOMIC_RELAXED);
			usleep(3000);
		}
	}
	crux_dt_writer_close(w);
	CHECK(net->finalize(ctx) == CRUXN_SUCCESS, "finalize");
	CHECK(flips > 10, "the table changed only %d times", flips);
	printf("churn: ok (%d connections x %d messages verified across %d table changes)\n",
	       CHURN_PAIRS, CHURN_MSGS, flips);
	return 0;
}

/* ---- flush (verbs) ---- */

static int cmd_flush(void)
{
	void *ctx = init_ctx(), *s, *r, *smh, *hmh, *gmh;
	static char sb[1 << 20], hb[1 << 20], gb[1 << 20];
	void *data[1], *mh[1], *sr = NULL, *rr = NULL, *fr;
	size_t cap = sizeof(gb);
	int tags[1] = {5}, sizes[1], ds = 0, dr = 0;

	self_connect(ctx, &s, &r);
	CHECK(net->regMr(s, sb, sizeof(sb), CRUXN_PTR_HOST, &smh) == CRUXN_SUCCESS, "regMr send");
	CHECK(net->regMr(r, hb, sizeof(hb), CRUXN_PTR_HOST, &hmh) == CRUXN_SUCCESS, "regMr host");
	/* host memory standing in for GPU memory: the device cannot tell */
	CHECK(net->regMr(r, gb, sizeof(gb), CRUXN_PTR_CUDA, &gmh) == CRUXN_SUCCESS, "regMr cuda");
	for (int k = 0; k < 20; k++) {
		netdrv_fill(sb, sizeof(sb), (uint32_t)k);
		data[0] = gb;
		sr = rr = NULL;
		ds = dr = 0;
		CHECK(net->irecv(r, 1, data, &cap, tags, &gmh, NULL, &rr) == CRUXN_SUCCESS && rr,
		      "irecv");
		for (uint64_t t0 = netdrv_now_ns(); !sr && netdrv_now_ns() - t0 < 5000000000ull;)
			CHECK(net->isend(s, sb, sizeof(sb), 5, smh, NULL, &sr) == CRUXN_SUCCESS,
			      "isend");
		CHECK(sr, "isend accepted");
		while (!ds || !dr) {
			if (!ds)
				CHECK(net->test(sr, &ds, NULL) == CRUXN_SUCCESS, "test send");
			if (!dr)
				CHECK(net->test(rr, &dr, sizes) == CRUXN_SUCCESS, "test recv");
		}
		sizes[0] = (int)sizeof(sb);
		mh[0] = gmh;
		fr = NULL;
		CHECK(net->iflush(r, 1, data, sizes, mh, &fr) == CRUXN_SUCCESS && fr,
		      "iflush of GPU memory must give a request");
		CHECK(netdrv_wait(net, fr, NULL, 5000) == 0, "flush did not complete");
		CHECK(netdrv_check(gb, sizeof(sb), (uint32_t)k) == 0, "data after flush");
	}
	data[0] = hb;
	mh[0] = hmh;
	fr = (void *)1;
	CHECK(net->iflush(r, 1, data, sizes, mh, &fr) == CRUXN_SUCCESS && fr == NULL,
	      "iflush of host memory must return a NULL request");
	net->deregMr(s, smh);
	net->deregMr(r, hmh);
	net->deregMr(r, gmh);
	net->closeSend(s);
	net->closeRecv(r);
	net->finalize(ctx);
	printf("flush: ok (20 receives into GPU-registered memory flushed by a 1-byte READ; host "
	       "memory: NULL request)\n");
	return 0;
}

int cruxn_conf_xfer(int argc, char **argv, const cruxn_net_v12_t *n);
int cruxn_conf_probe(int argc, char **argv);

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s symbols|pair|faults|ring N|xfer-recv|xfer-send|probe\n",
			argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (strcmp(argv[1], "probe") == 0)
		return cruxn_conf_probe(argc - 1, argv + 1);
	setup_env();
	load();
	if (strcmp(argv[1], "symbols") == 0)
		return cmd_symbols();
	if (strcmp(argv[1], "hints") == 0)
		return cmd_hints();
	if (strcmp(argv[1], "pair") == 0)
		return cmd_pair();
	if (strcmp(argv[1], "faults") == 0)
		return cmd_faults();
	if (strcmp(argv[1], "churn") == 0)
		return cmd_churn();
	if (strcmp(argv[1], "flush") == 0)
		return cmd_flush();
	if (strcmp(argv[1], "ring") == 0)
		return cmd_ring(argc > 2 ? atoi(argv[2]) : 4);
	if (strncmp(argv[1], "xfer-", 5) == 0)
		return cruxn_conf_xfer(argc - 1, argv + 1, net);
	fprintf(stderr, "unknown command %s\n", argv[1]);
	return 2;
}
