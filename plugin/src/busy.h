/* SPDX-License-Identifier: Apache-2.0 */
/* Busy time of the plugin (busy.c): transfers in flight, for the stall breakdown. */
#ifndef CRUXN_BUSY_H
#define CRUXN_BUSY_H

#include <stdbool.h>
#include <stdint.h>

#include "crux/profile.h"

/* A transfer was posted / completed (or abandoned) at 'now' (crux_now_ns). */
void cruxn_busy_begin_at(uint64_t now);
void cruxn_busy_end_at(uint64_t now);
void cruxn_busy_begin(void);
void cruxn_busy_end(void);
/* Per request: counts once while *flag is set (the request's own flag). */
void cruxn_busy_req_begin(bool *flag);
void cruxn_busy_req_end(bool *flag);
/* Cumulative busy time up to 'now', the open interval included. */
uint64_t cruxn_busy_total_at(uint64_t now);
/*
 * Publisher: the cumulative busy time at 'now', and the busy time over the
 * last period of at least period_ns covered by the samples (shorter while
 * the plugin is young); records a sample. One caller at a time.
 */
void cruxn_busy_sample(uint64_t now, uint64_t period_ns, uint64_t *total, uint64_t *window,
		       uint64_t *in_window);
/*
 * Publisher: cruxn_busy_sample into net's busy fields, and the history
 * (samples at least period_ns / CRUX_PROF_BUSY_SAMPLES apart, oldest first,
 * ending at 'now') into net->busy_hist.
 */
void cruxn_busy_publish(uint64_t now, uint64_t period_ns, struct crux_prof_net *net);
/* Forget everything (tests). */
void cruxn_busy_reset(void);

#endif
