/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pass's later stages as values (agent/core/src/agent_int.h): realise and
 * report take their ports from the one probe snapshot of the pass, so the
 * table and the status name the same ports even when the prober's live cache
 * holds something else (here: no prober at all), and report reads the
 * planner's decisions, not its job table (here: empty).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent_int.h"

static struct crux_addr A(const char *s) {
	struct crux_addr a;
	assert_int_equal(crux_addr_parse(s, &a), CRUX_OK);
	return a;
}

static void
test_snapshot_ports(void **state)
{
	struct cruxd_agent *a = calloc(1, sizeof(*a));
	struct cruxd_guard_config gc;
	struct cruxd_pass *p;
	struct cruxd_decision *d;
	struct flow fl = {.src = A("10.0.0.1"),
			  .dst = A("10.0.0.2"),
			  .bytes = 4096,
			  .path = 1,
			  .src_node = -1,
			  .dst_node = -1};

	(void)state;
	assert_non_null(a);
	p = &a->pass;
	a->cfg.settings.nlevels = 4;
	a->cfg.profile_window_ns = 1000000000ull;
	a->status = calloc(1, sizeof(*a->status));
	assert_non_null(a->status);
	cruxd_guard_config_default(&gc);
	assert_int_equal(cruxd_guard_new(&gc, &a->guard), CRUX_OK);
	assert_int_equal(cruxd_rows_open(&p->rows), CRUX_OK);
	assert_int_equal(cruxd_snap_open(&p->probe, true), CRUX_OK);

	/* One scheduled job sending to 10.0.0.2 on the scheduler's path 1. */
	p->plan.valid = true;
	d = cruxd_decision_new(&p->plan);
	assert_non_null(d);
	d->key = crux_job_key_of("job-a");
	snprintf(d->id, sizeof(d->id), "job-a");
	d->state = CRUX_JOB_SCHEDULED;
	d->level = 2;
	d->decided = true;
	d->from = CRUXD_ROUTES_PLANNED;
	d->flows = malloc(sizeof(*d->flows));
	assert_non_null(d->flows);
	d->flows[0] = fl;
	d->nflows = d->capflows = 1;

	/* The snapshot: two probed paths to the peer, the second with 3 ports. */
	p->probe.n = 1;
	memset(&p->probe.e[0], 0, sizeof(p->probe.e[0]));
	p->probe.e[0].peer = fl.dst;
	p->probe.e[0].state = CRUXD_PROBE_OK;
	p->probe.e[0].result.npaths = 2;
	p->probe.e[0].result.paths[0].nports = 1;
	p->probe.e[0].result.paths[0].ports[0] = 40001;
	p->probe.e[0].result.paths[1].nports = 3;
	for (int i = 0; i < 3; i++)
		p->probe.e[0].result.paths[1].ports[i] = (uint16_t)(40100 + i);

	cruxd_realise(a, &p->plan, &p->probe, &p->rows);
	assert_int_equal(p->rows.njobs, 1);
	assert_int_equal(p->rows.jobs[0].level, 2);
	assert_int_equal(p->rows.nroutes, 1);
	assert_int_equal(p->rows.routes[0].path_id, 1);
	assert_int_equal(p->rows.routes[0].nports, 3);
	assert_int_equal(p->rows.routes[0].ports[2], 40102);

	cruxd_report(a, p, 0);
	assert_int_equal(a->status->njobs, 1);
	assert_int_equal(a->status->jobs[0].npaths, 1);
	assert_int_equal(a->status->jobs[0].paths[0].nports, p->rows.routes[0].nports);
	assert_int_equal(a->status->npeers, 1);
	assert_int_equal(a->status->peers[0].paths[1].nports, 3);

	/* A path the snapshot does not know: no route, and no ports in the status. */
	d->flows[0].path = 5;
	cruxd_realise(a, &p->plan, &p->probe, &p->rows);
	assert_int_equal(p->rows.nroutes, 0);
	cruxd_report(a, p, 0);
	assert_int_equal(a->status->jobs[0].paths[0].nports, 0);

	cruxd_decisions_free(&p->plan);
	cruxd_snap_close(&p->probe);
	cruxd_rows_close(&p->rows);
	cruxd_guard_free(a->guard);
	free(a->status);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_snapshot_ports),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
