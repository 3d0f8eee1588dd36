/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handful of CUDA runtime and CUPTI types the preload calls through
 * dlsym, declared here so the preload builds without the CUDA headers.
 * Values and layouts follow CUDA 12/13; tests/preload checks them against
 * the real headers when those are installed.
 */
#ifndef CRUXC_CUDA_DECL_H
#define CRUXC_CUDA_DECL_H

#include <stddef.h>
#include <stdint.h>

/* ---- CUDA runtime ---- */
typedef int cruxc_cuda_err_t; /* cudaError_t */
#define CRUXC_CUDA_SUCCESS	 0
#define CRUXC_CUDA_NOT_READY	 600 /* cudaErrorNotReady */
#define CRUXC_CUDA_EVENT_DEFAULT 0   /* cudaEventDefault: timing enabled */

typedef struct CUevent_st *cruxc_cuda_event_t;
typedef struct CUstream_st *cruxc_cuda_stream_t;

/* ---- CUPTI ---- */
typedef int cruxc_cupti_res_t; /* CUptiResult */
#define CRUXC_CUPTI_SUCCESS		 0
#define CRUXC_CUPTI_MAX_LIMIT_REACHED	 12
#define CRUXC_CUPTI_MULTIPLE_SUBSCRIBERS 39 /* CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED */

#define CRUXC_CUPTI_KIND_KERNEL		   3  /* CUPTI_ACTIVITY_KIND_KERNEL */
#define CRUXC_CUPTI_KIND_CONCURRENT_KERNEL 10 /* CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL */

typedef struct CUpti_Subscriber_st *cruxc_cupti_subscriber_t;
typedef void (*cruxc_cupti_callback_fn)(void *userdata, int domain, uint32_t cbid,
					const void *cbdata);
typedef void (*cruxc_cupti_buf_request_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*cruxc_cupti_buf_complete_fn)(void *context, uint32_t stream_id, uint8_t *buffer,
					    size_t size, size_t valid_size);

/* Every activity record starts with its kind. */
struct cruxc_cupti_record {
	uint32_t kind;
};

/*
 * The leading fields of CUpti_ActivityKernel4 .. CUpti_ActivityKernel10,
 * identical in all those versions (packed, 8-byte aligned records).
 */
struct cruxc_cupti_kernel {
	uint32_t kind;
	uint8_t cache_config;
	uint8_t shared_memory_config;
	uint16_t registers_per_thread;
	uint32_t partitioned_cache_requested;
	uint32_t partitioned_cache_executed;
	uint64_t start;
	uint64_t end;
	uint64_t completed;
	uint32_t device_id;
	uint32_t context_id;
	uint32_t stream_id;
	int32_t grid[3];
	int32_t block[3];
	int32_t static_shared_memory;
	int32_t dynamic_shared_memory;
	uint32_t local_memory_per_thread;
	uint32_t local_memory_total;
	uint32_t correlation_id;
	int64_t grid_id;
	const char *name;
};

#define CRUXC_CUPTI_KERNEL_START_OFF 16
#define CRUXC_CUPTI_KERNEL_END_OFF   24
#define CRUXC_CUPTI_KERNEL_NAME_OFF  104

_Static_assert(offsetof(struct cruxc_cupti_kernel, start) == CRUXC_CUPTI_KERNEL_START_OFF,
	       "kernel record start offset");
_Static_assert(offsetof(struct cruxc_cupti_kernel, end) == CRUXC_CUPTI_KERNEL_END_OFF,
	       "kernel record end offset");
_Static_assert(offsetof(struct cruxc_cupti_kernel, name) == CRUXC_CUPTI_KERNEL_NAME_OFF,
	       "kernel record name offset");

#endif /* CRUXC_CUDA_DECL_H */
