/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decision table's writer (libcrux-agentside: cruxd; cruxctl set/clear
 * when no agent runs). The training processes' libraries read the table
 * (crux/decision.h) and never link this.
 */
#ifndef CRUX_DECISION_WRITER_H
#define CRUX_DECISION_WRITER_H

#include <sys/types.h>

#include "crux/decision.h"

#ifdef __cplusplus
extern "C" {
#endif

struct crux_dt_writer;

/*
 * Take ownership of the table: create it (mode 0644) with 'settings' if
 * absent, or open the existing one keeping its entries (restart stability;
 * its settings are replaced by 'settings'). A corrupt or foreign file is
 * replaced with a logged warning. CRUX_ERR_BUSY when another process holds
 * it; *holder_pid (may be NULL) then names it.
 */
crux_status_t crux_dt_writer_open(const char *dir, const struct crux_dt_settings *settings,
				  struct crux_dt_writer **out, pid_t *holder_pid);

/* Read back the current entries (e.g. after a restart). */
crux_status_t crux_dt_writer_read(const struct crux_dt_writer *w, struct crux_dt_contents *out);

/*
 * Publish a full set of jobs and routes (replacing the old) and bump the
 * generation. CRUX_ERR_RANGE when there are too many; CRUX_ERR_INVAL for a
 * level >= nlevels or a bad route. The old contents stay on error.
 */
crux_status_t crux_dt_publish(struct crux_dt_writer *w, const struct crux_dt_job *jobs,
			      uint32_t njobs, const struct crux_dt_route *routes, uint32_t nroutes);

/* Replace settings (levels map) and bump the generation. */
crux_status_t crux_dt_set_settings(struct crux_dt_writer *w, const struct crux_dt_settings *s);

/* Refresh the heartbeat to now. */
void crux_dt_heartbeat(struct crux_dt_writer *w);

/* Release ownership; the table stays valid for readers. */
void crux_dt_writer_close(struct crux_dt_writer *w);

/* As above, with the message in 'err' instead of a log line. */
crux_status_t crux_dt_writer_open_ex(const char *dir, const struct crux_dt_settings *settings,
				     struct crux_dt_writer **out, pid_t *holder_pid, char *err,
				     size_t errlen);
crux_status_t crux_dt_publish_ex(struct crux_dt_writer *w, const struct crux_dt_job *jobs,
				 uint32_t njobs, const struct crux_dt_route *routes,
				 uint32_t nroutes, char *err, size_t errlen);

/*
 * Contract v2: the agent's table lives in a sealed memfd (CRUX_SEALS_TABLE)
 * that cruxd hands to every attached process (crux/attach.h). The writer
 * keeps the only writable mapping; nobody can resize it.
 */
crux_status_t crux_dt_writer_open_memfd(const struct crux_dt_settings *settings,
					struct crux_dt_writer **out, char *err, size_t errlen);
/*
 * cruxd's (and cruxctl's) writer: the table lives in a sealed memfd; the
 * file 'dir'/decision.tbl is opened, locked (flock, as crux_dt_writer_open_ex)
 * and read with pread to adopt its entries, then only written (pwrite),
 * never mapped, so nothing done to the file can fault the writer. A missing
 * or unusable file is replaced by a whole new one, locked before it is
 * published. A removed, replaced or resized file is rewritten whole on the
 * next publish or heartbeat.
 */
crux_status_t crux_dt_writer_open_shadow(const char *dir, const struct crux_dt_settings *settings,
					 struct crux_dt_writer **out, pid_t *holder_pid, char *err,
					 size_t errlen);
/* The writer's descriptor (to pass by SCM_RIGHTS); still owned by the writer. */
int crux_dt_writer_fd(const struct crux_dt_writer *w);

#ifdef __cplusplus
}
#endif

#endif /* CRUX_DECISION_WRITER_H */
