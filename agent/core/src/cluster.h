/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cluster mode (cruxd --etcd URL --cluster NAME): this host's node of the
 * cluster (crux/cluster_node.h). Every pass hands it this host's job view;
 * on the leader it runs the planner on the merged view and writes the
 * schedule; on every host it turns the schedule applied into this host's
 * decisions. cluster_none.c answers when cruxd is built without libcurl or
 * json-c. The calls that take a NULL handle (single-host mode) do nothing.
 *
 * It borrows the agent's configuration and planner, and writes the leader's
 * decisions into 'plan' (the agent's pass): they outlive it.
 */
#ifndef CRUXD_CLUSTER_H
#define CRUXD_CLUSTER_H

#include "crux/agent_status.h"
#include "planner.h"

struct cruxd_cluster;

/* Join: 'local' is this host's overrides file as the agent found it (taken as written). */
crux_status_t cruxd_cluster_open(const struct cruxd_config *cfg, struct cruxd_planner *pl,
				 const struct cruxd_overrides *local, struct cruxd_decisions *plan,
				 struct cruxd_cluster **out, char *err, size_t errlen);
void cruxd_cluster_close(struct cruxd_cluster *cl);

/* Publish this host's view (named and addressed here); one round of the node. */
void cruxd_cluster_pass(struct cruxd_cluster *cl, struct crux_job_view *v, uint64_t now);
/* The schedule the watcher took since the pass, applied now (true: one was). */
bool cruxd_cluster_apply_received(struct cruxd_cluster *cl);
int cruxd_cluster_wake_fd(const struct cruxd_cluster *cl);
/* The applied schedule as this host's decisions (out->valid false: no schedule yet). */
crux_status_t cruxd_cluster_decide(struct cruxd_cluster *cl, const struct crux_job_view *v,
				   struct cruxd_decisions *out);
void cruxd_cluster_report(struct cruxd_cluster *cl, struct cruxd_status_body *b);
/* This host's overrides file changed: hand it to the cluster. */
void cruxd_cluster_overrides_changed(struct cruxd_cluster *cl, const struct cruxd_overrides *local);

#endif /* CRUXD_CLUSTER_H */
