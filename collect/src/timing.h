/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU timing backends, reached only through dlopen'ed libraries:
 *   events: CUDA events recorded around each collective on its stream
 *           (libcudart); gives communication intervals on the GPU clock.
 *   cupti:  CUPTI activity records of concurrent kernels (libcupti); gives
 *           compute and NCCL kernel intervals.
 * Both hand the background thread intervals in host CLOCK_MONOTONIC ns.
 */
#ifndef CRUXC_TIMING_H
#define CRUXC_TIMING_H

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

struct cruxc_cudart {
	void *handle;
	cruxc_cuda_err_t (*event_create)(cruxc_cuda_event_t *ev, unsigned int flags);
	cruxc_cuda_err_t (*event_record)(cruxc_cuda_event_t ev, cruxc_cuda_stream_t stream);
	cruxc_cuda_err_t (*event_query)(cruxc_cuda_event_t ev);
	cruxc_cuda_err_t (*event_elapsed)(float *ms, cruxc_cuda_event_t a, cruxc_cuda_event_t b);
	cruxc_cuda_err_t (*event_destroy)(cruxc_cuda_event_t ev);
};

enum { CRUXC_EV_FREE = 0, CRUXC_EV_BUSY, CRUXC_EV_RECORDED, CRUXC_EV_HELD };

struct cruxc_ev_slot {
	_Atomic uint32_t state;
	uint32_t pad;
	uint64_t order;	     /* claim order, for in-order positioning */
	uint64_t host_enter; /* host time of the call, to anchor the first slot */
	cruxc_cuda_event_t start;
	cruxc_cuda_event_t end;
};

struct cruxc_events {
	struct cruxc_cudart rt;
	uint32_t nslots; /* power of two */
	struct cruxc_ev_slot *slots;
	_Atomic uint64_t claims;
	_Atomic uint64_t dropped; /* calls not timed: no free slot */
	/* Background thread only: */
	int32_t ref;	   /* held slot whose start event positions the next, -1 none */
	double ref_pos_ns; /* host-clock position of that start event */
	uint32_t *scratch; /* nslots indexes */
};

/* Load libcudart from 'lib' (NULL: the usual names). */
crux_status_t cruxc_cudart_load(const char *lib, struct cruxc_cudart *out);

/* Create the event pool on the calling thread's current device. */
crux_status_t cruxc_events_new(const char *lib, uint32_t nslots, struct cruxc_events **out);
void cruxc_events_free(struct cruxc_events *ev);

/* Front-ends: cruxc_events_begin, _end, _cancel (crux/collect.h). */

/* Background: completed communication intervals, in claim order. Returns how many. */
size_t cruxc_events_poll(struct cruxc_events *ev, struct cruxc_iv *out, size_t cap);

/* ---- CUPTI ---- */

struct cruxc_cupti_api {
	void *handle;
	cruxc_cupti_res_t (*subscribe)(cruxc_cupti_subscriber_t *sub, cruxc_cupti_callback_fn cb,
				       void *userdata);
	cruxc_cupti_res_t (*unsubscribe)(cruxc_cupti_subscriber_t sub);
	cruxc_cupti_res_t (*register_callbacks)(cruxc_cupti_buf_request_fn req,
						cruxc_cupti_buf_complete_fn done);
	cruxc_cupti_res_t (*enable)(uint32_t kind);
	cruxc_cupti_res_t (*disable)(uint32_t kind);
	cruxc_cupti_res_t (*flush_all)(uint32_t flag);
	cruxc_cupti_res_t (*next_record)(uint8_t *buffer, size_t valid, void **record);
	cruxc_cupti_res_t (*timestamp)(uint64_t *ts);
	cruxc_cupti_res_t (*result_string)(cruxc_cupti_res_t r, const char **str);
};

#define CRUXC_CUPTI_NBUF 32 /* buffers in the pool (one bit each) */

struct cruxc_cupti {
	struct cruxc_cupti_api api;
	cruxc_cupti_subscriber_t sub;
	size_t buf_size;
	uint8_t *buf_mem; /* CRUXC_CUPTI_NBUF * buf_size, 8-byte aligned */
	_Atomic uint32_t buf_busy;
	int64_t offset_ns;    /* host CLOCK_MONOTONIC - CUPTI timestamp */
	pthread_mutex_t lock; /* staging: CUPTI delivers on its own thread too */
	struct cruxc_iv *staging;
	size_t staged, cap;
	_Atomic uint64_t dropped; /* kernel records lost (staging full or no buffer) */
	_Atomic uint64_t kernels; /* kernel records seen */
};

crux_status_t cruxc_cupti_load(const char *lib, struct cruxc_cupti_api *out);

/*
 * Subscribe and enable concurrent-kernel activity records. CRUX_ERR_BUSY when
 * another CUPTI subscriber (profiler, Nsight) holds the process.
 * While it lives, the instance is the one CUPTI's buffer callbacks deliver to.
 */
crux_status_t cruxc_cupti_new(const char *lib, size_t staging_cap, struct cruxc_cupti **out);
void cruxc_cupti_free(struct cruxc_cupti *cu);

/* Background: flush CUPTI and move staged kernel intervals to out. */
size_t cruxc_cupti_poll(struct cruxc_cupti *cu, struct cruxc_iv *out, size_t cap);

/* The instance CUPTI's callbacks deliver to (set by new, cleared by free). */
struct cruxc_cupti *cruxc_cupti_callback_owner(void);

/* Buffer callbacks (registered with CUPTI; exposed for tests). */
void cruxc_cupti_buf_request(uint8_t **buffer, size_t *size, size_t *max_records);
void cruxc_cupti_buf_complete(void *context, uint32_t stream_id, uint8_t *buffer, size_t size,
			      size_t valid_size);

/* True for NCCL's kernels: "ncclKernel..." / "ncclDevKernel...", mangled or not. */
bool cruxc_is_nccl_kernel(const char *name);

#endif /* CRUXC_TIMING_H */
