/* SPDX-License-Identifier: Apache-2.0 */
/* The host job view <-> the cluster record (cluster.c; the unit tests use it). */
#ifndef CRUXD_CLUSTER_INT_H
#define CRUXD_CLUSTER_INT_H

#include "agent_int.h"
#include "crux/cluster_view.h"

/* v as host 'name''s record: the same counts, sums, hosts and flows. */
crux_status_t cruxd_view_to_cv(const struct cruxd_view *v, const char *name,
			       struct crux_cv_host *h);
/* A (merged) record as a view, sorted; its hosts known by address only. */
crux_status_t cruxd_view_from_cv(const struct crux_cv_host *m, struct cruxd_view *v);

#endif /* CRUXD_CLUSTER_INT_H */
