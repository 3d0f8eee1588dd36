/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU timing backends, reached only through dlopen'ed libraries:
 *   events: CUDA events recorded around each collective on its stream
 *           (libcudart); gives communication intervals on the GPU clock.
 *   cupti:  CUPTI activity records of concurrent kernels (libcupti); gives
 *           compute and NCCL kernel intervals.
 * Both hand the background thread intervals in host CLOCK_MONOTONIC ns.
 */
#ifndef CRUXP_TIMING_H
#define CRUXP_TIMING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crux/clock.h"
#include "crux/status.h"
#include "cuda_decl.h"
#include "ival.h"

/* The backends' time base is host CLOCK_MONOTONIC: crux_now_ns (crux/clock.h). */

/* ---- CUDA events ---- */

struct cruxp_cudart {
	void *handle;
	cruxp_cuda_err_t (*event_create)(cruxp_cuda_event_t *ev, unsigned int flags);
	cruxp_cuda_err_t (*event_record)(cruxp_cuda_event_t ev, cruxp_cuda_stream_t stream);
	cruxp_cuda_err_t (*event_query)(cruxp_cuda_event_t ev);
	cruxp_cuda_err_t (*event_elapsed)(float *ms, cruxp_cuda_event_t a, cruxp_cuda_event_t b);
	cruxp_cuda_err_t (*event_destroy)(cruxp_cuda_event_t ev);
};

enum { CRUXP_EV_FREE = 0, CRUXP_EV_BUSY, CRUXP_EV_RECORDED, CRUXP_EV_HELD };

struct cruxp_ev_slot {
	_Atomic uint32_t state;
	uint32_t pad;
	uint64_t order;	     /* claim order, for in-order positioning */
	uint64_t host_enter; /* host time of the call, to anchor the first slot */
	cruxp_cuda_event_t start;
	cruxp_cuda_event_t end;
};

struct cruxp_events {
	struct cruxp_cudart rt;
	uint32_t nslots; /* power of two */
	struct cruxp_ev_slot *slots;
	_Atomic uint64_t claims;
	_Atomic uint64_t dropped; /* calls not timed: no free slot */
	/* Background thread only: */
	int32_t ref;	   /* held slot whose start event positions the next, -1 none */
	double ref_pos_ns; /* host-clock position of that start event */
	uint32_t *scratch; /* nslots indexes */
};

/* Load libcudart from 'lib' (NULL: the usual names). */
crux_status_t cruxp_cudart_load(const char *lib, struct cruxp_cudart *out);

/* Create the event pool on the calling thread's current device. */
crux_status_t cruxp_events_new(const char *lib, uint32_t nslots, struct cruxp_events **out);
void cruxp_events_free(struct cruxp_events *ev);

/* Call path: record the start event; returns the slot or UINT32_MAX. */
uint32_t cruxp_events_begin(struct cruxp_events *ev, void *stream, uint64_t host_now);
/* Call path: record the end event of 'slot' (from begin) and publish it. */
void cruxp_events_end(struct cruxp_events *ev, uint32_t slot, void *stream);
/* Give a slot back without timing it (the call failed). */
void cruxp_events_cancel(struct cruxp_events *ev, uint32_t slot);

/* Background: completed communication intervals, in claim order. Returns how many. */
size_t cruxp_events_poll(struct cruxp_events *ev, struct cruxp_iv *out, size_t cap);

/* ---- CUPTI ---- */

struct cruxp_cupti_api {
	void *handle;
	cruxp_cupti_res_t (*subscribe)(cruxp_cupti_subscriber_t *sub, cruxp_cupti_callback_fn cb,
				       void *userdata);
	cruxp_cupti_res_t (*unsubscribe)(cruxp_cupti_subscriber_t sub);
	cruxp_cupti_res_t (*register_callbacks)(cruxp_cupti_buf_request_fn req,
						cruxp_cupti_buf_complete_fn done);
	cruxp_cupti_res_t (*enable)(uint32_t kind);
	cruxp_cupti_res_t (*disable)(uint32_t kind);
	cruxp_cupti_res_t (*flush_all)(uint32_t flag);
	cruxp_cupti_res_t (*next_record)(uint8_t *buffer, size_t valid, void **record);
	cruxp_cupti_res_t (*timestamp)(uint64_t *ts);
	cruxp_cupti_res_t (*result_string)(cruxp_cupti_res_t r, const char **str);
};

#define CRUXP_CUPTI_NBUF 32 /* buffers in the pool (one bit each) */

struct cruxp_cupti {
	struct cruxp_cupti_api api;
	cruxp_cupti_subscriber_t sub;
	size_t buf_size;
	uint8_t *buf_mem; /* CRUXP_CUPTI_NBUF * buf_size, 8-byte aligned */
	_Atomic uint32_t buf_busy;
	int64_t offset_ns;    /* host CLOCK_MONOTONIC - CUPTI timestamp */
	pthread_mutex_t lock; /* staging: CUPTI delivers on its own thread too */
	struct cruxp_iv *staging;
	size_t staged, cap;
	_Atomic uint64_t dropped; /* kernel records lost (staging full or no buffer) */
	_Atomic uint64_t kernels; /* kernel records seen */
};

crux_status_t cruxp_cupti_load(const char *lib, struct cruxp_cupti_api *out);

/*
 * Subscribe and enable concurrent-kernel activity records. CRUX_ERR_BUSY when
 * another CUPTI subscriber (profiler, Nsight) holds the process.
 * While it lives, the instance is the one CUPTI's buffer callbacks deliver to.
 */
crux_status_t cruxp_cupti_new(const char *lib, size_t staging_cap, struct cruxp_cupti **out);
void cruxp_cupti_free(struct cruxp_cupti *cu);

/* Background: flush CUPTI and move staged kernel intervals to out. */
size_t cruxp_cupti_poll(struct cruxp_cupti *cu, struct cruxp_iv *out, size_t cap);

/* The instance CUPTI's callbacks deliver to (set by new, cleared by free). */
struct cruxp_cupti *cruxp_cupti_callback_owner(void);

/* Buffer callbacks (registered with CUPTI; exposed for tests). */
void cruxp_cupti_buf_request(uint8_t **buffer, size_t *size, size_t *max_records);
void cruxp_cupti_buf_complete(void *context, uint32_t stream_id, uint8_t *buffer, size_t size,
			      size_t valid_size);

/* True for NCCL's kernels: "ncclKernel..." / "ncclDevKernel...", mangled or not. */
bool cruxp_is_nccl_kernel(const char *name);

#endif /* CRUXP_TIMING_H */
