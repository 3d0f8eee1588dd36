/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal NCCL profiler plugin that exports one table,
 * ncclProfiler_v<FIXTURE_VERSION>, for the chaining tests and benchmark
 * (CRUX_PROFILER_NEXT). It asks for event types Crux does not want (proxy
 * operations, kernel channels, and in v7 kernel phases) besides some Crux
 * wants too, hands out its own handles, and counts everything it sees,
 * including anything that is not its own: a foreign context, handle or
 * parent, or an event type it did not ask for. fixture_stats() (found with
 * dlopen(RTLD_NOLOAD) by the tests) returns the counts.
 *
 * FIXTURE_INIT_FAIL=1 makes init fail (the chained plugin's init error path).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/nccl_profiler_abi.h"

#ifndef FIXTURE_VERSION
#error "build with -DFIXTURE_VERSION=4..7"
#endif

#define EXPORT	  __attribute__((visibility("default")))
#define CTX_MAGIC 0x4649585443545820ull /* "FIXTCTX " */
#define EV_MAGIC  0x4649585445564e54ull /* "FIXTEVNT" */
#define NEVENTS	  1024

struct fixture_stats {
	int version;
	long inits, finalizes, starts, stops, states, live;
	long by_type[16];
	long with_parent;     /* starts whose parent was one of our handles (NCCL may name a
				 stopped one: a Coll task's parent is its stopped CollApi) */
	long foreign_parent;  /* a parent that is not one of our handles */
	long foreign_handle;  /* stop/state with a handle that is not ours (or not live) */
	long foreign_context; /* start/finalize with a context that is not ours */
	long unasked;	      /* an event type we did not ask for */
	long state_sum;	      /* sum of the state values recorded */
	uint64_t tag_sum;     /* v7: sum of the user tags of API events */
};

struct fev {
	uint64_t magic;
	_Atomic int live;
	uint64_t type;
};

struct fctx {
	uint64_t magic;
	int mask;
	_Atomic uint32_t next;
	struct fev evs[NEVENTS];
};

static struct fixture_stats st = {.version = FIXTURE_VERSION};
static _Atomic long a_starts, a_stops, a_states, a_live;

EXPORT void fixture_stats(struct fixture_stats *out)
{
	st.starts = atomic_load(&a_starts);
	st.stops = atomic_load(&a_stops);
	st.states = atomic_load(&a_states);
	st.live = atomic_load(&a_live);
	*out = st;
}

EXPORT void fixture_reset(void)
{
	memset(&st, 0, sizeof(st));
	st.version = FIXTURE_VERSION;
	atomic_store(&a_starts, 0);
	atomic_store(&a_stops, 0);
	atomic_store(&a_states, 0);
	atomic_store(&a_live, 0);
}

static int our_mask(void)
{
	if (FIXTURE_VERSION == 4)
		return CRUXF_EV_GROUP | CRUXF_EV_COLL | CRUXF_EV_PROXY_OP | CRUXF_EV_KERNEL_CH;
	if (FIXTURE_VERSION == 7)
		return CRUXF_EV_GROUP_API | CRUXF_EV_COLL_API | CRUXF_EV_COLL | CRUXF_EV_PROXY_OP |
		       CRUXF_EV_KERNEL_CH | CRUXF_EV_KERNEL_PHASE;
	return CRUXF_EV_GROUP_API | CRUXF_EV_COLL_API | CRUXF_EV_COLL | CRUXF_EV_PROXY_OP |
	       CRUXF_EV_KERNEL_CH;
}

static cruxf_result_t f_init_common(void **ctx, int *mask)
{
	struct fctx *c;
	const char *fail = getenv("FIXTURE_INIT_FAIL");

	if (fail && *fail == '1')
		return CRUXF_INTERNAL_ERROR;
	c = calloc(1, sizeof(*c));
	if (!c)
		return CRUXF_INTERNAL_ERROR;
	c->magic = CTX_MAGIC;
	c->mask = our_mask();
	*ctx = c;
	*mask = c->mask;
	st.inits++;
	return CRUXF_SUCCESS;
}

static struct fev *ours(struct fctx *c, void *h)
{
	uintptr_t a = (uintptr_t)h, b = (uintptr_t)c->evs;

	if (a < b || a >= b + sizeof(c->evs) || (a - b) % sizeof(struct fev))
		return NULL;
	return h;
}

/* Handles of every live context: a stop/state handle must be one of them. */
#define MAXCTX 16
static struct fctx *ctxs[MAXCTX];

static struct fev *any_ours(void *h)
{
	struct fev *e;

	for (int i = 0; i < MAXCTX; i++)
		if (ctxs[i] && (e = ours(ctxs[i], h)) && e->magic == EV_MAGIC)
			return e;
	return NULL;
}

static void start_common(void *ctx, void **h, uint64_t type, void *parent, uint64_t tag)
{
	struct fctx *c = ctx;
	struct fev *e;

	*h = NULL;
	if (!c || c->magic != CTX_MAGIC) {
		st.foreign_context++;
		return;
	}
	atomic_fetch_add(&a_starts, 1);
	for (int b = 0; b < 16; b++)
		if (type == (1ull << b))
			__atomic_fetch_add(&st.by_type[b], 1, __ATOMIC_RELAXED);
	if (!(type & (uint64_t)c->mask))
		__atomic_fetch_add(&st.unasked, 1, __ATOMIC_RELAXED);
	if (parent) {
		struct fev *p = ours(c, parent);
		if (p && p->magic == EV_MAGIC)
			__atomic_fetch_add(&st.with_parent, 1, __ATOMIC_RELAXED);
		else
			__atomic_fetch_add(&st.foreign_parent, 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&st.tag_sum, tag, __ATOMIC_RELAXED);
	/* A slot no live event holds (a thread may sit on one while others go round). */
	for (;;) {
		int free_ = 0;
		e = &c->evs[atomic_fetch_add(&c->next, 1) % NEVENTS];
		if (atomic_compare_exchange_strong(&e->live, &free_, 1))
			break;
	}
	e->magic = EV_MAGIC;
	e->type = type;
	atomic_fetch_add(&a_live, 1);
	*h = e;
}

static cruxf_result_t f_stop(void *h)
{
	struct fev *e = any_ours(h);

	if (!e || !atomic_exchange(&e->live, 0)) {
		__atomic_fetch_add(&st.foreign_handle, 1, __ATOMIC_RELAXED);
		return CRUXF_SUCCESS;
	}
	atomic_fetch_add(&a_stops, 1);
	atomic_fetch_sub(&a_live, 1);
	return CRUXF_SUCCESS;
}

static cruxf_result_t f_state(void *h, int s, cruxf_state_args_t *args)
{
	struct fev *e = any_ours(h);

	(void)args;
	if (!e || !atomic_load(&e->live)) {
		__atomic_fetch_add(&st.foreign_handle, 1, __ATOMIC_RELAXED);
		return CRUXF_SUCCESS;
	}
	atomic_fetch_add(&a_states, 1);
	__atomic_fetch_add(&st.state_sum, s, __ATOMIC_RELAXED);
	return CRUXF_SUCCESS;
}

static cruxf_result_t f_finalize(void *ctx)
{
	struct fctx *c = ctx;

	if (!c || c->magic != CTX_MAGIC) {
		st.foreign_context++;
		return CRUXF_SUCCESS;
	}
	for (int i = 0; i < MAXCTX; i++)
		if (ctxs[i] == c)
			ctxs[i] = NULL;
	c->magic = 0;
	free(c);
	st.finalizes++;
	return CRUXF_SUCCESS;
}

static void remember(void *ctx)
{
	for (int i = 0; i < MAXCTX; i++)
		if (!ctxs[i]) {
			ctxs[i] = ctx;
			return;
		}
}

#if FIXTURE_VERSION == 4
static cruxf_result_t f_init(void **ctx, int *mask, const char *name, uint64_t hash, int nn, int nr,
			     int r, cruxf_logger_t l)
{
	cruxf_result_t res = f_init_common(ctx, mask);
	(void)name, (void)hash, (void)nn, (void)nr, (void)r, (void)l;
	if (res == CRUXF_SUCCESS)
		remember(*ctx);
	return res;
}
static cruxf_result_t f_start(void *ctx, void **h, cruxf_descr_v4_t *d)
{
	start_common(ctx, h, d->type, d->parentObj, 0);
	return CRUXF_SUCCESS;
}
EXPORT const cruxf_profiler_v4_t ncclProfiler_v4 = {"fixture", f_init,	f_start,
						    f_stop,    f_state, f_finalize};
#else
static cruxf_result_t f_init(void **ctx, uint64_t id, int *mask, const char *name, int nn, int nr,
			     int r, cruxf_logger_t l)
{
	cruxf_result_t res = f_init_common(ctx, mask);
	(void)name, (void)id, (void)nn, (void)nr, (void)r, (void)l;
	if (res == CRUXF_SUCCESS)
		remember(*ctx);
	return res;
}
#if FIXTURE_VERSION == 7
static cruxf_result_t f_start(void *ctx, void **h, cruxf_descr_v7_t *d)
{
	uint64_t tag = d->type == CRUXF_EV_COLL_API  ? d->collApi.userTag
		       : d->type == CRUXF_EV_P2P_API ? d->p2pApi.userTag
						     : 0;
	start_common(ctx, h, d->type, d->parentObj, tag);
	return CRUXF_SUCCESS;
}
EXPORT const cruxf_profiler_v7_t ncclProfiler_v7 = {"fixture", f_init,	f_start,
						    f_stop,    f_state, f_finalize};
#else
static cruxf_result_t f_start(void *ctx, void **h, cruxf_descr_v5_t *d)
{
	start_common(ctx, h, d->type, d->parentObj, 0);
	return CRUXF_SUCCESS;
}
#if FIXTURE_VERSION == 6
EXPORT const cruxf_profiler_v6_t ncclProfiler_v6 = {"fixture", f_init,	f_start,
						    f_stop,    f_state, f_finalize};
#else
EXPORT const cruxf_profiler_v5_t ncclProfiler_v5 = {"fixture", f_init,	f_start,
						    f_stop,    f_state, f_finalize};
#endif
#endif
#endif
