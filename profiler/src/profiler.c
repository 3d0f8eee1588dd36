/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Crux NCCL profiler plugin's core: NCCL's profiler events become the
 * same call records the preload's wrappers make, pushed into the profiling
 * engine (crux/collect.h) that the preload feeds too, so iteration
 * detection, timing backends and the profile record are shared code.
 *
 * Event handlers (start, stop, state) run on NCCL's critical path: they read
 * the clock (vDSO), fill a slot of a per-communicator array chosen by an
 * atomic counter, and push one record into the lock-free ring. No lock, no
 * allocation, no system call; with the events backend one cudaEventRecord
 * per launched group, as the preload does.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/clock.h"
#include "crux/collect.h"
#include "crux/log.h"
#include "cruxf.h"

static struct {
	pthread_mutex_t lock; /* init/finalize only */
	int decided;	      /* 0 not yet, 1 we publish, -1 the preload does */
	cruxf_logger_t logger;
	_Atomic int passive_said;
	_Atomic uint64_t last_tag; /* v7: the newest nonzero user tag seen in the process */
} cruxf_state = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- Strings NCCL hands us (ncclFuncToString / ncclDatatypeToString) ---- */

int cruxf_op_from_func(const char *f)
{
	if (!f)
		return -1;
	switch (f[0]) {
	case 'A':
		if (!strcmp(f, "AllReduce"))
			return CRUXC_OP_ALLREDUCE;
		if (!strcmp(f, "AllGather"))
			return CRUXC_OP_ALLGATHER;
		if (!strcmp(f, "AlltoAll") || !strcmp(f, "AllToAll"))
			return CRUXC_OP_ALLTOALL;
		break;
	case 'R':
		if (!strcmp(f, "ReduceScatter"))
			return CRUXC_OP_REDUCESCATTER;
		if (!strcmp(f, "Reduce"))
			return CRUXC_OP_REDUCE;
		if (!strcmp(f, "Recv"))
			return CRUXC_OP_RECV;
		break;
	case 'B':
		if (!strcmp(f, "Broadcast"))
			return CRUXC_OP_BROADCAST;
		break;
	case 'G':
		if (!strcmp(f, "Gather"))
			return CRUXC_OP_GATHER;
		break;
	case 'S':
		if (!strcmp(f, "Send"))
			return CRUXC_OP_SEND;
		if (!strcmp(f, "Scatter"))
			return CRUXC_OP_SCATTER;
		break;
	default:
		break;
	}
	return -1;
}

int cruxf_dtype_from_name(const char *d)
{
	static const char *const names[] = {
	    "ncclInt8",	   "ncclUint8",	   "ncclInt32",	     "ncclUint32",
	    "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
	    "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2",
	};

	if (!d || strncmp(d, "nccl", 4) != 0)
		return 0; /* unknown: counted as bytes */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(d + 4, names[i] + 4))
			return (int)i;
	return 0;
}

/* ---- Logging through NCCL's logger ---- */

static void nccl_sink(void *arg, enum crux_log_level level, const char *file, int line,
		      const char *msg)
{
	cruxf_logger_t l = cruxf_state.logger;
	(void)arg;

	if (l)
		l(level <= CRUX_LOG_WARN ? CRUXF_LOG_WARN : CRUXF_LOG_INFO, CRUXF_LOG_SUB_INIT,
		  file, line, "PROFILER/Crux: %s", msg);
}

/* ---- Claim: exactly one of the preload and this plugin publishes ---- */

static void cruxf_mark(void)
{
	cruxc_mark(crux_now_ns());
}

/*
 * v7 user tags as iteration marks (profiler/README.md, "User tags"): a
 * nonzero tag names the training step a call belongs to, so the first call
 * whose tag differs from the newest one seen in the process starts an
 * iteration. The first tag ever seen only arms this (a tag that never
 * changes leaves the detector in charge); 0 means untagged, and tags with
 * the top bit set are NCCL's own (reserved), not the framework's. Only with
 * CRUX_ITERATION_MARK=auto: api and <op> say the user chose another mark.
 */
static inline void tag_seen(uint64_t tag, uint64_t t)
{
	uint64_t last;

	if (!tag || (tag >> 63) || !cruxc_hot.mark_auto)
		return;
	last = atomic_load_explicit(&cruxf_state.last_tag, memory_order_relaxed);
	if (last == tag)
		return;
	last = atomic_exchange_explicit(&cruxf_state.last_tag, tag, memory_order_relaxed);
	if (last && last != tag)
		cruxc_mark(t);
}

/* Decided once per process, under cruxf_state.lock. */
static int decide(void)
{
	typedef int (*claim_fn)(int, void (*)(void));
	claim_fn claim;

	if (cruxf_state.decided)
		return cruxf_state.decided;
	/* The preload, when present, exports its claim (LD_PRELOAD: global scope). */
	claim = (claim_fn)dlsym(RTLD_DEFAULT, "crux_profile_claim");
	if (!claim || claim(CRUXC_SRC_PROFILER, cruxf_mark) == CRUXC_SRC_PROFILER)
		cruxf_state.decided = 1;
	else
		cruxf_state.decided = -1;
	return cruxf_state.decided;
}

/* The CUDA device current on the thread that creates the communicator. */
static int current_device(void)
{
	typedef int (*cu_ctx_get_device_fn)(int *);
	void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	cu_ctx_get_device_fn get;
	int dev = -1;

	if (!cuda)
		return -1;
	get = (cu_ctx_get_device_fn)dlsym(cuda, "cuCtxGetDevice");
	if (!get || get(&dev) != 0)
		dev = -1;
	dlclose(cuda);
	return dev;
}

cruxf_result_t cruxf_init(void **context, int *mask, int version, const char *name, int nranks,
			  int rank, cruxf_logger_t logfn)
{
	struct cruxf_comm *c;

	if (!context || !mask)
		return CRUXF_INVALID_ARGUMENT;
	*mask = 0;
	*context = NULL;
	pthread_mutex_lock(&cruxf_state.lock);
	if (logfn && !cruxf_state.logger) {
		cruxf_state.logger = logfn;
		crux_log_set_sink(nccl_sink, NULL);
	}
	if (decide() < 0) {
		pthread_mutex_unlock(&cruxf_state.lock);
		crux_log_once(&cruxf_state.passive_said, CRUX_LOG_INFO,
			      "libcrux-preload.so profiles this process; the profiler plugin stays "
			      "passive (no events)");
		return CRUXF_SUCCESS;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		pthread_mutex_unlock(&cruxf_state.lock);
		return CRUXF_SUCCESS; /* never fail NCCL for profiling */
	}
	c->magic = CRUXF_COMM_MAGIC;
	c->version = version;
	c->rank = rank;
	c->nranks = nranks;
	snprintf(c->name, sizeof(c->name), "%s", name ? name : "");
	cruxc_set_source(CRUXC_SRC_PROFILER, current_device);
	pthread_mutex_unlock(&cruxf_state.lock);

	cruxc_comm_add((uintptr_t)c, rank, nranks);
	if (!cruxc_active()) {
		/* Off by configuration (said once by the core): no events at all. */
		cruxc_comm_remove((uintptr_t)c);
		free(c);
		return CRUXF_SUCCESS;
	}
	*context = c;
	*mask = version >= 5 ? (CRUXF_EV_GROUP_API | CRUXF_EV_COLL_API | CRUXF_EV_P2P_API)
			     : (CRUXF_EV_GROUP | CRUXF_EV_COLL | CRUXF_EV_P2P);
	return CRUXF_SUCCESS;
}

cruxf_result_t cruxf_finalize(void *context)
{
	struct cruxf_comm *c = context;

	if (!c || c->magic != CRUXF_COMM_MAGIC)
		return CRUXF_SUCCESS;
	cruxc_comm_remove((uintptr_t)c);
	c->magic = 0;
	free(c);
	return CRUXF_SUCCESS;
}

/* ---- Events (critical path) ---- */

static inline struct cruxf_event *slot(struct cruxf_comm *c)
{
	uint32_t i = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
	struct cruxf_event *e = &c->evs[i & (CRUXF_EVENTS - 1)];

	e->comm_of = c;
	return e;
}

static inline void push_call(struct cruxf_comm *c, uint64_t t0, uint64_t t1, int op, uint64_t count,
			     int dtype, int peer, uintptr_t stream, uint32_t ev)
{
	struct cruxc_call k;

	k.t_enter = t0;
	k.t_exit = t1;
	k.count = count;
	k.comm = (uintptr_t)c;
	k.stream = stream;
	k.peer = peer;
	k.ev_slot = ev;
	k.op = (uint8_t)op;
	k.dtype = (uint8_t)dtype;
	memset(k.pad, 0, sizeof(k.pad));
	cruxc_push(&k);
}

/*
 * NCCL passes static strings (ncclFuncToString, ncclDatatypeToString): one
 * pointer per name, so the last (pointer, value) per kind saves the compare.
 */
static inline int cached(_Atomic uint64_t *cache, const char *str, int (*decode)(const char *))
{
	uint64_t v = atomic_load_explicit(cache, memory_order_relaxed);
	int r;

	if (str && (v >> 8) == (uint64_t)(uintptr_t)str)
		return (int)(v & 0xff) - 1;
	r = decode(str);
	if (str && (uint64_t)(uintptr_t)str < (1ull << 56))
		atomic_store_explicit(cache,
				      ((uint64_t)(uintptr_t)str << 8) | ((uint64_t)(r + 1) & 0xff),
				      memory_order_relaxed);
	return r;
}

/*
 * A call queued in group g. The first one waits in the group: most groups
 * are the implicit group of one call, which then becomes one record timed
 * from the call to the end of its launch, as the preload times a call.
 */
static inline void group_add(struct cruxf_event *g, const struct cruxf_call_info *call, uint64_t t1)
{
	if (!g->ncalls++) {
		g->stream = call->stream;
		g->pending = *call;
		g->has_pending = true;
		return;
	}
	if (g->has_pending) {
		push_call(g->comm_of, g->pending.t0, g->pending.t0, g->pending.op, g->pending.count,
			  g->pending.dtype, g->pending.peer, g->pending.stream, UINT32_MAX);
		g->has_pending = false;
	}
	push_call(g->comm_of, call->t0, t1 ? t1 : call->t0, call->op, call->count, call->dtype,
		  call->peer, call->stream, UINT32_MAX);
}

void cruxf_start(void *context, void **handle, const struct cruxf_desc *d)
{
	struct cruxf_comm *c = context;
	struct cruxf_event *e, *parent = d->parent;
	int op;

	*handle = NULL;
	if (!c || c->magic != CRUXF_COMM_MAGIC || !cruxc_active())
		return;
	if (parent &&
	    (parent < c->evs || parent >= c->evs + CRUXF_EVENTS || parent->type != CRUXF_K_GROUP))
		parent = NULL; /* not one of ours, or no longer a group */
	switch (d->kind) {
	case CRUXF_K_GROUP:
		e = slot(c);
		e->type = CRUXF_K_GROUP;
		e->v4 = d->v4;
		e->t0 = 0;
		e->ncalls = 0;
		e->has_pending = false;
		e->stream = 0;
		e->ev_slot = UINT32_MAX;
		*handle = e;
		return;
	case CRUXF_K_CALL:
		op = cached(&c->func_cache, d->func, cruxf_op_from_func);
		if (op < 0)
			return;
		if (d->v4) {
			/* v4 task events come at launch: the call is a point; the group times it.
			 */
			struct cruxf_call_info call;

			call.t0 = crux_now_ns();
			tag_seen(d->user_tag, call.t0);
			call.op = (uint8_t)op;
			call.dtype =
			    (uint8_t)cached(&c->dtype_cache, d->datatype, cruxf_dtype_from_name);
			call.count = d->count;
			call.peer = d->peer;
			call.stream = (uintptr_t)d->stream;
			if (parent) {
				/* v4 has no launch state: the launch starts with its first task. */
				if (!parent->ncalls) {
					parent->t0 = call.t0;
					if (cruxc_events_on())
						parent->ev_slot = cruxc_events_begin(
						    cruxc_hot.events, d->stream, call.t0);
				}
				group_add(parent, &call, 0);
			} else {
				push_call(c, call.t0, call.t0, op, call.count, call.dtype,
					  call.peer, call.stream, UINT32_MAX);
			}
			return;
		}
		e = slot(c);
		e->type = CRUXF_K_CALL;
		e->t0 = crux_now_ns();
		tag_seen(d->user_tag, e->t0);
		e->op = (uint8_t)op;
		e->dtype = (uint8_t)cached(&c->dtype_cache, d->datatype, cruxf_dtype_from_name);
		e->count = d->count;
		e->peer = d->peer;
		e->stream = (uintptr_t)d->stream;
		e->parent = parent;
		*handle = e;
		return;
	default:
		return;
	}
}

void cruxf_stop(void *handle)
{
	struct cruxf_event *e = handle;
	uint64_t now;

	if (!e || !cruxc_active())
		return;
	if (e->type == CRUXF_K_CALL) {
		if (e->parent && e->parent->type == CRUXF_K_GROUP) {
			struct cruxf_call_info ci = {.op = e->op,
						     .dtype = e->dtype,
						     .peer = e->peer,
						     .t0 = e->t0,
						     .count = e->count,
						     .stream = e->stream};

			/* The first call of a group needs no clock: its record ends with the
			 * launch. */
			group_add(e->parent, &ci, e->parent->ncalls ? crux_now_ns() : 0);
		} else {
			push_call(e->comm_of, e->t0, crux_now_ns(), e->op, e->count, e->dtype,
				  e->peer, e->stream, UINT32_MAX);
		}
	} else if (e->type == CRUXF_K_GROUP && e->ncalls) {
		now = crux_now_ns();
		if (e->ev_slot != UINT32_MAX)
			cruxc_events_end(cruxc_hot.events, e->ev_slot, (void *)e->stream);
		if (e->has_pending && e->ncalls == 1)
			push_call(e->comm_of, e->pending.t0, now, e->pending.op, e->pending.count,
				  e->pending.dtype, e->pending.peer, e->stream, e->ev_slot);
		else
			push_call(e->comm_of, e->t0 ? e->t0 : now, now, CRUXC_OP_GROUP_END, 0, 0,
				  -1, e->stream, e->ev_slot);
	}
	e->type = 0;
}

void cruxf_state_change(void *handle, int state)
{
	struct cruxf_event *e = handle;

	if (!e || e->type != CRUXF_K_GROUP || state != CRUXF_STATE_GROUP_END_API_START ||
	    !e->ncalls || !cruxc_active())
		return;
	/*
	 * ncclGroupEnd entered: the queued work is launched from here on. A
	 * group of several calls is timed from here (its calls were enqueues);
	 * the events backend brackets the launch on the group's stream.
	 */
	if (e->ncalls > 1 || cruxc_events_on()) {
		e->t0 = crux_now_ns();
		if (cruxc_events_on() && e->ev_slot == UINT32_MAX)
			e->ev_slot = cruxc_events_begin(cruxc_hot.events, (void *)e->stream, e->t0);
	}
}
