/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the jobs parser against a fixed small Clos, then a full schedule
 * and, for a few jobs, the reference model on it (ring steps included). */
#include <stddef.h>
#include <stdint.h>

#include "crux/sched.h"
#include "crux/sched_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char topo[] = "host h0 h1 h2 h3 h4\nswitch tor0 tor1 agg0 agg1\n"
				   "link h0 tor0 100\nlink h1 tor0 100\nlink h2 tor1 100\n"
				   "link h3 tor1 100\nlink tor0 agg0 100\nlink tor0 agg1 100\n"
				   "link tor1 agg0 100\nlink tor1 agg1 100 x2\n";
	struct crux_sched_topo *t = NULL;
	struct crux_sched_jobs js;
	struct crux_sched_err err;
	struct crux_sched_schedule *s = NULL;
	struct crux_sched_params p;

	if (size > 1 << 16)
		return 0;
	if (crux_sched_topo_parse(topo, sizeof(topo) - 1, "fuzz.topo", &t, &err) != CRUX_OK)
		return 0;
	crux_sched_jobs_init(&js);
	if (crux_sched_jobs_parse((const char *)data, size, "fuzz.jobs", t, &js, &err) == CRUX_OK &&
	    js.n <= 64 && crux_sched_schedule_new(js.v, js.n, 3, &s) == CRUX_OK) {
		crux_sched_params_default(&p);
		p.levels = 3;
		p.orders = 2;
		if (crux_sched_run(t, js.v, js.n, &p, CRUX_SCHED_CRUX_FULL, s) == CRUX_OK &&
		    js.n <= 8) {
			struct crux_sched_ref_params rp;
			double u;

			crux_sched_ref_params_default(&rp);
			rp.phases = 1;
			rp.max_events = 20000; /* bounded: many steps stop here */
			(void)crux_sched_reference(t, js.v, js.n, s, &rp, NULL, &u, NULL);
		}
		crux_sched_schedule_free(s);
	}
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
	return 0;
}
