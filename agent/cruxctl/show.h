/* SPDX-License-Identifier: Apache-2.0 */
/* What cruxctl shows: decision table, agent status, profile records. */
#ifndef CRUXCTL_SHOW_H
#define CRUXCTL_SHOW_H

#include <stdbool.h>
#include <stdio.h>

#include "crux/agent_status.h"
#include "crux/decision.h"
#include "crux/json.h"
#include "crux/probe.h"
#include "crux/profile.h"
#include "crux/profile_scan.h"

struct view {
	char dir[CRUX_PATH_MAX];
	uint64_t now_ns;
	crux_status_t table_st;
	struct crux_dt_contents *table;
	uint64_t table_hb_age_ns; /* UINT64_MAX: never */
	bool table_stale;
	crux_status_t agent_st;
	struct cruxd_status_body *agent;
	uint64_t agent_hb_age_ns;
	bool agent_alive;
	char table_err[512]; /* why the table could not be read (names the file and the fix) */
	crux_status_t scan_st;
	struct crux_prof_snapshot *recs;
	size_t nrecs, caprecs;
	struct crux_prof_scan_stats scan;
	/* The processes attached to a running cruxd (its copies in CRUX_SHM_DIR/attached). */
	struct crux_prof_snapshot *arecs;
	size_t narecs, caparecs;
};

crux_status_t view_load(struct view *v, const char *dir);
void view_free(struct view *v);
void view_text(const struct view *v, FILE *f, bool compact);
void view_json(const struct view *v, struct crux_json *j);

#endif
