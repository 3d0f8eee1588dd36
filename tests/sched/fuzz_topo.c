/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the topology text parser, then path enumeration on the result. */
#include <stddef.h>
#include <stdint.h>

#include "crux/sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct crux_sched_topo *t = NULL;
	struct crux_sched_err err;

	if (size > 1 << 16)
		return 0;
	if (crux_sched_topo_parse((const char *)data, size, "fuzz", &t, &err) != CRUX_OK)
		return 0;
	int n = crux_sched_topo_n_hosts(t);

	/* A few pairs: enough to walk the explicit and the derived paths. */
	for (int a = 0; a < n && a < 6; a++) {
		for (int b = 0; b < n && b < 6; b++) {
			struct crux_sched_path_set ps;

			if (a != b && crux_sched_topo_paths(t, a, b, &ps) == CRUX_OK) {
				for (int p = 0; p < ps.n_paths; p++)
					for (int k = ps.off[p]; k < ps.off[p + 1]; k++)
						(void)crux_sched_topo_link(t, ps.links[k], NULL,
									   NULL, NULL);
			}
		}
	}
	crux_sched_topo_free(t);
	return 0;
}
