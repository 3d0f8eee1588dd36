/* SPDX-License-Identifier: Apache-2.0 */
/* Decisions (agent_int.h): plan's and the cluster schedule's output, realise's and report's input.
 */
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"

void cruxd_decisions_free(struct cruxd_decisions *d)
{
	for (size_t i = 0; i < d->cap; i++) {
		free(d->v[i].routes);
		free(d->v[i].flows);
	}
	free(d->v);
	memset(d, 0, sizeof(*d));
}

struct cruxd_decision *cruxd_decision_new(struct cruxd_decisions *d)
{
	struct cruxd_decision *x;

	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 64;
		struct cruxd_decision *nv = realloc(d->v, nc * sizeof(*nv));
		if (!nv)
			return NULL;
		memset(nv + d->cap, 0, (nc - d->cap) * sizeof(*nv));
		d->v = nv;
		d->cap = nc;
	}
	x = &d->v[d->n++];
	struct cruxd_route *routes = x->routes;
	struct flow *flows = x->flows;
	uint32_t caproutes = x->caproutes, capflows = x->capflows;
	memset(x, 0, sizeof(*x));
	x->routes = routes;
	x->caproutes = caproutes;
	x->flows = flows;
	x->capflows = capflows;
	return x;
}

crux_status_t cruxd_decision_routes(struct cruxd_decision *x, uint32_t n)
{
	if (n > x->caproutes) {
		struct cruxd_route *nr = realloc(x->routes, n * sizeof(*nr));
		if (!nr)
			return CRUX_ERR_NOMEM;
		x->routes = nr;
		x->caproutes = n;
	}
	return CRUX_OK;
}

const struct cruxd_decision *cruxd_decision_of(const struct cruxd_decisions *d, uint64_t key)
{
	for (size_t i = d->nover; i < d->n; i++)
		if (d->v[i].key == key)
			return &d->v[i];
	return NULL;
}
