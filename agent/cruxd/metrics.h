/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cruxd's metrics endpoint (--metrics ADDR:PORT, CRUX_METRICS): an HTTP
 * thread (libmicrohttpd) serving GET /metrics from the snapshot the main
 * loop publishes after each pass. The snapshot is copied under a mutex: the
 * HTTP thread never reads the agent's own state.
 */
#ifndef CRUXD_METRICS_H
#define CRUXD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "crux/agent_status.h"
#include "crux/status.h"

struct cruxd_metrics;

/*
 * "PORT" (binds 127.0.0.1), "ADDR:PORT" or "[V6ADDR]:PORT". CRUX_ERR_INVAL
 * with a message for bad text; CRUX_ERR_UNSUPPORTED when cruxd was built
 * without libmicrohttpd.
 */
crux_status_t cruxd_metrics_start(const char *spec, uint64_t now_ns, struct cruxd_metrics **out,
				  char *err, size_t errlen);
/* After each pass: the status it published and whether the table changed. */
void cruxd_metrics_publish(struct cruxd_metrics *m, const struct cruxd_status_body *b,
			   uint64_t now_ns);
/* "http://ADDR:PORT/metrics" with the port actually bound. */
const char *cruxd_metrics_url(const struct cruxd_metrics *m);
void cruxd_metrics_stop(struct cruxd_metrics *m);

/* The address spec parser (also for the tests). */
crux_status_t cruxd_metrics_parse(const char *spec, char *host, size_t hostlen, uint16_t *port,
				  char *err, size_t errlen);

#endif
