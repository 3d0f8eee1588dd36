/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal: cruxd's promotion by measurement, replayed at the simulator's
 * event granularity (crux-sim policy "crux-full~B"). After each evaluation a
 * job measured above B x its isolated iteration time gains one level of lift
 * for the next event (aging: one more per event while above); a lifted job
 * below 0.7 B for its hold (1 event, doubled each time a return had to be
 * undone, at most 64) gives one back. The lag of one event stands for the
 * agent's measurement delay.
 */
#ifndef CRUX_SIM_PROMOTE_REPLAY_H
#define CRUX_SIM_PROMOTE_REPLAY_H

#include <stdint.h>

#include "crux/status.h"

struct sim_promote;

crux_status_t crux_sim_promote_new(struct sim_promote **out);
void crux_sim_promote_free(struct sim_promote *p);
/* Levels to add to the job's scheduled level. */
uint32_t crux_sim_promote_lift(const struct sim_promote *p, uint32_t id);
/* One measurement of the job; 'levels' bounds the lift (levels - 1). */
crux_status_t crux_sim_promote_update(struct sim_promote *p, uint32_t id, double slowdown,
				      double bound, uint32_t levels);

#endif
