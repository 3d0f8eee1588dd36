/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUPTI activity backend: concurrent-kernel records delivered in buffers from
 * a preallocated pool; parsed into compute / NCCL intervals off the call path.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "crux/log.h"
#include "crux_config.h"
#include "timing.h"

#define CUPTI_BUF_SIZE (256u * 1024u)

static const char *const cupti_names[] = {
    "libcupti.so",
    "libcupti.so.13",
    "libcupti.so.12",
    CRUX_CUDA_HOME "/lib64/libcupti.so",
    CRUX_CUDA_HOME "/extras/CUPTI/lib64/libcupti.so",
    NULL,
};

/* The one subscribed instance, the state CUPTI's callbacks work on. */
static _Atomic(struct cruxc_cupti *) cb_owner;

struct cruxc_cupti *cruxc_cupti_callback_owner(void)
{
	return atomic_load(&cb_owner);
}

bool cruxc_is_nccl_kernel(const char *name)
{
	if (!name)
		return false;
	/* Itanium mangling: _Z <length> <identifier> ... */
	if (name[0] == '_' && name[1] == 'Z') {
		name += 2;
		while (isdigit((unsigned char)*name))
			name++;
	}
	return strncmp(name, "ncclKernel", 10) == 0 || strncmp(name, "ncclDevKernel", 13) == 0;
}

crux_status_t cruxc_cupti_load(const char *lib, struct cruxc_cupti_api *out)
{
	struct cruxc_cupti_api a;
	void *h = NULL;

	memset(&a, 0, sizeof(a));
	if (lib && *lib) {
		h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	} else {
		for (int i = 0; !h && cupti_names[i]; i++)
			h = dlopen(cupti_names[i], RTLD_NOW | RTLD_LOCAL);
	}
	if (!h) {
		crux_info("libcupti not loadable (%s); set CRUX_CUPTI_LIB to its path", dlerror());
		return CRUX_ERR_UNSUPPORTED;
	}
	*(void **)&a.subscribe = dlsym(h, "cuptiSubscribe");
	*(void **)&a.unsubscribe = dlsym(h, "cuptiUnsubscribe");
	*(void **)&a.register_callbacks = dlsym(h, "cuptiActivityRegisterCallbacks");
	*(void **)&a.enable = dlsym(h, "cuptiActivityEnable");
	*(void **)&a.disable = dlsym(h, "cuptiActivityDisable");
	*(void **)&a.flush_all = dlsym(h, "cuptiActivityFlushAll");
	*(void **)&a.next_record = dlsym(h, "cuptiActivityGetNextRecord");
	*(void **)&a.timestamp = dlsym(h, "cuptiGetTimestamp");
	*(void **)&a.result_string = dlsym(h, "cuptiGetResultString");
	if (!a.subscribe || !a.unsubscribe || !a.register_callbacks || !a.enable || !a.disable ||
	    !a.flush_all || !a.next_record || !a.timestamp) {
		crux_warn("libcupti lacks the activity API functions");
		dlclose(h);
		return CRUX_ERR_UNSUPPORTED;
	}
	a.handle = h;
	*out = a;
	return CRUX_OK;
}

static const char *res_str(const struct cruxc_cupti_api *a, cruxc_cupti_res_t r)
{
	const char *s = NULL;

	if (a->result_string && a->result_string(r, &s) == CRUXC_CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}

static void noop_callback(void *userdata, int domain, uint32_t cbid, const void *cbdata)
{
	(void)userdata;
	(void)domain;
	(void)cbid;
	(void)cbdata;
}

static void sample_offset(struct cruxc_cupti *cu)
{
	uint64_t ts = 0, before = crux_now_ns(), after;

	if (cu->api.timestamp(&ts) != CRUXC_CUPTI_SUCCESS)
		return;
	after = crux_now_ns();
	cu->offset_ns = (int64_t)(before / 2 + after / 2) - (int64_t)ts;
}

void cruxc_cupti_free(struct cruxc_cupti *cu)
{
	if (!cu)
		return;
	if (cu->api.handle) {
		if (cu->sub) {
			cu->api.disable(CRUXC_CUPTI_KIND_CONCURRENT_KERNEL);
			cu->api.flush_all(0);
			cu->api.unsubscribe(cu->sub);
		}
		dlclose(cu->api.handle);
	}
	/* Only after unsubscribing: no callback can still be on its way to cu. */
	atomic_compare_exchange_strong(&cb_owner, &(struct cruxc_cupti *){cu}, NULL);
	pthread_mutex_destroy(&cu->lock);
	free(cu->buf_mem);
	free(cu->staging);
	free(cu);
}

crux_status_t cruxc_cupti_new(const char *lib, size_t staging_cap, struct cruxc_cupti **out)
{
	struct cruxc_cupti *cu = calloc(1, sizeof(*cu));
	cruxc_cupti_res_t r;
	crux_status_t st = CRUX_ERR_NOMEM;

	if (!cu)
		return CRUX_ERR_NOMEM;
	pthread_mutex_init(&cu->lock, NULL);
	cu->buf_size = CUPTI_BUF_SIZE;
	cu->buf_mem = aligned_alloc(8, (size_t)CRUXC_CUPTI_NBUF * CUPTI_BUF_SIZE);
	cu->staging = calloc(staging_cap, sizeof(*cu->staging));
	cu->cap = staging_cap;
	if (!cu->buf_mem || !cu->staging)
		goto fail;
	st = cruxc_cupti_load(lib, &cu->api);
	if (st != CRUX_OK)
		goto fail;
	/* Holding a subscription tells us (and later tools) the process is taken. */
	r = cu->api.subscribe(&cu->sub, noop_callback, NULL);
	if (r == CRUXC_CUPTI_MULTIPLE_SUBSCRIBERS) {
		crux_warn("another CUPTI client (a profiler such as torch.profiler or Nsight) "
			  "holds this process; backing off from CUPTI timing");
		cu->sub = NULL;
		st = CRUX_ERR_BUSY;
		goto fail;
	}
	if (r != CRUXC_CUPTI_SUCCESS) {
		crux_warn("cuptiSubscribe failed: %s", res_str(&cu->api, r));
		cu->sub = NULL;
		st = CRUX_ERR_UNSUPPORTED;
		goto fail;
	}
	/* CUPTI's buffer callbacks carry no user data: they find this instance here. */
	atomic_store(&cb_owner, cu);
	r = cu->api.register_callbacks(cruxc_cupti_buf_request, cruxc_cupti_buf_complete);
	if (r == CRUXC_CUPTI_SUCCESS)
		r = cu->api.enable(CRUXC_CUPTI_KIND_CONCURRENT_KERNEL);
	if (r != CRUXC_CUPTI_SUCCESS) {
		crux_warn("enabling CUPTI kernel activity failed: %s", res_str(&cu->api, r));
		st = CRUX_ERR_UNSUPPORTED;
		goto fail;
	}
	sample_offset(cu);
	*out = cu;
	return CRUX_OK;
fail:
	cruxc_cupti_free(cu);
	return st;
}

void cruxc_cupti_buf_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
	struct cruxc_cupti *cu = atomic_load(&cb_owner);

	*buffer = NULL;
	*size = 0;
	*max_records = 0;
	if (!cu)
		return;
	for (uint32_t i = 0; i < CRUXC_CUPTI_NBUF; i++) {
		uint32_t bit = 1u << i;

		if (atomic_fetch_or(&cu->buf_busy, bit) & bit)
			continue;
		*buffer = cu->buf_mem + (size_t)i * cu->buf_size;
		*size = cu->buf_size;
		return;
	}
	/* No buffer free: CUPTI drops records and counts them. */
	atomic_fetch_add(&cu->dropped, 1);
}

void cruxc_cupti_buf_complete(void *context, uint32_t stream_id, uint8_t *buffer, size_t size,
			      size_t valid_size)
{
	struct cruxc_cupti *cu = atomic_load(&cb_owner);
	void *rec = NULL;
	size_t idx;

	(void)context;
	(void)stream_id;
	(void)size;
	if (!cu || !buffer)
		return;
	pthread_mutex_lock(&cu->lock);
	while (cu->api.next_record(buffer, valid_size, &rec) == CRUXC_CUPTI_SUCCESS) {
		const struct cruxc_cupti_record *h = rec;
		const struct cruxc_cupti_kernel *k = rec;

		if (h->kind != CRUXC_CUPTI_KIND_CONCURRENT_KERNEL &&
		    h->kind != CRUXC_CUPTI_KIND_KERNEL)
			continue;
		atomic_fetch_add_explicit(&cu->kernels, 1, memory_order_relaxed);
		if (cu->staged == cu->cap || k->end < k->start) {
			atomic_fetch_add_explicit(&cu->dropped, 1, memory_order_relaxed);
			continue;
		}
		cu->staging[cu->staged++] = (struct cruxc_iv){
		    (uint64_t)((int64_t)k->start + cu->offset_ns),
		    (uint64_t)((int64_t)k->end + cu->offset_ns),
		    cruxc_is_nccl_kernel(k->name) ? CRUXC_IV_COMM : CRUXC_IV_COMPUTE, 0};
	}
	pthread_mutex_unlock(&cu->lock);
	idx = (size_t)(buffer - cu->buf_mem) / cu->buf_size;
	if (buffer >= cu->buf_mem && idx < CRUXC_CUPTI_NBUF)
		atomic_fetch_and(&cu->buf_busy, ~(1u << idx));
}

size_t cruxc_cupti_poll(struct cruxc_cupti *cu, struct cruxc_iv *out, size_t cap)
{
	size_t n;

	cu->api.flush_all(0);
	pthread_mutex_lock(&cu->lock);
	n = cu->staged < cap ? cu->staged : cap;
	memcpy(out, cu->staging, n * sizeof(*out));
	if (n < cu->staged)
		memmove(cu->staging, cu->staging + n, (cu->staged - n) * sizeof(*out));
	cu->staged -= n;
	pthread_mutex_unlock(&cu->lock);
	return n;
}
