/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Background thread: drains the call ring, finds iterations, collects GPU
 * (or host) busy intervals from the timing backend, accounts them per
 * iteration and publishes the profile record once per window. All heavy work
 * of the preload happens here, off the NCCL call path. Starting and stopping
 * it, and fork, are life.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bg.h"
#include "collect_int.h"
#include "crux/attach.h"
#include "crux/log.h"
#include "crux/shm.h"

#define TICK_NS	       20000000ull
#define DETECT_NS      500000000ull
#define MAX_SPANS      4096
#define POLL_CAP       8192
#define HOST_MARGIN_NS 20000000ull
#define GPU_MARGIN_NS  200000000ull
#define ORPHAN_NS      10000000000ull

struct span_rec {
	uint64_t start;
	uint64_t end;
	bool regular;
	uint64_t bytes[CRUX_COLL_KINDS];
};

struct cruxc_bg {
	/* Call history for the detector (ring indexed by total count). */
	uint32_t hist[CRUXC_DET_MAX_CALLS];
	uint64_t hist_t[CRUXC_DET_MAX_CALLS];
	uint64_t hist_total;
	uint32_t lin[CRUXC_DET_MAX_CALLS];
	uint64_t lin_t[CRUXC_DET_MAX_CALLS];
	struct cruxc_det_scratch *det;
	bool det_valid;
	struct cruxc_det_result res;
	uint64_t cand_anchor; /* a different result, waiting for confirmation */
	uint32_t cand_len;
	uint32_t recent[CRUXC_DET_MAX_GRAM]; /* the last calls' signatures, oldest first */
	uint64_t det_at_total, det_at_ns;
	/* The iteration in progress. */
	bool it_open;
	uint64_t it_start;
	uint32_t it_calls;
	uint64_t it_bytes[CRUX_COLL_KINDS];
	/* Closed iterations waiting for their intervals. */
	struct span_rec spans[MAX_SPANS];
	size_t nspans;
	struct cruxc_span acc[MAX_SPANS];
	/* Busy intervals not yet accounted. */
	struct cruxc_iv *ivs;
	size_t niv;
	struct cruxc_iv_event *events;
	struct cruxc_iv poll[POLL_CAP];
	uint64_t iv_dropped;
	/* The current window. */
	uint64_t win_start;
	uint64_t w_from, w_to; /* time covered by the iterations accounted in the window */
	uint64_t w_iters, w_regular, w_dur, w_compute, w_comm, w_overlap;
	uint64_t w_bytes[CRUX_COLL_KINDS];
	uint64_t windows, total_iters;
	bool ever_detected;
	struct crux_prof_handle *prof;
	int prof_said;
	bool scanned;
	struct crux_agent_conn *conn; /* contract v2: holds the record at cruxd */
	bool conn_welcomed;
};

void cruxc_bg_free(struct cruxc_bg *bg)
{
	if (!bg)
		return;
	cruxc_det_scratch_free(bg->det);
	free(bg->ivs);
	free(bg->events);
	free(bg);
}

crux_status_t cruxc_bg_new(struct cruxc_bg **out)
{
	struct cruxc_bg *bg = calloc(1, sizeof(*bg));

	if (!bg)
		return CRUX_ERR_NOMEM;
	bg->ivs = calloc(CRUXC_IV_CAP, sizeof(*bg->ivs));
	bg->events = calloc(2 * (size_t)CRUXC_IV_CAP, sizeof(*bg->events));
	if (!bg->ivs || !bg->events || cruxc_det_scratch_new(&bg->det) != CRUX_OK) {
		cruxc_bg_free(bg);
		return CRUX_ERR_NOMEM;
	}
	*out = bg;
	return CRUX_OK;
}

static void add_iv(struct cruxc_bg *bg, uint64_t start, uint64_t end, uint32_t kind)
{
	if (bg->niv == CRUXC_IV_CAP) {
		bg->iv_dropped++;
		return;
	}
	bg->ivs[bg->niv++] = (struct cruxc_iv){start, end, kind, 0};
}

static bool auto_mode(void)
{
	return cruxc_ctx.cfg.mark == CRUXC_MARK_AUTO && !atomic_load(&cruxc_hot.marked);
}

static void boundary(struct cruxc_bg *bg, uint64_t t)
{
	if (bg->it_open && t > bg->it_start) {
		struct span_rec *s;
		uint32_t len = bg->res.length, tol = len / 10 > 1 ? len / 10 : 1;

		if (bg->nspans == MAX_SPANS) {
			/* Accounting is far behind (no GPU data yet): forget the oldest. */
			memmove(bg->spans, bg->spans + 1, (MAX_SPANS - 1) * sizeof(bg->spans[0]));
			bg->nspans--;
		}
		s = &bg->spans[bg->nspans++];
		s->start = bg->it_start;
		s->end = t;
		s->regular =
		    !auto_mode() || (bg->it_calls + tol >= len && bg->it_calls <= len + tol);
		memcpy(s->bytes, bg->it_bytes, sizeof(s->bytes));
	}
	bg->it_open = true;
	bg->it_start = t;
	bg->it_calls = 0;
	memset(bg->it_bytes, 0, sizeof(bg->it_bytes));
}

static void on_call(struct cruxc_bg *bg, const struct cruxc_call *c)
{
	const struct cruxc_config *cfg = &cruxc_ctx.cfg;
	const struct cruxc_comm *comm;
	uint64_t bytes;
	uint32_t sig;
	bool mark = false;
	int kind;

	if (c->op == CRUXC_OP_MARK) {
		if (cfg->mark != CRUXC_MARK_OP)
			boundary(bg, c->t_enter);
		return;
	}
	if (atomic_load_explicit(&cruxc_hot.backend, memory_order_relaxed) == CRUX_TIMING_HOST)
		add_iv(bg, c->t_enter, c->t_exit, CRUXC_IV_COMM);
	if (c->op == CRUXC_OP_GROUP_END)
		return;
	comm = cruxc_comm_find(c->comm);
	sig = cruxc_call_sig(c, comm);
	bytes = cruxc_call_bytes(c, comm);
	bg->hist_t[bg->hist_total % CRUXC_DET_MAX_CALLS] = c->t_enter;
	bg->hist[bg->hist_total++ % CRUXC_DET_MAX_CALLS] = sig;
	memmove(bg->recent, bg->recent + 1, sizeof(bg->recent) - sizeof(bg->recent[0]));
	bg->recent[CRUXC_DET_MAX_GRAM - 1] = sig;
	if (cfg->mark == CRUXC_MARK_OP)
		mark = c->op == cfg->mark_op && (!cfg->mark_bytes || cfg->mark_bytes == bytes);
	else if (auto_mode() && bg->det_valid && bg->hist_total >= bg->res.gram)
		mark = cruxc_det_seq_hash(bg->recent + CRUXC_DET_MAX_GRAM - bg->res.gram,
					  bg->res.gram) == bg->res.anchor;
	if (mark)
		boundary(bg, c->t_enter);
	kind = cruxc_op_kind(c->op);
	if (bg->it_open) {
		bg->it_calls++;
		if (kind >= 0)
			bg->it_bytes[kind] += bytes;
	}
}

static void run_detect(struct cruxc_bg *bg, uint64_t now)
{
	size_t n = bg->hist_total < CRUXC_DET_MAX_CALLS ? bg->hist_total : CRUXC_DET_MAX_CALLS;
	struct cruxc_det_result r;

	bg->det_at_total = bg->hist_total;
	bg->det_at_ns = now;
	for (size_t i = 0; i < n; i++) {
		bg->lin[i] = bg->hist[(bg->hist_total - n + i) % CRUXC_DET_MAX_CALLS];
		bg->lin_t[i] = bg->hist_t[(bg->hist_total - n + i) % CRUXC_DET_MAX_CALLS];
	}
	if (cruxc_detect(bg->lin, bg->lin_t, n, bg->det, &r) != CRUX_OK)
		return;
	/*
	 * Same period through another anchor (equivalent calls of one iteration):
	 * keep counting with the current one; switching would cost an iteration.
	 */
	if (bg->det_valid &&
	    (r.anchor == bg->res.anchor ||
	     (r.length == bg->res.length && bg->it_open && bg->it_calls <= 3 * bg->res.length)))
		return;
	/* A change of period must show twice before it replaces the current one. */
	if (bg->det_valid && (r.anchor != bg->cand_anchor || r.length != bg->cand_len)) {
		bg->cand_anchor = r.anchor;
		bg->cand_len = r.length;
		return;
	}
	crux_debug(
	    "iteration period %u calls (anchor %016llx over %u calls, %u repeats, coverage %.2f)",
	    r.length, (unsigned long long)r.anchor, r.gram, r.repeats, r.coverage);
	bg->res = r;
	bg->det_valid = true;
	bg->ever_detected = true;
	bg->it_open = false; /* the next anchor starts a fresh iteration */
}

static void poll_backend(struct cruxc_bg *bg)
{
	uint32_t backend = atomic_load(&cruxc_hot.backend);
	size_t n = 0;

	if (backend == CRUX_TIMING_EVENTS && cruxc_hot.events)
		n = cruxc_events_poll(cruxc_hot.events, bg->poll, POLL_CAP);
	else if (backend == CRUX_TIMING_CUPTI && cruxc_ctx.cupti)
		n = cruxc_cupti_poll(cruxc_ctx.cupti, bg->poll, POLL_CAP);
	for (size_t i = 0; i < n; i++)
		add_iv(bg, bg->poll[i].start, bg->poll[i].end, bg->poll[i].kind);
}

static void account(struct cruxc_bg *bg, uint64_t now)
{
	uint32_t backend = atomic_load(&cruxc_hot.backend);
	uint64_t margin = backend == CRUX_TIMING_HOST ? HOST_MARGIN_NS : GPU_MARGIN_NS;
	uint64_t frontier = now > margin ? now - margin : 0, until = 0, dur = 0;
	size_t take = 0, nacc = 0, keep = 0;
	struct cruxc_busy busy;

	while (take < bg->nspans && bg->spans[take].end <= frontier)
		take++;
	if (take) {
		if (!bg->w_from)
			bg->w_from = bg->spans[0].start;
		bg->w_to = bg->spans[take - 1].end;
	}
	for (size_t i = 0; i < take; i++) {
		const struct span_rec *s = &bg->spans[i];

		until = s->end;
		if (!s->regular)
			continue;
		bg->acc[nacc++] = (struct cruxc_span){s->start, s->end};
		dur += s->end - s->start;
		for (int k = 0; k < CRUX_COLL_KINDS; k++)
			bg->w_bytes[k] += s->bytes[k];
	}
	if (take &&
	    cruxc_iv_account(bg->ivs, bg->niv, bg->acc, nacc, bg->events, &busy) == CRUX_OK) {
		bg->w_iters += take;
		bg->w_regular += nacc;
		bg->w_dur += dur;
		bg->w_comm += busy.comm_ns;
		if (backend == CRUX_TIMING_CUPTI) {
			bg->w_compute += busy.compute_ns;
			bg->w_overlap += busy.overlap_ns;
		} else {
			/* Without kernel records everything but communication is compute. */
			bg->w_compute += dur > busy.comm_ns ? dur - busy.comm_ns : 0;
		}
	}
	memmove(bg->spans, bg->spans + take, (bg->nspans - take) * sizeof(bg->spans[0]));
	bg->nspans -= take;
	for (size_t i = 0; i < bg->niv; i++) {
		const struct cruxc_iv *v = &bg->ivs[i];

		if (v->end <= until || v->end + ORPHAN_NS < now)
			continue;
		bg->ivs[keep++] = *v;
	}
	bg->niv = keep;
}

/* Does a v2 agent serve the attach socket in the directory? */
static bool agent_socket_present(void)
{
	char path[CRUX_PATH_MAX + 32];
	struct stat sb;
	snprintf(path, sizeof(path), "%.255s/%s", cruxc_ctx.cfg.shm_dir, CRUX_AGENT_SOCK);
	return lstat(path, &sb) == 0 && S_ISSOCK(sb.st_mode);
}

/* Keep this process attached to cruxd (once a window, never blocking). */
static void keep_attached(struct cruxc_bg *bg)
{
	char err[512] = "";
	struct crux_dt_reader *r = NULL;
	if (bg->conn && !(bg->conn_welcomed ? crux_agent_conn_alive(bg->conn) : true)) {
		crux_agent_conn_close(bg->conn);
		bg->conn = NULL;
		bg->conn_welcomed = false;
	}
	if (!bg->conn && crux_agent_conn_open(cruxc_ctx.cfg.shm_dir, bg->prof, &bg->conn, err,
					      sizeof(err)) != CRUX_OK) {
		bg->conn = NULL;
		return;
	}
	if (bg->conn_welcomed)
		return;
	crux_status_t st = crux_agent_conn_poll(bg->conn, &r, err, sizeof(err));
	if (st == CRUX_OK) {
		bg->conn_welcomed = true;
		crux_dt_reader_close(r); /* the plugin reads the table; we only publish */
	} else if (st != CRUX_ERR_BUSY) {
		crux_log_once(&bg->prof_said, CRUX_LOG_WARN, "%s", err);
		crux_agent_conn_close(bg->conn);
		bg->conn = NULL;
	}
}

static void open_record(struct cruxc_bg *bg)
{
	crux_status_t st;

	if (bg->prof) {
		if (bg->conn || agent_socket_present())
			keep_attached(bg);
		return;
	}
	/* The agent creates the directory; without it there is no one to tell. */
	/* Re-tried every window: the _ex variant logs nothing, we say it once. */
	char err[512] = "";
	/* v2 agent: a sealed memfd shared with the plugin; else a v1 record file. */
	if (agent_socket_present())
		st = crux_prof_open_shared_ex(&cruxc_ctx.ident, &bg->prof, err, sizeof(err));
	else
		st = crux_prof_open_self_ex(cruxc_ctx.cfg.shm_dir, &cruxc_ctx.ident, &bg->prof, err,
					    sizeof(err));
	if (st == CRUX_OK && agent_socket_present())
		keep_attached(bg);
	if (st != CRUX_OK && st != CRUX_ERR_NOENT)
		crux_log_once(&bg->prof_said, CRUX_LOG_WARN,
			      "cannot open the profile record in %s (%s); is cruxd running with "
			      "the same CRUX_SHM_DIR?",
			      cruxc_ctx.cfg.shm_dir, err[0] ? err : crux_status_str(st));
}

static void publish(struct cruxc_bg *bg, uint64_t now)
{
	struct crux_prof_compute c;
	char obj[256];
	double n = (double)bg->w_regular;

	if (cruxc_ctx.source != CRUXC_SRC_PROFILER && !atomic_load(&cruxc_ctx.intercepted) &&
	    !bg->scanned) {
		bg->scanned = true;
		if (cruxc_static_nccl_scan(obj, sizeof(obj))) {
			cruxc_ctx.static_nccl = true;
			crux_log_once(&cruxc_ctx.static_said, CRUX_LOG_WARN,
				      "NCCL is linked statically into %s: its calls cannot be "
				      "intercepted, so this process is not profiled (use a "
				      "framework build that links libnccl.so.2 dynamically)",
				      obj);
		}
	}
	memset(&c, 0, sizeof(c));
	c.window_end_ns = bg->w_to ? bg->w_to : now;
	/* The window is the stretch its iterations cover (GPU data lags the clock). */
	c.window_s =
	    (double)(bg->w_to > bg->w_from ? bg->w_to - bg->w_from : now - bg->win_start) / 1e9;
	c.windows = ++bg->windows;
	c.iterations = bg->w_iters;
	bg->total_iters += bg->w_iters;
	c.total_iterations = bg->total_iters;
	if (bg->w_regular) {
		c.iter_time_s = (double)bg->w_dur / n / 1e9;
		c.compute_s = (double)bg->w_compute / n / 1e9;
		c.comm_s = (double)bg->w_comm / n / 1e9;
		c.overlap_s = (double)bg->w_overlap / n / 1e9;
		c.stall_s = c.comm_s > c.overlap_s ? c.comm_s - c.overlap_s : 0;
		for (int k = 0; k < CRUX_COLL_KINDS; k++)
			c.bytes_per_iter[k] = (uint64_t)((double)bg->w_bytes[k] / n + 0.5);
	}
	c.timing_backend = atomic_load(&cruxc_hot.backend);
	if (atomic_load(&cruxc_hot.marked) || cruxc_ctx.cfg.mark != CRUXC_MARK_AUTO)
		c.flags |= CRUX_PROF_F_ITER_MARKED;
	else if (bg->det_valid)
		c.flags |= CRUX_PROF_F_ITER_DETECTED;
	if (cruxc_ctx.static_nccl)
		c.flags |= CRUX_PROF_F_STATIC_NCCL;
	if (cruxc_ctx.source == CRUXC_SRC_PROFILER)
		c.flags |= CRUX_PROF_F_SRC_PROFILER;
	snprintf(c.device, sizeof(c.device), "%s",
		 cruxc_ctx.device[0] ? cruxc_ctx.device : "unknown");
	open_record(bg);
	if (bg->prof)
		crux_prof_publish_compute(bg->prof, &c);
	crux_debug(
	    "window %llu: %llu iterations, %.6f s/iter, compute %.6f, comm %.6f, overlap %.6f",
	    (unsigned long long)c.windows, (unsigned long long)c.iterations, c.iter_time_s,
	    c.compute_s, c.comm_s, c.overlap_s);
	bg->win_start = now;
	bg->w_from = bg->w_to;
	bg->w_iters = bg->w_regular = bg->w_dur = bg->w_compute = bg->w_comm = bg->w_overlap = 0;
	memset(bg->w_bytes, 0, sizeof(bg->w_bytes));
}

static void drain(struct cruxc_bg *bg)
{
	struct cruxc_call c;

	while (cruxc_ring_pop(&cruxc_hot.ring, &c))
		on_call(bg, &c);
}

/* One pass of the loop; 'final' publishes what the last window holds. */
static void step(struct cruxc_bg *bg, bool final)
{
	uint64_t now = crux_now_ns();

	drain(bg);
	/* Until a period is known, look at every batch of new calls. */
	if (auto_mode() && bg->hist_total >= 8 && bg->hist_total != bg->det_at_total &&
	    (!bg->det_valid || bg->hist_total - bg->det_at_total >= 256 ||
	     now - bg->det_at_ns >= DETECT_NS))
		run_detect(bg, now);
	poll_backend(bg);
	account(bg, final ? UINT64_MAX / 2 : now);
	/*
	 * At exit, a partial window is published when it is all there is, or
	 * at least half a window: a sliver of a few iterations would replace a
	 * better figure.
	 */
	if (now - bg->win_start >= cruxc_ctx.cfg.window_ns ||
	    (final && bg->w_regular &&
	     (!bg->windows || 2 * (now - bg->win_start) >= cruxc_ctx.cfg.window_ns)))
		publish(bg, now);
}

void *cruxc_bg_main(void *arg)
{
	struct cruxc_bg *bg = arg;
	struct timespec ts = {0, (long)TICK_NS};

	/* The record exists from the start: the agent sees a job being profiled. */
	open_record(bg);
	while (!atomic_load(&cruxc_ctx.stop)) {
		nanosleep(&ts, NULL);
		step(bg, false);
	}
	step(bg, true);
	return NULL;
}

void cruxc_bg_start_window(struct cruxc_bg *bg, uint64_t now)
{
	bg->win_start = now;
}

void cruxc_bg_close_record(struct cruxc_bg *bg)
{
	if (bg && bg->prof) {
		crux_prof_close(bg->prof);
		bg->prof = NULL;
	}
	if (bg && bg->conn) {
		crux_agent_conn_close(bg->conn);
		bg->conn = NULL;
		bg->conn_welcomed = false;
	}
}
