/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Network sensitivity per job, for placement schedulers (issue 31): the stall
 * breakdown and bytes per iteration by host pair, from the agent's status or,
 * without an agent, from the profile records (placement.c).
 */
#ifndef CRUXCTL_PLACEMENT_H
#define CRUXCTL_PLACEMENT_H

#include <stdbool.h>
#include <stdio.h>

#include "show.h"

/* A job's stall breakdown: the agent's (aj non-NULL) or the mean over its records. */
void cc_job_stalls(const struct view *v, uint64_t key, const struct cruxd_status_job *aj,
		   struct crux_prof_stalls *out);
/* {"compute":..,"interconnect":..,"network":..|null,"other":..,"net_known":..} or null */
void cc_json_stalls(struct crux_json *j, const struct crux_prof_stalls *s);
/* "cmp 61% ic 4% net 30% oth 5%" (net "-" when unknown; "-" when invalid) */
void cc_fmt_stalls(const struct crux_prof_stalls *s, char *buf, size_t len);

/* cruxctl placement: the document (JSON) or a table (text) for the view. */
void cc_placement_json(const struct view *v, struct crux_json *j);
void cc_placement_text(const struct view *v, FILE *f);

#endif
