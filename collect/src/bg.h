/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The background engine (bg.c) as its owner (life.c) drives it: one engine
 * per process context, run on its own thread by cruxc_bg_main until the
 * context's stop flag is set.
 */
#ifndef CRUXC_BG_H
#define CRUXC_BG_H

#include <stdint.h>

#include "crux/status.h"

/* Busy intervals the engine and the CUPTI staging area hold at most. */
#define CRUXC_IV_CAP (1u << 17)

struct cruxc_bg;

crux_status_t cruxc_bg_new(struct cruxc_bg **out);
void cruxc_bg_free(struct cruxc_bg *bg);
/* The first publishing window starts at 'now'. */
void cruxc_bg_start_window(struct cruxc_bg *bg, uint64_t now);
/* Thread body: drains, detects, accounts and publishes until stop. */
void *cruxc_bg_main(void *arg);
/* Drop the engine's handle on the profile record (stop, or a forked child). */
void cruxc_bg_close_record(struct cruxc_bg *bg);

#endif /* CRUXC_BG_H */
