/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs transport's data path: memory registration (a process-wide
 * cache, so registrations are global as NCCL's regIsGlobal asks), CTS
 * writes, data by RDMA WRITE WITH IMMEDIATE, completions, lane moves.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/log.h"
#include "vx_transport.h"

#define VX_MR_MAGIC 0x4d565843u

/*
 * The immediate of a data write: the receiver's request index and slot, and
 * how many parts (one per queue pair) the message was split into; the
 * receive completes when all parts' immediates arrived.
 */
#define IMM(nparts, req, slot) ((((uint32_t)(nparts)-1) << 8) | ((uint32_t)(req) << 3) | (slot))
/*
 * The message's size is the completion's byte_len (what RC reports for a
 * WRITE WITH IMMEDIATE): a single receive, one part, no adaptive-routing
 * split. NCCL carries a single receive's size with the data too (in its
 * immediate); grouped receives and split messages write the size table.
 */
#define IMM_BYTE_LEN   (1u << 11)
#define IMM_SLOT(imm)  ((int)((imm)&7))
#define IMM_REQ(imm)   ((int)(((imm) >> 3) & (CRUXN_NET_MAX_REQUESTS - 1)))
#define IMM_PARTS(imm) ((int)(((imm) >> 8) & (VX_MAX_QPS - 1)) + 1)

struct vx_mr {
	uint32_t magic;
	int dev;
	int type; /* CRUXN_PTR_HOST / _CUDA (_DMABUF registrations are GPU memory too) */
	uintptr_t addr;
	size_t len;
	struct ibv_mr *mr;
	int refs;
	struct vx_mr *next;
};

static pthread_mutex_t mr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vx_mr *mr_list;
_Atomic uint64_t cruxn_vx_mr_searches;

static struct vx_mr *mr_find(int dev, uintptr_t addr, size_t len)
{
	for (struct vx_mr *m = mr_list; m; m = m->next)
		if (m->dev == dev && addr >= m->addr && addr + len <= m->addr + m->len)
			return m;
	return NULL;
}

/*
 * A data buffer's registration: with relaxed ordering where the library can
 * pass it (ibv_reg_mr_iova2) and NCCL_IB_PCI_RELAXED_ORDERING allows, as
 * NCCL; the FIFO and size tables stay strictly ordered (vx_setup.c).
 */
static int data_access(void)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	if (cruxn_vx_qpcfg.relaxed && cruxn_vx_state.ibv.reg_mr_iova2)
		access |= IBV_ACCESS_RELAXED_ORDERING;
	return access;
}

static struct ibv_mr *data_reg(struct ibv_pd *pd, void *p, size_t len)
{
	const struct cruxn_ibv *v = &cruxn_vx_state.ibv;
	int access = data_access();

	if (access & IBV_ACCESS_RELAXED_ORDERING)
		return v->reg_mr_iova2(pd, p, len, (uint64_t)(uintptr_t)p, (unsigned)access);
	return v->reg_mr(pd, p, len, access);
}

static crux_status_t vx_reg_mr(struct cruxn_base *b, void *data, size_t size, int type,
			       uint64_t offset, int fd, void **mhandle)
{
	const struct cruxn_ibv *v = &cruxn_vx_state.ibv;
	struct vx_comm *c = vx_of(b);
	int access = data_access();
	struct vx_mr *m;

	if (type != CRUXN_PTR_HOST && type != CRUXN_PTR_CUDA) {
		crux_err("regMr: memory type %d is not supported by the verbs transport", type);
		return CRUX_ERR_INVAL;
	}
	pthread_mutex_lock(&mr_lock);
	m = mr_find(b->dev, (uintptr_t)data, size);
	if (m && fd < 0) {
		m->refs++;
		pthread_mutex_unlock(&mr_lock);
		*mhandle = m;
		return CRUX_OK;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&mr_lock);
		return CRUX_ERR_NOMEM;
	}
	/* NCCL closes its dma-buf fd after this call: the registration keeps no copy. */
	if (fd >= 0 && v->reg_dmabuf_mr)
		m->mr = v->reg_dmabuf_mr(c->dev->pd, offset, size, (uint64_t)(uintptr_t)data, fd,
					 access);
	else
		m->mr = data_reg(c->dev->pd, data, size);
	if (!m->mr) {
		pthread_mutex_unlock(&mr_lock);
		crux_err("regMr: %s refused %zu bytes at %p (%s)%s", c->dev->name, size, data,
			 strerror(errno),
			 type == CRUXN_PTR_CUDA ? "; GPU memory needs nvidia-peermem or DMA-BUF"
						: "; check the locked-memory limit (ulimit -l)");
		free(m);
		return CRUX_ERR_IO;
	}
	m->magic = VX_MR_MAGIC;
	m->dev = b->dev;
	m->type = fd >= 0 ? CRUXN_PTR_CUDA : type;
	m->addr = (uintptr_t)data;
	m->len = size;
	m->refs = 1;
	m->next = mr_list;
	mr_list = m;
	pthread_mutex_unlock(&mr_lock);
	*mhandle = m;
	return CRUX_OK;
}

static crux_status_t vx_dereg_mr(struct cruxn_base *b, void *mhandle)
{
	struct vx_mr *m = mhandle;
	(void)b;

	if (m->magic != VX_MR_MAGIC)
		return CRUX_ERR_INVAL;
	pthread_mutex_lock(&mr_lock);
	if (--m->refs == 0) {
		for (struct vx_mr **pp = &mr_list; *pp; pp = &(*pp)->next) {
			if (*pp == m) {
				*pp = m->next;
				break;
			}
		}
		cruxn_vx_state.ibv.dereg_mr(m->mr);
		m->magic = 0;
		free(m);
	}
	pthread_mutex_unlock(&mr_lock);
	return CRUX_OK;
}

static int once_unregistered;

/*
 * The keys covering [p, p+len): from NCCL's memory handle when it passed
 * one that covers the buffer (no lock, no search), else from the cache. A
 * buffer NCCL did not register (NCCL always does; test drivers may not) is
 * registered for this request only and released when it finishes. False:
 * the device refused the registration.
 */
static __attribute__((noinline)) bool keys_searched(struct vx_comm *c, struct cruxn_req *r, void *p,
						    size_t len, uint32_t *lkey, uint32_t *rkey)
{
	struct vx_mr *m;
	struct ibv_mr *t;

	atomic_fetch_add_explicit(&cruxn_vx_mr_searches, 1, memory_order_relaxed);
	pthread_mutex_lock(&mr_lock);
	m = mr_find(c->b.dev, (uintptr_t)p, len);
	if (m) {
		*lkey = m->mr->lkey;
		*rkey = m->mr->rkey;
	}
	pthread_mutex_unlock(&mr_lock);
	if (m)
		return true;
	crux_log_once(&once_unregistered, CRUX_LOG_WARN,
		      "a %zu-byte buffer at %p was not registered (regMr): registering buffers "
		      "per request, which costs a registration per message",
		      len, p);
	t = data_reg(c->dev->pd, p, len);
	if (!t || vxr(r)->ntmp >= (int)(sizeof(vxr(r)->tmp) / sizeof(vxr(r)->tmp[0]))) {
		if (t)
			cruxn_vx_state.ibv.dereg_mr(t);
		crux_err("%s refused to register %zu bytes at %p (%s)", c->dev->name, len, p,
			 strerror(errno));
		return false;
	}
	vxr(r)->tmp[vxr(r)->ntmp++] = t;
	*lkey = t->lkey;
	*rkey = t->rkey;
	return true;
}

/* Inline: NCCL's handle covering the buffer, the case of every message. */
static inline bool keys_of(struct vx_comm *c, struct cruxn_req *r, const void *mh, void *p,
			   size_t len, uint32_t *lkey, uint32_t *rkey)
{
	const struct vx_mr *h = mh;

	if (len == 0) {
		*lkey = *rkey = 0;
		return true;
	}
	if (h && h->magic == VX_MR_MAGIC && h->dev == c->b.dev && (uintptr_t)p >= h->addr &&
	    (uintptr_t)p + len <= h->addr + h->len) {
		*lkey = h->mr->lkey;
		*rkey = h->mr->rkey;
		return true;
	}
	return keys_searched(c, r, p, len, lkey, rkey);
}

static void vx_req_release(struct cruxn_base *b, struct cruxn_req *r)
{
	(void)b;
	for (int i = 0; i < vxr(r)->ntmp; i++)
		cruxn_vx_state.ibv.dereg_mr(vxr(r)->tmp[i]);
	vxr(r)->ntmp = 0;
}

/* ---- completions ------------------------------------------------------------ */

static const char *wc_hint(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_LOC_PROT_ERR:
		return "the peer refused the memory key or bounds: a buffer NCCL did not register, "
		       "or one deregistered while in use";
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return "the peer does not answer: it died, or the fabric drops packets (check "
		       "PFC/ECN and NCCL_IB_TIMEOUT)";
	default:
		return "see the device's error counters and the peer's log";
	}
}

/* What a peer that closed or died causes (as opposed to a refused key or a bug). */
static bool peer_gone_status(enum ibv_wc_status s)
{
	return s == IBV_WC_RETRY_EXC_ERR || s == IBV_WC_RNR_RETRY_EXC_ERR ||
	       s == IBV_WC_WR_FLUSH_ERR || s == IBV_WC_REM_ABORT_ERR;
}

/* inlined into the loop that takes completions (take_wcs) */
static inline __attribute__((always_inline)) void on_wc(struct vx_comm *c, const struct ibv_wc *wc)
{
	struct vx_lane *l;

	if (wc->wr_id & WR_FLUSH) {
		struct cruxn_req *r = &c->b.reqs[wc->wr_id & (CRUXN_NET_MAX_REQUESTS - 1)];
		if (wc->status != IBV_WC_SUCCESS) {
			char d[128];
			snprintf(d, sizeof(d), "%s (status %d) on the loopback queue pair %u",
				 cruxn_vx_state.ibv.wc_status_str(wc->status), (int)wc->status,
				 wc->qp_num);
			cruxn_vx_fail(c, "flush (1-byte RDMA READ)", d, wc_hint(wc->status));
			return;
		}
		if (r->used && vxr(r)->flush) {
			r->matched[0] = true;
			r->nmatched = 1;
		}
		return;
	}
	l = cruxn_vx_lane_of(c, (uint32_t)WR_LANE(wc->wr_id));

	/* a closed lane's queue pair flushes what it still held: expected, not a failure */
	if (wc->status == IBV_WC_WR_FLUSH_ERR && (!l || l->state == VX_LANE_CLOSING))
		return;
	if (wc->status != IBV_WC_SUCCESS) {
		char d[128];
		snprintf(d, sizeof(d), "%s (status %d, vendor error 0x%x) on queue pair %u",
			 cruxn_vx_state.ibv.wc_status_str(wc->status), (int)wc->status,
			 wc->vendor_err, wc->qp_num);
		if (peer_gone_status(wc->status)) {
			/*
			 * A peer that closed: its BYE settles our requests. Without one
			 * yet, wait (bounded) for the BYE or the socket's end.
			 */
			if (c->bye || c->b.peer_closed)
				return;
			if (!c->gone_ns) {
				c->ctrl_quiet = false; /* the BYE or the socket's end decides */
				c->gone_ns = crux_now_ns();
				snprintf(c->gone_detail, sizeof(c->gone_detail), "%s", d);
			}
			return;
		}
		cruxn_vx_fail(c, "work completion error", d, wc_hint(wc->status));
		return;
	}
	if (wc->wr_id & WR_RECV) {
		uint32_t imm = ntohl(wc->imm_data);
		int idx = IMM_REQ(imm), slot = IMM_SLOT(imm), q = WR_QP(wc->wr_id);
		struct cruxn_req *r = &c->b.reqs[idx];
		uint64_t got;

		if (!r->used || r->is_send || slot >= r->n || r->matched[slot] ||
		    IMM_PARTS(imm) > c->nqps || ((imm & IMM_BYTE_LEN) && IMM_PARTS(imm) != 1)) {
			cruxn_vx_fail(c, "data for no posted receive", "bad immediate",
				      "peer out of step (not a Crux peer?)");
			return;
		}
		if (l)
			l->parts++; /* a closing lane goes once the sender's count is reached */
		if (l && l->state != VX_LANE_CLOSING && q < l->nqps &&
		    ++l->recv_owed[q] == VX_RECV_BATCH) {
			l->recv_owed[q] = 0;
			(void)cruxn_vx_post_recvs_qp(c, l, q, VX_RECV_BATCH);
		}
		if (++vxr(r)->parts[slot] < IMM_PARTS(imm))
			return; /* more parts on the lane's other QPs */
		/* else the size was written before the first part's data on the same QP */
		got = imm & IMM_BYTE_LEN ? wc->byte_len : c->sizes[idx][slot];
		if (got > r->cap[slot]) {
			cruxn_vx_fail(c, "data for a posted receive",
				      "a size larger than its buffer",
				      "peer out of step (not a Crux peer?)");
			return;
		}
		r->got[slot] = got;
		r->matched[slot] = true;
		r->nmatched++;
		cruxn_vx_note_arrival(c, r, slot);
		cruxn_count_rx(&c->b, l ? l->cls.level : 0, r->got[slot]);
		return;
	}
	if (l)
		l->outstanding--;
	if (!(wc->wr_id & WR_CTS)) {
		struct cruxn_req *r = &c->b.reqs[wc->wr_id & 0xff & (CRUXN_NET_MAX_REQUESTS - 1)];
		vxr(r)->pending--;
	}
}

/* The async-event thread saw the device, the port or one of our QPs fail. */
static __attribute__((noinline, cold)) void async_failed(struct vx_comm *c)
{
	if (atomic_load_explicit(&c->dev->dead, memory_order_relaxed) &&
	    !atomic_load(&c->b.error)) {
		char why[160];
		pthread_mutex_lock(&cruxn_vx_state.async_lock);
		snprintf(why, sizeof(why), "%s", c->dev->dead_why);
		pthread_mutex_unlock(&cruxn_vx_state.async_lock);
		cruxn_vx_fail(c, "device event", why, "check the link and the NIC (ibv_devinfo)");
	}
	if (atomic_load_explicit(&c->async_event, memory_order_relaxed) &&
	    !atomic_load(&c->b.error))
		cruxn_vx_fail(c, "queue pair event",
			      cruxn_vx_state.ibv.event_type_str
				  ? cruxn_vx_state.ibv.event_type_str(atomic_load(&c->async_event))
				  : "fatal",
			      "see the device's error counters and the peer's log");
}

/* The n completions of a poll, and more while the batches come back full (no call per one). */
static inline __attribute__((always_inline)) int take_wcs(struct vx_comm *c, struct ibv_wc *wc,
							  int n)
{
	for (;;) {
		for (int i = 0; i < n; i++)
			on_wc(c, &wc[i]);
		if (n < 16 || atomic_load(&c->b.error))
			return n;
		if ((n = cruxn_ibv_poll_cq(c->cq, 16, wc)) <= 0)
			return n;
	}
}

/*
 * Takes the completions there are: batches until one comes back short (the
 * queue was empty then; what lands later is the next call's). Returns the
 * last poll's result. Progress polls by itself (progress_once); this is
 * for the poll again after the peer's end was seen.
 */
static __attribute__((noinline)) int poll_all(struct vx_comm *c)
{
	struct ibv_wc wc[16];
	int n;

	if (atomic_load(&c->b.error))
		return 0;
	n = cruxn_ibv_poll_cq(c->cq, 16, wc);
	return n > 0 ? take_wcs(c, wc, n) : n;
}

/* The async-event thread's verdict (two relaxed loads when nothing happened). */
static inline void async_check(struct vx_comm *c)
{
	if (atomic_load_explicit(&c->dev->dead, memory_order_relaxed) ||
	    atomic_load_explicit(&c->async_event, memory_order_relaxed))
		async_failed(c);
}

/*
 * The control socket and the bound on a gone peer: what progress does
 * besides the CQ. tick: a quiet socket's VX_CTRL_TICK-th call
 * (progress_once), the only one that asks the clock whether VX_CTRL_POLL_NS
 * passed. True: the socket was read.
 */
static bool ctrl_tick(struct vx_comm *c, bool tick)
{
	bool read = false;

	/*
	 * The control socket costs a system call: read it on every call only
	 * while something is under way there (set-up, a lane change or close,
	 * queued messages, an error completion waiting for the peer's BYE:
	 * not ctrl_quiet) or the peer rang for a message, else at most every
	 * VX_CTRL_POLL_NS (a socket's end without a BYE is seen that much later).
	 */
	if (!c->ctrl_quiet || cruxn_vx_bell_ahead(c) ||
	    (tick && crux_now_ns() - c->ctrl_ns >= VX_CTRL_POLL_NS)) {
		bool was_open = !c->b.peer_closed;
		read = true;
		cruxn_vx_ctrl_progress(c);
		c->ctrl_ns = crux_now_ns();
		/*
		 * The peer's end seen just now: a completion it caused before closing
		 * (written before its last acknowledgement) may have landed after the
		 * poll above; take it before anyone judges a request orphaned.
		 */
		if (was_open && c->b.peer_closed)
			(void)poll_all(c);
	}
	/* an error completion from a peer that went: its BYE, its socket's end, or the bound
	 * decides */
	if (c->gone_ns && !c->bye && !atomic_load(&c->b.error) &&
	    (c->b.peer_closed || crux_now_ns() - c->gone_ns > VX_GONE_WAIT_NS))
		cruxn_vx_fail(c, "work completion error", c->gone_detail,
			      wc_hint(IBV_WC_RETRY_EXC_ERR));
	return read;
}

/* Progress past an empty poll: the n completions in wc, failures, the control socket, lanes. */
static __attribute__((noinline)) bool progress_rest(struct vx_comm *c, struct ibv_wc *wc, int n,
						    bool tick)
{
	bool changed;

	if (n > 0)
		n = take_wcs(c, wc, n);
	if (n < 0)
		cruxn_vx_fail(c, "polling the completion queue", strerror(errno),
			      "the device failed");
	changed = ctrl_tick(c, tick) || n != 0;
	if (c->b.is_send && !cruxn_vx_lanes_settled(c) && !c->b.peer_closed &&
	    !atomic_load(&c->b.error)) {
		cruxn_vx_lanes_progress(c);
		changed = true;
	}
	return changed || atomic_load(&c->b.error);
}

/*
 * False: an empty CQ, the control socket not read, the lanes settled and no
 * failure. The usual answer of an idle test() is what NCCL's IB transport
 * does: the failure flags, one poll of the comm's CQ, and a look at the
 * bell, with nothing else called; the rest only when one of them asks.
 */
static inline __attribute__((always_inline)) bool progress_once(struct vx_comm *c)
{
	struct ibv_wc wc[16];
	int n = 0;
	bool err, look; /* look: the control socket may be due */

	async_check(c);
	/* only this thread, under the comm's lock, sets the error from here on */
	err = atomic_load(&c->b.error);
	if (!err)
		n = cruxn_ibv_poll_cq(c->cq, 16, wc);
	/*
	 * An error completion from a gone peer (gone_ns) clears ctrl_quiet for
	 * good. Quiet: the bell is looked at every VX_BELL_TICK-th call (a
	 * control message waits that many polls at most), the clock every
	 * VX_CTRL_TICK-th.
	 */
	if (!c->ctrl_quiet) {
		look = true;
	} else {
		uint32_t t = ++c->idle_ticks;
		look = (t & (VX_BELL_TICK - 1)) == 0 &&
		       (cruxn_vx_bell_ahead(c) || (t & (VX_CTRL_TICK - 1)) == 0);
	}
	if (__builtin_expect(
		n == 0 && !look && !err && (!c->b.is_send || cruxn_vx_lanes_settled(c)), 1))
		return false;
	return progress_rest(c, wc, n, look);
}

static bool vx_progress(struct cruxn_base *b)
{
	return progress_once(vx_of(b));
}

/* ---- send ------------------------------------------------------------------- */

static void vx_boundary(struct cruxn_base *b, bool class_changed, bool route_changed)
{
	struct vx_comm *c = vx_of(b);

	(void)class_changed;
	(void)route_changed;
	c->settled = false; /* a new decision: look for its lane */
	if (c->moved_ns && crux_now_ns() - c->moved_ns < cruxn_vx_qpcfg.lane_interval_ns)
		return; /* rate-limited: the decision is looked at after the interval */
	(void)cruxn_vx_lane_want(c); /* start building at once */
}

static int once_valve;

/*
 * The message boundary's lane decision: the next message goes on the lane
 * of the current decision. When that is not the current lane, messages are
 * held (NULL requests) until it is up and the current lane's work drained,
 * so no message leaves at the old class after the decision changed.
 * Bounds: a lane the peer does not answer within CRUX_TIMEOUT fails the
 * connection; a decision that keeps changing faster than lanes are built
 * (no lane up for it after VX_HOLD_MAX_NS) lets messages go on the current
 * lane rather than starve them.
 */
static bool lane_ready(struct vx_comm *c)
{
	struct vx_lane *want;
	uint64_t now;

	if (cruxn_vx_lanes_settled(c)) { /* what lane_want answers then, without the call */
		c->hold_ns = 0;
		return true;
	}
	/*
	 * Lane moves are rate-limited per connection (CRUX_IB_LANE_INTERVAL): a
	 * decision that flaps faster waits on the current lane, building
	 * nothing, and is taken at the first boundary after the interval.
	 */
	if (!c->settled && c->moved_ns && c->cur && c->cur->state == VX_LANE_UP &&
	    crux_now_ns() - c->moved_ns < cruxn_vx_qpcfg.lane_interval_ns)
		return true;
	want = cruxn_vx_lane_want(c);
	if (want != c->cur)
		cruxn_vx_lanes_progress(c);
	if (want && want == c->cur) {
		c->hold_ns = 0;
		return true;
	}
	now = crux_now_ns();
	if (!c->hold_ns)
		c->hold_ns = now;
	if (want && want->state == VX_LANE_BUILDING &&
	    now - want->since_ns > cruxn_ctx.cfg.timeout_ms * 1000000ull) {
		cruxn_vx_fail(c, "lane change",
			      "the peer did not answer a new lane within CRUX_TIMEOUT",
			      "the peer does not serve its control socket");
		return false;
	}
	if ((!want || want->state == VX_LANE_BUILDING) && now - c->hold_ns > VX_HOLD_MAX_NS) {
		crux_log_once(
		    &once_valve, CRUX_LOG_WARN,
		    "the decision changes faster than new lanes are built (held %llu ms): "
		    "messages go on the current lane until one is up",
		    (unsigned long long)((now - c->hold_ns) / 1000000u));
		return true;
	}
	return false;
}

/* The receiver's CTS row for the next send has landed, every entry of it (post_send checks them
 * again). */
static inline bool cts_posted(const struct vx_comm *c)
{
	const volatile struct vx_cts *e = c->fifo[c->row % VX_FIFO];
	uint32_t want = c->row + 1;
	int n;

	if (e[0].stamp != want)
		return false;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	n = e[0].nslots;
	for (int i = 1; i < n && i < VX_SLOTS; i++)
		if (e[i].stamp != want)
			return false;
	return true;
}

/*
 * First in isend, as NCCL's IB isend: the receiver's CTS, and nothing else
 * when it is there. Without it NCCL's returns at once (the CTS arrives by
 * RDMA, and test() polls); ours polls on every VX_CTS_WAIT_POLL-th retry
 * (failures, and a double in this process that moves only when called),
 * and on every one while a lane is under way, whose control and bounds go
 * on while the receiver is behind.
 */
static bool vx_peer_ready(struct cruxn_base *b)
{
	struct vx_comm *c = vx_of(b);
	bool settled;

	if (cts_posted(c))
		return true;
	settled = cruxn_vx_lanes_settled(c);
	if (settled && (++c->cts_waits & (VX_CTS_WAIT_POLL - 1)) != 0)
		return false;
	(void)progress_once(c);
	if (!settled && !atomic_load(&c->b.error))
		(void)lane_ready(c); /* a lane the peer never answers fails after CRUX_TIMEOUT */
	return cts_posted(c) && !atomic_load(&c->b.error);
}

/*
 * After the boundary, the CTS seen (vx_peer_ready, same lock): with the
 * lanes settled the message goes on the current lane, nothing polled.
 * Otherwise completions and control first, then drain-then-move (hold new
 * messages until the decision's lane is current). False: NCCL gets a NULL
 * request. A failure answers true: post_send reports it.
 */
static bool vx_send_ready(struct cruxn_base *b)
{
	struct vx_comm *c = vx_of(b);

	if (cruxn_vx_lanes_settled(c)) {
		async_check(c);
		c->hold_ns = 0;
		return true;
	}
	(void)vx_progress(b);
	if (atomic_load(&c->b.error))
		return true;
	if (!lane_ready(c))
		return atomic_load(&c->b.error);
	return cts_posted(c);
}

/* The core called send_ready just before, under the same lock. */
static crux_status_t vx_post_send(struct cruxn_base *b, struct cruxn_req *r)
{
	struct vx_comm *c = vx_of(b);
	int row = (int)(c->row % VX_FIFO), k = -1, n;
	volatile struct vx_cts *e = c->fifo[row];
	struct ibv_sge sg[2];
	struct ibv_send_wr wr[3], *bad = NULL;
	uint32_t lkey, rkey;
	size_t size = r->cap[0], chunk;
	int nparts, prc;
	bool by_len;

	if (atomic_load(&c->b.error))
		return CRUX_ERR_REMOTE;
	if (e[0].stamp != c->row + 1)
		return CRUX_ERR_BUSY; /* the receiver has not posted yet */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	n = e[0].nslots;
	if (n < 1 || n > VX_SLOTS) {
		cruxn_vx_fail(c, "clear-to-send", "malformed entry", "peer out of step");
		return CRUX_ERR_REMOTE;
	}
	for (int i = 0; i < n; i++) {
		if (e[i].stamp != c->row + 1)
			return CRUX_ERR_BUSY; /* the rest of the row is still arriving */
		if (k < 0 && !(c->row_used & (1u << i)) && (n == 1 || e[i].tag == r->tags[0]))
			k = i;
	}
	if (k < 0) {
		cruxn_vx_fail(c, "send", "the message's tag matches no slot of the posted receive",
			      "NCCL's tags differ between the ranks?");
		return CRUX_ERR_REMOTE;
	}
	if (size > e[k].cap) {
		char d[96];
		snprintf(d, sizeof(d), "%zu-byte message, %llu-byte receive buffer", size,
			 (unsigned long long)e[k].cap);
		cruxn_vx_fail(c, "message larger than the receive buffer", d, "NCCL sizes differ");
		return CRUX_ERR_REMOTE;
	}
	if (!keys_of(c, r, r->mh[0], r->data[0], size, &lkey, &rkey))
		return CRUX_ERR_IO; /* the core fails the comm: NCCL must not retry forever */
	/*
	 * NCCL's default: whole messages round-robin over the lane's QPs;
	 * NCCL_IB_SPLIT_DATA_ON_QPS=1 splits each message over all of them.
	 */
	if (cruxn_vx_qpcfg.split)
		cruxn_vx_split(size, c->cur->nqps, &chunk, &nparts);
	else
		chunk = size, nparts = 1;
	/* the size first (unless byte_len carries it), then the data; the parts' immediates
	 * complete the receive */
	by_len = n == 1 && nparts == 1 && !(c->dev->ar && size > cruxn_vx_qpcfg.ar_threshold);
	if (!by_len)
		c->sizes_out[row][k] = size;
	for (int p = 0; p < nparts; p++) {
		struct vx_lane *l = c->cur;
		struct ibv_qp *qp = l->qps[(c->qrr + (uint32_t)p) % (uint32_t)l->nqps];
		size_t off = (size_t)p * chunk, len = size - off < chunk ? size - off : chunk;
		/* adaptive routing: the bulk as a WRITE, the immediate after it with no data */
		bool ar = c->dev->ar && len > cruxn_vx_qpcfg.ar_threshold;
		int nw = 0;

		/* the size write (first part), the bulk (adaptive routing), the immediate */
		memset(wr, 0, sizeof(wr[0]) * (size_t)((p == 0 && !by_len) + ar + 1));
		if (p == 0 && !by_len) {
			sg[0].addr = (uint64_t)(uintptr_t)&c->sizes_out[row][k];
			sg[0].length = sizeof(uint64_t);
			sg[0].lkey = c->sizes_out_mr->lkey;
			wr[nw].opcode = IBV_WR_RDMA_WRITE;
			wr[nw].sg_list = &sg[0];
			wr[nw].num_sge = 1;
			wr[nw].wr.rdma.remote_addr =
			    c->rsizes + ((uint64_t)e[k].req * VX_SLOTS + e[k].slot) * 8;
			wr[nw].wr.rdma.rkey = c->rsizes_rkey;
			/* unsignaled: never completes */
			wr[nw].wr_id = WR_CTS | ((uint64_t)l->id << 8);
			nw++;
		}
		sg[1].addr = (uint64_t)(uintptr_t)r->data[0] + off;
		sg[1].length = (uint32_t)len;
		sg[1].lkey = lkey;
		if (ar) {
			wr[nw].opcode = IBV_WR_RDMA_WRITE; /* unsignaled, the immediate follows */
			wr[nw].sg_list = &sg[1];
			wr[nw].num_sge = 1;
			wr[nw].wr.rdma.remote_addr = e[k].addr + off;
			wr[nw].wr.rdma.rkey = e[k].rkey;
			wr[nw].wr_id = WR_CTS | ((uint64_t)l->id << 8);
			nw++;
		}
		wr[nw].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr[nw].sg_list = len && !ar ? &sg[1] : NULL;
		wr[nw].num_sge = len && !ar ? 1 : 0;
		wr[nw].imm_data =
		    htonl(IMM(nparts, e[k].req, e[k].slot) | (by_len ? IMM_BYTE_LEN : 0));
		wr[nw].send_flags = IBV_SEND_SIGNALED;
		wr[nw].wr.rdma.remote_addr = e[k].addr + off;
		wr[nw].wr.rdma.rkey = e[k].rkey;
		wr[nw].wr_id = ((uint64_t)l->id << 8) | (uint64_t)(r - c->b.reqs);
		for (int i = 0; i < nw; i++)
			wr[i].next = &wr[i + 1];
		if ((prc = cruxn_ibv_post_send(qp, &wr[0], &bad)) != 0) {
			/* parts already posted would complete into a freed request */
			cruxn_vx_fail(c, "posting a send", cruxn_vx_post_err(prc),
				      "send queue full?");
			return CRUX_ERR_REMOTE;
		}
		l->outstanding++;
		l->parts++;
		vxr(r)->pending++;
	}
	c->qrr = (c->qrr + (uint32_t)nparts) % (uint32_t)c->cur->nqps;
	r->level = c->cur->cls.level;
	vxr(r)->row = c->row;
	vxr(r)->slot = k;
	c->row_used |= (uint8_t)(1u << k);
	if (c->row_used == (uint8_t)((1u << n) - 1)) { /* every slot < n taken */
		c->row_used = 0;
		c->row++;
	}
	return CRUX_OK;
}

/* ---- receive ------------------------------------------------------------------ */

static crux_status_t vx_post_recv(struct cruxn_base *b, struct cruxn_req *r)
{
	struct vx_comm *c = vx_of(b);
	int row = (int)(c->rrow % VX_FIFO), idx = (int)(r - c->b.reqs);
	struct ibv_sge sg;

	/* no polling here (NCCL's IB irecv neither): test() takes the completions */
	if (atomic_load(&c->b.error))
		return CRUX_ERR_REMOTE;
	for (int i = 0; i < r->n; i++) {
		struct vx_cts *e = &c->cts[row][i];
		uint32_t lkey;
		if (!keys_of(c, r, r->mh[i], r->data[i], r->cap[i], &lkey, &e->rkey))
			return CRUX_ERR_IO; /* the core fails the comm: NCCL must not retry forever
					     */
		e->addr = (uint64_t)(uintptr_t)r->data[i];
		e->cap = r->cap[i];
		e->tag = r->tags[i];
		e->nslots = (uint16_t)r->n;
		e->req = (uint8_t)idx;
		e->slot = (uint8_t)i;
		e->stamp = c->rrow + 1;
	}
	sg.addr = (uint64_t)(uintptr_t)c->cts[row];
	sg.length = (uint32_t)(sizeof(struct vx_cts) * (size_t)r->n);
	sg.lkey = c->cts_mr->lkey;
	if (cruxn_vx_cts_write(c, c->cur, &sg,
			       c->rfifo + (uint64_t)row * VX_SLOTS * sizeof(struct vx_cts),
			       c->cur->cts_unsignaled + 1 >= VX_FIFO) != CRUX_OK)
		return CRUX_ERR_REMOTE;
	vxr(r)->row = c->rrow;
	c->row_done[row] = 0;
	c->rrow++;
	return CRUX_OK;
}

/* ---- flush ------------------------------------------------------------------- */

/*
 * NCCL asks for a flush after a receive into GPU memory (GPUDirect): as its
 * IB transport does, READ 1 byte of the last non-empty buffer through a QP
 * connected to itself; the READ completes after the earlier writes landed.
 * Host memory needs nothing: a NULL request.
 */
static crux_status_t vx_flush(struct cruxn_base *b, int n, void **data, int *sizes, void **mhandles,
			      struct cruxn_req **out)
{
	struct vx_comm *c = vx_of(b);
	struct vx_mr *m = NULL;
	struct cruxn_req *r;
	struct ibv_sge sg;
	struct ibv_send_wr wr, *bad = NULL;
	int last = -1, prc;

	*out = NULL;
	if (!mhandles || !sizes || !data || n < 1 || n > CRUXN_NET_MAX_RECVS)
		return CRUX_OK;
	for (int i = 0; i < n; i++)
		if (sizes[i] > 0 && data[i] && mhandles[i])
			last = i;
	if (last < 0)
		return CRUX_OK;
	m = mhandles[last];
	if (m->magic != VX_MR_MAGIC) {
		crux_err("iflush: the memory handle is not one of this plugin's registrations");
		return CRUX_ERR_INVAL;
	}
	if (m->type != CRUXN_PTR_CUDA)
		return CRUX_OK;
	if (atomic_load(&c->b.error))
		return CRUX_ERR_REMOTE;
	if (cruxn_vx_flush_qp(c) != CRUX_OK)
		return CRUX_ERR_REMOTE;
	r = cruxn_req_get(&c->b);
	if (!r) {
		crux_err("iflush: more than %d requests in flight on one receive connection",
			 CRUXN_NET_MAX_REQUESTS);
		return CRUX_ERR_RANGE;
	}
	r->n = 1;
	vxr(r)->flush = true;
	memset(&wr, 0, sizeof(wr));
	sg.addr = (uint64_t)(uintptr_t)&c->flush_buf;
	sg.length = 1;
	sg.lkey = c->flush_mr->lkey;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uint64_t)(uintptr_t)data[last];
	wr.wr.rdma.rkey = m->mr->rkey;
	wr.wr_id = WR_FLUSH | (uint64_t)(r - c->b.reqs);
	if ((prc = cruxn_ibv_post_send(c->flush_qp, &wr, &bad)) != 0) {
		r->used = false;
		cruxn_vx_fail(c, "posting a flush", cruxn_vx_post_err(prc), "send queue full?");
		return CRUX_ERR_REMOTE;
	}
	*out = r;
	return CRUX_OK;
}

/* A send is done when its writes completed, or when the closing receiver said it arrived. */
static bool vx_req_done(const struct cruxn_req *r)
{
	if (r->is_send)
		return vxr_c(r)->pending == 0 ||
		       (vx_of(r->comm)->bye && cruxn_vx_delivered(vx_of(r->comm), r));
	return r->nmatched == r->n;
}

/* test(): the request's state, and one progress call (inlined) when it is not done. */
static bool vx_test(struct cruxn_base *b, struct cruxn_req *r)
{
	return vx_req_done(r) || (progress_once(vx_of(b)) && vx_req_done(r));
}

/* After the peer closed: nothing more can arrive or be acknowledged. */
static bool vx_req_orphaned(const struct cruxn_req *r)
{
	return !vx_req_done(r);
}

const struct cruxn_transport_ops cruxn_verbs_ops = {
    .name = "verbs",
    .kind = CRUXN_TP_VERBS,
    .yield_in_test = false, /* the NIC moves the bytes */
    .start = cruxn_vx_start,
    .stop = cruxn_vx_stop,
    .ndevs = cruxn_vx_ndevs,
    .properties = cruxn_vx_properties,
    .ids = cruxn_vx_ids,
    .listen = cruxn_vx_listen,
    .connect = cruxn_vx_connect,
    .accept = cruxn_vx_accept,
    .close_listen = cruxn_vx_close_listen,
    .reg_mr = vx_reg_mr,
    .dereg_mr = vx_dereg_mr,
    .boundary = vx_boundary,
    .peer_ready = vx_peer_ready,
    .send_ready = vx_send_ready,
    .post_send = vx_post_send,
    .post_recv = vx_post_recv,
    .flush = vx_flush,
    .progress = vx_progress,
    .test = vx_test,
    .req_orphaned = vx_req_orphaned,
    .req_release = vx_req_release,
    .wake = NULL,
    .destroy = cruxn_vx_destroy,
};
