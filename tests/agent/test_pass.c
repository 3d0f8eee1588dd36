/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pass's later stages as values (agent/core/src/agent_int.h): realise and
 * report take their ports from the one probe snapshot of the pass, so the
 * table and the status name the same ports even when the prober's live cache
 * holds something else (here: no prober at all), and report reads the
 * planner's decisions, not its job table (here: empty). Realise finds a
 * host's topology node from the hosts the planner's decisions carry, without
 * calling the planner.
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

/* A topology naming its hosts by name, not address: a host's node needs the
 * name the plan's view gave its address. */
static void test_plan_hosts_nodes(void **state)
{
	static const char topo[] = "host hA hB\n"
				   "switch leaf1 leaf2 s1 s2\n"
				   "link hA leaf1 10\nlink hB leaf2 10\n"
				   "link leaf1 s1 10\nlink leaf1 s2 10\n"
				   "link s1 leaf2 10\nlink s2 leaf2 10\n";
	struct cruxd_config cfg;
	struct cruxd_guard_config gc;
	struct cruxd_guard *guard;
	struct crux_sched_topo *t = NULL;
	struct crux_sched_err err;
	struct cruxd_planner *pl;
	struct cruxd_overrides ovr;
	struct cruxd_decisions plan;
	struct crux_job_view v;
	struct crux_jv_job *j;
	struct crux_addr ha = A("10.0.0.1"), hb = A("10.0.0.2"), other = A("10.0.0.9");
	int na, nb;

	(void)state;
	memset(&cfg, 0, sizeof(cfg));
	memset(&ovr, 0, sizeof(ovr));
	memset(&plan, 0, sizeof(plan));
	memset(&v, 0, sizeof(v));
	cfg.settings.nlevels = 4;
	cfg.profile_window_ns = 1000000000ull;
	cruxd_guard_config_default(&gc);
	assert_int_equal(cruxd_guard_new(&gc, &guard), CRUX_OK);
	assert_int_equal(crux_sched_topo_parse(topo, sizeof(topo) - 1, "test", &t, &err), CRUX_OK);
	assert_int_equal(cruxd_planner_new(&cfg, t, guard, &pl), CRUX_OK);

	j = crux_jv_new_job(&v);
	assert_non_null(j);
	j->key = crux_job_key_of("job-a");
	snprintf(j->id, sizeof(j->id), "job-a");
	j->nranks = 2;
	assert_int_equal(crux_jv_job_flow(j, &ha, &hb, 4096), CRUX_OK);
	v.hosts = calloc(2, sizeof(*v.hosts));
	assert_non_null(v.hosts);
	v.nhosts = v.caphosts = 2;
	v.hosts[0].addr = ha;
	snprintf(v.hosts[0].name, sizeof(v.hosts[0].name), "hA");
	v.hosts[1].addr = hb;
	snprintf(v.hosts[1].name, sizeof(v.hosts[1].name), "hB");

	/* Before any plan the decisions name no host: no node, no paths expected. */
	assert_int_equal(cruxd_topo_node(t, &hb, cruxd_hosts_name(&plan.hosts, &hb)), -1);

	assert_int_equal(cruxd_planner_take_view(pl, &v, 1), CRUX_OK);
	assert_int_equal(cruxd_planner_plan(pl, &ovr, 1, &plan), CRUX_OK);
	assert_int_equal(plan.hosts.n, 2);
	na = cruxd_topo_node(t, &ha, cruxd_hosts_name(&plan.hosts, &ha));
	nb = cruxd_topo_node(t, &hb, cruxd_hosts_name(&plan.hosts, &hb));
	assert_int_equal(na, crux_sched_topo_find(t, "hA"));
	assert_int_equal(nb, crux_sched_topo_find(t, "hB"));
	assert_true(na >= 0 && nb >= 0 && na != nb);
	assert_int_equal(cruxd_expected_paths(t, na, nb), 2);
	/* An address the view does not name, and a switch's name: no host node. */
	assert_int_equal(cruxd_topo_node(t, &other, cruxd_hosts_name(&plan.hosts, &other)), -1);
	assert_int_equal(cruxd_topo_node(t, &other, "s1"), -1);
	/* No topology (the single-host view): no node. */
	assert_int_equal(cruxd_topo_node(NULL, &ha, "hA"), -1);

	cruxd_decisions_free(&plan);
	crux_jv_free(&v);
	cruxd_planner_free(pl);
	crux_sched_topo_free(t);
	cruxd_guard_free(guard);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_snapshot_ports),
	    cmocka_unit_test(test_plan_hosts_nodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
