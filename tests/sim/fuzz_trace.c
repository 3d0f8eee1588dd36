/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the crux-sim trace parser. Whatever it accepts must write
 * back out and parse again to the same jobs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crux/sim_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct crux_sim_trace *t = NULL, *u = NULL;
	char err[512];
	char *buf = NULL;
	size_t len = 0;

	if (crux_sim_trace_parse((const char *)data, size, "fuzz", &t, err, sizeof(err)) != CRUX_OK)
		return 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		abort();
	if (crux_sim_trace_write(f, t) != CRUX_OK)
		abort();
	fclose(f);
	if (crux_sim_trace_parse(buf, len, "fuzz-rt", &u, err, sizeof(err)) != CRUX_OK)
		abort(); /* the writer produced something the parser refuses */
	if (u->n_jobs != t->n_jobs)
		abort();
	for (size_t i = 0; i < t->n_jobs; i++) {
		const struct crux_sim_trace_job *a = &t->jobs[i], *b = &u->jobs[i];
		if (a->id != b->id || a->gpus != b->gpus || a->iterations != b->iterations ||
		    a->arrival_s != b->arrival_s || a->compute_s != b->compute_s ||
		    a->comm_bytes != b->comm_bytes || a->overlap != b->overlap ||
		    a->n_hosts != b->n_hosts || strcmp(a->model, b->model) != 0)
			abort();
		for (uint32_t h = 0; h < a->n_hosts; h++)
			if (a->hosts[h] != b->hosts[h])
				abort();
	}
	free(buf);
	crux_sim_trace_free(t);
	crux_sim_trace_free(u);
	return 0;
}
