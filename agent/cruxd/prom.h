/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd's metrics in the Prometheus text exposition format (version 0.0.4):
 * rendered from a snapshot of the status the agent publishes after each pass,
 * so the HTTP thread never touches the agent's own state.
 */
#ifndef CRUXD_PROM_H
#define CRUXD_PROM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "crux/agent_status.h"
#include "crux/status.h"

struct cruxd_prom_snapshot {
	struct cruxd_status_body body;
	uint64_t published_ns; /* CLOCK_MONOTONIC of the pass that produced body; 0 = none */
	uint64_t schedule_ns;  /* when the decision table last changed; 0 = never */
	uint64_t started_ns;   /* agent start */
};

/* Text for 'snap' at 'now_ns' into a malloc'd buffer (*text, NUL-terminated). */
crux_status_t cruxd_prom_render(const struct cruxd_prom_snapshot *snap, uint64_t now_ns,
				char **text, size_t *len);

/* Writes s escaped as a label value (backslash, quote, newline) to f. */
void cruxd_prom_put_label(FILE *f, const char *s);

#endif
