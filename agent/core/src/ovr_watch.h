/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The overrides file as the agent watches it (crux/overrides.h is its
 * format): loaded at start, looked at again every pass (a new file is taken
 * whole or refused whole, the previous overrides kept), and the overrides a
 * restarted agent finds in the decision table written back to it.
 */
#ifndef CRUXD_OVR_WATCH_H
#define CRUXD_OVR_WATCH_H

#include <stdbool.h>

#include "crux/agent_status.h"
#include "crux/overrides.h"

struct cruxd_ovr_watch;

/* Load the file in shm_dir (none: no overrides; refused: none, the reason reported). */
crux_status_t cruxd_ovr_watch_open(const char *shm_dir, struct cruxd_ovr_watch **out);
void cruxd_ovr_watch_close(struct cruxd_ovr_watch *w);

/* Look at the file again: the overrides in force (valid until the next
 * check); *changed: they changed (taken, or cleared). */
const struct cruxd_overrides *cruxd_ovr_watch_check(struct cruxd_ovr_watch *w, uint32_t nlevels,
						    bool *changed);
/* The overrides in force. */
const struct cruxd_overrides *cruxd_ovr_watch_get(const struct cruxd_ovr_watch *w);
bool cruxd_ovr_watch_has(const struct cruxd_ovr_watch *w, uint64_t job_key);

/* An override found in the decision table at start-up; then store() writes the file. */
crux_status_t cruxd_ovr_watch_keep(struct cruxd_ovr_watch *w, const struct cruxd_override *o);
void cruxd_ovr_watch_store(struct cruxd_ovr_watch *w);

/* The status's overrides: the sequence applied, why the last file was refused. */
void cruxd_ovr_watch_report(const struct cruxd_ovr_watch *w, struct cruxd_status_body *b);

#endif /* CRUXD_OVR_WATCH_H */
