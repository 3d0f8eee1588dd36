/* SPDX-License-Identifier: Apache-2.0 */
/* Facts about an NCCL/CUPTI declaration set, gathered in separate translation units. */
#ifndef CRUXP_TEST_ABI_H
#define CRUXP_TEST_ABI_H

#include <stddef.h>

struct abi_facts {
	size_t unique_id_size;
	size_t config_size;
	size_t config_off[17];
	size_t result_size, dtype_size, redop_size;
	long results[9];
	long dtypes[13];
	long redops[7];
	long split_nocolor;
	long undef_int;
	size_t kernel_off[4]; /* kind, start, end, name of a CUPTI kernel record */
};

void abi_facts_ours(struct abi_facts *f);
void abi_facts_real(struct abi_facts *f);

#endif
