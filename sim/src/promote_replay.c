/* SPDX-License-Identifier: Apache-2.0 */
/* Promotion by measurement at event granularity (see promote_replay.h). */
#include <stdlib.h>
#include <string.h>

#include "promote_replay.h"

#define RETURN_FRACTION 0.7 /* cruxd's default hysteresis */
#define MAX_HOLD	64

struct pent {
	uint32_t id; /* 0 = empty slot (trace ids start at 1) */
	uint8_t lift, hold, below, returned;
};

struct sim_promote {
	struct pent *tab;
	size_t cap, n;
};

crux_status_t crux_sim_promote_new(struct sim_promote **out)
{
	struct sim_promote *p = calloc(1, sizeof(*p));

	if (!p)
		return CRUX_ERR_NOMEM;
	p->cap = 1024;
	p->tab = calloc(p->cap, sizeof(*p->tab));
	if (!p->tab) {
		free(p);
		return CRUX_ERR_NOMEM;
	}
	*out = p;
	return CRUX_OK;
}

void crux_sim_promote_free(struct sim_promote *p)
{
	if (!p)
		return;
	free(p->tab);
	free(p);
}

static size_t slot_of(const struct sim_promote *p, uint32_t id)
{
	size_t i = (id * 2654435761u) & (p->cap - 1);

	while (p->tab[i].id && p->tab[i].id != id)
		i = (i + 1) & (p->cap - 1);
	return i;
}

uint32_t crux_sim_promote_lift(const struct sim_promote *p, uint32_t id)
{
	const struct pent *e = &p->tab[slot_of(p, id)];

	return e->id == id ? e->lift : 0;
}

static crux_status_t grow(struct sim_promote *p)
{
	struct sim_promote np = {calloc(p->cap * 2, sizeof(struct pent)), p->cap * 2, p->n};

	if (!np.tab)
		return CRUX_ERR_NOMEM;
	for (size_t i = 0; i < p->cap; i++)
		if (p->tab[i].id)
			np.tab[slot_of(&np, p->tab[i].id)] = p->tab[i];
	free(p->tab);
	*p = np;
	return CRUX_OK;
}

crux_status_t crux_sim_promote_update(struct sim_promote *p, uint32_t id, double slowdown,
				      double bound, uint32_t levels)
{
	struct pent *e;

	if (!id || !(slowdown > 0) || !(bound > 0))
		return CRUX_OK;
	if (2 * (p->n + 1) > p->cap && grow(p) != CRUX_OK)
		return CRUX_ERR_NOMEM;
	e = &p->tab[slot_of(p, id)];
	if (e->id != id) {
		memset(e, 0, sizeof(*e));
		e->id = id;
		e->hold = 1;
		p->n++;
	}
	if (slowdown > bound) {
		e->below = 0;
		if (e->lift + 1u < levels) {
			if (e->returned && e->hold < MAX_HOLD)
				e->hold *= 2; /* it needed the lift after all */
			e->returned = 0;
			e->lift++;
		}
		return CRUX_OK;
	}
	if (e->lift && slowdown < RETURN_FRACTION * bound && ++e->below >= e->hold) {
		e->lift--;
		e->returned = 1;
		e->below = 0;
	}
	return CRUX_OK;
}
