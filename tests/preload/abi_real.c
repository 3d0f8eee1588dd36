/* SPDX-License-Identifier: Apache-2.0 */
/* The same facts from NVIDIA's own headers (built only where they exist). */
#include <string.h>

#include <cupti.h>
#include <nccl.h>

#include "abi.h"

void abi_facts_real(struct abi_facts *f)
{
	memset(f, 0, sizeof(*f));
#include "abi_facts.inc"
	f->kernel_off[0] = offsetof(CUpti_ActivityKernel10, kind);
	f->kernel_off[1] = offsetof(CUpti_ActivityKernel10, start);
	f->kernel_off[2] = offsetof(CUpti_ActivityKernel10, end);
	f->kernel_off[3] = offsetof(CUpti_ActivityKernel10, name);
}
