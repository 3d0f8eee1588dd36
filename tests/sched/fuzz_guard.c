/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the fairness guard's knobs (CRUX_MAX_SLOWDOWN, then
 * CRUX_LEVEL_WEIGHTS, one per line) and a jobs file after them, scheduled
 * with the bound and the weights on a fixed small Clos.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crux/sched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Copy the next line of [*p, end) into a NUL-terminated buffer (NULL: none). */
static char *take_line(const char **p, const char *end)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t len = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
	char *s;

	if (len > 4096 || !(s = malloc(len + 1)))
		return NULL;
	memcpy(s, *p, len);
	s[len] = '\0';
	*p += len + (nl ? 1 : 0);
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char topo[] = "host h0 h1 h2 h3\nswitch tor0 tor1 agg0 agg1\n"
				   "link h0 tor0 100\nlink h1 tor0 100\nlink h2 tor1 100\n"
				   "link h3 tor1 100\nlink tor0 agg0 100\nlink tor0 agg1 100\n"
				   "link tor1 agg0 100\nlink tor1 agg1 100\n";
	const char *p = (const char *)data, *end = p + size;
	char *bound = NULL, *weights = NULL;
	struct crux_sched_topo *t = NULL;
	struct crux_sched_jobs js;
	struct crux_sched_err err;
	struct crux_sched_schedule *s = NULL;
	struct crux_sched_params prm;

	if (size > 1 << 16)
		return 0;
	crux_sched_jobs_init(&js);
	crux_sched_params_default(&prm);
	prm.levels = 3;
	prm.orders = 2;
	bound = take_line(&p, end);
	weights = take_line(&p, end);
	if (!bound || !weights ||
	    crux_sched_slowdown_parse(bound, &prm.max_slowdown, &err) != CRUX_OK ||
	    crux_sched_weights_parse(weights, &prm, &err) != CRUX_OK)
		goto out;
	if (crux_sched_topo_parse(topo, sizeof(topo) - 1, "fuzz.topo", &t, &err) != CRUX_OK)
		goto out;
	if (crux_sched_jobs_parse(p, (size_t)(end - p), "fuzz.jobs", t, &js, &err) == CRUX_OK &&
	    js.n <= 32 && crux_sched_schedule_new(js.v, js.n, prm.levels, &s) == CRUX_OK) {
		crux_status_t st = crux_sched_run(t, js.v, js.n, &prm, CRUX_SCHED_CRUX_FULL, s);

		/* Weights that do not match the levels are refused, never used. */
		if (prm.n_weights && prm.n_weights != prm.levels && st == CRUX_OK)
			abort();
		crux_sched_schedule_free(s);
	}
out:
	crux_sched_jobs_free(&js);
	crux_sched_topo_free(t);
	free(bound);
	free(weights);
	return 0;
}
