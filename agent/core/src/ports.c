/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One probe snapshot per pass (agent_int.h): the prober's results copied once,
 * so the table realise publishes and the status report name the same ports.
 * A scheduler's path becomes the source ports the prober found for it.
 */
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"

crux_status_t cruxd_snap_open(struct cruxd_probe_snap *s, bool probing)
{
	memset(s, 0, sizeof(*s));
	if (!probing)
		return CRUX_OK;
	s->e = calloc(CRUXD_PROBE_MAX_PEERS, sizeof(*s->e));
	return s->e ? CRUX_OK : CRUX_ERR_NOMEM;
}

void cruxd_snap_close(struct cruxd_probe_snap *s)
{
	free(s->e);
	memset(s, 0, sizeof(*s));
}

void cruxd_snap_take(struct cruxd_probe_snap *s, struct cruxd_probe_cache *c)
{
	s->n = c && s->e ? cruxd_probe_cache_list(c, s->e, CRUXD_PROBE_MAX_PEERS) : 0;
}

static const struct cruxd_probe_entry *snap_find(const struct cruxd_probe_snap *s,
						 const struct crux_addr *peer)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (crux_addr_equal(&s->e[i].peer, peer))
			return &s->e[i];
	return NULL;
}

/*
 * Which probed path realises the scheduler's candidate 'idx' from src to dst?
 * The probe names a path by the router 'hops' links away. When that switch
 * is named by one of its addresses in the topology, match exactly; else
 * match the k-th distinct switch at that depth (candidate order) with the
 * k-th probed path (ascending address), if the counts agree.
 */
static int probe_index(struct crux_sched_topo *topo, int hops, int src, int dst, int idx,
		       const struct cruxd_probe_result *r)
{
	struct crux_sched_path_set ps;
	int want = -1, distinct[CRUXD_PROBE_MAX_PATHS], nd = 0, pos = -1;

	if (idx < 0)
		return -1;
	if (!topo || src < 0 || dst < 0)
		return idx < (int)r->npaths ? idx : -1;
	if (crux_sched_topo_paths(topo, src, dst, &ps) != CRUX_OK || idx >= ps.n_paths)
		return -1;
	for (int c = 0; c < ps.n_paths; c++) {
		int from, to, node;
		double bw;
		bool seen = false;

		if (ps.off[c + 1] - ps.off[c] < hops + 1)
			return -1; /* the probe would reach the peer on this path */
		if (crux_sched_topo_link(topo, ps.links[ps.off[c] + hops - 1], &from, &to, &bw) !=
		    CRUX_OK)
			return -1;
		node = to;
		if (c == idx) {
			struct crux_addr ad;
			want = node;
			if (crux_addr_parse(crux_sched_topo_node_name(topo, node), &ad) == CRUX_OK)
				return cruxd_probe_find_path(r, &ad);
		}
		for (int q = 0; q < nd; q++)
			seen |= distinct[q] == node;
		if (!seen) {
			if (nd == CRUXD_PROBE_MAX_PATHS)
				return -1;
			distinct[nd++] = node;
		}
	}
	for (int q = 0; q < nd; q++)
		if (distinct[q] == want)
			pos = q;
	return nd == (int)r->npaths ? pos : -1;
}

bool cruxd_snap_ports(const struct cruxd_probe_snap *s, struct crux_sched_topo *topo, int hops,
		      int src_node, const struct crux_addr *dst, int dst_node, int idx,
		      struct crux_dt_route *rt)
{
	const struct cruxd_probe_entry *e = snap_find(s, dst);
	int pi;

	if (!e || e->state != CRUXD_PROBE_OK)
		return false;
	pi = probe_index(topo, hops, src_node, dst_node, idx, &e->result);
	if (pi < 0 || !e->result.paths[pi].nports)
		return false;
	rt->nports = e->result.paths[pi].nports;
	memcpy(rt->ports, e->result.paths[pi].ports, sizeof(rt->ports));
	return true;
}

int cruxd_expected_paths(struct crux_sched_topo *topo, int src, int dst)
{
	struct crux_sched_path_set ps;

	if (!topo || src < 0 || dst < 0 || crux_sched_topo_paths(topo, src, dst, &ps) != CRUX_OK)
		return 0;
	return ps.n_paths;
}
