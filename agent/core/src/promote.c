/* SPDX-License-Identifier: Apache-2.0 */
/* cruxd's fairness guard: promotion by measured slowdown (see crux/guard.h). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "crux/guard.h"

#define SEC 1000000000ull

struct gjob {
	uint64_t key;
	double ewma;	     /* smoothed slowdown; 0 before the first sample */
	uint64_t seen_ns;    /* last sample */
	uint64_t above_ns;   /* since when above the bound; 0 = not above */
	uint64_t below_ns;   /* since when below the return threshold; 0 = not below */
	uint64_t changed_ns; /* last lift change */
	uint64_t hold_ns;    /* current hold time before a return */
	uint32_t lift;
	bool returned; /* the last change was a return (a new lift doubles hold) */
};

struct cruxd_guard {
	struct cruxd_guard_config cfg;
	struct gjob *v;
	size_t n, cap;
	uint64_t changes;
	uint64_t window_ns; /* start of the current rate window */
	uint32_t window_changes;
};

void cruxd_guard_config_default(struct cruxd_guard_config *c)
{
	c->bound = 0;
	c->alpha = 0.2;
	c->hysteresis = 0.7;
	c->age_ns = 10 * SEC;
	c->hold_ns = 60 * SEC;
	c->max_hold_ns = 600 * SEC;
	c->min_gap_ns = 5 * SEC;
	c->max_changes = 4;
}

crux_status_t cruxd_guard_new(const struct cruxd_guard_config *c, struct cruxd_guard **out)
{
	struct cruxd_guard *g = calloc(1, sizeof(*g));

	if (!g)
		return CRUX_ERR_NOMEM;
	g->cfg = *c;
	*out = g;
	return CRUX_OK;
}

void cruxd_guard_free(struct cruxd_guard *g)
{
	if (!g)
		return;
	free(g->v);
	free(g);
}

void cruxd_guard_configure(struct cruxd_guard *g, const struct cruxd_guard_config *c)
{
	g->cfg = *c;
	if (!(c->bound > 0))
		for (size_t i = 0; i < g->n; i++)
			g->v[i].lift = 0; /* guard off: nobody keeps a lift */
}

static struct gjob *find(const struct cruxd_guard *g, uint64_t key)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->v[i].key == key)
			return &g->v[i];
	return NULL;
}

static struct gjob *get(struct cruxd_guard *g, uint64_t key)
{
	struct gjob *j = find(g, key);

	if (j)
		return j;
	if (g->n == g->cap) {
		size_t nc = g->cap ? 2 * g->cap : 16;
		struct gjob *nv = realloc(g->v, nc * sizeof(*nv));

		if (!nv)
			return NULL;
		g->v = nv;
		g->cap = nc;
	}
	j = &g->v[g->n++];
	memset(j, 0, sizeof(*j));
	j->key = key;
	j->hold_ns = g->cfg.hold_ns;
	return j;
}

/* The global rate bound: max_changes per min_gap_ns window. */
static bool rate_ok(struct cruxd_guard *g, uint64_t now)
{
	if (now - g->window_ns >= g->cfg.min_gap_ns || g->window_ns == 0) {
		g->window_ns = now;
		g->window_changes = 0;
	}
	return g->window_changes < g->cfg.max_changes;
}

/* A change restarts the measurement: samples before it describe the old level. */
static void changed(struct cruxd_guard *g, struct gjob *j, uint64_t now)
{
	j->ewma = 0;
	j->above_ns = 0;
	j->below_ns = 0;
	j->changed_ns = now;
	g->window_changes++;
	g->changes++;
}

bool cruxd_guard_observe(struct cruxd_guard *g, uint64_t key, double slowdown, uint64_t now,
			 uint32_t nlevels)
{
	const struct cruxd_guard_config *c = &g->cfg;
	struct gjob *j;

	if (!(c->bound > 0) || !isfinite(slowdown) || !(slowdown > 0) || now == 0)
		return false;
	j = get(g, key);
	if (!j)
		return false;
	j->seen_ns = now;
	j->ewma = j->ewma > 0 ? (1 - c->alpha) * j->ewma + c->alpha * slowdown : slowdown;
	/* Timers: how long above the bound, how long below the return threshold. */
	if (j->ewma > c->bound) {
		if (!j->above_ns)
			j->above_ns = now;
	} else {
		j->above_ns = 0;
	}
	if (j->ewma < c->hysteresis * c->bound) {
		if (!j->below_ns)
			j->below_ns = now;
	} else {
		j->below_ns = 0;
	}
	bool gap_ok = j->changed_ns == 0 || now - j->changed_ns >= c->min_gap_ns;

	if (!gap_ok)
		return false;
	if (j->above_ns && now - j->above_ns >= c->age_ns && j->lift + 1 < nlevels &&
	    rate_ok(g, now)) {
		if (j->returned) {
			/* It needed the lift after all: keep the next one longer. */
			j->hold_ns =
			    j->hold_ns * 2 < c->max_hold_ns ? j->hold_ns * 2 : c->max_hold_ns;
			j->returned = false;
		}
		j->lift++; /* aging: another age_ns above gives the next level */
		changed(g, j, now);
		return true;
	}
	if (j->lift > 0 && j->below_ns && now - j->below_ns >= j->hold_ns && rate_ok(g, now)) {
		j->lift--;
		j->returned = true;
		changed(g, j, now);
		return true;
	}
	return false;
}

uint32_t cruxd_guard_lift(const struct cruxd_guard *g, uint64_t key)
{
	const struct gjob *j = find(g, key);

	return j && g->cfg.bound > 0 ? j->lift : 0;
}

double cruxd_guard_slowdown(const struct cruxd_guard *g, uint64_t key)
{
	const struct gjob *j = find(g, key);

	return j ? j->ewma : 0;
}

void cruxd_guard_prune(struct cruxd_guard *g, uint64_t now, uint64_t keep_ns)
{
	size_t k = 0;

	for (size_t i = 0; i < g->n; i++)
		if (now - g->v[i].seen_ns <= keep_ns)
			g->v[k++] = g->v[i];
	g->n = k;
}

uint64_t cruxd_guard_changes(const struct cruxd_guard *g)
{
	return g->changes;
}
