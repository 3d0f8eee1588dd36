/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The background engine (bg.c) as its owner (life.c) drives it: one engine
 * per process context, run on its own thread by cruxp_bg_main until the
 * context's stop flag is set.
 */
#ifndef CRUXP_BG_H
#define CRUXP_BG_H

#include <stdint.h>

#include "crux/status.h"

/* Busy intervals the engine and the CUPTI staging area hold at most. */
#define CRUXP_IV_CAP (1u << 17)

struct cruxp_bg;

crux_status_t cruxp_bg_new(struct cruxp_bg **out);
void cruxp_bg_free(struct cruxp_bg *bg);
/* The first publishing window starts at 'now'. */
void cruxp_bg_start_window(struct cruxp_bg *bg, uint64_t now);
/* Thread body: drains, detects, accounts and publishes until stop. */
void *cruxp_bg_main(void *arg);
/* Drop the engine's handle on the profile record (stop, or a forked child). */
void cruxp_bg_close_record(struct cruxp_bg *bg);

#endif /* CRUXP_BG_H */
