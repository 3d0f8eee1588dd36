/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the fairness guard's knobs (CRUX_MAX_SLOWDOWN, then
 * CRUX_LEVEL_WEIGHTS, one per line) and a jobs file after them, scheduled
 * with the bound and the weights on a fixed small Clos. The job's id picks
 * its slowdown account's state (id mod 3: 0 protected, 1 urgent, 2 free),
 * so every input also runs the urgent and per-job bound paths.
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
		static const enum crux_sched_account_state by_id[3] = {CRUX_SCHED_ACCOUNT_PROTECTED,
								       CRUX_SCHED_ACCOUNT_URGENT,
								       CRUX_SCHED_ACCOUNT_FREE};
		crux_status_t st;

		for (size_t i = 0; i < js.n; i++) {
			struct crux_sched_account a;

			crux_sched_account_init(&a);
			a.state = by_id[js.v[i].id % 3];
			js.v[i].slowdown_bound = crux_sched_account_bound(&a, prm.max_slowdown);
			js.v[i].urgent = crux_sched_account_urgent(&a);
		}
		st = crux_sched_run(t, js.v, js.n, &prm, CRUX_SCHED_CRUX_FULL, s);

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
