/* SPDX-License-Identifier: Apache-2.0 */
/* CUDA events backend: a pool of event pairs, claimed lock-free per call. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "collect_int.h"
#include "crux/log.h"
#include "timing.h"

static const char *const cudart_names[] = {
    "libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", NULL,
};

crux_status_t cruxc_cudart_load(const char *lib, struct cruxc_cudart *out)
{
	struct cruxc_cudart rt;
	void *h = NULL;

	memset(&rt, 0, sizeof(rt));
	if (lib && *lib) {
		h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	} else {
		/* The process's own copy first: events must live in its CUDA context. */
		for (int i = 0; !h && cudart_names[i]; i++)
			h = dlopen(cudart_names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
		for (int i = 0; !h && cudart_names[i]; i++)
			h = dlopen(cudart_names[i], RTLD_NOW | RTLD_LOCAL);
	}
	if (!h) {
		crux_info("CUDA runtime not loadable (%s); set CRUX_CUDART_LIB to its path",
			  dlerror());
		return CRUX_ERR_UNSUPPORTED;
	}
	*(void **)&rt.event_create = dlsym(h, "cudaEventCreateWithFlags");
	*(void **)&rt.event_record = dlsym(h, "cudaEventRecord");
	*(void **)&rt.event_query = dlsym(h, "cudaEventQuery");
	*(void **)&rt.event_elapsed = dlsym(h, "cudaEventElapsedTime");
	*(void **)&rt.event_destroy = dlsym(h, "cudaEventDestroy");
	if (!rt.event_create || !rt.event_record || !rt.event_query || !rt.event_elapsed ||
	    !rt.event_destroy) {
		crux_warn("the CUDA runtime library lacks the event functions");
		dlclose(h);
		return CRUX_ERR_UNSUPPORTED;
	}
	rt.handle = h;
	*out = rt;
	return CRUX_OK;
}

void cruxc_events_free(struct cruxc_events *ev)
{
	if (!ev)
		return;
	for (uint32_t i = 0; ev->slots && i < ev->nslots; i++) {
		if (ev->slots[i].start)
			ev->rt.event_destroy(ev->slots[i].start);
		if (ev->slots[i].end)
			ev->rt.event_destroy(ev->slots[i].end);
	}
	free(ev->slots);
	free(ev->scratch);
	if (ev->rt.handle)
		dlclose(ev->rt.handle);
	free(ev);
}

crux_status_t cruxc_events_new(const char *lib, uint32_t nslots, struct cruxc_events **out)
{
	struct cruxc_events *ev;
	crux_status_t st;

	if (!nslots || (nslots & (nslots - 1)))
		return CRUX_ERR_INVAL;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return CRUX_ERR_NOMEM;
	st = cruxc_cudart_load(lib, &ev->rt);
	if (st != CRUX_OK)
		goto fail;
	st = CRUX_ERR_NOMEM;
	ev->slots = calloc(nslots, sizeof(*ev->slots));
	ev->scratch = calloc(nslots, sizeof(*ev->scratch));
	if (!ev->slots || !ev->scratch)
		goto fail;
	ev->nslots = nslots;
	ev->ref = -1;
	for (uint32_t i = 0; i < nslots; i++) {
		if (ev->rt.event_create(&ev->slots[i].start, CRUXC_CUDA_EVENT_DEFAULT) != 0 ||
		    ev->rt.event_create(&ev->slots[i].end, CRUXC_CUDA_EVENT_DEFAULT) != 0) {
			crux_warn("cudaEventCreateWithFlags failed; no CUDA device here?");
			st = CRUX_ERR_UNSUPPORTED;
			goto fail;
		}
	}
	*out = ev;
	return CRUX_OK;
fail:
	cruxc_events_free(ev);
	return st;
}

uint32_t cruxc_events_begin(struct cruxc_events *ev, void *stream, uint64_t host_now)
{
	uint64_t order = atomic_fetch_add_explicit(&ev->claims, 1, memory_order_relaxed);

	/* Try a few slots from our claim position; all busy means the poller is behind. */
	for (uint32_t k = 0; k < 4; k++) {
		uint32_t i = (uint32_t)(order + k) & (ev->nslots - 1);
		struct cruxc_ev_slot *s = &ev->slots[i];
		uint32_t expect = CRUXC_EV_FREE;

		if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, CRUXC_EV_BUSY,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;
		s->order = order;
		s->host_enter = host_now;
		if (ev->rt.event_record(s->start, (cruxc_cuda_stream_t)stream) != 0) {
			atomic_store_explicit(&s->state, CRUXC_EV_FREE, memory_order_release);
			break;
		}
		return i;
	}
	atomic_fetch_add_explicit(&ev->dropped, 1, memory_order_relaxed);
	return UINT32_MAX;
}

void cruxc_events_end(struct cruxc_events *ev, uint32_t slot, void *stream)
{
	struct cruxc_ev_slot *s = &ev->slots[slot];

	if (ev->rt.event_record(s->end, (cruxc_cuda_stream_t)stream) != 0) {
		atomic_store_explicit(&s->state, CRUXC_EV_FREE, memory_order_release);
		return;
	}
	atomic_store_explicit(&s->state, CRUXC_EV_RECORDED, memory_order_release);
}

void cruxc_events_cancel(struct cruxc_events *ev, uint32_t slot)
{
	atomic_store_explicit(&ev->slots[slot].state, CRUXC_EV_FREE, memory_order_release);
}

static int order_cmp(const void *a, const void *b, void *arg)
{
	const struct cruxc_events *ev = arg;
	uint64_t x = ev->slots[*(const uint32_t *)a].order;
	uint64_t y = ev->slots[*(const uint32_t *)b].order;

	return x < y ? -1 : x > y;
}

size_t cruxc_events_poll(struct cruxc_events *ev, struct cruxc_iv *out, size_t cap)
{
	size_t n = 0, done = 0;

	for (uint32_t i = 0; i < ev->nslots; i++) {
		if (atomic_load_explicit(&ev->slots[i].state, memory_order_acquire) ==
			CRUXC_EV_RECORDED &&
		    ev->rt.event_query(ev->slots[i].end) == CRUXC_CUDA_SUCCESS)
			ev->scratch[n++] = i;
	}
	qsort_r(ev->scratch, n, sizeof(*ev->scratch), order_cmp, ev);
	for (size_t k = 0; k < n && done < cap; k++) {
		struct cruxc_ev_slot *s = &ev->slots[ev->scratch[k]];
		float dur_ms = 0, rel_ms = 0;
		double pos;

		if (ev->rt.event_elapsed(&dur_ms, s->start, s->end) != 0 || dur_ms < 0)
			dur_ms = 0;
		/*
		 * Position by chaining from the previous event: elapsed times between
		 * neighbours stay small, so float milliseconds keep their precision.
		 */
		if (ev->ref >= 0 &&
		    ev->rt.event_elapsed(&rel_ms, ev->slots[ev->ref].start, s->start) == 0)
			pos = ev->ref_pos_ns + (double)rel_ms * 1e6;
		else
			pos = (double)s->host_enter;
		if (ev->ref >= 0)
			atomic_store_explicit(&ev->slots[ev->ref].state, CRUXC_EV_FREE,
					      memory_order_release);
		atomic_store_explicit(&s->state, CRUXC_EV_HELD, memory_order_relaxed);
		ev->ref = (int32_t)ev->scratch[k];
		ev->ref_pos_ns = pos;
		if (pos < 0)
			pos = 0;
		out[done++] = (struct cruxc_iv){
		    (uint64_t)pos, (uint64_t)pos + (uint64_t)(dur_ms * 1e6), CRUXC_IV_COMM, 0};
	}
	return done;
}
