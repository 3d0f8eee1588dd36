/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel activity records as the CUPTI double writes them: NVIDIA's
 * CUpti_ActivityKernel10 where the CUPTI headers are installed (so the
 * preload's own record declaration is tested against the real layout),
 * otherwise a record with the preload's declared prefix.
 */
#include <stdint.h>
#include <string.h>

#include "crux_config.h"
#if CRUX_HAVE_CUPTI_HEADERS
#include <cupti.h>
typedef CUpti_ActivityKernel10 fake_record_t;
#define REC(r) (r)
#else
#include "cuda_decl.h"
typedef struct {
	struct cruxc_cupti_kernel k;
	uint8_t tail[96];
} fake_record_t;
#define REC(r) (r).k
#endif

size_t fakecupti_record_size(void)
{
	return sizeof(fake_record_t);
}

void fakecupti_fill(void *dst, const char *name, uint64_t start, uint64_t end)
{
	fake_record_t r;

	memset(&r, 0, sizeof(r));
	REC(r).kind = 10; /* CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL */
	REC(r).start = start;
	REC(r).end = end;
	REC(r).name = name;
	memcpy(dst, &r, sizeof(r));
}
