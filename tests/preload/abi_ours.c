/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "abi.h"
#include "crux/nccl_api.h"
#include "cuda_decl.h"

void abi_facts_ours(struct abi_facts *f)
{
	memset(f, 0, sizeof(*f));
#include "abi_facts.inc"
	f->kernel_off[0] = offsetof(struct cruxc_cupti_kernel, kind);
	f->kernel_off[1] = offsetof(struct cruxc_cupti_kernel, start);
	f->kernel_off[2] = offsetof(struct cruxc_cupti_kernel, end);
	f->kernel_off[3] = offsetof(struct cruxc_cupti_kernel, name);
}
